"""Presets from Gymnasium MuJoCo sources: cleanrl, the SPO, FixPO and S2PG papers, Tianshou."""
from __future__ import annotations

import math

from pgjax.training.preset_type import Preset, _same

_CLEANRL_PPO = dict(lr=3e-4, anneal_lr=True, adam_eps=1e-5, epochs=10, minibatches=32,
                    norm_adv=True, clip_eps=0.2, clip_vloss=True, vf_clip_eps=0.2, vf_coef=0.5,
                    ent_coef=0.0, max_grad_norm=0.5, target_kl=0.0)

CLEANRL = Preset(
    "cleanrl",
    "PPO for continuous control as in cleanrl (pgjax's PPO defaults, which use 64 envs x 32 "
    "steps for the same batch of 2048)",
    "vwxyzjn/cleanrl @ fe8d8a0: cleanrl/ppo_continuous_action.py",
    {"algo": "ppo", "num_envs": 1, "rollout_len": 2048, "steps": 1_000_000, "gamma": 0.99,
     "gae_lambda": 0.95, "net.actor_hidden": (64, 64), "net.critic_hidden": (64, 64),
     "net.activation": "tanh", "net.init_log_std": 0.0, "net.policy_head_gain": 0.01,
     "norm.normalize_obs": True, "norm.obs_stats": "running", "norm.obs_stats_steps": 0,
     "norm.normalize_reward": True, "norm.value_norm": False, "norm.reward_scale": 1.0,
     **_same(["ppo"], **_CLEANRL_PPO, target_kl_mode="per_epoch")},
    deviations=(
        "cleanrl treats a time-limit truncation as termination; pgjax bootstraps it with "
        "V(final observation)",),
    lines={"steps": "cleanrl/ppo_continuous_action.py: total_timesteps = 1000000",
           "ppo.target_kl_mode": "cleanrl/ppo_continuous_action.py: `if args.target_kl is not "
                                 "None and approx_kl > args.target_kl: break` after each "
                                 "epoch's minibatch loop",
           "anneal_steps": "cleanrl/ppo_continuous_action.py: frac = 1 - (iteration - 1) / "
                           "num_iterations, num_iterations = total_timesteps // batch_size"})

SPO_PAPER = Preset(
    "spo-paper",
    "SPO and its PPO baseline as in the SPO paper's MuJoCo runs: a 7-layer tanh policy, "
    "8 envs x 256 steps, 4 minibatches of 512 (--algo ppo runs the paper's PPO)",
    "MyRepositories-hub/Simple-Policy-Optimization @ 9fdeda3: mujoco/main.py, "
    "mujoco/agent.py, mujoco/trainer.py",
    {"algo": "spo", "diagnostics": "full", "num_envs": 8, "rollout_len": 256, "steps": 10_000_000,
     "gamma": 0.99,
     "gae_lambda": 0.95, "net.actor_hidden": (256, 256, 128, 128, 64, 64),
     "net.critic_hidden": (64, 64), "net.activation": "tanh", "net.init_log_std": 0.0,
     "net.policy_head_gain": 0.01, "norm.normalize_obs": True, "norm.obs_stats": "running",
     "norm.obs_stats_steps": 0, "norm.normalize_reward": True, "norm.value_norm": False,
     "norm.reward_scale": 1.0, **_same(["ppo", "spo"], **{**_CLEANRL_PPO, "adam_eps": 1e-8,
                                                          "minibatches": 4})},
    deviations=(
        "the paper's code treats truncation as termination; pgjax bootstraps it",
        "the paper has no held-out evaluation: its curves are the returns of the stochastic "
        "training episodes (pgjax's train_return, pgjax plot --returns train); pgjax also "
        "records deterministic held-out evaluations"),
    lines={"steps": "mujoco/main.py:21 (total_time_steps 1e7)",
           "anneal_steps": "mujoco/main.py:123,131-135 (num_updates = total_time_steps // "
                           "batch_size; lr = (1 - (update - 1) / num_updates) * 3e-4)",
           "num_envs": "mujoco/main.py:24-28", "rollout_len": "mujoco/main.py:24-28",
           "spo.minibatches": "mujoco/main.py:40-41 (minibatch 512)"})

# what the FixPO authors' tianshou MuJoCo launchers share (FixPO's and its PPO baseline's):
# 64-64 tanh networks, initial log-std -0.5, value targets over the running return std,
# advantages from raw rewards, stochastic evaluation
_TIANSHOU_MUJOCO = {"diagnostics": "full", "eval_mode": "stochastic", "gamma": 0.99,
                    "gae_lambda": 0.95,
                    "net.actor_hidden": (64, 64), "net.critic_hidden": (64, 64), "net.activation": "tanh",
                    "net.init_log_std": -0.5, "net.policy_head_gain": 0.01, "norm.normalize_obs": True,
                    "norm.obs_stats": "running", "norm.obs_stats_steps": 0, "norm.normalize_reward": False,
                    "norm.value_norm": True, "norm.reward_scale": 1.0}

# tianshou's PPO as its MuJoCo examples run it (the FixPO authors' baseline launcher and
# Tianshou's own benchmark): minibatch 64 of 2,048, 10 epochs, no advantage normalisation
# and no value clipping
_TIANSHOU_PPO = _same(["ppo"], lr=3e-4, anneal_lr=True, adam_eps=1e-8, epochs=10,
                      minibatches=32, norm_adv=False, clip_eps=0.2, clip_vloss=False,
                      vf_coef=0.5, ent_coef=0.0, max_grad_norm=0.5, target_kl=0.0)
_TIANSHOU_PPO_DEVIATIONS = (
    "value loss: tianshou's vf_coef 0.25 multiplies a loss without the 1/2 factor, pgjax's "
    "has it, so vf_coef is 0.5 (cleanrl's 0.5 x 1/2 is the same)",
    "tianshou's policy head is initialised with gain 0.01 x sqrt(2) and the value head with "
    "sqrt(2); pgjax's with 0.01 and 1")

FIXPO_PAPER = Preset(
    "fixpo-paper",
    "FixPO as in the paper's MuJoCo runs: 64 envs x 128 steps, minibatch 512, fixup "
    "minibatch 1024, fixup after every epoch, C_beta 3, initial log-std -0.5",
    "uscresl/stabilized-rl @ e804a23: exps_tianshou.py (C_beta 3), "
    "src/mujoco_fixpo_tianshou.py, src/fixpo_tianshou.py",
    {"algo": "fixpo", "num_envs": 64, "rollout_len": 128, "steps": 10_000_000,
     "anneal_steps": 12_288_000, **_TIANSHOU_MUJOCO,
     **_same(["fixpo"], lr=3e-4, anneal_lr=True, adam_eps=1e-8, eps_kl=0.5, c_beta=3.0,
             beta0=1.0, beta_lr=0.01, vf_coef=0.2, ent_coef=0.0, clip_vloss=True,
             vf_clip_eps=0.2, max_grad_norm=0.5,
             epochs=10, minibatches=16, fixup_minibatches=8, fixup_every_epoch=True,
             norm_adv=False)},
    deviations=(
        "value loss: the authors' c_v 0.1 multiplies a loss without the 1/2 factor, pgjax's "
        "has it, so vf_coef is 0.2 (clipped at 0.2 as theirs)",
        "value targets: scaled by the running std of the lambda-returns as theirs "
        "(value_norm), with advantages from raw rewards",
        "the fixup minibatches are a fixed split of the batch (reshuffled by the authors)",
        "the authors' policy head is initialised with gain 0.01 x sqrt(2) and the value head "
        "with sqrt(2) (src/mujoco_fixpo_tianshou.py:120-131); pgjax's with 0.01 and 1",
        "the authors' 10M steps are collected in 8192-step chunks per 20k-step epoch, about "
        "12.3M steps in all, over which the learning rate anneals (anneal_steps); the preset "
        "runs the 10M their figures show",
        "the authors evaluate 10 episodes per 20k-step epoch; pgjax evaluates --eval-envs "
        "episodes at the chunks --evals picks"),
    lines={"anneal_steps": "src/mujoco_fixpo_tianshou.py:138-146 (LambdaLR 1 - epoch / "
                           "max_update_num, max_update_num = ceil(20000 / 8192) * 500 = 1500 "
                           "updates of 8192 steps); exps_tianshou.py:59,158 (500 epochs of "
                           "20,000 steps)",
           "eval_mode": "tianshou pg.py:47 (deterministic_eval False, not set by "
                        "src/mujoco_fixpo_tianshou.py)",
           "c_beta": "exps_tianshou.py:518-524 (target_coeff 3)"})

FIXPO_PAPER_PPO = Preset(
    "fixpo-paper-ppo",
    "The FixPO paper's PPO baseline as the authors ran it: tianshou PPO, 64 envs x 32 steps "
    "(batch 2048), minibatch 64, 10 epochs, no advantage normalisation, no value clipping, "
    "initial log-std -0.5, lr 3e-4 annealed over 5,000 updates",
    "uscresl/stabilized-rl @ e804a23: src/mujoco_ppo_tianshou.py, exps_tianshou.py",
    {"algo": "ppo", "num_envs": 64, "rollout_len": 32, "steps": 10_000_000,
     "anneal_steps": 10_240_000, **_TIANSHOU_MUJOCO,
     **_TIANSHOU_PPO},
    deviations=_TIANSHOU_PPO_DEVIATIONS + (
        "the authors' 10M steps run as 500 epochs of 20,480 steps (10.24M), over which the "
        "learning rate anneals (anneal_steps)",
        "the authors' PPO recomputes the advantages with the current critic before every "
        "epoch (src/mujoco_ppo_tianshou.py:51, recompute_advantage); this preset does not, "
        "as experiment 12b's records were made before --ppo.recompute-adv existed (add it "
        "to match them)"),
    lines={"num_envs": "src/mujoco_ppo_tianshou.py:34,37 (step_per_collect 2048, 64 envs)",
           "ppo.minibatches": "src/mujoco_ppo_tianshou.py:36 (batch_size 64)",
           "ppo.epochs": "src/mujoco_ppo_tianshou.py:35 (repeat_per_collect 10)",
           "ppo.lr": "src/mujoco_ppo_tianshou.py:30", "anneal_steps":
           "src/mujoco_ppo_tianshou.py:129-138 (max_update_num = ceil(20000 / 2048) * 500)",
           "ppo.clip_eps": "src/mujoco_ppo_tianshou.py:47",
           "ppo.vf_coef": "src/mujoco_ppo_tianshou.py:41 (0.25, no 1/2 factor)",
           "ppo.max_grad_norm": "src/mujoco_ppo_tianshou.py:46",
           "norm.value_norm": "src/mujoco_ppo_tianshou.py:40 (rew_norm: value targets divided by "
                         "the running std of the returns, tianshou/policy/modelfree/a2c.py:98-113)",
           "ppo.norm_adv": "src/mujoco_ppo_tianshou.py:50",
           "ppo.clip_vloss": "src/mujoco_ppo_tianshou.py:49",
           "net.init_log_std": "src/mujoco_ppo_tianshou.py:111",
           "eval_mode": "tianshou pg.py:47 (deterministic_eval False)"})

_TIANSHOU = "thu-ml/tianshou @ 6426a39 (its PPO MuJoCo benchmark): examples/mujoco/mujoco_ppo.py"

MUJOCO = Preset(
    "mujoco",
    "One PPO configuration for every Gymnasium MuJoCo task, as Tianshou's PPO MuJoCo "
    "benchmark ran it: 64 envs x 32 steps, minibatch 64, 10 epochs, lr 3e-4 annealed over its "
    "3M-step run (the benchmark's 1M-step figures are the first 1M of it), advantages "
    "recomputed before every epoch, no value clipping, returns scaled by their running std, "
    "initial log-std -0.5, stochastic evaluation; two changes: advantages normalised per "
    "minibatch and updates stopped at approx-KL 0.1",
    _TIANSHOU + "; thu-ml/tianshou @ f240205: examples/mujoco/README.md (the 1M-step table, "
    "whose figures date from 6426a39)",
    {"algo": "ppo", "num_envs": 64, "rollout_len": 32, "steps": 1_000_000,
     "anneal_steps": 3_072_000, "evals": 34, "eval_envs": 10, **_TIANSHOU_MUJOCO,
     **_TIANSHOU_PPO, "ppo.target_kl": 0.1, "ppo.recompute_adv": True, "ppo.norm_adv": True},
    deviations=_TIANSHOU_PPO_DEVIATIONS + (
        "advantages are normalised per minibatch (tianshou's benchmark: norm-adv 0, "
        "examples/mujoco/mujoco_ppo.py:51): without it InvertedDoublePendulum-v5's solved "
        "seeds kept falling (table seeds 0-1 ended at 4,330 and 491; with it 8,942 and "
        "7,863) and InvertedPendulum-v5 kept all 8 seeds at 1,000 in every evaluation from "
        "250k to 1M steps (experiment 14c); at 10 seeds InvertedDoublePendulum-v5 ends "
        "lower with both of this preset's changes than without (5,405 against 7,533, "
        "difference not established: experiment 14g)",
        "an update stops at the first minibatch whose approx-KL exceeds 0.1 (target_kl; "
        "neither tianshou nor cleanrl stops): without it a solved balancing task's std keeps "
        "shrinking, the KL of an update grows past 1 and the solution is lost for good "
        "(experiment 14: InvertedPendulum-v5 seeds ending at 9 and 522 of 1,000); with it "
        "HalfCheetah-v5 did not lose return in the same check (2 seeds)",
        "truncation: tianshou (gym 0.17) and cleanrl treat a time limit as termination; pgjax "
        "bootstraps it from the final observation",
        "environments: the benchmark ran v3 (v2 for Reacher and the pendulums) under gym "
        "0.17.3 and mujoco 2.0; this preset is for Gymnasium's v5",
        "evaluation: tianshou evaluates 10 stochastic episodes per 30,000-step epoch and "
        "reports the best mean over training; pgjax evaluates 10 stochastic episodes at 34 "
        "points (about every 30,000 steps) and reports the final return (the mean over the "
        "last 5% of training) beside the best",
        "cleanrl's ppo_continuous_action (the second anchor) differs in 1 env x 2048 steps, "
        "advantage normalisation, value clipping, initial log-std 0 and reward normalisation "
        "with clipping (the cleanrl preset holds those)"),
    lines={"num_envs": "examples/mujoco/mujoco_ppo.py:34,37 (step-per-collect 2048, "
                       "training-num 64)",
           "ppo.minibatches": "examples/mujoco/mujoco_ppo.py:36 (batch-size 64)",
           "ppo.epochs": "examples/mujoco/mujoco_ppo.py:35 (repeat-per-collect 10)",
           "ppo.lr": "examples/mujoco/mujoco_ppo.py:30",
           "anneal_steps": "examples/mujoco/mujoco_ppo.py:32-33,112-119 (100 epochs of "
                           "30,000 steps; LambdaLR over ceil(30000 / 2048) x 100 = 1,500 "
                           "updates of 2,048 steps)",
           "steps": "examples/mujoco/README.md:444-447 @ f240205 (only the first 1M steps "
                    "count)",
           "ppo.clip_eps": "examples/mujoco/mujoco_ppo.py:48",
           "ppo.clip_vloss": "examples/mujoco/mujoco_ppo.py:50 (value-clip 0)",
           "ppo.recompute_adv": "examples/mujoco/mujoco_ppo.py:52 (recompute-adv 1); "
                                "tianshou/policy/modelfree/ppo.py:104-105 (before every epoch "
                                "after the first) and a2c.py:102 (each recomputation merges its "
                                "returns into the return statistics)",
           "ppo.vf_coef": "examples/mujoco/mujoco_ppo.py:42 (0.25, no 1/2 factor)",
           "ppo.ent_coef": "examples/mujoco/mujoco_ppo.py:43",
           "ppo.max_grad_norm": "examples/mujoco/mujoco_ppo.py:47",
           "norm.value_norm": "examples/mujoco/mujoco_ppo.py:40 (rew-norm: returns divided by "
                              "their running std)",
           "norm.normalize_obs": "examples/mujoco/mujoco_ppo.py:76 (norm_obs, clipped at 10)",
           "net.init_log_std": "examples/mujoco/mujoco_ppo.py (sigma_param initialised to -0.5)",
           "eval_envs": "examples/mujoco/mujoco_ppo.py:38 (test-num 10)",
           "eval_mode": "tianshou/policy/modelfree/pg.py:106 (actions sampled in tests)"})

_S2PG_CLIP = {"hopper": 0.05, "walker2d": 0.05, "halfcheetah": 0.2, "ant": 0.2,
              "humanoid": 0.1}
_S2PG_DIR = "experiments/01_Reinforcement_Learning/"
# what every PPO run of the S2PG paper's POMDP experiments shares (experiment.py of each
# launcher's folder): 5M steps (100 epochs of 50,000), fits of 2000 steps in minibatches of
# 32 for 10 epochs, constant learning rates, no gradient or value clipping, entropy 0
_S2PG_COMMON = {
    "diagnostics": "full",
    "num_envs": 8, "rollout_len": 256, "steps": 5_000_000, "episode_length": 1000,
    "gamma": 0.99, "gae_lambda": 0.95, "eval_mode": "both", "net.activation": "relu",
    "norm.normalize_obs": True, "norm.obs_stats": "running", "norm.obs_stats_steps": 0,
    "norm.normalize_reward": False, "norm.value_norm": False, "norm.reward_scale": 1.0,
    **_same(["ppo"], anneal_lr=False, adam_eps=1e-8, epochs=10, minibatches=64,
            norm_adv=True, clip_vloss=False, vf_coef=0.5, ent_coef=0.0, max_grad_norm=1e10,
            target_kl=0.0)}
_S2PG_DEVIATIONS = (
    "2048 steps per update in 64 minibatches of 32 (the authors: 2000 steps, 62 "
    "minibatches of 32 and one of 16; pgjax splits a batch evenly)",
    "actor and critic (each with its own Adam state, as the authors') step together on "
    "every minibatch; the authors fit the critic's epochs first, then the actor's; no "
    "gradient clipping (max_grad_norm 1e10)",
    "advantages are normalised per minibatch (the authors: once per batch)",
    "the authors evaluate 10 episodes after every 50,000 steps, stochastically and with the "
    "mean action (eval_mode both); their memoryless and oracle policies ignore the "
    "deterministic flag, so both of their logs are stochastic there")
_S2PG_LINES = {
    "steps": f"{_S2PG_DIR}04_Vanilla/01_POMDP/launcher.py:23-25 (100 epochs x 50,000 steps)",
    "ppo.anneal_lr": "no scheduler in the repository (constant lr)",
    "ppo.minibatches": f"{_S2PG_DIR}02_RS/01_POMDP/experiment.py:43 (batch_size_actor 32)",
    "eval_mode": "s2pg/utils/training.py:57,75 (do_evaluation and "
                 "do_evaluation_deterministic, both every epoch)"}

S2PG_PAPER = Preset(
    "s2pg-paper",
    "S2PG with PPO as in the paper's POMDP runs: GRU state z of 128, one learned std over "
    "[a, z'] starting at 0.5, previous action as input, lr 5e-5 constant, minibatch 32, "
    "clip per body, stochastic and deterministic evaluations; pass --policy stateful (and "
    "--observe positions for the POMDP). Its baselines: s2pg-paper-memoryless, "
    "s2pg-paper-bptt",
    "robfiras/s2pg @ 605000a: experiments/01_Reinforcement_Learning/02_RS/01_POMDP/"
    "launcher.py and experiment.py, s2pg/policy/recurrent_policy.py, "
    "s2pg/algorithms/reinforcement_learning/deep_actor_critic/rs/ppo_rs.py",
    {**_S2PG_COMMON, "algo": "ppo", "policy": "stateful", "stateful.z_dim": 128,
     "stateful.z_std": 0.5,
     "net.init_log_std": math.log(0.5), "stateful.prev_action": True,
     "net.actor_hidden": (128,), "net.critic_hidden": (128, 128), **_same(["ppo"], lr=5e-5)},
    per_task={t: {"ppo.clip_eps": e} for t, e in _S2PG_CLIP.items()},
    deviations=(
        *_S2PG_DEVIATIONS,
        "pgjax's stateful actor feeds one observation embedding to the GRU and the action "
        "head (the authors use two), and initialises orthogonally (theirs: Xavier)",
        "ant and humanoid: the authors also keep contact forces in the POMDP observation"),
    lines={**_S2PG_LINES, "ppo.lr": f"{_S2PG_DIR}02_RS/01_POMDP/launcher.py:32-33",
           "ppo.clip_eps": f"{_S2PG_DIR}02_RS/01_POMDP/launcher.py:42-54"})

# the memoryless PPO baseline (04_Vanilla): lr 1e-4 (humanoid 5e-5), clip 0.01 (humanoid
# 0.005), initial std 1, a 128-128 ReLU MLP for actor and critic
_S2PG_MEMORYLESS = {"hopper": (1e-4, 0.01), "walker2d": (1e-4, 0.01),
                    "halfcheetah": (1e-4, 0.01), "ant": (1e-4, 0.01),
                    "humanoid": (5e-5, 0.005)}

S2PG_PAPER_MEMORYLESS = Preset(
    "s2pg-paper-memoryless",
    "The S2PG paper's memoryless PPO baseline as the authors ran it: a feedforward 128-128 "
    "ReLU policy on the partial observation, lr 1e-4, clip 0.01, initial std 1.0, the "
    "shared S2PG protocol (minibatch 32, 10 epochs, constant lr, 5M steps)",
    "robfiras/s2pg @ 605000a: experiments/01_Reinforcement_Learning/04_Vanilla/01_POMDP/"
    "launcher.py and experiment.py",
    {**_S2PG_COMMON, "algo": "ppo", "policy": "auto", "net.init_log_std": 0.0,
     "net.actor_hidden": (128, 128), "net.critic_hidden": (128, 128),
     **_same(["ppo"], lr=1e-4, clip_eps=0.01)},
    per_task={t: {"ppo.lr": lr, "ppo.clip_eps": e}
              for t, (lr, e) in _S2PG_MEMORYLESS.items()},
    deviations=(*_S2PG_DEVIATIONS,
                "the authors initialise with Xavier (x0.01 on the output); pgjax "
                "orthogonally (0.01 head gain)"),
    lines={**_S2PG_LINES,
           "ppo.lr": f"{_S2PG_DIR}04_Vanilla/01_POMDP/launcher.py:37,40 (lr_actor__ / "
                     f"lr_critic__ override the 3e-4 of the defaults dict)",
           "ppo.clip_eps": f"{_S2PG_DIR}04_Vanilla/01_POMDP/launcher.py:37,40",
           "net.init_log_std": f"{_S2PG_DIR}04_Vanilla/01_POMDP/launcher.py:31 (std_0 1.0)",
           "net.actor_hidden": f"{_S2PG_DIR}04_Vanilla/01_POMDP/experiment.py:69-78"})

# the BPTT baseline (01_BPTT): GRU 128, truncation 5 or 32, initial std 0.5, per-body lr
# and clip
_S2PG_BPTT = {"hopper": (5e-5, 0.1), "walker2d": (1e-4, 0.2), "halfcheetah": (5e-5, 0.2),
              "ant": (1e-4, 0.2), "humanoid": (1e-4, 0.2)}

S2PG_PAPER_BPTT = Preset(
    "s2pg-paper-bptt",
    "The S2PG paper's BPTT baseline as the authors ran it: a GRU policy of 128 trained by "
    "backpropagation through time truncated at 32 steps (the paper also runs 5: --recurrent.bptt-len "
    "5), initial std 0.5, per-body lr (5e-5 hopper and halfcheetah, else 1e-4) and clip "
    "(0.1 hopper, else 0.2), the shared S2PG protocol",
    "robfiras/s2pg @ 605000a: experiments/01_Reinforcement_Learning/01_BPTT/01_POMDP/"
    "launcher.py and experiment.py, s2pg/networks/recurrent_networks.py",
    {**_S2PG_COMMON, "algo": "ppo", "policy": "recurrent", "recurrent.carry_size": 128,
     "recurrent.bptt_len": 32,
     "net.init_log_std": math.log(0.5), "net.actor_hidden": (128,), "net.critic_hidden": (128,),
     **_same(["ppo"], lr=5e-5, clip_eps=0.2)},
    per_task={t: {"ppo.lr": lr, "ppo.clip_eps": e} for t, (lr, e) in _S2PG_BPTT.items()},
    deviations=(
        *_S2PG_DEVIATIONS,
        "the authors' GRU actor also embeds the previous action and joins a second "
        "observation embedding after the GRU; pgjax's GRU policy reads the observation only",
        "the authors' critic restarts its GRU from a zero state over each truncation window; "
        "pgjax's critic carries its state like the actor",
        "humanoid: the authors also hide com_inertia and com_velocity"),
    lines={**_S2PG_LINES,
           "ppo.lr": f"{_S2PG_DIR}01_BPTT/01_POMDP/launcher.py:39-47",
           "ppo.clip_eps": f"{_S2PG_DIR}01_BPTT/01_POMDP/launcher.py:39-47",
           "recurrent.bptt_len": f"{_S2PG_DIR}01_BPTT/01_POMDP/launcher.py:35 (5 and 32)",
           "recurrent.carry_size": f"{_S2PG_DIR}01_BPTT/01_POMDP/launcher.py:34",
           "net.init_log_std": f"{_S2PG_DIR}01_BPTT/01_POMDP/launcher.py:30 (std_0 0.5)"})
