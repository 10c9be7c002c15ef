"""Optional mirrors of the metrics rows in the dashboards researchers already use. The CSV and
JSON records stay the record of truth; these only receive copies of the same rows.

- ``TensorBoardSink``: event files per run under ``runs/<run>/tensorboard/`` (tensorboardX,
  no TensorFlow needed), one scalar per metric with the env step as the global step.
- ``WandbSink``: one Weights & Biases run per pgjax run, grouped by the run directory
  (``pip install 'pgjax[wandb]'``; honours WANDB_MODE, e.g. offline).
"""
from __future__ import annotations

import math

from pgjax.core.errors import ConfigError

SKIP = ("iteration", "env_steps")


def _scalars(row: dict):
    for k, v in row.items():
        if k in SKIP or v == "" or v is None:
            continue
        v = float(v)
        if math.isfinite(v):
            yield k, v


class TensorBoardSink:
    def __init__(self, run_dirs):
        from tensorboardX import SummaryWriter

        self.writers = [SummaryWriter(logdir=str(d / "tensorboard"), flush_secs=10)
                        for d in run_dirs]

    def write(self, r: int, rows: list[dict]) -> None:
        w = self.writers[r]
        for row in rows:
            step = int(float(row["env_steps"]))
            for k, v in _scalars(row):
                w.add_scalar(k, v, step)
        w.flush()

    def close(self) -> None:
        for w in self.writers:
            w.close()


class WandbSink:
    def __init__(self, run_dirs, project: str, config: dict, group: str):
        try:
            import wandb
        except ImportError:
            raise ConfigError("--wandb needs the wandb package; pip install 'pgjax[wandb]' "
                              "(or drop --wandb)") from None
        self.wandb = wandb
        self.runs = [wandb.init(project=project, group=group, name=d.name, config=config,
                                dir=str(d), reinit="create_new") for d in run_dirs]

    def write(self, r: int, rows: list[dict]) -> None:
        for row in rows:
            self.runs[r].log(dict(_scalars(row)), step=int(float(row["env_steps"])))

    def close(self) -> None:
        for run in self.runs:
            run.finish()


def make_sinks(cfg, run_dirs, root) -> list:
    sinks = []
    if cfg.tensorboard:
        sinks.append(TensorBoardSink(run_dirs))
    if cfg.wandb:
        sinks.append(WandbSink(run_dirs, cfg.wandb_project, cfg.to_dict(), root.name))
    return sinks
