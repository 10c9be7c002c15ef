"""Policies with memory for partially observable tasks, as policy kinds every update rule
trains unchanged.

``--policy stateful`` — stochastic stateful policy gradient, S2PG (Al-Hafez, Zhao, Peters &
Tateo, ICLR 2024). The policy carries an internal state z and factorises as
``pi(a, z' | o, z) = pi_a(a | o, z) pi_z(z' | o, z)``: the next internal state z' is *sampled*
like an action. Training it is ordinary policy optimisation in the extended MDP whose state is
(o, z) and whose action is (a, z'), with no gradient through time. pgjax builds exactly that
extended MDP around the environment (``StatefulEnv`` / ``HostStatefulEnv``):

- the observation is ``[o, z]`` and z is stored in every transition with it;
- the action is ``[a, z']`` (for a discrete task, ``[a as a float, z']``); the environment gets
  a, and z' becomes the next z;
- z is 0 at every episode start (after an autoreset the new episode's z is 0, while the
  final observation keeps the z' the policy produced, so a truncated episode bootstraps
  from V(o_T, z'));
- the likelihood ratio of every rule uses the joint log-probability log pi_a + log pi_z,
  because ``StatefulDistribution`` is the product distribution;
- the critic sees (o, z) (the extended observation; ``--stateful-prev-action`` also gives
  both networks the previous action).

The actor is a GRU-style cell: features of o update the carry z, whose output is the mean
of z'; the action head reads the features and that output. z has its own learnable
log-std, initialised at ``log(z_std)`` (0.1 by default). Observation normalisation leaves
z untouched.

``--policy window`` — a stateless policy over the last k observations (zero-padded at episode
start): ``WindowEnv`` / ``HostWindowEnv``.

Memoryless and oracle baselines are the plain policy on the filtered or full observation
(``--observe``).
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.distributions import Categorical, Gaussian
from pgjax.envs.core import ActionSpace, ConfigError
from pgjax.nets import ActorCritic, Critic, _dense, orthogonal


# -- the distribution over (a, z') ------------------------------------------------------------
class StatefulDistribution(NamedTuple):
    """Product of the task's action distribution (``base``: Gaussian or categorical) and a
    diagonal Gaussian over z'. Actions are float vectors ``[a, z']`` (a discrete a is stored
    as a float in the first entry). Parameters: ``{"a": base params, "z_mean": [..., Z],
    "z_log_std": [..., Z]}``."""

    base: Any
    a_size: int  # entries of the action vector that belong to a (1 for a discrete a)
    kind: str = "stateful"

    def _split(self, x):
        a, z = x[..., :self.a_size], x[..., self.a_size:]
        if isinstance(self.base, Categorical):
            a = a[..., 0].astype(jnp.int32)
        return a, z

    def _join(self, a, z):
        if isinstance(self.base, Categorical):
            a = a[..., None].astype(z.dtype)
        return jnp.concatenate([a, z], -1)

    @staticmethod
    def _z(d):
        return {"mean": d["z_mean"], "log_std": d["z_log_std"]}

    def sample(self, d, key):
        k_a, k_z = jax.random.split(key)
        return self._join(self.base.sample(d["a"], k_a), Gaussian.sample(self._z(d), k_z))

    def mode(self, d):
        return self._join(self.base.mode(d["a"]), d["z_mean"])

    def log_prob(self, d, x):
        a, z = self._split(x)
        return self.base.log_prob(d["a"], a) + Gaussian.log_prob(self._z(d), z)

    def entropy(self, d):
        return self.base.entropy(d["a"]) + Gaussian.entropy(self._z(d))

    def kl(self, p, q):
        return self.base.kl(p["a"], q["a"]) + Gaussian.kl(self._z(p), self._z(q))

    def z_log_prob(self, d, x):
        """log pi_z(z' | o, z) alone (for diagnostics)."""
        return Gaussian.log_prob(self._z(d), self._split(x)[1])


# -- the networks ------------------------------------------------------------------------------
class StatefulActor(nn.Module):
    """Input ``[o, z]``; GRU-style update of z from features of o gives the mean of z';
    the action head reads the features and that mean."""

    obs_size: int
    z_dim: int
    hidden: Sequence[int]
    action: ActionSpace
    activation: Callable = nn.tanh
    init_log_std: float = 0.0
    z_std: float = 0.1
    head_gain: float = 0.01

    @nn.compact
    def __call__(self, x):
        o, z = x[..., :self.obs_size], x[..., self.obs_size:]
        h = o
        for width in self.hidden:
            h = self.activation(_dense(width, math.sqrt(2))(h))
        z_mean, _ = nn.GRUCell(self.z_dim, recurrent_kernel_init=orthogonal(1.0))(z, h)
        feats = jnp.concatenate([h, z_mean], -1)
        if self.action.kind == "box":
            mean = _dense(self.action.n, self.head_gain)(feats)
            log_std = self.param("log_std", nn.initializers.constant(self.init_log_std),
                                 (self.action.n,))
            a = {"mean": mean, "log_std": log_std}
        else:
            a = {"logits": _dense(self.action.n, self.head_gain)(feats)}
        z_log_std = self.param("z_log_std", nn.initializers.constant(math.log(self.z_std)),
                               (self.z_dim,))
        return {"a": a, "z_mean": z_mean, "z_log_std": z_log_std}


# -- the extended MDP (JAX environments) -------------------------------------------------------
@struct.dataclass
class MemoryEnvState:
    inner: Any
    memory: jax.Array  # [N, Z] internal state (stateful) or [N, k, D] window of observations
    prev_action: jax.Array  # [N, A] previous action of the task (zeros at episode start)


def _flat_obs_size(spec) -> int:
    if len(spec.obs_shape) != 1:
        raise ConfigError(f"policies with memory need flat observations; {spec.name} has shape "
                          f"{spec.obs_shape}")
    return spec.obs_shape[0]


def _action_size(action: ActionSpace) -> int:
    return action.n if action.kind == "box" else 1


def _where_done(done, new, old):
    return jnp.where(done.reshape(done.shape + (1,) * (old.ndim - 1)), new, old)


class StatefulEnv:
    """The S2PG extended MDP around a JAX vector environment: observation ``[o, z]`` (plus
    the previous action with ``prev_action``), action ``[a, z']``."""

    host = False

    def __init__(self, env, z_dim: int, prev_action: bool = False):
        self.env, self.z_dim, self.prev_action = env, z_dim, prev_action
        spec = env.spec
        self.obs_size = _flat_obs_size(spec)
        self.base_action = spec.action
        self.a_size = _action_size(spec.action)
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


class WindowEnv:
    """Observation = the last k observations of the episode, oldest first, zero-padded at
    the episode start."""

    host = False

    def __init__(self, env, k: int):
        self.env, self.k = env, k
        spec = env.spec
        self.obs_size = _flat_obs_size(spec)
        self.spec = spec._replace(obs_shape=(k * self.obs_size,))
        self.norm_mask = None

    def _flat(self, window):
        return window.reshape(window.shape[0], -1)

    @staticmethod
    def _push(window, obs):
        return jnp.concatenate([window[:, 1:], obs[:, None]], 1)

    def reset(self, key):
        inner, obs = self.env.reset(key)
        window = self._push(jnp.zeros((obs.shape[0], self.k, self.obs_size), obs.dtype), obs)
        return MemoryEnvState(inner, window, jnp.zeros((obs.shape[0], 0))), self._flat(window)

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


# -- the extended MDP (Gymnasium environments, stepped on the host) ----------------------------
class _HostWrapped:
    """Shared part of the host-side wrappers: ``open(copies)`` wraps the vector env."""

    host = True

    def __init__(self, env, maker):
        self.env, self._maker = env, maker

    def open(self, copies: int = 1):
        return self._maker(self.env.open(copies))


class HostStatefulEnv(_HostWrapped):
    def __init__(self, env, z_dim: int, prev_action: bool = False):
        spec = env.spec
        self.z_dim, self.prev_action = z_dim, prev_action
        self.obs_size = _flat_obs_size(spec)
        self.base_action, self.a_size = spec.action, _action_size(spec.action)
        extra = self.a_size if prev_action else 0
        self.spec = spec._replace(
            obs_shape=(self.obs_size + extra + z_dim,),
            action=ActionSpace("box", self.a_size + z_dim, spec.action.low, spec.action.high))
        self.norm_mask = np.arange(self.spec.obs_shape[0]) < self.obs_size + extra
        self.discrete = spec.action.kind == "discrete"
        super().__init__(env, lambda venv: _HostStateful(venv, self))


class _HostStateful:
    def __init__(self, venv, wrapper: HostStatefulEnv):
        self.venv, self.w = venv, wrapper
        n = venv.n
        self.z = np.zeros((n, wrapper.z_dim), np.float32)
        self.prev = np.zeros((n, wrapper.a_size), np.float32)

    def _obs(self, obs, prev, z):
        parts = [obs, prev, z] if self.w.prev_action else [obs, z]
        return np.concatenate(parts, -1).astype(np.float32)

    def reset(self, seeds):
        obs = self.venv.reset(seeds)
        self.z[:] = 0.0
        self.prev[:] = 0.0
        return self._obs(obs, self.prev, self.z)

    def step(self, x):
        x = np.asarray(x, np.float32)
        a, z_next = x[:, :self.w.a_size], x[:, self.w.a_size:]
        task = a[:, 0].astype(np.int64) if self.w.discrete else a
        obs, reward, term, trunc, final_obs, ep_ret, ep_len = self.venv.step(task)
        done = (term | trunc)[:, None]
        final = self._obs(final_obs, a, z_next)
        self.z = np.where(done, 0.0, z_next).astype(np.float32)
        self.prev = np.where(done, 0.0, a).astype(np.float32)
        return (self._obs(obs, self.prev, self.z), reward, term, trunc, final, ep_ret, ep_len)

    def close(self):
        self.venv.close()


class HostWindowEnv(_HostWrapped):
    def __init__(self, env, k: int):
        self.k, self.obs_size = k, _flat_obs_size(env.spec)
        self.spec = env.spec._replace(obs_shape=(k * self.obs_size,))
        self.norm_mask = None
        super().__init__(env, lambda venv: _HostWindow(venv, self))


class _HostWindow:
    def __init__(self, venv, wrapper: HostWindowEnv):
        self.venv, self.w = venv, wrapper
        self.window = np.zeros((venv.n, wrapper.k, wrapper.obs_size), np.float32)

    def reset(self, seeds):
        obs = self.venv.reset(seeds)
        self.window[:] = 0.0
        self.window[:, -1] = obs
        return self.window.reshape(self.venv.n, -1).copy()

    def step(self, action):
        obs, reward, term, trunc, final_obs, ep_ret, ep_len = self.venv.step(action)
        final = np.concatenate([self.window[:, 1:], final_obs[:, None]], 1)
        fresh = np.zeros_like(self.window)
        fresh[:, -1] = obs
        done = (term | trunc)[:, None, None]
        self.window = np.where(done, fresh, final).astype(np.float32)
        n = self.venv.n
        return (self.window.reshape(n, -1).copy(), reward, term, trunc, final.reshape(n, -1),
                ep_ret, ep_len)

    def close(self):
        self.venv.close()


# -- building a policy kind ----------------------------------------------------------------------
MEMORY_POLICIES = ("stateful", "window")


def wrap_env(env, cfg):
    """The environment a policy kind trains on: the extended MDP for ``stateful``, the
    observation window for ``window``, the environment itself otherwise."""
    if cfg.policy == "stateful":
        cls = HostStatefulEnv if getattr(env, "host", False) else StatefulEnv
        return cls(env, cfg.z_dim, cfg.stateful_prev_action)
    if cfg.policy == "window":
        cls = HostWindowEnv if getattr(env, "host", False) else WindowEnv
        return cls(env, cfg.window)
    return env


def make_stateful_policy(env: StatefulEnv, cfg) -> ActorCritic:
    from pgjax.nets import ACTIVATIONS

    act = ACTIVATIONS[cfg.activation]
    base = env.base_action
    obs_size = env.spec.obs_shape[0] - env.z_dim  # o and, with prev_action, the last action
    actor = StatefulActor(obs_size, env.z_dim, tuple(cfg.actor_hidden), base, act,
                          cfg.init_log_std, cfg.z_std, cfg.policy_head_gain)
    dist = StatefulDistribution(Gaussian() if base.kind == "box" else Categorical(),
                                _action_size(base))
    return ActorCritic(actor, Critic(tuple(cfg.critic_hidden), act), dist)


__all__ = ["HostStatefulEnv", "HostWindowEnv", "MEMORY_POLICIES",
           "StatefulActor", "StatefulDistribution", "StatefulEnv", "WindowEnv",
           "make_stateful_policy", "wrap_env"]
