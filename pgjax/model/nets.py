"""The networks of every policy kind: actor and critic MLPs, the stateful (S2PG) actor and
the GRU actor and critic, with orthogonal initialisation (gain sqrt(2) on hidden layers, 0.01
on the policy head, 1.0 on the value head), as in the reference PPO implementations (Huang et
al. 2022, "The 37 Implementation Details of PPO")."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from pgjax.model.distributions import Categorical, Gaussian
from pgjax.core.errors import ConfigError, check_choice
from pgjax.envs.core import ActionSpace

@struct.dataclass
class Parts:
    """One value for each network of an actor-critic: their parameters (``params.actor``,
    ``params.critic``), their optimiser states, their recurrent states. A pytree whose leaves
    flatten actor first, as a ``{"actor", "critic"}`` dict did, and whose state dict (what
    ``params.msgpack`` and checkpoints hold) is that dict (a part a rule keeps nothing for,
    None, was absent from the dict: ``pgjax.loop.checkpoint`` restores such checkpoints)."""

    actor: Any
    critic: Any

    def map(self, fn: Callable, *others: "Parts", which: "Parts | None" = None) -> "Parts":
        """``Parts(fn(actor, *others' actors), fn(critic, *others' critics))``; where
        ``which`` (a ``Parts`` of bools) is False, this part is kept as it is."""
        def part(mine, theirs, on):
            return fn(mine, *theirs) if on else mine

        on = which if which is not None else BOTH
        return Parts(part(self.actor, [o.actor for o in others], on.actor),
                     part(self.critic, [o.critic for o in others], on.critic))

    def __getitem__(self, part: str):
        """``params["actor"]``, the ``{"actor", "critic"}`` dict of pgjax 0.2.0: still read,
        with a warning saying what to write instead."""
        import warnings

        if part not in ("actor", "critic"):
            raise KeyError(part)
        warnings.warn(f'params["{part}"] is params.{part} since pgjax 0.3.0 (actor-critic '
                      f'parameters are a pgjax.model.nets.Parts record); write params.{part}',
                      FutureWarning, stacklevel=2)
        return getattr(self, part)

    def chosen(self, which: "Parts") -> list:
        """The parts where ``which`` (a ``Parts`` of bools) is True, actor first."""
        return [x for x, on in ((self.actor, which.actor), (self.critic, which.critic)) if on]


BOTH = Parts(True, True)
ACTOR = Parts(True, False)
CRITIC = Parts(False, True)

ACTIVATIONS = {"tanh": nn.tanh, "relu": nn.relu, "elu": nn.elu, "silu": nn.silu}


def _orthonormal_columns(a):
    """Orthonormalise the columns of a [m, n] (m >= n) by classical Gram-Schmidt applied twice
    (numerically as good as Householder QR for these well-conditioned Gaussian matrices)."""
    idx = jnp.arange(a.shape[1])

    def body(j, q):
        before = (idx < j).astype(q.dtype)
        v = q[:, j]
        for _ in range(2):
            v = v - q @ ((q.T @ v) * before)
        return q.at[:, j].set(v / jnp.linalg.norm(v))

    return jax.lax.fori_loop(0, a.shape[1], body, a)


def orthogonal(gain: float):
    """Orthogonal initialiser (Saxe et al. 2014) with the semantics of flax's, built from
    plain array ops. LAPACK's batched QR, which flax's initialiser calls, deadlocks XLA's CPU
    thread pool when many seeds are initialised under ``vmap`` on a 2-core machine."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = math.prod(shape[:-1]), shape[-1]
        a = jax.random.normal(key, (max(rows, cols), min(rows, cols)), jnp.float32)
        q = _orthonormal_columns(a)
        if rows < cols:
            q = q.T
        return (gain * q).reshape(shape).astype(dtype)

    return init


def _dense(features, gain):
    return nn.Dense(features, kernel_init=orthogonal(gain), bias_init=nn.initializers.zeros)


def mlp_body(x, hidden: Sequence[int], activation: Callable):
    """The hidden layers of an MLP, created in the calling compact module's scope."""
    for width in hidden:
        x = activation(_dense(width, math.sqrt(2))(x))
    return x


class MLP(nn.Module):
    hidden: Sequence[int]
    out: int
    out_gain: float
    activation: Callable = nn.tanh

    @nn.compact
    def __call__(self, x):
        x = mlp_body(x, self.hidden, self.activation)  # before the head: layer names in order
        return _dense(self.out, self.out_gain)(x)


def _action_head(module, feats, action: ActionSpace, init_log_std: float, gain: float):
    """Distribution parameters of ``action`` from features: a Gaussian (mean, state-
    independent log-std) or categorical logits."""
    if action.kind == "box":
        mean = _dense(action.n, gain)(feats)
        log_std = module.param("log_std", nn.initializers.constant(init_log_std), (action.n,))
        return {"mean": mean, "log_std": log_std}
    return {"logits": _dense(action.n, gain)(feats)}


class GaussianActor(nn.Module):
    """An MLP mean and a learned state-independent std: ``exp(log_std)``; with ``std_max``
    the bounded ``std_max * sigmoid(std_logit)`` (HARL's parametrisation, which keeps the
    std below ``std_max``); with ``std_min`` as well, ``std_min + (std_max - std_min) *
    sigmoid(std_logit)``; with ``std_min`` alone, ``std_min + exp(log_std_excess)``, which
    keeps it above ``std_min`` with its gradient alive. Each starts at
    ``exp(init_log_std)``."""

    hidden: Sequence[int]
    action_dim: int
    activation: Callable = nn.tanh
    init_log_std: float = 0.0
    head_gain: float = 0.01
    std_max: Optional[float] = None
    std_min: Optional[float] = None

    @nn.compact
    def __call__(self, obs):
        mean = MLP(self.hidden, self.action_dim, self.head_gain, self.activation)(obs)
        init, lo = math.exp(self.init_log_std), self.std_min or 0.0
        if self.std_max is not None:
            u = (init - lo) / (self.std_max - lo)  # in (0, 1): validated
            logit = self.param("std_logit", nn.initializers.constant(math.log(u / (1 - u))),
                               (self.action_dim,))
            if lo:
                log_std = jnp.log(lo + (self.std_max - lo) * jax.nn.sigmoid(logit))
            else:
                log_std = math.log(self.std_max) + jax.nn.log_sigmoid(logit)
        elif lo:
            excess = self.param("log_std_excess", nn.initializers.constant(
                math.log(init - lo)), (self.action_dim,))  # init > lo: validated
            log_std = jnp.log(lo + jnp.exp(excess))
        else:
            log_std = self.param("log_std", nn.initializers.constant(self.init_log_std),
                                 (self.action_dim,))
        return {"mean": mean, "log_std": log_std}


class CategoricalActor(nn.Module):
    hidden: Sequence[int]
    num_actions: int
    activation: Callable = nn.tanh
    head_gain: float = 0.01

    @nn.compact
    def __call__(self, obs):
        return {"logits": MLP(self.hidden, self.num_actions, self.head_gain, self.activation)(obs)}


class Critic(nn.Module):
    hidden: Sequence[int]
    activation: Callable = nn.tanh

    @nn.compact
    def __call__(self, obs):
        return MLP(self.hidden, 1, 1.0, self.activation)(obs)[..., 0]


class StatefulActor(nn.Module):
    """S2PG actor over ``[o, z]``: a GRU-style update of z from features of o gives the mean
    of z'; the action head reads the features and that mean. z' has its own learned
    log-std, initially ``log(z_std)``."""

    obs_size: int
    z_dim: int
    hidden: Sequence[int]
    action: ActionSpace
    activation: Callable = nn.tanh
    init_log_std: float = 0.0
    z_std: float = 0.5
    head_gain: float = 0.01

    @nn.compact
    def __call__(self, x):
        o, z = x[..., :self.obs_size], x[..., self.obs_size:]
        h = mlp_body(o, self.hidden, self.activation)
        z_mean, _ = nn.GRUCell(self.z_dim, recurrent_kernel_init=orthogonal(1.0))(z, h)
        feats = jnp.concatenate([h, z_mean], -1)
        a = _action_head(self, feats, self.action, self.init_log_std, self.head_gain)
        z_log_std = self.param("z_log_std", nn.initializers.constant(math.log(self.z_std)),
                               (self.z_dim,))
        return {"a": a, "z_mean": z_mean, "z_log_std": z_log_std}


class GRUNet(nn.Module):
    """features = MLP body(o); h' = GRU(h, features); output = head(h'). One step on [N, D]
    with carry [N, H]."""

    hidden: Sequence[int]
    carry_size: int
    out: int
    out_gain: float
    activation: Callable = nn.tanh

    @nn.compact
    def __call__(self, h, o):
        x = mlp_body(o, self.hidden, self.activation)
        h, y = nn.GRUCell(self.carry_size, recurrent_kernel_init=orthogonal(1.0))(h, x)
        return h, _dense(self.out, self.out_gain)(y)


class RecurrentActor(nn.Module):
    hidden: Sequence[int]
    carry_size: int
    action: ActionSpace
    activation: Callable
    init_log_std: float
    head_gain: float

    @nn.compact
    def __call__(self, h, o):
        h, y = GRUNet(self.hidden, self.carry_size, self.action.n, self.head_gain,
                      self.activation)(h, o)
        if self.action.kind == "box":
            log_std = self.param("log_std", nn.initializers.constant(self.init_log_std),
                                 (self.action.n,))
            # batch-shaped, so that per-step outputs stack over time like the mean
            return h, {"mean": y, "log_std": jnp.broadcast_to(log_std, y.shape)}
        return h, {"logits": y}


class RecurrentCritic(nn.Module):
    hidden: Sequence[int]
    carry_size: int
    activation: Callable

    @nn.compact
    def __call__(self, h, o):
        h, y = GRUNet(self.hidden, self.carry_size, 1, 1.0, self.activation)(h, o)
        return h, y[..., 0]


FEEDFORWARD = ("auto", "gaussian", "categorical")  # the feedforward kinds' distributions


def activation_fn(name: str) -> Callable:
    if name not in ACTIVATIONS:
        raise ConfigError(f"unknown activation '{name}'; use one of {', '.join(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def feedforward_actor(action: ActionSpace, policy: str, hidden: Sequence[int],
                      activation: str, init_log_std: float = 0.0, head_gain: float = 0.01,
                      std_max: Optional[float] = None, std_min: Optional[float] = None):
    """(actor module, distribution) of a feedforward policy: ``policy`` is ``auto``
    (Gaussian for Box, categorical for Discrete) or an explicit kind, checked against the
    environment's action space."""
    act = activation_fn(activation)
    check_choice(policy, FEEDFORWARD, "feedforward policy", "policy=")
    if policy == "auto":
        policy = "gaussian" if action.kind == "box" else "categorical"
    if policy == "gaussian":
        if action.kind != "box":
            raise ConfigError(f"policy 'gaussian' needs a continuous (Box) action space but the "
                              f"environment's is {action.kind}; use --policy categorical or auto")
        return (GaussianActor(tuple(hidden), action.n, act, init_log_std, head_gain, std_max,
                              std_min), Gaussian())
    if action.kind != "discrete":
        raise ConfigError(f"policy 'categorical' needs a discrete action space but the "
                          f"environment's is {action.kind} ({action.n}-dim); use --policy "
                          f"gaussian or auto")
    return CategoricalActor(tuple(hidden), action.n, act, head_gain), Categorical()
