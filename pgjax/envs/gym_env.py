"""Gymnasium environments, stepped on the host.

``gym:<EnvId>`` builds any registered Gymnasium environment (classic control, MuJoCo v5,
Box2D, third-party registrations). The environments run in a Gymnasium vector environment on
the host (``sync``: in this process, ``async``: one worker process per env), behind the same
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

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.envs.core import ActionSpace, EnvSpec, TimeStep
from pgjax.errors import ConfigError, check_choice

VECTORIZATION = ("sync", "async")


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """Settings of the gym: family (--gym.<field>)."""

    vectorization: str = "sync"
    """Gymnasium vector env: sync (all envs in this process) or async (a worker process per
    env)."""

    def in_process(self) -> "GymOptions":
        """These settings for stepping in this process (evaluation, rendering)."""
        return dataclasses.replace(self, vectorization="sync")

    def validate(self, cfg=None) -> None:
        check_choice(self.vectorization, VECTORIZATION, "vectorization", "--gym.vectorization")


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


def _make_one(env_id: str, max_episode_steps: int):
    env = _gym().make(env_id, max_episode_steps=max_episode_steps, disable_env_checker=True)
    return env


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
                 vectorization: str = "sync"):
        gym = _gym()
        if vectorization not in VECTORIZATION:
            raise ConfigError(f"unknown vectorization '{vectorization}'; pass "
                              f"--gym.vectorization sync or async")
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
        try:
            probe = gym.make(env_id, disable_env_checker=True)
        except (gym.error.DependencyNotInstalled, ImportError) as e:
            raise ConfigError(f"gym:{env_id} needs a missing dependency ({e}); install pgjax "
                              f"with its dependencies (pip install -e .) or the env's own "
                              f"extra, e.g. pip install 'gymnasium[mujoco]'") from None
        try:
            self._obs = _ObsCodec(env_id, probe.observation_space)
            action, self._bounds = _action_space(env_id, probe.action_space)
        finally:
            probe.close()
        self.env_id, self.vectorization = env_id, vectorization
        self.spec = EnvSpec(f"gym:{env_id}", self._obs.shape, action, num_envs, int(max_steps),
                            host=True)
        self.venv = None
        n, a = (num_envs,), (action.n,) if action.kind == "box" else ()
        f32 = lambda shape: jax.ShapeDtypeStruct(shape, jnp.float32)
        self._a_shape = a
        self._step_spec = TimeStep(
            obs=f32(n + self._obs.shape), reward=f32(n),
            terminated=jax.ShapeDtypeStruct(n, jnp.bool_),
            truncated=jax.ShapeDtypeStruct(n, jnp.bool_), final_obs=f32(n + self._obs.shape),
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
            self.venv = HostVectorEnv(self, seeds.size)
        return self.venv.reset(seeds.reshape(-1)).reshape(seeds.shape + self._obs.shape)

    def _step_host(self, action, steps):
        lead = np.shape(steps)
        action = np.asarray(action)
        out = self.venv.step(action.reshape((-1,) + self._a_shape))
        return TimeStep(*(x.reshape(lead + (self.spec.num_envs,) + x.shape[1:]) for x in out))

    def close(self):
        if self.venv is not None:
            self.venv.close()
            self.venv = None


class HostVectorEnv:
    """A Gymnasium vector environment in same-step autoreset mode, with pgjax's step output:
    (obs, reward, terminated, truncated, final_obs, episode_return, episode_length), each a
    numpy array with leading dimension n. Keeps episode statistics itself."""

    def __init__(self, env: GymEnv, n: int):
        from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

        self.env, self.n = env, n
        fns = [functools.partial(_make_one, env.env_id, env.spec.max_episode_steps)] * n
        if env.vectorization == "async":
            self.venv = AsyncVectorEnv(fns, context="spawn",
                                       autoreset_mode=AutoresetMode.SAME_STEP)
        else:
            self.venv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        self.ep_return = np.zeros(n, np.float64)
        self.ep_length = np.zeros(n, np.int64)
        kind = env.spec.action.kind
        if kind == "box":
            low, high = env._bounds
            self._action = lambda a: np.clip(a, low, high)
        else:
            start = env._bounds
            self._action = lambda a: a.astype(np.int64) + start

    def reset(self, seeds) -> np.ndarray:
        """Reset every environment with its own integer seed; returns obs [n, *obs]."""
        seeds = [int(s) for s in seeds]
        if len(seeds) != self.n:
            raise ValueError(f"need {self.n} seeds, got {len(seeds)}")
        obs, _ = self.venv.reset(seed=seeds)
        self.ep_return[:] = 0.0
        self.ep_length[:] = 0
        return self.env._obs(obs)

    def step(self, action: np.ndarray):
        obs, reward, terminated, truncated, info = self.venv.step(self._action(np.asarray(action)))
        terminated = np.asarray(terminated, bool)
        # An episode that terminates on its last allowed step is terminal, not truncated
        # (Gymnasium's TimeLimit reports both): it must not bootstrap.
        truncated = np.asarray(truncated, bool) & ~terminated
        done = terminated | truncated
        obs = self.env._obs(obs)
        final_obs = obs
        if done.any():
            final_obs = obs.copy()
            idx = np.flatnonzero(done)
            final_obs[idx] = self.env._obs(np.stack([info["final_obs"][i] for i in idx]))
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


def make_gym_env(env_id: str, num_envs: int, episode_length: int | None = None,
                 vectorization: str = "sync") -> GymEnv:
    return GymEnv(env_id, num_envs, episode_length, vectorization)
