"""Presets resolve to the values read from their sources, per task where the source tunes per
task; explicit flags, Python options and sweep entries override them; the listing names
each preset's source."""
from __future__ import annotations

import math

import pytest

from pgjax import ConfigError, TrainConfig
from pgjax.cli import main, parse_train
from pgjax.training.presets import PRESETS, resolve, task_key
from pgjax.tools.sweep import Sweep

# a task each preset is meant for
ENVS = {"cleanrl": "gym:HalfCheetah-v5", "spo-paper": "gym:Hopper-v5",
        "fixpo-paper": "gym:Hopper-v5", "s2pg-paper": "brax:hopper",
        "happo-paper": "mabrax:halfcheetah_2x3", "brax": "brax:halfcheetah",
        "fixpo-paper-ppo": "gym:Hopper-v5", "s2pg-paper-memoryless": "brax:halfcheetah",
        "s2pg-paper-bptt": "brax:hopper", "playground-dmc": "playground:CheetahRun",
        "mujoco": "gym:Ant-v5", "happo-paper-mappo": "mabrax:halfcheetah_2x3",
        "jaxmarl-mappo": "jaxmarl:SMAX-3m"}


def _value(cfg: TrainConfig, key: str):
    head, dot, tail = key.partition(".")
    return getattr(getattr(cfg, head), tail) if dot else getattr(cfg, key)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_resolves_validates_and_is_recorded(name):
    cfg = TrainConfig.from_preset(name, env=ENVS[name])
    cfg.validate()
    assert cfg.preset == name and cfg.to_dict()["preset"] == name
    for key, value in resolve(name, ENVS[name]).items():
        assert _value(cfg, key) == (tuple(value) if isinstance(value, list) else value), key


def test_jaxmarl_mappo_holds_jaxmarls_smax_and_mpe_values():
    # FLAIROx/JaxMARL @ c793d09, baselines/MAPPO/config/mappo_homogenous_rnn_{smax,mpe}.yaml
    smax = TrainConfig.from_preset("jaxmarl-mappo", env="jaxmarl:SMAX-2s3z")
    assert (smax.num_envs, smax.rollout_len, smax.ppo.lr, smax.ppo.ent_coef,
            smax.ppo.max_grad_norm, smax.net.activation) == (128, 128, 2e-3, 0.0, 0.25, "relu")
    assert smax.agents.share_actor and smax.algo == "mappo"
    mpe = TrainConfig.from_preset("jaxmarl-mappo", env="jaxmarl:MPE_simple_spread_v3")
    assert (mpe.num_envs, mpe.ppo.ent_coef, mpe.ppo.max_grad_norm, mpe.net.activation) == (
        16, 0.01, 0.5, "tanh")


def test_presets_hold_the_sources_values():
    # S2PG (robfiras/s2pg launcher): clip 0.05 on Hopper/Walker2d, 0.2 on HalfCheetah/Ant
    for env, eps in [("brax:hopper", 0.05), ("gym:Walker2d-v5", 0.05),
                     ("brax:halfcheetah", 0.2), ("gym:Ant-v5", 0.2)]:
        c = TrainConfig.from_preset("s2pg-paper", env=env)
        assert c.ppo.clip_eps == eps, env
    c = TrainConfig.from_preset("s2pg-paper", env="brax:hopper")
    assert (c.stateful.z_std, math.exp(c.net.init_log_std), c.stateful.z_dim, c.stateful.prev_action) == \
        (0.5, pytest.approx(0.5), 128, True)
    assert (c.ppo.lr, c.ppo.anneal_lr, c.batch_size // c.ppo.minibatches) == (5e-5, False, 32)
    # FixPO (uscresl/stabilized-rl): batch 8192, minibatch 512, fixup 1024, C_beta 3
    c = TrainConfig.from_preset("fixpo-paper", env="gym:Hopper-v5")
    assert (c.batch_size, c.batch_size // c.fixpo.minibatches,
            c.batch_size // c.fixpo.fixup_minibatches) == (8192, 512, 1024)
    assert (c.fixpo.c_beta, c.fixpo.eps_kl, c.net.init_log_std, c.fixpo.fixup_every_epoch) == \
        (3.0, 0.5, -0.5, True)
    # SPO (its mujoco/main.py): 7-layer policy, 8 x 256 steps, 4 minibatches; the PPO
    # baseline of the same preset has the same settings
    for algo in ("spo", "ppo"):
        c = TrainConfig.from_preset("spo-paper", env="gym:Hopper-v5", algo=algo)
        assert c.net.actor_hidden == (256, 256, 128, 128, 64, 64) and c.net.critic_hidden == (64, 64)
        assert (c.num_envs, c.rollout_len, c.algo_config.minibatches,
                c.algo_config.epochs) == (8, 256, 4, 10)
    # Brax notebook, halfcheetah: 512 x 32 sequences of 20 steps per update, 8 epochs
    c = TrainConfig.from_preset("brax", env="brax:halfcheetah")
    assert c.batch_size == 512 * 32 * 20 and (c.ppo.epochs, c.gamma) == (8, 0.95)
    c = TrainConfig.from_preset("brax", env="brax:ant")
    assert (c.num_envs, c.batch_size, c.norm.reward_scale) == (4096, 2048 * 32 * 5, 10.0)
    # Tianshou's PPO MuJoCo benchmark: 64 x 32 steps, minibatch 64, lr over 1,500 updates
    c = TrainConfig.from_preset("mujoco", env="gym:Swimmer-v5")
    assert (c.batch_size, c.batch_size // c.ppo.minibatches, c.anneal_iterations) == \
        (2048, 64, 1500)
    assert (c.ppo.norm_adv, c.ppo.clip_vloss, c.net.init_log_std, c.eval_modes) == \
        (True, False, -0.5, ("stochastic",))  # norm_adv: a listed change from tianshou
    assert c.ppo.recompute_adv and c.norm.value_norm  # tianshou's recompute_advantage
    c = TrainConfig.from_preset("fixpo-paper-ppo", env="gym:Hopper-v5")
    assert not c.ppo.recompute_adv  # as experiment 12b's records were made
    # HARL: defaults, and the tuned Walker2d 2x3 values; initial std sigmoid(1) * 0.5
    c = TrainConfig.from_preset("happo-paper", env="mabrax:halfcheetah_6x1")
    assert (c.ppo.lr, c.ppo.clip_eps, c.ppo.epochs, c.ppo.ent_coef) == (5e-4, 0.2, 5, 0.01)
    assert math.exp(c.net.init_log_std) == pytest.approx(0.3655, abs=1e-4)
    c = TrainConfig.from_preset("happo-paper", env="mabrax:walker2d_2x3")
    assert (c.ppo.lr, c.ppo.clip_eps, c.ppo.minibatches) == (1e-3, 0.05, 2)
    # HARL's MAPPO baseline: HAPPO's tuned values with one shared actor (humanoid_17x1: a
    # 100-step rollout)
    happo = TrainConfig.from_preset("happo-paper", env="mabrax:halfcheetah_2x3")
    mappo = TrainConfig.from_preset("happo-paper-mappo", env="mabrax:halfcheetah_2x3")
    assert (mappo.algo, mappo.agents.share_actor, happo.agents.share_actor) == ("mappo", True, False)
    assert (mappo.ppo, mappo.net, mappo.norm, mappo.agents.obs, mappo.batch_size) == \
        (happo.ppo, happo.net, happo.norm, happo.agents.obs, happo.batch_size)
    assert (mappo.ppo.clip_eps, mappo.ppo.epochs) == (0.05, 15)
    assert TrainConfig.from_preset("happo-paper-mappo", env="mabrax:humanoid_17x1").rollout_len == 100


def test_task_keys():
    assert [task_key(e) for e in ("gym:Hopper-v5", "brax:inverted_pendulum",
                                  "mabrax:walker2d_2x3", "gym:HalfCheetah-v5")] == \
        ["hopper", "inverted_pendulum", "walker2d_2x3", "halfcheetah"]
    # a Gymnasium CamelCase id finds the per-task entry of the Brax-style name
    assert resolve("brax", "gym:InvertedPendulum-v5")["gamma"] == 0.97


def test_explicit_flags_override_the_preset():
    cfg = parse_train(["--preset", "s2pg-paper", "--env", "brax:hopper", "--ppo.clip-eps",
                       "0.1", "--num-envs", "4", "--observe", "positions"])
    assert (cfg.ppo.clip_eps, cfg.num_envs, cfg.observe) == (0.1, 4, "positions")
    assert (cfg.ppo.lr, cfg.stateful.z_dim, cfg.policy, cfg.preset) == (5e-5, 128, "stateful",
                                                               "s2pg-paper")
    assert parse_train(["--env", "brax:hopper"]).ppo.lr == 3e-4  # no preset: the defaults
    cfg = TrainConfig.from_preset("fixpo-paper", env="gym:Hopper-v5",
                                  **{"net.init_log_std": 0.0, "fixpo.c_beta": 1.0})
    assert (cfg.net.init_log_std, cfg.fixpo.c_beta, cfg.fixpo.eps_kl) == (0.0, 1.0, 0.5)


def test_sweep_presets_apply_before_the_sweeps_own_settings():
    sweep = Sweep.from_dict({"algos": ["ppo", "fixpo"], "envs": ["gym:Hopper-v5"],
                             "config": {"steps": 10_000},
                             "static": {"preset": ["cleanrl", "fixpo-paper"]}})
    g = sweep.groups
    assert set(g) == {f"{a}_gym-Hopper-v5_preset={p}" for a in ("ppo", "fixpo")
                      for p in ("cleanrl", "fixpo-paper")}
    c = g["fixpo_gym-Hopper-v5_preset=fixpo-paper"]
    assert (c.algo, c.steps, c.batch_size, c.preset) == ("fixpo", 10_000, 8192, "fixpo-paper")
    c = g["ppo_gym-Hopper-v5_preset=cleanrl"]  # the sweep's algorithm wins over the preset's
    assert (c.algo, c.num_envs, c.rollout_len) == ("ppo", 1, 2048)
    c = Sweep.from_dict({"algos": ["ppo"], "envs": ["brax:hopper"], "preset": "s2pg-paper",
                         "config": {"ppo.lr": 1e-4}}).groups["ppo_brax-hopper"]
    assert (c.ppo.lr, c.ppo.clip_eps, c.preset) == (1e-4, 0.05, "s2pg-paper")


def test_unknown_presets_are_refused(capsys):
    with pytest.raises(ConfigError, match="unknown preset 'spo'.*spo-paper"):
        TrainConfig.from_preset("spo")
    with pytest.raises(ConfigError, match="unknown preset"):
        TrainConfig(preset="nope").validate()
    assert main(["train", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err
    assert main(["presets", "nope"]) == 2


def test_presets_listing_names_each_source(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    for p in PRESETS.values():
        assert f"{p.name}: " in out and p.source in out
    assert "robfiras/s2pg" in out and "for hopper: ppo.clip_eps = 0.05" in out


def test_playground_preset_holds_playgrounds_brax_ppo_settings():
    """mujoco_playground 0.2.0's brax_ppo_config: 2048 envs, 32 minibatches of 1024
    sequences of 30 steps per update (983,040 steps), 16 epochs, discount 0.995 (0.95 on
    BallInCup and FingerSpin), 60M steps (100M on Acrobot, Swimmer and WalkerRun)."""
    c = TrainConfig.from_preset("playground-dmc", env="playground:CheetahRun")
    assert (c.num_envs, c.batch_size, c.ppo.minibatches, c.ppo.epochs) == (2048, 983_040, 32, 16)
    assert (c.gamma, c.steps, c.ppo.lr, c.ppo.ent_coef, c.norm.reward_scale) == \
        (0.995, 60_000_000, 1e-3, 1e-2, 10.0)
    for rule in ("spo", "fixpo"):  # the other rules at the same shared settings
        r = getattr(TrainConfig.from_preset("playground-dmc", env="playground:CheetahRun",
                                            algo=rule), rule)
        assert (r.lr, r.epochs, r.minibatches, r.ent_coef, r.max_grad_norm) == \
            (1e-3, 16, 32, 1e-2, 1e10)
    assert TrainConfig.from_preset("playground-dmc", env="playground:BallInCup").gamma == 0.95
    assert TrainConfig.from_preset("playground-dmc", env="playground:WalkerRun").steps == \
        100_000_000
