"""The errors pgjax raises on purpose: bad user input and failed runs (the lowest layer)."""
from __future__ import annotations


class ConfigError(ValueError):
    """Bad user input (unknown env, invalid hyperparameter, ...), raised before compilation.

    The message is one line that names the problem and the fix.
    """


class InUse(ConfigError):
    """A run directory is being trained into by another pgjax process (its lock is held)."""


class TrainingError(RuntimeError):
    """A run failed (non-finite loss or parameters, or an algorithm's own failure such as
    FixPO's fixup cap); the other runs and every record up to the failure are kept."""


class StorageError(TrainingError):
    """The records could not be written (full, read-only or unwritable storage, a path too
    long): one line naming the path and the fix. Nothing is marked finished; the run
    continues with ``--resume`` once the storage is fixed."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread by ``pgjax``'s handler: the run stops as at
    Ctrl-C (finished chunks recorded, a replaced run restored), exit 143."""


def did_you_mean(value: str, choices, n: int = 2) -> str:
    """`` (did you mean 'x'?)`` for the choices closest to a mistyped ``value`` (case
    ignored), or ""."""
    import difflib

    choices = [str(c) for c in choices]
    lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(str(value).lower(), list(lower), n=n, cutoff=0.75)
    if not close:
        return ""
    return " (did you mean " + " or ".join(f"'{lower[c]}'" for c in close) + "?)"


def check_choice(value, allowed, name: str, flag: str) -> None:
    """A ``ConfigError`` unless ``value`` is one of ``allowed``: the option ``name``, set by
    ``flag``."""
    if value not in allowed:
        raise ConfigError(f"unknown {name} '{value}'{did_you_mean(value, allowed)}; pass "
                          f"{flag} with one of {', '.join(allowed)}")


EXIT_BAD_INPUT = 2  # the input was refused before anything ran (a one-line error)
EXIT_RUNS_FAILED = 3  # some runs failed (non-finite values, rule errors), or the storage did
EXIT_TERMINATED = 143  # SIGTERM (128 + 15): stopped, finished chunks recorded

INT_MAX = 2**31 - 1  # counts and seeds live in int32 inside the compiled program
