"""Option values as pgjax reads them: plugins imported once, a plugin rule's name=value
settings, values from sweep files and presets checked against their option's type, and the
ranges traced hyperparameters must lie in."""
from __future__ import annotations

import dataclasses
import json
import math
import re

from pgjax.core.errors import ConfigError, did_you_mean
from pgjax.core.registry import load_plugins

# options that moved into a component's sub-config: old name -> new (records written before
# read with these; files and flags that use an old name are told the new one)
RENAMED = {"backend": "brax.backend", "vectorization": "gym.vectorization",
           "z_dim": "stateful.z_dim", "z_std": "stateful.z_std",
           "stateful_prev_action": "stateful.prev_action", "carry_size": "recurrent.carry_size",
           "bptt_len": "recurrent.bptt_len", "window": "window.size",
           "agent_order": "agents.order", "share_actor": "agents.share_actor",
           "agent_obs": "agents.obs", **{k: f"net.{k}" for k in (
               "actor_hidden", "critic_hidden", "activation", "init_log_std", "std_max",
               "policy_head_gain")}, **{k: f"norm.{k}" for k in (
                   "normalize_obs", "obs_stats", "obs_stats_steps", "normalize_reward",
                   "value_norm", "reward_scale")}}
# what a record written before an option existed implies for it (the behaviour of then)
LEGACY = {"anneal_steps": None, "eval_mode": "deterministic", "diagnostics": "full"}

from pgjax.core.errors import INT_MAX  # noqa: E402 (counts and seeds: int32)
MAX_SIZE = 2**20  # a layer, state or window size beyond this is a typo, not a network


def _parse_option(cls, item: str):
    name, sep, value = item.partition("=")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    if not sep or name.replace("-", "_") not in fields:
        raise ConfigError(f"bad --algo-options entry '{item}'; write name=value with name one "
                          f"of {', '.join(fields)}")
    name = name.replace("-", "_")
    default = getattr(cls(), name)
    try:
        if isinstance(default, bool):
            if value.lower() not in ("true", "false", "1", "0"):
                raise ValueError(value)
            return name, value.lower() in ("true", "1")
        return name, type(default)(value)
    except ValueError:
        raise ConfigError(f"bad value in --algo-options '{item}'; {name} takes a "
                          f"{type(default).__name__}") from None


def _typed(key: str, value, default, where: str, optional: bool = False):
    """``value`` for option ``key`` checked against the type of its default (from a sweep
    file or Python: tyro checks the command line): integral floats become ints (TOML's
    1e6), ints become floats, lists tuples; anything else of the wrong type is an error. An
    ``optional`` option (one whose own default is None) takes the string ``"none"`` for None,
    as TOML has no null: a sweep file can unset what a preset set."""
    def bad(kind):
        unset = ', or "none" to unset it' if optional else ""
        return ConfigError(f"option '{key}' in {where} must be {kind}, got {value!r}; write "
                           f"it as {kind} (e.g. {toml_key(key)} = {EXAMPLES[kind]}){unset}")
    if optional and (value is None or isinstance(value, str) and value.lower() == "none"):
        return None
    if isinstance(value, list):
        value = tuple(value)
    if default is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise bad("true or false")
    elif isinstance(default, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        value = float(value)
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise bad("a string")
    elif isinstance(default, tuple):
        if not isinstance(value, tuple):
            raise bad("a list")
        kind = type(default[0]) if default else str  # hidden sizes: ints; names: strings
        if not all(isinstance(x, kind) and not isinstance(x, bool) for x in value):
            raise bad("a list of integers" if kind is int else "a list of strings")
    return value


EXAMPLES = {"true or false": "true", "an integer": "1000", "a number": "0.5",
            "a string": '"text"', "a list": "[64, 64]", "a list of integers": "[64, 64]",
            "a list of strings": '["a", "b"]'}


def toml_key(key: str) -> str:
    """``key`` as a sweep file writes it: bare where TOML allows (``steps``), else quoted
    (``"ppo.lr"``)."""
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_value(v) -> str:
    """``v`` as a TOML value (``0.0003``, ``"text"``, ``[64, 64]``, ``true``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        return exact(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def flag(key: str) -> str:
    """The command-line flag of option ``key`` (``ppo_kl.clip_eps`` -> ``--ppo-kl.clip-eps``)."""
    return "--" + key.replace("_", "-")


POSITIVE = ("lr", "clip_eps", "vf_clip_eps", "max_grad_norm", "delta", "vf_lr", "eps_kl",
            "c_beta", "beta_lr", "d_targ")
UNIT = ("gamma", "gae_lambda", "backtrack")
NON_NEGATIVE = ("vf_coef", "ent_coef", "target_kl", "damping", "beta0")


def _hparam_problem(name: str, v: float) -> tuple[str, str, str] | None:
    """(what is wrong, what to give, what values to list) for traced hyperparameter
    ``name`` = ``v``, or None."""
    if not math.isfinite(v):
        return "must be a finite number", "a finite value", "finite values"
    if name in POSITIVE and not v > 0:
        return "must be > 0", "a positive value", "positive values"
    if name in UNIT and not 0.0 <= v <= 1.0:
        return "must be in [0, 1]", "a value in [0, 1]", "values in [0, 1]"
    if name in NON_NEGATIVE and v < 0:
        return "must be >= 0", "a non-negative value", "non-negative values"
    return None


def _check_hparam(name: str, v: float, example: str = "") -> None:
    """A ``ConfigError`` unless ``v`` lies in the range of traced hyperparameter ``name``
    (its last part: ``lr`` of ``ppo.lr``); ``example``: a flag and value that would do."""
    problem = _hparam_problem(name.split(".")[-1], v)
    if problem:
        raise ConfigError(f"{name.split('.')[-1]} {problem[0]}, got {v}; pass {problem[1]}"
                          + (f" (e.g. {example})" if example else ""))


def check_hparams(cfg) -> None:
    """Every traced hyperparameter of ``cfg`` (its option's value, or each ``--grid`` value
    that replaces it) in its range. A bad option is refused with its flag and a value that
    does (its default); a bad grid value with the ``--grid`` entry without it."""
    base, grid = cfg.base_hparams(), cfg.parse_grid()
    rule_defaults = type(cfg.algo_config)()

    def default(key):
        head, dot, tail = key.partition(".")
        if dot:
            return float(getattr(rule_defaults, tail))
        return float(next(f.default for f in dataclasses.fields(cfg) if f.name == key))

    for key, v in base.items():
        if key not in grid:
            _check_hparam(key, v, f"{flag(key)} {exact(default(key))}")
    for key, values in grid.items():
        for v in values:
            problem = _hparam_problem(key.split(".")[-1], v)
            if problem:
                good = [x for x in values if not _hparam_problem(key.split(".")[-1], x)] \
                    or [default(key)]
                raise ConfigError(f"{key.split('.')[-1]} {problem[0]}, got {v} in --grid "
                                  f"{key}; pass --grid {key}={','.join(exact(x) for x in good)}"
                                  f" ({problem[2]} only)")


# -- options of nested configs -----------------------------------------------------------------
def flat_options(options: dict) -> dict:
    """``{"ppo": {"lr": 1e-3}, "steps": 10}`` -> ``{"ppo.lr": 1e-3, "steps": 10}``: a
    sub-config's options given as a table (TOML, a record) spelled as dotted names."""
    out = {}
    for key, value in options.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def exact(v: float) -> str:
    """``v`` as ``%g`` where that reads back as ``v`` exactly, else its shortest exact form
    (``1.000001e-4`` stays distinct from ``1e-4``): names built from values never merge two
    distinct values."""
    short = f"{v:g}"
    return short if float(short) == v else repr(float(v))


def format_option(v) -> str:
    """An option's value as group labels show it: ``64x64`` for a list, ``%g`` for a float."""
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    if isinstance(v, float):
        return exact(v)
    if isinstance(v, dict):
        return "{...}"
    return str(v)


def fill_label(label: str, options: dict) -> str:
    """``label`` with every ``{option}`` replaced by that option's value in ``options``
    (flat: ``{algo}``, ``{env}``, ``{policy}``, ``{ppo.lr}``); a ``ConfigError`` names an
    unknown one."""
    import re

    def value(m):
        key = m.group(1)
        if key not in options:
            like = did_you_mean(f"{{{key}}}", [f"{{{k}}}" for k in options])
            raise ConfigError(f"label '{label}' names '{{{key}}}', which is not an option"
                              f"{like}; use "
                              f"option names such as {{algo}}, {{env}}, {{policy}}, "
                              f"{{ppo.lr}}")
        return format_option(options[key])

    return re.sub(r"\{([^{}]+)\}", value, label)


def sub_configs(cls) -> dict[str, type]:
    """The fields of dataclass ``cls`` that are configs of their own: name -> class."""
    return {f.name: f.type if isinstance(f.type, type) else type(f.default)
            for f in dataclasses.fields(cls) if dataclasses.is_dataclass(f.default)}


def _unset_by_default(cls, name: str) -> bool:
    """Whether field ``name`` of dataclass ``cls`` defaults to None (an option a sweep file
    may set back to None with "none")."""
    return next(f.default for f in dataclasses.fields(cls) if f.name == name) is None


def with_options(cfg, options: dict, where: str, skip=lambda head: False,
                 renamed: dict | None = None):
    """``cfg`` (a dataclass of options and sub-configs) with fields set from ``{name:
    value}``: ``<sub>.<field>`` sets a sub-config's field, except where ``skip(sub)`` (the
    options of a rule not selected); values are checked against the field's type. A name in
    ``renamed`` (old -> new) is refused with its new spelling."""
    fields = {f.name for f in dataclasses.fields(cfg)}
    subs = sub_configs(type(cfg))
    plain, nested = {}, {}
    for key, value in flat_options(options).items():
        key = key.replace("-", "_")
        if renamed and key in renamed:
            raise ConfigError(f"option '{key}' in {where} is spelled '{renamed[key]}' now; "
                              f"write {toml_key(renamed[key])} = {toml_value(value)} instead")
        head, dot, tail = key.partition(".")
        if dot:
            if head not in subs or tail not in {f.name for f in dataclasses.fields(subs[head])}:
                raise ConfigError(f"unknown option '{key}'{_option_like(cfg, key)} in {where}; "
                                  f"use <config>.<field> with a field of that config (see "
                                  f"pgjax train --help)")
            if not skip(head):
                nested.setdefault(head, {})[tail] = _typed(
                    key, value, getattr(getattr(cfg, head), tail), where,
                    optional=_unset_by_default(subs[head], tail))
        elif key not in fields or key in subs:
            raise ConfigError(f"unknown option '{key}'{_option_like(cfg, key)} in {where}; use "
                              f"a `pgjax train` option (see pgjax train --help)")
        else:
            plain[key] = _typed(key, value, getattr(type(cfg), key, None), where,
                                optional=_unset_by_default(type(cfg), key))
    cfg = dataclasses.replace(cfg, **plain)
    for head, values in nested.items():
        cfg = dataclasses.replace(cfg, **{head: dataclasses.replace(getattr(cfg, head),
                                                                    **values)})
    return cfg


def option_names(cls) -> list[str]:
    """Every option of config class ``cls``: its fields, and ``<sub>.<field>`` for those
    of its sub-configs."""
    subs = sub_configs(cls)
    return [f.name for f in dataclasses.fields(cls) if f.name not in subs] + [
        f"{head}.{f.name}" for head, sub in subs.items() for f in dataclasses.fields(sub)]


def _option_like(cfg, key: str) -> str:
    """`` (did you mean 'ppo.lr'?)`` for a mistyped option name ``key``, or ""."""
    return did_you_mean(key, option_names(type(cfg)))


def check_finite(owner, prefix: str = "--") -> None:
    """Every float field of ``owner`` and of its sub-configs is a finite number."""
    for f in dataclasses.fields(owner):
        v = getattr(owner, f.name)
        if dataclasses.is_dataclass(v):
            check_finite(v, f"{prefix}{f.name}.")
        elif isinstance(v, float) and not math.isfinite(v):
            name = f"{prefix}{f.name.replace('_', '-')}"
            fine = isinstance(f.default, (int, float)) and math.isfinite(f.default)
            raise ConfigError(f"{f.name} must be a finite number, got {v}; pass a finite "
                              f"{name}" + (f" (e.g. {name} {exact(float(f.default))})"
                                           if fine else ""))


def parse_grid(items, base: dict, is_static) -> dict[str, list[float]]:
    """``--grid name=v1,v2 ...`` -> {name: [v1, v2]}; ``base``: the traced hyperparameters
    and their values, ``is_static(name)``: whether a name is an option that is not traced."""
    grid = {}
    for item in items:
        key, sep, values = item.partition("=")
        if sep and key not in base and is_static(key):
            first = values.split(",")[0].strip()
            one = f"replace --grid {item} with {flag(key)} {first}" if first else \
                f"drop --grid {item} and set one value with {flag(key)}"
            raise ConfigError(f"--grid {key} is a static option (it changes the compiled "
                              f"program, so it cannot be vmapped); sweep it in a sweep "
                              f"file's [static] table, or {one}")
        if sep and key not in base:
            raise ConfigError(f"bad --grid entry '{item}': unknown name '{key}'"
                              f"{did_you_mean(key, base)}; write name=v1,v2 with name one of "
                              f"{', '.join(base)}")
        if not sep:
            raise ConfigError(f"bad --grid entry '{item}'; write name=v1,v2 with name one of "
                              f"{', '.join(base)}")
        if key in grid:
            raise ConfigError(f"--grid names {key} twice; list all its values in one entry: "
                              f"{key}=v1,v2")
        try:
            grid[key] = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ConfigError(f"bad --grid values in '{item}'; give numbers separated by "
                              f"commas") from None
        if not grid[key]:
            raise ConfigError(f"--grid entry '{item}' has no values; write {key}=v1,v2")
        repeated = sorted({v for v in grid[key] if grid[key].count(v) > 1})
        if repeated:
            raise ConfigError(f"--grid {key} lists {repeated[0]:g} twice, so two runs would "
                              f"share one directory; list each value once")
    return grid


def check_counts(owner, names, prefix: str = "--") -> None:
    """Each named int option of ``owner`` lies in [1, INT_MAX] (they live in int32)."""
    for name in names:
        v = getattr(owner, name)
        flag = f"{prefix}{name.replace('_', '-')}"
        default = next((f.default for f in dataclasses.fields(owner) if f.name == name), 1)
        default = default if isinstance(default, int) and 1 <= default <= INT_MAX else 1
        if v < 1:
            raise ConfigError(f"{name} must be >= 1, got {v}; pass a positive {flag} (e.g. "
                              f"{flag} {default})")
        if v > INT_MAX:
            raise ConfigError(f"{name} {v} is beyond {INT_MAX:,} (int32); pass a smaller {flag} "
                              f"(e.g. {flag} {default})")


def components() -> dict[str, type]:
    """{key: options class} of every registered component with settings of its own, in
    registration order: policy kinds' and environment families' (``--<options_key>.*``),
    then update rules' (``--<rule>.*``), built-in and plugin alike."""
    from pgjax.algos import ALGORITHMS
    from pgjax.core.registry import ENV_FAMILIES, POLICY_KINDS

    out = {}
    for registry in (POLICY_KINDS, ENV_FAMILIES):
        out.update({c.options_key: c.options for _, c in registry.items() if c.options_key})
    out.update({name: rule.config for name, rule in ALGORITHMS.items()})
    return out


def component_options(key: str):
    """The options class of the registered component whose settings are ``--<key>.*``,
    or None."""
    return components().get(key)


def config_class(base: type, plugins=()) -> type:
    """``base`` with a sub-config field for every registered component (``components``:
    the built-in ones and those ``plugins``, imported here, register) not yet a field of
    it, with help from their docstrings. The same components give the same class."""
    from pgjax.algos import ALGORITHMS
    from pgjax.core.registry import ENV_FAMILIES, POLICY_KINDS

    load_plugins(plugins)
    extra = components()
    fields = {f.name: f for f in dataclasses.fields(base)}
    for k, v in extra.items():  # a component's options named like one of pgjax's own
        f = fields.get(k)
        default = None if f is None else f.default if f.default is not dataclasses.MISSING \
            else f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if f is not None and type(default) is not v:
            for registry in (ALGORITHMS, POLICY_KINDS, ENV_FAMILIES):  # not half-registered
                for name, c in registry.items():
                    if name == k and registry is ALGORITHMS or \
                            getattr(c, "options_key", None) == k and registry is not ALGORITHMS:
                        del registry[name]
            raise ConfigError(f"a plugin's component has options under '{k}', which is "
                              f"pgjax's own option '--{k}'; register it under another name")
    extra = tuple((k, v) for k, v in extra.items() if k not in fields)
    if not extra:
        return base
    if (base, extra) not in _EXTENDED:
        cls = dataclasses.make_dataclass(
            base.__name__, [(k, v, dataclasses.field(default=v())) for k, v in extra],
            bases=(base,), frozen=True, namespace={"__doc__": base.__doc__})
        cls.__module__, cls.__qualname__ = base.__module__, base.__qualname__
        _EXTENDED[(base, extra)] = cls
    return _EXTENDED[(base, extra)]


_EXTENDED: dict = {}
