"""Brax's own environment-stepping ceiling: uniform random actions through the environment
as Brax's PPO trainer wraps it (``brax.envs.training.wrap``: vmap, episode time limit,
autoreset to the first state) inside ``lax.scan``. Run by ``benchmarks/vs_brax.py`` inside
Brax's virtual environment. Prints one JSON line."""
from __future__ import annotations

import argparse
import json
import time

import jax
from brax import envs


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--env", required=True)
    p.add_argument("--backend", default="generalized")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--unroll", type=int, default=32)
    p.add_argument("--iters", type=int, default=8)
    p.add_argument("--chunks", type=int, default=3)
    a = p.parse_args()
    env = envs.training.wrap(envs.get_environment(a.env, backend=a.backend), episode_length=1000)

    def step(c, _):
        state, key, acc = c
        key, k = jax.random.split(key)
        act = jax.random.uniform(k, (a.num_envs, env.action_size), minval=-1, maxval=1)
        state = env.step(state, act)
        return (state, key, acc + state.reward.sum() + state.obs.sum()), None

    chunk = jax.jit(lambda c: jax.lax.scan(step, c, None, length=a.unroll * a.iters)[0])
    state = jax.jit(env.reset)(jax.random.split(jax.random.PRNGKey(0), a.num_envs))
    carry = (state, jax.random.PRNGKey(1), jax.numpy.float32(0))
    t = time.perf_counter()
    carry = jax.block_until_ready(chunk(carry))
    first_s = time.perf_counter() - t
    # a second untimed call: the carry built outside the chunk can differ from the chunk's
    # outputs in placement or weak types, and the first call on chunk outputs may compile again
    t = time.perf_counter()
    carry = jax.block_until_ready(chunk(carry))
    compile_s = first_s - (time.perf_counter() - t)
    t = time.perf_counter()
    for _ in range(a.chunks):
        carry = chunk(carry)
    jax.block_until_ready(carry)
    sps = a.num_envs * a.unroll * a.iters * a.chunks / (time.perf_counter() - t)
    print(json.dumps({"side": "brax_raw", "env": a.env, "steady_sps": sps,
                      "compile_s": compile_s, "jax": jax.__version__}))


if __name__ == "__main__":
    main()
