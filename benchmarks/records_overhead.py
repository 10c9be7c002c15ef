"""What record keeping costs a run: the host time spent writing records (metrics rows,
parameters, progress lines, sinks: ``pgjax.loop.chunk_loop._record``), saving checkpoints
(``Checkpoints.save``) and finishing (``RunRecords.finish``: summary, curve, status), as a
fraction of the run's wall time, measured inside one ``pgjax train`` run.

    python benchmarks/records_overhead.py                       # brax:hopper, 204,800 steps
    python benchmarks/records_overhead.py --env jax:cartpole --steps 102400

The functions are timed where they are called, so the ratio holds however busy the machine
is (both the numerator and the denominator are measured in the same process). Run it from two
checkouts to compare them side by side. Writes ``benchmarks/results/records_overhead.json``
unless ``--no-write``.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path


def measure(env: str, steps: int, seeds: int, checkpoint_seconds: float) -> dict:
    import pgjax.loop.checkpoint
    import pgjax.loop.chunk_loop
    import pgjax.loop.records
    import pgjax.loop.runner
    from pgjax import TrainConfig

    spent = {"record": 0.0, "checkpoint": 0.0, "finish": 0.0}

    def timed(owner, name, key):
        real = getattr(owner, name)

        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t

        setattr(owner, name, wrapper)

    timed(pgjax.loop.chunk_loop, "_record", "record")
    timed(pgjax.loop.checkpoint.Checkpoints, "save", "checkpoint")
    timed(pgjax.loop.records.RunRecords, "finish", "finish")
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(env=env, steps=steps, seeds=seeds, out=out, name="r", quiet=True,
                          checkpoint_seconds=checkpoint_seconds)
        t0 = time.perf_counter()
        pgjax.loop.runner.run(cfg)
        wall = time.perf_counter() - t0
        chunks = cfg.num_chunks
    total = sum(spent.values())
    return {"pgjax": str(Path(pgjax.loop.records.__file__).parent), "env": env, "steps": steps,
            "seeds": seeds, "chunks": chunks, "checkpoint_seconds": checkpoint_seconds,
            "wall_s": round(wall, 2), **{f"{k}_s": round(v, 3) for k, v in spent.items()},
            "records_fraction": round(total / wall, 5)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="brax:hopper")
    p.add_argument("--steps", type=int, default=204_800)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--checkpoint-seconds", type=float, default=120.0,
                   help="pgjax's default; 0 checkpoints after every chunk (the worst case)")
    p.add_argument("--no-write", action="store_true")
    a = p.parse_args()
    result = measure(a.env, a.steps, a.seeds, a.checkpoint_seconds)
    print(json.dumps(result, indent=1))
    if not a.no_write:
        path = Path(__file__).parent / "results" / "records_overhead.json"
        path.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
