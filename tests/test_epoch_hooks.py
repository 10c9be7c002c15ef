"""The epoch hook of ``sgd_rule`` and the ``target_kl`` early stop, per minibatch and per
epoch (cleanrl's), against a hand computation of Adam on a quadratic; the 13-line plugin in
examples/ that stops PPO's remaining epochs trains through the CLI."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.algos.pieces import SGDConfig, SGDState, ScaledSGDState, adam_direction, run_epochs
from pgjax.core.hparams import traced
from pgjax.model.nets import Parts
from pgjax.cli import main
from pgjax.core.registry import load_plugins
from pgjax.analysis.results import run_metrics

EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "ppo_epoch_kl_stop.py")
EPOCHS, MINIBATCHES, LR, TARGET = 4, 3, 0.1, 5.0


def reference(threshold: float, mode: str):
    """Adam (optax's scale_by_adam, eps 1e-5) on 0.5 (w - 5)^2 from w = 0 with the
    minibatch's 'approx_kl' = w before its step: (w, steps taken) when the stop is
    ``mode``."""
    w = m = v = 0.0
    steps = 0
    for _ in range(EPOCHS):
        for _ in range(MINIBATCHES):
            kl, g = w, w - TARGET
            steps += 1
            m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
            w -= LR * (m / (1 - 0.9 ** steps)) / (np.sqrt(v / (1 - 0.999 ** steps)) + 1e-5)
            if mode == "per_minibatch" and kl > threshold:
                return w, steps
        if mode == "per_epoch" and kl > threshold:
            return w, steps
    return w, steps


@dataclasses.dataclass(frozen=True)
class ToyConfig(SGDConfig):
    kl_stop: float = traced(0.0)


def toy_epochs(threshold, mode="per_minibatch", on_epoch=None, hp_extra=None):
    def loss_fn(params, mb, hp, extra):
        w = params.actor
        return 0.5 * (w - TARGET) ** 2 + 0.0 * params.critic, {"approx_kl": w}

    tx = adam_direction(1e-5)
    params = Parts(jnp.float32(0.0), jnp.float32(0.0))
    state = SGDState(params.map(tx.init))
    hp = ToyConfig(max_grad_norm=jnp.float32(1e9), target_kl=jnp.float32(threshold),
                   **(hp_extra or {}))
    run = run_epochs(loss_fn, tx, EPOCHS, MINIBATCHES, on_epoch=on_epoch, target_kl_mode=mode)
    r = run(params, state, jnp.zeros(6), jax.random.PRNGKey(0), hp, LR)
    return float(r.params.actor), int(r.grad_steps)


@pytest.mark.parametrize("threshold", [0.25, 0.45, 10.0])
@pytest.mark.parametrize("mode", ["per_minibatch", "per_epoch"])
def test_target_kl_modes_match_a_hand_computation(mode, threshold):
    w, steps = toy_epochs(threshold, mode)
    w_ref, steps_ref = reference(threshold, mode)
    assert steps == steps_ref and w == pytest.approx(w_ref, rel=1e-5)
    if threshold == 0.25:  # the two modes differ: a minibatch stop vs a whole epoch
        assert reference(threshold, "per_minibatch")[1] == 4 and steps_ref in (4, 6)


def test_the_example_plugins_epoch_hook_is_cleanrls_stop():
    load_plugins((EXAMPLE,))
    hook = sys.modules[f"pgjax_plugin:{Path(EXAMPLE).resolve()}"].stop_on_kl
    for threshold in (0.25, 0.45):
        w, steps = toy_epochs(0.0, on_epoch=hook, hp_extra={"kl_stop": jnp.float32(threshold)})
        w_ref, steps_ref = reference(threshold, "per_epoch")
        assert steps == steps_ref and w == pytest.approx(w_ref, rel=1e-5)


def test_example_plugin_is_short_and_trains_through_the_cli(tmp_path):
    lines = [x for x in Path(EXAMPLE).read_text().splitlines() if x.strip()]
    assert len(lines) <= 15
    assert main(["train", "--plugins", EXAMPLE, "--algo", "ppo_es", "--env", "jax:cartpole",
                 "--num-envs", "8", "--rollout-len", "16", "--steps", "512", "--eval-every",
                 "2", "--eval-envs", "2", "--quiet", "--out", str(tmp_path), "--name", "es",
                 "--ppo_es.lr", "0.01", "--ppo_es.kl-stop", "1e-4", "--ppo_es.minibatches",
                 "2", "--ppo_es.epochs", "4"]) == 0
    steps = run_metrics(tmp_path / "es" / "runs" / "seed0")["grad_steps"].dropna()
    assert len(steps) and (steps % 2 == 0).all() and (steps < 8).any()


def test_integer_and_bool_metrics_of_a_rule_are_recorded_as_numbers(tmp_path, recwarn):
    import dataclasses

    from pgjax import TrainConfig, run
    from pgjax.algos import PPOConfig, register
    from pgjax.algos.pieces import clipped_surrogate, sgd_rule, surrogate_objective

    @dataclasses.dataclass(frozen=True)
    class CountingConfig(PPOConfig):
        pass

    def on_update(u):
        return u.params, u.state, {"steps_int": u.grad_steps.astype(jnp.int32),
                                   "stopped": u.grad_steps < 1}

    register("counting_rule", CountingConfig, lambda cfg, policy: sgd_rule(
        "counting_rule", cfg, policy, surrogate_objective(clipped_surrogate),
        on_update=on_update), replace=True)
    cfg = TrainConfig(algo="counting_rule", env="jax:cartpole", num_envs=8, rollout_len=16,
                      eval_every=2, eval_envs=2, evals=2, steps=512, quiet=True,
                      out=str(tmp_path), name="c", custom=CountingConfig(minibatches=2))
    run(cfg)
    df = run_metrics(tmp_path / "c" / "runs" / "seed0")
    trained = df[df["iteration"] > 0]
    assert (trained["steps_int"] == 20).all() and (trained["stopped"] == 0).all()
    assert not [w for w in recwarn if "cast" in str(w.message).lower()]


def test_a_plugin_file_imports_a_file_beside_it(tmp_path):
    from pgjax.algos import ALGORITHMS

    (tmp_path / "helper_for_plugin_xyz.py").write_text("NAME = 'sibling_rule_xyz'\n")
    (tmp_path / "plugin_xyz.py").write_text(
        "from helper_for_plugin_xyz import NAME\n"
        "from pgjax.algos import PPOConfig, register, make_ppo\n"
        "register(NAME, PPOConfig, make_ppo)\n")
    load_plugins((str(tmp_path / "plugin_xyz.py"),))
    assert "sibling_rule_xyz" in ALGORITHMS


def test_kl_adaptive_step_size_matches_a_hand_computation():
    """``desired_kl``: rsl_rl's schedule on the rate's multiplier, read from the minibatch's
    KL before its step (here the toy's 'policy_kl' = w), / 1.5 above 2 x desired, x 1.5
    below desired / 2 (not at 0), the rate kept within [1e-5, 1e-2]; the multiplier is
    carried in the state and moves both ways in this run."""
    lr, desired = 1e-3, 0.003

    def loss_fn(params, mb, hp, extra):
        w = params.actor
        return 0.5 * (w - TARGET) ** 2 + 0.0 * params.critic, {"policy_kl": w}

    tx = adam_direction(1e-5)
    params = Parts(jnp.float32(0.0), jnp.float32(0.0))
    state = ScaledSGDState(params.map(tx.init), (), jnp.float32(1.0))
    hp = SGDConfig(max_grad_norm=jnp.float32(1e9), lr=jnp.float32(lr))
    run = run_epochs(loss_fn, tx, EPOCHS, MINIBATCHES, desired_kl=desired)
    r = run(params, state, jnp.zeros(6), jax.random.PRNGKey(0), hp, lr)

    w = m = v = 0.0
    scale, scales = 1.0, []
    for t in range(1, EPOCHS * MINIBATCHES + 1):
        kl, g = w, w - TARGET
        if kl > 2 * desired:
            scale /= 1.5
        elif 0 < kl < desired / 2:
            scale *= 1.5
        scale = min(max(scale, 1e-5 / lr), 1e-2 / lr)
        scales.append(scale)
        m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
        w -= lr * scale * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-5)
    assert max(scales) > 1.0 and scales[-1] < max(scales)  # both branches taken
    assert float(r.state.lr_scale) == pytest.approx(scale, rel=1e-5)
    assert float(r.params.actor) == pytest.approx(w, rel=1e-4)


def test_kl_adaptive_step_size_keeps_a_run_without_it_unchanged():
    """desired_kl 0 leaves the rule's state as it was (no multiplier: checkpoints of
    earlier runs still restore); > 0 carries one."""
    from pgjax.training.config import TrainConfig
    from pgjax.training.train import Trainer

    def state_of(desired_kl):
        cfg = TrainConfig.from_preset("cleanrl", env="jax:cartpole", num_envs=8,
                                      rollout_len=16, steps=256,
                                      **{"ppo.desired_kl": desired_kl})
        return Trainer(cfg).init_learner(jax.random.PRNGKey(0), cfg.base_hparams()).algo_state
    assert type(state_of(0.0)) is SGDState and len(state_of(0.0)) == 2
    assert float(state_of(0.01).lr_scale) == 1.0
