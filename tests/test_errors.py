"""Bad input: a one-line error naming the problem and the fix, raised before compiling."""
import dataclasses
import subprocess
import sys

import pytest

import pgjax.loop.runner
from pgjax import ConfigError, TrainConfig
from pgjax.algos import PPOConfig
from pgjax.cli import main

BAD = [
    (["--env", "brax:inverted_pendulm"], "unknown Brax environment 'inverted_pendulm'"),
    (["--env", "gymn:Foo"], "unknown environment id 'gymn:Foo'"),
    (["--env", "gym:Foo"], "unknown Gymnasium environment 'gym:Foo'"),
    (["--env", "gym:CartPole-v1", "--policy", "gaussian"], "needs a continuous (Box) action space"),
    (["--env", "gym:Pendulum-v1", "--gym.vectorization", "threads"],
     "unknown vectorization 'threads'"),
    (["--brax.backend", "warp"], "unknown Brax backend 'warp'"),
    (["--reset-pool", "episode"], "unknown reset_pool 'episode'"),
    (["--env", "gym:Pendulum-v1", "--reset-pool", "update"],
     "--reset-pool update applies to environments stepped in the compiled program"),
    (["--reset-pool", "update", "--evals", "0"], "pass --evals 1 or more"),
    (["--rollout-len", "32", "--gae-segment", "33"], "gae_segment must be in [1, 32]"),
    (["--gae-segment", "0"], "gae_segment must be in [1, 32]"),
    (["--advantage", "vtrace"], "unknown advantage 'vtrace'"),
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
    (["--algo", "fixpo", "--num-envs", "5", "--rollout-len", "5"],
     "not divisible into 4 minibatches"),
    (["--algo", "spo", "--spo.lr", "0"], "lr must be > 0"),
    (["--name", "../escaped"], "must be one directory name inside --out"),
    (["--name", "a/b"], "must be one directory name inside --out"),
    (["--grid", "gamma=0.9,0.9"], "lists 0.9 twice"),
    (["--grid", "gamma=0.9", "gamma=0.99"], "names gamma twice"),
    (["--grid", "gamma="], "has no values"),
    (["--net.actor-hidden", "0", "64"], "actor_hidden sizes must be in [1, "),
    (["--steps", "100000000000000000000"], "is beyond 2,147,483,647"),
    (["--seed", "100000000000000000000"], "seed must be in [0,"),
    (["--seed", "-1"], "seed must be in [0,"),
    (["--ppo.ent-coef", "nan"], "ent_coef must be a finite number"),
    (["--ppo.vf-coef", "inf"], "vf_coef must be a finite number"),
    (["--ppo.lr", "inf"], "lr must be a finite number"),
    (["--net.init-log-std", "nan"], "init_log_std must be a finite number"),
    (["--policy", "stateful", "--stateful.z-std", "inf"], "z_std must be a finite number"),
    (["--grid", "ppo.lr=1e-3,nan"], "lr must be a finite number"),
    # finite, but beyond the compiled program's float32: it would train as inf
    (["--ppo.lr", "1e39"], "ppo.lr = 1e+39 is beyond what a float32 holds"),
    (["--grid", "ppo.lr=1e-3,1e39"], "pass a smaller --grid ppo.lr"),
    (["--evals", "-1"], "evals must be in [0,"),
    (["--evals", "100000000000000000000"], "evals must be in [0,"),
    (["--checkpoint-seconds", "-5"], "checkpoint_seconds must be >= 0"),
    (["--checkpoint-seconds", "nan"], "checkpoint_seconds must be >= 0"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_cli_bad_input_is_one_line_before_compiling(args, message, capsys, monkeypatch, tmp_path):
    def no_compile(*a, **k):
        raise AssertionError("compilation started before the input was checked")

    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", no_compile)
    code = main(["train", "--out", str(tmp_path), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert message in err
    # every message also says what to do
    assert any(w in err for w in ("use", "pass", "change", "write", "give", "list")), err


def test_config_error_is_a_value_error():
    cfg = dataclasses.replace(TrainConfig(), ppo=PPOConfig(minibatches=7))
    with pytest.raises(ValueError, match="not divisible into 7 minibatches"):
        cfg.validate()
    with pytest.raises(ConfigError):
        dataclasses.replace(TrainConfig(), steps=0).validate()


def _train(tmp_path, *args):
    return main(["train", "--env", "jax:cartpole", "--steps", "2048", "--eval-every", "1",
                 "--eval-envs", "1", "--quiet", "--out", str(tmp_path), "--name", "r", *args])


def test_out_that_is_a_file_or_unwritable_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    (tmp_path / "f").write_text("")
    assert main(["train", "--out", str(tmp_path / "f")]) == 2
    assert "is a file; pass a directory" in capsys.readouterr().err
    (tmp_path / "ro").mkdir(mode=0o500)
    if not __import__("os").access(tmp_path / "ro", __import__("os").W_OK):  # not as root
        assert main(["train", "--out", str(tmp_path / "ro")]) == 2
        assert "pass a writable --out" in capsys.readouterr().err


def test_an_existing_run_is_never_overwritten_without_a_choice(tmp_path, capsys):
    """A finished run is refused without --resume/--overwrite and left as it was; --resume
    leaves it finished; --overwrite replaces it."""
    from pgjax.loop.records import is_finished

    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    metrics = next(root.glob("runs/*/metrics.csv.gz"))
    before = metrics.read_bytes()
    assert _train(tmp_path, "--ppo.lr", "1e-3") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "already holds a finished run" in err
    assert "--resume" in err and "--overwrite" in err
    assert metrics.read_bytes() == before and is_finished(root)
    assert _train(tmp_path, "--resume") == 0 and metrics.read_bytes() == before
    assert _train(tmp_path, "--ppo.lr", "1e-3", "--overwrite") == 0
    import json
    assert json.loads((root / "config.json").read_text())["config"]["ppo"]["lr"] == 1e-3
    assert is_finished(root)


def test_a_second_process_on_the_same_run_is_refused_at_once(tmp_path, capsys, monkeypatch):
    from filelock import FileLock

    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    (tmp_path / "r").mkdir()
    with FileLock(tmp_path / "r" / ".lock"):  # what a running `pgjax train` holds
        assert _train(tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert "is in use by another pgjax process" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r" / "config.json").exists()


@pytest.mark.parametrize("args,message", [
    (["--steps", "1e20"], "Error parsing --steps"),
    (["--seed", "1e20"], "Error parsing --seed"),
    (["--ppo.lr", "fast"], "Error parsing --ppo.lr"),
    (["--no-such-option", "1"], "Unrecognized options: --no-such-option"),
])
def test_unparsable_arguments_are_one_line(args, message, capsys, monkeypatch):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "pgjax train --help" in err, err


def test_a_plugin_that_raises_on_import_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("import math\nraise RuntimeError('boom')\n")
    assert main(["train", "--plugins", str(plugin), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "raised RuntimeError: boom" in err and f"{plugin}:2" in err


def test_an_out_below_a_file_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)
    (tmp_path / "f").write_text("")
    assert main(["train", "--out", str(tmp_path / "f" / "sub")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pass a writable --out" in err, err


def test_a_diverged_run_exits_3_and_bad_input_2(tmp_path, capsys):
    """Exit codes: 3 when training ran and runs failed (here every run diverges at lr 1e3),
    distinct from bad input's 2."""
    code = main(["train", "--env", "gym:Pendulum-v1", "--num-envs", "4", "--rollout-len", "32",
                 "--eval-every", "2", "--eval-envs", "1", "--episode-length", "50",
                 "--steps", "256", "--ppo.minibatches", "4", "--ppo.epochs", "2",
                 "--ppo.lr", "1e3", "--ppo.max-grad-norm", "1e9", "--quiet",
                 "--out", str(tmp_path), "--name", "nan"])
    assert code == 3
    assert "non-finite" in capsys.readouterr().err


def test_another_rules_option_is_refused_not_ignored(capsys, monkeypatch):
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)
    assert main(["train", "--algo", "trpo", "--ppo.lr", "1e-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--ppo.lr is an option of ppo" in err, err
    assert "--trpo.<name>" in err and "--algo ppo" in err


def test_output_into_a_closed_pipe_ends_quietly():
    # `pgjax --help | head -1`: the reader stops early, so the write fails with EPIPE
    proc = subprocess.Popen([sys.executable, "-m", "pgjax.cli", "--help"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and "Traceback" not in err and "BrokenPipe" not in err, err


@pytest.mark.parametrize("env,closest", [("playground:CartpoleBalanse", "playground:CartpoleBalance"),
                                         ("brax:hoper", "brax:hopper"),
                                         ("bax:hopper", "brax:hopper"),
                                         ("jax:cartpol", "jax:cartpole"),
                                         ("matrix:climbng", "matrix:climbing")])
def test_a_mistyped_env_id_names_the_closest_ids_in_one_line(env, closest, capsys):
    assert main(["train", "--env", env, "--steps", "100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"did you mean '{closest}'" in err, err


class _ClosedPipe:
    """A stdout whose reader has gone after ``lines`` writes: EPIPE from then on (not a
    file descriptor, like a test's buffer)."""

    def __init__(self, lines: int):
        self.lines, self.text = lines, []

    def write(self, text):
        if len(self.text) >= self.lines:
            raise BrokenPipeError(32, "Broken pipe")
        self.text.append(text)
        return len(text)

    def flush(self):
        if len(self.text) >= self.lines:
            raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        raise OSError("no file descriptor")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_training_into_a_closed_pipe_finishes_its_run(stream, tmp_path, monkeypatch):
    """`pgjax train ... | head -3`: the progress lines after the reader has gone are dropped
    and training goes on to a finished run, exit 0 (not an unfinished run reported as
    done)."""
    from pgjax.loop.records import is_finished

    monkeypatch.setattr(sys, stream, _ClosedPipe(1))
    code = main(["train", "--env", "jax:cartpole", "--steps", "1024", "--num-envs", "4",
                 "--rollout-len", "32", "--eval-every", "2", "--eval-envs", "2",
                 "--out", str(tmp_path), "--name", "r"]
                + (["--steps", "100000000", "--ppo.lr", "nope"] if stream == "stderr" else []))
    if stream == "stdout":
        assert code == 0 and is_finished(tmp_path / "r")
        assert len(sys.stdout.text) == 1  # the first line, then nothing
    else:  # the error line of bad input to a closed stderr: still exit 2, quietly
        assert code == 2


def test_the_closed_output_wrapper_drops_writes_on_a_real_pipe():
    import os

    from pgjax.cli import _Output

    r, w = os.pipe()
    os.close(r)
    raw = os.fdopen(w, "w")
    out = _Output(raw)
    for _ in range(3):
        assert out.write("x" * 100000) == 100000  # EPIPE at the first flush of the buffer
        out.flush()
    raw.close()


@pytest.mark.slow
def test_train_piped_into_head_finishes_its_run(tmp_path):
    """The real pipe: `pgjax train ... | head -1` exits 0 with the run finished."""
    from pgjax.loop.records import is_finished

    proc = subprocess.Popen([sys.executable, "-m", "pgjax.cli", "train", "--env", "jax:cartpole",
                             "--steps", "1024", "--num-envs", "4", "--rollout-len", "32",
                             "--eval-every", "1", "--eval-envs", "2", "--out", str(tmp_path),
                             "--name", "r"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes, as `head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait() == 0 and "Traceback" not in err, err
    assert is_finished(tmp_path / "r")
