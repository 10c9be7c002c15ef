"""Checkpoints of a whole (vmapped) training state with orbax.

The state saved is the trainer's ``TrainState`` for every run at once: parameters, optimiser
and algorithm state (e.g. FixPO's beta), observation and reward-scaling statistics, the
environment state with its reset pool (JAX path), the keys and the iteration counter. With
it comes a small JSON record of the host loop (chunk index, wall clock). Restoring into a
freshly initialised state of the same structure and sharding continues a JAX-path run exactly
as if it had not stopped.
"""
from __future__ import annotations

from pathlib import Path

import orbax.checkpoint as ocp


class Checkpoints:
    def __init__(self, directory, max_to_keep: int = 2):
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,
                                                 enable_async_checkpointing=False,
                                                 create=True))

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, meta: dict) -> None:
        self.manager.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                        meta=ocp.args.JsonSave(meta)))
        self.manager.wait_until_finished()

    def restore(self, step: int, target):
        """(state, meta) of checkpoint ``step``; ``target`` gives structure, dtypes, sharding."""
        out = self.manager.restore(step, args=ocp.args.Composite(
            state=ocp.args.StandardRestore(target), meta=ocp.args.JsonRestore()))
        return out.state, out.meta

    def close(self) -> None:
        self.manager.close()
