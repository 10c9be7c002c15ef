"""Partial observability: the position / velocity split of the locomotion observations,
checked against each task's own observation function; the observation filter on JAX and
Gymnasium host environments; and the memory probe task."""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.envs import ActionSpace, ConfigError, EnvSpec
from pgjax.envs.classic import make_classic_env
from pgjax.envs.gym_env import make_gym_env
from pgjax.envs.memory_probe import make_memory_env, parse_memory_name
from pgjax.envs.pomdp import OBSERVE, ORACLE, SUPPORTED, filter_env, observation_split

BRAX = ("hopper", "walker2d", "halfcheetah", "ant", "humanoid")
GYM = ("Hopper-v5", "Walker2d-v5", "HalfCheetah-v5", "Ant-v5", "Humanoid-v5")


def _check_split(split, size):
    pos, vel = split["positions"], split["velocities"]
    assert set(split) == {"positions", "velocities"}
    assert len(pos) and len(vel) and not set(pos) & set(vel)
    assert (np.diff(pos) > 0).all() and (np.diff(vel) > 0).all()
    assert 0 <= min(pos.min(), vel.min()) and max(pos.max(), vel.max()) < size


@pytest.mark.parametrize("name", BRAX)
def test_brax_split_matches_the_env_observation(name):
    from brax import envs as brax_envs

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Brax System, piplines")
        env = brax_envs.get_environment(name)
    split = observation_split(f"brax:{name}")
    pos, vel = split["positions"], split["velocities"]
    nq, nv = env.sys.q_size(), env.sys.qd_size()
    skip = nq - len(pos)
    assert len(vel) == nv and skip == (2 if name in ("ant", "humanoid") else 1)

    # (env.observation_size would run an eager reset: slow on CPU)
    @jax.jit
    def observe(q, qd):
        ps = env.pipeline_init(q, qd)
        extra = (jnp.zeros(env.action_size),) if name == "humanoid" else ()
        return env._get_obs(ps, *extra), ps.x.pos[0, 2]

    rng = np.random.default_rng(0)
    q = np.asarray(env.sys.init_q) + rng.uniform(-0.1, 0.1, nq)
    qd = rng.uniform(-5, 5, nv)  # inside the [-10, 10] clip of hopper and walker2d
    obs, torso_z = map(np.asarray, observe(q, qd))
    _check_split(split, obs.size)
    want_pos = q[skip:].copy()
    if name in ("hopper", "walker2d"):  # the torso's world height sits in rootz's slot
        want_pos[0] = torso_z
    np.testing.assert_allclose(obs[pos], want_pos, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(obs[vel], qd, rtol=1e-5, atol=1e-5)

    # independently: which entries respond to qpos, which to qvel
    obs_dq = np.asarray(observe(q + rng.uniform(0.01, 0.02, nq), qd)[0])
    obs_dqd = np.asarray(observe(q, qd + rng.uniform(0.1, 0.2, nv))[0])
    np.testing.assert_array_equal(obs_dq[vel], obs[vel])
    assert (np.abs(obs_dq[pos] - obs[pos]) > 1e-3).all()
    np.testing.assert_array_equal(obs_dqd[pos], obs[pos])
    assert (np.abs(obs_dqd[vel] - obs[vel]) > 1e-3).all()

    # an env with this observation size passes the filter's shape check
    penv = SimpleNamespace(spec=EnvSpec(f"brax:{name}", obs.shape, ActionSpace("box", 3), 2, 9))
    for observe_ in ("positions", "velocities"):
        assert filter_env(penv, f"brax:{name}", observe_).spec.obs_shape == \
            (len(split[observe_]),)


@pytest.mark.parametrize("name", GYM)
def test_gym_split_matches_the_env_observation(name):
    env = gym.make(name, disable_env_checker=True)
    u = env.unwrapped
    env.reset(seed=0)
    split = observation_split(f"gym:{name}")
    pos, vel = split["positions"], split["velocities"]
    nq, nv = u.model.nq, u.model.nv
    _check_split(split, env.observation_space.shape[0])
    skip = nq - len(pos)
    assert len(vel) == nv and skip == (2 if name in ("Ant-v5", "Humanoid-v5") else 1)

    def observe(qpos, qvel):
        u.set_state(qpos, qvel)
        return u._get_obs().copy()

    rng = np.random.default_rng(0)
    qpos = u.init_qpos + rng.uniform(-0.1, 0.1, nq)
    qvel = rng.uniform(-5, 5, nv)
    obs = observe(qpos, qvel)
    np.testing.assert_allclose(obs[pos], qpos[skip:])
    np.testing.assert_allclose(obs[vel], qvel)
    obs_dq = observe(qpos + rng.uniform(0.01, 0.02, nq), qvel)
    obs_dqv = observe(qpos, qvel + rng.uniform(0.1, 0.2, nv))
    np.testing.assert_array_equal(obs_dq[vel], obs[vel])
    assert (np.abs(obs_dq[pos] - obs[pos]) > 1e-3).all()
    np.testing.assert_array_equal(obs_dqv[pos], obs[pos])
    assert (np.abs(obs_dqv[vel] - obs[vel]) > 1e-3).all()
    hidden = env.observation_space.shape[0] - len(pos) - len(vel)
    assert hidden == {"Ant-v5": 78, "Humanoid-v5": 303}.get(name, 0)  # extras: dropped
    env.close()


def test_errors_and_full():
    with pytest.raises(ConfigError, match="brax:hopper.*gym:Ant-v5") as e:
        observation_split("brax:reacher")
    assert "\n" not in str(e.value)
    env = make_classic_env("cartpole", 2)
    with pytest.raises(ConfigError, match="full, positions, velocities"):
        filter_env(env, "jax:cartpole", "pos")
    assert filter_env(env, "jax:cartpole", "full") is env
    assert filter_env(env, "brax:reacher", ORACLE) is env  # full needs no split
    with pytest.raises(ConfigError, match="shape"):
        filter_env(env, "gym:Hopper-v5", "positions")
    assert OBSERVE == ("full", "positions", "velocities")
    assert "jax:cartpole" in SUPPORTED
    cartpole = filter_env(make_gym_env("CartPole-v1", 2), "gym:CartPole-v1", "positions")
    assert cartpole.host and cartpole.spec.obs_shape == (2,)


@pytest.mark.parametrize("observe", ["positions", "velocities"])
def test_filter_jax_env(observe):
    full = make_classic_env("cartpole", 2, episode_length=3)
    env = filter_env(full, "jax:cartpole", observe)
    idx = np.array({"positions": [0, 2], "velocities": [1, 3]}[observe])
    assert env.spec.obs_shape == (2,) and full.spec.obs_shape == (4,)
    assert env.spec._replace(obs_shape=(4,)) == full.spec
    key = jax.random.PRNGKey(0)
    (s, obs), (fs, fobs) = env.reset(key), full.reset(key)
    assert obs.shape == (2, 2)
    np.testing.assert_array_equal(obs, fobs[:, idx])
    step, fstep = jax.jit(env.step), jax.jit(full.step)
    action = jnp.array([0, 1])
    for t in range(4):
        (s, ts), (fs, fts) = step(s, action), fstep(fs, action)
        assert ts.obs.shape == ts.final_obs.shape == (2, 2)
        np.testing.assert_array_equal(ts.obs, fts.obs[:, idx])
        np.testing.assert_array_equal(ts.final_obs, fts.final_obs[:, idx])
        np.testing.assert_array_equal(ts.reward, fts.reward)
        if t == 2:  # truncated: obs is the reset observation, final_obs the real last one
            assert ts.truncated.all()
            assert not np.allclose(ts.obs, ts.final_obs)
    s2 = env.refresh(s)
    assert jax.tree.structure(s2) == jax.tree.structure(s)


def test_filter_gym_host_env():
    full = make_gym_env("Hopper-v5", 2, episode_length=3)  # each with its own vector env
    env = filter_env(make_gym_env("Hopper-v5", 2, episode_length=3), "gym:Hopper-v5",
                     "velocities")
    idx = observation_split("gym:Hopper-v5")["velocities"]
    assert env.host and env.spec.obs_shape == (6,) and env.spec.action == full.spec.action
    try:
        key = jax.random.PRNGKey(1)
        (s, obs), (fs, fobs) = env.reset(key), full.reset(key)
        assert obs.shape == (2, 6)
        np.testing.assert_array_equal(obs, np.asarray(fobs)[:, idx])
        action = jnp.full((2, 3), 0.5, jnp.float32)
        for t in range(3):
            (s, out), (fs, fout) = jax.jit(env.step)(s, action), jax.jit(full.step)(fs, action)
            assert out.obs.shape == out.final_obs.shape == (2, 6)
            np.testing.assert_array_equal(out.obs, np.asarray(fout.obs)[:, idx])
            np.testing.assert_array_equal(out.final_obs, np.asarray(fout.final_obs)[:, idx])
            for name in ("reward", "terminated", "truncated", "episode_return",
                         "episode_length"):
                np.testing.assert_array_equal(getattr(out, name), getattr(fout, name))
        assert (out.terminated | out.truncated).all()  # ended at the limit: final_obs filtered
        assert not np.allclose(out.obs, out.final_obs)
    finally:
        env.close()
        full.close()


# -- memory probe --------------------------------------------------------------------------

def _run_memory(env, key, policy, episodes=1):
    """Run ``policy(first_obs, obs, t)`` for whole episodes; return the per-step TimeSteps."""
    state, obs = env.reset(key)
    step = jax.jit(env.step)
    out, first = [], obs
    for t in range(episodes * (env.spec.max_episode_steps)):
        state, ts = step(state, policy(first, obs, t % env.spec.max_episode_steps))
        out.append(ts)
        first = jnp.where(ts.done[:, None], ts.obs, first)
        obs = ts.obs
    return out


def test_memory_structure():
    delay, k = 5, 3
    env = make_memory_env(64, delay=delay, num_cues=k)
    assert env.spec.obs_shape == (k + 3,) and env.spec.action.kind == "discrete"
    assert env.spec.action.n == k and env.spec.max_episode_steps == delay + 1
    state, obs0 = env.reset(jax.random.PRNGKey(1))
    cue = np.asarray(obs0[:, :k]).argmax(1)
    np.testing.assert_array_equal(obs0[:, :k].sum(1), 1.0)
    np.testing.assert_array_equal(obs0[:, k:], np.tile([1.0, 0.0, 1.0], (64, 1)))
    assert len(set(cue.tolist())) == k
    rng = np.random.default_rng(0)
    step = jax.jit(env.step)
    for t in range(2 * (delay + 1)):
        action = jnp.asarray(rng.integers(0, k, 64))
        state, ts = step(state, action)
        last = t % (delay + 1) == delay
        assert not ts.truncated.any()
        assert (ts.terminated == last).all()
        if not last:  # waiting: the cue hidden, no reward
            np.testing.assert_array_equal(ts.reward, 0.0)
            np.testing.assert_array_equal(ts.obs[:, :k], 0.0)
            np.testing.assert_array_equal(ts.obs[:, k:k + 2],
                                          np.tile([0.0, float(t % (delay + 1) == delay - 1)],
                                                  (64, 1)))
            np.testing.assert_allclose(ts.obs[:, k + 2], (delay - 1 - t % (delay + 1)) / delay)
            np.testing.assert_array_equal(ts.episode_length, 0)
        else:
            np.testing.assert_array_equal(ts.reward, (np.asarray(action) == cue) * 1.0)
            np.testing.assert_array_equal(ts.episode_return, ts.reward)
            np.testing.assert_array_equal(ts.episode_length, delay + 1)
            np.testing.assert_array_equal(ts.final_obs, 0.0)
            np.testing.assert_array_equal(ts.obs[:, k], 1.0)  # next episode's cue step
            cue = np.asarray(ts.obs[:, :k]).argmax(1)


def test_memory_policy_succeeds_and_memoryless_is_at_chance():
    env = make_memory_env(64, delay=8)
    recall = lambda first, obs, t: jnp.argmax(first[:, :2], axis=1)
    ends = [ts for ts in _run_memory(env, jax.random.PRNGKey(0), recall, episodes=2)
            if ts.done.any()]
    assert len(ends) == 2 and all(ts.done.all() for ts in ends)
    assert all(float(ts.episode_return.mean()) == 1.0 for ts in ends)

    for k in (2, 4):
        wide = make_memory_env(4096, delay=3, num_cues=k)
        constant = lambda first, obs, t: jnp.zeros(4096, jnp.int32)
        last = _run_memory(wide, jax.random.PRNGKey(k), constant)[-1]
        assert last.done.all()
        assert abs(float(last.episode_return.mean()) - 1 / k) < 0.03


def test_memory_ids_and_errors():
    assert parse_memory_name("memory") == 8 and parse_memory_name("memory-32") == 32
    assert parse_memory_name("cartpole") is None
    with pytest.raises(ConfigError, match="jax:memory-<delay>"):
        parse_memory_name("memory-x")
    assert make_memory_env(2).spec.name == "jax:memory"
    assert make_memory_env(2, delay=32).spec.name == "jax:memory-32"
    assert make_memory_env(2, delay=4, episode_length=100).spec.max_episode_steps == 100
    with pytest.raises(ConfigError, match="at least 9"):
        make_memory_env(2, delay=8, episode_length=5)
    with pytest.raises(ConfigError):
        make_memory_env(2, num_cues=1)
    # delay 0: cue and question in one observation, a memoryless policy solves it
    env = make_memory_env(8, delay=0)
    ts = _run_memory(env, jax.random.PRNGKey(3), lambda f, obs, t: jnp.argmax(obs[:, :2], 1))[0]
    assert ts.terminated.all() and float(ts.episode_return.mean()) == 1.0
