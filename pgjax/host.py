"""The host loop for environments stepped outside JAX (Gymnasium).

``HostRuns`` has the interface of the JAX path's ``VmappedRuns`` (``init``, ``chunk``,
``evaluate``, ``close``) so ``pgjax.train.run`` drives both the same way. All R runs of a
program share one Gymnasium vector environment of R x N envs (run r owns block r). Per env
step there is one jitted, run-vmapped call that samples every run's actions; after T steps
the rollout goes, as one [R, T, N] batch, through the same jitted ``Trainer.learn`` that the
JAX path calls inside its scan. Environment seeds come from each run's own key, so a run's
result does not depend on which other runs share its program.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.rollout import Transition, step_key


def _env_seeds(keys, salt: int, n: int) -> np.ndarray:
    """Per-env integer seeds [R * n] derived from per-run keys (independent of R)."""
    per_run = np.asarray(jax.vmap(lambda k: jax.random.randint(
        jax.random.fold_in(k, salt), (n,), 0, 2**31 - 1))(keys))
    return per_run.reshape(-1)


class HostRuns:
    def __init__(self, trainer, num_runs: int):
        self.trainer, self.cfg, self.runs = trainer, trainer.cfg, num_runs
        self.n = trainer.env.spec.num_envs
        self.venv = self.eval_venv = None
        self._init = jax.jit(jax.vmap(trainer.init_learner))
        self._observe = jax.jit(jax.vmap(trainer.observe_reset))
        self._split = jax.jit(jax.vmap(trainer.split))
        self._act = jax.jit(jax.vmap(
            lambda s, obs, k, t: trainer.act(s, obs, step_key(k, t)), in_axes=(0, 0, 0, None)))
        self._learn = jax.jit(jax.vmap(trainer.learn), donate_argnums=0)
        self._mode = jax.jit(jax.vmap(trainer.mode_action))
        self.obs = None  # [R, N, *obs] numpy observation to act on next

    @staticmethod
    def _acting(state):
        """The part of the train state acting needs (parameters and statistics): what crosses
        into the per-step jitted call."""
        return state.replace(algo_state=None, rollout=None)

    def _shape(self, x):
        return x.reshape((self.runs, -1) + x.shape[1:])

    def init(self, keys, hps):
        state = self._init(keys, hps)
        if self.venv is None:
            self.venv = self.trainer.env.open(self.runs)
        self.obs = self._shape(self.venv.reset(_env_seeds(keys, 2, self.n)))
        return self._observe(state, self.obs)

    def restored(self, state, keys, chunk: int):
        """After restoring a checkpoint: the Gymnasium envs' own state is not checkpointed,
        so every env starts a new episode, seeded from the run's key and the chunk index."""
        if self.venv is None:
            self.venv = self.trainer.env.open(self.runs)
        self.obs = self._shape(self.venv.reset(_env_seeds(keys, 1000 + chunk, self.n)))
        return state

    def collect(self, state, key) -> Transition:
        """Run every run's stochastic policy for T steps on the host; returns the rollout as
        a Transition of numpy arrays [R, T, N, ...]."""
        T, R, N = self.cfg.rollout_len, self.runs, self.n
        obs_shape = self.obs.shape[2:]
        adim = self.trainer.env.spec.action
        a_shape, a_dtype = ((adim.n,), np.float32) if adim.kind == "box" else ((), np.int32)
        buf = Transition(
            obs=np.empty((T, R, N) + obs_shape, np.float32),
            action=np.empty((T, R, N) + a_shape, a_dtype),
            reward=np.empty((T, R, N), np.float32),
            terminated=np.empty((T, R, N), bool), truncated=np.empty((T, R, N), bool),
            final_obs=np.empty((T, R, N) + obs_shape, np.float32),
            episode_return=np.empty((T, R, N), np.float32),
            episode_length=np.empty((T, R, N), np.int32))
        act_state = self._acting(state)
        for t in range(T):
            buf.obs[t] = self.obs
            action = np.asarray(self._act(act_state, self.obs, key, t))
            buf.action[t] = action
            out = self.venv.step(action.reshape((R * N,) + a_shape))
            obs, reward, term, trunc, final_obs, ep_ret, ep_len = map(self._shape, out)
            buf.reward[t], buf.terminated[t], buf.truncated[t] = reward, term, trunc
            buf.final_obs[t], buf.episode_return[t], buf.episode_length[t] = \
                final_obs, ep_ret, ep_len
            self.obs = obs
        return jax.tree.map(lambda x: np.swapaxes(x, 0, 1), buf)  # [R, T, N, ...]

    def iteration(self, state, hps):
        state, k_roll, k_update = self._split(state)
        traj = self.collect(state, k_roll)
        return self._learn(state, traj, k_update, hps)

    def chunk(self, state, hps):
        metrics = []
        for _ in range(self.cfg.iterations_per_chunk):
            state, m = self.iteration(state, hps)
            metrics.append(m)
        return state, jax.tree.map(lambda *xs: jnp.stack(xs, axis=1), *metrics)

    def evaluate(self, state, keys):
        """One episode per eval env with the deterministic policy; returns per-run means
        like the JAX path's evaluate."""
        if self.eval_venv is None:
            self.eval_venv = self.trainer.eval_env.open(self.runs)
        E = self.trainer.eval_env.spec.num_envs
        obs = self.eval_venv.reset(_env_seeds(keys, 3, E))
        ret = np.zeros(self.runs * E)
        length = np.zeros(self.runs * E, np.int64)
        alive = np.ones(self.runs * E, bool)
        act_state = self._acting(state)
        for _ in range(self.trainer.eval_env.spec.max_episode_steps):
            action = np.asarray(self._mode(act_state, obs.reshape((self.runs, E) + obs.shape[1:])))
            obs, reward, term, trunc, *_ = self.eval_venv.step(
                action.reshape((self.runs * E,) + action.shape[2:]))
            ret += np.where(alive, reward, 0.0)
            length += alive
            alive &= ~(term | trunc)
            if not alive.any():
                break
        ret, length = ret.reshape(self.runs, E), length.reshape(self.runs, E)
        return {"eval_return": ret.mean(1), "eval_return_std": ret.std(1),
                "eval_length": length.mean(1)}

    def close(self):
        for venv in (self.venv, self.eval_venv):
            if venv is not None:
                venv.close()
