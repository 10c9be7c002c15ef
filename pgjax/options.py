"""Option values as pgjax reads them: plugins imported once, a plugin rule's name=value
settings, values from sweep files and presets checked against their option's type, and the
ranges traced hyperparameters must lie in."""
from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import math
import sys
from pathlib import Path

from pgjax.errors import ConfigError

INT_MAX = 2**31 - 1  # counts and seeds live in int32 inside the compiled program
MAX_SIZE = 2**20  # a layer, state or window size beyond this is a typo, not a network


def _imported_from(path: Path) -> bool:
    """Whether a module already imported (``import my_plugin``) was loaded from ``path``."""
    target = path.resolve()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and Path(file).resolve() == target:
            return True
    return False


def load_plugins(plugins) -> None:
    """Import each plugin (a dotted module name or a path to a .py file, whose folder joins
    ``sys.path`` so it can import the files beside it) once; plugins register update rules
    with ``pgjax.algos.register``."""
    for plugin in plugins:
        key = f"pgjax_plugin:{Path(plugin).resolve()}" if plugin.endswith(".py") else plugin
        if key in sys.modules or (plugin.endswith(".py") and _imported_from(Path(plugin))):
            continue  # one module per plugin, however it was imported first
        try:
            if plugin.endswith(".py"):
                spec = importlib.util.spec_from_file_location(Path(plugin).stem, plugin)
                if spec is None or not Path(plugin).exists():
                    raise ImportError(f"no file {plugin}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[key] = module
                folder = str(Path(plugin).resolve().parent)  # a plugin imports files beside it
                if folder not in sys.path:
                    sys.path.insert(0, folder)
                spec.loader.exec_module(module)
            else:
                sys.modules[key] = importlib.import_module(plugin)
        except ImportError as e:
            sys.modules.pop(key, None)
            raise ConfigError(f"cannot import plugin '{plugin}' ({e}); pass an importable "
                              f"module name or the path of a .py file to --plugins") from None
        except Exception as e:  # the plugin's own code failed: say where, in one line
            sys.modules.pop(key, None)
            import traceback

            frame = traceback.extract_tb(e.__traceback__)[-1]
            raise ConfigError(f"plugin '{plugin}' raised {type(e).__name__}: {e} (at "
                              f"{frame.filename}:{frame.lineno}); fix the plugin, or pass "
                              f"--plugins without it") from None


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


def _typed(key: str, value, default, where: str):
    """``value`` for option ``key`` checked against the type of its default (from a sweep
    file or Python: tyro checks the command line): integral floats become ints (TOML's
    1e6), ints become floats, lists tuples; anything else of the wrong type is an error."""
    def bad(kind):
        return ConfigError(f"option '{key}' in {where} must be {kind}, got {value!r}; write "
                           f"it as {kind} (e.g. {key} = {EXAMPLES[kind]})")
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


def _check_hparam(name: str, v: float) -> None:
    if not math.isfinite(v):
        raise ConfigError(f"{name} must be a finite number, got {v}; pass a finite value")
    positive = ("lr", "clip_eps", "vf_clip_eps", "max_grad_norm", "delta", "vf_lr", "eps_kl",
                "c_beta", "beta_lr", "d_targ")
    unit = ("gamma", "gae_lambda", "backtrack")
    if name in positive and not v > 0:
        raise ConfigError(f"{name} must be > 0, got {v}; pass a positive value (e.g. --ppo.{name} 3e-4)"
                          if name == "lr" else f"{name} must be > 0, got {v}; pass a positive value")
    if name in unit and not 0.0 <= v <= 1.0:
        raise ConfigError(f"{name} must be in [0, 1], got {v}; pass --{name.replace('_', '-')} in [0, 1]")
    if name in ("vf_coef", "ent_coef", "target_kl", "damping", "beta0") and v < 0:
        raise ConfigError(f"{name} must be >= 0, got {v}; pass a non-negative value")
