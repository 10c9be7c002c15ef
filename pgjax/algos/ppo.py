"""PPO with the clipped surrogate (Schulman et al. 2017, "Proximal Policy Optimization
Algorithms"), with the implementation details of the reference implementations switchable
(Huang et al. 2022, "The 37 Implementation Details of Proximal Policy Optimization").

The surrogate is a parameter of ``make_clipped_family`` so that update rules that differ from
PPO only in the surrogate (SPO) reuse everything else.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

from pgjax.algos.common import (AlgoConfig, Algorithm, adam, normalize_advantage, weighted,
                                sgd_step, shuffled_minibatches, trust_region_stats, value_loss)


class MinibatchCarry(NamedTuple):
    """Minibatch-scan carry: params, optimiser state, whether target_kl stopped the update."""
    params: Any
    opt_state: Any
    stopped: Any


@dataclasses.dataclass(frozen=True)
class PPOConfig(AlgoConfig):
    """PPO hyperparameters; defaults are the reference continuous-control settings."""

    lr: float = 3e-4
    """Adam learning rate (traced; linearly annealed to 0 when anneal_lr)."""
    clip_eps: float = 0.2
    """Ratio clipping range epsilon (traced)."""
    vf_coef: float = 0.5
    """Value-loss coefficient c_v (traced)."""
    ent_coef: float = 0.0
    """Entropy-bonus coefficient c_e (traced)."""
    vf_clip_eps: float = 0.2
    """Value clipping range, used when clip_vloss (traced)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip (traced)."""
    target_kl: float = 0.0
    """Stop the update once a minibatch's approx-KL exceeds this; 0 disables (traced)."""
    epochs: int = 10
    """Passes over the batch per update."""
    minibatches: int = 32
    """Minibatches per epoch; the batch (num_envs * rollout_len) must divide evenly."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_vloss: bool = True
    """Use the clipped (pessimistic) value loss."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    adam_eps: float = 1e-5
    """Adam epsilon."""

    TRACED = ("lr", "clip_eps", "vf_coef", "ent_coef", "vf_clip_eps", "max_grad_norm", "target_kl")

    COUNTS = ('epochs', 'minibatches')
    BATCH_DIVISORS = ('minibatches',)


def clipped_surrogate(ratio, adv, hp):
    """Per-sample PPO objective min(r A, clip(r, 1 - eps, 1 + eps) A) (to be maximised)."""
    eps = hp["clip_eps"]
    return jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - eps, 1.0 + eps) * adv)


def make_loss(cfg, policy, surrogate: Callable) -> Callable:
    """loss(params, minibatch, hp) -> (loss, aux) with
    loss = -mean(surrogate(r, A)) + c_v * L_V - c_e * H."""
    dist = policy.distribution

    def loss_fn(params, mb, hp):
        d = policy.dist(params["actor"], mb.obs)
        log_ratio = dist.log_prob(d, mb.action) - mb.log_prob
        ratio = jnp.exp(log_ratio)
        adv = weighted(normalize_advantage(mb.advantage) if cfg.norm_adv else mb.advantage, mb)
        pg_loss = -surrogate(ratio, adv, hp).mean()
        v = policy.value(params["critic"], mb.obs)
        v_loss = value_loss(v, mb.value, mb.ret, hp["vf_clip_eps"] if cfg.clip_vloss else None)
        entropy = dist.entropy(d).mean()
        loss = pg_loss + hp["vf_coef"] * v_loss - hp["ent_coef"] * entropy
        aux = {"pg_loss": pg_loss, "v_loss": v_loss,
               "approx_kl": ((ratio - 1.0) - log_ratio).mean(),
               "clip_frac": (jnp.abs(ratio - 1.0) > hp["clip_eps"]).mean()}
        return loss, aux

    return loss_fn


def make_clipped_family(name: str, cfg, policy, surrogate: Callable) -> Algorithm:
    """An actor-critic update of K epochs of shuffled minibatch Adam steps on the loss of
    ``make_loss``; the rule's state is the optax Adam state over {"actor", "critic"}."""
    tx = adam(cfg.adam_eps)
    loss_fn = make_loss(cfg, policy, surrogate)

    def init(params, hp):
        return tx.init(params)

    def update(params, opt_state, batch, key, hp, progress):
        lr = hp["lr"] * (1.0 - progress) if cfg.anneal_lr else hp["lr"]

        def mb_step(c, mb):
            (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(c.params, mb, hp)
            new_params, new_opt, g_norm = sgd_step(tx, c.opt_state, c.params, grads, lr,
                                                   hp["max_grad_norm"])
            take = ~c.stopped
            params, opt_state = jax.tree.map(lambda n, o: jnp.where(take, n, o),
                                             (new_params, new_opt), (c.params, c.opt_state))
            stopped = c.stopped | ((hp["target_kl"] > 0) & (aux["approx_kl"] > hp["target_kl"]))
            return MinibatchCarry(params, opt_state, stopped), {
                **aux, "grad_norm": g_norm, "taken": take.astype(jnp.float32)}

        def epoch(carry, k):
            return jax.lax.scan(mb_step, carry, shuffled_minibatches(k, batch, cfg.minibatches))

        c, logs = jax.lax.scan(epoch, MinibatchCarry(params, opt_state, jnp.bool_(False)),
                               jax.random.split(key, cfg.epochs))
        taken = logs.pop("taken")
        n = jnp.maximum(taken.sum(), 1.0)
        metrics = {k: (v * taken).sum() / n for k, v in logs.items()}
        metrics.update(trust_region_stats(policy, c.params["actor"], batch))
        metrics.update(grad_steps=taken.sum(), lr=lr)
        return c.params, c.opt_state, metrics

    return Algorithm(name, cfg, init, update)


def make_ppo(cfg: PPOConfig, policy) -> Algorithm:
    return make_clipped_family("ppo", cfg, policy, clipped_surrogate)
