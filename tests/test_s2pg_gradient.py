"""S2PG's gradient estimator is unbiased: on a tiny POMDP the average of many estimates
(pgjax's stateful policy, extended-MDP environment, batch construction and PPO surrogate at
ratio 1) matches the exact gradient of the expected return, computed by enumerating the
cue and the actions and integrating the Gaussian internal state with Gauss-Hermite
quadrature. Dropping log pi_z from the likelihood ratio does not match: the test can fail."""
from __future__ import annotations



import jax
import jax.numpy as jnp
import numpy as np

from pgjax.model.nets import Parts
from pgjax import TrainConfig
from pgjax.algos.pieces import actor_critic_loss, clipped_surrogate, surrogate_objective
from pgjax.algos.ppo import PPOConfig
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv
from pgjax.envs.memory import StatefulEnv
from pgjax.model.policies import make_stateful_policy
from pgjax.loop.runner import stack_hparams
from pgjax.training.train import Trainer


def cue_env(num_envs: int) -> VectorEnv:
    """t=0: observe [1, one-hot cue]; t=1: observe zeros, act; reward 1 if the action equals
    the cue; the episode terminates after the second step."""

    def reset1(key):
        c = jax.random.randint(key, (), 0, 2)
        return (jnp.int32(0), c), jnp.array([1.0, c == 0, c == 1], jnp.float32)

    def step1(s, action):
        t, c = s
        reward = jnp.where(t == 1, (action == c).astype(jnp.float32), 0.0)
        return (t + 1, c), jnp.zeros(3, jnp.float32), reward, t == 1

    return VectorEnv(EnvSpec("cue", (3,), ActionSpace("discrete", 2), num_envs, 2), reset1, step1)


def test_s2pg_gradient_matches_the_exact_gradient():
    n = 1 << 17
    cfg = TrainConfig(env="jax:cartpole", policy="stateful",
                      num_envs=n, rollout_len=2, gamma=1.0, gae_lambda=1.0,
                      ppo=PPOConfig(norm_adv=False, ent_coef=0.0, minibatches=1)).with_options(
        {"stateful": {"z_dim": 1, "z_std": 0.7},
         "net": {"actor_hidden": (8,), "critic_hidden": (8,), "policy_head_gain": 1.0},
         "norm": {"normalize_obs": False, "normalize_reward": False}})
    env = StatefulEnv(cue_env(n), z_dim=1)
    trainer = Trainer(cfg, env=env, policy=make_stateful_policy(env, cfg.net, cfg.stateful))
    policy = trainer.policy
    hp = {k: v[0] for k, v in stack_hparams(cfg.runs()).items()}
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    # a non-trivial policy: perturb the initial parameters
    actor = jax.tree.map(lambda x: x + 0.3 * jax.random.normal(jax.random.PRNGKey(1), x.shape),
                         state.params.actor)
    state = state.replace(params=state.params.replace(actor=actor))

    # -- the exact expected return, as a function of the actor parameters ----------------
    nodes, weights = np.polynomial.hermite.hermgauss(80)

    def expected_return(a_params):
        total = 0.0
        for c in (0, 1):
            o0 = jnp.array([[1.0, c == 0, c == 1, 0.0]], jnp.float32)  # [o, z = 0]
            d0 = policy.dist(a_params, o0)
            mu, sigma = d0["z_mean"][0, 0], jnp.exp(d0["z_log_std"][0])
            z = mu + jnp.sqrt(2.0) * sigma * jnp.asarray(nodes, jnp.float32)  # quadrature
            o1 = jnp.concatenate([jnp.zeros((z.size, 3)), z[:, None]], -1)
            p = jax.nn.softmax(policy.dist(a_params, o1)["a"]["logits"])[:, c]
            total = total + 0.5 * jnp.sum(jnp.asarray(weights, jnp.float32) * p) / jnp.sqrt(jnp.pi)
        return total

    exact = jax.grad(expected_return)(actor)

    # -- S2PG estimates: one rollout of 2 steps in every env, pgjax's own batch and loss ----
    state, k_roll, _ = trainer.split(state)
    from pgjax.training.rollout import rollout

    _, traj = jax.jit(lambda s, k: rollout(trainer.env, policy, s.params.actor, None,
                                           s.rollout, k, 2))(state, k_roll)
    assert bool(traj.terminated[1].all()) and not bool(traj.terminated[0].any())
    batch = jax.jit(trainer.make_batch)(state, traj, hp).batch
    loss_fn = actor_critic_loss(cfg.ppo, policy, surrogate_objective(clipped_surrogate))
    ppo_hp = trainer.hparams(hp).rule
    groups = 16

    def group_grad(mb, joint: bool):
        if joint:
            g = jax.grad(lambda p: loss_fn(p, mb, ppo_hp)[0])(state.params).actor
        else:  # likelihood ratio of the action alone (no log pi_z): a biased estimator
            def surrogate(a_params):
                d = policy.dist(a_params, mb.obs)
                dist = policy.distribution
                lp = dist.log_prob(d, mb.action) - dist.z_log_prob(d, mb.action)
                lp_old = jax.lax.stop_gradient(lp)
                return -jnp.mean(jnp.exp(lp - lp_old) * mb.advantage)
            g = jax.grad(surrogate)(actor)
        # the loss averages over 2 transitions per episode; the return's gradient sums them
        return jax.tree.map(lambda x: -2.0 * x, g)

    # groups of whole episodes: the batch is flat over (time, env), split the env axis
    split = jax.tree.map(lambda x: jnp.swapaxes(
        x.reshape((2, groups, -1) + x.shape[1:]), 0, 1).reshape((groups, -1) + x.shape[1:]),
        batch)
    flat = lambda t: jnp.concatenate([x.ravel() for x in jax.tree.leaves(t)])
    ex = np.asarray(flat(exact))
    for joint in (True, False):
        per = jax.jit(jax.vmap(lambda mb: flat(group_grad(mb, joint))))(split)
        per = np.asarray(per)
        est, se = per.mean(0), per.std(0, ddof=1) / np.sqrt(groups)
        rel = np.linalg.norm(est - ex) / np.linalg.norm(ex)
        live = se > 1e-7 * np.abs(per).max()  # parameters that receive any gradient
        z = np.abs(est - ex)[live] / se[live]
        print("joint" if joint else "action-only", f"rel {rel:.3f} mean z^2 {np.mean(z**2):.2f} "
              f"max z {z.max():.2f} rel se {np.linalg.norm(se) / np.linalg.norm(ex):.3f}")
        if joint:
            # unbiased: every component within a few standard errors of the exact value
            # (components are strongly correlated, so the bound is on the largest one)
            assert z.max() < 4.5, (np.mean(z**2), z.max())
        else:
            # the likelihood ratio of the action alone is biased: far off in standard errors
            assert np.mean(z**2) > 10.0, np.mean(z**2)
    assert np.linalg.norm(ex) > 1e-2  # a non-trivial gradient

