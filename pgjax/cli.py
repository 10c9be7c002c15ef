"""The ``pgjax`` command.

    pgjax train --algo ppo --env brax:inverted_pendulum --seeds 4 --steps 300000
    pgjax train --help            every field of the typed config, documented
    pgjax train --preset s2pg-paper --env brax:hopper --observe positions
    pgjax presets [NAME ...]      each preset's source, settings and deviations
"""
from __future__ import annotations

import os
import sys

USAGE = """usage: pgjax <command> [options]

commands:
  train     train one algorithm on one environment, seeds and a hyperparameter grid vmapped
            (pgjax train --help lists every option)
  sweep     run a TOML grid of algorithms x environments x hyperparameters x seeds, resumable
  plot      IQM/mean curves with stratified-bootstrap CIs, aggregate tables, diagnostics
  eval      evaluate the trained policies of a run directory again (fresh episodes, CIs)
  render    one episode of a trained policy as an mp4/gif video, or Brax's viewer (.html)
  presets   list the named presets (pgjax train --preset NAME) with their sources and values

exit codes: 0 done; 2 bad input, refused before anything ran; 3 some runs failed (diverged
or an update rule's error; the others finished, see status.json)

train and sweep keep compiled programs in a per-user cache (~/.cache/pgjax/jax, or
$PGJAX_COMPILE_CACHE), so a rerun of the same configuration starts in seconds;
--no-compile-cache (or PGJAX_COMPILE_CACHE=off) turns it off.
"""


def _tyro(cls, argv: list[str], **kw):
    """``tyro.cli(cls, ...)`` with its parse errors turned into one line: the message of
    tyro's error box, as a ``ConfigError``. Help and other output pass through."""
    import contextlib
    import io

    import tyro

    from pgjax.errors import ConfigError

    buf = io.StringIO()
    try:
        with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
            return tyro.cli(cls, args=argv, prog="pgjax train", **kw)
    except SystemExit as e:
        if e.code in (0, None):
            sys.stdout.write(buf.getvalue())
            raise
        lines = [line.strip() for line in buf.getvalue().splitlines()]
        rules = [i for i, line in enumerate(lines) if line and set(line) <= set("-─")]
        message = " ".join(x for x in lines[rules[0] + 1:rules[1]] if x) if len(rules) > 1 \
            else " ".join(x for x in lines if x)
        raise ConfigError(f"{message}; see pgjax train --help for the options and their "
                          f"types") from None
    finally:
        if not sys.exc_info()[0]:
            sys.stderr.write(buf.getvalue())


def _renamed_flags(argv: list[str]) -> None:
    """A flag spelled as before its option moved into a component's config (``--z-dim``) is
    refused with its new spelling."""
    from pgjax.config import RENAMED
    from pgjax.errors import ConfigError

    for arg in argv:
        if not arg.startswith("--"):
            continue
        name = arg[2:].split("=")[0].replace("-", "_")
        negated = name.startswith("no_") and name[3:] in RENAMED
        old = name[3:] if negated else name
        if old in RENAMED:
            head, _, tail = RENAMED[old].partition(".")
            new = f"--{head}.{'no-' if negated else ''}{tail.replace('_', '-')}"
            raise ConfigError(f"--{arg[2:].split('=')[0]} is spelled {new} now; pass {new}")


def parse_train(argv: list[str]):
    """``pgjax train`` arguments -> TrainConfig; with ``--preset`` the preset (for the
    ``--env`` given) becomes the defaults, so every explicit flag overrides it."""
    import argparse

    from pgjax.algos import ALGORITHMS
    from pgjax.config import TrainConfig, config_class
    from pgjax.errors import ConfigError

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--plugins", nargs="*", default=[])
    _renamed_flags(argv)
    cls = config_class(TrainConfig, pre.parse_known_args(argv)[0].plugins)
    cfg = _tyro(cls, argv)
    if cfg.preset is not None:
        cfg = _tyro(cls, argv, default=cls(env=cfg.env).with_preset(cfg.preset))
    for arg in argv:  # an option of a component this run does not use: refuse it
        head, dot, _ = arg.lstrip("-").partition(".")
        if not (arg.startswith("--") and dot) or head in cfg.used():
            continue
        if head in ALGORITHMS:
            raise ConfigError(f"{arg.split('=')[0]} is an option of {head}, but --algo "
                              f"{cfg.algo} trains with {cfg.rule}; pass {cfg.rule}'s options "
                              f"as --{cfg.rule}.<name>, or use --algo {head}")
        raise ConfigError(f"{arg.split('=')[0]} is set but this run (--env {cfg.env} --policy "
                          f"{cfg.policy} --algo {cfg.algo}) does not use --{head}.* options; "
                          f"drop it")
    return cfg


def train_main(argv: list[str]) -> int:
    from pgjax.errors import EXIT_BAD_INPUT, EXIT_RUNS_FAILED, ConfigError, TrainingError
    from pgjax.runner import run

    try:
        cfg = parse_train(argv)
        records = run(cfg)
    except ConfigError as e:
        print(f"pgjax train: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TrainingError as e:
        print(f"pgjax train: error: {e}", file=sys.stderr)
        return EXIT_RUNS_FAILED
    print(f"records written to {records.root}")
    return 0


def presets_main(argv: list[str]) -> int:
    from pgjax import presets

    names = argv or list(presets.PRESETS)
    unknown = [n for n in names if n not in presets.PRESETS]
    if unknown:
        print(f"pgjax presets: error: unknown preset '{unknown[0]}'; use one of "
              f"{', '.join(presets.PRESETS)}", file=sys.stderr)
        return 2
    print("\n\n".join(presets.describe(presets.PRESETS[n]) for n in names))
    return 0


def sweep_main(argv: list[str]) -> int:
    from pgjax.sweep import sweep_main as main_

    return main_(argv)


def eval_main(argv: list[str]) -> int:
    from pgjax.trained import eval_main as main_

    return main_(argv)


def render_main(argv: list[str]) -> int:
    from pgjax.render import render_main as main_

    return main_(argv)


def plot_main(argv: list[str]) -> int:
    from pgjax.plotting import plot_main as main_

    return main_(argv)


COMMANDS = {"train": train_main, "sweep": sweep_main, "plot": plot_main,
            "presets": presets_main, "eval": eval_main, "render": render_main}
COMPILING = ("train", "sweep", "eval", "render")  # the commands that use the compilation cache


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # output piped into a reader that stopped (e.g. `| head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # Ctrl-C: records are atomic, checkpoints verified on resume
        print("pgjax: interrupted; finished chunks are recorded (continue a run with "
              "--resume, a sweep by running it again)", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] not in COMMANDS:
        print(f"pgjax: unknown command '{argv[0]}'; use one of: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    args = argv[1:]
    if argv[0] in COMPILING:
        if "--no-compile-cache" in args:
            args = [a for a in args if a != "--no-compile-cache"]
        else:
            from pgjax import compile_cache

            compile_cache.enable()
    return COMMANDS[argv[0]](args)


if __name__ == "__main__":
    sys.exit(main())
