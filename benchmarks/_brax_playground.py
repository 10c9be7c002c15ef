"""Brax's own PPO trainer on a MuJoCo Playground DM Control task, as Playground's
``learning/train_jax_ppo.py`` runs it (``dm_control_suite_params.brax_ppo_config``, the
environment wrapped by ``wrap_for_brax_training``, Brax's default PPO networks), with the
sizes scaled as pgjax's DM Control sweep scales them; run by ``benchmarks/vs_brax.py
--playground`` inside ``benchmarks/.venv-brax``. Prints one JSON line."""
from __future__ import annotations

import argparse
import json
import time

t_launch = time.time()

import jax  # noqa: E402
from brax.training.agents.ppo import train as ppo  # noqa: E402
from mujoco_playground import registry, wrapper  # noqa: E402
from mujoco_playground.config import dm_control_suite_params  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--task", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--num-envs", type=int, required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--num-evals", type=int, required=True)
    p.add_argument("--eval-envs", type=int, required=True)
    p.add_argument("--resets-per-eval", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    cfg = dm_control_suite_params.brax_ppo_config(a.task, impl="jax")
    cfg.num_timesteps, cfg.num_envs, cfg.batch_size = a.steps, a.num_envs, a.batch_size
    cfg.num_evals, cfg.num_resets_per_eval = a.num_evals, a.resets_per_eval
    settings = cfg.to_dict()
    points, t0 = [], time.time()

    def progress(step, metrics):
        points.append({"env_steps": int(step), "time_s": time.time() - t0,
                       "eval_return": float(metrics.get("eval/episode_reward", float("nan")))})

    load = lambda: registry.load(a.task, config_overrides={"impl": "jax"})  # MJX's JAX one
    ppo.train(environment=load(), eval_env=load(),
              wrap_env_fn=wrapper.wrap_for_brax_training, num_eval_envs=a.eval_envs,
              progress_fn=progress, seed=a.seed, **settings)
    print(json.dumps({"side": "brax", "task": a.task, "seed": a.seed, "jax": jax.__version__,
                      "settings": settings, "points": points,
                      "whole_s": time.time() - t_launch}))


if __name__ == "__main__":
    main()
