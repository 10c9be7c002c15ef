"""The host loop's chunks: each trained, its failed runs found, recorded, checkpointed."""
from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from pgjax.training.config import TrainConfig
from pgjax.core.errors import TrainingError
from pgjax.core.evaluation import MODES, TRAIN_RETURN
from pgjax.core.files import as_os_error
from pgjax.loop.vmapped import Placement, VmappedRuns, eval_keys_at


NAN_ALLOWED = (TRAIN_RETURN, "train_length")  # NaN by design when no episode ended


def find_failures(cfg: TrainConfig, metrics, first_iter: int, run_ids, active) -> dict:
    """The first failing update of each active run in a chunk's metrics {name: [R, I]}:
    {run index: (update, message)}. Failures: an algorithm's ERRORS flag, a non-finite
    parameter, or any non-finite recorded quantity (losses, KL, ratios, entropy, ...)."""
    errors = type(cfg.algo_config).ERRORS
    checks = []  # (name, [R, I] bool, message template)
    for name, message in errors.items():
        checks.append((name, np.asarray(metrics.get(name, 0.0)) > 0, message))
    if "nonfinite_params" in metrics:
        checks.append(("nonfinite_params", np.asarray(metrics["nonfinite_params"]) > 0,
                       "non-finite parameters after the update"))
    for name in sorted(metrics):
        if name in NAN_ALLOWED or name in errors or name == "nonfinite_params":
            continue
        checks.append((name, ~np.isfinite(np.asarray(metrics[name], np.float64)),
                       f"non-finite {name}"))
    out = {}
    for r in active:
        best = None
        for name, bad, message in checks:
            hits = np.flatnonzero(np.broadcast_to(bad, np.shape(metrics["episodes"]))[r])
            if hits.size and (best is None or hits[0] < best[0]):
                best = (int(hits[0]), message)
        if best is not None:
            update = first_iter + best[0] + 1
            hint = "" if best[1] in errors.values() else \
                "; this run stopped, try a lower learning rate or gradient-norm clipping"
            out[r] = (update, f"{best[1]} (run {run_ids[r]}, update {update}){hint}")
    return out


def raise_failures(failed: dict):
    """``TrainingError`` naming the first failed run (and how many more failed)."""
    first = failed[min(failed)]
    more = f" ({len(failed) - 1} more failed runs, see status.json)" if len(failed) > 1 else ""
    raise TrainingError(first + more)


class Session(NamedTuple):
    """One run of the host loop: what ``_start`` sets up for the chunk loop."""

    cfg: TrainConfig
    root: Path
    fns: VmappedRuns
    place: Placement
    hps: Any  # placed traced hyperparameters [R]
    eval_keys: Any  # placed per-run eval keys [R]
    records: Any  # RunRecords (process 0) or None
    ckpts: Any  # Checkpoints or None
    run_ids: list
    say: Any
    t0: float
    uid: str | None = None  # the run directory's (config.json), saved with each checkpoint


def _progress_line(s: Session, c: int, metrics, ev, failed, seconds: float, wall: float):
    cfg, n = s.cfg, len(s.run_ids)
    steps = cfg.iterations_per_chunk * cfg.batch_size
    ok = [r for r in range(n) if r not in failed]
    tr = metrics[TRAIN_RETURN][ok]
    # no training episode ended in the chunk: a dash, not a NaN
    tr = f"{tr[np.isfinite(tr)].mean():8.1f}" if np.isfinite(tr).any() else f"{'—':>8}"
    evaluated = ""
    for m in MODES.values():
        mode, key = ("" if m.deterministic else f" {m.name}"), m.return_column
        if ev is not None and key in ev:
            er = ev[key][ok] if ok else np.full(1, np.nan)
            evaluated += (f" | eval return{mode} {np.mean(er):8.1f} (min {np.min(er):.1f}, "
                          f"max {np.max(er):.1f})")
    return (f"  steps {(c + 1) * steps:>10,}/{cfg.num_iterations * cfg.batch_size:,} | "
            f"{steps * n / seconds:>9,.0f} steps/s | train return {tr}{evaluated} | "
            f"{wall:6.0f}s")


class FinishedChunk(NamedTuple):
    """A chunk's results fetched to the host, waiting to be recorded."""

    index: int
    seconds: float  # from its dispatch to its results on the host
    wall: float  # the run's wall clock when its results arrived
    metrics: dict  # {name: [R, I]}
    ev: Any  # {name: [R]}, or None when the chunk was not evaluated
    saved: Any  # (params, obs_stats) after the chunk, on the host


def _record(s: Session, done: FinishedChunk, failed: dict) -> None:
    """A finished chunk's records: its failures, metrics rows, progress line and parameters."""
    cfg, records = s.cfg, s.records
    first_iter = done.index * cfg.iterations_per_chunk
    active = [r for r in range(len(s.run_ids)) if r not in failed]
    new_failures = find_failures(cfg, done.metrics, first_iter, s.run_ids, active)
    if records is not None:
        # parameters first: rows that reach an iteration always come with its parameters
        records.save_params(*done.saved, skip=set(new_failures))
        records.write_chunk(first_iter, cfg.batch_size, done.wall, done.metrics, done.ev,
                            {r: u for r, (u, _) in new_failures.items()})
        for r, (update, message) in new_failures.items():
            records.mark_failed(r, update, message)
    for r, (_, message) in new_failures.items():
        failed[r] = message
        s.say(f"  run failed: {message}")
    s.say(_progress_line(s, done.index, done.metrics, done.ev, failed, done.seconds, done.wall))


def _save_checkpoint(s: Session, step: int, state, meta: dict) -> None:
    """Checkpoint ``step`` (with the run directory's identity). A full disk is an
    ``OSError`` naming the path: found before orbax starts where the free space cannot hold
    the state, else read from orbax's error (whose own logging of it is silenced)."""
    import errno
    import logging
    import os

    need = sum(getattr(x, "nbytes", 0) for x in jax.tree.leaves(state)) + (256 << 10)
    where = s.ckpts.directory if s.ckpts.directory.exists() else s.root
    if shutil.disk_usage(where).free < need:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(s.ckpts.directory))
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.CRITICAL)  # orbax logs each thread's error, then raises it
    try:
        s.ckpts.save(step, state, meta if s.uid is None else {**meta, "run": s.uid})
    except Exception as e:  # orbax reports a full disk as a ValueError
        fault = as_os_error(e)
        if fault is None:
            raise
        raise fault from None
    finally:
        absl.setLevel(level)


def _train_chunks(s: Session, state, start: int, failed: dict) -> dict:
    """The chunk loop from chunk ``start``: returns the failed runs {index: message}.

    Pipelined: each chunk is dispatched before the previous one is recorded, so the records
    are written while the device trains. The parameters are fetched before the next dispatch
    (which donates the state). A chunk that is checkpointed is recorded first, so the records
    always reach the newest checkpoint (a resume cuts them back to it, never forward); the
    chunk still waiting when anything raises is recorded on the way out."""
    cfg = s.cfg
    eval_chunks, last_save, pending = set(cfg.eval_chunks), time.time(), None

    def record_pending():
        nonlocal pending
        if pending is not None:
            todo, pending = pending, None  # never recorded twice, even if recording raises
            _record(s, todo, failed)

    try:
        for c in range(start, cfg.num_chunks):
            if len(failed) == len(s.run_ids):
                break
            tc = time.time()
            evaluate = c + 1 in eval_chunks
            state, metrics, ev = s.fns.chunk(state, s.hps, eval_keys_at(s.eval_keys, c + 1),
                                             evaluate)  # dispatched: runs while we record
            s.fns.check_ahead()
            record_pending()
            # a collective: every process fetches
            metrics, ev, saved = s.place.get((metrics, ev, (state.params, state.obs_stats)))
            done = FinishedChunk(c, time.time() - tc, time.time() - s.t0, metrics,
                                 ev if evaluate else None, saved)
            # none after the last chunk: its records are final and the run finishes next
            due = cfg.checkpoint_every and (c + 1) % cfg.checkpoint_every == 0 \
                and c + 1 < cfg.num_chunks
            if s.ckpts is not None and due and time.time() - last_save >= cfg.checkpoint_seconds:
                _record(s, done, failed)
                meta = {"chunk": c + 1, "wall_time_s": done.wall,
                        "iteration": (c + 1) * cfg.iterations_per_chunk}
                _save_checkpoint(s, c + 1, state, meta)
                last_save = time.time()
            else:
                pending = done
    finally:
        record_pending()
        if s.ckpts is not None:
            s.ckpts.close()
    return failed

