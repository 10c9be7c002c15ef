"""Policies with memory: internal state, observation window and recurrent carry restart at
every episode boundary (episodes of mixed lengths inside one batch, on the JAX path and on
Gymnasium environments stepped on the host), and recurrent sequence batches reproduce the behaviour policy."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax import TrainConfig
from pgjax.training.kinds import RecurrentConfig
from pgjax.envs.core import ActionSpace, EnvSpec
from pgjax.envs.functional import VectorEnv
from pgjax.envs.memory import StatefulEnv, WindowEnv
from pgjax.loop.runner import run_keys, stack_hparams
from pgjax.training.train import make_trainer


def _counter_env(num_envs: int, limit: int = 7) -> VectorEnv:
    """obs = [steps since episode start, 1]; episodes terminate after a random 2..5 steps
    (drawn at reset) or are truncated at ``limit``: mixed lengths in every batch."""

    def reset1(key):
        length = jax.random.randint(key, (), 2, 6)
        s = (jnp.int32(0), length)
        return s, jnp.array([0.0, 1.0])

    def step1(s, action):
        t, length = s
        t = t + 1
        return (t, length), jnp.array([t, 1.0], jnp.float32), jnp.float32(1.0), t >= length

    spec = EnvSpec("probe", (2,), ActionSpace("box", 1), num_envs, limit)
    return VectorEnv(spec, reset1, step1)


def _run(env, num_steps: int, key, action_fn):
    state, obs = env.reset(key)
    out = []
    for t in range(num_steps):
        a = action_fn(t, obs)
        state, ts = jax.jit(env.step)(state, a)
        out.append((np.asarray(obs), np.asarray(a), ts))
        obs = ts.obs
    return out


def test_stateful_internal_state_restarts_at_every_episode_start():
    n, z_dim = 6, 3
    env = StatefulEnv(_counter_env(n), z_dim)
    key = jax.random.PRNGKey(0)
    steps = _run(env, 30, key, lambda t, obs: jax.random.normal(jax.random.fold_in(key, t),
                                                                (n, 1 + z_dim)))
    starts = ends = 0
    for i, (obs, a, ts) in enumerate(steps):
        z = obs[:, 2:]
        at_start = obs[:, 0] == 0
        starts += at_start.sum()
        np.testing.assert_array_equal(z[at_start], 0.0)  # z = 0 at every episode start
        if i:
            prev_obs, prev_a, prev_ts = steps[i - 1]
            cont = ~np.asarray(prev_ts.done)
            np.testing.assert_allclose(z[cont], prev_a[cont, 1:])  # z = previous z'
            assert np.all(at_start == np.asarray(prev_ts.done))
        done = np.asarray(ts.done)
        ends += done.sum()
        # the final observation keeps the z' just produced (bootstrap from V(o_T, z'))
        np.testing.assert_allclose(np.asarray(ts.final_obs)[:, 2:], a[:, 1:], rtol=1e-6)
    assert starts > n and ends > n  # several episodes of different lengths per env
    lengths = {int(x) for _, _, ts in steps for x in np.asarray(ts.episode_length) if x}
    assert len(lengths) >= 3


def test_window_restarts_at_every_episode_start():
    n, k = 5, 4
    env = WindowEnv(_counter_env(n), k)
    steps = _run(env, 25, jax.random.PRNGKey(1), lambda t, obs: jnp.zeros((n, 1)))
    for obs, _, ts in steps:
        w = obs.reshape(n, k, 2)
        for e in range(n):
            j = int(w[e, -1, 0])  # steps since the episode started
            seen = min(j + 1, k)
            # the last `seen` slots are this episode's observations 0..j, oldest first
            np.testing.assert_allclose(w[e, k - seen:, 0], np.arange(j + 1 - seen, j + 1))
            np.testing.assert_array_equal(w[e, :k - seen], 0.0)
        fw = np.asarray(ts.final_obs).reshape(n, k, 2)
        np.testing.assert_allclose(fw[:, -1], np.asarray(ts.final_obs).reshape(n, k, 2)[:, -1])


def _trainer(policy, **kw):
    cfg = TrainConfig(env="jax:cartpole", policy=policy, num_envs=8, rollout_len=32, steps=256,
                      eval_every=1, quiet=True, ppo=TrainConfig().ppo.__class__(minibatches=4),
                      **kw)
    trainer = make_trainer(cfg)
    hp = {k: v[0] for k, v in stack_hparams(cfg.runs()).items()}
    return trainer, hp


@pytest.mark.slow
def test_recurrent_carry_restarts_and_sequences_reproduce_the_behaviour_policy():
    trainer, hp = _trainer("recurrent", recurrent=RecurrentConfig(carry_size=16, bptt_len=8))
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    # run one rollout through the trainer's own code, capturing the update's batch
    captured = {}
    update = trainer.algo.update

    def spy(params, algo_state, batch, key, hp_, progress):
        captured["batch"] = batch
        return update(params, algo_state, batch, key, hp_, progress)

    trainer.algo = trainer.algo._replace(update=spy)
    learn = trainer.learn

    def spy_learn(st, traj, k, hp_, carry0):
        captured["traj"] = traj
        return learn(st, traj, k, hp_, carry0)

    trainer.learn = spy_learn
    start_carry = state.rollout.carry
    new_state, _ = trainer.iteration(state, hp)
    batch, traj = captured["batch"], captured["traj"]
    policy = trainer.policy
    # sequence batches recompute exactly the behaviour log-probabilities (ratio 1)
    d = policy.dist(state.params.actor, batch.obs)
    np.testing.assert_allclose(policy.distribution.log_prob(d, batch.action), batch.log_prob,
                               atol=1e-5)
    # and by hand, step by step from the rollout's first carry, zeroing it after every
    # episode end; sequence starts hold exactly the carry reached there
    S, L = batch.log_prob.shape
    T, N = trainer.cfg.rollout_len, trainer.cfg.num_envs

    def unseq(x):
        x = np.asarray(x)
        return x.reshape((T // L, N, L) + x.shape[2:]).swapaxes(1, 2).reshape(
            (T, N) + x.shape[2:])

    obs, act, lp_batch = unseq(batch.obs["o"]), unseq(batch.action), unseq(batch.log_prob)
    done = np.asarray(traj.terminated | traj.truncated)
    h0 = np.asarray(batch.obs["h0"].actor).reshape(T // L, N, -1)
    h = np.asarray(start_carry.actor)
    for t in range(T):
        if t:
            h = np.where(done[t - 1][:, None], 0.0, h)
        if t % L == 0:
            np.testing.assert_allclose(h0[t // L], h, atol=1e-5)
        h, dd = policy.actor.apply(state.params.actor, jnp.asarray(h), jnp.asarray(obs[t]))
        h = np.asarray(h)
        logp = np.asarray(jax.nn.log_softmax(dd["logits"]))[np.arange(N), act[t]]
        np.testing.assert_allclose(logp, lp_batch[t], atol=1e-5)
    inside = done[:-1][(np.arange(1, T) % L) != 0]
    assert inside.sum() > 0  # episodes ended inside sequences
    # the carry handed to the next rollout is zero exactly where the last step ended one
    h_next = np.asarray(new_state.rollout.carry.actor)
    np.testing.assert_array_equal(h_next[done[-1]], 0.0)
    assert np.abs(h_next[~done[-1]]).max() > 0


@pytest.mark.parametrize("policy", ["stateful", "window"])
def test_memory_policies_on_the_gymnasium_host_path(policy):
    """Episodes of mixed lengths (CartPole under a random policy) stepped on the host:
    z / the window restart at every episode start."""
    cfg = TrainConfig(env="gym:CartPole-v1", policy=policy, num_envs=4, rollout_len=64,
                      steps=256, eval_every=1, quiet=True,
                      ppo=TrainConfig().ppo.__class__(minibatches=4)).with_options(
        {"stateful.z_dim": 4} if policy == "stateful" else {"window.size": 3})
    trainer = make_trainer(cfg)
    runs = cfg.runs()
    keys, _ = run_keys(runs)
    hps = stack_hparams(runs)
    state = jax.jit(jax.vmap(trainer.init))(keys, hps)
    _, traj = jax.jit(jax.vmap(trainer.collect))(
        state, jax.random.split(jax.random.PRNGKey(3), len(runs)))
    obs = np.asarray(traj.obs)[0]  # [T, N, D]
    done = np.asarray(traj.terminated | traj.truncated)[0]
    action = np.asarray(traj.action)[0]
    assert done.sum() >= 4
    for t in range(1, obs.shape[0]):
        new = done[t - 1]
        if policy == "stateful":
            np.testing.assert_array_equal(obs[t][new][:, -4:], 0.0)
            np.testing.assert_allclose(obs[t][~new][:, -4:], action[t - 1][~new][:, 1:],
                                       rtol=1e-6)
        else:
            w = obs[t].reshape(obs.shape[1], 3, 4)
            np.testing.assert_array_equal(w[new][:, :2], 0.0)
            prev = obs[t - 1].reshape(obs.shape[1], 3, 4)
            np.testing.assert_allclose(w[~new][:, :2], prev[~new][:, 1:])
    trainer.close()


@pytest.mark.slow
def test_recurrent_policy_with_continuous_actions_trains():
    cfg = TrainConfig(env="brax:inverted_pendulum", policy="recurrent",
                      recurrent=RecurrentConfig(carry_size=8, bptt_len=4), num_envs=4,
                      rollout_len=8, steps=64, eval_every=2,
                      eval_envs=2, episode_length=20, seeds=2, quiet=True,
                      ppo=TrainConfig().ppo.__class__(minibatches=2, epochs=2))
    trainer = make_trainer(cfg)
    from pgjax.loop.runner import VmappedRuns

    fns = VmappedRuns(trainer)
    keys, ekeys = run_keys(cfg.runs())
    hps = stack_hparams(cfg.runs())
    state, metrics, ev = fns.chunk(fns.init(keys, hps), hps, ekeys, True)
    assert np.isfinite(np.asarray(metrics["pg_loss"])).all()
    assert np.isfinite(np.asarray(ev["eval_return"])).all()
    assert np.asarray(fns.evaluate(state, ekeys)["eval_return"]).shape == (2,)


def test_stateful_previous_action_option():
    n, z_dim = 4, 2
    env = StatefulEnv(_counter_env(n), z_dim, prev_action=True)
    assert env.spec.obs_shape == (2 + 1 + z_dim,)
    assert list(env.norm_mask) == [True, True, True, False, False]  # o and a_prev, not z
    key = jax.random.PRNGKey(2)
    steps = _run(env, 20, key, lambda t, obs: jax.random.normal(jax.random.fold_in(key, t),
                                                                (n, 1 + z_dim)))
    for i, (obs, a, ts) in enumerate(steps):
        start = obs[:, 0] == 0
        np.testing.assert_array_equal(obs[start][:, 2], 0.0)  # no previous action at start
        if i:
            cont = ~np.asarray(steps[i - 1][2].done)
            np.testing.assert_allclose(obs[cont][:, 2], steps[i - 1][1][cont, 0])
