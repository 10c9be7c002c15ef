"""The multi-agent combinator: one agent reproduces each plain update rule, the compounded
factor is the product of the preceding agents' ratios, and the trainer runs every scheme."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.core.hparams import HParams
from pgjax.model.nets import Parts
from pgjax import TrainConfig
from pgjax.algos import ALGORITHMS, Algorithm, AlgoConfig, Batch
from pgjax.algos.common import Updated
from pgjax.envs.core import ActionSpace, ConfigError, EnvSpec
from pgjax.envs.multiagent import Partition, make_matrix_game, single_agent_partition
from pgjax.algos.pieces import trust_region_stats
from pgjax.algos.multiagent import AgentsConfig, MultiAgentBatch, agent_order, make_combinator
from pgjax.model.policies import make_agent_nets
from pgjax.model.policies import make_actor_critic
from pgjax.loop.runner import stack_hparams
from pgjax.training.train import Trainer, make_trainer

RULES = ["ppo", "trpo", "spo", "fixpo"]


def _hp(cfg: TrainConfig):
    """The rule's typed hyperparameters of the first run of ``cfg``."""
    hp = {k: v[0] for k, v in stack_hparams(cfg.runs()).items()}
    return HParams.of(hp, cfg.rule, cfg.algo_config).rule


def _random_batch(key, policy, actor, b=256, d=5, a=3):
    k1, k2, k3, k4 = jax.random.split(key, 4)
    obs = jax.random.normal(k1, (b, d))
    dist = policy.dist(actor, obs)
    action = policy.distribution.sample(dist, k2)
    log_prob = policy.distribution.log_prob(dist, action)
    dist = {**dist, "log_std": jnp.broadcast_to(dist["log_std"], (b, a))}
    value = jax.random.normal(k3, (b,))
    adv = jax.random.normal(k4, (b,)) * 2.0 + 0.3
    return Batch(obs=obs, action=action, log_prob=log_prob, dist=dist, value=value,
                 advantage=adv, ret=value + adv)


@pytest.mark.parametrize("rule", RULES)
def test_one_agent_reproduces_the_plain_update(rule):
    cfg = TrainConfig(algo=rule, num_envs=16, rollout_len=16)
    algo_cfg = dataclasses.replace(cfg.algo_config, **(
        {"minibatches": 4} if rule != "trpo" else {"vf_minibatches": 4}))
    hp = _hp(cfg)
    spec = EnvSpec("probe", (5,), ActionSpace("box", 3), 16, 100)
    policy = make_actor_critic(spec.action)
    params = policy.init(jax.random.PRNGKey(1), (5,))
    # make the policy non-trivial so that ratios move away from 1 in the first step
    params = jax.tree.map(lambda x: x + 0.05, params)
    batch = _random_batch(jax.random.PRNGKey(2), policy, params.actor)
    factory = ALGORITHMS[rule][1]
    plain = factory(algo_cfg, policy)
    key = jax.random.PRNGKey(3)
    p_plain, _, m_plain, _ = jax.jit(plain.update)(params, plain.init(params, hp), batch, key, hp,
                                                0.25)

    part = single_agent_partition(spec)
    actor, critic, dist = make_agent_nets(part, (64, 64), (64, 64), "tanh", 0.0)
    combo = make_combinator(factory, algo_cfg, part, actor, critic, dist, "sequential",
                            "random", False)
    ma_params = Parts(jax.tree.map(lambda x: x[None], params.actor), params.critic)
    ones = jnp.ones_like(batch.dist["mean"])[:, None]
    ma_batch = MultiAgentBatch(
        obs={"agent": batch.obs[:, None], "state": batch.obs}, action=batch.action[:, None],
        log_prob=batch.log_prob[:, None],
        dist={"mean": batch.dist["mean"][:, None], "log_std": batch.dist["log_std"][:, None],
              "mask": ones}, value=batch.value, advantage=batch.advantage, ret=batch.ret)
    p_ma, _, m_ma, _ = jax.jit(combo.update)(ma_params, combo.init(ma_params, hp), ma_batch, key,
                                          hp, 0.25)
    # the update did something, and the same thing
    moved = max(float(jnp.abs(a - b).max()) for a, b in
                zip(jax.tree.leaves(p_plain), jax.tree.leaves(params)))
    assert moved > 1e-4
    flat_plain = jax.tree.leaves(p_plain.actor)
    flat_ma = jax.tree.leaves(jax.tree.map(lambda x: x[0], p_ma.actor))
    for a, b in zip(flat_plain, flat_ma):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    for a, b in zip(jax.tree.leaves(p_plain.critic), jax.tree.leaves(p_ma.critic)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    plain_kl_max = trust_region_stats(policy, p_plain.actor, batch)["kl_max"]
    np.testing.assert_allclose(plain_kl_max, m_ma["agent_kl_max"], rtol=1e-4, atol=1e-7)
    assert float(m_ma["factor_dev_max"]) > 0  # the factor saw the agent's ratio


@dataclasses.dataclass(frozen=True)
class ProbeConfig(AlgoConfig):
    step: float = 0.3


def make_probe(cfg: ProbeConfig, policy) -> Algorithm:
    """An update that moves the actor by a fixed, agent-dependent amount and records the
    weight (compounded factor) it was given."""

    def init(params, hp):
        return {"seen": jnp.zeros(32)}

    def update(params, st, batch, key, hp, progress):
        actor = jax.tree.map(lambda x: x + cfg.step * jnp.sin(jnp.arange(x.size).reshape(x.shape)
                                                               + batch.obs["agent"][0, 0] * 7),
                             params.actor)
        return Updated(Parts(actor, params.critic), {"seen": batch.weight}, {"x": 0.0})

    return Algorithm("probe", cfg, init, update)


@pytest.mark.parametrize("order", ["fixed", "random"])
def test_compounded_factor_is_the_product_of_preceding_ratios(order):
    n, k, b = 3, 3, 32
    part = Partition(agent_names=("a", "b", "c"), obs_index=np.array([[0, 1], [1, 2], [2, -1]]),
                     action_index=np.zeros((3, 0), np.int64), action=ActionSpace("discrete", k))
    actor, critic, dist = make_agent_nets(part, (8,), (8,), "tanh", 0.0)
    combo = make_combinator(make_probe, ProbeConfig(), part, actor, critic, dist, "sequential",
                            order, False)
    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    state = jax.random.normal(keys[0], (b, 3))
    agent_obs = part.agent_obs(state)  # [B, n, 2]
    actors = jax.vmap(lambda kk: actor.init(kk, jnp.zeros((1, 2))))(jax.random.split(keys[1], n))
    logits = jax.vmap(lambda p, o: actor.apply(p, o)["logits"], (0, 1), 1)(actors, agent_obs)
    actions = jax.random.categorical(keys[2], logits)
    log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), actions[..., None], -1)[..., 0]
    params = Parts(actors, critic.init(keys[3], jnp.zeros((1, 3))))
    batch = MultiAgentBatch(obs={"agent": agent_obs, "state": state}, action=actions,
                            log_prob=log_prob, dist={"logits": logits},
                            value=jnp.zeros(b), advantage=jax.random.normal(keys[4], (b,)),
                            ret=jnp.zeros(b))
    key = keys[5]
    new_params, states, metrics, _ = combo.update(params, combo.init(params, {}), batch, key, {},
                                               0.0)
    perm = np.asarray(agent_order(key, n, order))
    if order == "fixed":
        assert perm.tolist() == [0, 1, 2]

    # independent check: ratios from numpy softmax of the new and old logits
    def np_logp(p, i):
        lg = np.asarray(actor.apply(jax.tree.map(lambda x: x[i], p.actor),
                                    np.asarray(agent_obs[:, i]))["logits"], np.float64)
        lg = lg - lg.max(-1, keepdims=True)
        lp = lg - np.log(np.exp(lg).sum(-1, keepdims=True))
        return lp[np.arange(b), np.asarray(actions[:, i])]

    expected = np.ones(b)
    for i in perm:
        np.testing.assert_allclose(np.asarray(states["seen"][i]), expected, rtol=1e-5)
        ratio = np.exp(np_logp(new_params, i) - np_logp(params, i))
        assert np.abs(ratio - 1).max() > 1e-3  # the probe really changed the policy
        expected = expected * ratio


def test_schemes_give_different_factors_and_critics():
    # simultaneous: every agent sees weight 1; independent: per-agent critics
    part = Partition(agent_names=("a", "b"), obs_index=np.array([[0], [0]]),
                     action_index=np.zeros((2, 0), np.int64), action=ActionSpace("discrete", 3))
    actor, critic, dist = make_agent_nets(part, (8,), (8,), "tanh", 0.0)
    combo = make_combinator(make_probe, ProbeConfig(), part, actor, critic, dist,
                            "simultaneous", "fixed", False)
    b = 32
    obs = jnp.ones((b, 1))
    actors = jax.vmap(lambda kk: actor.init(kk, jnp.zeros((1, 1))))(
        jax.random.split(jax.random.PRNGKey(0), 2))
    logits = jax.vmap(lambda p, o: actor.apply(p, o)["logits"], (0, 1), 1)(
        actors, part.agent_obs(obs))
    batch = MultiAgentBatch(obs={"agent": part.agent_obs(obs), "state": obs},
                            action=jnp.zeros((b, 2), jnp.int32),
                            log_prob=jax.nn.log_softmax(logits)[..., 0], dist={"logits": logits},
                            value=jnp.zeros(b), advantage=jnp.ones(b), ret=jnp.zeros(b))
    params = Parts(actors, critic.init(jax.random.PRNGKey(1), jnp.zeros((1, 1))))
    _, states, _, _ = combo.update(params, combo.init(params, {}), batch, jax.random.PRNGKey(2), {},
                                0.0)
    np.testing.assert_allclose(np.asarray(states["seen"]), 1.0)


@pytest.mark.slow
def test_happo_with_one_agent_trains_like_ppo_through_the_trainer():
    """The whole pipeline (joint policy, per-agent batch, combinator) with one agent on a
    discrete task: the same metrics and parameters as PPO after three updates."""
    common = dict(env="jax:cartpole", num_envs=8, rollout_len=32, steps=768, eval_every=3,
                  seeds=1, quiet=True)
    out = {}
    for algo in ("ppo", "happo"):
        cfg = TrainConfig(algo=algo, **common)
        trainer = make_trainer(cfg)
        assert isinstance(trainer, Trainer)
        hp = {k: v[0] for k, v in stack_hparams(cfg.runs()).items()}
        state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
        state, metrics = jax.jit(trainer.chunk)(state, hp)
        out[algo] = (state, metrics)
    (s_p, m_p), (s_h, m_h) = out["ppo"], out["happo"]
    np.testing.assert_allclose(m_p["train_return"], m_h["train_return"], rtol=1e-5)
    np.testing.assert_allclose(m_p["pg_loss"], m_h["pg_loss"], rtol=1e-4, atol=1e-6)
    for a, b in zip(jax.tree.leaves(s_p.params.actor),
                    jax.tree.leaves(jax.tree.map(lambda x: x[0], s_h.params.actor))):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    for a, b in zip(jax.tree.leaves(s_p.params.critic), jax.tree.leaves(s_h.params.critic)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_matrix_game_env():
    env = make_matrix_game("climbing", 4)
    state, obs = env.reset(jax.random.PRNGKey(0))
    assert obs.shape == (4, 1)
    joint = jnp.array([[0, 0], [0, 1], [2, 2], [1, 1]])
    _, ts = env.step(state, joint)
    np.testing.assert_allclose(ts.reward, [11.0, -30.0, 5.0, 7.0])
    assert bool(ts.terminated.all()) and not bool(ts.truncated.any())
    with pytest.raises(ConfigError, match="matrix:climbing"):
        make_matrix_game("nope", 2)


# every scheme in the full suite; the fast subset keeps one sequential scheme
@pytest.mark.parametrize("algo", ["happo"] + [pytest.param(a, marks=pytest.mark.slow)
                                              for a in ("mappo", "hatrpo", "haspo", "hafixpo", "ippo")])
def test_every_scheme_trains_on_a_matrix_game(algo, tmp_path):
    from pgjax.loop.runner import run

    cfg = TrainConfig(algo=algo, env="matrix:penalty", num_envs=32, rollout_len=4, steps=256,
                      eval_every=2, eval_envs=2, seeds=2, quiet=True, out=str(tmp_path),
                      name="m")
    run(cfg)

    from pgjax.analysis.results import run_metrics

    files = sorted((tmp_path / "m" / "runs").glob("*/metrics.csv.gz"))
    assert len(files) == 2
    for f in files:
        rows = run_metrics(f.parent)
        assert len(rows) == 3 and np.isfinite(rows["eval_return"].dropna()).all()
        assert np.isfinite(rows["pg_loss"].iloc[1:]).all()


def test_multiagent_config_errors():
    with pytest.raises(ConfigError, match="agent scheme"):
        TrainConfig(algo="ppo", agent_update="both").validate()
    with pytest.raises(ConfigError, match="means --agent-update sequential"):
        TrainConfig(algo="happo", agent_update="independent").validate()
    with pytest.raises(ConfigError, match="agents.order"):
        TrainConfig(algo="happo", agents=AgentsConfig(order="alphabetical")).validate()
    with pytest.raises(ConfigError, match="stepped on the host"):
        TrainConfig(algo="happo", env="gym:CartPole-v1").validate()
    with pytest.raises(ConfigError, match="share-actor"):
        TrainConfig(algo="ippo", agents=AgentsConfig(share_actor=True)).validate()
    assert TrainConfig(algo="hatrpo").rule == "trpo"
    assert TrainConfig(algo="ppo", env="matrix:climbing").scheme == "sequential"
    assert TrainConfig(algo="ppo").scheme is None
