"""Environment-stepping ceiling vs PPO training throughput, measured side by side in one run.

For each environment: (1) raw stepping — uniform random actions through the same pgjax env
(vmap over N envs, autoreset, time limit) inside ``lax.scan``; (2) PPO training — rollout,
GAE and the full update (epochs x minibatches), env steps per second including updates.
Both are compiled first and timed on steady-state chunks; the ratio is (2) / (1).

    python benchmarks/throughput.py --envs brax:ant brax:hopper --num-envs 64
    python benchmarks/throughput.py --envs jaxmarl:SMAX-3m --preset jaxmarl-mappo

With ``--preset`` the training side takes the preset's settings (its envs and rollout
length too). For ``jaxmarl:`` ids a third figure is JaxMARL's own environment stepped the
same way (its ``step`` with its own auto-reset, vmapped, random available actions): the
ceiling without pgjax's environment wrapper.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time

import jax
import jax.numpy as jnp

from pgjax import TrainConfig, Trainer, make_env
from pgjax.envs import BraxOptions
from pgjax.algos import PPOConfig


def timed(chunk, carry, chunks: int, steps_per_chunk: int) -> tuple[float, float]:
    """(env steps per second over ``chunks`` calls of ``chunk`` after the first, the first
    call's seconds: its compilation)."""
    t = time.perf_counter()
    carry = jax.block_until_ready(chunk(carry))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(chunks):
        carry = chunk(carry)
    jax.block_until_ready(carry)
    return steps_per_chunk * chunks / (time.perf_counter() - t), compile_s


def raw_stepping(env_id, num_envs, length, iters, chunks, backend=None, options=None,
                 refresh=True):
    """Random actions; the reset pool is refreshed once per ``length`` steps, as in training
    (``refresh=False``: never, as with ``--reset-pool fixed``). ``options``: the family's
    settings (default: ``BraxOptions(backend)`` when a backend is given, else the family's
    defaults)."""
    if options is None and backend is not None:
        options = BraxOptions(backend)
    env = make_env(env_id, num_envs, None, options)  # the task's own time limit
    spec = env.spec

    part = getattr(env, "partition", None)
    agents = (part.n_agents,) if part is not None and spec.action.kind == "discrete" else ()

    def sample(key):
        if spec.action.kind == "box":
            return jax.random.uniform(key, (num_envs, spec.action.n), minval=-1, maxval=1)
        return jax.random.randint(key, (num_envs,) + agents, 0, spec.action.n)

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
    return timed(chunk, carry, chunks, num_envs * length * iters)


def native_stepping(env_id, num_envs, length, iters, chunks):
    """JaxMARL's own environment (``jaxmarl:`` ids): its ``step`` (auto-reset included) vmapped
    over ``num_envs``, uniformly random available actions, inside ``lax.scan``."""
    from pgjax.envs.functional import strong_types
    from pgjax.envs.jaxmarl_env import simulator

    env, _, _ = simulator(env_id.partition(":")[2])
    agents = env.agents
    avail = getattr(env, "get_avail_actions", None) if "SMAX" in env_id else None

    def act(key, st):
        keys = jax.random.split(key, len(agents))
        if avail is None:
            return {a: jax.random.randint(k, (), 0, env.action_space(a).n)
                    for a, k in zip(agents, keys)}
        ok = avail(st)
        return {a: jax.random.categorical(k, jnp.log(ok[a].astype(jnp.float32)))
                for a, k in zip(agents, keys)}

    def one(st, key):
        k_act, k_step = jax.random.split(key)
        obs, st, rew, done, _ = env.step(k_step, st, act(k_act, st))
        return st, rew[agents[0]] + sum(o.sum() for o in obs.values())

    def step(c, _):
        st, key, acc = c
        key, k = jax.random.split(key)
        st, r = jax.vmap(one)(st, jax.random.split(k, num_envs))
        return (st, key, acc + r.sum()), None

    chunk = jax.jit(lambda c: jax.lax.scan(step, c, None, length=length * iters)[0])
    _, st = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), num_envs))
    # JaxMARL's reset leaves Python scalars in its state (weakly typed) where its step
    # returns arrays: given their dtype here, so the timed calls do not compile again
    carry = (strong_types(st), jax.random.PRNGKey(1), jnp.float32(0))
    return timed(chunk, carry, chunks, num_envs * length * iters)


def preset_config(env_id, preset, iters, chunks) -> TrainConfig:
    """The training config of ``preset`` on ``env_id``, as long as the timed chunks."""
    cfg = TrainConfig(env=env_id).with_preset(preset)
    steps = cfg.num_envs * cfg.rollout_len * iters * (chunks + 1)
    return dataclasses.replace(cfg, eval_every=iters, steps=steps, anneal_steps=steps)


def ppo_training(env_id, num_envs, length, iters, chunks, backend, ppo, seeds=1, cfg=None):
    """PPO env steps per second (all seeds together); ``seeds`` > 1 vmaps that many runs;
    ``cfg``: the whole config instead (``preset_config``)."""
    if cfg is None:
        cfg = TrainConfig(env=env_id, num_envs=num_envs, rollout_len=length,
                          eval_every=iters, steps=num_envs * length * iters * (chunks + 1),
                          ppo=ppo).with_options({"brax.backend": backend})
    num_envs, length = cfg.num_envs, cfg.rollout_len
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
    p.add_argument("--preset", default=None,
                   help="train with this preset's settings (its envs and rollout length too)")
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
        cfg = preset_config(env_id, a.preset, a.iters, a.chunks) if a.preset else None
        n, length = (cfg.num_envs, cfg.rollout_len) if cfg else (a.num_envs, a.rollout_len)
        family = env_id.partition(":")[0]
        raw, raw_c = raw_stepping(env_id, n * a.seeds, length, a.iters, a.chunks,
                                  a.backend if family in ("brax", "mabrax") else None)
        train, train_c = ppo_training(env_id, n, length, a.iters, a.chunks, a.backend, ppo,
                                      a.seeds, cfg)
        r = {"env": env_id, "num_envs": n, "rollout_len": length, "seeds": a.seeds,
             "preset": a.preset, "raw_steps_per_s": raw, "ppo_steps_per_s": train,
             "ratio": train / raw, "raw_compile_s": raw_c, "ppo_compile_s": train_c}
        native = ""
        if family == "jaxmarl":
            nat, nat_c = native_stepping(env_id, n * a.seeds, length, a.iters, a.chunks)
            r.update(native_steps_per_s=nat, native_compile_s=nat_c)
            native = f" | JaxMARL's own {nat:>10,.0f} steps/s"
        results.append(r)
        print(f"{env_id:24s} raw {raw:>10,.0f} steps/s | PPO {train:>10,.0f} steps/s | "
              f"ratio {train / raw:.3f}{native} | compile raw {raw_c:.1f}s, PPO {train_c:.1f}s",
              flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"args": vars(a), "device": str(jax.devices()[0]),
                           "device_kind": jax.devices()[0].device_kind, "jax": jax.__version__,
                           "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
