"""An environment family registered from a plugin: point:<dim>d, a point mass steered to the origin."""
import jax
import jax.numpy as jnp

from pgjax.envs import ActionSpace, ConfigError, EnvFamily, EnvSpec, VectorEnv, register


def make(name, num_envs, episode_length, options):
    if not (name.endswith("d") and name[:-1].isdigit() and int(name[:-1]) >= 1):
        raise ConfigError(f"unknown task 'point:{name}'; write point:<dim>d, e.g. point:2d")
    dim = int(name[:-1])

    def reset1(key):
        x = jax.random.uniform(key, (dim,), minval=-1.0, maxval=1.0)
        return x, x

    def step1(x, action):
        x = jnp.clip(x + 0.1 * jnp.clip(action, -1.0, 1.0), -2.0, 2.0)
        return x, x, -jnp.sum(x**2), jnp.bool_(False)

    spec = EnvSpec(f"point:{name}", (dim,), ActionSpace("box", dim), num_envs,
                   episode_length or 50)
    return VectorEnv(spec, reset1, step1)


register("point", EnvFamily(make, "a point mass steered to the origin", ("point:2d",)))
