"""Agent partitions of Brax bodies, in the style of Multi-Agent MuJoCo.

Multi-Agent MuJoCo (de Witt et al. 2020; Peng et al. 2021, "FACMAC") splits the actuated
joints of a MuJoCo body among cooperating agents that share the body's reward. Here the
simulator is the plain Brax environment (``pgjax.envs.brax_env``) and the split is a static
``Partition`` of its observation and action vectors:

- the global state (centralised critic input) is the Brax observation itself;
- agent ``i`` controls the actuators of its joints (``action_index``: their positions in the
  Brax action vector);
- agent ``i`` observes, as entries of the Brax observation (``obs_index``, sorted), the qpos
  and qvel entries of its own joints and of the joints at graph distance 1 from them, plus
  every root entry of the observation (the root's qpos entries that Brax keeps, and all root
  velocities), which Multi-Agent MuJoCo gives every agent by default.

The joint graph is the kinematic tree: two actuated joints are neighbours when they move the
same body, when one moves the parent body of the other's body, or when both move bodies
attached directly to the root body (the hips of the Ant, the two thighs of HalfCheetah and
Walker2d). For the bodies registered here this reproduces Multi-Agent MuJoCo's edge lists.

Only joint names are written down here (the partition itself). Every index is read off the
MuJoCo model behind the Brax system (``jnt_qposadr``, ``jnt_dofadr``, ``actuator_trnid``)
together with how Brax's ``halfcheetah``, ``ant``, ``walker2d`` and ``hopper`` build their
observation: ``concatenate([q[k:], qd])`` with the first ``k`` qpos entries (the root's
horizontal position) left out; Walker2d and Hopper put the torso height in the slot of the
root's z coordinate and clip ``qd`` to [-10, 10], which moves no entry.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

from pgjax.envs.brax_env import brax_environment, make_brax_env
from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.envs.core import ActionSpace
from pgjax.envs.multiagent import MultiAgentEnv, Partition, pad_indices


class Split(NamedTuple):
    """A registered partition: the Brax environment and, per agent, its joints' names."""

    body: str
    agents: tuple


_CHEETAH = ("bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot")

MABRAX = {
    "halfcheetah_2x3": Split("halfcheetah", (_CHEETAH[:3], _CHEETAH[3:])),
    "halfcheetah_6x1": Split("halfcheetah", tuple((j,) for j in _CHEETAH)),
    "ant_2x4": Split("ant", (("hip_1", "ankle_1", "hip_2", "ankle_2"),
                             ("hip_3", "ankle_3", "hip_4", "ankle_4"))),
    "ant_4x2": Split("ant", (("hip_1", "ankle_1"), ("hip_2", "ankle_2"),
                             ("hip_3", "ankle_3"), ("hip_4", "ankle_4"))),
    "walker2d_2x3": Split("walker2d", (("thigh_joint", "leg_joint", "foot_joint"),
                                       ("thigh_left_joint", "leg_left_joint",
                                        "foot_left_joint"))),
    "hopper_3x1": Split("hopper", (("thigh_joint",), ("leg_joint",), ("foot_joint",))),
}


@dataclasses.dataclass(frozen=True)
class BodyLayout:
    """Where each joint of a Brax body lives in its observation and action vectors.

    ``joint_qpos`` / ``joint_qvel``: actuated joint name -> observation indices of its qpos /
    qvel entries. ``actuator``: joint name -> index in the action vector. ``root_obs``: the
    observation entries of the root joints. ``neighbours``: joint name -> names of the joints
    at graph distance 1.
    """

    body: str
    obs_size: int
    action_size: int
    root_obs: tuple
    joint_qpos: dict
    joint_qvel: dict
    actuator: dict
    neighbours: dict


def _split(name: str) -> Split:
    if name not in MABRAX:
        raise ConfigError(f"unknown multi-agent Brax environment '{name}'"
                          f"{did_you_mean('mabrax:' + name, ['mabrax:' + k for k in MABRAX])}; "
                          f"use one of: "
                          f"{', '.join('mabrax:' + k for k in MABRAX)}")
    return MABRAX[name]


@functools.lru_cache(maxsize=None)
def body_layout(body: str) -> BodyLayout:
    """Read the observation / action layout of a Brax body off its MuJoCo model."""
    import jax
    import jax.numpy as jnp
    import mujoco

    env = brax_environment(body)[0]
    m = env.sys.mj_model
    jt = mujoco.mjtJoint
    free, ball, slide, hinge = (int(t) for t in (jt.mjJNT_FREE, jt.mjJNT_BALL,
                                                  jt.mjJNT_SLIDE, jt.mjJNT_HINGE))
    n_qpos = {free: 7, ball: 4, slide: 1, hinge: 1}
    n_qvel = {free: 6, ball: 3, slide: 1, hinge: 1}

    def jname(j):
        return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)

    def qpos_of(j):
        a = int(m.jnt_qposadr[j])
        return range(a, a + n_qpos[int(m.jnt_type[j])])

    def qvel_of(j):
        a = int(m.jnt_dofadr[j])
        return range(a, a + n_qvel[int(m.jnt_type[j])])

    body_of = [int(b) for b in m.jnt_bodyid]
    root_joints = [j for j in range(m.njnt) if m.body_parentid[body_of[j]] == 0]
    root_bodies = {body_of[j] for j in root_joints}

    # Brax leaves out the root's horizontal position (free joint: x, y; planar bodies: the
    # slide joint along x), which must be the leading qpos entries.
    if not getattr(env, "_exclude_current_positions_from_observation", False) or \
            getattr(env, "_use_contact_forces", False):
        raise NotImplementedError(f"brax:{body}: only the default observation is supported")
    hidden = []
    for j in root_joints:
        a = int(m.jnt_qposadr[j])
        if m.jnt_type[j] == free:
            hidden += [a, a + 1]
        elif m.jnt_type[j] == slide and m.jnt_axis[j][2] == 0:
            hidden.append(a)
    skip = len(hidden)
    if sorted(hidden) != list(range(skip)):
        raise NotImplementedError(f"brax:{body}: hidden root positions are not leading qpos")
    obs_size = m.nq - skip + m.nv
    key = jax.ShapeDtypeStruct((2,), jnp.uint32)
    actual = jax.eval_shape(env.reset, key).obs.shape[-1]  # traced, not run
    if actual != obs_size:
        raise NotImplementedError(f"brax:{body}: observation has {actual} entries, expected "
                                  f"qpos[{skip}:] + qvel = {obs_size}")

    def obs_of_qpos(j):
        return tuple(a - skip for a in qpos_of(j) if a >= skip)

    def obs_of_qvel(j):
        return tuple(m.nq - skip + d for d in qvel_of(j))

    # actuators: each drives one joint (joint transmission), each actuated joint has one
    actuator = {}
    for a in range(m.nu):
        if m.actuator_trntype[a] != int(mujoco.mjtTrn.mjTRN_JOINT):
            raise NotImplementedError(f"brax:{body}: actuator {a} does not drive a joint")
        j = int(m.actuator_trnid[a, 0])
        if j in root_joints or jname(j) in actuator:
            raise NotImplementedError(f"brax:{body}: joint '{jname(j)}' cannot be partitioned")
        actuator[jname(j)] = a
    actuated = [j for j in range(m.njnt) if jname(j) in actuator]
    if len(actuated) + len(root_joints) != m.njnt:
        raise NotImplementedError(f"brax:{body}: some non-root joint has no actuator")

    def jointed_ancestor(b):
        b = int(m.body_parentid[b])
        while b > 0 and not m.body_jntnum[b]:
            b = int(m.body_parentid[b])
        return b

    def adjacent(i, k):
        bi, bk = body_of[i], body_of[k]
        pi, pk = jointed_ancestor(bi), jointed_ancestor(bk)
        return bi == bk or pi == bk or pk == bi or (pi == pk and pi in root_bodies)

    return BodyLayout(
        body=body, obs_size=obs_size, action_size=int(m.nu),
        root_obs=tuple(sorted({i for j in root_joints
                               for i in obs_of_qpos(j) + obs_of_qvel(j)})),
        joint_qpos={jname(j): obs_of_qpos(j) for j in actuated},
        joint_qvel={jname(j): obs_of_qvel(j) for j in actuated},
        actuator=actuator,
        neighbours={jname(j): tuple(jname(k) for k in actuated if k != j and adjacent(j, k))
                    for j in actuated})


def _label(joints) -> str:
    return "+".join(j.removesuffix("_joint") for j in joints)


def agent_neighbours(layout: BodyLayout, joints) -> tuple:
    """Joints at graph distance 1 from a group of joints (excluding the group)."""
    return tuple(sorted({n for j in joints for n in layout.neighbours[j]} - set(joints)))


@functools.lru_cache(maxsize=None)
def mabrax_partition(name: str, neighbour_qvel: bool = True) -> Partition:
    """The ``Partition`` of a registered split. ``neighbour_qvel=False`` gives neighbouring
    joints' positions only (Multi-Agent MuJoCo's default local categories)."""
    split = _split(name)
    layout = body_layout(split.body)
    obs, act = [], []
    for joints in split.agents:
        unknown = [j for j in joints if j not in layout.actuator]
        if unknown:
            raise ValueError(f"mabrax:{name}: no actuated joint {unknown} in brax:{split.body}")
        seen = set(layout.root_obs)
        for j in joints:
            seen.update(layout.joint_qpos[j] + layout.joint_qvel[j])
        for j in agent_neighbours(layout, joints):
            seen.update(layout.joint_qpos[j] + (layout.joint_qvel[j] if neighbour_qvel else ()))
        obs.append(sorted(seen))
        act.append([layout.actuator[j] for j in joints])
    obs_index, action_index = pad_indices(obs), pad_indices(act)
    obs_index.flags.writeable = False
    action_index.flags.writeable = False
    return Partition(agent_names=tuple(_label(j) for j in split.agents), obs_index=obs_index,
                     action_index=action_index,
                     action=ActionSpace("box", action_index.shape[1], -1.0, 1.0))


def make_mabrax_env(name: str, num_envs: int, episode_length: int = 1000,
                    backend: str = "generalized") -> MultiAgentEnv:
    """The Brax body of a registered split (global observation, joint action, team reward)
    with its agent ``Partition``; id ``mabrax:<name>``."""
    split = _split(name)
    env = make_brax_env(split.body, num_envs, episode_length, backend)
    part = mabrax_partition(name)
    layout = body_layout(split.body)
    if env.spec.obs_shape != (layout.obs_size,) or env.spec.action.n != layout.action_size:
        raise NotImplementedError(f"mabrax:{name}: the {backend} backend changes the layout")
    ma = MultiAgentEnv(env, part)
    ma.spec = env.spec._replace(name=f"mabrax:{name}")
    return ma


def partition_table() -> list[dict]:
    """One row per agent of every registered split: ``name``, ``agent`` (index), ``label``,
    ``joints`` (controlled), ``neighbours`` (observed at distance 1), ``obs_size``,
    ``action_size``."""
    rows = []
    for name, split in MABRAX.items():
        part = mabrax_partition(name)
        layout = body_layout(split.body)
        for i, joints in enumerate(split.agents):
            rows.append({"name": name, "agent": i, "label": part.agent_names[i],
                         "joints": tuple(joints),
                         "neighbours": agent_neighbours(layout, joints),
                         "obs_size": part.obs_sizes[i], "action_size": part.action_sizes[i]})
    return rows
