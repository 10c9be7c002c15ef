"""Acting and collecting experience.

Both environment paths share these pieces:

- ``act``: the stochastic policy's action for a batch of raw observations (normalised with
  the frozen statistics inside), one key per call;
- ``Transition``: what a rollout records, raw and time-major [T, N, ...]. Everything the
  update needs beyond it (normalised observations, behaviour log-probabilities and
  distribution parameters, scaled rewards) is derived inside the update step from these raw
  fields and the acting parameters, so a batch collected by ``lax.scan`` over a JAX
  environment and one collected by the host loop over a Gymnasium vector environment go
  through the very same jitted code;
- ``scale_rewards``: reward scaling by the running std of the discounted return, a scan over
  time with the same statistics as a per-step update.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.normalize import RunningStats, normalize, update_stats


@struct.dataclass
class Transition:
    """Time-major [T, N, ...] record of one rollout.

    obs:            raw observation the policy acted on.
    action:         the sampled action (before any clipping to the action bounds).
    reward:         raw reward.
    terminated:     the MDP reached a terminal state (no bootstrap).
    truncated:      the time limit cut the episode (bootstrap from final_obs).
    final_obs:      the real next observation s'_t (the pre-reset one where an episode ended).
    episode_return: undiscounted return of an episode that ended at this step (0 elsewhere).
    episode_length: its length (0 elsewhere).
    """

    obs: jax.Array
    action: jax.Array
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


def step_key(key, t):
    """The sampling key of rollout step ``t``; the same on both environment paths."""
    return jax.random.fold_in(key, t)


def act(policy, actor_params, obs_stats: RunningStats | None, raw_obs, key):
    """Sample actions for raw observations [N, *obs]."""
    obs = normalize(obs_stats, raw_obs) if obs_stats is not None else raw_obs
    return policy.distribution.sample(policy.dist(actor_params, obs), key)


def rollout(env, policy, actor_params, obs_stats: RunningStats | None, carry: RolloutCarry,
            key, length: int, refresh: bool = True):
    """Run the stochastic policy for ``length`` steps of a JAX environment inside
    ``lax.scan``, first redrawing the environment's reset pool unless ``refresh`` is False.
    Returns (carry, Transition [T, N])."""

    def step(c: RolloutCarry, t):
        action = act(policy, actor_params, obs_stats, c.obs, step_key(key, t))
        env_state, ts = env.step(c.env_state, action)
        tr = Transition(obs=c.obs, action=action, reward=ts.reward, terminated=ts.terminated,
                        truncated=ts.truncated, final_obs=ts.final_obs,
                        episode_return=ts.episode_return, episode_length=ts.episode_length)
        return RolloutCarry(env_state, ts.obs), tr

    if refresh:
        carry = carry.replace(env_state=env.refresh(carry.env_state))
    return jax.lax.scan(step, carry, jnp.arange(length))


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
