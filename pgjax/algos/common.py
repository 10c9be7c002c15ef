"""The update-rule interface: the batch a rule is given, ``Algorithm`` (init and update) and
``AlgoConfig``, the base of every rule's settings. The pieces rules are built from are in
``pgjax.algos.pieces``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Mapping, NamedTuple

import jax
from flax import struct

from pgjax.core import hparams as hp_kinds
from pgjax.core.hparams import (LegacyDeclaration, choice_fields, count_fields, divisor_fields,
                                legacy_item, traced_fields)


@struct.dataclass
class Batch:
    """One training batch, flattened over (time, env): every field has leading dim B.

    obs [B, *obs] (normalised as seen when acting), action [B, ...] (unclipped sample),
    log_prob [B] and dist (pytree, [B, ...]) of the behaviour policy, value [B] = V_old(s),
    advantage [B] (GAE, not normalised), ret [B] value target.

    weight [B] or None: a per-sample factor every update rule multiplies its (normalised)
    advantage by. None in single-agent training; the sequential multi-agent combinator
    (``pgjax.algos.multiagent``) passes the compounded ratio of the agents updated before.
    """

    obs: jax.Array
    action: jax.Array
    log_prob: jax.Array
    dist: Any
    value: jax.Array
    advantage: jax.Array
    ret: jax.Array
    weight: Any = None

    @property
    def size(self) -> int:
        return self.log_prob.shape[0]


class Refresh(NamedTuple):
    """The trainer's recomputation of a batch's targets under new parameters:
    ``fn(params, batch, carry) -> (batch, carry)``, from ``carry`` (the statistics the
    targets are scaled by, updated by every recomputation)."""

    fn: Callable
    carry: Any


class Metric(NamedTuple):
    """How a metric an update reports is reduced: ``steps``, over the minibatch steps of an
    update (``mean`` over the steps taken, ``sum``, or ``last``: one value per update);
    ``agents``, over the agents of a multi-agent update (``mean``, ``max``, or ``critic``:
    the value of the pass that trained a centralised critic)."""

    steps: str = "mean"
    agents: str = "mean"


MEAN, MAX, PER_UPDATE = Metric(), Metric(agents="max"), Metric(steps="last")
# a loss of the critic: with one centralised critic, the first pass's (only it trains it)
CRITIC_LOSS = Metric(agents="critic")


def reduce_over_agents(metrics: dict, declared: Mapping[str, Metric], central: bool) -> dict:
    """Per-agent metrics ([n] each) reduced to one value per update as ``declared`` says
    (undeclared: the mean)."""
    out = {}
    for k, v in metrics.items():
        how = declared.get(k, MEAN).agents
        out[k] = v[0] if how == "critic" and central else v.max() if how == "max" else v.mean()
    return out


class Updated(NamedTuple):
    """What ``Algorithm.update`` returns: the new parameters (``pgjax.model.nets.Parts``)
    and rule state, the update's metrics and, when it was given a ``Refresh``, the
    refresh's final carry (else ())."""

    params: Any
    state: Any
    metrics: dict
    refresh_carry: Any = ()


def updated(out) -> Updated:
    """``out`` of a rule's update as ``Updated``; a pgjax 0.2.0 rule's plain 3- or 4-tuple
    is accepted with a warning."""
    if isinstance(out, Updated):
        return out
    import warnings

    warnings.warn("an update rule's update returns pgjax.algos.common.Updated(params, state, "
                  "metrics[, refresh_carry]) since pgjax 0.3.0, not a plain tuple",
                  FutureWarning, stacklevel=3)
    return Updated(*out)


class Algorithm(NamedTuple):
    """An update rule, in the style of an optax transformation.

    init(params, hp) -> algo_state
    update(params, algo_state, batch, key, hp, progress, refresh=None) -> Updated

    ``refresh`` is given to a rule whose config sets ``recompute_adv``: a ``Refresh`` that
    recomputes the batch's values, advantages and value targets over the rollout with the
    current critic; ``Updated.refresh_carry`` then holds its final carry.
    ``hp`` is the rule's config with its traced hyperparameters (floats that may differ
    across vmapped runs) as arrays (``pgjax.core.hparams.typed``),
    ``progress`` in [0, 1) the fraction of training done (for annealing), ``metrics`` a flat
    dict of scalars recorded every update. The trainer adds the trust-region diagnostics
    (``kl_mean``, ``kl_max``, ``ratio_dev_max``, ``entropy``: behaviour against updated policy
    over the whole batch) to every rule's metrics itself, so a rule need not compute them.
    Most rules are best assembled from ``pgjax.algos.pieces`` (``sgd_rule``).
    """

    name: str
    config: Any
    init: Callable
    update: Callable
    metrics: Mapping[str, Metric] = {}  # how its metrics reduce (undeclared: MEAN)


@dataclasses.dataclass(frozen=True)
class AlgoConfig:
    """Base for algorithm configs. Each field declares its kind (``pgjax.core.hparams``):
    ``traced`` floats may differ across the vmapped runs of one program and reach the rule
    as arrays (``hp.lr``); ``count`` fields are loop counts (some must divide the batch);
    ``choice`` fields take one of their values; every other field is static (shapes, loop
    counts, switches), fixed at compile time."""

    # metric name -> message: a run whose update reports the metric > 0 is stopped with it
    ERRORS: ClassVar[dict[str, str]] = {}
    # pgjax 0.2.0's class tuples, read from the fields (with a warning)
    TRACED, COUNTS = LegacyDeclaration(hp_kinds.TRACED), LegacyDeclaration(hp_kinds.COUNT)
    BATCH_DIVISORS = LegacyDeclaration(hp_kinds.DIVISOR)
    CHOICES = LegacyDeclaration(hp_kinds.CHOICES)

    def traced(self) -> dict[str, float]:
        """{name: value} of the traced fields."""
        return {k: float(getattr(self, k)) for k in traced_fields(self)}

    def __getitem__(self, name: str):  # pgjax 0.2.0's hp.name, with a warning
        return legacy_item(self, name)

    def __contains__(self, name: str) -> bool:  # pgjax 0.2.0's "name" in hp
        return name in traced_fields(self)

    def validate(self, batch_size: int, prefix: str,
                 unit: str = "transitions (num_envs x rollout_len)") -> None:
        """Raise ConfigError (one line, naming the flag to change) for bad loop counts or
        a string field outside its ``CHOICES``."""
        from pgjax.core.errors import ConfigError, check_choice

        eps = getattr(self, "adam_eps", None)
        if eps is not None and not eps > 0:
            raise ConfigError(f"adam_eps must be > 0, got {eps}; pass a small positive "
                              f"--{prefix}.adam-eps (e.g. --{prefix}.adam-eps 1e-05)")
        for name, allowed in choice_fields(self).items():
            check_choice(getattr(self, name), allowed, name,
                         f"--{prefix}.{name.replace('_', '-')}")
        for name in count_fields(self):
            if getattr(self, name) < 1:
                flag = f"--{prefix}.{name.replace('_', '-')}"
                default = getattr(type(self)(), name)
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; pass "
                                  f"a positive {flag} (e.g. {flag} {max(default, 1)})")
        for name in divisor_fields(self):
            n = getattr(self, name)
            if batch_size % n:
                flag = f"--{prefix}.{name.replace('_', '-')}"
                fits = max(d for d in range(1, min(n, batch_size) + 1) if batch_size % d == 0)
                raise ConfigError(
                    f"batch of {batch_size} {unit} is not divisible "
                    f"into {n} {name.replace('_', ' ')}; change --num-envs, --rollout-len or "
                    f"{flag} (e.g. {flag} {fits})")
