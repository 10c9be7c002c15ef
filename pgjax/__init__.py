"""pgjax: trust-region policy-gradient methods in pure, compiled JAX."""
from pgjax.config import TrainConfig
from pgjax.envs import ConfigError, make_env
from pgjax.train import Trainer, TrainState, run

__version__ = "0.1.0"
__all__ = ["ConfigError", "TrainConfig", "TrainState", "Trainer", "make_env", "run"]
