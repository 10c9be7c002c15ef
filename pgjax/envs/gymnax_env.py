"""gymnax's environments as pgjax environments (``gymnax:<EnvId>``): classic control
(``gymnax:CartPole-v1``, ``gymnax:Pendulum-v1``), MinAtar (``gymnax:Breakout-MinAtar``),
bsuite and misc tasks, stepped inside the compiled program.

Each step is gymnax 1.0's ``step_env`` (no auto-reset: pgjax adds its own from a reset
pool) with the environment's default parameters. Its ``done`` is the task's own end;
gymnax's time limit (``max_steps_in_episode``, which gymnax's ``step`` applies through
``is_truncated``) is pgjax's, a truncation at the same step (``--episode-length`` changes
it), so a cut episode bootstraps. The exceptions are tasks whose observation shows the time
or whose horizon is the task (``HORIZON_IS_TASK``): there reaching the limit ends the episode
as a termination.
Observations are flattened to float vectors (MinAtar's 10x10xC grids included), as the
feedforward policies read them.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv

INSTALL = "pip install 'pgjax[gymnax]'"
# the time or the horizon is part of what the agent sees or of the task's definition: the
# end at max_steps_in_episode is a termination (DeepSea's episode is its depth; the bandits
# and MetaMaze observe the time; DiscountingChain observes time / horizon)
HORIZON_IS_TASK = ("DeepSea-bsuite", "DiscountingChain-bsuite", "BernoulliBandit-misc",
                   "GaussianBandit-misc", "MetaMaze-misc")


# the tasks gymnax's Visualizer draws (pgjax render); classic control needs pygame
DRAWN = ("Acrobot-v1", "CartPole-v1", "Pendulum-v1", "MountainCar-v0",
         "MountainCarContinuous-v0", "Catch-bsuite", "Asterix-MinAtar", "Breakout-MinAtar",
         "Freeway-MinAtar", "Seaquest-MinAtar", "SpaceInvaders-MinAtar", "Pong-misc",
         "PointRobot-misc", "MetaMaze-misc", "FourRooms-misc")


def drawable(name: str) -> None:
    """A ConfigError unless gymnax's visualiser draws ``name``."""
    if name not in DRAWN:
        raise ConfigError(f"gymnax draws only {', '.join(DRAWN)}; gymnax:{name} has no "
                          f"visualiser (evaluate it with pgjax eval)")


def gymnax():
    try:
        import gymnax
    except ImportError as e:
        raise ConfigError(f"gymnax: environments need gymnax ({e}); {INSTALL}") from None
    return gymnax


def simulator(name: str):
    """(gymnax environment, its default parameters, its time limit) for ``name``."""
    gx = gymnax()
    if name not in gx.registered_envs:
        known = ["gymnax:" + i for i in gx.registered_envs]
        raise ConfigError(f"unknown environment 'gymnax:{name}'"
                          f"{did_you_mean('gymnax:' + name, known, n=1)}; use one of "
                          f"gymnax.registered_envs (e.g. gymnax:CartPole-v1, "
                          f"gymnax:Breakout-MinAtar)")
    env, params = gx.make(name)
    return env, params, int(params.max_steps_in_episode)


def action_space(name: str, space) -> ActionSpace:
    kind = type(space).__name__
    if kind == "Discrete":
        return ActionSpace("discrete", int(space.n))
    if kind == "Box" and len(space.shape) <= 1:
        low, high = np.asarray(space.low, np.float64), np.asarray(space.high, np.float64)
        if low.min() == low.max() and high.min() == high.max():
            return ActionSpace("box", int(np.prod(space.shape)), float(low.min()),
                               float(high.max()))
    raise ConfigError(f"gymnax:{name}'s action space {space} is not one pgjax's policies "
                      f"take (Discrete, or a vector Box with one bound for every entry)")


def make_gymnax_env(name: str, num_envs: int, episode_length: int | None = None):
    """A batched pgjax environment of gymnax's ``name`` (see the module's docstring);
    ``episode_length`` None: gymnax's own ``max_steps_in_episode``."""
    env, params, limit = simulator(name)
    action = action_space(name, env.action_space(params))
    obs_size = int(np.prod(env.observation_space(params).shape))
    box = action.kind == "box"
    horizon = name in HORIZON_IS_TASK

    def reset1(key):
        k_env, k_next = jax.random.split(key)
        obs, st = env.reset_env(k_env, params)
        return (st, k_next), jnp.asarray(obs, jnp.float32).reshape(-1)

    def step1(sim, a):
        st, key = sim
        key, k_step = jax.random.split(key)
        obs, st, reward, done, _ = env.step_env(k_step, st, a if box else a.astype(jnp.int32),
                                                params)
        if horizon:  # the limit is part of the task: its end is a termination
            done = done | env.is_truncated(st, params)
        return ((st, key), jnp.asarray(obs, jnp.float32).reshape(-1),
                jnp.asarray(reward, jnp.float32).reshape(()), jnp.asarray(done).reshape(()))

    spec = EnvSpec(name=f"gymnax:{name}", obs_shape=(obs_size,), action=action,
                   num_envs=num_envs, max_episode_steps=episode_length or limit)
    return VectorEnv(spec, reset1, step1)
