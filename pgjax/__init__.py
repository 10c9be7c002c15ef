"""pgjax: trust-region policy-gradient methods in pure, compiled JAX."""
from pgjax.compile_cache import enable as enable_compile_cache
from pgjax.config import TrainConfig
from pgjax.errors import ConfigError
from pgjax.envs import make_env
from pgjax.runner import run
from pgjax.train import Trainer, TrainState
from pgjax.trained import load_policy

__version__ = "0.1.0"
__all__ = ["ConfigError", "TrainConfig", "TrainState", "Trainer", "enable_compile_cache",
           "load_policy", "make_env", "run"]
