"""Cooperative multi-agent policy optimisation as a combinator over any update rule.

Each agent ``i`` has its own policy ``pi^i(a^i | o^i)`` over its own view of the global state
(see ``pgjax.envs.multiagent.Partition``); the team shares one reward. Three schemes turn a
single-agent update rule (PPO, TRPO, SPO, FixPO or a registered one) into a multi-agent one:

- ``sequential`` (HAPPO / HATRPO, Kuba et al. ICLR 2022; HA-SPO and HA-FixPO the same way):
  a centralised critic V(s) gives the joint advantage A; agents are updated one after another
  in a random order (or fixed / reverse), each on its rule's objective with the advantage
  multiplied by the compounded factor M = prod over the agents already updated of
  pi_new(a|o) / pi_old(a|o) (no gradient, not clipped), which then takes in its own ratio.
- ``simultaneous`` (MAPPO for PPO): the same, with M = 1 for every agent.
- ``independent`` (IPPO for PPO): every agent has its own critic V^i(o^i) and its own GAE.

How the rule is reused unchanged: an agent's update is the rule's own ``update`` on a batch of
that agent's samples, with ``Batch.weight = M``. Observations in that batch are a dict
``{"agent": o^i, "state": s, "mask": action mask}``; the agent policy reads ``agent`` and
``mask``, the critic reads ``state`` (centralised) or ``agent`` (independent).
With a centralised critic, the first agent in the order is updated together with the critic
(exactly the rule's single-agent update, so one agent reproduces the plain rule); the other
agents run the rule with a critic-free view (its value is 0, so no gradient reaches the
critic) and the critic's optimiser state is kept from the first pass (every state leaf under
a ``"critic"`` key is critic state).

Agents may differ in observation and action sizes: per-agent parameters are stacked over a
leading agent axis at the largest size, with zero-padded observations and action dimensions
masked out of log-probabilities, entropies and KLs, so the agent order can be a traced
permutation inside ``jit`` and ``vmap``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from pgjax.advantages import gae
from pgjax.algos import ALGORITHMS
from pgjax.algos.common import Algorithm, Batch
from pgjax.distributions import _LOG_2PI, Categorical, Gaussian
from pgjax.envs.core import ConfigError
from pgjax.envs.multiagent import Partition, single_agent_partition
from pgjax.normalize import init_stats, normalize
from pgjax.train import Trainer, TrainState

SCHEMES = ("sequential", "simultaneous", "independent")
ORDERS = ("random", "fixed", "reverse")
# --algo aliases: name -> (update rule, scheme)
ALIASES = {"happo": ("ppo", "sequential"), "hatrpo": ("trpo", "sequential"),
           "haspo": ("spo", "sequential"), "hafixpo": ("fixpo", "sequential"),
           "mappo": ("ppo", "simultaneous"), "ippo": ("ppo", "independent")}


class MaskedGaussian(NamedTuple):
    """Diagonal Gaussian over padded action vectors: ``{"mean", "log_std", "mask"}``; only
    dimensions with mask 1 count in log-probabilities, entropies and KLs."""

    kind: str = "gaussian"
    sample = staticmethod(Gaussian.sample)
    mode = staticmethod(Gaussian.mode)

    @staticmethod
    def log_prob(d, a):
        z = (a - d["mean"]) * jnp.exp(-d["log_std"])
        return jnp.sum((-0.5 * z**2 - d["log_std"] - 0.5 * _LOG_2PI) * d["mask"], axis=-1)

    @staticmethod
    def entropy(d):
        ent = (d["log_std"] + 0.5 * (1.0 + _LOG_2PI)) * d["mask"]
        return jnp.sum(jnp.broadcast_to(ent, d["mean"].shape), axis=-1)

    @staticmethod
    def kl(p, q):
        var_ratio = jnp.exp(2 * (p["log_std"] - q["log_std"]))
        t = ((p["mean"] - q["mean"]) * jnp.exp(-q["log_std"])) ** 2
        per = 0.5 * (var_ratio + t - 1.0) - (p["log_std"] - q["log_std"])
        return jnp.sum(per * p["mask"], axis=-1)


class AgentPolicy(NamedTuple):
    """One agent's view, in the form update rules expect (``dist``, ``value``,
    ``distribution``). ``critic_input`` is "state", "agent" or None (no critic: value 0)."""

    actor: Any
    critic: Any
    distribution: Any
    critic_input: str | None

    def dist(self, actor_params, obs):
        d = self.actor.apply(actor_params, obs["agent"])
        if "mask" in obs:
            d = {**d, "mask": obs["mask"]}
        return d

    def value(self, critic_params, obs):
        if self.critic_input is None:
            return jnp.zeros(obs["state"].shape[:-1], jnp.float32)
        return self.critic.apply(critic_params, obs[self.critic_input])


def tree_get(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def tree_set(tree, i, value):
    return jax.tree.map(lambda x, v: x.at[i].set(v), tree, value)


def _is_critic_leaf(path) -> bool:
    return any(getattr(k, "key", None) == "critic" for k in path)


def keep_critic_state(states, source):
    """``states`` (stacked over agents) with every leaf under a "critic" key replaced by the
    corresponding leaf of the single state ``source``."""
    return jax.tree_util.tree_map_with_path(
        lambda p, x, s: jnp.broadcast_to(s, x.shape) if _is_critic_leaf(p) else x, states,
        source)


def agent_order(key, n: int, order: str):
    if order == "fixed":
        return jnp.arange(n)
    if order == "reverse":
        return jnp.arange(n)[::-1]
    return jax.random.permutation(jax.random.fold_in(key, 0x5EC), n)


def pass_key(key, m):
    """The update key of the m-th agent in the order: ``key`` itself for the first, so that
    one agent reproduces the single-agent update exactly."""
    return jnp.where(m == 0, key, jax.random.fold_in(key, m))


# The multi-agent batch is an update-rule Batch whose fields carry an agent axis:
# Flat over (time, env) = B. obs {"agent": [B, n, O], "state": [B, D]}; action
# [B, n, A] or [B, n]; log_prob [B, n]; dist pytree [B, n, ...]; value / advantage / ret
# [B] (centralised critic) or [B, n] (independent critics).
MultiAgentBatch = Batch


def make_combinator(rule_factory, rule_cfg, partition: Partition, actor, critic, distribution,
                    scheme: str, order: str, shared_actor: bool, error_metrics=()) -> Algorithm:
    """The multi-agent update rule over ``rule_factory(rule_cfg, policy)``.

    params = {"actor": actor params stacked over agents ([1, ...] when shared),
              "critic": one critic, or stacked over agents for ``independent``}
    algo_state: the rule's state stacked over actor slots (over agents for independent)."""
    if scheme not in SCHEMES:
        raise ConfigError(f"unknown agent update scheme '{scheme}'; use one of {', '.join(SCHEMES)}")
    if order not in ORDERS:
        raise ConfigError(f"unknown agent order '{order}'; use one of {', '.join(ORDERS)}")
    n = partition.n_agents
    central = scheme != "independent"
    full = rule_factory(rule_cfg, AgentPolicy(actor, critic, distribution,
                                              "state" if central else "agent"))
    actor_only = rule_factory(rule_cfg, AgentPolicy(actor, critic, distribution, None)) \
        if central else full
    box = partition.action.kind == "box"
    mask = jnp.asarray(partition.action_mask) if box else None
    slot = (lambda i: 0) if shared_actor else (lambda i: i)
    policy_view = AgentPolicy(actor, critic, distribution, None)

    def agent_params(params, i):
        return {"actor": tree_get(params["actor"], slot(i)),
                "critic": params["critic"] if central else tree_get(params["critic"], i)}

    def agent_batch(b: MultiAgentBatch, i, weight):
        obs = {"agent": b.obs["agent"][:, i], "state": b.obs["state"]}
        if box:
            obs["mask"] = jnp.broadcast_to(mask[i], b.action[:, i].shape)
        pick = (lambda x: x) if central else (lambda x: x[:, i])
        return Batch(obs=obs, action=b.action[:, i], log_prob=b.log_prob[:, i],
                     dist=jax.tree.map(lambda x: x[:, i], b.dist), value=pick(b.value),
                     advantage=pick(b.advantage), ret=pick(b.ret), weight=weight)

    def init(params, hp):
        if central:
            return jax.vmap(lambda a: full.init({"actor": a, "critic": params["critic"]}, hp))(
                params["actor"])
        return jax.vmap(lambda a, c: full.init({"actor": a, "critic": c}, hp))(
            params["actor"], params["critic"])

    def one_pass(rule, params, states, b, i, factor, key, hp, progress):
        batch = agent_batch(b, i, factor)
        new_p, new_s, metrics = rule.update(agent_params(params, i), tree_get(states, slot(i)),
                                            batch, key, hp, progress)
        if scheme == "sequential":
            d = policy_view.dist(new_p["actor"], batch.obs)
            ratio = jnp.exp(distribution.log_prob(d, batch.action) - batch.log_prob)
            factor = factor * jax.lax.stop_gradient(ratio)
        params = {"actor": tree_set(params["actor"], slot(i), new_p["actor"]),
                  "critic": new_p["critic"] if central and rule is full else
                  params["critic"] if central else tree_set(params["critic"], i, new_p["critic"])}
        return params, tree_set(states, slot(i), new_s), factor, metrics

    def update(params, states, b: MultiAgentBatch, key, hp, progress):
        perm = agent_order(key, n, order)
        size = b.log_prob.shape[0]
        factor = jnp.ones(size, jnp.float32)
        params, states, factor, first = one_pass(full, params, states, b, perm[0], factor,
                                                 pass_key(key, 0), hp, progress)
        critic_state = tree_get(states, slot(perm[0]))
        per_agent = jax.tree.map(lambda x: jnp.asarray(x)[None], first)
        if n > 1:
            def body(carry, m):
                params, states, factor = carry
                params, states, factor, metrics = one_pass(
                    actor_only, params, states, b, perm[m], factor, pass_key(key, m), hp,
                    progress)
                return (params, states, factor), metrics

            (params, states, factor), rest = jax.lax.scan(body, (params, states, factor),
                                                          jnp.arange(1, n))
            per_agent = jax.tree.map(lambda a, r: jnp.concatenate([a, r]), per_agent, rest)
            if central:
                states = keep_critic_state(states, critic_state)
        metrics = {}
        for k, v in per_agent.items():
            if central and k.startswith("v_loss"):
                metrics[k] = v[0]  # only the first pass trains the critic
            elif "max" in k or k in error_metrics:
                metrics[k] = v.max()
            else:
                metrics[k] = v.mean()
        metrics["factor_dev_max"] = jnp.abs(factor - 1.0).max()
        metrics["first_agent"] = perm[0].astype(jnp.float32)
        return params, states, metrics

    return Algorithm(f"{scheme}:{getattr(full, 'name', 'rule')}", rule_cfg, init, update)


class JointPolicy(NamedTuple):
    """All agents acting together, as one policy over the global observation and the joint
    action (what rollouts and evaluation use). ``dist`` returns per-agent distribution
    parameters stacked on axis -2 (Gaussian) / the agent axis (categorical)."""

    actor: Any
    partition: Partition
    agent_distribution: Any
    shared_actor: bool
    squeeze: bool  # a single-agent discrete env: joint action is a scalar, not [1]

    def agent_obs(self, obs):
        o = self.partition.agent_obs(obs)
        if self.shared_actor:
            n = self.partition.n_agents
            o = jnp.concatenate([o, jnp.broadcast_to(jnp.eye(n), o.shape[:-1] + (n,))], -1)
        return o

    def dist(self, actor_params, obs):
        o = self.agent_obs(obs)  # [..., n, O]
        n = self.partition.n_agents
        if self.shared_actor:
            params = jax.tree.map(lambda x: jnp.broadcast_to(x[0], (n,) + x.shape[1:]),
                                  actor_params)
        else:
            params = actor_params
        d = jax.vmap(lambda p, x: self.actor.apply(p, x), (0, -2), -2)(params, o)
        if self.partition.action.kind == "box":  # log_std [n, A], like the mask
            d = {**d, "mask": jnp.asarray(self.partition.action_mask)}
        return d

    @property
    def distribution(self):
        """Sampling and mode over the joint action."""
        return _JointDistribution(self)


class _JointDistribution(NamedTuple):
    policy: JointPolicy

    def _to_joint(self, a):
        p = self.policy.partition
        if p.action.kind == "box":
            return p.joint_action(a, int((p.action_index >= 0).sum()))
        return a[..., 0] if self.policy.squeeze else a

    def sample(self, d, key):
        return self._to_joint(self.policy.agent_distribution.sample(d, key))

    def mode(self, d):
        return self._to_joint(self.policy.agent_distribution.mode(d))


def make_agent_nets(partition: Partition, actor_hidden, critic_hidden, activation: str,
                    init_log_std: float, head_gain: float = 0.01):
    """(actor module, critic module, per-agent distribution) for a partition."""
    from pgjax.nets import ACTIVATIONS, CategoricalActor, Critic, GaussianActor

    act = ACTIVATIONS[activation]
    if partition.action.kind == "box":
        actor = GaussianActor(tuple(actor_hidden), partition.action.n, act, init_log_std,
                              head_gain)
        dist = MaskedGaussian()
    else:
        actor = CategoricalActor(tuple(actor_hidden), partition.action.n, act, head_gain)
        dist = Categorical()
    return actor, Critic(tuple(critic_hidden), act), dist


def agent_input_size(partition: Partition, shared_actor: bool) -> int:
    return partition.max_obs + (partition.n_agents if shared_actor else 0)


class MultiAgentTrainer(Trainer):
    """The trainer with per-agent policies and a multi-agent update scheme; rollouts,
    evaluation, records and the host loop are the single-agent ones, acting with the
    joint policy."""

    def _build(self):
        cfg = self.cfg
        self.partition = getattr(self.env, "partition", None) or \
            single_agent_partition(self.env.spec)
        part = self.partition
        actor, critic, dist = make_agent_nets(part, cfg.actor_hidden, cfg.critic_hidden,
                                              cfg.activation, cfg.init_log_std,
                                              cfg.policy_head_gain)
        squeeze = part.action.kind == "discrete" and not hasattr(self.env, "partition")
        self.actor_net, self.critic_net = actor, critic
        self.policy = JointPolicy(actor, part, dist, cfg.share_actor, squeeze)
        self.central = cfg.scheme != "independent"
        _, factory = ALGORITHMS[cfg.rule]
        errors = tuple(type(cfg.algo_config).ERRORS)
        self.algo = make_combinator(factory, cfg.algo_config, part, actor, critic, dist,
                                    cfg.scheme, cfg.agent_order, cfg.share_actor, errors)

    def init_learner(self, key, hp) -> TrainState:
        k_params, _, k_run = jax.random.split(key, 3)
        part, spec = self.partition, self.env.spec
        n = part.n_agents
        k_actor, k_critic = jax.random.split(k_params)
        slots = 1 if self.cfg.share_actor else n
        o = jnp.zeros((1, agent_input_size(part, self.cfg.share_actor)))
        # one actor slot is initialised from k_actor itself, as the single-agent trainer does
        keys = k_actor[None] if slots == 1 else jax.random.split(k_actor, slots)
        actors = jax.vmap(lambda k: self.actor_net.init(k, o))(keys)
        if self.central:
            critic = self.critic_net.init(k_critic, jnp.zeros((1,) + spec.obs_shape))
        else:
            critic = jax.vmap(lambda k: self.critic_net.init(k, o))(
                jax.random.split(k_critic, n))
        params = {"actor": actors, "critic": critic}
        return TrainState(params=params, algo_state=self.algo.init(params, self._algo_hp(hp)),
                          obs_stats=init_stats(spec.obs_shape), ret_stats=init_stats(),
                          ret_acc=jnp.zeros(spec.num_envs, jnp.float32), rollout=None,
                          key=k_run, iteration=jnp.int32(0))

    def make_batch(self, state: TrainState, traj, hp):
        cfg, policy, part = self.cfg, self.policy, self.partition
        stats = self._stats(state)
        norm = (lambda x: normalize(stats, x)) if stats is not None else (lambda x: x)
        obs, final_obs = norm(traj.obs), norm(traj.final_obs)
        agent_obs = policy.agent_obs(obs)  # [T, N, n, O]
        action = part.agent_actions(traj.action[..., None] if policy.squeeze else traj.action)
        behaviour = policy.dist(state.params["actor"], obs)
        log_prob = policy.agent_distribution.log_prob(behaviour, action)  # [T, N, n]
        lead = log_prob.shape
        behaviour = {k: jnp.broadcast_to(v, lead + v.shape[-1:]) if k in ("log_std", "mask")
                     else v for k, v in behaviour.items()}
        done = traj.terminated | traj.truncated
        new_state, reward = self.update_statistics(state, traj, hp)
        critic = state.params["critic"]
        if self.central:
            values = self.critic_net.apply(critic, obs)
            next_values = self.critic_net.apply(critic, final_obs)
            adv, ret = gae(reward, values, next_values, traj.terminated, traj.truncated,
                           hp["gamma"], hp["gae_lambda"])
        else:
            final_agent = policy.agent_obs(final_obs)
            per = jax.vmap(lambda c, x: self.critic_net.apply(c, x), (0, -2), -1)
            values, next_values = per(critic, agent_obs), per(critic, final_agent)
            adv, ret = jax.vmap(lambda v, nv: gae(reward, v, nv, traj.terminated,
                                                  traj.truncated, hp["gamma"],
                                                  hp["gae_lambda"]), -1, -1)(values,
                                                                            next_values)
        flat = lambda x: x.reshape((-1,) + x.shape[2:])
        batch = MultiAgentBatch(obs={"agent": flat(agent_obs), "state": flat(obs)},
                                action=flat(action), log_prob=flat(log_prob),
                                dist=jax.tree.map(flat, behaviour), value=flat(values),
                                advantage=flat(adv), ret=flat(ret))
        return batch, new_state, {"reward": reward, "next_values": next_values,
                              "values": values, "ret": ret, "done": done}
