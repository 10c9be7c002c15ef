"""Run directories as tables: the one reader of recorded results.

    import pgjax.results as r
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
(``pgjax.references``: a random policy's return and a documented maximum), never the runs
being compared; a task without references is not normalised, and tables say so.
"""
from __future__ import annotations

import io
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.errors import ConfigError
from pgjax.options import exact, fill_label, flat_options, format_option as _fmt
from pgjax.envs import task_options
from pgjax.references import reference_for
from pgjax.rundir import (check_metrics, inspect, metrics_file, metrics_text, read_json,
                          run_status)

STATUSES = ("finished", "unfinished", "failed")
# the recorded evaluations (``--eval-mode``), in the order ``auto`` prefers them: a policy's
# own score is that of the actions it samples, where that evaluation was recorded
EVAL_SOURCES = ("eval_return_stochastic", "eval_return")
RETURN_LABELS = {"eval_return_stochastic": "held-out eval return (stochastic policy)",
                 "eval_return": "held-out eval return (deterministic policy)",
                 "train_return": "training-episode return (stochastic policy)"}
EVAL_CURVE_POINTS = 3  # fewer evaluations per run than this: curves of training episodes
FINAL_WINDOW = 0.05  # final return: the evaluations over the last 5% of training
RUN_COLUMNS = ["dir", "run", "seed", "env", "algo", "group", "status"]
# options that say where and how records are kept, not what was trained (diagnostics: which
# per-update measurements are recorded beside the update, never what it does)
_NOT_OPTIONS = {"name", "out", "resume", "overwrite", "quiet", "seeds", "seed", "grid",
                "tensorboard", "wandb", "wandb_project", "distributed", "shard",
                "checkpoint_every", "checkpoint_seconds", "env", "label", "diagnostics"}


def find_run_dirs(paths, command: str = "results") -> list[Path]:
    """The run directories at or under ``paths`` (runs set aside by ``--overwrite`` in
    ``.trash`` left out). A damaged one named directly is a ``ConfigError``; one found
    below a folder is left out with a note."""
    return list(_found_run_dirs(paths, command))


def _found_run_dirs(paths, command: str) -> dict:
    """``find_run_dirs`` as {run directory: what ``inspect`` found there}."""
    out, seen = {}, set()
    for p in map(Path, paths):
        if not p.exists():
            raise ConfigError(f"{p} does not exist; pass run directories or folders that "
                              f"contain them")
        cands = [p] if (p / "config.json").exists() else sorted(
            q.parent for q in p.rglob("config.json")
            if ".trash" not in q.relative_to(p).parts)
        for c in cands:
            if c != p and c.parent.name == "runs" and (c.parent.parent / "config.json").exists():
                continue  # one run's own config.json (seed and hyperparameters)
            found = inspect(c)
            if found.state == "foreign":
                continue
            if found.state == "damaged":
                if c == p:
                    raise ConfigError(found.reason)
                print(f"pgjax {command}: note: {found.reason}; left out", file=sys.stderr)
                continue
            if found.state != "new" and c.resolve() not in seen:
                seen.add(c.resolve())
                out[c] = found
    return out


def _display_names(roots: list[Path]) -> dict:
    """A unique short name per run directory: its path below the deepest folder that holds
    them all (just the directory name when those are unique)."""
    if len({r.name for r in roots}) == len(roots):
        return {r: r.name for r in roots}
    full = [r.resolve() for r in roots]
    common = Path(os.path.commonpath([str(f.parent) for f in full]))
    return {r: str(f.relative_to(common)) for r, f in zip(roots, full)}


def _read_config(config: dict) -> tuple[dict, set | None, dict]:
    """A recorded config as flat options in this version's layout (``<component>.<field>``,
    a plugin's ``algo_options`` as ``<rule>.<name>``) and the components it reads
    (``TrainConfig.used``; None where the record cannot be read back, e.g. a plugin that
    is not importable here), and every option, flat (what a label's ``{option}`` names)."""
    from pgjax.config import TrainConfig

    try:
        cfg = TrainConfig.from_record(config)
        current, used = cfg.to_dict(), set(cfg.used())
    except (ConfigError, TypeError, ValueError):
        current, used = config, None
    every = flat_options(current)
    out = {k: v for k, v in every.items() if k not in _NOT_OPTIONS and k != "algo_options"}
    for item in current.get("algo_options") or ():  # a plugin rule's name=value options
        name, _, value = str(item).partition("=")
        out[f"{current.get('algo', 'rule')}.{name}"] = value
    return out, used, {**every, **out}


def _grid_label(record: dict, run: dict) -> str:
    varied = [k for k, v in record.get("grid", {}).items() if len(v) > 1]
    return ", ".join(f"{k.split('.')[-1]}={exact(run['hparams'][k])}" for k in varied)


def runs(paths, include_unfinished: bool = False, command: str = "results") -> pd.DataFrame:
    """One row per run found at or under ``paths``: the ``RUN_COLUMNS``, ``root`` (its run
    directory), ``id``, ``hparams`` (its traced hyperparameters: the grid point),
    ``eval_every``, ``episode_length`` (the time limit, None: the task's own),
    ``task_options`` (options that change the task, ``pgjax.envs.task_options``; "" for
    none), the failure (``failed_update``, ``error``) and ``.attrs["options"]`` ({dir: flat
    options}).
    Unfinished directories are noted on stderr, as ``pgjax <command>`` (their runs have
    status ``unfinished`` and are read only with ``include_unfinished``; ``command=""``:
    no note)."""
    found_in = _found_run_dirs(paths, command)  # each directory inspected once
    roots = list(found_in)
    names = _display_names(roots)
    rows, options = [], {}
    for root in roots:
        found = found_in[root]
        if found.state == "unfinished" and command:
            use = "included as it is" if include_unfinished else \
                "left out (pass --include-unfinished to show it as it is)"
            why = f" ({found.reason})" if found.reason else ""
            print(f"pgjax {command}: note: {root} is unfinished{why}; {use}", file=sys.stderr)
        record = found.record or read_json(root / "config.json", "the run's config.json")
        c, name = record["config"], names[root]
        opts, used, every = _read_config(c)
        varied = {k for k, v in record.get("grid", {}).items() if len(v) > 1}
        options[name] = {k: v for k, v in opts.items() if k not in varied}  # named per run
        label = c.get("label") or ""
        base = fill_label(label, every) if label else c["algo"]
        for r in record["runs"]:
            failure = run_status(root / "runs" / r["id"])
            status = "failed" if failure else \
                "finished" if found.state == "finished" else "unfinished"
            grid = _grid_label(record, r)
            rows.append({"dir": name, "run": f"{name}/{r['id']}", "seed": r["seed"],
                         "env": c["env"], "algo": c["algo"],
                         "group": base + (f" ({grid})" if grid else ""), "status": status,
                         "root": str(root), "id": r["id"], "hparams": r.get("hparams", {}),
                         "labelled": bool(label),
                         "episode_length": c.get("episode_length"),
                         "task_options": task_options(c["env"], c),
                         "eval_every": int(c.get("eval_every", 1)),
                         "used": used, "failed_update": (failure or {}).get("update"),
                         "error": (failure or {}).get("error")})
    table = pd.DataFrame(rows, columns=RUN_COLUMNS + [
        "root", "id", "hparams", "labelled", "episode_length", "task_options", "eval_every", "used",
        "failed_update", "error"])
    table["failed_update"] = table["failed_update"].astype("Int64")
    _tell_apart(table, options)
    table = table.drop(columns=["used", "labelled"])
    table.attrs["options"] = _Options(options)
    table.attrs["include_unfinished"] = include_unfinished
    return table


def _matters(key: str, used) -> bool:
    """Whether option ``key`` is read by a run whose components are ``used`` (None: not
    known, so every option counts): top-level options always, a component's only when the
    run has that component."""
    head = key.partition(".")[0]
    return used is None or "." not in key or head in used


def _tell_apart(table: pd.DataFrame, options: dict) -> None:
    """Rename the groups of different directories that share a name (same env): each gets
    the options in which the directories differ and which its components read; labelled
    directories keep their label (told apart by directory only where labels coincide). A
    new name that meets another directory's group is told apart in the next round."""
    for round_ in range(4):
        dirs = table.groupby(["env", "group"])["dir"].nunique()
        names = set(dirs.index[dirs > 1])  # only these groups' rows are split up
        if not names:
            return
        keys = pd.MultiIndex.from_frame(table[["env", "group"]]).isin(list(names))
        shared = list(table[keys].groupby(["env", "group"]))
        for (env, group), sub in shared:
            _rename(table, options, env, group, sub, by_dir=round_ == 3)


def _rename(table, options, env, group, sub, by_dir: bool) -> None:
    """One round of ``_tell_apart`` for the directories sharing (env, group): an option
    tells two directories apart where both record it (a grid-swept one is named per run)
    and their components read it; ``by_dir`` (or nothing that matters differs): the
    directory names too."""
    dirs = sorted(sub["dir"].unique())
    used = {d: sub.loc[sub["dir"] == d, "used"].iloc[0] for d in dirs}
    labels = {d: "" for d in dirs}
    if not sub["labelled"].all():
        keys = sorted({k for d in dirs for k in options[d]})
        readers = {k: [d for d in dirs if _matters(k, used[d]) and k in options[d]]
                   for k in keys}
        differ = [k for k in keys if len({json.dumps(options[d][k], sort_keys=True,
                                                     default=str) for d in readers[k]}) > 1]
        labels = {d: ", ".join(f"{k.split('.')[-1]}={_fmt(options[d][k])}"
                               for k in differ if d in readers[k]) for d in dirs}
    if by_dir or len(set(labels.values())) < len(dirs):
        labels = {d: labels[d] + (", " if labels[d] else "") + f"dir={d}" for d in dirs}
    for d in dirs:
        mask = (table["env"] == env) & (table["group"] == group) & (table["dir"] == d)
        table.loc[mask, "group"] = f"{group} ({labels[d]})" if not group.endswith(")") \
            else group[:-1] + f", {labels[d]})"


class _Options(dict):
    """{dir: options} carried in a frame's ``attrs``: pandas deep-copies attrs into every
    frame derived from it, which for many run directories cost more than the tables."""

    def __deepcopy__(self, memo):
        return self


class _Runs:
    """A ``runs`` table carried in a frame's ``attrs`` (equal only to itself, so pandas can
    compare attrs when it combines frames)."""

    def __init__(self, table: pd.DataFrame):
        self.table = table

    def __eq__(self, other):
        return isinstance(other, _Runs) and other.table is self.table

    def __deepcopy__(self, memo):  # pandas copies attrs with every derived frame
        return self

    __hash__ = object.__hash__


def run_table(df: pd.DataFrame) -> pd.DataFrame | None:
    """The ``runs`` table behind a frame of ``metrics``, ``load`` or ``finals`` (every run
    found, with its status), or None."""
    held = df.attrs.get("runs")
    return held.table if isinstance(held, _Runs) else held


def _read_metrics(path: Path, command: str) -> tuple[str, int] | None:
    """A run's metrics text and its number of rows, read once and checked
    (``check_metrics``); None, with a note, for a damaged or vanished file (one damaged
    file does not stop the others' tables)."""
    try:
        text = metrics_text(path)
        rows = check_metrics(path, text)
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as e:
        print(f"pgjax {command}: note: {path} is unreadable ({type(e).__name__}); run left "
              f"out", file=sys.stderr)
        return None
    except ConfigError as e:
        print(f"pgjax {command}: note: {e}; run left out", file=sys.stderr)
        return None
    return text, rows


def _parse_metrics(texts: list[str], rows: list[int]) -> tuple[pd.DataFrame, np.ndarray,
                                                                list[list[str]]]:
    """The checked metrics texts of many runs as one frame (the runs' rows in turn), each
    row's run (its index in ``texts``) and the columns of each header, in the order the
    runs first have them: runs that share a header are parsed as one CSV, the same values
    and column types as parsing each and concatenating them."""
    heads = {}
    for j, text in enumerate(texts):
        heads.setdefault(text.partition("\n")[0], []).append(j)
    parts, owner = [], []
    for head, js in heads.items():
        bodies = [texts[j].partition("\n")[2] for j in js]
        parts.append(pd.read_csv(io.StringIO("\n".join(
            [head] + [b if b.endswith("\n") or not b else b + "\n" for b in bodies]))))
        owner.append(np.repeat(js, [rows[j] for j in js]))
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    owner = np.concatenate(owner)
    if len(parts) > 1:  # back in the runs' order
        order = np.argsort(owner, kind="stable")
        out, owner = out.take(order).reset_index(drop=True), owner[order]
    return out, owner, [list(p.columns) for p in parts]


def run_metrics(run_dir) -> pd.DataFrame:
    """One run's metrics rows (``<run directory>/runs/<id>``: ``metrics.csv``, or
    ``metrics.csv.gz`` once finished) as they are recorded; a ``ConfigError`` when it has
    none."""
    path = metrics_file(run_dir)
    if path is None:
        raise ConfigError(f"{run_dir} holds no metrics; pass a run's folder (runs/<id>) that "
                          f"trained at least one chunk")
    return pd.read_csv(io.StringIO(metrics_text(path)))


def metrics(paths_or_runs, include_unfinished: bool = False, include_failed: bool = False,
            command: str = "results") -> pd.DataFrame:
    """Every recorded update of the runs (``runs``): one row per run and iteration (0: the
    row before training), with the ``RUN_COLUMNS`` and ``chunk`` (the evaluation chunk the
    row belongs to); ``paths_or_runs``: paths, or a ``runs`` table."""
    table = paths_or_runs if isinstance(paths_or_runs, pd.DataFrame) else \
        runs(paths_or_runs, include_unfinished, command)
    keep = {"finished"} | ({"unfinished"} if include_unfinished else set()) | \
        ({"failed"} if include_failed else set())
    texts, rows, owners = [], [], []  # each run's metrics, its rows and its table row
    for i, (status, root, rid) in enumerate(zip(table["status"], table["root"], table["id"])):
        if status not in keep:
            continue
        path = metrics_file(Path(root) / "runs" / rid)
        read = _read_metrics(path, command) if path is not None else None
        if read is not None:
            texts.append(read[0])
            rows.append(read[1])
            owners.append(i)
    base = ["iteration", "env_steps", "wall_time_s", "train_return", "episodes", "chunk"]
    if texts:  # parsed together, the run's columns set once on all rows
        out, run, headers = _parse_metrics(texts, rows)
        owner = np.asarray(owners)[run]
        out["chunk"] = -(-out["iteration"] // table["eval_every"].to_numpy()[owner])
        for col in RUN_COLUMNS:
            out[col] = table[col].to_numpy()[owner]
        # the columns as each run's own frame would have had them, then concatenated
        out = out[list(dict.fromkeys(c for cols in headers
                                     for c in [*cols, "chunk", *RUN_COLUMNS]))]
    else:
        out = pd.DataFrame(columns=RUN_COLUMNS + base)
    for column in EVAL_SOURCES:  # an evaluation no run recorded: an empty column
        if column not in out:
            out[column] = np.nan
    out.attrs["runs"] = _Runs(table)
    return out


def load(paths, include_unfinished: bool = False, include_failed: bool = False,
         command: str = "results") -> pd.DataFrame:
    """One row per run and held-out evaluation: ``RUN_COLUMNS``, ``iteration``,
    ``env_steps``, ``wall_time_s``, the evaluation columns (``eval_return``,
    ``eval_return_stochastic``, ...) and the run's options, one column each (a traced
    hyperparameter at the run's own grid point).
    Needs only the records (config.json, metrics), not the parameters."""
    rows = metrics(paths, include_unfinished, include_failed, command)
    table = run_table(rows)
    ev_cols = [c for c in rows.columns if c.startswith("eval_")]
    ev = rows[rows[list(EVAL_SOURCES)].notna().any(axis=1)]
    out = ev[RUN_COLUMNS + ["iteration", "env_steps", "wall_time_s"] + ev_cols].reset_index(
        drop=True)
    options = pd.DataFrame([{"dir": d, **{k: (_fmt(v) if isinstance(v, (list, dict, tuple))
                                              else v) for k, v in o.items()}}
                            for d, o in table.attrs["options"].items()])
    if len(options):
        clash = [c for c in options.columns if c in out.columns and c != "dir"]
        out = out.merge(options.drop(columns=clash), on="dir", how="left")
    hparams = dict(zip(table["run"], table["hparams"]))
    for col in dict.fromkeys(k for h in hparams.values() for k in h):
        # a grid point's own value, not the directory's base, on the rows of each run
        # that has one
        value = pd.Series({run: h[col] for run, h in hparams.items() if col in h})
        mine = out["run"].isin(value.index).to_numpy()
        if col not in out:
            out[col] = np.nan
        out.loc[mine, col] = out.loc[mine, "run"].map(value).to_numpy()
    out.attrs["runs"] = _Runs(table)
    return out


def eval_source(df: pd.DataFrame) -> str:
    """The evaluation final-return tables use by default: the stochastic policy's where
    every run recorded it (``--eval-mode stochastic|both``, the stateful policy's default),
    else the deterministic policy's."""
    n = df["run"].nunique()
    ok = df[df["eval_return_stochastic"].notna()]["run"].nunique() if n else 0
    return "eval_return_stochastic" if n and ok == n else "eval_return"


def curve_source(df: pd.DataFrame) -> str:
    """What learning curves of ``df``'s runs show: the held-out evaluations when every run
    has at least ``EVAL_CURVE_POINTS`` of them (``--evals``), else the returns of the
    training episodes (free: recorded at every update)."""
    n = df["run"].nunique()
    for source in EVAL_SOURCES:
        per_run = df[df[source].notna()].groupby("run").size()
        if len(per_run) == n and n and per_run.min() >= EVAL_CURVE_POINTS:
            return source
    return "train_return"


def return_points(df: pd.DataFrame, source: str, keys=("group", "run")) -> pd.DataFrame:
    """One row per run and curve point: ``keys``, point (0, 1, ... per run), env_steps,
    wall_time_s and the return (``value``). An evaluation column: every evaluation.
    ``train_return``: per chunk, the mean return of the training episodes that ended in it
    (episode-weighted over its updates), carried forward through chunks where none ended."""
    keys = list(keys)
    if source in EVAL_SOURCES:
        ev = df[df[source].notna()]
        out = ev[keys + ["env_steps", "wall_time_s", source]].rename(
            columns={source: "value"}).copy()
    else:
        d = df[df["iteration"] > 0]
        ok = d["train_return"].notna()
        w = d["episodes"].where(ok, 0.0)
        d = d.assign(_w=w, _wv=(d["train_return"] * w).where(ok, 0.0))
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


def bootstrap_ci(x, n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the mean of x (over seeds)."""
    x = np.asarray(x, float)
    if len(x) < 2:
        return float(x.mean()), float(x.mean())
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), (n, len(x)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def bootstrap_cis(samples, n: int = 2000, seed: int = 0) -> np.ndarray:
    """[len(samples), 2]: ``bootstrap_ci`` of each sample, the same numbers, with the samples
    of one size resampled together (``bootstrap_ci`` draws the same indices for every sample
    of a size)."""
    out = np.full((len(samples), 2), np.nan)
    sizes = {}
    for i, x in enumerate(samples):
        sizes.setdefault(len(x), []).append(i)
    for m, which in sizes.items():
        xs = np.array([np.asarray(samples[i], float) for i in which]).reshape(len(which), m)
        if m < 2:
            out[which] = xs.mean(1, keepdims=True) if m else np.nan
            continue
        draw = np.random.default_rng(seed).integers(0, m, (n, m))
        step = max(1, 4_000_000 // (n * m))
        for start in range(0, len(which), step):
            rows = which[start:start + step]
            # [samples x n, m] rows averaged as bootstrap_ci's [n, m] are (same sum order)
            means = xs[start:start + step][:, draw].reshape(-1, m).mean(1).reshape(-1, n)
            out[rows, 0] = np.percentile(means, 2.5, axis=1)
            out[rows, 1] = np.percentile(means, 97.5, axis=1)
    return out


def probability_of_improvement(scores_x, scores_y) -> float:
    """P(X > Y) of two [runs, tasks] score matrices as ``rliable.metrics`` defines it: per
    task, the fraction of (x run, y run) pairs with x above y, ties counting half (the
    Mann-Whitney U over the number of pairs), averaged over the tasks. The same value as
    rliable's, counted with arrays rather than one scipy test per task, which is what the
    bootstrap's thousands of calls spend their time on."""
    x, y = np.asarray(scores_x, float), np.asarray(scores_y, float)
    if np.isnan(x).any() or np.isnan(y).any():
        return np.nan  # as scipy's test gives
    above = (x[:, None, :] > y[None, :, :]).sum((0, 1))
    ties = (x[:, None, :] == y[None, :, :]).sum((0, 1))
    # U = above + ties / 2 exactly, divided once by the pairs: rliable's value to the bit
    return float(np.mean((above + 0.5 * ties) / (len(x) * len(y))))


# The stratified bootstrap, all resamples at once. rliable's ``get_interval_estimates`` (after
# ``np.random.seed(seed)``) draws, for every key in turn and every resample, the row indices
# of each score array with ``np.random.choice(runs, shape)``: runs resampled independently
# within each task (and each further index, e.g. each curve point), one Python call and one
# call of the statistic per resample. The same draws, in the same order from the same
# ``RandomState`` stream, are made here in one call per key, and the statistic is computed
# on [resamples, ...] arrays: the same intervals as rliable's, to the last bit where the
# statistic sums in the same order (``interval_estimates``).


def _stream_indices(rs, blocks, reps: int) -> list:
    """What ``for _ in range(reps): for n, shape in blocks: rs.randint(0, n, shape)`` draws
    (each block's draws stacked: ``[reps, *shape]``), leaving ``rs`` where that loop would.
    Legacy ``randint`` draws a value below ``n`` as the first 32-bit output whose low bits
    (under ``n - 1``'s bit mask) are below ``n``; blocks of one range in a row are therefore
    one call, and blocks of several ranges are read off the raw 32-bit stream."""
    sizes = [int(np.prod(shape)) for _, shape in blocks]
    out = [np.zeros((reps, s), np.int64) for s in sizes]
    live = [i for i, (n, _) in enumerate(blocks) if n > 1 and sizes[i]]  # n = 1 draws nothing
    ranges = {blocks[i][0] for i in live}
    if len(ranges) == 1:
        drawn = rs.randint(0, ranges.pop(), (reps, sum(sizes[i] for i in live)))
        at = 0
        for i in live:
            out[i] = drawn[:, at:at + sizes[i]]
            at += sizes[i]
    elif live:
        _mixed_ranges(rs, blocks, sizes, live, reps, out)
    return [o.reshape(reps, *shape) for o, (_, shape) in zip(out, blocks)]


def _mixed_ranges(rs, blocks, sizes, live, reps, out) -> None:
    """``_stream_indices`` for blocks of different ranges: the raw stream is drawn, each
    block takes its values off it in turn (32-bit output masked, too large ones skipped),
    and ``rs`` is then moved on by exactly what was used."""
    need = reps * sum(sizes[i] for i in live)
    state = rs.get_state()
    length = 3 * need + 1024
    while True:
        rs.set_state(state)
        raw = rs.randint(0, 2 ** 32, length, dtype=np.uint32).astype(np.int64)
        masks = {n: (1 << int(n - 1).bit_length()) - 1 for n in {blocks[i][0] for i in live}}
        ok = {n: (raw & m) < n for n, m in masks.items()}
        before = {n: np.concatenate([[0], np.cumsum(a)]).tolist() for n, a in ok.items()}
        where = {n: np.flatnonzero(a) for n, a in ok.items()}
        spots = {n: w.tolist() for n, w in where.items()}
        firsts = np.empty((reps, len(live)), np.int64)
        p = 0
        try:
            for r in range(reps):
                for j, i in enumerate(live):
                    n = blocks[i][0]
                    first = before[n][p]  # accepted outputs of this range before p
                    firsts[r, j] = first
                    p = spots[n][first + sizes[i] - 1] + 1
        except IndexError:  # a rare run of rejections: draw a longer stream
            length *= 2
            continue
        break
    for j, i in enumerate(live):
        n = blocks[i][0]
        pos = where[n][firsts[:, j, None] + np.arange(sizes[i])]
        out[i] = raw[pos] & masks[n]
    rs.set_state(state)
    rs.randint(0, 2 ** 32, p, dtype=np.uint32)


def _trimmed_iqm(flat):
    """The 25% trimmed mean along the last axis, as ``scipy.stats.trim_mean`` computes it
    (the same partition, then the mean of the middle); NaN where a row has one."""
    m = flat.shape[-1]
    lo = int(0.25 * m)
    part = np.partition(flat, (lo, m - lo - 1), axis=-1)
    out = part[..., lo:m - lo].mean(-1)
    return np.where(np.isnan(flat).any(-1), np.nan, out)


# rliable's aggregate estimators on [..., runs, tasks] arrays, one value per leading index
ESTIMATORS = {
    "iqm": lambda x: _trimmed_iqm(x.reshape(*x.shape[:-2], -1)),
    "mean": lambda x: x.mean(-2).mean(-1),
    "median": lambda x: np.median(x.mean(-2), axis=-1),
}


def aggregate_estimates(x, names=tuple(ESTIMATORS)):
    """[..., len(names)]: each aggregate estimator of ``x`` ([..., runs, tasks])."""
    x = np.ascontiguousarray(x, float)
    return np.stack([ESTIMATORS[k](x) for k in names], axis=-1)


def point_estimates(name: str):
    """A statistic for ``interval_estimates``: estimator ``name`` of [runs, tasks, points]
    scores at each point, [..., points] (rliable's ``est(s[..., i])`` for every i)."""
    def stat(x):
        x = np.ascontiguousarray(np.moveaxis(x, -1, -3))  # [..., points, runs, tasks]
        return ESTIMATORS[name](x)
    return stat


def improvement_probabilities(x, y):
    """``probability_of_improvement`` of each pair of resampled score matrices
    (``x``: [..., runs_x, tasks], ``y``: [..., runs_y, tasks]); NaN where one holds a NaN."""
    pairs = x.shape[-2] * y.shape[-2]
    if np.isfinite(x).all() and np.isfinite(y).all():
        # one pass: the signs of x - y sum to above - below, so (pairs + sum) / 2 is
        # above + ties / 2, the same number exactly
        signs = np.sign(x[..., :, None, :] - y[..., None, :, :])
        signs = signs.reshape(*signs.shape[:-3], pairs, signs.shape[-1]).sum(-2)
        return np.mean(0.5 * (pairs + signs) / pairs, axis=-1)
    above = (x[..., :, None, :] > y[..., None, :, :]).sum((-3, -2))
    ties = (x[..., :, None, :] == y[..., None, :, :]).sum((-3, -2))
    p = np.mean((above + 0.5 * ties) / pairs, axis=-1)
    bad = np.isnan(x).any((-2, -1)) | np.isnan(y).any((-2, -1))
    return np.where(bad, np.nan, p)


def interval_estimates(scores: dict, statistic, reps: int = 2000, seed: int = 0,
                       size: float = 0.95, chunk: int = 4_000_000) -> tuple[dict, dict]:
    """rliable's ``get_interval_estimates(scores, ..., reps=reps)`` after
    ``np.random.seed(seed)`` (percentile intervals of the stratified bootstrap: each score
    array, [runs, tasks, ...], has its runs resampled independently within every task and
    further index), with the resamples drawn and evaluated as arrays. ``scores``: {key:
    array}, or {key: (array, array)} resampled independently (probability of improvement);
    ``statistic``: of arrays with leading axes (``[..., runs, tasks, ...]``, one argument
    per array), giving ``[..., k...]``. Returns ({key: point estimate}, {key: [2, k...]
    lower and upper bounds}), as rliable does. The draws are rliable's, in its order, from
    a ``RandomState(seed)`` of this call's own: keys whose arrays have the same shapes are
    drawn and evaluated together, ``chunk`` elements at a time."""
    rs = np.random.RandomState(seed)
    data = {k: tuple(np.asarray(a, float) for a in ((v,) if isinstance(v, np.ndarray) else v))
            for k, v in scores.items()}
    keys, points, intervals = list(data), {}, {}
    alpha = (1.0 - size) / 2  # as arch's percentile interval computes its bounds
    i = 0
    while i < len(keys):
        shapes = [a.shape for a in data[keys[i]]]
        per_rep = sum(int(np.prod(s)) for s in shapes) + (  # what one resample holds
            int(np.prod(shapes[0])) * shapes[1][0] if len(shapes) == 2 else 0)
        batch = keys[i:i + 1]
        while i + len(batch) < len(keys) and (len(batch) + 1) * reps * per_rep <= chunk \
                and [a.shape for a in data[keys[i + len(batch)]]] == shapes:
            batch.append(keys[i + len(batch)])
        i += len(batch)
        stacked = [np.stack([data[k][j] for k in batch]) for j in range(len(shapes))]
        point = statistic(*stacked)  # [keys, k...]
        rows, values = len(batch) * reps, []  # (key, resample) pairs, in rliable's order
        step = max(1, chunk // max(per_rep, 1))
        for start in range(0, rows, step):
            n = min(step, rows - start)
            idx = _stream_indices(rs, [(s[0], s) for s in shapes], n)
            key = (start + np.arange(n)) // reps
            resampled = []
            for a, ix in zip(stacked, idx):  # a[key, ix, j] for each further index j
                flat = ix.reshape(n, a.shape[1], -1)
                width = flat.shape[-1]
                pos = (key[:, None, None] * a.shape[1] + flat) * width + np.arange(width)
                resampled.append(a.ravel()[pos].reshape(ix.shape))
            values.append(statistic(*resampled))
        values = np.concatenate(values).reshape(len(batch), reps, *point.shape[1:])
        bounds = np.percentile(values, [100 * alpha, 100 * (1.0 - alpha)], axis=1)
        for j, k in enumerate(batch):
            points[k], intervals[k] = point[j], bounds[:, j]
    return points, intervals


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
                f"reference scores at their settings; see pgjax.references)") if used else \
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
    ``scores`` column says whether they are normalised (``score_matrices``)."""
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
        row["runs_used"] = int(mats[group].shape[0]) if group in mats else 0
        row["scores"] = note if group in mats or not used else \
            "not aggregated (no finished runs on every task)"
        for j, name in enumerate(fns):
            row[name] = point[group][j] if group in mats else np.nan
            row[f"{name}_ci95_lo"] = ci[group][0, j] if group in mats else np.nan
            row[f"{name}_ci95_hi"] = ci[group][1, j] if group in mats else np.nan
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
        prob = pd.DataFrame([{"comparison": k, "probability_of_improvement": float(p_point[k]),
                              "ci95_lo": float(np.ravel(p_ci[k])[0]),
                              "ci95_hi": float(np.ravel(p_ci[k])[1])} for k in pairs])
    return agg, prob


def failures(table: pd.DataFrame) -> pd.DataFrame:
    """The failed runs of a ``runs`` table: env, group, run, seed, update, error."""
    f = table[table["status"] == "failed"]
    return f[["env", "group", "run", "seed", "failed_update", "error"]].rename(
        columns={"failed_update": "update"}).reset_index(drop=True)
