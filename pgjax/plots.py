"""Learning curves and summary tables from run directories (mean over seeds with a 95%
percentile-bootstrap confidence band)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd


def load_run_dir(root) -> pd.DataFrame:
    """All eval rows of a run directory as one table with a ``group`` column (the run's
    varied hyperparameters, or the algorithm when nothing varies) and a ``seed`` column."""
    root = Path(root)
    cfg = json.loads((root / "config.json").read_text())
    varied = [k for k, v in cfg["grid"].items() if len(v) > 1]
    frames = []
    for r in cfg["runs"]:
        path = root / "runs" / r["id"] / "metrics.csv"
        if not path.exists():
            continue
        df = pd.read_csv(path)
        df = df[df["eval_return"].notna()]
        label = ", ".join(f"{k.split('.')[-1]}={r['hparams'][k]:g}" for k in varied)
        df["group"] = f"{cfg['config']['algo']}" + (f" ({label})" if label else "")
        df["seed"] = r["seed"]
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


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

    table = curve_table(df, x)
    fig = Figure(figsize=(6, 4))
    ax = fig.subplots()
    for group, g in table.groupby("group"):
        ax.plot(g[x], g["mean"], label=f"{group} (n={g['n'].max()})")
        ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.25)
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("eval return (mean, 95% bootstrap CI)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def summarize(root) -> pd.DataFrame:
    """Final eval return per group: mean, 95% CI over seeds, and per-seed values."""
    root = Path(root)
    df = load_run_dir(root)
    last = df.loc[df.groupby(["group", "seed"])["env_steps"].idxmax()]
    rows = []
    for group, g in last.groupby("group"):
        lo, hi = bootstrap_ci(g["eval_return"].to_numpy())
        rows.append({"group": group, "seeds": len(g), "env_steps": int(g["env_steps"].max()),
                     "final_eval_return_mean": g["eval_return"].mean(), "ci95_lo": lo,
                     "ci95_hi": hi, "per_seed": " ".join(f"{v:.1f}" for v in g["eval_return"])})
    out = pd.DataFrame(rows)
    out.to_csv(root / "summary.csv", index=False)
    return out


def plot_run(root) -> None:
    root = Path(root)
    cfg = json.loads((root / "config.json").read_text())
    plot_curves(load_run_dir(root), root / "curve.png",
                title=f"{cfg['config']['algo']} on {cfg['config']['env']}")
