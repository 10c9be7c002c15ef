"""The runs found in run directories and their recorded rows, read into pandas frames."""
from __future__ import annotations

import io
import json
import os
import sys
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from pgjax.core.evaluation import EVAL_SOURCES, TRAIN_RETURN
from pgjax.core.errors import ConfigError
from pgjax.training.options import exact, fill_label, flat_options, format_option as _fmt
from pgjax.envs import task_options
from pgjax.core.rundir import (check_metrics, inspect, metrics_file, metrics_text, read_json,
                               run_status)

STATUSES = ("finished", "unfinished", "failed")
# the recorded evaluations (``--eval-mode``), in the order ``auto`` prefers them
# (``pgjax.core.evaluation.EVAL_SOURCES``): a policy's own score is that of the actions it
# samples, where that evaluation was recorded
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
    from pgjax.training.config import TrainConfig

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
    ``eval_every``, ``evals`` (its held-out evaluations; 0: none), ``episode_length`` (the
    time limit, None: the task's own),
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
        # a one-value --grid entry trained every run with that value, not the config's
        options[name].update({k: v[0] for k, v in record.get("grid", {}).items()
                              if len(v) == 1})
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
                         "evals": int(c.get("evals", 1)),
                         "used": used, "failed_update": (failure or {}).get("update"),
                         "error": (failure or {}).get("error")})
    table = pd.DataFrame(rows, columns=RUN_COLUMNS + [
        "root", "id", "hparams", "labelled", "episode_length", "task_options", "eval_every",
        "evals", "used", "failed_update", "error"])
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
    pooled = set()
    for round_ in range(4):
        dirs = table.groupby(["env", "group"])["dir"].nunique()
        names = set(dirs.index[dirs > 1]) - pooled  # only these groups' rows are split up
        if not names:
            return
        keys = pd.MultiIndex.from_frame(table[["env", "group"]]).isin(list(names))
        shared = list(table[keys].groupby(["env", "group"]))
        for (env, group), sub in shared:
            if _same_configuration(options, sub):
                pooled.add((env, group))
                continue
            _rename(table, options, env, group, sub, by_dir=round_ == 3)


def _differing(options: dict, sub: pd.DataFrame) -> dict:
    """{option: the directories that record it and read it} for the options in which the
    directories of ``sub`` differ."""
    dirs = sorted(sub["dir"].unique())
    used = {d: sub.loc[sub["dir"] == d, "used"].iloc[0] for d in dirs}
    keys = sorted({k for d in dirs for k in options[d]})
    readers = {k: [d for d in dirs if _matters(k, used[d]) and k in options[d]] for k in keys}
    return {k: readers[k] for k in keys
            if len({json.dumps(options[d][k], sort_keys=True, default=str)
                    for d in readers[k]}) > 1}


def _same_configuration(options: dict, sub: pd.DataFrame) -> bool:
    """Whether the directories sharing a group name are one configuration run on other
    seeds (a sweep of more seeds): no option they read differs, none has a label the other
    lacks, and no run (seed and grid point) is in two of them. Their runs then form one
    group; a run repeated would be counted twice, so such directories are told apart."""
    if sub["labelled"].nunique() > 1 or _differing(options, sub):
        return False
    return bool((sub.groupby("id")["dir"].nunique() == 1).all())


def _rename(table, options, env, group, sub, by_dir: bool) -> None:
    """One round of ``_tell_apart`` for the directories sharing (env, group): an option
    tells two directories apart where both record it (a grid-swept one is named per run)
    and their components read it; ``by_dir`` (or nothing that matters differs): the
    directory names too."""
    dirs = sorted(sub["dir"].unique())
    labels = {d: "" for d in dirs}
    if not sub["labelled"].all():
        differ = _differing(options, sub)
        labels = {d: ", ".join(f"{k.split('.')[-1]}={_fmt(options[d][k])}"
                               for k, readers in differ.items() if d in readers)
                  for d in dirs}
    for label in set(labels.values()):  # directories that would still share a name
        same = [d for d in dirs if labels[d] == label]
        if len(same) == 1 or (not by_dir and _same_configuration(
                options, sub[sub["dir"].isin(same)])):
            continue  # alone, or one configuration on other runs: pooled in the next round
        labels.update({d: label + (", " if label else "") + f"dir={d}" for d in same})
    for d in dirs:
        if not labels[d]:  # pooled with others under the name it has
            continue
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
    base = ["iteration", "env_steps", "wall_time_s", TRAIN_RETURN, "episodes", "chunk"]
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
    unevaluated = sorted(set(table.loc[(table["evals"] == 0) & (table["status"] == "finished"),
                                       "dir"]))
    if unevaluated and command:
        print(f"pgjax {command}: note: {', '.join(unevaluated)} recorded no held-out "
              f"evaluation (--evals 0) and {'has' if len(unevaluated) == 1 else 'have'} no rows "
              f"here; read {'its' if len(unevaluated) == 1 else 'their'} training returns with "
              f"results.metrics (as pgjax plot does)", file=sys.stderr)
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
