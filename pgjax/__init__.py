"""pgjax: trust-region policy-gradient methods in pure, compiled JAX."""
import os as _os

if "MUJOCO_GL" not in _os.environ and not _os.environ.get("DISPLAY"):
    # headless MuJoCo rendering (pgjax render) unless the user chose a backend; read once,
    # when MuJoCo is first imported
    _os.environ["MUJOCO_GL"] = "egl"
from pgjax.compile_cache import enable as enable_compile_cache
from pgjax.config import TrainConfig
from pgjax.errors import ConfigError
from pgjax.envs import make_env
from pgjax.runner import run
from pgjax.train import Trainer, TrainState


def __getattr__(name):
    # ``load_policy`` on first use: its module imports pandas, which a training run never needs
    if name == "load_policy":
        from pgjax.trained import load_policy

        return load_policy
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
