"""The same seed gives the same records as the runs kept in tests/data/golden (written by
``python tests/golden.py``): PPO with a traced-hyperparameter grid and every diagnostic,
TRPO, SPO, FixPO, S2PG (the stateful policy) and HAPPO (the sequential multi-agent
combinator). To the bit on the CPU that wrote them; on another CPU within the float32
rounding that XLA's CPU-specific code generation leaves (``golden.differences``), a bound
that a 1% change of the learning rate exceeds."""
from __future__ import annotations

import pytest

from golden import CASES, HERE, differences, host_key, kept_host, records


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_records_equal_the_kept_ones(case, tmp_path):
    kept = (HERE / f"{case}.csv").read_text()
    now = records(case, tmp_path)
    moved = differences(now, kept)
    assert not moved, moved[:10]
    if kept_host(kept) == host_key():
        # the CPU, JAX and XLA flags that wrote them: nothing may move at all
        assert now.splitlines() == kept.splitlines()


@pytest.mark.slow
def test_a_one_percent_change_of_the_learning_rate_is_told_apart(tmp_path):
    """The tolerance is no blanket: SPO's learning rate at 3.03e-4 instead of 3e-4 moves the
    first update's KL by 1.6%, and the final parameters with it, beyond it."""
    kept = (HERE / "spo.csv").read_text()
    now = records("spo", tmp_path, **{"spo.lr": 3.03e-4})
    moved = differences(now, kept)
    # the same runs, columns and leaves: what moved is values
    assert moved and not any(m.startswith("runs ") or "differ" in m for m in moved), moved


def test_a_checkpoint_saved_with_one_part_dicts_restores_into_parts(tmp_path):
    """pgjax 0.2.0 kept a rule's per-part state as a dict of the parts it had (TRPO's
    critic optimiser: ``{"critic": ...}``); such a checkpoint restores into today's
    ``Parts(None, ...)``, values and all, and today's own checkpoints round-trip as before."""
    import jax.numpy as jnp
    import numpy as np

    from pgjax.loop.checkpoint import Checkpoints
    from pgjax.model.nets import Parts

    old = {"opt": {"critic": {"mu": jnp.arange(3.0)}}, "params": {"actor": jnp.ones(2),
                                                                 "critic": jnp.zeros(2)}}
    ckpt = Checkpoints(tmp_path / "old")
    ckpt.save(1, old, {"chunk": 1})
    target = {"opt": Parts(None, {"mu": jnp.zeros(3)}),
              "params": Parts(jnp.zeros(2), jnp.ones(2))}
    state, meta = ckpt.restore(1, target)
    assert isinstance(state["opt"], Parts) and state["opt"].actor is None
    np.testing.assert_array_equal(state["opt"].critic["mu"], [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(state["params"].actor, [1.0, 1.0])
    assert meta == {"chunk": 1}
    now = Checkpoints(tmp_path / "new")
    now.save(1, state, {"chunk": 1})
    again, _ = now.restore(1, target)
    np.testing.assert_array_equal(again["opt"].critic["mu"], [0.0, 1.0, 2.0])
