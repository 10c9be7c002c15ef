"""Where a first ``pgjax train``'s compile time goes, for the settings given as ``pgjax train``
options (one run, so the unbatched programs, as ``pgjax train`` compiles them).

Each in a row, traced, lowered and compiled on their own, one after the other: the three
programs of the host loop (init, the training chunk, the evaluation); the chunk and the
evaluation in one program (``lax.cond`` on a traced flag, as the host loop ran them before
they were split); and the chunk without parts of it: the per-rollout reset-pool refresh
(``--reset-pool fixed``) and the update rule. Then, in a fresh process each, the path to
the first update both ways: one after the other (init traced and compiled, then the chunk)
and as ``pgjax train`` does it (``VmappedRuns.compile_ahead``: the chunk traced and compiled on
a thread of its own from the start, init meanwhile).

    python benchmarks/compile_profile.py --env brax:hopper --brax.backend positional \
        --num-envs 256 --rollout-len 20 --ppo.epochs 4 --ppo.minibatches 32 \
        --net.actor-hidden 256 256 --net.critic-hidden 256 256
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

ARGS_HELP = "pgjax train options (--env, --num-envs, ...); the defaults are pgjax's"


def _setup(args):
    from pgjax import Trainer
    from pgjax.cli import parse_train
    from pgjax.loop.vmapped import run_keys, stack_hparams

    cfg = dataclasses.replace(parse_train(args), seeds=1, grid=())
    runs = cfg.runs()
    keys, eval_keys = run_keys(runs)
    return cfg, Trainer(cfg), keys, stack_hparams(runs), eval_keys


def timed(fn, *args):
    t = time.perf_counter()
    lowered = jax.jit(fn).trace(*args).lower()
    t_lower = time.perf_counter() - t
    t = time.perf_counter()
    lowered.compile()
    return {"trace_lower_s": round(t_lower, 2), "compile_s": round(time.perf_counter() - t, 2)}


def programs(args) -> None:
    from pgjax import Trainer
    from pgjax.algos.common import Updated

    cfg, trainer, keys, hps, eval_keys = _setup(args)
    key, hp, ekey = keys[0], jax.tree.map(lambda x: x[0], hps), eval_keys[0]
    state = jax.eval_shape(trainer.init, key, hp)

    def chunk_and_evaluation(s, hp, key, evaluate):  # the former one program
        s, metrics = trainer.chunk(s, hp)
        skipped = {k: jnp.float32(jnp.nan) for k in trainer.eval_columns}
        return s, metrics, jax.lax.cond(evaluate, lambda s: trainer.evaluate(s, key),
                                        lambda s: skipped, s)

    fixed = Trainer(dataclasses.replace(cfg, reset_pool="fixed"))
    no_update = Trainer(cfg)
    no_update.algo = no_update.algo._replace(
        update=lambda p, s, b, k, h, prog: Updated(p, s, {"x": b.advantage.sum()}))
    rows = {"init": (trainer.init, key, hp), "chunk": (trainer.chunk, state, hp),
            "evaluation": (trainer.evaluate, state, ekey),
            "chunk and evaluation in one program": (chunk_and_evaluation, state, hp, ekey,
                                                    jnp.asarray(True)),
            "chunk without the reset-pool refresh": (fixed.chunk, state, hp),
            "chunk without the update rule": (no_update.chunk, state, hp)}
    for name, (fn, *inputs) in rows.items():
        print(json.dumps({"program": name, **timed(fn, *inputs)}), flush=True)


def first_update(args, ahead: bool) -> None:
    """Seconds from here to the first chunk's program compiled (and init run)."""
    from pgjax.loop.vmapped import VmappedRuns

    t0 = time.perf_counter()
    _, trainer, keys, hps, eval_keys = _setup(args)
    t_built = time.perf_counter() - t0
    fns = VmappedRuns(trainer)
    t = time.perf_counter()
    if ahead:
        fns.compile_ahead(keys, hps, eval_keys)
        state = fns.init(keys, hps)
        fns._ahead["chunk"].result()
    else:
        state = fns.init(keys, hps)
        fns._pick("chunk", 1).lower(state, hps).compile()
    jax.block_until_ready(state)
    print(json.dumps({"path": "compile_ahead" if ahead else "one after the other",
                      "trainer_built_s": round(t_built, 2),
                      "to_first_update_s": round(time.perf_counter() - t, 2)}), flush=True)


def main() -> None:
    argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        print(ARGS_HELP)
        return
    if argv[:1] == ["--first-update"]:
        first_update(argv[2:], argv[1] == "ahead")
        return
    programs(argv)
    for how in ("sequential", "ahead"):  # each in a fresh process: nothing traced yet
        out = subprocess.run([sys.executable, __file__, "--first-update", how, *argv],
                             capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(out.stderr.strip().splitlines()[-1])
        print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
