"""JaxMARL's cooperative benchmarks as pgjax multi-agent environments (``jaxmarl:<id>``).

- ``jaxmarl:SMAX-<map>``  SMAX, JaxMARL's JAX re-implementation of SMAC, the allies against
  JaxMARL's heuristic enemy (``HeuristicEnemySMAX``; ``3m``, ``2s3z``, ``5m_vs_6m``,
  ``3s5z``, ... every map of ``jaxmarl.environments.smax.MAP_NAME_TO_SCENARIO``); episodes
  report whether the battle was won (every enemy dead, an ally alive): ``eval_success``.
- ``jaxmarl:MPE_<task>``  the cooperative multi-agent particle environments by their JaxMARL
  ids (``jaxmarl:MPE_simple_spread_v3``, ``jaxmarl:MPE_simple_reference_v3``,
  ``jaxmarl:MPE_simple_speaker_listener_v4``, ``jaxmarl:MPE_simple_v3``), discrete actions.

Each step is JaxMARL's ``step_env`` (no auto-reset: pgjax adds its own). The time limit is
pgjax's (SMAX 100 steps, MPE 25, JaxMARL's own; ``--episode-length`` changes it) and a
truncation, apart from the battle's end: the simulator is built with its own limit out of
reach. (JaxMARL's MPE ends its episodes after 26 steps, as it tests the limit before
counting the step; 25 is PettingZoo's ``max_cycles``.)

The global observation is ``[state | agent 0's obs | ... | agent n-1's obs | flags]``: the
state is SMAX's ``world_state`` (MPE has none: the agents' observations together), each
agent sees its own observation, and ``flags`` hold each agent's available actions (SMAX:
which enemies are in range, whether it is alive; agents with fewer choices than others, as
MPE's speaker, have the rest marked unavailable). The ``Partition`` says where each part
is. The team reward is the mean of the agents' rewards (SMAX's agents share one).
"""
from __future__ import annotations

import contextlib
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv
from pgjax.envs.multiagent import MultiAgentEnv, Partition, pad_indices

SMAX = "SMAX-"
SMAX_STEPS = 100  # JaxMARL's SMAX max_steps
MPE_STEPS = 25  # PettingZoo's max_cycles, JaxMARL's MPE max_steps
OUT_OF_REACH = 2 ** 30  # the simulator's own step limit: pgjax truncates long before
SMAX_WON = "won (every enemy dead, an ally alive)"
INSTALL = "pip install 'pgjax[marl]'"


@contextlib.contextmanager
def _quiet_stdout():
    """File descriptor 1 sent to /dev/null (JaxMARL prints on import, through a stdout that
    an import on the way replaces, so ``contextlib.redirect_stdout`` misses it)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def jaxmarl():
    """The ``jaxmarl`` package (imported quietly), or a ConfigError saying how to install
    it."""
    if "jaxmarl.environments.smax" not in sys.modules:
        try:
            with _quiet_stdout():
                import jaxmarl.environments.smax  # noqa: F401
        except ImportError as e:
            raise ConfigError(f"jaxmarl: environments need JaxMARL ({e}); {INSTALL}") from None
    import jaxmarl

    return jaxmarl


# the cooperative MPE tasks (one team sharing a goal); the others (tag, adversary, push,
# crypto, world_comm) set teams against each other, and the facmac ones act continuously
MPE = ("MPE_simple_v3", "MPE_simple_spread_v3", "MPE_simple_reference_v3",
       "MPE_simple_speaker_listener_v4")


def mpe_ids() -> list[str]:
    return list(MPE)


def smax_maps() -> list[str]:
    from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

    return [m for m in MAP_NAME_TO_SCENARIO]


def ids() -> list[str]:
    return [f"jaxmarl:{SMAX}{m}" for m in smax_maps()] + [f"jaxmarl:{i}" for i in mpe_ids()]


def simulator(name: str):
    """(JaxMARL environment with its own time limit out of reach, pgjax's time limit,
    whether episodes report a won battle) for ``name``."""
    jm = jaxmarl()
    if name.startswith(SMAX):
        from jaxmarl.environments.smax import map_name_to_scenario

        if name[len(SMAX):] not in smax_maps():
            raise _unknown(name)
        env = jm.make("HeuristicEnemySMAX", scenario=map_name_to_scenario(name[len(SMAX):]),
                      max_steps=OUT_OF_REACH)
        return env, SMAX_STEPS, True
    if name in mpe_ids():
        env = jm.make(name, max_steps=OUT_OF_REACH)
        kinds = {type(env.action_space(a)).__name__ for a in env.agents}
        if kinds != {"Discrete"}:
            raise ConfigError(f"jaxmarl:{name} has {', '.join(sorted(kinds))} action spaces; "
                              f"pgjax's jaxmarl family takes discrete ones (the MPE default)")
        return env, MPE_STEPS, False
    raise _unknown(name)


def _unknown(name):
    return ConfigError(f"unknown environment 'jaxmarl:{name}'"
                       f"{did_you_mean('jaxmarl:' + name, ids(), n=1)}; use jaxmarl:SMAX-<map> "
                       f"(maps: {', '.join(smax_maps())}) or an MPE id "
                       f"({', '.join('jaxmarl:' + i for i in mpe_ids())})")


class Layout:
    """Where each part sits in the flat global observation (see the module's docstring)."""

    def __init__(self, env, obs: dict, dynamic_avail: bool):
        self.agents = list(env.agents)
        self.choices = [int(env.action_space(a).n) for a in self.agents]
        self.n_actions = max(self.choices)
        sizes = [int(np.prod(obs[a].shape)) for a in self.agents]
        self.world = int(np.prod(obs["world_state"].shape)) if "world_state" in obs else 0
        starts = self.world + np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        self.obs_index = pad_indices([list(range(s, s + k)) for s, k in zip(starts, sizes)])
        end = self.world + sum(sizes)
        self.state_index = (np.arange(self.world) if self.world
                            else np.arange(self.world, end))
        self.flags = dynamic_avail or len(set(self.choices)) > 1
        n, a = len(self.agents), self.n_actions
        self.avail_index = None
        if self.flags:
            idx = end + np.arange(n * a).reshape(n, a)
            self.avail_index = np.where(np.arange(a)[None] < np.asarray(self.choices)[:, None],
                                        idx, -1)
        self.size = end + (n * a if self.flags else 0)

    def flat(self, obs: dict, avail: dict | None) -> jax.Array:
        parts = ([obs["world_state"].reshape(-1)] if self.world else []) + [
            obs[a].reshape(-1) for a in self.agents]
        if self.flags:
            parts += [jnp.pad(jnp.asarray(avail[a] if avail is not None else
                                          jnp.ones(c), jnp.float32), (0, self.n_actions - c))
                      for a, c in zip(self.agents, self.choices)]
        return jnp.concatenate([jnp.asarray(p, jnp.float32) for p in parts])


def make_jaxmarl_env(name: str, num_envs: int, episode_length: int | None = None,
                     options=None) -> MultiAgentEnv:
    """A batched pgjax multi-agent environment of JaxMARL's ``name`` (see the module's
    docstring); ``episode_length`` None: the task's own time limit."""
    env, limit, smax = simulator(name)
    obs0, _ = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    lay = Layout(env, obs0, dynamic_avail=smax)
    avail_of = env.get_avail_actions if smax else (lambda st: None)

    def reset1(key):
        k_env, k_next = jax.random.split(key)
        obs, st = env.reset(k_env)
        return (st, k_next), lay.flat(obs, avail_of(st))

    def step1(sim, action):
        st, key = sim
        key, k_step = jax.random.split(key)
        actions = {a: action[i] for i, a in enumerate(lay.agents)}
        obs, st, rewards, dones, _ = env.step_env(k_step, st, actions)
        reward = jnp.mean(jnp.stack([rewards[a] for a in lay.agents]))
        out = ((st, key), lay.flat(obs, avail_of(st)), reward, dones["__all__"])
        if not smax:
            return out
        alive = st.state.unit_alive
        won = ~alive[env.num_allies:].any() & alive[:env.num_allies].any()
        return out + (won,)

    action = ActionSpace("discrete", lay.n_actions)
    spec = EnvSpec(name=f"jaxmarl:{name}", obs_shape=(lay.size,), action=action,
                   num_envs=num_envs, max_episode_steps=episode_length or limit,
                   success=SMAX_WON if smax else "")
    part = Partition(agent_names=tuple(lay.agents), obs_index=lay.obs_index,
                     action_index=np.zeros((len(lay.agents), 0), np.int64), action=action,
                     state_index=lay.state_index, avail_index=lay.avail_index)
    return MultiAgentEnv(VectorEnv(spec, reset1, step1, clip_actions=False), part)
