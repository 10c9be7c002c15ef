"""Trained policies from run directories: ``pgjax.load_policy`` and ``pgjax eval``.

    pgjax eval runs/ppo_hopper --episodes 100            # every run, fresh episodes
    pgjax eval runs/ppo_hopper --final-keys              # the run's own last evaluation again
    pgjax eval sweeps/locomotion                         # each run directory of a sweep

A run directory's ``config.json`` rebuilds the training config, and each run's
``params.msgpack`` holds its parameters and observation statistics, so a trained policy can be
evaluated again (``evaluate``: every finished run of the directory vmapped in one program, the
same evaluation as the trainer's, on fresh reset keys) or used from Python (``load_policy``:
``act`` and ``mode`` on the task's own observations, with the saved normalisation, and the
memory of stateful, window and recurrent kinds carried from step to step).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from pgjax.core import plugin_files
from pgjax.training.config import TrainConfig
from pgjax.envs import family_of
from pgjax.core.errors import ConfigError
from pgjax.core.evaluation import STOCHASTIC
from pgjax.core.files import write_csv
from pgjax.analysis import results
from pgjax.analysis.results import MIN_SEEDS, bootstrap_ci, spread_label
from pgjax.loop.records import load_params
from pgjax.core.rundir import is_finished, read_json, readable, run_status
from pgjax.loop.runner import VmappedRuns, eval_keys_at, run_keys, stack_hparams
from pgjax.training.train import Trainer, build_env



def in_process(cfg: TrainConfig) -> TrainConfig:
    """``cfg`` with its environment family's settings for stepping in this process (a
    family's options may say how, with ``in_process()``: Gymnasium's sync vector env)."""
    options = cfg.env_options
    if not hasattr(options, "in_process"):
        return cfg
    return dataclasses.replace(cfg, **{family_of(cfg.env)[0].options_key: options.in_process()})

def _run_dir_root(path) -> tuple[Path, str | None]:
    """(run directory, run id or None) for a run directory or one of its ``runs/<id>``."""
    path = Path(path)
    if (path / "params.msgpack").exists() and (path.parent.parent / "config.json").exists():
        return path.parent.parent, path.name
    if not (path / "config.json").exists():
        raise ConfigError(f"{path} is not a run directory (no config.json); pass a directory "
                          f"that `pgjax train` or `pgjax sweep` wrote")
    return path, None


def _finished_runs(root: Path, record: dict, only: str | None):
    """[(run record, run dir)] of the runs with parameters, failed runs left out (named); an
    unknown run id ``only`` is refused with the ids there are."""
    ids = [r["id"] for r in record["runs"]]
    if only is not None and only not in ids:
        from pgjax.core.errors import did_you_mean

        raise ConfigError(f"no run '{only}' in {root}{did_you_mean(only, ids)}; pass --run "
                          f"with one of {', '.join(ids)}")
    out = []
    for r in record["runs"]:
        d = root / "runs" / r["id"]
        if only is not None and r["id"] != only:
            continue
        if run_status(d) is not None:
            print(f"pgjax eval: {r['id']} failed during training; not evaluated",
                  file=sys.stderr)
            continue
        if not (d / "params.msgpack").exists():
            continue
        out.append((r, d))
    if not out:
        which = f"run '{only}'" if only else "runs"
        raise ConfigError(f"no {which} with saved parameters in {root}; pass a run directory "
                          f"whose runs trained for at least one chunk")
    return out


def _restore(target, saved: list[dict]):
    """Saved per-run trees (from ``params.msgpack``) stacked into ``target``'s structure."""
    from flax import serialization

    trees = [serialization.from_state_dict(jax.tree.map(lambda x: x[0], target), s)
             for s in saved]
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *trees)


def read_config(root: Path, record: dict, trust_plugins: bool = False, plugins=(),
                allow_changed_plugins: bool = False, command: str = "pgjax eval"):
    """The training config of run directory ``root`` (its ``config.json`` as ``record``),
    with the run's own plugin copies imported where trusted (``pgjax.core.plugin_files``)."""
    loaded = plugin_files.recorded(root, record, trust_plugins, plugins,
                                   allow_changed_plugins, command)
    return TrainConfig.from_record(record["config"], plugins=loaded)


def evaluate(path, episodes: int = 16, seed: int = 0, stochastic: bool = False,
             final_keys: bool = False, run: str | None = None,
             include_unfinished: bool = False, trust_plugins: bool = False, plugins=(),
             allow_changed_plugins: bool = False) -> pd.DataFrame:
    """Every finished run of a run directory (or one run), ``episodes`` episodes each (one per
    eval env, all runs vmapped): a table with group, run, seed, episodes, the mean return with
    its 95% bootstrap CI over episodes, the std and the mean length. Keys come from ``seed``
    (fresh episodes), or with ``final_keys`` from the run's own last evaluation (its eval env
    count too), which reproduces the ``eval_return`` it recorded last. Where the environment
    reports outcomes (SMAX's won battles), ``success_rate`` is the fraction that succeeded. An unfinished run
    directory (killed, or still training) is refused unless ``include_unfinished``: then
    its latest parameters are evaluated and the table's ``finished`` column says so.
    A run that trained with plugins imports its recorded copies only when trusted
    (``trust_plugins``, or trained by this user here); ``plugins`` replaces copies by name,
    and a changed file needs ``allow_changed_plugins`` (``pgjax.core.plugin_files``)."""
    root, only = _run_dir_root(path)
    if not readable(root, include_unfinished, "eval"):
        raise ConfigError(f"{root} is unfinished; resume it first, or pass "
                          f"--include-unfinished to evaluate its latest parameters as they are")
    record = read_json(root / "config.json", "the run's config.json")
    cfg = read_config(root, record, trust_plugins, plugins, allow_changed_plugins)
    if final_keys and cfg.evals == 0:
        raise ConfigError(f"{root} was trained with --evals 0: it has no last evaluation to "
                          f"reproduce; drop --final-keys (fresh episodes from --seed)")
    if final_keys:
        episodes = cfg.eval_envs
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}; pass a positive number")
    runs = _finished_runs(root, record, only or run)
    cfg = in_process(dataclasses.replace(cfg, eval_envs=episodes))
    pairs = [(r["seed"], r["hparams"]) for r, _ in runs]
    trainer = Trainer(cfg, env=build_env(cfg, 1), check_envs=False)  # a stand-in train env
    try:
        fns = VmappedRuns(trainer)
        train_keys, eval_keys = run_keys(pairs)
        state = fns.init(train_keys, stack_hparams(pairs))
        saved = [load_params(d / "params.msgpack") for _, d in runs]
        state = state.replace(params=_restore(state.params, [s["params"] for s in saved]),
                              obs_stats=_restore(state.obs_stats,
                                                 [s["obs_stats"] for s in saved]))
        if final_keys:  # the keys of the run's last evaluation, after chunk num_chunks
            keys = eval_keys_at(eval_keys, cfg.num_chunks)
            if stochastic:  # Trainer.evaluate's stochastic evaluation has a key of its own
                keys = jax.vmap(STOCHASTIC.key)(keys)
        else:  # per run from --seed and the run's seed; 2**20 is no chunk index
            keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(seed), s))(
                jnp.asarray([r["seed"] for r, _ in runs]))
            keys = eval_keys_at(keys, 2**20)
        fn = jax.jit(jax.vmap(lambda st, k: trainer.episodes(st, k, stochastic)))
        returns, lengths, won = map(np.asarray, fn(state, keys))
        success = bool(trainer.eval_env.spec.success)
    finally:
        trainer.close()
    rows, finished = [], is_finished(root)
    table = results.runs([root], include_unfinished=True, command="")
    groups = dict(zip(table["id"], table["group"]))
    for (r, _), ret, length, w in zip(runs, returns, lengths, won):
        lo, hi = bootstrap_ci(ret)
        rows.append({"group": groups[r["id"]], "run": r["id"],
                     "seed": r["seed"], "finished": finished, "episodes": len(ret),
                     "policy": "stochastic" if stochastic else "deterministic",
                     "return_mean": float(ret.mean()), "ci95_lo": lo, "ci95_hi": hi,
                     "return_std": float(ret.std()), "length_mean": float(length.mean()),
                     **({"success_rate": float(w.mean())} if success else {})})
    return pd.DataFrame(rows)


def group_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per group: the mean over runs of their mean returns, with a 95% bootstrap CI over
    runs (blank below ``MIN_SEEDS`` runs, whose range ``spread`` names instead)."""
    rows = []
    for group, g in table.groupby("group"):
        x = g["return_mean"].to_numpy()
        lo, hi = bootstrap_ci(x) if len(x) >= MIN_SEEDS else (np.nan, np.nan)
        rows.append({"group": group, "runs": len(g), "episodes_per_run": int(g["episodes"].max()),
                     "return_mean": float(x.mean()), "ci95_lo": lo, "ci95_hi": hi,
                     "spread": spread_label(len(x)), "range_lo": float(x.min()),
                     "range_hi": float(x.max()),
                     **({"success_rate": float(g["success_rate"].mean())}
                        if "success_rate" in g else {})})
    return pd.DataFrame(rows)


class ActingCarry(NamedTuple):
    """What a trained policy carries between steps: its own carry (recurrent kinds) and the
    memory the training environment wrapper kept (stateful: z and the previous action;
    window: the last observations)."""

    policy: Any
    memory: Any


class TrainedPolicy:
    """One trained run's policy acting on the task's own observations (a batch [N, ...]).

    ``act(obs, key, carry)`` samples and ``mode(obs, carry)`` takes the distribution's mode;
    both return ``(action, carry)`` with the action as the task takes it. Pass the carry of
    the previous step (None: a fresh episode for every row) and restart rows whose episode
    ended with ``reset(carry, done)``. Observations are normalised with the saved statistics.
    """

    def __init__(self, path, run: str | None = None, trust_plugins: bool = False,
                 plugins=(), allow_changed_plugins: bool = False):
        root, only = _run_dir_root(path)
        readable(root, True, "load_policy")  # damaged: an error; unfinished: a note
        record = read_json(root / "config.json", "the run's config.json")
        self.cfg = cfg = read_config(root, record, trust_plugins, plugins,
                                     allow_changed_plugins, "load_policy")
        (r, d), = _finished_runs(root, record, only or run)[:1]
        self.run, self.seed, self.root = r["id"], r["seed"], root
        trainer = Trainer(in_process(cfg), env=build_env(cfg, 1), eval_env=False,
                          check_envs=False)  # one env to act in
        self.env, self.policy, self.normalizer = trainer.env, trainer.policy, trainer.normalizer
        target = trainer.init_learner(jax.random.PRNGKey(0), {k: float(v) for k, v in
                                                             r["hparams"].items()})
        saved = load_params(d / "params.msgpack")
        from flax import serialization

        state = target.replace(
            params=serialization.from_state_dict(target.params, saved["params"]),
            obs_stats=serialization.from_state_dict(target.obs_stats, saved["obs_stats"]))
        self.params, self.obs_stats = state.params, state.obs_stats
        self._norm = trainer.normalizer(state)
        self._act = jax.jit(self._step, static_argnums=3)
        trainer.env.close()

    def initial_carry(self, n: int) -> ActingCarry:
        memory = self.env.start_memory(n) if hasattr(self.env, "start_memory") else None
        return ActingCarry(self.policy.initial_carry(n), memory)

    def reset(self, carry: ActingCarry, done) -> ActingCarry:
        done = jnp.asarray(done, bool)
        memory = carry.memory
        if memory is not None:
            memory = self.env.restart_memory(memory, done)
        return ActingCarry(self.policy.reset_carry(carry.policy, done), memory)

    def _step(self, carry: ActingCarry, obs, key, deterministic: bool):
        memory = carry.memory
        if memory is not None:
            memory, obs = self.env.observe_memory(memory, obs)
        h, x = self.policy.act(self.params.actor, carry.policy, self._norm(obs), key,
                               deterministic=deterministic)
        if memory is not None:
            memory, x = self.env.act_memory(memory, x)
        return x, ActingCarry(h, memory)

    def act(self, obs, key, carry: ActingCarry | None = None):
        obs = jnp.asarray(obs)
        carry = self.initial_carry(obs.shape[0]) if carry is None else carry
        return self._act(carry, obs, key, False)

    def mode(self, obs, carry: ActingCarry | None = None):
        obs = jnp.asarray(obs)
        carry = self.initial_carry(obs.shape[0]) if carry is None else carry
        return self._act(carry, obs, None, True)


def load_policy(path, run: str | None = None, trust_plugins: bool = False, plugins=(),
                allow_changed_plugins: bool = False) -> TrainedPolicy:
    """The trained policy of a run directory (its first finished run, or ``run``), or of one
    ``runs/<id>`` directory: see ``TrainedPolicy``. A run trained with plugins imports its
    own copies of them, only when trusted: ``trust_plugins=True``, or the run was trained by
    this user on this machine (``pgjax.core.plugin_files``); ``plugins`` replaces copies by file
    name, and one whose content differs needs ``allow_changed_plugins=True``."""
    return TrainedPolicy(path, run, trust_plugins, plugins, allow_changed_plugins)


def add_plugin_options(p: argparse.ArgumentParser) -> None:
    """The options of a reader (``pgjax eval``/``render``) for a run's plugins."""
    p.add_argument("--trust-plugins", action="store_true",
                   help="import the plugin code the run carries (its plugins/ copies) even "
                        "though it was not trained by you on this machine; read it first")
    p.add_argument("--plugins", nargs="+", default=[], metavar="FILE",
                   help="use these files in place of the run's copies of the same name")
    p.add_argument("--allow-changed-plugins", action="store_true",
                   help="use a --plugins file whose content differs from the recorded one")


def eval_folder(path, run: str | None = None,
                include_unfinished: bool = False) -> list[Path] | None:
    """The run directories to evaluate in a folder of them (a sweep's, found as ``pgjax plot``
    finds them), or None where ``path`` is not such a folder (a run directory, one of its
    ``runs/<id>``, or nothing). Unfinished ones are left out with a note unless
    ``include_unfinished``; with ``run``, those without that run id."""
    path = Path(path)
    if not path.is_dir() or (path / "config.json").exists() or (path / "params.msgpack").exists():
        return None
    roots = [r for r in results.find_run_dirs([path], "eval")
             if include_unfinished or is_finished(r) or readable(r, False, "eval")]
    if run is not None:
        ids = {r: [x["id"] for x in read_json(r / "config.json", "the run's config.json")["runs"]]
               for r in roots}
        if not any(run in i for i in ids.values()):
            from pgjax.core.errors import did_you_mean

            known = sorted({x for i in ids.values() for x in i})
            raise ConfigError(f"no run '{run}' in the run directories under {path}"
                              f"{did_you_mean(run, known)}; pass --run with one of "
                              f"{', '.join(known)}")
        roots = [r for r in roots if run in ids[r]]
    if not roots:
        raise ConfigError(f"{path} holds no finished run directory; pass a run directory or a "
                          f"folder of them (or --include-unfinished for unfinished ones)")
    return roots


def _print_tables(table: pd.DataFrame) -> None:
    with pd.option_context("display.width", 160, "display.max_columns", 12):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
        print(group_table(table).to_string(index=False, float_format=lambda v: f"{v:.2f}"))


def eval_main(argv: list[str]) -> int:
    from pgjax.core.arguments import ArgumentParser

    p = ArgumentParser("pgjax eval", __doc__)
    p.add_argument("path", help="a run directory (every finished run), one of its runs/<id>, "
                                "or a folder of run directories (a sweep's: each one evaluated)")
    p.add_argument("--episodes", type=int, default=16, help="episodes per run (default 16)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--stochastic", action="store_true",
                   help="sample actions instead of taking the distribution's mode")
    p.add_argument("--final-keys", action="store_true",
                   help="the run's own last evaluation keys and env count (reproduces its "
                        "last recorded eval_return)")
    p.add_argument("--run", default=None, help="evaluate this run id only")
    p.add_argument("--out", default=None,
                   help="CSV to write (default: <path>/eval.csv; for a folder of run "
                        "directories, each one's eval.csv, or with --out one CSV of them all "
                        "with a run_dir column)")
    p.add_argument("--include-unfinished", action="store_true",
                   help="evaluate an unfinished run directory's latest parameters (the table's "
                        "finished column says so)")
    add_plugin_options(p)
    a = p.parse_args(argv)
    if a.episodes < 1 and not a.final_keys:
        print(f"pgjax eval: error: --episodes must be >= 1, got {a.episodes}; pass a positive "
              f"number (e.g. --episodes 16)", file=sys.stderr)
        return 2

    def evaluated(path):
        return evaluate(path, a.episodes, a.seed, a.stochastic, a.final_keys, a.run,
                        a.include_unfinished, a.trust_plugins, a.plugins,
                        a.allow_changed_plugins)

    try:
        roots = eval_folder(a.path, a.run, a.include_unfinished)
        if roots is None:
            table = evaluated(a.path)
    except ConfigError as e:
        print(f"pgjax eval: error: {e}", file=sys.stderr)
        return 2
    if roots is None:
        out = Path(a.out) if a.out else _run_dir_root(a.path)[0] / "eval.csv"
        write_csv(table, out)
        _print_tables(table)
        print(f"wrote {out}")
        return 0
    tables, written = [], []
    for root in roots:
        try:
            table = evaluated(root)
        except ConfigError as e:
            print(f"pgjax eval: error: {root}: {e}", file=sys.stderr)
            return 2
        print(f"{root}:")
        _print_tables(table)
        if a.out is None:
            write_csv(table, root / "eval.csv")
            written.append(root / "eval.csv")
        tables.append(table.assign(run_dir=str(root))[["run_dir", *table.columns]])
    if a.out is not None:
        write_csv(pd.concat(tables, ignore_index=True), a.out)
        written.append(Path(a.out))
    print("wrote " + ", ".join(map(str, written)))
    return 0


__all__ = ["ActingCarry", "TrainedPolicy", "evaluate", "group_table", "load_policy"]
