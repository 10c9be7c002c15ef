"""A memory probe: recall a cue shown ``delay`` steps earlier.

``jax:memory`` (delay 8) and ``jax:memory-<delay>`` (e.g. ``jax:memory-32``). Each episode:

- t = 0: the observation shows a random cue, one of ``num_cues`` (default 2), as a one-hot;
- t = 1 .. delay: the cue is hidden (its entries are zero);
- the action taken at t = delay (after the last hidden observation) is scored: reward 1 if it
  equals the cue, 0 otherwise, and the episode terminates (``terminated``, not truncated).
  Actions at earlier steps do nothing and earn 0.

So an episode has ``delay + 1`` steps and its return is the success indicator: the success
rate of a policy is its mean episode return (``episode_return`` in training, ``eval_return``
in evaluation), and chance is ``1 / num_cues``. A memoryless policy can do no better than
chance, since its last observation carries nothing about the cue; a policy that remembers
the first observation succeeds every time. ``delay = 0`` (cue and question in the same
observation) is the memoryless control.

The observation (``num_cues + 3`` entries) is::

    [cue one-hot (num_cues) | start | answer | time_left]

``start`` is 1 at t = 0 (the cue step), ``answer`` is 1 at t = delay (the step whose action
is scored), and ``time_left = (delay - t) / delay`` counts down from 1 to 0 (0 throughout when
delay = 0), so a policy always knows when to answer; between the two flags (both 0) the agent
is waiting. The observation after the scored step (``final_obs``) is all zeros.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from pgjax.core.errors import ConfigError
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv

NAME = "memory"
DEFAULT_DELAY = 8


MAX_DELAY = 1_000_000  # episode lengths and step counters stay far inside int32


def parse_memory_name(name: str) -> int | None:
    """The delay of a ``jax:`` name ``memory`` / ``memory-<delay>``; None for other names."""
    base, sep, delay = name.partition("-")
    if base != NAME:
        return None
    if not sep:
        return DEFAULT_DELAY
    if not delay.isdigit():
        raise ConfigError(f"bad memory task '{name}'; write jax:memory or jax:memory-<delay> "
                          f"with a whole number of steps, e.g. jax:memory-32")
    if int(delay) > MAX_DELAY:
        raise ConfigError(f"memory task delay {int(delay):,} is beyond {MAX_DELAY:,} steps; pass "
                          f"a shorter jax:memory-<delay>")
    return int(delay)


def make_memory_env(num_envs: int, delay: int = DEFAULT_DELAY, num_cues: int = 2,
                    episode_length: int | None = None) -> VectorEnv:
    """The memory probe as a batched environment (see the module docstring).

    ``episode_length`` is the time limit; episodes end by themselves after ``delay + 1``
    steps, so None (that length) or anything at least as long.
    """
    if delay < 0 or num_cues < 2:
        raise ConfigError(f"memory task needs delay >= 0 and num_cues >= 2 (got delay={delay}, "
                          f"num_cues={num_cues})")
    if episode_length is not None and episode_length < delay + 1:
        raise ConfigError(f"episode length {episode_length} would cut every jax:memory episode "
                          f"(delay {delay}) before its scored step; pass at least {delay + 1} "
                          f"or leave it unset")

    def observe(cue, t):
        onehot = jax.nn.one_hot(cue, num_cues) * (t == 0)
        time_left = jnp.maximum(delay - t, 0) / max(delay, 1)
        flags = jnp.stack([t == 0, t == delay, time_left]).astype(jnp.float32)
        return jnp.concatenate([onehot, flags])

    def reset1(key):
        cue = jax.random.randint(key, (), 0, num_cues)
        t = jnp.int32(0)
        return (cue, t), observe(cue, t)

    def step1(s, action):
        cue, t = s
        scored = t == delay
        reward = jnp.where(scored & (action.astype(jnp.int32) == cue), 1.0, 0.0)
        t = t + 1
        return (cue, t), observe(cue, t), reward, scored

    name = f"jax:{NAME}" if delay == DEFAULT_DELAY else f"jax:{NAME}-{delay}"
    spec = EnvSpec(name=name, obs_shape=(num_cues + 3,), action=ActionSpace("discrete", num_cues),
                   num_envs=num_envs, max_episode_steps=episode_length or delay + 1)
    return VectorEnv(spec, reset1, step1)
