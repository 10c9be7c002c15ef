"""The gymnax: family: ids, spaces, time limits as truncations (terminations where the
horizon is the task), agreement with gymnax's own step, and runs that train, evaluate and
reload."""
from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

gymnax = pytest.importorskip("gymnax")

from pgjax.core.errors import ConfigError  # noqa: E402
from pgjax.envs import make_env  # noqa: E402


def _run(env, action, steps):
    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.PRNGKey(0))
    out = []
    for _ in range(steps):
        state, ts = step(state, action)
        out.append(ts)
    return out


def test_time_limits_are_truncations():
    env = make_env("gymnax:Pendulum-v1", 2)
    assert env.spec.max_episode_steps == 200 and env.spec.action.kind == "box"
    assert (env.spec.action.low, env.spec.action.high) == (-2.0, 2.0)
    ts = _run(env, jnp.zeros((2, 1)), 200)
    assert not any(bool(t.done.any()) for t in ts[:-1])
    assert ts[-1].truncated.all() and not ts[-1].terminated.any()
    # a shorter limit from --episode-length, on a task that also terminates
    cart = make_env("gymnax:CartPole-v1", 2, episode_length=5)
    ts = _run(cart, jnp.array([0, 1]), 5)
    assert ts[-1].truncated.all() and not ts[-1].terminated.any()


def test_terminations_stay_terminations():
    # always pushing left drops the pole within a few dozen steps
    ts = _run(make_env("gymnax:CartPole-v1", 1), jnp.array([0]), 60)
    ends = [i for i, t in enumerate(ts) if bool(t.done[0])]
    assert ends and ts[ends[0]].terminated[0] and not ts[ends[0]].truncated[0]
    # DeepSea's horizon is the task: its end is a termination, at its depth
    deep = make_env("gymnax:DeepSea-bsuite", 1)
    ts = _run(deep, jnp.array([1]), deep.spec.max_episode_steps)
    assert ts[-1].terminated[0] and not ts[-1].truncated[0]
    # DiscountingChain observes time / horizon: reaching the horizon is a termination
    chain = make_env("gymnax:DiscountingChain-bsuite", 1)
    ts = _run(chain, jnp.array([0]), chain.spec.max_episode_steps)
    assert not any(bool(t.done[0]) for t in ts[:-1])
    assert ts[-1].terminated[0] and not ts[-1].truncated[0]


def test_steps_agree_with_gymnax():
    """pgjax's step is gymnax's step_env on the same state: the same observation and
    reward, flattened (MinAtar's grid) to floats."""
    env = make_env("gymnax:Breakout-MinAtar", 1)
    assert env.spec.obs_shape == (400,) and env.spec.action == env.spec.action._replace(
        kind="discrete", n=3)
    raw, params = gymnax.make("Breakout-MinAtar")
    state, obs = env.reset(jax.random.PRNGKey(0))
    sim, key = state.sim
    st = jax.tree.map(lambda x: x[0], sim)
    np.testing.assert_array_equal(obs[0], np.asarray(raw.get_obs(st), np.float32).reshape(-1))
    state, ts = env.step(state, jnp.array([2]))
    _, k_step = jax.random.split(key[0])
    o, _, r, d, _ = raw.step_env(k_step, st, 2, params)
    np.testing.assert_array_equal(ts.final_obs[0], np.asarray(o, np.float32).reshape(-1))
    assert float(ts.reward[0]) == float(r)


def test_unknown_ids_and_spaces_are_one_line():
    with pytest.raises(ConfigError, match="did you mean 'gymnax:CartPole-v1'"):
        make_env("gymnax:CartPole-v2", 2)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["gymnax:CartPole-v1", "gymnax:Breakout-MinAtar"])
def test_gymnax_runs_train_evaluate_and_reload(env_id, tmp_path):
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "pgjax.cli", "train", "--env", env_id, "--steps", "8192",
           "--eval-envs", "4", "--out", str(out), "--name", "g"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    root = out / "g"
    ev = subprocess.run([sys.executable, "-m", "pgjax.cli", "eval", str(root), "--episodes",
                         "4"], capture_output=True, text=True, timeout=600)
    assert ev.returncode == 0, ev.stderr[-2000:]
    from pgjax import load_policy

    policy = load_policy(root)
    env = make_env(env_id, 2)
    _, obs = env.reset(jax.random.PRNGKey(0))
    action, _ = policy.mode(obs)
    assert np.asarray(action).shape == (2,)
    assert ((np.asarray(action) >= 0) & (np.asarray(action) < env.spec.action.n)).all()
    from pgjax.tools.render import render

    drawn = render(root, tmp_path / "episode.gif", max_steps=12, width=160, height=120)
    assert drawn["frames"] >= 2 and (tmp_path / "episode.gif").stat().st_size > 1000


def test_tasks_gymnax_cannot_draw_are_refused_in_one_line():
    from pgjax.envs.gymnax_env import drawable

    drawable("Breakout-MinAtar")
    with pytest.raises(ConfigError, match="gymnax:DeepSea-bsuite has no visualiser"):
        drawable("DeepSea-bsuite")
