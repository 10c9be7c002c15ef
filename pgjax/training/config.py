"""The typed training configuration: the run's own settings composed with one sub-config per
component (update rules, policy kinds, env families, agents). Field docstrings become
``pgjax train --help``.

Fields declared ``traced`` (``pgjax.core.hparams``: ``gamma``, ``gae_lambda`` here, each rule's
own) are *traced hyperparameters*; ``--grid`` sweeps them, and every grid point runs with every seed,
all vmapped together. Flags, sweep-file keys, presets and Python names are spelled alike:
``--stateful.z-dim`` / ``"stateful.z_dim"`` / ``TrainConfig(stateful=StatefulConfig(...))``.
"""
from __future__ import annotations

import dataclasses
from typing import Annotated, Optional

import tyro

from pgjax.algos import ALGORITHMS
from pgjax.algos.multiagent import ALIASES, AgentsConfig
from pgjax.envs import family_of
from pgjax.core.errors import ConfigError, check_choice
from pgjax.core.hparams import traced, traced_fields
from pgjax.training.kinds import NetConfig
from pgjax.model.advantages import FORMS
from pgjax.model.normalize import NormConfig
from pgjax.training.options import (INT_MAX, LEGACY, RENAMED, _parse_option,
                                    check_finite, component_options, config_class, fill_label,
                                    flat_options, load_plugins, parse_grid, with_options)
from pgjax.core.registry import AGENT_SCHEMES, POLICY_KINDS, plugin_loaded
from pgjax.training.run_options import RunOptions


@dataclasses.dataclass(frozen=True)
class TrainConfig(RunOptions):
    """Train one update rule on one environment, several seeds and hyperparameters at once."""

    preset: Optional[str] = None
    """A named bundle of a source's settings (pgjax presets lists them with their sources),
    applied before every other option, so explicit flags override it; recorded in
    config.json with every resolved value."""
    algo: str = "ppo"
    """Update rule: ppo, trpo, spo (Simple Policy Optimization, ICML 2025), fixpo, ppo_kl
    (PPO with the adaptive KL penalty) or a registered one; for multi-agent training also
    happo, hatrpo, haspo, hafixpo (sequential updates), mappo (simultaneous), ippo."""
    env: str = "brax:inverted_pendulum"
    """Environment id, <family>:<name>: brax:<any brax.envs name>, gym:<any registered
    Gymnasium id, e.g. gym:Hopper-v5>, jax:cartpole, mabrax:<body split>, matrix:<game>, or
    a registered family's."""
    policy: str = "auto"
    """Policy kind: auto (Gaussian for Box, categorical for Discrete), gaussian, categorical;
    with memory: stateful (S2PG: a sampled internal state, --stateful.*), recurrent (GRU
    trained with BPTT, --recurrent.*) or window (the last --window.size observations)."""
    agent_update: Optional[str] = None
    """Multi-agent scheme for a plain rule: sequential (heterogeneous-agent, HAPPO-style),
    simultaneous (MAPPO-style) or independent (IPPO-style). None: sequential on multi-agent
    envs, single-agent training otherwise. The aliases happo ... ippo set it."""
    gamma: float = traced(0.99)
    """Discount factor (traced)."""
    gae_lambda: float = traced(0.95)
    """GAE lambda (traced)."""
    gae_segment: Optional[int] = None
    """GAE within segments of this many steps of each rollout, each segment's last step
    bootstrapped from the value of its next observation, as Brax's PPO computes it per
    unroll (unroll_length); None: over the whole rollout."""
    advantage: str = "gae"
    """The policy's advantage: gae (GAE), or lambda-return (r_t + gamma * G_{t+1} - V(s_t),
    with G the lambda-return: Brax's PPO, IMPALA's policy gradient). Value targets are the
    lambda-returns either way."""
    grid: tuple[str, ...] = ()
    """Traced-hyperparameter grid, e.g. --grid ppo.lr=1e-4,3e-4 ppo.clip_eps=0.1,0.2."""
    plugins: tuple[str, ...] = ()
    """Python modules or .py files imported first; they may register update rules,
    environment families, policy kinds and agent schemes (pgjax.core.registry)."""
    algo_options: tuple[str, ...] = ()
    """Settings of the update rule as name=value, e.g. --algo-options lr=1e-3 beta=0.5
    (the same as --<rule>.<name> value; applied after them)."""
    custom: Annotated[Optional[object], tyro.conf.Suppress] = None
    """(Python API) the config instance of the update rule, in place of its --<rule>.*
    settings; --algo-options apply on top."""
    norm: NormConfig = NormConfig()
    """Observation and reward normalisation."""
    net: NetConfig = NetConfig()
    """Networks of every policy kind."""
    agents: AgentsConfig = AgentsConfig()
    """Multi-agent training."""
    # one sub-config per registered component with settings of its own (policy kinds'
    # --stateful.* ..., environment families' --brax.* ..., update rules' --ppo.* ...):
    # added from the registries by ``config_class``, the built-in ones as a plugin's

    @property
    def rule(self) -> str:
        """The update rule's name (``ppo`` for ``--algo happo``): the prefix of its
        ``--<rule>.*`` options and traced hyperparameters."""
        return ALIASES[self.algo][0] if self.algo in ALIASES else self.algo

    @property
    def scheme(self) -> Optional[str]:
        """The multi-agent scheme, or None for single-agent training."""
        if self.algo in ALIASES:
            return ALIASES[self.algo][1]
        if self.agent_update is not None:
            return self.agent_update
        return "sequential" if family_of(self.env)[0].multi_agent else None

    def section(self, key: str):
        """The sub-config ``key`` (``--<key>.*``: ``norm``, ``net``, ``agents``, or the
        settings a registered component declares: a rule's, a policy kind's, an environment
        family's); a component registered after this config's class was made (a plugin
        loaded later) has its defaults."""
        if any(f.name == key for f in dataclasses.fields(self)):
            return getattr(self, key)
        cls = component_options(key)
        return cls() if cls is not None else None

    @property
    def algo_config(self):
        """The selected update rule's config (``--<rule>.*``, or ``custom`` in Python) with
        ``algo_options`` applied."""
        load_plugins(self.plugins)
        if self.rule not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm '{self.algo}'; use --algo with one of "
                              f"{', '.join([*ALGORITHMS, *ALIASES])} (or register one from "
                              f"--plugins)")
        cls = ALGORITHMS[self.rule].config
        cfg = self.custom if self.custom is not None else self.section(self.rule)
        if not isinstance(cfg, cls):
            raise ConfigError(f"custom config for '{self.rule}' must be a {cls.__name__}, "
                              f"got {type(cfg).__name__}")
        return dataclasses.replace(cfg, **dict(_parse_option(cls, o) for o in self.algo_options))

    @property
    def env_options(self):
        """The settings of this run's environment family (its sub-config), or None."""
        key = family_of(self.env)[0].options_key
        return self.section(key) if key else None

    def used(self) -> tuple[str, ...]:
        """The sub-configs this run reads: normalisation, networks, its rule's, and those of
        its policy kind, environment family and agent setting."""
        load_plugins(self.plugins)
        keys = ["norm", "net", self.rule, POLICY_KINDS.get(self.policy).options_key,
                family_of(self.env)[0].options_key, "agents" if self.scheme else None]
        return tuple(k for k in keys if k is not None)

    def base_hparams(self) -> dict[str, float]:
        hp = {k: float(getattr(self, k)) for k in traced_fields(self)}
        hp.update({f"{self.rule}.{k}": v for k, v in self.algo_config.traced().items()})
        return hp

    def parse_grid(self) -> dict[str, list[float]]:
        def is_static(key):
            head, dot, tail = key.partition(".")
            owner = self if not dot else self.algo_config if head == self.rule else \
                self.section(head)
            return dataclasses.is_dataclass(owner) and hasattr(owner, tail or head)

        return parse_grid(self.grid, self.base_hparams(), is_static)

    def validate(self) -> None:
        """Check everything that can be checked before building or compiling anything."""
        load_plugins(self.plugins)
        family, _ = family_of(self.env)
        kind = POLICY_KINDS.get(self.policy)
        if self.label:
            fill_label(self.label, flat_options(self.to_dict()))
        self.algo_config  # unknown algorithm -> ConfigError
        if self.algo in ALIASES and self.agent_update not in (None, ALIASES[self.algo][1]):
            raise ConfigError(f"--algo {self.algo} means --agent-update {ALIASES[self.algo][1]}; "
                              f"drop --agent-update or use --algo {self.rule}")
        if self.agent_update is not None:
            AGENT_SCHEMES.get(self.agent_update)
        if self.scheme is not None and getattr(self.algo_config, "recompute_adv", False):
            raise ConfigError(f"--{self.rule}.recompute-adv is for single-agent training, and "
                              f"this run is multi-agent (agent update {self.scheme}); drop "
                              f"--{self.rule}.recompute-adv")
        if not kind.host_envs and family.host:
            raise ConfigError(f"--policy {self.policy} runs on environments stepped inside the "
                              f"compiled program; {self.env} is stepped on the host (use "
                              f"--policy stateful or window)")
        self.validate_run(family)
        check_choice(self.advantage, FORMS, "advantage", "--advantage")
        if self.gae_segment is not None and not 1 <= self.gae_segment <= self.rollout_len:
            raise ConfigError(f"gae_segment must be in [1, {self.rollout_len}] (the rollout's "
                              f"length), got {self.gae_segment}; pass --gae-segment in that "
                              f"range, or drop it for GAE over the whole rollout")
        for key in self.used():  # the sub-configs of components not used are not read
            if key not in ALGORITHMS:
                getattr(self.section(key), "validate", lambda cfg: None)(self)
        check_finite(self)
        from pgjax.training.options import check_hparams

        check_hparams(self)  # every run's traced values: the options', or the grid's
        own = self.section(kind.options_key) if kind.options_key else None
        if hasattr(own, "sequences"):  # a kind that trains on sequences, not transitions
            self.algo_config.validate(own.sequences(self), self.rule,
                                      "sequences (num_envs x rollout_len / bptt_len)")
        else:
            self.algo_config.validate(self.batch_size, self.rule)

    def with_options(self, options: dict, where: str = "the options",
                     every_rule: bool = False) -> "TrainConfig":
        """This config with fields set from ``{name: value}`` (lists become tuples);
        ``<config>.<field>`` sets a sub-config's field; a rule's only for the selected rule,
        or for every rule named when ``every_rule`` (presets hold settings for several)."""
        return with_options(self, options, where, renamed=RENAMED,
                            skip=lambda head: head in ALGORITHMS and not (every_rule
                                                                          or head == self.rule))

    @classmethod
    def from_record(cls, recorded: dict, plugins=None) -> "TrainConfig":
        """The config a run directory's ``config.json`` records (its ``"config"`` entry, as
        ``to_dict`` wrote it, by this version or an earlier one). Reading a record imports
        nothing: its plugins must be loaded already (``pgjax.core.plugin_files.recorded`` imports
        a run's copies, trusted), else a ``ConfigError``; ``plugins`` (loaded) replaces the
        recorded list (the run's copies, read from another folder)."""
        given = recorded.get("plugins") or ()
        if plugins is None:
            plugins = given
            if isinstance(given, str) or not all(isinstance(p, str) and plugin_loaded(p)
                                                 for p in given):
                raise ConfigError(f"the recorded config needs the plugins {list(given)}, "
                                  f"which are not loaded; read the run with pgjax eval, "
                                  f"render or load_policy, which import its recorded copies")
        cls = config_class(cls, tuple(plugins))
        fields = {f.name for f in dataclasses.fields(cls)}
        recorded = {**recorded, "plugins": list(plugins)}
        options = dict(LEGACY)
        for key, value in recorded.items():
            key = key if isinstance(value, dict) else RENAMED.get(key, key)
            if key.partition(".")[0] in fields:
                options[key] = value
        return cls().with_options(options, "the recorded config", every_rule=True)

    def with_preset(self, name: Optional[str]) -> "TrainConfig":
        """This config with preset ``name`` applied for its environment (every option the
        preset sets is overwritten; ``preset`` records the name)."""
        if name is None:
            return self
        from pgjax.training import presets

        return dataclasses.replace(self.with_options(presets.resolve(name, self.env),
                                                     f"preset {name}", every_rule=True),
                                   preset=name)

    @classmethod
    def from_preset(cls, name: str, **options) -> "TrainConfig":
        """Preset ``name`` for ``options["env"]`` (or the default env), then ``options``
        (``<config>.<field>`` keys allowed): the Python form of ``pgjax train --preset``."""
        base = cls(**{k: v for k, v in options.items() if k == "env"}).with_preset(name)
        return base.with_options(options, "the options", every_rule=True)

    def to_dict(self) -> dict:
        """Every option, with the sub-configs this run reads (``used``) as tables."""
        used = self.used()
        d = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "custom" or (dataclasses.is_dataclass(v) and f.name not in used):
                continue
            d[f.name] = dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v
        d[self.rule] = dataclasses.asdict(self.algo_config)  # --algo-options / custom applied
        return d


# the sub-configs of the built-in components, from the registries as a plugin's are
TrainConfig = config_class(TrainConfig)

__all__ = ["INT_MAX", "LEGACY", "RENAMED", "TrainConfig", "config_class"]
