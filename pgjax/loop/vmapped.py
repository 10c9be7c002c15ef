"""The runs' one program: their stacked hyperparameters and keys, placement, entry points."""
from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.core.compile_cache import StoredProgram, program_dir
from pgjax.training.config import TrainConfig
from pgjax.core.errors import ConfigError
from pgjax.loop.resume import RESUME_IGNORED
from pgjax.training.train import Trainer


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


eval_keys_at = jax.jit(jax.vmap(jax.random.fold_in, (0, None)))  # (run keys, chunk index)


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


# options that change nothing in the compiled functions (besides RESUME_IGNORED): where the
# records go, which chunks evaluate, and the seeds (the run keys are inputs)
PROGRAM_IGNORED = (*RESUME_IGNORED, "name", "out", "evals", "seed")


def program_key(cfg: TrainConfig, trainer: Trainer, place: Placement) -> str | None:
    """The key under which the functions of a trainer that ``run`` built from ``cfg`` are
    stored (``StoredProgram``): the config without what only the host loop reads; None where
    storing is not sound or not possible: a plugin rule (its code is not in the key), host
    environments (their callbacks do not export), and runs sharded over several devices or
    processes."""
    from pgjax.algos import ALGORITHMS

    if (program_dir() is None or cfg.plugins
            or not ALGORITHMS.builtin(cfg.rule) or trainer.env.spec.host or place.num_devices > 1
            or jax.process_count() > 1):
        return None
    d = {k: v for k, v in cfg.to_dict().items() if k not in PROGRAM_IGNORED}
    return json.dumps(d, sort_keys=True, default=str)

