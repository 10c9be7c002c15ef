"""Where a trained InvertedDoublePendulum-v5 policy fails: fresh episodes per seed, how many
fall within the first steps after the reset, and where the reset's observations sit in the
seed's own observation statistics.

    pgjax train --env gym:InvertedDoublePendulum-v5 --preset mujoco --seeds 5 \
        --out /tmp/idp --name table_seeds           # the table's group again, with parameters
    python experiments/idp_starts.py /tmp/idp/table_seeds --episodes 200 \
        --out experiments/results/idp_starts

Per seed (``pgjax.load_policy``: the saved parameters and observation statistics), for the
stochastic policy (the evaluation's) and its mode: ``--episodes`` fresh episodes of the
Gymnasium task from seeds of their own, each run to its end or the time limit; the share that
lasts the whole episode, the share that falls within ``--early`` steps, and for the first
observation of every episode its largest normalised coordinate, ``max_i |(o_i - mean_i) /
std_i|`` (the policy's input is clipped at 10), compared between the starts that fall early
and those that survive. Also per seed: the observation statistics' std per coordinate next to
the spread of the reset observations themselves.

Writes ``starts.csv`` (one row per seed and policy) and ``obs_std.csv`` (per seed and
coordinate), and prints the table as markdown.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def episodes(policy, n: int, seed: int, stochastic: bool, limit: int = 1000):
    """(lengths [n], first observations [n, obs]) of n episodes of the policy's Gymnasium
    task, one per environment of a sync vector env reset with seeds seed..seed+n-1."""
    import gymnasium as gym
    import jax

    env_id, kw = policy.cfg.env.split(":", 1)[1], policy.cfg.gym.make_kwargs()
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(env_id, max_episode_steps=limit, **kw)] * n,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    obs, _ = venv.reset(seed=list(range(seed, seed + n)))
    first = np.asarray(obs, np.float32).copy()
    alive = np.ones(n, bool)
    length = np.zeros(n, int)
    key = jax.random.PRNGKey(seed)
    low, high = venv.single_action_space.low, venv.single_action_space.high
    for t in range(limit):
        key, k = jax.random.split(key)
        a, _ = policy.act(obs, k) if stochastic else policy.mode(obs)  # memoryless policies
        obs, _, term, trunc, _ = venv.step(np.clip(np.asarray(a), low, high))  # as pgjax steps
        length += alive
        alive &= ~(np.asarray(term) | np.asarray(trunc))
        if not alive.any():
            break
    venv.close()
    return length, first


def normalised(policy, obs: np.ndarray) -> np.ndarray:
    """The observations as the policy sees them (the saved statistics, unclipped)."""
    stats = policy.obs_stats
    mean, var = np.asarray(stats.mean), np.asarray(stats.var)
    return (obs - mean) / np.sqrt(var + 1e-8)


def seed_rows(root: Path, run: str, n: int, early: int):
    from pgjax import load_policy

    policy = load_policy(root, run)
    if policy.cfg.policy not in ("auto", "gaussian"):
        raise SystemExit(f"idp_starts.py: {root} trained a {policy.cfg.policy} policy; this "
                         f"script steps feedforward Gaussian policies only")
    rows = []
    for stochastic in (True, False):
        length, first = episodes(policy, n, 10_000, stochastic)
        z = np.abs(normalised(policy, first)).max(1)
        fell = length <= early
        rows.append({"run": run, "policy": "stochastic" if stochastic else "mode",
                     "episodes": n, "whole": float((length >= 1000).mean()),
                     f"fell_within_{early}": float(fell.mean()),
                     "median_length_of_falls": float(np.median(length[length < 1000]))
                     if (length < 1000).any() else np.nan,
                     "start_max_z_fell": float(np.median(z[fell])) if fell.any() else np.nan,
                     "start_max_z_survived": float(np.median(z[~fell])),
                     "starts_beyond_clip": float((z > 10).mean())})
    stats = policy.obs_stats  # ``first``: the n starts both policies ran from
    std = pd.DataFrame({"run": run, "coordinate": np.arange(first.shape[1]),
                        "stats_std": np.sqrt(np.asarray(stats.var)),
                        "reset_std": first.std(0), "stats_mean": np.asarray(stats.mean),
                        "reset_mean": first.mean(0)})
    return rows, std


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", help="a run directory trained on gym:InvertedDoublePendulum-v5 "
                                   "with its parameters (params.msgpack)")
    p.add_argument("--episodes", type=int, default=200)
    p.add_argument("--early", type=int, default=20,
                   help="an episode that ends within this many steps fell at its start")
    p.add_argument("--out", default="experiments/results/idp_starts")
    a = p.parse_args()
    root = Path(a.run_dir)
    runs = [r["id"] for r in json.loads((root / "config.json").read_text())["runs"]]
    rows, stds = [], []
    for run in runs:
        r, s = seed_rows(root, run, a.episodes, a.early)
        rows += r
        stds.append(s)
        print(pd.DataFrame(r).to_string(index=False), flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "starts.csv", index=False)
    pd.concat(stds).to_csv(out / "obs_std.csv", index=False)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.3g}"))


if __name__ == "__main__":
    main()
