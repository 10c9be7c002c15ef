"""TRPO (Schulman et al. 2015, "Trust Region Policy Optimization").

Maximise L(theta) = mean[r A] subject to mean_s KL(pi_old || pi_theta) <= delta:

1. g = grad L at theta_old; Fisher-vector products F v = grad((grad KL) . v) + damping v by
   forward-over-reverse differentiation (never a dense matrix);
2. conjugate gradient for F x = g (``cg_iters`` iterations from x0 = 0);
3. full step x sqrt(2 delta / x^T F x), then backtracking theta_old + c^j step, j < n_ls:
   the first with mean KL <= delta *and* L improved is taken; if none is, theta_old is kept;
4. the critic is fitted separately with epochs of minibatch Adam on the value targets
   (``pgjax.algos.pieces.run_epochs`` on the critic alone; the state is an ``SGDState``).

All of it runs inside ``jit`` (CG and line search are ``lax`` loops).
"""
from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from pgjax.algos.common import CRITIC_LOSS, AlgoConfig, Algorithm, Updated
from pgjax.algos.pieces import (SGDState, adam_direction, normalize_advantage, run_epochs,
                                value_loss, weighted)
from pgjax.core.hparams import count, traced
from pgjax.model.nets import CRITIC, Parts


CGCarry = NamedTuple("CGCarry", [("i", Any), ("x", Any), ("r", Any), ("p", Any), ("rr", Any)])
CGCarry.__doc__ = "Conjugate-gradient carry: iteration, solution x, residual r, direction p, r.r."
LineSearchCarry = NamedTuple("LineSearchCarry", [("j", Any), ("ok", Any), ("flat", Any)])
LineSearchCarry.__doc__ = "Backtracking carry: steps tried, whether one was accepted, flat actor."


@dataclasses.dataclass(frozen=True)
class TRPOConfig(AlgoConfig):
    """TRPO hyperparameters; defaults from the reference implementations."""

    delta: float = traced(0.01)
    """Trust-region radius: bound on the mean KL(pi_old || pi_new) (traced)."""
    damping: float = traced(0.1)
    """Damping added to the Fisher matrix (traced)."""
    backtrack: float = traced(0.8)
    """Line-search shrink factor c (traced)."""
    vf_lr: float = traced(1e-3)
    """Critic Adam learning rate (traced)."""
    max_grad_norm: float = traced(0.5)
    """Global gradient-norm clip for the critic (traced)."""
    cg_iters: int = count(10)
    """Conjugate-gradient iterations."""
    ls_steps: int = count(10)
    """Backtracking line-search steps."""
    vf_epochs: int = count(5)
    """Critic epochs per update."""
    vf_minibatches: int = count(32, divides_batch=True)
    """Critic minibatches per epoch; the batch must divide evenly."""
    norm_adv: bool = True
    """Normalise advantages over the batch."""


def conjugate_gradient(matvec, b, iters: int, tol: float = 1e-10):
    """Solve A x = b for symmetric positive-definite A, from x0 = 0 (Hestenes & Stiefel)."""

    def body(c):
        ap = matvec(c.p)
        alpha = c.rr / jnp.maximum(c.p @ ap, 1e-30)
        x, r = c.x + alpha * c.p, c.r - alpha * ap
        rr_new = r @ r
        return CGCarry(c.i + 1, x, r, r + (rr_new / jnp.maximum(c.rr, 1e-30)) * c.p, rr_new)

    init = CGCarry(0, jnp.zeros_like(b), b, b, b @ b)
    return jax.lax.while_loop(lambda c: (c.i < iters) & (c.rr > tol), body, init).x


def policy_objectives(policy, batch, adv, unravel):
    """(surrogate, mean_kl) as functions of the flat actor parameters:
    mean[r A] and mean_s KL(pi_old(.|s) || pi_theta(.|s)) over the batch."""
    dist = policy.distribution

    def surrogate(flat):
        d = policy.dist(unravel(flat), batch.obs)
        return jnp.mean(jnp.exp(dist.log_prob(d, batch.action) - batch.log_prob) * adv)

    def mean_kl(flat):
        return dist.kl(batch.dist, policy.dist(unravel(flat), batch.obs)).mean()

    return surrogate, mean_kl


def fisher_vector_product(mean_kl, flat0, damping):
    """v -> (F + damping I) v with F the Hessian of the mean KL at flat0 (the Fisher matrix),
    by forward-over-reverse differentiation."""
    grad_kl = jax.grad(mean_kl)
    return lambda v: jax.jvp(grad_kl, (flat0,), (v,))[1] + damping * v


def make_trpo(cfg: TRPOConfig, policy) -> Algorithm:
    tx = adam_direction(1e-5)

    def critic_loss(params, mb, hp, extra):
        v_loss = value_loss(policy.value(params.critic, mb.obs), mb.value, mb.ret)
        return v_loss, {"v_loss": v_loss}

    fit_critic = run_epochs(critic_loss, tx, cfg.vf_epochs, cfg.vf_minibatches,
                            parts=CRITIC)

    def init(params, hp):
        return SGDState(Parts(None, tx.init(params.critic)))

    def update(params, state, batch, key, hp, progress, refresh=None):
        flat0, unravel = ravel_pytree(params.actor)
        adv = normalize_advantage(batch.advantage) if cfg.norm_adv else batch.advantage

        surrogate, mean_kl = policy_objectives(policy, batch, weighted(adv, batch), unravel)
        fvp = fisher_vector_product(mean_kl, flat0, hp.damping)

        loss0, g = jax.value_and_grad(surrogate)(flat0)
        x = conjugate_gradient(fvp, g, cfg.cg_iters)
        xfx = x @ fvp(x)
        step = x * jnp.sqrt(2.0 * hp.delta / jnp.maximum(xfx, 1e-12))

        def ls_body(c):
            flat = flat0 + hp.backtrack ** c.j.astype(jnp.float32) * step
            ok = (mean_kl(flat) <= hp.delta) & (surrogate(flat) - loss0 > 0)
            return LineSearchCarry(c.j + 1, ok, jnp.where(ok, flat, flat0))

        ls = jax.lax.while_loop(lambda c: (c.j < cfg.ls_steps) & ~c.ok, ls_body,
                                LineSearchCarry(jnp.int32(0), jnp.bool_(False), flat0))
        fit = fit_critic(Parts(unravel(ls.flat), params.critic), state, batch,
                         key, hp, hp.vf_lr)
        metrics = {"v_loss": fit.metrics["v_loss"], "grad_norm": fit.metrics["grad_norm"],
                   "pg_loss": -surrogate(ls.flat), "ls_steps": ls.j.astype(jnp.float32),
                   "accepted": ls.ok.astype(jnp.float32), "cg_xfx": xfx,
                   "step_norm": jnp.linalg.norm(ls.flat - flat0),
                   "grad_steps": 1.0 + fit.grad_steps}
        return Updated(fit.params, fit.state, metrics)

    return Algorithm("trpo", cfg, init, update, {"v_loss": CRITIC_LOSS})
