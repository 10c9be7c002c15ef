"""Action distributions as pure functions over a parameter pytree.

Diagonal Gaussian with a state-independent log-std (``{"mean": [..., A], "log_std": [A]}``)
and categorical (``{"logits": [..., K]}``). Log-probabilities, entropies and KL divergences are
joint over action dimensions. Written here rather than taken from distrax because the
trust-region algorithms need the per-state KL between parameter pytrees under ``vmap`` and
``jvp``, and these few lines are all of it.
"""
from __future__ import annotations

import math
from typing import NamedTuple

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
    def log_prob(d, a):
        z = (a - d["mean"]) * jnp.exp(-d["log_std"])
        return jnp.sum(-0.5 * z**2 - d["log_std"] - 0.5 * _LOG_2PI, axis=-1)

    @staticmethod
    def entropy(d):
        ent = jnp.sum(d["log_std"] + 0.5 * (1.0 + _LOG_2PI), axis=-1)
        return jnp.broadcast_to(ent, d["mean"].shape[:-1])

    @staticmethod
    def kl(p, q):
        """KL(p || q) per state, summed over action dimensions."""
        var_ratio = jnp.exp(2 * (p["log_std"] - q["log_std"]))
        t = ((p["mean"] - q["mean"]) * jnp.exp(-q["log_std"])) ** 2
        return jnp.sum(0.5 * (var_ratio + t - 1.0) - (p["log_std"] - q["log_std"]), axis=-1)


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


def broadcast_params(d, batch_shape):
    """Give state-independent entries (a Gaussian's log-std, possibly nested) the batch's
    leading shape, so a distribution pytree can be stored per transition and indexed like
    the batch."""
    lead = len(batch_shape)
    return jax.tree.map(
        lambda x: jnp.broadcast_to(x, batch_shape + x.shape[-1:]) if x.ndim <= lead else x, d)
