"""pgjax: trust-region policy-gradient methods in pure, compiled JAX."""
import os as _os

if "MUJOCO_GL" not in _os.environ and not _os.environ.get("DISPLAY"):
    # headless MuJoCo rendering (pgjax render) unless the user chose a backend; read once,
    # when MuJoCo is first imported
    _os.environ["MUJOCO_GL"] = "egl"
import importlib as _importlib
import importlib.abc as _abc
import importlib.util as _util
import sys as _sys
import warnings as _warnings

# pgjax 0.2.0's flat modules, now in the subpackages that show the layers: the old import
# paths (``pgjax.runner``, ``from pgjax import results``) still work, with a FutureWarning
MOVED = {m: f"{package}.{m}" for package, modules in {
    "tools": ("sweep", "sweep_spec", "render", "plotting", "trained"),
    "loop": ("runner", "records", "checkpoint", "loggers"),
    "analysis": ("plots", "results", "references"),
    "training": ("train", "config", "run_options", "kinds", "options", "presets", "rollout"),
    "model": ("policies", "nets", "advantages", "normalize", "distributions"),
    "core": ("rundir", "plugin_files", "registry", "arguments", "compile_cache", "files",
             "errors", "trust", "viewer"),
}.items() for m in modules}


def _moved(old: str):
    new = f"pgjax.{MOVED[old]}"
    _warnings.warn(f"pgjax.{old} is {new} since pgjax 0.3.0; import it from there",
                   FutureWarning, stacklevel=3)
    return _importlib.import_module(new)


class _MovedModules(_abc.MetaPathFinder, _abc.Loader):
    """Finds ``pgjax.<old>`` as the module it moved to (the same module object)."""

    def find_spec(self, name, path=None, target=None):
        head, _, old = name.partition(".")
        if head == "pgjax" and old in MOVED:
            return _util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return _moved(spec.name.partition(".")[2])

    def exec_module(self, module):
        pass


if not any(isinstance(f, _MovedModules) for f in _sys.meta_path):
    _sys.meta_path.insert(0, _MovedModules())

from pgjax.core.compile_cache import enable as enable_compile_cache  # noqa: E402
from pgjax.core.errors import ConfigError  # noqa: E402
from pgjax.envs import make_env  # noqa: E402
from pgjax.loop.runner import run  # noqa: E402
from pgjax.training.config import TrainConfig  # noqa: E402
from pgjax.training.train import Trainer, TrainState  # noqa: E402


def __getattr__(name):
    # ``load_policy`` on first use: its module imports pandas, which a training run never needs
    if name == "load_policy":
        from pgjax.tools.trained import load_policy

        return load_policy
    if name in MOVED:  # ``from pgjax import results``, as pgjax 0.2.0 had it
        return _moved(name)
    raise AttributeError(f"module 'pgjax' has no attribute {name!r}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pgjax")
    except PackageNotFoundError:  # a source tree on sys.path, not installed: pyproject's
        return "0.2.0"


__version__ = _version()
__all__ = ["ConfigError", "TrainConfig", "TrainState", "Trainer", "enable_compile_cache",
           "load_policy", "make_env", "run"]
