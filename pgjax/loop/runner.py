"""The host loop: every (seed, hyperparameter) run of a config trained in one vmapped program,
chunk by chunk, with progress lines, evaluation, crash-safe records and checkpoints.

``run(cfg)`` is three steps: ``_start`` (the program, placement, keys, and either a fresh
start or a restore from the latest checkpoint), ``_train_chunks`` (the chunk loop,
``pgjax.loop.chunk_loop``: train and, at the chunks ``cfg.eval_chunks`` names, evaluate the
state the chunk ends in, dispatched after it; find failed runs, write records, checkpoint at
most every ``checkpoint_seconds``) and
``_finish`` (final records, the error for failed runs). The program and its placement are
``pgjax.loop.vmapped``'s; what a resume must match and may restore, ``pgjax.loop.resume``'s.
"""
from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import jax

from pgjax.loop.chunk_loop import Session, _train_chunks, raise_failures
from pgjax.loop.chunk_loop import (NAN_ALLOWED, FinishedChunk,  # noqa: F401 (re-exported)
                                   _progress_line, find_failures)
from pgjax.training.config import TrainConfig
from pgjax.core.errors import ConfigError, StorageError, TrainingError
from pgjax.core.files import storage_message
from pgjax.loop.resume import (_complete, _finite, _recorded_failures, _resume_plan,
                               check_resumable, run_uid, warn)
from pgjax.loop.resume import RESUME_IGNORED, config_differences  # noqa: F401 (re-exported)
from pgjax.training.train import Trainer, check_memory
from pgjax.loop.vmapped import (Placement, VmappedRuns, check_float32, eval_keys_at, program_key,
                                run_keys, stack_hparams)
from pgjax.loop.vmapped import PROGRAM_IGNORED  # noqa: F401 (re-exported)


def initialize_distributed() -> None:
    """``jax.distributed.initialize()``: the coordinator and this process's place from a
    cluster's environment (SLURM, Open MPI, ...), or from ``JAX_COORDINATOR_ADDRESS``,
    ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` (host:port, count, 0-based index)."""
    import os

    kw = {}
    for name, key in (("num_processes", "JAX_NUM_PROCESSES"), ("process_id", "JAX_PROCESS_ID")):
        if os.environ.get(key):
            try:
                kw[name] = int(os.environ[key])
            except ValueError:
                raise ConfigError(f"{key}={os.environ[key]!r} is not an integer; set it to "
                                  f"the {name.replace('_', ' ')}") from None
    jax.distributed.initialize(**kw)


def _print(*args) -> None:
    """A progress line on stdout. Output to a reader that has gone (``pgjax train | head``)
    is dropped from then on: training goes on and finishes, its records are what count."""
    try:
        print(*args, flush=True)
    except BrokenPipeError:
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # not a file descriptor (a test's buffer): no output
            sys.stdout = open(os.devnull, "w")
        finally:
            os.close(devnull)


def _start(cfg: TrainConfig, trainer: Trainer, say, resuming: bool, steps=(),
           stored: bool = False):
    """The program (kept on disk with ``stored``: ``trainer`` was built from ``cfg``) and
    placement, then a fresh start (records created, evaluation at step 0)
    or the newest of the verified checkpoint ``steps`` that restores. Returns (session, state, first chunk, wall clock
    already spent, failed runs)."""
    from pgjax.loop.checkpoint import Checkpoints
    from pgjax.loop.loggers import make_sinks
    from pgjax.loop.records import RunRecords

    runs, root = cfg.runs(), Path(cfg.out) / cfg.name
    writer = jax.process_index() == 0
    place = Placement(len(runs), cfg.shard and not trainer.env.spec.host)
    train_keys, eval_keys = run_keys(runs)
    hps, train_keys, eval_keys = place.put((stack_hparams(runs), train_keys, eval_keys))
    fns = VmappedRuns(trainer, program_key(cfg, trainer, place) if stored else None)
    if place.num_devices == 1 and jax.process_count() == 1:  # ahead: unsharded inputs only
        fns.compile_ahead(train_keys, hps, eval_keys if cfg.eval_chunks else None)
    t0 = time.time()
    state = fns.init(train_keys, hps)
    ckpts, start, wall0, records = None, 0, 0.0, None
    if not resuming:
        shutil.rmtree(root / "checkpoint", ignore_errors=True)
    # restoring does not depend on --checkpoint-every (which says how often to save)
    if cfg.checkpoint_every or (resuming and steps):
        ckpts = Checkpoints(root / "checkpoint")
    failed_runs = _recorded_failures(root) if resuming else set()
    for step, verified in (steps if resuming else ()):
        try:
            restored, meta = ckpts.restore(step, state)
            if not verified and not _finite(restored, failed_runs):
                raise ValueError("it restores non-finite parameters for runs that had not "
                                 "failed: its files are damaged")
        except Exception as e:  # files that still do not restore: the next one
            why = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            warn(f"checkpoint {step} of {root} does not restore ({type(e).__name__}"
                 f"{': ' + why if why else ''}); trying an older one")
            continue
        state = restored
        ckpts.drop_after(step)  # newer steps were unusable; orbax would not save over them
        start, wall0 = int(meta["chunk"]), float(meta["wall_time_s"])
        state = fns.restored(state, train_keys, start)
        records = RunRecords.reopen(root, int(meta["iteration"])) if writer else None
        say(f"pgjax: resuming {root} from chunk {start}/{cfg.num_chunks}")
        break
    else:
        if resuming and steps:
            raise ConfigError(f"no checkpoint of {root} restores (each was tried and named "
                              f"above); pass --overwrite to train it again (the old run is set "
                              f"aside in {root.parent / '.trash'})")
    if not start:
        records = (RunRecords.create(cfg, runs, trainer.eval_env.spec.success) if writer
                   else None)
        ev = None
        if 0 in cfg.eval_chunks:
            ev = place.get(fns.evaluate(state, eval_keys_at(eval_keys, 0)))
        if writer:
            records.write_initial(0, 0, time.time() - t0, ev)
    if writer:
        records.sinks = make_sinks(cfg, records.run_dirs, root)
    run_ids = [d.name for d in records.run_dirs] if writer else \
        [str(i) for i in range(len(runs))]
    failed = dict(records.failed) if writer else {}
    if cfg.num_iterations * cfg.batch_size != cfg.steps and not start:
        say(f"pgjax: --steps {cfg.steps:,} rounded up to {cfg.num_iterations * cfg.batch_size:,} "
            f"(whole chunks of --eval-every {cfg.eval_every} updates of {cfg.batch_size:,} "
            f"steps)")
    say(f"pgjax: {cfg.algo} on {cfg.env} | {len(runs)} runs vmapped"
        f"{f' over {place.num_devices} devices' if place.num_devices > 1 else ''} | "
        f"{cfg.num_iterations} iterations x {cfg.batch_size} steps | records: {root}")
    uid = run_uid(root) if writer and jax.process_count() == 1 else None
    session = Session(cfg, root, fns, place, hps, eval_keys, records, ckpts, run_ids, say,
                      t0 - wall0, uid)
    return session, state, start, failed


def _finish(s: Session, failed: dict, strict: bool):
    if s.records is not None:
        s.records.finish()
        # a finished run is never resumed; its parameters are in params.msgpack
        shutil.rmtree(s.root / "checkpoint", ignore_errors=True)
    if strict and failed:
        raise_failures(failed)
    return s.records


def _preload_plotting() -> None:
    """Import what ``RunRecords.finish`` draws with (matplotlib: about 0.4 s), off the
    critical path."""
    try:
        import matplotlib.figure  # noqa: F401
        import pgjax.analysis.plots  # noqa: F401
    except Exception:  # the finish imports it again and reports any error itself
        pass


def _claimed(cfg: TrainConfig, trainer: Trainer, held, say, strict: bool, stored: bool):
    """``run`` in a run directory this process holds (``held``: a ``records.Claim``, None
    outside process 0)."""
    from pgjax.loop import records as run_records

    root = Path(cfg.out) / cfg.name
    found = run_records.inspect(root) if held is not None else None
    if held is not None and held.aside is not None:
        say(f"pgjax: the run {root} held is set aside in {held.aside} until this one "
            f"finishes")
    resuming = cfg.resume and (root / "config.json").exists()
    if resuming:
        if found is not None and found.state in ("damaged", "foreign"):
            raise ConfigError(found.reason)
        check_resumable(cfg, root)
        if found is not None and found.state == "finished":
            say(f"pgjax: {root} is already finished; nothing to resume")
            return run_records.RunRecords.read(root)
        if held is not None and jax.process_count() == 1 and _complete(cfg, root):
            # every row is there: only the finish is missing
            say(f"pgjax: {root} has every iteration recorded; marking it finished")
            records = run_records.RunRecords.read(root)
            records.finish()
            shutil.rmtree(root / "checkpoint", ignore_errors=True)
            _settle(held, records.failed, len(records.run_dirs))
            return records
    steps = _resume_plan(cfg, root) if resuming else []
    if resuming and not steps and held is not None:
        # killed before its first checkpoint: it starts over, and the partial
        # records are set aside until the new run finishes
        held.aside = run_records.set_aside(root)
        warn(f"{root} has no checkpoint to continue from; it starts over (its partial "
             f"records are kept in {held.aside} until the run finishes)")
        resuming = False
    if held is not None:  # the finish's plotting library, loaded while XLA compiles
        threading.Thread(target=_preload_plotting, daemon=True).start()
    session, state, start, failed = _start(cfg, trainer, say, resuming, steps, stored)
    failed = _train_chunks(session, state, start, failed)
    out = _finish(session, failed, strict=False)
    if held is not None:
        _settle(held, failed, len(session.run_ids))
    if strict and failed:
        raise_failures(failed)
    return out


def _settle(held, failed: dict, total: int) -> None:
    """The records a finished run replaced: removed, restored or kept (``Claim.settle``),
    with a warning saying which where they are not simply removed."""
    note = held.settle(len(failed), total)
    if note:
        warn(note)


def run(cfg: TrainConfig, log=None, trainer: Trainer | None = None, strict: bool = True):
    """Train every (seed, hyperparameter) run of ``cfg`` in one vmapped program, chunk by
    chunk, printing progress and writing records after each chunk, evaluating after the
    chunks ``cfg.eval_chunks`` names and checkpointing at most every ``checkpoint_seconds``.
    With ``cfg.resume`` it continues from the run directory's latest checkpoint.

    A run that fails (non-finite quantity, algorithm error) is recorded as failed and the
    others carry on; at the end ``strict`` raises ``TrainingError`` naming the failures.
    Returns the ``RunRecords`` of the run directory."""
    from pgjax.loop import records as run_records

    cfg = cfg.with_name()
    cfg.validate()
    check_float32(cfg)
    if cfg.distributed and not jax.distributed.is_initialized():
        initialize_distributed()
    say = (lambda *a: None) if cfg.quiet else (log or _print)
    # a trainer given may have been altered (its methods wrapped): never stored. Built
    # first: the environment id, backend, policy kind and rule are checked before the run
    # directory is created, locked or replaced
    stored, trainer = trainer is None, trainer or Trainer(cfg)
    try:
        check_memory(cfg, trainer.env, trainer.policy)
        held = run_records.claim(cfg) if jax.process_index() == 0 else None
        try:
            return _claimed(cfg, trainer, held, say, strict, stored)
        except BaseException as e:
            if isinstance(e, Exception) and not isinstance(e, (TrainingError, OSError)) \
                    and held is not None and held.discard_untrained():
                # failed while built or traced, before any update: the name stays free
                # the directory keeps only its lock file: a new directory to the next claim
                raise
            # a replaced run is never lost to a new one that failed, errored or was stopped
            note = held.restore("the new run did not finish" if isinstance(e, Exception)
                                else "the new run was stopped") if held is not None else None
            if isinstance(e, OSError) and not isinstance(e, BrokenPipeError):
                then = f"; {note}" if note else \
                    "; nothing was marked finished: once it is fixed, continue with --resume " \
                    "(a sweep: run it again)"
                raise StorageError(storage_message(e, then)) from None
            if note:
                warn(note)
            raise
        finally:
            if held is not None:
                held.release()
    finally:
        trainer.close()

