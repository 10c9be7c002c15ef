"""Brax's own PPO trainer at given settings; run by ``benchmarks/vs_brax.py`` inside its own
virtual environment (Brax's trainer needs an older JAX). Prints one JSON line."""
from __future__ import annotations

import argparse
import functools
import json
import resource
import time

import flax.linen as nn
import jax
from brax import envs
from brax.training.agents.ppo import networks as ppo_networks
from brax.training.agents.ppo import train as ppo


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--env", required=True)
    p.add_argument("--backend", default="generalized")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--unroll", type=int, default=32)
    p.add_argument("--minibatches", type=int, default=32)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--hidden", type=int, nargs="+", default=[64, 64])
    p.add_argument("--num-evals", type=int, default=6)
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    start = time.time()
    env = envs.get_environment(a.env, backend=a.backend)
    # one minibatch = batch_size trajectories of `unroll` steps; batch_size * minibatches
    # trajectories per update = one unroll of every env, as in pgjax
    if a.num_envs % a.minibatches:
        raise SystemExit("num_envs must be divisible by minibatches for this mapping")
    batch_size = a.num_envs // a.minibatches
    net = functools.partial(ppo_networks.make_ppo_networks,
                            policy_hidden_layer_sizes=tuple(a.hidden),
                            value_hidden_layer_sizes=tuple(a.hidden), activation=nn.tanh)
    points, t0 = [], time.time()  # t0 - start: building the env and networks

    def progress(step, metrics):
        points.append({"env_steps": int(step), "time_s": time.time() - t0,
                       "eval_return": float(metrics.get("eval/episode_reward", float("nan"))),
                       "sps": float(metrics.get("training/sps", float("nan"))),
                       "training_walltime": float(metrics.get("training/walltime", float("nan")))})

    ppo.train(environment=env, num_timesteps=a.steps, num_envs=a.num_envs, episode_length=1000,
              learning_rate=3e-4, entropy_cost=0.0, discounting=0.99, unroll_length=a.unroll,
              batch_size=batch_size, num_minibatches=a.minibatches,
              num_updates_per_batch=a.epochs, normalize_observations=True, reward_scaling=1.0,
              clipping_epsilon=0.2, gae_lambda=0.95, max_grad_norm=0.5,
              network_factory=net, seed=a.seed,
              num_evals=a.num_evals, num_eval_envs=a.eval_envs, deterministic_eval=True,
              progress_fn=progress)
    print(json.dumps({"side": "brax", "env": a.env, "jax": jax.__version__, "points": points,
                      "t0_after_imports_s": t0 - start,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


if __name__ == "__main__":
    main()
