"""Adapter from any ``brax.envs`` environment, on any backend, to the pgjax env protocol.

The Brax environment is used raw (none of Brax's wrappers): batching, the time limit,
autoreset with the real final observation, and episode statistics come from ``VectorEnv``.
Actions live in [-1, 1] (Brax's normalised actuator range) and are clipped there when sent.
"""
from __future__ import annotations

import dataclasses
import functools
import warnings

from pgjax.core.errors import ConfigError, check_choice, did_you_mean
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv

BACKENDS = ("generalized", "positional", "spring", "mjx")


@dataclasses.dataclass(frozen=True)
class BraxOptions:
    """Settings of the brax: and mabrax: families (--brax.<field>)."""

    backend: str = "generalized"
    """Brax physics backend: generalized, positional, spring or mjx."""

    def validate(self, cfg=None) -> None:
        check_choice(self.backend, BACKENDS, "Brax backend", "--brax.backend")


# What MuJoCo prints on import when its optional GPU backend (warp) is not installed, as
# pgjax's CPU and CUDA installs are: expected, so kept out of pgjax's output.
_WARP_ABSENT = ("Failed to import warp: No module named 'warp'",
                "Failed to import mujoco_warp: No module named 'warp'")


def import_brax():
    """``brax`` imported (lazily: it is slow) with only the two lines above filtered out of
    what the import prints; any other output passes through unchanged."""
    import contextlib
    import io
    import sys

    if "brax.envs" not in sys.modules:
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                import brax.envs  # noqa: F401
                import brax.io.mjcf  # noqa: F401
        finally:
            sys.stdout.write("".join(line for line in buf.getvalue().splitlines(True)
                                     if line.strip() not in _WARP_ABSENT))
    import brax

    return brax


def brax_env_names() -> list[str]:
    return sorted(import_brax().envs._envs.keys())


@functools.lru_cache(maxsize=None)
def brax_environment(name: str, backend: str = "generalized"):
    """Brax's environment ``name`` on ``backend``, built once per process (a training and an
    evaluation env, or a sweep's groups, share it), with its reset and step jitted, so each is
    traced from Python once: every later use under ``vmap``, at any number of envs, batches
    the traced program instead of tracing Brax's pipeline again (seconds per trace). Returns
    (env, reset, step, observation size)."""
    import jax

    brax_envs = import_brax().envs
    with warnings.catch_warnings():
        # Brax warns on every environment build that it is in maintenance mode; pgjax uses its
        # environments only, and says so in its docs.
        warnings.filterwarnings("ignore", message="Brax System, piplines")
        env = brax_envs.get_environment(name, backend=backend)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    # the observation size by tracing reset abstractly: Brax's ``observation_size`` runs an
    # un-jitted reset op by op, which costs seconds per environment build
    obs_size = jax.eval_shape(reset, jax.random.PRNGKey(0)).obs.shape[-1]
    return env, reset, step, obs_size


def make_brax_env(name: str, num_envs: int, episode_length: int = 1000,
                  backend: str = "generalized") -> VectorEnv:
    known = brax_env_names()
    if name not in known:
        raise ConfigError(f"unknown Brax environment '{name}'"
                          f"{did_you_mean('brax:' + name, ['brax:' + k for k in known])}; "
                          f"use one of: "
                          f"{', '.join('brax:' + k for k in known)}")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown Brax backend '{backend}'; pass --brax.backend with one of: "
                          f"{', '.join(BACKENDS)}")
    env, reset, step, obs_size = brax_environment(name, backend)

    def reset1(key):
        s = reset(key)
        return s, s.obs

    def step1(s, action):
        s = step(s, action)
        return s, s.obs, s.reward, s.done > 0.5

    spec = EnvSpec(name=f"brax:{name}", obs_shape=(obs_size,),
                   action=ActionSpace("box", env.action_size, -1.0, 1.0),
                   num_envs=num_envs, max_episode_steps=episode_length)
    vec = VectorEnv(spec, reset1, step1)
    vec.brax_sys, vec.brax_dt = env.sys, float(env.dt)  # for drawing states (pgjax render)
    return vec
