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
from pgjax.results import run_metrics

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

    from pgjax.trained import evaluate

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
