"""PPO on Brax tasks: learning curves over seeds, records and a plot per task.

    python experiments/ppo_brax.py --envs brax:inverted_pendulum brax:hopper --seeds 4 \
        --steps 1000000 --out experiments/results

Each task is one compiled program with all seeds vmapped. Writes, per task, a run directory
(config, metrics CSVs, parameters, summary.csv, curve.png) under --out.
"""
from __future__ import annotations

import argparse

from pgjax import TrainConfig, run


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["brax:inverted_pendulum"])
    p.add_argument("--backend", default="generalized")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--out", default="experiments/results")
    a = p.parse_args()
    for env in a.envs:
        cfg = TrainConfig(env=env, seeds=a.seeds, steps=a.steps, out=a.out,
                          name=f"ppo_{env.replace(':', '-')}", resume=True).with_options(
            {"brax.backend": a.backend})
        rec = run(cfg)
        print((rec.root / "summary.csv").read_text())


if __name__ == "__main__":
    main()
