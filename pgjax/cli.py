"""The ``pgjax`` command.

    pgjax train --algo ppo --env brax:inverted_pendulum --seeds 4 --steps 300000
    pgjax train --help            every field of the typed config, documented
    pgjax train --preset s2pg-paper --env brax:hopper --observe positions
    pgjax presets [NAME ...]      each preset's source, settings and deviations
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pgjax.core.arguments import ArgumentParser, help_text, plain  # noqa: F401 (shared parser)

USAGE = """usage: pgjax <command> [options]    (pgjax --version prints the version)

commands:
  train     train one algorithm on one environment, seeds and a hyperparameter grid vmapped
            (pgjax train --help lists every option)
  sweep     run a TOML grid of algorithms x environments x hyperparameters x seeds, resumable
  plot      IQM/mean curves with stratified-bootstrap CIs, aggregate tables, diagnostics
  eval      evaluate the trained policies of a run directory again (fresh episodes, CIs)
  render    one episode of a trained policy as an mp4/gif video, or Brax's viewer (.html)
  presets   list the named presets (pgjax train --preset NAME) with their sources and values

exit codes: 0 done; 2 bad input, refused before anything ran; 3 some runs failed (diverged
or an update rule's error; the others finished, see status.json), or the storage failed
(full, read-only) while training; 130 Ctrl-C and 143 SIGTERM (finished chunks recorded)

train and sweep keep compiled programs in a per-user cache (~/.cache/pgjax/jax, or
$PGJAX_COMPILE_CACHE), so a rerun of the same configuration starts in seconds;
--no-compile-cache (or PGJAX_COMPILE_CACHE=off) turns it off.

a run trained with --plugins carries copies of its plugin files; eval, render and
train --resume --name NAME import them only for runs you trained on this machine, or with
--trust-plugins (read the files it names first).
"""


def _tyro(cls, argv: list[str], **kw):
    """``tyro.cli(cls, ...)`` with its parse errors turned into one line: the message of
    tyro's error box, as a ``ConfigError``. Help and other output pass through."""
    import contextlib
    import io

    import tyro

    from pgjax.core.errors import ConfigError

    _plain_field_help()
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
        raise ConfigError(f"{_suggest_flags(message, cls)}; see pgjax train --help for the "
                          f"options and their types") from None
    finally:
        if not sys.exc_info()[0]:
            sys.stderr.write(buf.getvalue())


def _plain_field_help() -> None:
    """Field docstrings as ``pgjax train --help`` shows them: each paragraph one line (tyro
    wraps it to the terminal; it would keep every line break before an indented or
    non-letter line) and without reStructuredText markup (``plain``)."""
    import inspect
    import re

    try:
        from tyro import _docstrings  # where tyro reads field docstrings (tyro 1.x)

        parse = _docstrings.parse_docstring_from_object
    except (ImportError, AttributeError):  # another tyro: its own help text, as it is
        return
    if getattr(parse, "plain", False):
        return

    def one_line(text: str) -> str:
        paragraphs = re.split(r"\n\s*\n", inspect.cleandoc(text))
        return "\n\n".join(plain(re.sub(r"\s*\n\s*", " ", p)) for p in paragraphs)

    def parsed(obj) -> dict[str, str]:
        return {name: one_line(text) for name, text in parse(obj).items()}

    parsed.plain = True
    _docstrings.parse_docstring_from_object = parsed


def _suggest_flags(message: str, cls) -> str:
    """tyro's ``Unrecognized options: --ppo.lrr, 1e-3`` with the flag each mistyped one
    was probably meant to be: ``Unrecognized options: '--ppo.lrr' (did you mean
    '--ppo.lr'?), 1e-3``."""
    import dataclasses

    from pgjax.core.errors import did_you_mean
    from pgjax.training.options import flag, option_names, sub_configs

    head, sep, listed = message.partition("Unrecognized options: ")
    if not sep:
        return message
    flags = []
    for name in option_names(cls):
        flags.append(flag(name))
        owner, _, field = name.rpartition(".")
        of = sub_configs(cls)[owner] if owner else cls
        if next(f for f in dataclasses.fields(of) if f.name == field).type in (bool, "bool"):
            flags.append(flag(f"{owner}.no_{field}" if owner else f"no_{field}"))
    items = []
    for item in listed.split(", "):
        hint = did_you_mean(item.split("=")[0], flags) if item.startswith("--") else ""
        items.append(f"'{item.split('=')[0]}'{hint}" if hint else item)
    return head + sep + ", ".join(items)


def _renamed_flags(argv: list[str]) -> None:
    """A flag spelled as before its option moved into a component's config (``--z-dim``) is
    refused with its new spelling."""
    from pgjax.training.config import RENAMED
    from pgjax.core.errors import ConfigError

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
    from pgjax.training.config import TrainConfig, config_class
    from pgjax.core.errors import ConfigError
    from pgjax.core.registry import POLICY_KINDS

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--plugins", nargs="*", default=[])
    pre.add_argument("--resume", action="store_true")
    pre.add_argument("--trust-plugins", action="store_true")
    pre.add_argument("--out", default="runs")
    pre.add_argument("--name", default=None)
    _renamed_flags(argv)
    known = pre.parse_known_args(argv)[0]
    argv = [a for a in argv if a != "--trust-plugins"]
    plugins = known.plugins
    if known.resume and known.name is not None:  # the run's own plugin copies, from anywhere
        plugins = _resumed_plugins(Path(known.out) / known.name, known)
        if plugins is not None:
            argv = _without_plugins(argv) + ["--plugins", *plugins]
    elif known.trust_plugins:
        raise ConfigError("--trust-plugins is for a run's recorded plugins: pass it with "
                          "--resume --name NAME, or to pgjax eval / render")
    cls = config_class(TrainConfig, plugins if plugins is not None else known.plugins)
    cfg = _tyro(cls, argv)
    if cfg.preset is not None:
        cfg = _tyro(cls, argv, default=cls(env=cfg.env).with_preset(cfg.preset))
    for arg in argv:  # an option of a component this run does not use: refuse it
        head, dot, _ = arg.lstrip("-").partition(".")
        head = head.replace("-", "_")  # tyro takes --ppo-kl.lr for ppo_kl's lr
        if not (arg.startswith("--") and dot) or head in cfg.used():
            continue
        if head in ALGORITHMS:
            raise ConfigError(f"{arg.split('=')[0]} is an option of {head}, but --algo "
                              f"{cfg.algo} trains with {cfg.rule}; pass {cfg.rule}'s options "
                              f"as --{cfg.rule.replace('_', '-')}.<name>, or use --algo {head}")
        kinds = [k for k, c in POLICY_KINDS.items() if c.options_key == head]
        raise ConfigError(f"{arg.split('=')[0]} is set but this run (--env {cfg.env} --policy "
                          f"{cfg.policy} --algo {cfg.algo}) does not use --{head.replace('_', '-')}"
                          f".* options; drop it" + (f", or use --policy {kinds[0]}" if kinds
                                                    else ""))
    return cfg


def _resumed_plugins(root, known):
    """The plugins a run directory to resume recorded, imported (trusted) from its copies,
    with ``--plugins`` files replacing copies of the same name; None where it records none."""
    from pgjax.core import plugin_files
    from pgjax.core.rundir import read_json

    if not (root / "config.json").exists():
        return None
    record = read_json(root / "config.json", "the run's config.json")
    if not (record.get(plugin_files.KEY) or (record.get("config") or {}).get("plugins")):
        return None
    return list(plugin_files.recorded(root, record, known.trust_plugins, known.plugins,
                                      command="pgjax train --resume"))


def _without_plugins(argv: list[str]) -> list[str]:
    """``argv`` without its ``--plugins`` option and values."""
    out, skipping = [], False
    for a in argv:
        if a == "--plugins" or a.startswith("--plugins="):
            skipping = a == "--plugins"
            continue
        if skipping and not a.startswith("-"):
            continue
        skipping = False
        out.append(a)
    return out


def train_main(argv: list[str]) -> int:
    from pgjax.core.errors import EXIT_BAD_INPUT, EXIT_RUNS_FAILED, ConfigError, TrainingError
    from pgjax.loop.runner import run

    try:
        cfg = parse_train(argv)
        records = run(cfg)
    except ConfigError as e:
        print(f"pgjax train: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except TrainingError as e:
        print(f"pgjax train: error: {e}", file=sys.stderr)
        return EXIT_RUNS_FAILED
    except Exception as e:  # a plugin's own code failed while the run was built or traced
        from pgjax.core.registry import plugin_frame

        frame = plugin_frame(e)
        if frame is None:
            raise
        what = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        print(f"pgjax train: error: plugin code raised {type(e).__name__}{': ' + what if what else ''} "
              f"(at {frame.filename}:{frame.lineno}); fix the plugin, then train again "
              f"(a run directory with no update recorded is not kept)", file=sys.stderr)
        return EXIT_BAD_INPUT
    if records is not None:  # the first process of a distributed run writes them
        print(f"records written to {records.root}")
    return 0


def presets_main(argv: list[str]) -> int:
    from pgjax.training import presets

    p = ArgumentParser("pgjax presets", presets.__doc__)
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="the presets to describe, by name (default: every one)")
    names = p.parse_args(argv).names or list(presets.PRESETS)
    unknown = [n for n in names if n not in presets.PRESETS]
    if unknown:
        from pgjax.core.errors import did_you_mean

        print(f"pgjax presets: error: unknown preset '{unknown[0]}'"
              f"{did_you_mean(unknown[0], presets.PRESETS)}; use one of "
              f"{', '.join(presets.PRESETS)}", file=sys.stderr)
        return 2
    print("\n\n".join(presets.describe(presets.PRESETS[n]) for n in names))
    return 0


def sweep_main(argv: list[str]) -> int:
    from pgjax.tools.sweep import sweep_main as main_

    return main_(argv)


def eval_main(argv: list[str]) -> int:
    from pgjax.tools.trained import eval_main as main_

    return main_(argv)


def render_main(argv: list[str]) -> int:
    from pgjax.tools.render import render_main as main_

    return main_(argv)


def plot_main(argv: list[str]) -> int:
    from pgjax.tools.plotting import plot_main as main_

    return main_(argv)


COMMANDS = {"train": train_main, "sweep": sweep_main, "plot": plot_main,
            "presets": presets_main, "eval": eval_main, "render": render_main}
COMPILING = ("train", "sweep", "eval", "render")  # the commands that use the compilation cache


class _Output:
    """stdout or stderr of the ``pgjax`` command: once its reader has gone (``pgjax train |
    head -3``: a closed pipe), what is written to it is dropped and the command goes on, so
    training finishes and its records are whole. Everything else is the stream's own."""

    def __init__(self, stream):
        # None: started with the descriptor closed (`pgjax train >&-`): nowhere to write
        self._stream = stream if stream is not None else open(os.devnull, "w")

    def _gone(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())  # the buffered rest goes nowhere
        except (OSError, ValueError, AttributeError):
            self._stream = open(os.devnull, "w")
        finally:
            os.close(devnull)

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            try:
                self._stream.flush()
            except OSError:
                pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _terminated(signum, frame):
    from pgjax.core.errors import Terminated

    raise Terminated


def main(argv: list[str] | None = None) -> int:
    import signal
    import threading

    from pgjax.core.errors import EXIT_TERMINATED, Terminated

    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Output(sys.stdout), _Output(sys.stderr)
    # SIGTERM (kill, a scheduler's stop) stops it as Ctrl-C does: the chunk being recorded
    # is whole, a run that --overwrite was replacing is put back, the lock is released
    previous = signal.signal(signal.SIGTERM, _terminated) \
        if threading.current_thread() is threading.main_thread() else None
    command = (sys.argv[1:] if argv is None else argv or ["pgjax"])[:1] or ["pgjax"]
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:  # a write that went around sys.stdout: say it did not finish
        sys.stdout._gone()
        print("pgjax: error: the output's reader closed it before the command finished; "
              "rerun it without closing its output (records are kept: continue a run with "
              "--resume, a sweep by running it again)", file=sys.stderr)
        return 1
    except Terminated:
        print("pgjax: terminated (SIGTERM); finished chunks are recorded (continue a run "
              "with --resume, a sweep by running it again)", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:  # Ctrl-C: records are atomic, checkpoints verified on resume
        print("pgjax: interrupted; finished chunks are recorded (continue a run with "
              "--resume, a sweep by running it again)", file=sys.stderr)
        return 130
    except OSError as e:  # a storage fault no command turned into its own line
        from pgjax.core.errors import EXIT_BAD_INPUT, EXIT_RUNS_FAILED
        from pgjax.core.files import storage_message

        trained = command[0] in ("train", "sweep")
        print(f"pgjax {command[0]}: error: "
              f"{storage_message(e, '; finished records are kept' if trained else '')}",
              file=sys.stderr)
        return EXIT_RUNS_FAILED if trained else EXIT_BAD_INPUT
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] in ("-V", "--version"):
        from pgjax import __version__

        print(f"pgjax {__version__}")
        return 0
    if argv[0] not in COMMANDS:
        from pgjax.core.errors import did_you_mean

        print(f"pgjax: unknown command '{argv[0]}'{did_you_mean(argv[0], COMMANDS)}; use one "
              f"of: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    args = argv[1:]
    if argv[0] in COMPILING:
        if "--no-compile-cache" in args:
            args = [a for a in args if a != "--no-compile-cache"]
        else:
            from pgjax.core import compile_cache

            compile_cache.enable()
    return COMMANDS[argv[0]](args)


if __name__ == "__main__":
    sys.exit(main())
