"""Running statistics and the networks: --norm.obs-stats preserve (after a statistics update the
refitted networks compute on the newly normalised observations exactly what the old networks
computed on the old ones; the drift diagnostics measure what the update would otherwise do),
--norm.obs-stats-steps (statistics frozen after N steps) and --norm.value-norm (critic targets in
units of the return std, advantages raw)."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.model.nets import Parts
from pgjax import ConfigError, TrainConfig
from pgjax.algos import PPOConfig
from pgjax.envs import ActionSpace
from pgjax.model.normalize import RunningStats, normalize
from pgjax.model.policies import make_actor_critic, make_recurrent_policy, refold
from pgjax.training.train import Trainer


def _stats(key, d, base=None):
    """Random statistics, or ``base`` moved by a typical update (no entry near the clip)."""
    k1, k2 = jax.random.split(key)
    if base is None:
        return RunningStats(mean=jax.random.normal(k1, (d,)),
                            var=jnp.exp(jax.random.normal(k2, (d,))), count=jnp.float32(10.0))
    return RunningStats(mean=base.mean + 0.3 * jnp.sqrt(base.var) * jax.random.normal(k1, (d,)),
                        var=base.var * jnp.exp(0.3 * jax.random.normal(k2, (d,))),
                        count=base.count + 10.0)


def _fold(old, new):
    s_old, s_new = jnp.sqrt(old.var + 1e-8), jnp.sqrt(new.var + 1e-8)
    return s_new / s_old, (new.mean - old.mean) / s_old


def _perturbed(params, key):
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree.unflatten(tree, [x + 0.3 * jax.random.normal(k, x.shape)
                                     for x, k in zip(leaves, keys)])


@pytest.mark.parametrize("action", [ActionSpace("box", 2), ActionSpace("discrete", 3)])
def test_refitted_feedforward_networks_compute_the_same_outputs(action):
    d = 5
    policy = make_actor_critic(action, "auto", (16, 8), (16,))
    params = _perturbed(policy.init(jax.random.PRNGKey(0), (d,)), jax.random.PRNGKey(1))
    old = _stats(jax.random.PRNGKey(2), d)
    new = _stats(jax.random.PRNGKey(3), d, old)
    x = old.mean + jnp.sqrt(old.var) * jax.random.normal(jax.random.PRNGKey(4), (64, d))
    assert float(jnp.abs(normalize(new, x, clip=jnp.inf)).max()) < 10  # no entry clipped
    folded = refold(policy, params, *_fold(old, new))
    before_d = policy.dist(params.actor, normalize(old, x))
    after_d = policy.dist(folded.actor, normalize(new, x))
    for a, b in zip(jax.tree.leaves(before_d), jax.tree.leaves(after_d)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(policy.value(params.critic, normalize(old, x)),
                               policy.value(folded.critic, normalize(new, x)),
                               rtol=1e-4, atol=1e-4)
    # without the refit the outputs do change: the test can fail
    moved = policy.dist(params.actor, normalize(new, x))
    assert max(float(jnp.abs(a - b).max()) for a, b in
               zip(jax.tree.leaves(before_d), jax.tree.leaves(moved))) > 1e-2


def test_refitted_recurrent_networks_compute_the_same_steps():
    d, h = 4, 6
    cfg = TrainConfig(policy="recurrent").with_options(
        {"net": {"actor_hidden": (8,), "critic_hidden": (8,)}, "recurrent.carry_size": h})
    policy = make_recurrent_policy(ActionSpace("box", 2), cfg.net, cfg.recurrent)
    params = _perturbed(policy.init(jax.random.PRNGKey(0), (d,)), jax.random.PRNGKey(1))
    old = _stats(jax.random.PRNGKey(2), d)
    new = _stats(jax.random.PRNGKey(3), d, old)
    x = old.mean + jnp.sqrt(old.var) * jax.random.normal(jax.random.PRNGKey(4), (16, d))
    carry = jax.random.normal(jax.random.PRNGKey(5), (16, h))
    folded = refold(policy, params, *_fold(old, new))
    for net, p, f in ((policy.actor, params.actor, folded.actor),
                      (policy.critic, params.critic, folded.critic)):
        a = net.apply(p, carry, normalize(old, x))
        b = net.apply(f, carry, normalize(new, x))
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
            np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-4)


SMALL = TrainConfig(env="jax:cartpole", diagnostics="full", num_envs=8, rollout_len=16,
                    eval_every=2,
                    eval_envs=2, steps=8 * 16 * 4, quiet=True,
                    ppo=PPOConfig(epochs=2, minibatches=4))


@pytest.mark.parametrize("policy", ["auto", pytest.param("stateful", marks=pytest.mark.slow)])
def test_preserve_leaves_the_policy_unchanged_by_the_statistics_update(policy):
    """One iteration: the policy acting next (new parameters, new statistics) equals the
    updated policy under the statistics it was updated with, on the rollout's states."""
    cfg = dataclasses.replace(SMALL, policy=policy).with_options(
        {"norm.obs_stats": "preserve", **({"stateful.z_dim": 3} if policy == "stateful" else {})})
    trainer = Trainer(cfg)
    hp = cfg.base_hparams()
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    captured = {}
    update = trainer.algo.update

    def spy(params, algo_state, batch, key, hp_, progress):
        out = update(params, algo_state, batch, key, hp_, progress)
        captured["params"] = out[0]
        return out

    trainer.algo = trainer.algo._replace(update=spy)
    new_state, metrics = trainer.iteration(state, hp)
    old = state.obs_stats  # states the policy acted on, none of them clipped
    x = old.mean + jnp.sqrt(old.var) * jax.random.normal(
        jax.random.PRNGKey(7), (32,) + trainer.env.spec.obs_shape)
    for stats in (old, new_state.obs_stats):
        assert float(jnp.abs(normalize(stats, x, clip=jnp.inf)).max()) < 10
    acted = trainer.policy.dist(new_state.params.actor, normalize(new_state.obs_stats, x))
    updated = trainer.policy.dist(captured["params"].actor, normalize(state.obs_stats, x))
    for a, b in zip(jax.tree.leaves(acted), jax.tree.leaves(updated)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    # the statistics did move, and the diagnostics say how much that alone would change
    assert float(metrics["kl_stats_mean"]) > 0 and float(metrics["obs_std_drift"]) > 0


def test_obs_stats_steps_freezes_the_statistics_after_that_many_steps():
    """Statistics move while fewer than --norm.obs-stats-steps steps were collected before a
    rollout, then stay bit-identical; without the option they keep moving."""
    batch = SMALL.num_envs * SMALL.rollout_len
    trajectories = {}
    for limit in (0, 2 * batch):
        cfg = SMALL.with_options({"norm.obs_stats_steps": limit})
        trainer = Trainer(cfg)
        hp = cfg.base_hparams()
        state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
        step = jax.jit(trainer.iteration)
        means = [np.asarray(state.obs_stats.mean)]
        for _ in range(4):
            state, _ = step(state, hp)
            means.append(np.asarray(state.obs_stats.mean))
        trajectories[limit] = means
    free, frozen = trajectories[0], trajectories[2 * batch]
    # the first two rollouts (0 and batch steps seen before them) update, as without the option
    for i in (1, 2):
        np.testing.assert_array_equal(frozen[i], free[i])
        assert np.abs(frozen[i] - frozen[i - 1]).max() > 0
    np.testing.assert_array_equal(frozen[3], frozen[2])
    np.testing.assert_array_equal(frozen[4], frozen[2])
    assert np.abs(free[4] - free[2]).max() > 0


def test_value_norm_keeps_advantages_raw_and_targets_in_return_std_units():
    """Scaling every reward by c (with the return statistics' variance scaled by c^2) scales
    the advantages by c and leaves the critic's targets unchanged; the statistics then
    follow the lambda-returns."""
    cfg = SMALL.with_options({"norm.value_norm": True, "norm.normalize_reward": False})
    trainer = Trainer(cfg)
    hp = cfg.base_hparams()
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    _, traj = trainer.collect(state, jax.random.PRNGKey(1))
    out = {}
    for c in (1.0, 3.0):
        st = state.replace(ret_stats=state.ret_stats.replace(var=jnp.float32(4.0 * c * c)))
        out[c] = trainer.make_batch(st, traj.replace(reward=traj.reward * c), hp)
    np.testing.assert_allclose(out[3.0].batch.advantage, 3.0 * out[1.0].batch.advantage,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[3.0].batch.ret, out[1.0].batch.ret, rtol=1e-4, atol=1e-5)
    # targets = lambda-returns / old std (2); the statistics merged those lambda-returns
    lam_ret = out[1.0].batch.ret * 2.0
    assert abs(float(out[1.0].state.ret_stats.mean) - float(lam_ret.mean())) < 1e-3
    assert float(jnp.abs(out[1.0].batch.advantage).max()) > 0
    with pytest.raises(ConfigError, match="--norm.no-normalize-reward"):
        SMALL.with_options({"norm.value_norm": True}).validate()


def test_obs_stats_errors():
    with pytest.raises(ConfigError, match="--norm.obs-stats-steps 0"):
        SMALL.with_options({"norm.obs_stats_steps": -1}).validate()
    with pytest.raises(ConfigError, match="--norm.obs-stats with one of running, preserve"):
        SMALL.with_options({"norm.obs_stats": "frozen"}).validate()
    with pytest.raises(ConfigError, match="multi-agent"):
        dataclasses.replace(SMALL, algo="happo").with_options(
            {"norm.obs_stats": "preserve"}).validate()
    with pytest.raises(ConfigError, match="--net.actor-hidden"):
        dataclasses.replace(SMALL, policy="recurrent").with_options(
            {"norm.obs_stats": "preserve", "net.actor_hidden": ()}).validate()
