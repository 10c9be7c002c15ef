"""`pgjax render`: videos of one episode for Brax and Gymnasium MuJoCo tasks (offscreen MuJoCo
through EGL, imageio's writers), and Brax's viewer as one self-contained page."""
from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess

import imageio.v2 as imageio
import pytest

from pgjax import TrainConfig, run
from pgjax.algos import PPOConfig
from pgjax.cli import main
from pgjax.analysis.results import run_metrics

TINY = TrainConfig(num_envs=8, rollout_len=16, eval_every=2, eval_envs=2, steps=8 * 16 * 2,
                   quiet=True, checkpoint_every=0, ppo=PPOConfig(epochs=1, minibatches=4))


@pytest.fixture(scope="module")
def brax_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    return run(dataclasses.replace(TINY, env="brax:inverted_pendulum", out=str(out),
                                   name="ip")).root


@pytest.mark.slow
def test_brax_episode_video_mp4_and_gif(brax_run, tmp_path, capsys):
    assert main(["render", str(brax_run), "--out", str(tmp_path / "ip.mp4"), "--width", "96",
                 "--height", "64", "--max-steps", "40"]) == 0
    said = capsys.readouterr().out
    frames = int(re.search(r"(\d+) frames", said).group(1))
    reader = imageio.get_reader(tmp_path / "ip.mp4")
    video = [f for f in reader]
    assert len(video) == frames > 1 and video[0].shape == (64, 96, 3)
    assert reader.get_meta_data()["fps"] == 25  # the task's control rate, 0.04 s per step
    assert max(f.std() for f in video) > 5  # drawn, not blank
    assert any(not (f == video[0]).all() for f in video[1:])  # it moves
    assert main(["render", str(brax_run), "--out", str(tmp_path / "ip.gif"), "--width", "48",
                 "--height", "32", "--max-steps", "5"]) == 0
    assert len(imageio.mimread(tmp_path / "ip.gif")) >= 2


@pytest.mark.slow
def test_gymnasium_mujoco_episode_video_and_eval(tmp_path, capsys):
    import numpy as np

    from pgjax.tools.trained import evaluate

    records = run(dataclasses.replace(TINY, env="gym:HalfCheetah-v5", out=str(tmp_path),
                                      name="ghc", num_envs=2, rollout_len=64, steps=2 * 64 * 2,
                                      episode_length=100, ppo=PPOConfig(epochs=1,
                                                                        minibatches=2)))
    capsys.readouterr()
    assert main(["render", str(records.root), "--out", str(tmp_path / "ghc.mp4"), "--width",
                 "64", "--height", "48", "--max-steps", "30"]) == 0
    frames = int(re.search(r"(\d+) frames", capsys.readouterr().out).group(1))
    video = imageio.mimread(tmp_path / "ghc.mp4")
    assert len(video) == frames == 31  # the first observation and 30 steps (no termination)
    assert video[0].shape == (48, 64, 3) and video[0].std() > 5
    assert any(not (f == video[0]).all() for f in video[1:])
    last = run_metrics(records.run_dirs[0])["eval_return"].dropna().iloc[-1]
    np.testing.assert_allclose(evaluate(records.root, final_keys=True)["return_mean"], [last],
                               rtol=1e-5)


@pytest.mark.slow
def test_brax_viewer_page_is_self_contained(brax_run, tmp_path):
    out = tmp_path / "ip.html"
    assert main(["render", str(brax_run), "--out", str(out), "--max-steps", "20"]) == 0
    page = out.read_text()
    assert not re.findall(r'(?:src|href)="https?://', page)  # nothing from a CDN
    imports = json.loads(re.search(r'<script type="importmap">(.*?)</script>', page,
                                   re.S).group(1))["imports"]
    import base64

    modules = {k: base64.b64decode(v.split(",", 1)[1]).decode() for k, v in imports.items()}
    for name, source in modules.items():  # every specifier a module imports is in the map
        for spec in re.findall(r"""\bfrom\s*['"]([^'"]+)['"]""", source):
            assert spec in imports, (name, spec)
    assert "pako" in page and "var system" in page
    node = shutil.which("node")
    if node:  # each inlined module parses as an ES module
        for name, source in modules.items():
            path = tmp_path / f"{abs(hash(name))}.mjs"
            path.write_text(source)
            check = subprocess.run([node, "--check", str(path)], capture_output=True, text=True)
            assert check.returncode == 0, (name, check.stderr[-500:])


@pytest.mark.slow
def test_render_refuses_what_it_cannot_draw(brax_run, tmp_path, capsys):
    assert main(["render", str(brax_run), "--out", str(tmp_path / "x.avi")]) == 2
    assert "unknown output format '.avi'" in capsys.readouterr().err
    root = run(dataclasses.replace(TINY, env="jax:cartpole", out=str(tmp_path), name="cp",
                                   episode_length=50)).root
    assert main(["render", str(root), "--out", str(tmp_path / "cp.mp4")]) == 2
    err = capsys.readouterr().err.strip()
    assert "has no renderer" in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_brax_viewer_page_loads_offline_in_a_headless_browser(brax_run, tmp_path):
    """The page, opened from disk in headless Chromium with every network request refused,
    runs without a script error and draws the scene (a screenshot that is not one colour)."""
    import numpy as np

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    assert browser, "this test needs Chromium: apt-get install chromium (as .ci/run does)"
    page = tmp_path / "ip.html"
    assert main(["render", str(brax_run), "--out", str(page), "--max-steps", "20"]) == 0
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
         "--enable-unsafe-swiftshader", "--proxy-server=127.0.0.1:9",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--enable-logging=stderr", "--v=1",
         "--window-size=640,480", "--virtual-time-budget=5000", f"--screenshot={shot}",
         page.as_uri()], capture_output=True, text=True, timeout=120)
    # what the page logs (the browser's own background requests fail too, and are not the
    # page's): script errors, modules that did not resolve, resources that did not load
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    errors = [line for line in console if "Uncaught" in line or "Failed to" in line
              or "net::ERR" in line or "Error" in line.split('"', 1)[-1][:40]]
    assert not errors, errors[:5]
    image = imageio.imread(shot)[..., :3].reshape(-1, 3)
    background = np.median(image, axis=0)
    drawn = (np.abs(image.astype(float) - background).sum(1) > 30).mean()
    assert 0.005 < drawn < 0.9, drawn  # the body and the rail, on the viewer's background


# -- the camera: it follows a body that travels, over a soft floor ---------------------------
def _brax_model(name):
    """A Brax task's MuJoCo model, read from Brax's own asset file (no Brax import)."""
    import importlib.util
    from pathlib import Path

    import mujoco

    brax_dir = Path(importlib.util.find_spec("brax").submodule_search_locations[0])
    return mujoco.MjModel.from_xml_path(str(brax_dir / "envs" / "assets" / f"{name}.xml"))


def _shifted(model, xs):
    """Simulator states of ``model`` at its initial pose moved by each x along the floor."""
    from types import SimpleNamespace

    import numpy as np

    states = []
    for x in xs:
        q = np.array(model.qpos0)
        q[0] += x  # rootx (a slide joint) or the free joint's x
        states.append(SimpleNamespace(q=q, qd=np.zeros(model.nv)))
    return states


def _body_columns(frame):
    """The horizontal centre of the body's pixels as a fraction of the width (the bodies are
    brown, R well above B; the floors, skies and rails are grey or blue), and their count."""
    import numpy as np

    rgb = frame.astype(int)
    body = (rgb[..., 0] > rgb[..., 2] + 25) & (rgb[..., 0] > 60)
    cols = np.nonzero(body)[1]
    return (cols.mean() / frame.shape[1] if len(cols) else float("nan")), len(cols)


XS = (0.0, 1.5, 3.0, 4.5)  # metres along the floor, beyond a fixed camera's view
FAR = 60.3  # beyond the end of the floor as the models draw it (20-40 m)


def _floor_below(frame):
    """Whether the bottom quarter of a frame shows the floor: the soft floor's blue-greys
    (where the floor ends, the models show their sky's black lower half)."""
    bottom = frame[-frame.shape[0] // 4:].reshape(-1, 3).astype(int)
    return bool((bottom.mean(0) > 40).all() and (bottom[:, 2] > bottom[:, 0]).mean() > 0.9)


def test_brax_frames_follow_a_travelling_body():
    from types import SimpleNamespace

    import mujoco
    import numpy as np

    from pgjax.tools.render import FollowCamera, system_frames, travelling_body

    model = _brax_model("hopper")
    assert travelling_body(model) == 1  # the torso, on rootx/rootz/rooty
    frames = system_frames(SimpleNamespace(mj_model=model), _shifted(model, XS + (FAR,)),
                           160, 120)
    assert [f.shape for f in frames] == [(120, 160, 3)] * (len(XS) + 1)
    for frame in frames:
        centre, pixels = _body_columns(frame)
        assert pixels > 30 and abs(centre - 0.5) < 0.1, (centre, pixels)
        assert _floor_below(frame)  # the floor is drawn under the body, however far it went
    # the camera's look-at point moves with the body's centre of mass, its height stays
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera, lookat = FollowCamera(model, data, 4 / 3), []
    for state in _shifted(model, XS):
        data.qpos = state.q
        mujoco.mj_forward(model, data)
        lookat.append(camera.update(data).lookat.copy())
    np.testing.assert_allclose(np.array(lookat) - lookat[0], [[x, 0, 0] for x in XS],
                               atol=1e-6)
    # the free camera Brax's image module draws from (camera -1) loses the body: the check
    # above fails without following
    renderer = mujoco.Renderer(model, 120, 160)
    seen = []
    for state in _shifted(model, XS):
        data.qpos = state.q
        mujoco.mj_forward(model, data)
        renderer.update_scene(data, camera=-1)
        seen.append(_body_columns(renderer.render()))
    renderer.close()
    assert any(not n or abs(c - 0.5) > 0.2 for c, n in seen), seen


def test_a_body_fixed_to_the_world_is_framed_once():
    import mujoco
    import numpy as np

    from pgjax.tools.render import FollowCamera, travelling_body

    model = _brax_model("inverted_pendulum")  # the cart's slide joint is limited
    assert travelling_body(model) is None
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    camera = FollowCamera(model, data, 4 / 3)
    before = camera.cam.lookat.copy()
    data.qpos[0] = 0.8
    mujoco.mj_forward(model, data)
    np.testing.assert_array_equal(camera.update(data).lookat, before)


def test_soft_floor_keeps_the_pattern_in_close_tones_and_leaves_the_model():
    import mujoco
    import numpy as np

    from pgjax.tools.render import soft_floor

    model = _brax_model("hopper")
    before = model.tex_data.copy()
    soft = soft_floor(model)
    np.testing.assert_array_equal(model.tex_data, before)
    mat = model.geom_matid[0]  # the floor plane's material and its texture
    tex = model.mat_texid[mat, mujoco.mjtTextureRole.mjTEXROLE_RGB]
    n = model.tex_height[tex] * model.tex_width[tex] * model.tex_nchannel[tex]
    old, new = (m.tex_data[model.tex_adr[tex]:model.tex_adr[tex] + n].reshape(-1, 3)
                .astype(int) for m in (model, soft))
    assert np.ptp(old.mean(1)) > 150 and 0 < np.ptp(new.mean(1)) < 40
    np.testing.assert_array_equal(old.mean(1) > old.mean(), new.mean(1) > new.mean())
    assert soft.mat_reflectance[mat] == 0 and model.mat_reflectance[mat] > 0


@pytest.mark.parametrize("dt, fps, expected", [(0.008, None, (5, 25)), (0.04, None, (1, 25)),
                                               (0.01, None, (4, 25)), (0.05, None, (1, 20)),
                                               (0.008, 60, (1, 60))])
def test_frame_stride_plays_in_real_time_at_most_30_fps(dt, fps, expected):
    from pgjax.tools.render import frame_stride

    assert frame_stride(dt, fps) == expected


def test_gymnasium_frames_follow_a_travelling_body():
    import gymnasium

    from pgjax.tools.render import _gym_draw

    env = gymnasium.make("Hopper-v5", render_mode="rgb_array", width=160, height=120)
    env.reset(seed=0)
    u = env.unwrapped
    draw = _gym_draw(env)
    try:
        for x in XS + (FAR,):
            qpos = u.data.qpos.copy()
            qpos[0] = x
            u.set_state(qpos, u.data.qvel)
            floor = u.data.geom_xpos[0].copy()
            frame = draw()
            centre, pixels = _body_columns(frame)
            assert pixels > 50 and abs(centre - 0.5) < 0.1, (x, centre, pixels)
            assert _floor_below(frame)
            assert (u.data.geom_xpos[0] == floor).all()  # the simulation's floor untouched
    finally:
        env.close()


def test_playground_frames_come_from_the_models_tracking_camera():
    from types import SimpleNamespace

    import numpy as np

    from pgjax.envs.playground_env import load
    from pgjax.tools.render import trajectory_frames

    raw, _ = load("CheetahRun")
    m = raw.mj_model
    states = []
    for x in XS:
        q = np.array(m.qpos0)
        q[0] += x
        states.append(SimpleNamespace(data=SimpleNamespace(
            qpos=q, qvel=np.zeros(m.nv), mocap_pos=np.zeros((m.nmocap, 3)),
            mocap_quat=np.zeros((m.nmocap, 4)), xfrc_applied=np.zeros((m.nbody, 6)))))
    for frame in trajectory_frames(raw, states, 160, 120):
        centre, pixels = _body_columns(frame)
        assert pixels > 50 and abs(centre - 0.5) < 0.15, (centre, pixels)
