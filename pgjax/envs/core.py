"""The pure, batched environment protocol every pgjax environment implements.

An environment is a pair of pure functions over a named state pytree::

    state, obs = env.reset(key)                # obs: [N, *obs_shape]
    state, ts = env.step(state, action)        # ts: TimeStep, every field batched over N envs

Environments reset themselves: when an episode ends at step t, ``ts.obs`` already holds the
first observation of the next episode while ``ts.final_obs`` keeps the real last observation
s'_t, so that truncated episodes can bootstrap from V(s'_t).
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple, Optional, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from pgjax.core.errors import ConfigError  # noqa: F401  (raised by every env builder)


class ActionSpace(NamedTuple):
    """``kind`` is ``"box"`` (continuous, shape ``(n,)``, bounds low/high) or ``"discrete"``
    (``n`` choices, scalar integer actions)."""

    kind: str
    n: int
    low: float = -1.0
    high: float = 1.0


class EnvSpec(NamedTuple):
    """What an environment is: its id, the shape of one observation (float32), its action
    space, how many copies it steps at once, its time limit and whether it is stepped on the
    host (outside the compiled program, as Gymnasium's are)."""

    name: str
    obs_shape: tuple
    action: ActionSpace
    num_envs: int
    max_episode_steps: int
    host: bool = False  # stepped outside XLA (Gymnasium): not shardable, not checkpointable
    success: str = ""  # what a successful episode is, in words (SMAX: won); "": none reported


@struct.dataclass
class TimeStep:
    """Output of one batched step; every field has leading dimension N (number of envs).

    obs:            [N, *obs]  observation to act on next (a reset observation where done).
    reward:         [N]        reward of this transition.
    terminated:     [N] bool   the MDP reached a terminal state: do not bootstrap.
    truncated:      [N] bool   the episode was cut by the time limit: bootstrap from final_obs.
    final_obs:      [N, *obs]  the real next observation s'_t (equals obs where not done).
    episode_return: [N]        undiscounted return of the episode that ended here (0 elsewhere).
    episode_length: [N] int    length of the episode that ended here (0 elsewhere).
    success:        [N] bool   the episode that ended here succeeded (SMAX: the battle was
                               won); None for environments that report no outcome
                               (``EnvSpec.success`` empty).
    """

    obs: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    final_obs: jax.Array
    episode_return: jax.Array
    episode_length: jax.Array
    success: Optional[jax.Array] = None

    @property
    def done(self) -> jax.Array:
        return self.terminated | self.truncated


class Env(Protocol):
    """The batched environment every pgjax environment is (see the module's docstring):
    ``reset(key) -> (state, obs)``, ``step(state, action) -> (state, TimeStep)``, both pure
    and over ``spec.num_envs`` environments at once, resetting themselves."""

    spec: EnvSpec

    def reset(self, key: jax.Array) -> tuple[Any, jax.Array]: ...

    def step(self, state: Any, action: jax.Array) -> tuple[Any, TimeStep]: ...

    def refresh(self, state: Any) -> Any:
        """Redraw whatever randomness autoreset uses (called once per rollout)."""
        ...

    def close(self) -> None:
        """Release what the environment holds outside the program (host environments)."""
        ...


class EnvFamily(NamedTuple):
    """An environment family, registered in ``pgjax.core.registry.ENV_FAMILIES`` under the prefix
    of its ids (``<family>:<name>``).

    ``make(name, num_envs, episode_length, options) -> Env`` builds a batched environment
    (``episode_length`` None: the task's own time limit; ``options``: an instance of
    ``options`` below, or None), raising ``ConfigError`` with a one-line fix for unknown
    names. ``options`` is the dataclass of the family's own settings, set by
    ``--<options_key>.<field>`` (families may share one, as Brax bodies and their
    multi-agent splits do). ``host``: stepped outside the compiled program (no in-program
    reset pool, no recurrent policy, no multi-agent training); ``multi_agent``: ``make``
    returns a ``MultiAgentEnv``; ``renderer``: how ``pgjax render`` draws its episodes
    (``system``: a Brax System's states; ``frames``: the env's rgb frames; ``trajectory``: a
    Playground task's states; ``states``: gymnax's states through its visualiser; None: it
    cannot); ``examples``: ids for help texts."""

    make: Callable
    summary: str
    examples: tuple = ()
    options: Optional[type] = None
    options_key: Optional[str] = None
    host: bool = False
    multi_agent: bool = False
    renderer: Optional[str] = None


def check_env(env, num_envs: int, where: str = "the environment") -> None:
    """An environment from outside pgjax (handed to ``Trainer``, or built by a plugin's
    family) against what the trainer will assume, in one line each: ``num_envs``
    environments, observations one array of ``[num_envs, *spec.obs_shape]`` floats (a dict
    is refused with its keys), actions within finite bounds, and ``step`` returning
    ``[num_envs]`` rewards and boolean ``terminated`` / ``truncated``. Traces ``reset`` and
    ``step`` (``jax.eval_shape``), so nothing runs; host environments are pgjax's own."""
    spec = env.spec
    if spec.num_envs != num_envs:
        raise ConfigError(f"{where} has {spec.num_envs} environments but the config asks for "
                          f"{num_envs} (--num-envs / --eval-envs); build it with num_envs="
                          f"{num_envs}, or set the config to {spec.num_envs}")
    if spec.action.kind == "box" and not (-float("inf") < spec.action.low < spec.action.high
                                          < float("inf")):
        raise ConfigError(f"{where}'s action bounds [{spec.action.low}, {spec.action.high}] "
                          f"must be finite with low < high; give its ActionSpace finite bounds")
    if spec.host:
        return
    out = _traced(jax.eval_shape, env.reset, jax.random.PRNGKey(0), where=where,
                  name="reset(key)", expected="(state, obs)")
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise ConfigError(f"{where}'s reset(key) returns {_arity(out)}; pgjax's environment "
                          f"protocol expects (state, obs): return those two")
    state, obs = out
    if isinstance(obs, dict):
        raise ConfigError(f"{where}'s observations are a dict (keys {', '.join(sorted(obs))}); "
                          f"pgjax's policies read one array: concatenate the entries in the "
                          f"environment (e.g. in sorted key order)")
    want = (num_envs, *spec.obs_shape)
    if getattr(obs, "shape", None) != want or not jnp.issubdtype(obs.dtype, jnp.floating):
        raise ConfigError(f"{where}'s reset gives observations {getattr(obs, 'shape', obs)} "
                          f"{getattr(obs, 'dtype', '')}, but its spec says {want} floats; make "
                          f"them agree (EnvSpec.obs_shape, float32 observations)")
    action = jax.ShapeDtypeStruct((num_envs, spec.action.n) if spec.action.kind == "box"
                                  else (num_envs,),
                                  jnp.float32 if spec.action.kind == "box" else jnp.int32)
    out = _traced(jax.eval_shape, env.step, state, action, where=where,
                  name="step(state, action)", expected="(state, TimeStep)")
    if not isinstance(out, (tuple, list)) or len(out) != 2 or \
            not all(hasattr(out[1], f) for f in ("reward", "terminated", "truncated")):
        raise ConfigError(f"{where}'s step(state, action) returns {_arity(out)}; pgjax's "
                          f"environment protocol expects (state, TimeStep) with reward, "
                          f"terminated and truncated (see pgjax.envs.TimeStep)")
    _, ts = out
    for field, kind in (("reward", jnp.floating), ("terminated", jnp.bool_),
                        ("truncated", jnp.bool_)):
        x = getattr(ts, field)
        if x.shape != (num_envs,) or not jnp.issubdtype(x.dtype, kind):
            raise ConfigError(f"{where}'s step gives {field} {x.shape} {x.dtype}; pgjax needs "
                              f"[{num_envs}] {'floats' if kind is jnp.floating else 'bools'}")


def _arity(out) -> str:
    """How a function's result looks, for an error message."""
    if isinstance(out, (tuple, list)):
        return f"{len(out)} values ({', '.join(type(x).__name__ for x in out)})"
    return f"one {type(out).__name__}"


def _traced(trace, function, *args, where: str, name: str, expected: str):
    """``trace(fn, *args)``; an error raised by the environment's own code while it is traced
    (a wrong tuple unpacked, a shape mismatch) becomes one line naming the function, the
    place in its code and what pgjax expects it to return."""
    import traceback

    try:
        return trace(function, *args)
    except ConfigError:
        raise
    except Exception as e:
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if "/jax/" not in f.filename and "/jaxlib/" not in f.filename]
        at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
        message = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        raise ConfigError(f"{where}'s {name} failed while traced ({type(e).__name__}: "
                          f"{message}{at}); it must return {expected} of jax arrays") from None


class Wrapper:
    """An environment that changes part of another's behaviour; ``reset``, ``step``,
    ``refresh`` and ``close`` pass through to ``env`` unless a subclass overrides them, and
    ``spec`` is ``env.spec`` unless the subclass sets its own."""

    def __init__(self, env):
        self.env = env
        self.spec = env.spec

    @property
    def host(self) -> bool:
        return self.spec.host

    def reset(self, key):
        return self.env.reset(key)

    def step(self, state, action):
        return self.env.step(state, action)

    def refresh(self, state):
        return self.env.refresh(state)

    def close(self):
        self.env.close()
