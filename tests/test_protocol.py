"""The protocol around the update rules: schedule horizons independent of the run length,
evaluation modes, HARL's multi-agent actor view and bounded std, and records written before
these options existed."""
from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from helpers import interrupting, Interrupt
from pgjax.training import presets
from pgjax.training.config import RENAMED, TrainConfig
from pgjax.training.kinds import StatefulConfig
from pgjax.core.errors import ConfigError
from pgjax.model.nets import GaussianActor
from pgjax.loop.runner import run
from pgjax.analysis.results import run_metrics

TINY = dict(env="jax:cartpole", num_envs=4, rollout_len=32, eval_every=2, eval_envs=4,
            quiet=True)


def _metrics(root, run="seed0"):
    return run_metrics(root / "runs" / run)


def test_a_shorter_run_is_an_exact_prefix_of_the_full_schedule(tmp_path):
    """With --anneal-steps the learning rate of every update depends on the horizon, not on
    --steps: a run of a quarter of the horizon has, update by update, the rates of the full
    run (and the whole training, which those rates drive, is the same)."""
    full = TrainConfig(**TINY, steps=4096, anneal_steps=4096, out=str(tmp_path), name="full")
    short = TrainConfig(**TINY, steps=1024, anneal_steps=4096, out=str(tmp_path), name="short")
    run(full)
    run(short)
    a, b = _metrics(tmp_path / "full"), _metrics(tmp_path / "short")
    b = b[b["iteration"] > 0]
    a = a[a["iteration"].isin(b["iteration"])]
    assert len(b) == 8
    # the full run's rate falls linearly to 0 at its last update: lr * (1 - i / 32)
    want = 3e-4 * (1 - (b["iteration"].to_numpy() - 1) / 32)
    np.testing.assert_allclose(b["lr"].to_numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(a["lr"].to_numpy(), b["lr"].to_numpy(), rtol=0)
    np.testing.assert_allclose(a["approx_kl"].to_numpy(), b["approx_kl"].to_numpy(), rtol=1e-5)
    # without a horizon, the short run anneals over its own length (the old behaviour)
    own = TrainConfig(**TINY, steps=1024)
    assert own.anneal_iterations == own.num_iterations == 8


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_schedule_is_a_prefix_of_the_papers_run(name):
    """Each preset's run shortened with --steps anneals over the preset's horizon: its
    schedule's progress at every update is the full run's."""
    env = {"happo-paper": "mabrax:hopper_3x1"}.get(name, "brax:hopper")
    full = TrainConfig.from_preset(name, env=env)
    short = TrainConfig.from_preset(name, env=env, steps=full.batch_size * full.eval_every * 3)
    assert short.anneal_iterations == full.anneal_iterations
    if full.anneal_steps is not None:
        assert full.anneal_iterations == full.anneal_steps // full.batch_size


def test_schedule_horizon_errors():
    with pytest.raises(ConfigError, match="anneal-steps >= --steps"):
        TrainConfig(**TINY, steps=4096, anneal_steps=2048).validate()
    with pytest.raises(ConfigError, match="positive --anneal-steps"):
        TrainConfig(**TINY, steps=10, anneal_steps=0).validate()


def test_eval_modes_resolve_per_policy_kind():
    assert TrainConfig(**TINY).eval_modes == ("deterministic",)
    assert TrainConfig(**TINY, policy="stateful").eval_modes == ("deterministic", "stochastic")
    assert TrainConfig(**TINY, eval_mode="stochastic").eval_modes == ("stochastic",)
    with pytest.raises(ConfigError, match="--eval-mode"):
        TrainConfig(**TINY, eval_mode="greedy").validate()
    assert TrainConfig.from_preset("s2pg-paper", env="brax:hopper").eval_modes == \
        ("deterministic", "stochastic")


def test_stateful_runs_record_both_evaluations(tmp_path):
    """The stateful policy's default records the deterministic and the stochastic held-out
    return; the stochastic one is what its sampled policy scores, evaluated again from the
    saved parameters by ``pgjax eval --stochastic``'s code path."""
    cfg = TrainConfig(**TINY, steps=512, evals=2, policy="stateful",
                      out=str(tmp_path), name="s").with_options({"stateful.z_dim": 4})
    run(cfg)
    m = _metrics(tmp_path / "s")
    ev = m[m["eval_return"].notna()]
    assert len(ev) == 2 and ev["eval_return_stochastic"].notna().all()
    assert ev["eval_length_stochastic"].between(1, 500).all()
    recorded = json.loads((tmp_path / "s" / "config.json").read_text())["returns"]
    assert "stochastic policy" in recorded["eval_return_stochastic"]
    # a feedforward policy records only the deterministic evaluation (as before)
    run(TrainConfig(**TINY, steps=256, out=str(tmp_path), name="f"))
    assert "eval_return_stochastic" not in _metrics(tmp_path / "f").columns


def test_plot_tables_name_the_evaluation_they_show(tmp_path):
    from pgjax.tools.plotting import aggregate_tables, load

    run(TrainConfig(**TINY, steps=512, evals=2, eval_mode="both", out=str(tmp_path),
                    name="b"))
    df = load([tmp_path / "b"])
    agg, _ = aggregate_tables(df, reps=50)
    assert agg["returns"].iloc[0] == "held-out eval return (stochastic policy)"
    agg, _ = aggregate_tables(df, reps=50, source="eval_return")
    assert agg["returns"].iloc[0] == "held-out eval return (deterministic policy)"


def test_full_state_id_gives_every_agent_the_state_and_its_id():
    """--agents.obs full_state_id: agent i's actor input is the whole global state followed
    by the one-hot vector of i (HARL's MA-MuJoCo actors), written out by hand here."""
    from pgjax.envs import make_env
    from pgjax.training.train import build_policy

    cfg = TrainConfig(env="mabrax:hopper_3x1", algo="happo").with_options(
        {"agents.obs": "full_state_id"})
    env = make_env(cfg.env, 1)
    policy = build_policy(cfg, env)
    s = jnp.arange(11.0)[None]
    view = np.asarray(policy.agent_obs(s))[0]
    want = np.stack([np.concatenate([np.arange(11.0), np.eye(3)[i]]) for i in range(3)])
    np.testing.assert_array_equal(view, want)
    local = build_policy(TrainConfig(env="mabrax:hopper_3x1", algo="happo"), env)
    local_view = np.asarray(local.agent_obs(s))[0]
    np.testing.assert_array_equal(local_view, np.asarray(env.partition.agent_obs(s))[0])
    assert not all(np.array_equal(v, np.arange(11.0)) for v in local_view)


def test_bounded_std_starts_at_its_initial_value_and_stays_below_its_bound():
    init = math.log(0.5 / (1 + math.exp(-1.0)))  # HARL: 0.5 * sigmoid(1)
    actor = GaussianActor((8,), 3, init_log_std=init, std_max=0.5)
    p = actor.init(jax.random.PRNGKey(0), jnp.zeros((1, 5)))
    np.testing.assert_allclose(p["params"]["std_logit"], 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.exp(actor.apply(p, jnp.zeros((1, 5)))["log_std"]),
                               0.5 / (1 + np.exp(-1.0)), rtol=1e-6)
    for logit in (-30.0, 0.0, 30.0):
        q = jax.tree.map(lambda x: x, p)
        q["params"]["std_logit"] = jnp.full(3, logit)
        std = np.exp(actor.apply(q, jnp.zeros((1, 5)))["log_std"])
        np.testing.assert_allclose(std, 0.5 / (1 + np.exp(-logit)), rtol=1e-5)
        assert (std <= 0.5).all()
    with pytest.raises(ConfigError, match="below net.std_max"):
        TrainConfig().with_options({"net.std_max": 0.5}).validate()  # exp(0) = 1 is above the bound


def test_std_floor_starts_at_its_initial_value_and_stays_above_its_bound():
    """--net.std-min: std = std_min + exp(theta) alone, std_min + (std_max - std_min) *
    sigmoid(theta) with std_max; both start at exp(init_log_std)."""
    x = jnp.zeros((1, 5))
    floor = GaussianActor((8,), 2, init_log_std=math.log(0.6), std_min=0.1)
    p = floor.init(jax.random.PRNGKey(0), x)
    np.testing.assert_allclose(p["params"]["log_std_excess"], math.log(0.5), rtol=1e-6)
    for theta in (-50.0, 0.0, 2.0):
        p["params"]["log_std_excess"] = jnp.full(2, theta)
        np.testing.assert_allclose(np.exp(floor.apply(p, x)["log_std"]), 0.1 + np.exp(theta),
                                   rtol=1e-5)
    both = GaussianActor((8,), 2, init_log_std=math.log(0.3), std_min=0.1, std_max=0.5)
    q = both.init(jax.random.PRNGKey(0), x)
    np.testing.assert_allclose(np.exp(both.apply(q, x)["log_std"]), 0.3, rtol=1e-5)
    for logit, want in ((-40.0, 0.1), (40.0, 0.5)):
        q["params"]["std_logit"] = jnp.full(2, logit)
        np.testing.assert_allclose(np.exp(both.apply(q, x)["log_std"]), want, rtol=1e-5)
    with pytest.raises(ConfigError, match="above net.std_min"):
        TrainConfig().with_options({"net.std_min": 2.0}).validate()  # exp(0) = 1 is below it
    with pytest.raises(ConfigError, match="std_min must be a positive"):
        TrainConfig().with_options({"net.std_min": -0.1}).validate()


def test_records_written_before_the_protocol_options_still_resume(tmp_path, monkeypatch):
    """A run directory whose config.json predates --eval-mode, --anneal-steps, --agents.obs
    and --net.std-max (and a rule's target_kl_mode), and with the options since moved into
    sub-configs under their old names, resumes with the defaults (which resolve to what it
    did), and the resumed records equal an uninterrupted run's."""
    base = dict(**TINY, steps=1024, checkpoint_seconds=0, policy="stateful",
                stateful=StatefulConfig(z_dim=4))
    run(TrainConfig(**base, eval_mode="deterministic", out=str(tmp_path), name="ref"))
    interrupting(monkeypatch, 2)
    cfg = TrainConfig(**base, eval_mode="deterministic", out=str(tmp_path), name="old")
    with pytest.raises(Interrupt):
        run(cfg)
    monkeypatch.undo()
    path = tmp_path / "old" / "config.json"
    record = json.loads(path.read_text())
    conf = record["config"]
    for old, new in RENAMED.items():  # the flat layout of then
        head, _, tail = new.partition(".")
        if isinstance(conf.get(head), dict):
            conf[old] = conf[head][tail]
    for head in {new.partition(".")[0] for new in RENAMED.values()}:
        conf.pop(head, None) if isinstance(conf.get(head), dict) else None
    assert "z_dim" in conf and "stateful" not in conf and "normalize_obs" in conf
    for key in ("eval_mode", "anneal_steps", "std_max"):
        conf.pop(key)
    record["config"]["ppo"].pop("target_kl_mode")  # a rule's option added since
    path.write_text(json.dumps(record))
    # the stateful default now records both evaluations: a different program, refused
    with pytest.raises(ConfigError, match="eval_mode"):
        run(TrainConfig(**base, out=str(tmp_path), name="old", resume=True))
    run(TrainConfig(**base, eval_mode="deterministic", out=str(tmp_path), name="old",
                    resume=True))
    a, b = _metrics(tmp_path / "ref"), _metrics(tmp_path / "old")
    pd.testing.assert_frame_equal(a.drop(columns="wall_time_s"), b.drop(columns="wall_time_s"))
