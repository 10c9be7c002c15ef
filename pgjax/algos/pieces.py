"""Composable pieces of an update rule: loss terms, the clipped Adam step, the epoch/minibatch
loop with hooks that read and write the rule's own state, and the trust-region diagnostics.

A rule of epochs of minibatch Adam steps on an actor-critic loss is ``sgd_rule`` with an
*objective* (the policy part of the loss) and, where the rule has state of its own, hooks::

    objective(t: PolicyTerms, hp, extra) -> loss  or  (loss, aux)      # to minimise
    init(hp) -> extra                                 # the rule's own state (beta, ...)
    on_minibatch(extra, aux, hp) -> extra             # after every minibatch step
    on_epoch(e: EpochView) -> EpochResult             # after every epoch; may stop the rest
    on_update(u: UpdateView) -> (params, state, metrics)                    # once per update

``sgd_rule`` keeps everything else: ``epochs`` x ``minibatches`` shuffled minibatches, the
value loss and entropy bonus, the joint gradient-norm clip, linear learning-rate annealing,
the ``target_kl`` early stop (``target_kl_mode``), the recomputation of the batch's
advantages before every epoch after the first (``recompute_adv``, from the trainer's
``Refresh``), per-minibatch metrics averaged over the steps taken, and ``grad_steps``.

An epoch hook that stops the remaining epochs, cleanrl's ``target_kl`` (the built-in
``--ppo.target-kl-mode per_epoch`` does the same)::

    def kl_stop(e):  # e.minibatch: this epoch's per-minibatch metrics, [minibatches]
        stop = e.minibatch["approx_kl"][-1] > e.hp.kl_stop
        return EpochResult(e.params, e.state, stop=stop)

(``examples/ppo_epoch_kl_stop.py`` registers it as a rule with a traced ``kl_stop`` option.)

PPO, SPO, PPO-KL and FixPO are built this way (``pgjax.algos.ppo``, ``spo``, ``fixpo``);
the rule's state is an ``SGDState`` (Adam state and ``extra``), so checkpoints and
resumes carry ``extra`` with everything else.

A PPO with an adaptive KL penalty, for instance (the built-in ``ppo_kl`` is this rule)::

    def objective(t, hp, beta):
        pg_loss = -(t.ratio * t.adv).mean()
        return pg_loss + kl_penalty(t, beta), {"pg_loss": pg_loss}

    def adapt(u):  # beta doubles or halves with the batch KL after the update
        beta = adapt_kl_coef(u.state.extra, u.stats["kl_mean"], u.hp.d_targ)
        return u.params, u.state._replace(extra=beta), {"beta": beta}

    sgd_rule("ppo_kl", cfg, policy, objective, init=lambda hp: jnp.float32(hp.beta0),
             on_update=adapt)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from pgjax.algos.common import (CRITIC_LOSS, MAX, PER_UPDATE, AlgoConfig, Algorithm, Batch, Metric,
                                Updated)
from pgjax.algos.losses import (PolicyTerms, actor_critic_loss, adapt_kl_coef, clipped_surrogate,
                                kl_penalty, normalize_advantage, policy_terms, ratio_surrogate,
                                surrogate_objective, value_loss, weighted)
from pgjax.core.hparams import choice, count, traced
from pgjax.model.nets import BOTH, Parts

PARTS = BOTH  # the parts a step updates by default (a ``Parts`` of bools)
# the trust-region diagnostics, as ``trust_region_stats`` names them
TRUST_REGION = ("kl_mean", "kl_max", "ratio_dev_max", "entropy")
# how the metrics of ``sgd_rule`` reduce (``Metric``; the others: the mean over the steps
# taken and over the agents)
SGD_METRICS = {"v_loss": CRITIC_LOSS, "grad_steps": Metric(steps="sum"), "lr": PER_UPDATE,
               "kl_max": MAX, "ratio_dev_max": MAX}


# -- settings ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class SGDConfig(AlgoConfig):
    """The settings ``sgd_rule`` reads: learning rate and its annealing, the loss
    coefficients, the gradient clip, the loop counts and the early stop. A rule's config
    subclasses it (or ``PPOConfig``) and adds its own fields."""

    lr: float = traced(3e-4)
    """Adam learning rate (traced; linearly annealed to 0 when anneal_lr)."""
    vf_coef: float = traced(0.5)
    """Value-loss coefficient c_v (traced)."""
    ent_coef: float = traced(0.0)
    """Entropy-bonus coefficient c_e (traced)."""
    vf_clip_eps: float = traced(0.2)
    """Value clipping range, used when clip_vloss (traced)."""
    max_grad_norm: float = traced(0.5)
    """Global gradient-norm clip over actor and critic together (traced)."""
    target_kl: float = traced(0.0)
    """Early stop of the update on the k3 approx-KL estimate mean[(r - 1) - log r] of a
    minibatch before its step (traced); 0 disables. When it stops: target_kl_mode."""
    target_kl_mode: str = choice("per_minibatch", ("per_minibatch", "per_epoch"))
    """per_minibatch: the step of the first minibatch whose approx-KL exceeds target_kl is
    the last one taken; per_epoch (cleanrl's): checked after every epoch, on the epoch's
    last minibatch, and the remaining epochs are skipped."""
    epochs: int = count(10)
    """Passes over the batch per update."""
    minibatches: int = count(32, divides_batch=True)
    """Minibatches per epoch; the batch (num_envs * rollout_len) must divide evenly."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    clip_vloss: bool = True
    """Use the clipped (pessimistic) value loss."""
    anneal_lr: bool = True
    """Anneal the learning rate linearly to 0 over training."""
    adam_eps: float = 1e-5
    """Adam epsilon."""
    desired_kl: float = 0.0
    """KL-adaptive step size (rsl_rl's ``schedule="adaptive"``): before every minibatch
    step the learning rate's multiplier is divided by 1.5 when that minibatch's mean
    KL(pi_old || pi) exceeds 2 x desired_kl and multiplied by 1.5 when it is below
    desired_kl / 2; the multiplier carries across updates (in the rule's state) and keeps
    the rate within [1e-5, 1e-2]; 0 disables it."""

    recompute_adv: bool = False
    """Recompute the values, advantages and value targets with the current critic before
    every epoch after the first (Tianshou's ``recompute_advantage``; Andrychowicz et al.
    2021, sec. 3.5); off: GAE once per rollout."""


    def validate(self, batch_size: int, prefix: str, *args, **kw) -> None:
        super().validate(batch_size, prefix, *args, **kw)
        if not self.desired_kl >= 0:
            from pgjax.core.errors import ConfigError
            raise ConfigError(f"desired_kl must be >= 0, got {self.desired_kl}; pass "
                              f"--{prefix}.desired-kl 0 (off) or a KL per minibatch such "
                              f"as 0.01")


# -- optimiser -----------------------------------------------------------------------------
def adam_direction(eps: float = 1e-5) -> optax.GradientTransformation:
    """Adam's update direction without a learning rate (``clipped_adam_step`` scales it, so
    the rate can be traced and annealed)."""
    return optax.scale_by_adam(eps=eps)


def clipped_adam_step(tx, opt: Parts, params: Parts, grads: Parts, lr, max_grad_norm,
                      parts: Parts = PARTS):
    """One step on the ``parts`` of ``params`` (a ``Parts`` of bools; the others are left
    alone): the gradients of those parts clipped jointly to global norm ``max_grad_norm``
    (traced), the direction of ``tx`` per part (``opt``: its state per part), a step of size
    ``lr``. Returns (params, opt, pre-clip gradient norm)."""
    g_norm = optax.tree.norm(grads.chosen(parts))
    scale = jnp.minimum(1.0, max_grad_norm / (g_norm + 1e-12))

    def step(w, g, o):
        updates, o = tx.update(jax.tree.map(lambda x: x * scale, g), o, w)
        return jax.tree.map(lambda a, u: a - lr * u, w, updates), o

    new = params.map(step, grads, opt, which=parts)  # (params, opt) of the parts stepped
    return (new.map(lambda n: n[0], which=parts), opt.map(lambda o, n: n[1], new, which=parts),
            g_norm)


def annealed_lr(cfg: SGDConfig, hp, progress):
    """hp.lr, linearly annealed to 0 over training when ``cfg.anneal_lr``."""
    return hp.lr * (1.0 - progress) if cfg.anneal_lr else hp.lr


# -- the loop ------------------------------------------------------------------------------
class SGDState(NamedTuple):
    """The state of a rule built by ``sgd_rule``: Adam's state per part (a ``Parts``; () for
    a part the rule does not step) and ``extra``, the rule's own state (() when it has
    none)."""

    opt: dict
    extra: Any = ()


class ScaledSGDState(NamedTuple):
    """``SGDState`` with ``lr_scale``, the KL-adaptive multiplier of the learning rate: the
    state of a rule with ``desired_kl`` > 0 (a separate type, so that the checkpoints of
    runs without it keep their structure and still restore)."""

    opt: dict
    extra: Any
    lr_scale: Any


LR_BOUNDS = (1e-5, 1e-2)  # rsl_rl's bounds on the KL-adaptive learning rate


def adapt_lr_scale(scale, kl, desired_kl, lr):
    """rsl_rl's adaptive schedule on a multiplier of ``lr``: / 1.5 when ``kl`` >
    2 x desired_kl, x 1.5 when 0 < ``kl`` < desired_kl / 2, the rate lr x scale kept in
    ``LR_BOUNDS``."""
    scale = jnp.where(kl > 2.0 * desired_kl, scale / 1.5,
                      jnp.where((kl < desired_kl / 2.0) & (kl > 0), scale * 1.5, scale))
    lo, hi = LR_BOUNDS
    return jnp.clip(scale, lo / jnp.maximum(lr, 1e-12), hi / jnp.maximum(lr, 1e-12))


class StepCarry(NamedTuple):
    """Minibatch-scan carry: params, state, whether target_kl stopped the update."""

    params: Any
    state: SGDState
    stopped: Any


class EpochView(NamedTuple):
    """What ``on_epoch`` sees after an epoch: params and state, the batch, hp, the learning
    rate, ``last`` (traced: the final epoch) and ``minibatch``, the epoch's per-minibatch
    metrics (the loss aux, ``grad_norm`` and ``taken``), each [minibatches]."""

    params: Any
    state: Any
    batch: Batch
    hp: Any  # the rule's config, its traced fields as arrays
    lr: Any
    last: Any
    minibatch: dict


class EpochResult(NamedTuple):
    """What ``on_epoch`` returns: params and state to continue from, ``logs`` (scalars,
    stacked over epochs into ``UpdateView.epoch_logs``; the same keys every epoch) and
    ``stop`` (traced bool): take no further step in this update."""

    params: Any
    state: Any
    logs: dict = {}
    stop: Any = False


class EpochsResult(NamedTuple):
    """What ``run_epochs`` returns: params and state after the epochs, the minibatch metrics
    averaged over the steps taken, the ``on_epoch`` logs stacked over epochs, the
    number of minibatch steps taken and the ``Refresh``'s final carry."""

    params: Any
    state: SGDState
    metrics: dict
    epoch_logs: dict
    grad_steps: jax.Array
    refresh_carry: Any = ()


def shuffled_minibatches(key, batch, num_minibatches: int):
    """Permute a pytree with leading dim B and reshape it to [M, B // M, ...]."""
    size = jax.tree.leaves(batch)[0].shape[0]
    perm = jax.random.permutation(key, size)
    return jax.tree.map(
        lambda x: jnp.take(x, perm, axis=0).reshape((num_minibatches, -1) + x.shape[1:]), batch)


def kl_early_stop(target_kl_mode: str = "per_minibatch") -> Callable:
    """The ``target_kl`` early stop as hooks: (per-minibatch test, epoch hook or None). A
    test is true once hp.target_kl > 0 and the minibatch's approx_kl exceeds it:
    ``per_minibatch`` after any minibatch (that step is the last), ``per_epoch`` (cleanrl's)
    on each epoch's last minibatch, stopping the remaining epochs."""

    def over(hp, kl):
        limit = getattr(hp, "target_kl", None)  # TRPO's critic fit has none
        return False if limit is None else (limit > 0) & (kl > limit)

    if target_kl_mode == "per_minibatch":
        return (lambda aux, hp: over(hp, aux["approx_kl"]) if "approx_kl" in aux else False), None
    return None, lambda e: EpochResult(e.params, e.state, stop=over(e.hp,
                                                                    e.minibatch["approx_kl"][-1]))


def run_epochs(loss_fn: Callable, tx, epochs: int, minibatches: int, *,
               on_minibatch: Optional[Callable] = None, on_epoch: Optional[Callable] = None,
               parts=PARTS,
               target_kl_mode: str = "per_minibatch", desired_kl: float = 0.0) -> Callable:
    """``run(params, state, batch, key, hp, lr, refresh=None) -> EpochsResult``: ``epochs``
    passes over ``batch`` in ``minibatches`` shuffled minibatches (before every epoch after
    the first, ``batch`` is recomputed by the ``Refresh`` when given), each a
    ``clipped_adam_step`` of ``loss_fn(params, mb, hp, state.extra)`` on ``parts``, then
    ``on_minibatch(extra, aux, hp) -> extra``; after each epoch ``on_epoch(EpochView) ->
    EpochResult``, whose ``stop`` skips every later step (a recomputation still runs, on
    parameters that no longer change). The ``target_kl`` early stop (``kl_early_stop``) runs before
    the rule's own epoch hook. With ``desired_kl`` > 0 each step's rate is ``lr`` times
    ``state.lr_scale`` (a ``ScaledSGDState``), adapted before the step
    (``adapt_lr_scale``; the loss's aux must hold ``policy_kl``)."""
    mb_stop, kl_epoch = kl_early_stop(target_kl_mode)
    hooks = [h for h in (kl_epoch, on_epoch) if h is not None]

    def step(c: StepCarry, mb, hp, lr):
        (_, aux), grads = jax.value_and_grad(loss_fn, has_aux=True)(c.params, mb, hp,
                                                                    c.state.extra)
        new = c.state
        if desired_kl > 0:  # the rate for this step from the KL before it (rsl_rl's order)
            new = new._replace(lr_scale=adapt_lr_scale(new.lr_scale, aux["policy_kl"],
                                                       desired_kl, hp.lr))
            lr = lr * new.lr_scale
        params, opt, g_norm = clipped_adam_step(tx, c.state.opt, c.params, grads, lr,
                                                hp.max_grad_norm, parts)
        extra = on_minibatch(c.state.extra, aux, hp) if on_minibatch else c.state.extra
        take = ~c.stopped
        params, state = jax.tree.map(lambda n, o: jnp.where(take, n, o),
                                     (params, new._replace(opt=opt, extra=extra)),
                                     (c.params, c.state))
        stopped = c.stopped | mb_stop(aux, hp) if mb_stop else c.stopped
        return StepCarry(params, state, stopped), {**aux, "grad_norm": g_norm,
                                                   "taken": take.astype(jnp.float32)}

    def run(params, state: SGDState, batch, key, hp, lr, refresh=None) -> EpochsResult:
        def epoch(carry, x):
            c, b, rc = carry
            k, i = x
            if refresh is not None:  # epochs after the first see the current critic's GAE
                b, rc = jax.tree.map(lambda n, o: jnp.where(i > 0, n, o),
                                     refresh.fn(c.params, b, rc), (b, rc))
            c, logs = jax.lax.scan(lambda c, mb: step(c, mb, hp, lr), c,
                                   shuffled_minibatches(k, b, minibatches))
            mb_logs, epoch_logs = logs, {}
            for hook in hooks:
                r = hook(EpochView(c.params, c.state, b, hp, lr, i == epochs - 1, mb_logs))
                c = StepCarry(r.params, r.state, c.stopped | r.stop)
                epoch_logs.update(r.logs)
            return (c, b, rc), {"minibatch": mb_logs, "epoch": epoch_logs}

        rc = refresh.carry if refresh is not None else ()
        (c, _, rc), logs = jax.lax.scan(epoch,
                                        (StepCarry(params, state, jnp.bool_(False)), batch, rc),
                                        (jax.random.split(key, epochs), jnp.arange(epochs)))
        mb_logs = dict(logs["minibatch"])
        taken = mb_logs.pop("taken")
        n = jnp.maximum(taken.sum(), 1.0)
        metrics = {k: (v * taken).sum() / n for k, v in mb_logs.items()}
        return EpochsResult(c.params, c.state, metrics, logs["epoch"], taken.sum(), rc)

    return run


# -- diagnostics ---------------------------------------------------------------------------
def trust_region_stats(policy, actor_params, batch: Batch) -> dict[str, jax.Array]:
    """Behaviour policy against ``actor_params`` over the *whole* batch: mean and max per-state
    KL(pi_old || pi_new), max |r - 1| and mean entropy. ``policy``: a policy kind or a rule's
    view, with ``dist``, ``kl`` (per state) and ``log_prob`` / ``entropy`` (per state, or per
    state and agent: summed over the agents into the joint policy's). The trainer records
    these for every rule; a rule may call it for a hook of its own."""
    d_new = policy.dist(actor_params, batch.obs)
    kl = policy.kl(batch.dist, d_new)

    def joint(x):
        return x.sum(axis=tuple(range(kl.ndim, x.ndim)))

    ratio = jnp.exp(joint(policy.log_prob(d_new, batch.action) - batch.log_prob))
    values = (kl.mean(), kl.max(), jnp.abs(ratio - 1).max(), joint(policy.entropy(d_new)).mean())
    return dict(zip(TRUST_REGION, values))


class UpdateView(NamedTuple):
    """What ``on_update`` sees after the epochs: params and state, the batch, hp, the
    learning rate used, ``stats`` (``trust_region_stats`` of the updated actor over the
    batch), the ``on_epoch`` logs stacked over epochs, and the minibatch steps taken."""

    params: Any
    state: SGDState
    batch: Batch
    hp: Any
    lr: Any
    stats: dict
    epoch_logs: dict
    grad_steps: Any


def sgd_rule(name: str, cfg: SGDConfig, policy, objective: Callable, *,
             init: Optional[Callable] = None, on_minibatch: Optional[Callable] = None,
             on_epoch: Optional[Callable] = None, on_update: Optional[Callable] = None,
             parts=PARTS, metrics: Optional[dict] = None) -> Algorithm:
    """An update rule of ``cfg.epochs`` x ``cfg.minibatches`` Adam steps on
    ``actor_critic_loss(cfg, policy, objective)`` (see the module docstring for the hooks).
    Metrics: the minibatch ones averaged over the steps taken, grad_norm, grad_steps, lr,
    then whatever ``on_update`` returns; ``metrics`` declares how the rule's own ones reduce
    where it is not the mean (``SGD_METRICS`` are declared already)."""
    tx = adam_direction(cfg.adam_eps)
    loop = run_epochs(actor_critic_loss(cfg, policy, objective), tx, cfg.epochs,
                      cfg.minibatches, on_minibatch=on_minibatch, on_epoch=on_epoch,
                      parts=parts, target_kl_mode=cfg.target_kl_mode,
                      desired_kl=cfg.desired_kl)

    def init_fn(params, hp):
        opt = Parts(*(tx.init(p) if on else None for p, on in
                      ((params.actor, parts.actor), (params.critic, parts.critic))))
        extra = init(hp) if init is not None else ()
        if cfg.desired_kl > 0:
            return ScaledSGDState(opt, extra, jnp.float32(1.0))
        return SGDState(opt, extra)

    def update(params, state, batch, key, hp, progress, refresh=None):
        lr = annealed_lr(cfg, hp, progress)
        r = loop(params, state, batch, key, hp, lr, refresh)
        params, state = r.params, r.state
        if cfg.desired_kl > 0:  # the rate the last step took
            lr = lr * state.lr_scale
        metrics = {**r.metrics, "grad_steps": r.grad_steps, "lr": lr}
        if on_update is not None:
            view = UpdateView(params, state, batch, hp, lr,
                              trust_region_stats(policy, params.actor, batch), r.epoch_logs,
                              r.grad_steps)
            params, state, own = on_update(view)
            metrics.update(own)
        return Updated(params, state, metrics, r.refresh_carry if refresh is not None else ())

    return Algorithm(name, cfg, init_fn, update, {**SGD_METRICS, **(metrics or {})})


__all__ = ["PARTS", "SGD_METRICS", "TRUST_REGION", "EpochResult", "EpochView", "EpochsResult", "PolicyTerms", "SGDConfig", "SGDState", "ScaledSGDState", "StepCarry",
           "UpdateView", "actor_critic_loss", "adam_direction", "adapt_kl_coef", "adapt_lr_scale",
           "annealed_lr",
           "clipped_adam_step", "clipped_surrogate", "kl_early_stop", "kl_penalty", "normalize_advantage",
           "policy_terms", "ratio_surrogate", "run_epochs", "sgd_rule", "shuffled_minibatches",
           "surrogate_objective", "trust_region_stats", "value_loss", "weighted"]
