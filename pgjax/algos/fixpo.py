"""FixPO (Zentner, Puri, Huang & Sukhatme 2023, "Guaranteed Trust Region Optimization via
Two-Phase KL Penalization").

Primary phase, each minibatch, with beta held fixed inside the step:

    L_theta = -mean[r A] + beta * mean_s KL_s + c_v L_V - c_e H,

then beta takes an Adam step on L_beta = beta * (eps_KL - C_beta * max_{s in minibatch} KL_s)
and is clipped at 0: beta rises while the minibatch's max KL exceeds eps_KL / C_beta.

Fixup phase (after the last epoch, or after every epoch): passes over the batch in fixed
minibatches; every minibatch whose max per-state KL exceeds eps_KL gets a gradient step on
beta * mean KL (and the beta update); the phase ends after a pass with no violation. A pass
without violations takes no step, so at its end every sampled state satisfies KL_s <= eps_KL
— the guarantee. The number of passes is capped; hitting the cap is reported as an error.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from pgjax.algos.common import (AlgoConfig, Algorithm, adam, normalize_advantage, sgd_step, weighted,
                                shuffled_minibatches, trust_region_stats, value_loss)


class FixPOState(NamedTuple):
    """FixPO's state: Adam states {"actor": ..., "critic": ...}, beta and beta's Adam state."""
    opt: dict
    beta: Any
    beta_opt: Any


class FixupCarry(NamedTuple):
    """Fixup-loop carry: passes done, violated minibatches this pass, fixup steps so far."""
    passes: Any
    violations: Any
    params: Any
    st: FixPOState
    steps: Any


class EpochCarry(NamedTuple):
    """Epoch-scan carry and fixup result: params, state, fixup steps, fixup cap reached."""
    params: Any
    st: FixPOState
    fix_steps: Any
    cap_hit: Any


@dataclasses.dataclass(frozen=True)
class FixPOConfig(AlgoConfig):
    """FixPO hyperparameters; defaults from the authors' runs."""

    lr: float = 3e-4
    """Adam learning rate (traced; linearly annealed when anneal_lr)."""
    eps_kl: float = 0.5
    """Guaranteed bound on every sampled state's KL(pi_old || pi_new) (traced)."""
    c_beta: float = 3.0
    """Target factor: the primary phase aims for max KL <= eps_kl / c_beta (traced)."""
    beta0: float = 1.0
    """Initial KL penalty coefficient beta (traced)."""
    beta_lr: float = 0.01
    """Adam learning rate of beta (traced)."""
    vf_coef: float = 0.1
    """Value-loss coefficient (traced)."""
    ent_coef: float = 0.0
    """Entropy-bonus coefficient (traced)."""
    clip_vloss: bool = False
    """Use the clipped (pessimistic) value loss, as the authors' runs do."""
    vf_clip_eps: float = 0.2
    """Value clipping range, used when clip_vloss (traced)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (traced)."""
    epochs: int = 10
    """Primary-phase passes over the batch."""
    minibatches: int = 4
    """Primary-phase minibatches per epoch (2048 / 4 = 512, the authors' size)."""
    fixup_minibatches: int = 2
    """Fixup-phase minibatches per pass (2048 / 2 = 1024, the authors' size)."""
    fixup_every_epoch: bool = True
    """Run the fixup phase after every epoch (the authors' paper runs, fixup_every_repeat=1);
    false: only once, after the last epoch."""
    fixup_max_passes: int = 1000
    """Cap on fixup passes; reaching it stops training with an error."""
    norm_adv: bool = False
    """Normalise advantages per minibatch (off in the authors' runs)."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0."""
    adam_eps: float = 1e-5
    """Adam epsilon."""

    TRACED = ("lr", "eps_kl", "c_beta", "beta0", "beta_lr", "vf_coef", "ent_coef", "vf_clip_eps",
              "max_grad_norm")
    ERRORS = {"fixup_cap_hit": "FixPO's fixup phase reached fixup_max_passes without bringing "
                               "every state's KL under eps_kl; lower --fixpo.lr or raise "
                               "--fixpo.fixup-max-passes"}

    COUNTS = ('epochs', 'minibatches', 'fixup_minibatches', 'fixup_max_passes')
    BATCH_DIVISORS = ('minibatches', 'fixup_minibatches')


def make_fixpo(cfg: FixPOConfig, policy) -> Algorithm:
    dist = policy.distribution
    tx = adam(cfg.adam_eps)
    beta_tx = optax.scale_by_adam()

    def kl_terms(actor, mb):
        d = policy.dist(actor, mb.obs)
        return d, dist.kl(mb.dist, d)

    def primary_loss(params, mb, beta, hp):
        d, kl = kl_terms(params["actor"], mb)
        ratio = jnp.exp(dist.log_prob(d, mb.action) - mb.log_prob)
        adv = weighted(normalize_advantage(mb.advantage) if cfg.norm_adv else mb.advantage, mb)
        pg_loss = -(ratio * adv).mean()
        v_loss = value_loss(policy.value(params["critic"], mb.obs), mb.value, mb.ret,
                            hp["vf_clip_eps"] if cfg.clip_vloss else None)
        entropy = dist.entropy(d).mean()
        loss = pg_loss + beta * kl.mean() + hp["vf_coef"] * v_loss - hp["ent_coef"] * entropy
        return loss, {"pg_loss": pg_loss, "v_loss": v_loss, "kl_max_mb": kl.max()}

    def beta_step(beta, beta_opt, max_kl, hp):
        grad = hp["eps_kl"] - hp["c_beta"] * max_kl  # d L_beta / d beta
        upd, beta_opt = beta_tx.update(grad, beta_opt)
        return jnp.maximum(beta - hp["beta_lr"] * upd, 0.0), beta_opt

    def init(params, hp):
        opt = {"actor": tx.init(params["actor"]), "critic": tx.init(params["critic"])}
        return FixPOState(opt, jnp.float32(hp["beta0"]), beta_tx.init(jnp.float32(0.0)))

    def apply(opt, params, grads, lr, hp, parts):
        """Adam steps on the named parts of params with a joint global-norm clip."""
        g_norm = optax.global_norm({p: grads[p] for p in parts})
        scale = jnp.minimum(1.0, hp["max_grad_norm"] / (g_norm + 1e-12))
        params, opt = dict(params), dict(opt)
        for p in parts:
            params[p], opt[p], _ = sgd_step(
                tx, opt[p], params[p], jax.tree.map(lambda g: g * scale, grads[p]), lr, jnp.inf)
        return params, opt, g_norm

    def fixup(params, st, batch, hp, lr):
        mbs = jax.tree.map(lambda x: x.reshape((cfg.fixup_minibatches, -1) + x.shape[1:]), batch)

        def mb_step(c, mb):  # c: FixupCarry; violations counts this pass's violated minibatches
            (_, kl_max), grads = jax.value_and_grad(
                lambda a: (lambda kl: (c.st.beta * kl.mean(), kl.max()))(kl_terms(a, mb)[1]),
                has_aux=True)(c.params["actor"])
            violated = kl_max > hp["eps_kl"]
            new_params, new_opt, _ = apply(c.st.opt, c.params, {"actor": grads}, lr, hp, ("actor",))
            st = FixPOState(new_opt, *beta_step(c.st.beta, c.st.beta_opt, kl_max, hp))
            new = c._replace(params=new_params, st=st, violations=c.violations + 1)
            return jax.tree.map(lambda a, b: jnp.where(violated, a, b), new, c), None

        def one_pass(c):
            c, _ = jax.lax.scan(mb_step, c._replace(violations=jnp.int32(0)), mbs)
            return c._replace(passes=c.passes + 1, steps=c.steps + c.violations)

        z = jnp.int32(0)
        c = jax.lax.while_loop(lambda c: (c.violations > 0) & (c.passes < cfg.fixup_max_passes),
                               one_pass, FixupCarry(z, jnp.int32(1), params, st, z))
        return EpochCarry(c.params, c.st, c.steps, c.violations > 0)

    def update(params, st, batch, key, hp, progress):
        lr = hp["lr"] * (1.0 - progress) if cfg.anneal_lr else hp["lr"]

        def mb_step(c, mb):  # c: EpochCarry; fix_steps and cap_hit pass through
            (_, aux), g = jax.value_and_grad(primary_loss, has_aux=True)(c.params, mb, c.st.beta, hp)
            params, opt, g_norm = apply(c.st.opt, c.params, g, lr, hp, ("actor", "critic"))
            st = FixPOState(opt, *beta_step(c.st.beta, c.st.beta_opt, aux["kl_max_mb"], hp))
            return c._replace(params=params, st=st), {**aux, "grad_norm": g_norm}

        def fixed(c):
            """(c after a fixup phase, the batch's max KL before it)."""
            kl_before = kl_terms(c.params["actor"], batch)[1].max()
            f = fixup(c.params, c.st, batch, hp, lr)
            return f._replace(fix_steps=c.fix_steps + f.fix_steps,
                              cap_hit=c.cap_hit | f.cap_hit), kl_before

        def epoch(c, k):
            c, logs = jax.lax.scan(mb_step, c, shuffled_minibatches(k, batch, cfg.minibatches))
            if cfg.fixup_every_epoch:
                c, logs["kl_before"] = fixed(c)
            return c, logs

        c, logs = jax.lax.scan(epoch, EpochCarry(params, st, jnp.int32(0), jnp.bool_(False)),
                               jax.random.split(key, cfg.epochs))
        if cfg.fixup_every_epoch:
            kl_before = logs["kl_before"].max()  # the largest over the epochs' fixup phases
        else:
            c, kl_before = fixed(c)
        primary, fix_steps = cfg.epochs * cfg.minibatches, c.fix_steps.astype(jnp.float32)
        metrics = {"pg_loss": logs["pg_loss"].mean(), "v_loss": logs["v_loss"].mean(),
                   "grad_norm": logs["grad_norm"].mean(), "beta": c.st.beta, "lr": lr,
                   "primary_steps": jnp.float32(primary), "fixup_steps": fix_steps,
                   "grad_steps": primary + fix_steps, "fixup_fraction": fix_steps / primary,
                   "fixup_cap_hit": c.cap_hit.astype(jnp.float32), "kl_max_before_fixup": kl_before}
        metrics.update(trust_region_stats(policy, c.params["actor"], batch))
        return c.params, c.st, metrics

    return Algorithm("fixpo", cfg, init, update)
