"""The persistent compilation cache: where it lives, its switch, and that a rerun loads programs."""
import os
import subprocess
import sys

import pytest

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


@pytest.mark.slow
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


@pytest.mark.slow
def test_rerun_loads_traced_programs_with_identical_records(tmp_path, monkeypatch):
    """`run` keeps the trainer's traced functions on disk (jax.export): a rerun of the same
    config (another name and directory) loads them and never traces the chunk from Python;
    a config that differs traces again. The records are the same bit for bit, with and
    without the stored programs, for one run (unbatched) and for two (vmapped)."""
    import dataclasses

    from helpers import assert_same_records

    import pgjax.runner as runner
    from pgjax import TrainConfig, Trainer, run

    programs = tmp_path / "programs"
    monkeypatch.setattr(runner, "program_dir", lambda: programs)
    traced = []
    chunk_evaluated = Trainer.chunk_evaluated
    monkeypatch.setattr(Trainer, "chunk_evaluated",
                        lambda self, *a: traced.append(1) or chunk_evaluated(self, *a))
    for seeds in (1, 2):
        cfg = TrainConfig(env="jax:cartpole", num_envs=8, rollout_len=16, eval_every=2,
                          eval_envs=4, steps=8 * 16 * 2 * 3, seeds=seeds, evals=2,
                          out=str(tmp_path / f"s{seeds}"), quiet=True)
        n, stored = len(traced), set(programs.glob("*.program"))
        run(dataclasses.replace(cfg, name="first"))
        assert len(traced) == n + 1
        assert len(set(programs.glob("*.program")) - stored) == 2  # init and chunk
        run(dataclasses.replace(cfg, name="again"))
        assert len(traced) == n + 1  # loaded, not traced
        run(dataclasses.replace(cfg, name="other", gae_lambda=0.9))
        assert len(traced) == n + 2  # another config: another program
        with monkeypatch.context() as m:
            m.setattr(runner, "program_dir", lambda: None)
            run(dataclasses.replace(cfg, name="plain"))
        assert len(traced) == n + 3
        root = tmp_path / f"s{seeds}"
        assert_same_records(root / "first", root / "again")
        assert_same_records(root / "first", root / "plain")


def test_stored_program_survives_a_damaged_file(tmp_path):
    """An unreadable stored program is traced again and replaced; the results are the
    function's."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    fn = lambda x, y: {"sum": x + y, "prod": x * y}
    x, y = jnp.arange(3.0), jnp.ones(3)
    first = compile_cache.StoredProgram(fn, "k", tmp_path)(x, y)
    (path,) = tmp_path.glob("*.program")
    path.write_bytes(b"damaged")
    again = compile_cache.StoredProgram(fn, "k", tmp_path)(x, y)
    assert path.stat().st_size > 100
    loaded = compile_cache.StoredProgram(fn, "k", tmp_path)(x, y)
    for out in (first, again, loaded):
        np.testing.assert_array_equal(out["sum"], x + y)
        np.testing.assert_array_equal(out["prod"], x * y)
    assert jax.tree.structure(loaded) == jax.tree.structure(fn(x, y))
