"""Verdict words from one function (pgjax.analysis.verdicts, re-exported by
pgjax.analysis.results): groups from
one distribution are not separated (or equivalent within a wide margin), groups clearly apart
are better / worse, too few seeds get no verdict, and the interval is Welch's (checked
against scipy's own)."""
import numpy as np
import pytest
from scipy import stats

from pgjax.analysis.results import MIN_SEEDS, VerdictError, spread_label, verdict, welch_interval


def test_welch_interval_is_scipys():
    rng = np.random.default_rng(1)
    a, b = rng.normal(3.0, 1.0, 7), rng.normal(2.0, 3.0, 5)
    for level in (0.95, 0.90):
        want = stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)
        np.testing.assert_allclose(welch_interval(a, b, level), (want.low, want.high),
                                   rtol=1e-12)


def test_one_distribution_is_not_separated_or_equivalent_within_a_wide_margin():
    """Pairs of 8-seed groups from one distribution: 'not separated' about 95% of the time
    (the interval's level), 'equivalent' within a margin of 4 standard deviations nearly
    always, never within a margin narrower than the interval."""
    rng = np.random.default_rng(0)
    pairs = [(rng.normal(1000, 100, 8), rng.normal(1000, 100, 8)) for _ in range(400)]
    plain = [verdict(a, b).outcome for a, b in pairs]
    assert set(plain) <= {"not separated", "better", "worse"}
    assert 0.92 <= plain.count("not separated") / len(pairs) <= 0.98
    wide = [verdict(a, b, margin=400).outcome for a, b in pairs]
    assert wide.count("equivalent") / len(pairs) >= 0.9
    first = next(i for i, o in enumerate(wide) if o == "equivalent")
    assert verdict(*pairs[first], margin=400).words == "equivalent within ±400"
    assert all(verdict(a, b, margin=1).outcome != "equivalent" for a, b in pairs)


def test_groups_clearly_apart_are_better_or_worse_with_their_figures():
    a, b = [3100.0, 3000, 3250, 2900, 3050], [1000.0, 1200, 900, 1100, 1050]
    v = verdict(a, b)
    assert v.outcome == "better" and v.difference == pytest.approx(2010.0)
    assert v.n_a == v.n_b == 5 and v.ci95[0] > 0
    assert verdict(b, a).outcome == "worse"
    line = v.sentence("HAPPO", "MAPPO")
    assert line.startswith("HAPPO vs MAPPO: better (final return difference +2,010 [95% CI")
    assert line.endswith("n = 5 and 5 seeds)")


def test_too_few_seeds_get_no_verdict_and_a_range_label():
    with pytest.raises(VerdictError, match="3 and 5 runs: a verdict needs at least 5"):
        verdict([1.0, 2, 3], [1.0, 2, 3, 4, 5])
    assert MIN_SEEDS == 5
    assert spread_label(3) == "range of 3 runs" and spread_label(5) == "95% CI"
    # NaNs (a failed run's missing final) do not count as seeds
    with pytest.raises(VerdictError, match="4 and 5 runs"):
        verdict([1.0, 2, 3, 4, np.nan], [1.0, 2, 3, 4, 5])


def test_final_has_one_definition():
    """No script or module computes a "final" return from the last row (``iloc[-1]``):
    ``pgjax.analysis.results.finals`` is the one definition (the mean of the evaluations over
    the last 5% of training)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    last_row = re.compile(r"iloc\[\s*-1\s*\]")
    assert last_row.search('"final": float(ev["eval_return"].iloc[-1])')  # the check can fail
    found = [f"{p.relative_to(root)}:{i}" for d in ("pgjax", "experiments", "benchmarks")
             for p in sorted((root / d).rglob("*.py"))
             for i, line in enumerate(p.read_text().splitlines(), 1) if last_row.search(line)]
    assert not found, found
