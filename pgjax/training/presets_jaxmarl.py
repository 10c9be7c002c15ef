"""Presets from JaxMARL's baselines: its MAPPO on SMAX and MPE."""
from __future__ import annotations

from pgjax.training.preset_type import Preset, _same

_SRC = "FLAIROx/JaxMARL @ c793d09"
_SMAX_YAML = "baselines/MAPPO/config/mappo_homogenous_rnn_smax.yaml"
_MPE_YAML = "baselines/MAPPO/config/mappo_homogenous_rnn_mpe.yaml"
_CODE = "baselines/MAPPO/mappo_rnn_smax.py"

JAXMARL_MAPPO = Preset(
    "jaxmarl-mappo",
    "JaxMARL's MAPPO baseline on SMAX: one actor shared by the agents, a centralised critic "
    "on the world state, 128 envs x 128 steps, 4 epochs of 4 minibatches, lr 2e-3 annealed, "
    "no entropy bonus, grad clip 0.25, 128-wide ReLU layers (MPE: its MPE values)",
    f"{_SRC}: {_SMAX_YAML}, {_MPE_YAML}, {_CODE}",
    {"algo": "mappo", "agents.share_actor": True, "num_envs": 128, "rollout_len": 128,
     "steps": 10_000_000, "gamma": 0.99, "gae_lambda": 0.95,
     "net.actor_hidden": (128, 128), "net.critic_hidden": (128, 128),
     "net.activation": "relu", "net.policy_head_gain": 0.01,
     "norm.normalize_obs": False, "norm.normalize_reward": False, "norm.value_norm": False,
     "norm.reward_scale": 1.0, "eval_mode": "stochastic",
     **_same(["ppo"], lr=2e-3, anneal_lr=True, adam_eps=1e-5, epochs=4, minibatches=4,
             norm_adv=True, clip_eps=0.2, clip_vloss=True, vf_clip_eps=0.2, vf_coef=0.5,
             ent_coef=0.0, max_grad_norm=0.25, target_kl=0.0)},
    per_task={"mpe_simple_spread_v3": {"num_envs": 16, "net.activation": "tanh",
                                       **_same(["ppo"], ent_coef=0.01, max_grad_norm=0.5)},
              "mpe_simple_reference_v3": {"num_envs": 16, "net.activation": "tanh",
                                          **_same(["ppo"], ent_coef=0.01, max_grad_norm=0.5)},
              "mpe_simple_speaker_listener_v4": {
                  "num_envs": 16, "net.activation": "tanh",
                  **_same(["ppo"], ent_coef=0.01, max_grad_norm=0.5)}},
    deviations=(
        "JaxMARL's actor and critic are recurrent (Dense 128, GRU 128, Dense 128); pgjax's "
        "multi-agent policies are feedforward (two 128-wide layers)",
        "JaxMARL gives the critic the world state with the agent's one-hot id, one value per "
        "agent; pgjax's centralised critic reads the world state once; pgjax's shared actor "
        "sees its agent's one-hot id appended to its observation, JaxMARL's does not",
        "JaxMARL ends an episode at the time limit as a termination (no bootstrap); pgjax "
        "truncates it and bootstraps from the value of its last state",
        "JaxMARL's agents each learn from their own reward and dead agents are marked done; "
        "pgjax's team reward is the agents' mean (SMAX's agents share one) and an episode "
        "ends for the team",
        "JaxMARL clips the actor's and the critic's gradients separately (norm 0.25 each); "
        "pgjax clips the update's with one global norm",
        "JaxMARL's steps budget (1e7) is a config value; the experiments here run a prefix "
        "of it or anneal over a smaller budget, as each sweep file says"),
    lines={"num_envs": f"{_SMAX_YAML}:2 (NUM_ENVS 128); {_MPE_YAML}:2 (16)",
           "rollout_len": f"{_SMAX_YAML}:3 (NUM_STEPS 128)",
           "steps": f"{_SMAX_YAML}:4 (TOTAL_TIMESTEPS 1e7)",
           "net.actor_hidden": f"{_SMAX_YAML}:5-6 (FC_DIM_SIZE 128, GRU_HIDDEN_DIM 128)",
           "ppo.epochs": f"{_SMAX_YAML}:7-8 (UPDATE_EPOCHS 4, NUM_MINIBATCHES 4)",
           "ppo.clip_eps": f"{_SMAX_YAML}:11; the value clip uses the same: {_CODE}:473-475",
           "ppo.ent_coef": f"{_SMAX_YAML}:13 (0.0); {_MPE_YAML} (0.01)",
           "ppo.max_grad_norm": f"{_SMAX_YAML}:15 (0.25); {_MPE_YAML} (0.5)",
           "net.activation": f"{_SMAX_YAML}:16 (relu); {_MPE_YAML} (tanh)",
           "ppo.lr": f"{_SMAX_YAML}:1,25 (0.002, ANNEAL_LR True); adam eps 1e-5: "
                     f"{_CODE}:256-262",
           "ppo.norm_adv": f"{_CODE}:433 (per minibatch)",
           "net.policy_head_gain": f"{_CODE}:132 (orthogonal(0.01))",
           "agents.share_actor": "MAPPO/README.md (homogenous: one network for every agent)",
           "eval_mode": "JaxMARL reports the training episodes' returns and win rates "
                        "(stochastic policy)"})
