"""reach:<dim>d: a point mass steered to a goal; the episode terminates when it gets there."""
import dataclasses

import jax
import jax.numpy as jnp

from pgjax.envs import ActionSpace, ConfigError, EnvFamily, EnvSpec, VectorEnv, register


@dataclasses.dataclass(frozen=True)
class ReachOptions:
    """The reach: family (--reach.<field>)."""

    radius: float = 0.1
    """Distance to the goal at which an episode terminates."""

    def validate(self, cfg):
        if not self.radius > 0:
            raise ConfigError(f"reach.radius must be > 0, got {self.radius}; "
                              f"pass a positive --reach.radius")


def make(name, num_envs, episode_length, options):
    if not (name.endswith("d") and name[:-1].isdigit() and int(name[:-1]) >= 1):
        raise ConfigError(f"unknown task 'reach:{name}'; write reach:<dim>d, e.g. reach:2d")
    dim = int(name[:-1])

    def reset1(key):  # -> (sim_state, obs)
        pos, goal = jax.random.uniform(key, (2, dim), minval=-1.0, maxval=1.0)
        return (pos, goal), jnp.concatenate([pos, goal])

    def step1(state, action):  # -> (sim_state, obs, reward, terminated)
        pos, goal = state
        pos = pos + 0.1 * action  # actions arrive clipped to the ActionSpace bounds
        distance = jnp.linalg.norm(pos - goal)
        reached = distance < options.radius
        reward = jnp.where(reached, 10.0, -distance)
        return (pos, goal), jnp.concatenate([pos, goal]), reward, reached

    spec = EnvSpec(name=f"reach:{name}", obs_shape=(2 * dim,),
                   action=ActionSpace("box", dim, low=-1.0, high=1.0),
                   num_envs=num_envs, max_episode_steps=episode_length or 100)
    return VectorEnv(spec, reset1, step1)


register("reach", EnvFamily(make, "a point mass steered to a goal", ("reach:2d",),
                            options=ReachOptions, options_key="reach"))
