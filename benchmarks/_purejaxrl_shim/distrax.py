"""The one distribution purejaxrl's ``ppo_continuous_action.py`` takes from distrax, for
``benchmarks/vs_purejaxrl.py``: distrax's TensorFlow Probability backend does not import
under the JAX pgjax pins, so the benchmark puts this directory first on purejaxrl's path.
Same maths as distrax's ``MultivariateNormalDiag`` (independent normals summed over the
last axis)."""
import math

import jax
import jax.numpy as jnp


class MultivariateNormalDiag:
    def __init__(self, loc, scale_diag):
        self.loc = loc
        self.scale = jnp.broadcast_to(scale_diag, jnp.shape(loc))

    def sample(self, seed):
        return self.loc + self.scale * jax.random.normal(seed, self.loc.shape, self.loc.dtype)

    def log_prob(self, x):
        z = (x - self.loc) / self.scale
        return jnp.sum(-0.5 * z * z - jnp.log(self.scale) - 0.5 * math.log(2 * math.pi), -1)

    def entropy(self):
        return jnp.sum(0.5 + 0.5 * math.log(2 * math.pi) + jnp.log(self.scale), -1)
