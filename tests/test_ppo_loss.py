"""The PPO loss against values worked out by hand."""
import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.model.nets import Parts
from pgjax.algos.common import Batch
from pgjax.algos.pieces import (actor_critic_loss, clipped_surrogate, surrogate_objective,
                                value_loss)
from pgjax.algos.ppo import PPOConfig
from pgjax.analysis.results import run_metrics
from pgjax.model.distributions import Categorical, Gaussian, StatefulDistribution


class FixedPolicy(NamedTuple):
    """A 'network' whose outputs are its parameters, so every number is chosen by hand."""
    distribution: object = Categorical()

    def dist(self, actor_params, obs):
        return {"logits": actor_params["logits"]}

    def value(self, critic_params, obs):
        return critic_params["v"]


def test_clipped_surrogate_hand_values():
    ratio = jnp.array([0.5, 0.9, 1.1, 1.5, 1.5, 0.5])
    adv = jnp.array([1.0, 1.0, -2.0, 2.0, -1.0, -1.0])
    got = clipped_surrogate(ratio, adv, PPOConfig(clip_eps=0.2))
    # min(rA, clip(r)A): 0.5 | 0.9 | -2.2 | 1.2*2=2.4 | -1.5 (unclipped is lower) | -0.8
    np.testing.assert_allclose(got, [0.5, 0.9, -2.2, 2.4, -1.5, -0.8], rtol=1e-6)


def test_value_loss_hand_values():
    v, v_old, ret = jnp.array([1.0, 0.0]), jnp.array([0.0, 0.0]), jnp.array([0.5, 1.0])
    # unclipped: 0.5 * mean(0.25, 1) = 0.3125
    assert float(value_loss(v, v_old, ret)) == pytest.approx(0.3125)
    # clipped at 0.2: V_clip = (0.2, 0.0); errors max(0.25, 0.09)=0.25, max(1, 1)=1 -> same
    assert float(value_loss(v, v_old, ret, 0.2)) == pytest.approx(0.3125)
    v2 = jnp.array([0.6, 0.0])
    # err (0.6-0.5)^2 = 0.01, clipped (0.2-0.5)^2 = 0.09 -> 0.09; second 1 -> 0.5*(1.09)/2
    assert float(value_loss(v2, v_old, ret, 0.2)) == pytest.approx(0.5 * (0.09 + 1.0) / 2)


def test_full_ppo_loss_hand_values():
    # Two states, two actions. New policy logits give p(a=0) = e/(e+1) in state 0, 0.5 in 1.
    logits = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    action = jnp.array([0, 1])
    old_logp = jnp.log(jnp.array([0.5, 0.8]))
    p0 = math.e / (math.e + 1)
    ratios = np.array([p0 / 0.5, 0.5 / 0.8])  # 1.4621, 0.625
    adv = jnp.array([1.0, -1.0])
    mb = Batch(obs=jnp.zeros((2, 1)), action=action, log_prob=old_logp, dist=None,
               value=jnp.array([0.0, 1.0]), advantage=adv, ret=jnp.array([1.0, 1.0]))
    params = Parts({"logits": logits}, {"v": jnp.array([0.5, 1.5])})
    hp = PPOConfig(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, vf_clip_eps=0.2)
    cfg = PPOConfig(norm_adv=False, clip_vloss=True)
    loss_fn = actor_critic_loss(cfg, FixedPolicy(), surrogate_objective(clipped_surrogate))
    loss, aux = loss_fn(params, mb, hp)

    # surrogate: state 0, A=+1: min(1.4621, 1.2) = 1.2; state 1, A=-1: min(-0.625, -0.8) = -0.8
    pg = -(1.2 - 0.8) / 2
    # value: state 0 err (0.5-1)^2=0.25, clipped V=0.2 -> 0.64 -> 0.64; state 1 err 0.25,
    # clipped V=1.2 -> 0.04 -> 0.25.  0.5 * mean = 0.5 * 0.445
    vl = 0.5 * (0.64 + 0.25) / 2
    ent0 = -(p0 * math.log(p0) + (1 - p0) * math.log(1 - p0))
    ent = (ent0 + math.log(2)) / 2
    assert float(aux["pg_loss"]) == pytest.approx(pg, rel=1e-5)
    assert float(aux["v_loss"]) == pytest.approx(vl, rel=1e-5)
    assert float(loss) == pytest.approx(pg + 0.5 * vl - 0.01 * ent, rel=1e-5)
    # both ratios are outside [0.8, 1.2]
    assert float(aux["clip_frac"]) == pytest.approx(1.0)
    logr = np.log(ratios)
    assert float(aux["approx_kl"]) == pytest.approx(np.mean(ratios - 1 - logr), rel=1e-5)


class FixedStatefulPolicy(NamedTuple):
    """S2PG's product policy over [a, z'] with hand-chosen parameters."""
    distribution: object = StatefulDistribution(Gaussian(), a_size=1)

    def dist(self, actor_params, obs):
        return actor_params["d"]

    def value(self, critic_params, obs):
        return jnp.zeros(obs.shape[0])


def test_s2pg_clip_fraction_is_split_into_the_action_and_internal_state_factors():
    # Old policy N(0, 1) for a and for z'; new: a's mean 0.5, z's mean 0.1, both stds 1, so
    # log r_a = (a^2 - (a - 0.5)^2) / 2 and log r_z = (z^2 - (z - 0.1)^2) / 2.
    x = jnp.array([[1.0, 0.0],    # log r_a 0.375 (r_a 1.455, out), log r_z -0.005: r 1.448, out
                   [0.0, 1.0],    # log r_a -0.125 (0.882), log r_z 0.095 (1.100): r 0.970, in
                   [0.25, 2.0]])  # log r_a 0 (1), log r_z 0.195 (1.215, out): r 1.215, out
    ones, zeros = jnp.ones((3, 1)), jnp.zeros((3, 1))
    old = {"a": {"mean": zeros, "log_std": zeros}, "z_mean": zeros, "z_log_std": zeros}
    new = {"a": {"mean": 0.5 * ones, "log_std": zeros}, "z_mean": 0.1 * ones,
           "z_log_std": zeros}
    pol = FixedStatefulPolicy()
    mb = Batch(obs=jnp.zeros((3, 1)), action=x, log_prob=pol.distribution.log_prob(old, x),
               dist=old, value=jnp.zeros(3), advantage=jnp.ones(3), ret=jnp.zeros(3))
    loss_fn = actor_critic_loss(PPOConfig(norm_adv=False), pol,
                                surrogate_objective(clipped_surrogate))
    _, aux = loss_fn(Parts({"d": new}, {}), mb,
                     PPOConfig(clip_eps=0.2, vf_coef=0.5, ent_coef=0.0, vf_clip_eps=0.2))
    assert float(aux["clip_frac"]) == pytest.approx(2 / 3)
    assert float(aux["clip_frac_a"]) == pytest.approx(1 / 3)
    assert float(aux["clip_frac_z"]) == pytest.approx(1 / 3)


def test_advantage_normalisation_switch():
    mb = Batch(obs=jnp.zeros((2, 1)), action=jnp.array([0, 0]), log_prob=jnp.log(jnp.array([0.5,
                                                                                            0.5])),
               dist=None, value=jnp.zeros(2), advantage=jnp.array([3.0, 5.0]), ret=jnp.zeros(2))
    params = Parts({"logits": jnp.zeros((2, 2))}, {"v": jnp.zeros(2)})
    hp = PPOConfig(clip_eps=0.2, vf_coef=0.0, ent_coef=0.0, vf_clip_eps=0.2)
    # ratio 1 everywhere: pg = -mean(A); normalised advantages have mean 0
    _, aux = actor_critic_loss(PPOConfig(norm_adv=False), FixedPolicy(),
                               surrogate_objective(clipped_surrogate))(params, mb, hp)
    assert float(aux["pg_loss"]) == pytest.approx(-4.0)
    _, aux = actor_critic_loss(PPOConfig(norm_adv=True), FixedPolicy(),
                               surrogate_objective(clipped_surrogate))(params, mb, hp)
    assert float(aux["pg_loss"]) == pytest.approx(0.0, abs=1e-6)


def test_kl_penalty_pieces_hand_values():
    from pgjax.algos.pieces import PolicyTerms, adapt_kl_coef, kl_penalty

    # beta doubles above 1.5 d_targ, halves below d_targ / 1.5, else stays (Schulman et al.)
    kl = jnp.array([0.0151, 0.0149, 0.0067, 0.0066, 0.01])
    np.testing.assert_allclose(adapt_kl_coef(jnp.full(5, 0.4), kl, 0.01),
                               [0.8, 0.4, 0.4, 0.2, 0.4])
    # KL(old || new) of two categoricals by hand: old (0.5, 0.5), new (e/(e+1), 1/(e+1))
    p0 = math.e / (math.e + 1)
    by_hand = 0.5 * math.log(0.5 / p0) + 0.5 * math.log(0.5 / (1 - p0))
    t = PolicyTerms(dist={"logits": jnp.array([[1.0, 0.0], [0.0, 0.0]])},
                    old_dist={"logits": jnp.zeros((2, 2))}, distribution=Categorical(),
                    log_ratio=jnp.zeros(2), ratio=jnp.ones(2), adv=jnp.zeros(2))
    assert float(kl_penalty(t, 3.0)) == pytest.approx(3.0 * by_hand / 2, rel=1e-5)


@pytest.mark.slow
def test_builtin_ppo_kl_through_the_cli(tmp_path):
    """--algo ppo_kl with its own --ppo_kl.* flags: recorded, beta adapted every update from
    the batch KL the trainer records, and the clipped variant runs too."""
    import json


    from helpers import assert_adaptive_beta
    from pgjax.cli import main

    for clip in ("false", "true"):
        assert main(["train", "--algo", "ppo_kl", "--diagnostics", "full", "--env", "jax:cartpole",
                     "--num-envs", "8",
                     "--rollout-len", "16", "--eval-every", "2", "--eval-envs", "2",
                     "--steps", "512", "--ppo_kl.d-targ", "0.004", "--ppo_kl.beta0", "0.5",
                     "--ppo_kl.minibatches", "4", "--quiet", "--out", str(tmp_path), "--name",
                     clip, *(["--ppo_kl.clip"] if clip == "true" else [])]) == 0
        saved = json.loads((tmp_path / clip / "config.json").read_text())["config"]
        assert saved["ppo_kl"]["d_targ"] == 0.004 and saved["ppo_kl"]["clip"] == (clip == "true")
        m = run_metrics(next((tmp_path / clip / "runs").iterdir())).iloc[1:]
        assert_adaptive_beta(m["beta"], m["kl_mean"], 0.5, 0.004)
