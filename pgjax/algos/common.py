"""Pieces every update rule shares: the batch, the optimiser step, shuffled minibatch epochs,
the value loss, and the trust-region diagnostics measured over the whole batch."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct


@struct.dataclass
class Batch:
    """One training batch, flattened over (time, env): every field has leading dim B.

    obs [B, *obs] (normalised as seen when acting), action [B, ...] (unclipped sample),
    log_prob [B] and dist (pytree, [B, ...]) of the behaviour policy, value [B] = V_old(s),
    advantage [B] (GAE, not normalised), ret [B] value target.

    weight [B] or None: a per-sample factor every update rule multiplies its (normalised)
    advantage by. None in single-agent training; the sequential multi-agent combinator
    (``pgjax.algos.multiagent``) passes the compounded ratio of the agents updated before.
    """

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    dist: Any
    value: jax.Array
    advantage: jax.Array
    ret: jax.Array
    weight: Any = None

    @property
    def size(self) -> int:
        return self.log_prob.shape[0]


class Algorithm(NamedTuple):
    """An update rule, in the style of an optax transformation.

    init(params, hp) -> algo_state
    update(params, algo_state, batch, key, hp, progress) -> (params, algo_state, metrics)

    ``hp`` holds the traced hyperparameters (floats that may differ across vmapped runs),
    ``progress`` in [0, 1) the fraction of training done (for annealing), ``metrics`` a flat
    dict of scalars recorded every update.
    """

    name: str
    config: Any
    init: Callable
    update: Callable


@dataclasses.dataclass(frozen=True)
class AlgoConfig:
    """Base for algorithm configs. Fields listed in ``TRACED`` are floats passed as traced
    hyperparameters (vmappable across runs); all other fields are static (shapes, loop counts,
    switches) and fixed at compile time."""

    TRACED: ClassVar[tuple[str, ...]] = ()
    # metric name -> message: a run whose update reports the metric > 0 is stopped with it
    ERRORS: ClassVar[dict[str, str]] = {}

    # loop counts that must be >= 1, and those that must also divide the batch evenly
    COUNTS: ClassVar[tuple[str, ...]] = ()
    BATCH_DIVISORS: ClassVar[tuple[str, ...]] = ()

    def traced(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in self.TRACED}

    def validate(self, batch_size: int, prefix: str,
                 unit: str = "transitions (num_envs x rollout_len)") -> None:
        """Raise ConfigError (one line, naming the flag to change) for bad loop counts."""
        from pgjax.errors import ConfigError

        for name in self.COUNTS:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; pass "
                                  f"--{prefix}.{name.replace('_', '-')} >= 1")
        for name in self.BATCH_DIVISORS:
            n = getattr(self, name)
            if batch_size % n:
                raise ConfigError(
                    f"batch of {batch_size} {unit} is not divisible "
                    f"into {n} {name.replace('_', ' ')}; change --num-envs, --rollout-len or "
                    f"--{prefix}.{name.replace('_', '-')}")


def adam(eps: float = 1e-5) -> optax.GradientTransformation:
    return optax.scale_by_adam(eps=eps)


def sgd_step(tx, opt_state, params, grads, lr, max_grad_norm):
    """Global-norm clip (traced threshold), Adam direction, step of size ``lr``.
    Returns (params, opt_state, pre-clip grad norm)."""
    g_norm = optax.global_norm(grads)
    scale = jnp.minimum(1.0, max_grad_norm / (g_norm + 1e-12))
    grads = jax.tree.map(lambda g: g * scale, grads)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = jax.tree.map(lambda p, u: p - lr * u, params, updates)
    return params, opt_state, g_norm


def shuffled_minibatches(key, batch, num_minibatches: int):
    """Permute a pytree with leading dim B and reshape it to [M, B // M, ...]."""
    size = jax.tree.leaves(batch)[0].shape[0]
    perm = jax.random.permutation(key, size)
    return jax.tree.map(
        lambda x: jnp.take(x, perm, axis=0).reshape((num_minibatches, -1) + x.shape[1:]), batch)


def value_loss(v, v_old, ret, clip_eps=None):
    """0.5 * mean squared error; with ``clip_eps`` the PPO2 pessimistic clipped form
    0.5 * max[(V - R)^2, (V_old + clip(V - V_old, +-eps) - R)^2]."""
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_clip = v_old + jnp.clip(v - v_old, -clip_eps, clip_eps)
        err = jnp.maximum(err, (v_clip - ret) ** 2)
    return 0.5 * err.mean()


def normalize_advantage(adv):
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def weighted(adv, batch):
    """The advantage an update rule optimises: ``adv`` times ``batch.weight`` when given."""
    return adv if batch.weight is None else adv * batch.weight


def trust_region_stats(policy, actor_params, batch: Batch) -> dict[str, jax.Array]:
    """KL(pi_old || pi_new) per state and ratio deviation, over the *whole* batch."""
    d_new = policy.dist(actor_params, batch.obs)
    kl = policy.distribution.kl(batch.dist, d_new)
    ratio = jnp.exp(policy.distribution.log_prob(d_new, batch.action) - batch.log_prob)
    return {"kl_mean": kl.mean(), "kl_max": kl.max(), "ratio_dev_max": jnp.abs(ratio - 1).max(),
            "entropy": policy.distribution.entropy(d_new).mean()}
