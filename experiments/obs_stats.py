"""Late degradation of solved tasks: final and best evaluation return per seed, and what the
observation-statistics updates did, for PPO with ``--obs-stats running`` (the reference
behaviour), ``preserve`` and without observation normalisation.

    pgjax sweep experiments/sweeps/obs_stats.toml
    pgjax sweep experiments/sweeps/obs_stats_off.toml
    python experiments/obs_stats.py experiments/results/sweeps/obs_stats \
        experiments/results/sweeps/obs_stats_off --out experiments/results/obs_stats

Writes ``results.csv`` (per seed: final return — pgjax's one definition,
``results.finals``: the mean of the evaluations over the last 5% of training — the last
evaluation, the best one and the update it came at, the drop from best to final,
evaluations below half the best after solving; the drift diagnostics averaged over the last
quarter of training), ``precursors.csv`` (the diagnostics over the 20 updates before each
run's first dip, and over the same updates for runs without one), ``summary.csv`` (per
group: mean final and best return with their spread over the seeds — a 95% bootstrap CI
from ``MIN_SEEDS`` seeds on, below that the seeds' range, as the ``spread`` column says —
and the seeds within 5% of their best at the end) and ``curves.png`` (eval return per seed,
one panel per task).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from pgjax.analysis import results
from pgjax.analysis.plots import save_png
from pgjax.analysis.results import ci_or_range, spread_label
from pgjax.core.evaluation import DETERMINISTIC

DRIFT = ["kl_mean", "kl_stats_mean", "kl_stats_max", "obs_std_drift", "obs_mean_drift",
         "value_stats_shift", "return_scale", "lr"]


def variant(df: pd.DataFrame) -> pd.Series:
    """<rule> running / preserve / frozen after N / off, from the group directories' configs
    (``pgjax.analysis.results`` puts them into the group names)."""
    g, d = df["group"], df["dir"]
    rule = g.str.split(" ").str[0]
    stats = np.where(g.str.contains("obs_stats=preserve"), "preserve",
                     np.where(d.str.contains("_off") | g.str.contains("normalize_obs=False"),
                              "off", "running"))
    frozen = g.str.extract(r"obs_stats_steps=(\d+)")[0]
    stats = np.where(frozen.notna() & (frozen != "0"),
                     "frozen after " + frozen.fillna("0").astype(int).map(
                         lambda n: f"{n // 1000}k"), stats)
    return pd.Series(np.where(rule == "ppo", stats, rule + " " + stats), index=df.index)


def dips(ev: pd.DataFrame) -> int:
    """Evaluations below half of the run's best after it first came within 5% of it."""
    r = ev["eval_return"].to_numpy()
    best = r.max()
    first = int(np.argmax(r >= 0.95 * best))
    return int((r[first:] < 0.5 * best).sum())


def per_seed(df: pd.DataFrame, finals: pd.DataFrame) -> pd.DataFrame:
    """One row per run; ``finals``: ``results.finals`` of the deterministic evaluations."""
    fin = finals.set_index("run")
    rows = []
    for (env, var, run), d in df.groupby(["env", "variant", "run"]):
        ev = d.dropna(subset=["eval_return"]).sort_values("iteration")
        last = d[d["iteration"] > 0.75 * d["iteration"].max()]
        best = ev.loc[ev["eval_return"].idxmax()]
        row = {"env": env, "variant": var, "seed": int(d["seed"].iloc[0]),
               "final": float(fin.at[run, "final"]), "finals_averaged": int(fin.at[run, "k"]),
               "last_eval": float(fin.at[run, "last"]), "best": float(best["eval_return"]),
               "best_at_steps": int(best["env_steps"]), "steps": int(fin.at[run, "env_steps"])}
        row["drop"] = row["best"] - row["final"]
        row["dips_after_solved"] = dips(ev)
        for c in DRIFT:
            if c in last:
                row[f"{c} (last quarter)"] = float(last[c].mean())
        rows.append(row)
    return pd.DataFrame(rows).sort_values(["env", "variant", "seed"])


PRECURSORS = ["kl_stats_max", "kl_max", "obs_std_drift", "grad_norm", "entropy", "v_loss",
              "return_scale", "clip_frac"]


def precursors(df: pd.DataFrame, window: int = 20) -> pd.DataFrame:
    """What preceded each run's first dip (first evaluation below half its best after it
    had come within 5% of it): the diagnostics averaged over the ``window`` updates before
    it. Runs without a dip are read over the same updates as the median first dip of the
    dipping runs of their task (or, with none, over the middle of training), so the two
    kinds of run are compared at the same stage of training."""
    rows = []
    for (env, var, run), d in df.groupby(["env", "variant", "run"]):
        d = d.sort_values("iteration")
        ev = d.dropna(subset=["eval_return"])
        r = ev["eval_return"].to_numpy()
        first = int(np.argmax(r >= 0.95 * r.max()))
        low = np.nonzero(r[first:] < 0.5 * r.max())[0]
        rows.append({"env": env, "variant": var, "run": run, "seed": int(d["seed"].iloc[0]),
                     "dip_at": int(ev["iteration"].iloc[first + low[0]]) if len(low) else None,
                     "_d": d})
    out = []
    for env, group in pd.DataFrame(rows).groupby("env"):
        at = group["dip_at"].dropna()
        ref = int(at.median()) if len(at) else int(group["_d"].iloc[0]["iteration"].max() // 2)
        for _, row in group.iterrows():
            end = int(row["dip_at"]) if row["dip_at"] is not None and not pd.isna(
                row["dip_at"]) else ref
            d = row["_d"]
            w = d[(d["iteration"] > end - window) & (d["iteration"] <= end)]
            rec = {"env": env, "variant": row["variant"], "seed": row["seed"],
                   "dipped": row["dip_at"] is not None and not pd.isna(row["dip_at"]),
                   "updates_read": f"{end - window + 1}-{end}"}
            for c in PRECURSORS:
                if c in w:
                    rec[c] = float(w[c].mean())
            if "kl_stats_max" in rec and rec.get("kl_max"):
                rec["stats_share_of_kl_max"] = rec["kl_stats_max"] / rec["kl_max"]
            out.append(rec)
    return pd.DataFrame(out).sort_values(["env", "variant", "dipped", "seed"])


def summary(res: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (env, var), d in res.groupby(["env", "variant"]):
        f, b = d["final"].to_numpy(), d["best"].to_numpy()
        (lo, hi), (blo, bhi) = ci_or_range(f), ci_or_range(b)
        rows.append({"env": env, "variant": var, "seeds": len(d), "spread": spread_label(len(d)),
                     "final_mean": f.mean(), "final_low": lo, "final_high": hi,
                     "best_mean": b.mean(), "best_low": blo, "best_high": bhi,
                     "seeds_within_5pct_of_best": int((f >= 0.95 * b).sum()),
                     "seeds_with_dips": int((d["dips_after_solved"] > 0).sum()),
                     "dips_after_solved": int(d["dips_after_solved"].sum())})
    return pd.DataFrame(rows)


def figure(df: pd.DataFrame, path: Path) -> None:
    """Eval return per seed: one row per task, one panel per variant."""
    envs = sorted(df["env"].unique())
    cols = max(df[df["env"] == e]["variant"].nunique() for e in envs)
    fig = Figure(figsize=(3.6 * cols, 2.8 * len(envs)), constrained_layout=True)
    axes = fig.subplots(len(envs), cols, squeeze=False, sharex=True)
    for row, env in zip(axes, envs):
        d_env = df[df["env"] == env]
        for ax, var in zip(row, sorted(d_env["variant"].unique())):
            d = d_env[d_env["variant"] == var]
            for _, r in d.groupby("run"):
                ev = r.dropna(subset=["eval_return"]).sort_values("env_steps")
                ax.plot(ev["env_steps"], ev["eval_return"], lw=0.8, alpha=0.8)
            ax.set_title(f"{env}\n{var} ({d['run'].nunique()} seeds)", fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in row[d_env["variant"].nunique():]:
            ax.set_axis_off()
    for ax in axes[-1]:
        ax.set_xlabel("env steps", fontsize=8)
    for row in axes:
        row[0].set_ylabel("eval return", fontsize=8)
    save_png(fig, path, dpi=100)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("paths", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=Path("experiments/results/obs_stats"))
    a = p.parse_args()
    df = results.metrics(a.paths, command="obs_stats.py")  # unfinished directories: noted
    df["variant"] = variant(df)
    a.out.mkdir(parents=True, exist_ok=True)
    res = per_seed(df, results.finals(df, DETERMINISTIC.return_column))
    res.to_csv(a.out / "results.csv", index=False)
    summ = summary(res)
    summ.to_csv(a.out / "summary.csv", index=False)
    pre = precursors(df)
    pre.to_csv(a.out / "precursors.csv", index=False)
    figure(df, a.out / "curves.png")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(res.round(4).to_string(index=False))
        print(summ.round(1).to_string(index=False))
        print(pre.round(5).to_string(index=False))


if __name__ == "__main__":
    main()
