"""How the readers of recorded results scale: ``pgjax plot`` over many run directories, a
run directory's finish over a large grid, and a sweep's bookkeeping over many groups.

The records are made here, without training, in the layout ``pgjax train`` writes
(``RunRecords.create``: config.json and each run's config.json; metrics rows with the
columns of a default ``jax:cartpole`` PPO run of 20 updates, 8 envs x 32 steps, one held-out
evaluation at the end), with returns drawn per run. Each measured command runs in a fresh
process, against the pgjax found on ``--pgjax`` (a checkout's root: the code before a
change, e.g. a ``git worktree``; several are measured in turn on the same records), or
this checkout's.

    python benchmarks/readers.py plot --dirs 5 10 25 50 100
    python benchmarks/readers.py finish --grid 1000 10000
    python benchmarks/readers.py sweep --groups 1000 10000
    git worktree add /tmp/before HEAD       # the code before a change, measured beside it:
    python benchmarks/readers.py plot --dirs 5 10 --pgjax /tmp/before .

Every command prints one line per size and checkout and, with ``--out``, appends its
figures to a JSON file.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
ENV = "jax:cartpole"
SMALL = dict(env=ENV, steps=4096, num_envs=8, rollout_len=32, quiet=True)  # 20 updates
# the columns of a default PPO run's metrics.csv (jax:cartpole, --diagnostics cheap)
UPDATE_COLUMNS = ["approx_kl", "clip_frac", "episodes", "explained_variance", "grad_norm",
                  "grad_steps", "lr", "nonfinite_params", "obs_mean_drift", "obs_std_drift",
                  "pg_loss", "return_scale", "train_length", "train_return", "v_loss"]
EVAL_COLUMNS = ["eval_return", "eval_return_std", "eval_length"]


def _metrics_text(cfg, rng, level: float) -> str:
    """A run's metrics.csv: row 0 before training, then one row per update; the held-out
    evaluations after the chunks ``cfg.eval_chunks`` names; training returns rising to
    about ``level``."""
    n = cfg.num_iterations
    evals = {c * cfg.eval_every for c in cfg.eval_chunks}
    header = ["iteration", "env_steps", "wall_time_s"] + EVAL_COLUMNS + UPDATE_COLUMNS
    lines = [",".join(header)]
    for it in range(n + 1):
        row = [str(it), str(it * cfg.batch_size), f"{5.8 + 0.8 * it:.3f}"]
        ret = level * it / n + rng.normal(0, 10)
        row += [f"{max(ret, 8.0):.4f}", f"{abs(rng.normal(20, 5)):.4f}", f"{max(ret, 8.0):.1f}"] \
            if it in evals else ["", "", ""]
        if it == 0:
            row += [""] * len(UPDATE_COLUMNS)
        else:
            vals = rng.normal(0, 1, len(UPDATE_COLUMNS))
            vals[UPDATE_COLUMNS.index("train_return")] = max(ret, 8.0)
            vals[UPDATE_COLUMNS.index("episodes")] = rng.integers(1, 20)
            row += [f"{v:.6g}" for v in vals]
        lines.append(",".join(row))
    return "\n".join(lines) + "\n"


def small(out: Path, name: str, **options):
    """The config of a small run: ``SMALL`` with ``options``, in ``out/name``."""
    from pgjax.training.config import TrainConfig

    return TrainConfig(**{**SMALL, **options}, out=str(out), name=name)


def make_run_dir(cfg, rng, finish: bool = True) -> Path:
    """The run directory of ``cfg`` as ``pgjax train`` leaves it (``finish``: compressed
    metrics and ``status.json``, no figure; else its plain metrics.csv, as before
    ``RunRecords.finish``)."""
    from pgjax.loop.records import RunRecords, atomic_write_json
    from pgjax.core.rundir import pack_metrics

    (Path(cfg.out) / cfg.name).mkdir(parents=True, exist_ok=True)
    records = RunRecords.create(cfg, cfg.runs())
    for d in records.run_dirs:
        (d / "metrics.csv").write_text(_metrics_text(cfg, rng, rng.uniform(100, 500)))
        if finish:
            pack_metrics(d)
    if finish:
        atomic_write_json(records.root / "status.json", {"status": "finished",
                                                         "failed_runs": {}})
    return records.root


def _run(code: str, pgjax: Path, timeout: float) -> tuple[float | None, str]:
    """Seconds ``code`` takes in a fresh process with checkout ``pgjax`` first on the path
    (None: it ran past ``timeout``), and its stderr's last line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(pgjax)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))}
    t = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return None, "timed out"
    wall = time.perf_counter() - t
    if p.returncode:
        raise SystemExit(f"failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return wall, (p.stderr.strip().splitlines() or [""])[-1]


def _seconds(wall, a) -> str:
    return f"over {a.timeout:.0f} s" if wall is None else f"{wall:.1f} s"


def bench_plot(a, work: Path) -> list[dict]:
    """``pgjax plot`` (default options: 2,000 resamples) over the first n of max(dirs)
    run directories of ``--seeds`` seeds each, wall time of the whole command."""
    rng = np.random.default_rng(0)
    pool = work / "plot_pool"
    names = [f"tiny{i:03d}" for i in range(max(a.dirs))]
    for i, name in enumerate(names):
        make_run_dir(small(pool, name, seeds=a.seeds, seed=a.seeds * i, evals=a.evals), rng)
    out = []
    for n in a.dirs:
        dirs = [str(pool / name) for name in names[:n]]
        for k, pgjax in enumerate(a.pgjax):
            figures = work / f"figures_{n}_{k}"
            code = ("import sys; from pgjax.tools.plotting import plot_main; "
                    f"sys.exit(plot_main({dirs!r} + ['--out', {str(figures)!r}]))")
            wall, _ = _run(code, pgjax, a.timeout)
            out.append({"bench": "plot", "dirs": n, "runs": n * a.seeds, "wall_s": wall,
                        "pgjax": str(pgjax)})
            print(f"{pgjax}: pgjax plot, {n} run directories ({n * a.seeds} runs): "
                  f"{_seconds(wall, a)}", flush=True)
    return out


def bench_finish(a, work: Path) -> list[dict]:
    """``RunRecords.finish`` (compress the metrics, summary.csv, curve.png, status.json) of
    one run directory whose ``[grid]`` has n points (one seed each): what a sweep group
    does between its last chunk and its entry in sweep.json. Each checkout finishes its
    own copy of the same records."""
    rng = np.random.default_rng(1)
    out = []
    for n in a.grid:
        lrs = ",".join(repr(float(x)) for x in np.geomspace(1e-5, 1e-2, n))
        source = make_run_dir(small(work / f"finish_{n}", "ppo_jax-cartpole", seeds=1,
                                    grid=(f"ppo.lr={lrs}",)), rng, finish=False)
        for pgjax in a.pgjax:
            root = work / f"finishing_{n}" / source.name
            shutil.rmtree(root.parent, ignore_errors=True)
            shutil.copytree(source, root)
            code = ("import time, sys; from pgjax.loop.records import RunRecords; "
                    f"r = RunRecords.read({str(root)!r}); t = time.perf_counter(); "
                    "r.finish(); print(f'finish {time.perf_counter() - t:.2f}', "
                    "file=sys.stderr)")
            wall, line = _run(code, pgjax, a.timeout)
            inner = float(line.split()[-1]) if wall is not None else None
            out.append({"bench": "finish", "grid_points": n, "finish_s": inner,
                        "wall_s": wall, "pgjax": str(pgjax)})
            print(f"{pgjax}: finish of a {n}-point grid: {_seconds(inner, a)} (process "
                  f"{_seconds(wall, a)})", flush=True)
    return out


# the sweep's configs are built as ``pgjax sweep`` builds them but not checked (``train.check``
# builds each group's policy: 86 ms a group here, linear, and not the bookkeeping measured)
NO_CHECK = "import pgjax.training.train; pgjax.training.train.check = lambda cfgs: None; "


def bench_sweep(a, work: Path) -> list[dict]:
    """``Sweep.run`` on a sweep whose n groups (one ``[static]`` seed each) have all finished
    and whose sweep.json is gone: each group's settings checked, found finished and
    entered into the rebuilt sweep.json; the sweep's own bookkeeping, nothing to train."""
    rng = np.random.default_rng(2)
    out = []
    for n in a.groups:
        folder = work / f"sweep_{n}"
        spec = folder / "many.toml"
        folder.mkdir()
        spec.write_text(f'name = "many"\nout = "{folder}"\nalgos = ["ppo"]\nenvs = ["{ENV}"]\n'
                        f"seeds = 1\n[config]\nsteps = 4096\nnum_envs = 8\nrollout_len = 32\n"
                        f"quiet = true\n[static]\nseed = {list(range(n))}\n")
        exec(NO_CHECK)
        from pgjax.tools.sweep import Sweep

        sweep = Sweep.from_file(spec)
        for cfg in sweep.groups.values():
            make_run_dir(cfg, rng)
        for pgjax in a.pgjax:
            for p in sweep.root.iterdir():  # the sweep's own files: none yet
                if p.is_file():
                    p.unlink()
            code = (NO_CHECK + "import sys, time; from pgjax.tools.sweep import Sweep; "
                    f"s = Sweep.from_file({str(spec)!r}); t = time.perf_counter(); "
                    "s.run(log=lambda *a: None); "
                    "print(f'run {time.perf_counter() - t:.2f}', file=sys.stderr)")
            wall, line = _run(code, pgjax, a.timeout)
            inner = float(line.split()[-1]) if wall is not None else None
            done = json.loads((sweep.root / "sweep.json").read_text()) \
                if wall is not None else {}
            out.append({"bench": "sweep", "groups": n, "run_s": inner, "wall_s": wall,
                        "entries": len(done.get("groups", {})), "pgjax": str(pgjax)})
            print(f"{pgjax}: Sweep.run, {n} finished groups, sweep.json rebuilt: "
                  f"{_seconds(inner, a)} ({len(done.get('groups', {}))} entries)", flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("plot", "finish", "sweep"))
    p.add_argument("--dirs", type=int, nargs="+", default=[5, 10, 25, 50, 100])
    p.add_argument("--seeds", type=int, default=3, help="runs per run directory (plot)")
    p.add_argument("--evals", type=int, default=1, help="held-out evaluations per run (plot)")
    p.add_argument("--grid", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--groups", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--pgjax", type=Path, nargs="+", default=[REPO],
                   help="the checkouts whose pgjax the measured commands import, each in "
                        "turn on the same records (default: this one)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per command")
    p.add_argument("--out", type=Path, default=None, help="append the figures to this JSON")
    p.add_argument("--keep", type=Path, default=None,
                   help="make the records in this folder and keep them")
    a = p.parse_args(argv)
    a.pgjax = [c.resolve() for c in a.pgjax]
    work = Path(tempfile.mkdtemp(prefix="pgjax-readers-")) if a.keep is None else a.keep
    work.mkdir(parents=True, exist_ok=True)
    try:
        rows = {"plot": bench_plot, "finish": bench_finish, "sweep": bench_sweep}[a.what](a, work)
    finally:
        if a.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    if a.out is not None:
        old = json.loads(a.out.read_text()) if a.out.exists() else []
        a.out.write_text(json.dumps(old + rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
