"""Generalised advantage estimation that keeps termination and truncation apart.

Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation". With ``done = terminated | truncated``::

    delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}

where s'_t is the *real* next observation (the final one on truncation, never the reset one).
The value targets are the lambda-returns ``A_t + V(s_t)``. ``form="lambda-return"`` gives
the policy the advantage Brax's PPO uses (IMPALA's policy-gradient one)::

    A_t = r_t + gamma * (1 - terminated_t) * G_{t+1} - V(s_t)
        = delta_t + gamma * (1 - done_t) * A^GAE_{t+1}

with G_{t+1} the lambda-return from s'_t (V(s'_t) where the episode or the rollout ends): lambda
discounts only from the second step on.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


FORMS = ("gae", "lambda-return")  # the policy's advantage (see the module's docstring)


def gae(rewards, values, next_values, terminated, truncated, gamma, lam, form: str = "gae"):
    """All inputs are time-major [T, N]; ``next_values[t] = V(s'_t)``.

    Returns (the policy's advantages [T, N] of ``form``, value targets [T, N] = GAE
    advantages + values).
    """
    not_term = 1.0 - terminated.astype(jnp.float32)
    not_done = 1.0 - (terminated | truncated).astype(jnp.float32)
    deltas = rewards + gamma * not_term * next_values - values

    def backward(next_adv, x):
        delta, nd = x
        adv = delta + gamma * lam * nd * next_adv
        return adv, adv

    _, adv = jax.lax.scan(backward, jnp.zeros_like(values[0]), (deltas, not_done),
                          reverse=True)
    if form == "gae":
        return adv, adv + values
    later = jnp.concatenate([adv[1:], jnp.zeros_like(adv[:1])])  # A^GAE_{t+1} (0 past the end)
    return deltas + gamma * not_done * later, adv + values
