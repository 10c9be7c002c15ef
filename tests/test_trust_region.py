"""TRPO, SPO and FixPO: the mathematics against independent references, and their
trust-region guarantees as properties over many seeds and batches."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

from pgjax.model.nets import Parts
from pgjax import TrainConfig, Trainer
from pgjax.algos import FixPOConfig, PPOConfig, TRPOConfig
from pgjax.algos.common import Batch
from pgjax.algos.spo import spo_surrogate
from pgjax.algos.trpo import (conjugate_gradient, fisher_vector_product, make_trpo,
                              policy_objectives)
from pgjax.model.distributions import broadcast_params
from pgjax.envs import ActionSpace
from pgjax.model.policies import make_actor_critic
from pgjax.core.errors import TrainingError
from pgjax.loop.runner import run


def random_batch(policy, params, key, size=64, obs_dim=3, adv_scale=1.0):
    k_obs, k_act, k_adv = jax.random.split(key, 3)
    obs = jax.random.normal(k_obs, (size, obs_dim))
    d = policy.dist(params.actor, obs)
    action = policy.distribution.sample(d, k_act)
    return Batch(obs=obs, action=action, log_prob=policy.distribution.log_prob(d, action),
                 dist=broadcast_params(d, (size,)), value=jnp.zeros(size),
                 advantage=adv_scale * jax.random.normal(k_adv, (size,)), ret=jnp.zeros(size))


@pytest.mark.parametrize("space", [ActionSpace("box", 2), ActionSpace("discrete", 3)])
def test_fisher_vector_product_equals_dense_fisher(space):
    with jax.enable_x64(True):
        policy = make_actor_critic(space, "auto", (5,), (5,))
        params = policy.init(jax.random.PRNGKey(0), (3,))
        # move away from the tiny-head init so the Fisher matrix is not nearly diagonal
        params = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.PRNGKey(1), x.shape,
                                                                       x.dtype), params)
        batch = random_batch(policy, params, jax.random.PRNGKey(2))
        flat0, unravel = ravel_pytree(params.actor)
        _, mean_kl = policy_objectives(policy, batch, batch.advantage, unravel)
        fisher = jax.jit(jax.hessian(mean_kl))(flat0)  # dense, by second-order autodiff
        fvp = jax.jit(fisher_vector_product(mean_kl, flat0, 0.1))
        for seed in range(3):
            v = jax.random.normal(jax.random.PRNGKey(10 + seed), flat0.shape, flat0.dtype)
            np.testing.assert_allclose(fvp(v), fisher @ v + 0.1 * v, rtol=1e-5, atol=1e-8)
        # it really is a Fisher matrix: symmetric positive semi-definite and not trivial
        np.testing.assert_allclose(fisher, fisher.T, atol=1e-7)
        eig = np.linalg.eigvalsh(np.asarray(fisher))
        assert eig.min() > -1e-8 and eig.max() > 1e-3

        # conjugate gradient against a dense solve, at the float32 precision TRPO runs in
        surrogate = policy_objectives(policy, batch, batch.advantage, unravel)[0]
        g = jax.jit(jax.grad(surrogate))(flat0)
        a = np.asarray(fisher + 0.1 * jnp.eye(flat0.size))
        exact = np.linalg.solve(a, np.asarray(g))
    a32, g32 = jnp.asarray(a, jnp.float32), jnp.asarray(g, jnp.float32)
    x = conjugate_gradient(lambda v: a32 @ v, g32, iters=flat0.size)
    assert np.linalg.norm(np.asarray(x) - exact) / np.linalg.norm(exact) < 1e-4


def test_trpo_accepted_steps_respect_delta_and_rejected_leave_params_unchanged():
    policy = make_actor_critic(ActionSpace("box", 2), "auto", (16,), (16,))
    outcomes = []
    for ls_steps in (1, 10):  # one line-search step: the full step, often rejected
        algo = make_trpo(TRPOConfig(ls_steps=ls_steps, vf_epochs=1, vf_minibatches=1), policy)

        @jax.jit
        @jax.vmap
        def one(key, delta):
            k_p, k_b, k_u = jax.random.split(key, 3)
            params = policy.init(k_p, (3,))
            params = params.replace(actor=jax.tree.map(
                lambda x: x + 0.2 * jax.random.normal(k_p, x.shape), params.actor))
            batch = random_batch(policy, params, k_b, size=128)
            hp = TRPOConfig(delta=delta)
            new, _, m, _ = algo.update(params, algo.init(params, hp), batch, k_u, hp, 0.0)
            flat_old, unravel = ravel_pytree(params.actor)
            surrogate, mean_kl = policy_objectives(policy, batch,
                                                   (batch.advantage - batch.advantage.mean())
                                                   / (batch.advantage.std() + 1e-8), unravel)
            flat_new = ravel_pytree(new.actor)[0]
            return (m["accepted"], mean_kl(flat_new), surrogate(flat_new) - surrogate(flat_old),
                    jnp.abs(flat_new - flat_old).max())

        n = 96
        deltas = jnp.tile(jnp.array([1e-3, 1e-2, 0.1, 1.0]), n // 4)
        acc, kl, gain, change = map(np.asarray, one(jax.random.split(jax.random.PRNGKey(ls_steps),
                                                                     n), deltas))
        acc = acc > 0.5
        deltas = np.asarray(deltas)
        assert (kl[acc] <= deltas[acc] * (1 + 1e-5)).all()
        assert (gain[acc] > 0).all()
        assert (change[acc] > 0).all()
        assert (change[~acc] == 0).all()
        outcomes.append((acc.sum(), (~acc).sum()))
    # both branches were exercised
    assert sum(a for a, _ in outcomes) > 20 and sum(r for _, r in outcomes) > 5, outcomes


def test_spo_loss_hand_values():
    ratio = jnp.array([1.0, 1.2, 1.5, 0.5, 0.9])
    adv = jnp.array([2.0, 1.0, -1.0, 1.0, -3.0])
    got = spo_surrogate(ratio, adv, PPOConfig(clip_eps=0.2))
    # r A - |A| / (2 eps) (r - 1)^2 with eps = 0.2, so |A| / 0.4
    want = [2.0, 1.2 - 0.1, -1.5 - 2.5 * 0.25, 0.5 - 2.5 * 0.25, -2.7 - 7.5 * 0.01]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_spo_gradient_points_back_to_trust_region_boundary():
    eps = 0.2
    grad = jax.vmap(jax.grad(lambda r, a: spo_surrogate(r, a, PPOConfig(clip_eps=eps))))
    r = jnp.concatenate([jnp.linspace(0.0, 1 - eps - 1e-3, 50), jnp.linspace(1 + eps + 1e-3, 5.0,
                                                                             50)])
    for a in (-2.0, -0.1, 0.1, 3.0):
        target = 1 + np.sign(a) * eps
        g = np.asarray(grad(r, jnp.full_like(r, a)))
        # ascent direction points from r towards 1 + sign(A) eps
        assert (np.sign(g) == np.sign(target - np.asarray(r))).all()
        # and the maximiser is exactly there
        assert abs(float(grad(jnp.array([target]), jnp.array([a]))[0])) < 1e-6
    # PPO's clipped objective, by contrast, has no gradient out there
    from pgjax.algos.pieces import clipped_surrogate
    g_ppo = jax.grad(lambda r: clipped_surrogate(r, 1.0, PPOConfig(clip_eps=eps)))(1.5)
    assert float(g_ppo) == 0.0


FIXPO_SMALL = TrainConfig(env="jax:cartpole", algo="fixpo", diagnostics="full", num_envs=8,
                          rollout_len=32,
                          eval_every=4, eval_envs=2, episode_length=200, quiet=True,
                          steps=8 * 32 * 4 * 2,
                          fixpo=FixPOConfig(epochs=4, minibatches=4, fixup_minibatches=2,
                                            eps_kl=0.05, anneal_lr=False))


@pytest.mark.parametrize("env,policy_kw,every_epoch", [
    ("jax:cartpole", {}, True),
    pytest.param("brax:inverted_pendulum", {"episode_length": 100}, True, marks=pytest.mark.slow),
    pytest.param("jax:cartpole", {}, False, marks=pytest.mark.slow)])
def test_fixpo_max_kl_bound_holds_after_every_update(env, policy_kw, every_epoch):
    """Every update, over many seeds and learning rates up to 100x the default, leaves every
    state of the batch with KL(pi_old || pi_new) <= eps_kl, with the fixup phase after every
    epoch (the default) and only after the last."""
    cfg = dataclasses.replace(FIXPO_SMALL, env=env, **policy_kw,
                              fixpo=dataclasses.replace(FIXPO_SMALL.fixpo,
                                                        fixup_every_epoch=every_epoch))
    trainer = Trainer(cfg)
    runs = [(s, {**cfg.base_hparams(), "fixpo.lr": lr}) for lr in (3e-4, 3e-3, 1e-2, 3e-2)
            for s in range(6)]
    from pgjax.loop.runner import run_keys, stack_hparams
    keys, _ = run_keys(runs)
    hps = stack_hparams(runs)
    chunk = jax.jit(jax.vmap(trainer.chunk))
    state = jax.jit(jax.vmap(trainer.init))(keys, hps)
    kl_max, kl_before, fixups = [], [], []
    for _ in range(cfg.num_chunks):
        state, m = chunk(state, hps)
        kl_max.append(np.asarray(m["kl_max"]))
        kl_before.append(np.asarray(m["kl_max_before_fixup"]))
        fixups.append(np.asarray(m["fixup_steps"]))
        assert not np.asarray(m["fixup_cap_hit"]).any()
    kl_max, kl_before, fixups = (np.concatenate(x, 1) for x in (kl_max, kl_before, fixups))
    assert kl_max.size == 24 * cfg.num_iterations
    assert (kl_max <= 0.05 * (1 + 1e-5)).all(), kl_max.max()
    # the bound was not free: at large learning rates the primary phase overshot it and the
    # fixup phase took gradient steps to repair it
    assert (kl_before[-6:] > 0.05).any() and fixups[-6:].sum() > 0


def test_fixpo_fixup_cap_raises_clear_error(tmp_path):
    cfg = dataclasses.replace(FIXPO_SMALL, out=str(tmp_path), name="cap",
                              fixpo=dataclasses.replace(FIXPO_SMALL.fixpo, lr=0.5, eps_kl=1e-4,
                                                        fixup_max_passes=1))
    with pytest.raises(TrainingError, match="fixup_max_passes.*--fixpo.lr.*update 1"):
        run(cfg)
    # records up to the failure are kept
    assert (tmp_path / "cap" / "runs" / "seed0" / "metrics.csv.gz").exists()
