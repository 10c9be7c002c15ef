"""Multi-agent partitions of Brax bodies (``mabrax:<name>``), checked against the model.

Action entries are checked against the actuator -> degree of freedom map Brax itself uses and
against MuJoCo's actuator forces; observation entries against which entries of the Brax
observation move when one joint's coordinates are perturbed (the env's own ``_get_obs`` on a
freshly initialised pipeline state), so neither check reuses the index arithmetic under test.
"""
from __future__ import annotations

import itertools
from pathlib import Path

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from pgjax.envs import BraxOptions, ConfigError, make_env
from pgjax.envs.brax_env import brax_environment
from pgjax.envs.mabrax import (MABRAX, body_layout, mabrax_partition, partition_table)
from pgjax.envs.multiagent import MultiAgentEnv

NAMES = list(MABRAX)
BODIES = sorted({split.body for split in MABRAX.values()})

# Multi-Agent MuJoCo's joint graphs (edges and hyperedges: every pair in a group is adjacent),
# in Brax's joint names.
EDGES = {
    "halfcheetah": [("bfoot", "bshin"), ("bshin", "bthigh"), ("bthigh", "fthigh"),
                    ("fthigh", "fshin"), ("fshin", "ffoot")],
    "ant": [("hip_1", "ankle_1"), ("hip_2", "ankle_2"), ("hip_3", "ankle_3"),
            ("hip_4", "ankle_4"), ("hip_1", "hip_2", "hip_3", "hip_4")],
    "walker2d": [("foot_joint", "leg_joint"), ("leg_joint", "thigh_joint"),
                 ("foot_left_joint", "leg_left_joint"), ("leg_left_joint", "thigh_left_joint"),
                 ("thigh_joint", "thigh_left_joint")],
    "hopper": [("foot_joint", "leg_joint"), ("leg_joint", "thigh_joint")],
}


def _neighbours(body, joints):
    out = set()
    for group in EDGES[body]:
        if set(group) & set(joints):
            out |= set(group)
    return out - set(joints)


def _jname(m, j):
    return mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j)


def _real(row):
    return [int(i) for i in row if i >= 0]


@pytest.fixture(scope="module")
def obs_response():
    """body -> (joint name -> (obs entries moved by its qpos, by its qvel), root entries)."""
    out = {}
    for body in BODIES:
        env = brax_environment(body)[0]
        m = env.sys.mj_model
        q0, qd0 = np.asarray(env.sys.init_q, np.float32), np.zeros(m.nv, np.float32)
        # one row per qpos coordinate, then one per degree of freedom
        dq = np.concatenate([np.eye(m.nq), np.zeros((m.nv, m.nq))]).astype(np.float32) * 0.13
        dqd = np.concatenate([np.zeros((m.nq, m.nv)), np.eye(m.nv)]).astype(np.float32) * 0.37
        obs_fn = jax.jit(jax.vmap(lambda q, qd: env._get_obs(env.pipeline_init(q, qd))))
        base = np.asarray(obs_fn(q0[None], qd0[None]))[0]
        moved = np.abs(np.asarray(obs_fn(q0 + dq, qd0 + dqd)) - base) > 1e-5
        sizes = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}  # free, ball, slide, hinge

        def entries(rows):
            return {int(i) for r in rows for i in np.flatnonzero(moved[r])}

        joints, root = {}, set()
        for j in range(m.njnt):
            nq, nv = sizes[int(m.jnt_type[j])]
            qa, da = int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
            pos = entries(range(qa, qa + nq))
            vel = entries(range(m.nq + da, m.nq + da + nv))
            if m.body_parentid[m.jnt_bodyid[j]] == 0:
                root |= pos | vel
            else:
                joints[_jname(m, j)] = (pos, vel)
        # every observation entry belongs to exactly one joint's coordinates
        groups = [root] + [p | v for p, v in joints.values()]
        assert sum(len(g) for g in groups) == len(base)
        assert set().union(*groups) == set(range(len(base)))
        out[body] = (joints, root)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_actions_cover_the_body_by_joint_name(name):
    split = MABRAX[name]
    env = brax_environment(split.body)[0]
    m = env.sys.mj_model
    part = mabrax_partition(name)
    # actuator -> joint name, as Brax applies actions (actuator dof) ...
    brax_map = [_jname(m, int(m.dof_jntid[d])) for d in np.asarray(env.sys.actuator.qd_id)]
    # ... and as MuJoCo's actuator forces say
    data = mujoco.MjData(m)
    mj_map = []
    for a in range(m.nu):
        data.ctrl[:] = 0.0
        data.ctrl[a] = 1.0
        mujoco.mj_forward(m, data)
        dofs = np.flatnonzero(np.abs(data.qfrc_actuator) > 1e-9)
        assert len(dofs) == 1
        mj_map.append(_jname(m, int(m.dof_jntid[dofs[0]])))
    assert brax_map == mj_map and len(brax_map) == env.action_size

    flat = [i for row in part.action_index for i in _real(row)]
    assert sorted(flat) == list(range(env.action_size))  # every actuator, exactly one agent
    assert part.action == ("box", max(len(a) for a in split.agents), -1.0, 1.0)
    for joints, row, label in zip(split.agents, part.action_index, part.agent_names):
        assert [brax_map[a] for a in _real(row)] == list(joints)
        assert label == "+".join(j.removesuffix("_joint") for j in joints)


@pytest.mark.parametrize("name", NAMES)
def test_joint_action_round_trip(name):
    part = mabrax_partition(name)
    dim = body_layout(MABRAX[name].body).action_size
    joint = jax.random.uniform(jax.random.PRNGKey(0), (3, dim), minval=-1.0, maxval=1.0)
    per_agent = np.where(part.action_index >= 0,
                         np.asarray(joint)[:, np.maximum(part.action_index, 0)], 0.0)
    assert per_agent.shape == (3, part.n_agents, part.action.n)
    np.testing.assert_array_equal(np.asarray(part.joint_action(jnp.asarray(per_agent), dim)),
                                  np.asarray(joint))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("neighbour_qvel", [True, False])
def test_agent_observations_match_perturbed_obs(name, neighbour_qvel, obs_response):
    split = MABRAX[name]
    joints_obs, root = obs_response[split.body]
    part = mabrax_partition(name, neighbour_qvel=neighbour_qvel)
    assert part.obs_index.shape[0] == len(split.agents)
    for joints, row in zip(split.agents, part.obs_index):
        expect = set(root)
        for j in joints:
            expect |= joints_obs[j][0] | joints_obs[j][1]
        for j in _neighbours(split.body, joints):
            expect |= joints_obs[j][0] | (joints_obs[j][1] if neighbour_qvel else set())
        assert _real(row) == sorted(expect)  # sorted, no duplicates
    # padding only at the end of a row
    for row in part.obs_index:
        assert (row[len(_real(row)):] == -1).all()


def test_neighbours_follow_the_kinematic_tree():
    for body in BODIES:
        layout = body_layout(body)
        for j, nbrs in layout.neighbours.items():
            assert set(nbrs) == _neighbours(body, [j]), (body, j)


def test_partition_table():
    rows = partition_table()
    assert len(rows) == sum(len(s.agents) for s in MABRAX.values())
    for name, group in itertools.groupby(rows, key=lambda r: r["name"]):
        part = mabrax_partition(name)
        group = list(group)
        assert [r["joints"] for r in group] == [tuple(a) for a in MABRAX[name].agents]
        assert tuple(r["obs_size"] for r in group) == part.obs_sizes
        assert tuple(r["action_size"] for r in group) == part.action_sizes
    doc = Path(__file__).resolve().parents[1] / "docs" / "explanation" / "multiagent.md"
    lines = doc.read_text().splitlines()
    for r in rows:  # the documented table is in sync
        assert any(f"`mabrax:{r['name']}`" in line and f"| {r['label']} |" in line
                   and f"| {r['obs_size']} | {r['action_size']} |" in line
                   for line in lines), r


@pytest.mark.slow
def test_mabrax_env_steps():
    env = make_env("mabrax:halfcheetah_2x3", 2, episode_length=5)
    part = env.partition
    assert isinstance(env, MultiAgentEnv) and env.spec.name == "mabrax:halfcheetah_2x3"
    assert env.spec.obs_shape == (17,) and env.spec.action.n == 6
    state, obs = jax.jit(env.reset)(jax.random.PRNGKey(0))
    assert obs.shape == (2, 17)
    action = part.joint_action(jnp.zeros((2, part.n_agents, part.action.n)), 6)
    assert action.shape == (2, 6)
    state, ts = jax.jit(env.step)(state, action)
    assert ts.obs.shape == (2, 17) and np.isfinite(np.asarray(ts.obs)).all()
    assert part.agent_obs(ts.obs).shape == (2, 2, part.max_obs)
    assert part.obs_sizes == (13, 13) and part.action_sizes == (3, 3)


def test_unknown_names():
    with pytest.raises(ConfigError, match="unknown multi-agent Brax environment 'ant_3x3'.*"
                                          "mabrax:ant_4x2") as err:
        make_env("mabrax:ant_3x3", 2)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="unknown matrix game 'chicken'.*matrix:climbing"):
        make_env("matrix:chicken", 2)
    with pytest.raises(ConfigError, match="unknown Brax backend 'fast'"):
        make_env("mabrax:hopper_3x1", 2, options=BraxOptions(backend="fast"))
    with pytest.raises(ConfigError, match="mabrax.*matrix"):
        make_env("multi:ant_4x2", 2)
