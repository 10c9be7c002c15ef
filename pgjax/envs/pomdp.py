"""Partially observable locomotion: hide the velocities or the positions of a task.

The standard POMDP variants of the MuJoCo locomotion tasks (Meng et al. 2021; Ni et al. 2022,
"Recurrent model-free RL can be a strong baseline for many POMDPs"; Al-Hafez et al. 2024,
"Time-efficient reinforcement learning with stochastic stateful policies") keep one part of
the observation:

- ``observe="positions"``  only the joint-position entries (qpos): velocities must be inferred
  from the history (the "-P" tasks);
- ``observe="velocities"`` only the joint-velocity entries (qvel): where the body is must be
  integrated from the history (the "-V" tasks);
- ``observe="full"``       the task unchanged; this is also the *oracle* baseline of a POMDP
  experiment (``ORACLE``): the same task with the full state observed.

Layouts. Every supported locomotion task builds its observation as
``concatenate([qpos[k:], qvel, extras])``: the first ``k`` qpos entries (the root's horizontal
position, which would make the task non-stationary) are left out, every qvel entry follows,
then task-specific extras. So the positions are the first ``nq - k`` entries and the
velocities the next ``nv``. ``nq`` and ``nv`` are read off the MuJoCo model the task runs
(for Brax, the model Brax's loader builds from the task's asset, after it fuses joint-less
bodies; for Gymnasium, the env's ``model`` and its ``observation_structure``); ``k`` is what
each task's ``_get_obs`` drops: 1 (``rootx``) for the planar Hopper, Walker2d and HalfCheetah,
2 (the free joint's x and y) for Ant and Humanoid. Details that move no entry:

- Brax ``hopper`` / ``walker2d`` put the torso's world height (``x.pos[0, 2]``) in the slot of
  ``rootz``: still a position. They and Gymnasium ``Hopper-v5`` / ``Walker2d-v5`` clip qvel to
  [-10, 10]: still the velocities.
- Extras are neither positions nor velocities and are dropped in both filtered modes:
  Gymnasium ``Ant-v5``'s contact forces (``cfrc_ext``); Brax ``humanoid``'s and Gymnasium
  ``Humanoid-v5``'s body inertias (``cinert``), body velocities (``cvel``), actuator forces
  (``qfrc_actuator``) and, for Gymnasium, contact forces. (``cinert`` is a function of the
  positions, but ``cvel`` mixes positions and velocities and the forces depend on the action;
  dropping every extra keeps both modes to the joint coordinates.) Brax ``ant`` has no
  extras.

``jax:cartpole`` and ``gym:CartPole-v1`` (state ``[x, x_dot, theta, theta_dot]``) are supported
too, giving the classic CartPole-P / CartPole-V probes.

Filtered observations drop the hidden entries (the observation gets shorter, as in the
benchmarks), they are not zeroed; ``spec.obs_shape`` says the new size.
"""
from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import numpy as np

from pgjax.envs.core import Wrapper
from pgjax.core.errors import ConfigError

OBSERVE = ("full", "positions", "velocities")
ORACLE = "full"  # the fully observed task: the oracle baseline of a POMDP experiment


class _Brax(NamedTuple):
    asset: str  # file under brax/envs/assets
    skip: int  # leading qpos entries the env's _get_obs leaves out
    extras: str = ""  # what follows qvel ("" none, "humanoid": cinert, cvel, qfrc_actuator)


_BRAX = {
    "hopper": _Brax("hopper.xml", 1),
    "walker2d": _Brax("walker2d.xml", 1),
    "halfcheetah": _Brax("half_cheetah.xml", 1),
    "ant": _Brax("ant.xml", 2),
    "humanoid": _Brax("humanoid.xml", 2, "humanoid"),
}
_GYM = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5")
_CARTPOLE = ("jax:cartpole", "gym:CartPole-v1")  # state [x, x_dot, theta, theta_dot]

SUPPORTED = tuple(f"brax:{k}" for k in _BRAX) + tuple(f"gym:{k}" for k in _GYM) + _CARTPOLE


class _Layout(NamedTuple):
    size: int  # length of the full observation vector
    positions: tuple
    velocities: tuple


def _qpos_qvel(nq: int, nv: int, skip: int, extras: int) -> _Layout:
    npos = nq - skip
    return _Layout(npos + nv + extras, tuple(range(npos)), tuple(range(npos, npos + nv)))


def _brax_layout(name: str) -> _Layout:
    from pgjax.envs.brax_env import import_brax

    mjcf = import_brax().io.mjcf
    from etils import epath

    entry = _BRAX[name]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Brax System, piplines")
        m = mjcf.load_mjmodel(epath.resource_path("brax") / "envs" / "assets" / entry.asset)
    extras = 0
    if entry.extras == "humanoid":
        # per link (every body but the world): cinert 10 (3x3 inertia, mass) and cvel 6
        # (linear, angular); then qfrc_actuator, one per dof
        links = m.nbody - 1
        extras = 10 * links + 6 * links + m.nv
    return _qpos_qvel(int(m.nq), int(m.nv), entry.skip, extras)


def _gym_layout(name: str) -> _Layout:
    import gymnasium

    try:
        env = gymnasium.make(name, disable_env_checker=True)
    except (gymnasium.error.DependencyNotInstalled, ImportError) as e:
        raise ConfigError(f"gym:{name} needs a missing dependency ({e}); install "
                          f"'gymnasium[mujoco]'") from None
    try:
        u = env.unwrapped
        parts = dict(u.observation_structure)
        nq, nv, skip = int(u.model.nq), int(u.model.nv), int(parts.pop("skipped_qpos"))
        if parts.pop("qpos") != nq - skip or parts.pop("qvel") != nv:
            raise ConfigError(f"gym:{name} lays its observation out differently from "
                              f"[qpos[{skip}:], qvel, ...]; this Gymnasium version is not "
                              f"supported by pgjax.envs.pomdp")
        size = int(np.prod(env.observation_space.shape))
    finally:
        env.close()
    return _qpos_qvel(nq, nv, skip, size - (nq - skip) - nv)


@functools.lru_cache(maxsize=None)
def _layout(env_id: str) -> _Layout:
    if env_id not in SUPPORTED:
        raise ConfigError(f"no position/velocity split for '{env_id}'; partial observation "
                          f"(--observe positions|velocities) supports: {', '.join(SUPPORTED)}")
    if env_id in _CARTPOLE:
        return _Layout(4, (0, 2), (1, 3))
    name = env_id.partition(":")[2]
    return _brax_layout(name) if name in _BRAX else _gym_layout(name)


def observation_split(env_id: str) -> dict[str, np.ndarray]:
    """Indices into the flat observation of ``env_id``: ``{"positions": ..., "velocities": ...}``
    (sorted int arrays; entries in neither, such as contact forces, are in neither)."""
    lay = _layout(env_id)
    return {"positions": np.array(lay.positions, np.int64),
            "velocities": np.array(lay.velocities, np.int64)}


def _check_observe(observe: str):
    if observe not in OBSERVE:
        raise ConfigError(f"unknown observe '{observe}'; pass one of: {', '.join(OBSERVE)}")


def filter_env(env, env_id: str, observe: str):
    """``env`` (built from ``env_id``) observing only ``observe``'s entries: ``obs`` and
    ``final_obs`` keep the selected entries and ``spec.obs_shape`` says their number;
    everything else is the wrapped env's. The same wrapper serves the JAX and the Gymnasium
    environments (both implement the pure protocol). ``observe="full"`` returns ``env``.
    """
    _check_observe(observe)
    if observe == "full":
        return env
    lay = _layout(env_id)
    shape = tuple(env.spec.obs_shape)
    if shape != (lay.size,):
        raise ConfigError(f"{env_id} observations should have shape ({lay.size},) but this env "
                          f"has {shape}; build it with the task's default observation options")
    return FilteredEnv(env, np.array(getattr(lay, observe), np.int64))


class FilteredEnv(Wrapper):
    """An environment whose observations keep only the entries ``index``."""

    def __init__(self, env, index: np.ndarray):
        super().__init__(env)
        self.index = index
        self.spec = env.spec._replace(obs_shape=(len(index),))

    def reset(self, key):
        state, obs = self.env.reset(key)
        return state, obs[..., self.index]

    def step(self, state, action):
        state, ts = self.env.step(state, action)
        return state, ts.replace(obs=ts.obs[..., self.index],
                                 final_obs=ts.final_obs[..., self.index])
