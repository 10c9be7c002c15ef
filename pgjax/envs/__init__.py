"""Environments behind one pure, batched interface (see ``pgjax.envs.core``).

Environment ids are ``<family>:<name>``:

- ``brax:<name>``  any ``brax.envs`` environment (``--backend`` generalized|positional|spring|mjx)
- ``gym:<EnvId>``  any registered Gymnasium environment (``gym:CartPole-v1``, ``gym:Hopper-v5``),
  stepped on the host (``--vectorization sync|async``), see ``pgjax.envs.gym_env``
- ``jax:<name>``   small pure-JAX tasks shipped with pgjax (``jax:cartpole``)
"""
from __future__ import annotations

from pgjax.envs.brax_env import BACKENDS, make_brax_env
from pgjax.envs.classic import CLASSIC, make_classic_env
from pgjax.envs.core import ActionSpace, ConfigError, Env, EnvSpec, TimeStep
from pgjax.envs.functional import VectorEnv

FAMILIES = ("brax", "gym", "jax")


def make_env(env_id: str, num_envs: int, episode_length: int | None = None,
             backend: str = "generalized", vectorization: str = "sync"):
    """Build a batched environment from an id such as ``brax:ant`` or ``jax:cartpole``.

    ``episode_length`` is the time limit (None: the task's own, 1000 for Brax).
    Raises ``ConfigError`` with a one-line fix for unknown ids or backends.
    """
    family, sep, name = env_id.partition(":")
    if not sep or family not in FAMILIES:
        raise ConfigError(f"unknown environment id '{env_id}'; write <family>:<name> with family "
                          f"one of {', '.join(FAMILIES)} (e.g. brax:inverted_pendulum, gym:Hopper-v5, jax:cartpole)")
    if family == "gym":
        from pgjax.envs.gym_env import make_gym_env

        return make_gym_env(name, num_envs, episode_length, vectorization)
    if family == "brax":
        return make_brax_env(name, num_envs, episode_length or 1000, backend)
    if name not in CLASSIC:
        raise ConfigError(f"unknown environment '{env_id}'; use one of: "
                          f"{', '.join('jax:' + k for k in CLASSIC)}")
    return make_classic_env(name, num_envs, episode_length)


__all__ = ["ActionSpace", "BACKENDS", "ConfigError", "Env", "EnvSpec", "TimeStep", "VectorEnv",
           "make_env"]
