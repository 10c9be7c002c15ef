"""Collecting experience: the one rollout every policy kind and environment uses.

``rollout`` runs a policy kind (``pgjax.model.policies``) for T steps inside ``lax.scan``, threading
its acting carry (restarted at episode ends), and records a ``Transition``: raw and
time-major [T, N, ...]. Everything the update needs beyond it (normalised observations,
behaviour log-probabilities and distribution parameters, scaled rewards) is derived in the
update step from these raw fields and the acting parameters.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.model.normalize import RunningStats, normalize


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
    carry: Any = None  # the policy kind's acting carry before acting on obs (None: no memory)


def step_key(key, t):
    """The sampling key of rollout step ``t``; the same on both environment paths."""
    return jax.random.fold_in(key, t)


def rollout(env, policy, actor_params, obs_stats: RunningStats | None, carry: RolloutCarry,
            key, length: int):
    """Run the stochastic policy for ``length`` steps of ``env`` (whatever ``carry`` holds:
    the caller decides about the reset pool). Returns (carry, Transition [T, N])."""

    def step(c: RolloutCarry, t):
        obs = normalize(obs_stats, c.obs) if obs_stats is not None else c.obs
        h, action = policy.act(actor_params, c.carry, obs, step_key(key, t))
        env_state, ts = env.step(c.env_state, action)
        tr = Transition(obs=c.obs, action=action, reward=ts.reward, terminated=ts.terminated,
                        truncated=ts.truncated, final_obs=ts.final_obs,
                        episode_return=ts.episode_return, episode_length=ts.episode_length)
        return RolloutCarry(env_state, ts.obs, policy.reset_carry(h, ts.done)), tr

    return jax.lax.scan(step, carry, jnp.arange(length))
