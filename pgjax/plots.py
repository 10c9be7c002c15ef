"""Learning curves and summary tables from run directories (mean over seeds with a 95%
percentile-bootstrap confidence band)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.rundir import check_metrics, read_json, run_status


def run_group(record: dict, run: dict) -> str:
    """A run's group within its run directory (``record``: the directory's config.json): the
    algorithm, with the grid values that vary across the directory's runs, e.g.
    ``ppo (lr=0.001)``."""
    varied = [k for k, v in record.get("grid", {}).items() if len(v) > 1]
    label = ", ".join(f"{k.split('.')[-1]}={run['hparams'][k]:g}" for k in varied)
    return record["config"]["algo"] + (f" ({label})" if label else "")


def load_run_dir(root) -> pd.DataFrame:
    """Every metrics row of a run directory's finished (not failed) runs as one table with a
    ``group`` column (the run's varied hyperparameters, or the algorithm when nothing varies),
    ``seed``, ``run`` (its id) and ``chunk`` columns; ``.attrs["failed"]`` lists the failed
    runs (group, run, seed, update, error) and ``.attrs["runs"]`` counts every run per
    group."""
    root = Path(root)
    cfg = read_json(root / "config.json", "the run's config.json")
    frames, failed, counts = [], [], {}
    for r in cfg["runs"]:
        d = root / "runs" / r["id"]
        group = run_group(cfg, r)
        counts[group] = counts.get(group, 0) + 1
        failure = run_status(d)
        if failure is not None:
            failed.append({"group": group, "run": r["id"], "seed": r["seed"],
                           "update": failure.get("update"), "error": failure.get("error")})
            continue
        if not (d / "metrics.csv").exists() or not check_metrics(d / "metrics.csv"):
            continue
        df = with_chunks(pd.read_csv(d / "metrics.csv"), cfg["config"])
        df["group"] = group
        df["seed"] = r["seed"]
        df["run"] = r["id"]
        frames.append(df)
    out = pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame(columns=["group", "seed", "run", "chunk", "iteration", "env_steps",
                              "wall_time_s", "eval_return", "train_return", "episodes"])
    for column in EVAL_SOURCES:  # an evaluation no run recorded: an empty column
        if column not in out:
            out[column] = np.nan
    out.attrs.update(failed=failed, runs=counts)
    return out


def with_chunks(df: pd.DataFrame, config: dict) -> pd.DataFrame:
    """A run's metrics rows with the chunk each belongs to (0: the row before training)."""
    df["chunk"] = -(-df["iteration"] // int(config.get("eval_every", 1)))
    return df


RETURN_LABELS = {"eval_return_stochastic": "held-out eval return (stochastic policy)",
                 "eval_return": "held-out eval return (deterministic policy)",
                 "train_return": "training-episode return (stochastic policy)"}
# the recorded evaluations (``--eval-mode``), in the order ``auto`` prefers them: a policy's
# own score is that of the actions it samples, where that evaluation was recorded
EVAL_SOURCES = ("eval_return_stochastic", "eval_return")
EVAL_CURVE_POINTS = 3  # fewer evaluations per run than this: curves of training episodes


def curve_source(df: pd.DataFrame) -> str:
    """What learning curves of ``df``'s runs show: the held-out evaluations when every run
    has at least ``EVAL_CURVE_POINTS`` of them (``--evals``), else the returns of the
    training episodes (free: recorded at every update; evaluations are then drawn as
    markers on top)."""
    runs = df["run"].nunique()
    for source in EVAL_SOURCES:
        n = df[df[source].notna()].groupby("run").size()
        if len(n) == runs and runs and n.min() >= EVAL_CURVE_POINTS:
            return source
    return "train_return"


def eval_source(df: pd.DataFrame) -> str:
    """The evaluation final-return tables use by default: the stochastic policy's where
    every run recorded it (``--eval-mode stochastic|both``, the stateful policy's default),
    else the deterministic policy's."""
    runs = df["run"].nunique()
    ok = df[df["eval_return_stochastic"].notna()]["run"].nunique() if runs else 0
    return "eval_return_stochastic" if runs and ok == runs else "eval_return"


def return_points(df: pd.DataFrame, source: str, keys=("group", "run")) -> pd.DataFrame:
    """One row per run and curve point: ``keys``, point (0, 1, ... per run), env_steps,
    wall_time_s and the return. ``eval_return``: every evaluation. ``train_return``: per
    chunk, the mean return of the training episodes that ended in it (episode-weighted
    over its updates), carried forward through chunks where none ended."""
    keys = list(keys)
    if source in EVAL_SOURCES:
        ev = df[df[source].notna()]
        out = ev[keys + ["env_steps", "wall_time_s", source]].rename(
            columns={source: "value"}).copy()
    else:
        d = df[df["iteration"] > 0]
        ok = d["train_return"].notna()
        w = d["episodes"].where(ok, 0.0)
        d = d.assign(_w=w, _wv=(d["train_return"] * w).where(ok, 0.0))
        out = d.groupby(keys + ["chunk"], sort=True).agg(
            env_steps=("env_steps", "max"), wall_time_s=("wall_time_s", "max"),
            _w=("_w", "sum"), _wv=("_wv", "sum")).reset_index()
        out["value"] = (out["_wv"] / out["_w"]).where(out["_w"] > 0)
        out["value"] = out.groupby(keys)["value"].ffill()
        out = out.dropna(subset=["value"])[keys + ["env_steps", "wall_time_s", "value"]]
    out["point"] = out.groupby(keys).cumcount()
    return out.reset_index(drop=True)


def bootstrap_ci(x: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of x (over seeds)."""
    x = np.asarray(x, float)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def curve_table(points: pd.DataFrame, x: str = "env_steps") -> pd.DataFrame:
    """Mean over runs with a 95% bootstrap CI at every point of ``return_points``."""
    rows = []
    for (group, _), g in points.groupby(["group", "point"]):
        lo, hi = bootstrap_ci(g["value"].to_numpy())
        rows.append({"group": group, x: g[x].mean(), "mean": g["value"].mean(), "lo": lo,
                     "hi": hi, "n": len(g)})
    return pd.DataFrame(rows, columns=["group", x, "mean", "lo", "hi", "n"])


def plot_curves(df: pd.DataFrame, path, title: str = "", x: str = "env_steps") -> None:
    """Learning curves of one run directory (``load_run_dir``): per group the mean over
    runs with a 95% bootstrap band, of the evaluations or, where they are too few, of the
    training episodes with the evaluations as markers (``curve_source``)."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    failed = {}
    for f in df.attrs.get("failed", []):
        failed[f["group"]] = failed.get(f["group"], 0) + 1
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    source = curve_source(df) if len(df) else "eval_return"
    if len(df):
        marks = curve_table(return_points(df, eval_source(df)), x) \
            if source == "train_return" else None
        for group, g in curve_table(return_points(df, source), x).groupby("group"):
            more = f", {failed[group]} failed" if group in failed else ""
            line, = ax.plot(g[x], g["mean"], label=f"{group} (n={g['n'].max()}{more})")
            ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.25, color=line.get_color())
            if marks is not None:
                m = marks[marks["group"] == group]
                ax.errorbar(m[x].to_numpy(), m["mean"].to_numpy(),
                            yerr=np.stack([(m["mean"] - m["lo"]).to_numpy(),
                                           (m["hi"] - m["mean"]).to_numpy()]),
                            fmt="o", color=line.get_color(), capsize=3, ms=4)
    for group in sorted(set(failed) - set(df["group"] if len(df) else ())):
        ax.plot([], [], label=f"{group} (every run failed: {failed[group]})")
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(RETURN_LABELS[source] + " (mean, 95% CI)", fontsize=8)
    if source == "train_return":
        ax.set_title(f"{title}\nlines: training episodes; markers: held-out evaluations",
                     fontsize=9)
    else:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # nothing to label: no episode ended yet
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summarize(root) -> pd.DataFrame:
    """Final eval return per group over its finished runs: mean, 95% CI over seeds and
    per-seed values, next to the number of runs, of failed runs and their failures (run,
    update, error), so an aggregate over fewer runs than were started is never silent."""
    root = Path(root)
    df = load_run_dir(root)
    ev = df[df["eval_return"].notna()]
    last = ev.loc[ev.groupby(["group", "run"])["env_steps"].idxmax()] if len(ev) else ev
    rows = []
    for group, runs in df.attrs["runs"].items():
        g = last[last["group"] == group]
        fails = [f for f in df.attrs["failed"] if f["group"] == group]
        lo, hi = bootstrap_ci(g["eval_return"].to_numpy()) if len(g) else (np.nan, np.nan)
        rows.append({"group": group, "seeds": len(g), "runs": runs, "failed_runs": len(fails),
                     "env_steps": int(g["env_steps"].max()) if len(g) else 0,
                     "final_eval_return_mean": g["eval_return"].mean() if len(g) else np.nan,
                     "ci95_lo": lo, "ci95_hi": hi,
                     "per_seed": " ".join(f"{v:.1f}" for v in g["eval_return"]),
                     "failures": "; ".join(f"{f['run']}: update {f['update']}: {f['error']}"
                                           for f in fails)})
    out = pd.DataFrame(rows)
    out.to_csv(root / "summary.csv", index=False)
    return out


def plot_run(root) -> None:
    root = Path(root)
    cfg = json.loads((root / "config.json").read_text())
    plot_curves(load_run_dir(root), root / "curve.png",
                title=f"{cfg['config']['algo']} on {cfg['config']['env']}")
