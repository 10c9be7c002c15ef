"""The gym: family's settings (GymOptions, --gym.<field>) and how many worker processes to use."""
from __future__ import annotations

import ast
import dataclasses
import os

from pgjax.core.errors import ConfigError, check_choice

VECTORIZATION = ("auto", "sync", "workers", "async")
# auto: below this many envs per core, stepping them in this process is faster than a round
# trip to worker processes (benchmarks/gym_host_loop.py --ceiling)
AUTO_MIN_ENVS_PER_WORKER = 16


# gymnasium.make's own arguments, which pgjax sets: where a user says what they want instead
_MAKE_OWN = {"max_episode_steps": "pass --episode-length",
             "disable_env_checker": "it is always off",
             "render_mode": "pgjax render sets it",
             "width": "pgjax render --width sets it", "height": "pgjax render --height sets it"}
MAX_KWARGS_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class GymOptions:
    """Settings of the gym: family (--gym.<field>)."""

    vectorization: str = "auto"
    """How the envs are stepped: sync (all in this process), workers (--gym.workers processes,
    each stepping a block of envs), async (Gymnasium's AsyncVectorEnv, a process per env), or
    auto (workers when every worker gets at least 16 envs and the env id can be made in a
    fresh process, else sync). Results are the same either way."""

    workers: int = 0
    """Worker processes for vectorization workers/auto (0: one per CPU core)."""

    kwargs: str = ""
    """Keyword arguments for gymnasium.make, written as in a call with Python literals (e.g.
    'include_cfrc_ext_in_observation=False, ctrl_cost_weight=0.05'): the task's own options.
    They change the task, so a run records them (in one spelling: name=repr(value), in the
    order given) and resumes only under the same ones."""

    # fields that change how fast the envs are stepped, never a result: a run resumes
    # under other values
    SPEED_ONLY = ("vectorization", "workers")
    # fields that change the task itself: references and published figures are for the
    # task without them (pgjax.envs.task_options)
    TASK = ("kwargs",)

    def __post_init__(self):
        # one spelling per set of options ('a = 1' is 'a=1'), so that records and resumes
        # compare what is passed, not how it was typed; what does not parse is left for
        # validate to refuse
        try:
            kwargs = self.make_kwargs()
        except ConfigError:
            return
        object.__setattr__(self, "kwargs", ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))

    def in_process(self) -> "GymOptions":
        """These settings for stepping in this process (evaluation, rendering)."""
        return dataclasses.replace(self, vectorization="sync")

    def validate(self, cfg=None) -> None:
        check_choice(self.vectorization, VECTORIZATION, "vectorization", "--gym.vectorization")
        if self.workers < 0:
            raise ConfigError(f"--gym.workers must be >= 0 (0: one per CPU core), got "
                              f"{self.workers}")
        self.make_kwargs()

    def make_kwargs(self) -> dict:
        """``kwargs`` as a dict (a ConfigError naming the problem where it is not
        ``name=literal, ...``)."""
        text = self.kwargs
        fix = ("write --gym.kwargs as name=value pairs with Python literals, e.g. "
               "'include_cfrc_ext_in_observation=False, healthy_z_range=(0.3, 1.0)'")
        if not isinstance(text, str):
            raise ConfigError(f"--gym.kwargs must be a string, got {type(text).__name__} "
                              f"{text!r}; {fix}")
        if not text.strip():
            return {}

        def refuse(why):
            return ConfigError(f"--gym.kwargs {text[:80]!r}{'...' if len(text) > 80 else ''} "
                               f"is not keyword arguments ({why}); {fix}")

        if len(text) > MAX_KWARGS_CHARS:
            raise refuse(f"{len(text):,} characters, more than {MAX_KWARGS_CHARS:,}")
        try:
            call = ast.parse(f"f({text})", mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise refuse("not valid Python") from None
        # exactly one call of the wrapper: "a=1)(b=2" or "a=1), g(b=2" are something else
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "f"):
            raise refuse("not one list of name=value pairs")
        if call.args:
            raise refuse("a value without a name")
        out = {}
        for k in call.keywords:
            if k.arg is None:
                raise refuse("** is not a keyword argument")
            if k.arg in out:
                raise refuse(f"{k.arg} is given twice")
            if k.arg in _MAKE_OWN:
                raise refuse(f"{k.arg} is pgjax's to set: {_MAKE_OWN[k.arg]}")
            try:
                out[k.arg] = ast.literal_eval(k.value)
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                raise refuse(f"the value of {k.arg} is not a literal: a number, a string in "
                             f"quotes, True, False, None, or a tuple, list or dict of "
                             f"those") from None
        return out

    def resolve(self, n: int, portable: bool = True) -> tuple[str, int]:
        """(sync, workers or async; the number of worker processes) for n envs in all;
        ``portable``: whether a fresh process can make the env (auto steps it in this
        process otherwise)."""
        workers = self.workers or default_workers()
        if self.vectorization == "auto":
            if not portable:
                return "sync", 1
            workers = min(workers, n // AUTO_MIN_ENVS_PER_WORKER)
            return ("workers", workers) if workers >= 2 else ("sync", 1)
        return self.vectorization, workers


def default_workers() -> int:
    """The CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
