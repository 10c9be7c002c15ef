"""Turn a single-environment pure JAX simulator into a batched pgjax environment.

A simulator is two pure functions for one environment::

    sim_state, obs = reset1(key)
    sim_state, obs, reward, terminated = step1(sim_state, action)

or, for a simulator that reports episode outcomes (``EnvSpec.success`` set: SMAX's won
battles), ``sim_state, obs, reward, terminated, success = step1(sim_state, action)``.

``VectorEnv`` vmaps them over N environments and adds what every pgjax environment needs:
the time limit (truncation), autoreset that keeps the real final observation, and episode
statistics.

Autoreset draws from a *reset pool*: one freshly reset state per environment, held in the env
state and swapped in (a select, no simulator call) when that environment's episode ends.
``refresh(state)`` redraws the pool with new keys; the rollout calls it once per rollout, so a
simulator reset costs 1/T of a step instead of a full reset on every step (under ``vmap`` a
conditional reset would run on every step anyway). An environment whose episode ends twice
within one rollout starts both new episodes from the same pool state. With
``--reset-pool fixed`` the trainer never calls ``refresh``: each environment restarts from the
one pool state drawn at ``reset`` for the whole run (the scheme of Brax's training wrapper),
and the training program contains no simulator reset.
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.core.errors import ConfigError
from pgjax.envs.core import EnvSpec, TimeStep


@struct.dataclass
class VectorEnvState:
    sim: object  # simulator state batched over N
    key: jax.Array  # [N, 2] per-env keys for resets
    t: jax.Array  # [N] int32 steps since episode start
    ep_return: jax.Array  # [N] running undiscounted return
    pool_sim: object  # [N] fresh reset states swapped in when an episode ends
    pool_obs: jax.Array  # [N, *obs] their observations


def _returning(fn: Callable, name: str, expected: str) -> Callable:
    """``fn``, checked as it is traced to return the tuple a simulator's ``name`` returns
    (``expected``): a wrong count is one line naming the function, not an unpacking error
    inside pgjax."""
    import inspect

    want = expected.count(",") + 1

    def checked(*args):
        out = fn(*args)
        if not isinstance(out, tuple) or len(out) != want:
            try:
                where = f" ({inspect.getsourcefile(fn)}:{inspect.getsourcelines(fn)[1]})"
            except (OSError, TypeError):
                where = ""
            got = f"{len(out)} values" if isinstance(out, (tuple, list)) else \
                f"one {type(out).__name__}"
            raise ConfigError(f"{getattr(fn, '__qualname__', name)}{where} returns {got}; a "
                              f"simulator's {name} returns {expected} (no auto-reset and no "
                              f"time limit: pgjax adds both; for gymnax use its step_env)")
        return out

    return checked


def strong_types(tree):
    """``tree`` with every weakly typed leaf (a Python scalar a simulator put in its state,
    such as ``step=0``) given its dtype for good: a state whose reset leaves are weak and
    whose stepped ones are not changes type after the first step, and every program that
    carries it compiles twice."""
    return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), tree)


class VectorEnv:
    """An ``Env`` from one environment's pure simulator (``reset1``, ``step1``; see the
    module's docstring), vmapped over ``spec.num_envs`` copies with the time limit, autoreset
    from a reset pool and episode statistics added. Box actions are clipped to the bounds of
    ``spec.action`` unless ``clip_actions`` is false. Where ``spec.success`` names an
    outcome, ``step1`` returns it as a fifth value and ``TimeStep.success`` holds it for the
    episodes that end (a truncated episode did not succeed)."""

    def __init__(self, spec: EnvSpec, reset1: Callable, step1: Callable,
                 clip_actions: bool = True):
        if spec.num_envs < 1 or spec.max_episode_steps < 1:
            raise ConfigError("num_envs and episode_length must be >= 1; pass positive values")
        self.spec = spec
        checked = _returning(reset1, "reset1(key)", "(sim_state, obs)")
        self._reset = jax.vmap(lambda key: strong_types(checked(key)))
        self._success = bool(spec.success)
        stepped = _returning(step1, "step1(sim_state, action)",
                             "(sim_state, obs, reward, terminated"
                             + (", success)" if self._success else ")"))
        self._step = jax.vmap(lambda sim, action: strong_types(stepped(sim, action)))
        self._clip = clip_actions and spec.action.kind == "box"

    def reset(self, key):
        n = self.spec.num_envs
        k_env, k_next = jax.random.split(key)
        # the first states and the first reset pool in one simulator call (one compile)
        both = self._reset(jax.random.split(k_env, 2 * n))
        sim, obs = jax.tree.map(lambda x: x[:n], both)
        pool_sim, pool_obs = jax.tree.map(lambda x: x[n:], both)
        state = VectorEnvState(sim=sim, key=jax.random.split(k_next, n),
                               t=jnp.zeros(n, jnp.int32), ep_return=jnp.zeros(n, jnp.float32),
                               pool_sim=pool_sim, pool_obs=pool_obs)
        return state, obs

    def close(self):
        pass  # nothing held outside the program

    def refresh(self, state: VectorEnvState) -> VectorEnvState:
        """Redraw the reset pool with fresh per-env keys."""
        keys = jax.vmap(jax.random.split)(state.key)
        pool_sim, pool_obs = self._reset(keys[:, 1])
        return state.replace(key=keys[:, 0], pool_sim=pool_sim, pool_obs=pool_obs)

    def step(self, state: VectorEnvState, action):
        if self._clip:
            action = jnp.clip(action, self.spec.action.low, self.spec.action.high)
        sim, obs, reward, terminated, *success = self._step(state.sim, action)
        reward = reward.astype(jnp.float32)
        terminated = terminated.astype(bool)
        t = state.t + 1
        truncated = (t >= self.spec.max_episode_steps) & ~terminated
        done = terminated | truncated
        ep_return = state.ep_return + reward
        pick = lambda new, old: jnp.where(
            done.reshape(done.shape + (1,) * (jnp.ndim(old) - 1)), new, old).astype(
                jnp.result_type(old))
        new_sim = jax.tree.map(pick, state.pool_sim, sim)
        new_obs = pick(state.pool_obs, obs)
        ts = TimeStep(obs=new_obs, reward=reward, terminated=terminated, truncated=truncated,
                      final_obs=obs, episode_return=jnp.where(done, ep_return, 0.0),
                      episode_length=jnp.where(done, t, 0),
                      success=(terminated & success[0].astype(bool)) if success else None)
        new_state = state.replace(sim=new_sim, t=jnp.where(done, 0, t),
                                  ep_return=jnp.where(done, 0.0, ep_return))
        return new_state, ts
