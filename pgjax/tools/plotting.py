"""``pgjax plot``: paper-style comparison figures and tables from run directories.

    pgjax plot sweeps/locomotion                  # every run directory under the path(s)
    pgjax plot runs/a runs/b --estimator mean --out figures/

Writes, into ``--out`` (default: the first path), PNG and SVG of:

- ``returns_<env>``: the return against env steps and against wall-clock time, one curve per
  group (algorithm, plus the varied hyperparameters), the IQM (or mean) over runs with a 95%
  stratified-bootstrap confidence band (rliable): of the held-out evaluations when every run
  has at least three (``--evals``), else of the training episodes per chunk, with the
  evaluations as markers (the axis label says which);
- ``trust_region_<env>``: max per-state KL and max |r - 1| at every update, median over runs
  with the min-max range (runs recorded with ``--diagnostics full``, which the paper presets
  and the quickstart sweep ask for; the default, ``cheap``, leaves them out);

and the tables ``aggregate.csv`` (final returns per group: IQM, mean, median with 95% CIs,
over every task, of scores normalised by each task's fixed references,
``pgjax.analysis.references``; with one task that has none, of its returns, and the ``scores``
column says so) and
``improvement.csv`` (probability of improvement P(X > Y) between every pair of groups, with a
95% CI). A run's final return is the mean of its evaluations over the last 5% of training
(``--final-window``). Every table counts each group's finished, unfinished and failed runs:
failed runs (``runs/<run>/status.json``) are left out of every curve and table, the legends
say "k failed", and ``failures.csv`` lists each (run, update, error); unfinished ones are
left out unless ``--include-unfinished``. Tables come from ``pgjax.analysis.results``.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.analysis import results
from pgjax.core.errors import ConfigError
from pgjax.core.evaluation import DETERMINISTIC, RETURNS, TRAIN_RETURN
from pgjax.core.files import save_figure, write_csv
from pgjax.analysis.plots import band_label, legend_below, save_png
from pgjax.analysis.results import (EVAL_SOURCES, RETURN_LABELS, curve_source, eval_source,
                                    return_points)


def load(paths, include_unfinished: bool = False) -> pd.DataFrame:
    """Every metrics row of the runs under ``paths`` (``results.metrics``; failed runs left
    out and counted in ``results.run_table``); a one-line ``ConfigError`` when no run has
    finished rows to show."""
    df = results.metrics(paths, include_unfinished, command="plot")
    table = results.run_table(df)
    where = ", ".join(map(str, paths))
    if not len(df) and (table["status"] == "failed").any():
        f = table[table["status"] == "failed"].iloc[0]
        raise ConfigError(f"every one of the {int((table['status'] == 'failed').sum())} runs "
                          f"under {where} failed (first: {f['run']}, update "
                          f"{f['failed_update']}: {f['error']}); pass directories with "
                          f"finished runs")
    if not len(df):
        raise ConfigError(f"no finished run directories with metrics under {where}; pass run "
                          f"directories or folders that contain them (--include-unfinished "
                          f"to show unfinished ones as they are)")
    return df


def failure_table(df: pd.DataFrame) -> pd.DataFrame:
    """The failed runs ``load`` left out: env, group, run, seed, update, error."""
    return results.failures(results.run_table(df))


def _failed_counts(df: pd.DataFrame) -> dict:
    """{(env, group): number of failed runs}."""
    table = results.run_table(df)
    return table[table["status"] == "failed"].groupby(["env", "group"]).size().to_dict()


def curves(df: pd.DataFrame, x: str, estimator: str, reps: int, seed: int = 0,
           source: str = DETERMINISTIC.return_column) -> pd.DataFrame:
    """Point estimate and 95% stratified-bootstrap CI of the return at every curve point
    (``return_points``: every evaluation, or per chunk the training episodes), per (env,
    group); below ``MIN_SEEDS`` runs, ``lo`` and ``hi`` are their range. x = env_steps or
    wall_time_s (averaged over runs per point)."""
    est = results.point_estimates(estimator)
    pts = return_points(df, source, keys=("env", "group", "run"))
    at = pts.groupby(["env", "group", "point"])[x].mean()  # x of each point, over runs
    rows = []
    for (env, group), g in pts.groupby(["env", "group"]):
        # [runs (sorted), points], the points every run reached
        names, run = np.unique(g["run"].to_numpy(), return_inverse=True)
        point = g["point"].to_numpy()
        table = np.full((len(names), point.max() + 1), np.nan)
        table[run, point] = g["value"].to_numpy()
        keep = np.flatnonzero(~np.isnan(table).any(0))
        if not len(keep):
            continue
        xs = at.loc[(env, group)].to_numpy()[keep]
        scores = table[:, None, keep]  # [runs, 1 task, points]
        # each group's resamples from the seed, as rliable's after np.random.seed(seed)
        est_, ci = results.interval_estimates({group: scores}, est, reps=reps, seed=seed)
        if len(names) < results.MIN_SEEDS:  # too few for an interval: the runs' range
            ci = {group: np.stack([table[:, keep].min(0), table[:, keep].max(0)])}
        for i, xv in enumerate(xs):
            rows.append({"env": env, "group": group, x: xv, "estimate": est_[group][i],
                         "lo": ci[group][0, i], "hi": ci[group][1, i], "runs": len(names),
                         "source": source})
    return pd.DataFrame(rows, columns=["env", "group", x, "estimate", "lo", "hi", "runs",
                                       "source"])


def _warn_missing(df: pd.DataFrame, final: pd.DataFrame, source: str) -> None:
    """Name the groups that have no value of ``source`` (e.g. runs that recorded only the
    other evaluation policy) and are therefore left out of a table."""
    missing = sorted(set(df["group"]) - set(final["group"]))
    if missing:
        print(f"pgjax plot: warning: {', '.join(missing)} recorded no {source} and "
              f"{'is' if len(missing) == 1 else 'are'} left out of the tables; pass --returns "
              f"with the evaluation they recorded (eval, eval_stochastic) or train",
              file=sys.stderr)


def aggregate_tables(df: pd.DataFrame, reps: int, seed: int = 0, source: str = "auto",
                     window: float = results.FINAL_WINDOW):
    """The aggregate table (``results.aggregate``: IQM, mean and median of the final
    returns normalised by each task's references, with stratified-bootstrap CIs, the runs'
    status counts and each task's mean final return) and the probability of improvement
    of every pair of groups; final returns (``results.finals``) from ``source``."""
    source = eval_source(df) if source == "auto" else source
    final = results.finals(df, source, window)
    _warn_missing(df, final, source)
    agg, prob = results.aggregate(final, reps, seed)
    agg["returns"] = RETURN_LABELS[source]
    agg["final"] = (f"mean of the evaluations over the last {window:.0%} of training"
                    if source in EVAL_SOURCES else
                    f"mean of the curve points over the last {window:.0%} of training")
    first = ["group", "returns", "final"]
    return agg[first + [c for c in agg.columns if c not in first]], prob


def _save(fig, out: Path, stem: str, vector: bool = True) -> list[Path]:
    """``stem``.png, and ``stem``.svg unless ``vector`` is off (a figure of thousands of
    points per line, whose svg would only wrap a raster of it)."""
    paths = [out / f"{stem}.png"] + ([out / f"{stem}.svg"] if vector else [])
    save_png(fig, paths[0])
    if vector:
        save_figure(fig, paths[1])
    return paths


def plot_returns(df, out: Path, estimator: str, reps: int, source: str = "auto") -> list[Path]:
    """Per env: the return against env steps and wall-clock, of the held-out evaluations
    where every run has enough of them (``curve_source``), else of the training episodes
    with the evaluations drawn as markers (point estimate and 95% CI). ``source``
    ``eval_return`` or ``train_return`` chooses instead of ``curve_source``."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    written, failed = [], _failed_counts(df)
    for env in sorted(df["env"].unique()):
        sub = df[df["env"] == env]
        src = curve_source(sub) if source == "auto" else source
        tables = {x: curves(sub, x, estimator, reps, source=src)
                  for x in ("env_steps", "wall_time_s")}
        marks = {x: curves(sub, x, estimator, reps, source=eval_source(sub)) for x in tables} \
            if src == TRAIN_RETURN and eval_source(sub) != TRAIN_RETURN \
            and sub[eval_source(sub)].notna().any() else None
        fig = Figure(figsize=(11, 4))
        axes = fig.subplots(1, 2)
        for ax, (x, table) in zip(axes, tables.items()):
            for group, g in table.groupby("group"):
                more = failed.get((env, group))
                more = f", {more} failed" if more else ""
                line, = ax.plot(g[x], g["estimate"],
                                label=f"{group} ({band_label(g['runs'].max())}{more})")
                ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.2, color=line.get_color())
                if marks is not None:
                    m = marks[x][marks[x]["group"] == group]
                    err = np.stack([(m["estimate"] - m["lo"]).to_numpy(),
                                    (m["hi"] - m["estimate"]).to_numpy()])
                    ax.errorbar(m[x].to_numpy(), m["estimate"].to_numpy(), yerr=err,
                                fmt="o", ms=4, capsize=3, color=line.get_color())
            ax.set_xlabel("env steps" if x == "env_steps" else "wall-clock time (s)")
            ax.set_ylabel(f"{RETURN_LABELS[src]}\n({estimator.upper()}; band: 95% stratified "
                          f"bootstrap CI, the range below {results.MIN_SEEDS} runs)", fontsize=8)
            ax.grid(alpha=0.3)
        fig.suptitle(env if marks is None else
                     f"{env} (lines: training episodes; markers: held-out evaluations)")
        legend_below(fig, axes[0])
        choice = {v: k for k, v in RETURNS.items()}[src]
        stem = f"returns{'' if source == 'auto' else '_' + choice}_{env.replace(':', '-')}"
        written += _save(fig, out, stem)
        table = tables["env_steps"] if marks is None else \
            pd.concat([tables["env_steps"], marks["env_steps"]], ignore_index=True)
        write_csv(table, out / f"{stem}.csv")
    return written


def _check_metric(df, column: str) -> None:
    numeric = column in df and pd.api.types.is_numeric_dtype(df[column]) and \
        column not in results.RUN_COLUMNS
    if not numeric or not df[column].notna().any():
        known = sorted(c for c in df.columns if c not in results.RUN_COLUMNS + ["chunk"]
                       and pd.api.types.is_numeric_dtype(df[c]))
        from pgjax.core.errors import did_you_mean

        raise ConfigError(f"no run records '{column}'{did_you_mean(column, known)}; pass "
                          f"--metric with a recorded column: {', '.join(known)}")


def plot_metric(df, out: Path, column: str) -> list[Path]:
    """Any recorded column (``--metric beta``) against the update: per group the median
    over runs with the min-max range, one figure per env: ``metric_<column>_<env>``."""
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    _check_metric(df, column)
    written = []
    rows = df[df[column].notna()]
    for env in sorted(rows["env"].unique()):
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        for group, g in rows[rows["env"] == env].groupby("group"):
            s = g.groupby("iteration")[column]
            med = s.median()
            ax.plot(med.index, med.to_numpy(), label=f"{group} (n={g['run'].nunique()})", lw=1)
            ax.fill_between(med.index, s.min().to_numpy(), s.max().to_numpy(), alpha=0.15)
        ax.set_xlabel("update")
        ax.set_ylabel(f"{column} (median, min-max over runs)")
        ax.grid(alpha=0.3)
        fig.suptitle(f"{env}: {column}")
        legend_below(fig, ax, width=80)
        written += _save(fig, out, f"metric_{column}_{env.replace(':', '-')}")
    return written


def plot_trust_region(df, out: Path) -> list[Path]:
    from matplotlib.figure import Figure  # no pyplot: leaves the caller's backend alone

    written = []
    # multi-agent rules: kl_max is the joint policy's (summed over agents); a per-agent
    # bound (HAFixPO's, HATRPO's) shows in agent_kl_max, drawn beside it
    cols = [c for c in ("kl_max", "ratio_dev_max", "agent_kl_max")
            if c in df and df[c].notna().any()]
    if not cols:
        return written
    upd = df[df["iteration"] > 0]
    for env in sorted(upd["env"].unique()):
        fig = Figure(figsize=(5.5 * len(cols), 4))
        axes = fig.subplots(1, len(cols), squeeze=False)
        for ax, col in zip(axes[0], cols):
            for group, g in upd[upd["env"] == env].groupby("group"):
                if g[col].isna().all():
                    continue
                s = g.groupby("iteration")[col]
                med, lo, hi = s.median(), s.min(), s.max()
                ax.plot(med.index, med.to_numpy(), label=group, lw=1)
                ax.fill_between(med.index, lo.to_numpy(), hi.to_numpy(), alpha=0.15)
            ax.set_yscale("log")
            ax.set_xlabel("update")
            ax.set_ylabel({"kl_max": "max per-state KL", "ratio_dev_max": "max |r - 1|",
                           "agent_kl_max": "max per-state KL of one agent"}[col]
                          + " (median, min-max over runs)")
            ax.grid(alpha=0.3)
        fig.suptitle(f"{env}: trust-region diagnostics per update")
        legend_below(fig, axes[0][0])
        # one point per update and run: png only (an svg holds every vertex, 0.3-0.7 MB)
        written += _save(fig, out, f"trust_region_{env.replace(':', '-')}", vector=False)
    return written


def trust_region_table(df: pd.DataFrame) -> pd.DataFrame:
    """Per group and env: the per-update max |r - 1|, max per-state KL and, for rules that
    clip, clip fraction (median and largest over every update of every run; S2PG's product
    policy also the clip fractions of its action and z factors), and how fast the runs got
    near the best return any run reached on that env (first curve point >= 95% of it, of
    the curves ``plot_returns`` draws, named in ``target_of``: the fraction of runs that got
    there and the median env steps of those that did)."""
    rows, failed = [], _failed_counts(df)
    sources = {env: curve_source(df[df["env"] == env]) for env in df["env"].unique()}
    pts = pd.concat([return_points(df[df["env"] == env], src, keys=("env", "group", "run"))
                     for env, src in sources.items()], ignore_index=True)
    for (group, env), g in df.groupby(["group", "env"]):
        row = {"group": group, "env": env, "runs": g["run"].nunique(),
               "failed_runs": failed.get((env, group), 0)}
        upd = g[g["iteration"] > 0]
        for col in ("ratio_dev_max", "kl_max", "clip_frac", "clip_frac_a", "clip_frac_z"):
            if col in upd and upd[col].notna().any():
                row[f"{col}_median"] = float(upd[col].median())
                row[f"{col}_largest"] = float(upd[col].max())
        target = 0.95 * pts[pts["env"] == env]["value"].max()
        reached = [r["env_steps"][r["value"] >= target].min()
                   for _, r in pts[(pts["group"] == group) & (pts["env"] == env)].groupby("run")]
        hit = [x for x in reached if np.isfinite(x)]
        row["target_of"] = sources[env]
        row["target_return"] = float(target)
        row["runs_reaching_target"] = f"{len(hit)}/{len(reached)}"
        row["median_steps_to_target"] = float(np.median(hit)) if hit else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)




def plot_main(argv: list[str]) -> int:
    from pgjax.core.arguments import ArgumentParser

    p = ArgumentParser("pgjax plot", __doc__)
    p.add_argument("paths", nargs="+", help="run directories, or folders containing them")
    p.add_argument("--out", default=None, help="output folder (default: the first path)")
    p.add_argument("--estimator", choices=("iqm", "mean", "median"), default="iqm",
                   help="what the return curves show across runs at each step, with its 95%% "
                        "stratified-bootstrap CI: iqm (the interquartile mean), mean or "
                        "median (the aggregate tables give all three)")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--metric", action="append", default=[], metavar="COLUMN",
                   help="also plot this recorded column against the update (repeatable), "
                        "e.g. --metric beta --metric entropy")
    p.add_argument("--returns", choices=tuple(RETURNS), default="auto",
                   help="what the return curves and final-return tables show: held-out "
                        "evaluations of the deterministic policy (eval) or of the stochastic "
                        "one (eval_stochastic, recorded with --eval-mode stochastic or both), "
                        "the stochastic policy's training episodes (train), the fraction "
                        "of evaluation episodes that succeeded where the environment reports "
                        "it (success, success_stochastic: SMAX's won battles), or auto: the "
                        "stochastic evaluations where every run recorded 3 or more, else the "
                        "deterministic ones, else train (tables: the stochastic evaluation "
                        "where every run has one, else the deterministic; train where every "
                        "run was trained with --evals 0). The others write "
                        "returns_<choice>_<env>.*, aggregate_<choice>.csv and "
                        "improvement_<choice>.csv beside the auto ones; every table says in "
                        "its returns column what it shows")
    p.add_argument("--include-unfinished", action="store_true",
                   help="also show run directories that are unfinished (killed, or still "
                        "training) as they are; tables count them in unfinished")
    p.add_argument("--final-window", type=float, default=results.FINAL_WINDOW,
                   help="a run's final return: the mean of its evaluations over this last "
                        "fraction of its training (at least the last evaluation)")
    a = p.parse_args(argv)
    try:
        if a.reps < 1:
            raise ConfigError(f"--reps must be >= 1, got {a.reps}; pass a positive number of "
                              f"bootstrap resamples (e.g. --reps 2000)")
        if not 0 <= a.final_window < 1:
            raise ConfigError(f"--final-window must be in [0, 1), got {a.final_window}; pass "
                              f"e.g. --final-window 0.05 (the last 5% of training)")
        df = load(a.paths, a.include_unfinished)
        for m in a.metric:
            _check_metric(df, m)
    except ConfigError as e:
        print(f"pgjax plot: error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out or a.paths[0])
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"pgjax plot: error: cannot write into --out {out} ({e.strerror or type(e).__name__}); "
              f"pass a writable folder", file=sys.stderr)
        return 2
    written = [w for m in a.metric for w in plot_metric(df, out, m)]
    source = RETURNS[a.returns]
    suffix = "" if a.returns == "auto" else f"_{a.returns}"
    written += plot_returns(df, out, a.estimator, a.reps, source) + plot_trust_region(df, out)
    agg, prob = aggregate_tables(df, a.reps, source=source, window=a.final_window)
    tables = {f"aggregate{suffix}.csv": agg, f"improvement{suffix}.csv": prob,
              "trust_region.csv": (tr := trust_region_table(df)),
              "failures.csv": (fails := failure_table(df))}
    for name, table in tables.items():
        write_csv(table, out / name)
        written.append(out / name)
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(agg[[c for c in agg.columns if not c.startswith("final")]].to_string(index=False))
        left = int((results.run_table(df)["status"] == "unfinished").sum())
        if left and not a.include_unfinished:
            print(f"{left} runs of unfinished run directories left out (--include-unfinished "
                  f"shows them as they are)")
        if len(prob):
            print(prob.to_string(index=False))
        print(tr.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if len(fails):
            print(f"{len(fails)} failed runs left out of every curve and table "
                  f"(failures.csv):")
            print(fails.to_string(index=False))
    print("wrote " + ", ".join(str(w) for w in written))
    return 0
