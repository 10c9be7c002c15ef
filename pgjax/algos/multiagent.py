"""Cooperative multi-agent policy optimisation: a combinator that turns any update rule into
a multi-agent one (the agent setting of ``pgjax.training.train``).

Each agent ``i`` has its own policy ``pi^i(a^i | o^i)`` over its own view of the global state
(see ``pgjax.envs.multiagent.Partition``; acting and batches:
``pgjax.model.policies.JointPolicy``); the team shares one reward. Three schemes turn a
single-agent update rule (PPO, TRPO, SPO, FixPO or a registered one) into a multi-agent one:

- ``sequential`` (HAPPO / HATRPO, Kuba et al. ICLR 2022; HA-SPO and HA-FixPO the same way):
  a centralised critic V(s) gives the joint advantage A; agents are updated one after another
  in a random order (or fixed / reverse), each on its rule's objective with the advantage
  multiplied by the compounded factor M = prod over the agents already updated of
  pi_new(a|o) / pi_old(a|o) (no gradient, not clipped), which then takes in its own ratio.
- ``simultaneous`` (MAPPO for PPO): the same, with M = 1 for every agent.
- ``independent`` (IPPO for PPO): every agent has its own critic V^i(o^i) and its own GAE.

How the rule is reused unchanged: an agent's update is the rule's own ``update`` on a batch of
that agent's samples, with ``Batch.weight = M``; each agent's own trust-region diagnostics are
recorded as ``agent_kl_mean`` / ``agent_kl_max`` / ``agent_ratio_dev_max`` / ``agent_entropy``
(mean or max over agents), the joint policy's by the trainer as ``kl_mean`` etc. Observations in that batch are a dict
``{"agent": o^i, "state": s, "mask": action mask, "avail": available actions}``; the agent
policy reads ``agent``, ``mask`` and ``avail``, the critic reads ``state`` (centralised) or
``agent`` (independent).
With a centralised critic, the first agent in the order is updated together with the critic
(exactly the rule's single-agent update, so one agent reproduces the plain rule); the other
agents run the rule with a critic-free view (its value is 0, so no gradient reaches the
critic) and the critic's optimiser state is kept from the first pass (the ``critic`` part of
every ``Parts`` in the rule's state).

Agents may differ in observation and action sizes: per-agent parameters are stacked over a
leading agent axis at the largest size, with zero-padded observations and action dimensions
masked out of log-probabilities, entropies and KLs, so the agent order can be a traced
permutation inside ``jit`` and ``vmap``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Optional

import jax
import jax.numpy as jnp

from pgjax.algos.common import (MAX, Algorithm, Batch, Metric, Updated, reduce_over_agents, updated)
from pgjax.algos.pieces import TRUST_REGION, trust_region_stats
from pgjax.envs.multiagent import Partition
from pgjax.core.errors import ConfigError, check_choice
from pgjax.model.distributions import Categorical
from pgjax.model.nets import Parts
from pgjax.model.policies import ActorCritic
from pgjax.core.registry import AGENT_SCHEMES, caller_file

ORDERS = ("random", "fixed", "reverse")
AGENT_OBS = ("local", "full_state_id")
# --algo aliases: name -> (update rule, scheme)
ALIASES = {"happo": ("ppo", "sequential"), "hatrpo": ("trpo", "sequential"),
           "haspo": ("spo", "sequential"), "hafixpo": ("fixpo", "sequential"),
           "mappo": ("ppo", "simultaneous"), "ippo": ("ppo", "independent")}


class AgentScheme(NamedTuple):
    """How a multi-agent update combines a rule's per-agent updates, registered in
    ``pgjax.core.registry.AGENT_SCHEMES`` under its ``--agent-update`` name. ``central``: one
    critic V(s) of the global state (else one V^i(o^i) per agent, each with its own GAE);
    ``next_factor(factor, ratio) -> factor``: the advantage weight handed to the next agent
    in the order after an agent with likelihood ratio ``ratio`` was updated (None: every
    agent gets weight 1)."""

    central: bool
    summary: str
    next_factor: Optional[Callable] = None


def register_scheme(name: str, scheme: AgentScheme, *, replace: bool = False) -> AgentScheme:
    """Make ``--agent-update <name>`` available (from a plugin file: ``--plugins ...``)."""
    if not isinstance(scheme, AgentScheme):
        raise TypeError(f"register_scheme('{name}', ...) takes an AgentScheme, got "
                        f"{type(scheme).__name__}")
    return AGENT_SCHEMES.register(name, scheme, replace=replace, origin=caller_file())


register_scheme("sequential", AgentScheme(
    True, "HAPPO-style: agents in turn, each weighted by the ratios of those before",
    lambda factor, ratio: factor * ratio))
register_scheme("simultaneous", AgentScheme(True, "MAPPO-style: every agent on the same "
                                                  "advantage, one centralised critic"))
register_scheme("independent", AgentScheme(False, "IPPO-style: one critic per agent"))
SCHEMES = AGENT_SCHEMES  # name -> AgentScheme


@dataclasses.dataclass(frozen=True)
class AgentsConfig:
    """Multi-agent training (--agents.<field>)."""

    order: str = "random"
    """Order of sequential agent updates: random (a new permutation every update), fixed or
    reverse."""
    share_actor: bool = False
    """One actor shared by all agents (agent id appended to its input)."""
    obs: str = "local"
    """What each actor sees. local: its partition's view (mabrax: its own and neighbouring
    joints and the root, Multi-Agent MuJoCo's default); full_state_id: the whole global
    state plus a one-hot agent id, as HARL's MA-MuJoCo actors."""

    def validate(self, cfg) -> None:
        from pgjax.envs import family_of
        from pgjax.core.registry import POLICY_KINDS

        if family_of(cfg.env)[0].host:
            raise ConfigError(f"multi-agent training runs on environments stepped inside the "
                              f"compiled program; {cfg.env} is stepped on the host")
        if POLICY_KINDS.get(cfg.policy).memory:
            raise ConfigError(f"--policy {cfg.policy} is single-agent; multi-agent training "
                              f"uses per-agent feedforward policies")
        check_choice(self.order, ORDERS, "agents.order", "--agents.order")
        check_choice(self.obs, AGENT_OBS, "agents.obs", "--agents.obs")
        if cfg.scheme is None and (self.obs != "local" or self.share_actor):
            raise ConfigError("--agents.obs and --agents.share-actor set multi-agent training; "
                              "drop them for single-agent training")
        if self.share_actor and not AGENT_SCHEMES.get(cfg.scheme).central:
            raise ConfigError(f"--agents.share-actor needs a centralised critic; --agent-update "
                              f"{cfg.scheme} has one per agent")


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
        return Categorical.masked(d, obs.get("avail"))

    kl, log_prob, entropy = ActorCritic.kl, ActorCritic.log_prob, ActorCritic.entropy

    def value(self, critic_params, obs):
        if self.critic_input is None:
            return jnp.zeros(obs["state"].shape[:-1], jnp.float32)
        return self.critic.apply(critic_params, obs[self.critic_input])


def tree_get(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def tree_set(tree, i, value):
    return jax.tree.map(lambda x, v: x.at[i].set(v), tree, value)


def keep_critic_state(states, source):
    """``states`` (stacked over agents) with the critic's part of every ``Parts`` in them
    (its optimiser state) replaced by that of the single state ``source``."""
    def keep(x, s):
        if not isinstance(x, Parts):
            return x
        return x.replace(critic=jax.tree.map(lambda a, b: jnp.broadcast_to(b, a.shape),
                                             x.critic, s.critic))

    return jax.tree.map(keep, states, source, is_leaf=lambda x: isinstance(x, Parts))


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
# Flat over (time, env) = B. obs {"agent": [B, n, O], "state": [B, S]} (and "avail":
# [B, n, A] where agents have available-action flags); action
# [B, n, A] or [B, n]; log_prob [B, n]; dist pytree [B, n, ...]; value / advantage / ret
# [B] (centralised critic) or [B, n] (independent critics).
MultiAgentBatch = Batch


class Combinator(NamedTuple):
    """The multi-agent update over one rule (``make_combinator``): the rule as the first
    agent of the order runs it (``full``: with the critic, when one is centralised) and as
    the others do (``actor_only``), the agent policy's view, the scheme, the order, the
    number of agents, whether one actor is shared, the box action mask per agent (or None)
    and how the rule's metrics reduce over the agents."""

    full: Algorithm
    actor_only: Algorithm
    view: AgentPolicy
    scheme: AgentScheme
    order: str
    n: int
    shared_actor: bool
    mask: Any
    declared: Mapping[str, Metric]

    def slot(self, i):
        return 0 if self.shared_actor else i

    def agent_params(self, params: Parts, i) -> Parts:
        return Parts(tree_get(params.actor, self.slot(i)),
                     params.critic if self.scheme.central else tree_get(params.critic, i))

    def agent_batch(self, b: MultiAgentBatch, i, weight) -> Batch:
        obs = {"agent": b.obs["agent"][:, i], "state": b.obs["state"],
               **({"avail": b.obs["avail"][:, i]} if "avail" in b.obs else {})}
        if self.mask is not None:
            obs["mask"] = jnp.broadcast_to(self.mask[i], b.action[:, i].shape)
        pick = (lambda x: x) if self.scheme.central else (lambda x: x[:, i])
        return Batch(obs=obs, action=b.action[:, i], log_prob=b.log_prob[:, i],
                     dist=jax.tree.map(lambda x: x[:, i], b.dist), value=pick(b.value),
                     advantage=pick(b.advantage), ret=pick(b.ret), weight=weight)

    def init(self, params: Parts, hp):
        if self.scheme.central:
            return jax.vmap(lambda a: self.full.init(Parts(a, params.critic), hp))(params.actor)
        return jax.vmap(lambda a, c: self.full.init(Parts(a, c), hp))(params.actor,
                                                                      params.critic)

    def one_pass(self, rule, params: Parts, states, b, i, factor, key, hp, progress):
        """Agent ``i``'s update by ``rule`` on its batch weighted by ``factor``: (params,
        states, the factor for the next agent, this agent's metrics)."""
        batch = self.agent_batch(b, i, factor)
        new_p, new_s, metrics, _ = updated(rule.update(self.agent_params(params, i),
                                                       tree_get(states, self.slot(i)), batch,
                                                       key, hp, progress))
        # this agent's own trust region (the trainer records the joint policy's)
        metrics = {**{k: v for k, v in metrics.items() if k not in TRUST_REGION},
                   **{f"agent_{k}": v for k, v in
                      trust_region_stats(self.view, new_p.actor, batch).items()}}
        if self.scheme.next_factor is not None:
            d = self.view.dist(new_p.actor, batch.obs)
            ratio = jnp.exp(self.view.distribution.log_prob(d, batch.action) - batch.log_prob)
            factor = self.scheme.next_factor(factor, jax.lax.stop_gradient(ratio))
        central = self.scheme.central
        params = Parts(tree_set(params.actor, self.slot(i), new_p.actor),
                       new_p.critic if central and rule is self.full else
                       params.critic if central else tree_set(params.critic, i, new_p.critic))
        return params, tree_set(states, self.slot(i), new_s), factor, metrics

    def update(self, params: Parts, states, b: MultiAgentBatch, key, hp, progress,
               refresh=None) -> Updated:
        perm = agent_order(key, self.n, self.order)
        factor = jnp.ones(b.log_prob.shape[0], jnp.float32)
        params, states, factor, first = self.one_pass(self.full, params, states, b, perm[0],
                                                      factor, pass_key(key, 0), hp, progress)
        critic_state = tree_get(states, self.slot(perm[0]))
        per_agent = jax.tree.map(lambda x: jnp.asarray(x)[None], first)
        if self.n > 1:
            def body(carry, m):
                params, states, factor = carry
                params, states, factor, metrics = self.one_pass(
                    self.actor_only, params, states, b, perm[m], factor, pass_key(key, m), hp,
                    progress)
                return (params, states, factor), metrics

            (params, states, factor), rest = jax.lax.scan(body, (params, states, factor),
                                                          jnp.arange(1, self.n))
            per_agent = jax.tree.map(lambda a, r: jnp.concatenate([a, r]), per_agent, rest)
            if self.scheme.central:
                states = keep_critic_state(states, critic_state)
        metrics = reduce_over_agents(per_agent, self.declared, self.scheme.central)
        metrics["factor_dev_max"] = jnp.abs(factor - 1.0).max()
        metrics["first_agent"] = perm[0].astype(jnp.float32)
        return Updated(params, states, metrics)


# the combinator's own metrics, and the per-agent trust region's, reduced over the agents
AGENT_METRICS = {"agent_kl_max": MAX, "agent_ratio_dev_max": MAX, "factor_dev_max": MAX}


def make_combinator(rule_factory, rule_cfg, partition: Partition, actor, critic, distribution,
                    scheme: str, order: str, shared_actor: bool) -> Algorithm:
    """The multi-agent update rule over ``rule_factory(rule_cfg, policy)`` (``Combinator``).

    params = Parts(actor=actor params stacked over agents ([1, ...] when shared),
                   critic=one critic, or stacked over agents for ``independent``)
    algo_state: the rule's state stacked over actor slots (over agents for independent).
    A metric reduces over the agents as the rule declares it (``Algorithm.metrics``); one
    the rule's config names in ``ERRORS`` by its maximum (a failure of any agent)."""
    combine = AGENT_SCHEMES.get(scheme)
    if order not in ORDERS:
        raise ConfigError(f"unknown agent order '{order}'; use one of {', '.join(ORDERS)}")
    central = combine.central
    full = rule_factory(rule_cfg, AgentPolicy(actor, critic, distribution,
                                              "state" if central else "agent"))
    actor_only = rule_factory(rule_cfg, AgentPolicy(actor, critic, distribution, None)) \
        if central else full
    mask = jnp.asarray(partition.action_mask) if partition.action.kind == "box" else None
    declared = {**full.metrics, **{k: MAX for k in getattr(rule_cfg, "ERRORS", {})},
                **AGENT_METRICS}
    c = Combinator(full, actor_only, AgentPolicy(actor, critic, distribution, None), combine,
                   order, partition.n_agents, shared_actor, mask, declared)
    return Algorithm(f"{scheme}:{getattr(full, 'name', 'rule')}", rule_cfg, c.init, c.update,
                     declared)
