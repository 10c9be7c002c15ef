"""One episode of a trained policy stepped as in training, for ``pgjax render``: the policy
acting with its memory, the states it passes through, and the frame rate of a video of
them."""
from __future__ import annotations

import jax
import numpy as np

from pgjax.tools.trained import TrainedPolicy

MAX_FPS = 30  # Brax tasks step at 25-125 Hz: faster ones are subsampled to real time


def frame_stride(dt: float, fps: int | None) -> tuple[int, int]:
    """(k, frames per second): a video of every k-th state of a task stepped every ``dt``
    seconds, in real time at no more than ``MAX_FPS``; with ``fps`` given, every state at
    that rate."""
    import math

    if fps:
        return 1, fps
    k = max(1, math.ceil(1.0 / (dt * MAX_FPS) - 1e-6))
    return k, round(1.0 / (dt * k))


def acting(policy: TrainedPolicy, stochastic: bool, seed: int):
    """A function obs [1, ...] -> task action [1, ...], carrying the policy's memory."""
    key, carry = jax.random.PRNGKey(seed), [None]

    def act(obs, t):
        if stochastic:
            action, carry[0] = policy.act(obs, jax.random.fold_in(key, t), carry[0])
        else:
            action, carry[0] = policy.mode(obs, carry[0])
        return action
    return act


def episode(policy: TrainedPolicy, options, sim, seed: int, stochastic: bool,
             max_steps: int | None):
    """One episode of the run's task stepped as in training (one environment): (the env,
    ``sim(state)`` of every state until the episode ends, its return)."""
    from pgjax.envs import make_env

    cfg = policy.cfg
    env = make_env(cfg.env, 1, cfg.episode_length, options, observe=cfg.observe)
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    state, obs = reset(jax.random.PRNGKey(seed))
    first = lambda s: jax.tree.map(lambda x: np.asarray(x[0]), sim(s))
    states, total, act = [first(state)], 0.0, acting(policy, stochastic, seed)
    for t in range(max_steps or env.spec.max_episode_steps):
        state, ts = step(state, act(obs, t))
        total += float(ts.reward[0])
        if bool(ts.done[0]):
            break  # the next state is a new episode's first
        states.append(first(state))
        obs = ts.obs
    return env, states, total
