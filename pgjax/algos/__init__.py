"""Update rules. ``ALGORITHMS`` maps a name to (config class, factory(config, policy)); the
pieces to build one from are in ``pgjax.algos.pieces``."""
from pgjax.algos.common import Algorithm, AlgoConfig, Batch
from pgjax.algos.fixpo import FixPOConfig, make_fixpo
from pgjax.algos import pieces
from pgjax.algos.ppo import PPOConfig, PPOKLConfig, make_ppo, make_ppo_kl
from pgjax.algos.spo import SPOConfig, make_spo
from pgjax.algos.trpo import TRPOConfig, make_trpo

ALGORITHMS = {"ppo": (PPOConfig, make_ppo), "trpo": (TRPOConfig, make_trpo),
              "spo": (SPOConfig, make_spo), "fixpo": (FixPOConfig, make_fixpo),
              "ppo_kl": (PPOKLConfig, make_ppo_kl)}
BUILTIN = tuple(ALGORITHMS)  # the built-in rules (configured by --<rule>.* options)


def register(name: str, config_cls, factory, *, replace: bool = False) -> None:
    """Make a new update rule available to the trainer, sweeps and CLI under ``name``.

    ``config_cls``: a frozen dataclass subclassing ``AlgoConfig``. Fields named in its
    ``TRACED`` become traced hyperparameters (vmappable: ``--grid <name>.<field>=a,b``);
    ``COUNTS`` / ``BATCH_DIVISORS`` are checked before compiling; a metric named in
    ``ERRORS`` that an update reports > 0 stops that run with the message.
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
    if name in BUILTIN and not replace:
        raise ValueError(f"'{name}' is a built-in update rule; pick another name")
    if name in ALGORITHMS and not replace:
        old, new = _origin(ALGORITHMS[name][1]), _origin(factory)
        if not _same_source(old, new):  # a re-import, or a copy of the same file: one rule
            raise ValueError(f"update rule '{name}' is registered twice: by {old} and by "
                             f"{new}; rename one of them (or pass replace=True)")
    ALGORITHMS[name] = (config_cls, factory)


def _same_source(a: str, b: str) -> bool:
    """Whether two registrations come from the same file, or from files with one text."""
    from pathlib import Path

    if a == b:
        return True
    try:
        return Path(a).read_bytes() == Path(b).read_bytes()
    except OSError:
        return False


def _origin(fn) -> str:
    """The file that defines ``fn`` (where a registration came from)."""
    import inspect

    try:
        return inspect.getsourcefile(fn) or repr(fn)
    except TypeError:
        return repr(fn)


__all__ = ["ALGORITHMS", "BUILTIN", "Algorithm", "AlgoConfig", "Batch", "FixPOConfig", "PPOConfig",
           "PPOKLConfig", "SPOConfig", "TRPOConfig", "make_fixpo", "make_ppo", "make_ppo_kl",
           "make_spo", "make_trpo", "pieces", "register"]
