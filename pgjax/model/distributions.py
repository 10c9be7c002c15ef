"""Action distributions as pure functions over a parameter pytree.

Diagonal Gaussian with a state-independent log-std (``{"mean": [..., A], "log_std": [A]}``,
optionally ``"mask"``: only dimensions with mask 1 count, for padded multi-agent actions),
categorical (``{"logits": [..., K]}``) and the stateful policy's product of either with a
Gaussian over the next internal state. Log-probabilities, entropies and KL divergences are
joint over action dimensions. Written here rather than taken from distrax because the
trust-region algorithms need the per-state KL between parameter pytrees under ``vmap`` and
``jvp``, and these few lines are all of it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

_LOG_2PI = math.log(2 * math.pi)


class Gaussian(NamedTuple):
    kind: str = "gaussian"

    @staticmethod
    def sample(d, key):
        return d["mean"] + jnp.exp(d["log_std"]) * jax.random.normal(key, d["mean"].shape)

    @staticmethod
    def mode(d):
        return d["mean"]

    @staticmethod
    def _sum(d, x):
        """Sum over action dimensions, of the unmasked ones when ``d`` has a mask."""
        return jnp.sum(x * d["mask"] if "mask" in d else x, axis=-1)

    @staticmethod
    def log_prob(d, a):
        z = (a - d["mean"]) * jnp.exp(-d["log_std"])
        return Gaussian._sum(d, -0.5 * z**2 - d["log_std"] - 0.5 * _LOG_2PI)

    @staticmethod
    def entropy(d):
        ent = jnp.broadcast_to(d["log_std"] + 0.5 * (1.0 + _LOG_2PI), d["mean"].shape)
        return Gaussian._sum(d, ent)

    @staticmethod
    def kl(p, q):
        """KL(p || q) per state, summed over action dimensions."""
        var_ratio = jnp.exp(2 * (p["log_std"] - q["log_std"]))
        t = ((p["mean"] - q["mean"]) * jnp.exp(-q["log_std"])) ** 2
        return Gaussian._sum(p, 0.5 * (var_ratio + t - 1.0) - (p["log_std"] - q["log_std"]))


class Categorical(NamedTuple):
    kind: str = "categorical"

    @staticmethod
    def sample(d, key):
        return jax.random.categorical(key, d["logits"])

    @staticmethod
    def mode(d):
        return jnp.argmax(d["logits"], axis=-1)

    @staticmethod
    def log_prob(d, a):
        logp = jax.nn.log_softmax(d["logits"])
        return jnp.take_along_axis(logp, a[..., None].astype(jnp.int32), axis=-1)[..., 0]

    @staticmethod
    def entropy(d):
        logp = jax.nn.log_softmax(d["logits"])
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)

    @staticmethod
    def kl(p, q):
        lp, lq = jax.nn.log_softmax(p["logits"]), jax.nn.log_softmax(q["logits"])
        return jnp.sum(jnp.exp(lp) * (lp - lq), axis=-1)

    @staticmethod
    def masked(d, avail):
        """``d`` with the actions where ``avail`` is false ruled out: their logits set to
        -1e9, so they are never sampled nor the mode, their probability is 0 and they add
        nothing to entropies and KLs (finite, so no 0 * inf)."""
        if avail is None:
            return d
        return {**d, "logits": jnp.where(avail, d["logits"], UNAVAILABLE)}


UNAVAILABLE = -1e9  # the logit of an action an agent may not take


class StatefulDistribution(NamedTuple):
    """Product of the task's action distribution (``base``: Gaussian or categorical) and a
    diagonal Gaussian over the next internal state z' (S2PG). Actions are float vectors
    ``[a, z']`` (a discrete a is stored as a float in the first entry). Parameters:
    ``{"a": base params, "z_mean": [..., Z], "z_log_std": [..., Z]}``."""

    base: Any
    a_size: int  # entries of the action vector that belong to a (1 for a discrete a)
    kind: str = "stateful"

    def _split(self, x):
        a, z = x[..., :self.a_size], x[..., self.a_size:]
        if isinstance(self.base, Categorical):
            a = a[..., 0].astype(jnp.int32)
        return a, z

    def _join(self, a, z):
        if isinstance(self.base, Categorical):
            a = a[..., None].astype(z.dtype)
        return jnp.concatenate([a, z], -1)

    @staticmethod
    def _z(d):
        return {"mean": d["z_mean"], "log_std": d["z_log_std"]}

    def sample(self, d, key):
        k_a, k_z = jax.random.split(key)
        return self._join(self.base.sample(d["a"], k_a), Gaussian.sample(self._z(d), k_z))

    def mode(self, d):
        return self._join(self.base.mode(d["a"]), d["z_mean"])

    def log_prob(self, d, x):
        a, z = self._split(x)
        return self.base.log_prob(d["a"], a) + Gaussian.log_prob(self._z(d), z)

    def entropy(self, d):
        return self.base.entropy(d["a"]) + Gaussian.entropy(self._z(d))

    def kl(self, p, q):
        return self.base.kl(p["a"], q["a"]) + Gaussian.kl(self._z(p), self._z(q))

    def z_log_prob(self, d, x):
        """log pi_z(z' | o, z) alone (for diagnostics)."""
        return Gaussian.log_prob(self._z(d), self._split(x)[1])


def broadcast_params(d, batch_shape):
    """Give state-independent entries (a Gaussian's log-std, possibly nested) the batch's
    leading shape, so a distribution pytree can be stored per transition and indexed like
    the batch."""
    lead = len(batch_shape)
    return jax.tree.map(
        lambda x: jnp.broadcast_to(x, batch_shape + x.shape[-1:]) if x.ndim <= lead else x, d)
