"""The loss terms update rules are built from: advantages as a rule optimises them, the
policy being updated beside the behaviour policy (``PolicyTerms``), the clipped and plain
surrogates, the KL penalty and its adaptive coefficient, the value loss, and the
actor-critic loss ``sgd_rule`` minimises (all re-exported by ``pgjax.algos.pieces``)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from pgjax.algos.common import Batch


def normalize_advantage(adv):
    """Advantages shifted and scaled to mean 0 and std 1 (over the given axis-free array)."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def weighted(adv, batch: Batch):
    """The advantage an update rule optimises: ``adv`` times ``batch.weight`` when given."""
    return adv if batch.weight is None else adv * batch.weight


class PolicyTerms(NamedTuple):
    """The policy being updated on a minibatch, next to the behaviour policy that collected
    it: its distribution ``dist``, ``log_ratio`` = log pi(a|s) - log pi_old(a|s), ``ratio``,
    the advantage ``adv`` to optimise (normalised when asked, times ``Batch.weight``), and,
    computed on use, ``kl`` = KL(pi_old || pi) and ``entropy``, per sample."""

    dist: Any
    old_dist: Any
    distribution: Any
    log_ratio: jax.Array
    ratio: jax.Array
    adv: jax.Array

    @property
    def kl(self) -> jax.Array:
        return self.distribution.kl(self.old_dist, self.dist)

    @property
    def entropy(self) -> jax.Array:
        return self.distribution.entropy(self.dist)


def policy_terms(policy, actor_params, mb: Batch, norm_adv: bool) -> PolicyTerms:
    """``PolicyTerms`` of ``actor_params`` on the minibatch ``mb`` (``policy``: the view a
    rule is given, with ``dist(actor_params, obs)`` and ``distribution``)."""
    d = policy.dist(actor_params, mb.obs)
    log_ratio = policy.distribution.log_prob(d, mb.action) - mb.log_prob
    adv = weighted(normalize_advantage(mb.advantage) if norm_adv else mb.advantage, mb)
    return PolicyTerms(d, mb.dist, policy.distribution, log_ratio, jnp.exp(log_ratio), adv)


def ratio_surrogate(ratio, adv, hp):
    """Per-sample r A, the unclipped surrogate (to be maximised)."""
    return ratio * adv


def clipped_surrogate(ratio, adv, hp):
    """Per-sample PPO objective min(r A, clip(r, 1 - eps, 1 + eps) A), eps = hp.clip_eps
    (to be maximised)."""
    eps = hp.clip_eps
    return jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv)


def surrogate_objective(surrogate: Callable) -> Callable:
    """An objective from a per-sample ``surrogate(ratio, adv, hp)`` to maximise: the loss
    -mean(surrogate)."""
    return lambda t, hp, extra: -surrogate(t.ratio, t.adv, hp).mean()


def kl_penalty(t: PolicyTerms, coef):
    """``coef`` times the mean per-sample KL(pi_old || pi): a penalty term for an objective."""
    return coef * t.kl.mean()


def adapt_kl_coef(coef, kl, target, tolerance: float = 1.5, factor: float = 2.0):
    """Schulman et al. (2017, sec. 4): ``coef`` x factor when ``kl`` > tolerance x target,
    / factor when ``kl`` < target / tolerance, else unchanged."""
    return jnp.where(kl > tolerance * target, coef * factor,
                     jnp.where(kl < target / tolerance, coef / factor, coef))


def value_loss(v, v_old, ret, clip_eps=None):
    """0.5 * mean squared error; with ``clip_eps`` the PPO2 pessimistic clipped form
    0.5 * max[(V - R)^2, (V_old + clip(V - V_old, +-eps) - R)^2]."""
    err = (v - ret) ** 2
    if clip_eps is not None:
        v_clip = v_old + jnp.clip(v - v_old, -clip_eps, clip_eps)
        err = jnp.maximum(err, (v_clip - ret) ** 2)
    return 0.5 * err.mean()


def _loss_and_aux(out):
    return out if isinstance(out, tuple) else (out, {})


def actor_critic_loss(cfg, policy, objective: Callable) -> Callable:
    """loss(params, mb, hp, extra=()) -> (loss, aux) with
    loss = objective + c_v L_V - c_e H; aux: pg_loss (the objective, unless the objective's
    own aux names its surrogate part so), v_loss, approx_kl (the k3 estimate
    mean[(r - 1) - log r]), clip_frac (|r - 1| > hp.clip_eps, when the rule has one; for
    the S2PG product policy also clip_frac_a and clip_frac_z, the same test on the action's
    and the internal state's factor of r alone) and whatever else the objective returns as
    its own aux."""

    def loss_fn(params, mb, hp, extra=()):
        t = policy_terms(policy, params.actor, mb, cfg.norm_adv)
        pg_loss, own = _loss_and_aux(objective(t, hp, extra))
        v = policy.value(params.critic, mb.obs)
        v_loss = value_loss(v, mb.value, mb.ret, hp.vf_clip_eps if cfg.clip_vloss else None)
        loss = pg_loss + hp.vf_coef * v_loss - hp.ent_coef * t.entropy.mean()
        aux = {"pg_loss": pg_loss, "v_loss": v_loss,
               "approx_kl": ((t.ratio - 1.0) - t.log_ratio).mean()}
        if cfg.desired_kl > 0:  # the KL-adaptive step size reads the exact mean KL
            aux["policy_kl"] = t.kl.mean()
        if getattr(hp, "clip_eps", None) is not None:  # a rule with a clipping range
            aux["clip_frac"] = (jnp.abs(t.ratio - 1.0) > hp.clip_eps).mean()
            z_log_prob = getattr(t.distribution, "z_log_prob", None)
            if z_log_prob is not None:  # S2PG: r = r_a r_z, each factor's clip fraction too
                log_rz = z_log_prob(t.dist, mb.action) - z_log_prob(t.old_dist, mb.action)
                for part, log_r in (("a", t.log_ratio - log_rz), ("z", log_rz)):
                    aux[f"clip_frac_{part}"] = (jnp.abs(jnp.exp(log_r) - 1.0)
                                                > hp.clip_eps).mean()
        return loss, {**aux, **own}

    return loss_fn
