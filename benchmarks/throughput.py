"""Environment-stepping ceiling vs PPO training throughput, measured side by side in one run.

For each environment: (1) raw stepping — uniform random actions through the same pgjax env
(vmap over N envs, autoreset, time limit) inside ``lax.scan``; (2) PPO training — rollout,
GAE and the full update (epochs x minibatches), env steps per second including updates.
Both are compiled first and timed on steady-state chunks; the ratio is (2) / (1).

    python benchmarks/throughput.py --envs brax:ant brax:hopper --num-envs 64
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import jax
import jax.numpy as jnp

from pgjax import TrainConfig, Trainer, make_env
from pgjax.envs import BraxOptions
from pgjax.algos import PPOConfig


def raw_stepping(env_id, num_envs, length, iters, chunks, backend=None, options=None,
                 refresh=True):
    """Random actions; the reset pool is refreshed once per ``length`` steps, as in training
    (``refresh=False``: never, as with ``--reset-pool fixed``). ``options``: the family's
    settings (default: ``BraxOptions(backend)`` when a backend is given, else the family's
    defaults)."""
    if options is None and backend is not None:
        options = BraxOptions(backend)
    env = make_env(env_id, num_envs, 1000, options)
    spec = env.spec

    def sample(key):
        if spec.action.kind == "box":
            return jax.random.uniform(key, (num_envs, spec.action.n), minval=-1, maxval=1)
        return jax.random.randint(key, (num_envs,), 0, spec.action.n)

    def step(c, _):
        state, key, acc = c
        key, k = jax.random.split(key)
        state, ts = env.step(state, sample(k))
        return (state, key, acc + ts.reward.sum() + ts.obs.sum()), None

    def rollout(c, _):
        c = (env.refresh(c[0]),) + c[1:] if refresh else c
        return jax.lax.scan(step, c, None, length=length)[0], None

    chunk = jax.jit(lambda c: jax.lax.scan(rollout, c, None, length=iters)[0])
    # reset under jit, so the carry has the same committed placement as chunk outputs
    # (otherwise the first timed call would compile again)
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    carry = (state, jax.random.PRNGKey(1), jnp.float32(0))
    t = time.perf_counter()
    carry = jax.block_until_ready(chunk(carry))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(chunks):
        carry = chunk(carry)
    jax.block_until_ready(carry)
    return num_envs * length * iters * chunks / (time.perf_counter() - t), compile_s


def ppo_training(env_id, num_envs, length, iters, chunks, backend, ppo, seeds=1):
    """PPO env steps per second (all seeds together); ``seeds`` > 1 vmaps that many runs."""
    cfg = TrainConfig(env=env_id, num_envs=num_envs, rollout_len=length,
                      eval_every=iters, steps=num_envs * length * iters * (chunks + 1),
                      ppo=ppo).with_options({"brax.backend": backend})
    trainer = Trainer(cfg)
    hp = cfg.base_hparams()
    init, chunk = trainer.init, trainer.chunk
    key = jax.random.PRNGKey(0)
    if seeds > 1:
        init, chunk = jax.vmap(init, (0, None)), jax.vmap(chunk, (0, None))
        key = jax.random.split(key, seeds)
    init, chunk = jax.jit(init), jax.jit(chunk, donate_argnums=0)
    state = jax.block_until_ready(init(key, hp))
    t = time.perf_counter()
    state, _ = jax.block_until_ready(chunk(state, hp))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(chunks):
        state, m = chunk(state, hp)
    jax.block_until_ready(state)
    return seeds * num_envs * length * iters * chunks / (time.perf_counter() - t), compile_s


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["brax:ant", "brax:hopper"])
    p.add_argument("--backend", default="generalized")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rollout-len", type=int, default=32)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--minibatches", type=int, default=32)
    p.add_argument("--iters", type=int, default=4, help="PPO iterations per timed chunk")
    p.add_argument("--chunks", type=int, default=3, help="timed chunks after the compile chunk")
    p.add_argument("--seeds", type=int, default=1,
                   help="PPO runs vmapped in one program (the raw ceiling steps seeds x "
                        "num-envs environments)")
    p.add_argument("--json", default=None,
                   help="also write the results to this file (after each environment)")
    a = p.parse_args()
    ppo = PPOConfig(epochs=a.epochs, minibatches=a.minibatches)
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}), "
          f"{platform.processor() or platform.machine()}, jax {jax.__version__}")
    print(f"settings: num_envs {a.num_envs}, seeds {a.seeds}, rollout {a.rollout_len}, "
          f"epochs {a.epochs}, minibatches {a.minibatches}, backend {a.backend}")
    results = []
    for env_id in a.envs:
        raw, raw_c = raw_stepping(env_id, a.num_envs * a.seeds, a.rollout_len, a.iters,
                                  a.chunks, a.backend)
        train, train_c = ppo_training(env_id, a.num_envs, a.rollout_len, a.iters, a.chunks,
                                      a.backend, ppo, a.seeds)
        r = {"env": env_id, "num_envs": a.num_envs, "seeds": a.seeds, "raw_steps_per_s": raw,
             "ppo_steps_per_s": train, "ratio": train / raw, "raw_compile_s": raw_c,
             "ppo_compile_s": train_c}
        results.append(r)
        print(f"{env_id:24s} raw {raw:>10,.0f} steps/s | PPO {train:>10,.0f} steps/s | "
              f"ratio {train / raw:.3f} | compile raw {raw_c:.1f}s, PPO {train_c:.1f}s", flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "device": str(jax.devices()[0]),
                           "device_kind": jax.devices()[0].device_kind, "jax": jax.__version__,
                           "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
