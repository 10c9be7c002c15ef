"""``--ppo.recompute-adv`` (Tianshou's ``recompute_advantage``): before every epoch after the
first, the batch's values, advantages and value targets come from the current critic, checked
against a numpy GAE over the rollout; the epoch loop hands each epoch the refreshed batch."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.model.nets import Parts
from pgjax import ConfigError, TrainConfig
from pgjax.algos import PPOConfig
from pgjax.algos.common import Refresh
from pgjax.algos.pieces import EpochResult, SGDState, adam_direction, run_epochs
from pgjax.training.train import Trainer

CFG = TrainConfig(env="jax:cartpole", num_envs=4, rollout_len=32, eval_every=1, eval_envs=2,
                  steps=4 * 32 * 2, quiet=True,
                  ppo=PPOConfig(epochs=3, minibatches=4, recompute_adv=True))


def numpy_gae(r, v, v_next, term, trunc, gamma, lam):
    """GAE by the textbook backward loop, over [T, N] arrays."""
    adv = np.zeros_like(r)
    nxt = np.zeros_like(r[0])
    for t in reversed(range(len(r))):
        delta = r[t] + gamma * (1 - term[t]) * v_next[t] - v[t]
        nxt = delta + gamma * lam * (1 - np.maximum(term[t], trunc[t])) * nxt
        adv[t] = nxt
    return adv, adv + v


@pytest.mark.parametrize("value_norm", [False, True])
def test_refresh_is_gae_under_the_given_critic(value_norm):
    cfg = CFG.with_options({"norm.value_norm": value_norm, "norm.normalize_reward": False})
    trainer = Trainer(cfg)
    hp = cfg.base_hparams()
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    state = state.replace(ret_stats=state.ret_stats.replace(var=jnp.float32(9.0)))
    _, traj = trainer.collect(state, jax.random.PRNGKey(1))
    assert bool(traj.terminated.any())  # episodes end inside the rollout
    prep = trainer.make_batch(state, traj, hp)
    # under the rollout's own parameters the refresh reproduces the batch
    same, stats = prep.refresh.fn(state.params, prep.batch, state.ret_stats)
    for f in ("value", "advantage", "ret"):
        np.testing.assert_allclose(getattr(same, f), getattr(prep.batch, f), rtol=1e-6)
    # under other critic parameters: a numpy GAE over that critic's values
    other = jax.tree.map(lambda x: x + 0.05 * jnp.sign(x), state.params)
    new, _ = prep.refresh.fn(other, prep.batch, state.ret_stats)
    norm = trainer.normalizer(state)
    fwd = trainer.policy.forward(other, norm(traj.obs), norm(traj.final_obs), traj.action,
                                 traj.terminated | traj.truncated, None, None)
    scale = 3.0 if value_norm else 1.0
    v, v_next = np.asarray(fwd.value) * scale, np.asarray(fwd.next_value) * scale
    assert np.abs(v - np.asarray(prep.forward.value) * scale).max() > 1e-3  # a new critic
    adv, ret = numpy_gae(np.asarray(prep.reward), v, v_next,
                         np.asarray(traj.terminated, np.float32),
                         np.asarray(traj.truncated, np.float32), 0.99, 0.95)
    np.testing.assert_allclose(new.advantage, adv.reshape(-1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(new.ret, ret.reshape(-1) / scale, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(new.value, np.asarray(fwd.value).reshape(-1), rtol=1e-5)
    # the statistics merge each recomputation's lambda-returns (tianshou's order: scale by
    # them as they stand, then merge)
    if value_norm:
        np.testing.assert_allclose(stats.mean, prep.state.ret_stats.mean, rtol=1e-5)
        np.testing.assert_allclose(prep.refresh.carry.count, state.ret_stats.count + 128)
        _, twice = prep.refresh.fn(state.params, prep.batch, prep.refresh.carry)
        assert float(twice.count) == pytest.approx(float(state.ret_stats.count) + 256)
    else:
        assert stats is state.ret_stats or float(stats.count) == float(state.ret_stats.count)
    # what the behaviour policy did stays as it was
    np.testing.assert_array_equal(new.log_prob, prep.batch.log_prob)
    np.testing.assert_array_equal(new.obs, prep.batch.obs)


def test_each_epoch_after_the_first_trains_on_the_refreshed_batch():
    seen = []

    def loss_fn(params, mb, hp, extra):
        return 0.5 * (params.actor - 1.0) ** 2 + 0.0 * params.critic, {}

    def fn(params, b, count):  # marks the batch with the number of recomputations
        return b + 1.0 + 0.0 * params.actor, count + 1

    def on_epoch(e):
        seen.append(e.batch)
        return EpochResult(e.params, e.state, logs={"b": e.batch.mean()})

    tx = adam_direction(1e-5)
    params = Parts(jnp.float32(0.0), jnp.float32(0.0))
    run = run_epochs(loss_fn, tx, 3, 2, on_epoch=on_epoch)
    hp = PPOConfig(max_grad_norm=jnp.float32(1e9))
    state = SGDState(params.map(tx.init))
    r = run(params, state, jnp.zeros(4), jax.random.PRNGKey(0), hp, 0.1, Refresh(fn, 5))
    np.testing.assert_array_equal(r.epoch_logs["b"], [0.0, 1.0, 2.0])
    assert int(r.refresh_carry) == 7
    r = run(params, state, jnp.zeros(4), jax.random.PRNGKey(0), hp, 0.1)
    np.testing.assert_array_equal(r.epoch_logs["b"], [0.0, 0.0, 0.0])


def test_recompute_adv_trains_and_is_refused_for_multi_agent_runs():
    trainer = Trainer(CFG)
    hp = CFG.base_hparams()
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    state, metrics = jax.jit(trainer.iteration)(state, hp)
    assert np.isfinite(float(metrics["v_loss"])) and int(metrics["grad_steps"]) == 12
    with pytest.raises(ConfigError, match="--ppo.recompute-adv is for single-agent"):
        dataclasses.replace(CFG, algo="happo", env="mabrax:ant_2x4").validate()
