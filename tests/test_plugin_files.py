"""Plugins recorded by content: a run carries copies of its plugin files with their sha256,
readers import those copies from any folder only when trusted, and a plugin's contract
(arity, names, imports, the plugins list) is checked before anything compiles."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pgjax.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = ["--steps", "1024", "--num-envs", "8", "--rollout-len", "16", "--eval-every", "2",
        "--evals", "2", "--eval-envs", "2", "--episode-length", "50", "--ppo_es.epochs", "1",
        "--ppo_es.minibatches", "2", "--checkpoint-seconds", "0"]


def _marked_plugin(folder: Path, marker: Path) -> Path:
    """The example epoch-stop rule, with a first line that writes ``marker`` when it runs."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (EXAMPLES / "ppo_epoch_kl_stop.py").read_text()
    head = f"from pathlib import Path as _P\n_P({str(marker)!r}).write_text('imported')\n"
    (folder / "stop_rule.py").write_text(head + text)
    return folder / "stop_rule.py"


def _pgjax(cwd: Path, *args, key_file: Path, timeout=600):
    env = {**os.environ, "PGJAX_KEY_FILE": str(key_file)}
    return subprocess.run([sys.executable, "-m", "pgjax.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _python(cwd: Path, code: str, key_file: Path):
    env = {**os.environ, "PGJAX_KEY_FILE": str(key_file)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_plugin_run_moved_to_another_machine_evaluates_renders_resumes_and_reloads(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    marker = tmp_path / "marker"
    _marked_plugin(here / "plugins", marker)
    # trained in `here` with a relative plugin path, cut after its first chunk (a crash)
    crash = ("import sys; sys.path.insert(0, %r)\n"
             "import pgjax.loop.runner as r\n"
             "real = r.VmappedRuns\n"
             "class Cut(real):\n"
             "    def __init__(self, *a):\n"
             "        super().__init__(*a); c, n = self.chunk, [0]\n"
             "        def chunk(*x, **k):\n"
             "            n[0] += 1\n"
             "            if n[0] > 2: raise SystemExit(9)\n"
             "            return c(*x, **k)\n"
             "        self.chunk = chunk\n"
             "r.VmappedRuns = Cut\n"
             "from pgjax.cli import main\n"
             "main(['train', '--plugins', 'plugins/stop_rule.py', '--algo', 'ppo_es', '--env',"
             " 'brax:inverted_pendulum', '--out', 'runs', '--name', 'r', '--quiet', *%r])\n"
             % (str(Path(__file__).parent), TINY))
    mine = tmp_path / "key-here"
    out = _python(here, crash, mine)
    assert out.returncode == 9, out.stderr[-2000:]
    record = json.loads((here / "runs" / "r" / "config.json").read_text())
    entry, = record["plugin_files"]
    assert entry["file"] == "plugins/stop_rule.py" and entry["copy"] == "plugins/stop_rule.py"
    copy = here / "runs" / "r" / "plugins" / "stop_rule.py"
    assert copy.read_bytes() == (here / "plugins" / "stop_rule.py").read_bytes()
    import hashlib

    assert entry["sha256"] == hashlib.sha256(copy.read_bytes()).hexdigest()

    # to another machine: another folder, another user's key, the original plugin gone
    there.mkdir()
    shutil.move(str(here / "runs"), str(there / "runs"))
    shutil.rmtree(here)
    marker.unlink()
    (there / "plugins").mkdir()  # a plugins/ folder beside the run: never imported from
    (there / "plugins" / "stop_rule.py").write_text(f"open({str(marker)!r}, 'w')\n")
    theirs = tmp_path / "key-there"
    run_dir = there / "runs" / "r"

    # without trust nothing from the run is imported: one line naming the file and its hash
    for args in (["eval", str(run_dir), "--include-unfinished"],
                 ["render", str(run_dir), "--out", str(tmp_path / "v.html")],
                 ["train", "--resume", "--out", "runs", "--name", "r", "--algo", "ppo_es",
                  "--env", "brax:inverted_pendulum", "--quiet", *TINY]):
        out = _pgjax(there, *args, key_file=theirs)
        assert out.returncode == 2, (args, out.stderr[-2000:])
        errors = [x for x in out.stderr.splitlines() if "error" in x or "Traceback" in x]
        err = out.stderr
        assert len(errors) == 1 and "--trust-plugins" in errors[0], err
        assert "stop_rule.py" in err and entry["sha256"][:16] in err, err
        assert not marker.exists(), args
    code = ("import pgjax\n"
            "try:\n    pgjax.load_policy('runs/r')\nexcept pgjax.ConfigError as e:\n"
            "    print('refused', e)\n")
    out = _python(there, code, theirs)
    assert "refused" in out.stdout and not marker.exists(), out.stdout + out.stderr[-2000:]

    # with trust: resumed from there (its own copy), then evaluated, reloaded and rendered
    out = _pgjax(there, "train", "--resume", "--trust-plugins", "--out", "runs", "--name", "r",
                 "--algo", "ppo_es", "--env", "brax:inverted_pendulum", "--quiet", *TINY,
                 key_file=theirs)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["status"] == "finished"
    assert marker.read_text() == "imported"  # the run's copy ran, not the folder's file
    code = ("import numpy as np, pgjax\n"
            "from pgjax.tools.trained import evaluate\nfrom pgjax.tools.render import render\n"
            "t = evaluate('runs/r', episodes=2, trust_plugins=True)\n"
            "p = pgjax.load_policy('runs/r', trust_plugins=True)\n"
            "a, _ = p.mode(np.zeros((1,) + p.env.spec.obs_shape, np.float32))\n"
            "info = render('runs/r', 'v.html', trust_plugins=True, max_steps=20)\n"
            "print('OK', p.cfg.algo, len(t), np.asarray(a).shape, info['frames'])\n")
    out = _python(there, code, theirs)
    assert out.returncode == 0 and "OK ppo_es 1 (1, 1)" in out.stdout, out.stderr[-3000:]
    assert (there / "v.html").stat().st_size > 1000

    # an edited copy is named and refused, even with trust, unless asked for
    edited = run_dir / "plugins" / "stop_rule.py"
    edited.write_text(edited.read_text() + "\n# edited\n")
    out = _pgjax(there, "eval", str(run_dir), "--trust-plugins", key_file=theirs)
    assert out.returncode == 2 and "differs" in out.stderr and "--allow-changed-plugins" in \
        out.stderr, out.stderr[-2000:]


def _tiny_point(tmp_path, *args, name="r"):
    return main(["train", "--steps", "512", "--num-envs", "4", "--rollout-len", "16",
                 "--eval-every", "4", "--evals", "2", "--eval-envs", "2", "--quiet",
                 "--out", str(tmp_path), "--name", name, *args])


def test_a_run_trained_here_by_this_user_needs_no_flag_and_a_substitute_is_checked(tmp_path,
                                                                                    capsys):
    """The tag made with this user's key vouches for the copy; ``--plugins`` replaces the
    copy by name, and a file of other content is refused unless allowed."""
    plugin = tmp_path / "src" / "point_env_family.py"
    plugin.parent.mkdir()
    shutil.copy(EXAMPLES / "point_env_family.py", plugin)
    assert _tiny_point(tmp_path, "--plugins", str(plugin), "--env", "point:2d") == 0
    root = tmp_path / "r"
    assert (root / "plugins" / "point_env_family.py").exists()
    plugin.unlink()  # the original is gone: the run's copy is used
    assert main(["eval", str(root), "--episodes", "2"]) == 0
    other = tmp_path / "other" / "point_env_family.py"
    other.parent.mkdir()
    other.write_text((EXAMPLES / "point_env_family.py").read_text() + "\n# changed\n")
    capsys.readouterr()
    assert main(["eval", str(root), "--plugins", str(other)]) == 2
    err = capsys.readouterr().err
    assert "differs" in err and "--allow-changed-plugins" in err and len(err.splitlines()) == 1
    assert main(["eval", str(root), "--plugins", str(tmp_path / "nope.py")]) == 2
    assert "replaces none of the run's plugins (point_env_family.py)" in capsys.readouterr().err
    # a tag that does not match the file (copied from another run) vouches for nothing
    record = json.loads((root / "config.json").read_text())
    record["plugin_files"][0]["tag"] = "0" * 64
    (root / "config.json").write_text(json.dumps(record))
    from pgjax.core import plugin_files
    from pgjax.core.errors import ConfigError

    with pytest.raises(ConfigError, match="--trust-plugins"):
        plugin_files.recorded(root, record)


def test_reading_a_record_imports_nothing(tmp_path):
    """``TrainConfig.from_record`` (what ``pgjax plot`` and the results layer use) never
    imports a plugin a record names."""
    from pgjax.training.config import TrainConfig
    from pgjax.core.errors import ConfigError

    marker = tmp_path / "m"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w')\n")
    with pytest.raises(ConfigError, match="not loaded"):
        TrainConfig.from_record({"env": "jax:cartpole", "plugins": [str(evil)]})
    assert not marker.exists()


# -- the plugin contract, at the boundary: one line, exit 2, before compilation ---------------
def _plugin(tmp_path, text: str, name="p.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


STEP_WITH = """
import jax, jax.numpy as jnp
from pgjax.envs import ActionSpace, EnvFamily, EnvSpec, VectorEnv, register

def make(name, num_envs, episode_length, options):
    def reset1(key):
        x = jnp.zeros(2)
        return {reset}
    def step1(x, action):
        return {step}
    spec = EnvSpec("{fam}:" + name, (2,), ActionSpace("box", 2), num_envs, 20)
    return VectorEnv(spec, reset1, step1)

register("{fam}", EnvFamily(make, "wrong tuples"))
"""


@pytest.mark.parametrize("reset, step, says", [
    ("x, x", "x, x, 0.0, jnp.bool_(False), jnp.bool_(False), {}",
     "returns 6 values; a simulator's step1(sim_state, action) returns (sim_state, obs, "
     "reward, terminated)"),
    ("x", "x, x, 0.0, jnp.bool_(False)", "returns one"),
    ("x, x", "x, x[:1] @ jnp.ones((3, 3)), 0.0, jnp.bool_(False)", "failed while traced"),
])
def test_a_plugin_env_returning_the_wrong_tuple_is_one_line(tmp_path, capsys, reset, step,
                                                             says):
    fam = f"bad{abs(hash((reset, step))) % 10**8}"
    plugin = _plugin(tmp_path, STEP_WITH.format(reset=reset, step=step, fam=fam))
    assert _tiny_point(tmp_path, "--plugins", plugin, "--env", f"{fam}:a") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err
    assert not (tmp_path / "r").exists()  # refused before the run directory was made


def test_plugin_names_imports_and_lists_are_checked(tmp_path, capsys):
    # a rule named like a built-in alias
    alias = _plugin(tmp_path, (EXAMPLES / "ppo_epoch_kl_stop.py").read_text().replace(
        '"ppo_es"', '"happo"'), "alias.py")
    assert _tiny_point(tmp_path, "--plugins", alias) == 2
    err = capsys.readouterr().err
    assert "'happo' is pgjax's name for --algo ppo --agent-update sequential" in err, err
    # a component whose options would take the name of one of pgjax's own option groups
    clash = _plugin(tmp_path, (EXAMPLES / "ppo_epoch_kl_stop.py").read_text().replace(
        '"ppo_es"', '"net"'), "clash.py")
    assert _tiny_point(tmp_path, "--plugins", clash) == 2
    assert "pgjax's own option '--net'" in capsys.readouterr().err
    # a missing dependency inside the plugin is not a bad path
    missing = _plugin(tmp_path, "import no_such_dependency_xyz\n", "needs.py")
    assert _tiny_point(tmp_path, "--plugins", missing) == 2
    err = capsys.readouterr().err
    assert "cannot import no_such_dependency_xyz" in err and "pip install" in err and \
        "needs.py:1" in err, err
    # a string where a list belongs, in a sweep file and in Python
    sweep = tmp_path / "s.toml"
    sweep.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\n[config]\nplugins = "x.py"\n')
    from pgjax.core.errors import ConfigError
    from pgjax.core.registry import load_plugins
    from pgjax.tools.sweep import Sweep

    with pytest.raises(ConfigError, match=r"plugins must be a list.*plugins = \['x.py'\]"):
        Sweep.from_file(sweep)

    with pytest.raises(ConfigError, match="must be a list"):
        load_plugins("x.py")


def test_sweep_plugin_paths_resolve_against_the_sweep_file(tmp_path, monkeypatch):
    from pgjax.tools.sweep import Sweep

    folder = tmp_path / "exp"
    folder.mkdir()
    shutil.copy(EXAMPLES / "point_env_family.py", folder / "fam.py")
    (folder / "s.toml").write_text('algos = ["ppo"]\nenvs = ["point:2d"]\nseeds = 1\n'
                                   '[config]\nplugins = ["fam.py"]\n')
    monkeypatch.chdir(tmp_path)  # another folder than the sweep file's
    sweep = Sweep.from_file(folder / "s.toml")
    cfg, = sweep.groups.values()
    assert cfg.plugins == (str((folder / "fam.py").resolve()),)


def test_plugin_code_failing_while_traced_is_one_line_and_leaves_the_name_free(tmp_path,
                                                                              capsys):
    """A plugin rule whose loss raises when the program is traced: one line naming the
    plugin's file and line, exit 2, and the run's name is free for the fixed plugin."""
    text = (EXAMPLES / "ppo_epoch_kl_stop.py").read_text().replace('"ppo_es"', '"ppo_tr"')
    broken = text.replace("def stop_on_kl(e):", "def stop_on_kl(e):\n    raise KeyError('kl_stopp')")
    plugin = _plugin(tmp_path, broken, "tr.py")
    flags = ["--plugins", plugin, "--algo", "ppo_tr", "--env", "jax:cartpole"]
    assert _tiny_point(tmp_path, *flags) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "KeyError" in err and "tr.py:" in err, err
    # the fixed plugin (another file: this process has imported the first one) trains under
    # the same --name without --overwrite
    fixed = _plugin(tmp_path, text.replace('"ppo_tr"', '"ppo_tr2"'), "tr_fixed.py")
    assert _tiny_point(tmp_path, "--plugins", fixed, "--algo", "ppo_tr2", "--env",
                       "jax:cartpole") == 0, capsys.readouterr().err


def test_a_sweep_folder_never_mixes_shared_settings_across_only_selections(tmp_path):
    """--only ppo*, then --set seeds=3 --only spo*: the second is refused, though neither
    selection holds a group of the other (settings every group shares are recorded once)."""
    from pgjax.core.errors import ConfigError
    from pgjax.tools.sweep import Sweep

    toml = tmp_path / "s.toml"
    toml.write_text(f'out = "{tmp_path}"\nalgos = ["ppo", "spo"]\nenvs = ["jax:cartpole"]\n'
                    'seeds = 2\n')
    first = Sweep.from_file(toml)
    first.groups = {k: v for k, v in first.groups.items() if k.startswith("ppo")}
    first.root.mkdir(parents=True)
    first.check_settings()
    second = Sweep.from_file(toml, ["seeds=3"])
    second.groups = {k: v for k, v in second.groups.items() if k.startswith("spo")}
    with pytest.raises(ConfigError, match="shared by every group.*seeds"):
        second.check_settings()
    same = Sweep.from_file(toml)  # the same settings share the folder as before
    same.groups = {k: v for k, v in same.groups.items() if k.startswith("spo")}
    same.check_settings()
