"""Environments behind one pure, batched interface (see ``pgjax.envs.core``).

Environment ids are ``<family>:<name>``:

- ``brax:<name>``  any ``brax.envs`` environment (``--backend`` generalized|positional|spring|mjx)
- ``gym:<EnvId>``  any registered Gymnasium environment (``gym:CartPole-v1``, ``gym:Hopper-v5``),
  stepped on the host (``--vectorization sync|async``), see ``pgjax.envs.gym_env``
- ``jax:<name>``   small pure-JAX tasks shipped with pgjax (``jax:cartpole``; ``jax:memory``,
  ``jax:memory-<delay>``: a cue-recall memory probe, see ``pgjax.envs.memory_probe``)
- ``mabrax:<name>`` a Brax body split among cooperating agents, Multi-Agent MuJoCo style
  (``mabrax:halfcheetah_2x3``), see ``pgjax.envs.mabrax``
- ``matrix:<game>`` one-step cooperative matrix games (``matrix:climbing``, ``matrix:penalty``)

``mabrax`` and ``matrix`` environments are ``MultiAgentEnv``: an ordinary batched environment
(global state, joint action, team reward) with a ``Partition`` into per-agent views, see
``pgjax.envs.multiagent``.
"""
from __future__ import annotations

from pgjax.envs.brax_env import BACKENDS, make_brax_env
from pgjax.envs.classic import CLASSIC, make_classic_env
from pgjax.errors import ConfigError
from pgjax.envs.core import ActionSpace, Env, EnvSpec, TimeStep
from pgjax.envs.functional import VectorEnv

FAMILIES = ("brax", "gym", "jax", "mabrax", "matrix")


def make_env(env_id: str, num_envs: int, episode_length: int | None = None,
             backend: str = "generalized", vectorization: str = "sync", observe: str = "full"):
    """Build a batched environment from an id such as ``brax:ant``, ``jax:cartpole`` or
    ``mabrax:ant_4x2`` (multi-agent ids return a ``MultiAgentEnv``).

    ``episode_length`` is the time limit (None: the task's own, 1000 for Brax).
    ``observe`` hides part of a locomotion task's observation: ``positions`` (velocities
    hidden) or ``velocities`` (positions hidden), see ``pgjax.envs.pomdp``.
    Raises ``ConfigError`` with a one-line fix for unknown ids or backends.
    """
    env = _make_env(env_id, num_envs, episode_length, backend, vectorization)
    if observe == "full":
        return env
    from pgjax.envs.pomdp import filter_env

    return filter_env(env, env_id, observe)


def _make_env(env_id, num_envs, episode_length, backend, vectorization):
    family, sep, name = env_id.partition(":")
    if not sep or family not in FAMILIES:
        raise ConfigError(f"unknown environment id '{env_id}'; write <family>:<name> with family "
                          f"one of {', '.join(FAMILIES)} (e.g. brax:inverted_pendulum, "
                          f"gym:Hopper-v5, jax:cartpole, mabrax:halfcheetah_2x3, matrix:climbing)")
    if family == "gym":
        from pgjax.envs.gym_env import make_gym_env

        return make_gym_env(name, num_envs, episode_length, vectorization)
    if family == "brax":
        return make_brax_env(name, num_envs, episode_length or 1000, backend)
    if family == "mabrax":
        from pgjax.envs.mabrax import make_mabrax_env

        return make_mabrax_env(name, num_envs, episode_length or 1000, backend)
    if family == "matrix":
        from pgjax.envs.multiagent import make_matrix_game

        return make_matrix_game(name, num_envs, episode_length)
    from pgjax.envs.memory_probe import make_memory_env, parse_memory_name

    delay = parse_memory_name(name)
    if delay is not None:
        return make_memory_env(num_envs, delay, episode_length=episode_length)
    if name not in CLASSIC:
        raise ConfigError(f"unknown environment '{env_id}'; use one of: "
                          f"{', '.join('jax:' + k for k in CLASSIC)}, jax:memory, "
                          f"jax:memory-<delay>")
    return make_classic_env(name, num_envs, episode_length)


__all__ = ["ActionSpace", "BACKENDS", "ConfigError", "Env", "EnvSpec", "TimeStep", "VectorEnv",
           "make_env"]
