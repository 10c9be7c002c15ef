"""The one training pipeline: an environment, a policy kind, an update rule and a config
assembled into pure functions of (key, traced hyperparameters).

``Trainer(cfg)`` builds the parts from the config (``build_env``, ``build_policy``,
``build_algorithm`` of ``pgjax.training.build``; any of them can be passed in instead) and provides:

- ``init(key, hp) -> TrainState``
- ``iteration(state, hp) -> (state, metrics)``: rollout, batch (GAE), one update
- ``chunk(state, hp) -> (state, metrics [eval_every])``: ``lax.scan`` over iterations
- ``evaluate(state, key) -> metrics``: deterministic policy on separate eval environments
- ``train(key, hp) -> (state, metrics [num_iterations])``: a whole run as one function

Every stage is written once for every policy kind (``pgjax.model.policies``), agent setting
(single agent, or the multi-agent combinator of ``pgjax.algos.multiagent``) and environment
family (Gymnasium environments step on the host through callbacks, ``pgjax.envs.gym_env``).
``vmap`` over (key, hp) turns any of them into a batch of independent runs in one program;
``pgjax.loop.runner.run`` is the host loop that does that in chunks and writes records.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.model.advantages import gae
from pgjax.algos.common import Batch, Refresh, updated
from pgjax.algos.pieces import trust_region_stats
from pgjax.training.build import build_algorithm, build_env, build_policy
from pgjax.training.build import (ENV_KEYS, available_memory, check,  # noqa: F401 (re-exported)
                                  check_memory, memory_needed)
from pgjax.training.config import TrainConfig
from pgjax.envs.core import check_env
from pgjax.core.evaluation import MODES, TRAIN_RETURN, columns as eval_columns
from pgjax.core.hparams import HParams
from pgjax.model.normalize import RunningStats, init_stats, normalize, scale_rewards, update_stats
from pgjax.model.policies import ActorCritic, Forward, frozen_entries, refold
from pgjax.training.rollout import RolloutCarry, Transition, rollout


@struct.dataclass
class TrainState:
    params: Any  # Parts(actor=..., critic=...)
    algo_state: Any  # the update rule's state (e.g. Adam moments)
    obs_stats: RunningStats
    ret_stats: RunningStats  # running statistics of the discounted return (reward scaling)
    ret_acc: jax.Array  # [N] discounted return accumulator per env
    rollout: Any  # RolloutCarry: environment state, observation, acting carry
    reset_obs: jax.Array  # [N, ...] raw first observations of the run: fixed probe states
    key: jax.Array
    iteration: jax.Array  # int32 number of updates done


class Prepared(NamedTuple):
    """A rollout made ready for the update: the rule's batch, the state with the statistics
    updated by this rollout, the policy's view of the rollout [T, N], the rewards GAE saw
    (scaled), the value targets [T, N(, n)] and, for a rule that recomputes its advantages
    (``recompute_adv``), the function that does it."""

    batch: Batch
    state: TrainState
    forward: Forward
    reward: jax.Array
    ret: jax.Array
    refresh: Any = None  # the Refresh recomputing the batch's GAE under new parameters


class EvalCarry(NamedTuple):
    env_state: Any
    obs: jax.Array
    carry: Any
    ret: jax.Array  # [E] undiscounted return so far
    length: jax.Array  # [E] steps so far
    alive: jax.Array  # [E] the episode has not ended
    t: jax.Array
    success: jax.Array  # [E] the episode ended in success (environments that report one)


def _explained_variance(pred, target):
    var = jnp.var(target)
    return jnp.where(var > 0, 1.0 - jnp.var(target - pred) / var, 0.0)


def _like(x, ref):
    """``x`` [T, N] broadcast to ``ref``'s shape [T, N, ...] (per-agent values)."""
    return jnp.broadcast_to(x.reshape(x.shape + (1,) * (ref.ndim - x.ndim)), ref.shape)


class Trainer:
    """The pure training functions of one (environment, policy kind, update rule, config)."""

    def __init__(self, cfg: TrainConfig, env=None, eval_env=None, policy=None, algo=None, *,
                 check_envs: bool = True):
        """``env`` / ``eval_env``: environments built outside (checked against the config,
        ``check_env``, unless ``check_envs`` is False: pgjax's own readers pass envs of
        other sizes on purpose); ``policy`` / ``algo``: parts built outside."""
        cfg.validate()
        self.cfg = cfg
        for given, n, name in ((env, cfg.num_envs, "the env"), (eval_env, cfg.eval_envs,
                                                               "the eval_env")):
            if check_envs and given is not None and given is not False:
                check_env(given, n, f"{name} passed to Trainer")
        self.env = env if env is not None else build_env(cfg, cfg.num_envs)
        self.eval_env = eval_env if eval_env is not None else build_env(cfg, cfg.eval_envs)
        self.policy = policy if policy is not None else build_policy(cfg, self.env)
        self.algo = algo if algo is not None else build_algorithm(cfg, self.policy)
        self._frozen = frozen_entries(self.policy)  # never-normalised entries (S2PG's z)

    # -- hyperparameters and statistics ---------------------------------------------------
    def hparams(self, hp) -> HParams:
        """The typed record (``HParams``) of a run's flat ``{option: value}`` traced table
        (``cfg.base_hparams()``, a grid point; arrays inside ``vmap``)."""
        return HParams.of(hp, self.cfg.rule, self.cfg.algo_config)

    def normalizer(self, state: TrainState):
        """Raw observations -> what the networks see, with the state's frozen statistics."""
        if not self.cfg.norm.normalize_obs:
            return lambda x: x
        return lambda x: normalize(state.obs_stats, x)

    def update_obs_stats(self, stats: RunningStats, obs) -> RunningStats:
        """Merge observations into the statistics; frozen entries stay at mean 0, var 1
        (normalisation leaves them unchanged)."""
        stats = update_stats(stats, obs)
        if self._frozen is None:
            return stats
        return stats.replace(mean=jnp.where(self._frozen, 0.0, stats.mean),
                             var=jnp.where(self._frozen, 1.0 - 1e-8, stats.var))

    def update_statistics(self, state: TrainState, traj: Transition, hp):
        """Fold a rollout into the running statistics: reward scaling (a scan over time) and
        observation normalisation. Returns (state with new statistics, rewards for GAE)."""
        cfg = self.cfg
        ret_stats, ret_acc, reward = state.ret_stats, state.ret_acc, traj.reward
        if cfg.norm.reward_scale != 1.0:
            reward = reward * cfg.norm.reward_scale
        if cfg.norm.normalize_reward:
            done = traj.terminated | traj.truncated
            ret_stats, ret_acc, reward = scale_rewards(ret_stats, ret_acc, reward, done,
                                                       self.hparams(hp).gamma)
        obs_stats = state.obs_stats
        if cfg.norm.normalize_obs:
            obs_stats = self.update_obs_stats(state.obs_stats, traj.obs)
            if cfg.norm.obs_stats_steps:
                # frozen once the steps collected before this rollout reach obs_stats_steps
                seen = state.iteration.astype(jnp.float32) * cfg.batch_size
                obs_stats = jax.tree.map(
                    lambda new, old: jnp.where(seen < cfg.norm.obs_stats_steps, new, old),
                    obs_stats, state.obs_stats)
        return state.replace(obs_stats=obs_stats, ret_stats=ret_stats, ret_acc=ret_acc), reward

    # -- state ------------------------------------------------------------------------------
    def init_learner(self, key, hp) -> TrainState:
        """Parameters, update-rule state and statistics; no environment (``rollout=None``)."""
        k_params, _, k_run = jax.random.split(key, 3)
        spec = self.env.spec
        params = self.policy.init(k_params, spec.obs_shape)
        algo_state = self.algo.init(params, self.hparams(hp).rule)
        return TrainState(params=params, algo_state=algo_state,
                          obs_stats=init_stats(spec.obs_shape), ret_stats=init_stats(),
                          ret_acc=jnp.zeros(spec.num_envs, jnp.float32), rollout=None,
                          reset_obs=None, key=k_run, iteration=jnp.int32(0))

    def start(self, key) -> RolloutCarry:
        """Fresh environments and the policy's initial carry."""
        env_state, obs = self.env.reset(key)
        return RolloutCarry(env_state, obs, self.policy.initial_carry(obs.shape[0]))

    def init(self, key, hp) -> TrainState:
        state = self.init_learner(key, hp)
        start = self.start(jax.random.split(key, 3)[1])
        if self.cfg.norm.normalize_obs:
            state = state.replace(obs_stats=self.update_obs_stats(state.obs_stats, start.obs))
        return state.replace(rollout=start, reset_obs=start.obs)

    def restart(self, state: TrainState, key) -> TrainState:
        """``state`` with fresh environments: after a restore, for environments whose own
        state lives outside the checkpoint (Gymnasium's)."""
        return state.replace(rollout=self.start(key))

    def split(self, state: TrainState):
        """Advance the run's key: (state, rollout key, update key)."""
        key, k_roll, k_update = jax.random.split(state.key, 3)
        return state.replace(key=key), k_roll, k_update

    def next_start(self, carry: RolloutCarry, key) -> RolloutCarry:
        """Where the next rollout starts (``--reset-pool``): ``carry`` with its reset pool
        redrawn (rollout) or kept (fixed); or (update) every environment on a fresh
        episode with a fresh pool, drawn with ``key`` (the episodes cut short are
        bootstrapped like any rollout's end: Brax's trainer resets every env between updates
        so)."""
        if self.cfg.reset_pool == "update":
            return self.start(key)
        if self.cfg.reset_pool == "rollout":
            return carry.replace(env_state=self.env.refresh(carry.env_state))
        return carry

    # -- the stages -------------------------------------------------------------------------
    def collect(self, state: TrainState, key):
        """One rollout from ``state.rollout`` as it stands (``next_start`` has placed it):
        (carry at its end, Transition [T, N])."""
        stats = state.obs_stats if self.cfg.norm.normalize_obs else None
        return rollout(self.env, self.policy, state.params.actor, stats, state.rollout, key,
                       self.cfg.rollout_len)

    def make_batch(self, state: TrainState, traj: Transition, hp, carry0=None,
                   carry_end=None) -> Prepared:
        """A raw rollout [T, N] -> the update's batch: observations normalised with the
        acting statistics, the policy kind's behaviour distribution, values and bootstrap
        values V(final_obs) (``carry0`` / ``carry_end``: its carries at the rollout's start
        and end), reward scaling, GAE, and the kind's batch layout."""
        norm = self.normalizer(state)
        done = traj.terminated | traj.truncated
        obs, final_obs = norm(traj.obs), norm(traj.final_obs)
        forward = lambda params: self.policy.forward(params, obs, final_obs, traj.action, done,
                                                     carry0, carry_end)
        fwd = forward(state.params)
        new_state, reward = self.update_statistics(state, traj, hp)
        # --norm.value-norm: the critic works in units of the return std; GAE sees raw values
        value_norm = self.cfg.norm.value_norm
        truncated = traj.truncated
        if self.cfg.gae_segment is not None:  # bootstrapped at every segment's last step
            t = jnp.arange(truncated.shape[0]).reshape((-1,) + (1,) * (truncated.ndim - 1))
            truncated = truncated | ((t + 1) % self.cfg.gae_segment == 0) & ~traj.terminated

        def rows(f: Forward, ret_stats: RunningStats):
            """The batch's fields from a forward pass (value targets in critic units) and
            the statistics with its lambda-returns merged (value_norm)."""
            scale = jnp.sqrt(ret_stats.var + 1e-8) if value_norm else 1.0
            adv, ret = gae(_like(reward, f.value), f.value * scale, f.next_value * scale,
                           _like(traj.terminated, f.value), _like(truncated, f.value),
                           self.hparams(hp).gamma, self.hparams(hp).gae_lambda,
                           self.cfg.advantage)
            ret_stats = update_stats(ret_stats, ret) if value_norm else ret_stats
            return dict(obs=fwd.obs, action=fwd.action, log_prob=fwd.log_prob, dist=fwd.dist,
                        value=f.value, advantage=adv, ret=ret / scale), ret_stats

        # (value_norm excludes reward scaling, so these are the statistics before the rollout)
        fields, ret_stats = rows(fwd, new_state.ret_stats)
        new_state = new_state.replace(ret_stats=ret_stats)
        refresh = None
        if getattr(self.algo.config, "recompute_adv", False):
            # tianshou's recompute_advantage: every recomputation scales by the statistics
            # as they stand and merges its lambda-returns into them
            def recompute(params, batch: Batch, stats: RunningStats):
                new, stats = rows(forward(params), stats)
                new = self.policy.layout(new)
                return batch.replace(value=new["value"], advantage=new["advantage"],
                                     ret=new["ret"]), stats
            refresh = Refresh(recompute, ret_stats)
        return Prepared(Batch(**self.policy.layout(fields)), new_state, fwd, reward,
                        fields["ret"], refresh)

    def learn(self, state: TrainState, traj: Transition, k_update, hp, carry0=None):
        """Everything after the rollout: the batch, one update of the rule, diagnostics.
        ``state.rollout`` is where the rollout ended; ``carry0`` the carry it started from."""
        prep = self.make_batch(state, traj, hp, carry0, state.rollout.carry)
        # the fraction of the schedule's horizon done (``anneal_steps``), not of this run
        progress = jnp.minimum(
            state.iteration.astype(jnp.float32) / self.cfg.anneal_iterations, 1.0)
        refresh = {} if prep.refresh is None else {"refresh": prep.refresh}
        params, algo_state, metrics, ret_stats = updated(self.algo.update(
            state.params, state.algo_state, prep.batch, k_update, self.hparams(hp).rule,
            progress, **refresh))
        if prep.refresh is not None:  # the statistics as the update's last recomputation left them
            prep = prep._replace(state=prep.state.replace(ret_stats=ret_stats))
        full = self.cfg.diagnostics == "full"  # those that need extra forward passes
        if full:  # the trust-region diagnostics, recorded for every rule by the trainer
            metrics = {**metrics, **trust_region_stats(self.policy, params.actor, prep.batch)}
        if self.cfg.norm.normalize_obs:
            metrics = {**metrics, **self.statistics_drift(state, prep, traj, carry0, full)}
            if self.cfg.norm.obs_stats == "preserve":
                params = self.preserve_outputs(params, state.obs_stats, prep.state.obs_stats)
        if full and isinstance(self.policy, ActorCritic):
            metrics = {**metrics, **self.reset_state_drift(state, params, prep.state)}
        n_done = (traj.terminated | traj.truncated).astype(jnp.float32).sum()
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params)]))
        per_episode = lambda x: jnp.where(n_done > 0, x.sum() / jnp.maximum(n_done, 1), jnp.nan)
        metrics = {**metrics, "nonfinite_params": 1.0 - finite.astype(jnp.float32),
                   "explained_variance": _explained_variance(prep.forward.value, prep.ret),
                   "episodes": n_done, TRAIN_RETURN: per_episode(traj.episode_return),
                   "train_length": per_episode(traj.episode_length),
                   "return_scale": jnp.sqrt(prep.state.ret_stats.var)}
        # every metric a float32 scalar (a rule may report counts as integers or bools)
        metrics = {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}
        new_state = prep.state.replace(params=params, algo_state=algo_state,
                                       iteration=state.iteration + 1)
        if prep.forward.carry is not None:
            new_state = new_state.replace(rollout=state.rollout.replace(carry=prep.forward.carry))
        return new_state, metrics

    def statistics_drift(self, state: TrainState, prep: Prepared, traj: Transition, carry0,
                         full: bool = True):
        """What this rollout's update of the observation statistics alone does: how far the
        statistics moved and, when ``full``, the KL between the acting policy under the old
        and under the new statistics on the rollout's states (same parameters;
        ``--norm.obs-stats preserve`` then folds it away) and the mean change of the
        values."""
        old, new = state.obs_stats, prep.state.obs_stats
        s_old, s_new = jnp.sqrt(old.var + 1e-8), jnp.sqrt(new.var + 1e-8)
        drift = {"obs_std_drift": jnp.abs(jnp.log(s_new / s_old)).mean(),
                 "obs_mean_drift": (jnp.abs(new.mean - old.mean) / s_old).mean()}
        if not full:
            return drift
        norm = lambda x: normalize(new, x)
        fwd = self.policy.forward(state.params, norm(traj.obs), norm(traj.final_obs),
                                  traj.action, traj.terminated | traj.truncated, carry0,
                                  state.rollout.carry)
        kl = self.policy.kl(prep.forward.dist, fwd.dist)
        return {**drift, "kl_stats_mean": kl.mean(), "kl_stats_max": kl.max(),
                "value_stats_shift": jnp.abs(fwd.value - prep.forward.value).mean()}

    def reset_state_drift(self, state: TrainState, params, new_state: TrainState):
        """How much this update changed the policy on the run's first observations (states
        from the reset distribution, which a policy that keeps its episodes alive rarely
        sees in a batch): KL(before || after) per state, mean and max, the part of it the
        statistics update alone causes, and the largest change of the deterministic
        action."""
        x = state.reset_obs
        before = self.policy.dist(state.params.actor, self.normalizer(state)(x))
        after = self.policy.dist(params.actor, self.normalizer(new_state)(x))
        stats_only = self.policy.dist(state.params.actor, self.normalizer(new_state)(x))
        mode = self.policy.distribution.mode
        kl = self.policy.kl(before, after)
        return {"kl_reset_mean": kl.mean(), "kl_reset_max": kl.max(),
                "kl_reset_stats_max": self.policy.kl(before, stats_only).max(),
                "mode_shift_reset_max": jnp.abs(mode(after).astype(jnp.float32)
                                                - mode(before).astype(jnp.float32)).max()}

    def preserve_outputs(self, params, old: RunningStats, new: RunningStats):
        """``params`` refitted so that on observations normalised with ``new`` statistics
        the networks compute what they computed with ``old`` (exactly, where no entry
        reaches the +-10 clip)."""
        s_old, s_new = jnp.sqrt(old.var + 1e-8), jnp.sqrt(new.var + 1e-8)
        return refold(self.policy, params, (s_new / s_old).reshape(-1),
                      ((new.mean - old.mean) / s_old).reshape(-1))

    def iteration(self, state: TrainState, hp):
        state, k_roll, k_update = self.split(state)
        # (fold_in: a key apart from the rollout's own splits of k_roll)
        k_start = jax.random.fold_in(k_roll, 1) if self.cfg.reset_pool == "update" else None
        state = state.replace(rollout=self.next_start(state.rollout, k_start))
        carry0 = state.rollout.carry
        end, traj = self.collect(state, k_roll)
        return self.learn(state.replace(rollout=end), traj, k_update, hp, carry0)

    def chunk(self, state: TrainState, hp):
        return jax.lax.scan(lambda s, _: self.iteration(s, hp), state, None,
                            length=self.cfg.iterations_per_chunk)

    def episodes(self, state: TrainState, key, stochastic: bool = False):
        """One episode per eval env from a reset drawn with ``key``, acting with the
        distribution's mode (or, ``stochastic``, sampling with keys split from ``key``) and
        the state's frozen normalisation statistics; stops once every episode has ended (or
        at the time limit). Returns the undiscounted returns, lengths and whether each episode
        succeeded (false where the environment reports no outcome), [eval envs] each."""
        env, policy, norm = self.eval_env, self.policy, self.normalizer(state)
        actor = state.params.actor
        k_reset, k_act = jax.random.split(key)
        env_state, obs = env.reset(key if not stochastic else k_reset)
        n = env.spec.num_envs

        def step(c: EvalCarry):
            k = jax.random.fold_in(k_act, c.t) if stochastic else None
            h, action = policy.act(actor, c.carry, norm(c.obs), k, deterministic=not stochastic)
            env_state, ts = env.step(c.env_state, action)
            won = c.success if ts.success is None else c.success | (c.alive & ts.success)
            return EvalCarry(env_state, ts.obs, policy.reset_carry(h, ts.done),
                             c.ret + jnp.where(c.alive, ts.reward, 0.0),
                             c.length + c.alive.astype(jnp.int32), c.alive & ~ts.done, c.t + 1,
                             won)

        init = EvalCarry(env_state, obs, policy.initial_carry(n), jnp.zeros(n),
                         jnp.zeros(n, jnp.int32), jnp.ones(n, bool), jnp.int32(0),
                         jnp.zeros(n, bool))
        out = jax.lax.while_loop(
            lambda c: (c.t < env.spec.max_episode_steps) & c.alive.any(), step, init)
        return out.ret, out.length, out.success

    @property
    def eval_columns(self) -> tuple:
        """The record columns an evaluation fills: each mode's return columns and, where the
        eval environment reports an outcome (``EnvSpec.success``), its success rate."""
        return eval_columns(self.cfg.eval_modes, bool(self.eval_env.spec.success))

    def evaluate(self, state: TrainState, key):
        """The held-out evaluation recorded after a chunk, for each policy of
        ``cfg.eval_modes``: mean and std of the return and the mean length of one episode
        per eval env (see ``episodes``; the stochastic one from a key of its own), and the
        fraction of those episodes that succeeded where the environment reports outcomes."""
        out = {}
        for mode in map(MODES.get, self.cfg.eval_modes):
            ret, length, won = self.episodes(state, mode.key(key), not mode.deterministic)
            values = (ret.mean(), ret.std(), length.mean())
            out.update({k: v.astype(jnp.float32) for k, v in zip(mode.columns, values)})
            if self.eval_env.spec.success:
                out[mode.success_column] = won.mean(dtype=jnp.float32)
        return out

    def train(self, key, hp):
        """A whole run as one pure function: (key, hp) -> (final state, metrics [I])."""
        return jax.lax.scan(lambda s, _: self.iteration(s, hp), self.init(key, hp), None,
                            length=self.cfg.num_iterations)

    def close(self):
        """Release what the environments hold outside the program (Gymnasium's)."""
        self.env.close()
        self.eval_env.close()


def make_trainer(cfg: TrainConfig) -> Trainer:
    """The trainer for ``cfg`` (every policy kind and agent setting)."""
    return Trainer(cfg)

