import numpy as np

from pgjax.model.advantages import gae


def gae_loop(rewards, values, next_values, term, trunc, gamma, lam):
    """Plain Python reference, one env at a time, straight from the definition."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        running = 0.0
        for t in reversed(range(T)):
            bootstrap = 0.0 if term[t, n] else gamma * next_values[t, n]
            delta = rewards[t, n] + bootstrap - values[t, n]
            if term[t, n] or trunc[t, n]:
                running = delta
            else:
                running = delta + gamma * lam * running
            adv[t, n] = running
    return adv, adv + values


def test_gae_matches_python_loop_with_terminations_and_truncations():
    rng = np.random.default_rng(0)
    T, N = 37, 6
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    next_values = rng.normal(size=(T, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.1
    trunc = (rng.random((T, N)) < 0.1) & ~term
    assert term.sum() > 5 and trunc.sum() > 5
    adv, ret = gae(rewards, values, next_values, term, trunc, 0.97, 0.9)
    adv_ref, ret_ref = gae_loop(rewards, values, next_values, term, trunc, 0.97, 0.9)
    np.testing.assert_allclose(adv, adv_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ret, ret_ref, rtol=1e-5, atol=1e-5)


def test_truncation_bootstraps_and_termination_does_not():
    # One env, two steps: a truncation at t=0 bootstraps from V(s'_0) = 10 and does not
    # leak the next episode's advantage; a termination at t=1 uses no bootstrap.
    r = np.array([[1.0], [2.0]], np.float32)
    v = np.array([[0.5], [0.25]], np.float32)
    nv = np.array([[10.0], [7.0]], np.float32)
    term = np.array([[False], [True]])
    trunc = np.array([[True], [False]])
    adv, _ = gae(r, v, nv, term, trunc, 0.9, 0.8)
    np.testing.assert_allclose(adv[:, 0], [1.0 + 0.9 * 10.0 - 0.5, 2.0 - 0.25], rtol=1e-6)
