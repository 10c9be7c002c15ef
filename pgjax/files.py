"""Atomic file writes: every record, index and checksum file pgjax writes goes through these;
and ``interrupts_deferred``, which lets a multi-file write finish before Ctrl-C stops it."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path


@contextlib.contextmanager
def interrupts_deferred():
    """Hold Ctrl-C (SIGINT) until the block has finished, then raise it: a checkpoint and its
    checksums are written whole or not at all. Outside the main thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *a: received.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            raise KeyboardInterrupt


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` (unique to this process), fsync it
    and rename it over ``path``: a kill at any moment leaves the old or the new file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(obj, indent=2, default=str) + "\n").encode())


def remove_stale_temporaries(directory: Path) -> None:
    """Delete what ``atomic_write_bytes`` leaves behind when a process is killed between
    writing its temporary file and renaming it (``.<name>.<pid>.tmp``): on a resume, by the
    process that holds the run directory's lock, so no writer is still at work."""
    for path in Path(directory).rglob(".*.tmp"):
        if path.is_file():
            path.unlink(missing_ok=True)
