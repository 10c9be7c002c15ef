"""Environments extended for policies with memory: the S2PG extended MDP (``StatefulEnv``)
and the observation window (``WindowEnv``), one wrapper each for every environment family.

``StatefulEnv`` (Al-Hafez, Zhao, Peters & Tateo, ICLR 2024): the observation is ``[o, z]``
(``[o, a_prev, z]`` with ``prev_action``) and the action ``[a, z']`` (a discrete a stored as a
float in the first entry); the environment gets a, and z' becomes the next z. z is 0 at
every episode start, while ``final_obs`` keeps the z' just produced, so a truncated episode
bootstraps from V(o_T, z'). ``norm_mask`` marks the entries observation normalisation may
touch (never z).

``WindowEnv``: the observation is the last k observations of the episode, oldest first,
zero-padded at the episode start.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.envs.core import ActionSpace, Wrapper
from pgjax.core.errors import ConfigError


@struct.dataclass
class MemoryEnvState:
    inner: Any
    memory: jax.Array  # [N, Z] internal state z (stateful) or [N, k, D] observation window
    prev_action: Any = None  # [N, A] previous task action, zeros at episode start (stateful)


def flat_obs_size(spec) -> int:
    if len(spec.obs_shape) != 1:
        raise ConfigError(f"policies with memory need flat observations; {spec.name} has shape "
                          f"{spec.obs_shape}")
    return spec.obs_shape[0]


def action_size(action: ActionSpace) -> int:
    """Entries of a flat action vector that one task action takes (1 for a discrete one)."""
    return action.n if action.kind == "box" else 1


def _where_done(done, new, old):
    return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)


class StatefulEnv(Wrapper):
    """The S2PG extended MDP around a vector environment."""

    def __init__(self, env, z_dim: int, prev_action: bool = False):
        super().__init__(env)
        self.z_dim, self.prev_action = z_dim, prev_action
        spec = env.spec
        self.obs_size = flat_obs_size(spec)
        self.base_action = spec.action
        self.a_size = action_size(spec.action)
        extra = self.a_size if prev_action else 0
        self.spec = spec._replace(
            obs_shape=(self.obs_size + extra + z_dim,),
            action=ActionSpace("box", self.a_size + z_dim, spec.action.low, spec.action.high))
        # normalise o (and the previous action), never z
        self.norm_mask = np.arange(self.spec.obs_shape[0]) < self.obs_size + extra

    def _obs(self, obs, prev, z):
        parts = [obs, prev, z] if self.prev_action else [obs, z]
        return jnp.concatenate(parts, -1)

    def _task_action(self, x):
        a = x[..., :self.a_size]
        return a[..., 0].astype(jnp.int32) if self.base_action.kind == "discrete" else a

    # -- acting outside the environment (a trained policy on the task's observations) --
    def start_memory(self, n: int) -> MemoryEnvState:
        """The wrapper's memory at an episode start, without an environment: z = 0 and no
        previous action."""
        return MemoryEnvState(None, jnp.zeros((n, self.z_dim), jnp.float32),
                              jnp.zeros((n, self.a_size), jnp.float32))

    def observe_memory(self, memory: MemoryEnvState, obs):
        """(memory, what the policy sees) for a task observation: [o, (a_prev,) z]."""
        return memory, self._obs(obs, memory.prev_action, memory.memory)

    def act_memory(self, memory: MemoryEnvState, x):
        """(memory after the action, the task's action) for a policy output x = [a, z']."""
        return memory.replace(memory=x[..., self.a_size:], prev_action=x[..., :self.a_size]), \
            self._task_action(x)

    def restart_memory(self, memory: MemoryEnvState, done):
        return memory.replace(memory=_where_done(done, jnp.zeros_like(memory.memory),
                                                 memory.memory),
                              prev_action=_where_done(done, jnp.zeros_like(memory.prev_action),
                                                      memory.prev_action))

    def reset(self, key):
        inner, obs = self.env.reset(key)
        n = obs.shape[0]
        z = jnp.zeros((n, self.z_dim), jnp.float32)
        prev = jnp.zeros((n, self.a_size), jnp.float32)
        return MemoryEnvState(inner, z, prev), self._obs(obs, prev, z)

    def refresh(self, state):
        return state.replace(inner=self.env.refresh(state.inner))

    def step(self, state, x):
        inner, ts = self.env.step(state.inner, self._task_action(x))
        z_next = x[..., self.a_size:]
        a_prev = x[..., :self.a_size]
        done = ts.terminated | ts.truncated
        z = _where_done(done, jnp.zeros_like(z_next), z_next)
        prev = _where_done(done, jnp.zeros_like(a_prev), a_prev)
        out = ts.replace(obs=self._obs(ts.obs, prev, z),
                         final_obs=self._obs(ts.final_obs, a_prev, z_next))
        return MemoryEnvState(inner, z, prev), out


class WindowEnv(Wrapper):
    """Observation = the last k observations of the episode, oldest first, zero-padded at
    the episode start."""

    def __init__(self, env, k: int):
        super().__init__(env)
        self.k = k
        self.obs_size = flat_obs_size(env.spec)
        self.spec = env.spec._replace(obs_shape=(k * self.obs_size,))

    def _flat(self, window):
        return window.reshape(window.shape[0], -1)

    @staticmethod
    def _push(window, obs):
        return jnp.concatenate([window[:, 1:], obs[:, None]], 1)

    # -- acting outside the environment (a trained policy on the task's observations) --
    def start_memory(self, n: int) -> MemoryEnvState:
        """An empty window (zeros), as at an episode start before its first observation."""
        return MemoryEnvState(None, jnp.zeros((n, self.k, self.obs_size), jnp.float32))

    def observe_memory(self, memory: MemoryEnvState, obs):
        """(memory with ``obs`` pushed, the flat window the policy sees)."""
        window = self._push(memory.memory, obs.reshape(obs.shape[0], -1))
        return memory.replace(memory=window), self._flat(window)

    def act_memory(self, memory: MemoryEnvState, x):
        return memory, x

    def restart_memory(self, memory: MemoryEnvState, done):
        return memory.replace(memory=_where_done(done, jnp.zeros_like(memory.memory),
                                                 memory.memory))

    def reset(self, key):
        inner, obs = self.env.reset(key)
        window = self._push(jnp.zeros((obs.shape[0], self.k, self.obs_size), obs.dtype), obs)
        return MemoryEnvState(inner, window), self._flat(window)

    def refresh(self, state):
        return state.replace(inner=self.env.refresh(state.inner))

    def step(self, state, action):
        inner, ts = self.env.step(state.inner, action)
        done = ts.terminated | ts.truncated
        final = self._push(state.memory, ts.final_obs)
        fresh = self._push(jnp.zeros_like(state.memory), ts.obs)
        window = _where_done(done, fresh, final)
        out = ts.replace(obs=self._flat(window), final_obs=self._flat(final))
        return state.replace(inner=inner, memory=window), out
