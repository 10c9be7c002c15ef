"""Collect a batch of experience with ``lax.scan``: T steps of N environments, no host trips."""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.distributions import broadcast_params
from pgjax.normalize import RunningStats, normalize, update_stats


@struct.dataclass
class Transition:
    """Time-major [T, N, ...] rollout record.

    obs / final_obs are normalised with the statistics used when acting (so that the update
    sees exactly the inputs the behaviour policy saw); raw_obs feeds the statistics update.
    reward is the (optionally scaled) training reward; episode_return/episode_length are the
    raw statistics of episodes that ended at this step (0 elsewhere).
    """

    obs: jax.Array
    raw_obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    dist: Any
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array


@struct.dataclass
class RolloutCarry:
    env_state: Any
    obs: jax.Array  # [N, *obs] raw observation to act on
    ret_stats: RunningStats  # running statistics of the discounted return (reward scaling)
    ret_acc: jax.Array  # [N] discounted return accumulator


def rollout(env, policy, actor_params, obs_stats: RunningStats | None, carry: RolloutCarry,
            key, length: int, gamma, scale_reward: bool):
    """Run the stochastic policy for ``length`` steps. Returns (carry, Transition [T, N])."""
    dist = policy.distribution
    norm = (lambda x: normalize(obs_stats, x)) if obs_stats is not None else (lambda x: x)

    def step(c: RolloutCarry, k):
        obs = norm(c.obs)
        d = policy.dist(actor_params, obs)
        action = dist.sample(d, k)
        env_state, ts = env.step(c.env_state, action)
        reward, ret_stats, ret_acc = ts.reward, c.ret_stats, c.ret_acc
        if scale_reward:
            ret_acc = ret_acc * gamma + ts.reward
            ret_stats = update_stats(ret_stats, ret_acc)
            reward = jnp.clip(ts.reward / jnp.sqrt(ret_stats.var + 1e-8), -10.0, 10.0)
            ret_acc = jnp.where(ts.done, 0.0, ret_acc)
        tr = Transition(obs=obs, raw_obs=c.obs, action=action, log_prob=dist.log_prob(d, action),
                        dist=broadcast_params(d, obs.shape[:1]), reward=reward,
                        terminated=ts.terminated, truncated=ts.truncated,
                        final_obs=norm(ts.final_obs), episode_return=ts.episode_return,
                        episode_length=ts.episode_length)
        return RolloutCarry(env_state, ts.obs, ret_stats, ret_acc), tr

    carry = carry.replace(env_state=env.refresh(carry.env_state))
    return jax.lax.scan(step, carry, jax.random.split(key, length))
