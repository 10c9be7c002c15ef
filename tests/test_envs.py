import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pgjax.envs import BraxOptions, ConfigError, make_env


@pytest.fixture(scope="module")
def pendulum():
    return make_env("brax:inverted_pendulum", num_envs=4, episode_length=7)


def test_brax_spec(pendulum):
    spec = pendulum.spec
    assert spec.obs_shape == (4,) and spec.action.kind == "box" and spec.action.n == 1
    assert spec.num_envs == 4 and spec.max_episode_steps == 7


@pytest.mark.slow
def test_brax_truncation_autoreset_keeps_final_obs(pendulum):
    state, obs = pendulum.reset(jax.random.PRNGKey(0))
    step = jax.jit(pendulum.step)
    zero = jnp.zeros((4, 1))
    for t in range(1, 8):
        state, ts = step(state, zero)
        if t < 7:
            assert not ts.done.any()
            np.testing.assert_array_equal(ts.obs, ts.final_obs)
        prev_t = ts
    # With zero torque the pole stays up for 7 steps: every env truncates at the time limit.
    assert prev_t.truncated.all() and not prev_t.terminated.any()
    # The reset observation differs from the true final one, which is kept for bootstrapping.
    assert not np.allclose(prev_t.obs, prev_t.final_obs)
    np.testing.assert_array_equal(prev_t.episode_length, 7)
    np.testing.assert_allclose(prev_t.episode_return, 7.0)
    assert (state.t == 0).all()


def test_brax_termination_is_not_truncation():
    env = make_env("brax:inverted_pendulum", num_envs=3, episode_length=1000)
    state, _ = env.reset(jax.random.PRNGKey(1))
    step = jax.jit(env.step)
    ended = np.zeros(3, bool)
    lengths = np.zeros(3)
    for t in range(200):
        state, ts = step(state, jnp.ones((3, 1)))  # full torque: the pole falls
        assert not ts.truncated.any()
        newly = np.asarray(ts.terminated) & ~ended
        lengths[newly] = np.asarray(ts.episode_length)[newly]
        ended |= np.asarray(ts.terminated)
        if ended.all():
            break
    assert ended.all() and (lengths > 0).all() and (lengths < 200).all()


def test_cartpole_matches_gymnasium_dynamics():
    """jax:cartpole is checked against Gymnasium's CartPole-v1, an independent reference."""
    env = make_env("jax:cartpole", num_envs=1)
    ref = gym.make("CartPole-v1").unwrapped
    ref.reset(seed=0)
    state, obs = env.reset(jax.random.PRNGKey(0))
    s0 = np.asarray(obs[0], np.float64)
    ref.state = s0.copy()
    state = state.replace(sim=jnp.asarray(s0[None], jnp.float32))
    rng = np.random.default_rng(0)
    step = jax.jit(env.step)
    for _ in range(60):
        a = int(rng.integers(2))
        ref_obs, r, term, trunc, _ = ref.step(a)
        state, ts = step(state, jnp.array([a]))
        np.testing.assert_allclose(ts.final_obs[0], ref_obs, rtol=1e-4, atol=1e-4)
        assert bool(ts.terminated[0]) == term
        if term:
            break


def test_unknown_env_and_backend_errors():
    with pytest.raises(ConfigError, match="unknown Brax environment 'antt'.*brax:ant"):
        make_env("brax:antt", 2)
    with pytest.raises(ConfigError, match="unknown Brax backend 'fast'.*--brax.backend"):
        make_env("brax:ant", 2, options=BraxOptions(backend="fast"))
    with pytest.raises(ConfigError, match="unknown environment id 'ant'"):
        make_env("ant", 2)
    with pytest.raises(ConfigError, match="unknown environment 'jax:acrobot'"):
        make_env("jax:acrobot", 2)


@pytest.mark.parametrize("backend", ["generalized", "positional", "spring",
                                     pytest.param("mjx", marks=pytest.mark.slow)])
def test_every_brax_backend_steps(backend):
    env = make_env("brax:inverted_pendulum", num_envs=2, episode_length=5,
                   options=BraxOptions(backend=backend))
    state, obs = env.reset(jax.random.PRNGKey(0))
    state, ts = jax.jit(env.step)(state, jnp.zeros((2, 1)))
    assert ts.obs.shape == (2, 4) and np.isfinite(np.asarray(ts.obs)).all()


def test_brax_import_keeps_only_the_absent_warp_notice_out(capsys, monkeypatch):
    """The two lines MuJoCo prints when its optional warp backend is absent are filtered from
    the import's output (a bare import prints them); anything else it prints passes through."""
    import builtins
    import subprocess
    import sys

    from pgjax.envs import brax_env

    bare = subprocess.run([sys.executable, "-c", "import brax.envs"], capture_output=True,
                          text=True).stdout
    ours = subprocess.run([sys.executable, "-c", "from pgjax.envs.brax_env import import_brax; "
                           "import_brax()"], capture_output=True, text=True).stdout
    import importlib.util

    if importlib.util.find_spec("warp") is None:  # (MuJoCo Playground's extra installs warp)
        assert "Failed to import warp" in bare  # what the filter is for
    assert "Failed to import" not in ours, ours

    monkeypatch.delitem(sys.modules, "brax.envs", raising=False)
    real_import = builtins.__import__

    def noisy(name, *a, **k):
        if name == "brax.envs":
            print("Failed to import warp: No module named 'warp'")
            print("a real message from an import")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", noisy)
    brax_env.import_brax()
    out = capsys.readouterr().out
    assert "a real message from an import" in out and "Failed to import warp" not in out


def test_a_simulator_state_keeps_its_types_across_steps():
    """A simulator whose reset puts Python scalars in its state (weakly typed, as gymnax's
    ``time=0`` and JaxMARL's ``step=0``) and whose step returns arrays: the batched state
    has one type from the reset on, so a program that carries it compiles once."""
    from pgjax.envs import ActionSpace, EnvSpec, VectorEnv

    def reset1(key):
        return {"t": 0, "x": 0.0}, jnp.zeros(1)

    def step1(s, a):
        return ({"t": s["t"] + 1, "x": s["x"] + jnp.float32(1)}, jnp.zeros(1),
                jnp.float32(0), jnp.bool_(False))

    env = VectorEnv(EnvSpec("t:t", (1,), ActionSpace("discrete", 2), 3, 5), reset1, step1)
    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    after, _ = step(state, jnp.zeros(3, jnp.int32))
    kinds = lambda s: [(x.dtype, x.weak_type) for x in jax.tree.leaves(s)]
    assert kinds(after) == kinds(state)
    step(after, jnp.zeros(3, jnp.int32))
    assert step._cache_size() == 1
