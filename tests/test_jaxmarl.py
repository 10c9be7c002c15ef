"""The jaxmarl: family (SMAX, MPE): available-action masks, the global state the critic
reads, won battles, truncation apart from termination, and a run trained, evaluated and
reloaded."""
from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("jaxmarl")

from pgjax import TrainConfig  # noqa: E402
from pgjax.core.errors import ConfigError  # noqa: E402
from pgjax.envs import make_env  # noqa: E402
from pgjax.model.distributions import Categorical  # noqa: E402
from pgjax.training.build import build_policy  # noqa: E402


def _smax(n=4, name="SMAX-3m", **kw):
    return make_env(f"jaxmarl:{name}", n, **kw)


def test_masked_actions_are_never_sampled():
    env = _smax(8)
    cfg = TrainConfig(algo="happo", env="jaxmarl:SMAX-3m", num_envs=8)
    policy = build_policy(cfg, env)
    params = policy.init(jax.random.PRNGKey(1), env.spec.obs_shape)
    _, obs = env.reset(jax.random.PRNGKey(0))
    # random availability flags in every agent's slot (at least one action left each)
    idx = env.partition.avail_index
    flags = jax.random.bernoulli(jax.random.PRNGKey(2), 0.3, (8,) + idx.shape)
    flags = flags.at[..., 4].set(True)  # "stop", always available in SMAX
    obs = obs.at[:, idx].set(flags.astype(jnp.float32))
    keys = jax.random.split(jax.random.PRNGKey(3), 2000)
    acts = jax.vmap(lambda k: policy.act(params.actor, None, obs, k)[1])(keys)  # [K, 8, 3]
    picked = np.take_along_axis(np.asarray(flags)[None], np.asarray(acts)[..., None], -1)
    assert picked.all(), "a masked action was sampled"
    # the policy does spread over the available ones (not only 'stop')
    assert len(np.unique(np.asarray(acts))) > 3
    mode = policy.act(params.actor, None, obs, None, deterministic=True)[1]
    assert np.take_along_axis(np.asarray(flags), np.asarray(mode)[..., None], -1).all()


def test_masked_categorical_has_no_mass_and_finite_terms():
    d = {"logits": jnp.array([[0.3, -1.0, 2.0, 0.5]])}
    avail = jnp.array([[True, False, True, False]])
    m = Categorical.masked(d, avail)
    p = jnp.exp(jax.nn.log_softmax(m["logits"]))
    np.testing.assert_allclose(p[0, [1, 3]], 0.0, atol=1e-30)
    # the remaining mass is the softmax over the available logits (hand value)
    e = np.exp([0.3, 2.0])
    np.testing.assert_allclose(p[0, [0, 2]], e / e.sum(), rtol=1e-6)
    q = Categorical.masked({"logits": jnp.zeros((1, 4))}, avail)
    for v in (Categorical.entropy(m), Categorical.kl(m, q), Categorical.kl(q, m)):
        assert np.isfinite(np.asarray(v)).all()
    np.testing.assert_allclose(Categorical.entropy(q), np.log(2.0), rtol=1e-6)


def test_global_state_reaches_the_centralised_critic():
    from jaxmarl import make
    from jaxmarl.environments.smax import map_name_to_scenario

    env = _smax(2)
    state, obs = env.reset(jax.random.PRNGKey(0))
    raw = make("HeuristicEnemySMAX", scenario=map_name_to_scenario("3m"))
    sim = jax.tree.map(lambda x: x[0], state.sim[0])
    world = raw.get_world_state(sim)
    part = env.partition
    np.testing.assert_allclose(part.state(obs)[0], world, rtol=1e-6)
    own = raw.get_obs(sim)
    for i, a in enumerate(part.agent_names):
        np.testing.assert_allclose(part.agent_obs(obs)[0, i, :own[a].size], own[a], rtol=1e-6)

    cfg = TrainConfig(algo="happo", env="jaxmarl:SMAX-3m", num_envs=2)
    policy = build_policy(cfg, env)
    params = policy.init(jax.random.PRNGKey(1), env.spec.obs_shape)
    view = policy.view(obs)
    v = policy.value(params.critic, view)
    # the critic reads the world state: changing an agent's own view (not the state) or the
    # flags leaves V unchanged; changing the state moves it
    agent_only = obs.at[:, part.obs_index[0, 0]].add(5.0)
    np.testing.assert_allclose(policy.value(params.critic, policy.view(agent_only)), v)
    moved = obs.at[:, part.state_index[0]].add(5.0)
    assert not np.allclose(policy.value(params.critic, policy.view(moved)), v)


def test_won_battles_are_successes_and_time_limits_truncate():
    env = _smax(2, episode_length=3)
    assert env.spec.success and env.spec.max_episode_steps == 3
    step = jax.jit(env.step)
    state, obs = env.reset(jax.random.PRNGKey(0))
    stop = jnp.full((2, 3), 4, jnp.int32)  # every ally stays where it is
    for _ in range(3):
        state, ts = step(state, stop)
    assert ts.truncated.all() and not ts.terminated.any() and not ts.success.any()

    # every enemy dead (env 0) / every ally dead (env 1) before the step: the battle ends,
    # won in env 0 only
    state, _ = env.reset(jax.random.PRNGKey(1))
    sim, key = state.sim
    dead = jnp.zeros((2, 6), bool).at[0, 3:].set(True).at[1, :3].set(True)
    smax = sim.state
    sim = sim.replace(state=smax.replace(unit_alive=smax.unit_alive & ~dead,
                                         unit_health=jnp.where(dead, 0.0, smax.unit_health)))
    _, ts = step(state.replace(sim=(sim, key)), stop)
    np.testing.assert_array_equal(ts.terminated, [True, True])
    np.testing.assert_array_equal(ts.success, [True, False])
    assert not ts.truncated.any()


def test_mpe_tasks_and_their_time_limit():
    env = make_env("jaxmarl:MPE_simple_spread_v3", 2)
    assert env.spec.max_episode_steps == 25 and not env.spec.success
    assert env.partition.n_agents == 3 and env.partition.avail_index is None
    # the state a critic sees is the agents' observations together
    _, obs = env.reset(jax.random.PRNGKey(0))
    assert env.partition.state(obs).shape == (2, 54)
    # speaker and listener: 3 and 5 choices; the speaker's last two are never available
    sl = make_env("jaxmarl:MPE_simple_speaker_listener_v4", 2)
    _, obs = sl.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(sl.partition.avail(obs)[0], [[1, 1, 1, 0, 0], [1] * 5])
    assert sl.partition.obs_sizes == (3, 11)
    step = jax.jit(env.step)
    state, _ = env.reset(jax.random.PRNGKey(0))
    for t in range(25):
        state, ts = step(state, jnp.zeros((2, 3), jnp.int32))
        assert bool(ts.done.any()) == (t == 24)
    assert ts.truncated.all() and not ts.terminated.any()


def test_unknown_and_adversarial_ids_are_one_line():
    with pytest.raises(ConfigError, match="did you mean 'jaxmarl:SMAX-3m'"):
        make_env("jaxmarl:SMAX-3n", 2)
    with pytest.raises(ConfigError, match="unknown environment 'jaxmarl:MPE_simple_tag_v3'"):
        make_env("jaxmarl:MPE_simple_tag_v3", 2)


@pytest.mark.slow
def test_smax_trains_evaluates_and_reloads(tmp_path):
    """The issue's command, end to end in fresh processes: train HAPPO on SMAX 3m, evaluate
    the run, and reload its policy to act."""
    out = tmp_path / "runs"
    cmd = [sys.executable, "-m", "pgjax.cli", "train", "--env", "jaxmarl:SMAX-3m",
           "--agent-update", "sequential", "--steps", "20480", "--eval-envs", "8",
           "--eval-every", "5", "--evals", "3",
           "--out", str(out), "--name", "smax"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    root = out / "smax"
    returns = json.loads((root / "config.json").read_text())["returns"]
    assert "eval_success" in returns and "won" in returns["eval_success"]
    from pgjax.analysis.results import run_metrics

    rows = run_metrics(root / "runs" / "seed0")
    won = rows["eval_success"].dropna()
    assert len(won) >= 2 and ((won >= 0) & (won <= 1)).all()
    ev = subprocess.run([sys.executable, "-m", "pgjax.cli", "eval", str(root), "--episodes", "4"],
                        capture_output=True, text=True, timeout=600)
    assert ev.returncode == 0 and "success_rate" in ev.stdout, ev.stderr[-2000:]

    from pgjax import load_policy

    policy = load_policy(root)
    env = make_env("jaxmarl:SMAX-3m", 3)
    state, obs = env.reset(jax.random.PRNGKey(0))
    action, carry = policy.mode(obs)
    avail = np.asarray(env.partition.avail(obs))
    assert np.asarray(action).shape == (3, 3)
    assert np.take_along_axis(avail, np.asarray(action)[..., None], -1).all()


@pytest.mark.slow
@pytest.mark.parametrize("algo, shared", [("hatrpo", False), ("haspo", False),
                                          ("hafixpo", False), ("mappo", True), ("ippo", False)])
def test_every_scheme_trains_on_smax(algo, shared, tmp_path):
    """Each multi-agent scheme trains on SMAX unchanged (masks, world state, won battles)."""
    from pgjax.analysis.results import run_metrics
    from pgjax.loop.runner import run

    cfg = TrainConfig(algo=algo, env="jaxmarl:SMAX-3m", num_envs=8, rollout_len=16,
                      steps=8 * 16 * 2, eval_every=1, evals=2, eval_envs=4, quiet=True,
                      out=str(tmp_path), name="s").with_options(
        {"agents.share_actor": shared})
    run(cfg)
    rows = run_metrics(tmp_path / "s" / "runs" / "seed0")
    assert np.isfinite(rows["eval_return"].dropna()).all()
    assert len(rows["eval_success"].dropna()) == 2
    assert np.isfinite(rows["pg_loss"].iloc[1:]).all()
