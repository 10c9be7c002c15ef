import dataclasses
import functools
import json
import os

import chex
import jax
import numpy as np
import pandas as pd
import pytest

from pgjax import ConfigError, TrainConfig, Trainer, run
from pgjax.algos import PPOConfig
from pgjax.loop.records import load_params
from pgjax.loop.runner import VmappedRuns, run_keys, stack_hparams
from pgjax.analysis.results import run_metrics

SMALL = TrainConfig(env="jax:cartpole", diagnostics="full", num_envs=8, rollout_len=16,
                    eval_every=3, eval_envs=4,
                    episode_length=100, steps=8 * 16 * 3 * 3, quiet=True,
                    ppo=PPOConfig(epochs=2, minibatches=4, ent_coef=0.01))


def test_vmapped_seeds_equal_single_runs():
    trainer = Trainer(SMALL)
    runs = [(3, SMALL.base_hparams()), (11, SMALL.base_hparams())]
    keys, _ = run_keys(runs)
    hps = stack_hparams(runs)
    both_state, both_metrics = jax.jit(jax.vmap(trainer.chunk))(
        jax.jit(jax.vmap(trainer.init))(keys, hps), hps)
    single_init, single_chunk = jax.jit(trainer.init), jax.jit(trainer.chunk)
    for i in range(2):
        hp = jax.tree.map(lambda x: x[i], hps)
        state, metrics = single_chunk(single_init(keys[i], hp), hp)
        chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], both_state.params),
                                    state.params, rtol=1e-4, atol=1e-5)
        chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], both_metrics), metrics,
                                    rtol=1e-4, atol=1e-5)
    # the two seeds really differ
    assert not np.allclose(both_metrics["pg_loss"][0], both_metrics["pg_loss"][1])


def test_whole_run_function_equals_chunked_host_loop():
    trainer = Trainer(SMALL)
    hp = SMALL.base_hparams()
    key = jax.random.PRNGKey(0)
    final, metrics = jax.jit(trainer.train)(key, hp)
    assert metrics["pg_loss"].shape == (SMALL.num_iterations,)
    state = jax.jit(trainer.init)(key, hp)
    chunk = jax.jit(trainer.chunk)
    for _ in range(SMALL.num_chunks):
        state, m = chunk(state, hp)
    chex.assert_trees_all_close(final.params, state.params, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_evaluations_run_after_the_chunks_evals_picks(tmp_path):
    """--evals 1 (default): one evaluation, after the last chunk; --evals 3: step 0, the middle
    and the end, the other chunks' eval cells blank. The evaluation dispatched with a chunk
    equals ``Trainer.evaluate`` of the same state with the same key; a chunk run with
    evaluate=False trains exactly as one with it."""
    cfg = dataclasses.replace(SMALL, steps=8 * 16 * 3 * 5, seeds=2, out=str(tmp_path))
    assert cfg.num_chunks == 5 and cfg.eval_chunks == (5,)
    assert dataclasses.replace(cfg, evals=3).eval_chunks == (0, 3, 5)  # rounded half up
    assert dataclasses.replace(cfg, evals=40).eval_chunks == (0, 1, 2, 3, 4, 5)
    rec = run(dataclasses.replace(cfg, evals=3, name="e3"))
    df = run_metrics(rec.run_dirs[0])
    evaluated = df.loc[df["eval_return"].notna(), "iteration"].tolist()
    assert evaluated == [0, 3 * cfg.eval_every, 5 * cfg.eval_every], evaluated
    default = run_metrics(run(dataclasses.replace(cfg, name="e1")).run_dirs[0])
    train_cols = [c for c in df.columns if not c.startswith("eval_") and c != "wall_time_s"]
    pd.testing.assert_frame_equal(df[train_cols], default[train_cols])
    assert default["eval_return"].iloc[-1] == df["eval_return"].iloc[-1]

    fns = VmappedRuns(Trainer(cfg))
    runs = cfg.runs()
    keys, ekeys = run_keys(runs)
    hps = stack_hparams(runs)
    state = fns.init(keys, hps)
    after, _, ev = fns.chunk(state, hps, ekeys, True)
    want = fns.evaluate(after, ekeys)
    chex.assert_trees_all_equal(ev, want)
    again, _, skipped = fns.chunk(fns.init(keys, hps), hps, ekeys, False)
    assert skipped is None
    chex.assert_trees_all_equal(again.params, after.params)


@pytest.mark.slow
def test_same_seed_twice_gives_identical_metrics(tmp_path):
    a = run(dataclasses.replace(SMALL, out=str(tmp_path), name="a", seeds=2))
    b = run(dataclasses.replace(SMALL, out=str(tmp_path), name="b", seeds=2))
    for da, db in zip(a.run_dirs, b.run_dirs):
        ma = run_metrics(da).drop(columns="wall_time_s")
        mb = run_metrics(db).drop(columns="wall_time_s")
        pd.testing.assert_frame_equal(ma, mb)
    fa, fb = (run_metrics(d.run_dirs[0]) for d in (a, b))
    assert len(fa) == SMALL.num_iterations + 1


def _keep_vmapped_runs(monkeypatch) -> list:
    """The ``VmappedRuns`` that ``run`` builds, kept in the returned list as they are made."""
    import pgjax.loop.runner as runner_mod

    made = []
    real = runner_mod.VmappedRuns

    class Kept(real):
        def __init__(self, t, *args):
            super().__init__(t, *args)
            made.append(self)

    monkeypatch.setattr(runner_mod, "VmappedRuns", Kept)
    return made


# gymnax: a simulator whose reset state holds Python scalars (weakly typed)
@pytest.mark.parametrize("env", ["jax:cartpole", pytest.param("gymnax:CartPole-v1",
                                                              marks=pytest.mark.slow)])
def test_training_chunk_compiles_once_across_chunks(env, tmp_path, monkeypatch):
    """Three programs for the whole host loop, each traced and compiled once: init, the
    chunk, and the evaluation (here at step 0, mid-run and the end)."""

    if env.startswith("gymnax"):
        pytest.importorskip("gymnax")
    chex.clear_trace_counter()  # the counts of another parametrization's run
    cfg = dataclasses.replace(SMALL, env=env, out=str(tmp_path), name="c", seeds=2, evals=3)
    assert cfg.num_chunks == 3
    trainer = Trainer(cfg)
    # chex.assert_max_traces raises if a function is traced a second time
    for name in ("init", "chunk", "evaluate", "learn"):
        setattr(trainer, name, chex.assert_max_traces(getattr(trainer, name), n=1))
    made = _keep_vmapped_runs(monkeypatch)
    run(cfg, trainer=trainer)
    # init, the chunk and the evaluation compiled ahead (compile_ahead), and none again on
    # a call (their inputs were the shapes and types compiled for)
    assert made[0].compiled() == {"init": 1, "chunk": 1, "evaluate": 1, "restart": 0}


def test_evals_0_compiles_no_evaluation_and_tables_read_training_returns(tmp_path, monkeypatch,
                                                                          capsys):
    """--evals 0: the evaluation program is never traced or compiled, no eval cell is
    filled, config.json says so, and the run's summary and tables use the training
    episodes' returns (labelled as such), the same as a run's training-return curve."""
    from pgjax.analysis import results
    from pgjax.tools.trained import evaluate

    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="e0", seeds=2, evals=0)
    assert cfg.eval_chunks == ()
    trainer = Trainer(cfg)

    def never(*a, **k):
        raise AssertionError("the evaluation was traced")

    trainer.evaluate = never
    made = _keep_vmapped_runs(monkeypatch)
    rec = run(cfg, trainer=trainer)
    assert made[0].compiled() == {"init": 1, "chunk": 1, "evaluate": 0, "restart": 0}
    root = tmp_path / "e0"
    described = json.loads((root / "config.json").read_text())["returns"]["eval_return"]
    assert "not evaluated (--evals 0)" in described
    df = results.metrics([root])
    assert not df["eval_return"].notna().any() and df["train_return"].notna().any()
    assert results.eval_source(df) == "train_return"
    final = results.finals(df)
    assert len(final) == 2 and set(final["source"]) == {"train_return"}
    # the summary's final: the mean of the training-return curve's last 5%, per seed
    pts = results.return_points(df, "train_return", keys=("run",))
    per_run = [g[g["env_steps"] >= 0.95 * g["env_steps"].max()]["value"].mean()
               for _, g in pts.groupby("run")]
    np.testing.assert_allclose(sorted(final["final"]), sorted(per_run))
    summary = pd.read_csv(root / "summary.csv")
    assert summary["returns"].iloc[0].startswith("training-episode return")
    np.testing.assert_allclose(summary["final_eval_return_mean"].iloc[0], np.mean(per_run))
    assert len(rec.run_dirs) == 2
    # the training returns only where every run was trained with --evals 0: runs of the
    # default --evals 1 not evaluated yet (unfinished) do not switch to them
    table = results.run_table(df)
    other = df.copy()
    other.attrs["runs"] = results._Runs(table.assign(evals=1))
    assert results.eval_source(other) == "eval_return"
    # load() (evaluation rows) has none of them, and says so
    assert len(results.load([root], command="results")) == 0
    assert "recorded no held-out evaluation (--evals 0)" in capsys.readouterr().err
    # nothing to reproduce with the last evaluation's keys
    with pytest.raises(ConfigError, match="--evals 0"):
        evaluate(root, final_keys=True)


def test_records_directory(tmp_path):
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="rec", seeds=2,
                              grid=("ppo.lr=1e-3,3e-4", "ppo.ent_coef=0.01"))
    rec = run(cfg)
    root = tmp_path / "rec"
    resolved = json.loads((root / "config.json").read_text())
    assert resolved["config"]["ppo"]["epochs"] == 2 and len(resolved["runs"]) == 4
    assert sorted(d.name for d in rec.run_dirs) == sorted(
        ["lr=0.001_seed0", "lr=0.001_seed1", "lr=0.0003_seed0", "lr=0.0003_seed1"])
    df = run_metrics(rec.run_dirs[0])
    for col in ("env_steps", "wall_time_s", "eval_return", "kl_mean", "kl_max", "ratio_dev_max",
                "clip_frac", "entropy", "v_loss", "explained_variance", "grad_norm", "grad_steps",
                "train_return"):
        assert col in df.columns, col
    # the default --evals 1: one held-out evaluation, after the last chunk
    assert df["eval_return"].notna().sum() == 1 and df["eval_return"].notna().iloc[-1]
    assert df["iteration"].tolist() == list(range(cfg.num_iterations + 1))
    assert (df["grad_steps"].iloc[1:] == 2 * 4).all()
    lr_run = json.loads((rec.run_dirs[0] / "config.json").read_text())
    assert lr_run["hparams"]["ppo.lr"] == 1e-3
    p = load_params(rec.run_dirs[0] / "params.msgpack")
    assert "actor" in p["params"] and p["obs_stats"]["mean"].shape == (4,)
    assert (root / "summary.csv").exists() and (root / "curve.png").exists()
    # hyperparameters really are traced: the two learning rates gave different runs
    other = run_metrics(rec.run_dirs[2])
    assert not np.allclose(df["pg_loss"].iloc[1:], other["pg_loss"].iloc[1:])


def test_target_kl_early_stop_counts_steps():
    cfg = dataclasses.replace(SMALL, ppo=PPOConfig(epochs=4, minibatches=4, lr=0.05,
                                                   target_kl=1e-6, anneal_lr=False))
    trainer = Trainer(cfg)
    hp = cfg.base_hparams()
    _, metrics = jax.jit(trainer.chunk)(jax.jit(trainer.init)(jax.random.PRNGKey(0), hp), hp)
    steps = np.asarray(metrics["grad_steps"])
    assert (steps >= 1).all() and (steps < 16).all()


def _iterated(policy: str, reset_pool: str, n: int):
    """SMALL's trainer with ``policy`` and ``reset_pool``, and its states from init (seed 0)
    through ``n`` iterations."""
    from pgjax.training.train import make_trainer

    cfg = dataclasses.replace(SMALL, policy=policy, reset_pool=reset_pool)
    trainer, hp = make_trainer(cfg), cfg.base_hparams()
    states = [jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)]
    for _ in range(n):
        states.append(jax.jit(trainer.iteration)(states[-1], hp)[0])
    return trainer, states


@pytest.mark.parametrize("policy", ["auto", pytest.param("recurrent", marks=pytest.mark.slow)])
def test_reset_pool_redrawn_every_rollout_or_fixed(policy):
    """--reset-pool rollout redraws the restart states before every rollout (plain and BPTT
    trainers); fixed keeps each environment's one restart state for the whole run, and the
    episodes that end restart from exactly that state."""
    pools = {mode: [np.asarray(s.rollout.env_state.pool_obs)
                    for s in _iterated(policy, mode, 3)[1]] for mode in ("rollout", "fixed")}
    # the pools start equal (same key) and differ after every rollout only when redrawn
    np.testing.assert_array_equal(pools["rollout"][0], pools["fixed"][0])
    for a, b in zip(pools["rollout"], pools["rollout"][1:]):
        assert np.abs(a - b).min() > 0
    for later in pools["fixed"][1:]:
        np.testing.assert_array_equal(later, pools["fixed"][0])


@pytest.mark.parametrize("policy", ["auto", pytest.param("recurrent", marks=pytest.mark.slow)])
def test_reset_pool_update_starts_every_rollout_on_fresh_episodes(policy):
    """--reset-pool update puts every environment on a fresh episode before each rollout (as
    Brax's trainer resets its envs between updates): no episode outlives one rollout, the
    rollouts start from new draws of the task's initial states, and the policy's carry
    starts afresh with them; with the pool kept (fixed) episodes run across rollouts."""
    lengths = {}
    for mode in ("update", "fixed"):
        trainer, states = _iterated(policy, mode, 4)
        state, firsts = states[-1], []
        lengths[mode] = [np.asarray(s.rollout.env_state.t) for s in states[1:]]
        if mode == "update":
            for i in range(3):
                start = jax.jit(trainer.next_start)(state.rollout, jax.random.PRNGKey(i))
                assert (np.asarray(start.env_state.t) == 0).all()
                for a, b in zip(jax.tree.leaves(start.carry),
                                jax.tree.leaves(trainer.start(jax.random.PRNGKey(9)).carry)):
                    np.testing.assert_array_equal(a, b)  # the initial carry
                firsts.append(np.asarray(start.obs))
            # CartPole's initial states: every coordinate uniform in [-0.05, 0.05], new draws
            assert all(np.abs(f).max() <= 0.05 for f in firsts)
            assert np.abs(firsts[0] - firsts[1]).min() > 0
    assert max(t.max() for t in lengths["update"]) <= SMALL.rollout_len
    assert max(t.max() for t in lengths["fixed"]) > SMALL.rollout_len


def test_gae_segments_bootstrap_at_every_segment_end():
    """--gae-segment L computes GAE within each L-step piece of the rollout on its own, the
    piece's last step bootstrapped from the value of its next observation (Brax's GAE per
    unroll): checked against a plain loop over the pieces."""
    T, L = SMALL.rollout_len, 5  # pieces of 5, 5, 5 and 1 steps
    advantages = {}
    for segment in (None, L):
        trainer = Trainer(dataclasses.replace(SMALL, gae_segment=segment))
        hp = trainer.cfg.base_hparams()
        state, k_roll, _ = trainer.split(jax.jit(trainer.init)(jax.random.PRNGKey(4), hp))
        end, traj = jax.jit(trainer.collect)(state, k_roll)
        prep = jax.jit(trainer.make_batch)(state.replace(rollout=end), traj, hp)
        v = np.asarray(prep.forward.value)
        advantages[segment] = np.asarray(prep.ret) - v
    r, nv = np.asarray(prep.reward), np.asarray(prep.forward.next_value)
    term, trunc = np.asarray(traj.terminated), np.asarray(traj.truncated)
    gamma, lam = hp["gamma"], hp["gae_lambda"]
    want = np.zeros_like(v)
    for n in range(v.shape[1]):
        adv = 0.0
        for t in reversed(range(T)):
            cut = (t + 1) % L == 0 or t == T - 1 or term[t, n] or trunc[t, n]
            delta = r[t, n] + (0.0 if term[t, n] else gamma * nv[t, n]) - v[t, n]
            adv = delta + (0.0 if cut else gamma * lam * adv)
            want[t, n] = adv
    np.testing.assert_allclose(advantages[L], want, rtol=1e-5, atol=1e-5)
    assert np.abs(advantages[L] - advantages[None]).max() > 1e-2  # the cuts change them
    with pytest.raises(ConfigError, match="pass --gae-segment in that range"):
        dataclasses.replace(SMALL, gae_segment=T + 1).validate()


def test_fixed_reset_pool_restarts_every_episode_from_the_same_state():
    from pgjax.training.rollout import RolloutCarry, rollout

    cfg = dataclasses.replace(SMALL, reset_pool="fixed")
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(1), cfg.base_hparams())
    pool = np.asarray(state.rollout.env_state.pool_obs)
    carry = state.rollout
    starts = []
    for i in range(4):  # 4 rollouts of 64 steps: CartPole episodes end several times
        carry, traj = jax.jit(rollout, static_argnums=(0, 1, 6))(
            trainer.env, trainer.policy, state.params.actor, None, carry,
            jax.random.PRNGKey(i), 64)
        done = np.asarray(traj.terminated | traj.truncated)
        obs = np.asarray(traj.obs)
        for t, n in zip(*np.nonzero(done[:-1])):
            starts.append(np.array_equal(obs[t + 1, n], pool[n]))
    assert len(starts) > 20 and all(starts)
    assert isinstance(carry, RolloutCarry)


def test_diagnostics_that_need_forward_passes_only_when_asked():
    """--diagnostics cheap (the default) records what the update and rollout give for free;
    full adds the trust-region, statistics and reset-state diagnostics; a record written
    before the option existed reads as full (what it recorded). The level changes only what
    is logged: the same seed trains to the same parameters and the same shared metrics
    (records made at either level can be pooled, as experiment 13's seeds 5-9 are)."""
    keys, states, metrics = {}, {}, {}
    for mode in ("cheap", "full"):
        cfg = dataclasses.replace(SMALL, diagnostics=mode)
        trainer = Trainer(cfg)
        hp = cfg.base_hparams()
        state, m = jax.jit(trainer.iteration)(jax.jit(trainer.init)(jax.random.PRNGKey(0), hp),
                                              hp)
        keys[mode], states[mode], metrics[mode] = set(m), state, m
    # bit for bit at XLA's default CPU emitters (the full suite, as users compile); the fast
    # subset's loop emitters (conftest.FAST_XLA_FLAGS) fuse the full level's extra forward
    # passes with the update's and round some values differently in the last bits
    if "--xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", ""):
        same = functools.partial(chex.assert_trees_all_close, rtol=1e-5, atol=1e-7)
    else:
        same = chex.assert_trees_all_equal
    same(states["cheap"].params, states["full"].params)
    same({k: metrics["full"][k] for k in keys["cheap"]}, metrics["cheap"])
    extra = {"kl_mean", "kl_max", "ratio_dev_max", "entropy", "kl_stats_mean", "kl_stats_max",
             "value_stats_shift", "kl_reset_mean", "kl_reset_max", "kl_reset_stats_max",
             "mode_shift_reset_max"}
    assert keys["full"] - keys["cheap"] == extra
    assert {"approx_kl", "clip_frac", "grad_norm", "explained_variance", "obs_std_drift",
            "train_return"} <= keys["cheap"]
    assert TrainConfig().diagnostics == "cheap"
    assert TrainConfig.from_record({"env": "jax:cartpole"}).diagnostics == "full"
    with pytest.raises(ConfigError, match="--diagnostics with one of cheap, full"):
        dataclasses.replace(SMALL, diagnostics="some").validate()
