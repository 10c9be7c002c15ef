"""Generalised advantage estimation that keeps termination and truncation apart.

Schulman et al. 2016, "High-Dimensional Continuous Control Using Generalized Advantage
Estimation". With ``done = terminated | truncated``::

    delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)
    A_t     = delta_t + gamma * lam * (1 - done_t) * A_{t+1}

where s'_t is the *real* next observation (the final one on truncation, never the reset one).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp


def gae(rewards, values, next_values, terminated, truncated, gamma, lam):
    """All inputs are time-major [T, N]; ``next_values[t] = V(s'_t)``.

    Returns (advantages [T, N], value targets [T, N] = advantages + values).
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
    return adv, adv + values
