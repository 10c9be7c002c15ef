"""Actor-critic networks: separate actor and critic MLPs with orthogonal initialisation
(gain sqrt(2) on hidden layers, 0.01 on the policy head, 1.0 on the value head), as in the
reference PPO implementations (Huang et al. 2022, "The 37 Implementation Details of PPO")."""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from pgjax.distributions import Categorical, Gaussian
from pgjax.envs.core import ActionSpace, ConfigError

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


class MLP(nn.Module):
    hidden: Sequence[int]
    out: int
    out_gain: float
    activation: Callable = nn.tanh

    @nn.compact
    def __call__(self, x):
        for h in self.hidden:
            x = self.activation(_dense(h, math.sqrt(2))(x))
        return _dense(self.out, self.out_gain)(x)


class GaussianActor(nn.Module):
    hidden: Sequence[int]
    action_dim: int
    activation: Callable = nn.tanh
    init_log_std: float = 0.0
    head_gain: float = 0.01

    @nn.compact
    def __call__(self, obs):
        mean = MLP(self.hidden, self.action_dim, self.head_gain, self.activation)(obs)
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


class ActorCritic(NamedTuple):
    """A policy kind: how to build parameters and turn observations into action distributions
    and values. ``params = {"actor": ..., "critic": ...}``.

    dist(actor_params, obs [B, *obs]) -> distribution parameters (pytree, batched over B)
    value(critic_params, obs [B, *obs]) -> [B]
    """

    actor: nn.Module
    critic: nn.Module
    distribution: object  # Gaussian() or Categorical()

    def init(self, key, obs_shape):
        k_a, k_c = jax.random.split(key)
        dummy = jnp.zeros((1,) + tuple(obs_shape))
        return {"actor": self.actor.init(k_a, dummy), "critic": self.critic.init(k_c, dummy)}

    def dist(self, actor_params, obs):
        return self.actor.apply(actor_params, obs)

    def value(self, critic_params, obs):
        return self.critic.apply(critic_params, obs)


POLICIES = ("auto", "gaussian", "categorical", "stateful", "window", "recurrent")


def make_actor_critic(action: ActionSpace, policy: str = "auto",
                      actor_hidden: Sequence[int] = (64, 64),
                      critic_hidden: Sequence[int] = (64, 64), activation: str = "tanh",
                      init_log_std: float = 0.0, head_gain: float = 0.01) -> ActorCritic:
    """``policy`` is ``auto`` (Gaussian for Box, categorical for Discrete) or an explicit kind,
    checked against the environment's action space."""
    if activation not in ACTIVATIONS:
        raise ConfigError(f"unknown activation '{activation}'; use one of {', '.join(ACTIVATIONS)}")
    if policy not in POLICIES[:3]:
        raise ConfigError(f"unknown policy '{policy}'; use --policy with one of {', '.join(POLICIES)}")
    if policy == "auto":
        policy = "gaussian" if action.kind == "box" else "categorical"
    act = ACTIVATIONS[activation]
    if policy == "gaussian":
        if action.kind != "box":
            raise ConfigError(f"policy 'gaussian' needs a continuous (Box) action space but the "
                              f"environment's is {action.kind}; use --policy categorical or auto")
        actor = GaussianActor(tuple(actor_hidden), action.n, act, init_log_std, head_gain)
        dist = Gaussian()
    else:
        if action.kind != "discrete":
            raise ConfigError(f"policy 'categorical' needs a discrete action space but the "
                              f"environment's is {action.kind} ({action.n}-dim); use --policy "
                              f"gaussian or auto")
        actor = CategoricalActor(tuple(actor_hidden), action.n, act, head_gain)
        dist = Categorical()
    return ActorCritic(actor, Critic(tuple(critic_hidden), act), dist)
