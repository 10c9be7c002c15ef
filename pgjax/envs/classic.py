"""Small pure-JAX control tasks: fast probes with discrete actions, no simulator needed.

``jax:cartpole`` follows the dynamics, reward and termination of Gymnasium's CartPole-v1
(Barto, Sutton & Anderson 1983): reward 1 per step, terminated when the pole leans past
12 degrees or the cart leaves [-2.4, 2.4], time limit 500.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv


def _cartpole_reset(key):
    s = jax.random.uniform(key, (4,), minval=-0.05, maxval=0.05)
    return s, s


def _cartpole_step(s, action):
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass, polemass_length = masscart + masspole, masspole * length
    x, x_dot, theta, theta_dot = s
    force = jnp.where(action == 1, force_mag, -force_mag)
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    temp = (force + polemass_length * theta_dot**2 * sin) / total_mass
    theta_acc = (gravity * sin - cos * temp) / (
        length * (4.0 / 3.0 - masspole * cos**2 / total_mass))
    x_acc = temp - polemass_length * theta_acc * cos / total_mass
    x, x_dot = x + tau * x_dot, x_dot + tau * x_acc  # explicit Euler, as Gymnasium
    theta, theta_dot = theta + tau * theta_dot, theta_dot + tau * theta_acc
    s = jnp.stack([x, x_dot, theta, theta_dot])
    terminated = (jnp.abs(x) > 2.4) | (jnp.abs(theta) > 12 * 2 * jnp.pi / 360)
    return s, s, jnp.float32(1.0), terminated


CLASSIC = {"cartpole": (_cartpole_reset, _cartpole_step, (4,), ActionSpace("discrete", 2), 500)}


def make_classic_env(name: str, num_envs: int, episode_length: int | None = None) -> VectorEnv:
    reset1, step1, obs_shape, action, limit = CLASSIC[name]
    spec = EnvSpec(name=f"jax:{name}", obs_shape=obs_shape, action=action, num_envs=num_envs,
                   max_episode_steps=episode_length or limit)
    return VectorEnv(spec, reset1, step1)
