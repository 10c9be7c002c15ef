"""Cooperative multi-agent environments: one team reward, a global state, per-agent views.

A multi-agent environment is an ordinary pgjax vector environment whose observation is the
*global state* (what a centralised critic sees) and whose action is the *joint action*, plus a
static ``Partition`` saying which entries of the global state each agent observes and which
entries of the joint action it controls. Keeping the partition outside the simulator means
rollouts, autoreset, truncation and episode statistics are the single-agent machinery
unchanged; the multi-agent trainer gathers per-agent observations and scatters per-agent
actions with fixed index arrays inside the jitted program.

Agents may differ in observation and action sizes: per-agent arrays are padded to the largest
agent, with index -1 marking padding (padded observation entries read as 0, padded action
entries are dropped and masked out of log-probabilities).

Environment ids:

- ``mabrax:<body>_<split>`` agent partitions of Brax bodies (``mabrax:halfcheetah_2x3``),
  see ``pgjax.envs.mabrax``
- ``matrix:<game>`` one-step cooperative matrix games (``matrix:climbing``,
  ``matrix:penalty``): a fast probe of coordination
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.envs.core import ActionSpace, EnvSpec, Wrapper
from pgjax.envs.functional import VectorEnv


@dataclasses.dataclass(frozen=True, eq=False)
class Partition:
    """Which part of the global state each agent sees and which part of the joint action it
    controls.

    ``obs_index``    [n_agents, max_obs] int, indices into the global observation, -1 = pad.
    ``action_index`` [n_agents, max_act] int, indices into the joint action, -1 = pad
                     (box actions). For discrete actions every agent picks one of
                     ``action.n`` choices and the joint action is [n_agents] integers.
    ``action``       each agent's action space (box: ``n`` = max_act; discrete: choices).
    ``agent_names``  one label per agent (e.g. its joints), for tables and records.
    ``state_index``  [S] int, the entries of the global observation a centralised critic
                     sees (None: all of them).
    ``avail_index``  [n_agents, action.n] int (discrete only), where in the global
                     observation each agent's available-action flags are (1 available,
                     0 not; -1: never available, e.g. choices an agent with fewer actions
                     lacks); None: every action is always available. A policy never samples
                     an unavailable action, and normalisation leaves the flags as they are.
    """

    agent_names: tuple
    obs_index: np.ndarray
    action_index: np.ndarray
    action: ActionSpace
    state_index: np.ndarray | None = None
    avail_index: np.ndarray | None = None

    def __post_init__(self):
        n = len(self.agent_names)
        if self.obs_index.ndim != 2 or self.obs_index.shape[0] != n:
            raise ValueError("obs_index must be [n_agents, max_obs]")
        if self.action.kind == "box" and (self.action_index.ndim != 2
                                          or self.action_index.shape[0] != n):
            raise ValueError("action_index must be [n_agents, max_act]")
        if self.state_index is not None and np.ndim(self.state_index) != 1:
            raise ValueError("state_index must be [S]")
        if self.avail_index is not None and (self.action.kind != "discrete" or np.shape(
                self.avail_index) != (n, self.action.n)):
            raise ValueError("avail_index must be [n_agents, action.n], for discrete actions")

    @property
    def n_agents(self) -> int:
        return len(self.agent_names)

    @property
    def obs_sizes(self) -> tuple:
        return tuple(int(x) for x in (self.obs_index >= 0).sum(1))

    @property
    def action_sizes(self) -> tuple:
        if self.action.kind == "discrete":
            return (self.action.n,) * self.n_agents
        return tuple(int(x) for x in (self.action_index >= 0).sum(1))

    @property
    def max_obs(self) -> int:
        return self.obs_index.shape[1]

    @property
    def obs_mask(self) -> np.ndarray:
        return (self.obs_index >= 0).astype(np.float32)

    @property
    def action_mask(self) -> np.ndarray:
        """[n_agents, max_act] 1.0 where the entry is a real action dimension (box only)."""
        return (self.action_index >= 0).astype(np.float32)

    def agent_obs(self, obs: jax.Array) -> jax.Array:
        """Global observations [..., D] -> per-agent observations [..., n_agents, max_obs]
        (padding reads as 0)."""
        idx = jnp.asarray(np.maximum(self.obs_index, 0))
        return jnp.take(obs, idx, axis=-1) * jnp.asarray(self.obs_mask)

    def state(self, obs: jax.Array) -> jax.Array:
        """Global observations [..., D] -> what a centralised critic sees [..., S]."""
        if self.state_index is None:
            return obs
        return jnp.take(obs, jnp.asarray(self.state_index), axis=-1)

    def avail(self, obs: jax.Array) -> jax.Array | None:
        """Global observations [..., D] -> [..., n_agents, action.n] bool, the actions each
        agent may take (None: every action, always)."""
        if self.avail_index is None:
            return None
        idx = np.asarray(self.avail_index)
        flags = jnp.take(obs, jnp.asarray(np.maximum(idx, 0)), axis=-1)
        return (flags > 0.5) & jnp.asarray(idx >= 0)

    def norm_mask(self, dim: int) -> np.ndarray | None:
        """[dim] bool, the global observation's entries normalisation may touch (all but
        the available-action flags); None: all of them."""
        if self.avail_index is None:
            return None
        mask = np.ones(dim, bool)
        mask[np.asarray(self.avail_index)[np.asarray(self.avail_index) >= 0]] = False
        return mask

    def agent_actions(self, joint: jax.Array) -> jax.Array:
        """The joint action -> per-agent actions. Box: [..., D] -> [..., n_agents, max_act]
        (padding reads as 0); discrete: [..., n_agents] integers, unchanged."""
        if self.action.kind == "discrete":
            return joint
        idx = jnp.asarray(np.maximum(self.action_index, 0))
        return jnp.take(joint, idx, axis=-1) * jnp.asarray(self.action_mask)

    def joint_action(self, actions: jax.Array, joint_dim: int) -> jax.Array:
        """Per-agent actions -> the joint action. Box: [..., n_agents, max_act] -> [..., D]
        (padding dropped); discrete: [..., n_agents] integers, unchanged."""
        if self.action.kind == "discrete":
            return actions
        flat_idx = self.action_index.reshape(-1)
        keep = np.flatnonzero(flat_idx >= 0)
        order = np.argsort(flat_idx[keep])
        if not np.array_equal(flat_idx[keep][order], np.arange(joint_dim)):
            raise ValueError("action_index must cover every joint action entry exactly once")
        flat = actions.reshape(actions.shape[:-2] + (-1,))
        return jnp.take(flat, jnp.asarray(keep[order]), axis=-1)


class MultiAgentEnv(Wrapper):
    """A vector environment (global observation, joint action, team reward) with its
    ``Partition``; stepping is the wrapped environment's."""

    def __init__(self, env, partition: Partition):
        super().__init__(env)
        self.partition = partition


def pad_indices(groups, fill: int = -1) -> np.ndarray:
    """Ragged lists of indices -> [len(groups), max_len] int array padded with ``fill``."""
    width = max(1, max(len(g) for g in groups))
    out = np.full((len(groups), width), fill, np.int64)
    for i, g in enumerate(groups):
        out[i, :len(g)] = g
    return out


# -- cooperative matrix games -----------------------------------------------------------------
# Payoffs are indexed [row agent's action, column agent's action]. Climbing game (Claus &
# Boutilier 1998): the optimum (0, 0) = 11 sits next to the heaviest penalties, so agents that
# adapt to each other's current average behaviour drift to the safe (2, 2) = 5 or (1, 1) = 7.
# Penalty game with k = -100: two optima (0, 0) and (2, 2) = 10, miscoordination costs k.
MATRIX_GAMES = {
    "climbing": np.array([[11.0, -30.0, 0.0],
                          [-30.0, 7.0, 6.0],
                          [0.0, 0.0, 5.0]], np.float32),
    "penalty": np.array([[10.0, 0.0, -100.0],
                         [0.0, 2.0, 0.0],
                         [-100.0, 0.0, 10.0]], np.float32),
}


def make_matrix_game(name: str, num_envs: int, episode_length: int | None = None) -> MultiAgentEnv:
    """A one-step two-player game: both agents observe a constant 1, pick one of 3 actions
    and receive the shared payoff; every episode terminates after that step."""
    if name not in MATRIX_GAMES:
        raise ConfigError(f"unknown matrix game '{name}'"
                          f"{did_you_mean('matrix:' + name, ['matrix:' + k for k in MATRIX_GAMES])}"
                          f"; use one of: "
                          f"{', '.join('matrix:' + k for k in MATRIX_GAMES)}")
    if episode_length not in (None, 1):
        raise ConfigError("matrix games last one step; drop --episode-length")
    payoff = jnp.asarray(MATRIX_GAMES[name])

    def reset1(key):
        return jnp.zeros((), jnp.int32), jnp.ones(1, jnp.float32)

    def step1(s, action):
        return s, jnp.ones(1, jnp.float32), payoff[action[0], action[1]], jnp.bool_(True)

    n = payoff.shape[0]
    spec = EnvSpec(name=f"matrix:{name}", obs_shape=(1,), action=ActionSpace("discrete", n),
                   num_envs=num_envs, max_episode_steps=1)
    part = Partition(agent_names=("row", "column"), obs_index=np.zeros((2, 1), np.int64),
                     action_index=np.zeros((2, 0), np.int64), action=ActionSpace("discrete", n))
    return MultiAgentEnv(VectorEnv(spec, reset1, step1, clip_actions=False), part)


def single_agent_partition(spec: EnvSpec) -> Partition:
    """One agent that sees the whole observation and controls the whole action: a
    single-agent environment seen through the multi-agent machinery."""
    if len(spec.obs_shape) != 1:
        raise ConfigError(f"multi-agent training needs flat observations; {spec.name} has shape "
                          f"{spec.obs_shape}")
    d = spec.obs_shape[0]
    act = np.arange(spec.action.n)[None] if spec.action.kind == "box" else np.zeros((1, 0), np.int64)
    return Partition(agent_names=("agent",), obs_index=np.arange(d)[None], action_index=act,
                     action=spec.action)
