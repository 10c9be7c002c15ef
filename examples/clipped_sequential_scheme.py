"""An agent scheme registered from a plugin: sequential updates whose advantage weight is clipped."""
import jax.numpy as jnp

from pgjax.algos.multiagent import AgentScheme, register_scheme

LIMIT = 0.2  # the weight handed on stays in [1 - LIMIT, 1 + LIMIT]


def clipped_product(factor, ratio):
    return jnp.clip(factor * ratio, 1.0 - LIMIT, 1.0 + LIMIT)


register_scheme("clipped_sequential", AgentScheme(
    True, "HAPPO-style sequential updates with the compounded ratio clipped to 1 +- 0.2",
    clipped_product))
