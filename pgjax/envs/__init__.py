"""Environments behind one pure, batched interface (see ``pgjax.envs.core``).

Environment ids are ``<family>:<name>``:

- ``brax:<name>``  any ``brax.envs`` environment (``--brax.backend`` generalized|positional|spring|mjx)
- ``gym:<EnvId>``  any registered Gymnasium environment (``gym:CartPole-v1``, ``gym:Hopper-v5``),
  stepped on the host (``--gym.vectorization auto|sync|workers|async``), see ``pgjax.envs.gym_env``
- ``jaxmarl:<id>`` JaxMARL's SMAX (``jaxmarl:SMAX-3m``, against its heuristic enemy) and MPE
  (``jaxmarl:MPE_simple_spread_v3``) multi-agent tasks, see ``pgjax.envs.jaxmarl_env``
  (``pip install 'pgjax[marl]'``)
- ``gymnax:<EnvId>`` any gymnax environment (``gymnax:CartPole-v1``,
  ``gymnax:Breakout-MinAtar``), stepped inside the compiled program, see
  ``pgjax.envs.gymnax_env`` (``pip install 'pgjax[gymnax]'``)
- ``jax:<name>``   small pure-JAX tasks shipped with pgjax (``jax:cartpole``; ``jax:memory``,
  ``jax:memory-<delay>``: a cue-recall memory probe, see ``pgjax.envs.memory_probe``)
- ``mabrax:<name>`` a Brax body split among cooperating agents, Multi-Agent MuJoCo style
  (``mabrax:halfcheetah_2x3``), see ``pgjax.envs.mabrax``
- ``matrix:<game>`` one-step cooperative matrix games (``matrix:climbing``, ``matrix:penalty``)
- ``playground:<Task>`` MuJoCo Playground's DM Control Suite tasks (``playground:CartpoleBalance``,
  ``playground:CheetahRun``), see ``pgjax.envs.playground_env`` (``pip install 'pgjax[playground]'``)

Each family is an ``EnvFamily`` registered in ``pgjax.core.registry.ENV_FAMILIES`` by
``register`` below, as a plugin registers its own.

``jaxmarl``, ``mabrax`` and ``matrix`` environments are ``MultiAgentEnv``: an ordinary batched environment
(global state, joint action, team reward) with a ``Partition`` into per-agent views, see
``pgjax.envs.multiagent``.
"""
from __future__ import annotations

from pgjax.envs.brax_env import BACKENDS, BraxOptions, make_brax_env
from pgjax.envs.classic import CLASSIC, make_classic_env
from pgjax.envs.core import ActionSpace, Env, EnvFamily, EnvSpec, TimeStep
from pgjax.envs.functional import VectorEnv
from pgjax.envs.gym_options import GymOptions
from pgjax.envs.playground_env import PlaygroundOptions
from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.core.registry import ENV_FAMILIES


def register(prefix: str, family: EnvFamily, *, replace: bool = False) -> EnvFamily:
    """Make ids ``<prefix>:<name>`` available to the trainer, sweeps, the CLI, eval, render
    and load_policy (from a plugin file: ``--plugins my_envs.py``); see ``EnvFamily``."""
    if not isinstance(family, EnvFamily):
        raise TypeError(f"register('{prefix}', ...) takes an EnvFamily, got "
                        f"{type(family).__name__}")
    from pgjax.core.registry import caller_file

    return ENV_FAMILIES.register(prefix, family, replace=replace, origin=caller_file())


def family_of(env_id: str) -> tuple[EnvFamily, str]:
    """(the registered family of ``env_id``, the name after its prefix); a ``ConfigError``
    for an id that is not ``<family>:<name>`` with a registered family."""
    prefix, sep, name = env_id.partition(":")
    if not sep or not name or prefix not in ENV_FAMILIES:
        examples = ", ".join(f.examples[0] for f in map(ENV_FAMILIES.get, ENV_FAMILIES)
                             if f.examples)
        ids = [f"{p}:{name}" for p in ENV_FAMILIES] if sep and name else list(ENV_FAMILIES)
        raise ConfigError(f"unknown environment id '{env_id}'"
                          f"{did_you_mean(env_id if sep else prefix, ids, n=1)}; write "
                          f"<family>:<name> with "
                          f"family one of {', '.join(ENV_FAMILIES)} (e.g. {examples}), or "
                          f"register a family from --plugins")
    return ENV_FAMILIES.get(prefix), name


def task_options(env_id: str, recorded: dict) -> str:
    """The options of a recorded run's config (``config.json``'s ``"config"``) that change its
    task itself, as ``field=value`` text ("" for the task as registered): the fields its
    family's options class lists in ``TASK`` (``--gym.kwargs``). A run with them is not
    the task that references and published figures are for."""
    prefix = env_id.partition(":")[0]
    family = ENV_FAMILIES.get(prefix) if prefix in ENV_FAMILIES else None
    if family is None or family.options is None:
        return ""
    section = recorded.get(family.options_key) or {}
    return " ".join(f"{f}={section[f]}" for f in getattr(family.options, "TASK", ())
                    if section.get(f))


def make_env(env_id: str, num_envs: int, episode_length: int | None = None,
             options=None, observe: str = "full"):
    """Build a batched environment from an id such as ``brax:ant``, ``jax:cartpole`` or
    ``mabrax:ant_4x2`` (multi-agent ids return a ``MultiAgentEnv``).

    ``episode_length`` is the time limit (None: the task's own, 1000 for Brax).
    ``options``: the family's settings (e.g. ``BraxOptions(backend="mjx")``; None: its
    defaults). ``observe`` hides part of a locomotion task's observation: ``positions``
    (velocities hidden) or ``velocities`` (positions hidden), see ``pgjax.envs.pomdp``.
    Raises ``ConfigError`` with a one-line fix for unknown ids or options.
    """
    family, name = family_of(env_id)
    if family.options is None:
        options = None
    elif options is None:
        options = family.options()
    elif not isinstance(options, family.options):
        raise ConfigError(f"{env_id} takes options of type {family.options.__name__}, got "
                          f"{type(options).__name__}")
    env = family.make(name, num_envs, episode_length, options)
    if observe == "full":
        return env
    from pgjax.envs.pomdp import filter_env

    return filter_env(env, env_id, observe)


def _gym(name, num_envs, episode_length, options: GymOptions):
    from pgjax.envs.gym_env import make_gym_env

    return make_gym_env(name, num_envs, episode_length, options)


def _mabrax(name, num_envs, episode_length, options: BraxOptions):
    from pgjax.envs.mabrax import make_mabrax_env

    return make_mabrax_env(name, num_envs, episode_length or 1000, options.backend)


def _matrix(name, num_envs, episode_length, options):
    from pgjax.envs.multiagent import make_matrix_game

    return make_matrix_game(name, num_envs, episode_length)


def _jax(name, num_envs, episode_length, options):
    from pgjax.envs.memory_probe import make_memory_env, parse_memory_name

    delay = parse_memory_name(name)
    if delay is not None:
        return make_memory_env(num_envs, delay, episode_length=episode_length)
    if name not in CLASSIC:
        raise ConfigError(f"unknown environment 'jax:{name}'"
                          f"{did_you_mean('jax:' + name, ['jax:' + k for k in CLASSIC])}; "
                          f"use one of: "
                          f"{', '.join('jax:' + k for k in CLASSIC)}, jax:memory, "
                          f"jax:memory-<delay>")
    return make_classic_env(name, num_envs, episode_length)


def _jaxmarl(name, num_envs, episode_length, options):
    from pgjax.envs.jaxmarl_env import make_jaxmarl_env

    return make_jaxmarl_env(name, num_envs, episode_length)


def _gymnax(name, num_envs, episode_length, options):
    from pgjax.envs.gymnax_env import make_gymnax_env

    return make_gymnax_env(name, num_envs, episode_length)


def _playground(name, num_envs, episode_length, options: PlaygroundOptions):
    from pgjax.envs.playground_env import make_playground_env

    return make_playground_env(name, num_envs, episode_length, options)


register("brax", EnvFamily(
    lambda name, n, length, o: make_brax_env(name, n, length or 1000, o.backend),
    "any brax.envs environment, stepped inside the compiled program",
    ("brax:inverted_pendulum",), BraxOptions, "brax", renderer="system"))
register("gym", EnvFamily(_gym, "any registered Gymnasium environment, stepped on the host",
                          ("gym:Hopper-v5",), GymOptions, "gym", host=True, renderer="frames"))
register("jax", EnvFamily(_jax, "small pure-JAX tasks shipped with pgjax",
                          ("jax:cartpole",)))
register("jaxmarl", EnvFamily(_jaxmarl, "JaxMARL's SMAX and MPE cooperative tasks, stepped "
                                        "inside the compiled program",
                              ("jaxmarl:SMAX-3m",), multi_agent=True))
register("gymnax", EnvFamily(_gymnax, "any gymnax environment (classic control, MinAtar, "
                                      "bsuite, misc), stepped inside the compiled program",
                             ("gymnax:CartPole-v1",), renderer="states"))
register("mabrax", EnvFamily(_mabrax, "a Brax body split among cooperating agents",
                             ("mabrax:halfcheetah_2x3",), BraxOptions, "brax",
                             multi_agent=True))
register("matrix", EnvFamily(_matrix, "one-step cooperative matrix games",
                             ("matrix:climbing",), multi_agent=True))
register("playground", EnvFamily(_playground, "MuJoCo Playground's DM Control Suite tasks, "
                                              "stepped inside the compiled program",
                                 ("playground:CartpoleBalance",), PlaygroundOptions,
                                 "playground", renderer="trajectory"))

__all__ = ["ActionSpace", "BACKENDS", "BraxOptions", "ConfigError", "Env", "EnvFamily", "EnvSpec",
           "GymOptions", "PlaygroundOptions", "TimeStep",
           "VectorEnv", "family_of", "make_env", "register"]
