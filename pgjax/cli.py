"""The ``pgjax`` command.

    pgjax train --algo ppo --env brax:inverted_pendulum --seeds 4 --steps 300000
    pgjax train --help            every field of the typed config, documented
"""
from __future__ import annotations

import sys

USAGE = """usage: pgjax <command> [options]

commands:
  train     train one algorithm on one environment, seeds and a hyperparameter grid vmapped
            (pgjax train --help lists every option)
  sweep     run a TOML grid of algorithms x environments x hyperparameters x seeds, resumable
  plot      IQM/mean curves with stratified-bootstrap CIs, aggregate tables, diagnostics
"""


def train_main(argv: list[str]) -> int:
    import tyro

    from pgjax.config import TrainConfig
    from pgjax.errors import ConfigError, TrainingError
    from pgjax.runner import run

    cfg = tyro.cli(TrainConfig, args=argv, prog="pgjax train")
    try:
        records = run(cfg)
    except (ConfigError, TrainingError) as e:
        print(f"pgjax train: error: {e}", file=sys.stderr)
        return 2
    print(f"records written to {records.root}")
    return 0


def sweep_main(argv: list[str]) -> int:
    from pgjax.sweep import sweep_main as main_

    return main_(argv)


def plot_main(argv: list[str]) -> int:
    from pgjax.plotting import plot_main as main_

    return main_(argv)


COMMANDS = {"train": train_main, "sweep": sweep_main, "plot": plot_main}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    if argv[0] not in COMMANDS:
        print(f"pgjax: unknown command '{argv[0]}'; use one of: {', '.join(COMMANDS)}",
              file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
