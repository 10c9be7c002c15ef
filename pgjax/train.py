"""One algorithm-agnostic trainer.

``Trainer(cfg)`` builds pure functions of (key, traced hyperparameters):

- ``init(key, hp) -> TrainState``
- ``iteration(state, hp) -> (state, metrics)``: rollout, GAE, one update
- ``chunk(state, hp) -> (state, metrics [eval_every])``: ``lax.scan`` over iterations
- ``evaluate(state, key) -> metrics``: deterministic policy on separate eval environments
- ``train(key, hp) -> (state, metrics [num_iterations])``: a whole run as one function

``vmap`` over (key, hp) turns any of them into a batch of independent runs in one program;
``run(cfg)`` is the host loop that does that in chunks, prints progress and writes records.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from pgjax.advantages import gae
from pgjax.algos import ALGORITHMS
from pgjax.algos.common import Batch
from pgjax.config import TrainConfig
from pgjax.envs import ConfigError, make_env
from pgjax.nets import make_actor_critic
from pgjax.distributions import broadcast_params
from pgjax.normalize import RunningStats, init_stats, normalize, update_stats
from pgjax.rollout import RolloutCarry, Transition, act, rollout, scale_rewards


@struct.dataclass
class TrainState:
    params: Any  # {"actor": ..., "critic": ...}
    algo_state: Any  # optimiser and algorithm state (e.g. Adam moments)
    obs_stats: RunningStats
    ret_stats: RunningStats  # running statistics of the discounted return (reward scaling)
    ret_acc: jax.Array  # [N] discounted return accumulator per env
    rollout: Any  # RolloutCarry (env state, observation) on the JAX path; None on the host path
    key: jax.Array
    iteration: jax.Array  # int32 number of updates done


def _explained_variance(pred, target):
    var = jnp.var(target)
    return jnp.where(var > 0, 1.0 - jnp.var(target - pred) / var, 0.0)


class Trainer:
    def __init__(self, cfg: TrainConfig):
        cfg.validate()
        self.cfg = cfg
        from pgjax.memory import wrap_env

        self.env = wrap_env(make_env(cfg.env, cfg.num_envs, cfg.episode_length, cfg.backend,
                                     cfg.vectorization, cfg.observe), cfg)
        self.eval_env = wrap_env(make_env(cfg.env, cfg.eval_envs, cfg.episode_length,
                                          cfg.backend, cfg.vectorization, cfg.observe), cfg)
        # observation entries that are never normalised (a stateful policy's internal state)
        mask = getattr(self.env, "norm_mask", None)
        self._frozen = None if mask is None else jnp.asarray(~np.asarray(mask))
        self.host = getattr(self.env, "host", False)  # stepped on the host (Gymnasium)
        self._build()
        self.trace_counts = {"init": 0, "chunk": 0, "evaluate": 0, "learn": 0}

    def _build(self):
        """Set ``self.policy`` and ``self.algo``."""
        cfg, spec = self.cfg, self.env.spec
        if cfg.policy == "stateful":
            from pgjax.memory import make_stateful_policy

            self.policy = make_stateful_policy(self.env, cfg)
        else:
            kind = "auto" if cfg.policy == "window" else cfg.policy
            self.policy = make_actor_critic(spec.action, kind, cfg.actor_hidden,
                                            cfg.critic_hidden, cfg.activation,
                                            cfg.init_log_std, cfg.policy_head_gain)
        self.set_policy(self.policy)

    def set_policy(self, policy):
        """Use ``policy`` and build the update rule for it."""
        self.policy = policy
        _, factory = ALGORITHMS[self.cfg.rule]
        self.algo = factory(self.cfg.algo_config, policy)

    # -- hyperparameters -------------------------------------------------------------------
    def _algo_hp(self, hp):
        prefix = self.cfg.rule + "."
        return {k[len(prefix):]: v for k, v in hp.items() if k.startswith(prefix)}

    def _stats(self, state):
        return state.obs_stats if self.cfg.normalize_obs else None

    # -- pure functions --------------------------------------------------------------------
    def init_learner(self, key, hp) -> TrainState:
        """Parameters, optimiser and statistics; no environment (``rollout=None``)."""
        k_params, _, k_run = jax.random.split(key, 3)
        params = self.policy.init(k_params, self.env.spec.obs_shape)
        return TrainState(params=params, algo_state=self.algo.init(params, self._algo_hp(hp)),
                          obs_stats=init_stats(self.env.spec.obs_shape),
                          ret_stats=init_stats(),
                          ret_acc=jnp.zeros(self.env.spec.num_envs, jnp.float32),
                          rollout=None, key=k_run, iteration=jnp.int32(0))

    def observe_reset(self, state: TrainState, obs) -> TrainState:
        """Fold the first observations [N, *obs] into the normalisation statistics."""
        if not self.cfg.normalize_obs:
            return state
        return state.replace(obs_stats=self.update_obs_stats(state.obs_stats, obs))

    def update_obs_stats(self, stats: RunningStats, obs) -> RunningStats:
        """Merge observations into the statistics; frozen entries stay at mean 0, var 1
        (normalisation leaves them unchanged)."""
        stats = update_stats(stats, obs)
        if self._frozen is None:
            return stats
        return stats.replace(mean=jnp.where(self._frozen, 0.0, stats.mean),
                             var=jnp.where(self._frozen, 1.0 - 1e-8, stats.var))

    def init(self, key, hp) -> TrainState:
        self.trace_counts["init"] += 1
        state = self.init_learner(key, hp)
        env_state, obs = self.env.reset(jax.random.split(key, 3)[1])
        return self.observe_reset(state, obs).replace(rollout=RolloutCarry(env_state, obs))

    def split(self, state: TrainState):
        """Advance the run's key: (state, rollout key, update key)."""
        key, k_roll, k_update = jax.random.split(state.key, 3)
        return state.replace(key=key), k_roll, k_update

    def act(self, state: TrainState, obs, key):
        return act(self.policy, state.params["actor"], self._stats(state), obs, key)

    def mode_action(self, state: TrainState, obs):
        """The deterministic (mode) action used for evaluation."""
        stats = self._stats(state)
        o = normalize(stats, obs) if stats is not None else obs
        return self.policy.distribution.mode(self.policy.dist(state.params["actor"], o))

    def make_batch(self, state: TrainState, traj: Transition, hp):
        """Turn a raw rollout [T, N] into the update's flat batch, shared by both environment
        paths: normalise with the acting statistics, behaviour log-probabilities and
        distribution, reward scaling, values and GAE (bootstrapping truncated episodes from
        V(final_obs)). Returns (batch, state with updated statistics, extras)."""
        cfg, policy = self.cfg, self.policy
        stats = self._stats(state)
        norm = (lambda x: normalize(stats, x)) if stats is not None else (lambda x: x)
        obs, final_obs = norm(traj.obs), norm(traj.final_obs)
        behaviour = policy.dist(state.params["actor"], obs)
        log_prob = policy.distribution.log_prob(behaviour, traj.action)
        behaviour = broadcast_params(behaviour, obs.shape[:2])
        done = traj.terminated | traj.truncated
        new_state, reward = self.update_statistics(state, traj, hp)
        critic = state.params["critic"]
        values = policy.value(critic, obs)
        next_values = policy.value(critic, final_obs)
        adv, ret = gae(reward, values, next_values, traj.terminated, traj.truncated,
                       hp["gamma"], hp["gae_lambda"])
        flat = lambda x: x.reshape((-1,) + x.shape[2:])
        batch = Batch(obs=flat(obs), action=flat(traj.action), log_prob=flat(log_prob),
                      dist=jax.tree.map(flat, behaviour), value=flat(values),
                      advantage=flat(adv), ret=flat(ret))
        return batch, new_state, {"reward": reward, "next_values": next_values, "values": values,
                              "ret": ret, "done": done}

    def update_statistics(self, state: TrainState, traj: Transition, hp):
        """Fold a rollout into the running statistics: reward scaling (a scan over time) and
        observation normalisation. Returns (state with new statistics, rewards for GAE)."""
        cfg = self.cfg
        done = traj.terminated | traj.truncated
        ret_stats, ret_acc, reward = state.ret_stats, state.ret_acc, traj.reward
        if cfg.normalize_reward:
            ret_stats, ret_acc, reward = scale_rewards(ret_stats, ret_acc, traj.reward, done,
                                                       hp["gamma"])
        obs_stats = self.update_obs_stats(state.obs_stats, traj.obs) if cfg.normalize_obs \
            else state.obs_stats
        return state.replace(obs_stats=obs_stats, ret_stats=ret_stats, ret_acc=ret_acc), reward

    def learn(self, state: TrainState, traj: Transition, k_update, hp):
        """Everything after the rollout, shared by both environment paths: ``make_batch``,
        one update of the algorithm, and diagnostics."""
        self.trace_counts["learn"] += 1
        batch, new_state, extras = self.make_batch(state, traj, hp)
        return self.apply_update(state, new_state, batch, traj, extras, k_update, hp)

    def apply_update(self, state, new_state, batch, traj, extras, k_update, hp):
        """One update of the algorithm on ``batch`` and the per-update diagnostics."""
        progress = state.iteration.astype(jnp.float32) / self.cfg.num_iterations
        params, algo_state, metrics = self.algo.update(state.params, state.algo_state, batch,
                                                       k_update, self._algo_hp(hp), progress)
        n_done = extras["done"].astype(jnp.float32).sum()
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params)]))
        metrics = {**metrics, "nonfinite_params": 1.0 - finite.astype(jnp.float32),
                   "explained_variance": _explained_variance(extras["values"], extras["ret"]),
                   "episodes": n_done,
                   "train_return": jnp.where(n_done > 0, traj.episode_return.sum() /
                                             jnp.maximum(n_done, 1), jnp.nan),
                   "train_length": jnp.where(n_done > 0, traj.episode_length.sum() /
                                             jnp.maximum(n_done, 1), jnp.nan)}
        new_state = new_state.replace(params=params, algo_state=algo_state,
                                      iteration=state.iteration + 1)
        return new_state, metrics

    def next_pool(self, env_state):
        """The environment state a rollout starts from: its reset pool redrawn
        (``--reset-pool rollout``) or kept (``fixed``)."""
        return self.env.refresh(env_state) if self.cfg.reset_pool == "rollout" else env_state

    def iteration(self, state: TrainState, hp):
        state, k_roll, k_update = self.split(state)
        start = state.rollout.replace(env_state=self.next_pool(state.rollout.env_state))
        carry, traj = rollout(self.env, self.policy, state.params["actor"], self._stats(state),
                              start, k_roll, self.cfg.rollout_len, refresh=False)
        return self.learn(state.replace(rollout=carry), traj, k_update, hp)

    def chunk(self, state: TrainState, hp):
        self.trace_counts["chunk"] += 1
        return jax.lax.scan(lambda s, _: self.iteration(s, hp), state, None,
                            length=self.cfg.iterations_per_chunk)

    def evaluate(self, state: TrainState, key):
        """Mean undiscounted return and length of one episode per eval env, acting with the
        distribution's mode and frozen normalisation statistics."""
        self.trace_counts["evaluate"] += 1
        env = self.eval_env
        env_state, obs = env.reset(key)
        n = env.spec.num_envs

        def step(c, _):
            env_state, obs, ret, length, alive = c
            env_state, ts = env.step(env_state, self.mode_action(state, obs))
            ret = ret + jnp.where(alive, ts.reward, 0.0)
            length = length + alive.astype(jnp.int32)
            return (env_state, ts.obs, ret, length, alive & ~ts.done), None

        init = (env_state, obs, jnp.zeros(n), jnp.zeros(n, jnp.int32), jnp.ones(n, bool))
        (_, _, ret, length, _), _ = jax.lax.scan(step, init, None,
                                                 length=env.spec.max_episode_steps)
        return {"eval_return": ret.mean(), "eval_return_std": ret.std(),
                "eval_length": length.mean()}

    def train(self, key, hp):
        """A whole run as one pure function: (key, hp) -> (final state, metrics [I])."""
        state = self.init(key, hp)
        return jax.lax.scan(lambda s, _: self.iteration(s, hp), state, None,
                            length=self.cfg.num_iterations)


def make_trainer(cfg: TrainConfig) -> Trainer:
    """The trainer for ``cfg``: ``Trainer``, or ``pgjax.multiagent.MultiAgentTrainer`` when
    ``cfg`` trains several agents (a multi-agent env or scheme)."""
    cfg.validate()
    if cfg.scheme is not None:
        from pgjax.multiagent import MultiAgentTrainer

        return MultiAgentTrainer(cfg)
    if cfg.policy == "recurrent":
        from pgjax.recurrent import RecurrentTrainer

        return RecurrentTrainer(cfg)
    return Trainer(cfg)


def stack_hparams(runs) -> dict[str, jax.Array]:
    keys = runs[0][1].keys()
    return {k: jnp.asarray([hp[k] for _, hp in runs], jnp.float32) for k in keys}


def run_keys(runs):
    """Per-run (train key, eval key) from the seed alone, so a run is reproducible no matter
    which other runs share its program."""
    base = jnp.stack([jax.random.PRNGKey(seed) for seed, _ in runs])
    return jax.vmap(lambda k: jax.random.fold_in(k, 0))(base), \
        jax.vmap(lambda k: jax.random.fold_in(k, 1))(base)


class TrainingError(RuntimeError):
    """A run failed (non-finite loss or parameters, or an algorithm's own failure such as
    FixPO's fixup cap); the other runs and every record up to the failure are kept."""


NAN_ALLOWED = ("train_return", "train_length")  # NaN by design when no episode ended


def find_failures(cfg: TrainConfig, metrics, first_iter: int, run_ids, active) -> dict:
    """The first failing update of each active run in a chunk's metrics {name: [R, I]}:
    {run index: (update, message)}. Failures: an algorithm's ERRORS flag, a non-finite
    parameter, or any non-finite recorded quantity (losses, KL, ratios, entropy, ...)."""
    errors = type(cfg.algo_config).ERRORS
    checks = []  # (name, [R, I] bool, message template)
    for name, message in errors.items():
        checks.append((name, np.asarray(metrics.get(name, 0.0)) > 0, message))
    if "nonfinite_params" in metrics:
        checks.append(("nonfinite_params", np.asarray(metrics["nonfinite_params"]) > 0,
                       "non-finite parameters after the update"))
    for name in sorted(metrics):
        if name in NAN_ALLOWED or name in errors or name == "nonfinite_params":
            continue
        checks.append((name, ~np.isfinite(np.asarray(metrics[name], np.float64)),
                       f"non-finite {name}"))
    out = {}
    for r in active:
        best = None
        for name, bad, message in checks:
            hits = np.flatnonzero(np.broadcast_to(bad, np.shape(metrics["episodes"]))[r])
            if hits.size and (best is None or hits[0] < best[0]):
                best = (int(hits[0]), message)
        if best is not None:
            update = first_iter + best[0] + 1
            hint = "" if best[1] in errors.values() else \
                "; this run stopped, try a lower learning rate or gradient-norm clipping"
            out[r] = (update, f"{best[1]} (run {run_ids[r]}, update {update}){hint}")
    return out


class Placement:
    """Where the runs live: with several devices (and ``shard``), the leading run axis of
    every input is sharded over a 1-D mesh of all devices (padded with copies of the last
    run to a multiple of the device count; the copies are computed and dropped). Arrays are
    built with ``make_array_from_callback`` and fetched with ``process_allgather``, so the same
    code runs multi-host after ``jax.distributed.initialize()``."""

    def __init__(self, num_runs: int, shard: bool):
        from jax.sharding import Mesh, NamedSharding, PartitionSpec

        devices = jax.devices()
        self.num_runs = num_runs
        self.num_devices = len(devices) if shard else 1
        self.padded = -(-num_runs // self.num_devices) * self.num_devices
        self.sharding = None
        if self.num_devices > 1:
            mesh = Mesh(np.asarray(devices), ("runs",))
            self.sharding = NamedSharding(mesh, PartitionSpec("runs"))

    def put(self, tree):
        """Pad the leading run axis and place it (sharded when there are several devices)."""
        def one(x):
            x = np.asarray(x)
            if self.padded > x.shape[0]:
                x = np.concatenate([x, np.repeat(x[-1:], self.padded - x.shape[0], 0)])
            if self.sharding is None:
                return jnp.asarray(x)
            return jax.make_array_from_callback(x.shape, self.sharding, lambda idx: x[idx])
        return jax.tree.map(one, tree)

    def get(self, tree):
        """Fetch to host numpy, without the padding runs."""
        if jax.process_count() > 1:
            from jax.experimental import multihost_utils

            tree = multihost_utils.process_allgather(tree, tiled=True)
        return jax.tree.map(lambda x: np.asarray(x)[: self.num_runs], jax.device_get(tree))


def _single(fn):
    """``fn`` on a batch of exactly one run, without ``vmap``: drop the leading run axis of
    every input, add it back to every output."""
    def wrapped(*args):
        out = fn(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)
    return wrapped


class VmappedRuns:
    """Jitted entry points over a batch of runs (leading run axis on every input and output),
    vmapped over the runs. A batch of one run calls the unbatched functions instead: same
    numbers, and a shorter compilation (batching a Brax simulator step over an extra axis
    adds about 2.5 s of compile time on the CPU). Each compiles once per batch size."""

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self._fns = {
            "init": (jax.jit(jax.vmap(trainer.init)), jax.jit(_single(trainer.init))),
            "chunk": (jax.jit(jax.vmap(trainer.chunk), donate_argnums=0),
                      jax.jit(_single(trainer.chunk), donate_argnums=0)),
            "evaluate": (jax.jit(jax.vmap(trainer.evaluate)),
                         jax.jit(_single(trainer.evaluate)))}

    def _call(self, name, *args):
        batched, single = self._fns[name]
        return (single if jax.tree.leaves(args[0])[0].shape[0] == 1 else batched)(*args)

    def init(self, keys, hps):
        return self._call("init", keys, hps)

    def chunk(self, state, hps):
        return self._call("chunk", state, hps)

    def evaluate(self, state, keys):
        return self._call("evaluate", state, keys)

    def restored(self, state, keys, chunk):
        """Nothing to do: the environment state is part of the checkpointed train state."""
        return state

    def close(self):
        pass


RESUME_IGNORED = ("resume", "quiet", "tensorboard", "wandb", "wandb_project", "distributed",
                  "shard", "checkpoint_every")


def _check_resumable(cfg: TrainConfig, root) -> None:
    import json

    saved = json.loads((root / "config.json").read_text())["config"]
    now = json.loads(json.dumps(cfg.to_dict(), default=str))
    diff = sorted(k for k in set(saved) | set(now)
                  if k not in RESUME_IGNORED and saved.get(k) != now.get(k))
    if diff:
        raise ConfigError(f"cannot resume {root}: its config differs in {', '.join(diff)}; "
                          f"resume with the same options, or pick a new --name")


def run(cfg: TrainConfig, log=None, trainer: Trainer | None = None, strict: bool = True):
    """Host loop: train every (seed, hyperparameter) run of ``cfg`` in one vmapped program,
    chunk by chunk, printing progress, evaluating, writing records and a checkpoint after each
    chunk. With ``cfg.resume`` it continues from the run directory's latest checkpoint.

    A run that fails (non-finite quantity, algorithm error) is recorded as failed and the
    others carry on; at the end ``strict`` raises ``TrainingError`` naming the failures.
    Returns the ``RunRecords`` of the run directory."""
    import shutil

    from pgjax.checkpoint import Checkpoints
    from pgjax.loggers import make_sinks
    from pgjax.records import RunRecords, is_finished

    cfg = cfg.with_name()
    if cfg.distributed and not jax.distributed.is_initialized():
        jax.distributed.initialize()
    trainer = trainer or make_trainer(cfg)
    runs = cfg.runs()
    root = Path(cfg.out) / cfg.name
    say = (lambda *a: None) if cfg.quiet else (log or (lambda *a: print(*a, flush=True)))
    writer = jax.process_index() == 0
    resuming = cfg.resume and (root / "config.json").exists()
    if resuming:
        _check_resumable(cfg, root)
        if is_finished(root):
            say(f"pgjax: {root} is already finished; nothing to resume")
            return RunRecords.reopen(root, cfg.num_iterations)

    place = Placement(len(runs), cfg.shard and not trainer.host)
    hps = stack_hparams(runs)
    train_keys, eval_keys = run_keys(runs)
    hps_p, train_keys_p, eval_keys_p = place.put((hps, train_keys, eval_keys))
    if trainer.host:
        from pgjax.host import HostRuns
        fns = HostRuns(trainer, len(runs))
    else:
        fns = VmappedRuns(trainer)
    eval_keys_at = jax.jit(jax.vmap(jax.random.fold_in, (0, None)))  # (run keys, chunk index)
    try:
        t0 = time.time()
        state = fns.init(train_keys_p, hps_p)
        ckpts, start, wall0, records = None, 0, 0.0, None
        if cfg.checkpoint_every:
            if not resuming:
                shutil.rmtree(root / "checkpoint", ignore_errors=True)
            ckpts = Checkpoints(root / "checkpoint")
            step = ckpts.latest() if resuming else None
            if step is not None:
                state, meta = ckpts.restore(step, state)
                start, wall0 = int(meta["chunk"]), float(meta["wall_time_s"])
                state = fns.restored(state, train_keys_p, start)
                records = RunRecords.reopen(root, int(meta["iteration"])) if writer else None
                say(f"pgjax: resuming {root} from chunk {start}/{cfg.num_chunks}")
        if not start:
            records = RunRecords.create(cfg, runs) if writer else None
            ev = place.get(fns.evaluate(state, eval_keys_at(eval_keys_p, 0)))
            if writer:
                records.write_eval(0, 0, time.time() - t0, ev)
        if writer:
            records.sinks = make_sinks(cfg, records.run_dirs, root)
        run_ids = [d.name for d in records.run_dirs] if writer else \
            [str(i) for i in range(len(runs))]
        failed = dict(records.failed) if writer else {}
        say(f"pgjax: {cfg.algo} on {cfg.env} | {len(runs)} runs vmapped"
            f"{f' over {place.num_devices} devices' if place.num_devices > 1 else ''} | "
            f"{cfg.num_iterations} iterations x {cfg.batch_size} steps | records: {root}")
        steps_per_iter = cfg.batch_size
        for c in range(start, cfg.num_chunks):
            if len(failed) == len(runs):
                break
            tc = time.time()
            state, metrics = fns.chunk(state, hps_p)
            ev = fns.evaluate(state, eval_keys_at(eval_keys_p, c + 1))
            metrics, ev = place.get((metrics, ev))
            wall = wall0 + time.time() - t0
            first_iter = c * cfg.iterations_per_chunk
            active = [r for r in range(len(runs)) if r not in failed]
            new_failures = find_failures(cfg, metrics, first_iter, run_ids, active)
            if writer:
                records.write_chunk(first_iter, steps_per_iter, wall, metrics, ev,
                                    {r: u for r, (u, _) in new_failures.items()})
                for r, (update, message) in new_failures.items():
                    records.mark_failed(r, update, message)
            for r, (_, message) in new_failures.items():
                failed[r] = message
                say(f"  run failed: {message}")
            env_steps = (c + 1) * cfg.iterations_per_chunk * steps_per_iter
            sps = cfg.iterations_per_chunk * steps_per_iter * len(runs) / (time.time() - tc)
            ok = [r for r in range(len(runs)) if r not in failed]
            tr = metrics["train_return"][ok]
            tr = tr[np.isfinite(tr)].mean() if np.isfinite(tr).any() else float("nan")
            er = ev["eval_return"][ok] if ok else np.full(1, np.nan)
            say(f"  steps {env_steps:>10,}/{cfg.num_iterations * steps_per_iter:,} | "
                f"{sps:>9,.0f} steps/s | train return {tr:8.1f} | eval return "
                f"{np.mean(er):8.1f} (min {np.min(er):.1f}, max {np.max(er):.1f}) | "
                f"{wall:6.0f}s")
            if writer:
                records.save_params(*place.get((state.params, state.obs_stats)))
            if ckpts is not None and ((c + 1) % cfg.checkpoint_every == 0
                                      or c + 1 == cfg.num_chunks):
                ckpts.save(c + 1, state, {"chunk": c + 1, "wall_time_s": wall,
                                          "iteration": (c + 1) * cfg.iterations_per_chunk})
        if ckpts is not None:
            ckpts.close()
    finally:
        fns.close()
    if writer:
        records.finish()
        # a finished run is never resumed; its parameters are in params.msgpack
        shutil.rmtree(root / "checkpoint", ignore_errors=True)
    if strict and failed:
        first = failed[min(failed)]
        more = f" ({len(failed) - 1} more failed runs, see status.json)" if len(failed) > 1 else ""
        raise TrainingError(first + more)
    return records
