"""Run directories as tables: the one reader of recorded results.

    import pgjax.analysis.results as r
    evals = r.load(["experiments/results/sweeps/spo_depth"])   # one row per run x evaluation
    rows = r.metrics(["runs/ppo_hopper"])                      # one row per run x update
    final = r.finals(evals)                                    # one row per run
    table = r.aggregate(final)                                 # per group: IQM, mean, ... CIs

Every frame has the columns ``dir`` (the run directory, named uniquely), ``run`` (``dir/id``),
``seed``, ``env``, ``algo``, ``group`` and ``status``; ``load`` adds the run directory's
options as columns (``num_envs``, ``ppo.lr``, ``net.actor_hidden``, ...). Each frame's
``run_table(frame)`` lists every run found, one row each with its status: ``finished``,
``unfinished`` (its directory has not finished: killed, or still training; its rows are left
out unless ``include_unfinished``) or ``failed`` (non-finite values or an update rule's
error: left out of every table, never silently).

Groups: a run directory's runs form one group per grid point, named by the directory's
``label`` (``--label``, a sweep's ``label = "..."``; ``{option}`` placeholders are filled
in) or by its algorithm, with the grid values that vary inside it; directories whose groups
would coincide are told apart by the options in which they differ and which their
components read (``TrainConfig.used``: a memoryless policy's name never lists a carry size).

Final returns (``finals``): the mean of a run's evaluations over the last ``window`` (5%) of
its training, at least the last one (``k`` says how many; ``last`` keeps the single last
evaluation). Normalised scores (``score``) use each task's fixed references
(``pgjax.analysis.references``: a random policy's return and a documented maximum), never the runs
being compared; a task without references is not normalised, and tables say so.
"""
from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from pgjax.core.errors import ConfigError
from pgjax.core.evaluation import (DETERMINISTIC, RETURN_LABELS,  # noqa: F401 (re-exported)
                                   STOCHASTIC, TRAIN_RETURN)
from pgjax.analysis.references import reference_for
from pgjax.analysis.verdicts import (MIN_SEEDS, Verdict, VerdictError,  # noqa: F401 (re-exported)
                                     spread_label, verdict, welch_interval)
# in the order the API reference lists them (the order of their source): the frames read from
# run directories, then the bootstrap intervals
from pgjax.analysis.run_tables import (  # noqa: F401 (re-exported)
    STATUSES, EVAL_SOURCES, RUN_COLUMNS, find_run_dirs, runs, _Runs, run_table, run_metrics,
    metrics, load)
from pgjax.analysis.intervals import (  # noqa: F401 (re-exported)
    bootstrap_ci, bootstrap_cis, probability_of_improvement, _stream_indices, ESTIMATORS,
    aggregate_estimates, point_estimates, improvement_probabilities, interval_estimates)

EVAL_CURVE_POINTS = 3  # fewer evaluations per run than this: curves of training episodes
FINAL_WINDOW = 0.05  # final return: the evaluations over the last 5% of training


def eval_source(df: pd.DataFrame) -> str:
    """The evaluation final-return tables use by default: the stochastic policy's where
    every run recorded it (``--eval-mode stochastic|both``, the stateful policy's default),
    else the deterministic policy's; the training episodes' returns where every run was
    trained with ``--evals 0`` (no evaluation) and ``df`` holds training rows."""
    table = run_table(df)
    if (table is not None and len(table) and (table["evals"] == 0).all()
            and TRAIN_RETURN in df and df[TRAIN_RETURN].notna().any()):
        return TRAIN_RETURN
    n = df["run"].nunique()
    ok = df[df[STOCHASTIC.return_column].notna()]["run"].nunique() if n else 0
    return STOCHASTIC.return_column if n and ok == n else DETERMINISTIC.return_column


def curve_source(df: pd.DataFrame) -> str:
    """What learning curves of ``df``'s runs show: the held-out evaluations when every run
    has at least ``EVAL_CURVE_POINTS`` of them (``--evals``), else the returns of the
    training episodes (free: recorded at every update)."""
    n = df["run"].nunique()
    for source in EVAL_SOURCES:
        per_run = df[df[source].notna()].groupby("run").size()
        if len(per_run) == n and n and per_run.min() >= EVAL_CURVE_POINTS:
            return source
    return TRAIN_RETURN


def return_points(df: pd.DataFrame, source: str, keys=("group", "run")) -> pd.DataFrame:
    """One row per run and curve point: ``keys``, point (0, 1, ... per run), env_steps,
    wall_time_s and the return (``value``). An evaluation column (a return, or a success
    rate such as ``eval_success``): every evaluation.
    ``train_return``: per chunk, the mean return of the training episodes that ended in it
    (episode-weighted over its updates), carried forward through chunks where none ended."""
    keys = list(keys)
    if source != TRAIN_RETURN:
        ev = df[df[source].notna()]
        out = ev[keys + ["env_steps", "wall_time_s", source]].rename(
            columns={source: "value"}).copy()
    else:
        d = df[df["iteration"] > 0]
        ok = d[TRAIN_RETURN].notna()
        w = d["episodes"].where(ok, 0.0)
        d = d.assign(_w=w, _wv=(d[TRAIN_RETURN] * w).where(ok, 0.0))
        out = d.groupby(keys + ["chunk"], sort=True).agg(
            env_steps=("env_steps", "max"), wall_time_s=("wall_time_s", "max"),
            _w=("_w", "sum"), _wv=("_wv", "sum")).reset_index()
        out["value"] = (out["_wv"] / out["_w"]).where(out["_w"] > 0)
        out["value"] = out.groupby(keys)["value"].ffill()
        out = out.dropna(subset=["value"])[keys + ["env_steps", "wall_time_s", "value"]]
    out["point"] = out.groupby(keys).cumcount()
    return out.reset_index(drop=True)


def finals(df: pd.DataFrame, source: str = "auto", window: float = FINAL_WINDOW) -> pd.DataFrame:
    """One row per run: the ``RUN_COLUMNS``, ``env_steps`` (its last), ``final`` (the mean of
    its curve points over the last ``window`` of its training: those at or after
    (1 - window) x its last env step, at least the last one), ``k`` (how many), ``last``
    (the single last point), ``score`` (``final`` normalised by the task's references, NaN
    without them) and ``reference`` (why not, where not). ``source``: an evaluation column,
    ``train_return`` (needs ``metrics`` rows) or ``auto`` (``eval_source``)."""
    if not 0 <= window < 1:
        raise ConfigError(f"window must be in [0, 1), got {window}; pass e.g. 0.05 (the last "
                          f"5% of training)")
    source = eval_source(df) if source == "auto" else source
    cols = RUN_COLUMNS + ["env_steps", "final", "k", "last", "score", "reference", "source"]
    table = run_table(df)
    if source not in df or not df[source].notna().any():
        out = pd.DataFrame(columns=cols)
        out.attrs["runs"] = _Runs(table) if table is not None else None
        return out
    pts = return_points(df, source, keys=RUN_COLUMNS)
    end = pts.groupby("run")["env_steps"].transform("max")
    tail = pts[pts["env_steps"] >= (1 - window) * end]
    out = tail.groupby(RUN_COLUMNS, sort=False).agg(
        env_steps=("env_steps", "max"), final=("value", "mean"), k=("value", "size"),
        last=("value", "last")).reset_index()
    # what decides whether the task's references hold: its time limit and own options
    task = {r: (None if pd.isna(n) else int(n), o) for r, n, o in
            zip(table["run"], table["episode_length"], table["task_options"])} \
        if table is not None else {}
    scores, notes = [], []
    for env, run, final in zip(out["env"], out["run"], out["final"]):
        ref, why = reference_for(env, *task.get(run, (None, "")))
        scores.append(float(ref.normalise(final)) if ref else np.nan)
        notes.append(why)
    out["score"], out["reference"], out["source"] = scores, notes, source
    out = out[cols]
    out.attrs["runs"] = _Runs(table) if table is not None else None
    return out


def status_counts(table: pd.DataFrame) -> pd.DataFrame:
    """Per (env, group): how many runs are finished, unfinished and failed (a ``runs``
    table)."""
    counts = table.groupby(["env", "group"])["status"].value_counts().unstack(fill_value=0)
    for s in STATUSES:
        if s not in counts:
            counts[s] = 0
    return counts[list(STATUSES)].reset_index()


def score_matrices(final: pd.DataFrame) -> tuple[dict, list[str], str]:
    """({group: [runs, tasks]}, tasks, what the values are) for the aggregates: normalised
    scores over the tasks with references when every task shown has them, else the raw
    final returns when there is one task, else normalised scores over the referenced tasks
    only (the others are named in the returned note). Groups without runs on every task
    used are left out (named)."""
    envs = sorted(final["env"].unique())
    unref = sorted(final.loc[final["score"].isna(), "env"].unique())
    if not unref:
        column, note, used = "score", "normalised", envs
    elif len(envs) == 1:
        column, used = "final", envs
        why = [r for r in final["reference"].dropna() if r]
        note = f"unnormalised: {why[0] if why else 'no references'}"
    else:
        column, used = "score", [e for e in envs if e not in unref]
        note = (f"normalised over {', '.join(used)}; {', '.join(unref)} left out (no "
                f"reference scores at their settings; see pgjax.analysis.references)") if used else \
            "no task has references; see the per-task returns"
    out = {}
    for group, g in final.groupby("group"):
        cols = [g.loc[g["env"] == env, column].to_numpy(float) for env in used]
        if not used or any(len(c) == 0 for c in cols):
            continue
        n = min(len(c) for c in cols)
        if any(len(c) > n for c in cols):
            print(f"pgjax: warning: {group} has {', '.join(str(len(c)) for c in cols)} runs on "
                  f"{', '.join(used)}; the aggregate over tasks uses the first {n} of each",
                  file=sys.stderr)
        out[group] = np.stack([c[:n] for c in cols], axis=1)
    return out, used, note


def _raw_matrices(final: pd.DataFrame) -> dict:
    """{group: [runs, tasks]} final returns over every task shown, for the groups that have
    runs on each (the first n of each task, n the fewest)."""
    envs = sorted(final["env"].unique())
    out = {}
    for group, g in final.groupby("group"):
        cols = [g.loc[g["env"] == env, "final"].to_numpy(float) for env in envs]
        if cols and all(len(c) for c in cols):
            n = min(len(c) for c in cols)
            out[group] = np.stack([c[:n] for c in cols], axis=1)
    return out


def aggregate(final: pd.DataFrame, reps: int = 2000, seed: int = 0) -> tuple[pd.DataFrame,
                                                                            pd.DataFrame]:
    """(per group: IQM, mean and median of the scores with 95% stratified-bootstrap CIs,
    the runs' status counts, each task's mean final return; the probability of improvement
    P(X > Y) of every pair of groups with its CI) from ``finals``' finished runs. The
    ``scores`` column says whether they are normalised (``score_matrices``). Below
    ``MIN_SEEDS`` runs per task a group's CIs (and a pair's) are left blank: ``spread`` says
    so, and ``range_lo`` / ``range_hi`` hold the lowest and highest run's score."""
    table = run_table(final)
    done = final[final["status"] != "failed"]  # unfinished runs are in only when asked for
    mats, used, note = score_matrices(done)
    fns = list(ESTIMATORS)
    rows = []
    counts = status_counts(table) if table is not None else None
    if mats:
        point, ci = interval_estimates(mats, aggregate_estimates, reps=reps, seed=seed)
    count_rows = dict(tuple(counts.groupby("group"))) if counts is not None else {}
    done_rows = dict(tuple(done.groupby("group")))  # each group's rows, split once
    for group in sorted(set(final["group"]) | set(counts["group"] if counts is not None
                                                   else ())):
        row = {"group": group}
        if counts is not None:
            c = count_rows.get(group, counts.iloc[:0])
            row.update({s: int(c[s].sum()) for s in STATUSES})
        g = done_rows.get(group, done.iloc[:0])
        n = int(mats[group].shape[0]) if group in mats else 0
        row["runs_used"] = n
        row["scores"] = note if group in mats or not used else \
            "not aggregated (no finished runs on every task)"
        # below MIN_SEEDS runs per task the bootstrap's interval is about the runs' range:
        # no interval, the range instead, said so
        interval = n >= MIN_SEEDS
        for j, name in enumerate(fns):
            row[name] = point[group][j] if group in mats else np.nan
            row[f"{name}_ci95_lo"] = ci[group][0, j] if interval else np.nan
            row[f"{name}_ci95_hi"] = ci[group][1, j] if interval else np.nan
        row["spread"] = (spread_label(n) if group in mats else "") + (
            " per task" if len(used) > 1 and group in mats else "")
        row["range_lo"] = float(mats[group].min()) if group in mats else np.nan
        row["range_hi"] = float(mats[group].max()) if group in mats else np.nan
        for env, ge in g.groupby("env"):
            row[f"final_return_mean[{env}]"] = ge["final"].mean()
        rows.append(row)
    agg = pd.DataFrame(rows) if rows else pd.DataFrame(columns=["group"])
    # P(X > Y) compares runs task by task, so any per-task normalisation leaves it as it is:
    # it uses every task shown, referenced or not
    raw = _raw_matrices(done)
    pairs = {f"{a} > {b}": (raw[a], raw[b]) for a in raw for b in raw if a != b}
    prob = pd.DataFrame(columns=["comparison", "probability_of_improvement", "ci95_lo",
                                 "ci95_hi"])
    if pairs:
        p_point, p_ci = interval_estimates(pairs, improvement_probabilities, reps=reps,
                                           seed=seed)
        few = {k: min(len(x), len(y)) < MIN_SEEDS for k, (x, y) in pairs.items()}
        prob = pd.DataFrame([{"comparison": k, "probability_of_improvement": float(p_point[k]),
                              "ci95_lo": np.nan if few[k] else float(np.ravel(p_ci[k])[0]),
                              "ci95_hi": np.nan if few[k] else float(np.ravel(p_ci[k])[1]),
                              "runs": min(len(pairs[k][0]), len(pairs[k][1]))}
                             for k in pairs])
    return agg, prob


def ci_or_range(x) -> tuple[float, float]:
    """A group's spread as tables show it: the 95% bootstrap CI of the mean of ``x`` (one
    value per run) from ``MIN_SEEDS`` runs on, below that its range (``spread_label`` names
    which)."""
    x = np.asarray(x, float)
    return bootstrap_ci(x) if len(x) >= MIN_SEEDS else (float(x.min()), float(x.max()))


def spread_cell(row, name: str = "iqm", digits: int = 3) -> str:
    """An ``aggregate`` row's estimator ``name`` with its spread, as a table shows it:
    "value [lo, hi]" with its 95% CI, or "value [range lo, hi]" (the lowest and highest run's
    score) where the group has too few runs for an interval (``MIN_SEEDS``)."""
    f = lambda v: f"{v:.{digits}f}"
    if pd.isna(row[name]):  # no finished runs on every task
        return "—"
    if pd.notna(row[f"{name}_ci95_lo"]):
        return f"{f(row[name])} [{f(row[f'{name}_ci95_lo'])}, {f(row[f'{name}_ci95_hi'])}]"
    return f"{f(row[name])} [range {f(row['range_lo'])}, {f(row['range_hi'])}]"


def improvement_cell(row) -> str:
    """A ``aggregate`` probability-of-improvement row as a table shows it: "p [lo, hi]", or
    "p (n runs: no interval)" below ``MIN_SEEDS`` runs."""
    p = f"{row['probability_of_improvement']:.2f}"
    if pd.notna(row["ci95_lo"]):
        return f"{p} [{row['ci95_lo']:.2f}, {row['ci95_hi']:.2f}]"
    return f"{p} ({int(row['runs'])} runs: no interval)"


def failures(table: pd.DataFrame) -> pd.DataFrame:
    """The failed runs of a ``runs`` table: env, group, run, seed, update, error."""
    f = table[table["status"] == "failed"]
    return f[["env", "group", "run", "seed", "failed_update", "error"]].rename(
        columns={"failed_update": "update"}).reset_index(drop=True)


__all__ = ["EVAL_CURVE_POINTS", "EVAL_SOURCES", "ESTIMATORS", "FINAL_WINDOW", "RETURN_LABELS",
           "RUN_COLUMNS", "STATUSES", "aggregate", "aggregate_estimates", "bootstrap_ci",
           "bootstrap_cis", "curve_source", "eval_source", "failures", "finals",
           "find_run_dirs", "improvement_probabilities", "interval_estimates", "load",
           "metrics", "point_estimates", "probability_of_improvement", "return_points",
           "run_metrics", "run_table", "runs", "score_matrices", "status_counts",
           "MIN_SEEDS", "Verdict", "VerdictError", "ci_or_range", "spread_label", "verdict", "welch_interval"]
