"""The persistent compilation cache: where it lives, its switch, and that a rerun loads programs."""
import os
import subprocess
import sys

from pgjax import cli, compile_cache


def test_directory_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PGJAX_COMPILE_CACHE", str(tmp_path / "c"))
    assert compile_cache.default_dir() == tmp_path / "c"
    for off in ("off", "0", "OFF", "none"):
        monkeypatch.setenv("PGJAX_COMPILE_CACHE", off)
        assert compile_cache.default_dir() is None
    monkeypatch.delenv("PGJAX_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.default_dir() == tmp_path / "xdg" / "pgjax" / "jax"


def test_flag_switches_it_off(monkeypatch):
    calls, seen = [], []
    monkeypatch.setattr(compile_cache, "enable", lambda *a: calls.append(a))
    monkeypatch.setitem(cli.COMMANDS, "train", lambda argv: seen.append(argv) or 0)
    assert cli.main(["train", "--env", "jax:cartpole", "--no-compile-cache"]) == 0
    assert calls == [] and seen[-1] == ["--env", "jax:cartpole"]
    assert cli.main(["train", "--env", "jax:cartpole"]) == 0
    assert calls == [()] and seen[-1] == ["--env", "jax:cartpole"]


def test_rerun_loads_compiled_programs(tmp_path):
    """A second identical `pgjax train` finds every program it compiles in the cache."""
    cache = tmp_path / "cache"
    env = {**os.environ, "PGJAX_COMPILE_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "pgjax.cli", "train", "--algo", "ppo", "--env", "jax:cartpole",
           "--seeds", "1", "--steps", "4096", "--eval-every", "1", "--out", str(tmp_path)]
    subprocess.run([*cmd, "--name", "a"], check=True, env=env, capture_output=True)
    entries = {p.name for p in cache.iterdir()}
    assert entries, "the first run stored no compiled program"
    subprocess.run([*cmd, "--name", "b"], check=True, env=env, capture_output=True)
    assert {p.name for p in cache.iterdir()} == entries  # nothing new had to be compiled
