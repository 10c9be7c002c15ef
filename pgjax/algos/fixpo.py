"""FixPO (Zentner, Puri, Huang & Sukhatme 2023, "Guaranteed Trust Region Optimization via
Two-Phase KL Penalization").

Primary phase, each minibatch, with beta held fixed inside the step:

    L_theta = -mean[r A] + beta * mean_s KL_s + c_v L_V - c_e H,

then beta takes an Adam step on L_beta = beta * (eps_KL - C_beta * max_{s in minibatch} KL_s)
and is clipped at 0: beta rises while the minibatch's max KL exceeds eps_KL / C_beta.

Fixup phase (after every epoch, or only after the last): passes over the batch in fixed
minibatches; every minibatch whose max per-state KL exceeds eps_KL gets a gradient step on
beta * mean KL (and the beta update); the phase ends after a pass with no violation. A pass
without violations takes no step, so at its end every sampled state satisfies KL_s <= eps_KL
— the guarantee. The number of passes is capped; hitting the cap is reported as an error.

Built from ``pgjax.algos.pieces``: the primary phase is ``sgd_rule`` with beta in the rule's
state (``on_minibatch`` steps it), the fixup phase is its ``on_epoch`` hook.
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from pgjax.algos.common import MAX, Algorithm
from pgjax.algos.pieces import (EpochResult, SGDConfig, SGDState, adam_direction, clipped_adam_step,
                                kl_penalty, policy_terms, sgd_rule)
from pgjax.core.hparams import count, traced
from pgjax.model.nets import ACTOR, Parts


class Beta(NamedTuple):
    """FixPO's own state (``SGDState.extra``): the KL coefficient beta and its Adam state."""
    beta: Any
    opt: Any


class FixupCarry(NamedTuple):
    """Fixup-loop carry: passes done, violated minibatches this pass, fixup steps so far."""
    passes: Any
    violations: Any
    params: Any
    state: SGDState
    steps: Any


@dataclasses.dataclass(frozen=True)
class FixPOConfig(SGDConfig):
    """FixPO hyperparameters; defaults from the authors' runs (the fields declared here
    differ from SGDConfig's in default or meaning)."""

    eps_kl: float = traced(0.5)
    """Guaranteed bound on every sampled state's KL(pi_old || pi_new) (traced)."""
    c_beta: float = traced(3.0)
    """Target factor: the primary phase aims for max KL <= eps_kl / c_beta (traced)."""
    beta0: float = traced(1.0)
    """Initial KL penalty coefficient beta (traced)."""
    beta_lr: float = traced(0.01)
    """Adam learning rate of beta (traced)."""
    vf_coef: float = traced(0.1)
    """Value-loss coefficient (traced)."""
    clip_vloss: bool = False
    """Use the clipped (pessimistic) value loss, as the authors' runs do."""
    max_grad_norm: float = traced(0.5)
    """Global gradient-norm clip: over actor and critic together in the primary phase, over
    the actor in the fixup phase (traced)."""
    target_kl: float = traced(0.0)
    """Stop the primary phase's steps (and beta's) once a minibatch's approx-KL exceeds this;
    the fixup phase still runs, so the guarantee holds either way. 0 (the authors'): off
    (traced)."""
    epochs: int = count(10)
    """Primary-phase passes over the batch."""
    minibatches: int = count(4, divides_batch=True)
    """Primary-phase minibatches per epoch (2048 / 4 = 512, the authors' size)."""
    fixup_minibatches: int = count(2, divides_batch=True)
    """Fixup-phase minibatches per pass (2048 / 2 = 1024, the authors' size)."""
    fixup_every_epoch: bool = True
    """Run the fixup phase after every epoch (the authors' paper runs, fixup_every_repeat=1);
    false: only once, after the last epoch."""
    fixup_max_passes: int = count(1000)
    """Cap on fixup passes; reaching it stops training with an error."""
    norm_adv: bool = False
    """Normalise advantages per minibatch (off in the authors' runs)."""

    ERRORS = {"fixup_cap_hit": "FixPO's fixup phase reached fixup_max_passes without bringing "
                               "every state's KL under eps_kl; lower --fixpo.lr or raise "
                               "--fixpo.fixup-max-passes"}


def make_fixpo(cfg: FixPOConfig, policy) -> Algorithm:
    tx, beta_tx = adam_direction(cfg.adam_eps), optax.scale_by_adam()

    def objective(t, hp, x: Beta):  # beta held fixed inside the step
        pg_loss = -(t.ratio * t.adv).mean()
        return pg_loss + kl_penalty(t, x.beta), {"pg_loss": pg_loss, "kl_mb_max": t.kl.max()}

    def beta_step(x: Beta, max_kl, hp) -> Beta:
        grad = hp.eps_kl - hp.c_beta * max_kl  # d L_beta / d beta
        upd, opt = beta_tx.update(grad, x.opt)
        return Beta(jnp.maximum(x.beta - hp.beta_lr * upd, 0.0), opt)

    def kl_of(actor, mb):
        return policy_terms(policy, actor, mb, False).kl

    def fixup(params, state: SGDState, batch, hp, lr):
        """Passes of fixed minibatches until one has no violation: (params, state, logs)."""
        mbs = jax.tree.map(lambda x: x.reshape((cfg.fixup_minibatches, -1) + x.shape[1:]), batch)

        def mb_step(c: FixupCarry, mb):  # c.violations counts this pass's violated minibatches
            (_, kl_max), grads = jax.value_and_grad(
                lambda a: (lambda kl: (c.state.extra.beta * kl.mean(), kl.max()))(kl_of(a, mb)),
                has_aux=True)(c.params.actor)
            new_params, opt, _ = clipped_adam_step(tx, c.state.opt, c.params, Parts(grads, None),
                                                   lr, hp.max_grad_norm, ACTOR)
            new = c._replace(params=new_params, violations=c.violations + 1,
                             state=c.state._replace(opt=opt, extra=beta_step(c.state.extra, kl_max,
                                                                             hp)))
            return jax.tree.map(lambda a, b: jnp.where(kl_max > hp.eps_kl, a, b), new, c), None

        def one_pass(c):
            c, _ = jax.lax.scan(mb_step, c._replace(violations=jnp.int32(0)), mbs)
            return c._replace(passes=c.passes + 1, steps=c.steps + c.violations)

        z = jnp.int32(0)
        c = jax.lax.while_loop(lambda c: (c.violations > 0) & (c.passes < cfg.fixup_max_passes),
                               one_pass, FixupCarry(z, jnp.int32(1), params, state, z))
        return c.params, c.state, {"fixup_steps": c.steps.astype(jnp.float32),
                                   "fixup_cap_hit": (c.violations > 0).astype(jnp.float32),
                                   "kl_max_before_fixup": kl_of(params.actor, batch).max()}

    def on_epoch(e):
        if cfg.fixup_every_epoch:
            return EpochResult(*fixup(e.params, e.state, e.batch, e.hp, e.lr))
        skip = {"fixup_steps": jnp.float32(0), "fixup_cap_hit": jnp.float32(0),
                "kl_max_before_fixup": jnp.float32(0)}
        return EpochResult(*jax.lax.cond(e.last, lambda: fixup(e.params, e.state, e.batch,
                                                               e.hp, e.lr),
                                         lambda: (e.params, e.state, skip)))

    def on_update(u):
        logs, primary = u.epoch_logs, u.grad_steps
        fix = logs["fixup_steps"].sum()
        return u.params, u.state, {
            "beta": u.state.extra.beta, "primary_steps": primary, "fixup_steps": fix,
            "grad_steps": primary + fix, "fixup_fraction": fix / jnp.maximum(primary, 1.0),
            "fixup_cap_hit": logs["fixup_cap_hit"].max(),
            # the largest over the epochs' fixup phases
            "kl_max_before_fixup": logs["kl_max_before_fixup"].max()}

    return sgd_rule("fixpo", cfg, policy, objective,
                    init=lambda hp: Beta(jnp.float32(hp.beta0), beta_tx.init(jnp.float32(0.0))),
                    on_minibatch=lambda x, aux, hp: beta_step(x, aux["kl_mb_max"], hp),
                    on_epoch=on_epoch, on_update=on_update,
                    metrics={"kl_mb_max": MAX, "kl_max_before_fixup": MAX})
