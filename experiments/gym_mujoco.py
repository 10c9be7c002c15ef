"""PPO and TRPO on Gymnasium MuJoCo v5 tasks, host-stepped, at the settings of the standard
reference implementations, for comparison with published 1M-step results.

    python experiments/gym_mujoco.py --algos ppo trpo --envs gym:Hopper-v5 gym:HalfCheetah-v5 \
        --seeds 3 --steps 1000000 --out experiments/results/gym_mujoco

Per (algorithm, task), one program with all seeds vmapped and one Gymnasium vector env of
seeds x num_envs MuJoCo envs. Settings: 1 env x 2048 steps per update, 64x64 tanh networks,
observation normalisation and reward scaling, each algorithm's defaults (PPO: 10 epochs x 32
minibatches, lr 3e-4 annealed, clip 0.2; TRPO: delta 0.01, 10 CG iterations, Adam critic).
Writes each run directory, then ``results.csv`` (per task and algorithm: final training
return — the stochastic policy's episodes over the last 10 updates, the number published
curves report — and final deterministic eval return, mean and 95% bootstrap CI over seeds)
and ``curves.png`` (both returns over env steps). ``--plot-only`` redraws from existing runs.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax import TrainConfig, results, run
from pgjax.analysis.plots import save_png
from pgjax.analysis.results import bootstrap_ci


def per_seed_curves(roots: list[Path]) -> pd.DataFrame:
    """At every evaluation point after training started (``pgjax.analysis.results``): the eval
    return and the episode-weighted mean training return over the updates of the chunk just
    finished."""
    df = results.metrics(roots, command="gym_mujoco.py")
    keys = ("env", "algo", "seed", "run")
    ev = results.return_points(df[df["iteration"] > 0], "eval_return", keys)
    train = results.return_points(df, "train_return", keys)
    out = ev.rename(columns={"value": "eval_return"}).merge(
        train[list(keys) + ["env_steps", "value"]].rename(columns={"value": "train_return"}),
        on=list(keys) + ["env_steps"], how="left")
    return out.drop(columns=["point", "run"])


def summarize(curves: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (env, algo), g in curves.groupby(["env", "algo"]):
        last = g.loc[g.groupby("seed")["env_steps"].idxmax()]
        row = {"env": env, "algo": algo, "seeds": len(last), "env_steps": int(last["env_steps"].max()),
               "wall_time_s": float(last["wall_time_s"].max())}
        for col in ("train_return", "eval_return"):
            lo, hi = bootstrap_ci(last[col].to_numpy())
            row.update({f"{col}_mean": last[col].mean(), f"{col}_ci95_lo": lo,
                        f"{col}_ci95_hi": hi,
                        f"{col}_per_seed": " ".join(f"{v:.0f}" for v in last[col])})
        rows.append(row)
    return pd.DataFrame(rows)


def plot(curves: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted(curves["env"].unique())
    fig, axes = plt.subplots(2, len(envs), figsize=(5.5 * len(envs), 7), squeeze=False)
    for j, env in enumerate(envs):
        for i, col in enumerate(("train_return", "eval_return")):
            ax = axes[i, j]
            for algo, g in curves[curves["env"] == env].groupby("algo"):
                stats = []
                for x, gx in g.groupby("env_steps"):
                    v = gx[col].dropna().to_numpy()
                    if len(v):
                        stats.append((x, v.mean(), *bootstrap_ci(v), len(v)))
                s = np.array(stats)
                ax.plot(s[:, 0], s[:, 1], label=f"{algo} (n={int(s[:, 4].max())})")
                ax.fill_between(s[:, 0], s[:, 2], s[:, 3], alpha=0.25)
            ax.set_title(f"{env}: {'training episodes' if i == 0 else 'deterministic eval'}")
            ax.set_xlabel("env steps")
            ax.set_ylabel("return (mean over seeds, 95% bootstrap CI)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, path, dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", nargs="+", default=["ppo", "trpo"])
    p.add_argument("--envs", nargs="+", default=["gym:Hopper-v5", "gym:HalfCheetah-v5"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument("--rollout-len", type=int, default=2048)
    p.add_argument("--eval-envs", type=int, default=5)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--out", default="experiments/results/gym_mujoco")
    p.add_argument("--plot-only", action="store_true")
    a = p.parse_args()
    out = Path(a.out)
    roots = []
    for env in a.envs:
        for algo in a.algos:
            name = f"{algo}_{env.replace(':', '-')}"
            if not a.plot_only:
                cfg = TrainConfig(algo=algo, env=env, seeds=a.seeds, steps=a.steps,
                                  num_envs=a.num_envs, rollout_len=a.rollout_len,
                                  eval_envs=a.eval_envs, eval_every=a.eval_every, out=str(out),
                                  name=name, resume=True)
                run(cfg)
            roots.append(out / name)
    curves = per_seed_curves([r for r in roots if (r / "config.json").exists()])
    table = summarize(curves)
    table.to_csv(out / "results.csv", index=False)
    plot(curves, out / "curves.png")
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
