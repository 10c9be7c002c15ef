"""Run directories: what a run leaves behind, written so that a crash loses nothing finished.

    <out>/<name>/
        config.json                 resolved configuration, the runs (seed, traced
                                    hyperparameters, id), package versions
        runs/<run_id>/config.json   the run's seed and traced hyperparameters
        runs/<run_id>/metrics.csv   one row per iteration from 0 (compressed to
                                    metrics.csv.gz, the same text, once the run directory
                                    finishes; rundir.metrics_file finds either):
                                    env_steps, wall_time_s; eval_return/_std, eval_length
                                    where evaluated (--evals; the deterministic policy),
                                    eval_return_stochastic/_std, eval_length_stochastic
                                    (the sampled policy: --eval-mode stochastic or both);
                                    train_return (training episodes ended in the update);
                                    clip_frac, pg_loss, v_loss, explained_variance,
                                    grad_norm, grad_steps, lr; with --diagnostics full
                                    also kl_mean, kl_max, ratio_dev_max, entropy (the
                                    whole batch, after the update), kl_stats_*,
                                    value_stats_shift and kl_reset_* / mode_shift_reset_max
                                    below; per policy kind: clip_frac_a,
                                    clip_frac_z (stateful); per update rule: accepted,
                                    ls_steps (TRPO); beta, primary_steps, fixup_steps,
                                    fixup_fraction, kl_max_before_fixup (FixPO); with
                                    observation normalisation kl_stats_mean/max,
                                    value_stats_shift, obs_std_drift, obs_mean_drift;
                                    return_scale; for feedforward policies kl_reset_mean/max,
                                    kl_reset_stats_max, mode_shift_reset_max
        runs/<run_id>/params.msgpack  latest parameters and normaliser statistics
        runs/<run_id>/status.json   only if the run failed: the update and the error
        runs/<run_id>/tensorboard/  with --tensorboard
        plugins/                    copies of the --plugins files (config.json's
                                    plugin_files: name, copy, sha256, tag)
        checkpoint/                 latest training state (orbax), for --resume; removed
                                    once the run has finished
        summary.csv, curve.png      final returns with 95% CIs; learning curves, written
                                    when training finishes
        status.json                 written last: {"status": "finished", ...}
        .lock                       held by the process training into the directory

Every file is replaced atomically (written to a temporary file, fsynced, renamed) after each
chunk, so a kill at any moment leaves either the previous or the new version, never a torn
one; ``status.json`` at the root marks complete records.

A run directory is in one of four states (a folder that is not a run's is ``foreign`` and
is never replaced), and ``rundir.inspect`` is the one place that tells which (every command
that reads or writes a run directory asks it): ``new`` (nothing recorded),
``unfinished`` (records of a run that was stopped or is training: ``--resume`` continues it
from a checkpoint), ``finished`` (``status.json``; never written to again unless
``--overwrite`` replaces it) and ``damaged`` (a record that cannot be read, with the file
and a fix that loses nothing). The transitions: ``claim`` (new -> unfinished, or a replaced
run set aside first), ``RunRecords.reopen`` (a resume: unfinished -> unfinished, cut back to
its checkpoint), ``RunRecords.finish`` (unfinished -> finished).
"""
from __future__ import annotations

import csv
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
from flax import serialization

from pgjax.loop.claim import (MOVING, Claim, claim, empty_trash,  # noqa: F401 (re-exported)
                              recover, set_aside, trash_dir)
from pgjax.training.config import TrainConfig
from pgjax.core.errors import ConfigError
from pgjax.core import plugin_files
from pgjax.training.options import exact
from pgjax.core.rundir import (DirState, check_records, enclosing_run,  # noqa: F401
                               inspect, is_finished, read_json, read_rows, recorded_rows,
                               run_status, METRICS, PACKED, pack_metrics, ID_BYTES)
from pgjax.core.files import (atomic_write_bytes, atomic_write_json,  # noqa: F401 (re-exported)
                              interrupts_deferred,
                              remove_stale_temporaries)
from pgjax.core.evaluation import DETERMINISTIC, MODES, columns as eval_columns
from pgjax.core.evaluation import describe as describe_returns



def cell(v):
    """A metrics value as written to metrics.csv: a float that is a float32 (what the
    compiled program computes) in the shortest form that reads back as that float32
    (``3317.4487``, not ``3317.44873046875``: 40% smaller records), other values as they
    are. Exact either way."""
    if isinstance(v, float) and np.isfinite(v) and float(np.float32(v)) == v:
        return str(np.float32(v))
    return v


def run_id(seed: int, hp: dict, varied: list[str]) -> str:
    """``lr=0.0003_gamma=0.99_seed0``; where the grid varies so many options that this would
    be longer than ``ID_BYTES``, its start and a hash of the whole (still one id per grid
    point, still ending in the seed)."""
    parts = [f"{k.split('.')[-1]}={exact(hp[k])}" for k in varied]
    name = "_".join(parts + [f"seed{seed}"])
    if len(name.encode()) <= ID_BYTES:
        return name
    import hashlib

    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    head = "_".join(parts).encode()[:ID_BYTES - 48].decode(errors="ignore")
    return f"{head}~{digest}_seed{seed}"


def _versions() -> dict:
    out = {}
    for pkg in ("pgjax", "jax", "jaxlib", "flax", "optax", "chex", "brax", "gymnasium"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class RunRecords:
    root: Path
    run_dirs: list
    columns: list | None = None
    pending_initial: list | None = None  # eval-only rows written with the first chunk
    rows: list | None = None  # per run: every metrics row written so far
    failed: dict | None = None  # run index -> failure message (its records stop there)
    sinks: list | None = None  # optional mirrors of the rows (TensorBoard, W&B)
    eval_columns: tuple = DETERMINISTIC.columns

    def __post_init__(self):
        self.rows = self.rows if self.rows is not None else [[] for _ in self.run_dirs]
        self.failed = self.failed if self.failed is not None else {}
        self.sinks = self.sinks or []

    @classmethod
    def create(cls, cfg, runs, success: str = "") -> "RunRecords":
        """New records for ``runs`` of ``cfg``; ``success``: the eval environment's outcome
        in words (``EnvSpec.success``), whose rate each evaluation then records."""
        root = Path(cfg.out) / cfg.name
        (root / "status.json").unlink(missing_ok=True)
        grid = cfg.parse_grid()
        varied = [k for k in grid if len(grid[k]) > 1]
        run_dirs = [root / "runs" / run_id(seed, hp, varied) for seed, hp in runs]
        plugins = plugin_files.record(root, cfg.plugins)  # the code the run trains with
        # config.json first: a directory is never left with records it does not describe
        atomic_write_json(root / "config.json", within=root, obj={
            "config": {**cfg.to_dict(), "resume": False},  # new records: not resumed
            "grid": grid, "num_iterations": cfg.num_iterations,
            "env_steps_per_run": cfg.num_iterations * cfg.batch_size,
            "returns": describe_returns(cfg.eval_modes, cfg.eval_envs,
                                        [c * cfg.eval_every for c in cfg.eval_chunks],
                                        success),
            "runs": [{"id": d.name, "seed": s, "hparams": hp} for d, (s, hp) in zip(run_dirs, runs)],
            "versions": _versions(), plugin_files.KEY: plugins,
            # this run directory's identity, saved with each checkpoint: a checkpoint copied
            # in from another run is never restored into it
            "uid": uuid.uuid4().hex})
        for d, (seed, hp) in zip(run_dirs, runs):
            d.mkdir(parents=True, exist_ok=True)
            atomic_write_json(d / "config.json", {"seed": seed, "hparams": hp}, root)
            for stale in (METRICS, PACKED, "status.json"):
                (d / stale).unlink(missing_ok=True)
        return cls(root=root, run_dirs=run_dirs,
                   eval_columns=eval_columns(cfg.eval_modes, bool(success)))

    @classmethod
    def read(cls, root) -> "RunRecords":
        """The records of a run directory as they are, for reading: nothing is written,
        cut back or removed (a finished run stays finished)."""
        root = Path(root)
        cfg = read_json(root / "config.json", "the run's config.json")
        run_dirs = [root / "runs" / r["id"] for r in cfg["runs"]]
        failed = {i: st.get("error", "failed") for i, d in enumerate(run_dirs)
                  if (st := run_status(d)) is not None}
        return cls(root=root, run_dirs=run_dirs, failed=failed)

    @classmethod
    def reopen(cls, root, upto_iteration: int) -> "RunRecords":
        """The records of an interrupted run, cut back to ``upto_iteration`` (the iteration of
        the checkpoint it resumes from); failures recorded before that point are kept."""
        root = Path(root)
        remove_stale_temporaries(root)  # the killed process's half-written files
        cfg = read_json(root / "config.json", "the run's config.json")
        run_dirs = [root / "runs" / r["id"] for r in cfg["runs"]]
        rows, failed, columns = [], {}, None
        for i, d in enumerate(run_dirs):
            kept = [r for r in read_rows(d)
                    if int(float(r["iteration"])) <= upto_iteration]
            rows.append(kept)
            if kept and columns is None:
                columns = list(kept[0].keys())
            st = run_status(d)
            if st is not None:
                if st.get("update", 0) <= upto_iteration:
                    failed[i] = st.get("error", "failed")
                else:
                    (d / "status.json").unlink()
        (root / "status.json").unlink(missing_ok=True)
        modes = TrainConfig.from_record(cfg["config"], plugins=()).eval_modes
        success = any(MODES[m].success_column in cfg.get("returns", {}) for m in modes)
        rec = cls(root=root, run_dirs=run_dirs, columns=columns, rows=rows, failed=failed,
                  eval_columns=eval_columns(modes, success))
        for r in range(len(run_dirs)):
            rec._flush(r)
        return rec

    def _flush(self, r: int) -> None:
        """Rewrite run r's metrics.csv atomically (a kill never leaves a half-written row)."""
        import io

        if not self.rows[r]:
            (self.run_dirs[r] / METRICS).unlink(missing_ok=True)
            (self.run_dirs[r] / PACKED).unlink(missing_ok=True)
            return
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self.columns or list(self.rows[r][0].keys()),
                           lineterminator="\n")
        w.writeheader()
        w.writerows({k: cell(v) for k, v in row.items()} for row in self.rows[r])
        atomic_write_bytes(self.run_dirs[r] / METRICS, buf.getvalue().encode(), self.root)
        # the rows are on disk: a compressed copy left by a finish that a kill cut short goes
        (self.run_dirs[r] / PACKED).unlink(missing_ok=True)

    def _append(self, rows_per_run: list[list[dict]]) -> None:
        for r, rows in enumerate(rows_per_run):
            if r in self.failed or not rows:
                continue
            if self.columns is None:
                self.columns = list(rows[0].keys())
            self.rows[r].extend(rows)
            self._flush(r)
            for sink in self.sinks:
                sink.write(r, rows)

    def write_initial(self, iteration: int, env_steps: int, wall: float, ev: dict | None) -> None:
        """The row before training: the evaluation at step 0 (``ev``; blank without one),
        written together with the first chunk (whose rows fix the CSV's columns)."""
        self.pending_initial = [{"iteration": iteration, "env_steps": env_steps,
                                  "wall_time_s": round(wall, 3),
                                  **{k: float(ev[k][r]) if ev is not None else ""
                                     for k in self.eval_columns}}
                                 for r in range(len(self.run_dirs))]

    def write_chunk(self, first_iter: int, steps_per_iter: int, wall: float, metrics: dict,
                    ev: dict, last_iter: dict | None = None) -> None:
        """metrics: {name: [R, I]}; ev: {name: [R]} measured after the chunk's last iteration
        (None: the chunk was not evaluated, its eval cells stay blank).
        wall_time_s is the wall clock at the end of the chunk (one value per chunk).
        ``last_iter``: run index -> last update to record (a run that failed in this chunk
        keeps the rows up to and including its failing update)."""
        names = sorted(metrics)
        n_iter = np.asarray(metrics[names[0]]).shape[1]
        last_iter = last_iter or {}
        rows_per_run = []
        for r in range(len(self.run_dirs)):
            rows = []
            for i in range(n_iter):
                it = first_iter + i + 1
                if it > last_iter.get(r, it):
                    break
                row = {"iteration": it, "env_steps": it * steps_per_iter,
                       "wall_time_s": round(wall, 3)}
                for k in self.eval_columns:
                    row[k] = float(ev[k][r]) if i == n_iter - 1 and ev is not None else ""
                row.update({k: float(np.asarray(metrics[k])[r, i]) for k in names})
                rows.append(row)
            rows_per_run.append(rows)
        if self.pending_initial:
            cols = list(rows_per_run[0][0].keys()) if rows_per_run[0] else None
            for r, first in enumerate(self.pending_initial):
                cols_r = cols or list(first.keys())
                rows_per_run[r].insert(0, {c: first.get(c, "") for c in cols_r})
            self.pending_initial = None
        self._append(rows_per_run)

    def mark_failed(self, r: int, update: int, message: str) -> None:
        self.failed[r] = message
        atomic_write_json(self.run_dirs[r] / "status.json",
                          {"status": "failed", "update": update, "error": message}, self.root)

    def save_params(self, params, obs_stats, skip=()) -> None:
        """params / obs_stats carry a leading run axis; one file per run (failed runs, and
        the runs in ``skip`` that fail in this chunk, keep their last finite parameters)."""
        import jax

        for r, d in enumerate(self.run_dirs):
            if r in self.failed or r in skip:
                continue
            tree = {"params": jax.tree.map(lambda x: np.asarray(x[r]), params),
                    "obs_stats": jax.tree.map(lambda x: np.asarray(x[r]), obs_stats)}
            atomic_write_bytes(d / "params.msgpack", serialization.msgpack_serialize(
                serialization.to_state_dict(tree)), self.root)

    def finish(self) -> None:
        """Metrics compressed, summary table and plot, then the ``status.json`` that marks the
        records complete."""
        from pgjax.analysis.plots import directory_rows, plot_run, summarize

        for sink in self.sinks:
            sink.close()
        for d in self.run_dirs:
            pack_metrics(d)
        rows = directory_rows(self.root)  # read once for the table and the figure
        summarize(self.root, rows)
        plot_run(self.root, rows)
        atomic_write_json(self.root / "status.json", within=self.root, obj={
            "status": "finished", "failed_runs": {self.run_dirs[r].name: m
                                                  for r, m in sorted(self.failed.items())}})


def load_params(path) -> dict:
    """Read a ``params.msgpack`` written by a run: {"params": ..., "obs_stats": ...}."""
    try:
        tree = serialization.msgpack_restore(Path(path).read_bytes())
    except OSError as e:
        raise ConfigError(f"cannot read {path} ({e.strerror}); pass a run whose parameters "
                          f"are there") from None
    except Exception as e:  # msgpack's own errors: a torn or overwritten file
        raise ConfigError(f"{path} is damaged ({type(e).__name__}); its run's metrics are "
                          f"intact, but its parameters cannot be restored: train it again "
                          f"with --overwrite (the old run is set aside in .trash)") from None
    if not isinstance(tree, dict) or "params" not in tree:
        raise ConfigError(f"{path} is damaged (no parameters in it); train the run again with "
                          f"--overwrite (the old run is set aside in .trash)")
    return tree

