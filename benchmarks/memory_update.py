"""Wall-clock per update: stateful policy gradient (S2PG) against BPTT at several history
lengths, measured side by side in one process.

Both train PPO (same epochs, minibatches, widths) on the same batch shape (num_envs x
rollout_len); the BPTT policy backpropagates through sequences of ``H`` steps (``--bptt-len
H``), S2PG never backpropagates through time, so its update does not depend on H. Timed: the
whole update step after the rollout (batch construction, GAE, all epochs), compiled first,
best of ``--repeats`` calls. The rollout is timed separately.

    python benchmarks/memory_update.py --env brax:hopper --observe positions
"""
from __future__ import annotations

import argparse
import json
import time

import jax

from pgjax import TrainConfig
from pgjax.algos import PPOConfig
from pgjax.loop.runner import stack_hparams
from pgjax.training.train import make_trainer


def _best(fn, repeats):
    jax.block_until_ready(fn())  # compile and warm up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t)
    return min(times)


def measure(policy: str, a, history: int) -> dict:
    cfg = TrainConfig(env=a.env, observe=a.observe, policy=policy, num_envs=a.num_envs,
                      rollout_len=a.rollout_len, quiet=True,
                      ppo=PPOConfig(minibatches=a.minibatches, epochs=a.epochs)).with_options(
        {"recurrent": {"bptt_len": history, "carry_size": a.carry_size},
         "stateful": {"z_dim": a.z_dim}}.get(policy, {}))
    trainer = make_trainer(cfg)
    hp = {k: v[0] for k, v in stack_hparams(cfg.runs()).items()}
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0), hp)
    key = jax.random.PRNGKey(1)
    collect = jax.jit(lambda s: trainer.collect(s, key))
    t_roll = _best(lambda: collect(state), a.repeats)
    end, traj = collect(state)
    # the update from the carry the rollout started from (BPTT recomputes the rollout)
    update = jax.jit(lambda s, tr: trainer.learn(s.replace(rollout=end), tr, key, hp,
                                                 s.rollout.carry))
    t_update = _best(lambda: update(state, traj), a.repeats)
    return {"policy": policy, "history": history, "update_s": t_update, "rollout_s": t_roll}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="brax:hopper")
    p.add_argument("--observe", default="positions")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--rollout-len", type=int, default=128)
    p.add_argument("--histories", type=int, nargs="+", default=[8, 32, 128])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--minibatches", type=int, default=8)
    p.add_argument("--z-dim", type=int, default=32)
    p.add_argument("--carry-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    s2pg = measure("stateful", a, 0)
    print(json.dumps(s2pg), flush=True)
    for h in a.histories:
        bptt = measure("recurrent", a, h)
        print(json.dumps({**bptt, "s2pg_update_s": s2pg["update_s"],
                          "bptt_over_s2pg": bptt["update_s"] / s2pg["update_s"]}), flush=True)


if __name__ == "__main__":
    main()
