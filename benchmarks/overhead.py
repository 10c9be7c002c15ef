"""What a default ``pgjax train`` costs on top of the bare compiled training program.

For each environment and setting, back to back on the same machine:

1. **bare**: a fresh process that builds the ``Trainer`` and runs ``jit(Trainer.train)`` (``vmap``ped
   over the runs when there are several, as ``pgjax train`` does) for the same env steps and
   seeds (no evaluation, records or checkpoints), twice: its run time is the second, warm
   execution; its startup is the interpreter, imports, environment and compilation plus the
   first execution's excess over the second (as ``pgjax train``'s first chunk counts);
2. **pgjax train, first run**: the CLI at its defaults (evaluation, records, checkpoints,
   progress), with an empty compilation cache: whole-process time, and its training time
   (from the run's own metrics' wall clock: every chunk after the first timed as
   recorded, the first taken at the median of the others, so the compilation inside the
   first chunk counts as startup; plus the wrap-up after the last chunk: its checkpoint,
   summary, plot and ``status.json``); startup is the rest of the process;
3. **pgjax train, second run**: the identical command again with the cache the first run
   filled.

Prints and writes ``benchmarks/results/overhead.json``: training time / bare run time (the
overhead of evaluation, records and checkpoints; for the first and the second run), and
second startup / first startup.

    python benchmarks/overhead.py                                  # hopper and ant, both settings,
                                                                   # pgjax's default 500k steps
    python benchmarks/overhead.py --envs brax:hopper --settings default --steps 204800
    python benchmarks/overhead.py --envs brax:hopper --settings default --steps 204800 \
        --diagnostics full cheap                       # both programs with each, in turn
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# the larger setting of the measurement that motivated this benchmark
SETTINGS = {
    "default": [],
    "large": ["--brax.backend", "positional", "--num-envs", "256", "--rollout-len", "20",
              "--ppo.epochs", "4", "--ppo.minibatches", "32", "--net.actor-hidden", "256",
              "256", "--net.critic-hidden", "256", "256"],
}

BARE = r'''
import json, sys, time
t_launch = float(sys.argv[1])
from pgjax import TrainConfig, Trainer
from pgjax.cli import parse_train
import jax
cfg = parse_train(sys.argv[2:])
trainer = Trainer(cfg)
runs = cfg.runs()
from pgjax.loop.runner import run_keys, stack_hparams
keys, _ = run_keys(runs)
hps = stack_hparams(runs)
if len(runs) == 1:  # one run: the unbatched program, as pgjax train compiles it
    keys, hps = keys[0], jax.tree.map(lambda x: x[0], hps)
    train = jax.jit(trainer.train)
else:
    train = jax.jit(jax.vmap(trainer.train))
t = time.time()
compiled = train.lower(keys, hps).compile()
compile_s = time.time() - t
t_first = time.time()
jax.block_until_ready(compiled(keys, hps))  # first execution: warms up, as a first chunk does
first_s = time.time() - t_first
t = time.time()
jax.block_until_ready(compiled(keys, hps))
run_s = time.time() - t
# as for pgjax train: the first execution's excess over a warm one counts as startup
print(json.dumps({"startup_s": t_first - t_launch + first_s - run_s, "compile_s": compile_s,
                  "first_run_s": first_s, "run_s": run_s,
                  "env_steps": cfg.num_iterations * cfg.batch_size}))
'''


def _env(cache: Path) -> dict:
    return {**os.environ, "PGJAX_COMPILE_CACHE": str(cache)}


def bare(args: list[str], cache: Path) -> dict:
    t = time.time()
    p = subprocess.run([sys.executable, "-c", BARE, str(t), *args], capture_output=True,
                       text=True, env=_env(cache), cwd=ROOT)
    if p.returncode:
        raise SystemExit(f"bare program failed: {p.stderr.strip().splitlines()[-1]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {**r, "whole_s": time.time() - t}


def pgjax_train(args: list[str], cache: Path, out: Path, name: str) -> dict:
    t = time.time()
    p = subprocess.run([sys.executable, "-m", "pgjax.cli", "train", *args, "--out", str(out),
                        "--name", name, "--quiet"], capture_output=True, text=True,
                       env=_env(cache), cwd=ROOT)
    whole = time.time() - t
    if p.returncode:
        raise SystemExit(f"pgjax train failed: {p.stderr.strip().splitlines()[-1]}")

    root = out / name
    from pgjax.analysis.results import run_metrics

    run_dirs = sorted(p for p in (root / "runs").iterdir() if p.is_dir())
    m = run_metrics(run_dirs[0])
    cfg = json.loads((root / "config.json").read_text())["config"]
    ends = m[m["iteration"] % cfg["eval_every"] == 0]["wall_time_s"].to_numpy()  # row 0: init
    chunks = np.diff(ends)
    steady = float(np.median(chunks[1:])) if len(chunks) > 1 else float(chunks[0])
    # after the last chunk's records: its parameters, the last checkpoint, the summary and
    # plot, status.json (file times on this machine's clock)
    # (the last chunk's parameters are written right after its metrics, which the finish
    # then compresses)
    wrap_up = (root / "status.json").stat().st_mtime - min(
        (d / "params.msgpack").stat().st_mtime for d in run_dirs)
    training = steady + float(chunks[1:].sum()) + wrap_up
    return {"whole_s": whole, "training_s": training, "startup_s": whole - training,
            "chunk_s": steady, "chunks": int(len(chunks)), "wrap_up_s": wrap_up,
            "evaluated_rows": int(m["eval_return"].notna().sum())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["brax:hopper", "brax:ant"])
    p.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    p.add_argument("--steps", type=int, default=None,
                   help="env steps per run (default: pgjax train's own default)")
    p.add_argument("--diagnostics", nargs="+", default=[None], choices=["cheap", "full"],
                   help="--diagnostics of both programs, each in turn (default: pgjax's)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "overhead.json"))
    a = p.parse_args()
    results = []
    for env, setting, diagnostics in itertools.product(a.envs, a.settings, a.diagnostics):
        steps = ["--steps", str(a.steps)] if a.steps else []
        args = ["--env", env, *steps, *SETTINGS[setting],
                *(["--diagnostics", diagnostics] if diagnostics else [])]
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            b = bare(args, tmp / "cache-bare")
            first = pgjax_train(args, tmp / "cache", tmp / "runs", "first")
            second = pgjax_train(args, tmp / "cache", tmp / "runs", "second")
        row = {"env": env, "setting": setting, "diagnostics": diagnostics or "default",
               "args": args, "bare": b, "first": first,
               "second": second,
               "training_over_bare_run": first["training_s"] / b["run_s"],
               "second_training_over_bare_run": second["training_s"] / b["run_s"],
               "whole_over_bare_whole": first["whole_s"] / b["whole_s"],
               "second_startup_over_first": second["startup_s"] / first["startup_s"]}
        results.append(row)
        print(f"{env:14s} {setting:8s} {row['diagnostics']:7s} bare run {b['run_s']:7.1f} s (startup "
              f"{b['startup_s']:5.1f} s) | pgjax train training {first['training_s']:7.1f} s"
              f" = {row['training_over_bare_run']:.3f} x bare (second run "
              f"{row['second_training_over_bare_run']:.3f} x), startup "
              f"{first['startup_s']:5.1f} s, second run's startup {second['startup_s']:5.1f}"
              f" s ({row['second_startup_over_first']:.2f} x)", flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                       "cpus": os.cpu_count(), "results": results}, indent=1))
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
