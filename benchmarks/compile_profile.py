"""Where pgjax's compile time goes: each jitted entry point of a training run (init,
evaluate, training chunk, and the chunk with the evaluation inside that ``pgjax train`` runs)
lowered and compiled separately, the chunk batched over a run axis
of one (``vmap``, as several vmapped seeds compile) and unbatched (what a single run
compiles), and the unbatched chunk again with parts removed (the per-rollout reset-pool
refresh, i.e. ``--reset-pool fixed``; the update rule), on one environment.

    python benchmarks/compile_profile.py --env brax:hopper
"""
from __future__ import annotations

import argparse
import json
import time

import dataclasses

import jax
import jax.numpy as jnp

from pgjax import TrainConfig, Trainer
from pgjax.algos import PPOConfig


def timed_compile(fn, *args):
    t = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t_lower = time.perf_counter() - t
    t = time.perf_counter()
    lowered.compile()
    return t_lower, time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="brax:hopper")
    p.add_argument("--backend", default="generalized")
    p.add_argument("--num-envs", type=int, default=64)
    a = p.parse_args()
    cfg = TrainConfig(env=a.env, num_envs=a.num_envs, rollout_len=32,
                      eval_every=4, quiet=True,
                      ppo=PPOConfig(minibatches=32, epochs=10, anneal_lr=False)).with_options(
        {"brax.backend": a.backend})
    hp = cfg.base_hparams()
    key = jax.random.PRNGKey(0)
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init)(key, hp)
    rows = {}
    rows["init"] = timed_compile(trainer.init, key, hp)
    rows["evaluate"] = timed_compile(trainer.evaluate, state, key)
    lead = lambda t: jax.tree.map(lambda x: jnp.asarray(x)[None], t)
    rows["chunk, vmapped over one run"] = timed_compile(jax.vmap(trainer.chunk), lead(state),
                                                        lead(hp))
    rows["chunk"] = timed_compile(trainer.chunk, state, hp)
    # what pgjax train compiles: the chunk with the evaluation (and an eval-only switch) in it
    rows["chunk with evaluation (the host loop's program)"] = timed_compile(
        trainer.chunk_evaluated, state, hp, key, jnp.asarray(True), jnp.asarray(True))
    fixed = Trainer(dataclasses.replace(cfg, reset_pool="fixed"))
    rows["chunk without reset-pool refresh"] = timed_compile(fixed.chunk, state, hp)
    no_update = Trainer(cfg)
    no_update.algo = no_update.algo._replace(
        update=lambda p, s, b, k, h, prog: (p, s, {"x": b.advantage.sum()}))
    rows["chunk without the update rule"] = timed_compile(no_update.chunk, state, hp)
    for name, (lower, comp) in rows.items():
        print(json.dumps({"part": name, "trace_lower_s": round(lower, 2),
                          "compile_s": round(comp, 2)}), flush=True)


if __name__ == "__main__":
    main()
