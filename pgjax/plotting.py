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
  with the min-max range;

and the tables ``aggregate.csv`` (final returns per group: IQM, mean, median with 95% CIs,
over every environment, scores min-max normalised per environment over all runs shown) and
``improvement.csv`` (probability of improvement P(X > Y) between every pair of groups, with a
95% CI). With one environment the aggregate is over runs of that environment. Failed runs
(``runs/<run>/status.json``) are left out of every curve and table, and never silently: each
table has a ``failed_runs`` column, the legends say "k failed", and ``failures.csv`` lists each
(run, update, error).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.errors import ConfigError
from pgjax.rundir import (check_metrics, inspect, is_finished, read_json, readable,
                          run_status)
from pgjax.plots import (EVAL_SOURCES, RETURN_LABELS, curve_source, eval_source, return_points, run_group,
                         with_chunks)


def find_run_dirs(paths) -> list[Path]:
    out = []
    for p in map(Path, paths):
        cands = [p] if (p / "config.json").exists() else sorted(
            q.parent for q in p.rglob("config.json")
            if ".trash" not in q.relative_to(p).parts)  # runs set aside by --overwrite
        for c in cands:
            if c != p and c.parent.name == "runs" and (c.parent.parent / "config.json").exists():
                continue  # one run's own config.json (seed and hyperparameters)
            found = inspect(c)
            if found.state == "foreign":
                continue
            if found.state == "damaged":
                if c == p:  # named on the command line: an error
                    raise ConfigError(found.reason)
                print(f"pgjax plot: note: {found.reason}; left out", file=sys.stderr)
                continue
            if found.state != "new" and c not in out:
                out.append(c)
    return out


def _display_names(roots: list[Path]) -> dict:
    """A unique short name per run directory: its path below the deepest folder that holds
    them all (just the directory name when those are unique)."""
    if len({r.name for r in roots}) == len(roots):
        return {r: r.name for r in roots}
    full = [r.resolve() for r in roots]
    common = Path(os.path.commonpath([str(f.parent) for f in full]))
    return {r: str(f.relative_to(common)) for r, f in zip(roots, full)}


def _current(config: dict) -> dict:
    """A recorded config in this version's layout (options that moved into a component's
    config named as now), so runs recorded before and after compare option by option; as
    recorded where it cannot be read back (a plugin that is not importable here)."""
    from pgjax.config import TrainConfig

    try:
        return TrainConfig.from_record(config).to_dict()
    except (ConfigError, TypeError, ValueError):
        return config


def _options(config: dict) -> dict:
    """A run directory's options as flat ``name -> value``: a rule's config becomes
    ``<rule>.<field>``, a plugin's ``algo_options`` entries ``<rule>.<name>``."""
    out = {}
    for k, v in config.items():
        if k in _NOT_OPTIONS:
            continue
        if isinstance(v, dict):
            out.update({f"{k}.{f}": x for f, x in v.items()})
        elif k == "algo_options":
            rule = config.get("algo", "rule")
            for item in v or ():
                name, _, value = str(item).partition("=")
                out[f"{rule}.{name}"] = value
        else:
            out[k] = v
    return out


def load(paths, include_unfinished: bool = False) -> pd.DataFrame:
    """Every metrics row of every finished run with columns group, env, algo, run (unique
    id), seed; run directories that are unfinished (killed, or still training) are left
    out with a note, or with ``include_unfinished`` kept as they are and counted in
    ``.attrs["unfinished"]`` (their directory names). Runs are identified by their directory's path, so same-named directories in
    different folders stay apart; a group is an (algorithm, varied grid values) within one
    directory, and directories whose groups would coincide are told apart by every option
    in which they differ (labelled by the options' short names). Failed runs are left out
    of the rows and listed in ``.attrs["failed"]`` (env, group_dir, run, seed, update,
    error), so every table can say how many it left out."""
    roots = find_run_dirs(paths)
    names = _display_names(roots)
    frames, failed, configs, unfinished = [], [], {}, []
    for root in roots:
        if not readable(root, include_unfinished, "plot"):
            continue
        if not is_finished(root):
            unfinished.append(names[root])
        cfg = read_json(root / "config.json", "the run's config.json")
        c, name = cfg["config"], names[root]
        configs[name] = _options(_current(c))
        for r in cfg["runs"]:
            d = root / "runs" / r["id"]
            group = run_group(cfg, r)
            failure = run_status(d)
            if failure is not None:
                failed.append({"env": c["env"], "group_dir": name,
                               "label": group,
                               "run": f"{name}/{r['id']}", "seed": r["seed"],
                               "update": failure.get("update"), "error": failure.get("error")})
                continue
            try:
                if not (d / "metrics.csv").exists() or not check_metrics(d / "metrics.csv"):
                    continue
            except ConfigError as e:  # one damaged file does not stop the others' tables
                print(f"pgjax plot: note: {e}; run left out", file=sys.stderr)
                continue
            df = with_chunks(pd.read_csv(d / "metrics.csv"), c)
            df["algo"], df["env"] = c["algo"], c["env"]
            df["group"] = group
            df["group_dir"] = name
            df["run"] = f"{name}/{r['id']}"
            df["seed"] = r["seed"]
            df["finished"] = name not in unfinished
            frames.append(df)
    where = ", ".join(map(str, paths))
    if not frames and failed:
        raise ConfigError(f"every one of the {len(failed)} runs under {where} failed (first: "
                          f"{failed[0]['run']}, update {failed[0]['update']}: "
                          f"{failed[0]['error']}); pass directories with finished runs")
    if not frames:
        raise ConfigError(f"no finished run directories with metrics under {where}; pass run "
                          f"directories or folders that contain them (--include-unfinished "
                          f"to show unfinished ones as they are)")
    df = pd.concat(frames, ignore_index=True)
    for column in EVAL_SOURCES:  # an evaluation no run recorded: an empty column
        if column not in df:
            df[column] = np.nan
    for (env, group), sub in df.groupby(["env", "group"]):
        dirs = sorted(sub["group_dir"].unique())
        if len(dirs) < 2:
            continue
        keys = sorted({k for d in dirs for k in configs[d]})
        differ = [k for k in keys
                  if len({json.dumps(configs[d].get(k), sort_keys=True) for d in dirs}) > 1]
        labels = {d: ", ".join(f"{k.split('.')[-1]}={_fmt_option(configs[d].get(k))}"
                               for k in differ) for d in dirs}
        if len(set(labels.values())) < len(dirs):  # identical options: the directories
            labels = {d: labels[d] + (", " if labels[d] else "") + f"dir={d}" for d in dirs}
        for d in dirs:
            mask = (df["env"] == env) & (df["group"] == group) & (df["group_dir"] == d)
            df.loc[mask, "group"] = f"{group} ({labels[d]})" if "(" not in group else \
                group[:-1] + f", {labels[d]})"
    group_of = df.groupby("group_dir")["group"].first().to_dict()
    for f in failed:  # the failed run's group, named as its directory's other runs are
        f["group"] = group_of.get(f["group_dir"], f["label"])
    df.attrs["failed"] = failed
    df.attrs["unfinished"] = unfinished
    return df


def failure_table(df: pd.DataFrame) -> pd.DataFrame:
    """The failed runs ``load`` left out: env, group, run, seed, update, error."""
    cols = ["env", "group", "run", "seed", "update", "error"]
    return pd.DataFrame([{k: f[k] for k in cols} for f in df.attrs.get("failed", [])],
                        columns=cols)


def _failed_counts(df: pd.DataFrame) -> dict:
    """{(env, group): number of failed runs}."""
    out = {}
    for f in df.attrs.get("failed", []):
        out[(f["env"], f["group"])] = out.get((f["env"], f["group"]), 0) + 1
    return out


_NOT_OPTIONS = {"name", "out", "resume", "overwrite", "quiet", "seeds", "seed", "grid",
                "tensorboard", "wandb", "wandb_project", "distributed", "shard",
                "checkpoint_every", "env"}


def _fmt_option(v) -> str:
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    if isinstance(v, dict):
        return "{...}"
    return str(v)


def _estimator(name):
    from rliable import metrics

    return {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean,
            "median": metrics.aggregate_median}[name]


def curves(df: pd.DataFrame, x: str, estimator: str, reps: int, seed: int = 0,
           source: str = "eval_return") -> pd.DataFrame:
    """Point estimate and 95% stratified-bootstrap CI of the return at every curve point
    (``return_points``: every evaluation, or per chunk the training episodes), per (env,
    group). x = env_steps or wall_time_s (averaged over runs per point)."""
    from rliable import library as rly

    est = _estimator(estimator)
    pts = return_points(df, source, keys=("env", "group", "run"))
    rows = []
    for (env, group), g in pts.groupby(["env", "group"]):
        table = g.pivot_table(index="run", columns="point", values="value")
        table = table.dropna(axis=1)
        if table.shape[1] == 0:
            continue
        xs = g.groupby("point")[x].mean().loc[table.columns]
        scores = table.to_numpy()[:, None, :]  # [runs, 1 task, points]
        np.random.seed(seed)
        point, ci = rly.get_interval_estimates(
            {group: scores},
            lambda s: np.array([est(s[..., i]) for i in range(s.shape[-1])]), reps=reps)
        for i, xv in enumerate(xs):
            rows.append({"env": env, "group": group, x: xv, "estimate": point[group][i],
                         "lo": ci[group][0, i], "hi": ci[group][1, i], "runs": len(table),
                         "source": source})
    return pd.DataFrame(rows, columns=["env", "group", x, "estimate", "lo", "hi", "runs",
                                       "source"])


def final_returns(df: pd.DataFrame, source: str = "eval_return") -> pd.DataFrame:
    """One row per run (env, group, run, value): its last held-out evaluation
    (``eval_return``) or its last curve point of training episodes (``train_return``: the
    stochastic policy's return over the last chunk in which episodes ended)."""
    if source in EVAL_SOURCES:
        ev = df[df[source].notna()]
        last = ev.loc[ev.groupby("run")["iteration"].idxmax()]
        return last[["env", "group", "run", source]].rename(
            columns={source: "value"}).reset_index(drop=True)
    pts = return_points(df, source, keys=("env", "group", "run"))
    last = pts.loc[pts.groupby("run")["point"].idxmax()]
    return last[["env", "group", "run", "value"]].reset_index(drop=True)


def _warn_missing(df: pd.DataFrame, last: pd.DataFrame, source: str) -> None:
    """Name the groups that have no value of ``source`` (e.g. runs that recorded only the
    other evaluation policy) and are therefore left out of a table."""
    missing = sorted(set(df["group"]) - set(last["group"]))
    if missing:
        print(f"pgjax plot: warning: {', '.join(missing)} recorded no {source} and "
              f"{'is' if len(missing) == 1 else 'are'} left out of the tables; pass --returns "
              f"with the evaluation they recorded (eval, eval_stochastic) or train",
              file=sys.stderr)


def final_scores(df: pd.DataFrame, source: str = "eval_return") -> dict:
    """{group: [runs, envs]} final returns (``final_returns``), min-max normalised per env
    over all runs (where every run scored the same, each is at the best any run reached: 1)."""
    last = final_returns(df, source)
    _warn_missing(df, last, source)
    envs = sorted(last["env"].unique())
    out = {}
    for group, g in last.groupby("group"):
        cols = []
        for env in envs:
            all_env = last[last["env"] == env]["value"]
            lo, hi = all_env.min(), all_env.max()
            v = g[g["env"] == env]["value"].to_numpy()
            cols.append((v - lo) / (hi - lo) if hi > lo else np.ones_like(v))
        if any(len(c) == 0 for c in cols):
            missing = [e for e, c in zip(envs, cols) if len(c) == 0]
            print(f"pgjax plot: warning: {group} has no runs on {', '.join(missing)}; it is "
                  f"left out of the aggregate over environments", file=sys.stderr)
            continue
        n = min(len(c) for c in cols)
        if any(len(c) > n for c in cols):
            print(f"pgjax plot: warning: {group} has {', '.join(str(len(c)) for c in cols)} "
                  f"runs on {', '.join(envs)}; the aggregate over environments uses the first "
                  f"{n} of each", file=sys.stderr)
        out[group] = np.stack([c[:n] for c in cols], axis=1)
    return out


def aggregate_tables(df: pd.DataFrame, reps: int, seed: int = 0, source: str = "auto"):
    """The aggregate table (IQM, mean and median of the normalised final returns with
    stratified-bootstrap CIs, and each env's mean final return) and the probability of
    improvement of every pair of groups; final returns from ``source`` (``final_returns``)."""
    from rliable import library as rly
    from rliable import metrics

    source = eval_source(df) if source == "auto" else source
    scores = final_scores(df, source)
    fns = {"iqm": metrics.aggregate_iqm, "mean": metrics.aggregate_mean,
           "median": metrics.aggregate_median}
    np.random.seed(seed)
    point, ci = rly.get_interval_estimates(
        scores, lambda s: np.array([f(s) for f in fns.values()]), reps=reps)
    last = final_returns(df, source)
    rows, failed = [], _failed_counts(df)
    for group in scores:
        row = {"group": group, "runs_per_env": scores[group].shape[0],
               "envs": scores[group].shape[1],
               "failed_runs": sum(n for (_, g), n in failed.items() if g == group),
               "returns": RETURN_LABELS[source],
               "unfinished_runs": int(df.loc[(df["group"] == group) & ~df["finished"], "run"]
                                      .nunique()) if "finished" in df else 0}
        for j, name in enumerate(fns):
            row[f"{name}_normalised"] = point[group][j]
            row[f"{name}_ci95_lo"], row[f"{name}_ci95_hi"] = ci[group][0, j], ci[group][1, j]
        for env, g in last[last["group"] == group].groupby("env"):
            row[f"final_return_mean[{env}]"] = g["value"].mean()
        rows.append(row)
    agg = pd.DataFrame(rows)
    pairs = {f"{a} > {b}": (scores[a], scores[b])
             for a, b in itertools.permutations(scores, 2)
             if scores[a].shape == scores[b].shape}
    prob = pd.DataFrame()
    if pairs:
        np.random.seed(seed)
        p_point, p_ci = rly.get_interval_estimates(pairs, metrics.probability_of_improvement,
                                                   reps=reps)
        prob = pd.DataFrame([{"comparison": k, "probability_of_improvement": float(p_point[k]),
                              "ci95_lo": float(np.ravel(p_ci[k])[0]),
                              "ci95_hi": float(np.ravel(p_ci[k])[1])} for k in pairs])
    return agg, prob


def _save(fig, out: Path, stem: str) -> list[Path]:
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=120)
    fig.savefig(paths[1])
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
            if src == "train_return" and sub[eval_source(sub)].notna().any() else None
        fig = Figure(figsize=(11, 4))
        axes = fig.subplots(1, 2)
        for ax, (x, table) in zip(axes, tables.items()):
            for group, g in table.groupby("group"):
                more = failed.get((env, group))
                more = f", {more} failed" if more else ""
                line, = ax.plot(g[x], g["estimate"], label=f"{group} (n={g['runs'].max()}{more})")
                ax.fill_between(g[x], g["lo"], g["hi"], alpha=0.2, color=line.get_color())
                if marks is not None:
                    m = marks[x][marks[x]["group"] == group]
                    err = np.stack([(m["estimate"] - m["lo"]).to_numpy(),
                                    (m["hi"] - m["estimate"]).to_numpy()])
                    ax.errorbar(m[x].to_numpy(), m["estimate"].to_numpy(), yerr=err,
                                fmt="o", ms=4, capsize=3, color=line.get_color())
            ax.set_xlabel("env steps" if x == "env_steps" else "wall-clock time (s)")
            ax.set_ylabel(f"{RETURN_LABELS[src]}\n({estimator.upper()}, 95% stratified "
                          f"bootstrap CI)", fontsize=8)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(env if marks is None else
                     f"{env} (lines: training episodes; markers: held-out evaluations)")
        fig.tight_layout()
        choice = {v: k for k, v in RETURNS.items()}[src]
        stem = f"returns{'' if source == 'auto' else '_' + choice}_{env.replace(':', '-')}"
        written += _save(fig, out, stem)
        table = tables["env_steps"] if marks is None else \
            pd.concat([tables["env_steps"], marks["env_steps"]], ignore_index=True)
        table.to_csv(out / f"{stem}.csv", index=False)
    return written


def _check_metric(df, column: str) -> None:
    if column not in df or not df[column].notna().any():
        known = sorted(c for c in df.columns if c not in ("algo", "env", "group", "group_dir",
                                                          "run", "seed"))
        raise ConfigError(f"no run records '{column}'; pass --metric with a recorded column: "
                          f"{', '.join(known)}")


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
        ax.legend(fontsize=7)
        fig.suptitle(f"{env}: {column}")
        fig.tight_layout()
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
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"{env}: trust-region diagnostics per update")
        fig.tight_layout()
        written += _save(fig, out, f"trust_region_{env.replace(':', '-')}")
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


RETURNS = {"auto": "auto", "eval": "eval_return", "eval_stochastic": "eval_return_stochastic",
           "train": "train_return"}  # pgjax plot --returns: the column each choice shows


def plot_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="pgjax plot", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", help="run directories, or folders containing them")
    p.add_argument("--out", default=None, help="output folder (default: the first path)")
    p.add_argument("--estimator", choices=("iqm", "mean", "median"), default="iqm")
    p.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--metric", action="append", default=[], metavar="COLUMN",
                   help="also plot this recorded column against the update (repeatable), "
                        "e.g. --metric beta --metric entropy")
    p.add_argument("--returns", choices=tuple(RETURNS), default="auto",
                   help="what the return curves and final-return tables show: held-out "
                        "evaluations of the deterministic policy (eval) or of the stochastic "
                        "one (eval_stochastic, recorded with --eval-mode stochastic or both), "
                        "the stochastic policy's training episodes (train), or auto: the "
                        "stochastic evaluations where every run recorded 3 or more, else the "
                        "deterministic ones, else train (tables: the stochastic evaluation "
                        "where every run has one, else the deterministic). The others write "
                        "returns_<choice>_<env>.*, aggregate_<choice>.csv and "
                        "improvement_<choice>.csv beside the auto ones; every table says in "
                        "its returns column what it shows")
    p.add_argument("--include-unfinished", action="store_true",
                   help="also show run directories that are unfinished (killed, or still "
                        "training) as they are; tables count them in unfinished_runs")
    a = p.parse_args(argv)
    try:
        if a.reps < 1:
            raise ConfigError(f"--reps must be >= 1, got {a.reps}; pass a positive number of "
                              f"bootstrap resamples (e.g. --reps 2000)")
        df = load(a.paths, a.include_unfinished)
        for m in a.metric:
            _check_metric(df, m)
    except ConfigError as e:
        print(f"pgjax plot: error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out or a.paths[0])
    out.mkdir(parents=True, exist_ok=True)
    written = [w for m in a.metric for w in plot_metric(df, out, m)]
    source = RETURNS[a.returns]
    suffix = "" if a.returns == "auto" else f"_{a.returns}"
    written += plot_returns(df, out, a.estimator, a.reps, source) + plot_trust_region(df, out)
    agg, prob = aggregate_tables(df, a.reps, source=source)
    tables = {f"aggregate{suffix}.csv": agg, f"improvement{suffix}.csv": prob,
              "trust_region.csv": (tr := trust_region_table(df)),
              "failures.csv": (fails := failure_table(df))}
    for name, table in tables.items():
        table.to_csv(out / name, index=False)
        written.append(out / name)
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(agg[[c for c in agg.columns if not c.startswith("final")]].to_string(index=False))
        if len(prob):
            print(prob.to_string(index=False))
        print(tr.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        if len(fails):
            print(f"{len(fails)} failed runs left out of every curve and table "
                  f"(failures.csv):")
            print(fails.to_string(index=False))
    print("wrote " + ", ".join(str(w) for w in written))
    return 0
