"""The update-rule interface: the batch a rule is given, ``Algorithm`` (init and update) and
``AlgoConfig``, the base of every rule's settings. The pieces rules are built from are in
``pgjax.algos.pieces``."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, NamedTuple

import jax
from flax import struct


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


class Algorithm(NamedTuple):
    """An update rule, in the style of an optax transformation.

    init(params, hp) -> algo_state
    update(params, algo_state, batch, key, hp, progress) -> (params, algo_state, metrics)

    A rule whose config sets ``recompute_adv`` is also given ``refresh=``, a ``Refresh``
    that recomputes the batch's values, advantages and value targets over the rollout with
    the current critic; it then returns a fourth element, the refresh's final carry.
    ``hp`` holds the traced hyperparameters (floats that may differ across vmapped runs),
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


@dataclasses.dataclass(frozen=True)
class AlgoConfig:
    """Base for algorithm configs. Fields listed in ``TRACED`` are floats passed as traced
    hyperparameters (vmappable across runs); all other fields are static (shapes, loop counts,
    switches) and fixed at compile time."""

    TRACED: ClassVar[tuple[str, ...]] = ()
    # metric name -> message: a run whose update reports the metric > 0 is stopped with it
    ERRORS: ClassVar[dict[str, str]] = {}

    # loop counts that must be >= 1, and those that must also divide the batch evenly
    COUNTS: ClassVar[tuple[str, ...]] = ()
    BATCH_DIVISORS: ClassVar[tuple[str, ...]] = ()
    # string fields -> the values they may take
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {}

    def traced(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in self.TRACED}

    def validate(self, batch_size: int, prefix: str,
                 unit: str = "transitions (num_envs x rollout_len)") -> None:
        """Raise ConfigError (one line, naming the flag to change) for bad loop counts or
        a string field outside its ``CHOICES``."""
        from pgjax.errors import ConfigError, check_choice

        eps = getattr(self, "adam_eps", None)
        if eps is not None and not eps > 0:
            raise ConfigError(f"adam_eps must be > 0, got {eps}; pass a small positive "
                              f"--{prefix}.adam-eps (e.g. --{prefix}.adam-eps 1e-05)")
        for name, allowed in self.CHOICES.items():
            check_choice(getattr(self, name), allowed, name,
                         f"--{prefix}.{name.replace('_', '-')}")
        for name in self.COUNTS:
            if getattr(self, name) < 1:
                flag = f"--{prefix}.{name.replace('_', '-')}"
                default = getattr(type(self)(), name)
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; pass "
                                  f"a positive {flag} (e.g. {flag} {max(default, 1)})")
        for name in self.BATCH_DIVISORS:
            n = getattr(self, name)
            if batch_size % n:
                flag = f"--{prefix}.{name.replace('_', '-')}"
                fits = max(d for d in range(1, min(n, batch_size) + 1) if batch_size % d == 0)
                raise ConfigError(
                    f"batch of {batch_size} {unit} is not divisible "
                    f"into {n} {name.replace('_', ' ')}; change --num-envs, --rollout-len or "
                    f"{flag} (e.g. {flag} {fits})")
