"""Policy kinds as values: what differs between a feedforward, a recurrent and a per-agent
(multi-agent) policy — parameters, the carry it keeps while acting, acting, and how a
rollout [T, N] becomes the update's batch. The trainer (``pgjax.training.train``) is written once
over this interface:

- ``init(key, obs_shape) -> params``  ``Parts(actor=..., critic=...)`` (``pgjax.model.nets``)
- ``initial_carry(n)``                 the acting carry of n envs (None: no memory)
- ``act(actor_params, carry, obs, key, deterministic) -> (carry, action)``
- ``reset_carry(carry, done)``         the carry after a step (restarted where done)
- ``forward(params, obs, final_obs, action, done, carry0, carry_end) -> Forward``
- ``layout(fields) -> fields``         [T, N, ...] arrays -> batch rows [B, ...]
- ``dist(actor_params, batch_obs)``, ``value(critic_params, batch_obs)``, ``distribution``:
  what an update rule sees of the policy over batch rows.

Stateful (S2PG) and window policies are the feedforward kind on an extended environment
(``pgjax.envs.memory``); ``norm_mask`` marks the observation entries normalisation may touch.
``refold`` refits the layers that read the observation after a statistics update
(``--norm.obs-stats preserve``).
"""
from __future__ import annotations

from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from pgjax.model.distributions import Categorical, Gaussian, StatefulDistribution, broadcast_params
from pgjax.envs.core import ActionSpace
from pgjax.envs.memory import action_size
from pgjax.envs.multiagent import Partition, single_agent_partition
from pgjax.model.nets import (Critic, Parts, RecurrentActor, RecurrentCritic, StatefulActor,
                              activation_fn, feedforward_actor)


class Forward(NamedTuple):
    """The behaviour policy and the critic over one rollout, time-major [T, N, ...]: the
    batch's observations and actions as the update rule sees them, behaviour distribution
    parameters and log-probabilities, values V(s_t) and bootstrap values V(s'_t) ([T, N] or,
    with per-agent critics, [T, N, n]), and the carry the next rollout starts from."""

    obs: Any
    action: Any
    dist: Any
    log_prob: jax.Array
    value: jax.Array
    next_value: jax.Array
    carry: Any


def fold_dense(dense, scale, shift):
    """A Dense layer's parameters ``{"kernel": [D, H], "bias": [H]}`` refitted so that on
    inputs x' it computes what it computed on x = x' * scale + shift (per input entry)."""
    k = dense["kernel"]
    return {**dense, "kernel": k * scale[:, None], "bias": dense["bias"] + shift @ k}


def _fold_at(params, path, scale, shift):
    """``params`` with the Dense layer at the key path ``path`` refitted by ``fold_dense``."""
    if not path:
        return fold_dense(params, scale, shift)
    return {**params, path[0]: _fold_at(params[path[0]], path[1:], scale, shift)}


def _input_layer(module):
    """Where a network's first Dense layer (the one reading the observation) sits, and how
    many leading observation entries it reads (None: all)."""
    if isinstance(module, StatefulActor):
        return ("params", "Dense_0"), module.obs_size
    if isinstance(module, (RecurrentActor, RecurrentCritic)):
        return ("params", "GRUNet_0", "Dense_0"), None
    return ("params", "MLP_0", "Dense_0"), None


def refold(policy, params, scale, shift):
    """Actor and critic parameters whose first layers read observations normalised with new
    statistics as the old ones read them normalised with the old: ``scale`` = new std / old
    std and ``shift`` = (new mean - old mean) / old std, per observation entry [D]."""
    def fold(part_params, module):
        path, n = _input_layer(module)
        sc, sh = (scale, shift) if n is None else (scale[:n], shift[:n])
        return _fold_at(part_params, path, sc, sh)

    return params.map(fold, Parts(policy.actor, policy.critic))


def _flatten(fields):
    return jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), fields)


def _sample(distribution, d, key, deterministic: bool):
    return distribution.mode(d) if deterministic else distribution.sample(d, key)


class ActorCritic(NamedTuple):
    """The feedforward kind: separate actor and critic over the (flat) observation; no carry,
    batch rows are transitions."""

    actor: nn.Module
    critic: nn.Module
    distribution: Any  # Gaussian(), Categorical() or StatefulDistribution
    norm_mask: Any = None  # [D] bool: entries normalisation may touch (None: all)

    def init(self, key, obs_shape):
        k_a, k_c = jax.random.split(key)
        dummy = jnp.zeros((1,) + tuple(obs_shape))
        return Parts(self.actor.init(k_a, dummy), self.critic.init(k_c, dummy))

    def dist(self, actor_params, obs):
        return self.actor.apply(actor_params, obs)

    def value(self, critic_params, obs):
        return self.critic.apply(critic_params, obs)

    def initial_carry(self, n: int):
        return None

    def reset_carry(self, carry, done):
        return carry

    def act(self, actor_params, carry, obs, key, deterministic: bool = False):
        return carry, _sample(self.distribution, self.dist(actor_params, obs), key,
                              deterministic)

    def kl(self, p, q):
        """KL(p || q) per state between two of its distributions."""
        return self.distribution.kl(p, q)

    def log_prob(self, d, action):
        """log pi(action | s) per state."""
        return self.distribution.log_prob(d, action)

    def entropy(self, d):
        """Entropy per state."""
        return self.distribution.entropy(d)

    def forward(self, params, obs, final_obs, action, done, carry0, carry_end) -> Forward:
        d = self.dist(params.actor, obs)
        log_prob = self.distribution.log_prob(d, action)
        return Forward(obs, action, broadcast_params(d, obs.shape[:2]), log_prob,
                       self.value(params.critic, obs),
                       self.value(params.critic, final_obs), None)

    layout = staticmethod(_flatten)


def make_actor_critic(action: ActionSpace, policy: str = "auto", actor_hidden=(64, 64),
                      critic_hidden=(64, 64), activation: str = "tanh",
                      init_log_std: float = 0.0, head_gain: float = 0.01,
                      std_max=None, std_min=None) -> ActorCritic:
    """The feedforward kind for ``action``: ``policy`` is ``auto`` (Gaussian for Box,
    categorical for Discrete) or ``gaussian`` / ``categorical``, checked against it
    (``std_max``, ``std_min``: the Gaussian's std bounds, see ``GaussianActor``)."""
    actor, dist = feedforward_actor(action, policy, actor_hidden, activation, init_log_std,
                                    head_gain, std_max, std_min)
    return ActorCritic(actor, Critic(tuple(critic_hidden), activation_fn(activation)), dist)


def make_stateful_policy(env, net, stateful) -> ActorCritic:
    """The S2PG policy on the extended MDP ``env`` (a ``StatefulEnv``): the stateful actor,
    the product distribution over (a, z'), a critic over (o, z). ``net``: a
    ``pgjax.training.kinds.NetConfig``; ``stateful``: a ``StatefulConfig``."""
    act = activation_fn(net.activation)
    base = env.base_action
    obs_size = env.spec.obs_shape[0] - env.z_dim  # o and, with prev_action, the last action
    actor = StatefulActor(obs_size, env.z_dim, tuple(net.actor_hidden), base, act,
                          net.init_log_std, stateful.z_std, net.policy_head_gain)
    dist = StatefulDistribution(Gaussian() if base.kind == "box" else Categorical(),
                                action_size(base))
    return ActorCritic(actor, Critic(tuple(net.critic_hidden), act), dist, env.norm_mask)


# -- recurrent (BPTT) ---------------------------------------------------------------------------
def _scan_sequences(net, params, seq):
    """Run a recurrent net over sequences {"o": [S, L, D], "start": [S, L], "h0": [S, H]}:
    the carry is reset to 0 where ``start`` (an episode began at that step). Returns
    outputs [S, L, ...]."""

    def step(h, x):
        o, start = x
        h = jnp.where(start[:, None], 0.0, h)
        return net.apply(params, h, o)

    xs = (jnp.swapaxes(seq["o"], 0, 1), jnp.swapaxes(seq["start"], 0, 1))
    _, ys = jax.lax.scan(step, seq["h0"], xs)
    return jax.tree.map(lambda y: jnp.swapaxes(y, 0, 1), ys)


class Recurrent(NamedTuple):
    """GRU actor and critic trained by truncated BPTT with stored states. The acting carry is
    ``Parts(actor=[N, H], critic=[N, H])`` (only the actor's advances while acting; the
    critic's is recomputed over the rollout). Batch rows are sequences of ``bptt_len`` steps
    (0: the whole rollout), observations ``{"o": [S, L, D], "start": [S, L], "h0": {...}}``
    each starting from the carry reached there, held fixed."""

    actor: nn.Module
    critic: nn.Module
    distribution: Any
    carry_size: int
    bptt_len: int = 0
    norm_mask: Any = None

    def init(self, key, obs_shape):
        k_a, k_c = jax.random.split(key)
        h, o = jnp.zeros((1, self.carry_size)), jnp.zeros((1,) + tuple(obs_shape))
        return Parts(self.actor.init(k_a, h, o), self.critic.init(k_c, h, o))

    def initial_carry(self, n: int):
        z = jnp.zeros((n, self.carry_size), jnp.float32)
        return Parts(z, z)

    def reset_carry(self, carry, done):
        return carry.replace(actor=jnp.where(done[:, None], 0.0, carry.actor))

    kl, log_prob, entropy = ActorCritic.kl, ActorCritic.log_prob, ActorCritic.entropy

    def act(self, actor_params, carry, obs, key, deterministic: bool = False):
        h, d = self.actor.apply(actor_params, carry.actor, obs)
        return carry.replace(actor=h), _sample(self.distribution, d, key, deterministic)

    def dist(self, actor_params, seq):
        return _scan_sequences(self.actor, actor_params, {**seq, "h0": seq["h0"].actor})

    def value(self, critic_params, seq):
        return _scan_sequences(self.critic, critic_params, {**seq, "h0": seq["h0"].critic})

    def forward(self, params, obs, final_obs, action, done, carry0, carry_end) -> Forward:
        """Recompute the rollout from its first carries: per-step carries before each step,
        behaviour distributions, values and bootstrap values."""
        T, N = done.shape
        start = jnp.concatenate([jnp.zeros((1, N), bool), done[:-1]], 0)  # reset before t

        def fwd(c, x):
            o, fo, s = x
            h = c.map(lambda h: jnp.where(s[:, None], 0.0, h))
            new_a, d = self.actor.apply(params.actor, h.actor, o)
            new_c, v = self.critic.apply(params.critic, h.critic, o)
            _, v_next = self.critic.apply(params.critic, new_c, fo)
            return Parts(new_a, new_c), (h, d, v, v_next)

        last, (h_in, d, values, next_values) = jax.lax.scan(fwd, carry0,
                                                             (obs, final_obs, start))
        # the critic carry at the end of the rollout, for the next rollout's first sequence
        carry = carry_end.replace(critic=jnp.where(done[-1][:, None], 0.0, last.critic))
        log_prob = self.distribution.log_prob(d, action)
        seq_obs = {"o": obs, "start": start, "h0": h_in}
        return Forward(seq_obs, action, broadcast_params(d, (T, N)), log_prob, values,
                       next_values, carry)

    def layout(self, fields):
        """[T, N, ...] -> sequences [T/L * N, L, ...]; ``h0`` keeps each sequence's first
        carry (no gradient), and ``start`` is False at sequence starts (h0 is reset there
        already)."""
        obs = fields["obs"]
        T = obs["start"].shape[0]
        L = self.bptt_len or T

        def seqs(x):
            x = x.reshape((T // L, L) + x.shape[1:])
            x = jnp.swapaxes(x, 1, 2)  # [T/L, N, L, ...]
            return x.reshape((-1, L) + x.shape[3:])

        out = jax.tree.map(seqs, {k: v for k, v in fields.items() if k != "obs"})
        out["obs"] = {"o": seqs(obs["o"]), "start": seqs(obs["start"]).at[:, 0].set(False),
                      "h0": jax.lax.stop_gradient(jax.tree.map(lambda h: seqs(h)[:, 0],
                                                               obs["h0"]))}
        return out


def make_recurrent_policy(action: ActionSpace, net, recurrent) -> Recurrent:
    """The GRU policy for ``action``; ``net``: a ``NetConfig``, ``recurrent``: a
    ``RecurrentConfig`` (``pgjax.training.kinds``)."""
    act = activation_fn(net.activation)
    actor = RecurrentActor(tuple(net.actor_hidden), recurrent.carry_size, action, act,
                           net.init_log_std, net.policy_head_gain)
    dist = Gaussian() if action.kind == "box" else Categorical()
    return Recurrent(actor, RecurrentCritic(tuple(net.critic_hidden), recurrent.carry_size, act),
                     dist, recurrent.carry_size, recurrent.bptt_len)


# -- per-agent policies (multi-agent) -----------------------------------------------------------
class JointPolicy(NamedTuple):
    """Every agent's own policy over its view of the global state, acting together. Actor
    parameters are stacked over agents ([1, ...] when shared; the agent id is then appended
    to each view); the critic is one centralised V(s) or, with ``central=False``, one
    V^i(o^i) per agent. Batch observations are ``{"agent": [B, n, O], "state": [B, S]}``
    (``state``: ``Partition.state``) and, where agents have available-action flags,
    ``"avail": [B, n, A]``; actions per agent; ``dist`` returns per-agent distribution
    parameters stacked on the agent axis, unavailable actions ruled out."""

    actor: nn.Module
    critic: nn.Module
    partition: Partition
    agent_distribution: Any
    shared_actor: bool
    central: bool
    squeeze: bool  # a single-agent discrete env: the joint action is a scalar, not [1]
    norm_mask: Any = None
    full_state: bool = False  # every agent sees the global state and its one-hot id (HARL)

    @property
    def n_agents(self) -> int:
        return self.partition.n_agents

    @property
    def with_id(self) -> bool:
        return self.shared_actor or self.full_state

    def agent_obs(self, obs):
        """Global observations [..., D] -> each agent's actor input [..., n, O]: its view
        (``Partition.agent_obs``; the whole state with ``full_state``), then its one-hot id
        where the actor is shared or ``full_state``."""
        n = self.n_agents
        if self.full_state:
            s = self.partition.state(obs)
            o = jnp.broadcast_to(s[..., None, :], s.shape[:-1] + (n, s.shape[-1]))
        else:
            o = self.partition.agent_obs(obs)
        if self.with_id:
            o = jnp.concatenate([o, jnp.broadcast_to(jnp.eye(n), o.shape[:-1] + (n,))], -1)
        return o

    def init(self, key, obs_shape):
        n = self.n_agents
        k_actor, k_critic = jax.random.split(key)
        slots = 1 if self.shared_actor else n
        o = self.agent_obs(jnp.zeros((1,) + tuple(obs_shape)))[:, 0]
        # one actor slot is initialised from k_actor itself, as the feedforward kind does
        keys = k_actor[None] if slots == 1 else jax.random.split(k_actor, slots)
        actors = jax.vmap(lambda k: self.actor.init(k, o))(keys)
        if self.central:
            critic = self.critic.init(k_critic,
                                      self.partition.state(jnp.zeros((1,) + tuple(obs_shape))))
        else:
            critic = jax.vmap(lambda k: self.critic.init(k, o))(jax.random.split(k_critic, n))
        return Parts(actors, critic)

    def agent_dist(self, actor_params, agent_obs, avail=None):
        """Per-agent distribution parameters from per-agent views [..., n, O], the actions
        where ``avail`` [..., n, A] is false ruled out."""
        n = self.n_agents
        params = actor_params
        if self.shared_actor:
            params = jax.tree.map(lambda x: jnp.broadcast_to(x[0], (n,) + x.shape[1:]),
                                  actor_params)
        d = jax.vmap(lambda p, x: self.actor.apply(p, x), (0, -2), -2)(params, agent_obs)
        if self.partition.action.kind == "box":  # log_std [n, A], like the mask
            d = {**d, "mask": jnp.asarray(self.partition.action_mask)}
        return Categorical.masked(d, avail)

    def dist(self, actor_params, obs):
        return self.agent_dist(actor_params, obs["agent"], obs.get("avail"))

    def view(self, obs) -> dict:
        """Global observations [..., D] -> the batch's observation dict (see the class)."""
        avail = self.partition.avail(obs)
        return {"agent": self.agent_obs(obs), "state": self.partition.state(obs),
                **({} if avail is None else {"avail": avail})}

    def value(self, critic_params, obs):
        if self.central:
            return self.critic.apply(critic_params, obs["state"])
        return jax.vmap(lambda c, x: self.critic.apply(c, x), (0, -2), -1)(critic_params,
                                                                          obs["agent"])

    def _joint(self, a):
        p = self.partition
        if p.action.kind == "box":
            return p.joint_action(a, int((p.action_index >= 0).sum()))
        return a[..., 0] if self.squeeze else a

    initial_carry = ActorCritic.initial_carry
    reset_carry = ActorCritic.reset_carry

    def kl(self, p, q):
        """KL of the joint policy: the sum over agents."""
        return self.agent_distribution.kl(p, q).sum(-1)

    def log_prob(self, d, action):
        """Per agent, [..., n] (the joint policy's: their sum)."""
        return self.agent_distribution.log_prob(d, action)

    def entropy(self, d):
        """Per agent, [..., n] (the joint policy's: their sum)."""
        return self.agent_distribution.entropy(d)

    def act(self, actor_params, carry, obs, key, deterministic: bool = False):
        d = self.agent_dist(actor_params, self.agent_obs(obs), self.partition.avail(obs))
        return carry, self._joint(_sample(self.agent_distribution, d, key, deterministic))

    def forward(self, params, obs, final_obs, action, done, carry0, carry_end) -> Forward:
        view, final = self.view(obs), self.view(final_obs)
        joint = action[..., None] if self.squeeze else action
        agent_action = self.partition.agent_actions(joint)
        d = self.dist(params.actor, view)
        log_prob = self.agent_distribution.log_prob(d, agent_action)  # [T, N, n]
        d = {k: jnp.broadcast_to(v, log_prob.shape + v.shape[-1:]) if k in ("log_std", "mask")
             else v for k, v in d.items()}
        return Forward(view, agent_action, d, log_prob, self.value(params.critic, view),
                       self.value(params.critic, final), None)

    layout = staticmethod(_flatten)


def make_agent_nets(partition: Partition, actor_hidden, critic_hidden, activation: str,
                    init_log_std: float = 0.0, head_gain: float = 0.01, std_max=None,
                    std_min=None):
    """(actor module, critic module, per-agent distribution) for a partition."""
    actor, dist = feedforward_actor(partition.action, "auto", actor_hidden, activation,
                                    init_log_std, head_gain, std_max, std_min)
    return actor, Critic(tuple(critic_hidden), activation_fn(activation)), dist


def make_joint_policy(env, net, central: bool, share_actor: bool = False,
                      full_state: bool = False) -> JointPolicy:
    """Per-agent feedforward policies for ``env`` (a ``MultiAgentEnv``, or any env as one
    agent); ``net``: a ``pgjax.training.kinds.NetConfig``; ``full_state``: each actor sees the
    global state and a one-hot agent id."""
    part = getattr(env, "partition", None)
    squeeze = part is None and env.spec.action.kind == "discrete"
    part = part or single_agent_partition(env.spec)
    actor, critic, dist = make_agent_nets(part, net.actor_hidden, net.critic_hidden,
                                          net.activation, net.init_log_std,
                                          net.policy_head_gain, net.std_max, net.std_min)
    return JointPolicy(actor, critic, part, dist, share_actor, central, squeeze,
                       norm_mask=part.norm_mask(env.spec.obs_shape[0]), full_state=full_state)


def frozen_entries(policy):
    """[D] bool of the observation entries normalisation leaves unchanged, or None."""
    mask = policy.norm_mask
    return None if mask is None else jnp.asarray(~np.asarray(mask))
