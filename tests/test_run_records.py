"""Run records that are never lost or mislabelled: a finished run stays finished, a replaced
run is set aside until its successor finishes, every distinct value gets its own record, and
Ctrl-C is one line."""
from __future__ import annotations

import json
import shutil

import pytest

import pgjax.cli
from pgjax.cli import main
from pgjax.loop.records import exact, is_finished, run_id


def _train(tmp_path, *args, name="r"):
    return main(["train", "--env", "jax:cartpole", "--steps", "1024", "--num-envs", "4",
                 "--rollout-len", "32", "--eval-every", "2", "--eval-envs", "2", "--quiet",
                 "--out", str(tmp_path), "--name", name, *args])


def _snapshot(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def test_resume_of_a_finished_run_changes_nothing(tmp_path, capsys):
    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    before = _snapshot(root)
    for _ in range(2):  # twice: the first resume must not leave it "unfinished"
        assert _train(tmp_path, "--resume") == 0
        assert is_finished(root) and _snapshot(root) == before


def test_overwrite_with_a_typo_leaves_the_finished_run_as_it_was(tmp_path, capsys):
    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    before = _snapshot(root)
    for typo in (["--env", "jax:cartpol"], ["--env", "brax:hoper"], ["--policy", "gaussian"]):
        assert _train(tmp_path, "--overwrite", *typo) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert is_finished(root) and _snapshot(root) == before
    assert not (tmp_path / ".trash").exists()


def test_overwrite_sets_the_old_run_aside_until_the_new_one_finishes(tmp_path, monkeypatch,
                                                                     capsys):
    """While the new run trains the old one is in .trash (a SIGKILL leaves it there); a new
    run stopped (Ctrl-C, SIGTERM) or crashing puts it back; a successful one removes it."""
    from pgjax.core.errors import Terminated

    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    before = _snapshot(root)
    import pgjax.loop.runner

    for stop, code in ((KeyboardInterrupt, 130), (Terminated, 143), (RuntimeError, None)):
        def crash(*a, **k):
            kept = list((tmp_path / ".trash").glob("r-*/runs/seed0/metrics.csv.gz"))
            assert len(kept) == 1 and kept[0].read_bytes() == before["runs/seed0/metrics.csv.gz"]
            assert not is_finished(root)
            raise stop

        monkeypatch.setattr(pgjax.loop.runner, "_train_chunks", crash)
        if code is None:
            with pytest.raises(RuntimeError):
                _train(tmp_path, "--overwrite", "--ppo.lr", "1e-3")
        else:
            assert _train(tmp_path, "--overwrite", "--ppo.lr", "1e-3") == code
        assert "holds the run it replaced again" in capsys.readouterr().err
        assert is_finished(root) and _snapshot(root) == before, stop
    monkeypatch.undo()
    assert _train(tmp_path, "--overwrite", "--ppo.lr", "1e-3") == 0
    assert is_finished(root) and not (tmp_path / ".trash").exists()


def test_an_overwrite_whose_new_runs_all_fail_keeps_the_old_run(tmp_path, monkeypatch, capsys):
    """Exit 3 with every new run failed: the finished run it was to replace is put back (the
    failed records kept in .trash); with some failed, the old run stays in .trash and the
    warning says where and how to restore it."""
    import pgjax.loop.chunk_loop

    assert _train(tmp_path, "--seeds", "2") == 0
    root = tmp_path / "r"
    before = _snapshot(root)

    def failing(which):
        def find(cfg, metrics, first_iter, run_ids, active):
            return {r: (first_iter + 1, f"non-finite loss (run {run_ids[r]}, update "
                                        f"{first_iter + 1})") for r in active if r in which}
        return find

    monkeypatch.setattr(pgjax.loop.chunk_loop, "find_failures", failing({0, 1}))
    assert _train(tmp_path, "--seeds", "2", "--overwrite", "--ppo.lr", "1e-3") == 3
    err = capsys.readouterr().err
    assert "every run of the new one failed" in err and "replaced again" in err, err
    assert is_finished(root) and _snapshot(root) == before
    failed = list((tmp_path / ".trash").glob("r-*/runs/seed*/status.json"))
    assert len(failed) == 2  # the new run's records, kept
    monkeypatch.setattr(pgjax.loop.chunk_loop, "find_failures", failing({0}))
    assert _train(tmp_path, "--seeds", "2", "--overwrite", "--ppo.lr", "1e-3") == 3
    err = capsys.readouterr().err
    kept = [p for p in (tmp_path / ".trash").iterdir()
            if (p / "runs" / "seed1" / "metrics.csv.gz").exists()
            and not (p / "runs" / "seed1" / "status.json").exists()]
    assert len(kept) == 1 and f"kept in {kept[0]}" in err and "to restore it" in err, err
    assert (kept[0] / "runs" / "seed0" / "metrics.csv.gz").read_bytes() == \
        before["runs/seed0/metrics.csv.gz"]
    assert is_finished(root) and _snapshot(root) != before


def test_links_in_a_received_run_never_lead_writes_outside_it(tmp_path, capsys):
    """A run folder received from elsewhere whose files are symbolic links to files outside
    it: eval, plot and the records replace the links (the files outside stay as they were);
    a folder linked outside is refused in one line before a resume writes into it; a linked
    .lock is never truncated."""
    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = {}
    for name in ("eval.csv", "summary.csv", "aggregate.csv", "failures.csv", "curve.png",
                 ".lock"):
        victims[name] = outside / name
        victims[name].write_text(f"keep {name}\n")
        (root / name).unlink(missing_ok=True)
        (root / name).symlink_to(victims[name])
    assert main(["eval", str(root), "--episodes", "2"]) == 0
    assert main(["plot", str(root), "--reps", "20"]) == 0
    assert _train(tmp_path, "--resume") == 0  # finished: nothing to write, nothing refused
    for name, victim in victims.items():
        assert victim.read_text() == f"keep {name}\n", name
    for name in ("eval.csv", "aggregate.csv", "failures.csv"):  # written by eval and plot
        assert not (root / name).is_symlink() and (root / name).stat().st_size > 0, name
    # an unfinished run whose folder of records links outside: refused, nothing written
    (root / "status.json").unlink()
    shutil.move(root / "runs" / "seed0", outside / "seed0")
    (root / "runs" / "seed0").symlink_to(outside / "seed0")
    before = {p.name: p.read_bytes() for p in (outside / "seed0").iterdir()}
    capsys.readouterr()
    assert _train(tmp_path, "--resume") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "symbolic link" in err and "outside" in err, err
    assert {p.name: p.read_bytes() for p in (outside / "seed0").iterdir()} == before
    from pgjax.core.files import atomic_write_bytes
    from pgjax.core.errors import ConfigError
    with pytest.raises(ConfigError, match="symbolic link"):
        atomic_write_bytes(root / "runs" / "seed0" / "metrics.csv", b"x", within=root)


def test_distinct_grid_values_never_share_a_run_directory(tmp_path):
    assert exact(1e-4) == "0.0001" and exact(3e-4) == "0.0003" and exact(0.2) == "0.2"
    assert exact(1.000001e-4) != exact(1e-4)
    assert float(exact(1.000001e-4)) == 1.000001e-4
    hp = [{"ppo.lr": 1e-4}, {"ppo.lr": 1.000001e-4}]
    assert len({run_id(0, h, ["ppo.lr"]) for h in hp}) == 2
    assert _train(tmp_path, "--grid", "ppo.lr=1e-4,1.000001e-4") == 0
    runs = json.loads((tmp_path / "r" / "config.json").read_text())["runs"]
    assert len({r["id"] for r in runs}) == 2
    assert all((tmp_path / "r" / "runs" / r["id"] / "metrics.csv.gz").exists() for r in runs)


def test_namespaced_ids_and_option_strings_name_one_directory(tmp_path):
    """A Gymnasium id with a namespace (``gym:phys2d/CartPole-v1``) and a [static] string
    with spaces name one plain directory each, for a run's default name and a sweep's
    groups; values that differ only in such characters, and names longer than a directory
    name may be, are refused before anything runs."""
    from pgjax import TrainConfig
    from pgjax.training.config import ConfigError
    from pgjax.tools.sweep import Sweep

    name = TrainConfig(env="gym:phys2d/CartPole-v1").with_name().name
    assert name.startswith("ppo_gym-phys2d-CartPole-v1_") and "/" not in name
    spec = {"name": "s", "out": str(tmp_path), "algos": ["ppo"],
            "envs": ["gym:phys2d/CartPole-v1"]}
    assert list(Sweep.from_dict(spec).groups) == ["ppo_gym-phys2d-CartPole-v1"]
    spec.update(envs=["gym:CartPole-v1"],
                static={"gym.kwargs": ["", "sutton_barto_reward = True"]})
    assert list(Sweep.from_dict(spec).groups) == [
        "ppo_gym-CartPole-v1_kwargs=", "ppo_gym-CartPole-v1_kwargs=sutton_barto_reward=True"]
    spec["static"] = {"gym.kwargs": ["sutton_barto_reward=True", "sutton_barto_reward = True"]}
    with pytest.raises(ConfigError, match="would share the directory"):
        Sweep.from_dict(spec)
    long = TrainConfig(env="gym:CartPole-v1", name="r" * 256)
    with pytest.raises(ConfigError, match="256 bytes, more than a directory name may hold"):
        long.validate()


def test_a_copied_run_directory_resumes_under_its_new_name(tmp_path):
    assert _train(tmp_path, "--steps", "2048", "--checkpoint-seconds", "0", name="a") == 0
    # an unfinished copy: cut back to its first chunk by hand is not possible without a
    # checkpoint, so copy a finished run and check the resume is accepted (not refused for
    # its name)
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / ".lock").unlink(missing_ok=True)
    assert _train(tmp_path, "--steps", "2048", "--checkpoint-seconds", "0", "--resume",
                  name="b") == 0


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, capsys, monkeypatch):
    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setitem(pgjax.cli.COMMANDS, "train", interrupted)
    assert main(["train"]) == 130
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "interrupted" in err and "--resume" in err


# -- resume: records and checkpoints that do not agree ----------------------------------------
import dataclasses  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from helpers import Interrupt, assert_same_records, interrupting  # noqa: E402
from pgjax import TrainConfig, run  # noqa: E402
from pgjax.algos import PPOConfig  # noqa: E402
from pgjax.core.errors import ConfigError  # noqa: E402

SMALL = TrainConfig(env="jax:cartpole", num_envs=8, rollout_len=16, eval_every=2, eval_envs=4,
                    episode_length=100, steps=8 * 16 * 2 * 4, quiet=True, checkpoint_seconds=0,
                    ppo=PPOConfig(epochs=2, minibatches=4))


def _cut(cfg, monkeypatch, chunks=3) -> Path:
    with monkeypatch.context() as m:
        interrupting(m, after_chunks=chunks)
        with pytest.raises(Interrupt):
            run(cfg)
    return Path(cfg.out) / cfg.name


@pytest.fixture
def reference(tmp_path):
    cfg = dataclasses.replace(SMALL, out=str(tmp_path))
    return cfg, run(dataclasses.replace(cfg, name="full")).root


def test_resume_never_accepts_missing_rows(reference, monkeypatch, capsys):
    """metrics.csv cut short of the newest checkpoint: the resume goes back to a checkpoint
    the rows reach (with a warning), and ends with every row; with no metrics at all, the
    partial records are set aside and the run starts over; never finished with rows
    missing."""
    cfg, full = reference
    cut = _cut(dataclasses.replace(cfg, name="short"), monkeypatch)
    path = cut / "runs" / "seed0" / "metrics.csv"
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[:-2]) + "\n")  # iterations 5, 6 lost: behind checkpoint 3
    capsys.readouterr()
    run(dataclasses.replace(cfg, name="short", resume=True))
    assert "ahead of its metrics" in capsys.readouterr().err
    assert_same_records(full, cut)

    cut = _cut(dataclasses.replace(cfg, name="none"), monkeypatch)
    (cut / "runs" / "seed0" / "metrics.csv").unlink()
    run(dataclasses.replace(cfg, name="none", resume=True))
    assert_same_records(full, cut)


def test_resume_with_checkpoint_every_0_continues_from_the_checkpoint(reference, monkeypatch,
                                                                      capsys):
    cfg, full = reference
    cut = _cut(dataclasses.replace(cfg, name="c"), monkeypatch)
    capsys.readouterr()
    run(dataclasses.replace(cfg, name="c", resume=True, checkpoint_every=0, quiet=False))
    assert "resuming" in capsys.readouterr().out
    assert_same_records(full, cut)


def test_checksums_missing_or_damaged_are_not_called_damaged_checkpoints(reference,
                                                                         monkeypatch, capsys):
    """Without its checksum file (or with a damaged one) an intact checkpoint still resumes,
    with a warning that it cannot be verified; damaged bytes without a checksum are found
    at restore and named, never reported as a diverging run."""
    cfg, full = reference
    for how in ("missing", "damaged"):
        cut = _cut(dataclasses.replace(cfg, name=how), monkeypatch)
        digests = cut / "checkpoint" / "sha256.json"
        digests.unlink() if how == "missing" else digests.write_text('{"3": ')
        capsys.readouterr()
        run(dataclasses.replace(cfg, name=how, resume=True))
        err = capsys.readouterr().err
        assert "cannot be verified" in err and "--overwrite" not in err
        assert_same_records(full, cut)

    cut = _cut(dataclasses.replace(cfg, name="garbage"), monkeypatch)
    (cut / "checkpoint" / "sha256.json").unlink()
    for step in ("2", "3"):
        big = max((p for p in (cut / "checkpoint" / step).rglob("*") if p.is_file()),
                  key=lambda p: p.stat().st_size)
        big.write_bytes(b"\xff" * big.stat().st_size)
    capsys.readouterr()
    with pytest.raises(ConfigError, match="no checkpoint of .* restores"):
        run(dataclasses.replace(cfg, name="garbage", resume=True))
    err = capsys.readouterr().err
    assert "does not restore" in err and "learning rate" not in err


def test_damaged_status_files_are_one_line_everywhere(reference, capsys):
    from pgjax.tools.trained import evaluate

    cfg, full = reference
    shutil.copytree(full, Path(cfg.out) / "st")
    root = Path(cfg.out) / "st"
    (root / "runs" / "seed0" / "status.json").write_text("garbage{")
    for argv in (["train", "--env", "jax:cartpole", "--out", cfg.out, "--name", "st",
                  "--resume", "--quiet"], ["plot", str(root)], ["eval", str(root)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "status.json is damaged" in err, err
    with pytest.raises(ConfigError):
        evaluate(root)
    # a damaged root status.json: the records are whole, so --resume marks it finished again
    (root / "runs" / "seed0" / "status.json").unlink()
    (root / "status.json").write_text("{")
    run(dataclasses.replace(cfg, name="st", resume=True))
    assert is_finished(root)


def test_plot_and_eval_leave_unfinished_runs_out_with_a_note(tmp_path, monkeypatch, capsys):
    cfg = dataclasses.replace(SMALL, out=str(tmp_path), evals=5)
    run(dataclasses.replace(cfg, name="full"))
    cut = _cut(dataclasses.replace(cfg, name="killed"), monkeypatch)
    capsys.readouterr()
    assert main(["plot", str(cut.parent), "--reps", "20", "--out", str(cut.parent / "p")]) == 0
    out = capsys.readouterr()
    assert "killed is unfinished" in out.err and "--include-unfinished" in out.err
    agg = pd.read_csv(cut.parent / "p" / "aggregate.csv").sort_values("unfinished")
    # the table counts the unfinished run and says it used none of it
    assert agg[["finished", "unfinished", "runs_used"]].values.tolist() == [[1, 0, 1],
                                                                             [0, 1, 0]]
    assert "1 runs of unfinished run directories left out" in out.out
    assert main(["plot", str(cut.parent), "--reps", "20", "--include-unfinished", "--out",
                 str(cut.parent / "q")]) == 0
    agg = pd.read_csv(cut.parent / "q" / "aggregate.csv").sort_values("unfinished")
    assert agg[["finished", "unfinished", "runs_used"]].values.tolist() == [[1, 0, 1],
                                                                             [0, 1, 1]]
    assert main(["eval", str(cut), "--episodes", "2"]) == 2
    assert "unfinished" in capsys.readouterr().err
    assert main(["eval", str(cut), "--episodes", "2", "--include-unfinished", "--out",
                 str(cut.parent / "e.csv")]) == 0
    assert pd.read_csv(cut.parent / "e.csv")["finished"].tolist() == [False]


# -- sweeps --------------------------------------------------------------------------------
SWEEP = '''algos = ["ppo"]
envs = ["jax:cartpole"]
out = "{out}"
[config]
steps = 512
num_envs = 4
rollout_len = 32
eval_every = 2
eval_envs = 2
quiet = true
'''


def test_a_changed_sweep_is_refused_before_anything_trains(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(out=tmp_path) + '[static]\ngamma = [0.9, 0.99]\n')
    assert main(["sweep", str(f)]) == 0
    before = _snapshot(tmp_path / "s")
    f.write_text(SWEEP.format(out=tmp_path) + '[static]\ngamma = [0.9, 0.99, 0.999]\n')
    capsys.readouterr()
    assert main(["sweep", str(f), "--set", "ppo.lr=1e-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ppo.lr (0.0003 recorded, 0.001 now)" in err
    assert _snapshot(tmp_path / "s") == before  # no group trained, not even the new one


def test_a_sweep_shared_with_other_settings_is_refused(tmp_path, capsys, monkeypatch):
    """Two processes on one sweep folder: the second one's --set differs while the first has
    recorded its settings but not yet created a group: refused with one line naming the
    difference (exit 2), nothing trained; with the same settings it shares the sweep."""
    import pgjax.loop.runner

    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(out=tmp_path))
    real, other = pgjax.loop.runner.run, []

    def first_group(cfg, log, strict):  # the other process starts here
        if not other:
            other.append(main(["sweep", str(f), "--set", "ppo.lr=1e-3"]))
            other.append(capsys.readouterr().err.strip())
            other.append(list((tmp_path / "s").iterdir()))
            other.append(main(["sweep", str(f)]))  # the same settings: it trains the group
        return real(cfg, log=log, strict=strict)

    monkeypatch.setattr(pgjax.loop.runner, "run", first_group)
    assert main(["sweep", str(f)]) == 0
    code, err, held, same = other
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "ppo.lr (0.0003 recorded, 0.001 now)" in err and "--name" in err, err
    assert sorted(p.name for p in held) == [".sweep.lock", "settings.json"]  # nothing trained
    assert same == 0 and is_finished(tmp_path / "s" / "ppo_jax-cartpole")
    monkeypatch.undo()
    assert main(["sweep", str(f), "--set", "ppo.lr=1e-3", "steps=1024"]) == 2  # later, too
    assert "ppo.lr (0.0003 recorded, 0.001 now)" in capsys.readouterr().err


def test_sweep_files_of_the_wrong_form_are_one_line(tmp_path, capsys):
    bad = {"grid = 5": "'grid'", "config = 3": "'config'", "name = 5": "'name'",
           'algos = [1]\nenvs = ["jax:cartpole"]': "'algos'",
           '[static]\n"net.actor_hidden" = [[64, [1]]]': "list of integers",
           '[static]\ngamma = [0.9, 0.9]': "would share the directory"}
    for body, words in bad.items():
        f = tmp_path / "s.toml"
        head = "" if body.startswith("algos") else 'algos = ["ppo"]\nenvs = ["jax:cartpole"]\n'
        f.write_text(head + body + "\n")
        assert main(["sweep", str(f), "--dry-run"]) == 2, body
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, (body, err)
    f.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\n[static]\ngamma = [0.9, 0.9000001]\n')
    assert main(["sweep", str(f), "--dry-run"]) == 0
    assert "gamma=0.9_" not in capsys.readouterr().out  # two distinct group names
    f.write_text('algos = ["ppo"]\nenvs = ["jax:cartpole"]\nout = "/proc/pgjax"\n')
    assert main(["sweep", str(f)]) == 2
    assert "pass a writable out" in capsys.readouterr().err


def test_a_damaged_sweep_json_is_rebuilt(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(out=tmp_path))
    assert main(["sweep", str(f)]) == 0
    (tmp_path / "s" / "sweep.json").write_text('{"groups": ')
    capsys.readouterr()
    assert main(["sweep", str(f)]) == 0
    assert "sweep.json is damaged" in capsys.readouterr().err
    assert json.loads((tmp_path / "s" / "sweep.json").read_text())["groups"]


# -- plugins and meaningless options ----------------------------------------------------------
def test_two_plugins_registering_one_name_is_an_error_naming_both(tmp_path, capsys):
    body = ("from pgjax.algos import register, PPOConfig\nfrom pgjax.algos.ppo import make_ppo\n"
            "def make(cfg, policy):\n    return make_ppo(cfg, policy)\n"
            "register('twice', PPOConfig, make)\n")
    (tmp_path / "one.py").write_text(body)
    (tmp_path / "two.py").write_text(body.replace("make_ppo(cfg, policy)",
                                                  "make_ppo(cfg, policy)  # another rule"))
    assert _train(tmp_path, "--plugins", str(tmp_path / "one.py"), str(tmp_path / "two.py"),
                  "--algo", "twice") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "one.py" in err and "two.py" in err


@pytest.mark.parametrize("args, words", [
    (["--ppo.adam-eps", "-1"], "adam_eps must be > 0"),
    (["--ppo.adam-eps", "0"], "adam_eps must be > 0"),
    (["--algo", "ppo_kl", "--ppo_kl.d-targ", "-0.01"], "d_targ must be > 0"),
    (["--env", "jax:cartpole", "--brax.backend", "spring"], "does not use --brax.* options"),
    (["--gym.vectorization", "async"], "does not use --gym.* options"),
    (["--policy", "stateful", "--stateful.z-dim", "100000000000"],
     "z_dim 100,000,000,000 is beyond"),
    (["--policy", "window", "--window.size", "100000000000"],
     "window.size 100,000,000,000 is beyond"),
    (["--policy", "recurrent", "--recurrent.carry-size", "100000000000"], "carry_size"),
    (["--episode-length", "100000000000"], "(int32)"),
    (["--env", "jax:memory-100000000000"], "delay 100,000,000,000 is beyond"),
    (["--policy", "stateful", "--stateful.z-dim", "1000000"], "GB"),
])
def test_meaningless_or_oversized_options_are_one_line(tmp_path, capsys, monkeypatch, args,
                                                       words):
    import pgjax.loop.runner

    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    assert _train(tmp_path, *args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err, err
    assert not (tmp_path / "r").exists()


def test_damaged_parameters_are_one_line_for_every_reader(reference, capsys):
    import pgjax

    cfg, full = reference
    root = Path(cfg.out) / "p"
    shutil.copytree(full, root)
    (root / "runs" / "seed0" / "params.msgpack").write_bytes(b"garbage{")
    assert main(["eval", str(root), "--episodes", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "params.msgpack is damaged" in err
    with pytest.raises(ConfigError, match="params.msgpack is damaged"):
        pgjax.load_policy(root)


def test_ctrl_c_during_a_checkpoint_waits_for_it_to_be_whole():
    """SIGINT inside ``interrupts_deferred`` (which wraps a checkpoint and its checksums) is
    held until the block has finished, then raised."""
    import os
    import signal

    from pgjax.core.files import interrupts_deferred

    done = []
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where started in the background
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("the write finished")
    assert done == ["the write finished"]
    assert signal.getsignal(signal.SIGINT) is before  # the caller's handler is back


def test_runs_inside_runs_and_contradicting_flags_are_refused(reference, capsys):
    cfg, full = reference
    assert _train(Path(cfg.out) / "full" / "runs", name="nested") == 2
    assert "lies inside the run directory" in capsys.readouterr().err
    assert _train(Path(cfg.out), "--resume", "--overwrite", name="full") == 2
    assert "pass one of them" in capsys.readouterr().err
    # a damaged directory among others: plot says so and shows the rest
    shutil.copytree(full, Path(cfg.out) / "bad")
    (Path(cfg.out) / "bad" / "config.json").write_text("{}")
    assert main(["plot", cfg.out, "--reps", "10", "--out", str(Path(cfg.out) / "p")]) == 0
    err = capsys.readouterr().err
    assert "bad/config.json is damaged" in err and "left out" in err
    assert main(["plot", str(Path(cfg.out) / "bad")]) == 2


def test_a_directory_that_is_not_a_run_is_never_replaced(tmp_path, capsys, monkeypatch):
    """A sweep's folder (or any folder of other files) named as a run directory is refused,
    even with --overwrite, and left as it was."""
    import pgjax.loop.runner

    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "sweep.json").write_text("{}")
    (tmp_path / "r" / "notes.txt").write_text("mine")
    for flags in ([], ["--overwrite"], ["--resume"]):
        assert _train(tmp_path, *flags) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "is not a run directory" in err, err
    assert sorted(p.name for p in (tmp_path / "r").iterdir() if p.name != ".lock") == \
        ["notes.txt", "sweep.json"]


def test_progress_says_when_no_episode_ended_and_how_steps_were_rounded(tmp_path, capsys):
    from types import SimpleNamespace

    import numpy as np

    from pgjax.loop.runner import _progress_line

    s = SimpleNamespace(cfg=TrainConfig(**{**SMALL.__dict__}), run_ids=["a", "b"])
    line = _progress_line(s, 0, {"train_return": np.full(2, np.nan)}, None, {}, 1.0, 1.0)
    assert "train return        —" in line and "nan" not in line
    line = _progress_line(s, 0, {"train_return": np.array([np.nan, 20.0])}, None, {}, 1.0, 1.0)
    assert "train return     20.0" in line
    assert _train(tmp_path, "--steps", "1000") == 0  # quiet: nothing said
    assert main(["train", "--env", "jax:cartpole", "--steps", "1000", "--num-envs", "4",
                 "--rollout-len", "32", "--eval-every", "2", "--eval-envs", "2", "--out",
                 str(tmp_path), "--name", "loud"]) == 0
    assert "--steps 1,000 rounded up to 1,024" in capsys.readouterr().out


def test_a_run_that_failed_before_the_checkpoint_does_not_block_the_resume(tmp_path,
                                                                          monkeypatch, capsys):
    """A diverged run keeps training (NaN) inside the vmap, so every later checkpoint holds
    NaN for it: the resume restores them (its failure is recorded), even when the checksums
    are gone and the finiteness check runs; the other run continues."""
    cfg = TrainConfig(env="gym:Pendulum-v1", num_envs=4, rollout_len=32, eval_every=2,
                      eval_envs=1, episode_length=50, steps=4 * 32 * 2 * 4, quiet=True,
                      out=str(tmp_path), name="nan", grid=("ppo.lr=3e-4,1e3",),
                      checkpoint_seconds=0,
                      ppo=PPOConfig(minibatches=4, epochs=2, max_grad_norm=1e9))
    cut = _cut(cfg, monkeypatch, chunks=3)
    bad = next(d for d in (cut / "runs").iterdir() if (d / "status.json").exists())
    assert json.loads((bad / "status.json").read_text())["update"] <= 4
    (cut / "checkpoint" / "sha256.json").unlink()
    capsys.readouterr()
    records = run(dataclasses.replace(cfg, resume=True), strict=False)
    err = capsys.readouterr().err
    assert "does not restore" not in err and "cannot be verified" in err
    assert is_finished(records.root) and list(records.failed) == [1]


def test_after_falling_back_to_an_older_checkpoint_new_ones_are_saved(reference,
                                                                      monkeypatch):
    from pgjax.loop.checkpoint import verified_steps

    cfg, full = reference
    cut = _cut(dataclasses.replace(cfg, name="fb"), monkeypatch)
    big = max((p for p in (cut / "checkpoint" / "3").rglob("*") if p.is_file()),
              key=lambda p: p.stat().st_size)
    big.write_bytes(b"\xff" * big.stat().st_size)  # step 3 damaged: the resume uses 2
    _cut(dataclasses.replace(cfg, name="fb", resume=True), monkeypatch, chunks=1)
    assert 3 in verified_steps(cut / "checkpoint").good  # saved again, not skipped
    run(dataclasses.replace(cfg, name="fb", resume=True))
    assert_same_records(full, cut)


def test_plot_leaves_out_a_run_whose_metrics_are_damaged(reference, capsys):
    cfg, full = reference
    shutil.copytree(full, Path(cfg.out) / "other")
    (Path(cfg.out) / "other" / "runs" / "seed0" / "metrics.csv").write_text("iteration\nx\n")
    assert main(["plot", cfg.out, "--reps", "10", "--out", str(Path(cfg.out) / "p")]) == 0
    err = capsys.readouterr().err
    assert "metrics.csv is damaged" in err and "run left out" in err


# -- storage faults and foreign or hand-edited records ----------------------------------------
def _enospc(name: str, after: int):
    """A ``files._fresh`` that finds the storage full when creating the temporary file of
    ``name`` for the ``after``-th time and from then on."""
    import errno
    import os

    import pgjax.core.files

    real, calls = pgjax.core.files._fresh, [0]

    def fresh(tmp):
        if tmp.name.startswith(f".{name}."):
            calls[0] += 1
            if calls[0] >= after:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(tmp)
    return fresh


def test_a_full_disk_while_training_is_one_line_and_the_run_resumes(tmp_path, monkeypatch,
                                                                     capsys):
    """ENOSPC writing a record, or no room for a checkpoint: one line naming the file, exit
    3, nothing marked finished, no temporary file left; --resume then finishes it."""
    import pgjax.loop.chunk_loop
    import pgjax.core.files
    from pgjax.core.rundir import inspect, read_rows

    root = tmp_path / "r"
    args = ["--steps", "2048", "--checkpoint-seconds", "0"]
    monkeypatch.setattr(pgjax.core.files, "_fresh", _enospc("metrics.csv", 3))
    assert _train(tmp_path, *args) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "metrics.csv: the storage is full" in err and "--resume" in err, err
    assert inspect(root).state == "unfinished" and not list(root.rglob(".*.tmp"))
    monkeypatch.undo()
    Free = type("Usage", (), {"free": 0})
    monkeypatch.setattr(pgjax.loop.chunk_loop.shutil, "disk_usage", lambda p: Free)
    assert _train(tmp_path, *args, "--resume") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert "checkpoint: the storage is full" in err[-1] and len(err) <= 2, err
    assert inspect(root).state == "unfinished"
    monkeypatch.undo()
    assert _train(tmp_path, *args, "--resume") == 0 and is_finished(root)
    rows = [int(r["iteration"]) for r in read_rows(root / "runs" / "seed0")]
    assert rows == list(range(17))  # 2048 steps of 4 x 32: 16 updates and the start


def test_unwritable_outputs_and_overlong_paths_are_one_line(tmp_path, monkeypatch, capsys):
    import errno
    import os

    import pgjax.loop.runner

    long_out = tmp_path.joinpath(*["d" * 250] * 20)  # longer than any path may be
    monkeypatch.setattr(pgjax.loop.runner, "VmappedRuns", None)  # nothing may compile
    assert main(["train", "--env", "jax:cartpole", "--out", str(long_out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "too long" in err and "--out" in err, err
    monkeypatch.undo()

    def read_only(*a, **k):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), "/somewhere/x")

    monkeypatch.setitem(pgjax.cli.COMMANDS, "plot", read_only)  # the last-resort handler
    assert main(["plot", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "pgjax plot: error: cannot write /somewhere/x: the storage is read-only " \
                  "(Read-only file system); pass a writable --out", err


def test_hand_edited_or_foreign_manifests_are_one_line_never_used(tmp_path, capsys):
    """A run's manifest edited by hand (a seed or hyperparameter that is not a number, NaN,
    infinite, beyond float32, a run id that names another seed, a run's own config.json
    that disagrees) is damaged: one line for every reader, never read under a wrong
    label."""
    from pgjax.core.rundir import inspect

    assert _train(tmp_path, "--grid", "ppo.lr=1e-3,3e-4") == 0
    root = tmp_path / "r"
    edits = {"nan": ("hparams", float("nan")), "inf": ("hparams", float("inf")),
             "huge": ("hparams", 1e39), "text": ("hparams", "0.001"),
             "bool": ("hparams", True), "seed_text": ("seed", "0"), "seed_neg": ("seed", -1),
             "seed_big": ("seed", 2**40), "seed_other": ("seed", 7), "own": ("own", 5e-4)}
    for label, (what, value) in edits.items():
        copy = tmp_path / f"edited_{label}"
        shutil.copytree(root, copy)
        record = json.loads((copy / "config.json").read_text())
        run = record["runs"][0]
        if what == "hparams":
            run["hparams"]["ppo.lr"] = value
        elif what == "seed":
            run["seed"] = value
        else:  # the run's own config.json says another learning rate
            own = copy / "runs" / run["id"] / "config.json"
            own.write_text(json.dumps({"seed": run["seed"], "hparams": {"ppo.lr": value}}))
        if what != "own":
            (copy / "config.json").write_text(json.dumps(record))
        found = inspect(copy)
        assert found.state == "damaged", label
        for argv in (["plot", str(copy), "--reps", "20"], ["eval", str(copy)],
                     ["train", "--env", "jax:cartpole", "--out", str(tmp_path), "--name",
                      copy.name, "--resume"]):
            assert main(argv) == 2, (label, argv)
            err = capsys.readouterr().err.strip()
            assert len(err.splitlines()) == 1 and "damaged" in err or "does not match" in err,\
                (label, err)
            assert "Traceback" not in err


def test_a_checkpoint_from_another_run_is_never_restored(tmp_path, monkeypatch):
    """Two runs of one configuration but their seeds: the checkpoint (with its checksums)
    copied from one into the other is refused, by the run identity each checkpoint carries;
    a whole run directory copied elsewhere resumes from its own."""
    cfg = dataclasses.replace(SMALL, out=str(tmp_path))
    a = _cut(dataclasses.replace(cfg, name="a"), monkeypatch)
    b = _cut(dataclasses.replace(cfg, name="b", seed=1), monkeypatch)
    shutil.copytree(a, tmp_path / "a2")
    shutil.rmtree(b / "checkpoint")
    shutil.copytree(a / "checkpoint", b / "checkpoint")
    with pytest.raises(ConfigError, match="saved by another run"):
        run(dataclasses.replace(cfg, name="b", seed=1, resume=True))
    (tmp_path / "a2" / ".lock").unlink(missing_ok=True)
    run(dataclasses.replace(cfg, name="a2", resume=True))
    assert is_finished(tmp_path / "a2")


def test_run_ids_of_very_large_grids_stay_folder_names():
    """A grid that varies many options names each run by a folder name a file system takes
    (at most ID_BYTES), still one id per grid point, still ending in its seed."""
    from pgjax.loop.records import ID_BYTES

    varied = [f"rule.option_number_{i}" for i in range(40)]
    ids = set()
    for j in range(50):
        hp = {k: 1e-4 + 1e-9 * (i + j) for i, k in enumerate(varied)}
        rid = run_id(3, hp, varied)
        assert len(rid.encode()) <= ID_BYTES and rid.endswith("_seed3"), rid
        ids.add(rid)
    assert len(ids) == 50
    assert run_id(0, {"ppo.lr": 1e-4}, ["ppo.lr"]) == "lr=0.0001_seed0"  # short: unchanged
    # the longest run name's place in .trash is a folder name too, and is emptied
    from pgjax.loop.records import empty_trash, trash_dir

    root = Path(__import__("tempfile").mkdtemp()) / ("n" * 255)
    aside = trash_dir(root)
    assert len(aside.name.encode()) <= 255
    aside.mkdir(parents=True)
    empty_trash(root)
    assert not aside.exists()
    shutil.rmtree(root.parent)


def test_records_a_kill_left_halfway_to_or_from_trash_are_put_back(tmp_path):
    """SIGKILL cannot be deferred: a set-aside (or a restore) cut short leaves the records
    split between the run directory and its journaled entry in .trash; the next claim puts
    them back together in the run directory, before it looks at what the directory holds.
    Entries set aside whole stay where they are."""
    from pgjax.loop.records import MOVING, claim

    assert _train(tmp_path, name="done") == 0
    root = tmp_path / "r"
    shutil.copytree(tmp_path / "done", root)
    (root / ".lock").unlink(missing_ok=True)
    before = _snapshot(root)
    aside = tmp_path / ".trash" / "r-20260101-000000"
    aside.mkdir(parents=True)
    for name in ("config.json", "runs", "summary.csv"):  # moved before the kill
        (root / name).rename(aside / name)
    (aside / MOVING).write_text("")
    whole = tmp_path / ".trash" / "r-20260101-000001"  # an older run, set aside whole
    whole.mkdir()
    (whole / "config.json").write_text("{}")
    cfg = __import__("pgjax").TrainConfig(env="jax:cartpole", out=str(tmp_path), name="r",
                                          resume=True)
    held = claim(cfg)
    held.release()
    assert _snapshot(root) == before and is_finished(root)
    assert not aside.exists() and (whole / "config.json").exists()


@pytest.mark.slow
def test_two_sweep_processes_with_other_settings_never_mix(tmp_path):
    """Two real `pgjax sweep` processes started at once on one folder, with different --set
    values: one trains, the other is refused in one line (exit 2); every group holds the
    first one's settings."""
    import subprocess
    import sys

    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(out=tmp_path).replace('algos = ["ppo"]', 'algos = ["ppo", "trpo"]'))
    procs = [subprocess.Popen([sys.executable, "-m", "pgjax.cli", "sweep", str(f), "--set", s],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in ("gamma=0.9", "gamma=0.95")]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    refused = outs[[p.returncode for p in procs].index(2)][1].strip()
    assert len(refused.splitlines()) == 1 and "other settings" in refused, refused
    gammas = {json.loads(c.read_text())["config"]["gamma"]
              for c in (tmp_path / "s").glob("*/config.json")}
    assert len(gammas) == 1 and len(list((tmp_path / "s").glob("*/status.json"))) == 2


@pytest.mark.slow
def test_sigterm_stops_training_with_143_and_the_run_resumes(tmp_path):
    import signal
    import subprocess
    import sys

    argv = [sys.executable, "-m", "pgjax.cli", "train", "--env", "jax:cartpole", "--steps",
            "40960", "--num-envs", "4", "--rollout-len", "32", "--eval-every", "20",
            "--eval-envs", "2", "--checkpoint-seconds", "0", "--out", str(tmp_path),
            "--name", "r"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:  # the first progress line: training has started
        if line.startswith("  steps"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143 and "terminated" in err and "Traceback" not in err, err
    from pgjax.core.rundir import inspect

    assert inspect(tmp_path / "r").state == "unfinished"
    done = subprocess.run(argv + ["--resume", "--quiet"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and is_finished(tmp_path / "r"), done.stderr


def test_a_finish_marker_the_rows_do_not_bear_out_is_never_read_as_finished(tmp_path,
                                                                          capsys):
    """status.json written by hand (or copied) over a run whose metrics stop early: the run
    is unfinished to every reader, with the reason, and plot leaves it out."""
    import gzip

    from pgjax.core.rundir import inspect

    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    assert inspect(root).state == "finished"
    packed = next((root / "runs").iterdir()) / "metrics.csv.gz"
    lines = gzip.decompress(packed.read_bytes()).decode().splitlines(keepends=True)
    packed.write_bytes(gzip.compress("".join(lines[:-1]).encode()))
    found = inspect(root)
    assert found.state == "unfinished" and "says finished" in found.reason, found
    capsys.readouterr()
    assert main(["plot", str(root), "--out", str(tmp_path / "p")]) == 2
    assert "says finished" in capsys.readouterr().err
