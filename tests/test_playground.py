"""MuJoCo Playground's DM Control Suite as the playground: family: every task of the installed
package loads offline and steps inside the compiled program with a time limit and
autoreset; a run trains, evaluates and renders from its records; tasks whose models are
fetched from the network are refused in one line where that fails."""
from __future__ import annotations

import jax
import numpy as np
import pytest

from pgjax import ConfigError
from pgjax.cli import main
from pgjax.envs import PlaygroundOptions, make_env

pytest.importorskip("mujoco_playground")  # the [playground] extra (installed with [dev])


def test_tasks_are_listed_and_unknown_or_unreachable_ones_are_one_line():
    from pgjax.envs.playground_env import task_names

    names = task_names()
    assert len(names) >= 20 and "CartpoleBalance" in names and "CheetahRun" in names
    with pytest.raises(ConfigError, match="unknown Playground task 'Nope'.*CartpoleBalance"):
        make_env("playground:Nope", 2)
    with pytest.raises(ConfigError, match="playground.impl"):
        PlaygroundOptions(impl="cuda").validate()


def test_time_limit_autoreset_and_action_repeat():
    """CartpoleBalance, 3 envs, a 5-step limit: every 5th step is truncated (never
    terminated: the task ends only on a non-finite state), the first observation of the next
    episode replaces the last; with action_repeat 2 a step's reward is two control steps'."""
    env = make_env("playground:CartpoleBalance", 3, episode_length=5)
    assert env.spec.obs_shape == (5,) and env.spec.action.n == 1
    step, reset = jax.jit(env.step), jax.jit(env.reset)  # MJX run op by op takes far longer
    state, obs = reset(jax.random.PRNGKey(0))
    truncs = []
    for _ in range(10):
        state, ts = step(state, np.zeros((3, 1), np.float32))
        truncs.append(np.asarray(ts.truncated))
        assert not np.asarray(ts.terminated).any()
    assert np.array_equal(np.array(truncs)[:, 0], [False] * 4 + [True] + [False] * 4 + [True])
    assert not np.allclose(np.asarray(ts.final_obs), np.asarray(ts.obs))
    two = make_env("playground:CartpoleBalance", 3, episode_length=5,
                   options=PlaygroundOptions(action_repeat=2))
    r = []
    for e_reset, e_step in ((reset, step), (jax.jit(two.reset), jax.jit(two.step))):
        s, _ = e_reset(jax.random.PRNGKey(1))
        s, ts = e_step(s, np.zeros((3, 1), np.float32))
        r.append(float(ts.reward[0]))
    assert 1.5 * r[0] < r[1] < 2.5 * r[0]  # two steps' reward (each about 1 near balance)


@pytest.mark.slow
def test_cartpole_balance_trains_evaluates_and_renders(tmp_path, capsys):
    assert main(["train", "--env", "playground:CartpoleBalance", "--steps", "20480", "--quiet",
                 "--out", str(tmp_path), "--name", "cb"]) == 0
    assert main(["eval", str(tmp_path / "cb"), "--episodes", "2"]) == 0
    assert main(["render", str(tmp_path / "cb"), "--out", str(tmp_path / "cb.gif"),
                 "--max-steps", "20"]) == 0
    # 21 states at the task's 100 Hz, drawn in real time at <= 30 fps: every 4th (0, 4, .., 20)
    assert "6 frames" in capsys.readouterr().out
    assert main(["render", str(tmp_path / "cb"), "--out", str(tmp_path / "all.gif"),
                 "--max-steps", "20", "--fps", "100"]) == 0
    assert "21 frames" in capsys.readouterr().out  # --fps: every state



def test_an_env_state_with_empty_arrays_checkpoints_and_restores(tmp_path):
    """A Playground state holds empty arrays (CartpoleBalance has no actuator activations:
    ``data.act`` has size 0), which orbax cannot save (every Playground run failed at its
    first checkpoint): the checkpoint leaves them out and puts them back on restore."""
    from pgjax.loop.checkpoint import Checkpoints

    env = make_env("playground:CartpoleBalance", 2)
    reset = jax.jit(env.reset)  # MJX run op by op takes far longer than its compilation
    state, _ = reset(jax.random.PRNGKey(0))
    state, _ = jax.jit(env.step)(state, np.full((2, 1), 0.5, np.float32))
    assert 0 in [x.size for x in jax.tree.leaves(state)]
    ckpts = Checkpoints(tmp_path / "checkpoint")
    ckpts.save(3, state, {"chunk": 3})
    fresh, _ = reset(jax.random.PRNGKey(1))
    restored, meta = ckpts.restore(3, fresh)
    ckpts.close()
    assert meta == {"chunk": 3}
    assert jax.tree.structure(restored) == jax.tree.structure(state)
    for a, b in zip(jax.tree.leaves(restored), jax.tree.leaves(state)):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
