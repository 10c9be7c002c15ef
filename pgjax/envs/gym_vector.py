"""Gymnasium vector environments on the host: spaces, sync/async vector envs, worker processes."""
from __future__ import annotations

import contextlib
import dataclasses
import math
import sys
import types

import numpy as np

from pgjax.envs.core import ActionSpace
from pgjax.core.errors import ConfigError
from pgjax.core.registry import load_plugins


def _gym():
    import gymnasium

    return gymnasium


def _space_name(space) -> str:
    return f"{type(space).__name__} {space}"


class _ObsCodec:
    """Turn a Gymnasium observation batch into a float32 array [n, *obs_shape]."""

    def __init__(self, env_id: str, space):
        spaces = _gym().spaces
        if isinstance(space, spaces.Box) and len(space.shape) >= 2 and space.dtype == np.uint8:
            raise ConfigError(
                f"gym:{env_id} has image observations ({_space_name(space)}); pgjax's policy "
                f"kinds take flat vectors: register a wrapped env id with vector observations "
                f"(e.g. its state) and train on that id")
        if isinstance(space, spaces.Dict):
            raise ConfigError(
                f"gym:{env_id} has dict observations (keys {', '.join(space.spaces)}); pgjax's "
                f"policies read one array: register a wrapped env id that flattens them "
                f"(gymnasium.wrappers.FlattenObservation, in its key order) and train on that id")
        if isinstance(space, spaces.Box):
            self.kind, self.shape = "box", (int(math.prod(space.shape)),)
        elif isinstance(space, spaces.Discrete):
            self.kind, self.shape, self.start = "discrete", (int(space.n),), int(space.start)
        else:
            raise ConfigError(
                f"gym:{env_id} has observation space {_space_name(space)}, which pgjax does not "
                f"handle (Box and Discrete only); register a wrapped env id that flattens it "
                f"(e.g. gymnasium.wrappers.FlattenObservation) and train on that id")

    def __call__(self, obs) -> np.ndarray:
        obs = np.asarray(obs)
        if self.kind == "discrete":
            return np.eye(self.shape[0], dtype=np.float32)[obs.astype(np.int64) - self.start]
        return obs.reshape((obs.shape[0],) + self.shape).astype(np.float32)


def _action_space(env_id: str, space) -> tuple[ActionSpace, object]:
    spaces = _gym().spaces
    if isinstance(space, spaces.Box) and len(space.shape) == 1:
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        return ActionSpace("box", int(space.shape[0]), float(low.min()), float(high.max())), \
            (low, high)
    if isinstance(space, spaces.Discrete):
        return ActionSpace("discrete", int(space.n)), int(space.start)
    raise ConfigError(
        f"gym:{env_id} has action space {_space_name(space)}, which pgjax does not handle "
        f"(a 1-D Box or a Discrete space only); pick an environment with one of those or "
        f"register a wrapper that converts its actions")


def _make_one(env_id: str, max_episode_steps: int, kwargs: tuple = ()):
    return _gym().make(env_id, max_episode_steps=max_episode_steps, disable_env_checker=True,
                       **dict(kwargs))


@dataclasses.dataclass(frozen=True)
class HostSpec:
    """What stepping a block of Gymnasium environments needs, picklable so that a worker
    process can build its own block: the id, the time limit, the observation codec and the
    action conversion."""

    env_id: str
    max_steps: int
    obs: _ObsCodec
    action_kind: str
    bounds: object  # (low, high) for a Box, the start of a Discrete
    plugins: tuple = ()  # loaded before the env is made (ids a plugin registers)
    kwargs: tuple = ()  # (name, value) pairs for gymnasium.make, from --gym.kwargs

    def make(self):
        return _make_one(self.env_id, self.max_steps, self.kwargs)

    def action(self, a: np.ndarray) -> np.ndarray:
        if self.action_kind == "box":
            return np.clip(a, *self.bounds)
        return a.astype(np.int64) + self.bounds


class HostVectorEnv:
    """A Gymnasium vector environment in same-step autoreset mode, with pgjax's step output:
    (obs, reward, terminated, truncated, final_obs, episode_return, episode_length), each a
    numpy array with leading dimension n. Keeps episode statistics itself.

    ``vectorization``: ``sync`` (every env in this process) or ``async`` (Gymnasium's
    ``AsyncVectorEnv``, one process per env)."""

    def __init__(self, spec: HostSpec, n: int, vectorization: str = "sync"):
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

        self.spec, self.n = spec, n
        fns = [spec.make] * n
        if vectorization == "async":
            with _script_hidden():
                self.venv = AsyncVectorEnv(fns, context="spawn",
                                           autoreset_mode=AutoresetMode.SAME_STEP)
        else:
            self.venv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        self.ep_return = np.zeros(n, np.float64)
        self.ep_length = np.zeros(n, np.int64)

    def reset(self, seeds) -> np.ndarray:
        """Reset every environment with its own integer seed; returns obs [n, *obs]."""
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.n:
            raise ValueError(f"need {self.n} seeds, got {len(seeds)}")
        obs, _ = self.venv.reset(seed=seeds)
        self.ep_return[:] = 0.0
        self.ep_length[:] = 0
        return self.spec.obs(obs)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = self.venv.step(
            self.spec.action(np.asarray(action)))
        terminated = np.asarray(terminated, bool)
        # An episode that terminates on its last allowed step is terminal, not truncated
        # (Gymnasium's TimeLimit reports both): it must not bootstrap.
        truncated = np.asarray(truncated, bool) & ~terminated
        done = terminated | truncated
        obs = self.spec.obs(obs)
        final_obs = obs
        if done.any():
            final_obs = obs.copy()
            idx = np.flatnonzero(done)
            final_obs[idx] = self.spec.obs(np.stack([info["final_obs"][i] for i in idx]))
        reward = np.asarray(reward, np.float64)
        self.ep_return += reward
        self.ep_length += 1
        ep_return = np.where(done, self.ep_return, 0.0).astype(np.float32)
        ep_length = np.where(done, self.ep_length, 0).astype(np.int32)
        self.ep_return[done] = 0.0
        self.ep_length[done] = 0
        return (obs, reward.astype(np.float32), terminated, truncated, final_obs, ep_return,
                ep_length)

    def close(self):
        self.venv.close()


# The step's outputs as (dtype, trailing shape) given the observation size; the order of
# HostVectorEnv.step's tuple
def _out_layout(obs_shape):
    return ((np.float32, obs_shape), (np.float32, ()), (np.bool_, ()), (np.bool_, ()),
            (np.float32, obs_shape), (np.float32, ()), (np.int32, ()))


def _shared(ctx, n, dtype, shape):
    """A numpy array [n, *shape] over shared memory that spawned processes can map."""
    dtype = np.dtype(dtype)
    raw = ctx.RawArray("b", max(1, n * int(np.prod(shape, dtype=int)) * dtype.itemsize))
    return raw, dtype, (n,) + tuple(shape)


def _view(block):
    raw, dtype, shape = block
    return np.frombuffer(raw, dtype, int(np.prod(shape))).reshape(shape)


def _worker(spec: HostSpec, lo: int, hi: int, action_block, out_blocks, conn):
    """A worker process: steps envs [lo, hi) of the pool with a sync vector env, reading their
    actions from and writing their step outputs into the shared arrays."""
    import traceback

    try:
        load_plugins(spec.plugins)
        venv = HostVectorEnv(spec, hi - lo)
        actions, outs = _view(action_block), [_view(b) for b in out_blocks]
        while True:
            cmd, arg = conn.recv()
            if cmd == "step":
                for out, x in zip(outs, venv.step(actions[lo:hi])):
                    out[lo:hi] = x
            elif cmd == "reset":
                outs[0][lo:hi] = venv.reset(arg)
            elif cmd == "close":
                venv.close()
                conn.send(("ok", None))
                return
            conn.send(("ok", None))
    except KeyboardInterrupt:
        return
    except BaseException:  # the parent raises it with the worker's traceback
        conn.send(("error", traceback.format_exc()))


@contextlib.contextmanager
def _script_hidden():
    """Start processes without the user's script: a spawned process imports the parent's
    ``__main__`` from its file, which runs a script's unguarded top level (its training run)
    once more in every worker. The workers' code is all in pgjax, so they need none of it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class WorkerVectorEnv:
    """``HostVectorEnv``'s interface over ``workers`` processes, each stepping a contiguous
    block of the n environments in its own sync vector env, with actions and step outputs in
    shared memory: one round trip per worker per step, whatever the number of envs. Every
    env is the same env with the same seed as in a sync vector env, so the results are
    identical; only the work is spread over the cores."""

    def __init__(self, spec: HostSpec, n: int, workers: int):
        import multiprocessing as mp

        self.spec, self.n = spec, n
        ctx = mp.get_context("spawn")
        workers = max(1, min(workers, n))
        edges = np.linspace(0, n, workers + 1).round().astype(int)
        self.blocks = list(zip(edges[:-1], edges[1:]))
        a_dtype, a_shape = ((np.float32, spec.bounds[0].shape) if spec.action_kind == "box"
                            else (np.int32, ()))
        self._action_block = _shared(ctx, n, a_dtype, a_shape)
        self._out_blocks = [_shared(ctx, n, d, s) for d, s in _out_layout(spec.obs.shape)]
        self._actions = _view(self._action_block)
        self._outs = [_view(b) for b in self._out_blocks]
        self.conns, self.procs = [], []
        with _script_hidden():
            self._start(ctx)

    def _start(self, ctx):
        for lo, hi in self.blocks:
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker, daemon=True, name=f"pgjax-gym-{lo}-{hi}",
                               args=(self.spec, int(lo), int(hi), self._action_block,
                                     self._out_blocks, child))
            proc.start()
            child.close()
            self.conns.append(parent)
            self.procs.append(proc)

    def _all(self, messages):
        for conn, message in zip(self.conns, messages):
            conn.send(message)
        for conn, proc in zip(self.conns, self.procs):
            try:
                status, detail = conn.recv()
            except EOFError:
                raise RuntimeError(f"gym:{self.spec.env_id}: worker process {proc.name} exited "
                                   f"(code {proc.exitcode}); rerun with --gym.vectorization "
                                   f"sync to see the environment's error here") from None
            if status == "error":
                hint = ""
                if "NameNotFound" in detail or "not found" in detail:
                    hint = (" (a worker process knows the ids that Gymnasium and installed "
                            "packages register, and those a --plugins file registers; register "
                            "yours in a plugin, or pass --gym.vectorization sync)")
                raise RuntimeError(f"gym:{self.spec.env_id}: worker process {proc.name} "
                                   f"failed{hint}:\n{detail}")

    def reset(self, seeds) -> np.ndarray:
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.n:
            raise ValueError(f"need {self.n} seeds, got {len(seeds)}")
        self._all([("reset", seeds[lo:hi]) for lo, hi in self.blocks])
        return self._outs[0].copy()

    def step(self, action: np.ndarray):
        self._actions[...] = np.asarray(action).reshape(self._actions.shape)
        self._all([("step", None)] * len(self.blocks))
        return tuple(out.copy() for out in self._outs)

    def close(self):
        for conn in self.conns:
            try:
                conn.send(("close", None))
                conn.recv()
            except (OSError, EOFError):
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self.conns, self.procs = [], []
