"""The typed training configuration. Field docstrings become ``pgjax train --help``.

Floats that may differ between runs compiled into one program (``gamma``, ``gae_lambda`` and
each algorithm's ``TRACED`` fields) are *traced hyperparameters*; ``--grid`` sweeps them, and
every grid point runs with every seed, all vmapped together.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path
from typing import Annotated, Optional

import tyro

from pgjax.algos import (ALGORITHMS, BUILTIN, FixPOConfig, PPOConfig, PPOKLConfig, SPOConfig,
                         TRPOConfig)
from pgjax.algos.multiagent import ALIASES, ORDERS, SCHEMES
from pgjax.envs.pomdp import OBSERVE, observation_split
from pgjax.errors import ConfigError
from pgjax.nets import POLICIES
from pgjax.options import (INT_MAX, MAX_SIZE, _check_hparam, _parse_option,  # noqa: F401
                           _typed, load_plugins)

TRAIN_TRACED = ("gamma", "gae_lambda")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Train one update rule on one environment, several seeds and hyperparameters at once."""

    preset: Optional[str] = None
    """A named bundle of a source's settings (pgjax presets lists them with their sources),
    applied before every other option, so explicit flags override it; recorded in
    config.json with every resolved value."""
    algo: str = "ppo"
    """Update rule: ppo, trpo, spo (Simple Policy Optimization, ICML 2025), fixpo or ppo_kl
    (PPO with the adaptive KL penalty); for
    multi-agent training also happo, hatrpo, haspo, hafixpo (sequential updates), mappo
    (simultaneous) and ippo (independent critics)."""
    env: str = "brax:inverted_pendulum"
    """Environment id, <family>:<name>: brax:<any brax.envs name>, gym:<any registered
    Gymnasium id, e.g. gym:Hopper-v5> or jax:cartpole."""
    backend: str = "generalized"
    """Brax physics backend: generalized, positional, spring or mjx."""
    vectorization: str = "sync"
    """Gymnasium vector env: sync (all envs in this process) or async (a worker process per
    env)."""
    seeds: int = 1
    """Number of seeds, run vmapped in one program: seed, seed+1, ..."""
    seed: int = 0
    """First seed."""
    steps: int = 500_000
    """Environment steps per run (rounded up to whole evaluation chunks)."""
    anneal_steps: Optional[int] = None
    """Horizon of every annealed schedule (the learning rate's, with anneal_lr), in env
    steps: the schedule reaches its end after anneal_steps // (num_envs * rollout_len)
    updates, whatever --steps is, so a run shorter than a paper's is an exact prefix of it
    (presets set the paper's horizon); None: the run's own length."""
    num_envs: int = 64
    """Parallel training environments."""
    rollout_len: int = 32
    """Steps per environment per iteration; batch = num_envs * rollout_len."""
    episode_length: Optional[int] = None
    """Time limit (truncation); None: the task's own (1000 for Brax, 500 for jax:cartpole)."""
    reset_pool: str = "rollout"
    """JAX environments: where an environment restarts after an episode ends. rollout: a
    reset pool redrawn with fresh keys once per rollout (new initial states all run long);
    fixed: one reset state per environment drawn at the start and reused for the whole run,
    as Brax's training wrapper does (its training program then contains no simulator reset,
    which shortens compilation). Gymnasium environments reset themselves every episode."""
    gamma: float = 0.99
    """Discount factor (traced)."""
    gae_lambda: float = 0.95
    """GAE lambda (traced)."""
    agent_update: Optional[str] = None
    """Multi-agent scheme for a plain rule: sequential (heterogeneous-agent, HAPPO-style),
    simultaneous (MAPPO-style) or independent (IPPO-style). None: sequential on multi-agent
    envs, single-agent training otherwise. The aliases happo ... ippo set it."""
    agent_order: str = "random"
    """Order of sequential agent updates: random (a new permutation every update), fixed
    or reverse."""
    share_actor: bool = False
    """Multi-agent: one actor shared by all agents (agent id appended to its input)."""
    agent_obs: str = "local"
    """Multi-agent: what each actor sees. local: its partition's view (mabrax: its own and
    neighbouring joints and the root, Multi-Agent MuJoCo's default); full_state_id: the
    whole global state plus a one-hot agent id, as HARL's MA-MuJoCo actors."""
    policy: str = "auto"
    """Policy kind: auto (Gaussian for Box, categorical for Discrete), gaussian, categorical;
    with memory: stateful (S2PG: a sampled internal state, --z-dim), recurrent (GRU trained
    with BPTT, --bptt-len) or window (the last --window observations)."""
    z_dim: int = 32
    """Stateful policy: size of the internal state z."""
    z_std: float = 0.5
    """Stateful policy: initial standard deviation of z' (learned, one per z entry), 0.5 as
    in the S2PG authors' PPO runs. Small values make z's share of the joint likelihood
    ratio dominate PPO's clipping (a shift d of z's mean costs d^2 / (2 z_std^2) nats)."""
    stateful_prev_action: bool = False
    """Stateful policy: also feed the previous action to the actor and critic."""
    carry_size: int = 64
    """Recurrent policy: GRU state size of the actor and of the critic."""
    bptt_len: int = 0
    """Recurrent policy: truncation length of backpropagation through time (sequences of
    this many steps, must divide rollout_len); 0: the whole rollout."""
    window: int = 8
    """Window policy: number of most recent observations it sees."""
    observe: str = "full"
    """Observation filter for partial observability: full, positions (velocities hidden)
    or velocities (positions hidden); locomotion tasks only."""
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
    policy_head_gain: float = 0.01
    """Orthogonal-init gain of the policy's output layer: 0.01 starts near the uniform /
    zero-mean policy; larger values start every seed from a different random policy."""
    normalize_obs: bool = True
    """Running mean/std observation normalisation (statistics kept in the train state)."""
    obs_stats: str = "running"
    """What an update of the observation statistics does to the networks. running: nothing,
    so the same parameters see differently normalised inputs from then on (the reference
    behaviour of cleanrl, Stable-Baselines3 and Brax); preserve: the layers that read the
    observation are refitted so that the policy and value outputs stay what they were."""
    obs_stats_steps: int = 0
    """Update the observation statistics only during the first this many environment steps
    of a run and keep them fixed afterwards (a converged policy then sees the same inputs
    for the same states); 0: update them throughout training."""
    normalize_reward: bool = True
    """Scale rewards by the running std of the discounted return (then clip to +-10)."""
    value_norm: bool = False
    """Keep rewards and advantages raw and train the critic on value targets divided by a
    running std of the lambda-returns (tianshou's rew_norm, as in FixPO's runs; HARL's
    ValueNorm without its mean); needs --no-normalize-reward."""
    reward_scale: float = 1.0
    """Multiply every reward by this constant first (Brax's reward_scaling)."""
    eval_every: int = 10
    """Iterations per chunk: the host prints progress and writes records after each chunk
    (and evaluates after the chunks --evals picks)."""
    evals: int = 1
    """Held-out evaluations per run (--eval-envs deterministic episodes each, inside the
    compiled chunk): 1, after the last chunk only; N >= 2, at step 0 and after N - 1 chunks
    spread evenly over the run, the last one included (Brax's num_evals); more than the
    chunks: after every chunk. Curves between them come from the training episodes."""
    eval_envs: int = 16
    """Evaluation environments (one full episode each)."""
    eval_mode: str = "auto"
    """Policy of the held-out evaluations: deterministic (the distribution's mode, recorded
    as eval_return), stochastic (actions, and a stateful policy's z', sampled as in
    training: eval_return_stochastic) or both; auto: both for --policy stateful (whose mode
    sets the internal state z' to its mean, a policy it never trained as), deterministic
    otherwise."""
    out: str = "runs"
    """Directory under which the run directory is created."""
    name: Optional[str] = None
    """Run directory name; default <algo>_<env>_<timestamp>."""
    grid: tuple[str, ...] = ()
    """Traced-hyperparameter grid, e.g. --grid ppo.lr=1e-4,3e-4 ppo.clip_eps=0.1,0.2."""
    quiet: bool = False
    """Print no progress lines."""
    checkpoint_every: int = 1
    """Save the whole training state (orbax), for --resume, at chunk boundaries that are a
    multiple of this, at most once per --checkpoint-seconds (none after the last chunk: the
    run finishes there); 0: never."""
    checkpoint_seconds: float = 120.0
    """At most one checkpoint per this many seconds of wall clock, so a kill costs at most
    about this much training to redo; 0: at every --checkpoint-every chunks."""
    resume: bool = False
    """Continue the run in --out/--name from its latest checkpoint (same config required);
    starts fresh when there is none."""
    overwrite: bool = False
    """Replace the run already in --out/--name (without it, an existing run is refused)."""
    shard: bool = True
    """Shard the runs (seeds x grid points) across all JAX devices (JAX-path envs)."""
    distributed: bool = False
    """Call jax.distributed.initialize() first (multi-host; process 0 writes the records)."""
    tensorboard: bool = False
    """Also write every metrics row as TensorBoard scalars (runs/<run>/tensorboard/)."""
    wandb: bool = False
    """Also log every metrics row to Weights & Biases (pip install 'pgjax[wandb]')."""
    wandb_project: str = "pgjax"
    """W&B project for --wandb."""
    plugins: tuple[str, ...] = ()
    """Python modules or .py files imported first; they may register new update rules
    (pgjax.algos.register), usable with --algo."""
    algo_options: tuple[str, ...] = ()
    """Settings of a registered (plugin) update rule as name=value, e.g. --algo-options
    lr=1e-3 beta=0.5; built-in rules use their own --<rule>.* options."""
    custom: Annotated[Optional[object], tyro.conf.Suppress] = None
    """(Python API) the config instance of a registered update rule; --algo-options apply
    on top."""
    ppo: PPOConfig = PPOConfig()
    """PPO settings."""
    trpo: TRPOConfig = TRPOConfig()
    """TRPO settings."""
    spo: SPOConfig = SPOConfig()
    """SPO settings (clip_eps is SPO's epsilon)."""
    fixpo: FixPOConfig = FixPOConfig()
    """FixPO settings."""
    ppo_kl: PPOKLConfig = PPOKLConfig()
    """PPO with the adaptive KL penalty (Schulman et al. 2017, sec. 4) settings."""

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
        return "sequential" if self.env.split(":")[0] in ("mabrax", "matrix") else None

    @property
    def algo_config(self):
        """The selected update rule's config: the built-in group (--ppo.* ...) or, for a
        registered rule, ``custom`` (or its defaults) with ``algo_options`` applied."""
        load_plugins(self.plugins)
        rule = self.rule
        if rule in BUILTIN:
            return getattr(self, rule)
        if rule not in ALGORITHMS:
            raise ConfigError(f"unknown algorithm '{self.algo}'; use --algo with one of "
                              f"{', '.join([*ALGORITHMS, *ALIASES])} (or register one from "
                              f"--plugins)")
        cls = ALGORITHMS[rule][0]
        cfg = self.custom if self.custom is not None else cls()
        if not isinstance(cfg, cls):
            raise ConfigError(f"custom config for '{rule}' must be a {cls.__name__}, "
                              f"got {type(cfg).__name__}")
        return dataclasses.replace(cfg, **dict(_parse_option(cls, o) for o in self.algo_options))

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_len

    @property
    def iterations_per_chunk(self) -> int:
        return self.eval_every

    @property
    def num_chunks(self) -> int:
        per_chunk = self.batch_size * self.eval_every
        return max(1, -(-self.steps // per_chunk))

    @property
    def eval_chunks(self) -> tuple[int, ...]:
        """The chunk counts after which the runs are evaluated (0: before training), from
        ``evals``: the last chunk always; with evals >= 2 also step 0, the rest evenly
        spaced between."""
        c = self.num_chunks
        if self.evals <= 1:
            return (c,)
        n = min(self.evals, c + 1)
        return tuple(sorted({(2 * i * c + n - 1) // (2 * (n - 1)) for i in range(n)}))

    @property
    def num_iterations(self) -> int:
        return self.num_chunks * self.eval_every

    @property
    def anneal_iterations(self) -> int:
        """Updates over which annealed schedules run from start to end (``anneal_steps``;
        the run's own updates without it)."""
        if self.anneal_steps is None:
            return self.num_iterations
        return max(1, self.anneal_steps // self.batch_size)

    @property
    def eval_modes(self) -> tuple[str, ...]:
        """The evaluation policies recorded (``eval_mode`` resolved): deterministic and/or
        stochastic."""
        mode = self.eval_mode
        if mode == "auto":
            mode = "both" if self.policy == "stateful" else "deterministic"
        return ("deterministic", "stochastic") if mode == "both" else (mode,)

    def base_hparams(self) -> dict[str, float]:
        hp = {k: float(getattr(self, k)) for k in TRAIN_TRACED}
        hp.update({f"{self.rule}.{k}": v for k, v in self.algo_config.traced().items()})
        return hp

    def parse_grid(self) -> dict[str, list[float]]:
        base, grid = self.base_hparams(), {}
        for item in self.grid:
            key, sep, values = item.partition("=")
            if sep and key not in base and self._is_static(key):
                raise ConfigError(f"--grid {key} is a static option (it changes the compiled "
                                  f"program, so it cannot be vmapped); sweep it in a sweep "
                                  f"file's [static] table, or set one value with "
                                  f"--{key.replace('_', '-')}")
            if not sep or key not in base:
                raise ConfigError(f"bad --grid entry '{item}'; write name=v1,v2 with name one of "
                                  f"{', '.join(base)}")
            if key in grid:
                raise ConfigError(f"--grid names {key} twice; list all its values in one entry: "
                                  f"{key}=v1,v2")
            try:
                grid[key] = [float(v) for v in values.split(",") if v.strip()]
            except ValueError:
                raise ConfigError(f"bad --grid values in '{item}'; give numbers separated by commas") from None
            if not grid[key]:
                raise ConfigError(f"--grid entry '{item}' has no values; write {key}=v1,v2")
            repeated = sorted({v for v in grid[key] if grid[key].count(v) > 1})
            if repeated:
                raise ConfigError(f"--grid {key} lists {repeated[0]:g} twice, so two runs would "
                                  f"share one directory; list each value once")
        return grid

    def _is_static(self, key: str) -> bool:
        """Whether ``key`` (``name`` or ``<rule>.<name>``) is an option that is not traced."""
        head, dot, tail = key.partition(".")
        if not dot:
            return head in {f.name for f in dataclasses.fields(TrainConfig)}
        return head == self.rule and tail in {f.name for f in
                                              dataclasses.fields(self.algo_config)}

    def runs(self) -> list[tuple[int, dict[str, float]]]:
        """Every (seed, traced hyperparameters) pair, grid-major then seed."""
        base, grid = self.base_hparams(), self.parse_grid()
        out = []
        for values in itertools.product(*grid.values()):
            hp = {**base, **dict(zip(grid, values))}
            out.extend((self.seed + i, hp) for i in range(self.seeds))
        return out

    def validate(self) -> None:
        """Check everything that can be checked before building or compiling anything."""
        self.algo_config  # imports plugins; unknown algorithm -> ConfigError
        if self.rule in BUILTIN and self.algo_options:
            raise ConfigError(f"--algo-options is for registered (plugin) rules; set "
                              f"{self.rule}'s options with --{self.rule}.<name>")
        self._validate_agents()
        if self.resume and self.overwrite:
            raise ConfigError("--resume continues the run in --out/--name and --overwrite "
                              "replaces it; pass one of them")
        if self.checkpoint_every < 0:
            raise ConfigError("checkpoint_every must be >= 0; pass --checkpoint-every 0 to "
                              "disable checkpoints")
        if not self.checkpoint_seconds >= 0:
            raise ConfigError(f"checkpoint_seconds must be >= 0, got {self.checkpoint_seconds}; "
                              f"pass --checkpoint-seconds 0 to save every --checkpoint-every "
                              f"chunks")
        for name in ("seeds", "steps", "num_envs", "rollout_len", "eval_every", "evals",
                     "eval_envs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; pass a positive "
                                  f"--{name.replace('_', '-')}")
            if getattr(self, name) > INT_MAX:
                raise ConfigError(f"{name} {getattr(self, name)} is beyond {INT_MAX:,} (int32); "
                                  f"pass a smaller --{name.replace('_', '-')}")
        if not 0 <= self.seed <= INT_MAX - self.seeds:
            raise ConfigError(f"seed must be in [0, {INT_MAX - self.seeds:,}] for {self.seeds} "
                              f"seeds, got {self.seed}; pass a smaller --seed")
        if self.name is not None and (Path(self.name).name != self.name
                                      or self.name in ("", ".", "..") or "\\" in self.name):
            raise ConfigError(f"run name '{self.name}' must be one directory name inside --out; "
                              f"pass --name without '/' or '..' (use --out for the parent)")
        for name in ("actor_hidden", "critic_hidden"):
            if any(size < 1 for size in getattr(self, name)):
                raise ConfigError(f"{name} sizes must be >= 1, got {getattr(self, name)}; pass "
                                  f"positive --{name.replace('_', '-')} sizes")
        self._validate_finite()
        eps = getattr(self.algo_config, "adam_eps", None)
        if eps is not None and not eps > 0:
            raise ConfigError(f"adam_eps must be > 0, got {eps}; pass a small positive "
                              f"--{self.rule}.adam-eps (e.g. 1e-5)")
        if self.agent_obs not in ("local", "full_state_id"):
            raise ConfigError(f"unknown agent_obs '{self.agent_obs}'; pass --agent-obs local or "
                              f"full_state_id")
        if self.agent_obs != "local" and self.scheme is None:
            raise ConfigError("--agent-obs sets what each agent of a multi-agent run sees; "
                              "drop it for single-agent training")
        if self.std_max is not None:
            if not (math.isfinite(self.std_max) and self.std_max > 0):
                raise ConfigError(f"std_max must be a positive number, got {self.std_max}; pass "
                                  f"e.g. --std-max 0.5, or drop it for an unbounded std")
            if self.policy in ("stateful", "recurrent"):
                raise ConfigError(f"--std-max bounds the feedforward Gaussian's std; --policy "
                                  f"{self.policy} has its own: drop --std-max")
            if not math.exp(self.init_log_std) < self.std_max:
                raise ConfigError(f"the initial std exp({self.init_log_std:g}) = "
                                  f"{math.exp(self.init_log_std):.4g} must be below std_max "
                                  f"{self.std_max:g}; pass a smaller --init-log-std")
        if self.eval_mode not in EVAL_MODES:
            raise ConfigError(f"unknown eval_mode '{self.eval_mode}'; pass --eval-mode with one "
                              f"of {', '.join(EVAL_MODES)}")
        if self.anneal_steps is not None:
            if not 1 <= self.anneal_steps <= 2**62:
                raise ConfigError(f"anneal_steps must be >= 1, got {self.anneal_steps}; pass a "
                                  f"positive --anneal-steps (or drop it: the run's own length)")
            if self.anneal_steps < self.steps:
                raise ConfigError(f"anneal_steps {self.anneal_steps:,} is shorter than the run "
                                  f"({self.steps:,} steps): its learning rate would be 0 after "
                                  f"the horizon; pass --anneal-steps >= --steps, or drop it")
        if self.obs_stats not in ("running", "preserve"):
            raise ConfigError(f"unknown obs_stats '{self.obs_stats}'; pass --obs-stats running "
                              f"or preserve")
        if self.preset is not None:
            from pgjax import presets

            presets.get(self.preset)  # ConfigError for an unknown name
        if self.value_norm and self.normalize_reward:
            raise ConfigError("--value-norm scales the value targets instead of the rewards; "
                              "pass --no-normalize-reward with it")
        if not self.reward_scale > 0:
            raise ConfigError(f"reward_scale must be > 0, got {self.reward_scale}; pass a "
                              f"positive --reward-scale")
        if self.obs_stats_steps < 0:
            raise ConfigError(f"obs_stats_steps must be >= 0, got {self.obs_stats_steps}; pass "
                              f"--obs-stats-steps 0 to update the statistics throughout")
        if self.obs_stats == "preserve" and self.scheme is not None:
            raise ConfigError("--obs-stats preserve refits single-agent networks; multi-agent "
                              "training uses --obs-stats running")
        if self.obs_stats == "preserve" and (
                (self.policy in ("stateful", "recurrent") and not self.actor_hidden)
                or (self.policy == "recurrent" and not self.critic_hidden)):
            raise ConfigError("--obs-stats preserve refits the dense layer that reads the "
                              "observation; pass --actor-hidden / --critic-hidden with one or "
                              "more sizes")
        if self.reset_pool not in ("rollout", "fixed"):
            raise ConfigError(f"unknown reset_pool '{self.reset_pool}'; pass --reset-pool "
                              f"rollout or fixed")
        if self.reset_pool == "fixed" and self.env.startswith("gym:"):
            raise ConfigError("--reset-pool fixed applies to JAX environments; a Gymnasium "
                              "environment resets itself every episode: drop --reset-pool")
        if self.vectorization not in ("sync", "async"):
            raise ConfigError(f"unknown vectorization '{self.vectorization}'; pass "
                              f"--vectorization sync or async")
        if self.observe not in OBSERVE:
            raise ConfigError(f"unknown observe '{self.observe}'; pass --observe with one of "
                              f"{', '.join(OBSERVE)}")
        if self.observe != "full":
            observation_split(self.env)  # ConfigError for tasks without a split

        if self.policy not in POLICIES:
            raise ConfigError(f"unknown policy '{self.policy}'; use --policy with one of "
                              f"{', '.join(POLICIES)}")
        if self.policy in ("stateful", "window", "recurrent") and self.scheme is not None:
            raise ConfigError(f"--policy {self.policy} is single-agent; multi-agent training "
                              f"uses per-agent feedforward policies")
        if self.policy == "recurrent":
            if self.env.startswith("gym:"):
                raise ConfigError("--policy recurrent runs on JAX environments (brax:, jax:); "
                                  "for Gymnasium use --policy stateful or window")
            if self.bptt_len < 0 or (self.bptt_len and self.rollout_len % self.bptt_len):
                raise ConfigError(f"bptt_len {self.bptt_len} must be 0 or divide rollout_len "
                                  f"{self.rollout_len}; change --bptt-len or --rollout-len")
        for name in ("z_dim", "window", "carry_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; pass a "
                                  f"positive --{name.replace('_', '-')}")
            if getattr(self, name) > MAX_SIZE:
                raise ConfigError(f"{name} {getattr(self, name):,} is beyond {MAX_SIZE:,}; pass "
                                  f"a smaller --{name.replace('_', '-')}")
        for name in ("actor_hidden", "critic_hidden"):
            if any(size > MAX_SIZE for size in getattr(self, name)):
                raise ConfigError(f"{name} sizes must be <= {MAX_SIZE:,}, got "
                                  f"{getattr(self, name)}; pass smaller --{name.replace('_', '-')}")
        if self.episode_length is not None and self.episode_length > INT_MAX:
            raise ConfigError(f"episode_length {self.episode_length:,} is beyond {INT_MAX:,} "
                              f"(int32); pass a smaller --episode-length")
        family = self.env.partition(":")[0]
        if self.backend != "generalized" and family not in ("brax", "mabrax"):
            raise ConfigError(f"--backend {self.backend} chooses a Brax physics backend; "
                              f"{self.env} is not a Brax environment: drop --backend")
        if self.vectorization != "sync" and family != "gym":
            raise ConfigError(f"--vectorization {self.vectorization} applies to Gymnasium "
                              f"environments; {self.env} steps inside the compiled program: drop "
                              f"--vectorization")
        if not self.z_std > 0:
            raise ConfigError(f"z_std must be > 0, got {self.z_std}; pass a positive --z-std")
        if not self.policy_head_gain > 0:
            raise ConfigError(f"policy_head_gain must be > 0, got {self.policy_head_gain}; pass "
                              f"a positive --policy-head-gain")
        if self.episode_length is not None and self.episode_length < 1:
            raise ConfigError("episode_length must be >= 1; pass a positive --episode-length")
        for seed, hp in self.runs():
            for key, v in hp.items():
                _check_hparam(key.split(".")[-1], v)
        if self.policy == "recurrent":
            sequences = self.num_envs * self.rollout_len // (self.bptt_len or self.rollout_len)
            self.algo_config.validate(sequences, self.rule,
                                      "sequences (num_envs x rollout_len / bptt_len)")
        else:
            self.algo_config.validate(self.batch_size, self.rule)

    def _validate_finite(self) -> None:
        """Every float option, of the run and of its update rule, is a finite number."""
        for owner, prefix in ((self, "--"), (self.algo_config, f"--{self.rule}.")):
            for f in dataclasses.fields(owner):
                v = getattr(owner, f.name)
                if isinstance(v, float) and not math.isfinite(v):
                    raise ConfigError(f"{f.name} must be a finite number, got {v}; pass a finite "
                                      f"{prefix}{f.name.replace('_', '-')}")

    def with_options(self, options: dict, where: str = "the options",
                     every_rule: bool = False) -> "TrainConfig":
        """This config with fields set from ``{name: value}`` (lists become tuples);
        ``<rule>.<field>`` sets a built-in rule's option: that of the selected rule only, or
        of every rule named when ``every_rule`` (presets, which hold settings for several)."""
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        plain, nested = {}, {}
        for key, value in options.items():
            key = key.replace("-", "_")
            head, dot, tail = key.partition(".")
            if dot:
                if head not in BUILTIN or not hasattr(getattr(self, head), tail):
                    raise ConfigError(f"unknown option '{key}' in {where}; use <rule>.<field> "
                                      f"with a field of that rule's config (see pgjax train "
                                      f"--help)")
                if every_rule or head == self.rule:
                    nested.setdefault(head, {})[tail] = _typed(
                        key, value, getattr(getattr(self, head), tail), where)
            elif key not in fields:
                raise ConfigError(f"unknown option '{key}' in {where}; use a `pgjax train` "
                                  f"option (see pgjax train --help)")
            else:
                plain[key] = _typed(key, value, getattr(TrainConfig, key, None), where)
        cfg = dataclasses.replace(self, **plain)
        for head, values in nested.items():
            cfg = dataclasses.replace(cfg, **{head: dataclasses.replace(getattr(cfg, head),
                                                                        **values)})
        return cfg

    @classmethod
    def from_record(cls, recorded: dict) -> "TrainConfig":
        """The config a run directory's ``config.json`` records (its ``"config"`` entry, as
        ``to_dict`` wrote it): every field, the selected rule's options included."""
        fields = {f.name for f in dataclasses.fields(cls)}
        options = {}
        for key, value in {**LEGACY, **recorded}.items():
            if key in BUILTIN and isinstance(value, dict):
                options.update({f"{key}.{k}": v for k, v in value.items()})
            elif key in fields:
                options[key] = value
        return cls().with_options(options, "the recorded config", every_rule=True)

    def with_preset(self, name: Optional[str]) -> "TrainConfig":
        """This config with preset ``name`` applied for its environment (every option the
        preset sets is overwritten; ``preset`` records the name)."""
        if name is None:
            return self
        from pgjax import presets

        return dataclasses.replace(self.with_options(presets.resolve(name, self.env),
                                                     f"preset {name}", every_rule=True),
                                   preset=name)

    @classmethod
    def from_preset(cls, name: str, **options) -> "TrainConfig":
        """Preset ``name`` for ``options["env"]`` (or the default env), then ``options``
        (``<rule>.<field>`` keys allowed): the Python form of ``pgjax train --preset``."""
        base = cls(**{k: v for k, v in options.items() if k == "env"}).with_preset(name)
        return base.with_options(options, "the options", every_rule=True)

    def with_name(self) -> "TrainConfig":
        """This config with a run-directory name (the default: <algo>_<env>_<timestamp>)."""
        if self.name:
            return self
        import time

        return dataclasses.replace(
            self, name=f"{self.algo}_{self.env.replace(':', '-')}_{time.strftime('%Y%m%d-%H%M%S')}")

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "custom"}
        d = {k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
             for k, v in d.items() if k == self.rule or k not in BUILTIN}
        if self.rule not in BUILTIN:
            d[self.rule] = dataclasses.asdict(self.algo_config)
        return d

    def _validate_agents(self) -> None:
        family = self.env.split(":")[0]
        if self.agent_update is not None and self.agent_update not in SCHEMES:
            raise ConfigError(f"unknown agent update '{self.agent_update}'; pass --agent-update "
                              f"with one of {', '.join(SCHEMES)}")
        if self.algo in ALIASES and self.agent_update not in (None, ALIASES[self.algo][1]):
            raise ConfigError(f"--algo {self.algo} means --agent-update {ALIASES[self.algo][1]}; "
                              f"drop --agent-update or use --algo {self.rule}")
        if self.agent_order not in ORDERS:
            raise ConfigError(f"unknown agent order '{self.agent_order}'; pass --agent-order with "
                              f"one of {', '.join(ORDERS)}")
        if self.scheme is None and family in ("mabrax", "matrix"):
            raise ConfigError(f"{self.env} is a multi-agent environment; pick --agent-update")
        if self.scheme is not None and family == "gym":
            raise ConfigError("multi-agent training runs on JAX environments (mabrax:, matrix:, "
                              "brax:, jax:); Gymnasium envs are single-agent")
        if self.share_actor and self.scheme == "independent":
            raise ConfigError("--share-actor needs a centralised critic; use --agent-update "
                              "sequential or simultaneous")


EVAL_MODES = ("auto", "deterministic", "stochastic", "both")
# what a record written before an option existed implies for it (the behaviour of then)
LEGACY = {"anneal_steps": None, "eval_mode": "deterministic", "agent_obs": "local",
          "std_max": None}


