"""Readers that scale. The stratified bootstrap drawn as arrays
(``results.interval_estimates``): rliable's intervals to the bit on the same data and seed
(aggregates over tasks, curves point by point, probability of improvement with unequal run
counts), runs resampled within each task; the per-sample percentile bootstrap of many samples
at once (``results.bootstrap_cis``); a large grid's summary and figure; a sweep whose
finished groups rebuild sweep.json in one write. Speed itself is measured in
``benchmarks/readers.py``, not here."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import pgjax.analysis.results as r


def _rliable(scores: dict, func, reps: int, seed: int):
    from rliable import library as rly

    np.random.seed(seed)
    return rly.get_interval_estimates(scores, func, reps=reps)


def _rliable_aggregates(s):
    from rliable import metrics as m

    return np.array([m.aggregate_iqm(s), m.aggregate_mean(s), m.aggregate_median(s)])


def test_stream_indices_are_the_draws_of_randint_called_in_turn():
    """Blocks of one range, of several ranges (one value per 32-bit output under a mask,
    too large ones skipped) and of one run (no draw) give what calling ``randint`` for each
    block of each resample gives, and leave the generator where those calls would."""
    rng = np.random.default_rng(0)
    for blocks in ([(5, (5, 2))], [(3, (3, 1)), (3, (3, 1))], [(3, (3, 2)), (7, (7, 2))],
                   [(1, (1, 3)), (6, (6, 1)), (2, (2, 4))], [(1, (1, 2))]):
        seed = int(rng.integers(1000))
        want_rs = np.random.RandomState(seed)
        want = [[want_rs.randint(0, n, shape) for n, shape in blocks] for _ in range(37)]
        rs = np.random.RandomState(seed)
        got = r._stream_indices(rs, blocks, 20)
        got = [np.concatenate([a, b]) for a, b in zip(got, r._stream_indices(rs, blocks, 17))]
        for j in range(len(blocks)):
            np.testing.assert_array_equal(got[j], np.stack([w[j] for w in want]))
        assert rs.randint(0, 2 ** 31) == want_rs.randint(0, 2 ** 31)


@pytest.mark.parametrize("chunk", [4_000_000, 700])
def test_aggregate_intervals_are_rliables(chunk):
    """IQM, mean and median over [runs, tasks] with their 95% stratified-bootstrap intervals,
    several groups in turn (some of one shape, drawn together): rliable's numbers exactly,
    in pieces of ``chunk`` elements or all at once."""
    rng = np.random.default_rng(1)
    scores = {"a": rng.normal(size=(5, 3)), "b": rng.normal(size=(5, 3)),
              "c": rng.normal(size=(1, 2)), "d": rng.normal(size=(12, 1)) * 100,
              "e": rng.integers(0, 3, (4, 2)).astype(float)}
    want_point, want_ci = _rliable(scores, _rliable_aggregates, 300, seed=3)
    point, ci = r.interval_estimates(scores, r.aggregate_estimates, reps=300, seed=3,
                                     chunk=chunk)
    for k in scores:
        np.testing.assert_array_equal(point[k], want_point[k])
        np.testing.assert_array_equal(ci[k], want_ci[k])


@pytest.mark.parametrize("estimator", ["iqm", "mean", "median"])
def test_curve_intervals_are_rliables_point_by_point(estimator):
    """[runs, 1 task, points]: each point resampled on its own, as rliable does when the
    statistic is taken point by point (what ``pgjax plot`` draws)."""
    from rliable import metrics as m

    est = {"iqm": m.aggregate_iqm, "mean": m.aggregate_mean,
           "median": m.aggregate_median}[estimator]
    scores = {"g": np.random.default_rng(2).normal(size=(7, 1, 6))}
    want_point, want_ci = _rliable(
        scores, lambda s: np.array([est(s[..., i]) for i in range(s.shape[-1])]), 300, 0)
    point, ci = r.interval_estimates(scores, r.point_estimates(estimator), reps=300, seed=0)
    np.testing.assert_array_equal(point["g"], want_point["g"])
    np.testing.assert_array_equal(ci["g"], want_ci["g"])


def test_improvement_intervals_are_rliables():
    """P(X > Y) of pairs resampled independently, with ties, unequal run counts (draws of
    two ranges in turn) and one run: rliable's intervals exactly."""
    rng = np.random.default_rng(3)
    g = {"a": rng.integers(0, 4, (5, 2)).astype(float),
         "b": rng.integers(0, 4, (5, 2)).astype(float),
         "c": rng.normal(size=(3, 2)), "d": rng.normal(size=(1, 2))}
    pairs = {f"{x} > {y}": (g[x], g[y]) for x in g for y in g if x != y}
    want_point, want_ci = _rliable(pairs, r.probability_of_improvement, 200, seed=0)
    point, ci = r.interval_estimates(pairs, r.improvement_probabilities, reps=200, seed=0)
    for k in pairs:
        assert point[k] == want_point[k]
        np.testing.assert_array_equal(np.ravel(ci[k]), np.ravel(want_ci[k]))


def test_runs_are_resampled_within_each_task():
    """Every run scores 0 on one task and 100 on the other: resampling runs within each task
    leaves the mean at 50 in every resample (a zero-width interval), where resampling the
    cells of [runs, tasks] as one pool would not."""
    scores = {"g": np.array([[0.0, 100.0]] * 6)}
    _, ci = r.interval_estimates(scores, r.aggregate_estimates, reps=500)
    np.testing.assert_array_equal(ci["g"][:, 1], [50.0, 50.0])  # the mean
    pooled = np.random.default_rng(0).choice(scores["g"].ravel(), (500, 12)).mean(1)
    assert np.percentile(pooled, 97.5) - np.percentile(pooled, 2.5) > 30


def test_intervals_are_seeded_and_leave_numpys_global_state_alone():
    scores = {"g": np.random.default_rng(4).normal(size=(6, 2))}
    state = np.random.get_state()
    a = r.interval_estimates(scores, r.aggregate_estimates, reps=200, seed=5)[1]["g"]
    b = r.interval_estimates(scores, r.aggregate_estimates, reps=200, seed=5)[1]["g"]
    c = r.interval_estimates(scores, r.aggregate_estimates, reps=200, seed=6)[1]["g"]
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    after = np.random.get_state()
    assert after[0] == state[0] and np.array_equal(after[1], state[1]) and \
        after[2:] == state[2:]


def test_bootstrap_cis_are_bootstrap_ci_of_each_sample():
    rng = np.random.default_rng(5)
    samples = [rng.normal(size=rng.integers(1, 12)) * 100 for _ in range(60)] + \
        [rng.normal(size=40), np.array([3.0]), np.array([])]
    got = r.bootstrap_cis(samples)
    for x, row in zip(samples[:-1], got[:-1]):
        np.testing.assert_array_equal(row, r.bootstrap_ci(x))
    assert np.isnan(got[-1]).all()


def _grid_dir(root, values, seeds=2):
    """A finished run directory whose grid over ppo.lr has ``values`` (one group each)."""
    from pgjax.training.config import TrainConfig

    runs = []
    for v in values:
        for seed in range(seeds):
            d = root / "runs" / f"lr={v}_seed{seed}"
            d.mkdir(parents=True)
            it = np.arange(11)
            pd.DataFrame({"iteration": it, "env_steps": it * 100, "wall_time_s": it * 0.5,
                          "eval_return": np.where(it % 5 == 0, v * 1e4 * it + seed, np.nan)}
                         ).to_csv(d / "metrics.csv", index=False)
            runs.append({"id": d.name, "seed": seed, "hparams": {"ppo.lr": v}})
    config = TrainConfig(env="brax:inverted_pendulum").to_dict()
    (root / "config.json").write_text(json.dumps(
        {"config": {**config, "eval_every": 1}, "grid": {"ppo.lr": list(values)},
         "runs": runs}))
    (root / "status.json").write_text(json.dumps({"status": "finished", "failed_runs": {}}))


def test_a_large_grids_summary_lists_every_group_and_its_curve_draws_ten(tmp_path,
                                                                        monkeypatch):
    """A run directory of 40 grid points: summary.csv has a row per group, with each
    group's own seeds; curve.png draws the ten that end highest in colour and the other 30
    as one grey collection named in the legend."""
    from matplotlib.figure import Figure

    from pgjax.analysis import plots

    values = [round(0.001 * (i + 1), 3) for i in range(40)]
    _grid_dir(tmp_path / "g", values)
    summary = plots.summarize(tmp_path / "g")
    assert len(summary) == 40 and (summary["seeds"] == 2).all()
    best = summary.set_index("group").loc["ppo (lr=0.04)"]
    assert best["per_seed"] == "4000.0 4001.0"  # 0.04 x 1e4 x 10 updates, + seed
    drawn = {}
    real = Figure.savefig

    def keep(fig, *a, **k):
        ax = fig.axes[0]
        drawn["lines"] = [line.get_label() for line in ax.get_lines()]
        drawn["legend"] = [t.get_text() for t in fig.legends[0].get_texts()]
        return real(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    plots.plot_run(tmp_path / "g")
    assert (tmp_path / "g" / "curve.png").exists()
    assert len(drawn["lines"]) == 10
    assert all(f"lr={v}" in label for v, label in zip(values[30:], drawn["lines"]))
    assert any("the other 30 groups" in t for t in drawn["legend"])


def test_a_rebuilt_sweep_json_is_written_once_for_every_finished_group(tmp_path,
                                                                       monkeypatch):
    """A sweep whose groups have all finished and whose sweep.json is gone: one run enters
    every group, with its failed runs, in a single write of sweep.json (not one rewrite of
    the whole file per group), and trains nothing."""
    import pgjax.loop.runner
    import pgjax.tools.sweep
    from pgjax.loop.records import RunRecords
    from pgjax.tools.sweep import Sweep

    path = tmp_path / "s.toml"
    path.write_text(f'algos = ["ppo"]\nenvs = ["jax:cartpole"]\nout = "{tmp_path}"\n'
                    f'seeds = 1\n[config]\nsteps = 256\nnum_envs = 8\nrollout_len = 32\n'
                    f'[static]\nseed = [0, 1, 2, 3, 4]\n')
    sweep = Sweep.from_file(path)
    for cfg in sweep.groups.values():
        (tmp_path / "s" / cfg.name).mkdir(parents=True)
        records = RunRecords.create(cfg, cfg.runs())
        rows = "".join(f"{i},{i * 256},{i}.0\n" for i in range(cfg.num_iterations + 1))
        for d in records.run_dirs:  # every row of a finished run
            (d / "metrics.csv").write_text("iteration,env_steps,wall_time_s\n" + rows)
        failed = {records.run_dirs[0].name: "non-finite"} if cfg.seed == 3 else {}
        (records.root / "status.json").write_text(json.dumps(
            {"status": "finished", "failed_runs": failed}))
    writes = []
    real = pgjax.tools.sweep.atomic_write_json
    monkeypatch.setattr(pgjax.tools.sweep, "atomic_write_json",
                        lambda p, obj, *a: (writes.append(p.name), real(p, obj, *a)))
    monkeypatch.setattr(pgjax.loop.runner, "run", lambda *a, **k: pytest.fail("trained"))
    status = sweep.run(log=lambda *a: None)
    assert writes.count("sweep.json") == 1
    saved = json.loads((tmp_path / "s" / "sweep.json").read_text())["groups"]
    assert saved == status["groups"] and sorted(saved) == sorted(sweep.groups)
    assert all(e["status"] == "finished" for e in saved.values())
    assert [len(e["failed_runs"]) for e in saved.values()] == [0, 0, 0, 1, 0]
