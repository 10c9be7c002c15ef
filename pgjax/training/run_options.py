"""The run's own settings, which every training config has whatever its components: seeds,
the step budget and its chunks, the task's time limit and observation, evaluation, records
and checkpoints (``RunOptions``, the base of ``pgjax.training.config.TrainConfig``)."""
from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path
from typing import Optional

from pgjax.envs.pomdp import OBSERVE, observation_split
from pgjax.core.errors import ConfigError, check_choice
from pgjax.training.options import INT_MAX, check_counts
from pgjax.core.registry import POLICY_KINDS

RESET_POOLS = ("rollout", "fixed", "update")  # --reset-pool: see RunOptions.reset_pool

EVAL_MODES = ("auto", "deterministic", "stochastic", "both")
DIAGNOSTICS = ("cheap", "full")


MAX_NAME_BYTES = 255  # a directory name on the common file systems


def name_part(text: str) -> str:
    """``text`` (an env id, an option's value) as part of a run directory's name: whitespace
    and quotes dropped, every other character but letters, digits and ``. _ , = + -`` made
    ``-`` (path and family separators, brackets that shells and ``--only`` globs read), so
    a namespaced id (``gym:ns/Env-v0``) or a tuple value names one plain directory."""
    return re.sub(r"[^A-Za-z0-9._,=+-]", "-", re.sub(r"[\s'\"]+", "", text))


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """Seeds, budget, evaluation and records of a run."""

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
    """Environments stepped in the compiled program: where one restarts after an episode
    ends. rollout: a reset pool redrawn with fresh keys once per rollout (new initial states
    all run long); fixed: one reset state per environment drawn at the start and reused for
    the whole run, as Brax's training wrapper does (its training program then contains no
    simulator reset, which shortens compilation); update: every environment starts a fresh
    episode before each rollout (as Brax's trainer resets them between updates: training
    episodes are then at most one rollout long, cut episodes bootstrapped; only those that
    end within a rollout have a training return). Host environments reset themselves."""
    observe: str = "full"
    """Observation filter for partial observability: full, positions (velocities hidden)
    or velocities (positions hidden); locomotion tasks only."""
    eval_every: int = 10
    """Iterations per chunk: the host prints progress and writes records after each chunk
    (and evaluates after the chunks --evals picks)."""
    evals: int = 1
    """Held-out evaluations per run (--eval-envs episodes each, a compiled program of its own
    dispatched after the chunk it follows):
    1, after the last chunk only; N >= 2, at step 0 and after N - 1 chunks spread evenly
    over the run, the last one included (Brax's num_evals); more than the chunks: after
    every chunk. Curves between them come from the training episodes. 0: none (the
    evaluation program is never compiled; the records hold the training episodes' returns
    only, which tables and plots then use; ``pgjax eval`` evaluates the saved policy later)."""
    eval_envs: int = 16
    """Evaluation environments (one full episode each)."""
    eval_mode: str = "auto"
    """Policy of the held-out evaluations: deterministic (the distribution's mode, recorded
    as eval_return), stochastic (actions, and a stateful policy's z', sampled as in
    training: eval_return_stochastic) or both; auto: both for a policy kind whose mode is not
    a policy it trained as (--policy stateful: the mode sets the internal state z' to its
    mean), deterministic otherwise."""
    diagnostics: str = "cheap"
    """Per-update diagnostics recorded. cheap: what the update and the rollout give for free
    (losses, approx-KL and clip fraction per minibatch, gradient norm, explained variance,
    training returns, the statistics' drift, non-finite checks); full: also those that need
    extra forward passes: the behaviour policy against the updated one over the whole batch
    (kl_mean, kl_max, ratio_dev_max, entropy), what the statistics update alone does to the
    policy and values (kl_stats_*, value_stats_shift) and the change on reset states
    (kl_reset_*, mode_shift_reset_max)."""
    out: str = "runs"
    """Directory under which the run directory is created."""
    name: Optional[str] = None
    """Run directory name; default <algo>_<env>_<timestamp>."""
    label: str = ""
    """The name tables and figures give this run directory's groups (``{option}`` is
    replaced by that option's value, e.g. "{algo} memoryless"); empty: the algorithm, with
    the options that tell it apart from the other directories shown."""
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
    """Shard the runs (seeds x grid points) across all JAX devices (in-program envs)."""
    distributed: bool = False
    """Call jax.distributed.initialize() first (multi-host; process 0 writes the records)."""
    tensorboard: bool = False
    """Also write every metrics row as TensorBoard scalars (runs/<run>/tensorboard/)."""
    wandb: bool = False
    """Also log every metrics row to Weights & Biases (pip install 'pgjax[wandb]')."""
    wandb_project: str = "pgjax"
    """W&B project for --wandb."""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.rollout_len

    @property
    def iterations_per_chunk(self) -> int:
        return self.eval_every

    @property
    def num_chunks(self) -> int:
        return max(1, -(-self.steps // (self.batch_size * self.eval_every)))

    @property
    def eval_chunks(self) -> tuple[int, ...]:
        """The chunk counts after which the runs are evaluated (0: before training), from
        ``evals``: none for 0; else the last chunk always; with evals >= 2 also step 0,
        the rest evenly spaced between."""
        c = self.num_chunks
        if self.evals == 0:
            return ()
        if self.evals == 1:
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
            kind = POLICY_KINDS.get(getattr(self, "policy", "auto"), None)
            mode = "both" if kind is not None and kind.stochastic_eval else "deterministic"
        return ("deterministic", "stochastic") if mode == "both" else (mode,)

    def runs(self) -> list[tuple[int, dict[str, float]]]:
        """Every (seed, traced hyperparameters) pair, grid-major then seed."""
        base, grid = self.base_hparams(), self.parse_grid()
        out = []
        for values in itertools.product(*grid.values()):
            hp = {**base, **dict(zip(grid, values))}
            out.extend((self.seed + i, hp) for i in range(self.seeds))
        return out

    def with_name(self):
        """This config with a run-directory name (the default: <algo>_<env>_<timestamp>)."""
        if self.name:
            return self
        import time

        stamp = time.strftime('%Y%m%d-%H%M%S')
        env = name_part(getattr(self, "env", "env"))
        return dataclasses.replace(self, name=f"{getattr(self, 'algo', 'run')}_{env}_{stamp}")

    def validate_run(self, family) -> None:
        """The run's own settings (``family``: the environment's ``EnvFamily``)."""
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
        check_counts(self, ("seeds", "steps", "num_envs", "rollout_len", "eval_every",
                            "eval_envs"))
        if not 0 <= self.evals <= INT_MAX:
            raise ConfigError(f"evals must be in [0, {INT_MAX:,}], got {self.evals}; pass "
                              f"--evals 1 (after the last chunk) or --evals 0 (none)")
        if not 0 <= self.seed <= INT_MAX - self.seeds:
            raise ConfigError(f"seed must be in [0, {INT_MAX - self.seeds:,}] for {self.seeds} "
                              f"seeds, got {self.seed}; pass --seed in that range (e.g. "
                              f"--seed 0)")
        if self.name is not None and (Path(self.name).name != self.name
                                      or self.name in ("", ".", "..") or "\\" in self.name):
            raise ConfigError(f"run name '{self.name}' must be one directory name inside --out; "
                              f"pass --name without '/' or '..' (use --out for the parent)")
        if self.name is not None and len(self.name.encode()) > MAX_NAME_BYTES:
            raise ConfigError(f"run name '{self.name[:40]}...' is {len(self.name.encode())} "
                              f"bytes, more than a directory name may hold "
                              f"({MAX_NAME_BYTES}); pass a shorter --name (in a sweep: "
                              f"shorter [static] values or env ids)")
        check_choice(self.diagnostics, DIAGNOSTICS, "diagnostics", "--diagnostics")
        check_choice(self.eval_mode, EVAL_MODES, "eval_mode", "--eval-mode")
        if self.anneal_steps is not None:
            if not 1 <= self.anneal_steps <= 2**62:
                raise ConfigError(f"anneal_steps must be >= 1, got {self.anneal_steps}; pass a "
                                  f"positive --anneal-steps (or drop it: the run's own length)")
            if self.anneal_steps < self.steps:
                raise ConfigError(f"anneal_steps {self.anneal_steps:,} is shorter than the run "
                                  f"({self.steps:,} steps): its learning rate would be 0 after "
                                  f"the horizon; pass --anneal-steps >= --steps, or drop it")
        check_choice(self.reset_pool, RESET_POOLS, "reset_pool", "--reset-pool")
        if self.reset_pool != "rollout" and family.host:
            raise ConfigError(f"--reset-pool {self.reset_pool} applies to environments "
                              "stepped in the compiled program; a host environment resets "
                              "itself every episode: drop --reset-pool (use the default)")
        if self.reset_pool == "update" and self.evals == 0:
            raise ConfigError("--reset-pool update ends every training episode after one "
                              "rollout, so only those that end sooner have a return and "
                              "--evals 0 would report them alone; pass --evals 1 or more")
        if self.observe not in OBSERVE:
            raise ConfigError(f"unknown observe '{self.observe}'; pass --observe with one of "
                              f"{', '.join(OBSERVE)}")
        if self.observe != "full":
            observation_split(self.env)  # ConfigError for tasks without a split
        if self.preset is not None:
            from pgjax.training import presets

            presets.get(self.preset)  # ConfigError for an unknown name
        if self.episode_length is not None and not 1 <= self.episode_length <= INT_MAX:
            raise ConfigError(f"episode_length must be in [1, {INT_MAX:,}] (int32), got "
                              f"{self.episode_length:,}; pass another --episode-length")
