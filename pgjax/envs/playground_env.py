"""MuJoCo Playground environments (``playground:<Task>``, the successor of ``brax.envs``),
stepped inside the compiled program like Brax's: every DM Control Suite task of the installed
package (``CartpoleBalance``, ``CheetahRun``, ``WalkerWalk``, ...), on the CPU with MJX's JAX
implementation (``--playground.impl jax``, the default; ``warp`` needs an NVIDIA GPU).

The optional extra ``pip install 'pgjax[playground]'`` installs it. Playground's raw
environments have no time limit and no autoreset (``done`` only on a non-finite state):
``VectorEnv`` adds both, with the task's own episode length as the time limit (truncation,
bootstrapped), and restarts from a reset pool redrawn every rollout (``--reset-pool fixed``
keeps one start per environment, as Playground's training wrapper does by default).
``--playground.action-repeat`` repeats each action that many control steps, summing the
rewards, as Playground's Brax-PPO settings define it (1 for every DM Control task there: the
4 meant for PendulumSwingup is keyed ``PendulumSwingUp`` and never applies). Locomotion and
manipulation tasks fetch robot models from the network on first use; where that is not
possible they are refused with one line.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os

import jax
import jax.numpy as jnp

from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv
from pgjax.core.errors import ConfigError, check_choice, did_you_mean

IMPLS = ("jax", "warp")


@dataclasses.dataclass(frozen=True)
class PlaygroundOptions:
    """Settings of the playground: family (--playground.<field>)."""

    impl: str = "jax"
    """MJX implementation: jax (any device, the CPU included) or warp (NVIDIA GPUs)."""
    action_repeat: int = 1
    """Control steps each action is held for (rewards summed); Playground's DM Control
    settings use 1."""

    def validate(self, cfg=None) -> None:
        check_choice(self.impl, IMPLS, "playground.impl", "--playground.impl")
        if self.action_repeat < 1:
            raise ConfigError(f"playground.action_repeat must be >= 1, got "
                              f"{self.action_repeat}; pass a positive --playground.action-repeat")


def _registry():
    """``mujoco_playground.registry``, imported once; the environment's ``XLA_FLAGS`` is
    kept as it was (a package installed beside it may change it on import)."""
    flags = os.environ.get("XLA_FLAGS")
    try:
        from mujoco_playground import registry
    except ImportError as e:
        raise ConfigError(f"playground: environments need MuJoCo Playground ({e}); install "
                          f"pgjax with pip install 'pgjax[playground]'") from None
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    return registry


@contextlib.contextmanager
def _silenced():
    """Standard output and error of this process and its children sent to /dev/null."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def task_names() -> tuple[str, ...]:
    """The DM Control Suite tasks of the installed package (the ones that load offline)."""
    return tuple(_registry().dm_control_suite.ALL_ENVS)


@functools.lru_cache(maxsize=None)
def load(name: str, impl: str = "jax"):
    """(Playground's environment for ``name``, its default config)."""
    registry = _registry()
    if name not in registry.ALL_ENVS:
        ids = ["playground:" + t for t in task_names()]
        raise ConfigError(f"unknown Playground task '{name}'"
                          f"{did_you_mean('playground:' + name, ids)}; use one of "
                          f"{', '.join('playground:' + t for t in task_names())}")
    dmc = name in registry.dm_control_suite.ALL_ENVS
    try:
        with contextlib.nullcontext() if dmc else _silenced():  # its fetch's own printing
            env = registry.load(name, config_overrides={"impl": impl})
    except Exception as e:  # noqa: BLE001  (assets fetched on first use: any network error)
        if dmc:
            raise
        raise ConfigError(f"playground:{name} needs robot models that Playground fetches from "
                          f"the network on first use, which failed here ({type(e).__name__}: "
                          f"{str(e)[:120]}); use a DM Control task (they ship inside the "
                          f"package), or fetch the models where the network is reachable") from None
    return env, registry.get_default_config(name)


def make_playground_env(name: str, num_envs: int, episode_length: int | None,
                        options: PlaygroundOptions) -> VectorEnv:
    env, config = load(name, options.impl)
    repeat = options.action_repeat

    def reset1(key):
        state = env.reset(key)
        return state, state.obs

    def step1(state, action):
        def one(carry, _):
            s, total, ended = carry
            s = env.step(s, action)
            return (s, total + jnp.where(ended, 0.0, s.reward), ended | (s.done > 0.5)), None

        (state, reward, ended), _ = jax.lax.scan(
            one, (state, jnp.float32(0.0), jnp.bool_(False)), None, length=repeat)
        return state, state.obs, reward, ended

    obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs
    if isinstance(obs, dict):  # no DM Control task has one; a locomotion task may
        raise ConfigError(f"playground:{name} has dict observations (keys "
                          f"{', '.join(sorted(obs))}); pgjax's policies read one array")
    limit = episode_length or -(-int(config.episode_length) // repeat)
    spec = EnvSpec(f"playground:{name}", tuple(obs.shape), ActionSpace("box", env.action_size),
                   num_envs, limit)
    return VectorEnv(spec, reset1, step1)


__all__ = ["PlaygroundOptions", "load", "make_playground_env", "task_names"]
