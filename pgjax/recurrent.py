"""Recurrent (GRU) policies trained with backpropagation through time: the baseline that
stateful policy gradients (``pgjax.memory``) are compared with.

``--policy recurrent --bptt-len L``: actor and critic are each a GRU over per-step features
of the observation. While acting, the carries run forward step by step and are reset to 0
at every episode start. For the update the rollout [T, N] is recomputed from the carries at
its first step and cut into sequences of L steps (``--bptt-len 0``: the whole rollout), each
starting from the carry reached there (held fixed: truncated BPTT with stored states);
gradients flow through time inside a sequence only. Every update rule trains it unchanged:
its batch rows are sequences instead of transitions (observations ``{"o": [S, L, D],
"start": [S, L], "h0": [S, H]}``), its minibatches are drawn over sequences, and the policy's
``dist`` / ``value`` run the GRU over each sequence.
"""
from __future__ import annotations

import math
from typing import Any, Callable, NamedTuple, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import struct

from pgjax.algos.common import Batch
from pgjax.distributions import Categorical, Gaussian, broadcast_params
from pgjax.envs.core import ActionSpace
from pgjax.nets import ACTIVATIONS, _dense, orthogonal
from pgjax.normalize import normalize
from pgjax.rollout import Transition, step_key
from pgjax.advantages import gae
from pgjax.train import Trainer, TrainState


class GRUNet(nn.Module):
    """features = MLP(o); h' = GRU(h, features); output = head(h'). ``__call__`` is one
    step on [N, D] with carry [N, H]."""

    hidden: Sequence[int]
    carry_size: int
    out: int
    out_gain: float
    activation: Callable = nn.tanh

    @nn.compact
    def __call__(self, h, o):
        x = o
        for width in self.hidden:
            x = self.activation(_dense(width, math.sqrt(2))(x))
        h, y = nn.GRUCell(self.carry_size, recurrent_kernel_init=orthogonal(1.0))(h, x)
        return h, _dense(self.out, self.out_gain)(y)


class _Actor(nn.Module):
    hidden: Sequence[int]
    carry_size: int
    action: ActionSpace
    activation: Callable
    init_log_std: float
    head_gain: float

    @nn.compact
    def __call__(self, h, o):
        h, y = GRUNet(self.hidden, self.carry_size, self.action.n, self.head_gain,
                      self.activation)(h, o)
        if self.action.kind == "box":
            log_std = self.param("log_std", nn.initializers.constant(self.init_log_std),
                                 (self.action.n,))
            # batch-shaped, so that per-step outputs stack over time like the mean
            return h, {"mean": y, "log_std": jnp.broadcast_to(log_std, y.shape)}
        return h, {"logits": y}


class _Critic(nn.Module):
    hidden: Sequence[int]
    carry_size: int
    activation: Callable

    @nn.compact
    def __call__(self, h, o):
        h, y = GRUNet(self.hidden, self.carry_size, 1, 1.0, self.activation)(h, o)
        return h, y[..., 0]


def _scan_sequences(net, params, seq):
    """Run a recurrent net over sequences {"o": [S, L, D], "start": [S, L], "h0": [S, H]}:
    the carry is reset to 0 where ``start`` (an episode began at that step). Returns
    outputs [S, L, ...]."""

    def step(h, x):
        o, start = x
        h = jnp.where(start[:, None], 0.0, h)
        h, y = net.apply(params, h, o)
        return h, y

    xs = (jnp.swapaxes(seq["o"], 0, 1), jnp.swapaxes(seq["start"], 0, 1))
    _, ys = jax.lax.scan(step, seq["h0"], xs)
    return jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1), ys)


class RecurrentPolicy(NamedTuple):
    """``ActorCritic``-compatible over sequence batches; ``step_*`` for acting."""

    actor: nn.Module
    critic: nn.Module
    distribution: Any
    carry_size: int

    def init(self, key, obs_shape):
        k_a, k_c = jax.random.split(key)
        h, o = jnp.zeros((1, self.carry_size)), jnp.zeros((1,) + tuple(obs_shape))
        return {"actor": self.actor.init(k_a, h, o), "critic": self.critic.init(k_c, h, o)}

    def initial_carry(self, n: int):
        z = jnp.zeros((n, self.carry_size), jnp.float32)
        return {"actor": z, "critic": z}

    def dist(self, actor_params, seq):
        return _scan_sequences(self.actor, actor_params, {**seq, "h0": seq["h0"]["actor"]})

    def value(self, critic_params, seq):
        return _scan_sequences(self.critic, critic_params, {**seq, "h0": seq["h0"]["critic"]})


def make_recurrent_policy(action: ActionSpace, cfg) -> RecurrentPolicy:
    act = ACTIVATIONS[cfg.activation]
    actor = _Actor(tuple(cfg.actor_hidden), cfg.carry_size, action, act, cfg.init_log_std,
                   cfg.policy_head_gain)
    dist = Gaussian() if action.kind == "box" else Categorical()
    return RecurrentPolicy(actor, _Critic(tuple(cfg.critic_hidden), cfg.carry_size, act), dist,
                           cfg.carry_size)


@struct.dataclass
class RecurrentCarry:
    env_state: Any
    obs: jax.Array  # [N, *obs] raw observation to act on
    carry: Any  # {"actor": [N, H], "critic": [N, H]} recurrent state before acting on obs


class RecurrentTrainer(Trainer):
    """The trainer with a recurrent policy (JAX environments)."""

    def _build(self):
        self.set_policy(make_recurrent_policy(self.env.spec.action, self.cfg))

    def init(self, key, hp) -> TrainState:
        self.trace_counts["init"] += 1
        state = self.init_learner(key, hp)
        env_state, obs = self.env.reset(jax.random.split(key, 3)[1])
        carry = self.policy.initial_carry(obs.shape[0])
        return self.observe_reset(state, obs).replace(rollout=RecurrentCarry(env_state, obs, carry))

    def _norm(self, state):
        stats = self._stats(state)
        return (lambda x: normalize(stats, x)) if stats is not None else (lambda x: x)

    def _actor_step(self, state, h, raw_obs):
        return self.policy.actor.apply(state.params["actor"], h, self._norm(state)(raw_obs))

    def iteration(self, state: TrainState, hp):
        state, end, traj, k_update = self.collect(state)
        new_state, metrics, critic_end = self.learn_sequences(state, traj, state.rollout.carry,
                                                              k_update, hp)
        # the critic carry at the end of the rollout, for the next rollout's first sequence
        end = end.replace(carry={**end.carry, "critic": critic_end})
        return new_state.replace(rollout=end), metrics

    def collect(self, state: TrainState):
        """One rollout: (state with advanced key, carry at its end, Transition [T, N],
        update key). ``state.rollout.carry`` holds the carries at its start."""
        state, k_roll, k_update = self.split(state)
        env, dist = self.env, self.policy.distribution
        start = state.rollout.replace(env_state=self.next_pool(state.rollout.env_state))

        def step(c: RecurrentCarry, t):
            h_a, d = self._actor_step(state, c.carry["actor"], c.obs)
            action = dist.sample(d, step_key(k_roll, t))
            env_state, ts = env.step(c.env_state, action)
            done = ts.terminated | ts.truncated
            h_a = jnp.where(done[:, None], 0.0, h_a)
            tr = Transition(obs=c.obs, action=action, reward=ts.reward,
                            terminated=ts.terminated, truncated=ts.truncated,
                            final_obs=ts.final_obs, episode_return=ts.episode_return,
                            episode_length=ts.episode_length)
            # the critic's carry is recomputed in the update; only the actor's runs here
            return RecurrentCarry(env_state, ts.obs, {**c.carry, "actor": h_a}), tr

        end, traj = jax.lax.scan(step, start, jnp.arange(self.cfg.rollout_len))
        return state, end, traj, k_update

    def learn_sequences(self, state, traj: Transition, carry0, k_update, hp):
        self.trace_counts["learn"] += 1
        cfg, policy = self.cfg, self.policy
        norm = self._norm(state)
        obs, final_obs = norm(traj.obs), norm(traj.final_obs)
        done = traj.terminated | traj.truncated
        T, N = done.shape
        start = jnp.concatenate([jnp.zeros((1, N), bool), done[:-1]], 0)  # reset before t

        # forward pass over the whole rollout from its first carries: per-step carries
        # before each step (h_in), behaviour distributions, values and bootstrap values
        def fwd(c, x):
            o, fo, s = x
            h_a, h_c = (jnp.where(s[:, None], 0.0, h) for h in (c["actor"], c["critic"]))
            new_a, d = policy.actor.apply(state.params["actor"], h_a, o)
            new_c, v = policy.critic.apply(state.params["critic"], h_c, o)
            _, v_next = policy.critic.apply(state.params["critic"], new_c, fo)
            return {"actor": new_a, "critic": new_c}, ({"actor": h_a, "critic": h_c}, d, v,
                                                       v_next)

        last, (h_in, behaviour, values, next_values) = jax.lax.scan(
            fwd, carry0, (obs, final_obs, start))
        critic_end = jnp.where(done[-1][:, None], 0.0, last["critic"])
        log_prob = policy.distribution.log_prob(behaviour, traj.action)
        behaviour = broadcast_params(behaviour, (T, N))
        new_state, reward = self.update_statistics(state, traj, hp)
        adv, ret = gae(reward, values, next_values, traj.terminated, traj.truncated,
                       hp["gamma"], hp["gae_lambda"])
        L = cfg.bptt_len or T

        def seqs(x):  # [T, N, ...] -> [T/L * N, L, ...]
            x = x.reshape((T // L, L) + x.shape[1:])
            x = jnp.swapaxes(x, 1, 2)  # [T/L, N, L, ...]
            return x.reshape((-1, L) + x.shape[3:])

        h0 = jax.tree.map(lambda h: seqs(h)[:, 0], h_in)
        start_seq = seqs(start).at[:, 0].set(False)  # h0 is already reset where needed
        batch = Batch(obs={"o": seqs(obs), "start": start_seq,
                           "h0": jax.lax.stop_gradient(h0)},
                      action=seqs(traj.action), log_prob=seqs(log_prob),
                      dist=jax.tree.map(seqs, behaviour), value=seqs(values),
                      advantage=seqs(adv), ret=seqs(ret))
        extras = {"values": values, "ret": ret, "done": done}
        new_state, metrics = self.apply_update(state, new_state, batch, traj, extras, k_update,
                                               hp)
        return new_state, metrics, critic_end

    def evaluate(self, state: TrainState, key):
        self.trace_counts["evaluate"] += 1
        env, dist = self.eval_env, self.policy.distribution
        env_state, obs = env.reset(key)
        n = env.spec.num_envs

        def step(c, _):
            env_state, obs, h, ret, length, alive = c
            h, d = self._actor_step(state, h, obs)
            env_state, ts = env.step(env_state, dist.mode(d))
            ret = ret + jnp.where(alive, ts.reward, 0.0)
            length = length + alive.astype(jnp.int32)
            return (env_state, ts.obs, h, ret, length, alive & ~ts.done), None

        init = (env_state, obs, self.policy.initial_carry(n)["actor"], jnp.zeros(n),
                jnp.zeros(n, jnp.int32), jnp.ones(n, bool))
        (_, _, _, ret, length, _), _ = jax.lax.scan(step, init, None,
                                                    length=env.spec.max_episode_steps)
        return {"eval_return": ret.mean(), "eval_return_std": ret.std(),
                "eval_length": length.mean()}
