"""PPO that skips its remaining epochs once an epoch ends above a KL target (cleanrl's target_kl)."""
import dataclasses

from pgjax.algos import PPOConfig, register, traced
from pgjax.algos.pieces import EpochResult, clipped_surrogate, sgd_rule, surrogate_objective


@dataclasses.dataclass(frozen=True)
class PPOEpochStopConfig(PPOConfig):
    kl_stop: float = traced(0.02)
    """Skip the remaining epochs after one whose last minibatch's approx-KL exceeds this (traced)."""


def stop_on_kl(e):  # e.minibatch: this epoch's per-minibatch metrics
    return EpochResult(e.params, e.state, stop=e.minibatch["approx_kl"][-1] > e.hp.kl_stop)


register("ppo_es", PPOEpochStopConfig, lambda cfg, policy: sgd_rule(
    "ppo_es", cfg, policy, surrogate_objective(clipped_surrogate), on_epoch=stop_on_kl))
