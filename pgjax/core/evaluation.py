"""Evaluation modes as one component: each held-out evaluation policy's name, whether it acts
with the distribution's mode, the key its episodes draw from, its record columns and labels.

Every writer (the trainer's ``evaluate``, ``pgjax eval``, the run records and progress lines)
and every reader (results, plots, ``pgjax plot --returns``) takes names and keys from here.
"""
from __future__ import annotations

from typing import NamedTuple


class EvalMode(NamedTuple):
    """One held-out evaluation policy: ``name`` (``--eval-mode``), ``deterministic`` (acts
    with the distribution's mode; else samples actions as in training), ``suffix`` of its
    record columns, ``flag`` (``pgjax plot --returns``), ``policy`` (in words) and
    ``key_offset`` (its episodes' key: the evaluation key folded with it; None: the
    evaluation key itself)."""

    name: str
    deterministic: bool
    suffix: str
    flag: str
    policy: str
    key_offset: int | None

    @property
    def return_column(self) -> str:
        return f"eval_return{self.suffix}"

    @property
    def columns(self) -> tuple[str, str, str]:
        """(mean return, std of the return, mean length) over the eval episodes."""
        return (self.return_column, f"eval_return{self.suffix}_std",
                f"eval_length{self.suffix}")

    @property
    def success_column(self) -> str:
        """The fraction of the eval episodes that succeeded (environments that report an
        outcome: ``EnvSpec.success``, SMAX's won battles)."""
        return f"eval_success{self.suffix}"

    @property
    def label(self) -> str:
        return f"held-out eval return ({self.policy} policy)"

    def key(self, key):
        """The key this mode's episodes draw from, given an evaluation's key."""
        import jax

        return key if self.key_offset is None else jax.random.fold_in(key, self.key_offset)


DETERMINISTIC = EvalMode("deterministic", True, "", "eval", "deterministic", None)
STOCHASTIC = EvalMode("stochastic", False, "_stochastic", "eval_stochastic", "stochastic", 1)
MODES = {m.name: m for m in (DETERMINISTIC, STOCHASTIC)}

TRAIN_RETURN = "train_return"  # the training episodes' return, recorded every update
TRAIN_LABEL = "training-episode return (stochastic policy)"
# the evaluation columns a table's final return prefers, first choice first
EVAL_SOURCES = (STOCHASTIC.return_column, DETERMINISTIC.return_column)
RETURN_LABELS = {**{m.return_column: m.label for m in (STOCHASTIC, DETERMINISTIC)},
                 **{m.success_column: f"held-out success rate ({m.policy} policy)"
                    for m in (STOCHASTIC, DETERMINISTIC)},
                 TRAIN_RETURN: TRAIN_LABEL}
# pgjax plot --returns: the column each choice shows (success: the fraction of evaluation
# episodes that succeeded, where the environment reports it, e.g. SMAX's won battles)
RETURNS = {"auto": "auto", **{m.flag: m.return_column for m in MODES.values()},
           **{m.flag.replace("eval", "success"): m.success_column for m in MODES.values()},
           "train": TRAIN_RETURN}


def columns(modes, success: bool = False) -> tuple[str, ...]:
    """The record columns the evaluations of ``modes`` (names) fill, in order; with
    ``success``, each mode's success rate after its return columns."""
    return tuple(c for name in modes
                 for c in MODES[name].columns + ((MODES[name].success_column,) if success
                                                 else ()))


def describe(modes, episodes: int, iterations, success: str = "") -> dict[str, str]:
    """``config.json``'s ``returns``: what each return column of a run holds (and, where the
    environment reports an outcome, described by ``success``, each success column)."""
    when = (f"after the iterations {list(iterations)}" if len(iterations) else
            "never recorded: the run was not evaluated (--evals 0); pgjax eval evaluates its "
            "saved policy")
    out = {**{MODES[name].return_column:
              f"held-out: mean over {episodes} episodes of the {name} policy on separate "
              f"environments, {when}" for name in modes},
           TRAIN_RETURN: "mean return of the training episodes (stochastic policy) that "
                         "ended in the update; blank when none ended"}
    if success:
        out.update({MODES[name].success_column:
                    f"held-out: fraction of the same {episodes} episodes of the {name} policy "
                    f"that ended {success}" for name in modes})
    return out


__all__ = ["DETERMINISTIC", "EVAL_SOURCES", "EvalMode", "MODES", "RETURNS", "RETURN_LABELS",
           "STOCHASTIC", "TRAIN_LABEL", "TRAIN_RETURN", "columns", "describe"]
