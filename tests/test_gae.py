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


def test_lambda_return_advantage_by_hand():
    """form="lambda-return" (Brax's PPO): A_t = r_t + gamma * G_{t+1} - V(s_t), G the
    lambda-return from the next state; V(s'_t) where the episode or the rollout ends; value
    targets unchanged. One env, three steps, no episode end, gamma 0.5, lambda 0.5:
    GAE deltas 1 + 0.5*2 - 1 = 1, 0 + 0.5*4 - 2 = 0, 2 + 0.5*8 - 4 = 2;
    GAE A = 1 + 0.25*0.5 = 1.125, 0 + 0.25*2 = 0.5, 2; G = A + V = 2.125, 2.5, 6;
    lambda-return A = 1 + 0.5*2.5 - 1 = 1.25, 0 + 0.5*6 - 2 = 1, 2 + 0.5*8 - 4 = 2."""
    r = np.array([[1.0], [0.0], [2.0]], np.float32)
    v = np.array([[1.0], [2.0], [4.0]], np.float32)
    nv = np.array([[2.0], [4.0], [8.0]], np.float32)
    no = np.zeros((3, 1), bool)
    adv, ret = gae(r, v, nv, no, no, 0.5, 0.5, form="lambda-return")
    np.testing.assert_allclose(adv[:, 0], [1.25, 1.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [2.125, 2.5, 6.0], rtol=1e-6)
    # an episode end at t = 0 (truncated: bootstrap V(s'_0) = 2; terminated: nothing)
    for term, want in ((False, 1 + 0.5 * 2 - 1), (True, 1 - 1)):
        adv, _ = gae(r, v, nv, np.array([[term], [False], [False]]),
                     np.array([[not term], [False], [False]]), 0.5, 0.5, form="lambda-return")
        np.testing.assert_allclose(adv[0, 0], want, rtol=1e-6)
