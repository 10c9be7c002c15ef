"""A stateful property test of run records: random sequences of train, resume, overwrite, a
kill at a random chunk, Ctrl-C, damage to a random record file, a sweep with changed
settings, plot and eval, on tiny runs, with the invariants checked after every step:

- every command exits 0, 2, 3 or 130 and never prints a traceback;
- a finished run's metrics and parameters never change, except by a successful
  ``--overwrite`` (or by the test's own damage to them);
- a finished run directory's records match its manifest (config.json): every run has a
  metrics row for every iteration, or a failure recorded;
- nothing is lost: a run replaced by ``--overwrite`` is set aside until its successor has
  finished.

CI runs a bounded number of examples; ``PGJAX_PROPERTY_EXAMPLES=<n>`` runs more.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pgjax.runner
from pgjax.cli import main
from pgjax.rundir import inspect, read_rows

EXAMPLES = int(os.environ.get("PGJAX_PROPERTY_EXAMPLES", "3"))
STEPS = int(os.environ.get("PGJAX_PROPERTY_STEPS", "8"))
# 4 chunks of 2 updates: 8 iterations, checkpoints after every chunk
BASE = ["--env", "jax:cartpole", "--num-envs", "4", "--rollout-len", "32", "--eval-every", "2",
        "--eval-envs", "2", "--steps", "1024", "--checkpoint-seconds", "0", "--quiet"]
EXIT_CODES = {0, 2, 3, 130}
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
        self.finished = None  # the results of the finished run, while it is finished
        self.damaged = False  # the test damaged a record since the last good state

    def teardown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _argv(self, lr: str, *flags: str) -> list[str]:
        return ["train", *BASE, "--ppo.lr", lr, "--out", str(self.tmp), "--name", "r", *flags]

    def _after(self, code: int, err: str, overwrite: bool = False) -> None:
        assert code in EXIT_CODES, (code, err)
        assert "Traceback" not in err, err
        if code == 0 and overwrite:
            self.finished, self.damaged = None, False
        state = inspect(self.root).state
        if state == "finished":
            if self.finished is None:
                self.finished = _kept(self.root)
        elif code == 0 and not self.damaged:  # a command that succeeded leaves it finished
            raise AssertionError(f"exit 0 but {self.root} is {state}: {err}")

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]),
          mode=st.sampled_from(["plain", "resume", "overwrite"]))
    def train(self, lr, mode):
        flags = {"plain": [], "resume": ["--resume"], "overwrite": ["--overwrite"]}[mode]
        code, err = _call(self._argv(lr, *flags))
        self._after(code, err, overwrite=mode == "overwrite")
        if code == 0:
            self.damaged = False

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]), chunks=st.integers(0, 3),
          how=st.sampled_from(["kill", "ctrl-c"]), overwrite=st.booleans())
    def interrupted(self, lr, chunks, how, overwrite):
        """A process stopped after ``chunks`` chunks: killed (the host loop dies at once) or
        Ctrl-C (one line, exit 130)."""
        real, calls = pgjax.runner.VmappedRuns, [0]

        class Stopping(real):
            def chunk(self, *a, **k):
                calls[0] += 1
                if calls[0] > chunks:  # 4 chunks (no step-0 evaluation): always unfinished
                    raise (Kill if how == "kill" else KeyboardInterrupt)
                return super().chunk(*a, **k)

        pgjax.runner.VmappedRuns = Stopping
        try:
            flags = ["--overwrite"] if overwrite else ["--resume"]
            try:
                code, err = _call(self._argv(lr, *flags))
            except Kill:
                code, err = None, ""
        finally:
            pgjax.runner.VmappedRuns = real
        if code is not None:
            assert code in EXIT_CODES and "Traceback" not in err, (code, err)
        if overwrite and code != 2:  # it replaced the finished run (set aside in .trash)
            if self.finished is not None:
                assert any((self.tmp / ".trash").glob("r-*/runs/seed0/metrics.csv*"))
            self.finished = None

    @precondition(lambda self: self.root.exists())
    @rule(which=st.sampled_from(RECORDS), how=st.sampled_from(["delete", "truncate", "garbage"]))
    def damage(self, which, how):
        paths = sorted(p for p in self.root.glob(which) if p.is_file())
        if not paths:
            return
        path = paths[len(paths) // 2]
        if path.name in ("metrics.csv", "metrics.csv.gz", "params.msgpack") and \
                self.finished is not None:
            self.finished = None  # the test changed the results itself
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        else:
            path.write_bytes(b"\x00garbage{,\n")
        self.damaged = True

    @rule(lr=st.sampled_from(["3e-4", "1e-3"]))
    def sweep(self, lr):
        """A sweep over the same directory layout, rerun with possibly changed settings."""
        f = self.tmp / "s.toml"
        f.write_text(f'algos = ["ppo"]\nenvs = ["jax:cartpole"]\nout = "{self.tmp}"\n'
                     f'[config]\nsteps = 512\nnum_envs = 4\nrollout_len = 32\neval_every = 2\n'
                     f'eval_envs = 2\nquiet = true\n"ppo.lr" = {lr}\n')
        code, err = _call(["sweep", str(f)])
        assert code in EXIT_CODES and "Traceback" not in err, (code, err)

    @precondition(lambda self: self.root.exists())
    @rule(command=st.sampled_from(["plot", "eval"]))
    def read(self, command):
        argv = ["plot", str(self.root), "--reps", "20", "--out", str(self.tmp / "plots")] \
            if command == "plot" else ["eval", str(self.root), "--episodes", "2", "--out",
                                       str(self.tmp / "eval.csv")]
        code, err = _call(argv)
        assert code in EXIT_CODES and "Traceback" not in err, (code, err)

    @invariant()
    def finished_results_never_change(self):
        if self.finished is not None:
            assert self.damaged or inspect(self.root).state == "finished"
            assert _kept(self.root) == self.finished

    @invariant()
    def finished_records_match_their_manifest(self):
        if self.damaged or inspect(self.root).state != "finished":
            return
        record = json.loads((self.root / "config.json").read_text())
        for r in record["runs"]:
            d = self.root / "runs" / r["id"]
            if (d / "status.json").exists():
                continue
            rows = read_rows(d)
            assert [int(float(x["iteration"])) for x in rows] == list(range(ITERATIONS + 1))


@pytest.mark.timeout(900)
def test_run_records_never_lose_or_lie():
    RunRecordsMachine.TestCase.settings = settings(
        max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None,
        derandomize="PGJAX_PROPERTY_EXAMPLES" not in os.environ,
        suppress_health_check=list(HealthCheck))
    RunRecordsMachine.TestCase().runTest()
