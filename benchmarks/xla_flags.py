"""Compile and run time of small training programs under XLA's CPU flags: the defaults (users'
runs and the learning tests), backend optimisation level 0, and level 0 with the loop emitters
in place of the fusion emitters (the fast test subset's flags, tests/conftest.py), and the
loop emitters alone at the default level (a candidate for users' runs). Each
setting runs in its own process with no compilation cache; the settings alternate over
``--repeats`` rounds and the table reports the best of each.

    python benchmarks/xla_flags.py
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

SETTINGS = {
    "defaults": "",
    "level 0": "--xla_backend_optimization_level=0",
    "level 0, loop emitters": ("--xla_backend_optimization_level=0 "
                               "--xla_cpu_use_fusion_emitters=false"),
    "loop emitters": "--xla_cpu_use_fusion_emitters=false",  # at the default level
}
# programs of the fast subset's size: 8 envs x 32 steps, two vmapped seeds
PROGRAMS = [("jax:cartpole", "ppo"), ("jax:cartpole", "trpo"),
            ("brax:inverted_pendulum", "ppo"), ("matrix:climbing", "ppo")]


def measure() -> dict:
    """In a child process: per program, compile seconds (init and chunk) and the best of three
    calls of the compiled chunk."""
    import jax

    from pgjax import TrainConfig, Trainer
    from pgjax.loop.runner import run_keys, stack_hparams

    out = {}
    for env, algo in PROGRAMS:
        cfg = TrainConfig(env=env, algo=algo, num_envs=8, rollout_len=32, eval_every=4,
                          eval_envs=2, quiet=True, steps=4096)
        trainer = Trainer(cfg)
        runs = [(s, cfg.base_hparams()) for s in range(2)]
        keys, _ = run_keys(runs)
        hps = stack_hparams(runs)
        t = time.perf_counter()
        init = jax.jit(jax.vmap(trainer.init)).lower(keys, hps).compile()
        state = init(keys, hps)
        chunk = jax.jit(jax.vmap(trainer.chunk)).lower(state, hps).compile()
        compile_s = time.perf_counter() - t
        calls = []
        for _ in range(3):
            t = time.perf_counter()
            state, m = chunk(state, hps)
            jax.block_until_ready(m)
            calls.append(time.perf_counter() - t)
        out[f"{env} {algo}"] = {"compile_s": compile_s, "chunk_s": min(calls)}
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure()))
        return
    best: dict = {}
    for _ in range(a.repeats):
        for name, flags in SETTINGS.items():
            env = {**os.environ, "XLA_FLAGS": flags, "PGJAX_COMPILE_CACHE": "off"}
            res = json.loads(subprocess.run([sys.executable, __file__, "--child"], env=env,
                                            check=True, capture_output=True,
                                            text=True).stdout.splitlines()[-1])
            for prog, r in res.items():
                b = best.setdefault(prog, {}).setdefault(name, dict(r))
                for k, v in r.items():
                    b[k] = min(b[k], v)
    print("| program | " + " | ".join(f"compile, {n} (s)" for n in SETTINGS) + " | "
          + " | ".join(f"chunk, {n} (ms)" for n in SETTINGS) + " |")
    print("|---|" + "---:|" * (2 * len(SETTINGS)))
    for prog, r in best.items():
        print(f"| {prog} | " + " | ".join(f"{r[n]['compile_s']:.2f}" for n in SETTINGS) + " | "
              + " | ".join(f"{1e3 * r[n]['chunk_s']:.1f}" for n in SETTINGS) + " |")
    totals = {n: sum(r[n]["compile_s"] for r in best.values()) for n in SETTINGS}
    print("compile, all programs: " + ", ".join(f"{n} {v:.1f} s" for n, v in totals.items()))


if __name__ == "__main__":
    main()
