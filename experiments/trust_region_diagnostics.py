"""Trust-region diagnostics of PPO, TRPO, SPO and FixPO on the same task and budget.

    python experiments/trust_region_diagnostics.py --env brax:hopper --seeds 4 \
        --steps 500000 --out experiments/results/trust_region

For every algorithm: one run directory (all seeds vmapped), then a table of per-update
trust-region statistics over all updates and seeds — max |r - 1| and max per-state KL
(median, 95th percentile, max), FixPO's fixup steps as a fraction of primary steps, TRPO's
acceptance rate — and a plot of max |r - 1| per update.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax import TrainConfig, results, run
from pgjax.analysis.plots import save_png


def diagnostics(rows: pd.DataFrame) -> dict:
    """Trust-region statistics over every update of one run directory's runs
    (``pgjax.analysis.results.metrics``)."""
    df = rows[rows["iteration"] > 0]
    last = results.finals(rows, "eval_return", window=0)["final"]
    out = {"algo": rows["algo"].iloc[0], "env": rows["env"].iloc[0],
           "seeds": rows["run"].nunique(), "updates": len(df),
           "final_eval_return_mean": float(np.mean(last))}
    for col in ("ratio_dev_max", "kl_max"):
        out[f"{col}_median"] = float(df[col].median())
        out[f"{col}_p95"] = float(df[col].quantile(0.95))
        out[f"{col}_max"] = float(df[col].max())
    if "fixup_steps" in df:
        out["fixup_fraction"] = float(df["fixup_steps"].sum() / df["primary_steps"].sum())
    if "accepted" in df:
        out["trpo_accept_rate"] = float(df["accepted"].mean())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="brax:inverted_pendulum")
    p.add_argument("--algos", nargs="+", default=["ppo", "trpo", "spo", "fixpo"])
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rollout-len", type=int, default=32)
    p.add_argument("--actor-hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--out", default="experiments/results/trust_region")
    a = p.parse_args()
    rows, curves = [], {}
    for algo in a.algos:
        cfg = TrainConfig(algo=algo, env=a.env, seeds=a.seeds, steps=a.steps,
                          num_envs=a.num_envs, rollout_len=a.rollout_len, out=a.out,
                          name=f"{algo}_{a.env.replace(':', '-')}", resume=True).with_options(
            {"net.actor_hidden": tuple(a.actor_hidden)})
        rec = run(cfg)
        metrics = results.metrics([rec.root], command="trust_region_diagnostics.py")
        rows.append(diagnostics(metrics))
        curves[algo] = metrics[metrics["iteration"] > 0]
    table = pd.DataFrame(rows)
    out = Path(a.out)
    table.to_csv(out / f"diagnostics_{a.env.replace(':', '-')}.csv", index=False)
    print(table.to_string(index=False))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for algo, df in curves.items():
        g = df.groupby("env_steps")["ratio_dev_max"]
        ax.plot(g.median().index, g.median().values, label=f"{algo} (median over seeds)")
    ax.set_yscale("log")
    ax.set_xlabel("env steps")
    ax.set_ylabel("max |r - 1| over the batch, per update")
    ax.set_title(a.env)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, out / f"ratio_deviation_{a.env.replace(':', '-')}.png")


if __name__ == "__main__":
    main()
