"""One episode of a trained policy as a video or, for Brax, an interactive page: ``pgjax render``.

    pgjax render runs/ppo_hopper --out hopper.mp4        # Brax or Gymnasium MuJoCo; .gif too
    pgjax render runs/ppo_hopper --out hopper.html       # Brax's viewer, one self-contained file

Frames come from MuJoCo's offscreen renderer (the Brax system's MuJoCo model for Brax tasks,
the environment's ``render_mode="rgb_array"`` for Gymnasium ones, the task's own renderer for
MuJoCo Playground ones), headless through EGL (importing pgjax sets ``MUJOCO_GL=egl`` when no
display and no choice is set; set ``MUJOCO_GL=osmesa`` where only OSMesa exists); videos are
written with imageio (its ffmpeg plugin for mp4, pillow for gif). Videos are 480x360 by default,
at the task's control rate up to 30 frames per second (every k-th state of faster tasks, so
the video plays in real time).

The camera follows a body that travels (a free-floating root, or one on unlimited slide
joints: hopper, walker, cheetah, ant, humanoid, swimmer). For Brax it looks from the side, a
little above, from a distance at which the body fills about half the frame; a system fixed to
the world (pendulums, arms) is framed once, whole. Gymnasium's tasks keep their own camera
distance and angle, its look-at point moved with the body. Brax's and Gymnasium's checkered
floors are drawn in two close blue-greys without reflections, and under the body however far
it travels. MuJoCo Playground tasks are
drawn from the model's first camera, the DeepMind Control Suite's own view (tracking the body
in its locomotion tasks).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pgjax.envs import family_of
from pgjax.core.errors import ConfigError
from pgjax.core.registry import ENV_FAMILIES
from pgjax.tools.episodes import MAX_FPS, acting, episode, frame_stride
from pgjax.tools.trained import TrainedPolicy, add_plugin_options, load_policy

FORMATS = (".mp4", ".gif", ".html")
WIDTH, HEIGHT = 480, 360  # the default video size
ELEVATION = -20.0  # degrees: the camera a little above the body (Gymnasium's locomotion view)
FILL = 0.5  # the body's larger side as a fraction of the frame
# the floor of Brax's models (a black and white checker with a mirror finish) redrawn as a
# grid of two close blue-greys, the tones of the DeepMind Control Suite's floor
FLOOR = ((0.24, 0.30, 0.36), (0.32, 0.38, 0.44))
# pixels of the shadow map: MuJoCo's default, 4096, costs a software renderer (Mesa's EGL on a
# CPU) 40% of its frame rate for shadows that look the same at video sizes
SHADOW_SIZE = 1024
# the ways an environment family's episodes are drawn (``EnvFamily.renderer``): system, the
# simulator states of a Brax System (images or Brax's html viewer); frames, the rgb frames a
# gym_env renders; trajectory, the simulator states of a MuJoCo Playground episode drawn by
# the task's own renderer; states, a gymnax episode's states drawn by gymnax's visualiser
RENDERERS = ("system", "frames", "trajectory", "states")


def _brax_sys(env):
    """(brax System, control step in seconds) of a Brax task, through any wrappers."""
    base = env
    while not hasattr(base, "brax_sys") and hasattr(base, "env"):
        base = base.env
    return base.brax_sys, base.brax_dt


def travelling_body(model) -> int | None:
    """The body a camera follows: the first child of the world with a free joint or an
    unlimited slide joint (a body that travels across the floor); None for a system fixed to
    the world (pendulums on a rail, arms), framed once instead."""
    import mujoco

    for j in range(model.njnt):
        body = int(model.jnt_bodyid[j])
        if model.body_parentid[body] != 0:
            continue
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE or (
                model.jnt_type[j] == mujoco.mjtJoint.mjJNT_SLIDE and not model.jnt_limited[j]):
            return body
    return None


def _bounds(model, data, body: int | None):
    """(lower, upper) corners of the box around the geoms drawn for ``body``'s subtree (every
    body's without one), planes left out."""
    import mujoco

    keep = [g for g in range(model.ngeom) if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE
            and (body is None or model.body_rootid[model.geom_bodyid[g]] == body)]
    if not keep:
        return data.subtree_com[0] - 1.0, data.subtree_com[0] + 1.0
    box = model.geom_aabb[keep]  # [geoms, 6]: the box's centre and half sizes, geom frame
    turn = data.geom_xmat[keep].reshape(-1, 3, 3)
    centre = data.geom_xpos[keep] + np.einsum("gij,gj->gi", turn, box[:, :3])
    reach = np.einsum("gij,gj->gi", np.abs(turn), box[:, 3:])
    return (centre - reach).min(0), (centre + reach).max(0)


class FollowCamera:
    """A free MuJoCo camera (``mujoco.MjvCamera``) placed from a system's first state: looking
    at the middle of its bodies, from the side (azimuth 90: the x axis, along which the planar
    bodies move, runs across the frame) and ``ELEVATION`` above, far enough for the bodies to
    fill about ``FILL`` of the frame. ``update(data)`` moves the point it looks at with the
    travelling body's centre of mass over the floor (x, y), so the body stays in the middle of
    every frame; its height stays, so a hop or a fall does not shake the view."""

    def __init__(self, model, data, aspect: float):
        import math

        import mujoco

        self.body = travelling_body(model)
        lo, hi = _bounds(model, data, self.body)
        half = (hi - lo) / 2
        self.cam = mujoco.MjvCamera()
        self.cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        self.cam.lookat[:] = lo + half
        self.cam.azimuth = 90.0
        # a flat body (a swimmer) is seen from higher up
        self.cam.elevation = ELEVATION if half[2] > 0.25 * max(half[0], half[1]) else -50.0
        tan = math.tan(math.radians(model.vis.global_.fovy) / 2)
        self.cam.distance = max(half[2] / tan, half[0] / (tan * aspect), 0.1) / FILL
        # the look-at point's offset from the body's centre of mass (x, y), kept while it moves
        self.offset = (self.cam.lookat[:2] - data.subtree_com[self.body][:2]
                       if self.body is not None else None)

    def update(self, data):
        if self.body is not None:
            self.cam.lookat[:2] = data.subtree_com[self.body][:2] + self.offset
        return self.cam

    def keep_floor(self, model, data) -> None:
        """``floor_under`` the travelling body, if there is one."""
        if self.body is not None:
            floor_under(model, data, self.body)


def floor_under(model, data, body: int) -> list:
    """Moves each floor plane of the world (its drawn position, ``data.geom_xpos``) under
    ``body``'s centre of mass by whole periods of its texture, so a body that travels further
    than the floor's drawn size (20-40 m in Brax's and Gymnasium's models) keeps a floor
    under it and the pattern stays where it was; the world's lights (``data.light_xpos``)
    move with the body, so their shadows stay in reach. A plane is infinite for collisions
    and these positions are not recomputed by MuJoCo, so nothing else changes. Returns the
    [(array, row, previous value)] changed, to put back."""
    import mujoco

    com = data.subtree_com[body][:2]
    moved = []
    for g in range(model.ngeom):
        if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE or model.geom_bodyid[g] != 0:
            continue
        mat = model.geom_matid[g]
        if mat >= 0 and model.mat_texuniform[mat]:  # texrepeat per metre
            tile = 1.0 / np.maximum(model.mat_texrepeat[mat], 1e-6)
        elif mat >= 0:  # texrepeat over the plane's length, 2 x size
            tile = 2 * model.geom_size[g][:2] / np.maximum(model.mat_texrepeat[mat], 1e-6)
        else:
            tile = np.ones(2)
        moved.append((data.geom_xpos, g, data.geom_xpos[g].copy()))
        data.geom_xpos[g][:2] = model.geom_pos[g][:2] + np.round(com / tile) * tile
    for light in range(model.nlight):
        if model.light_bodyid[light] == 0:
            moved.append((data.light_xpos, light, data.light_xpos[light].copy()))
            data.light_xpos[light][:2] = model.light_pos[light][:2] + com
    return moved


def soft_floor(model, copy: bool = True):
    """``model`` (a copy unless ``copy`` is False) with its floor texture (the texture of
    each plane's material) redrawn in ``FLOOR``'s two tones, its pattern kept, and the
    floor's mirror finish removed."""
    import copy as copy_

    import mujoco

    model = copy_.deepcopy(model) if copy else model
    role = mujoco.mjtTextureRole.mjTEXROLE_RGB
    for g in range(model.ngeom):
        mat = model.geom_matid[g]
        if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE or mat < 0:
            continue
        model.mat_reflectance[mat] = 0.0
        tex = model.mat_texid[mat, role] if model.mat_texid.ndim == 2 else model.mat_texid[mat]
        if tex < 0 or model.tex_nchannel[tex] < 3:
            continue
        n = int(model.tex_height[tex] * model.tex_width[tex] * model.tex_nchannel[tex])
        start = int(model.tex_adr[tex])
        pixels = model.tex_data[start:start + n].reshape(-1, int(model.tex_nchannel[tex]))
        light = pixels[:, :3].astype(np.float32).mean(1)
        span = max(float(light.max() - light.min()), 1.0)
        t = ((light - light.min()) / span)[:, None]
        dark, bright = (np.array(c, np.float32) for c in FLOOR)
        pixels[:, :3] = np.round(255 * (dark + t * (bright - dark))).astype(np.uint8)
        model.tex_data[start:start + n] = pixels.reshape(-1)
    return model


def system_frames(sys_, states, width: int, height: int) -> list:
    """RGB frames [height, width, 3] of a Brax system's simulator ``states`` (``q``, ``qd``),
    drawn by MuJoCo's renderer with a ``FollowCamera`` over a ``soft_floor``, without
    reflections, with a ``SHADOW_SIZE`` shadow map."""
    import mujoco

    model = soft_floor(sys_.mj_model)
    model.vis.quality.shadowsize = min(model.vis.quality.shadowsize, SHADOW_SIZE)
    data = mujoco.MjData(model)
    renderer = mujoco.Renderer(model, height=height, width=width)
    renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
    camera, frames = None, []
    try:
        for state in states:
            data.qpos, data.qvel = state.q, state.qd
            if hasattr(state, "mocap_pos") and model.nmocap:
                data.mocap_pos, data.mocap_quat = state.mocap_pos, state.mocap_quat
            mujoco.mj_forward(model, data)
            camera = camera or FollowCamera(model, data, width / height)
            camera.keep_floor(model, data)
            renderer.update_scene(data, camera=camera.update(data))
            frames.append(renderer.render())
    finally:
        renderer.close()
    return frames


def brax_episode(policy: TrainedPolicy, seed: int = 0, stochastic: bool = False,
                 max_steps: int | None = None):
    """(brax System, seconds per step, the simulator state at every step of one episode, its
    return)."""
    env, states, total = episode(policy, policy.cfg.brax, lambda s: s.sim.pipeline_state,
                                  seed, stochastic, max_steps)
    sys_, dt = _brax_sys(env)
    return sys_, dt, states, total


def trajectory_episode(policy: TrainedPolicy, width: int, height: int, seed: int = 0,
                       stochastic: bool = False, max_steps: int | None = None, *,
                       fps: int | None = None):
    """(RGB frames of one episode of a MuJoCo Playground task, its return, frames per
    second): the episode stepped as in training, every k-th of its simulator states
    (``frame_stride``) drawn by the task's renderer from the model's first camera (the
    DeepMind Control Suite's view; the renderer's free camera where the model has none)."""
    from pgjax.envs.playground_env import load

    cfg = policy.cfg
    raw, _ = load(cfg.env.partition(":")[2], cfg.playground.impl)
    _, states, total = episode(policy, cfg.playground, lambda s: s.sim, seed, stochastic,
                                max_steps)
    stride, fps = frame_stride(raw.dt * cfg.playground.action_repeat, fps)
    return trajectory_frames(raw, states[::stride], width, height), total, fps


def trajectory_frames(raw, states, width: int, height: int) -> list:
    """RGB frames of a MuJoCo Playground task's simulator ``states`` (``state.data``), drawn
    as the task's own renderer draws them (``mujoco_playground``'s ``render_array``, without
    its progress bar), from the model's first camera (the free camera where it has none)."""
    import mujoco

    model = raw.mj_model
    data = mujoco.MjData(model)
    renderer = mujoco.Renderer(model, height=height, width=width)
    frames = []
    try:
        for state in states:
            d = state.data
            data.qpos, data.qvel = d.qpos, d.qvel
            data.mocap_pos, data.mocap_quat = d.mocap_pos, d.mocap_quat
            data.xfrc_applied = d.xfrc_applied
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera=0 if model.ncam else -1)
            frames.append(renderer.render())
    finally:
        renderer.close()
    return frames


def _gym_draw(env):
    """``env.render`` of a Gymnasium MuJoCo task over a ``soft_floor`` (the render-only
    environment's own model changed), its camera's look-at point moved with the travelling
    body's centre of mass (``travelling_body``), and the floor drawn under it
    (``floor_under``, put back after each frame): Gymnasium's ``rgb_array`` camera stays
    where the episode started. The camera's distance, angle and height are the task's."""
    import mujoco

    u = env.unwrapped
    renderer, model = getattr(u, "mujoco_renderer", None), getattr(u, "model", None)
    if renderer is None or model is None:
        return env.render
    soft_floor(model, copy=False)  # before the renderer uploads the textures
    model.vis.quality.shadowsize = min(model.vis.quality.shadowsize, SHADOW_SIZE)
    body, ready = travelling_body(model), []

    def follow():
        if body is None:
            return []
        renderer.viewer.cam.lookat[:2] = u.data.subtree_com[body][:2]
        return floor_under(model, u.data, body)

    def draw():
        if not ready:  # the first call makes the viewer
            env.render()
            renderer.viewer.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
            ready.append(True)
        moved = follow()
        try:
            return env.render()
        finally:  # the floor and lights back where the simulation keeps them
            for array, row, value in moved:
                array[row] = value
    return draw


def gym_episode(policy: TrainedPolicy, width: int, height: int, seed: int = 0,
                stochastic: bool = False, max_steps: int | None = None, *,
                fps: int | None = None):
    """(RGB frames of one episode of the Gymnasium task, its return, frames per second):
    every k-th step drawn (``frame_stride``, from the task's ``dt``; 30 frames per second
    where it has none), the camera following a travelling body (``_gym_draw``)."""
    import gymnasium

    cfg = policy.cfg
    name = cfg.env.partition(":")[2]
    kw = {"max_episode_steps": cfg.episode_length} if cfg.episode_length else {}
    kw.update(cfg.gym.make_kwargs())
    try:
        env = gymnasium.make(name, render_mode="rgb_array", width=width, height=height, **kw)
    except TypeError:  # environments without a size option render at their own
        env = gymnasium.make(name, render_mode="rgb_array", **kw)
    if not isinstance(env.observation_space, gymnasium.spaces.Box):
        raise ConfigError(f"pgjax render draws Gymnasium tasks with Box observations (MuJoCo); "
                          f"{cfg.env} has {type(env.observation_space).__name__}")
    index = None
    if cfg.observe != "full":
        from pgjax.envs.pomdp import _layout

        index = np.array(getattr(_layout(cfg.env), cfg.observe), np.int64)
    obs, _ = env.reset(seed=seed)
    dt = getattr(env.unwrapped, "dt", None)
    stride, fps = frame_stride(dt, fps) if dt else (1, fps or MAX_FPS)
    draw = _gym_draw(env)
    frames, total, act = [draw()], 0.0, acting(policy, stochastic, seed)
    box = isinstance(env.action_space, gymnasium.spaces.Box)
    try:
        for t in range(max_steps or 10**9):
            x = np.asarray(obs, np.float32).reshape(1, -1)
            action = np.asarray(act(x if index is None else x[:, index], t))[0]
            if box:
                action = np.clip(action, env.action_space.low, env.action_space.high)
            else:
                action = int(action)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            if (t + 1) % stride == 0:
                frames.append(draw())
            if terminated or truncated:
                break
    finally:
        env.close()
    return frames, total, fps


def write_video(frames, out: Path, fps: int) -> None:
    import warnings

    import imageio.v2 as imageio

    if out.suffix == ".gif":
        imageio.mimwrite(out, frames, duration=1000.0 / fps, loop=0)
        return
    with warnings.catch_warnings():  # the ffmpeg writer forks to exec its binary at once
        warnings.filterwarnings("ignore", message="os.fork.. was called")
        imageio.mimwrite(out, frames, fps=fps, macro_block_size=1)


def render(path, out, run: str | None = None, seed: int = 0, stochastic: bool = False,
           width: int = WIDTH, height: int = HEIGHT, fps: int | None = None,
           max_steps: int | None = None, trust_plugins: bool = False, plugins=(),
           allow_changed_plugins: bool = False) -> dict:
    """Write one episode of a run's trained policy to ``out`` (.mp4, .gif, or .html for
    Brax); returns {"out", "frames", "return"}."""
    out = Path(out)
    if out.suffix not in FORMATS:
        raise ConfigError(f"unknown output format '{out.suffix}'; pass --out ending in "
                          f"{', '.join(FORMATS)} (e.g. --out {out.with_suffix('.mp4')})")
    for name, size, default in (("--width", width, WIDTH), ("--height", height, HEIGHT)):
        if size < 16:
            raise ConfigError(f"{name} must be >= 16 pixels, got {size}; pass a larger "
                              f"{name} (e.g. {name} {default})")
    policy = load_policy(path, run, trust_plugins, plugins, allow_changed_plugins)
    renderer = family_of(policy.cfg.env)[0].renderer
    if renderer not in RENDERERS:
        drawn = ", ".join(f"{p}:" for p, f in ENV_FAMILIES.items() if f.renderer in RENDERERS)
        raise ConfigError(f"pgjax render draws {drawn} tasks; {policy.cfg.env} has no "
                          f"renderer (evaluate it with pgjax eval)")
    if out.suffix == ".html" and renderer != "system":
        raise ConfigError("an .html page is Brax's viewer; for this task pass --out with .mp4 "
                          "or .gif")
    out.parent.mkdir(parents=True, exist_ok=True)
    if renderer == "system":
        sys_, dt, states, total = brax_episode(policy, seed, stochastic, max_steps)
        if out.suffix == ".html":
            from pgjax.core.viewer import brax_page

            out.write_text(brax_page(sys_, states))
            return {"out": out, "frames": len(states), "return": total}
        # real time: every state at the control rate, or every k-th when that exceeds MAX_FPS
        stride, fps = frame_stride(dt, fps)
        frames = system_frames(sys_, states[::stride], width, height)
    elif renderer == "trajectory":
        frames, total, fps = trajectory_episode(policy, width, height, seed, stochastic,
                                                max_steps, fps=fps)
    elif renderer == "states":
        from pgjax.tools.render_gymnax import gymnax_episode

        frames, total, fps = gymnax_episode(policy, width, height, seed, stochastic,
                                            max_steps, fps=fps)
    else:
        frames, total, fps = gym_episode(policy, width, height, seed, stochastic, max_steps,
                                         fps=fps)
    write_video(frames, out, fps)
    return {"out": out, "frames": len(frames), "return": total}


def render_main(argv: list[str]) -> int:
    from pgjax.core.arguments import ArgumentParser

    p = ArgumentParser("pgjax render", __doc__)
    p.add_argument("path", help="a run directory (its first finished run) or one runs/<id>")
    p.add_argument("--out", required=True, help="file to write: .mp4, .gif or (Brax) .html")
    p.add_argument("--run", default=None, help="the run id to render (default: the first)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episode's reset")
    p.add_argument("--stochastic", action="store_true", help="sample actions (default: mode)")
    p.add_argument("--width", type=int, default=WIDTH,
                   help="frame width in pixels (default %(default)s)")
    p.add_argument("--height", type=int, default=HEIGHT,
                   help="frame height in pixels (default %(default)s)")
    p.add_argument("--fps", type=int, default=None,
                   help=f"default: the task's control rate, at most {MAX_FPS}")
    p.add_argument("--max-steps", type=int, default=None, help="stop the episode earlier")
    add_plugin_options(p)
    a = p.parse_args(argv)
    try:
        info = render(a.path, a.out, a.run, a.seed, a.stochastic, a.width, a.height, a.fps,
                      a.max_steps, a.trust_plugins, a.plugins, a.allow_changed_plugins)
    except ConfigError as e:
        print(f"pgjax render: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {info['out']}: {info['frames']} frames, episode return {info['return']:.1f}")
    return 0
