"""Policy kinds as registered components: each kind's settings (a typed sub-config), its checks
and how it is built, in ``pgjax.core.registry.POLICY_KINDS`` under its ``--policy`` name.

A ``PolicyKind`` builds the policy (``pgjax.model.policies``) from the config and the environment it
acts in; a kind with memory of its own may first extend the environment (``wrap_env``: S2PG's
internal state, observation windows). The networks of every kind are set by ``--net.*``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, NamedTuple, Optional

from pgjax.envs.memory import StatefulEnv, WindowEnv
from pgjax.core.errors import ConfigError, check_choice
from pgjax.training.options import MAX_SIZE
from pgjax.model.policies import make_actor_critic, make_recurrent_policy, make_stateful_policy
from pgjax.core.registry import POLICY_KINDS, caller_file


class PolicyKind(NamedTuple):
    """A policy kind. ``build(cfg, env) -> policy`` (``env``: after ``wrap_env(cfg, env)``,
    when given); ``options``: the dataclass of its own settings, at ``cfg.<options_key>``
    (``--<options_key>.<field>``), whose ``validate(cfg)`` is called with the run's config;
    ``memory``: it carries information between steps (single-agent training only);
    ``host_envs``: it can train on environments stepped on the host (Gymnasium);
    ``bounded_std``: it honours ``--net.std-max``; ``stochastic_eval``: its mode is not a
    policy it trained as, so ``--eval-mode auto`` evaluates the sampled policy too;
    ``image_obs``: it reads observations of more than one axis."""

    build: Callable
    summary: str
    wrap_env: Optional[Callable] = None
    options: Optional[type] = None
    options_key: Optional[str] = None
    memory: bool = False
    host_envs: bool = True
    bounded_std: bool = False
    stochastic_eval: bool = False
    image_obs: bool = False


def register(name: str, kind: PolicyKind, *, replace: bool = False) -> PolicyKind:
    """Make ``--policy <name>`` available (from a plugin file: ``--plugins my_kind.py``)."""
    if not isinstance(kind, PolicyKind):
        raise TypeError(f"register('{name}', ...) takes a PolicyKind, got {type(kind).__name__}")
    return POLICY_KINDS.register(name, kind, replace=replace, origin=caller_file())


def _positive(owner: str, **sizes) -> None:
    for name, v in sizes.items():
        flag = f"--{owner}.{name.replace('_', '-')}"
        if v < 1:
            raise ConfigError(f"{owner}.{name} must be >= 1, got {v}; pass a positive {flag}")
        if v > MAX_SIZE:
            raise ConfigError(f"{owner}.{name} {v:,} is beyond {MAX_SIZE:,}; pass a smaller "
                              f"{flag}")


@dataclasses.dataclass(frozen=True)
class NetConfig:
    """The networks of every policy kind (--net.<field>)."""

    actor_hidden: tuple[int, ...] = (64, 64)
    """Actor MLP hidden sizes."""
    critic_hidden: tuple[int, ...] = (64, 64)
    """Critic MLP hidden sizes."""
    activation: str = "tanh"
    """Hidden activation: tanh, relu, elu, silu."""
    init_log_std: float = 0.0
    """Initial log standard deviation of the Gaussian policy."""
    std_max: Optional[float] = None
    """Feedforward Gaussian policies (and multi-agent actors): bound the std below this,
    std = std_max * sigmoid(theta) with theta learned (HARL's parametrisation, std_max 0.5);
    None: an unbounded learned log-std."""
    std_min: Optional[float] = None
    """Feedforward Gaussian policies (and multi-agent actors): keep the std above this (std =
    std_min + exp(theta), or within [std_min, std_max] with std_max), so it cannot shrink
    without limit once a task is solved; None: no lower bound."""
    policy_head_gain: float = 0.01
    """Orthogonal-init gain of the policy's output layer: 0.01 starts near the uniform /
    zero-mean policy; larger values start every seed from a different random policy."""

    def validate(self, cfg) -> None:
        from pgjax.model.nets import ACTIVATIONS

        for name in ("actor_hidden", "critic_hidden"):
            sizes = getattr(self, name)
            if any(size < 1 or size > MAX_SIZE for size in sizes):
                fix = " ".join(str(min(max(size, 1), MAX_SIZE)) for size in sizes)
                raise ConfigError(f"net.{name} sizes must be in [1, {MAX_SIZE:,}], got {sizes}; "
                                  f"pass other --net.{name.replace('_', '-')} sizes (e.g. "
                                  f"--net.{name.replace('_', '-')} {fix})")
        check_choice(self.activation, tuple(ACTIVATIONS), "activation", "--net.activation")
        if not self.policy_head_gain > 0:
            raise ConfigError(f"net.policy_head_gain must be > 0, got {self.policy_head_gain}; "
                              f"pass a positive --net.policy-head-gain")
        if self.std_min is not None:
            if not (math.isfinite(self.std_min) and self.std_min > 0):
                raise ConfigError(f"net.std_min must be a positive number, got {self.std_min}; "
                                  f"pass e.g. --net.std-min 0.05, or drop it for no lower bound")
            if not (cfg.scheme is not None or POLICY_KINDS.get(cfg.policy).bounded_std):
                raise ConfigError(f"--net.std-min bounds the feedforward Gaussian's std; "
                                  f"--policy {cfg.policy} has its own: drop --net.std-min")
            if not math.exp(self.init_log_std) > self.std_min:
                raise ConfigError(f"the initial std exp({self.init_log_std:g}) = "
                                  f"{math.exp(self.init_log_std):.4g} must be above net.std_min "
                                  f"{self.std_min:g}; pass a larger --net.init-log-std")
        if self.std_max is None:
            return
        if not (math.isfinite(self.std_max) and self.std_max > (self.std_min or 0)):
            raise ConfigError(f"net.std_max must be a positive number, got {self.std_max}; pass "
                              f"e.g. --net.std-max 0.5, or drop it for an unbounded std")
        if not (cfg.scheme is not None or POLICY_KINDS.get(cfg.policy).bounded_std):
            raise ConfigError(f"--net.std-max bounds the feedforward Gaussian's std; --policy "
                              f"{cfg.policy} has its own: drop --net.std-max")
        if not math.exp(self.init_log_std) < self.std_max:
            raise ConfigError(f"the initial std exp({self.init_log_std:g}) = "
                              f"{math.exp(self.init_log_std):.4g} must be below net.std_max "
                              f"{self.std_max:g}; pass a smaller --net.init-log-std")


@dataclasses.dataclass(frozen=True)
class StatefulConfig:
    """The stateful (S2PG) policy: a sampled internal state z (--stateful.<field>)."""

    z_dim: int = 32
    """Size of the internal state z."""
    z_std: float = 0.5
    """Initial standard deviation of z' (learned, one per z entry), 0.5 as in the S2PG
    authors' PPO runs. Small values make z's share of the joint likelihood ratio dominate
    PPO's clipping (a shift d of z's mean costs d^2 / (2 z_std^2) nats)."""
    prev_action: bool = False
    """Also feed the previous action to the actor and critic."""

    def validate(self, cfg) -> None:
        _positive("stateful", z_dim=self.z_dim)
        if not self.z_std > 0:
            raise ConfigError(f"stateful.z_std must be > 0, got {self.z_std}; pass a positive "
                              f"--stateful.z-std")


@dataclasses.dataclass(frozen=True)
class RecurrentConfig:
    """The recurrent policy: a GRU trained with backpropagation through time
    (--recurrent.<field>)."""

    carry_size: int = 64
    """GRU state size of the actor and of the critic."""
    bptt_len: int = 0
    """Truncation length of backpropagation through time (sequences of this many steps, must
    divide rollout_len); 0: the whole rollout."""

    def validate(self, cfg) -> None:
        _positive("recurrent", carry_size=self.carry_size)
        if self.bptt_len < 0 or (self.bptt_len and cfg.rollout_len % self.bptt_len):
            raise ConfigError(f"recurrent.bptt_len {self.bptt_len} must be 0 or divide "
                              f"rollout_len {cfg.rollout_len}; change --recurrent.bptt-len or "
                              f"--rollout-len")

    def sequences(self, cfg) -> int:
        """Sequences per batch: what the update rule's minibatches divide."""
        return cfg.num_envs * cfg.rollout_len // (self.bptt_len or cfg.rollout_len)


@dataclasses.dataclass(frozen=True)
class WindowConfig:
    """The window policy: a feedforward policy on the last observations (--window.<field>)."""

    size: int = 8
    """Number of most recent observations it sees."""

    def validate(self, cfg) -> None:
        _positive("window", size=self.size)


def _feedforward(kind: str) -> Callable:
    def build(cfg, env):
        n = cfg.net
        return make_actor_critic(env.spec.action, kind, n.actor_hidden, n.critic_hidden,
                                 n.activation, n.init_log_std, n.policy_head_gain, n.std_max,
                                 n.std_min)

    return build


register("auto", PolicyKind(_feedforward("auto"), "Gaussian for Box, categorical for Discrete "
                                                  "actions", bounded_std=True))
register("gaussian", PolicyKind(_feedforward("gaussian"), "a diagonal Gaussian (Box actions)",
                                bounded_std=True))
register("categorical", PolicyKind(_feedforward("categorical"),
                                   "a categorical distribution (Discrete actions)",
                                   bounded_std=True))
register("stateful", PolicyKind(
    lambda cfg, env: make_stateful_policy(env, cfg.net, cfg.stateful),
    "S2PG: a sampled internal state z' is part of the action (--stateful.*)",
    lambda cfg, env: StatefulEnv(env, cfg.stateful.z_dim, cfg.stateful.prev_action),
    StatefulConfig, "stateful", memory=True, stochastic_eval=True))
register("recurrent", PolicyKind(
    lambda cfg, env: make_recurrent_policy(env.spec.action, cfg.net, cfg.recurrent),
    "a GRU trained with backpropagation through time (--recurrent.*)",
    options=RecurrentConfig, options_key="recurrent", memory=True, host_envs=False))
register("window", PolicyKind(
    _feedforward("auto"), "a feedforward policy on the last --window.size observations",
    lambda cfg, env: WindowEnv(env, cfg.window.size), WindowConfig, "window", memory=True,
    bounded_std=True))

__all__ = ["NetConfig", "PolicyKind", "RecurrentConfig", "StatefulConfig", "WindowConfig",
           "register"]
