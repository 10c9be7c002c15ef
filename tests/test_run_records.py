"""Run records that are never lost or mislabelled: a finished run stays finished, a replaced
run is set aside until its successor finishes, every distinct value gets its own record, and
Ctrl-C is one line."""
from __future__ import annotations

import json
import shutil

import pgjax.cli
from pgjax.cli import main
from pgjax.records import exact, is_finished, run_id


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


def test_overwrite_sets_the_old_run_aside_until_the_new_one_finishes(tmp_path, monkeypatch):
    assert _train(tmp_path) == 0
    root = tmp_path / "r"
    old_metrics = (root / "runs" / "seed0" / "metrics.csv").read_bytes()
    import pgjax.runner

    def crash(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pgjax.runner, "_train_chunks", crash)
    assert _train(tmp_path, "--overwrite", "--ppo.lr", "1e-3") == 130
    kept = list((tmp_path / ".trash").glob("r-*/runs/seed0/metrics.csv"))
    assert len(kept) == 1 and kept[0].read_bytes() == old_metrics
    monkeypatch.undo()
    assert _train(tmp_path, "--overwrite", "--ppo.lr", "1e-3") == 0
    assert is_finished(root) and not (tmp_path / ".trash").exists()


def test_distinct_grid_values_never_share_a_run_directory(tmp_path):
    assert exact(1e-4) == "0.0001" and exact(3e-4) == "0.0003" and exact(0.2) == "0.2"
    assert exact(1.000001e-4) != exact(1e-4)
    assert float(exact(1.000001e-4)) == 1.000001e-4
    hp = [{"ppo.lr": 1e-4}, {"ppo.lr": 1.000001e-4}]
    assert len({run_id(0, h, ["ppo.lr"]) for h in hp}) == 2
    assert _train(tmp_path, "--grid", "ppo.lr=1e-4,1.000001e-4") == 0
    runs = json.loads((tmp_path / "r" / "config.json").read_text())["runs"]
    assert len({r["id"] for r in runs}) == 2
    assert all((tmp_path / "r" / "runs" / r["id"] / "metrics.csv").exists() for r in runs)


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
