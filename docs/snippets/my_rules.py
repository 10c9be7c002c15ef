"""Two update rules registered from outside pgjax: dual-clip PPO, and PPO with an adaptive KL
penalty. Train them with pgjax train --plugins my_rules.py --algo dualclip (or klpen)."""
import dataclasses

import jax.numpy as jnp

from pgjax.algos import PPOConfig, register, traced
from pgjax.algos.pieces import (adapt_kl_coef, clipped_surrogate, kl_penalty, sgd_rule,
                                surrogate_objective)


# 1. A new per-sample surrogate: dual-clip PPO (Ye et al. 2020) bounds the objective
#    below by c * A where the advantage A is negative.
@dataclasses.dataclass(frozen=True)
class DualClipConfig(PPOConfig):
    """Dual-clip PPO (--dualclip.<field>)."""

    dual_clip: float = traced(3.0)  # traced: can be swept with --grid
    """c > 1: where A < 0 the objective is at least c * A."""


def dual_clip_surrogate(ratio, adv, hp):  # per sample, to maximise
    ppo = clipped_surrogate(ratio, adv, hp)
    return jnp.where(adv < 0, jnp.maximum(ppo, hp.dual_clip * adv), ppo)


register("dualclip", DualClipConfig, lambda cfg, policy: sgd_rule(
    "dualclip", cfg, policy, surrogate_objective(dual_clip_surrogate)))


# 2. A rule with state of its own: a KL penalty whose coefficient beta adapts once per
#    update (Schulman et al. 2017, sec. 4; pgjax has it built in as ppo_kl).
@dataclasses.dataclass(frozen=True)
class KLPenConfig(PPOConfig):
    """PPO with an adaptive KL penalty (--klpen.<field>)."""

    d_targ: float = traced(0.01)
    """Target KL per update: beta doubles above 1.5 x d_targ and halves below d_targ / 1.5."""


def klpen_objective(t, hp, beta):  # t: PolicyTerms of a minibatch; beta: the rule's state
    return -(t.ratio * t.adv).mean() + kl_penalty(t, beta)


def adapt_beta(u):  # once per update; u.stats: KL etc. of the updated policy over the batch
    beta = adapt_kl_coef(u.state.extra, u.stats["kl_mean"], u.hp.d_targ)
    return u.params, u.state._replace(extra=beta), {"beta": beta}  # beta is recorded


register("klpen", KLPenConfig, lambda cfg, policy: sgd_rule(
    "klpen", cfg, policy, klpen_objective, init=lambda hp: jnp.float32(1.0),
    on_update=adapt_beta))
