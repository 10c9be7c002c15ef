"""Update rules. ``ALGORITHMS`` maps a name to (config class, factory(config, policy))."""
from pgjax.algos.common import Algorithm, AlgoConfig, Batch
from pgjax.algos.ppo import PPOConfig, make_ppo

ALGORITHMS = {"ppo": (PPOConfig, make_ppo)}


def register(name: str, config_cls, factory) -> None:
    """Make a new update rule available to the trainer and CLI machinery under ``name``."""
    ALGORITHMS[name] = (config_cls, factory)


__all__ = ["ALGORITHMS", "Algorithm", "AlgoConfig", "Batch", "PPOConfig", "make_ppo", "register"]
