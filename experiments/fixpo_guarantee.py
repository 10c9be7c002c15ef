"""FixPO's guarantee, from the records of ``experiments/sweeps/fixpo_guarantee.toml``.

    pgjax sweep experiments/sweeps/fixpo_guarantee.toml
    python experiments/fixpo_guarantee.py experiments/results/sweeps/fixpo_guarantee

For every environment and (eps_KL, C_beta) pair over all seeds and updates: the largest max-per-state-KL /
eps_KL after the fixup phase (the guarantee: never above 1) and before it, how often the
fixup phase had to act, its gradient steps per update and as a fraction of the primary
steps, and the final return. Writes ``fixpo_guarantee.csv`` and ``fixpo_guarantee.png/.svg``
(max KL / eps_KL per update for every run; fixup steps per update against C_beta). Also
reads the paper-preset sweep (``experiments/sweeps/fixpo_paper.toml``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from pgjax.analysis import results
from pgjax.analysis.plots import save_png


def load(sweep: Path) -> pd.DataFrame:
    """Every update of the FixPO runs under ``sweep`` (``pgjax.analysis.results``), with their
    eps_kl and c_beta."""
    df = results.metrics([sweep], command="fixpo_guarantee.py")
    df = df[df["algo"] == "fixpo"].copy()
    hp = dict(zip(results.run_table(df)["run"], results.run_table(df)["hparams"]))
    df["eps_kl"] = df["run"].map(lambda r: hp[r]["fixpo.eps_kl"])
    df["c_beta"] = df["run"].map(lambda r: hp[r]["fixpo.c_beta"])
    return df


def table(df: pd.DataFrame) -> pd.DataFrame:
    upd = df[df["iteration"] > 0]
    rows = []
    for (env, eps, cb), g in upd.groupby(["env", "eps_kl", "c_beta"]):
        final = df[(df["env"] == env) & (df["eps_kl"] == eps)
                   & (df["c_beta"] == cb)].dropna(subset=["eval_return"])
        final = final.loc[final.groupby("seed")["iteration"].idxmax(), "eval_return"]
        rows.append({"env": env, "eps_kl": eps, "c_beta": cb, "runs": g["seed"].nunique(),
                     "updates": len(g),
                     "max_kl_over_eps_after_fixup": (g["kl_max"] / eps).max(),
                     "median_kl_over_eps_after_fixup": (g["kl_max"] / eps).median(),
                     "max_kl_over_eps_before_fixup": (g["kl_max_before_fixup"] / eps).max(),
                     "updates_needing_fixup": (g["fixup_steps"] > 0).mean(),
                     "fixup_steps_per_update": g["fixup_steps"].mean(),
                     "fixup_fraction_of_primary": g["fixup_steps"].sum() / g["primary_steps"].sum(),
                     "final_eval_return_mean": final.mean()})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, t: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    upd = df[df["iteration"] > 0]
    panels = sorted(upd.groupby(["env", "eps_kl"]).groups)
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(5 * (len(panels) + 1), 4))
    cmap = plt.get_cmap("viridis")
    cbs = sorted(upd["c_beta"].unique())
    for ax, (env, eps) in zip(axes, panels):
        for i, cb in enumerate(cbs):
            g = upd[(upd["env"] == env) & (upd["eps_kl"] == eps) & (upd["c_beta"] == cb)]
            for _, s in g.groupby("seed"):
                ax.plot(s["iteration"], s["kl_max"] / eps, color=cmap(i / max(1, len(cbs) - 1)),
                        lw=0.7, alpha=0.8, label=f"C_beta={cb:g}" if _ == g["seed"].min() else None)
        ax.axhline(1.0, color="red", ls="--", lw=1, label="eps_KL (bound)")
        ax.set_yscale("log")
        ax.set_xlabel("update")
        ax.set_ylabel("max per-state KL / eps_KL (after fixup)")
        ax.set_title(f"{env}, eps_KL = {eps:g}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[-1]
    for (env, eps), g in t.groupby(["env", "eps_kl"]):
        ax.plot(g["c_beta"], g["fixup_steps_per_update"], "o-", label=f"{env}, eps_KL = {eps:g}")
    ax.set_xlabel("C_beta")
    ax.set_ylabel("fixup gradient steps per update (mean)")
    ax.set_xscale("log")
    ax.set_xticks(cbs, [f"{c:g}" for c in cbs])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(f"FixPO on {', '.join(sorted(upd['env'].unique()))}: the trust region after "
                 "every update")
    fig.tight_layout()
    save_png(fig, out / "fixpo_guarantee.png")
    fig.savefig(out / "fixpo_guarantee.svg")
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", nargs="?", default="experiments/results/sweeps/fixpo_guarantee")
    a = p.parse_args()
    sweep = Path(a.sweep)
    df = load(sweep)
    t = table(df)
    t.to_csv(sweep / "fixpo_guarantee.csv", index=False)
    plot(df, t, sweep)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(t.to_string(index=False, float_format=lambda v: f"{v:.3g}"))


if __name__ == "__main__":
    main()
