"""Running mean/variance statistics (parallel Welford merge), observation normalisation and
reward scaling, and their settings (``NormConfig``, ``--norm.*``). The statistics are a pytree
that lives in the train state and checkpoint."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.core.errors import ConfigError, check_choice


@dataclasses.dataclass(frozen=True)
class NormConfig:
    """Observation and reward normalisation (--norm.<field>)."""

    normalize_obs: bool = True
    """Running mean/std observation normalisation (statistics kept in the train state)."""
    obs_stats: str = "running"
    """What an update of the observation statistics does to the networks. running: nothing,
    so the same parameters see differently normalised inputs from then on (the reference
    behaviour of cleanrl, Stable-Baselines3 and Brax); preserve: the layers that read the
    observation are refitted so that the policy and value outputs stay what they were."""
    obs_stats_steps: int = 0
    """Update the observation statistics only during the first this many environment steps
    of a run and keep them fixed afterwards (a converged policy then sees the same inputs
    for the same states); 0: update them throughout training."""
    normalize_reward: bool = True
    """Scale rewards by the running std of the discounted return (then clip to +-10)."""
    value_norm: bool = False
    """Keep rewards and advantages raw and train the critic on value targets divided by a
    running std of the lambda-returns (tianshou's rew_norm, as in FixPO's runs; HARL's
    ValueNorm without its mean); needs --norm.no-normalize-reward."""
    reward_scale: float = 1.0
    """Multiply every reward by this constant first (Brax's reward_scaling)."""

    def validate(self, cfg) -> None:
        check_choice(self.obs_stats, ("running", "preserve"), "norm.obs_stats",
                     "--norm.obs-stats")
        if self.value_norm and self.normalize_reward:
            raise ConfigError("--norm.value-norm scales the value targets instead of the "
                              "rewards; pass --norm.no-normalize-reward with it")
        if not self.reward_scale > 0:
            raise ConfigError(f"norm.reward_scale must be > 0, got {self.reward_scale}; pass a "
                              f"positive --norm.reward-scale")
        if self.obs_stats_steps < 0:
            raise ConfigError(f"norm.obs_stats_steps must be >= 0, got {self.obs_stats_steps}; "
                              f"pass --norm.obs-stats-steps 0 to update them throughout")
        if self.obs_stats != "preserve":
            return
        if cfg.scheme is not None:
            raise ConfigError("--norm.obs-stats preserve refits single-agent networks; "
                              "multi-agent training uses --norm.obs-stats running")
        from pgjax.core.registry import POLICY_KINDS

        if POLICY_KINDS.get(cfg.policy).memory and not (cfg.net.actor_hidden
                                                         and cfg.net.critic_hidden):
            raise ConfigError("--norm.obs-stats preserve refits the dense layer that reads the "
                              "observation; pass --net.actor-hidden / --net.critic-hidden with "
                              "one or more sizes")


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
