"""Sweeps, checkpoints, devices and failure handling: a killed sweep resumes to records
identical to an uninterrupted one; a resumed run equals an uninterrupted one; sharding over
4 devices changes nothing; a non-finite run is recorded and the others carry on."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pgjax import TrainConfig, run
from pgjax.analysis.results import run_metrics
from pgjax.algos import FixPOConfig, PPOConfig
from pgjax.envs import ConfigError
from pgjax.tools.sweep import Sweep
from pgjax.core.errors import TrainingError

from helpers import Interrupt, assert_same_records, interrupting

ROOT = Path(__file__).resolve().parents[1]

SMALL = TrainConfig(env="jax:cartpole", diagnostics="full", num_envs=8, rollout_len=16,
                    eval_every=2, eval_envs=4,
                    episode_length=100, steps=8 * 16 * 2 * 4, quiet=True, checkpoint_seconds=0,
                    ppo=PPOConfig(epochs=2, minibatches=4, ent_coef=0.01),
                    fixpo=FixPOConfig(minibatches=4))


# -- checkpoint and resume --------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["ppo", pytest.param("fixpo", marks=pytest.mark.slow)])
def test_resumed_run_matches_uninterrupted_run(algo, tmp_path, monkeypatch):
    cfg = dataclasses.replace(SMALL, algo=algo, seeds=2, out=str(tmp_path))
    full = run(dataclasses.replace(cfg, name="full"))
    with monkeypatch.context() as m:
        interrupting(m, after_chunks=2)
        with pytest.raises(Interrupt):
            run(dataclasses.replace(cfg, name="cut"))
    cut = tmp_path / "cut"
    assert not (cut / "status.json").exists()
    rows = run_metrics(next((cut / "runs").iterdir()))
    assert rows["iteration"].max() == 2 * cfg.eval_every  # two chunks recorded, then the crash
    # what a kill between an atomic write's temporary file and its rename leaves behind
    (next((cut / "runs").iterdir()) / ".params.msgpack.4242.tmp").write_bytes(b"half")
    resumed = run(dataclasses.replace(cfg, name="cut", resume=True))
    assert resumed.root == cut
    assert_same_records(full.root, cut)  # metrics (all columns but wall time), params, summary


def _cli_resume(cfg) -> int:
    """``pgjax train ... --resume`` with the flags that give ``cfg`` (a SMALL-based config)."""
    from pgjax.cli import main

    return main(["train", "--env", cfg.env, "--num-envs", str(cfg.num_envs), "--rollout-len",
                 str(cfg.rollout_len), "--eval-every", str(cfg.eval_every), "--eval-envs",
                 str(cfg.eval_envs), "--episode-length", str(cfg.episode_length), "--steps",
                 str(cfg.steps), "--seeds", str(cfg.seeds), "--checkpoint-every",
                 str(cfg.checkpoint_every), "--checkpoint-seconds", str(cfg.checkpoint_seconds),
                 "--diagnostics", cfg.diagnostics, "--ppo.epochs", str(cfg.ppo.epochs),
                 "--ppo.minibatches", str(cfg.ppo.minibatches), "--ppo.ent-coef",
                 str(cfg.ppo.ent_coef), "--quiet", "--out", cfg.out, "--name", cfg.name,
                 "--resume"])


def _cut_run(cfg, monkeypatch, chunks=3):
    """A run of ``cfg`` killed after ``chunks`` chunks (checkpoints kept: the last two)."""
    with monkeypatch.context() as m:
        interrupting(m, after_chunks=chunks)
        with pytest.raises(Interrupt):
            run(cfg)
    return Path(cfg.out) / cfg.name


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        mid = len(data) // 2
        data[mid:mid + 64] = bytes(b ^ 0xFF for b in data[mid:mid + 64])
    else:  # truncate
        data = data[: len(data) // 3]
    path.write_bytes(bytes(data))


def _largest_file(step_dir: Path) -> Path:
    return max((p for p in step_dir.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_resume_skips_a_damaged_checkpoint_and_refuses_when_all_are(how, tmp_path, monkeypatch,
                                                                     capsys):
    """The newest checkpoint damaged: the resume says so, falls back to the older one and
    ends with the records of an uninterrupted run. Both damaged: a one-line error before
    anything compiles, and nothing is deleted or marked finished."""
    import pgjax.loop.runner

    cfg = dataclasses.replace(SMALL, seeds=2, out=str(tmp_path), checkpoint_every=1)
    full = run(dataclasses.replace(cfg, name="full"))
    cut = _cut_run(dataclasses.replace(cfg, name="cut"), monkeypatch)
    assert sorted(int(p.name) for p in (cut / "checkpoint").iterdir() if p.is_dir()) == [2, 3]
    _damage(_largest_file(cut / "checkpoint" / "3"), how)
    capsys.readouterr()
    run(dataclasses.replace(cfg, name="cut", resume=True))
    err = capsys.readouterr().err
    assert "checkpoint 3" in err and "damaged" in err
    assert_same_records(full.root, cut)

    cut = _cut_run(dataclasses.replace(cfg, name="cut2"), monkeypatch)
    for step in (2, 3):
        _damage(_largest_file(cut / "checkpoint" / str(step)), how)
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    capsys.readouterr()
    assert _cli_resume(dataclasses.replace(cfg, name="cut2")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search("every checkpoint of .* is damaged.*--overwrite", err), err
    assert (cut / "checkpoint" / "2").is_dir() and not (cut / "status.json").exists()


def _set_cell(text: str, line: int, cell: int, value: str) -> str:
    lines = text.splitlines()
    cells = lines[line].split(",")
    cells[cell] = value
    lines[line] = ",".join(cells)
    return "\n".join(lines) + "\n"


DAMAGED_RECORDS = [
    ("deleted rows", lambda t: "\n".join(t.splitlines()[:2] + t.splitlines()[3:]) + "\n",
     "rows are missing"),
    ("a garbage cell", lambda t: _set_cell(t, line=2, cell=1, value="abc"), "is not a number"),
    ("random bytes", None, "is damaged (UnicodeDecodeError)"),
]


@pytest.mark.parametrize("what,edit,message", DAMAGED_RECORDS, ids=[d[0] for d in DAMAGED_RECORDS])
def test_resume_refuses_damaged_records_before_training(what, edit, message, tmp_path,
                                                        monkeypatch, capsys):
    import pgjax.loop.runner

    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="r", checkpoint_every=1)
    root = _cut_run(cfg, monkeypatch, chunks=2)
    metrics = next((root / "runs").iterdir()) / "metrics.csv"
    if edit is None:
        metrics.write_bytes(metrics.read_bytes()[:40] + bytes(range(128, 256)) * 4)
    else:
        metrics.write_text(edit(metrics.read_text()))
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    assert _cli_resume(cfg) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert "metrics.csv" in err and "--overwrite" in err
    assert not (root / "status.json").exists()  # nothing marked finished


def test_resume_refuses_a_torn_config_json(tmp_path, monkeypatch, capsys):
    import pgjax.loop.runner

    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="r", checkpoint_every=1)
    root = _cut_run(cfg, monkeypatch, chunks=1)
    (root / "config.json").write_text((root / "config.json").read_text()[:50])
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)
    assert _cli_resume(cfg) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "config.json is damaged" in err, err
    assert not (root / "status.json").exists()


def test_checkpoints_are_bounded_by_time_and_a_run_killed_before_one_starts_over(
        tmp_path, monkeypatch):
    """At the default time-bounded cadence a short run saves only after its last chunk: one
    killed before that has no checkpoint, and --resume starts it over to records identical
    to an uninterrupted run (nothing of the first attempt is kept or mixed in)."""
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), checkpoint_seconds=3600.0)
    full = run(dataclasses.replace(cfg, name="full"))
    cut = _cut_run(dataclasses.replace(cfg, name="cut"), monkeypatch, chunks=3)
    assert not (cut / "checkpoint").exists() or not any(
        p.name.isdigit() for p in (cut / "checkpoint").iterdir())
    run(dataclasses.replace(cfg, name="cut", resume=True))
    assert_same_records(full.root, cut)


def test_resume_refuses_a_different_config(tmp_path):
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="r", steps=8 * 16 * 2)
    run(cfg)
    with pytest.raises(ConfigError, match="differs in gamma"):
        run(dataclasses.replace(cfg, gamma=0.9, resume=True))


@pytest.mark.slow
def test_gymnasium_run_resumes_and_completes(tmp_path, monkeypatch):
    import pgjax.loop.runner as runner_mod

    cfg = TrainConfig(env="gym:CartPole-v1", num_envs=2, rollout_len=32, eval_every=2,
                      eval_envs=2, steps=2 * 32 * 2 * 3, quiet=True, out=str(tmp_path),
                      name="g", checkpoint_seconds=0, ppo=PPOConfig(epochs=1, minibatches=2))
    real = runner_mod.VmappedRuns.chunk
    calls = [0]

    def crash(self, *a):
        calls[0] += 1
        if calls[0] > 1:
            raise Interrupt
        return real(self, *a)

    with monkeypatch.context() as m:
        m.setattr(runner_mod.VmappedRuns, "chunk", crash)
        with pytest.raises(Interrupt):
            run(cfg)
    records = run(dataclasses.replace(cfg, resume=True))
    df = run_metrics(records.run_dirs[0])
    assert df["iteration"].tolist() == list(range(0, 7))
    assert (records.root / "status.json").exists()


# -- sweeps -----------------------------------------------------------------------------------
SWEEP = """
name = "s"
out = "{out}"
algos = ["ppo", "trpo"]
envs = ["jax:cartpole"]
seeds = 2

[config]
steps = {steps}
num_envs = 8
rollout_len = 16
eval_every = 2
eval_envs = 4
episode_length = 100
checkpoint_seconds = 0
"ppo.minibatches" = 4
"ppo.epochs" = 2
"trpo.vf_minibatches" = 4

[grid]
"ppo.lr" = [1e-4, 3e-4]
"""


def _sweep_file(tmp_path, out, steps=8 * 16 * 2 * 6):
    path = tmp_path / f"{Path(out).name}.toml"
    path.write_text(SWEEP.format(out=out, steps=steps))
    return path


def test_sweep_groups_and_validation(tmp_path):
    sweep = Sweep.from_file(_sweep_file(tmp_path, tmp_path / "a"))
    assert list(sweep.groups) == ["ppo_jax-cartpole", "trpo_jax-cartpole"]
    ppo, trpo = sweep.groups.values()
    assert len(ppo.runs()) == 4 and len(trpo.runs()) == 2  # the ppo.lr grid is PPO's only
    assert ppo.ppo.epochs == 2 and trpo.trpo.vf_minibatches == 4
    bad = tmp_path / "bad.toml"
    bad.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\n[config]\nnum_env = 3\n')
    with pytest.raises(ConfigError, match="unknown option 'num_env'"):
        Sweep.from_file(bad)
    bad.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\n[config]\n"ppo.lr" = -1\n')
    with pytest.raises(ConfigError, match="lr must be > 0"):
        Sweep.from_file(bad)


SWEEP_ERRORS = [
    ('envs = ["jax:cartpole", "jax:cartpol"]', "", "unknown environment 'jax:cartpol'"),
    ('envs = ["jax:cartpole"]', '[config]\npolicy = "gaussian"', "needs a continuous (Box)"),
    ('envs = ["jax:cartpole"]', '[grid]\n"spo.lr" = [1e-3]',
     "'spo.lr' in [grid] is an option of spo"),
    ('envs = ["jax:cartpole"]', '[config]\n"fixpo.eps_kl" = 0.1',
     "option of fixpo, which no group"),
    ('envs = ["jax:cartpole"]', '[env_config."brax:hopper"]\nsteps = 10', "not in envs"),
    ('envs = ["jax:cartpole"]', '[config]\nsteps = "1000"',
     "'steps' in [config] must be an integer"),
    ('envs = ["jax:cartpole"]', '[config]\ngamma = "high"', "'gamma' in [config] must be a number"),
    ('envs = ["jax:cartpole"]', '[grid]\ngamma = ["a"]', "[grid] 'gamma' must list numbers"),
]


@pytest.mark.parametrize("envs,table,message", SWEEP_ERRORS)
def test_sweep_is_validated_whole_before_anything_runs(envs, table, message, tmp_path, capsys,
                                                       monkeypatch):
    """Every group's environment and policy are built and every key is used, in --dry-run
    and before the first group trains: one line, exit 2, nothing run."""
    import pgjax.loop.runner
    from pgjax.cli import main

    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    path = tmp_path / "s.toml"
    path.write_text(f'algos = ["ppo", "trpo"]\n{envs}\nout = "{tmp_path}"\n{table}\n')
    for extra in (["--dry-run"], []):
        assert main(["sweep", str(path), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "s").exists()


def test_static_option_of_one_rule_multiplies_only_its_groups(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('algos = ["ppo", "trpo"]\nenvs = ["jax:cartpole"]\n'
                    '[static]\n"ppo.epochs" = [2, 4]\n')
    assert list(Sweep.from_file(path).groups) == [
        "ppo_jax-cartpole_epochs=2", "ppo_jax-cartpole_epochs=4", "trpo_jax-cartpole"]


def test_groups_run_comparison_by_comparison(tmp_path):
    """Each environment and shared [static] value runs all its algorithms before the next, so a
    stopped sweep leaves whole comparisons; group names keep the file's key order."""
    path = tmp_path / "s.toml"
    path.write_text('algos = ["ppo", "trpo"]\nenvs = ["jax:cartpole", "jax:memory"]\n'
                    '[static]\n"ppo.epochs" = [2, 4]\n"net.actor_hidden" = [[8], [16]]\n')
    assert list(Sweep.from_file(path).groups) == [
        "ppo_jax-cartpole_epochs=2_actor_hidden=8", "ppo_jax-cartpole_epochs=4_actor_hidden=8",
        "trpo_jax-cartpole_actor_hidden=8",
        "ppo_jax-cartpole_epochs=2_actor_hidden=16", "ppo_jax-cartpole_epochs=4_actor_hidden=16",
        "trpo_jax-cartpole_actor_hidden=16",
        "ppo_jax-memory_epochs=2_actor_hidden=8", "ppo_jax-memory_epochs=4_actor_hidden=8",
        "trpo_jax-memory_actor_hidden=8",
        "ppo_jax-memory_epochs=2_actor_hidden=16", "ppo_jax-memory_epochs=4_actor_hidden=16",
        "trpo_jax-memory_actor_hidden=16"]


def test_only_selects_groups_in_file_order_and_refuses_a_pattern_that_matches_none(
        tmp_path, capsys):
    from pgjax.cli import main

    path = tmp_path / "s.toml"
    path.write_text(f'algos = ["ppo", "trpo"]\nenvs = ["jax:cartpole", "jax:memory"]\n'
                    f'out = "{tmp_path}"\n')
    sweep = Sweep.from_file(path)
    assert list(sweep.select(["trpo_*", "*memory"]).groups) == [
        "trpo_jax-cartpole", "ppo_jax-memory", "trpo_jax-memory"]
    assert sweep.select(["trpo_*"]).root == sweep.root
    assert main(["sweep", str(path), "--dry-run", "--only", "ppo_*cartpole"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 1 and listed[0].startswith("ppo_jax-cartpole:"), listed
    assert main(["sweep", str(path), "--only", "sac_*"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "'sac_*' matches no group" in err, err
    assert not (tmp_path / "s").exists()


def test_sweeps_of_one_directory_at_once_keep_each_others_entries(tmp_path, monkeypatch):
    """Two ``--only`` processes on one sweep: an entry the other wrote while this one trained
    stays in sweep.json (it is read, changed and written under a lock, not from a copy held
    since the start)."""
    import types

    import pgjax.loop.runner

    path = tmp_path / "s.toml"
    path.write_text(f'algos = ["ppo", "trpo"]\nenvs = ["jax:cartpole"]\nout = "{tmp_path}"\n')
    mine, other = (Sweep.from_file(path).select([p]) for p in ("ppo_*", "trpo_*"))

    def fake_run(cfg, log, strict):  # the other process finishes its group meanwhile
        other.record("trpo_jax-cartpole", {"status": "finished", "failed_runs": {}},
                     other.status())
        return types.SimpleNamespace(failed={}, run_dirs={})

    monkeypatch.setattr(pgjax.loop.runner, "run", fake_run)
    status = mine.run(log=lambda *a: None)
    saved = json.loads((tmp_path / "s" / "sweep.json").read_text())["groups"]
    assert sorted(saved) == sorted(status["groups"]) == ["ppo_jax-cartpole", "trpo_jax-cartpole"]
    assert saved["ppo_jax-cartpole"]["status"] == "finished"


def test_a_group_another_process_trains_is_left_to_it(tmp_path, monkeypatch, capsys):
    """Two processes running one sweep share it: a group whose run directory another process
    holds is skipped (not an error that stops the sweep), the rest are trained, and the
    summary names the group as trained elsewhere."""
    import types

    from filelock import FileLock

    import pgjax.loop.runner
    from pgjax.loop import records
    from pgjax.cli import main

    path = tmp_path / "s.toml"
    path.write_text(f'algos = ["ppo", "trpo"]\nenvs = ["jax:cartpole"]\nout = "{tmp_path}"\n')
    trained = []

    def fake_run(cfg, log, strict):  # claims the directory as the real run does
        lock = records.claim(cfg)
        trained.append(cfg.name)
        lock.release()
        return types.SimpleNamespace(failed={}, run_dirs={})

    monkeypatch.setattr(pgjax.loop.runner, "run", fake_run)
    (tmp_path / "s" / "ppo_jax-cartpole").mkdir(parents=True)
    other = FileLock(tmp_path / "s" / "ppo_jax-cartpole" / ".lock", timeout=0)
    other.acquire()  # the other process
    try:
        assert main(["sweep", str(path)]) == 0
    finally:
        other.release()
    assert trained == ["trpo_jax-cartpole"]
    out = capsys.readouterr().out
    assert "ppo_jax-cartpole: another pgjax process is training it; left to it" in out
    assert "1/2 groups finished without failures" in out
    assert "ppo_jax-cartpole: being trained by another process" in out


def _pgjax(*args, env=None):
    return [sys.executable, "-m", "pgjax.cli", *args]


@pytest.mark.slow
def test_sigkilled_sweep_resumes_to_identical_records(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ref_file, cut_file = _sweep_file(tmp_path, tmp_path / "ref"), _sweep_file(tmp_path,
                                                                              tmp_path / "cut")
    subprocess.run(_pgjax("sweep", str(ref_file)), check=True, env=env, capture_output=True)
    # Kill the second run of the sweep mid-way: the first group is finished, the second has
    # checkpoints and records of some chunks.
    proc = subprocess.Popen(_pgjax("sweep", str(cut_file)), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    ckpt = tmp_path / "cut" / "s" / "trpo_jax-cartpole" / "checkpoint"
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None:
        if ckpt.exists() and any(p.name.isdigit() and int(p.name) >= 2 for p in ckpt.iterdir()):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "cut" / "s" / "trpo_jax-cartpole" / "status.json").exists()
    out = subprocess.run(_pgjax("sweep", str(cut_file)), check=True, env=env,
                         capture_output=True, text=True).stdout
    assert "ppo_jax-cartpole: finished, skipped" in out
    assert "resuming" in out
    assert_same_records(tmp_path / "ref" / "s", tmp_path / "cut" / "s")


# -- failures ---------------------------------------------------------------------------------
def test_nonfinite_run_is_recorded_and_others_carry_on(tmp_path):
    # lr = 1e3 blows the Gaussian log-std up within the first update: exp(log_std) overflows.
    cfg = TrainConfig(env="gym:Pendulum-v1", num_envs=4, rollout_len=32, eval_every=2,
                      eval_envs=1, episode_length=50, steps=4 * 32 * 2 * 2, quiet=True,
                      out=str(tmp_path), name="nan", grid=("ppo.lr=3e-4,1e3",),
                      ppo=PPOConfig(minibatches=4, epochs=2, max_grad_norm=1e9))
    records = run(cfg, strict=False)
    (good, bad), = [records.run_dirs]
    status = json.loads((bad / "status.json").read_text())
    assert status["status"] == "failed" and "non-finite" in status["error"]
    assert f"update {status['update']}" in status["error"] and "lr=1000" in status["error"]
    assert not (good / "status.json").exists()
    good_rows, bad_rows = run_metrics(good), run_metrics(bad)
    assert good_rows["iteration"].max() == cfg.num_iterations  # the other run carried on
    assert bad_rows["iteration"].max() == status["update"]  # records stop at the failure
    top = json.loads((records.root / "status.json").read_text())
    assert top["status"] == "finished" and list(top["failed_runs"]) == [bad.name]
    with pytest.raises(TrainingError, match="non-finite .* update"):
        run(dataclasses.replace(cfg, name="nan_strict"))


# -- devices ----------------------------------------------------------------------------------
SHARD_SCRIPT = """
import sys, jax
from pgjax.tools.sweep import Sweep
assert len(jax.devices()) == 4, jax.devices()
spec = {"name": sys.argv[2], "out": sys.argv[1], "algos": ["ppo", "trpo"],
        "envs": ["jax:cartpole"], "seeds": 3,
        "config": {"steps": 8 * 16 * 2 * 2, "num_envs": 8, "rollout_len": 16, "eval_every": 2,
                   "eval_envs": 4, "episode_length": 100, "quiet": True,
                   "shard": sys.argv[3] == "1", "ppo.epochs": 2, "ppo.minibatches": 4,
                   "trpo.vf_minibatches": 4},
        "grid": {"ppo.lr": [1e-4, 3e-4]}}
Sweep.from_dict(spec).run(log=lambda *a: None)
from pgjax.loop.runner import Placement
p = Placement(6, spec["config"]["shard"])
assert (p.num_devices, p.padded) == ((4, 8) if spec["config"]["shard"] else (1, 6))
"""


def _assert_same_records(ma: pd.DataFrame, mb: pd.DataFrame) -> None:
    """The same runs placed differently give the same records up to float32 reordering: the
    per-device batch width changes how XLA vectorises reductions, so last-bit differences
    grow over a few optimiser steps (3e-4 relative seen on one CI machine). A placement bug (a
    run given another seed or another run's data) differs at order one, far above this."""
    assert list(ma.columns) == list(mb.columns) and len(ma) == len(mb)
    np.testing.assert_allclose(ma.to_numpy(float), mb.to_numpy(float), rtol=2e-3, atol=1e-4,
                               equal_nan=True, err_msg=f"columns: {list(ma.columns)}")


@pytest.mark.slow
def test_sweep_sharded_over_four_devices_equals_unsharded(tmp_path):
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
           "JAX_PLATFORMS": "cpu"}
    for name, shard in (("sharded", "1"), ("single", "0")):
        subprocess.run([sys.executable, "-c", SHARD_SCRIPT, str(tmp_path), name, shard],
                       check=True, env=env)
    for group, n in (("ppo_jax-cartpole", 6), ("trpo_jax-cartpole", 3)):  # padded to 8 and 4
        a, b = tmp_path / "sharded" / group / "runs", tmp_path / "single" / group / "runs"
        runs = sorted(p.name for p in a.iterdir())
        assert len(runs) == n and runs == sorted(p.name for p in b.iterdir())
        for r in runs:
            ma = run_metrics(a / r).drop(columns="wall_time_s")
            mb = run_metrics(b / r).drop(columns="wall_time_s")
            _assert_same_records(ma, mb)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_processes_with_jax_distributed_equal_one_process(tmp_path):
    """A sweep over two processes on localhost (jax.distributed, gloo collectives on CPU, two
    devices each) writes, from process 0, the records a single process with four devices
    writes: the multi-host path of docs/explanation/training.md, run for real."""
    base = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
            "JAX_PLATFORMS": "cpu"}
    script = SHARD_SCRIPT.replace("assert len(jax.devices()) == 4, jax.devices()", "").replace(
        '"quiet": True,', '"quiet": True, "distributed": sys.argv[4] == "1",')
    multi = {**base, "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{_free_port()}",
             "JAX_NUM_PROCESSES": "2"}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), "multi", "1", "1"],
                              env={**multi, "JAX_PROCESS_ID": str(i)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for i in range(2)]
    outs = [p.communicate(timeout=600)[0].decode(errors="replace") for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    single = {**base, "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    subprocess.run([sys.executable, "-c", SHARD_SCRIPT, str(tmp_path), "single", "1"],
                   check=True, env=single)
    for group in ("ppo_jax-cartpole", "trpo_jax-cartpole"):
        a, b = tmp_path / "multi" / group, tmp_path / "single" / group
        assert json.loads((a / "status.json").read_text())["status"] == "finished"
        runs = sorted(p.name for p in (a / "runs").iterdir())
        assert runs == sorted(p.name for p in (b / "runs").iterdir())
        for r in runs:
            ma = run_metrics(a / "runs" / r).drop(columns="wall_time_s")
            mb = run_metrics(b / "runs" / r).drop(columns="wall_time_s")
            _assert_same_records(ma, mb)


# -- dashboards -------------------------------------------------------------------------------
def _read_events(path: Path) -> list:
    from tensorboardX.proto import event_pb2

    events, data = [], path.read_bytes()
    i = 0
    while i < len(data):
        (n,) = struct.unpack("<Q", data[i:i + 8])
        ev = event_pb2.Event()
        ev.ParseFromString(data[i + 12:i + 12 + n])
        events.append(ev)
        i += 12 + n + 4
    return events


def test_tensorboard_events_mirror_the_csv(tmp_path):
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), name="tb", tensorboard=True)
    records = run(cfg)
    d = records.run_dirs[0]
    files = list((d / "tensorboard").glob("events.out.tfevents.*"))
    assert files
    scalars = {}
    for ev in _read_events(files[0]):
        for v in ev.summary.value:
            scalars[(v.tag, ev.step)] = v.simple_value
    rows = run_metrics(d)
    last = rows.iloc[-1]
    assert scalars[("eval_return", int(last["env_steps"]))] == pytest.approx(last["eval_return"])
    assert scalars[("kl_max", int(last["env_steps"]))] == pytest.approx(last["kl_max"])


class Exploding:
    """A Gymnasium env whose simulator crashes after a few steps."""

    def __new__(cls):
        import gymnasium as gym
        from gymnasium import spaces

        class Env(gym.Env):
            observation_space = spaces.Box(-1, 1, (2,), np.float32)
            action_space = spaces.Discrete(2)

            def reset(self, seed=None, options=None):
                super().reset(seed=seed)
                self.t = 0
                return np.zeros(2, np.float32), {}

            def step(self, action):
                self.t += 1
                if self.t > 40:
                    raise RuntimeError("simulator diverged")
                return np.zeros(2, np.float32), 1.0, False, False, {}

        return Env()


@pytest.mark.slow
def test_sweep_records_failures_and_carries_on(tmp_path):
    import gymnasium as gym

    gym.register("PgjaxExploding-v0", entry_point=Exploding, max_episode_steps=100)
    spec = f"""
name = "f"
out = "{tmp_path}"
algos = ["ppo"]
envs = ["gym:PgjaxExploding-v0", "gym:Pendulum-v1"]
seeds = 1
[config]
steps = 256
num_envs = 2
rollout_len = 32
eval_every = 2
eval_envs = 1
"ppo.minibatches" = 2
"ppo.epochs" = 2
"ppo.max_grad_norm" = 1e9
[grid]
"ppo.lr" = [3e-4, 1e3]
"""
    path = tmp_path / "f.toml"
    path.write_text(spec)
    status = Sweep.from_file(path).run(log=lambda *a: None)["groups"]
    crashed, pend = status["ppo_gym-PgjaxExploding-v0"], status["ppo_gym-Pendulum-v1"]
    assert crashed["status"] == "error" and "simulator diverged" in crashed["error"]
    assert pend["status"] == "finished"  # the sweep carried on after the crash
    assert list(pend["failed_runs"]) == ["lr=1000_seed0"]
    assert "non-finite" in pend["failed_runs"]["lr=1000_seed0"]
    saved = json.loads((tmp_path / "f" / "sweep.json").read_text())["groups"]
    assert saved.keys() == status.keys()


REPO = Path(__file__).resolve().parent.parent
SWEEP_FILES = sorted((REPO / "experiments" / "sweeps").glob("*.toml"))


@pytest.mark.parametrize("path", SWEEP_FILES, ids=[p.stem for p in SWEEP_FILES])
def test_every_committed_sweep_file_builds_and_resumes_its_records(path, monkeypatch):
    """Each sweep file under experiments/sweeps validates as written, and every group with
    committed records would resume them: the command its README row gives still runs, and a
    later change to pgjax's options or presets shows up here rather than as a refusal when
    someone reruns the experiment."""
    from pgjax.loop.runner import check_resumable

    monkeypatch.chdir(REPO)  # the files' out = "experiments/results/sweeps" is relative
    sweep = Sweep.from_file(path)
    assert sweep.groups
    for cfg in sweep.groups.values():
        root = Path(cfg.out) / cfg.name
        if (root / "config.json").exists():
            check_resumable(cfg, root)


def test_a_sweep_file_unsets_what_a_preset_set_with_none(tmp_path):
    """TOML has no null: "none" sets an option whose own default is None back to None
    (happo-paper sets net.std_max); on an option that cannot be None it stays an error."""
    spec = {"name": "s", "out": str(tmp_path), "algos": ["happo"], "envs": ["mabrax:halfcheetah_2x3"],
            "preset": "happo-paper", "config": {"net.std_max": "none", "steps": 4096}}
    (cfg,) = Sweep.from_dict(spec).groups.values()
    assert cfg.net.std_max is None
    spec["config"] = {"net.std_max": "x"}
    with pytest.raises(ConfigError, match=r'net.std_max.*must be a number.*"none" to unset'):
        Sweep.from_dict(spec)
    spec["config"] = {"gamma": "none"}
    with pytest.raises(ConfigError, match=r"'gamma'.*must be a number, got 'none'"):
        Sweep.from_dict(spec)
