"""Running mean/variance statistics (parallel Welford merge), observation normalisation and
reward scaling. The statistics are a pytree that lives in the train state and checkpoint."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class RunningStats:
    mean: jax.Array
    var: jax.Array
    count: jax.Array  # scalar float


def init_stats(shape: tuple = ()) -> RunningStats:
    return RunningStats(mean=jnp.zeros(shape, jnp.float32), var=jnp.ones(shape, jnp.float32),
                        count=jnp.float32(1e-4))


def update_stats(stats: RunningStats, x: jax.Array) -> RunningStats:
    """Merge a batch ``x`` of shape [B, *shape] into the statistics (Chan et al. 1979)."""
    x = x.reshape((-1,) + stats.mean.shape).astype(jnp.float32)
    b_mean, b_var, b_count = x.mean(0), x.var(0), jnp.float32(x.shape[0])
    delta = b_mean - stats.mean
    total = stats.count + b_count
    mean = stats.mean + delta * b_count / total
    m2 = stats.var * stats.count + b_var * b_count + delta**2 * stats.count * b_count / total
    return RunningStats(mean=mean, var=m2 / total, count=total)


def normalize(stats: RunningStats, x: jax.Array, clip: float = 10.0) -> jax.Array:
    return jnp.clip((x - stats.mean) / jnp.sqrt(stats.var + 1e-8), -clip, clip)


def scale_rewards(ret_stats: RunningStats, ret_acc, reward, done, gamma):
    """Divide rewards [T, N] by the running std of the discounted return (then clip to
    +-10), updating the statistics step by step. Returns (ret_stats, ret_acc, scaled)."""

    def step(c, x):
        stats, acc = c
        r, d = x
        acc = acc * gamma + r
        stats = update_stats(stats, acc)
        scaled = jnp.clip(r / jnp.sqrt(stats.var + 1e-8), -10.0, 10.0)
        return (stats, jnp.where(d, 0.0, acc)), scaled

    (ret_stats, ret_acc), scaled = jax.lax.scan(step, (ret_stats, ret_acc), (reward, done))
    return ret_stats, ret_acc, scaled
