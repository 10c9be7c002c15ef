"""Checkpoints of a whole (vmapped) training state with orbax.

The state saved is the trainer's ``TrainState`` for every run at once: parameters, optimiser
and algorithm state (e.g. FixPO's beta), observation and reward-scaling statistics, the
environment state with its reset pool (JAX path), the keys and the iteration counter. With
it comes a small JSON record of the host loop (chunk index, wall clock). Restoring into a
freshly initialised state of the same structure and sharding continues a JAX-path run exactly
as if it had not stopped.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

from pgjax.core.files import atomic_write_json, interrupts_deferred

DIGESTS = "sha256.json"  # {step: {file: sha256}}, next to the step directories


def _digest(step_dir: Path) -> dict:
    out = {}
    for path in sorted(p for p in step_dir.rglob("*") if p.is_file()):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out[str(path.relative_to(step_dir))] = h.hexdigest()
    return out


class Verified(NamedTuple):
    """The checkpoint steps of a directory, newest first: ``good`` (files match the
    checksums recorded when they were saved), ``unverified`` ({step: why}: no checksum to
    compare with, e.g. the checksum file is missing or unreadable) and ``damaged`` ({step:
    why}: files differ from their checksums)."""

    good: list
    unverified: dict
    damaged: dict


def verified_steps(directory) -> Verified:
    """Sort the checkpoint steps under ``directory`` (``Verified``). Reads files only, so a
    resume can choose (or refuse) before anything compiles."""
    directory = Path(directory)
    if not directory.is_dir():
        return Verified([], {}, {})
    steps = sorted((int(p.name) for p in directory.iterdir() if p.is_dir() and p.name.isdigit()),
                   reverse=True)
    try:
        digests = json.loads((directory / DIGESTS).read_text())
        if not isinstance(digests, dict):
            raise ValueError(DIGESTS)
        missing = "no checksum recorded for it in {}".format(DIGESTS)
    except FileNotFoundError:
        digests, missing = {}, f"{DIGESTS} is missing"
    except (OSError, ValueError):
        digests, missing = {}, f"{DIGESTS} is damaged"
    good, unverified, damaged = [], {}, {}
    for step in steps:
        want, have = digests.get(str(step)), _digest(directory / str(step))
        if not isinstance(want, dict):
            unverified[step] = missing
        elif want != have:
            files = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
            damaged[step] = f"{len(files)} files differ from their checksums, e.g. {files[0]}"
        else:
            good.append(step)
    return Verified(good, unverified, damaged)


def _without_empty(tree):
    """``tree`` with every zero-size array as ``None``: orbax cannot save an empty array (a
    MuJoCo model without actuator activations has ``data.act`` of size 0), and it holds no
    data to restore. A tree without empty arrays is unchanged, so its checkpoints keep their
    format."""
    import jax

    return jax.tree.map(lambda x: None if getattr(x, "size", 1) == 0 else x, tree)


def _with_empty(target, restored):
    """``restored`` with the empty arrays of ``target`` put back where ``_without_empty``
    left ``None``."""
    import jax

    return jax.tree.map(lambda t, r: t if getattr(t, "size", 1) == 0 else r, target, restored)


def _is_parts(x) -> bool:
    from pgjax.model.nets import Parts

    return isinstance(x, Parts)


def _parts_as_dicts(tree):
    """``tree`` with each ``Parts`` that holds None for a part as the dict of its other part,
    as pgjax 0.2.0 saved it; None where there is no such ``Parts``."""
    import jax

    found = []

    def old(x):
        if _is_parts(x) and (x.actor is None or x.critic is None):
            found.append(x)
            return {k: v for k, v in (("actor", x.actor), ("critic", x.critic)) if v is not None}
        return x

    out = jax.tree.map(old, tree, is_leaf=_is_parts)
    return out if found else None


def _dicts_as_parts(target, restored):
    """``restored`` (read with ``_parts_as_dicts(target)``) with ``target``'s ``Parts``."""
    import jax

    def back(t, r):
        if _is_parts(t) and isinstance(r, dict):
            return t.replace(**{k: r[k] for k in ("actor", "critic") if getattr(t, k) is not None})
        return r

    return jax.tree.map(back, target, restored, is_leaf=_is_parts)


class Checkpoints:
    """The checkpoints of one run directory. Orbax (slow to import) and its manager are set
    up at the first save or restore: a run too short to checkpoint never pays for them."""

    def __init__(self, directory, max_to_keep: int = 2):
        self.directory = Path(directory).absolute()
        self.max_to_keep = max_to_keep
        self._manager = None

    @property
    def manager(self):
        if self._manager is None:
            import orbax.checkpoint as ocp

            self._manager = ocp.CheckpointManager(
                self.directory,
                options=ocp.CheckpointManagerOptions(max_to_keep=self.max_to_keep,
                                                     enable_async_checkpointing=False,
                                                     create=True))
        return self._manager

    def latest(self) -> int | None:
        return self.manager.latest_step()

    def save(self, step: int, state, meta: dict) -> None:
        """Save and record the checksums of the step's files (written atomically after the
        step is complete: a step without its checksums is only used, with a warning, where
        no verified one is)."""
        import orbax.checkpoint as ocp

        with interrupts_deferred():  # Ctrl-C waits for the step and its checksums
            self.manager.save(step, args=ocp.args.Composite(
                state=ocp.args.StandardSave(_without_empty(state)),
                meta=ocp.args.JsonSave(meta)))
            self.manager.wait_until_finished()
            path = self.directory / DIGESTS
            try:
                digests = json.loads(path.read_text())
            except (OSError, ValueError):
                digests = {}
            kept = {str(s) for s in self.manager.all_steps()}
            digests = {k: v for k, v in digests.items() if k in kept}
            digests[str(step)] = _digest(self.directory / str(step))
            atomic_write_json(path, digests)

    def restore(self, step: int, target):
        """(state, meta) of checkpoint ``step``; ``target`` gives structure, dtypes, sharding.
        A checkpoint of pgjax 0.2.0, where a rule kept state for one part only (TRPO's
        critic optimiser, a ``{"critic": ...}`` dict), restores into its ``Parts``."""
        import orbax.checkpoint as ocp

        def restore(tree):
            return self.manager.restore(step, args=ocp.args.Composite(
                state=ocp.args.StandardRestore(_without_empty(tree)),
                meta=ocp.args.JsonRestore()))

        try:
            out = restore(target)
            state = out.state
        except ValueError as e:
            older = _parts_as_dicts(target)
            if "tree structures do not match" not in str(e) or older is None:
                raise
            out = restore(older)
            state = _dicts_as_parts(target, out.state)
        return _with_empty(target, state), out.meta

    def drop_after(self, step: int) -> None:
        """Remove the steps newer than ``step`` (after a resume from it: they were damaged,
        unverifiable or ahead of the records) and their checksums, so that the next saves
        are not skipped as already present."""
        newer = [p for p in self.directory.iterdir() if p.is_dir() and p.name.isdigit()
                 and int(p.name) > step] if self.directory.is_dir() else []
        if not newer:
            return
        import shutil

        for p in newer:
            shutil.rmtree(p, ignore_errors=True)
        path = self.directory / DIGESTS
        try:
            digests = json.loads(path.read_text())
            atomic_write_json(path, {k: v for k, v in digests.items()
                                     if not (k.isdigit() and int(k) > step)})
        except (OSError, ValueError, AttributeError):
            pass
        if self._manager is not None:  # re-read the steps on the next save
            self._manager.close()
            self._manager = None

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
