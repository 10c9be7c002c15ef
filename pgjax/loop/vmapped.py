"""The runs' programs (init, chunk, evaluation): stacked hyperparameters and keys, placement,
the vmapped entry points and their compilation ahead of the first call."""
from __future__ import annotations

import json
import threading
from concurrent.futures import Future

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.core.compile_cache import StoredProgram, program_dir, signature
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


def _single(fn):
    """``fn`` on a batch of exactly one run, without ``vmap``: drop the leading run axis of
    every input, add it back to every output."""
    def wrapped(*args):
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)
    return wrapped


def policy_part(state):
    """What an evaluation reads of a ``TrainState``: the parameters and the observation
    statistics (the rest set to None), so its program is the same for every update rule on
    the same environment and policy, and compiles once for a sweep of rules (the compilation
    cache's key is the program)."""
    return state.replace(algo_state=None, ret_stats=None, ret_acc=None, rollout=None,
                         reset_obs=None, key=None, iteration=None)


class VmappedRuns:
    """Jitted entry points over a batch of runs (leading run axis on every input and output),
    vmapped over the runs. A batch of one run calls the unbatched functions instead: same
    numbers, and a shorter compilation (batching a Brax simulator step over an extra axis
    adds about 2.5 s of compile time on the CPU). Each compiles once per batch size.

    The host loop's programs are init, the training chunk and the evaluation, compiled
    separately: one program holding both the chunk and the evaluation took longer to compile
    than the two apart (45.1 s against 21.9 + 19.4 s, Brax hopper at purejaxrl's settings,
    ``benchmarks/compile_profile.py``), and apart the evaluation is off the path to the
    first update. ``compile_ahead`` compiles the chunk and then the evaluation on a thread of
    their own while the caller initialises and then trains.

    With a ``program_key`` (what decides the trainer's functions: see ``program_key``) and
    the compilation cache on, each is a ``StoredProgram``: its traced program is kept on
    disk, so a rerun of the same configuration skips tracing and lowering."""

    AHEAD = ("chunk", "evaluate")  # in the order compile_ahead compiles them

    def __init__(self, trainer: Trainer, program_key: str | None = None):
        self.trainer = trainer
        directory = program_dir() if program_key is not None else None

        def both(name, fn, donate_argnums=()):
            fns = {"batched": jax.vmap(fn), "single": _single(fn)}
            if directory is None:
                return tuple(jax.jit(f, donate_argnums=donate_argnums) for f in fns.values())
            return tuple(StoredProgram(f, f"{program_key}|{name}|{kind}", directory,
                                       donate_argnums) for kind, f in fns.items())

        self._fns = {"init": both("init", trainer.init),
                     "chunk": both("chunk", trainer.chunk, donate_argnums=(0,)),
                     "evaluate": both("evaluate", trainer.evaluate),
                     "restart": both("restart", trainer.restart, donate_argnums=(0,))}
        self._ahead: dict[str, Future] = {}  # name -> (input signature, compiled function)

    def _pick(self, name, num_runs: int):
        batched, single = self._fns[name]
        return single if num_runs == 1 else batched

    def _call(self, name, *args):
        num_runs = jax.tree.leaves(args[0])[0].shape[0]
        ahead = self._ahead.get(name)
        if ahead is not None:
            sig, compiled = ahead.result()  # waits for it; raises what compiling raised
            if sig == signature(args):
                return compiled(*args)
        return self._pick(name, num_runs)(*args)

    def compile_ahead(self, keys, hps, eval_keys=None) -> None:
        """Trace and compile init here, and meanwhile trace and compile the chunk and then the
        evaluation (none without ``eval_keys``: a run that never evaluates) on a daemon
        thread: the chunk's tracing overlaps init's compilation, the
        evaluation's compilation overlaps the first chunks' training. Each call waits for
        its program; a program whose inputs turn out otherwise (another shape or type) is
        compiled on the call as before. What compiling raised is raised by the call that
        needs the program, or sooner by ``check_ahead``."""
        num_runs = jax.tree.leaves(keys)[0].shape[0]
        init = self._pick("init", num_runs)
        lowered = init.lower(keys, hps)
        state = (init.eval_shape(keys, hps) if isinstance(init, StoredProgram)
                 else jax.eval_shape(init, keys, hps))  # from the trace lower() made
        inputs = {"chunk": (state, hps), "evaluate": (policy_part(state), eval_keys)}
        names = [n for n in self.AHEAD if n != "evaluate" or eval_keys is not None]
        futures = {name: Future() for name in names}

        def work():
            for name in names:
                try:
                    fn = self._pick(name, num_runs).lower(*inputs[name]).compile()
                    futures[name].set_result((signature(inputs[name]), fn))
                except BaseException as e:  # noqa: BLE001 (raised where it is needed)
                    futures[name].set_exception(e)

        self._ahead.update(futures)
        threading.Thread(target=work, name="pgjax-compile", daemon=True).start()
        self._ahead["init"] = Future()
        self._ahead["init"].set_result((signature((keys, hps)), lowered.compile()))

    def check_ahead(self) -> None:
        """Raise what compiling a program ahead raised, once it has (a fault in the
        evaluation surfaces after the first chunk, not after the last)."""
        for future in self._ahead.values():
            if future.done() and future.exception() is not None:
                raise future.exception()

    def init(self, keys, hps):
        return self._call("init", keys, hps)

    def chunk(self, state, hps, keys, evaluate: bool):
        """A chunk of every run, then (``evaluate``) the evaluation of the state it ends in,
        with per-run ``keys``: (state, metrics, eval metrics or None). Both are dispatched
        without waiting for either."""
        state, metrics = self._call("chunk", state, hps)
        return state, metrics, (self.evaluate(state, keys) if evaluate else None)

    def evaluate(self, state, keys):
        return self._call("evaluate", policy_part(state), keys)

    def restored(self, state, keys, chunk: int):
        """After restoring a checkpoint. A JAX environment's state is part of the checkpoint:
        nothing to do. A host (Gymnasium) environment's is not, so every env starts a new
        episode, seeded from the run's key and the chunk index."""
        if not self.trainer.env.spec.host:
            return state
        keys = jax.vmap(jax.random.fold_in, (0, None))(keys, 1000 + chunk)
        return self._call("restart", state, keys)

    def compiled(self) -> dict[str, int]:
        """How many programs each entry point has compiled: ahead and on calls (for tests:
        each should be one per batch size)."""
        out = {}
        for name, fns in self._fns.items():
            count = sum(f._cache_size() for f in fns if hasattr(f, "_cache_size"))
            future = self._ahead.get(name)
            out[name] = count + int(future is not None and future.done()
                                    and future.exception() is None)
        return out


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

