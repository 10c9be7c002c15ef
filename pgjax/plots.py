"""Learning curves and summary tables from run directories (mean over seeds with a 95%
percentile-bootstrap confidence band)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def run_failure(run_dir) -> dict | None:
    """A failed run's ``status.json`` ({"update": ..., "error": ...}), else None."""
    path = Path(run_dir) / "status.json"
    if not path.exists():
        return None
    status = json.loads(path.read_text())
    return status if status.get("status") == "failed" else None


def run_group(record: dict, run: dict) -> str:
    """A run's group within its run directory (``record``: the directory's config.json): the
    algorithm, with the grid values that vary across the directory's runs, e.g.
    ``ppo (lr=0.001)``."""
    varied = [k for k, v in record.get("grid", {}).items() if len(v) > 1]
    label = ", ".join(f"{k.split('.')[-1]}={run['hparams'][k]:g}" for k in varied)
    return record["config"]["algo"] + (f" ({label})" if label else "")


def load_run_dir(root) -> pd.DataFrame:
    """All eval rows of a run directory's finished (not failed) runs as one table with a
    ``group`` column (the run's varied hyperparameters, or the algorithm when nothing varies)
    and a ``seed`` column; ``.attrs["failed"]`` lists the failed runs (group, run, seed,
    update, error) and ``.attrs["runs"]`` counts every run per group."""
    root = Path(root)
    cfg = json.loads((root / "config.json").read_text())
    frames, failed, counts = [], [], {}
    for r in cfg["runs"]:
        d = root / "runs" / r["id"]
        group = run_group(cfg, r)
        counts[group] = counts.get(group, 0) + 1
        failure = run_failure(d)
        if failure is not None:
            failed.append({"group": group, "run": r["id"], "seed": r["seed"],
                           "update": failure.get("update"), "error": failure.get("error")})
            continue
        if not (d / "metrics.csv").exists():
            continue
        df = pd.read_csv(d / "metrics.csv")
        df = df[df["eval_return"].notna()]
        df["group"] = group
        df["seed"] = r["seed"]
        frames.append(df)
    out = pd.concat(frames, ignore_index=True) if frames else \
        pd.DataFrame(columns=["group", "seed", "env_steps", "eval_return"])
    out.attrs.update(failed=failed, runs=counts)
    return out


def bootstrap_ci(x: np.ndarray, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of x (over seeds)."""
    x = np.asarray(x, float)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def curve_table(df: pd.DataFrame, x: str = "env_steps") -> pd.DataFrame:
    rows = []
    for (group, xv), g in df.groupby(["group", x]):
        lo, hi = bootstrap_ci(g["eval_return"].to_numpy())
        rows.append({"group": group, x: xv, "mean": g["eval_return"].mean(), "lo": lo, "hi": hi,
                     "n": len(g)})
    return pd.DataFrame(rows)


def plot_curves(df: pd.DataFrame, path, title: str = "", x: str = "env_steps") -> None:
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    failed = {}
    for f in df.attrs.get("failed", []):
        failed[f["group"]] = failed.get(f["group"], 0) + 1
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    if len(df):
        for group, g in curve_table(df, x).groupby("group"):
            more = f", {failed[group]} failed" if group in failed else ""
            ax.plot(g[x], g["mean"], label=f"{group} (n={g['n'].max()}{more})")
            ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.25)
    for group in sorted(set(failed) - set(df["group"] if len(df) else ())):
        ax.plot([], [], label=f"{group} (every run failed: {failed[group]})")
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("eval return (mean, 95% bootstrap CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summarize(root) -> pd.DataFrame:
    """Final eval return per group over its finished runs: mean, 95% CI over seeds and
    per-seed values, next to the number of runs, of failed runs and their failures (run,
    update, error), so an aggregate over fewer runs than were started is never silent."""
    root = Path(root)
    df = load_run_dir(root)
    last = df.loc[df.groupby(["group", "seed"])["env_steps"].idxmax()] if len(df) else df
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
