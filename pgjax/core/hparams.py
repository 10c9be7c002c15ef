"""Hyperparameters as types: the field kinds a config declares (traced, loop count, batch
divisor, choice) and the typed record the compiled functions read (``hp.clip_eps``).

A setting's kind is declared where the setting is, in its dataclass field::

    @dataclasses.dataclass(frozen=True)
    class MyConfig(SGDConfig):
        kl_stop: float = traced(0.02)
        '''Stop the epochs once a minibatch's KL exceeds this (traced).'''
        passes: int = count(2, divides_batch=False)

*Traced* fields are floats that may differ between the runs of one program (``--grid``,
vmapped); every other field is static (compiled in). The functions an update rule builds
receive its config with the traced fields replaced by (traced) arrays: ``typed(cfg,
values)``, a pytree whose leaves are those arrays. Outside the compiled functions, a run's
traced values travel as one flat ``{name: float}`` table (``"gamma"``, ``"ppo.lr"``: the
option names the records and ``--grid`` use); ``HParams.of`` turns it into the typed record.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Mapping, NamedTuple

import jax

TRACED, COUNT, DIVISOR, CHOICES = "pgjax_traced", "pgjax_count", "pgjax_divisor", "pgjax_choices"


def traced(default: float):
    """A float field that may differ across the vmapped runs of one program (``--grid``)."""
    return dataclasses.field(default=default, metadata={TRACED: True})


def count(default: int, divides_batch: bool = False):
    """A loop count (>= 1); with ``divides_batch``, one that must also divide the batch."""
    return dataclasses.field(default=default, metadata={COUNT: True, DIVISOR: divides_batch})


def choice(default: str, choices: tuple[str, ...]):
    """A string field that takes one of ``choices``."""
    return dataclasses.field(default=default, metadata={CHOICES: tuple(choices)})


_LEGACY = {TRACED: "TRACED", COUNT: "COUNTS", DIVISOR: "BATCH_DIVISORS", CHOICES: "CHOICES"}
_HELPER = {TRACED: "traced(default)", COUNT: "count(default)",
           DIVISOR: "count(default, divides_batch=True)", CHOICES: "choice(default, choices)"}


def _declared(cls, kind: str) -> dict[str, Any]:
    """{field: metadata value} of ``cls``'s fields declared ``kind`` by any class of its
    MRO (a subclass that redefines a field's default keeps its kind); a pgjax 0.2.0 config's
    class tuples (``TRACED``, ``COUNTS``, ``BATCH_DIVISORS``) still count, with a warning."""
    names = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for f in getattr(klass, "__dataclass_fields__", {}).values():
            if f.metadata.get(kind) and f.name in names:
                out[f.name] = f.metadata[kind]
        legacy = vars(klass).get(_LEGACY[kind], ())
        if isinstance(legacy, (tuple, list, dict)) and legacy:
            _warn_legacy(klass, kind)
            pairs = legacy.items() if isinstance(legacy, dict) else ((n, True) for n in legacy)
            out.update({n: v for n, v in pairs if n in names})
    return {n: out[n] for n in (f.name for f in dataclasses.fields(cls)) if n in out}


def _warn_legacy(klass, kind: str) -> None:
    warnings.warn(f"{klass.__name__}.{_LEGACY[kind]}: since pgjax 0.3.0 each field declares "
                  f"its kind where it is defined (`name: type = pgjax.core.hparams."
                  f"{_HELPER[kind]}`); the class tuple still counts for now",
                  FutureWarning, stacklevel=4)


class LegacyDeclaration:
    """pgjax 0.2.0's class attribute (``TRACED``, ``COUNTS``, ``BATCH_DIVISORS``,
    ``CHOICES``), read from the fields' declarations, so that a plugin's
    ``TRACED = PPOConfig.TRACED + ("kl_stop",)`` still works (with a warning)."""

    def __init__(self, kind: str):
        self.kind = kind

    def __get__(self, obj, owner):
        _warn_legacy(owner, self.kind)
        fields = _declared(owner, self.kind)
        return fields if self.kind == CHOICES else tuple(n for n, on in fields.items() if on)


def traced_fields(cls) -> tuple[str, ...]:
    """The traced fields of a config class (or instance), in field order."""
    return tuple(_declared(_cls(cls), TRACED))


def count_fields(cls) -> tuple[str, ...]:
    """The loop counts of a config class (or instance), which must be >= 1."""
    return tuple(_declared(_cls(cls), COUNT))


def divisor_fields(cls) -> tuple[str, ...]:
    """The loop counts of a config class (or instance) that must divide the batch."""
    return tuple(n for n, on in _declared(_cls(cls), DIVISOR).items() if on)


def choice_fields(cls) -> dict[str, tuple[str, ...]]:
    """{field: the values it may take} of a config class (or instance)."""
    return _declared(_cls(cls), CHOICES)


def _cls(x):
    return x if isinstance(x, type) else type(x)


_registered: set = set()


def typed(cfg, values: Mapping[str, Any]):
    """``cfg`` with its traced fields set from ``values`` ({field: array}; the others keep
    their values): a pytree whose leaves are the traced fields, its static fields compiled
    in, read by attribute (``hp.clip_eps``)."""
    cls = type(cfg)
    names = traced_fields(cls)
    if cls not in _registered:
        jax.tree_util.register_dataclass(
            cls, data_fields=list(names),
            meta_fields=[f.name for f in dataclasses.fields(cls) if f.name not in names])
        _registered.add(cls)
    new = cls.__new__(cls)  # no __init__: a config's own checks are not for traced values
    for f in dataclasses.fields(cfg):
        object.__setattr__(new, f.name, values[f.name] if f.name in values and f.name in names
                           else getattr(cfg, f.name))
    return new


class HParams(NamedTuple):
    """A run's traced hyperparameters as the compiled functions read them: the discount
    ``gamma`` and ``gae_lambda`` of GAE, and ``rule``, the update rule's config with its
    traced fields as arrays (``typed``)."""

    gamma: Any
    gae_lambda: Any
    rule: Any

    @classmethod
    def of(cls, values, rule_name: str, rule_cfg) -> "HParams":
        """The record of a run's flat ``{option name: value}`` table (``gamma``,
        ``gae_lambda``, ``<rule>.<field>``); a record is returned as it is."""
        if isinstance(values, HParams):
            return values
        prefix = f"{rule_name}."
        own = {k[len(prefix):]: v for k, v in values.items() if k.startswith(prefix)}
        return cls(values["gamma"], values["gae_lambda"], typed(rule_cfg, own))


def legacy_item(cfg, name: str):
    """``hp["name"]`` on a typed config, as pgjax 0.2.0's dict was read: the field, with a
    warning saying what to write instead."""
    if not isinstance(name, str) or not any(f.name == name for f in dataclasses.fields(cfg)):
        raise KeyError(name)
    warnings.warn(f'hp["{name}"] is hp.{name} since pgjax 0.3.0 (a rule\'s hyperparameters '
                  f'are its typed config); write hp.{name}', FutureWarning, stacklevel=3)
    return getattr(cfg, name)


__all__ = ["HParams", "choice", "choice_fields", "count", "count_fields", "divisor_fields",
           "legacy_item", "traced", "traced_fields", "typed"]
