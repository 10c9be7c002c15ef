"""Run directories: what a run leaves behind, written so that a crash loses nothing finished.

    <out>/<name>/
        config.json              resolved configuration, runs, package versions
        runs/<run_id>/config.json   the run's seed and traced hyperparameters
        runs/<run_id>/metrics.csv   one row per iteration (eval columns filled after each chunk)
        runs/<run_id>/params.msgpack  latest parameters and normaliser statistics
        summary.csv, curve.png   written when training finishes

Metrics rows are appended and flushed after every chunk; parameters are replaced atomically.
"""
from __future__ import annotations

import csv
import json
import os
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
from flax import serialization

EVAL_KEYS = ("eval_return", "eval_return_std", "eval_length")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=str) + "\n").encode())


def run_id(seed: int, hp: dict, varied: list[str]) -> str:
    parts = [f"{k.split('.')[-1]}={hp[k]:g}" for k in varied]
    return "_".join(parts + [f"seed{seed}"])


def _versions() -> dict:
    out = {}
    for pkg in ("pgjax", "jax", "jaxlib", "flax", "optax", "chex", "brax", "gymnasium"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


@dataclass
class RunRecords:
    root: Path
    run_dirs: list
    columns: list | None = None
    pending_initial: list | None = None  # eval-only rows written with the first chunk

    @classmethod
    def create(cls, cfg, runs) -> "RunRecords":
        name = cfg.name or f"{cfg.algo}_{cfg.env.replace(':', '-')}_{time.strftime('%Y%m%d-%H%M%S')}"
        root = Path(cfg.out) / name
        (root / "runs").mkdir(parents=True, exist_ok=True)
        grid = cfg.parse_grid()
        varied = [k for k in grid if len(grid[k]) > 1]
        run_dirs = []
        for seed, hp in runs:
            d = root / "runs" / run_id(seed, hp, varied)
            d.mkdir(parents=True, exist_ok=True)
            atomic_write_json(d / "config.json", {"seed": seed, "hparams": hp})
            (d / "metrics.csv").unlink(missing_ok=True)
            run_dirs.append(d)
        atomic_write_json(root / "config.json", {
            "config": cfg.to_dict(), "grid": grid, "num_iterations": cfg.num_iterations,
            "env_steps_per_run": cfg.num_iterations * cfg.batch_size,
            "runs": [{"id": d.name, "seed": s, "hparams": hp} for d, (s, hp) in zip(run_dirs, runs)],
            "versions": _versions()})
        return cls(root=root, run_dirs=run_dirs)

    def _append(self, rows_per_run: list[list[dict]]) -> None:
        for d, rows in zip(self.run_dirs, rows_per_run):
            path = d / "metrics.csv"
            if self.columns is None:
                self.columns = list(rows[0].keys())
            new = not path.exists()
            with open(path, "a", newline="") as f:
                w = csv.DictWriter(f, fieldnames=self.columns)
                if new:
                    w.writeheader()
                w.writerows(rows)
                f.flush()
                os.fsync(f.fileno())

    def write_eval(self, iteration: int, env_steps: int, wall: float, ev: dict) -> None:
        """The evaluation before training: a row with only eval columns, written together with
        the first chunk (whose rows fix the CSV's columns)."""
        self.pending_initial = [{"iteration": iteration, "env_steps": env_steps,
                                  "wall_time_s": round(wall, 3),
                                  **{k: float(ev[k][r]) for k in EVAL_KEYS}}
                                 for r in range(len(self.run_dirs))]

    def write_chunk(self, first_iter: int, steps_per_iter: int, wall: float, metrics: dict,
                    ev: dict) -> None:
        """metrics: {name: [R, I]}; ev: {name: [R]} measured after the chunk's last iteration.
        wall_time_s is the wall clock at the end of the chunk (one value per chunk)."""
        names = sorted(metrics)
        n_iter = np.asarray(metrics[names[0]]).shape[1]
        rows_per_run = []
        for r in range(len(self.run_dirs)):
            rows = []
            for i in range(n_iter):
                it = first_iter + i + 1
                row = {"iteration": it, "env_steps": it * steps_per_iter,
                       "wall_time_s": round(wall, 3)}
                for k in EVAL_KEYS:
                    row[k] = float(ev[k][r]) if i == n_iter - 1 else ""
                row.update({k: float(np.asarray(metrics[k])[r, i]) for k in names})
                rows.append(row)
            rows_per_run.append(rows)
        if self.pending_initial:
            cols = list(rows_per_run[0][0].keys())
            for r, first in enumerate(self.pending_initial):
                rows_per_run[r].insert(0, {c: first.get(c, "") for c in cols})
            self.pending_initial = None
        self._append(rows_per_run)

    def save_params(self, params, obs_stats) -> None:
        """params / obs_stats carry a leading run axis; one file per run."""
        import jax

        for r, d in enumerate(self.run_dirs):
            tree = {"params": jax.tree.map(lambda x: np.asarray(x[r]), params),
                    "obs_stats": jax.tree.map(lambda x: np.asarray(x[r]), obs_stats)}
            atomic_write_bytes(d / "params.msgpack", serialization.msgpack_serialize(
                serialization.to_state_dict(tree)))

    def finish(self) -> None:
        from pgjax.plots import plot_run, summarize

        summarize(self.root)
        plot_run(self.root)


def load_params(path) -> dict:
    """Read a ``params.msgpack`` written by a run: {"params": ..., "obs_stats": ...}."""
    return serialization.msgpack_restore(Path(path).read_bytes())
