"""The Gymnasium path: spaces and errors, same-step autoreset (no reset step in a batch),
truncation bootstrapping from the real final observation, seeding, and host stepping inside
the compiled program."""
from __future__ import annotations

import re

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium import spaces

from pgjax.algos import PPOConfig
from pgjax.training.config import TrainConfig
from pgjax.envs import ConfigError, GymOptions, make_env
import chex

from pgjax.model.normalize import normalize
from pgjax.loop.runner import run, run_keys, stack_hparams
from pgjax.training.train import Trainer
from pgjax.analysis.results import run_metrics

PROBE_LIMIT = 6


class ProbeEnv(gym.Env):
    """obs = [episode id, step in episode, last action]; episodes terminate after a random
    3..9 steps and the time limit (6) truncates the longer ones. Records every action it
    really steps with, per instance."""

    observation_space = spaces.Box(-np.inf, np.inf, (3,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self):
        self.episode, self.t, self.stepped = -1, 0, []

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        self.length = int(self.np_random.integers(3, 10))
        return np.array([self.episode, 0, 0], np.float32), {}

    def step(self, action):
        self.stepped.append(float(action[0]))
        self.t += 1
        obs = np.array([self.episode, self.t, action[0]], np.float32)
        return obs, float(self.t), self.t >= self.length, False, {}


class DictObsEnv(ProbeEnv):
    observation_space = spaces.Dict({"a": spaces.Box(-1, 1, (2,))})


class MultiBinaryActionEnv(ProbeEnv):
    action_space = spaces.MultiBinary(3)


gym.register("PgjaxProbe-v0", entry_point=ProbeEnv, max_episode_steps=PROBE_LIMIT)
gym.register("PgjaxDictObs-v0", entry_point=DictObsEnv, max_episode_steps=10)
gym.register("PgjaxMultiBinary-v0", entry_point=MultiBinaryActionEnv, max_episode_steps=10)


def test_specs_of_classic_and_mujoco_envs():
    cp = make_env("gym:CartPole-v1", 3).spec
    assert cp.obs_shape == (4,) and cp.action.kind == "discrete" and cp.action.n == 2
    assert cp.max_episode_steps == 500 and cp.num_envs == 3
    pend = make_env("gym:Pendulum-v1", 2, episode_length=50).spec
    assert pend.action == ("box", 1, -2.0, 2.0) and pend.max_episode_steps == 50
    hop = make_env("gym:Hopper-v5", 1).spec
    assert hop.obs_shape == (11,) and hop.action.kind == "box" and hop.action.n == 3
    assert hop.max_episode_steps == 1000
    taxi = make_env("gym:FrozenLake-v1", 1).spec  # Discrete observations become one-hot
    assert taxi.obs_shape == (16,) and taxi.action.n == 4


@pytest.mark.parametrize("env_id, match", [
    ("gym:CartPole-v99", "unknown Gymnasium environment 'gym:CartPole-v99'"),
    ("gym:NoSuchEnv-v0", "registered id such as gym:CartPole-v1"),
    ("gym:PgjaxDictObs-v0", r"dict observations \(keys a\)"),
    ("gym:PgjaxMultiBinary-v0", "action space MultiBinary"),
])
def test_unsupported_envs_and_spaces_get_clear_errors(env_id, match):
    with pytest.raises(ConfigError, match=match):
        make_env(env_id, 2)


def test_unsupported_space_error_from_cli(capsys, tmp_path):
    from pgjax.cli import main

    code = main(["train", "--env", "gym:PgjaxDictObs-v0", "--out", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "dict observations (keys a)" in err and len(err.splitlines()) == 1


def _probe_rollout(runs=2, num_envs=3, rollout_len=25):
    cfg = TrainConfig(env="gym:PgjaxProbe-v0", seeds=runs, num_envs=num_envs,
                      rollout_len=rollout_len, ppo=PPOConfig(minibatches=1), quiet=True)
    trainer = Trainer(cfg)
    train_keys, _ = run_keys(cfg.runs())
    state = jax.jit(jax.vmap(trainer.init))(train_keys, stack_hparams(cfg.runs()))
    state, k_roll, _ = jax.vmap(trainer.split)(state)
    _, traj = jax.jit(jax.vmap(trainer.collect))(state, k_roll)
    return cfg, trainer, state, jax.tree.map(np.asarray, traj)  # traj [R, T, N, ...]


def test_autoreset_step_never_enters_a_batch():
    cfg, trainer, _, traj = _probe_rollout()
    R, T, N = traj.reward.shape
    obs, fin = traj.obs, traj.final_obs
    done = traj.terminated | traj.truncated
    # Every transition stays inside one episode: s'_t is step t+1 of the same episode as s_t,
    # carrying the action actually applied (clipped to the bounds).
    np.testing.assert_array_equal(fin[..., 0], obs[..., 0])
    np.testing.assert_array_equal(fin[..., 1], obs[..., 1] + 1)
    np.testing.assert_allclose(fin[..., 2], np.clip(traj.action[..., 0], -1, 1), rtol=1e-6)
    # The next transition starts where this one ended, or at step 0 of the next episode.
    np.testing.assert_array_equal(obs[:, 1:][~done[:, :-1]], fin[:, :-1][~done[:, :-1]])
    nxt = obs[:, 1:][done[:, :-1]]
    np.testing.assert_array_equal(nxt[:, 1], 0)
    np.testing.assert_array_equal(nxt[:, 0], fin[:, :-1][done[:, :-1]][:, 0] + 1)
    # The environments really stepped exactly T times each, with exactly the batch's actions:
    # no step whose action was ignored, none missing.
    envs = trainer.env.venv.venv.envs
    for r in range(R):
        for n in range(N):
            stepped = envs[r * N + n].unwrapped.stepped
            np.testing.assert_allclose(stepped, np.clip(traj.action[r, :, n, 0], -1, 1),
                                       rtol=1e-6)
    # Both kinds of episode end occurred, and they are kept apart.
    assert traj.terminated.any() and traj.truncated.any()
    assert not (traj.terminated & traj.truncated).any()
    np.testing.assert_array_equal(fin[..., 1][traj.truncated], PROBE_LIMIT)
    assert (fin[..., 1][traj.terminated] <= PROBE_LIMIT).all()
    # Episode statistics: return of a probe episode of length L is 1 + ... + L.
    L = traj.episode_length[done]
    np.testing.assert_array_equal(traj.episode_return[done], L * (L + 1) / 2)
    np.testing.assert_array_equal(L, fin[..., 1][done])
    trainer.close()


def test_truncation_bootstraps_from_the_real_final_observation():
    cfg, trainer, state, traj = _probe_rollout()
    hp = jax.tree.map(lambda x: x[0], stack_hparams(cfg.runs()))
    one = jax.tree.map(lambda x: jnp.asarray(x[0]), traj)
    s0 = jax.tree.map(lambda x: x[0], state)
    prep = trainer.make_batch(s0, one, hp)
    batch = prep.batch
    gamma = hp["gamma"]
    norm = lambda x: normalize(s0.obs_stats, x)
    v_final = trainer.policy.value(s0.params.critic, norm(one.final_obs))
    v_next_obs = trainer.policy.value(s0.params.critic, norm(jnp.roll(one.obs, -1, 0)))
    ret = batch.ret.reshape(one.reward.shape)
    reward = prep.reward
    trunc, term = np.asarray(one.truncated), np.asarray(one.terminated)
    # At a truncation the GAE target is r + gamma * V(real final obs), not V(reset obs).
    np.testing.assert_allclose(ret[trunc], (reward + gamma * v_final)[trunc], rtol=1e-5)
    t_in = trunc.copy()
    t_in[-1] = False  # the reset observation is in the batch only for steps before the last
    assert np.all(np.abs((v_final - v_next_obs)[t_in]) > 1e-6)
    # At a termination there is no bootstrap.
    np.testing.assert_allclose(ret[term], reward[term], rtol=1e-5)
    trainer.close()


def _small(**kw):
    base = dict(env="gym:CartPole-v1", diagnostics="full", num_envs=4, rollout_len=32,
                eval_every=2, eval_envs=2,
                steps=512, quiet=True, ppo=PPOConfig(epochs=2, minibatches=2))
    return TrainConfig(**{**base, **kw})


def _metrics(records):

    return [run_metrics(d) for d in records.run_dirs]


@pytest.mark.slow
def test_same_seed_same_results_and_vmapped_runs_match_single_runs(tmp_path):
    both = _metrics(run(_small(seeds=2, seed=5, out=str(tmp_path), name="both")))
    again = _metrics(run(_small(seeds=2, seed=5, out=str(tmp_path), name="again")))
    for a, b in zip(both, again):
        assert a.drop(columns="wall_time_s").equals(b.drop(columns="wall_time_s"))
    single = _metrics(run(_small(seeds=1, seed=6, out=str(tmp_path), name="single")))[0]
    cols = ["train_return", "eval_return", "episodes", "pg_loss", "kl_max"]
    np.testing.assert_allclose(both[1][cols].to_numpy(float), single[cols].to_numpy(float),
                               rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("algo", ["ppo"] + [pytest.param(a, marks=pytest.mark.slow)
                                            for a in ("trpo", "spo", "fixpo")])
def test_every_update_rule_trains_on_a_mujoco_env(algo, tmp_path):
    cfg = TrainConfig(algo=algo, env="gym:Hopper-v5", num_envs=2, rollout_len=32,
                      eval_every=2, eval_envs=1, episode_length=50, steps=128, quiet=True,
                      out=str(tmp_path), name=algo)
    metrics = _metrics(run(cfg))[0]
    assert len(metrics) >= 2 and np.isfinite(metrics["eval_return"].dropna()).all()


@pytest.mark.slow
@pytest.mark.parametrize("vectorization", ["async", "workers"])
def test_process_vectorizations_train_exactly_as_sync(vectorization, tmp_path):
    sync = _metrics(run(_small(out=str(tmp_path), name="sync", seeds=2,
                               gym=GymOptions(vectorization="sync"))))
    other = _metrics(run(_small(out=str(tmp_path), name=vectorization, seeds=2,
                                gym=GymOptions(vectorization=vectorization, workers=3))))
    cols = ["train_return", "eval_return", "episodes"]
    for a, b in zip(sync, other):
        np.testing.assert_allclose(a[cols].to_numpy(float), b[cols].to_numpy(float))


WORKER_SCRIPT = """
import numpy as np
from pgjax.envs.gym_env import GymEnv, HostVectorEnv, WorkerVectorEnv
print("top level ran")  # a spawned worker must not run this script again
for env_id, n in (("CartPole-v1", 7), ("Pendulum-v1", 5)):
    spec = GymEnv(env_id, n).host_spec
    sync, workers = HostVectorEnv(spec, n), WorkerVectorEnv(spec, n, 3)
    seeds = np.arange(n) * 11
    assert (sync.reset(seeds) == workers.reset(seeds)).all()
    rng = np.random.default_rng(0)
    ends = np.zeros(2, int)
    for t in range(260):
        act = (rng.integers(0, 2, n) if env_id.startswith("Cart")
               else rng.uniform(-2, 2, (n, 1)).astype(np.float32))
        a, b = sync.step(act), workers.step(act)
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and (x == y).all(), env_id
        ends += [a[2].sum(), a[3].sum()]
    workers.close()
    sync.close()
    print(env_id, "terminated", ends[0], "truncated", ends[1])
"""


def test_worker_processes_step_exactly_as_sync_even_from_an_unguarded_script(tmp_path):
    """--gym.vectorization workers: blocks of envs in worker processes give the sync vector
    env's every output (episode ends, final observations, episode statistics), and starting
    the workers does not run the user's script (no __main__ guard) again in each of them."""
    import subprocess
    import sys

    script = tmp_path / "unguarded.py"
    script.write_text(WORKER_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("top level ran") == 1
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines()[1:])
    # both kinds of episode end happened: CartPole terminates, Pendulum truncates at 200
    assert not lines["CartPole-v1"].startswith("terminated 0 ")
    assert lines["Pendulum-v1"].endswith("truncated 5")


BOOM_PLUGIN = """
import gymnasium as gym
import numpy as np


class Boom(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if action[0] > 0.5:
            raise ValueError("the boom env was pushed too far")
        return np.zeros(2, np.float32), 1.0, False, False, {}


gym.register("PgjaxBoom-v0", entry_point=Boom, max_episode_steps=50)
"""


def test_workers_know_plugin_envs_and_report_their_errors_auto_keeps_others_in_process(
        tmp_path):
    from pgjax.envs.gym_env import GymEnv, WorkerVectorEnv
    from pgjax.core.registry import load_plugins

    plugin = tmp_path / "boom_gym_plugin.py"
    plugin.write_text(BOOM_PLUGIN)
    load_plugins((str(plugin),))
    env = GymEnv("PgjaxBoom-v0", 64, options=GymOptions(workers=2))
    assert env.options.resolve(64, env._portable) == ("workers", 2)
    venv = WorkerVectorEnv(env.host_spec, 4, 2)
    try:
        venv.reset(range(4))
        assert venv.step(np.zeros((4, 1), np.float32))[1].tolist() == [1.0] * 4
        with pytest.raises(RuntimeError, match="pushed too far"):
            venv.step(np.ones((4, 1), np.float32))
    finally:
        venv.close()
    # an id registered outside any plugin (here, in this test module) cannot be made in a
    # fresh process, so auto steps it here
    probe = GymEnv("PgjaxProbe-v0", 64, options=GymOptions(workers=2))
    assert probe.options.resolve(64, probe._portable) == ("sync", 1)
    assert probe.options.resolve(31, True) == ("sync", 1)  # under 16 envs per worker


def test_host_stepped_run_compiles_its_chunk_and_update_once(tmp_path):
    cfg = _small(steps=3 * 2 * 128, out=str(tmp_path), name="once")
    trainer = Trainer(cfg)
    assert cfg.num_chunks == 3
    # chex.assert_max_traces raises if a function is traced a second time: the chunk (with
    # the Gymnasium steps inside it) and the update compile once for the whole run
    for name in ("init", "chunk", "learn", "evaluate"):
        setattr(trainer, name, chex.assert_max_traces(getattr(trainer, name), n=1))
    run(cfg, trainer=trainer)


def test_a_run_resumes_under_another_vectorization_but_not_other_settings(tmp_path):
    """How the envs are stepped changes no result (GymOptions.SPEED_ONLY): a run recorded
    with sync resumes under the default (auto) or workers; a changed setting is refused."""
    import dataclasses

    from pgjax.loop.runner import check_resumable

    cfg = _small(steps=128, out=str(tmp_path), name="resume",
                 gym=GymOptions(vectorization="sync"))
    root = run(cfg).root
    for gym_options in (GymOptions(), GymOptions(vectorization="workers", workers=3)):
        check_resumable(dataclasses.replace(cfg, gym=gym_options), root)
    with pytest.raises(ConfigError, match="gamma"):
        check_resumable(dataclasses.replace(cfg, gamma=0.9), root)
    with pytest.raises(ConfigError, match="kwargs"):  # the task's own options are the task
        check_resumable(dataclasses.replace(
            cfg, gym=GymOptions(vectorization="sync", kwargs="sutton_barto_reward=True")), root)
    # ... compared by what they pass, not how they are typed
    spelled = cfg.with_options({"gym.kwargs": "sutton_barto_reward = True,"}, "a test")
    assert spelled.gym.kwargs == "sutton_barto_reward=True"
    kw_root = run(dataclasses.replace(spelled, name="kw")).root
    check_resumable(dataclasses.replace(
        cfg, name="kw", gym=GymOptions(kwargs="sutton_barto_reward=True")), kw_root)


def test_task_options_parse_as_keyword_literals_or_are_one_line():
    ok = GymOptions(kwargs="healthy_z_range=(0.2, 1.0), ctrl_cost_weight=-1e-3, name='a',")
    assert ok.make_kwargs() == {"healthy_z_range": (0.2, 1.0), "ctrl_cost_weight": -1e-3,
                                "name": "a"}
    assert GymOptions(kwargs="  ").make_kwargs() == {}
    for bad, why in [("a=1)(b=2", "not one list"), ("a=1), g(b=2", "not one list"),
                     ("a=1)(", "not one list"), ("a=", "not valid Python"),
                     ("1", "a value without a name"), ("**d", "not a keyword argument"),
                     ("a=1, a=2", "a is given twice"), ("a=b", "the value of a is not a literal"),
                     ("a=dict(b=1)", "not a literal"), ("a=f'x'", "not a literal"),
                     ("x=" + "-" * 1990 + "1", "not a literal"),
                     ("x=" + "-" * 5000 + "1", "more than 2,000"),
                     ("render_mode='human'", "pgjax render sets it"),
                     ("max_episode_steps=5", "pass --episode-length")]:
        with pytest.raises(ConfigError, match=re.escape(why)):
            GymOptions(kwargs=bad).validate()
    with pytest.raises(ConfigError, match="must be a string"):
        GymOptions(kwargs={"a": 1}).validate()


def test_the_tasks_own_options_reach_every_env_it_makes(tmp_path, capsys):
    """--gym.kwargs goes to gymnasium.make in this process, in the worker processes and in
    evaluation: Hopper-v5 that keeps its x position observes 12 numbers instead of 11 (a
    worker that made the default task would hand back the wrong shape); the run records the
    options and its policy reloads with them. Malformed or unknown options are one line."""
    from pgjax import load_policy
    from pgjax.cli import main

    kw = "exclude_current_positions_from_observation=False"
    assert make_env("gym:Hopper-v5", 1, options=GymOptions(kwargs=kw)).spec.obs_shape == (12,)
    args = ["train", "--env", "gym:Hopper-v5", "--steps", "256", "--num-envs", "4",
            "--rollout-len", "32", "--eval-every", "2", "--eval-envs", "2", "--quiet",
            "--gym.vectorization", "workers", "--gym.workers", "2", "--out", str(tmp_path)]
    assert main([*args, "--name", "kw", "--gym.kwargs", kw]) == 0
    policy = load_policy(tmp_path / "kw")
    assert policy.cfg.gym.kwargs == kw
    action, _ = policy.mode(np.zeros((1, 12), np.float32), policy.initial_carry(1))
    assert np.asarray(action).shape == (1, 3)
    assert main(["eval", str(tmp_path / "kw"), "--episodes", "2"]) == 0
    capsys.readouterr()
    for bad, match in (("nope=1", "refused --gym.kwargs 'nope=1' (TypeError"),
                       ("x=fast", "the value of x is not a literal"),
                       ("max_episode_steps=9", "pass --episode-length")):
        assert main([*args, "--name", "bad", "--gym.kwargs", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "bad").exists()
