"""Bad input: a one-line error naming the problem and the fix, raised before compiling."""
import dataclasses

import pytest

import pgjax.runner
from pgjax import ConfigError, TrainConfig
from pgjax.algos import PPOConfig
from pgjax.cli import main

BAD = [
    (["--env", "brax:inverted_pendulm"], "unknown Brax environment 'inverted_pendulm'"),
    (["--env", "gymn:Foo"], "unknown environment id 'gymn:Foo'"),
    (["--env", "gym:Foo"], "unknown Gymnasium environment 'gym:Foo'"),
    (["--env", "gym:CartPole-v1", "--policy", "gaussian"], "needs a continuous (Box) action space"),
    (["--env", "gym:Pendulum-v1", "--vectorization", "threads"], "unknown vectorization 'threads'"),
    (["--backend", "warp"], "unknown Brax backend 'warp'"),
    (["--policy", "categorical"], "policy 'categorical' needs a discrete action space"),
    (["--env", "jax:cartpole", "--policy", "gaussian"], "needs a continuous (Box) action space"),
    (["--num-envs", "10", "--rollout-len", "10"], "not divisible into 32 minibatches"),
    (["--ppo.lr", "0"], "lr must be > 0"),
    (["--ppo.lr", "-1e-3"], "lr must be > 0"),
    (["--grid", "ppo.lr=1e-3,-1"], "lr must be > 0"),
    (["--gamma", "1.5"], "gamma must be in [0, 1]"),
    (["--algo", "a2c"], "unknown algorithm 'a2c'"),
    (["--grid", "ppo.foo=1"], "bad --grid entry 'ppo.foo=1'"),
    (["--algo", "trpo", "--trpo.delta", "0"], "delta must be > 0"),
    (["--algo", "fixpo", "--fixpo.eps-kl", "-0.1"], "eps_kl must be > 0"),
    (["--algo", "fixpo", "--num-envs", "5", "--rollout-len", "5"], "not divisible into 4 minibatches"),
    (["--algo", "spo", "--spo.lr", "0"], "lr must be > 0"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_cli_bad_input_is_one_line_before_compiling(args, message, capsys, monkeypatch, tmp_path):
    def no_compile(*a, **k):
        raise AssertionError("compilation started before the input was checked")

    monkeypatch.setattr(pgjax.runner, "VmappedRuns", no_compile)
    code = main(["train", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert message in err
    # every message also says what to do
    assert any(w in err for w in ("use", "pass", "change", "write", "give")), err


def test_config_error_is_a_value_error():
    cfg = dataclasses.replace(TrainConfig(), ppo=PPOConfig(minibatches=7))
    with pytest.raises(ValueError, match="not divisible into 7 minibatches"):
        cfg.validate()
    with pytest.raises(ConfigError):
        dataclasses.replace(TrainConfig(), steps=0).validate()
