"""Adapter from any ``brax.envs`` environment, on any backend, to the pgjax env protocol.

The Brax environment is used raw (none of Brax's wrappers): batching, the time limit,
autoreset with the real final observation, and episode statistics come from ``VectorEnv``.
Actions live in [-1, 1] (Brax's normalised actuator range) and are clipped there when sent.
"""
from __future__ import annotations

import warnings

from pgjax.errors import ConfigError
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv

BACKENDS = ("generalized", "positional", "spring", "mjx")


def brax_env_names() -> list[str]:
    from brax import envs as brax_envs  # lazy: importing brax is slow

    return sorted(brax_envs._envs.keys())


def make_brax_env(name: str, num_envs: int, episode_length: int = 1000,
                  backend: str = "generalized") -> VectorEnv:
    known = brax_env_names()
    if name not in known:
        raise ConfigError(f"unknown Brax environment '{name}'; use one of: "
                          f"{', '.join('brax:' + k for k in known)}")
    if backend not in BACKENDS:
        raise ConfigError(f"unknown Brax backend '{backend}'; pass --backend with one of: "
                          f"{', '.join(BACKENDS)}")
    from brax import envs as brax_envs

    with warnings.catch_warnings():
        # Brax warns on every environment build that it is in maintenance mode; pgjax uses its
        # environments only, and says so in its docs.
        warnings.filterwarnings("ignore", message="Brax System, piplines")
        env = brax_envs.get_environment(name, backend=backend)

    def reset1(key):
        s = env.reset(key)
        return s, s.obs

    def step1(s, action):
        s = env.step(s, action)
        return s, s.obs, s.reward, s.done > 0.5

    # the observation size by tracing reset abstractly: Brax's ``observation_size`` runs an
    # un-jitted reset op by op, which costs seconds per environment build
    import jax

    obs_size = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs.shape[-1]
    spec = EnvSpec(name=f"brax:{name}", obs_shape=(obs_size,),
                   action=ActionSpace("box", env.action_size, -1.0, 1.0),
                   num_envs=num_envs, max_episode_steps=episode_length)
    return VectorEnv(spec, reset1, step1)
