"""Gymnasium environments, stepped on the host.

``gym:<EnvId>`` builds any registered Gymnasium environment (classic control, MuJoCo v5,
Box2D, third-party registrations). The environments run on the host (``--gym.vectorization``:
``sync``, a Gymnasium vector environment in this process; ``workers``, blocks of them in one
worker process per core, ``WorkerVectorEnv``; ``async``, Gymnasium's process per env;
``auto`` picks sync or workers by the number of envs), behind the same
pure ``reset(key)`` / ``step(state, action)`` protocol as the JAX environments: each call is
a host callback from inside the compiled program (``host_call``), so the trainer's rollout,
evaluation and update are the JAX path's, and only the stepping happens on the host. Under
``vmap`` over runs one callback steps every run's block of environments at once (run r owns
block r of one vector environment), so R vmapped runs cost one host call per step.

Autoreset: the vector environment runs in Gymnasium's *same-step* mode. When an episode ends
at step t, the step returns the reset observation, and the real last observation comes back
in ``info["final_obs"]``; so there is no separate reset step (the step that, in Gymnasium's
default next-step mode, ignores the action and returns only a reset observation) and every
recorded transition is a real one. ``terminated`` and ``truncated`` stay apart; truncated
episodes bootstrap from the real final observation.

Spaces: Box observations (flattened to one vector; image Boxes, uint8 with two or more axes,
and Dict spaces are refused with the keys) and Discrete observations (one-hot);
Box actions (the Gaussian policy's samples are clipped to the bounds before the env sees them;
the unclipped sample is what is trained on) and Discrete actions. Any other space gets a
``ConfigError`` naming it.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import math
import os
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.envs.core import ActionSpace, EnvSpec, TimeStep
from pgjax.errors import ConfigError, check_choice
from pgjax.registry import LOADED_PLUGINS, load_plugins

VECTORIZATION = ("auto", "sync", "workers", "async")
# auto: below this many envs per core, stepping them in this process is faster than a round
# trip to worker processes (benchmarks/gym_host_loop.py --ceiling)
AUTO_MIN_ENVS_PER_WORKER = 16


# gymnasium.make's own arguments, which pgjax sets: where a user says what they want instead
_MAKE_OWN = {"max_episode_steps": "pass --episode-length",
             "disable_env_checker": "it is always off",
             "render_mode": "pgjax render sets it",
             "width": "pgjax render --width sets it", "height": "pgjax render --height sets it"}
MAX_KWARGS_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """Settings of the gym: family (--gym.<field>)."""

    vectorization: str = "auto"
    """How the envs are stepped: sync (all in this process), workers (--gym.workers processes,
    each stepping a block of envs), async (Gymnasium's AsyncVectorEnv, a process per env), or
    auto (workers when every worker gets at least 16 envs and the env id can be made in a
    fresh process, else sync). Results are the same either way."""

    workers: int = 0
    """Worker processes for vectorization workers/auto (0: one per CPU core)."""

    kwargs: str = ""
    """Keyword arguments for gymnasium.make, written as in a call with Python literals (e.g.
    'include_cfrc_ext_in_observation=False, ctrl_cost_weight=0.05'): the task's own options.
    They change the task, so a run records them (in one spelling: name=repr(value), in the
    order given) and resumes only under the same ones."""

    # fields that change how fast the envs are stepped, never a result: a run resumes
    # under other values
    SPEED_ONLY = ("vectorization", "workers")
    # fields that change the task itself: references and published figures are for the
    # task without them (pgjax.envs.task_options)
    TASK = ("kwargs",)

    def __post_init__(self):
        # one spelling per set of options ('a = 1' is 'a=1'), so that records and resumes
        # compare what is passed, not how it was typed; what does not parse is left for
        # validate to refuse
        try:
            kwargs = self.make_kwargs()
        except ConfigError:
            return
        object.__setattr__(self, "kwargs", ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))

    def in_process(self) -> "GymOptions":
        """These settings for stepping in this process (evaluation, rendering)."""
        return dataclasses.replace(self, vectorization="sync")

    def validate(self, cfg=None) -> None:
        check_choice(self.vectorization, VECTORIZATION, "vectorization", "--gym.vectorization")
        if self.workers < 0:
            raise ConfigError(f"--gym.workers must be >= 0 (0: one per CPU core), got "
                              f"{self.workers}")
        self.make_kwargs()

    def make_kwargs(self) -> dict:
        """``kwargs`` as a dict (a ConfigError naming the problem where it is not
        ``name=literal, ...``)."""
        text = self.kwargs
        fix = ("write --gym.kwargs as name=value pairs with Python literals, e.g. "
               "'include_cfrc_ext_in_observation=False, healthy_z_range=(0.3, 1.0)'")
        if not isinstance(text, str):
            raise ConfigError(f"--gym.kwargs must be a string, got {type(text).__name__} "
                              f"{text!r}; {fix}")
        if not text.strip():
            return {}

        def refuse(why):
            return ConfigError(f"--gym.kwargs {text[:80]!r}{'...' if len(text) > 80 else ''} "
                               f"is not keyword arguments ({why}); {fix}")

        if len(text) > MAX_KWARGS_CHARS:
            raise refuse(f"{len(text):,} characters, more than {MAX_KWARGS_CHARS:,}")
        try:
            call = ast.parse(f"f({text})", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise refuse("not valid Python") from None
        # exactly one call of the wrapper: "a=1)(b=2" or "a=1), g(b=2" are something else
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "f"):
            raise refuse("not one list of name=value pairs")
        if call.args:
            raise refuse("a value without a name")
        out = {}
        for k in call.keywords:
            if k.arg is None:
                raise refuse("** is not a keyword argument")
            if k.arg in out:
                raise refuse(f"{k.arg} is given twice")
            if k.arg in _MAKE_OWN:
                raise refuse(f"{k.arg} is pgjax's to set: {_MAKE_OWN[k.arg]}")
            try:
                out[k.arg] = ast.literal_eval(k.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                raise refuse(f"the value of {k.arg} is not a literal: a number, a string in "
                             f"quotes, True, False, None, or a tuple, list or dict of "
                             f"those") from None
        return out

    def resolve(self, n: int, portable: bool = True) -> tuple[str, int]:
        """(sync, workers or async; the number of worker processes) for n envs in all;
        ``portable``: whether a fresh process can make the env (auto steps it in this
        process otherwise)."""
        workers = self.workers or default_workers()
        if self.vectorization == "auto":
            if not portable:
                return "sync", 1
            workers = min(workers, n // AUTO_MIN_ENVS_PER_WORKER)
            return ("workers", workers) if workers >= 2 else ("sync", 1)
        return self.vectorization, workers


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


def host_call(fn, out_spec, *args):
    """``fn(*args)`` run on the host from inside a compiled program, its results of the shapes
    and dtypes ``out_spec`` (a pytree of ``ShapeDtypeStruct``). Under ``vmap`` it is one call
    with the batch axes in front of every argument and result, not one call per element, so
    ``fn`` must accept any number of leading axes.

    Stepping an environment is not pure, but every call made here takes the previous call's
    outputs among its inputs (the observation an action was computed from, the step
    counter), so the compiler can neither drop, merge nor reorder calls; a pure callback is
    what may run inside ``while_loop`` with a batched predicate (evaluation stops when every
    run's episodes have ended; the extra steps of finished runs are masked out)."""
    return jax.pure_callback(fn, out_spec, *args, vmap_method="broadcast_all")


@struct.dataclass
class GymState:
    """What the compiled program holds of a host environment: the number of steps taken,
    which chains every step's callback after the previous one."""

    steps: jax.Array


class GymEnv:
    """A Gymnasium vector environment behind the pure environment protocol.

    ``spec`` is known without stepping anything. The first ``reset`` opens one vector
    environment with as many environments as it has seeds (``num_envs``, times the number of
    runs when vmapped); a later reset with another number reopens it.
    """

    def __init__(self, env_id: str, num_envs: int, episode_length: int | None = None,
                 options: GymOptions | None = None):
        gym = _gym()
        options = options or GymOptions()
        options.validate()
        if num_envs < 1:
            raise ConfigError("num_envs must be >= 1; pass a positive --num-envs")
        try:
            registered = gym.spec(env_id)
        except gym.error.Error as e:
            raise ConfigError(f"unknown Gymnasium environment 'gym:{env_id}' ({e}); use a "
                              f"registered id such as gym:CartPole-v1 or gym:Hopper-v5 "
                              f"(list them with python -c \"import gymnasium; "
                              f"gymnasium.pprint_registry()\")") from None
        max_steps = episode_length or registered.max_episode_steps
        if not max_steps:
            raise ConfigError(f"gym:{env_id} has no time limit; pass --episode-length")
        kwargs = options.make_kwargs()
        try:
            probe = gym.make(env_id, disable_env_checker=True, **kwargs)
        except (gym.error.DependencyNotInstalled, ImportError) as e:
            raise ConfigError(f"gym:{env_id} needs a missing dependency ({e}); install pgjax "
                              f"with its dependencies (pip install -e .) or the env's own "
                              f"extra, e.g. pip install 'gymnasium[mujoco]'") from None
        except Exception as e:  # noqa: BLE001 - the task's constructor ran the user's options
            if not kwargs:
                raise
            raise ConfigError(f"gym:{env_id} refused --gym.kwargs {options.kwargs!r} "
                              f"({type(e).__name__}: {e}); pass only options its constructor "
                              f"accepts, with values it takes") from None
        try:
            obs = _ObsCodec(env_id, probe.observation_space)
            action, bounds = _action_space(env_id, probe.action_space)
        finally:
            probe.close()
        self.env_id, self.options = env_id, options
        self.host_spec = HostSpec(env_id, int(max_steps), obs, action.kind, bounds,
                                  tuple(LOADED_PLUGINS), tuple(kwargs.items()))
        # a fresh process can make the env if Gymnasium imports its entry point by name, or a
        # plugin it loads registers it
        entry = registered.entry_point
        module = getattr(entry, "__module__", "")
        self._portable = (isinstance(entry, str) or module.startswith("pgjax_plugin:")
                          or module in LOADED_PLUGINS)
        self.spec = EnvSpec(f"gym:{env_id}", obs.shape, action, num_envs, int(max_steps),
                            host=True)
        self.venv = None
        n, a = (num_envs,), (action.n,) if action.kind == "box" else ()
        f32 = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)
        self._a_shape = a
        self._step_spec = TimeStep(
            obs=f32(n + obs.shape), reward=f32(n),
            terminated=jax.ShapeDtypeStruct(n, jnp.bool_),
            truncated=jax.ShapeDtypeStruct(n, jnp.bool_), final_obs=f32(n + obs.shape),
            episode_return=f32(n), episode_length=jax.ShapeDtypeStruct(n, jnp.int32))

    @property
    def host(self) -> bool:
        return True

    # -- the pure protocol (traced) --------------------------------------------------------
    def reset(self, key):
        seeds = jax.random.randint(key, (self.spec.num_envs,), 0, 2**31 - 1)
        obs = host_call(self._reset_host, self._step_spec.obs, seeds)
        return GymState(jnp.int32(0)), obs

    def step(self, state: GymState, action):
        ts = host_call(self._step_host, self._step_spec, action, state.steps)
        return GymState(state.steps + 1), ts

    def refresh(self, state):
        return state  # a Gymnasium environment resets itself every episode

    # -- the host side ----------------------------------------------------------------------
    def _reset_host(self, seeds):
        seeds = np.asarray(seeds)
        if self.venv is None or self.venv.n != seeds.size:
            self.close()
            how, workers = self.options.resolve(seeds.size, self._portable)
            self.venv = (WorkerVectorEnv(self.host_spec, seeds.size, workers)
                         if how == "workers" else
                         HostVectorEnv(self.host_spec, seeds.size, how))
        return self.venv.reset(seeds.reshape(-1)).reshape(seeds.shape + self.host_spec.obs.shape)

    def _step_host(self, action, steps):
        lead = np.shape(steps)
        action = np.asarray(action)
        out = self.venv.step(action.reshape((-1,) + self._a_shape))
        return TimeStep(*(x.reshape(lead + (self.spec.num_envs,) + x.shape[1:]) for x in out))

    def close(self):
        if self.venv is not None:
            self.venv.close()
            self.venv = None


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


def default_workers() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


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


def make_gym_env(env_id: str, num_envs: int, episode_length: int | None = None,
                 options: GymOptions | None = None) -> GymEnv:
    return GymEnv(env_id, num_envs, episode_length, options)
