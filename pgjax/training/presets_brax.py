"""Presets from Brax-based sources: Brax's trainer, HARL on Brax bodies, MuJoCo Playground."""
from __future__ import annotations

import math

from pgjax.training.preset_type import Preset, _same

_BRAX_TASKS = {  # from Brax's training notebook: envs, minibatch (sequences), minibatches,
    # epochs, unroll, discount, entropy, reward scale, steps
    "halfcheetah": (2048, 512, 32, 8, 20, 0.95, 1e-3, 1.0, 50_000_000),
    "ant": (4096, 2048, 32, 4, 5, 0.97, 1e-2, 10.0, 50_000_000),
    "humanoid": (2048, 1024, 32, 8, 10, 0.97, 1e-3, 0.1, 50_000_000),
    "inverted_pendulum": (2048, 1024, 32, 4, 5, 0.97, 1e-2, 10.0, 2_000_000),
    "inverted_double_pendulum": (2048, 1024, 32, 4, 5, 0.97, 1e-2, 10.0, 20_000_000),
}


def _brax_task(envs, batch, mbs, epochs, unroll, gamma, ent, scale, steps,
               rules=("ppo",)) -> dict:
    # Brax collects batch x minibatches sequences of `unroll` steps per update
    return {"num_envs": envs, "rollout_len": unroll * batch * mbs // envs, "gamma": gamma,
            "norm.reward_scale": scale, "steps": steps,
            **_same(rules, minibatches=mbs, epochs=epochs, ent_coef=ent)}


BRAX = Preset(
    "brax",
    "Brax's PPO trainer with the per-task settings of Brax's training notebook (tasks it "
    "has no PPO setting for, e.g. hopper and walker2d, get the halfcheetah one)",
    "google/brax @ 0b96d05: brax/training/agents/ppo/train.py, networks.py, losses.py; "
    "notebooks/training.ipynb",
    {"algo": "ppo", "episode_length": 1000, "gae_lambda": 0.95, "reset_pool": "fixed",
     "net.actor_hidden": (32, 32, 32, 32), "net.critic_hidden": (256, 256, 256, 256, 256),
     "net.activation": "silu", "net.init_log_std": 0.0, "norm.normalize_obs": True,
     "norm.obs_stats": "running", "norm.obs_stats_steps": 0, "norm.normalize_reward": False,
     "norm.value_norm": False, **_brax_task(*_BRAX_TASKS["halfcheetah"]),
     **_same(["ppo"], lr=3e-4, anneal_lr=False, adam_eps=1e-8, norm_adv=True, clip_eps=0.3,
             clip_vloss=False, vf_coef=0.5, max_grad_norm=1e10, target_kl=0.0)},
    per_task={t: _brax_task(*v) for t, v in _BRAX_TASKS.items()},
    deviations=(
        "Brax's policy is a tanh-squashed Gaussian with a state-dependent std (softplus + "
        "0.001); pgjax's is a Gaussian with a learned state-independent log-std, actions "
        "clipped by the environment",
        "Brax recomputes GAE inside every minibatch with the current critic, per unroll, and "
        "uses r + gamma * G_{t+1} - V_t (G the lambda-return) as the advantage; pgjax "
        "computes GAE once per rollout (--gae-segment <unroll> and --advantage lambda-return "
        "do Brax's segments and advantage; --ppo.recompute-adv recomputes before each epoch)",
        "Brax masks truncated transitions; pgjax bootstraps them",
        "Brax does not clip normalised observations; pgjax clips them to +-10",
        "pgjax minibatches are shuffled transitions, Brax's are whole unroll sequences"))

_HARL_TASKS = {
    "ant_4x2": {"ppo.clip_eps": 0.1, "ppo.vf_clip_eps": 0.1, "ppo.ent_coef": 0.0},
    "halfcheetah_2x3": {"ppo.clip_eps": 0.05, "ppo.vf_clip_eps": 0.05, "ppo.epochs": 15},
    "hopper_3x1": {"ppo.clip_eps": 0.05, "ppo.vf_clip_eps": 0.05, "ppo.epochs": 10,
                   "ppo.ent_coef": 0.0, "ppo.anneal_lr": True},
    "humanoid_17x1": {"ppo.clip_eps": 0.1, "ppo.vf_clip_eps": 0.1, "ppo.ent_coef": 0.0,
                      "ppo.anneal_lr": True},
    "walker2d_2x3": {"ppo.lr": 1e-3, "ppo.clip_eps": 0.05, "ppo.vf_clip_eps": 0.05,
                     "ppo.minibatches": 2, "ppo.ent_coef": 0.0, "ppo.anneal_lr": True},
    "walker2d_6x1": {"ppo.clip_eps": 0.1, "ppo.vf_clip_eps": 0.1},
}

HAPPO_PAPER = Preset(
    "happo-paper",
    "HAPPO as in HARL's MA-MuJoCo settings: 20 envs x 200 steps, 5 epochs of one minibatch, "
    "lr 5e-4, entropy 0.01, grad clip 10, 128-128-128 ReLU, initial std 0.366, with HARL's "
    "tuned per-task values",
    "PKU-MARL/HARL @ d539bad: harl/configs/algos_cfgs/happo.yaml, "
    "tuned_configs/mamujoco/<task>/happo/config.json",
    {"algo": "happo", "diagnostics": "full", "num_envs": 20, "rollout_len": 200,
     "steps": 10_000_000,
     "episode_length": 1000, "gamma": 0.99, "gae_lambda": 0.95,
     "net.actor_hidden": (128, 128, 128), "net.critic_hidden": (128, 128, 128), "net.activation": "relu",
     "net.policy_head_gain": 0.01, "net.init_log_std": math.log(0.5 / (1 + math.exp(-1.0))),
     "net.std_max": 0.5, "agents.obs": "full_state_id", "eval_mode": "deterministic",
     "agents.share_actor": False, "agents.order": "random", "norm.normalize_obs": True,
     "norm.obs_stats": "running", "norm.obs_stats_steps": 0, "norm.normalize_reward": False,
     "norm.value_norm": True, "norm.reward_scale": 1.0,
     **_same(["ppo"], lr=5e-4, anneal_lr=False, adam_eps=1e-5, epochs=5, minibatches=1,
             norm_adv=True, clip_eps=0.2, clip_vloss=True, vf_clip_eps=0.2, vf_coef=1.0,
             ent_coef=0.01, max_grad_norm=10.0, target_kl=0.0)},
    per_task=_HARL_TASKS,
    deviations=(
        "HARL's critic uses a Huber loss (delta 10) on ValueNorm targets (running mean and "
        "std); pgjax uses the squared error on targets scaled by the return std "
        "(value_norm, no mean)",
        "HARL normalises features with LayerNorm (input and hidden layers); pgjax uses "
        "running observation statistics and no LayerNorm",
        "HARL clips each actor's and the critic's gradients separately (norm 10); pgjax clips "
        "each agent's update and the critic's with one global norm",
        "HARL standardises each agent's observation vector over its own entries (and the "
        "critic's state); pgjax uses running per-entry observation statistics",
        "Brax's bodies stand in for Gymnasium's MuJoCo models (mabrax:)",
        "HARL masks truncated steps out of the advantages (harl/common/buffers/"
        "on_policy_critic_buffer_ep.py:122); pgjax bootstraps them with V(final observation)",
        "halfcheetah_6x1 has no tuned HAPPO config in HARL: it gets the defaults"),
    lines={"agents.obs": "harl/envs/mamujoco/multiagent_mujoco/mujoco_multi.py:199-212 "
                        "(obs_i = concatenate([state, agent_id_feats]))",
           "net.std_max": "harl/models/base/distributions.py:83,88; harl/configs/algos_cfgs/"
                      "happo.yaml:76,78 (std = sigmoid(log_std / 1) * 0.5)",
           "eval_mode": "harl/runners/on_policy_base_runner.py:531 (deterministic=True)",
           "steps": "harl/configs/algos_cfgs/happo.yaml:18 (num_env_steps 10M)",
           "ppo.anneal_lr": "happo.yaml:28 (False); tuned configs: True for hopper_3x1, "
                            "humanoid_17x1, walker2d_2x3"})

# HARL's MAPPO baseline: its tuned MA-MuJoCo configs equal HAPPO's but for one actor shared
# by the agents (and a 100-step rollout on humanoid_17x1)
HAPPO_PAPER_MAPPO = HAPPO_PAPER._replace(
    name="happo-paper-mappo",
    summary="HARL's MAPPO baseline on MA-MuJoCo: simultaneous updates of one actor shared by "
            "every agent (each sees the full state and its one-hot id), otherwise HAPPO's "
            "settings and HARL's tuned per-task values",
    source="PKU-MARL/HARL @ d539bad: harl/configs/algos_cfgs/mappo.yaml, "
           "tuned_configs/mamujoco/<task>/mappo/config.json",
    options={**HAPPO_PAPER.options, "algo": "mappo", "agents.share_actor": True},
    per_task={**_HARL_TASKS,
              "humanoid_17x1": {**_HARL_TASKS["humanoid_17x1"], "rollout_len": 100}},
    lines={**HAPPO_PAPER.lines,
           "agents.share_actor": "harl/configs/algos_cfgs/mappo.yaml:116 (share_param True); "
                                 "tuned_configs/mamujoco/HalfCheetah-v2-2x3/mappo/config.json:16",
           "rollout_len": "tuned_configs/mamujoco/Humanoid-v2-17x1/mappo/config.json "
                          "(episode_length 100; HAPPO's 200)"})

_DMC = "mujoco_playground/config/dm_control_suite_params.py"
# the rules this preset sets Brax PPO's shared settings for (SPO and FixPO at PPO's settings:
# SPO's epsilon at PPO's clip; FixPO's own eps_kl, C_beta and fixup at its paper's defaults)
_DMC_RULES = ("ppo", "spo", "fixpo")

PLAYGROUND_DMC = Preset(
    "playground-dmc",
    "Brax PPO as MuJoCo Playground runs it on the DM Control Suite (playground: tasks): 2048 "
    "envs, 16 epochs of 32 minibatches over 983,040 steps per update, 60M steps (--algo spo "
    "and fixpo run those rules at the same settings)",
    "google-deepmind/mujoco_playground 0.2.0 (PyPI): " + _DMC + " (brax_ppo_config); "
    "google/brax @ 0b96d05: brax/training/agents/ppo/train.py, networks.py",
    {"algo": "ppo", "gae_lambda": 0.95, "reset_pool": "fixed", "playground.action_repeat": 1,
     "eval_mode": "stochastic", "eval_envs": 128,
     "net.actor_hidden": (32, 32, 32, 32), "net.critic_hidden": (256, 256, 256, 256, 256),
     "net.activation": "silu", "net.init_log_std": 0.0, "norm.normalize_obs": True,
     "norm.obs_stats": "running", "norm.obs_stats_steps": 0, "norm.normalize_reward": False,
     "norm.value_norm": False, **_brax_task(2048, 1024, 32, 16, 30, 0.995, 1e-2, 10.0,
                                            60_000_000, _DMC_RULES),
     **_same(_DMC_RULES, lr=1e-3, anneal_lr=False, adam_eps=1e-8, norm_adv=True,
             clip_vloss=False, vf_coef=0.5, max_grad_norm=1e10, target_kl=0.0),
     **_same(["ppo", "spo"], clip_eps=0.3)},
    per_task={"acrobotswingup": {"steps": 100_000_000},
              "acrobotswingupsparse": {"steps": 100_000_000},
              "swimmerswimmer6": {"steps": 100_000_000}, "walkerrun": {"steps": 100_000_000},
              "ballincup": {"gamma": 0.95}, "fingerspin": {"gamma": 0.95}},
    deviations=(
        "the Brax policy and GAE differences of the brax preset (tanh-squashed Gaussian with "
        "a state-dependent std; GAE per minibatch; truncation masked, here bootstrapped)",
        "Brax's layers are LeCun-uniform and its initial std about 0.69 (softplus(0) + 0.001, "
        "before the tanh); here orthogonal layers, a 0.01 policy head and std 1",
        "Playground's trainer resets every training env after each update "
        "(num_resets_per_eval), so its training episodes never run past one update's steps "
        "per env (480); here an env restarts from its first state only when its episode ends "
        "(at the 1000-step limit at the latest); --reset-pool update resets them as "
        "Playground does",
        "Playground's override for PendulumSwingup (action repeat 4, 4 epochs) is keyed "
        "PendulumSwingUp and never applies in its own runs; this preset does not apply it "
        "either (pass --playground.action-repeat 4 --ppo.epochs 4 for the intended one)",
        "2048 envs x 480 steps per update hold about 1M transitions: on a small machine pass "
        "fewer --num-envs (the same steps per update need a longer --rollout-len)",
        "Playground runs only PPO (and SAC): SPO and FixPO take PPO's settings here, SPO's "
        "epsilon at PPO's clip 0.3, FixPO's KL bound and fixup at its own defaults"),
    lines={"steps": _DMC + ": num_timesteps=60_000_000 (100M for Acrobot*, Swimmer*, "
                           "WalkerRun)",
           "num_envs": _DMC + ": num_envs=2048, batch_size=1024, num_minibatches=32, "
                              "unroll_length=30",
           "ppo.epochs": _DMC + ": num_updates_per_batch=16",
           "gamma": _DMC + ": discounting=0.995 (0.95 for BallInCup, FingerSpin)",
           "ppo.lr": _DMC + ": learning_rate=1e-3", "ppo.ent_coef": _DMC + ": entropy_cost=1e-2",
           "norm.reward_scale": _DMC + ": reward_scaling=10.0",
           "eval_mode": "brax 0.14.2: brax/training/agents/ppo/train.py:229 "
                        "(deterministic_eval=False; playground 0.2.0's "
                        "learning/train_jax_ppo.py does not set it)",
           "eval_envs": "learning/train_jax_ppo.py:128,382 (num_eval_envs 128, one episode "
                        "each)",
           "reset_pool": "mujoco_playground/_src/wrapper.py: wrap_for_brax_training "
                         "(full_reset=False: each env restarts from its first state)"})
