"""Sequential vs simultaneous vs independent multi-agent updates on cooperative matrix games.

Reads the run directories of ``experiments/sweeps/matrix_games.toml`` and reports, per
(algorithm, game), the fraction of seeds whose final deterministic joint action is an
optimal one (a 95% Wilson interval with it), the mean final return, and learning curves of
the fraction over training.

    pgjax sweep experiments/sweeps/matrix_games.toml
    python experiments/matrix_games.py experiments/results/sweeps/matrix_games
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.analysis import results
from pgjax.analysis.plots import save_png

OPTIMUM = {"matrix:climbing": 11.0, "matrix:penalty": 10.0}
ORDER = ["happo", "hatrpo", "haspo", "hafixpo", "mappo", "ippo"]


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion k / n."""
    if n == 0:
        return float("nan"), float("nan")
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def load(root: Path) -> pd.DataFrame:
    """One row per (group, run, evaluation): algo, env, run, env_steps, eval_return, from
    the finished run directories under ``root`` (``pgjax.analysis.results``)."""
    df = results.load([root], command="matrix_games.py")
    if not len(df):
        raise SystemExit(f"no finished run directories under {root}")
    return df[["algo", "env", "run", "env_steps", "eval_return"]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", nargs="?", default="experiments/results/sweeps/matrix_games")
    a = p.parse_args()
    root = Path(a.root)
    df = load(root)
    df["optimal"] = df.apply(lambda r: np.isclose(r["eval_return"], OPTIMUM[r["env"]]), axis=1)
    last = df.loc[df.groupby(["algo", "env", "run"])["env_steps"].idxmax()]
    rows = []
    for (algo, env), g in last.groupby(["algo", "env"]):
        k, n = int(g["optimal"].sum()), len(g)
        lo, hi = wilson(k, n)
        rows.append({"env": env, "algo": algo, "seeds": n, "optimal": k, "fraction": k / n,
                     "ci_low": lo, "ci_high": hi, "mean_return": g["eval_return"].mean(),
                     "returns": " ".join(f"{x:g}" for x in sorted(g["eval_return"]))})
    table = pd.DataFrame(rows)
    table["rank"] = table["algo"].map({x: i for i, x in enumerate(ORDER)}).fillna(99)
    table = table.sort_values(["env", "rank"]).drop(columns="rank")
    table.to_csv(root / "matrix_games.csv", index=False)
    print(table.to_string(index=False))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted(df["env"].unique())
    fig, axes = plt.subplots(1, len(envs), figsize=(5.5 * len(envs), 4), squeeze=False)
    for ax, env in zip(axes[0], envs):
        sub = df[df["env"] == env]
        for algo in [x for x in ORDER if x in set(sub["algo"])] + \
                sorted(set(sub["algo"]) - set(ORDER)):
            curve = sub[sub["algo"] == algo].groupby("env_steps")["optimal"]
            frac, n = curve.mean(), curve.size()
            lo = [wilson(int(round(f * m)), m)[0] for f, m in zip(frac, n)]
            hi = [wilson(int(round(f * m)), m)[1] for f, m in zip(frac, n)]
            line, = ax.plot(frac.index, frac.values, label=algo)
            ax.fill_between(frac.index, lo, hi, color=line.get_color(), alpha=0.15)
        ax.set_title(f"{env}: seeds at the optimal joint action")
        ax.set_xlabel("env steps (one-step episodes)")
        ax.set_ylabel("fraction of seeds (95% Wilson CI)")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, root / "matrix_games.png")
    fig.savefig(root / "matrix_games.svg")
    print(f"wrote {root / 'matrix_games.csv'} and matrix_games.png/svg")


if __name__ == "__main__":
    main()
