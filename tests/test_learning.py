"""Learning tests: returns reached within a budget, several seeds vmapped in one program."""
import numpy as np
import pytest

from pgjax import TrainConfig, run
from pgjax.algos import PPOConfig
from pgjax.training.kinds import RecurrentConfig, StatefulConfig
from pgjax.analysis.results import run_metrics


def eval_returns(records):
    """Per run, the eval returns (deterministic policy, --eval-envs episodes averaged) at
    every evaluation (``evals``: the last chunk only by default)."""
    return [run_metrics(d)["eval_return"].dropna().to_numpy()
            for d in records.run_dirs]


def final_eval_returns(records):
    return np.array([r[-1] for r in eval_returns(records)])


def best_eval_returns(records):
    """The highest eval return each run reached within its budget."""
    return np.array([r.max() for r in eval_returns(records)])


@pytest.mark.slow
def test_gymnasium_inverted_pendulum_ends_at_1000_on_8_seeds_at_the_mujoco_preset(tmp_path):
    """The Gymnasium MuJoCo table's configuration (--preset mujoco, the learning rate on its
    3M-step schedule) solves InvertedPendulum-v5 and ends solved: after 491,520 steps the
    final evaluation (10 stochastic episodes) is 1,000 on all 8 seeds, and every seed was at
    1,000 by 250k steps. (Mid-run, one seed in eight loses some episodes for a while:
    experiments/README.md, experiment 14.)"""
    cfg = TrainConfig.from_preset("mujoco", env="gym:InvertedPendulum-v5").with_options(
        {"seeds": 8, "steps": 491_520, "evals": 16, "checkpoint_every": 0,
         "out": str(tmp_path), "name": "ip_mujoco", "quiet": True})
    evals = [m.dropna(subset=["eval_return_stochastic"])
             for m in map(run_metrics, run(cfg).run_dirs)]
    print("evaluations per seed:", [e["eval_return_stochastic"].round().tolist()
                                    for e in evals])
    assert all(len(e) == 16 for e in evals)
    assert all(e["eval_return_stochastic"].iloc[-1] >= 999 for e in evals)
    assert all((e.loc[e["env_steps"] <= 250_000, "eval_return_stochastic"] >= 999).any()
               for e in evals)


@pytest.mark.slow
def test_ppo_inverted_double_pendulum_stays_solved_to_the_end_of_1m_steps(tmp_path):
    """A solved task stays solved: at the defaults, the final evaluation after ~1M steps (the
    learning rate annealed to ~0) is still at the task's maximum (~9,350) on most seeds."""
    cfg = TrainConfig(env="brax:inverted_double_pendulum", seeds=4, steps=1_003_520,
                      eval_envs=8, checkpoint_every=0, out=str(tmp_path), name="ppo_idp",
                      quiet=True)
    records = run(cfg)
    final, best = final_eval_returns(records), best_eval_returns(records)
    print("final / best eval returns per seed:", final, best)
    assert (final >= 9000).sum() >= 3, final


@pytest.mark.slow
def test_ppo_categorical_cartpole_reaches_475(tmp_path):
    cfg = TrainConfig(env="jax:cartpole", seeds=4, steps=204_800, num_envs=16, rollout_len=64,
                      out=str(tmp_path), name="ppo_cp", quiet=True,
                      ppo=PPOConfig(lr=2.5e-4, epochs=4, minibatches=4, ent_coef=0.01))
    returns = final_eval_returns(run(cfg))
    print("final eval returns per seed:", returns)
    assert (returns >= 475).sum() >= 3, returns


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["trpo", "spo", "fixpo"])
def test_trust_region_methods_inverted_pendulum_reach_900_within_1m_steps(algo, tmp_path):
    # 24 chunks of 10 iterations x 2048 env steps = 491,520 env steps per seed (<= 1M)
    cfg = TrainConfig(algo=algo, env="brax:inverted_pendulum", seeds=4, steps=491_520,
                      evals=25, out=str(tmp_path), name=algo, quiet=True)
    assert cfg.num_iterations * cfg.batch_size <= 1_000_000
    records = run(cfg)
    # "reaches": the best evaluation within the budget. TRPO takes a step of KL = delta every
    # update, also once advantages are pure noise, so a solved pendulum can drift off again
    # later; the final evaluations are printed for the record.
    returns, final = best_eval_returns(records), final_eval_returns(records)
    print(algo, "best / final eval returns per seed:", returns, final)
    assert (returns >= 900).sum() >= 3, returns


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["trpo", "spo", "fixpo"])
def test_trust_region_methods_learn_discrete_cartpole(algo, tmp_path):
    cfg = TrainConfig(algo=algo, env="jax:cartpole", seeds=4, steps=204_800, num_envs=16,
                      rollout_len=64, out=str(tmp_path), name=algo, quiet=True)
    returns = final_eval_returns(run(cfg))
    print(algo, "final eval returns per seed:", returns)
    # 450 of CartPole's 500 steps on 3 of 4 seeds (a random policy lasts about 20). Not 475:
    # SPO's seed 0 ends at 474.1 or at 500 depending on the last bit of float32 sums, which
    # differs between two programs that compute the same thing (with and without the
    # trust-region diagnostics: [474.1, 454, 500, 500] and [500, 454, 500, 500]).
    assert (returns >= 450).sum() >= 3, returns


@pytest.mark.slow
def test_ppo_gymnasium_cartpole_reaches_475_within_200k_steps(tmp_path):
    # Host-stepped Gymnasium CartPole-v1: 39 chunks of 5 iterations x (16 envs x 64 steps)
    cfg = TrainConfig(env="gym:CartPole-v1", seeds=4, steps=199_680, num_envs=16,
                      rollout_len=64, eval_every=5, out=str(tmp_path), name="ppo_gym_cp",
                      quiet=True, ppo=PPOConfig(lr=2.5e-4, epochs=4, minibatches=4,
                                                ent_coef=0.01))
    assert cfg.num_iterations * cfg.batch_size <= 200_000
    returns = final_eval_returns(run(cfg))
    print("final eval returns per seed:", returns)
    assert (returns >= 475).sum() >= 3, returns


# -- memory probe: recall a cue shown 4 steps earlier (success = eval return, chance 0.5) ----
def _memory_probe(tmp_path, name, **kw):
    cfg = TrainConfig(env="jax:memory-4", seeds=4, steps=163_840, eval_every=20, eval_envs=64,
                      out=str(tmp_path), name=name, quiet=True, **kw)
    return final_eval_returns(run(cfg))


@pytest.mark.slow
def test_stateful_ppo_solves_the_memory_probe(tmp_path):
    success = _memory_probe(tmp_path, "s2pg", policy="stateful",
                            stateful=StatefulConfig(z_dim=4, z_std=0.3))
    print("stateful PPO success per seed:", success)
    assert success.mean() >= 0.95 and (success >= 0.95).sum() >= 3, success


@pytest.mark.slow
def test_bptt_ppo_solves_the_memory_probe(tmp_path):
    success = _memory_probe(tmp_path, "bptt", policy="recurrent",
                            recurrent=RecurrentConfig(carry_size=32))
    print("BPTT PPO success per seed:", success)
    assert success.mean() >= 0.95 and (success >= 0.95).sum() >= 3, success


@pytest.mark.slow
def test_memoryless_ppo_stays_at_chance_on_the_memory_probe(tmp_path):
    success = _memory_probe(tmp_path, "memoryless")
    print("memoryless PPO success per seed:", success)
    # 64 eval episodes per seed: chance is 0.5 with a standard error of about 0.06
    assert np.all(np.abs(success - 0.5) <= 0.2), success


# -- cooperative matrix game: 16 seeds per scheme, vmapped in one program ------------------
@pytest.mark.slow
def test_multiagent_schemes_coordinate_on_the_climbing_game(tmp_path):
    """Every scheme ends every seed at a coordinated joint action (return >= 5, never a
    -30 miscoordination). The fractions of seeds at the optimum (return 11) are printed; the
    32-seed experiment in experiments/results/sweeps/matrix_games found 0 for every scheme."""
    fractions = {}
    for algo in ("happo", "mappo", "ippo"):
        cfg = TrainConfig(algo=algo, env="matrix:climbing", seeds=16, steps=51_200, num_envs=64,
                          rollout_len=8, eval_every=25, eval_envs=1, checkpoint_every=0,
                          out=str(tmp_path), name=algo, quiet=True,
                          ppo=PPOConfig(epochs=5, minibatches=1, lr=5e-4, anneal_lr=False,
                                        ent_coef=0.01))
        final = final_eval_returns(run(cfg))
        fractions[algo] = float(np.mean(final == 11.0))
        print(algo, "final returns:", final)
        assert np.all(final >= 5.0), (algo, final)
    print("fraction of seeds at the optimal joint action:", fractions)
