"""Gymnasium-path training throughput: pgjax against a plain hand-written host loop, side by
side in one run.

Both sides step the same Gymnasium vector environment (``SyncVectorEnv``, same-step
autoreset, the same number of envs) and train the same PPO (64x64 tanh actor and critic,
10 epochs x 32 minibatches, clipped surrogate and value loss, Adam with grad clipping,
observation normalisation, truncation bootstrapped from the final observation):

- **hand-written**: what one writes without a framework — numpy buffers and running
  statistics, one jitted act function per step (action, log-prob, value) and one jitted
  update (GAE plus the epochs and minibatches under ``lax.scan``);
- **pgjax**: the trainer's jitted iteration with one run, the Gymnasium steps called back
  from inside the compiled program (``pgjax.envs.gym_env``).

Each side is compiled and warmed up first, then timed over the same number of iterations;
the two are interleaved over ``--repeats`` rounds and the best round of each is reported.

    python benchmarks/gym_host_loop.py --envs gym:CartPole-v1 gym:Hopper-v5 --num-envs 8

``--ceiling`` measures instead, per task, the machine's ceiling and pgjax's training at a
preset's settings, side by side in one process:

- **Gymnasium's own vector envs** stepping the task with uniform random actions (drawn
  before the clock starts): ``SyncVectorEnv`` with the training's number of envs, and
  ``AsyncVectorEnv`` (a process per env) with each count of ``--async-envs``; the best of
  these is the ceiling;
- **pgjax training** (``--preset``, ``--seeds`` runs vmapped in one program, rollout,
  evaluation-free iterations including the full update) once per ``--vectorization``.

    python benchmarks/gym_host_loop.py --ceiling --preset mujoco --seeds 5 \
        --envs gym:Hopper-v5 gym:Humanoid-v5
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import platform
import time

import flax.linen as nn
import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import optax
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from pgjax import TrainConfig, Trainer
from pgjax.algos import PPOConfig
from pgjax.envs import GymOptions
from pgjax.loop.runner import run_keys, stack_hparams

EPOCHS, MINIBATCHES, CLIP, LR, GAMMA, LAM = 10, 32, 0.2, 3e-4, 0.99, 0.95


# --------------------------------------------------------------------------------------------
# A plain host loop: no pgjax
# --------------------------------------------------------------------------------------------
class Net(nn.Module):
    out: int

    @nn.compact
    def __call__(self, x):
        for _ in range(2):
            x = nn.tanh(nn.Dense(64)(x))
        return nn.Dense(self.out)(x)


class HandWritten:
    def __init__(self, env_id, num_envs, rollout_len, seed=0):
        make = functools.partial(gym.make, env_id, disable_env_checker=True)
        self.venv = SyncVectorEnv([make] * num_envs,
                                  autoreset_mode=AutoresetMode.SAME_STEP)
        space = self.venv.single_action_space
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.adim = int(space.n) if self.discrete else int(space.shape[0])
        if not self.discrete:
            self.low, self.high = space.low, space.high
        odim = int(np.prod(self.venv.single_observation_space.shape))
        self.T, self.N = rollout_len, num_envs
        self.actor, self.critic = Net(self.adim), Net(1)
        k1, k2, self.key = jax.random.split(jax.random.PRNGKey(seed), 3)
        dummy = jnp.zeros((1, odim))
        self.params = {"actor": self.actor.init(k1, dummy), "critic": self.critic.init(k2, dummy),
                       "log_std": jnp.zeros(self.adim)}
        self.opt = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(LR, eps=1e-5))
        self.opt_state = self.opt.init(self.params)
        self.mean, self.var, self.count = np.zeros(odim), np.ones(odim), 1e-4
        self.obs, _ = self.venv.reset(seed=seed)
        self.act = jax.jit(self._act)
        self.update = jax.jit(self._update, donate_argnums=(0, 1))

    def _logp(self, params, obs, action):
        out = self.actor.apply(params["actor"], obs)
        if self.discrete:
            return jnp.take_along_axis(jax.nn.log_softmax(out), action[..., None], -1)[..., 0]
        std = jnp.exp(params["log_std"])
        return jnp.sum(-0.5 * ((action - out) / std) ** 2 - params["log_std"]
                       - 0.5 * jnp.log(2 * jnp.pi), -1)

    def _act(self, params, obs, key):
        out = self.actor.apply(params["actor"], obs)
        if self.discrete:
            action = jax.random.categorical(key, out)
        else:
            action = out + jnp.exp(params["log_std"]) * jax.random.normal(key, out.shape)
        value = self.critic.apply(params["critic"], obs)[..., 0]
        return action, self._logp(params, obs, action), value

    def _update(self, params, opt_state, b, key):
        next_v = self.critic.apply(params["critic"], b["final_obs"])[..., 0]
        nonterm = 1.0 - b["term"]
        cont = 1.0 - jnp.maximum(b["term"], b["trunc"])
        delta = b["reward"] + GAMMA * nonterm * next_v - b["value"]

        def back(acc, x):
            d, c = x
            acc = d + GAMMA * LAM * c * acc
            return acc, acc

        _, adv = jax.lax.scan(back, jnp.zeros(self.N), (delta, cont), reverse=True)
        ret = adv + b["value"]
        flat = {k: v.reshape((-1,) + v.shape[2:]) for k, v in
                dict(obs=b["obs"], action=b["action"], logp=b["logp"], value=b["value"],
                     adv=adv, ret=ret).items()}
        n = flat["adv"].shape[0]

        def loss(p, mb):
            logp = self._logp(p, mb["obs"], mb["action"])
            ratio = jnp.exp(logp - mb["logp"])
            a = (mb["adv"] - mb["adv"].mean()) / (mb["adv"].std() + 1e-8)
            pg = -jnp.minimum(ratio * a, jnp.clip(ratio, 1 - CLIP, 1 + CLIP) * a).mean()
            v = self.critic.apply(p["critic"], mb["obs"])[..., 0]
            vc = mb["value"] + jnp.clip(v - mb["value"], -CLIP, CLIP)
            vl = 0.5 * jnp.maximum((v - mb["ret"]) ** 2, (vc - mb["ret"]) ** 2).mean()
            return pg + 0.5 * vl

        def epoch(c, k):
            perm = jax.random.permutation(k, n).reshape(MINIBATCHES, -1)

            def mb_step(c, idx):
                p, s = c
                g = jax.grad(loss)(p, jax.tree.map(lambda x: x[idx], flat))
                u, s = self.opt.update(g, s, p)
                return (optax.apply_updates(p, u), s), None

            return jax.lax.scan(mb_step, c, perm)[0], None

        (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state),
                                              jax.random.split(key, EPOCHS))
        return params, opt_state

    def _norm(self, x):
        return np.clip((x - self.mean) / np.sqrt(self.var + 1e-8), -10, 10).astype(np.float32)

    def iteration(self):
        T, N = self.T, self.N
        odim = self.obs.shape[1:]
        ash = () if self.discrete else (self.adim,)
        b = {"obs": np.empty((T, N) + odim, np.float32), "final_obs": np.empty((T, N) + odim, np.float32),
             "action": np.empty((T, N) + ash, np.int32 if self.discrete else np.float32),
             "logp": np.empty((T, N), np.float32), "value": np.empty((T, N), np.float32),
             "reward": np.empty((T, N), np.float32), "term": np.empty((T, N), np.float32),
             "trunc": np.empty((T, N), np.float32)}
        raw = np.empty((T, N) + odim)
        self.key, k_roll, k_up = jax.random.split(self.key, 3)
        for t in range(T):
            o = self._norm(self.obs)
            a, lp, v = self.act(self.params, o, jax.random.fold_in(k_roll, t))
            a = np.asarray(a)
            env_a = a if self.discrete else np.clip(a, self.low, self.high)
            nxt, r, term, trunc, info = self.venv.step(env_a)
            fin = nxt.copy()
            for i in np.flatnonzero(term | trunc):
                fin[i] = info["final_obs"][i]
            b["obs"][t], b["action"][t], b["logp"][t], b["value"][t] = o, a, lp, v
            b["reward"][t], b["term"][t], b["trunc"][t] = r, term, trunc & ~term
            b["final_obs"][t] = self._norm(fin)
            raw[t] = self.obs
            self.obs = nxt
        x = raw.reshape((-1,) + odim)  # running statistics update (parallel merge)
        m, v, c = x.mean(0), x.var(0), x.shape[0]
        d, tot = m - self.mean, self.count + c
        self.mean = self.mean + d * c / tot
        self.var = (self.var * self.count + v * c + d ** 2 * self.count * c / tot) / tot
        self.count = tot
        self.params, self.opt_state = self.update(self.params, self.opt_state, b, k_up)

    def block(self):
        jax.block_until_ready(self.params)


# --------------------------------------------------------------------------------------------
# pgjax: one jitted iteration, the environment stepped by callbacks inside it
# --------------------------------------------------------------------------------------------
class Pgjax:
    def __init__(self, env_id, num_envs, rollout_len):
        cfg = TrainConfig(env=env_id, num_envs=num_envs, rollout_len=rollout_len, steps=10**7,
                          quiet=True, ppo=PPOConfig(epochs=EPOCHS, minibatches=MINIBATCHES,
                                                    anneal_lr=False)).with_options(
            {"norm.normalize_reward": False})
        self.trainer = Trainer(cfg)
        runs = cfg.runs()
        self.hp = jax.tree.map(lambda x: x[0], stack_hparams(runs))
        self.state = jax.jit(self.trainer.init)(run_keys(runs)[0][0], self.hp)
        self._iteration = jax.jit(self.trainer.iteration, donate_argnums=0)

    def iteration(self):
        self.state, _ = self._iteration(self.state, self.hp)

    def block(self):
        jax.block_until_ready(self.state.params)


class PgjaxRuns:
    """pgjax's training iteration at a preset, ``seeds`` runs vmapped in one program, the
    Gymnasium steps called back from inside it."""

    def __init__(self, env_id, preset, seeds, vectorization, workers=0):
        cfg = TrainConfig.from_preset(preset, env=env_id)
        cfg = dataclasses.replace(cfg, seeds=seeds, quiet=True,
                                  gym=GymOptions(vectorization=vectorization, workers=workers))
        self.steps = cfg.num_envs * cfg.rollout_len * seeds
        self.trainer = Trainer(cfg)
        runs = cfg.runs()
        self.hp = stack_hparams(runs)
        self.state = jax.jit(jax.vmap(self.trainer.init))(run_keys(runs)[0], self.hp)
        self._iteration = jax.jit(jax.vmap(self.trainer.iteration), donate_argnums=0)

    def iteration(self):
        self.state, _ = self._iteration(self.state, self.hp)

    def block(self):
        jax.block_until_ready(self.state.params)


def random_steps_per_s(venv, steps):
    """Env steps/s of a Gymnasium vector env under uniform random actions."""
    venv.reset(seed=0)
    venv.action_space.seed(0)
    actions = [venv.action_space.sample() for _ in range(64)]
    for a in actions[:8]:  # warm up (workers started, first resets done)
        venv.step(a)
    t = time.perf_counter()
    for i in range(steps):
        venv.step(actions[i % len(actions)])
    return steps * venv.num_envs / (time.perf_counter() - t)


class Workers:
    """pgjax's worker-process vector env (``--gym.vectorization workers``) behind the part of
    Gymnasium's vector-env interface that ``random_steps_per_s`` uses."""

    def __init__(self, env_id, n, workers):
        from pgjax.envs.gym_env import GymEnv, WorkerVectorEnv, default_workers

        env = GymEnv(env_id, n)
        self.venv = WorkerVectorEnv(env.host_spec, n, workers or default_workers())
        self.num_envs = n
        with gym.make(env_id, disable_env_checker=True) as one:
            self.action_space = gym.vector.utils.batch_space(one.action_space, n)

    def reset(self, seed):
        self.venv.reset(np.arange(self.num_envs) + seed)

    def step(self, action):
        return self.venv.step(action)

    def close(self):
        self.venv.close()


def ceiling(a):
    """The ceiling table: Gymnasium's vector envs with random actions against pgjax's
    training at the preset, per task."""
    rows = []
    for env_id in a.envs:
        name = env_id.split(":", 1)[1]
        cfg = TrainConfig.from_preset(a.preset, env=env_id)
        n = cfg.num_envs * a.seeds
        make = functools.partial(gym.make, name, disable_env_checker=True)
        row = {"env": env_id, "envs": n}
        venv = SyncVectorEnv([make] * n, autoreset_mode=AutoresetMode.SAME_STEP)
        row["sync"] = round(max(random_steps_per_s(venv, a.gym_steps // n)
                                for _ in range(a.repeats)))
        venv.close()
        for k in a.async_envs:
            venv = AsyncVectorEnv([make] * k, autoreset_mode=AutoresetMode.SAME_STEP,
                                  context="spawn")
            row[f"async_{k}"] = round(max(random_steps_per_s(venv, a.gym_steps // k)
                                          for _ in range(a.repeats)))
            venv.close()
        row["ceiling"] = max(v for k, v in row.items() if k == "sync" or k.startswith("async"))
        venv = Workers(name, n, a.workers)
        row["workers_random"] = round(max(random_steps_per_s(venv, a.gym_steps // n)
                                          for _ in range(a.repeats)))
        venv.close()
        for how in a.vectorization:
            side = PgjaxRuns(env_id, a.preset, a.seeds, how, a.workers)
            timed(side, 1)  # compile and warm up
            best = min(timed(side, a.iters) for _ in range(a.repeats))
            row[f"pgjax_{how}"] = round(a.iters * side.steps / best)
            side.trainer.close()
        print(json.dumps(row), flush=True)
        rows.append(row)
    head = (["sync"] + [f"async_{k}" for k in a.async_envs] + ["workers_random"]
            + [f"pgjax_{h}" for h in a.vectorization])
    print(f"| env | envs | {' | '.join(head)} | best pgjax / Gymnasium's best | "
          f"best pgjax / workers_random |")
    print("|---|---:|" + "---:|" * (len(head) + 2))
    for r in rows:
        best = max(r[f"pgjax_{h}"] for h in a.vectorization)
        print(f"| `{r['env']}` | {r['envs']} | " + " | ".join(f"{r[h]:,}" for h in head)
              + f" | {best / r['ceiling']:.2f} | {best / r['workers_random']:.2f} |")
    return rows


def timed(side, iters):
    t = time.perf_counter()
    for _ in range(iters):
        side.iteration()
    side.block()
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--envs", nargs="+", default=["gym:CartPole-v1", "gym:Hopper-v5"])
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--rollout-len", type=int, default=256)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--ceiling", action="store_true",
                   help="Gymnasium's vector envs with random actions against pgjax's training "
                        "at --preset")
    p.add_argument("--preset", default="mujoco")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--async-envs", type=int, nargs="*", default=[2, 8])
    p.add_argument("--gym-steps", type=int, default=40_000,
                   help="env steps per random-action measurement")
    p.add_argument("--vectorization", nargs="+", default=["sync", "workers"])
    p.add_argument("--workers", type=int, default=0,
                   help="worker processes for the workers columns (0: one per CPU core)")
    a = p.parse_args()
    print(json.dumps({"machine": platform.machine(), "devices": str(jax.devices()),
                      "jax": jax.__version__, "gymnasium": gym.__version__}))
    if a.ceiling:
        ceiling(a)
        return
    rows = []
    for env_id in a.envs:
        name = env_id.split(":", 1)[1]
        sides = {"hand-written": HandWritten(name, a.num_envs, a.rollout_len),
                 "pgjax": Pgjax(env_id, a.num_envs, a.rollout_len)}
        for side in sides.values():  # compile and warm up
            timed(side, 1)
        best = {k: float("inf") for k in sides}
        for _ in range(a.repeats):
            for k, side in sides.items():
                best[k] = min(best[k], timed(side, a.iters))
        steps = a.iters * a.num_envs * a.rollout_len
        sps = {k: steps / v for k, v in best.items()}
        row = {"env": env_id, "num_envs": a.num_envs, "rollout_len": a.rollout_len,
               "hand_written_steps_per_s": round(sps["hand-written"]),
               "pgjax_steps_per_s": round(sps["pgjax"]),
               "ratio": round(sps["pgjax"] / sps["hand-written"], 3)}
        print(json.dumps(row), flush=True)
        rows.append(row)
        sides["pgjax"].trainer.close()
        sides["hand-written"].venv.close()
    print("| env | envs | hand-written (steps/s) | pgjax (steps/s) | pgjax / hand-written |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| `{r['env']}` | {r['num_envs']} | {r['hand_written_steps_per_s']:,} | "
              f"{r['pgjax_steps_per_s']:,} | {r['ratio']:.3f} |")


if __name__ == "__main__":
    main()
