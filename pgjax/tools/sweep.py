"""``pgjax sweep <file.toml>``: a grid of algorithms x environments x hyperparameters x seeds.

Example (``experiments/sweeps/quickstart.toml`` is a small runnable one, the README's first
command; ``experiments/sweeps/locomotion.toml`` a larger one)::

    name = "locomotion"            # the sweep directory: <out>/<name>/
    out = "sweeps"
    algos = ["ppo", "trpo", "spo", "fixpo"]
    envs = ["brax:hopper", "gym:Hopper-v5"]
    seeds = 3

    [config]                       # any `pgjax train` option, for every group
    steps = 500000
    "ppo.epochs" = 10              # an update rule's option (applies to that rule's groups)
    "net.std_max" = "none"         # unsets an option a preset set (TOML has no null)

    [env_config."gym:Hopper-v5"]   # options for one environment only
    num_envs = 1
    rollout_len = 2048

    [grid]                         # traced hyperparameters, vmapped inside one program
    "ppo.lr" = [1e-4, 3e-4]
    gamma = [0.99, 0.995]

    [static]                       # static options: one compiled program per combination
    "net.actor_hidden" = [[64, 64], [256, 256]]

A top-level ``preset = "NAME"`` (or a ``[static]`` list ``preset = [...]``) applies a named
preset (``pgjax presets``) to each group first; the sweep's algorithm, then ``[config]``,
``[env_config]`` and ``[static]`` override it.

Every (algorithm, environment, static combination) is a *group*: one ``pgjax train`` run
directory ``<out>/<name>/<group>/`` whose seeds and grid points are vmapped into one program
and compiled once. Every config is built and validated before anything runs. Groups run
environment by environment and static combination by combination, every algorithm of one
comparison in turn, so a sweep stopped midway leaves finished comparisons rather than one
algorithm's groups on every task.

Resumable: run the same command again. Finished groups (``status.json``) are skipped,
interrupted ones continue from their latest checkpoint (or start over if they had none). All
records are written atomically, so a kill at any moment loses no finished run and leaves no
torn file. A group whose runs fail (non-finite values, algorithm errors) or that raises is
recorded in ``<out>/<name>/sweep.json`` and the sweep carries on. ``--only GLOB`` runs a
subset of the groups (e.g. the short ones first); the whole sweep's records stay in one place.

Several processes can share one sweep: run the same command in each (on the cores or
machines of one filesystem). A group another process is training is left to it (its run
directory is locked) and this one goes on to the next; ``sweep.json`` is changed under a
lock, so no process loses another's entries.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import sys
import time
import tomllib
from pathlib import Path

from pgjax.training.config import TrainConfig, config_class
from pgjax.core.errors import EXIT_RUNS_FAILED, ConfigError, InUse, did_you_mean
from pgjax.training.options import option_names, toml_value
from pgjax.loop.records import atomic_write_json, inspect, is_finished, read_json
from pgjax.tools.sweep_spec import (SCHEMA, TOP_KEYS, _check_schema,  # noqa: F401 (re-exported)
                                    _check_targets, _flat_tables, _group, _rule_option, sweep_hint)

SETTINGS = "settings.json"  # in the sweep directory: {group: the config it is run with}
SHARED = "__shared__"  # its entry for what every group shares, whichever groups ran
SHARED_KEYS = ("seeds", "seed", "preset", "config")  # (--set and [config] land here)


def _shown(value) -> str:
    """A setting as a refusal names it (``unset``: the sweep file leaves it to the default)."""
    return "unset" if value is None else repr(value)


@dataclasses.dataclass
class Sweep:
    root: Path
    groups: dict  # group name -> TrainConfig
    shared: dict | None = None  # the settings every group shares (SHARED_KEYS of the spec)

    @classmethod
    def from_file(cls, path, overrides: list[str] = (), name: str | None = None) -> "Sweep":
        path = Path(path)
        if not path.exists():
            raise ConfigError(f"sweep file {path} not found; pass the path of a .toml file")
        try:
            spec = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"sweep file {path} is not valid TOML ({e}); fix the syntax") from None
        plugins = spec.get("config", {}).get("plugins") if isinstance(spec.get("config"),
                                                                      dict) else None
        if isinstance(plugins, list):  # plugin files are found beside the sweep file
            spec["config"]["plugins"] = [
                str((path.parent / p).resolve()) if isinstance(p, str) and p.endswith(".py")
                and not Path(p).expanduser().is_absolute() else p for p in plugins]
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"bad --set '{item}'; write key=value (e.g. steps=1000000)")
            try:
                parsed = tomllib.loads(f"v = {value}")["v"]
            except tomllib.TOMLDecodeError:
                parsed = value
            if key in ("seeds", "seed", "out", "name"):
                spec[key] = parsed
            else:
                spec.setdefault("config", {})[key] = parsed
        if name:
            spec["name"] = name
        return cls.from_dict(spec, default_name=path.stem)

    @classmethod
    def from_dict(cls, spec: dict, default_name: str = "sweep") -> "Sweep":
        for key in sorted(set(spec) - TOP_KEYS):
            if key.replace("-", "_") in option_names(config_class(TrainConfig)):
                raise ConfigError(f"unknown sweep key '{key}': it is a `pgjax train` option; "
                                  f"move it to [config] (or to [env_config.\"<env>\"])")
            raise ConfigError(f"unknown sweep key '{key}'{did_you_mean(key, TOP_KEYS)}; use "
                              f"{', '.join(sorted(TOP_KEYS))}")
        for key in ("algos", "envs"):
            if not isinstance(spec.get(key), list) or not spec[key]:
                raise ConfigError(f"the sweep needs a non-empty list '{key}', e.g. write "
                                  f"{key} = {toml_value(['ppo'] if key == 'algos' else ['jax:cartpole'])}")
        spec = _flat_tables(spec)
        _check_schema(spec)
        plugins = (spec.get("config") or {}).get("plugins", [])
        if not isinstance(plugins, list) or not all(isinstance(p, str) for p in plugins):
            raise ConfigError(f"[config] plugins must be a list of .py files or module names, "
                              f"got {plugins!r}; write plugins = "
                              f"[{plugins!r}]" if isinstance(plugins, str) else
                              f"[config] plugins must be a list of .py files or module names, "
                              f"got {plugins!r}; write plugins = [\"my_plugin.py\"]")
        root = Path(spec.get("out", "sweeps")) / spec.get("name", default_name)
        static = spec.get("static", {})
        grid = spec.get("grid", {})
        for k, v in list(static.items()) + list(grid.items()):
            if not isinstance(v, list) or not v:
                raise ConfigError(f"'{k}' in [grid]/[static] must be a non-empty list of values")
        rules = {a: dataclasses.replace(TrainConfig(), algo=a).rule for a in spec["algos"]}
        _check_targets(spec, set(rules.values()))
        groups = {}
        shared = [k for k in static if not _rule_option(k)]
        # comparison-major order: for each environment and shared [static] combination, every
        # algorithm in turn, so each finished block of groups is a comparison already
        for env in spec["envs"]:
            for shared_values in itertools.product(*(static[k] for k in shared)):
                for algo in spec["algos"]:
                    # a rule's [static] options multiply that rule's groups only
                    own = [k for k in static if k.partition(".")[0] == rules[algo]]
                    for own_values in itertools.product(*(static[k] for k in own)):
                        chosen = {**dict(zip(shared, shared_values)), **dict(zip(own, own_values))}
                        combo = {k: chosen[k] for k in static if k in chosen}  # names: file order
                        cfg = _group(spec, root, algo, env, combo, grid)
                        if cfg.name in groups:
                            raise ConfigError(f"two groups of the sweep would share the "
                                              f"directory {cfg.name}; list each [static] "
                                              f"value once, and tell values apart by more "
                                              f"than spaces, quotes and punctuation")
                        groups[cfg.name] = cfg
        from pgjax.training.train import check

        if any(c.distributed for c in groups.values()):
            import jax

            from pgjax.loop.runner import initialize_distributed

            if not jax.distributed.is_initialized():  # before building any environment
                initialize_distributed()
        try:
            check(groups.values())
        except ConfigError as e:  # the message of `pgjax train`, told as the file writes it
            raise ConfigError(sweep_hint(str(e))) from None
        shared = json.loads(json.dumps({k: spec[k] for k in SHARED_KEYS if k in spec},
                                       default=str))
        return cls(root=root, groups=groups, shared=shared)

    def select(self, patterns: list[str]) -> "Sweep":
        """The sweep restricted to the groups whose name matches one of ``patterns``
        (shell-style globs, e.g. ``"*hopper*"``), kept in the file's order; records and
        ``sweep.json`` stay shared with the whole sweep, so a later full run skips them."""
        import fnmatch

        for pat in patterns:
            if not any(fnmatch.fnmatchcase(k, pat) for k in self.groups):
                raise ConfigError(f"--only '{pat}' matches no group of the sweep; list the "
                                  f"groups with --dry-run")
        chosen = {k: v for k, v in self.groups.items()
                  if any(fnmatch.fnmatchcase(k, pat) for pat in patterns)}
        return dataclasses.replace(self, groups=chosen)

    def status(self) -> dict:
        """``sweep.json`` (a summary of the groups' own records); a damaged one is started
        anew with a warning: every group's state is in its run directory."""
        path = self.root / "sweep.json"
        if not path.exists():
            return {"groups": {}}
        try:
            st = read_json(path, "sweep.json", "")
            if isinstance(st, dict) and isinstance(st.get("groups"), dict) and all(
                    isinstance(v, dict) and isinstance(v.get("status"), str)
                    for v in st["groups"].values()):
                return st
        except ConfigError:
            pass
        print(f"pgjax sweep: warning: {path} is damaged; it is rewritten from the groups' "
              f"own records as they run", file=sys.stderr)
        return {"groups": {}}

    def check_existing(self) -> None:
        """Before anything trains: every group that already has a run directory can continue
        into it with this sweep's config (a finished group with other settings is not
        reported as finished, a changed group is not found only after others trained)."""
        from pgjax.loop.runner import check_resumable

        for name, cfg in self.groups.items():
            found = inspect(self.root / name)
            if found.state == "new":
                continue
            if found.state in ("damaged", "foreign"):
                raise ConfigError(f"group {name}: {found.reason}")
            try:
                check_resumable(cfg, self.root / name)
            except ConfigError as e:
                raise ConfigError(f"group {name}: {e}; run the changed sweep under a new name "
                                  f"(--name), or restore the sweep's settings") from None

    def run(self, log=print) -> dict:
        """Run every unfinished group that no other process is training; returns the sweep
        status (``sweep.json``: groups trained elsewhere and not yet finished are absent)."""
        from pgjax.loop.runner import run

        self.check_existing()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            import os
            import tempfile

            fd, probe = tempfile.mkstemp(dir=self.root, prefix=".write-test.", suffix=".tmp")
            os.close(fd)  # a new file (O_EXCL): never one a link at a fixed name leads to
            os.unlink(probe)
        except OSError as e:
            raise ConfigError(f"cannot write the sweep directory {self.root} ({e.strerror}); "
                              f"pass a writable out (--set out=...)") from None
        self.check_settings()
        status = self.status()
        total = len(self.groups)
        found = {}  # entries of groups found finished: written to sweep.json together
        for i, (name, cfg) in enumerate(self.groups.items(), 1):
            if is_finished(self.root / name):
                other = self._finished_otherwise(name, cfg)
                if other:  # finished by a process that did not record its settings
                    log(f"[{i}/{total}] {name}: error: {other}")
                    found[name] = {"status": "error", "error": other}
                    continue
                log(f"[{i}/{total}] {name}: finished, skipped")
                self._relabel(name, cfg, log)
                if name not in status["groups"]:  # a rebuilt sweep.json
                    done = read_json(self.root / name / "status.json", "status.json")
                    found[name] = {"status": "finished",
                                   "failed_runs": done.get("failed_runs", {})}
                continue
            if found:  # in sweep.json before this group trains
                status, found = self.record_all(found, status), {}
            log(f"[{i}/{total}] {name}: {cfg.seeds} seeds x {len(cfg.runs()) // cfg.seeds} "
                f"grid points")
            t = time.time()
            try:
                records = run(cfg, log=log, strict=False)
                if records is None:  # a process other than the first writes no records
                    continue
                failed = {records.run_dirs[r].name: m for r, m in records.failed.items()}
                entry = {"status": "finished", "failed_runs": failed}
            except InUse:
                log(f"[{i}/{total}] {name}: another pgjax process is training it; left to it")
                continue
            except ConfigError:
                raise
            except Exception as e:  # a group that crashes is recorded; the sweep carries on
                entry = {"status": "error", "error": f"{type(e).__name__}: {e}"}
                log(f"[{i}/{total}] {name}: error: {entry['error']}")
            entry["wall_time_s"] = round(time.time() - t, 1)
            status = self.record(name, entry, status)
        return self.record_all(found, status) if found else status

    def check_settings(self) -> None:
        """The sweep directory records the settings each of its groups is run with
        (``SETTINGS``: {group: config}), written by the first process that runs the group:
        another process (or a later run) whose groups differ (other ``--set`` values, an
        edited sweep file) is refused with one line before anything trains, so that one
        folder never mixes two settings, even where neither process has started a group
        yet. Processes with the same settings share the sweep as before; groups not yet
        recorded are added."""
        from filelock import FileLock

        from pgjax.loop.runner import RESUME_IGNORED, config_differences

        path = self.root / SETTINGS
        if not _writer():
            return
        if (self.root / ".sweep.lock").is_symlink():
            (self.root / ".sweep.lock").unlink()
        with FileLock(self.root / ".sweep.lock"):
            recorded = read_json(path, SETTINGS, f"restore it, or delete it if every group's "
                                                 f"own config.json is intact (they are "
                                                 f"checked as each group runs)") \
                if path.exists() else {}
            if not isinstance(recorded, dict) or not all(isinstance(v, dict)
                                                         for v in recorded.values()):
                raise ConfigError(f"{path} is damaged (not a table of groups); restore it, "
                                  f"or delete it if every group's own config.json is intact")
            for name, cfg in self.groups.items():
                if name not in recorded or name == SHARED:
                    continue
                diff = config_differences(cfg, recorded[name], path)
                if diff:
                    raise ConfigError(f"the sweep {self.root} is run with other settings "
                                      f"(group {name}: {', '.join(diff)}); rerun it with the "
                                      f"same sweep file and --set values, or pass another "
                                      f"--name for the new settings")
            then, keys = recorded.get(SHARED), []
            if self.shared is not None and then is not None and then != self.shared:
                for k in sorted(set(then) | set(self.shared)):
                    a, b = then.get(k), self.shared.get(k)
                    if isinstance(a, dict) and isinstance(b, dict):  # [config]: name the option
                        keys += [f"{o} ({_shown(a.get(o))} recorded, {_shown(b.get(o))} now)"
                                 for o in sorted(set(a) | set(b)) if a.get(o) != b.get(o)
                                 and str(o).split(".")[0] not in RESUME_IGNORED]
                    elif a != b:
                        keys.append(f"{k} ({_shown(a)} recorded, {_shown(b)} now)")
            if keys:
                raise ConfigError(f"the sweep {self.root} is run with other settings (shared "
                                  f"by every group, whichever --only selects: "
                                  f"{', '.join(keys)}); rerun it with the same sweep file and "
                                  f"--set values, or pass another --name for the new settings")
            new = {name: json.loads(json.dumps(cfg.to_dict(), default=str))
                   for name, cfg in self.groups.items() if name not in recorded}
            if self.shared is not None and SHARED not in recorded:
                new[SHARED] = self.shared
            if new:
                try:
                    atomic_write_json(path, {**recorded, **new})
                except OSError as e:  # before anything trains: bad input's exit code
                    from pgjax.core.files import storage_message

                    raise ConfigError(storage_message(e)) from None

    def _relabel(self, name: str, cfg, log) -> None:
        """A finished group takes the sweep file's ``label`` (the name tables and figures
        give it; nothing it trained depends on it): its config.json is rewritten with it."""
        path = self.root / name / "config.json"
        record = read_json(path, "config.json")
        if (record["config"].get("label") or "") == cfg.label:
            return
        record["config"]["label"] = cfg.label
        atomic_write_json(path, record, within=self.root / name)
        from pgjax.analysis.plots import summarize

        summarize(self.root / name)  # summary.csv names the groups by the label too
        log(f"  {name}: label set to {cfg.label!r} (nothing retrained)")

    def _finished_otherwise(self, name: str, cfg) -> str | None:
        """Why the finished group ``name`` is not this sweep's (its config.json records
        other settings), or None."""
        from pgjax.loop.runner import RESUME_IGNORED, config_differences

        path = self.root / name / "config.json"
        try:
            diff = config_differences(cfg, read_json(path, "config.json").get("config"), path)
        except ConfigError as e:
            return str(e)
        return f"finished with other settings ({', '.join(diff)})" if diff else None

    def record(self, name: str, entry: dict, status: dict) -> dict:
        """Set group ``name``'s entry of ``sweep.json`` and return the whole status. The file is
        read, changed and written under a lock, so processes sharing the sweep keep each
        other's entries; a process that writes no records (not process 0 of a distributed
        run) adds the entry to its own ``status``."""
        return self.record_all({name: entry}, status)

    def record_all(self, entries: dict, status: dict) -> dict:
        """``record`` of every {group: entry} in one reading and writing of ``sweep.json``
        (the groups a run finds finished: one write for all, not one per group, each of
        the whole file)."""
        from filelock import FileLock

        if not _writer():
            status["groups"].update(entries)
            return status
        with FileLock(self.root / ".sweep.lock"):
            status = self.status()
            status["groups"].update(entries)
            atomic_write_json(self.root / "sweep.json", status)
        return status


def _writer() -> bool:
    """Whether this process writes the sweep's records (process 0 of a distributed run)."""
    import jax

    return jax.process_index() == 0

def sweep_main(argv: list[str]) -> int:
    from pgjax.core.arguments import ArgumentParser

    p = ArgumentParser("pgjax sweep", __doc__)
    p.add_argument("file", help="sweep description (.toml)")
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                   help="override [config] options or seeds/out (e.g. --set steps=1000000 seeds=10)")
    p.add_argument("--name", default=None, help="sweep directory name (default: the file's)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the groups only")
    p.add_argument("--plot", action="store_true", help="run `pgjax plot` on the sweep at the end")
    p.add_argument("--only", nargs="+", default=[], metavar="GLOB",
                   help="run only the groups whose name matches a pattern (e.g. --only "
                        "'*halfcheetah*'); the others are left as they are")
    a = p.parse_args(argv)
    try:
        sweep = Sweep.from_file(a.file, a.set, a.name)
        if a.only:
            sweep = sweep.select(a.only)
    except ConfigError as e:
        print(f"pgjax sweep: error: {e}", file=sys.stderr)
        return 2
    if a.dry_run:
        for name, cfg in sweep.groups.items():
            print(f"{name}: {len(cfg.runs())} runs, {cfg.num_iterations * cfg.batch_size:,} "
                  f"env steps each")
        return 0
    log = lambda *x: print(*x, flush=True)
    try:
        status = sweep.run(log=log)
    except ConfigError as e:
        print(f"pgjax sweep: error: {e}", file=sys.stderr)
        return 2
    entries = {k: status["groups"].get(k) for k in sweep.groups}
    bad = {k: v for k, v in entries.items()
           if v is not None and (v["status"] != "finished" or v.get("failed_runs"))}
    elsewhere = [k for k, v in entries.items() if v is None]
    print(f"sweep {sweep.root}: {len(sweep.groups) - len(bad) - len(elsewhere)}/"
          f"{len(sweep.groups)} groups finished without failures")
    for k, v in bad.items():
        print(f"  {k}: {v.get('error') or v.get('failed_runs')}")
    for k in elsewhere:
        print(f"  {k}: being trained by another process")
    if a.plot:
        from pgjax.tools.plotting import plot_main

        plot_main([str(sweep.root)])
    return EXIT_RUNS_FAILED if bad else 0
