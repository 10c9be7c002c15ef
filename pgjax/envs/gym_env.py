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

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.envs.core import EnvSpec, TimeStep
from pgjax.envs.gym_options import (AUTO_MIN_ENVS_PER_WORKER,  # noqa: F401 (re-exported)
                                    MAX_KWARGS_CHARS, VECTORIZATION, GymOptions,
                                    default_workers)
from pgjax.envs.gym_vector import (HostSpec, HostVectorEnv, WorkerVectorEnv, _action_space, _gym,
                                   _ObsCodec)
from pgjax.core.errors import ConfigError
from pgjax.core.registry import LOADED_PLUGINS


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


def make_gym_env(env_id: str, num_envs: int, episode_length: int | None = None,
                 options: GymOptions | None = None) -> GymEnv:
    return GymEnv(env_id, num_envs, episode_length, options)
