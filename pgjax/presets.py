"""Named presets: documented bundles of training settings that reproduce a source's setup.

A preset maps `pgjax train` option names to values (``<rule>.<field>`` for an update rule's
option; a preset may set several rules' options, so that ``--algo ppo`` with the SPO paper's
preset gives the paper's PPO baseline), plus per-task values (e.g. S2PG's clip range per
body). ``pgjax train --preset NAME`` applies one before the command-line flags, so every
explicit flag overrides it; sweep files take ``preset = "NAME"`` (or a ``[static]`` list).
``pgjax presets`` prints each with its source. Values were read from the sources' own code;
``deviations`` says what pgjax cannot express or does differently.
"""
from __future__ import annotations

import math
import re
from typing import NamedTuple

from pgjax.errors import ConfigError


class Preset(NamedTuple):
    name: str
    summary: str
    source: str  # repository @ commit: files the values come from
    options: dict  # option -> value, for every task
    per_task: dict = {}  # task key (see task_key) -> options for that task only
    deviations: tuple = ()  # what differs from the source, and why


def _same(rules, **values) -> dict:
    """The same rule options for each of ``rules``: {"ppo.lr": ..., "spo.lr": ...}."""
    return {f"{r}.{k}": v for r in rules for k, v in values.items()}


_CLEANRL_PPO = dict(lr=3e-4, anneal_lr=True, adam_eps=1e-5, epochs=10, minibatches=32,
                    norm_adv=True, clip_eps=0.2, clip_vloss=True, vf_clip_eps=0.2, vf_coef=0.5,
                    ent_coef=0.0, max_grad_norm=0.5, target_kl=0.0)

CLEANRL = Preset(
    "cleanrl",
    "PPO for continuous control as in cleanrl (pgjax's PPO defaults, which use 64 envs x 32 "
    "steps for the same batch of 2048)",
    "vwxyzjn/cleanrl @ fe8d8a0: cleanrl/ppo_continuous_action.py",
    {"algo": "ppo", "num_envs": 1, "rollout_len": 2048, "steps": 1_000_000, "gamma": 0.99,
     "gae_lambda": 0.95, "actor_hidden": (64, 64), "critic_hidden": (64, 64),
     "activation": "tanh", "init_log_std": 0.0, "policy_head_gain": 0.01,
     "normalize_obs": True, "obs_stats": "running", "obs_stats_steps": 0,
     "normalize_reward": True, "value_norm": False, "reward_scale": 1.0,
     **_same(["ppo"], **_CLEANRL_PPO)},
    deviations=(
        "cleanrl treats a time-limit truncation as termination; pgjax bootstraps it with "
        "V(final observation)",
        "target_kl (off here) is checked per minibatch in pgjax, per epoch in cleanrl"))

SPO_PAPER = Preset(
    "spo-paper",
    "SPO and its PPO baseline as in the SPO paper's MuJoCo runs: a 7-layer tanh policy, "
    "8 envs x 256 steps, 4 minibatches of 512 (--algo ppo runs the paper's PPO)",
    "MyRepositories-hub/Simple-Policy-Optimization @ 9fdeda3: mujoco/main.py, "
    "mujoco/agent.py, mujoco/trainer.py",
    {"algo": "spo", "num_envs": 8, "rollout_len": 256, "steps": 10_000_000, "gamma": 0.99,
     "gae_lambda": 0.95, "actor_hidden": (256, 256, 128, 128, 64, 64),
     "critic_hidden": (64, 64), "activation": "tanh", "init_log_std": 0.0,
     "policy_head_gain": 0.01, "normalize_obs": True, "obs_stats": "running",
     "obs_stats_steps": 0, "normalize_reward": True, "value_norm": False,
     "reward_scale": 1.0, **_same(["ppo", "spo"], **{**_CLEANRL_PPO, "adam_eps": 1e-8, "minibatches": 4})},
    deviations=("the paper's code treats truncation as termination; pgjax bootstraps it",))

FIXPO_PAPER = Preset(
    "fixpo-paper",
    "FixPO as in the paper's MuJoCo runs: 64 envs x 128 steps, minibatch 512, fixup "
    "minibatch 1024, fixup after every epoch, C_beta 3, initial log-std -0.5",
    "uscresl/stabilized-rl @ e804a23: exps_tianshou.py (C_beta 3), "
    "src/mujoco_fixpo_tianshou.py, src/fixpo_tianshou.py",
    {"algo": "fixpo", "num_envs": 64, "rollout_len": 128, "steps": 10_000_000, "gamma": 0.99,
     "gae_lambda": 0.95, "actor_hidden": (64, 64), "critic_hidden": (64, 64),
     "activation": "tanh", "init_log_std": -0.5, "policy_head_gain": 0.01,
     "normalize_obs": True, "obs_stats": "running", "obs_stats_steps": 0,
     "normalize_reward": False, "value_norm": True, "reward_scale": 1.0,
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
        "the authors' 10M steps are collected in 8192-step chunks per 20k-step epoch, about "
        "12.3M steps in all; the preset says 10M"))

_S2PG_CLIP = {"hopper": 0.05, "walker2d": 0.05, "halfcheetah": 0.2, "ant": 0.2,
              "humanoid": 0.1}

S2PG_PAPER = Preset(
    "s2pg-paper",
    "S2PG with PPO as in the paper's POMDP runs: GRU state z of 128, one learned std over "
    "[a, z'] starting at 0.5, previous action as input, lr 5e-5 constant, minibatch 32, "
    "clip per body; pass --policy stateful (and --observe positions for the POMDP)",
    "robfiras/s2pg @ 605000a: experiments/01_Reinforcement_Learning/02_RS/01_POMDP/"
    "launcher.py and experiment.py, s2pg/policy/recurrent_policy.py, "
    "s2pg/algorithms/reinforcement_learning/deep_actor_critic/rs/ppo_rs.py",
    {"algo": "ppo", "policy": "stateful", "num_envs": 8, "rollout_len": 256,
     "steps": 5_000_000, "episode_length": 1000, "gamma": 0.99, "gae_lambda": 0.95,
     "z_dim": 128, "z_std": 0.5, "init_log_std": math.log(0.5), "stateful_prev_action": True,
     "actor_hidden": (128,), "critic_hidden": (128, 128), "activation": "relu",
     "normalize_obs": True, "obs_stats": "running", "obs_stats_steps": 0,
     "normalize_reward": False, "value_norm": False, "reward_scale": 1.0,
     **_same(["ppo"], lr=5e-5, anneal_lr=False, adam_eps=1e-8, epochs=10, minibatches=64,
             norm_adv=True, clip_eps=0.2, clip_vloss=False, vf_coef=0.5, ent_coef=0.0,
             max_grad_norm=1e10, target_kl=0.0)},
    per_task={t: {"ppo.clip_eps": e} for t, e in _S2PG_CLIP.items()},
    deviations=(
        "2048 steps per update in 64 minibatches of 32 (the authors: 2000 steps, 62 "
        "minibatches of 32 and one of 16; pgjax splits a batch evenly)",
        "one optimiser for actor and critic trained together (the authors fit the critic "
        "first, with its own Adam); no gradient clipping (max_grad_norm 1e10)",
        "pgjax's stateful actor feeds one observation embedding to the GRU and the action "
        "head (the authors use two), and initialises orthogonally (theirs: Xavier)",
        "advantages are normalised per minibatch (the authors: once per batch)",
        "ant and humanoid: the authors also keep contact forces in the POMDP observation"))

_BRAX_TASKS = {  # from Brax's training notebook: envs, minibatch (sequences), minibatches,
    # epochs, unroll, discount, entropy, reward scale, steps
    "halfcheetah": (2048, 512, 32, 8, 20, 0.95, 1e-3, 1.0, 50_000_000),
    "ant": (4096, 2048, 32, 4, 5, 0.97, 1e-2, 10.0, 50_000_000),
    "humanoid": (2048, 1024, 32, 8, 10, 0.97, 1e-3, 0.1, 50_000_000),
    "inverted_pendulum": (2048, 1024, 32, 4, 5, 0.97, 1e-2, 10.0, 2_000_000),
    "inverted_double_pendulum": (2048, 1024, 32, 4, 5, 0.97, 1e-2, 10.0, 20_000_000),
}


def _brax_task(envs, batch, mbs, epochs, unroll, gamma, ent, scale, steps) -> dict:
    # Brax collects batch x minibatches sequences of `unroll` steps per update
    return {"num_envs": envs, "rollout_len": unroll * batch * mbs // envs, "gamma": gamma,
            "reward_scale": scale, "steps": steps, "ppo.minibatches": mbs,
            "ppo.epochs": epochs, "ppo.ent_coef": ent}


BRAX = Preset(
    "brax",
    "Brax's PPO trainer with the per-task settings of Brax's training notebook (tasks it "
    "has no PPO setting for, e.g. hopper and walker2d, get the halfcheetah one)",
    "google/brax @ 0b96d05: brax/training/agents/ppo/train.py, networks.py, losses.py; "
    "notebooks/training.ipynb",
    {"algo": "ppo", "episode_length": 1000, "gae_lambda": 0.95, "reset_pool": "fixed",
     "actor_hidden": (32, 32, 32, 32), "critic_hidden": (256, 256, 256, 256, 256),
     "activation": "silu", "init_log_std": 0.0, "normalize_obs": True,
     "obs_stats": "running", "obs_stats_steps": 0, "normalize_reward": False,
     "value_norm": False, **_brax_task(*_BRAX_TASKS["halfcheetah"]),
     **_same(["ppo"], lr=3e-4, anneal_lr=False, adam_eps=1e-8, norm_adv=True, clip_eps=0.3,
             clip_vloss=False, vf_coef=0.5, max_grad_norm=1e10, target_kl=0.0)},
    per_task={t: _brax_task(*v) for t, v in _BRAX_TASKS.items()},
    deviations=(
        "Brax's policy is a tanh-squashed Gaussian with a state-dependent std (softplus + "
        "0.001); pgjax's is a Gaussian with a learned state-independent log-std, actions "
        "clipped by the environment",
        "Brax recomputes GAE inside every minibatch with the current critic and uses "
        "r + gamma * v_{t+1} - V_t as the advantage; pgjax computes GAE once per rollout",
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
    {"algo": "happo", "num_envs": 20, "rollout_len": 200, "steps": 10_000_000,
     "episode_length": 1000, "gamma": 0.99, "gae_lambda": 0.95,
     "actor_hidden": (128, 128, 128), "critic_hidden": (128, 128, 128), "activation": "relu",
     "policy_head_gain": 0.01, "init_log_std": math.log(0.5 / (1 + math.exp(-1.0))),
     "share_actor": False, "agent_order": "random", "normalize_obs": True,
     "obs_stats": "running", "obs_stats_steps": 0, "normalize_reward": False,
     "value_norm": True, "reward_scale": 1.0,
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
        "HARL's std is sigmoid-bounded below 0.5; pgjax's log-std is unbounded (it starts at "
        "HARL's initial 0.366)",
        "HARL clips each actor's and the critic's gradients separately (norm 10); pgjax clips "
        "each agent's update and the critic's with one global norm",
        "HARL gives every agent the full state plus a one-hot id; pgjax's mabrax agents see "
        "their own and neighbouring joints and the root",
        "halfcheetah_6x1 has no tuned HAPPO config in HARL: it gets the defaults"))

PRESETS = {p.name: p for p in (CLEANRL, SPO_PAPER, FIXPO_PAPER, S2PG_PAPER, HAPPO_PAPER, BRAX)}


def task_key(env: str) -> str:
    """The part of an environment id presets match per task: ``gym:Hopper-v5`` -> hopper,
    ``brax:inverted_pendulum`` -> inverted_pendulum, ``mabrax:walker2d_2x3`` ->
    walker2d_2x3."""
    name = env.split(":", 1)[-1].lower()
    return re.sub(r"-v\d+$", "", name).replace("-", "_")


def get(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset '{name}'; use one of {', '.join(PRESETS)} "
                          f"(pgjax presets lists them)")
    return PRESETS[name]


def resolve(name: str, env: str) -> dict:
    """Every option preset ``name`` sets for environment ``env``, per-task values included
    (the task's own entry; for single-agent ids also a body name such as ``hopper``)."""
    p = get(name)
    key = task_key(env)
    per_task = p.per_task.get(key)
    if per_task is None:
        camel = {re.sub(r"[^a-z0-9]", "", k): k for k in p.per_task}
        per_task = p.per_task.get(camel.get(re.sub(r"[^a-z0-9]", "", key), ""), {})
    out = {**p.options, **per_task}
    if "steps" in out:  # the source's budget is its schedules' horizon unless it says another
        out.setdefault("anneal_steps", out["steps"])
    return out


def describe(p: Preset) -> str:
    """Text for ``pgjax presets``: summary, source, options, per-task values, deviations."""
    lines = [f"{p.name}: {p.summary}", f"  source: {p.source}", "  sets:"]
    lines += [f"    {k} = {v!r}" for k, v in p.options.items()]
    for task, opts in p.per_task.items():
        lines.append(f"  for {task}: " + ", ".join(f"{k} = {v!r}" for k, v in opts.items()))
    if p.deviations:
        lines.append("  differs from the source:")
        lines += [f"    - {d}" for d in p.deviations]
    return "\n".join(lines)
