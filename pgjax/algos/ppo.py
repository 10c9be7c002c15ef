"""PPO with the clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization
Algorithms"), with the implementation details of the reference implementations switchable
(Huang et al. 2022, "The 37 Implementation Details of Proximal Policy Optimization"), and
PPO with the adaptive KL penalty of the same paper's section 4 (``ppo_kl``).

Both are ``pgjax.algos.pieces.sgd_rule`` with an objective; SPO is the same with its own
surrogate (``pgjax.algos.spo``).
"""
from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from pgjax.algos.common import Algorithm
from pgjax.algos.pieces import (SGDConfig, adapt_kl_coef, clipped_surrogate, kl_penalty,
                                ratio_surrogate, sgd_rule, surrogate_objective)
from pgjax.core.hparams import traced


@dataclasses.dataclass(frozen=True)
class PPOConfig(SGDConfig):
    """PPO hyperparameters; defaults are the reference continuous-control settings."""

    clip_eps: float = traced(0.2)
    """Ratio clipping range epsilon (traced)."""


def make_ppo(cfg: PPOConfig, policy) -> Algorithm:
    return sgd_rule("ppo", cfg, policy, surrogate_objective(clipped_surrogate))


@dataclasses.dataclass(frozen=True)
class PPOKLConfig(PPOConfig):
    """PPO with an adaptive KL penalty: minimise -mean[r A] + beta mean KL(pi_old || pi);
    after each update beta doubles when the batch's mean KL exceeds 1.5 d_targ and halves
    below d_targ / 1.5 (Schulman et al. 2017, sec. 4; RLlib's PPO adds the penalty to the
    clipped surrogate: clip true). beta is part of the rule's state (checkpointed) and
    recorded as beta. clip_eps is used only when clip (clip_frac reports |r - 1| >
    clip_eps either way)."""

    d_targ: float = traced(0.01)
    """Target mean KL per update (traced)."""
    beta0: float = traced(1.0)
    """Initial penalty coefficient beta (traced)."""
    clip: bool = False
    """Also clip the surrogate, as RLlib's PPO does."""


def make_ppo_kl(cfg: PPOKLConfig, policy) -> Algorithm:
    surrogate = surrogate_objective(clipped_surrogate if cfg.clip else ratio_surrogate)

    def objective(t, hp, beta):
        pg_loss = surrogate(t, hp, beta)
        return pg_loss + kl_penalty(t, beta), {"pg_loss": pg_loss}

    def adapt(u):
        beta = adapt_kl_coef(u.state.extra, u.stats["kl_mean"], u.hp.d_targ)
        return u.params, u.state._replace(extra=beta), {"beta": beta}

    return sgd_rule("ppo_kl", cfg, policy, objective, init=lambda hp: jnp.float32(hp.beta0),
                    on_update=adapt)
