"""Fixed reference scores per task (a random policy's return, measured once with the command
stored beside it, and a documented maximum with its source), which normalise final returns
as (return - random) / (maximum - random), never by the runs being compared.

    python -m pgjax.analysis.references gym:Hopper-v5 brax:inverted_pendulum --episodes 100

measures a uniformly random policy (actions drawn uniformly from the action space, each
episode run to its end or the task's time limit) and prints the entries to store here.
``register_reference`` adds a task's references from a plugin; a task without them is shown
unnormalised, with a note.
"""
from __future__ import annotations

import argparse
import sys
from typing import NamedTuple

import numpy as np

from pgjax.core.errors import ConfigError


class Reference(NamedTuple):
    """A task's reference scores, both at its own time limit ``episode_length``."""

    random: float
    """Mean return of a uniformly random policy (``measure_random``)."""
    random_command: str
    """The command that measured ``random`` (its episodes and seed)."""
    maximum: float
    """The score that normalises to 1: the task's optimum, or a published result."""
    maximum_source: str
    """Where ``maximum`` comes from."""
    episode_length: int
    """The time limit both scores refer to; runs with another one are not normalised."""

    def normalise(self, value):
        return (np.asarray(value, float) - self.random) / (self.maximum - self.random)


_MEASURE = "python -m pgjax.analysis.references {env} --episodes 100 --seed 0"
_D4RL = ("D4RL (Fu et al. 2020, d4rl/infos.py REF_MAX_SCORE): return of the expert SAC policy "
         "on {task}-v2, the offline-RL literature's normalisation; v5 keeps v2's reward terms")
REFERENCES: dict[str, Reference] = {}


def register_reference(env: str, random: float, random_command: str, maximum: float,
                       maximum_source: str, episode_length: int) -> Reference:
    """Add (or replace) the reference scores of task ``env`` (e.g. from a ``--plugins``
    module, next to the task's registration)."""
    if not maximum > random:
        raise ValueError(f"{env}: the reference maximum {maximum} must exceed the random "
                         f"policy's return {random}")
    REFERENCES[env] = Reference(float(random), random_command, float(maximum), maximum_source,
                                int(episode_length))
    return REFERENCES[env]


def reference_for(env: str, episode_length: int | None,
                  task_options: str = "") -> tuple[Reference | None, str]:
    """(the references of ``env`` at time limit ``episode_length`` (None: the task's own),
    "") or (None, why the task is shown unnormalised); ``task_options``: the run's options
    that change the task (``pgjax.envs.task_options``), for which no reference holds."""
    ref = REFERENCES.get(env)
    if ref is None:
        return None, f"{env} has no reference scores (pgjax.analysis.references)"
    if task_options:
        return None, (f"{env} runs with its own options ({task_options}); its references "
                      f"are for the task's defaults")
    if episode_length is not None and episode_length != ref.episode_length:
        return None, (f"{env} runs with a {episode_length}-step time limit; its references "
                      f"are for {ref.episode_length} steps")
    return ref, ""


# random: measured with _MEASURE (100 episodes, seed 0; standard errors 0.3 to 11)
for _env, _random in (("brax:inverted_pendulum", 5.74), ("gym:InvertedPendulum-v5", 5.10)):
    register_reference(_env, _random, _MEASURE.format(env=_env), 1000.0,
                       "the optimum: reward 1 per step upright, 1000-step time limit", 1000)
for _env, _random in (("jax:cartpole", 24.59), ("gym:CartPole-v1", 22.45)):
    register_reference(_env, _random, _MEASURE.format(env=_env), 500.0,
                       "the optimum: reward 1 per step, 500-step time limit", 500)
for _env, _task, _random, _max in (("gym:HalfCheetah-v5", "halfcheetah", -275.78, 12135.0),
                                   ("gym:Hopper-v5", "hopper", 18.45, 3234.3),
                                   ("gym:Walker2d-v5", "walker2d", 1.62, 4592.3),
                                   ("gym:Ant-v5", "ant", -62.27, 3879.7)):
    register_reference(_env, _random, _MEASURE.format(env=_env), _max,
                       _D4RL.format(task=_task), 1000)

for _env, _random in (("playground:CartpoleBalance", 355.47), ("playground:CartpoleSwingup", 28.75),
                      ("playground:PendulumSwingup", 1.27), ("playground:ReacherEasy", 35.38),
                      ("playground:WalkerWalk", 31.88), ("playground:CheetahRun", 3.29)):
    register_reference(_env, _random, _MEASURE.format(env=_env), 1000.0,
                       "the bound: every DM Control reward is in [0, 1] per step "
                       "(mujoco_playground/_src/reward.py, tolerance), 1000-step episodes", 1000)


def measure_random(env_id: str, episodes: int = 100, seed: int = 0) -> tuple[float, float, int]:
    """(mean, standard error, time limit) of the return of ``episodes`` episodes of a policy
    that draws every action uniformly from the action space (one episode per environment,
    run to its end or the time limit)."""
    import jax

    from pgjax.envs import make_env

    env = make_env(env_id, episodes)
    if not hasattr(env, "spec") or not hasattr(env.spec, "action"):
        raise ConfigError(f"{env_id} is not a single-agent task; reference scores are "
                          f"measured on single-agent tasks")
    space, limit = env.spec.action, env.spec.max_episode_steps
    key, reset_key = jax.random.split(jax.random.PRNGKey(seed))
    state, _ = env.reset(reset_key)

    def act(k):
        if space.kind == "discrete":
            return jax.random.randint(k, (episodes,), 0, space.n)
        return jax.random.uniform(k, (episodes, space.n), minval=space.low, maxval=space.high)

    step = env.step if env.spec.host else jax.jit(env.step)
    act = jax.jit(act)
    returns = np.full(episodes, np.nan)
    for _ in range(limit):
        key, k = jax.random.split(key)
        state, ts = step(state, act(k))
        done = np.asarray(ts.terminated | ts.truncated) & np.isnan(returns)
        returns[done] = np.asarray(ts.episode_return)[done]
        if not np.isnan(returns).any():
            break
    env.close()
    if np.isnan(returns).any():
        raise ConfigError(f"{env_id}: {int(np.isnan(returns).sum())} episodes did not end "
                          f"within the time limit {limit}")
    return float(returns.mean()), float(returns.std(ddof=1) / np.sqrt(episodes)), int(limit)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pgjax.analysis.references",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("envs", nargs="+", help="task ids, e.g. gym:Hopper-v5")
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        if a.episodes < 2:
            raise ConfigError(f"--episodes must be >= 2, got {a.episodes}")
        for env in a.envs:
            mean, se, limit = measure_random(env, a.episodes, a.seed)
            stored = REFERENCES.get(env)
            note = f" (stored: {stored.random:g})" if stored else " (not stored)"
            print(f"{env}: random policy return {mean:.2f} +- {se:.2f} (standard error, "
                  f"{a.episodes} episodes, time limit {limit}){note}")
    except ConfigError as e:
        print(f"pgjax references: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
