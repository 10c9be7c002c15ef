"""Holding a run directory: its lock (``claim``) and the records set aside in .trash."""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from pgjax.core.errors import ConfigError, InUse
from pgjax.core.files import interrupts_deferred
from pgjax.core.rundir import ID_BYTES, enclosing_run, inspect, recorded_rows


@dataclass
class Claim:
    """A run directory held by this process (``claim``): its lock and, where ``--overwrite``
    (or a resume with nothing to continue from) moved the records it held aside, where they
    are (``aside``) until the new run has finished (``settle``)."""

    root: Path
    lock: FileLock
    aside: Path | None = None
    fresh: bool = False  # the directory held no run when claimed

    def discard_untrained(self) -> bool:
        """Remove what this process wrote into a directory that held no run when it was
        claimed, where no update was recorded yet (a run that failed while it was built or
        traced): its name stays free. Returns whether it was removed."""
        if not self.fresh or (self.root / "status.json").exists() or \
                (self.root / "checkpoint").exists():
            return False
        try:
            if (self.root / "config.json").exists() and \
                    any(n > 1 for n in recorded_rows(self.root).values()):
                return False
        except ConfigError:
            return False
        for entry in self.root.iterdir():
            if entry.name != ".lock":
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() \
                    else entry.unlink()
        return True

    def release(self) -> None:
        self.lock.release()

    def settle(self, failed: int, total: int) -> str | None:
        """After the new run has finished with ``failed`` of its ``total`` runs failed: the
        records set aside are removed when every run finished; put back when every run
        failed (the new records are set aside in their place); kept otherwise. Returns a
        note saying what happened to them, or None."""
        aside = self.aside
        if not failed:
            self.aside = None
            empty_trash(self.root)
            return None
        if aside is None:
            return None
        if failed >= total:
            return self.restore("every run of the new one failed")
        self.aside = None  # settled: kept where it is
        return (f"some runs of the new one failed, so the run it replaced is kept in "
                f"{aside}; to restore it, remove {self.root} and move {aside} there")

    def restore(self, why: str) -> str | None:
        """Put the records set aside back into the run directory (the records it holds now,
        the new run's, are set aside in their turn): a new run that failed, errored or was
        stopped never costs the run it was to replace. Returns the note to show."""
        if self.aside is None:
            return None
        aside, self.aside = self.aside, None
        try:
            newer = set_aside(self.root) if _held(self.root) else None
        except ConfigError as e:
            return f"{why}; the run it replaced is kept in {aside} ({e})"
        try:
            with interrupts_deferred():  # a kill midway: the next claim completes it
                _move_all(aside, self.root, aside / MOVING)
                aside.rmdir()
        except OSError as e:
            return (f"{why}; the run it replaced is kept in {aside} (it could not be moved "
                    f"back: {e.strerror}): to restore it, remove {self.root} and move "
                    f"{aside} there")
        return (f"{why}: {self.root} holds the run it replaced again"
                + (f" (the new one's records are in {newer})" if newer else ""))


def _held(root: Path) -> bool:
    """Whether ``root`` holds anything but its lock."""
    return root.is_dir() and any(e.name != ".lock" for e in root.iterdir())


def claim(cfg) -> Claim:
    """Take the run directory ``<out>/<name>`` for this process, before anything compiles: it
    is created if needed and locked (a second process on it is refused at once; the lock goes
    with the process, even on SIGKILL). A directory that already holds a run is refused
    unless ``cfg.resume`` continues it or ``cfg.overwrite`` replaces it (its records are
    then moved aside, ``trash_dir``, until the new run has finished: ``Claim.settle``,
    ``Claim.restore``). A directory to be written into whose folders lead outside it through
    symbolic links is refused."""
    from pgjax.core.files import storage_message
    from pgjax.core.rundir import check_links

    out, root = Path(cfg.out), Path(cfg.out) / cfg.name
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out} is a file; pass a directory for the run "
                              f"directories")
        if inspect(root).state == "foreign" and not _journaled(root):  # refused before a
            raise ConfigError(inspect(root).reason)  # lock file is put into it
        deepest = len(os.fsencode(os.path.abspath(root))) + ID_BYTES + 160  # orbax's files
        if deepest > 4095:
            raise ConfigError(f"the run directory {root} is too long a path for its records "
                              f"({deepest - ID_BYTES - 160} bytes; at most "
                              f"{4095 - ID_BYTES - 160}); pass a shorter --out or --name")
        inside = enclosing_run(root)
        if inside is not None:
            raise ConfigError(f"{root} lies inside the run directory {inside}, whose records "
                              f"it would mix with; pass an --out outside it")
        root.mkdir(parents=True, exist_ok=True)
        if (root / ".lock").is_symlink():  # pgjax never makes one: never written through
            (root / ".lock").unlink()
        lock = FileLock(root / ".lock", timeout=0)
        lock.acquire()
    except Timeout:
        raise InUse(f"{root} is in use by another pgjax process; wait for it to finish "
                    f"or pick another --name") from None
    except OSError as e:
        raise ConfigError(storage_message(e, what=f"the run directory {root}")) from None
    try:
        recover(root)  # records a kill left halfway to or from .trash
    except OSError as e:
        lock.release()
        raise ConfigError(storage_message(e, what=f"the run directory {root}")) from None
    found = inspect(root)
    if found.state == "foreign" or (found.state == "damaged" and not cfg.overwrite):
        lock.release()
        raise ConfigError(found.reason)
    held = Claim(root, lock, fresh=found.state == "new")
    if found.state != "new" and not cfg.resume:
        if not cfg.overwrite:
            lock.release()
            state = {"finished": "a finished run", "unfinished": "an unfinished run"}[found.state]
            raise ConfigError(f"{root} already holds {state}; pass --resume to continue it, "
                              f"--overwrite to replace it (the old run is set aside in "
                              f"{root.parent / '.trash'} until the new one finishes), or pick "
                              f"another --name")
        try:
            held.aside = set_aside(root)
        except ConfigError:
            lock.release()
            raise
    elif found.state == "unfinished":  # a resume writes into it (a finished one: nothing)
        try:
            check_links(root)
        except ConfigError:
            lock.release()
            raise
    return held


MOVING = ".moving"  # in a .trash entry while its records move (a journal: see recover)


def _move_all(source: Path, dest: Path, journal: Path) -> None:
    """Every entry of ``source`` but its lock and the ``journal`` into ``dest``, the journal
    written first and removed last; a move that fails midway is undone."""
    journal.write_text(f"{source} -> {dest}\n")
    moved = []
    try:
        for entry in source.iterdir():
            if entry.name not in (".lock", MOVING):
                entry.rename(dest / entry.name)
                moved.append(entry.name)
    except OSError:
        for name in moved:
            (dest / name).rename(source / name)
        raise
    journal.unlink()


def _journaled(root: Path) -> list[Path]:
    """``root``'s entries in .trash whose records a kill left moving (``MOVING``)."""
    trash = root.parent / ".trash"
    if not trash.is_dir():
        return []
    import re

    own = re.compile(re.escape(_trash_name(root)) + r"-\d{8}-\d{6}(-\d+)?")
    return [e for e in sorted(trash.iterdir()) if own.fullmatch(e.name) and (e / MOVING).exists()]


def recover(root: Path) -> None:
    """After a process was killed (SIGKILL: nothing can defer it) while moving ``root``'s
    records to or from .trash: the entry whose journal (``MOVING``) is still there has its
    records moved back into ``root``, which undoes a set-aside cut short and completes a
    restore cut short. Called by ``claim`` with the lock held: no other process moves
    them."""
    for entry in _journaled(root):
        for item in entry.iterdir():
            if item.name != MOVING and not (root / item.name).exists():
                item.rename(root / item.name)
        if all(p.name == MOVING for p in entry.iterdir()):
            (entry / MOVING).unlink()
            entry.rmdir()


def set_aside(root: Path) -> Path:
    """Move every record of ``root`` (not its lock) to a new ``trash_dir``; returns it. All
    of it moves or none of it: a move that fails midway is undone, one cut short by a kill
    is undone by the next ``claim`` (``recover``)."""
    aside = trash_dir(root)
    try:
        with interrupts_deferred():  # all of it moves, or (Ctrl-C) none of it starts
            aside.mkdir(parents=True)
            try:
                _move_all(root, aside, aside / MOVING)
            except OSError:
                shutil.rmtree(aside, ignore_errors=True)
                raise
    except OSError as e:
        from pgjax.core.files import storage_message

        raise ConfigError(f"cannot set {root} aside into {aside}: "
                          f"{storage_message(e).partition(': ')[2]}, or pick another "
                          f"--name") from None
    return aside


def _trash_name(root: Path) -> str:
    """The start of the names of ``root``'s entries in ``.trash``: its name, cut short (with
    a hash of it) where the time stamp would make a name too long for the file system."""
    name = root.name
    if len(name.encode()) > 200:
        import hashlib

        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        name = name.encode()[:180].decode(errors="ignore") + "~" + digest
    return name


def trash_dir(root: Path) -> Path:
    """Where ``--overwrite`` moves the run it replaces (``<out>/.trash/<name>-<time>``), kept
    until the new run has finished, so that a failure of the new run never leaves nothing."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = root.parent / ".trash" / f"{_trash_name(root)}-{stamp}"
    out, n = base, 1
    while out.exists():
        out, n = base.with_name(f"{base.name}-{n}"), n + 1
    return out


def empty_trash(root: Path) -> None:
    """After ``root``'s new run has finished: remove the runs ``--overwrite`` set aside."""
    trash = root.parent / ".trash"
    import re

    own = re.compile(re.escape(_trash_name(root)) + r"-\d{8}-\d{6}(-\d+)?")
    for old in trash.iterdir() if trash.is_dir() else ():
        if own.fullmatch(old.name):  # this run's, not another run's whose name starts so
            shutil.rmtree(old, ignore_errors=True)
    if trash.is_dir() and not any(trash.iterdir()):
        trash.rmdir()

