"""The same seed gives the same records, to the bit, as the runs kept in tests/data/golden
(written by ``python -m tests.golden``): PPO with a traced-hyperparameter grid and every
diagnostic, TRPO, SPO, FixPO, S2PG (the stateful policy) and HAPPO (the sequential
multi-agent combinator)."""
from __future__ import annotations

import pytest

from tests.golden import CASES, HERE, records


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_records_equal_the_kept_ones_to_the_bit(case, tmp_path):
    kept = (HERE / f"{case}.csv").read_text()
    now = records(case, tmp_path)
    assert now.splitlines() == kept.splitlines()
