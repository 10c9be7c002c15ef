"""A config's parts built (environment, policy, update rule) and checked before compiling."""
from __future__ import annotations

import json

import jax

from pgjax.algos import ALGORITHMS
from pgjax.algos.multiagent import make_combinator
from pgjax.training.config import TrainConfig
from pgjax.envs import make_env
from pgjax.envs.core import check_env
from pgjax.core.errors import ConfigError
from pgjax.model.policies import make_joint_policy
from pgjax.core.registry import AGENT_SCHEMES, ENV_FAMILIES, POLICY_KINDS


def build_env(cfg: TrainConfig, num_envs: int):
    """The environment a policy kind trains on: the task (with ``--observe``), extended by
    the kind where it keeps memory in the environment (S2PG's internal state, windows). A
    plugin family's environments are checked (``check_env``); observations of more than one
    axis (images) only go to a kind that takes them."""
    env = make_env(cfg.env, num_envs, cfg.episode_length, cfg.env_options, cfg.observe)
    if not ENV_FAMILIES.builtin(cfg.env.partition(":")[0]):
        check_env(env, num_envs, cfg.env)
    kind = POLICY_KINDS.get(cfg.policy)
    if len(env.spec.obs_shape) > 1 and not kind.image_obs:
        raise ConfigError(f"{cfg.env} has observations of shape {env.spec.obs_shape} (images?); "
                          f"--policy {cfg.policy} takes flat vectors: flatten them in the "
                          f"environment, or register a policy kind that reads images")
    return kind.wrap_env(cfg, env) if kind.wrap_env is not None else env


def build_policy(cfg: TrainConfig, env):
    """The policy kind of ``cfg`` on ``env`` (built by ``build_env``); per-agent policies
    for multi-agent training."""
    if cfg.scheme is not None:
        return make_joint_policy(env, cfg.net, AGENT_SCHEMES.get(cfg.scheme).central,
                                 cfg.agents.share_actor, cfg.agents.obs == "full_state_id")
    return POLICY_KINDS.get(cfg.policy).build(cfg, env)


def check(cfgs) -> None:
    """Everything ``Trainer`` checks for each config in ``cfgs``, before anything compiles:
    the options, the environment id (each distinct environment built once, with one env),
    and the policy kind and update rule against its spaces. Raises ``ConfigError``."""
    envs = {}
    for cfg in cfgs:
        cfg.validate()
        key = json.dumps({k: v for k, v in cfg.to_dict().items()
                          if k in ENV_KEYS or k in cfg.used()}, sort_keys=True, default=str)
        if key not in envs:
            envs[key] = build_env(cfg, 1)
        policy = build_policy(cfg, envs[key])
        build_algorithm(cfg, policy)
        check_memory(cfg, envs[key], policy)
    for env in envs.values():
        env.close()


# the options that decide the environment a policy sees (with its kind's and family's own)
ENV_KEYS = ("env", "episode_length", "observe", "policy")


def memory_needed(cfg: TrainConfig, env, policy) -> int:
    """A lower estimate of the bytes the runs of ``cfg`` hold at once (computed from shapes
    only, nothing is allocated): per run the parameters with Adam's two moments and the
    gradients, and the rollout (observations, final observations, actions, rewards, values)
    with the batch made from it."""
    import math

    spec = env.spec
    shapes = jax.eval_shape(lambda k: policy.init(k, spec.obs_shape),
                            jax.random.PRNGKey(0))
    params = sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))
    per_step = 3 * math.prod(spec.obs_shape) + 2 * spec.action.n + 8
    rollout = cfg.num_envs * cfg.rollout_len * per_step
    return 4 * len(cfg.runs()) * (4 * params + 2 * rollout)


def available_memory() -> int | None:
    """Bytes of the first device's memory (the host's for the CPU), or None if unknown."""
    import os

    try:  # this process's own device (another host's cannot be asked)
        stats = jax.local_devices()[0].memory_stats() or {}
    except Exception:  # backends without memory statistics
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(cfg: TrainConfig, env, policy) -> None:
    """Refuse, in one line and before anything compiles, runs that cannot fit in memory."""
    need, have = memory_needed(cfg, env, policy), available_memory()
    if cfg.shard and not env.spec.host:  # the runs are spread over the devices
        need //= max(1, jax.device_count())
    if have is not None and need > have:
        raise ConfigError(f"these {len(cfg.runs())} runs need at least {need / 2**30:,.1f} GB "
                          f"(parameters, optimiser state and the rollout of {cfg.num_envs} envs "
                          f"x {cfg.rollout_len} steps each), more than the {have / 2**30:,.1f} GB "
                          f"here; pass fewer --seeds or --num-envs, a shorter --rollout-len or "
                          f"smaller network and state sizes")


def build_algorithm(cfg: TrainConfig, policy):
    """The update rule for ``policy``; in a multi-agent setting the rule wrapped by the
    multi-agent combinator."""
    factory = ALGORITHMS[cfg.rule].factory
    if cfg.scheme is None:
        return factory(cfg.algo_config, policy)
    return make_combinator(factory, cfg.algo_config, policy.partition, policy.actor,
                           policy.critic, policy.agent_distribution, cfg.scheme,
                           cfg.agents.order, cfg.agents.share_actor)

