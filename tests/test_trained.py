"""Trained policies reloaded from run directories: `pgjax eval` reproduces a run's own last
evaluation, `load_policy` acts as the trainer does, and memory kinds carry their state."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from pgjax import TrainConfig, Trainer, load_policy, make_env, run
from pgjax.algos import PPOConfig
from pgjax.cli import main
from pgjax.loop.runner import run_keys
from pgjax.tools.trained import evaluate
from pgjax.analysis.results import run_metrics

SMALL = TrainConfig(env="jax:cartpole", num_envs=8, rollout_len=16, eval_every=2, eval_envs=4,
                    episode_length=100, steps=8 * 16 * 2 * 2, quiet=True, checkpoint_every=0,
                    ppo=PPOConfig(epochs=2, minibatches=4, ent_coef=0.01))


def _last_eval(records):
    return np.array([run_metrics(d)["eval_return"].dropna().iloc[-1]
                     for d in records.run_dirs])


@pytest.mark.slow
def test_eval_with_the_final_keys_reproduces_the_last_recorded_evaluation(tmp_path, capsys):
    records = run(dataclasses.replace(SMALL, seeds=2, grid=("ppo.lr=3e-4,1e-3",),
                                      out=str(tmp_path), name="r"))
    table = evaluate(records.root, final_keys=True)
    assert list(table["run"]) == [d.name for d in records.run_dirs]
    np.testing.assert_allclose(table["return_mean"], _last_eval(records), rtol=1e-6)
    assert (table["episodes"] == SMALL.eval_envs).all()
    assert main(["eval", str(records.root), "--episodes", "8", "--seed", "3"]) == 0
    written = pd.read_csv(records.root / "eval.csv")
    assert len(written) == 4 and (written["episodes"] == 8).all()
    assert (written["ci95_lo"] <= written["return_mean"]).all()
    assert "lr=0.001" in capsys.readouterr().out  # the per-group table
    assert main(["eval", str(records.root), "--episodes", "4", "--stochastic"]) == 0
    assert main(["eval", str(tmp_path / "nothing")]) == 2


def test_load_policy_acts_as_the_trained_state_does(tmp_path):
    """Actions of the reloaded policy on random observations equal those of the final state
    of the same run computed by the whole-run function (the trainer's own mode actions)."""
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="p", steps=8 * 16 * 2)
    records = run(cfg)
    trainer = Trainer(cfg)
    (seed, hp), = cfg.runs()
    train_key, _ = run_keys([(seed, hp)])
    state, _ = jax.jit(trainer.train)(train_key[0], {k: jnp.float32(v) for k, v in hp.items()})
    obs = jax.random.normal(jax.random.PRNGKey(7), (256,) + trainer.env.spec.obs_shape) * 2
    _, want = trainer.policy.act(state.params.actor, None, trainer.normalizer(state)(obs),
                                 None, deterministic=True)
    policy = load_policy(records.root)
    got, _ = policy.mode(obs)
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(np.asarray(want))) == 2  # both actions occur: a real comparison
    sampled, _ = policy.act(obs, jax.random.PRNGKey(0))
    assert sampled.shape == want.shape and (np.asarray(sampled) != np.asarray(want)).any()
    trainer.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["stateful"] + [pytest.param(k, marks=pytest.mark.slow)
                                                 for k in ("window", "recurrent")])
def test_memory_kinds_carry_their_memory_on_the_task_observations(kind, tmp_path):
    """A stateful (S2PG) or window policy stepped by hand on the raw task, carrying its memory
    with `load_policy`, scores what the trainer's evaluation on the wrapped task scores."""
    cfg = dataclasses.replace(SMALL, env="jax:memory-2", policy=kind,
                              out=str(tmp_path), name=kind, eval_envs=16).with_options(
        {"stateful": {"stateful.z_dim": 4}, "window": {"window.size": 3}}.get(kind, {}))
    records = run(cfg)
    want = evaluate(records.root, final_keys=True)["return_mean"].iloc[0]
    policy = load_policy(records.root)
    env = make_env(cfg.env, cfg.eval_envs, cfg.episode_length)
    _, eval_key = run_keys(cfg.runs())
    key = jax.random.fold_in(eval_key[0], cfg.num_chunks)
    state, obs = env.reset(key)
    carry, total = None, np.zeros(cfg.eval_envs)
    alive = np.ones(cfg.eval_envs, bool)
    for _ in range(env.spec.max_episode_steps):
        action, carry = policy.mode(obs, carry)
        state, ts = env.step(state, action)
        total += np.where(alive, np.asarray(ts.reward), 0.0)
        alive &= ~np.asarray(ts.done)
        carry, obs = policy.reset(carry, ts.done), ts.obs
        if not alive.any():
            break
    np.testing.assert_allclose(total.mean(), want, rtol=1e-5)


@pytest.mark.slow
def test_a_multiagent_run_evaluates(tmp_path, capsys):
    cfg = dataclasses.replace(SMALL, env="matrix:climbing", algo="happo", num_envs=8,
                              episode_length=None,
                              rollout_len=8, eval_envs=4, steps=8 * 8 * 2 * 2,
                              out=str(tmp_path), name="ma")
    records = run(cfg)
    table = evaluate(records.root, final_keys=True)
    np.testing.assert_allclose(table["return_mean"], _last_eval(records), rtol=1e-6)
    assert main(["eval", str(records.root / "runs" / records.run_dirs[0].name)]) == 0
