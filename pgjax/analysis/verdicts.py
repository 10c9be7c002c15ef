"""Verdicts on a comparison of two groups of runs: better, worse, not separated, or
equivalent within a stated margin, from Welch intervals on the difference of their means.

``verdict(a, b)`` is the one place a claim word is chosen: ``a`` is the method a claim is
about, ``b`` the baseline, each the final returns of its seeds (one value per run). With
``MIN_SEEDS`` or more runs per group:

- *better* / *worse*: the two-sided 95% Welch interval of mean(a) - mean(b) lies above /
  below 0;
- *equivalent within ±m* (only when a margin ``m`` is given): two one-sided Welch tests at
  5% (TOST), i.e. the 90% interval lies inside [-m, m];
- *not separated*: neither. Not separated is not equivalent: it says the seeds cannot tell.

Below ``MIN_SEEDS`` runs in a group no verdict is given (``VerdictError``): with 3 seeds an
interval is too wide to mean anything, and a percentile bootstrap of 3 values is just their
range. Welch's interval rather than a bootstrap: at 5 to 10 seeds a percentile bootstrap
covers well below its nominal level, the t interval does not assume equal variances, and its
equivalence test is the standard one (Schuirmann's TOST).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

MIN_SEEDS = 5  # runs per group below which no verdict is given (tables show the range)
OUTCOMES = ("better", "worse", "not separated", "equivalent")


class VerdictError(ValueError):
    """A comparison that cannot carry a verdict (too few runs in a group)."""


class Verdict(NamedTuple):
    """The outcome of ``verdict`` and the figures behind it: the difference of the means
    (a - b), its 95% Welch interval (``ci95``) and the 90% one the equivalence test reads
    (``ci90``), the runs per group and the margin (None: no equivalence test asked)."""

    outcome: str
    difference: float
    ci95: tuple[float, float]
    ci90: tuple[float, float]
    n_a: int
    n_b: int
    margin: Optional[float]

    @property
    def words(self) -> str:
        """The outcome as a claim says it (``equivalent within ±100``)."""
        if self.outcome == "equivalent":
            return f"equivalent within ±{self.margin:,.4g}"
        return self.outcome

    def sentence(self, a: str, b: str, unit: str = "final return") -> str:
        """One line: the verdict with its figures and n, e.g. ``HAPPO vs MAPPO: better
        (final return difference +412 [95% CI +120, +704]; n = 5 and 5 seeds)``."""
        lo, hi = self.ci95
        return (f"{a} vs {b}: {self.words} ({unit} difference {self.difference:+,.4g} "
                f"[95% CI {lo:+,.4g}, {hi:+,.4g}]; n = {self.n_a} and {self.n_b} seeds)")


def welch_interval(a, b, level: float) -> tuple[float, float]:
    """Two-sided ``level`` Welch interval of mean(a) - mean(b)."""
    from scipy import stats

    a, b = np.asarray(a, float), np.asarray(b, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    d = a.mean() - b.mean()
    se = np.sqrt(va + vb)
    if se == 0:
        return d, d
    dof = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    t = stats.t.ppf(0.5 + level / 2, dof)
    return d - t * se, d + t * se


def verdict(a, b, margin: Optional[float] = None, min_seeds: int = MIN_SEEDS) -> Verdict:
    """The verdict on "``a`` is higher than ``b``" (see the module docstring); ``a`` and ``b``
    are one value per run (NaNs dropped). Raises ``VerdictError`` below ``min_seeds`` runs in
    a group."""
    a = np.asarray(a, float)[~np.isnan(np.asarray(a, float))]
    b = np.asarray(b, float)[~np.isnan(np.asarray(b, float))]
    if min(a.size, b.size) < max(min_seeds, 2):
        raise VerdictError(f"{a.size} and {b.size} runs: a verdict needs at least "
                           f"{max(min_seeds, 2)} per group; report each group's range with "
                           f"its n, or add seeds")
    if margin is not None and not margin > 0:
        raise VerdictError(f"an equivalence margin must be > 0, got {margin}")
    ci95, ci90 = welch_interval(a, b, 0.95), welch_interval(a, b, 0.90)
    if ci95[0] > 0:
        outcome = "better"
    elif ci95[1] < 0:
        outcome = "worse"
    elif margin is not None and -margin < ci90[0] and ci90[1] < margin:
        outcome = "equivalent"
    else:
        outcome = "not separated"
    return Verdict(outcome, float(a.mean() - b.mean()), tuple(map(float, ci95)),
                   tuple(map(float, ci90)), int(a.size), int(b.size), margin)


def spread_label(n: int) -> str:
    """How a table labels the spread of a group of ``n`` runs: a 95% interval from
    ``MIN_SEEDS`` runs on, below that the runs' range (never a "95% CI" that is the range)."""
    return "95% CI" if n >= MIN_SEEDS else f"range of {n} run{'s' if n != 1 else ''}"


__all__ = ["MIN_SEEDS", "OUTCOMES", "Verdict", "VerdictError", "spread_label", "verdict",
           "welch_interval"]
