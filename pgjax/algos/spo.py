"""SPO — Simple Policy Optimization (Xie et al., ICML 2025).

Not the KL-clipping method of the paper's early arXiv versions, and unrelated to the
sequential-Monte-Carlo "SPO" of other libraries. SPO replaces PPO's clipped surrogate with

    L_spo(r, A) = r A - |A| / (2 eps) * (r - 1)^2,

a concave quadratic in r maximised at r = 1 + sign(A) eps. Inside and outside the trust region
its gradient in r points back to that maximiser, so ratios are pulled back instead of being
left alone (PPO's clipped objective has zero gradient outside [1 - eps, 1 + eps]). Everything
else — value loss, entropy bonus, epochs of minibatch Adam — is PPO's (``sgd_rule``).
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from pgjax.algos.common import Algorithm
from pgjax.algos.pieces import sgd_rule, surrogate_objective
from pgjax.algos.ppo import PPOConfig


@dataclasses.dataclass(frozen=True)
class SPOConfig(PPOConfig):
    """SPO hyperparameters (clip_eps is SPO's epsilon; clip_frac reports |r - 1| > eps)."""


def spo_surrogate(ratio, adv, hp):
    """Per-sample SPO objective (to be maximised)."""
    eps = hp.clip_eps
    return ratio * adv - jnp.abs(adv) / (2.0 * eps) * (ratio - 1.0) ** 2


def make_spo(cfg: SPOConfig, policy) -> Algorithm:
    return sgd_rule("spo", cfg, policy, surrogate_objective(spo_surrogate))
