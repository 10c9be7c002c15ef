"""Experiment 16's table: HAPPO, MAPPO (one shared actor) and IPPO at JaxMARL's MAPPO
settings on SMAX (win rate) and MPE simple_spread (return), with the verdicts of HAPPO
against each baseline.

    pgjax sweep experiments/sweeps/jaxmarl_mappo.toml   (and jaxmarl_happo.toml, jaxmarl_ippo.toml)
    python experiments/jaxmarl_table.py                # prints the table (docs/results/jaxmarl.md
                                                       # holds it: experiments/readme_claims.py)

Per task and method, from the runs' stochastic evaluations (32 episodes each): each seed's
final (``pgjax.analysis.results.finals``: the mean of its evaluations over the last 5% of
training) of the fraction of battles won (SMAX) or of the return (MPE), the mean over seeds
with a 95% bootstrap CI (the seeds' range below ``MIN_SEEDS``), and the verdict
(``pgjax.analysis.results.verdict``) of HAPPO against MAPPO and against IPPO.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from pgjax.analysis import results
from pgjax.analysis.results import MIN_SEEDS, VerdictError, verdict
from pgjax.core.evaluation import STOCHASTIC

REPO = Path(__file__).resolve().parent.parent
SWEEPS = REPO / "experiments" / "results" / "sweeps"
DIRS = ("jaxmarl_happo", "jaxmarl_mappo", "jaxmarl_ippo")
METHODS = ("HAPPO", "MAPPO (shared actor)", "IPPO")  # the sweeps' labels
TASKS = ("jaxmarl:SMAX-3m", "jaxmarl:SMAX-2s3z", "jaxmarl:SMAX-5m_vs_6m",
         "jaxmarl:MPE_simple_spread_v3")


def finals() -> pd.DataFrame:
    """One row per run: its final win rate (SMAX) or return (MPE) as ``final``."""
    ev = results.load([SWEEPS / d for d in DIRS if (SWEEPS / d).exists()],
                      command="jaxmarl_table.py")
    parts = []
    for env, g in ev.groupby("env"):
        column = STOCHASTIC.success_column if "SMAX" in env else STOCHASTIC.return_column
        parts.append(results.finals(g, column).assign(measure=column))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _cell(f, digits: int) -> str:
    lo, hi = results.ci_or_range(f)
    spread = "" if len(f) >= MIN_SEEDS else "range "
    return f"{f.mean():.{digits}f} [{spread}{lo:.{digits}f}, {hi:.{digits}f}]"


def _verdict(a, b, digits: int) -> str:
    try:
        v = verdict(a, b)
    except VerdictError:
        return f"no verdict ({len(a)} and {len(b)} seeds)"
    lo, hi = v.ci95
    return f"**{v.outcome}** ({v.difference:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}])"


def summary() -> tuple[str, str]:
    """(what was run, the verdicts of HAPPO against each baseline per task) for the
    headline tables."""
    final = finals()
    done = [env for env in TASKS if len(final) and (final["env"] == env).any()]
    words = []
    for base in METHODS[1:]:
        cells = []
        for env in done:
            g = final[final["env"] == env]
            a = g.loc[g["group"] == "HAPPO", "final"].to_numpy(float)
            b = g.loc[g["group"] == base, "final"].to_numpy(float)
            if len(a) and len(b):
                try:
                    cells.append(f"{env.split(':')[1]} {verdict(a, b).outcome}")
                except VerdictError:
                    cells.append(f"{env.split(':')[1]} no verdict")
        words.append(f"HAPPO vs {base}: " + (", ".join(cells) if cells else "not run yet"))
    steps = int(final["env_steps"].max()) if len(final) else 0
    return (f"HAPPO against MAPPO (shared actor) and IPPO at JaxMARL's MAPPO settings on SMAX "
            f"(win rate) and MPE simple_spread (return), 5 seeds, {steps / 1e6:.1f}M steps",
            "; ".join(words))


def table() -> str:
    final = finals()
    if not len(final):
        return "(no finished runs yet)"
    lines = ["| task (final measure) | " + " | ".join(METHODS) + " | HAPPO vs MAPPO | HAPPO vs "
             "IPPO |", "|---|" + "---|" * (len(METHODS) + 2)]
    for env in TASKS:
        g = final[final["env"] == env]
        if not len(g):
            continue
        smax = "SMAX" in env
        digits = 2 if smax else 1
        by = {m: g.loc[g["group"] == m, "final"].to_numpy(float) for m in METHODS}
        cells = [_cell(by[m], digits) if len(by[m]) else "—" for m in METHODS]
        versus = [_verdict(by["HAPPO"], by[b], digits) if len(by["HAPPO"]) and len(by[b])
                  else "—" for b in METHODS[1:]]
        what = "win rate" if smax else "return"
        seeds = sorted({len(v) for v in by.values() if len(v)})
        lines.append(f"| `{env}` ({what}, {'/'.join(map(str, seeds))} seeds) | "
                     + " | ".join(cells + versus) + " |")
    steps = int(final["env_steps"].max())
    k = sorted(set(final["k"]))
    lines += ["", f"Final: the mean of each run's stochastic evaluations (32 episodes each) "
                  f"over the last 5% of its {steps:,} steps ({'/'.join(map(str, k))} "
                  f"evaluations); mean over seeds [95% bootstrap CI, or the seeds' range below "
                  f"{MIN_SEEDS}]; verdicts from the Welch interval of the difference "
                  f"(pgjax.analysis.verdicts)."]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
