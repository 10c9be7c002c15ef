"""Update rules. ``ALGORITHMS`` maps a name to (config class, factory(config, policy))."""
from pgjax.algos.common import Algorithm, AlgoConfig, Batch
from pgjax.algos.fixpo import FixPOConfig, make_fixpo
from pgjax.algos.ppo import PPOConfig, make_ppo
from pgjax.algos.spo import SPOConfig, make_spo
from pgjax.algos.trpo import TRPOConfig, make_trpo

ALGORITHMS = {"ppo": (PPOConfig, make_ppo), "trpo": (TRPOConfig, make_trpo),
              "spo": (SPOConfig, make_spo), "fixpo": (FixPOConfig, make_fixpo)}


def register(name: str, config_cls, factory) -> None:
    """Make a new update rule available to the trainer and CLI machinery under ``name``."""
    ALGORITHMS[name] = (config_cls, factory)


__all__ = ["ALGORITHMS", "Algorithm", "AlgoConfig", "Batch", "FixPOConfig", "PPOConfig",
           "SPOConfig", "TRPOConfig", "make_fixpo", "make_ppo", "make_spo", "make_trpo",
           "register"]
