"""Atomic file writes: every record, index and checksum file pgjax writes goes through these;
``interrupts_deferred``, which lets a multi-file write finish before Ctrl-C (or SIGTERM)
stops it; and ``storage_message``, the one line that names a storage fault (full, read-only,
unwritable storage, a path too long) and its fix.

A write never follows a symbolic link at the path it writes: the file is written beside it
and renamed over it, which replaces a link rather than writing through it. With ``within``
(the run or sweep directory being written), a path whose folders lead out of it through a
link is refused with one line."""
from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import threading
from pathlib import Path

from pgjax.core.errors import ConfigError

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C (SIGINT) and SIGTERM until the block has finished, then raise
    ``KeyboardInterrupt`` (SIGINT) or re-deliver SIGTERM to the handler it had: a
    checkpoint and its checksums, or a run set aside, are written whole or not at all.
    Outside the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = {s: signal.signal(s, lambda n, f: received.append((n, f))) for s in DEFERRED}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        for n, frame in received[:1]:
            handler = previous[n]
            if callable(handler):  # Python's own (KeyboardInterrupt) or the caller's
                handler(n, frame)
            elif n == signal.SIGINT:  # ignored where started in the background: Ctrl-C
                raise KeyboardInterrupt  # still stops it, as before
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), n)  # the default action, now that the block is whole


def outside_link(path, within) -> tuple[Path, str] | None:
    """(link, where it leads) for the first folder of ``path`` below ``within`` that is a
    symbolic link leading out of ``within``; None when every folder of it stays inside."""
    path, within = Path(path).absolute(), Path(within).absolute()
    try:
        rel = path.parent.relative_to(within)
    except ValueError:
        return None  # not below ``within``: nothing to say about it
    root = os.path.realpath(within)
    current = within
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            target = os.path.realpath(current)
            if target != root and not target.startswith(root.rstrip(os.sep) + os.sep):
                return current, target
    return None


def check_inside(path, within) -> None:
    """A one-line ``ConfigError`` when writing ``path`` would leave ``within`` through a
    symbolic link (a run folder received from elsewhere may hold one)."""
    found = outside_link(path, within)
    if found is not None:
        link, target = found
        raise ConfigError(f"{link} is a symbolic link to {target}, outside {within}; pgjax "
                          f"writes only inside it: replace the link by a copy of what it "
                          f"links to (cp -rL), or pass another directory")


def _with_path(e: OSError, path: Path, tmp: Path) -> OSError:
    """``e`` naming ``path``, the file being written (not its temporary file)."""
    if e.filename is None or str(e.filename) == str(tmp):
        e.filename = str(path)
    return e


def _fresh(tmp: Path) -> int:
    """A new temporary file for writing, never a file or link already at ``tmp``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
        getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(tmp, flags, 0o666)
    except FileExistsError:  # left by a killed process of the same pid, or planted
        os.unlink(tmp)
        return os.open(tmp, flags, 0o666)


def atomic_write_bytes(path: Path, data: bytes, within=None) -> None:
    """Write ``data`` to a temporary file beside ``path`` (unique to this process), fsync it
    and rename it over ``path``: a kill at any moment leaves the old or the new file, and a
    symbolic link at ``path`` is replaced, never written through. ``within``: the directory
    the write must stay inside (``check_inside``). A failed write leaves no temporary file
    and raises the ``OSError`` with ``path`` as its filename."""
    with atomic_output(path, within) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_write_json(path: Path, obj, within=None) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=str) + "\n").encode(), within)


@contextlib.contextmanager
def atomic_output(path, within=None):
    """For a library that writes a file by name (``DataFrame.to_csv``, ``Figure.savefig``):
    yields a temporary path beside ``path`` with the same suffix (the format is read from
    it), then fsyncs it and renames it over ``path``; on any error the temporary file goes.
    As ``atomic_write_bytes``: a link at ``path`` is replaced, not followed."""
    path = Path(path)
    if within is not None:
        check_inside(path, within)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")
    try:
        os.close(_fresh(tmp))  # created here: never a file or link already at its name
        try:
            yield tmp
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise _with_path(e, path, tmp)


def write_csv(table, path, within=None) -> None:
    """``table`` (a DataFrame) as CSV at ``path``, without its index, atomically
    (``atomic_output``): every table pgjax writes into a run or sweep directory."""
    with atomic_output(path, within) as tmp:
        table.to_csv(tmp, index=False)


def save_figure(fig, path, within=None, **kw) -> None:
    """``fig.savefig`` to ``path`` atomically (``atomic_output``; the format from its
    suffix)."""
    with atomic_output(path, within) as tmp:
        fig.savefig(tmp, **kw)


# errno -> (what is wrong, how to fix it)
FAULTS = {
    errno.ENOSPC: ("the storage is full", "free space there"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space or raise the quota"),
    errno.EROFS: ("the storage is read-only", "pass a writable --out"),
    errno.EACCES: ("permission denied", "fix its permissions or pass a writable --out"),
    errno.EPERM: ("operation not permitted", "fix its permissions or pass a writable --out"),
    errno.ENAMETOOLONG: ("the path is too long for the file system",
                         "pass a shorter --out or --name"),
    errno.ELOOP: ("too many levels of symbolic links", "replace the links by folders"),
    errno.EIO: ("an input/output error", "check the storage"),
    errno.EMFILE: ("too many open files", "raise the limit (ulimit -n)"),
    errno.ENFILE: ("too many open files", "raise the limit (ulimit -n)"),
    errno.ENOTDIR: ("a part of the path is a file", "pass a path made of folders"),
    errno.EISDIR: ("it is a folder", "pass the path of a file"),
    errno.ENOENT: ("it does not exist", "pass an existing path"),
}


def storage_message(e: OSError, then: str = "", what: str | None = None) -> str:
    """One line for a storage fault: the path, what is wrong and the fix (``then``: what
    to do once it is fixed, e.g. continue the run; ``what``: the thing that could not be
    written, instead of the path)."""
    where = what or (e.filename if e.filename is not None else "the records")
    wrong, fix = FAULTS.get(e.errno, (e.strerror or type(e).__name__,
                                      "check the storage and the path"))
    why = f" ({e.strerror})" if e.strerror and e.strerror.lower() != wrong else ""
    if e.errno in (errno.ENOTDIR, errno.ENOENT, errno.EISDIR):
        fix = "pass a writable --out"
    return f"cannot write {where}: {wrong}{why}; {fix}{then}"


def as_os_error(e: Exception) -> OSError | None:
    """The ``OSError`` inside a library's error that reports one in its message (orbax's
    ``ValueError: RESOURCE_EXHAUSTED: ... local file "<path>" ... [os_error_code='28']``),
    or None."""
    import re

    if isinstance(e, OSError):
        return e
    text = str(e)
    code = re.search(r"os_error_code='?(\d+)", text)
    if code is None:
        return None
    path = re.search(r'(?:local )?file "([^"]+)"', text)
    n = int(code.group(1))
    return OSError(n, os.strerror(n), path.group(1) if path else None)


def remove_stale_temporaries(directory: Path) -> None:
    """Delete what ``atomic_write_bytes`` and ``atomic_output`` leave behind when a process
    is killed between writing its temporary file and renaming it (``.<name>.<pid>.tmp``,
    ``.<stem>.<pid>.tmp<suffix>``): on a resume, by the process that holds the run
    directory's lock, so no writer is still at work."""
    for pattern in (".*.tmp", ".*.tmp.*"):
        for path in Path(directory).rglob(pattern):
            if path.is_file() or path.is_symlink():
                path.unlink(missing_ok=True)
