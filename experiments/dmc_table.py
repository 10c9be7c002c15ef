"""The DM Control table: PPO, SPO and FixPO at ``--preset playground-dmc`` on six MuJoCo
Playground tasks, final returns per task and reference-normalised aggregates.

    pgjax sweep experiments/sweeps/playground_dmc.toml
    pgjax plot experiments/results/sweeps/playground_dmc      # curves per task
    python experiments/dmc_table.py experiments/results/sweeps/playground_dmc \
        --out experiments/results/playground_dmc

Per task and rule, from the runs' stochastic evaluations: each seed's final (the mean of its
evaluations over the last 5% of training, ``pgjax.analysis.results.finals``), the mean over seeds with
a 95% bootstrap CI, and the seeds' finals. Under the table: per rule, the IQM of the
reference-normalised finals over the tasks (``(final - random) / (1000 - random)``, the random
policy's return from ``pgjax.analysis.references``) with its 95% stratified-bootstrap CI (the
range below ``MIN_SEEDS`` seeds per task), and the probability of improvement of each pair of
rules (``pgjax.analysis.results.aggregate``).

Writes ``table.csv`` (one row per task and rule) and ``table.md`` (the table of docs/results/dmc.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.analysis import results
from pgjax.analysis.results import MIN_SEEDS, spread_label

RULES = {"ppo": "PPO", "spo": "SPO", "fixpo": "FixPO"}
TASK_ORDER = ["CartpoleBalance", "CartpoleSwingup", "PendulumSwingup", "ReacherEasy",
              "WalkerWalk", "CheetahRun"]
REPS = 2000


def task_of(env: str) -> str:
    """``playground:CheetahRun`` -> ``CheetahRun``."""
    return env.split(":", 1)[-1]


def _rank(task: str) -> int:
    return TASK_ORDER.index(task) if task in TASK_ORDER else len(TASK_ORDER)


def table(ev: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(one row per task and rule, the per-rule aggregate, the probabilities of improvement)
    from ``results.load``'s frame of the sweep's runs."""
    source = results.eval_source(ev)
    final = results.finals(ev, source)
    if not len(final):
        raise SystemExit("dmc_table.py: no finished run with evaluations under the paths "
                         "given; pass the sweep's directory once some of its groups finished")
    rows = []
    for (env, group), f in final.groupby(["env", "group"]):
        # a 95% CI from MIN_SEEDS seeds on; below that the seeds' range (``spread``)
        lo, hi = results.ci_or_range(f["final"])
        rows.append({"task": task_of(env), "env": env, "rule": group, "seeds": len(f),
                     "env_steps": int(f["env_steps"].max()), "final": f["final"].mean(),
                     "final_lo": lo, "final_hi": hi, "spread": spread_label(len(f)),
                     "evals_averaged": int(f["k"].max()),
                     "final_per_seed": " ".join(f"{v:.1f}" for v in f["final"]),
                     "score": f["score"].mean(),
                     "wall_time_min": ev.loc[(ev["env"] == env) & (ev["group"] == group),
                                             "wall_time_s"].max() / 60,
                     "source": source})
    t = pd.DataFrame(rows)
    t = t.assign(_t=t["task"].map(_rank), _r=t["rule"].map(
        {r: i for i, r in enumerate(RULES)}).fillna(len(RULES)))
    t = t.sort_values(["_t", "task", "_r", "rule"]).drop(columns=["_t", "_r"])
    agg, prob = results.aggregate(final, REPS, seed=0)
    return t.reset_index(drop=True), agg, prob


def name(rule: str) -> str:
    """``ppo`` -> ``PPO``; a rule without a display name keeps its own."""
    return RULES.get(rule, rule)


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}"


def markdown(t: pd.DataFrame, agg: pd.DataFrame, prob: pd.DataFrame) -> str:
    rules = [r for r in RULES if r in set(t["rule"])] + sorted(set(t["rule"]) - set(RULES))
    lo, hi = int(t["seeds"].min()), int(t["seeds"].max())
    seeds = f"{lo}" if lo == hi else f"{lo}-{hi}"
    spread = "95% CI" if lo >= MIN_SEEDS else "range"  # the seeds' range below MIN_SEEDS
    lines = ["| task | " + " | ".join(f"{name(r)} final [{spread}]" for r in rules) + " |",
             "|---|" + "---|" * len(rules)]
    for task, g in t.groupby("task", sort=False):
        g = g.set_index("rule")
        cells = [f"{_num(g.loc[r, 'final'])} [{_num(g.loc[r, 'final_lo'])}, "
                 f"{_num(g.loc[r, 'final_hi'])}]" if r in g.index else "—" for r in rules]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    a = agg.set_index("group")
    cells = [results.spread_cell(a.loc[r]) if r in a.index and not np.isnan(a.loc[r, "iqm"])
             else "—" for r in rules]
    lines.append("| **IQM of normalised finals** | " + " | ".join(cells) + " |")
    p = prob.set_index("comparison")
    probs = "; ".join(
        f"P({name(x)} > {name(y)}) = {results.improvement_cell(p.loc[k])}"
        for i, x in enumerate(rules) for y in rules[i + 1:] if (k := f"{x} > {y}") in p.index)
    scored = a[a["iqm"].notna()] if "iqm" in a else a.iloc[:0]
    note = scored["scores"].iloc[0] if len(scored) else "no rule has finished runs on every task"
    label = results.RETURN_LABELS[t["source"].iloc[0]]
    extra = "" if note == "normalised" else f" ({note})"
    k = sorted(set(t["evals_averaged"]))
    held = (f"{k[0]} evaluation{'s' if k[0] != 1 else ''}" if len(k) == 1 else
            f"{k[0]}-{k[-1]} evaluations")
    interval = ("95% bootstrap CI" if lo >= MIN_SEEDS else
                f"the range of the {seeds} seeds: too few for an interval or a verdict")
    over = ("with a 95% stratified-bootstrap CI" if lo >= MIN_SEEDS else
            f"[the range of every task's and seed's normalised final: no interval below "
            f"{MIN_SEEDS} seeds per task]")
    lines += ["", f"{seeds} seeds per cell, {int(t['env_steps'].max()):,} env steps each; "
                  f"final = each seed's mean evaluation over the last 5% of training (here "
                  f"{held} per run) ({label}), mean over seeds [{interval}]. Normalised: "
                  f"(final − "
                  f"random policy) / (1,000 − random policy) with pgjax.analysis.references' random "
                  f"returns{extra}; IQM over tasks × seeds {over}. "
                  f"Probability of improvement (task by task, over seeds): "
                  f"{probs or 'no pair of rules to compare'}."]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="the sweep's directory (or run directories)")
    p.add_argument("--out", default="experiments/results/playground_dmc")
    a = p.parse_args()
    t, agg, prob = table(results.load(a.runs, command="dmc_table.py"))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t.to_csv(out / "table.csv", index=False)
    md = markdown(t, agg, prob)
    (out / "table.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
