"""The extension API: a new update rule defined outside pgjax/ (here, in a file written by the
test) trains through the same trainer, records, CLI and grid machinery."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from pgjax.analysis.results import run_metrics
from pgjax import ConfigError, TrainConfig, run
from pgjax.cli import main

PLUGIN = '''
"""A PPO variant with a quadratic ratio penalty instead of clipping:
maximise r A - beta * (r - 1)^2, using only pgjax's public API."""
import dataclasses

from pgjax.algos import PPOConfig, register, traced
from pgjax.algos.pieces import sgd_rule, surrogate_objective


@dataclasses.dataclass(frozen=True)
class RatioPenaltyConfig(PPOConfig):
    beta: float = traced(2.0)
    """Weight of the quadratic ratio penalty (traced)."""


def surrogate(ratio, adv, hp):
    return ratio * adv - hp.beta * (ratio - 1.0) ** 2


def make(cfg, policy):
    return sgd_rule("ratio_penalty", cfg, policy, surrogate_objective(surrogate))


register("ratio_penalty", RatioPenaltyConfig, make)
'''


@pytest.fixture
def plugin(tmp_path):
    path = tmp_path / "ratio_penalty_rule.py"
    path.write_text(PLUGIN)
    return str(path)


def _small(**kw):
    base = dict(env="jax:cartpole", diagnostics="full", num_envs=8, rollout_len=16, eval_every=2,
                eval_envs=4,
                episode_length=100, steps=8 * 16 * 2 * 2, quiet=True)
    return TrainConfig(**{**base, **kw})


def test_plugin_rule_trains_through_run_with_grid(plugin, tmp_path):
    cfg = _small(algo="ratio_penalty", plugins=(plugin,), seeds=2, out=str(tmp_path),
                 name="rp", algo_options=("minibatches=4", "epochs=2"),
                 grid=("ratio_penalty.beta=0.5,8",))
    assert cfg.algo_config.minibatches == 4 and cfg.algo_config.beta == 2.0
    records = run(cfg)
    assert len(records.run_dirs) == 4  # 2 seeds x 2 beta values, one program
    saved = json.loads((records.root / "config.json").read_text())
    assert saved["config"]["ratio_penalty"]["minibatches"] == 4
    assert saved["grid"]["ratio_penalty.beta"] == [0.5, 8.0]
    m = [run_metrics(d) for d in records.run_dirs]
    assert all(len(x) == cfg.num_iterations + 1 for x in m)
    # the penalty is live: a larger beta keeps the ratios closer to 1
    small_beta = np.mean([x["ratio_dev_max"].iloc[1:].mean() for x in m[:2]])
    large_beta = np.mean([x["ratio_dev_max"].iloc[1:].mean() for x in m[2:]])
    assert large_beta < small_beta


def test_plugin_rule_through_cli(plugin, tmp_path, capsys):
    code = main(["train", "--plugins", plugin, "--algo", "ratio_penalty", "--env", "jax:cartpole",
                 "--num-envs", "8", "--rollout-len", "16", "--eval-every", "2", "--steps", "512",
                 "--algo-options", "minibatches=4", "beta=0.25", "--out", str(tmp_path),
                 "--name", "cli", "--quiet"])
    assert code == 0, capsys.readouterr().err
    saved = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert saved["config"]["algo"] == "ratio_penalty"
    assert saved["config"]["ratio_penalty"]["beta"] == 0.25


@pytest.mark.parametrize("args, message", [
    (["--algo", "no_such_rule"], "unknown algorithm 'no_such_rule'"),
    (["--plugins", "no_such_module_xyz", "--algo", "ppo"], "cannot import plugin"),
    (["--algo-options", "lrr=1"], "bad --algo-options entry 'lrr=1'"),
])
def test_plugin_errors_are_one_line(args, message, tmp_path, capsys):
    code = main(["train", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1, err


def test_built_in_rules_are_configured_as_registered_ones():
    """A built-in rule's settings are a sub-config made from the rule registry, as a
    plugin's: --algo-options and ``custom`` apply to it, and the record holds the result."""
    from pgjax.algos import ALGORITHMS, TRPOConfig
    from pgjax.training.options import components

    assert all(dataclasses.is_dataclass(TrainConfig().section(k)) for k in components())
    assert list(ALGORITHMS)[:5] == ["ppo", "trpo", "spo", "fixpo", "ppo_kl"]
    cfg = TrainConfig(algo="ppo", algo_options=("lr=1e-3",))
    assert cfg.algo_config.lr == 1e-3 and cfg.to_dict()["ppo"]["lr"] == 1e-3
    custom = TrainConfig(algo="trpo", custom=TRPOConfig(delta=0.02))
    assert custom.algo_config.delta == 0.02 and custom.to_dict()["trpo"]["delta"] == 0.02


def test_bad_plugin_option(plugin):
    cfg = _small(algo="ratio_penalty", plugins=(plugin,), algo_options=("beta=big",))
    with pytest.raises(ConfigError, match="beta takes a float"):
        cfg.validate()
    cfg = dataclasses.replace(cfg, algo_options=("gamma2=1",))
    with pytest.raises(ConfigError, match="bad --algo-options entry 'gamma2=1'"):
        cfg.validate()


def test_a_plugin_imported_first_is_the_same_module_when_passed_again(tmp_path, monkeypatch):
    """`import my_rule` in a notebook and then plugins=("my_rule.py",): the file runs once, so
    the rule's config class is the one the user holds (custom= accepts its instances)."""
    import importlib

    from pgjax.algos import ALGORITHMS

    # as in a fresh process: the other tests' copy of the rule is not registered
    monkeypatch.delitem(ALGORITHMS, "ratio_penalty", raising=False)
    path = tmp_path / "ratio_penalty_imported.py"
    path.write_text(PLUGIN + "\nRUNS = globals().get('RUNS', 0) + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("ratio_penalty_imported")
    custom = module.RatioPenaltyConfig(minibatches=4, epochs=2, beta=1.0)
    cfg = _small(algo="ratio_penalty", plugins=(str(path),), custom=custom)
    assert cfg.algo_config == custom and cfg.algo_config.beta == 1.0
    cfg.validate()
    assert module.RUNS == 1


def test_plugin_options_are_flags_like_a_builtin_rules(plugin, tmp_path, capsys, monkeypatch):
    """--<rule>.<option> for a plugin rule (both spellings), --grid over its traced option,
    its options in --help, and a static option in --grid refused with the reason."""
    assert main(["train", "--plugins", plugin, "--algo", "ratio_penalty", "--env",
                 "jax:cartpole", "--steps", "1024", "--num-envs", "8", "--rollout-len", "16",
                 "--eval-every", "2", "--eval-envs", "2", "--ratio_penalty.minibatches", "4",
                 "--ratio_penalty.epochs=2", "--grid", "ratio_penalty.beta=0.5,8", "--quiet",
                 "--out", str(tmp_path), "--name", "flags"]) == 0
    recorded = json.loads((tmp_path / "flags" / "config.json").read_text())
    rule = recorded["config"]["ratio_penalty"]
    assert (rule["minibatches"], rule["epochs"]) == (4, 2)
    assert recorded["grid"] == {"ratio_penalty.beta": [0.5, 8.0]}
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["train", "--plugins", plugin, "--algo", "ratio_penalty", "--help"])
    assert e.value.code in (0, None)
    out = capsys.readouterr().out
    assert "--ratio-penalty.beta FLOAT" in out and "Weight of the quadratic ratio penalty" in out
    assert main(["train", "--plugins", plugin, "--algo", "ratio_penalty", "--grid",
                 "ratio_penalty.epochs=2,4"]) == 2
    assert "is a static option" in capsys.readouterr().err


KLPEN = '''
import dataclasses
import jax.numpy as jnp
from pgjax.algos import PPOConfig, register, traced
from pgjax.algos.pieces import adapt_kl_coef, kl_penalty, sgd_rule

@dataclasses.dataclass(frozen=True)
class KLPenConfig(PPOConfig):
    d_targ: float = traced(0.01)

def objective(t, hp, beta):  # Schulman et al. 2017, sec. 4
    return -(t.ratio * t.adv).mean() + kl_penalty(t, beta)

def adapt(u):  # beta x2 above 1.5 d_targ, /2 below d_targ / 1.5
    beta = adapt_kl_coef(u.state.extra, u.stats["kl_mean"], u.hp.d_targ)
    return u.params, u.state._replace(extra=beta), {"beta": beta}

register("klpen", KLPenConfig, lambda cfg, policy: sgd_rule(
    "klpen", cfg, policy, objective, init=lambda hp: jnp.float32(1.0), on_update=adapt))
'''


@pytest.mark.slow
def test_kl_penalty_rule_from_the_pieces_trains_resumes_and_records_diagnostics(
        tmp_path, monkeypatch):
    """The adaptive-KL PPO in <= 20 lines on the public pieces, outside pgjax/: trained through
    the CLI with --klpen.* flags and a --grid over d_targ, interrupted and resumed from its
    checkpoint to records identical to an uninterrupted run (beta restored: it is recorded at
    every update), with the trainer's trust-region diagnostics in the records."""
    from helpers import Interrupt, assert_adaptive_beta, assert_same_records, interrupting

    code = [ln for ln in KLPEN.splitlines() if ln.strip()]
    assert len(code) <= 20, len(code)
    path = tmp_path / "klpen_rule.py"
    path.write_text(KLPEN)
    flags = ["train", "--plugins", str(path), "--algo", "klpen", "--diagnostics", "full", "--env",
             "jax:cartpole",
             "--num-envs", "8", "--rollout-len", "16", "--eval-every", "2", "--eval-envs", "2",
             "--episode-length", "100", "--steps", str(8 * 16 * 2 * 4), "--checkpoint-every",
             "1", "--checkpoint-seconds", "0", "--klpen.minibatches", "4", "--klpen.epochs", "2", "--klpen.lr", "1e-3",
             "--grid", "klpen.d_targ=0.002,0.05", "--quiet", "--out", str(tmp_path)]
    assert main([*flags, "--name", "full"]) == 0
    with monkeypatch.context() as m:
        interrupting(m, after_chunks=2)
        with pytest.raises(Interrupt):
            main([*flags, "--name", "cut"])
    assert not (tmp_path / "cut" / "status.json").exists()
    assert main([*flags, "--name", "cut", "--resume"]) == 0
    assert_same_records(tmp_path / "full", tmp_path / "cut")

    saved = json.loads((tmp_path / "full" / "config.json").read_text())
    assert saved["config"]["klpen"]["lr"] == 1e-3 and saved["config"]["klpen"]["epochs"] == 2
    runs = sorted((tmp_path / "full" / "runs").iterdir())
    assert [r.name for r in runs] == ["d_targ=0.002_seed0", "d_targ=0.05_seed0"]
    m = [run_metrics(r).iloc[1:] for r in runs]
    for x in m:
        assert np.isfinite(x[["kl_mean", "kl_max", "ratio_dev_max", "entropy"]]).all().all()
        assert (x["kl_max"] >= x["kl_mean"]).all()
    # every update's beta is the previous one adapted to that update's recorded batch KL
    for x, d_targ in zip(m, (0.002, 0.05)):
        assert_adaptive_beta(x["beta"], x["kl_mean"], 1.0, d_targ)
    assert m[1]["beta"].iloc[-1] < 1.0  # the loose target let beta fall


def test_a_rule_written_for_pgjax_0_2_dicts_still_works_and_is_told_how_to_update():
    """pgjax 0.2.0's plugin style: a TRACED class tuple extending a built-in's, hp["name"]
    and params["actor"]. Each still reads the same value, with one FutureWarning naming what
    to write instead."""
    import jax.numpy as jnp

    from pgjax.algos import PPOConfig
    from pgjax.core.hparams import traced_fields, typed
    from pgjax.model.nets import Parts

    with pytest.warns(FutureWarning, match=r"PPOConfig.TRACED: since pgjax 0.3.0 each field"):
        @dataclasses.dataclass(frozen=True)
        class OldStyle(PPOConfig):
            kl_stop: float = 0.02
            TRACED = PPOConfig.TRACED + ("kl_stop",)

    with pytest.warns(FutureWarning, match=r"OldStyle.TRACED: .*pgjax.core.hparams.traced"):
        names = traced_fields(OldStyle)
    assert names == (*traced_fields(PPOConfig), "kl_stop")
    assert OldStyle().traced()["kl_stop"] == 0.02
    hp = typed(OldStyle(), {"kl_stop": jnp.float32(0.5), "clip_eps": jnp.float32(0.1)})
    assert float(hp.kl_stop) == 0.5 and hp.epochs == 10
    with pytest.warns(FutureWarning, match=r'hp\["kl_stop"\] is hp.kl_stop since pgjax 0.3.0'):
        assert float(hp["kl_stop"]) == 0.5
    with pytest.raises(KeyError):
        hp["no_such_field"]
    params = Parts({"w": 1.0}, {"v": 2.0})
    with pytest.warns(FutureWarning, match=r'params\["actor"\] is params.actor since'):
        assert params["actor"] == {"w": 1.0}
