"""A sweep file's format: its top-level keys and their checks, and the config of one group."""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

from pgjax.training.config import TrainConfig, config_class
from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.training.options import exact, flat_options, option_names, toml_key, toml_value
from pgjax.training.run_options import name_part

TOP_KEYS = {"name", "out", "algos", "envs", "seeds", "seed", "preset", "config", "env_config",
            "grid", "static"}


def _fmt(v) -> str:
    if isinstance(v, (list, tuple)):
        return "x".join(_fmt(x) for x in v)
    return exact(v) if isinstance(v, float) else str(v)


# what each top-level key of a sweep file must be: (check, how to write it)
SCHEMA = {
    "name": (lambda v: isinstance(v, str) and v and "/" not in v and v not in (".", ".."),
             'a directory name, e.g. name = "my_sweep"'),
    "out": (lambda v: isinstance(v, str) and v, 'a path, e.g. out = "sweeps"'),
    "algos": (lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
              'a non-empty list of names, e.g. algos = ["ppo", "spo"]'),
    "envs": (lambda v: isinstance(v, list) and v and all(isinstance(x, str) for x in v),
             'a non-empty list of ids, e.g. envs = ["brax:hopper"]'),
    "seeds": (lambda v: isinstance(v, int) and not isinstance(v, bool),
              "an integer, e.g. seeds = 5"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool),
             "an integer, e.g. seed = 0"),
    "preset": (lambda v: isinstance(v, str), 'a preset name, e.g. preset = "cleanrl"'),
    "config": (lambda v: isinstance(v, dict), "a table: [config] with option = value lines"),
    "env_config": (lambda v: isinstance(v, dict) and all(isinstance(x, dict)
                                                         for x in v.values()),
                   'tables: [env_config."brax:hopper"] with option = value lines'),
    "grid": (lambda v: isinstance(v, dict), '[grid] with "rule.option" = [v1, v2] lines'),
    "static": (lambda v: isinstance(v, dict), "[static] with option = [v1, v2] lines"),
}


def _check_schema(spec: dict) -> None:
    """Every top-level key of a sweep file has the type it needs: a one-line error that
    shows how to write it otherwise."""
    for key, (ok, how) in SCHEMA.items():
        if key in spec and not ok(spec[key]):
            raise ConfigError(f"sweep key '{key}' = {spec[key]!r} has the wrong form; write it "
                              f"as {how}")
    for table, each in (("grid", "one value per grid point"), ("static", "one group per value")):
        for k, v in spec.get(table, {}).items():
            if isinstance(v, list) and v:
                continue
            fix = f"write {toml_key(k)} = {toml_value([v])} (a list: {each})" \
                if not isinstance(v, (list, dict)) else \
                f"drop the key, or list its values: {toml_key(k)} = [v1, v2]"
            raise ConfigError(f"'{k}' in [{table}] must be a non-empty list of values, got "
                              f"{v!r}; {fix}")


def _flat_tables(spec: dict) -> dict:
    """``spec`` with the dotted keys of its option tables as one name: TOML reads an unquoted
    ``ppo.lr = [1e-4]`` as a table ``ppo`` holding ``lr``, which is the option ``"ppo.lr"``."""
    spec = dict(spec)
    for table in ("config", "grid", "static"):
        if isinstance(spec.get(table), dict):
            spec[table] = flat_options(spec[table])
    if isinstance(spec.get("env_config"), dict):
        spec["env_config"] = {env: flat_options(v) if isinstance(v, dict) else v
                              for env, v in spec["env_config"].items()}
    return spec


_WORDS = {"with", "in", "to", "or", "and", "for", "ending", "as", "instead", "from", "of",
          "the", "a", "an", "it", "them", "now", "only"}


def sweep_hint(message: str) -> str:
    """A ``pgjax train`` message as a sweep file's: ``pass --grid ppo.lr=1e-3`` becomes
    ``write "ppo.lr" = [1e-3] in [grid]``, ``pass --ppo.lr 3e-4`` (or ``e.g. --ppo.lr
    3e-4``) ``write "ppo.lr" = 3e-4 in [config]``, and any other flag its option's name."""
    import tomllib

    def value(v):
        try:
            tomllib.loads(f"v = {v}")
            return v
        except tomllib.TOMLDecodeError:
            return json.dumps(v)

    def key(name):
        return toml_key(name.replace("-", "_"))

    def grid(m):
        values = ", ".join(value(v) for v in m.group(3).split(",") if v)
        return f"{m.group(1) or ''}write {key(m.group(2))} = [{values}] in [grid]"

    def option(m):
        if m.group(3) in _WORDS:
            return m.group(0)
        verb = "" if m.group(1) == "e.g. " else "write "
        return f"{m.group(1) if not verb else ''}{verb}{key(m.group(2))} = " \
               f"{value(m.group(3))} in [config]"

    message = re.sub(r"(e\.g\. )?(?:pass )?--grid ([\w.-]+)=([^\s;)]+)", grid, message)
    message = re.sub(r"in --grid ([\w.-]+)", lambda m: f"in [grid] {key(m.group(1))}", message)
    message = re.sub(r"(pass |use |e\.g\. )--([a-z][\w.-]*) ([^\s;,)]+)", option, message)
    return re.sub(r"--([a-z][\w.-]*)", lambda m: key(m.group(1)), message)

def _check_targets(spec: dict, rules: set) -> None:
    """Every ``<rule>.<option>`` key names a rule some group runs, and every
    ``[env_config]`` table an environment of ``envs``: nothing in the file is dropped."""
    tables = [("[config]", spec.get("config", {})), ("[grid]", spec.get("grid", {})),
              ("[static]", spec.get("static", {}))]
    for env, options in spec.get("env_config", {}).items():
        if env not in spec["envs"]:
            raise ConfigError(f"[env_config.\"{env}\"] names an environment not in envs "
                              f"({', '.join(spec['envs'])}); add it to envs or drop the table")
        tables.append((f"[env_config.\"{env}\"]", options))
    for table, options in tables:
        for key in options:
            head, dot, _ = key.partition(".")
            if _rule_option(key) and head not in rules:
                raise ConfigError(f"'{key}' in {table} is an option of {head}, which no group "
                                  f"runs (algos: {', '.join(spec['algos'])}); add {head} to "
                                  f"algos or drop the key")


def _rule_option(key: str) -> bool:
    """Whether ``key`` is an update rule's option (``<rule>.<field>``): it applies to that
    rule's groups only."""
    from pgjax.algos import ALGORITHMS

    head, dot, _ = key.partition(".")
    return bool(dot) and head in ALGORITHMS


def _group(spec: dict, root: Path, algo: str, env: str, combo: dict, grid: dict) -> TrainConfig:
    """The config of one group: preset, algorithm, [config], [env_config], [static] values,
    then the rule's [grid] entries."""
    name = "_".join([algo, name_part(env)] +
                    [f"{k.split('.')[-1]}={name_part(_fmt(v))}" for k, v in combo.items()])
    cls = config_class(TrainConfig, tuple(spec.get("config", {}).get("plugins", ())))
    cfg = cls(env=env).with_preset(combo.pop("preset", spec.get("preset")))
    cfg = dataclasses.replace(cfg, algo=algo, out=str(root), name=name)
    cfg = cfg.with_options({k: spec[k] for k in ("seeds", "seed") if k in spec}, "the sweep")
    cfg = cfg.with_options(spec.get("config", {}), "[config]")
    cfg = cfg.with_options(spec.get("env_config", {}).get(env, {}), f"[env_config.\"{env}\"]")
    cfg = cfg.with_options(combo, "[static]")
    entries, base = [], cfg.base_hparams()
    for k, vals in grid.items():
        if _rule_option(k) and k.partition(".")[0] != cfg.rule:
            continue
        if k not in base and k.replace("-", "_") in option_names(type(cfg)):
            raise ConfigError(f"'{k}' in [grid] is a static option (it changes the compiled "
                              f"program, so it cannot be vmapped); move it to [static]")
        if k not in base:
            raise ConfigError(f"unknown [grid] name '{k}'{did_you_mean(k, base)}; [grid] takes "
                              f"traced hyperparameters: {', '.join(base)}")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            raise ConfigError(f"[grid] '{k}' must list numbers, got {vals!r}; write "
                              f"{toml_key(k)} = [{exact(base[k])}]")
        entries.append(f"{k}=" + ",".join(repr(float(v)) for v in vals))
    return dataclasses.replace(cfg, grid=tuple(entries), out=str(root), name=name, resume=True)
