"""pgjax plot on synthetic run directories with known returns: IQM, probability of
improvement, normalisation, and the files it writes. Plus the W&B mirror with a stub."""
from __future__ import annotations

import json
import sys
import types

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from pgjax.tools.plotting import aggregate_tables, load, plot_main
from pgjax.analysis.results import run_metrics


def fake_run_dir(root, algo, env, finals, first_seed: int = 0):
    runs = []
    for seed, final in enumerate(finals, first_seed):
        rid = f"seed{seed}"
        d = root / "runs" / rid
        d.mkdir(parents=True)
        it = np.arange(0, 31)
        df = pd.DataFrame({"iteration": it, "env_steps": it * 100, "wall_time_s": it * 0.5,
                           "eval_return": np.where(it % 10 == 0, final * it / 30, np.nan),
                           "kl_max": 0.01 + 0.001 * it, "ratio_dev_max": 0.2,
                           "clip_frac": np.where(it > 0, 0.1 * (it % 3), 0.9)})
        df.to_csv(d / "metrics.csv", index=False)
        runs.append({"id": rid, "seed": seed, "hparams": {}})
    (root / "config.json").write_text(json.dumps(
        {"config": {"algo": algo, "env": env}, "grid": {}, "runs": runs}))
    (root / "status.json").write_text(json.dumps({"status": "finished", "failed_runs": {}}))


@pytest.fixture
def sweep(tmp_path):
    a = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0]
    b = [15.0, 25.0, 35.0, 45.0, 55.0, 65.0, 75.0, 1000.0]
    fake_run_dir(tmp_path / "a_env1", "ppo", "brax:x", a)
    fake_run_dir(tmp_path / "b_env1", "trpo", "brax:x", b)
    return tmp_path, np.array(a), np.array(b)


def test_aggregates_match_hand_computation(sweep, monkeypatch):
    """Scores normalised by the task's fixed references (random 0, maximum 100 here), never
    by the runs shown: IQM, mean and P(X > Y) as computed by hand."""
    from pgjax.analysis import references

    monkeypatch.setitem(references.REFERENCES, "brax:x", references.Reference(
        0.0, "test", 100.0, "test", 1000))
    root, a, b = sweep
    df = load([root])
    agg, prob = aggregate_tables(df, reps=200)
    row = agg.set_index("group")
    assert (agg["scores"] == "normalised").all()
    np.testing.assert_allclose(row.loc["ppo", "iqm"], stats.trim_mean(a / 100, 0.25))
    np.testing.assert_allclose(row.loc["trpo", "mean"], (b / 100).mean())
    # P(trpo > ppo) by counting pairs: trpo's i-th run beats ppo's runs 1..i and the outlier
    # beats all 8
    wins = sum((x > y) for x in b for y in a) / 64
    p = prob.set_index("comparison").loc["trpo > ppo", "probability_of_improvement"]
    np.testing.assert_allclose(p, wins)
    assert (agg["iqm_ci95_lo"] <= agg["iqm"]).all()
    assert (agg["iqm"] <= agg["iqm_ci95_hi"]).all()


def test_a_task_without_references_is_aggregated_unnormalised_and_says_so(sweep):
    root, a, b = sweep
    agg, _ = aggregate_tables(load([root]), reps=50)
    row = agg.set_index("group")
    assert row["scores"].str.startswith("unnormalised: brax:x has no reference").all()
    np.testing.assert_allclose(row.loc["ppo", "mean"], a.mean())


def test_runs_that_all_score_the_same_normalise_to_one_and_reach_the_target(tmp_path,
                                                                             monkeypatch):
    """Every run of both groups at the task's maximum: each normalises to 1 (not 0), and the
    trust-region table says all of them reached it."""
    from pgjax.analysis import references

    monkeypatch.setitem(references.REFERENCES, "brax:x", references.Reference(
        0.0, "test", 500.0, "test", 1000))
    fake_run_dir(tmp_path / "a", "ppo", "brax:x", [500.0] * 5)
    fake_run_dir(tmp_path / "b", "spo", "brax:x", [500.0] * 5)
    df = load([tmp_path])
    agg, _ = aggregate_tables(df, reps=50)
    assert (agg["iqm"] == 1.0).all() and (agg["iqm_ci95_lo"] == 1.0).all()
    from pgjax.tools.plotting import trust_region_table

    tr = trust_region_table(df).set_index("group")
    # the fake curves reach 500 at the last evaluation (iteration 30, 3,000 steps)
    assert (tr["runs_reaching_target"] == "5/5").all()
    assert (tr["median_steps_to_target"] == 3000).all()
    np.testing.assert_allclose(tr["kl_max_largest"], 0.04)  # 0.01 + 0.001 * 30
    np.testing.assert_allclose(tr["ratio_dev_max_median"], 0.2)
    # clip fractions 0.1, 0.2, 0 ten times each over the 30 updates (iteration 0 is no update)
    np.testing.assert_allclose(tr["clip_frac_median"], 0.1)
    np.testing.assert_allclose(tr["clip_frac_largest"], 0.2)
    assert "clip_frac_a_median" not in tr  # only S2PG's product policy records the factors


def test_a_three_seed_table_shows_the_range_and_never_calls_it_a_ci(tmp_path):
    """A percentile bootstrap of 3 values is about their range: the aggregate, the summary
    and the curves show the range, labelled so, below 5 seeds, and a 95% CI from 5 on."""
    from pgjax.analysis import results
    from pgjax.analysis.plots import curve_table, summarize

    fake_run_dir(tmp_path / "a", "ppo", "brax:x", [100.0, 300.0, 200.0])
    fake_run_dir(tmp_path / "b", "spo", "brax:x", [150.0, 250.0, 350.0, 450.0, 550.0])
    df = load([tmp_path])
    agg, prob = aggregate_tables(df, reps=100)
    row = agg.set_index("group")
    three, five = row.loc["ppo"], row.loc["spo"]
    assert three["spread"] == "range of 3 runs" and five["spread"] == "95% CI"
    assert np.isnan(three["iqm_ci95_lo"]) and np.isnan(three["mean_ci95_hi"])
    assert (three["range_lo"], three["range_hi"]) == (100.0, 300.0)
    assert five["iqm_ci95_lo"] < five["iqm"] < five["iqm_ci95_hi"]
    assert results.spread_cell(three, "mean", 0) == "200 [range 100, 300]"
    pair = prob.set_index("comparison").loc["spo > ppo"]
    assert np.isnan(pair["ci95_lo"]) and results.improvement_cell(pair).endswith(
        "(3 runs: no interval)")
    summary = summarize(tmp_path / "a").iloc[0]
    assert np.isnan(summary["ci95_lo"]) and summary["spread"] == "range of 3 runs"
    assert (summary["range_lo"], summary["range_hi"]) == (100.0, 300.0)
    curve = curve_table(results.return_points(df, "eval_return"))
    last = curve[curve["group"] == "ppo"].iloc[-1]
    assert (last["lo"], last["hi"], last["n"]) == (100.0, 300.0, 3)


def test_more_seeds_of_one_configuration_pool_and_repeated_seeds_do_not(tmp_path):
    """A directory of the same configuration on other seeds (a sweep of more seeds) adds its
    runs to the group; one that repeats a seed is told apart by its directory, so no run is
    counted twice."""
    from pgjax.analysis import results

    fake_run_dir(tmp_path / "first", "ppo", "brax:x", [100.0, 200.0, 300.0])
    fake_run_dir(tmp_path / "more", "ppo", "brax:x", [400.0, 500.0], first_seed=3)
    final = results.finals(load([tmp_path]))
    assert sorted(final["group"].unique()) == ["ppo"] and len(final) == 5
    # a third directory of another configuration leaves the two pooled, and is named by
    # what differs
    fake_run_dir(tmp_path / "other", "ppo", "brax:x", [700.0], first_seed=5)
    for name, lr in (("first", 3e-4), ("more", 3e-4), ("other", 1e-3)):
        _with_config(tmp_path / name, ppo={"lr": lr})
    final = results.finals(load([tmp_path]))
    assert sorted(final.groupby("group").size().items()) == [("ppo (lr=0.0003)", 5),
                                                            ("ppo (lr=0.001)", 1)]
    fake_run_dir(tmp_path / "again", "ppo", "brax:x", [600.0], first_seed=4)
    _with_config(tmp_path / "again", ppo={"lr": 3e-4})
    final = results.finals(load([tmp_path / "first", tmp_path / "more", tmp_path / "again"]))
    assert len(final) == 6 and final["group"].nunique() == 3
    assert all("dir=" in g for g in final["group"].unique())


def test_success_rates_plot_and_aggregate_like_returns(tmp_path, capsys):
    """``--returns success``: the fraction of evaluation episodes won, drawn and aggregated
    as a return is (SMAX's won battles)."""
    for name, won in (("a", [0.2, 0.4, 0.6, 0.8, 1.0]), ("b", [0.0, 0.1, 0.2, 0.3, 0.4])):
        fake_run_dir(tmp_path / name, "happo" if name == "a" else "mappo", "jaxmarl:SMAX-3m",
                     [1.0] * 5)
        for seed, w in enumerate(won):
            f = tmp_path / name / "runs" / f"seed{seed}" / "metrics.csv"
            df = pd.read_csv(f)
            df["eval_success"] = np.where(df["eval_return"].notna(), w, np.nan)
            df.to_csv(f, index=False)
    out = tmp_path / "plots"
    assert plot_main([str(tmp_path / "a"), str(tmp_path / "b"), "--returns", "success",
                      "--out", str(out)]) == 0
    assert (out / "returns_success_jaxmarl-SMAX-3m.png").exists()
    agg = pd.read_csv(out / "aggregate_success.csv").set_index("group")
    np.testing.assert_allclose(agg.loc["happo", "mean"], 0.6)
    assert agg.loc["happo", "returns"] == "held-out success rate (deterministic policy)"


def test_plot_command_writes_figures_and_tables(sweep, capsys):
    root, _, _ = sweep
    assert plot_main([str(root), "--reps", "100"]) == 0
    for name in ("returns_brax-x.png", "returns_brax-x.svg", "trust_region_brax-x.png",
                 "aggregate.csv", "improvement.csv", "returns_brax-x.csv"):
        assert (root / name).exists(), name
    assert not (root / "trust_region_brax-x.svg").exists()  # per-update points: png only
    curve = pd.read_csv(root / "returns_brax-x.csv")
    last = curve[curve["env_steps"] == 3000].set_index("group")
    assert last.loc["ppo", "lo"] <= last.loc["ppo", "estimate"] <= last.loc["ppo", "hi"]
    np.testing.assert_allclose(last.loc["ppo", "estimate"],
                               stats.trim_mean([10, 20, 30, 40, 50, 60, 70, 80], 0.25))


def test_train_returns_give_the_stochastic_policys_curves_and_final_returns(tmp_path):
    """--returns train: curves and final returns of the training episodes, even where the
    deterministic evaluations say otherwise, written beside the evaluation-based files."""
    for algo, train_final in (("ppo", 100.0), ("trpo", 300.0)):
        root = tmp_path / f"{algo}_env1"
        fake_run_dir(root, algo, "brax:x", [50.0, 60.0, 70.0])
        for f in sorted((root / "runs").glob("*/metrics.csv")):
            df = pd.read_csv(f)
            it = df["iteration"]
            # episodes end every other update; the last chunk with episodes is iteration 30
            df["episodes"] = np.where((it > 0) & (it % 2 == 0), 2.0, 0.0)
            df["train_return"] = np.where(df["episodes"] > 0, train_final * it / 30, np.nan)
            df.to_csv(f, index=False)
    assert plot_main([str(tmp_path), "--reps", "50", "--returns", "train"]) == 0
    agg = pd.read_csv(tmp_path / "aggregate_train.csv").set_index("group")
    # final: the curve points over the last 5% of training (2,850 steps on): iteration 29
    # (its chunk ended no episode: iteration 28's value carried) and 30
    np.testing.assert_allclose(agg["final_return_mean[brax:x]"],
                               [100.0 * 58 / 60, 300.0 * 58 / 60])
    prob = pd.read_csv(tmp_path / "improvement_train.csv").set_index("comparison")
    assert prob.loc["trpo > ppo", "probability_of_improvement"] == 1.0
    curve = pd.read_csv(tmp_path / "returns_train_brax-x.csv")
    last = curve[(curve["source"] == "train_return") & (curve["env_steps"] == 3000)]
    np.testing.assert_allclose(last.set_index("group")["estimate"], [100.0, 300.0])
    assert (tmp_path / "returns_train_brax-x.png").exists()
    assert not (tmp_path / "aggregate.csv").exists()  # the evaluation tables are not replaced
    assert plot_main([str(tmp_path), "--reps", "50"]) == 0
    agg = pd.read_csv(tmp_path / "aggregate.csv").set_index("group")
    np.testing.assert_allclose(agg["final_return_mean[brax:x]"], [60.0, 60.0])  # evaluations


def test_wandb_mirror_logs_every_row(tmp_path, monkeypatch):
    logged = []

    class Run:
        def __init__(self, **kw):
            self.kw = kw

        def log(self, data, step):
            logged.append((self.kw["name"], step, data))

        def finish(self):
            logged.append((self.kw["name"], "finished", None))

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: Run(**kw)))
    from pgjax.loop.loggers import WandbSink

    d = tmp_path / "seed0"
    d.mkdir()
    sink = WandbSink([d], "proj", {"algo": "ppo"}, "group")
    sink.write(0, [{"iteration": 1, "env_steps": 64, "eval_return": "", "kl_max": 0.01,
                    "train_return": float("nan")}])
    sink.close()
    assert logged == [("seed0", 64, {"kl_max": 0.01}), ("seed0", "finished", None)]


def _fail(root, rid, update, error):
    (root / "runs" / rid / "status.json").write_text(json.dumps(
        {"status": "failed", "update": update, "error": error}))


def test_failed_runs_are_counted_and_listed_never_silently_dropped(sweep, capsys):
    from pgjax.analysis.plots import summarize

    root, a, b = sweep
    _fail(root / "b_env1", "seed7", 12, "non-finite loss (run seed7, update 12)")
    df = load([root])
    assert df[df["group"] == "trpo"]["run"].nunique() == 7  # the failed run is left out ...
    agg, _ = aggregate_tables(df, reps=50)
    assert agg.set_index("group").loc["trpo", "failed"] == 1  # ... and counted
    assert agg.set_index("group").loc["ppo", "failed"] == 0
    assert plot_main([str(root), "--reps", "50"]) == 0
    out = capsys.readouterr().out
    assert "1 failed runs left out" in out and "non-finite loss" in out
    fails = pd.read_csv(root / "failures.csv")
    assert fails[["group", "run", "update"]].values.tolist() == [["trpo", "b_env1/seed7", 12]]
    summary = summarize(root / "b_env1").iloc[0]  # what a run directory's summary.csv says
    assert (summary["seeds"], summary["runs"], summary["failed_runs"]) == (7, 8, 1)
    assert "seed7: update 12: non-finite loss" in summary["failures"]
    np.testing.assert_allclose(summary["final_eval_return_mean"], b[:7].mean())


def test_plot_errors_are_one_line_with_exit_code_2(sweep, tmp_path, capsys):
    root, _, _ = sweep
    for bad in (["--reps", "0"], ["--reps", "-5"]):
        assert plot_main([str(root), *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--reps must be >= 1" in err
    assert plot_main([str(tmp_path / "nothing")]) == 2
    assert "nothing does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert plot_main([str(tmp_path / "empty")]) == 2
    assert "no finished run directories with metrics" in capsys.readouterr().err
    (tmp_path / "a_file").write_text("")
    assert plot_main([str(root), "--reps", "10", "--out", str(tmp_path / "a_file")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "cannot write into --out" in err
    for seed in range(8):
        _fail(root / "a_env1", f"seed{seed}", 3, "non-finite loss")
    assert plot_main([str(root / "a_env1")]) == 2
    err = capsys.readouterr().err.strip()
    assert "every one of the 8 runs" in err and len(err.splitlines()) == 1


def test_same_named_run_directories_in_two_folders_stay_apart(tmp_path):
    fake_run_dir(tmp_path / "a" / "ppo_x", "ppo", "brax:x", [10.0, 20.0])
    fake_run_dir(tmp_path / "b" / "ppo_x", "ppo", "brax:x", [30.0, 40.0])
    df = load([tmp_path / "a", tmp_path / "b"])
    assert df["run"].nunique() == 4  # not 2
    assert sorted(df["group"].unique()) == ["ppo (dir=a/ppo_x)", "ppo (dir=b/ppo_x)"]


def _with_config(root, **options):
    cfg = json.loads((root / "config.json").read_text())
    cfg["config"].update(options)
    (root / "config.json").write_text(json.dumps(cfg))


def test_groups_differing_only_in_a_rule_option_are_separate_and_named_by_it(tmp_path):
    for name, lr in (("ppo_1", 3e-4), ("ppo_2", 1e-3)):
        fake_run_dir(tmp_path / name, "ppo", "brax:x", [10.0, 20.0])
        _with_config(tmp_path / name, ppo={"lr": lr, "epochs": 10})
    fake_run_dir(tmp_path / "plug", "klpen", "brax:x", [5.0])
    _with_config(tmp_path / "plug", algo_options=["d_targ=0.01", "epochs=4"])
    fake_run_dir(tmp_path / "plug2", "klpen", "brax:x", [6.0])
    _with_config(tmp_path / "plug2", algo_options=["d_targ=0.02", "epochs=4"])
    groups = set(load([tmp_path])["group"])
    assert groups == {"ppo (lr=0.0003)", "ppo (lr=0.001)", "klpen (d_targ=0.01)",
                      "klpen (d_targ=0.02)"}


def test_any_recorded_column_can_be_plotted(sweep, capsys):
    root, _, _ = sweep
    assert plot_main([str(root), "--reps", "20", "--metric", "kl_max"]) == 0
    assert (root / "metric_kl_max_brax-x.png").exists()
    assert plot_main([str(root), "--metric", "beta"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no run records 'beta'" in err and "kl_max" in err and len(err.splitlines()) == 1


def test_trust_region_figure_adds_the_per_agent_kl_of_multi_agent_groups(tmp_path):
    """A multi-agent group's per-agent max KL is drawn in its own panel beside the joint
    one; single-agent groups (no agent_kl_max) are left out of that panel, not drawn as 0."""
    from matplotlib.figure import Figure

    from pgjax.tools import plotting

    fake_run_dir(tmp_path / "ppo_env", "ppo", "brax:x", [1.0, 2.0])
    fake_run_dir(tmp_path / "happo_env", "happo", "brax:x", [1.0, 2.0])
    for d in (tmp_path / "happo_env" / "runs").iterdir():
        m = run_metrics(d)
        m["agent_kl_max"] = m["kl_max"] / 3
        m.to_csv(d / "metrics.csv", index=False)
    drawn = {}
    real = Figure.savefig

    def record(fig, path, *a, **k):
        drawn[str(path)] = [[line.get_label() for line in ax.get_lines()] for ax in fig.axes]
        return real(fig, path, *a, **k)

    import unittest.mock as mock
    with mock.patch.object(Figure, "savefig", record):
        plotting.plot_trust_region(load([tmp_path / "ppo_env", tmp_path / "happo_env"]),
                                   tmp_path)
    (panels,) = {tuple(map(tuple, v)) for k, v in drawn.items() if k.endswith(".png")}
    assert len(panels) == 3
    assert sorted(panels[0]) == ["happo", "ppo"] and list(panels[2]) == ["happo"]


def test_figures_are_written_as_compact_pngs_that_look_the_same(tmp_path):
    """save_png: a line plot with a translucent band, written at full colour and compacted,
    differs from the full-colour file by at most a few levels per channel on average and
    nowhere by a visible amount, in a palette file a fraction of the size."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from pgjax.analysis.plots import save_png

    fig, ax = plt.subplots(figsize=(6, 4))
    x = np.linspace(0, 1e6, 200)
    for k, c in enumerate(("C0", "C1", "C2")):
        y = np.sin(x / 1e5 + k) * 1000 + k * 500
        ax.plot(x, y, color=c, label=f"rule {k}")
        ax.fill_between(x, y - 300, y + 300, color=c, alpha=0.25)
    ax.axhline(900, color="red", ls="--")
    ax.legend()
    fig.savefig(tmp_path / "full.png", dpi=120)
    save_png(fig, tmp_path / "compact.png")
    plt.close(fig)
    with Image.open(tmp_path / "full.png") as a, Image.open(tmp_path / "compact.png") as b:
        assert b.mode == "P" and a.size == b.size
        full = np.asarray(a.convert("RGB"), dtype=float)
        small = np.asarray(b.convert("RGB"), dtype=float)
    diff = np.abs(full - small)
    assert diff.mean() < 1.0 and np.percentile(diff, 99.9) < 24
    size = (tmp_path / "compact.png").stat().st_size
    assert size < 0.6 * (tmp_path / "full.png").stat().st_size
