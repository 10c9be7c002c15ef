"""Distributions and running statistics against independent references."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from pgjax.model.distributions import Categorical, Gaussian
from pgjax.model.policies import make_actor_critic
from pgjax.envs import ActionSpace, ConfigError
from pgjax.model.normalize import init_stats, normalize, update_stats


def test_gaussian_against_scipy():
    rng = np.random.default_rng(0)
    mean, log_std, a = rng.normal(size=(5, 3)), rng.normal(size=3) * 0.3, rng.normal(size=(5, 3))
    d = {"mean": jnp.asarray(mean), "log_std": jnp.asarray(log_std)}
    ref = stats.norm(mean, np.exp(log_std))
    np.testing.assert_allclose(Gaussian.log_prob(d, jnp.asarray(a)), ref.logpdf(a).sum(-1), rtol=1e-5)
    np.testing.assert_allclose(Gaussian.entropy(d), ref.entropy().sum(-1), rtol=1e-5)
    # KL by Monte Carlo
    q = {"mean": jnp.asarray(mean + 0.3), "log_std": jnp.asarray(log_std - 0.2)}
    x = Gaussian.sample({"mean": jnp.broadcast_to(d["mean"][0], (200000, 3)), "log_std": d["log_std"]},
                        jax.random.PRNGKey(0))
    mc = (Gaussian.log_prob({"mean": d["mean"][0], "log_std": d["log_std"]}, x)
          - Gaussian.log_prob({"mean": q["mean"][0], "log_std": q["log_std"]}, x)).mean()
    assert float(Gaussian.kl(d, q)[0]) == pytest.approx(float(mc), rel=2e-2)


def test_categorical_against_enumeration():
    logits = jnp.array([[0.1, 2.0, -1.0]])
    p = np.exp(logits[0]) / np.exp(logits[0]).sum()
    q_logits = jnp.array([[1.0, 0.0, 0.0]])
    q = np.exp(q_logits[0]) / np.exp(q_logits[0]).sum()
    d = {"logits": logits}
    np.testing.assert_allclose(Categorical.log_prob(d, jnp.array([1])), np.log(p[1]), rtol=1e-6)
    np.testing.assert_allclose(Categorical.entropy(d), -(p * np.log(p)).sum(), rtol=1e-6)
    np.testing.assert_allclose(Categorical.kl(d, {"logits": q_logits}), (p * np.log(p / q)).sum(), rtol=1e-5)


def test_running_stats_match_numpy():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (10, 100, 7)]
    s = init_stats((4,))
    for c in chunks:
        s = update_stats(s, jnp.asarray(c))
    allx = np.concatenate(chunks)
    np.testing.assert_allclose(s.mean, allx.mean(0), rtol=1e-4)
    np.testing.assert_allclose(s.var, allx.var(0), rtol=1e-3)
    z = normalize(s, jnp.asarray(allx))
    np.testing.assert_allclose(np.asarray(z).mean(0), 0, atol=1e-3)
    assert float(jnp.abs(normalize(s, jnp.full((1, 4), 1e6))).max()) == 10.0


def test_orthogonal_init_and_policy_action_space_checks():
    ac = make_actor_critic(ActionSpace("box", 3), "auto", (64, 64), (64, 64))
    params = ac.init(jax.random.PRNGKey(0), (5,))
    w = params.actor["params"]["MLP_0"]["Dense_0"]["kernel"]
    np.testing.assert_allclose(w @ w.T, 2.0 * np.eye(5), atol=1e-4)  # gain sqrt(2), orthogonal
    head = params.actor["params"]["MLP_0"]["Dense_2"]["kernel"]
    np.testing.assert_allclose(np.linalg.norm(head, axis=0), 0.01, rtol=1e-4)
    with pytest.raises(ConfigError, match="categorical.*discrete.*--policy gaussian"):
        make_actor_critic(ActionSpace("box", 3), "categorical")
    with pytest.raises(ConfigError, match="gaussian.*continuous.*--policy categorical"):
        make_actor_critic(ActionSpace("discrete", 2), "gaussian")


def test_orthogonal_initialiser_shapes_and_distribution():
    from pgjax.model.nets import orthogonal

    init = orthogonal(1.5)
    for shape in [(7, 3), (3, 7), (16, 16)]:
        w = np.asarray(init(jax.random.PRNGKey(0), shape))
        small = min(shape)
        gram = w.T @ w if shape[0] >= shape[1] else w @ w.T
        np.testing.assert_allclose(gram, 1.5**2 * np.eye(small), atol=1e-5)
    # vmapped over keys (as when seeds are initialised together) it still works, and the
    # matrices differ between keys
    ws = jax.jit(jax.vmap(lambda k: init(k, (8, 8))))(jax.random.split(jax.random.PRNGKey(1), 4))
    np.testing.assert_allclose(np.einsum("bij,bik->bjk", ws, ws), np.broadcast_to(2.25 * np.eye(8), (4, 8, 8)), atol=1e-5)
    assert not np.allclose(ws[0], ws[1])
