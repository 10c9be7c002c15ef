"""Cooperative multi-agent policy optimisation: a combinator that turns any update rule into
a multi-agent one (the agent setting of ``pgjax.train``).

Each agent ``i`` has its own policy ``pi^i(a^i | o^i)`` over its own view of the global state
(see ``pgjax.envs.multiagent.Partition``; acting and batches: ``pgjax.policies.JointPolicy``); the team shares one reward. Three schemes turn a
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

import dataclasses
from typing import Any, Callable, NamedTuple, Optional

import jax
import jax.numpy as jnp

from pgjax.algos.common import Algorithm, Batch
from pgjax.algos.pieces import TRUST_REGION, trust_region_stats
from pgjax.envs.multiagent import Partition
from pgjax.errors import ConfigError, check_choice
from pgjax.policies import ActorCritic
from pgjax.registry import AGENT_SCHEMES, caller_file

ORDERS = ("random", "fixed", "reverse")
AGENT_OBS = ("local", "full_state_id")
# --algo aliases: name -> (update rule, scheme)
ALIASES = {"happo": ("ppo", "sequential"), "hatrpo": ("trpo", "sequential"),
           "haspo": ("spo", "sequential"), "hafixpo": ("fixpo", "sequential"),
           "mappo": ("ppo", "simultaneous"), "ippo": ("ppo", "independent")}


class AgentScheme(NamedTuple):
    """How a multi-agent update combines a rule's per-agent updates, registered in
    ``pgjax.registry.AGENT_SCHEMES`` under its ``--agent-update`` name. ``central``: one
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
        from pgjax.registry import POLICY_KINDS

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
        return d

    kl, log_prob, entropy = ActorCritic.kl, ActorCritic.log_prob, ActorCritic.entropy

    def value(self, critic_params, obs):
        if self.critic_input is None:
            return jnp.zeros(obs["state"].shape[:-1], jnp.float32)
        return self.critic.apply(critic_params, obs[self.critic_input])


def tree_get(tree, i):
    return jax.tree.map(lambda x: x[i], tree)


def tree_set(tree, i, value):
    return jax.tree.map(lambda x, v: x.at[i].set(v), tree, value)


def _is_critic_leaf(path) -> bool:
    """A state leaf under a dict key or a named-state field called "critic"."""
    return any("critic" in (getattr(k, "key", None), getattr(k, "name", None)) for k in path)


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
    combine = AGENT_SCHEMES.get(scheme)
    if order not in ORDERS:
        raise ConfigError(f"unknown agent order '{order}'; use one of {', '.join(ORDERS)}")
    n = partition.n_agents
    central = combine.central
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
        # this agent's own trust region (the trainer records the joint policy's)
        metrics = {**{k: v for k, v in metrics.items() if k not in TRUST_REGION},
                   **{f"agent_{k}": v for k, v in
                      trust_region_stats(policy_view, new_p["actor"], batch).items()}}
        if combine.next_factor is not None:
            d = policy_view.dist(new_p["actor"], batch.obs)
            ratio = jnp.exp(distribution.log_prob(d, batch.action) - batch.log_prob)
            factor = combine.next_factor(factor, jax.lax.stop_gradient(ratio))
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
