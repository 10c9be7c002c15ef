"""Jumanji's tasks as a pgjax family, jumanji:<id> (e.g. jumanji:Snake-v1, jumanji:Game2048-v1):
pip install 'jumanji>=1.1,<1.2'; then --plugins examples/jumanji_family.py.

The observation's fields are flattened into one float32 vector in the order the task's
observation declares them (Snake: grid, step_count, action_mask); an episode that ends with
discount 0 terminated, one that reaches the task's time limit is truncated (bootstrapped).
Tasks with one discrete action only."""
import jax
import jax.numpy as jnp
import jumanji

from pgjax.envs import ActionSpace, ConfigError, EnvFamily, EnvSpec, VectorEnv, register


def flat(observation):
    return jnp.concatenate([jnp.asarray(x, jnp.float32).reshape(-1)
                            for x in jax.tree.leaves(observation)])


def make(name, num_envs, episode_length, options):
    if name not in jumanji.registered_environments():
        raise ConfigError(f"unknown Jumanji task '{name}'; use one of "
                          f"{', '.join(jumanji.registered_environments())}")
    env = jumanji.make(name)
    if not hasattr(env.action_spec, "num_values") or jnp.ndim(env.action_spec.num_values):
        raise ConfigError(f"jumanji:{name} takes several discrete actions; pick a task with "
                          f"one (e.g. jumanji:Snake-v1)")

    def reset1(key):
        state, ts = env.reset(key)
        return state, flat(ts.observation)

    def step1(state, action):
        state, ts = env.step(state, action)
        return state, flat(ts.observation), ts.reward, ts.last() & (ts.discount == 0)

    obs = jax.eval_shape(lambda k: reset1(k)[1], jax.random.PRNGKey(0))
    spec = EnvSpec(f"jumanji:{name}", obs.shape, ActionSpace("discrete", int(env.action_spec.num_values)),
                   num_envs, episode_length or int(getattr(env, "time_limit", 1000)))
    return VectorEnv(spec, reset1, step1)


register("jumanji", EnvFamily(make, "Jumanji's tasks (one discrete action)", ("jumanji:Snake-v1",)))
