"""Environment steps per second of every MuJoCo Playground DM Control task (``playground:``),
next to Brax's halfcheetah, on this machine: uniform random actions through the pgjax
environment (vmap over N envs, time limit, autoreset from the reset pool) inside one
compiled ``lax.scan``, as ``throughput.py`` measures raw stepping; compile time apart. Each
task's MuJoCo model sizes are recorded beside it (simulator substeps per control step,
degrees of freedom, geoms and explicit contact pairs), which is what its cost follows.

    python benchmarks/playground_dmc.py                       # every task, 64 envs
    python benchmarks/playground_dmc.py --tasks CartpoleBalance CheetahRun --num-envs 256
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import raw_stepping  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def model_sizes(task: str) -> dict:
    from pgjax.envs.playground_env import load

    env, _ = load(task)
    m = env.mj_model
    return {"substeps": env.n_substeps, "ctrl_dt": env.dt, "nv": int(m.nv),
            "ngeom": int(m.ngeom), "npair": int(m.npair)}


def main() -> None:
    from pgjax.envs.playground_env import task_names

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=None, help="default: every DM Control task")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--length", type=int, default=100, help="steps per compiled scan")
    p.add_argument("--chunks", type=int, default=2, help="timed scans after the first")
    p.add_argument("--fixed", action="store_true",
                   help="no reset-pool refresh between scans (--reset-pool fixed)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "playground_dmc.json"))
    a = p.parse_args()
    rows = []
    for env_id in ["brax:halfcheetah"] + [f"playground:{t}" for t in (a.tasks or task_names())]:
        t = time.time()
        sps, compile_s = raw_stepping(env_id, a.num_envs, a.length, 1, a.chunks,
                                      refresh=not a.fixed)
        row = {"env": env_id, "steps_per_s": sps, "compile_s": compile_s,
               "wall_s": time.time() - t}
        if env_id.startswith("playground:"):
            row.update(model_sizes(env_id.partition(":")[2]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                       "cpus": os.cpu_count(), "num_envs": a.num_envs,
                                       "reset_pool": "fixed" if a.fixed else "rollout",
                                       "length": a.length, "results": rows}, indent=1))
    print(f"written to {a.out}")


if __name__ == "__main__":
    main()
