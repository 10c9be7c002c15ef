"""pgjax.analysis.results: reference-normalised finals that never turn a solved seed into 0, the
final return as a mean over the last evaluations, status counts, group labels, and the
loader on committed (compressed) records."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pgjax.analysis.results as r
from pgjax.training.config import TrainConfig
from pgjax.analysis.references import REFERENCES

REPO = Path(__file__).resolve().parent.parent
ENV = "brax:inverted_pendulum"  # references: random 5.74, maximum 1000 (the optimum)


def fake_run_dir(root: Path, finals, config: dict | None = None, evals=4, iterations=30,
                 finished=True, curve=None):
    """A run directory whose runs are evaluated ``evals`` times, evenly, the last one at
    ``finals[seed]`` (``curve(seed, iteration)``: every evaluation's value instead)."""
    config = config or TrainConfig(env=ENV).to_dict()
    runs = []
    every = iterations // (evals - 1)
    for seed, final in enumerate(finals):
        d = root / "runs" / f"seed{seed}"
        d.mkdir(parents=True)
        it = np.arange(iterations + 1)
        value = [curve(seed, i) if curve else final * i / iterations for i in it]
        pd.DataFrame({"iteration": it, "env_steps": it * 100, "wall_time_s": it * 0.5,
                      "eval_return": np.where(it % every == 0, value, np.nan)}).to_csv(
            d / "metrics.csv", index=False)
        runs.append({"id": d.name, "seed": seed, "hparams": {}})
    (root / "config.json").write_text(json.dumps(
        {"config": {**config, "eval_every": 1}, "grid": {}, "runs": runs}))
    if finished:
        (root / "status.json").write_text(json.dumps({"status": "finished",
                                                      "failed_runs": {}}))


def test_a_seed_that_ends_at_972_5_of_1000_keeps_its_score(tmp_path):
    """The quickstart's case: one seed of a group that solves the task ends at 972.5. Its
    score comes from the task's references, not from the runs shown: about 0.97, never 0;
    every solved seed lies in [0, 1], and P(improvement) between two groups that both solve
    the task is near 0.5 (its interval covers it)."""
    fake_run_dir(tmp_path / "ppo", [1000.0] * 4, TrainConfig(env=ENV, algo="ppo").to_dict())
    fake_run_dir(tmp_path / "fixpo", [1000.0, 1000.0, 972.5, 1000.0],
                 TrainConfig(env=ENV, algo="fixpo").to_dict())
    final = r.finals(r.load([tmp_path]))
    ref = REFERENCES[ENV]
    seed = final[(final["group"] == "fixpo") & (final["seed"] == 2)].iloc[0]
    assert seed["final"] == 972.5
    assert seed["score"] == pytest.approx((972.5 - ref.random) / (1000 - ref.random))
    assert seed["score"] > 0.97
    assert final["score"].between(0, 1).all()
    agg, prob = r.aggregate(final, reps=500)
    row = agg.set_index("group")
    # 4 seeds: no interval, the range of the runs' scores (labelled so)
    assert row.loc["fixpo", "iqm"] > 0.97 and row.loc["fixpo", "range_lo"] > 0.97
    assert np.isnan(row.loc["fixpo", "iqm_ci95_lo"]) and row.loc["fixpo", "spread"] == \
        "range of 4 runs"
    assert row.loc["ppo", "iqm"] == 1.0 and (agg["scores"] == "normalised").all()
    p = prob.set_index("comparison").loc["ppo > fixpo"]
    # one of the 16 pairs is a win, the other 15 ties: (1 + 7.5) / 16 ... by Mann-Whitney
    assert abs(p["probability_of_improvement"] - 0.5) <= 0.15
    assert np.isnan(p["ci95_lo"]) and p["runs"] == 4


def test_final_return_is_the_mean_of_the_evaluations_over_the_last_5_percent(tmp_path):
    """Evaluated after every update of 100: the last 5% of training holds the evaluations
    at iterations 95..100 (k = 6); ``last`` keeps the single last one."""
    fake_run_dir(tmp_path / "a", [0.0], evals=101, iterations=100,
                 curve=lambda s, i: float(i))
    final = r.finals(r.load([tmp_path])).iloc[0]
    assert final["k"] == 6 and final["final"] == pytest.approx(np.mean(range(95, 101)))
    assert final["last"] == 100.0
    one = r.finals(r.load([tmp_path]), window=0).iloc[0]
    assert (one["k"], one["final"]) == (1, 100.0)


def test_tables_count_finished_unfinished_and_failed_runs(tmp_path, capsys):
    fake_run_dir(tmp_path / "done", [900.0, 950.0])
    fake_run_dir(tmp_path / "killed", [100.0], finished=False)
    (tmp_path / "done" / "runs" / "seed1" / "status.json").write_text(json.dumps(
        {"status": "failed", "update": 7, "error": "non-finite loss"}))
    df = r.load([tmp_path])
    assert "killed is unfinished" in capsys.readouterr().err
    assert set(df["run"]) == {"done/seed0"}  # the failed and the unfinished run left out
    table = r.run_table(df)
    assert dict(zip(table["run"], table["status"])) == {
        "done/seed0": "finished", "done/seed1": "failed", "killed/seed0": "unfinished"}
    agg, _ = r.aggregate(r.finals(df), reps=50)
    counts = agg.set_index("group")[["finished", "unfinished", "failed", "runs_used"]]
    assert counts.values.tolist() == [[1, 0, 1, 1], [0, 1, 0, 0]]
    with_unfinished = r.load([tmp_path], include_unfinished=True)
    assert set(with_unfinished["run"]) == {"done/seed0", "killed/seed0"}


def test_group_labels_list_only_what_differs_and_matters(tmp_path):
    """A memoryless PPO and two recurrent ones with different carry sizes: the memoryless
    group is not named by a carry it does not have, the recurrent ones by theirs; a
    directory's own label names its groups, with {option} filled in."""
    base = TrainConfig(env=ENV)
    fake_run_dir(tmp_path / "m", [1.0], base.to_dict())
    for size in (64, 128):
        fake_run_dir(tmp_path / f"r{size}", [1.0], base.with_options(
            {"policy": "recurrent", "recurrent.carry_size": size}).to_dict())
    table = r.runs([tmp_path])
    assert dict(zip(table["dir"], table["group"])) == {
        "m": "ppo (policy=auto)", "r64": "ppo (policy=recurrent, carry_size=64)",
        "r128": "ppo (policy=recurrent, carry_size=128)"}
    fake_run_dir(tmp_path / "l", [1.0], base.with_options({"label": "{algo}, {policy} policy",
                                                           "seed": 3}).to_dict())
    assert set(r.runs([tmp_path / "l"])["group"]) == {"ppo, auto policy"}


def test_an_unknown_label_option_is_refused_before_anything_runs():
    from pgjax.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"names '\{carry\}', which is not an option"):
        TrainConfig(env=ENV, label="{carry}").validate()


def test_load_reads_committed_compressed_records_without_parameters():
    df = r.load([REPO / "experiments/results/sweeps/spo_depth"])
    table = r.run_table(df)
    assert len(table) == 12 and (table["status"] == "finished").all()
    assert {"eval_return", "env_steps", "wall_time_s", "group", "seed", "num_envs",
            "ppo.lr"} <= set(df.columns)
    assert not list((REPO / "experiments/results/sweeps/spo_depth").rglob("params.msgpack"))
    final = r.finals(df)
    assert len(final) == 12 and final["env_steps"].eq(307200).all()
    assert final["score"].isna().all() and final["reference"].str.contains("brax:hopper").all()


def test_a_sweep_group_names_itself_with_label(tmp_path):
    from pgjax.core.errors import ConfigError
    from pgjax.training.options import fill_label, flat_options
    from pgjax.tools.sweep import Sweep

    spec = {"name": "s", "out": str(tmp_path), "algos": ["ppo", "spo"],
            "envs": ["jax:cartpole"], "config": {"label": "{algo} on {env}"}}
    groups = Sweep.from_dict(spec).groups.values()
    assert sorted(fill_label(c.label, flat_options(c.to_dict())) for c in groups) == [
        "ppo on jax:cartpole", "spo on jax:cartpole"]
    spec["config"]["label"] = "{algo} at {ppo.lr}"  # spo's groups have no ppo.lr
    with pytest.raises(ConfigError, match=r"names '\{ppo.lr\}'"):
        Sweep.from_dict(spec)


GENERATED_BLOCKS = ["headline", "results-headline", "quickstart-claims", "claims",
                    "mujoco-table", "dmc-table", "tianshou-settings", "preset-changes",
                    "ant-observation", "jaxmarl-table", "fixpo-paper-finals",
                    "s2pg-protocol-finals", "s2pg-protocol-deterministic",
                    "happo-protocol-finals", "happo-paper-finals", "playground-vs-brax",
                    "playground-trace"]


def test_every_generated_block_is_checked():
    assert sorted(_experiment("readme_claims").BLOCKS) == sorted(GENERATED_BLOCKS)


@pytest.mark.parametrize("block", GENERATED_BLOCKS)
def test_readme_figures_match_the_committed_records(block):
    """Each block of figures (README.md's, a documentation page's or experiments/README.md's,
    as readme_claims.HOMES says) is what experiments/readme_claims.py computes from the
    committed records (a rerun that differs shows up as a diff)."""
    claims = _experiment("readme_claims")
    text = claims.home(block).read_text()
    assert claims.readme_block(text, block) == claims.BLOCKS[block]()


def test_a_renamed_group_never_merges_with_another_directorys_group(tmp_path):
    """A directory with a grid over ppo.lr names its groups by the grid value; two others
    without a grid, told apart by lr, must not then join the grid's group when another
    option (num_envs) differs."""
    base = TrainConfig(env=ENV)
    grid = base.with_options({"num_envs": 64})
    fake_run_dir(tmp_path / "a", [1.0, 1.0], grid.to_dict())
    record = json.loads((tmp_path / "a" / "config.json").read_text())
    record["grid"] = {"ppo.lr": [0.001, 0.003]}
    record["runs"] = [{"id": f"lr={lr}_seed0", "seed": 0, "hparams": {"ppo.lr": lr}}
                      for lr in (0.001, 0.003)]
    for old, new in zip(("seed0", "seed1"), record["runs"]):
        (tmp_path / "a" / "runs" / old).rename(tmp_path / "a" / "runs" / new["id"])
    (tmp_path / "a" / "config.json").write_text(json.dumps(record))
    for name, lr in (("b", 0.001), ("c", 0.0003)):
        fake_run_dir(tmp_path / name, [1.0], base.with_options(
            {"num_envs": 8, "ppo.lr": lr}).to_dict())
    table = r.runs([tmp_path])
    groups = table.groupby("group")["dir"].nunique()
    assert (groups == 1).all(), table[["dir", "group"]]
    assert table["group"].nunique() == 4  # a's two grid points, b and c


def test_a_damaged_compressed_metrics_file_is_left_out_in_one_note(tmp_path, capsys):
    import gzip

    fake_run_dir(tmp_path / "a", [1.0, 2.0])
    for d in (tmp_path / "a" / "runs").iterdir():
        (d / "metrics.csv.gz").write_bytes(gzip.compress((d / "metrics.csv").read_bytes()))
        (d / "metrics.csv").unlink()
    packed = tmp_path / "a" / "runs" / "seed1" / "metrics.csv.gz"
    raw = packed.read_bytes()
    packed.write_bytes(raw[:10] + bytes(b ^ 0xFF for b in raw[10:40]) + raw[40:])
    df = r.load([tmp_path])
    assert set(df["run"]) == {"a/seed0"}
    assert "seed1" in capsys.readouterr().err


def _experiment(name):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_mujoco_table_final_best_anchor_ratio_and_decayed_seeds(tmp_path):
    """experiments/mujoco_table.py on hand-made records: evaluations every 1,000 steps to
    3,000; Hopper's seed 2 falls from 3,000 to 2,000 at the end, Reacher ends at -5."""
    table = _experiment("mujoco_table")

    def hopper(seed, i):  # 0 at start, 3,000 (seed 2: 3,300) at 1,000 and 2,000 steps
        top = 3300.0 if seed == 2 else 3000.0
        return 0.0 if i == 0 else (2000.0 if seed == 2 and i == 30 else top)

    fake_run_dir(tmp_path / "hopper", [0, 0, 0], TrainConfig(env="gym:Hopper-v5").to_dict(),
                 curve=hopper)
    fake_run_dir(tmp_path / "reacher", [0, 0], TrainConfig(env="gym:Reacher-v5").to_dict(),
                 curve=lambda seed, i: -5.0 - 20 * (i == 0))
    # Walker2d: evaluations every 500 steps; after 1,500: 1,000, 3,000, 1,000, 2,600, so the
    # final (2,600) is below 90% of the best (3,000) but above the seed's mean there (1,900)
    walker = {15: 1000.0, 20: 3000.0, 25: 1000.0, 30: 2600.0}
    fake_run_dir(tmp_path / "walker", [0], TrainConfig(env="gym:Walker2d-v5").to_dict(),
                 evals=7, curve=lambda seed, i: walker.get(i, 0.0))
    t = table.table(r.load([tmp_path]), decay_after=1500).set_index("task")
    h = t.loc["Hopper"]
    assert h["final_per_seed"] == "3000.0 3000.0 2000.0"
    assert h["final"] == pytest.approx(8000 / 3)
    assert h["best"] == pytest.approx(3100) and h["best_at"] == 1000  # seed-mean curve's top
    assert h["final_over_tianshou"] == pytest.approx(8000 / 3 / 2609.3)
    # 2,000 < 3,300 - 330, and below the seed's mean after 1,500 steps (3,300 and 2,000)
    # no episode spread in these records: below its own mean at all is a decline
    assert h["decayed"] == ("seed 2: 2,000 of best 3,300 (decline; its mean 2,650, no "
                            "episode spread recorded)")
    assert t.loc["Walker2d", "decayed"] == "seed 0: 2,600 of best 3,000 (peak; its mean 1,900)"
    assert (h["declining_seeds"], t.loc["Walker2d", "declining_seeds"]) == (1, 0)
    assert t.loc["Reacher", "final_over_tianshou"] == pytest.approx(4.1 / 5)
    assert t.loc["Reacher", "decayed"] == ""
    # against Tianshou's own final: its seeds' mean evaluation over the same last 5% of
    # 1,013,760 steps (the evaluations at 983,040 and 1,013,760), read here from the anchor
    # file by hand; P(pgjax > Tianshou) counts the pairs of seeds (ties half)
    with open(table.ANCHOR) as fh:
        rows = [r for r in csv.DictReader(line for line in fh if not line.startswith("#"))
                if r["task"] == "Hopper" and int(r["env_steps"]) in (983_040, 1_013_760)]
    theirs = [np.mean([float(r["eval_return"]) for r in rows if r["seed"] == str(k)])
              for k in range(10)]
    assert len(rows) == 20
    assert h["tianshou_final"] == pytest.approx(np.mean(theirs))
    assert h["final_over_tianshou_final"] == pytest.approx(8000 / 3 / np.mean(theirs))
    pairs = [(x > y) + 0.5 * (x == y) for x in (3000.0, 3000.0, 2000.0) for y in theirs]
    assert h["p_over_tianshou"] == pytest.approx(np.mean(pairs))
    assert h["tianshou_final_over_best"] == pytest.approx(np.mean(theirs) / 2609.3)
    md = table.markdown(t.reset_index())
    # the last column counts the flagged seeds by kind and spells out each decline
    assert md.count("| 1 of 3; seed 2: 2,000 of best 3,300 (decline; its mean 2,650, no "
                    "episode spread recorded) |") == 1
    assert "| 1 of 1 (1 peak) |" in md and "| none |" in md
    assert "≥ 0.9 × Tianshou's figure (its best) on 1 of 3, ≥ it on 1; " in md
    assert "Seeds that ended below 90% of their best and more than two standard errors below " \
           "their own mean after 1.5k (decline): 1 of 6; SE" in md
    # runs of another task version are shown beside the table, labelled, and not counted
    fake_run_dir(tmp_path.parent / "beside" / "hopper_v4", [0], TrainConfig(
        env="gym:Hopper-v4").to_dict(), curve=lambda seed, i: 2609.3)
    side = table.table(r.load([tmp_path.parent / "beside"]), decay_after=1500, beside=True)
    both = table.ordered(pd.concat([t.reset_index(), side], ignore_index=True))
    assert list(both["label"]) == ["Reacher", "Hopper", "Hopper-v4", "Walker2d"]
    # with the spread of each evaluation's 16 episodes recorded (their standard deviation
    # over the 16), a fall of 650 below the seed's mean is noise at 1,600 (standard error
    # 1,600 / sqrt(15) = 413: 1.57 SE) and a decline at 800 (3.15 SE)
    metrics = tmp_path / "hopper" / "runs" / "seed2" / "metrics.csv"
    rows = pd.read_csv(metrics)
    for spread, kind in ((1600.0, "noise; its mean 2,650, 1.57 SE below"),
                         (800.0, "decline; its mean 2,650, 3.15 SE below")):
        rows.assign(eval_return_std=np.where(rows["eval_return"].notna(), spread, np.nan)) \
            .to_csv(metrics, index=False)
        h = table.table(r.load([tmp_path]), decay_after=1500).set_index("task").loc["Hopper"]
        assert h["decayed"] == f"seed 2: 2,000 of best 3,300 ({kind})"
        assert h["declining_seeds"] == (kind.startswith("decline"))
    md = table.markdown(both)
    assert "| Hopper-v4 | 2,609 [2,609, 2,609] |" in md
    assert "(decline): 1 of 6 (rows with a version are beside the table, not counted); SE" in md


def test_mujoco_table_pools_one_configuration_and_refuses_two(tmp_path, capsys):
    """Directories of one configuration pool into a task's row, whatever they record beside
    the update (diagnostics); a task whose runs differ in an option that changes training is
    refused in one line naming the option and its values (exit code 2), never averaged."""
    table = _experiment("mujoco_table")
    hopper = TrainConfig(env="gym:Hopper-v5")
    fake_run_dir(tmp_path / "a", [0, 0], hopper.with_options({"diagnostics": "full"}).to_dict(),
                 curve=lambda seed, i: 1000.0)
    fake_run_dir(tmp_path / "b", [0], hopper.with_options({"diagnostics": "cheap"}).to_dict(),
                 curve=lambda seed, i: 4000.0)
    ev = r.load([tmp_path])
    table.one_configuration(ev, "runs")
    row = table.table(ev, decay_after=1500).iloc[0]
    assert (row["seeds"], row["final"]) == (3, pytest.approx(2000.0))
    fake_run_dir(tmp_path / "c", [0], hopper.with_options({"ppo.norm_adv": False}).to_dict(),
                 curve=lambda seed, i: 0.0)
    with pytest.raises(SystemExit) as e:
        table.one_configuration(r.load([tmp_path]), "runs")
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == ("mujoco_table.py: the runs of gym:Hopper-v5 differ in ppo.norm_adv = False, "
                   "True; pass the directories of one configuration (compare two with "
                   "--against)")


def test_mujoco_table_keeps_a_tasks_own_options_apart_and_unscored(tmp_path):
    """Runs of one env id with other --gym.kwargs are another task: their own row (labelled
    with the options), their own curve, compared only with runs of the same options, and
    never scored against the default task's references."""
    table = _experiment("mujoco_table")
    ant = TrainConfig(env="gym:Ant-v5")
    kw = "include_cfrc_ext_in_observation=False"
    fake_run_dir(tmp_path / "plain", [0, 1], ant.to_dict(), curve=lambda seed, i: 1000.0)
    fake_run_dir(tmp_path / "kw", [0, 1], ant.with_options({"gym.kwargs": kw}).to_dict(),
                 curve=lambda seed, i: 3000.0)
    ev = r.load([tmp_path])
    table.one_configuration(ev, "runs")  # two tasks, one configuration each
    t = table.table(ev, decay_after=1500, beside=True).set_index("label")
    assert t.loc["Ant-v5", "final"] == 1000.0 and t.loc[f"Ant-v5 ({kw})", "final"] == 3000.0
    finals = r.finals(ev).set_index("run")
    assert finals.loc["plain/seed0", "score"] == pytest.approx((1000 + 62.27) / (3879.7 + 62.27))
    assert np.isnan(finals.loc["kw/seed0", "score"])
    assert "its own options (kwargs=" in finals.loc["kw/seed0", "reference"]
    c = table.against(ev, r.load([tmp_path / "plain"])).set_index("task")
    assert list(c.index) == ["Ant"] and c.loc["Ant", "final"] == 1000.0


def test_tianshou_curves_in_the_anchor_file_give_its_published_figures():
    """experiments/anchors/tianshou_ppo_mujoco.csv: 10 seeds per task, evaluated every
    30,720 steps to 1,013,760 (pgjax's own evaluation grid at the table's settings); the
    highest point of each task's seed-mean curve is the figure Tianshou's README publishes
    (one decimal)."""
    table = _experiment("mujoco_table")
    ev = table.tianshou_runs("eval_return_stochastic")
    assert sorted(ev["env"].map(table.task_of).unique()) == sorted(table.TIANSHOU)
    for env, g in ev.groupby("env"):
        assert g["seed"].nunique() == 10
        assert sorted(g["env_steps"].unique()) == [30_720 * k for k in range(34)]
        best, _ = table.best_of_mean_curve(g, "eval_return_stochastic")
        assert best == pytest.approx(table.TIANSHOU[table.task_of(env)], abs=0.05), env


def test_dmc_table_finals_per_task_and_rule_and_normalised_aggregate(tmp_path):
    """experiments/dmc_table.py on hand-made records: PPO and SPO on two Playground tasks;
    each cell is the mean of the seeds' last evaluations, the aggregate row the IQM of
    (final - random) / (1000 - random) with the tasks' stored random returns."""
    dmc = _experiment("dmc_table")
    finals = {("ppo", "CartpoleBalance"): [900.0, 800.0], ("spo", "CartpoleBalance"): [700.0] * 2,
              ("ppo", "WalkerWalk"): [400.0, 200.0], ("spo", "WalkerWalk"): [300.0] * 2}
    for (algo, task), f in finals.items():
        fake_run_dir(tmp_path / f"{algo}_{task}", f, TrainConfig(
            env=f"playground:{task}", algo=algo).to_dict())
    t, agg, prob = dmc.table(r.load([tmp_path]))
    assert list(zip(t["task"], t["rule"])) == [("CartpoleBalance", "ppo"),
                                               ("CartpoleBalance", "spo"),
                                               ("WalkerWalk", "ppo"), ("WalkerWalk", "spo")]
    assert list(t["final"]) == [850.0, 700.0, 300.0, 300.0]
    assert t.loc[0, "final_per_seed"] == "900.0 800.0"
    cart, walker = (REFERENCES[f"playground:{x}"].random for x in ("CartpoleBalance",
                                                                   "WalkerWalk"))
    scores = [(900 - cart) / (1000 - cart), (800 - cart) / (1000 - cart),
              (400 - walker) / (1000 - walker), (200 - walker) / (1000 - walker)]
    iqm = np.mean(sorted(scores)[1:3])  # the middle half of four
    assert agg.set_index("group").loc["ppo", "iqm"] == pytest.approx(iqm)
    md = dmc.markdown(t, agg, prob)
    # 2 seeds: the seeds' range, said so (never a "95% CI" that is the range)
    assert "| task | PPO final [range] | SPO final [range] |" in md
    assert "[the range of the 2 seeds: too few for an interval or a verdict]" in md
    assert "| CartpoleBalance | 850 [800, 900] | 700 [700, 700] |" in md
    assert f"| **IQM of normalised finals** | {iqm:.3f} [" in md
    assert "P(PPO > SPO) = " in md and "P(SPO > PPO)" not in md


def test_probability_of_improvement_equals_rliables():
    """results.probability_of_improvement (pairs counted with arrays) against rliable's own
    (scipy's Mann-Whitney U per task) on random score matrices: ties, identical matrices,
    unequal run counts, one or several tasks."""
    from rliable import metrics as m

    rng = np.random.default_rng(0)
    for trial in range(300):
        n, k, tasks = rng.integers(1, 11, 3)
        x = rng.integers(0, 4, (n, tasks)).astype(float)  # many ties
        y = x.copy() if trial % 5 == 0 else rng.integers(0, 4, (k, tasks)).astype(float)
        if trial % 3 == 0:
            x, y = rng.normal(size=x.shape), rng.normal(size=y.shape)
        assert r.probability_of_improvement(x, y) == m.probability_of_improvement(x, y)
    assert r.probability_of_improvement([[1.0], [3.0]], [[2.0], [3.0]]) == 0.375  # by hand
