"""The host loop: every (seed, hyperparameter) run of a config trained in one vmapped program,
chunk by chunk, with progress lines, evaluation, crash-safe records and checkpoints.

``run(cfg)`` is three steps: ``_start`` (the program, placement, keys, and either a fresh
start or a restore from the latest checkpoint), ``_train_chunks`` (the chunk loop: train and,
at the chunks ``cfg.eval_chunks`` names, evaluate in the same program; find failed runs,
write records, checkpoint at most every ``checkpoint_seconds``) and ``_finish`` (final records, the
error for failed runs).
"""
from __future__ import annotations

import dataclasses

import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.compile_cache import StoredProgram, program_dir
from pgjax.config import TrainConfig
from pgjax.errors import ConfigError, StorageError, TrainingError
from pgjax.evaluation import MODES, TRAIN_RETURN
from pgjax.files import as_os_error, storage_message
from pgjax import plugin_files
from pgjax.train import Trainer, check_memory


def check_float32(cfg: TrainConfig) -> None:
    """Every traced hyperparameter (the option or each of its --grid values) is a number the
    compiled program's float32 holds: 1e39 would train as inf under a label saying 1e39."""
    grid = {k: [v] for k, v in cfg.base_hparams().items()} | cfg.parse_grid()
    limit = float(np.finfo(np.float32).max)
    for key, values in grid.items():
        for v in values:
            if not -limit <= float(v) <= limit:
                flag = f"--grid {key}=..." if len(values) > 1 or any(
                    g.split("=")[0].strip() == key for g in cfg.grid) else f"--{key}"
                raise ConfigError(f"{key} = {v!r} is beyond what a float32 holds (the compiled "
                                  f"program's type: at most {limit:.4g}); pass a smaller "
                                  f"{flag.replace('_', '-')}")


def stack_hparams(runs) -> dict[str, jax.Array]:
    keys = runs[0][1].keys()
    return {k: jnp.asarray([hp[k] for _, hp in runs], jnp.float32) for k in keys}


def run_keys(runs):
    """Per-run (train key, eval key) from the seed alone, so a run is reproducible no matter
    which other runs share its program."""
    base = jnp.stack([jax.random.PRNGKey(seed) for seed, _ in runs])
    return jax.vmap(lambda k: jax.random.fold_in(k, 0))(base), \
        jax.vmap(lambda k: jax.random.fold_in(k, 1))(base)


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


class Placement:
    """Where the runs live: with several devices (and ``shard``), the leading run axis of
    every input is sharded over a 1-D mesh of all devices (padded with copies of the last
    run to a multiple of the device count; the copies are computed and dropped). Arrays are
    built with ``make_array_from_callback`` and fetched with ``process_allgather``, so the same
    code runs multi-host after ``jax.distributed.initialize()``."""

    def __init__(self, num_runs: int, shard: bool):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        devices = jax.devices()
        self.num_runs = num_runs
        self.num_devices = len(devices) if shard else 1
        self.padded = -(-num_runs // self.num_devices) * self.num_devices
        self.sharding = None
        if self.num_devices > 1:
            mesh = Mesh(np.asarray(devices), ("runs",))
            self.sharding = NamedSharding(mesh, PartitionSpec("runs"))

    def put(self, tree):
        """Pad the leading run axis and place it (sharded when there are several devices)."""
        def one(x):
            x = np.asarray(x)
            if self.padded > x.shape[0]:
                x = np.concatenate([x, np.repeat(x[-1:], self.padded - x.shape[0], 0)])
            if self.sharding is None:
                return jnp.asarray(x)
            return jax.make_array_from_callback(x.shape, self.sharding, lambda idx: x[idx])
        return jax.tree.map(one, tree)

    def get(self, tree):
        """Fetch to host numpy, without the padding runs."""
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            tree = multihost_utils.process_allgather(tree, tiled=True)
        return jax.tree.map(lambda x: np.asarray(x)[: self.num_runs], jax.device_get(tree))


def _single(fn, shared: int = 0):
    """``fn`` on a batch of exactly one run, without ``vmap``: drop the leading run axis of
    every input but the last ``shared`` (one value for every run), add it back to every
    output."""
    def wrapped(*args):
        cut = len(args) - shared
        out = fn(*jax.tree.map(lambda x: x[0], args[:cut]), *args[cut:])
        return jax.tree.map(lambda x: x[None], out)
    return wrapped


class VmappedRuns:
    """Jitted entry points over a batch of runs (leading run axis on every input and output),
    vmapped over the runs. A batch of one run calls the unbatched functions instead: same
    numbers, and a shorter compilation (batching a Brax simulator step over an extra axis
    adds about 2.5 s of compile time on the CPU). Each compiles once per batch size.

    With a ``program_key`` (what decides the trainer's functions: see ``program_key``) and
    the compilation cache on, each is a ``StoredProgram``: its traced program is kept on
    disk, so a rerun of the same configuration skips tracing and lowering."""

    def __init__(self, trainer: Trainer, program_key: str | None = None):
        self.trainer = trainer
        directory = program_dir() if program_key is not None else None

        def both(name, fn, in_axes=0, donate_argnums=()):  # in_axes None: one value for all
            shared = sum(a is None for a in in_axes) if isinstance(in_axes, tuple) else 0
            fns = {"batched": jax.vmap(fn, in_axes=in_axes), "single": _single(fn, shared)}
            if directory is None:
                return tuple(jax.jit(f, donate_argnums=donate_argnums) for f in fns.values())
            return tuple(StoredProgram(f, f"{program_key}|{name}|{kind}", directory,
                                       donate_argnums) for kind, f in fns.items())

        self._fns = {"init": both("init", trainer.init),
                     "chunk": both("chunk", trainer.chunk_evaluated, (0, 0, 0, None, None),
                                   donate_argnums=(0,)),
                     "evaluate": both("evaluate", trainer.evaluate),
                     "restart": both("restart", trainer.restart, donate_argnums=(0,))}

    def _call(self, name, *args):
        batched, single = self._fns[name]
        return (single if jax.tree.leaves(args[0])[0].shape[0] == 1 else batched)(*args)

    def init(self, keys, hps):
        return self._call("init", keys, hps)

    def chunk(self, state, hps, keys, evaluate: bool, train: bool = True):
        """A chunk of every run (``train``; else the state as it is), then (``evaluate``) the
        evaluation with per-run ``keys``: (state, metrics, eval metrics), NaN for what did
        not run. The same compiled program for every combination."""
        return self._call("chunk", state, hps, keys, jnp.asarray(evaluate), jnp.asarray(train))

    def evaluate(self, state, keys):
        return self._call("evaluate", state, keys)

    def restored(self, state, keys, chunk: int):
        """After restoring a checkpoint. A JAX environment's state is part of the checkpoint:
        nothing to do. A host (Gymnasium) environment's is not, so every env starts a new
        episode, seeded from the run's key and the chunk index."""
        if not self.trainer.env.spec.host:
            return state
        keys = jax.vmap(jax.random.fold_in, (0, None))(keys, 1000 + chunk)
        return self._call("restart", state, keys)


RESUME_IGNORED = ("resume", "overwrite", "quiet", "label", "name", "out", "tensorboard", "wandb", "wandb_project",
                  "distributed", "shard", "checkpoint_every", "checkpoint_seconds")


# options that change nothing in the compiled functions (besides RESUME_IGNORED): where the
# records go, which chunks evaluate, and the seeds (the run keys are inputs)
PROGRAM_IGNORED = (*RESUME_IGNORED, "name", "out", "evals", "seed")


def program_key(cfg: TrainConfig, trainer: Trainer, place: Placement) -> str | None:
    """The key under which the functions of a trainer that ``run`` built from ``cfg`` are
    stored (``StoredProgram``): the config without what only the host loop reads; None where
    storing is not sound or not possible: a plugin rule (its code is not in the key), host
    environments (their callbacks do not export), and runs sharded over several devices or
    processes."""
    from pgjax.algos import BUILTIN

    if (program_dir() is None or cfg.plugins
            or cfg.rule not in BUILTIN or trainer.env.spec.host or place.num_devices > 1
            or jax.process_count() > 1):
        return None
    d = {k: v for k, v in cfg.to_dict().items() if k not in PROGRAM_IGNORED}
    return json.dumps(d, sort_keys=True, default=str)


def config_differences(cfg: TrainConfig, saved, where) -> list[str]:
    """How ``cfg`` differs from a recorded config (``saved``: a ``"config"`` entry as
    ``to_dict`` wrote it; ``where``: the file it was read from), in what a resume must
    match: ``["ppo.lr (0.0003 recorded, 0.001 now)", ...]``, empty when it matches. A record
    that does not read back as a config is a one-line ``ConfigError``."""
    now = json.loads(json.dumps(cfg.to_dict(), default=str))
    # options whose spelling may differ while their effect is the same (a record written
    # before the option existed, ``auto``) are compared by what they resolve to
    from pgjax.config import LEGACY

    fix = "restore it from a copy, or pass --overwrite (a sweep: another --name)"
    if not isinstance(saved, dict):
        raise ConfigError(f"{where} is damaged (its config is not a table); {fix}")
    try:
        then = TrainConfig.from_record({**LEGACY, **saved}, plugins=cfg.plugins)
    except ConfigError as e:
        raise ConfigError(f"{where} is damaged ({e})".split("; ")[0] + f"; {fix}") from None
    except Exception as e:  # a hand-edited value of the wrong type
        raise ConfigError(f"{where} is damaged ({type(e).__name__} reading its config); "
                          f"{fix}") from None
    # the record read back as a config: an option added since reads as the recorded
    # behaviour (its default, or its LEGACY value)
    saved = json.loads(json.dumps(then.to_dict(), default=str))
    resolved = {"eval_mode": then.eval_modes == cfg.eval_modes,
                "anneal_steps": then.anneal_iterations == cfg.anneal_iterations}
    for f in dataclasses.fields(TrainConfig):  # how an env is stepped changes no result
        for field in getattr(f.default, "SPEED_ONLY", ()):
            for d in (saved, now):
                if isinstance(d.get(f.name), dict):
                    d[f.name].pop(field, None)
    diff = []
    for k in sorted(set(saved) | set(now)):
        if k in RESUME_IGNORED or k == "plugins" or resolved.get(k, saved.get(k) == now.get(k)):
            continue
        a, b = saved.get(k), now.get(k)
        if isinstance(a, dict) and isinstance(b, dict):  # a rule's options: name the field
            diff += [f"{k}.{f} ({a.get(f)!r} recorded, {b.get(f)!r} now)"
                     for f in sorted(set(a) | set(b)) if a.get(f) != b.get(f)]
        else:
            diff.append(f"{k} ({a!r} recorded, {b!r} now)")
    if any(d.startswith("anneal_steps") for d in diff):
        diff.append(f"(the recorded schedule spans {then.anneal_iterations} updates: "
                    f"--anneal-steps {then.anneal_iterations * then.batch_size} gives it)")
    return diff


def check_resumable(cfg: TrainConfig, root) -> None:
    from pgjax.records import check_records, read_json

    saved = read_json(root / "config.json", "the run's config.json").get("config", {})
    check_records(root)
    diff = config_differences(cfg, saved, root / "config.json")
    # plugins are compared by content: the paths differ when resumed from another folder
    plugin_files.check_same(root, read_json(root / "config.json", "the run's config.json"),
                            cfg.plugins)
    if diff:
        raise ConfigError(f"cannot resume {root}: its config differs in {', '.join(diff)}; "
                          f"resume with the same options, or pick a new --name")


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


def warn(message: str) -> None:
    """A warning on stderr, shown even with --quiet."""
    print(f"pgjax: warning: {message}", file=sys.stderr, flush=True)


def _resume_plan(cfg: TrainConfig, root: Path) -> list[tuple[int, bool]]:
    """The checkpoint steps a resume may restore (with whether each is verified), in order, chosen from the files alone
    before anything compiles: checksum-verified ones, then (with a warning) ones without a
    checksum to verify; damaged ones are named and skipped; a checkpoint is usable only if
    every run's metrics reach it (the records are cut back to it, never forward). A
    directory with training recorded but nothing usable to continue from is refused with
    one line (never retrained over its records)."""
    from pgjax.checkpoint import verified_steps
    from pgjax.records import read_json, recorded_rows, run_status

    found = verified_steps(root / "checkpoint")
    rows = recorded_rows(root)
    record = read_json(root / "config.json", "the run's config.json")
    failed_at = {r["id"]: st.get("update", 0) for r in record["runs"]
                 if (st := run_status(root / "runs" / r["id"])) is not None}

    def reaches(step: int) -> bool:
        upto = step * cfg.iterations_per_chunk
        return all(rows[i] >= upto + 1 or failed_at.get(i, upto + 1) <= upto for i in rows)

    skipped = dict(found.damaged)  # step -> why it is not used
    uid = record.get("uid")
    for step in found.good + list(found.unverified):
        owner = _checkpoint_owner(root / "checkpoint" / str(step)) if uid else uid
        if owner != uid:  # copied in from another run directory
            skipped[step] = (f"it was saved by another run ({owner or 'unnamed'}, this run is "
                             f"{uid})")
        elif not reaches(step):
            skipped[step] = (f"ahead of its metrics: a run has {min(rows.values())} rows, the "
                             f"checkpoint is at iteration {step * cfg.iterations_per_chunk}")
    steps = [s for s in found.good + list(found.unverified) if s not in skipped]
    if not steps and skipped and max(rows.values(), default=0) > 1:
        step, why = max(skipped.items())
        every = "every checkpoint" if len(skipped) > 1 else "the checkpoint"
        raise ConfigError(f"{every} of {root} is damaged or unusable (checkpoint {step}: "
                          f"{why}); pass --overwrite to train it again (the old run is set "
                          f"aside in {root.parent / '.trash'})")
    for step, why in sorted(skipped.items(), reverse=True):
        warn(f"checkpoint {step} of {root} is {'damaged' if step in found.damaged else 'unusable'}"
             f" ({why}); resuming from an older one")
    for step, why in found.unverified.items():
        if step in steps:
            warn(f"checkpoint {step} of {root} cannot be verified ({why}); used only where no "
                 f"verified one is, and checked for non-finite values")
    return [(step, step in found.good) for step in steps]


def run_uid(root: Path) -> str | None:
    """The identity a run directory's config.json records (``uid``; None in records written
    before it existed)."""
    from pgjax.records import read_json

    uid = read_json(root / "config.json", "the run's config.json").get("uid")
    return uid if isinstance(uid, str) else None


def _checkpoint_owner(step_dir: Path) -> str | None:
    """The run a checkpoint step was saved by (its meta's ``run``), or None."""
    try:
        meta = json.loads((step_dir / "meta" / "metadata").read_text())
    except (OSError, ValueError):
        return None
    return meta.get("run") if isinstance(meta, dict) else None


def _complete(cfg: TrainConfig, root: Path) -> bool:
    """Whether every run's metrics hold every iteration (or end at its recorded failure)."""
    from pgjax.records import read_json, recorded_rows, run_status

    rows = recorded_rows(root)
    record = read_json(root / "config.json", "the run's config.json")
    return all(rows[r["id"]] == cfg.num_iterations + 1
               or run_status(root / "runs" / r["id"]) is not None for r in record["runs"])


def _recorded_failures(root: Path) -> set:
    """Indices of the runs whose own status.json records a failure."""
    from pgjax.records import read_json, run_status

    record = read_json(root / "config.json", "the run's config.json")
    return {i for i, r in enumerate(record["runs"])
            if run_status(root / "runs" / r["id"]) is not None}


def _finite(state, failed: set) -> bool:
    """Whether the restored parameters and statistics of every run not recorded as failed
    are finite (a failed run's may be NaN: it kept training inside the vmap). With several
    processes every array is not addressable here: taken as finite."""
    if jax.process_count() > 1:
        return True
    for x in jax.tree.leaves((state.params, state.obs_stats)):
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.floating):
            keep = [i for i in range(x.shape[0]) if i not in failed]
            if not np.all(np.isfinite(x[keep])):
                return False
    return True


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


eval_keys_at = jax.jit(jax.vmap(jax.random.fold_in, (0, None)))  # (run keys, chunk index)


def _start(cfg: TrainConfig, trainer: Trainer, say, resuming: bool, steps=(),
           stored: bool = False):
    """The program (kept on disk with ``stored``: ``trainer`` was built from ``cfg``) and
    placement, then a fresh start (records created, evaluation at step 0)
    or the newest of the verified checkpoint ``steps`` that restores. Returns (session, state, first chunk, wall clock
    already spent, failed runs)."""
    from pgjax.checkpoint import Checkpoints
    from pgjax.loggers import make_sinks
    from pgjax.records import RunRecords

    runs, root = cfg.runs(), Path(cfg.out) / cfg.name
    writer = jax.process_index() == 0
    place = Placement(len(runs), cfg.shard and not trainer.env.spec.host)
    train_keys, eval_keys = run_keys(runs)
    hps, train_keys, eval_keys = place.put((stack_hparams(runs), train_keys, eval_keys))
    fns = VmappedRuns(trainer, program_key(cfg, trainer, place) if stored else None)
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
        records = RunRecords.create(cfg, runs) if writer else None
        ev = None
        if 0 in cfg.eval_chunks:  # the training program itself, its chunk switched off
            state, _, ev = fns.chunk(state, hps, eval_keys_at(eval_keys, 0), True, False)
            ev = place.get(ev)
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
        import pgjax.plots  # noqa: F401
    except Exception:  # the finish imports it again and reports any error itself
        pass


def raise_failures(failed: dict):
    """``TrainingError`` naming the first failed run (and how many more failed)."""
    first = failed[min(failed)]
    more = f" ({len(failed) - 1} more failed runs, see status.json)" if len(failed) > 1 else ""
    raise TrainingError(first + more)


def _claimed(cfg: TrainConfig, trainer: Trainer, held, say, strict: bool, stored: bool):
    """``run`` in a run directory this process holds (``held``: a ``records.Claim``, None
    outside process 0)."""
    from pgjax import records as run_records

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
    from pgjax import records as run_records

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
