"""Update rules, registered in ``pgjax.core.registry.RULES`` (``ALGORITHMS``) by name as (config
class, factory(config, policy)); the pieces to build one from are in ``pgjax.algos.pieces``."""
from typing import Callable, NamedTuple

from pgjax.algos.common import Algorithm, AlgoConfig, Batch, Updated
from pgjax.algos.fixpo import FixPOConfig, make_fixpo
from pgjax.algos import pieces
from pgjax.algos.ppo import PPOConfig, PPOKLConfig, make_ppo, make_ppo_kl
from pgjax.algos.spo import SPOConfig, make_spo
from pgjax.algos.trpo import TRPOConfig, make_trpo
from pgjax.core.hparams import choice, count, traced

from pgjax.core.registry import RULES, source_file


class Rule(NamedTuple):
    """A registered update rule: its config class and ``factory(config, policy) ->
    Algorithm``."""

    config: type
    factory: Callable


ALGORITHMS = RULES  # name -> Rule (config class, factory)


def register(name: str, config_cls, factory, *, replace: bool = False) -> None:
    """Make a new update rule available to the trainer, sweeps and CLI under ``name``.

    ``config_cls``: a frozen dataclass subclassing ``AlgoConfig``. Fields declared
    ``traced(default)`` are traced hyperparameters (vmappable: ``--grid
    <name>.<field>=a,b``; the rule reads them as ``hp.<field>``); ``count(default)`` loop
    counts (``divides_batch=True``: they must divide the batch) and ``choice(default,
    values)`` strings are checked before compiling; a metric named in ``ERRORS`` that an
    update reports > 0 stops that run with the message.
    ``factory(config, policy) -> Algorithm(name, config, init, update)``: see ``Algorithm``;
    most rules are ``pieces.sgd_rule(name, config, policy, objective, ...)``.
    From the command line: ``pgjax train --plugins my_rule.py --algo <name>
    --<name>.<field> value`` (or ``--algo-options field=value``).
    """
    import dataclasses

    if not (isinstance(config_cls, type) and issubclass(config_cls, AlgoConfig)
            and dataclasses.is_dataclass(config_cls)):
        raise TypeError(f"config_cls for '{name}' must be a dataclass subclassing AlgoConfig")
    if not callable(factory):
        raise TypeError(f"factory for '{name}' must be callable: factory(config, policy)")
    if name in RULES and RULES.builtin(name) and not replace:
        raise ValueError(f"'{name}' is a built-in update rule; pick another name")
    from pgjax.algos.multiagent import ALIASES

    if name in ALIASES:  # --algo <alias> would never reach the registered rule
        rule, scheme = ALIASES[name]
        raise ValueError(f"'{name}' is pgjax's name for --algo {rule} --agent-update "
                         f"{scheme}; register the rule under another name")
    RULES.register(name, Rule(config_cls, factory), replace=replace, origin=source_file(factory))


for _name, _rule in (("ppo", Rule(PPOConfig, make_ppo)), ("trpo", Rule(TRPOConfig, make_trpo)),
                     ("spo", Rule(SPOConfig, make_spo)), ("fixpo", Rule(FixPOConfig, make_fixpo)),
                     ("ppo_kl", Rule(PPOKLConfig, make_ppo_kl))):
    RULES.register(_name, _rule, origin=source_file(_rule.factory))
BUILTIN = tuple(RULES)  # the rules pgjax registers itself (RULES.builtin tells any name)


__all__ = ["ALGORITHMS", "BUILTIN", "Rule", "Algorithm", "AlgoConfig", "Batch", "FixPOConfig", "PPOConfig",
           "PPOKLConfig", "SPOConfig", "TRPOConfig", "make_fixpo", "make_ppo", "make_ppo_kl",
           "make_spo", "make_trpo", "pieces", "register"]
