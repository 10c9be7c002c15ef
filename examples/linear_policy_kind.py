"""A policy kind registered from a plugin: a linear Gaussian policy (--policy linear), with an option."""
import dataclasses

import flax.linen as nn

from pgjax.model.distributions import Gaussian
from pgjax.core.errors import ConfigError
from pgjax.training.kinds import PolicyKind, register
from pgjax.model.nets import Critic, activation_fn
from pgjax.model.policies import ActorCritic


@dataclasses.dataclass(frozen=True)
class LinearConfig:
    """The linear policy (--linear.<field>)."""

    bias: bool = True
    """Give the mean an offset as well as a gain."""


class LinearActor(nn.Module):
    action_dim: int
    bias: bool

    @nn.compact
    def __call__(self, obs):
        zeros = nn.initializers.zeros
        mean = nn.Dense(self.action_dim, use_bias=self.bias, kernel_init=zeros)(obs)
        return {"mean": mean, "log_std": self.param("log_std", zeros, (self.action_dim,))}


def build(cfg, env):
    if env.spec.action.kind != "box":
        raise ConfigError(f"--policy linear needs continuous actions; {cfg.env} has discrete ones")
    critic = Critic(tuple(cfg.net.critic_hidden), activation_fn(cfg.net.activation))
    return ActorCritic(LinearActor(env.spec.action.n, cfg.linear.bias), critic, Gaussian())


register("linear", PolicyKind(build, "a linear Gaussian policy", options=LinearConfig,
                              options_key="linear"))
