"""One episode of a trained policy as a video or, for Brax, an interactive page: ``pgjax render``.

    pgjax render runs/ppo_hopper --out hopper.mp4        # Brax or Gymnasium MuJoCo; .gif too
    pgjax render runs/ppo_hopper --out hopper.html       # Brax's viewer, one self-contained file

Frames come from MuJoCo's offscreen renderer (Brax's ``brax.io.image`` for Brax tasks, the
environment's ``render_mode="rgb_array"`` for Gymnasium ones), headless through EGL (importing
pgjax sets ``MUJOCO_GL=egl`` when no display and no choice is set; set ``MUJOCO_GL=osmesa``
where only OSMesa exists); videos are written with imageio (its ffmpeg
plugin for mp4, pillow for gif).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import jax
import numpy as np

from pgjax.envs import family_of
from pgjax.errors import ConfigError
from pgjax.registry import ENV_FAMILIES
from pgjax.trained import TrainedPolicy, add_plugin_options, load_policy

FORMATS = (".mp4", ".gif", ".html")
MAX_FPS = 60  # Brax tasks step at 50-125 Hz: faster ones are subsampled to real time
# the ways an environment family's episodes are drawn (``EnvFamily.renderer``): system, the
# simulator states of a Brax System (images or Brax's html viewer); frames, the rgb frames a
# gym_env renders; trajectory, the simulator states of a MuJoCo Playground episode drawn by
# the task's own renderer
RENDERERS = ("system", "frames", "trajectory")


def _brax_sys(env):
    """(brax System, control step in seconds) of a Brax task, through any wrappers."""
    base = env
    while not hasattr(base, "brax_sys") and hasattr(base, "env"):
        base = base.env
    return base.brax_sys, base.brax_dt


def _actions(policy: TrainedPolicy, stochastic: bool, seed: int):
    """A function obs [1, ...] -> task action [1, ...], carrying the policy's memory."""
    key, carry = jax.random.PRNGKey(seed), [None]

    def act(obs, t):
        if stochastic:
            action, carry[0] = policy.act(obs, jax.random.fold_in(key, t), carry[0])
        else:
            action, carry[0] = policy.mode(obs, carry[0])
        return action
    return act


def _episode(policy: TrainedPolicy, options, sim, seed: int, stochastic: bool,
             max_steps: int | None):
    """One episode of the run's task stepped as in training (one environment): (the env,
    ``sim(state)`` of every state until the episode ends, its return)."""
    from pgjax.envs import make_env

    cfg = policy.cfg
    env = make_env(cfg.env, 1, cfg.episode_length, options, observe=cfg.observe)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, obs = reset(jax.random.PRNGKey(seed))
    first = lambda s: jax.tree.map(lambda x: np.asarray(x[0]), sim(s))
    states, total, act = [first(state)], 0.0, _actions(policy, stochastic, seed)
    for t in range(max_steps or env.spec.max_episode_steps):
        state, ts = step(state, act(obs, t))
        total += float(ts.reward[0])
        if bool(ts.done[0]):
            break  # the next state is a new episode's first
        states.append(first(state))
        obs = ts.obs
    return env, states, total


def brax_episode(policy: TrainedPolicy, seed: int = 0, stochastic: bool = False,
                 max_steps: int | None = None):
    """(brax System, seconds per step, the simulator state at every step of one episode, its
    return)."""
    env, states, total = _episode(policy, policy.cfg.brax, lambda s: s.sim.pipeline_state,
                                  seed, stochastic, max_steps)
    sys_, dt = _brax_sys(env)
    return sys_, dt, states, total


def trajectory_episode(policy: TrainedPolicy, width: int, height: int, seed: int = 0,
                       stochastic: bool = False, max_steps: int | None = None):
    """(RGB frames of one episode of a MuJoCo Playground task, its return, seconds per
    step): the episode stepped as in training, its simulator states drawn by the task."""
    from pgjax.envs.playground_env import load

    cfg = policy.cfg
    raw, _ = load(cfg.env.partition(":")[2], cfg.playground.impl)
    _, states, total = _episode(policy, cfg.playground, lambda s: s.sim, seed, stochastic,
                                max_steps)
    quiet = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"  # its renderer's progress bar
    try:
        frames = raw.render(states, height=height, width=width)
    finally:
        if quiet is None:
            os.environ.pop("TQDM_DISABLE", None)
    return frames, total, raw.dt * cfg.playground.action_repeat


def gym_episode(policy: TrainedPolicy, width: int, height: int, seed: int = 0,
                stochastic: bool = False, max_steps: int | None = None):
    """(RGB frames of one episode of the Gymnasium task, its return)."""
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
    frames, total, act = [env.render()], 0.0, _actions(policy, stochastic, seed)
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
            frames.append(env.render())
            if terminated or truncated:
                break
    finally:
        env.close()
    return frames, total


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
           width: int = 320, height: int = 240, fps: int | None = None,
           max_steps: int | None = None, trust_plugins: bool = False, plugins=(),
           allow_changed_plugins: bool = False) -> dict:
    """Write one episode of a run's trained policy to ``out`` (.mp4, .gif, or .html for
    Brax); returns {"out", "frames", "return"}."""
    out = Path(out)
    if out.suffix not in FORMATS:
        raise ConfigError(f"unknown output format '{out.suffix}'; pass --out ending in "
                          f"{', '.join(FORMATS)} (e.g. --out {out.with_suffix('.mp4')})")
    for name, size, default in (("--width", width, 320), ("--height", height, 240)):
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
            from pgjax.viewer import brax_page

            out.write_text(brax_page(sys_, states))
            return {"out": out, "frames": len(states), "return": total}
        from brax.io import image

        # real time: every state at the control rate, or every k-th when that exceeds fps
        stride = max(1, round(1.0 / (dt * (fps or MAX_FPS)))) if not fps else 1
        fps = fps or round(1.0 / (dt * stride))
        frames = image.render_array(sys_, states[::stride], height, width)
    elif renderer == "trajectory":
        frames, total, dt = trajectory_episode(policy, width, height, seed, stochastic,
                                               max_steps)
        fps = fps or min(MAX_FPS, round(1.0 / dt))
    else:
        frames, total = gym_episode(policy, width, height, seed, stochastic, max_steps)
        fps = fps or 30
    write_video(frames, out, fps)
    return {"out": out, "frames": len(frames), "return": total}


def render_main(argv: list[str]) -> int:
    from pgjax.cli import ArgumentParser

    p = ArgumentParser("pgjax render", __doc__)
    p.add_argument("path", help="a run directory (its first finished run) or one runs/<id>")
    p.add_argument("--out", required=True, help="file to write: .mp4, .gif or (Brax) .html")
    p.add_argument("--run", default=None, help="the run id to render (default: the first)")
    p.add_argument("--seed", type=int, default=0, help="seed of the episode's reset")
    p.add_argument("--stochastic", action="store_true", help="sample actions (default: mode)")
    p.add_argument("--width", type=int, default=320,
                   help="frame width in pixels (default %(default)s)")
    p.add_argument("--height", type=int, default=240,
                   help="frame height in pixels (default %(default)s)")
    p.add_argument("--fps", type=int, default=None, help="default: the task's control rate")
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
