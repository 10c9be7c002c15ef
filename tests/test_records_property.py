"""A stateful property test of run records: random sequences of train, resume, overwrite, a
kill at a random chunk, Ctrl-C, SIGTERM, damage to a random record file, foreign edits of
the records (hand-edited manifests, a checkpoint from another run), the run directory moved
and resumed under another name, a sweep with changed settings, plot and eval, and real
concurrent processes (a second writer or a reader beside a training process, which may be
sent SIGTERM or SIGKILL at a random moment), on tiny runs, with the invariants checked after
every step:

- every command exits 0, 2, 3, 130 or 143 (a process killed: by its signal) and never
  prints a traceback;
- a finished run's metrics and parameters never change, except by a successful
  ``--overwrite`` (or by the test's own damage to them);
- a finished run directory's records match its manifest (config.json): every run has a
  metrics row for every iteration, or a failure recorded;
- nothing is lost: the finished run is always whole in the run directory or, while an
  ``--overwrite`` that has not succeeded is replacing it, in ``.trash``; a command that
  exits 0 leaves the run finished.

CI runs a bounded number of examples; ``PGJAX_PROPERTY_EXAMPLES=<n>`` runs more, and
``PGJAX_PROPERTY_STEPS=<n>`` longer sequences.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pgjax.loop.runner
from pgjax.cli import main
from pgjax.core.rundir import inspect, read_rows

EXAMPLES = int(os.environ.get("PGJAX_PROPERTY_EXAMPLES", "3"))
STEPS = int(os.environ.get("PGJAX_PROPERTY_STEPS", "8"))
# 4 chunks of 2 updates: 8 iterations, checkpoints after every chunk
BASE = ["--env", "jax:cartpole", "--num-envs", "4", "--rollout-len", "32", "--eval-every", "2",
        "--eval-envs", "2", "--steps", "1024", "--checkpoint-seconds", "0", "--quiet"]
EXIT_CODES = {0, 2, 3, 130, 143}
KILLED = {-signal.SIGKILL, -signal.SIGTERM}  # a process stopped before its handler was set
ITERATIONS = 8
RECORDS = ["config.json", "status.json", "runs/seed0/metrics.csv*", "runs/seed0/params.msgpack",
           "runs/seed0/config.json", "runs/seed0/status.json", "checkpoint/sha256.json",
           "checkpoint/*/*"]


class Kill(Exception):
    pass


def _call(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def _kept(root: Path) -> dict:
    """The bytes of a finished run's results (metrics and parameters)."""
    return {p.name: p.read_bytes() for p in (root / "runs" / "seed0").glob("*")
            if p.name in ("metrics.csv", "metrics.csv.gz", "params.msgpack")}


class RunRecordsMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pgjax-records-"))
        self.root = self.tmp / "r"
        self.finished = None  # the results of the finished run, which must never be lost
        self.damaged = False  # the test damaged a record since the last good state

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _argv(self, lr: str, *flags: str, name: str = "r") -> list[str]:
        return ["train", *BASE, "--ppo.lr", lr, "--out", str(self.tmp), "--name", name, *flags]

    def _held(self) -> bool:
        """Whether the finished results are whole in the run directory or in .trash."""
        places = [self.root] + sorted((self.tmp / ".trash").glob("r-*"))
        return any(_kept(p) == self.finished for p in places)

    def _after(self, code, err: str, replaced: bool = False) -> None:
        """After a train command: its exit, and what the model knows of the finished run
        (``replaced``: the command may have replaced it, --overwrite or a resume that
        completed an unfinished run)."""
        assert code in EXIT_CODES | KILLED, (code, err)
        assert "Traceback" not in err, err
        state = inspect(self.root).state if self.root.exists() else "new"
        if code == 0 and state != "finished" and not self.damaged:
            raise AssertionError(f"exit 0 but {self.root} is {state}: {err}")
        if state == "finished" and (self.finished is None or (code == 0 and replaced)):
            self.finished = _kept(self.root)
            if code == 0:
                self.damaged = False
        elif self.finished is not None and not self.damaged and state == "finished" \
                and not replaced:
            assert _kept(self.root) == self.finished

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]),
          mode=st.sampled_from(["plain", "resume", "overwrite"]))
    def train(self, lr, mode):
        flags = {"plain": [], "resume": ["--resume"], "overwrite": ["--overwrite"]}[mode]
        was = inspect(self.root).state if self.root.exists() else "new"
        code, err = _call(self._argv(lr, *flags))
        self._after(code, err, replaced=mode == "overwrite" or was != "finished")

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]), chunks=st.integers(0, 3),
          how=st.sampled_from(["kill", "ctrl-c", "sigterm"]), overwrite=st.booleans())
    def interrupted(self, lr, chunks, how, overwrite):
        """A process stopped after ``chunks`` chunks: its host loop raising (a crash),
        Ctrl-C (one line, exit 130) or a real SIGTERM (one line, exit 143)."""
        real, calls = pgjax.loop.runner.VmappedRuns, [0]

        class Stopping(real):
            def chunk(self, *a, **k):
                calls[0] += 1
                if calls[0] > chunks:  # 4 chunks (no step-0 evaluation): always unfinished
                    if how == "sigterm":
                        os.kill(os.getpid(), signal.SIGTERM)  # raised by pgjax's handler
                        time.sleep(1)
                    raise (Kill if how == "kill" else KeyboardInterrupt)
                return super().chunk(*a, **k)

        pgjax.loop.runner.VmappedRuns = Stopping
        try:
            flags = ["--overwrite"] if overwrite else ["--resume"]
            try:
                code, err = _call(self._argv(lr, *flags))
            except Kill:
                code, err = 130, ""  # what is left of a crash: checked as a stopped run
        finally:
            pgjax.loop.runner.VmappedRuns = real
        if how == "sigterm":  # stopped (or refused, or finished, before any chunk ran)
            assert code in (143, 0, 2, 3), (code, err)
        self._after(code, err)

    @precondition(lambda self: self.root.exists())
    @rule(which=st.sampled_from(RECORDS), how=st.sampled_from(["delete", "truncate", "garbage"]))
    def damage(self, which, how):
        paths = sorted(p for p in self.root.glob(which) if p.is_file())
        if not paths:
            return
        path = paths[len(paths) // 2]
        if path.name in ("metrics.csv", "metrics.csv.gz", "params.msgpack") and \
                self.finished is not None and _kept(self.root) == self.finished:
            self.finished = None  # the test changed the results itself
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        else:
            path.write_bytes(b"\x00garbage{,\n")
        self.damaged = True

    @precondition(lambda self: (self.root / "config.json").exists())
    @rule(edit=st.sampled_from(["nan", "text", "huge", "seed", "own", "checkpoint"]))
    def foreign_edit(self, edit):
        """A record edited by hand or brought from another run: well-formed JSON (or a
        checkpoint whose checksums agree) that says something pgjax never wrote."""
        try:
            record = json.loads((self.root / "config.json").read_text())
            run = record["runs"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            return  # damaged already
        if edit == "checkpoint":
            from pgjax.loop.checkpoint import DIGESTS, _digest

            steps = sorted(self.root.glob("checkpoint/[0-9]*/meta/metadata"))
            if not steps:
                return
            meta = json.loads(steps[-1].read_text())
            meta["run"] = "0" * 32  # saved by another run directory
            steps[-1].write_text(json.dumps(meta))
            step_dir = steps[-1].parent.parent
            digests_path = self.root / "checkpoint" / DIGESTS
            try:
                digests = json.loads(digests_path.read_text())
                digests[step_dir.name] = _digest(step_dir)
                digests_path.write_text(json.dumps(digests))
            except (OSError, ValueError, TypeError):
                pass
        elif edit == "own":
            own = self.root / "runs" / str(run.get("id")) / "config.json"
            if not own.exists():
                return
            own.write_text(json.dumps({"seed": 12345, "hparams": run.get("hparams")}))
        else:
            if edit == "seed":
                run["seed"] = "zero"
            else:
                run.setdefault("hparams", {})["ppo.lr"] = {"nan": float("nan"), "text": "1e-3",
                                                           "huge": 1e39}[edit]
            (self.root / "config.json").write_text(json.dumps(record))
        self.damaged = True

    @precondition(lambda self: self.root.exists())
    @rule(lr=st.sampled_from(["3e-4", "1e-3"]))
    def moved(self, lr):
        """The run directory moved elsewhere, resumed there under its new name, and moved
        back."""
        moved = self.tmp / "moved"
        was_finished = self.finished is not None and _kept(self.root) == self.finished
        self.root.rename(moved)
        try:
            code, err = _call(self._argv(lr, "--resume", name="moved"))
        finally:
            moved.rename(self.root)
        self._after(code, err, replaced=not was_finished)

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]))
    def sweep(self, lr):
        """A sweep over the same directory layout, rerun with possibly changed settings
        (refused with one line once the sweep has recorded other ones)."""
        f = self.tmp / "s.toml"
        f.write_text(f'algos = ["ppo"]\nenvs = ["jax:cartpole"]\nout = "{self.tmp}"\n'
                     f'[config]\nsteps = 512\nnum_envs = 4\nrollout_len = 32\neval_every = 2\n'
                     f'eval_envs = 2\nquiet = true\n"ppo.lr" = {lr}\n')
        code, err = _call(["sweep", str(f)])
        assert code in EXIT_CODES and "Traceback" not in err, (code, err)

    def _reader(self, command: str) -> list[str]:
        return ["plot", str(self.root), "--reps", "20", "--out", str(self.tmp / "plots")] \
            if command == "plot" else ["eval", str(self.root), "--episodes", "2", "--out",
                                       str(self.tmp / "eval.csv")]

    @precondition(lambda self: self.root.exists())
    @rule(command=st.sampled_from(["plot", "eval"]))
    def read(self, command):
        code, err = _call(self._reader(command))
        assert code in EXIT_CODES and "Traceback" not in err, (code, err)

    @rule(first=st.sampled_from(["resume", "overwrite"]),
          second=st.sampled_from(["resume", "overwrite", "plot"]),
          stop=st.sampled_from(["none", "sigterm", "sigkill"]), after=st.floats(0.5, 6.0))
    def processes(self, first, second, stop, after):
        """Two real `pgjax` processes at once on the run directory: a training one and a
        second writer (refused while the first holds it) or a reader; the first may be
        stopped by SIGTERM or SIGKILL at a random moment."""
        def start(argv):
            return subprocess.Popen([sys.executable, "-m", "pgjax.cli", *argv],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

        a = start(self._argv("3e-4", f"--{first}"))
        b = start(self._argv("1e-3", f"--{second}") if second != "plot"
                  else self._reader("plot"))
        if stop != "none":
            try:
                a.wait(timeout=after)
            except subprocess.TimeoutExpired:
                a.send_signal(signal.SIGTERM if stop == "sigterm" else signal.SIGKILL)
        errs = [p.communicate(timeout=600)[1].decode() for p in (a, b)]
        for p, err in zip((a, b), errs):
            assert p.returncode in EXIT_CODES | KILLED, (p.returncode, err)
            assert "Traceback" not in err, err
        codes = [a.returncode, b.returncode if second != "plot" else None]
        writers = [(c, f) for c, f in zip(codes, (first, second)) if c is not None]
        self._after(min((c for c, _ in writers), key=lambda c: c != 0), "\n".join(errs),
                    replaced=any(c == 0 for c, _ in writers))

    @invariant()
    def nothing_finished_is_lost(self):
        if self.finished is not None:
            assert self._held(), "the finished run is neither in its directory nor in .trash"

    @invariant()
    def finished_records_match_their_manifest(self):
        if self.damaged or not self.root.exists() or inspect(self.root).state != "finished":
            return
        record = json.loads((self.root / "config.json").read_text())
        for r in record["runs"]:
            d = self.root / "runs" / r["id"]
            if (d / "status.json").exists():
                continue
            rows = read_rows(d)
            assert [int(float(x["iteration"])) for x in rows] == list(range(ITERATIONS + 1))


@pytest.mark.timeout(1200)
def test_run_records_never_lose_or_lie():
    RunRecordsMachine.TestCase.settings = settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
        derandomize="PGJAX_PROPERTY_EXAMPLES" not in os.environ,
        suppress_health_check=list(HealthCheck))
    RunRecordsMachine.TestCase().runTest()
