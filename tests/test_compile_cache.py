"""The persistent compilation cache: where it lives, its switch, that a rerun loads programs,
and that no one else's files in it run: a cache directory other users could write is refused,
and a stored program is loaded only under its user's key."""
import hashlib
import hmac
import os
import pickle
import stat
import subprocess
import sys

import pytest

from pgjax import cli
from pgjax.core import compile_cache, trust


@pytest.fixture(autouse=True)
def own_config(monkeypatch, tmp_path):
    """Each test its own key for stored programs, away from the user's ~/.config."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config"


class Payload:
    """What a crafted stored program could hold: unpickling it makes the directory
    ``marker`` (it could as well run any other command)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def crafted(marker) -> bytes:
    return pickle.dumps({"format": 1, "exported": b"", "out_tree": Payload(marker)})


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

    import pgjax.loop.vmapped as vmapped
    from pgjax import TrainConfig, Trainer, run

    programs = tmp_path / "programs"
    monkeypatch.setattr(vmapped, "program_dir", lambda: programs)
    traced = []
    chunk = Trainer.chunk
    monkeypatch.setattr(Trainer, "chunk", lambda self, *a: traced.append(1) or chunk(self, *a))
    for seeds in (1, 2):
        cfg = TrainConfig(env="jax:cartpole", num_envs=8, rollout_len=16, eval_every=2,
                          eval_envs=4, steps=8 * 16 * 2 * 3, seeds=seeds, evals=2,
                          out=str(tmp_path / f"s{seeds}"), quiet=True)
        n, stored = len(traced), set(programs.glob("*.program"))
        run(dataclasses.replace(cfg, name="first"))
        assert len(traced) == n + 1
        assert len(set(programs.glob("*.program")) - stored) == 3  # init, chunk, evaluate
        run(dataclasses.replace(cfg, name="again"))
        assert len(traced) == n + 1  # loaded, not traced
        run(dataclasses.replace(cfg, name="other", gae_lambda=0.9))
        assert len(traced) == n + 2  # another config: another program
        with monkeypatch.context() as m:
            m.setattr(vmapped, "program_dir", lambda: None)
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


def traced_function(traced: list):
    def fn(x, y):
        traced.append(1)
        return {"sum": x + y, "pair": (x * y, x)}
    return fn


def check_output(out, x, y):
    import numpy as np

    np.testing.assert_array_equal(out["sum"], x + y)
    np.testing.assert_array_equal(out["pair"][0], x * y)
    np.testing.assert_array_equal(out["pair"][1], x)


def test_crafted_program_is_never_unpickled(tmp_path):
    """A file at the very path a stored program is read from, holding a pickle that runs
    code when loaded, is not loaded, whatever stands before the pickle: nothing (the
    earlier format), a wrong tag, or a tag under another user's key. Nor is a program this
    user stored for another key, moved there. The function is traced again, returns its own
    results, and the file is replaced by one that loads."""
    import jax.numpy as jnp

    probe, marker = tmp_path / "probe", tmp_path / "ran"
    pickle.loads(crafted(probe))
    assert probe.is_dir()  # the payload is live: unpickling it runs it
    traced, programs = [], tmp_path / "programs"
    fn, x, y = traced_function(traced), jnp.arange(3.0), jnp.ones(3)
    compile_cache.StoredProgram(fn, "k", programs)(x, y)
    (path,) = programs.glob("*.program")
    payload = crafted(marker)
    tag = hmac.new(os.urandom(32), path.name.encode() + b"\0" + payload,
                   hashlib.sha256).digest()
    other = tmp_path / "other"
    compile_cache.StoredProgram(lambda x, y: {"sum": x, "pair": (y, y)}, "k2", other)(x, y)
    (moved,) = other.glob("*.program")
    for content in (payload, bytes(32) + payload, tag + payload, moved.read_bytes()):
        path.write_bytes(content)
        n = len(traced)
        check_output(compile_cache.StoredProgram(fn, "k", programs)(x, y), x, y)
        assert not marker.exists()
        assert len(traced) == n + 1  # not loaded: traced again
        assert path.read_bytes() != content
        check_output(compile_cache.StoredProgram(fn, "k", programs)(x, y), x, y)
        assert len(traced) == n + 1  # the replacement loads
    assert not marker.exists()


def test_stored_program_loads_under_its_users_key_only(tmp_path, monkeypatch, own_config):
    """A stored program is loaded by a later StoredProgram (its function is not traced
    again) while the key it was tagged with is the one in use; under another user's key it
    is traced again and replaced. The key is made once, 0600 in a 0700 directory."""
    import jax
    import jax.numpy as jnp

    traced, programs = [], tmp_path / "programs"
    fn, x, y = traced_function(traced), jnp.arange(3.0), jnp.ones(3)
    first = compile_cache.StoredProgram(fn, "k", programs)(x, y)
    key = trust.key_file()
    assert key.parent == own_config / "pgjax"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    loaded = compile_cache.StoredProgram(fn, "k", programs)(x, y)
    assert len(traced) == 1
    check_output(loaded, x, y)
    assert jax.tree.structure(loaded) == jax.tree.structure(first)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "someone-else"))
    check_output(compile_cache.StoredProgram(fn, "k", programs)(x, y), x, y)
    assert len(traced) == 2
    monkeypatch.setenv("XDG_CONFIG_HOME", str(own_config))
    check_output(compile_cache.StoredProgram(fn, "k", programs)(x, y), x, y)
    assert len(traced) == 3  # someone else's file, not loaded
    compile_cache.StoredProgram(fn, "k", programs)(x, y)
    assert len(traced) == 3


@pytest.mark.parametrize("case", ["unwritable", "key readable by others",
                                  "key directory writable by others"])
def test_without_a_private_key_nothing_is_stored(tmp_path, monkeypatch, case):
    """Where the key cannot be made, or others could read or replace it, programs are
    neither stored nor loaded; results are the function's all the same."""
    import jax.numpy as jnp

    config = tmp_path / case
    key = config / "pgjax" / "secret.key"
    if case == "unwritable":
        config.write_text("a file, not a directory")
    else:
        key.parent.mkdir(parents=True, mode=0o700)
        key.write_bytes(os.urandom(32))
        key.chmod(0o600)
        (key if case.startswith("key readable") else key.parent).chmod(
            0o644 if case.startswith("key readable") else 0o777)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    traced, programs = [], tmp_path / "programs"
    fn, x, y = traced_function(traced), jnp.arange(3.0), jnp.ones(3)
    for n in (1, 2):
        check_output(compile_cache.StoredProgram(fn, "k", programs)(x, y), x, y)
        assert len(traced) == n
    assert not list(programs.glob("*.program"))


@pytest.fixture
def no_cache_configured():
    """JAX's cache directory unset for the test (enable keeps one already set), restored
    after it; nothing compiles in between."""
    import jax

    names = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
             "jax_compilation_cache_max_size")
    saved = {name: getattr(jax.config, name) for name in names}
    jax.config.update("jax_compilation_cache_dir", None)
    yield
    for name, value in saved.items():
        jax.config.update(name, value)


@pytest.mark.parametrize("case", ["group-writable", "world-writable with sticky bit",
                                  "programs group-writable", "file writable by others",
                                  "another user's"])
def test_cache_others_could_write_is_refused(tmp_path, capsys, monkeypatch,
                                             no_cache_configured, case):
    """A cache directory another user could write into is not used: enable returns None
    and says why and what to do on one line; the same directory, private, is used."""
    import jax

    cache = tmp_path / "cache"
    (cache / "programs").mkdir(parents=True)
    cache.chmod(0o700)
    assert compile_cache.enable(cache) == cache  # private: used
    jax.config.update("jax_compilation_cache_dir", None)
    named, fix = cache, "chmod go-w"
    if case == "group-writable":
        cache.chmod(0o770)
    elif case.startswith("world-writable"):
        cache.chmod(0o1777)
    elif case.startswith("programs"):
        named = cache / "programs"
        named.chmod(0o770)
    elif case.startswith("file"):
        cache.chmod(0o755)
        (cache / "jit_fn-0123-cache").write_bytes(b"")
        (cache / "jit_fn-0123-cache").chmod(0o644)
        assert compile_cache.enable(cache) == cache  # files others can only read: used
        jax.config.update("jax_compilation_cache_dir", None)
        named, fix = cache / "jit_fn-0123-cache", "chmod go-rwx"
        named.chmod(0o666)
    else:
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
        fix = f"owned by uid {uid}"
    capsys.readouterr()
    assert compile_cache.enable(cache) is None
    assert jax.config.jax_compilation_cache_dir is None
    assert compile_cache.program_dir() is None
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "compilation cache off" in err and str(named) in err and fix in err
    assert "PGJAX_COMPILE_CACHE=off" in err


def test_enable_makes_private_directories(tmp_path, no_cache_configured):
    """A missing cache directory and its missing parents are made 0700, under a umask that
    would let the group write."""
    cache = tmp_path / "a" / "b" / "jax"
    umask = os.umask(0o002)
    try:
        assert compile_cache.enable(cache) == cache
    finally:
        os.umask(umask)
    for d in (tmp_path / "a", tmp_path / "a" / "b", cache):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


@pytest.mark.slow
def test_train_runs_no_crafted_program(tmp_path):
    """`pgjax train` end to end: stored programs replaced by pickles that run code when
    loaded are not loaded (the run finishes, the payload never runs, the files are written
    anew); with the cache directory made group-writable the cache is refused with one line
    and the run still finishes."""
    cache, marker = tmp_path / "cache", tmp_path / "ran"
    env = {**os.environ, "PGJAX_COMPILE_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "pgjax.cli", "train", "--algo", "ppo", "--env", "jax:cartpole",
           "--seeds", "1", "--steps", "4096", "--eval-every", "1", "--out", str(tmp_path)]
    subprocess.run([*cmd, "--name", "a"], check=True, env=env, capture_output=True)
    stored = sorted((cache / "programs").glob("*.program"))
    assert stored
    for path in stored:
        path.write_bytes(crafted(marker))
    subprocess.run([*cmd, "--name", "b"], check=True, env=env, capture_output=True)
    assert not marker.exists()
    assert sorted((cache / "programs").glob("*.program")) == stored, \
        "the second run looked for other files (pgjax's source changed in between?)"
    assert all(path.read_bytes() != crafted(marker) for path in stored)  # written anew
    for path in stored:
        path.write_bytes(crafted(marker))
    cache.chmod(0o770)
    done = subprocess.run([*cmd, "--name", "c"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "compilation cache" in line]
    assert len(lines) == 1 and str(cache) in lines[0] and "chmod go-w" in lines[0], lines
    assert not marker.exists()
    assert all(path.read_bytes() == crafted(marker) for path in stored)  # cache off: untouched
    assert (tmp_path / "c").is_dir()
