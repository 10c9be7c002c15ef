"""This user's secret key and the tags made with it: what marks a record or a cache entry as
written by this user on this machine, so that pgjax can tell its own files from files that
anyone else could have put in a folder.

The key is 32 random bytes in ``$XDG_CONFIG_HOME/pgjax/secret.key`` (default
``~/.config/pgjax/secret.key``; ``$PGJAX_KEY_FILE`` names another file), created on first use
with mode 0600 in a 0700 folder. A tag is an HMAC-SHA256 of some bytes under that key: nobody
without the key can make one, and a tag made on another machine or by another user does not
verify here. When the key cannot be made or read (a read-only home), nothing is tagged and
nothing verifies: pgjax then asks for explicit trust and keeps no cache entries that need a
tag, which costs time, never safety.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_ENV = "PGJAX_KEY_FILE"
KEY_BYTES = 32


def key_file() -> Path:
    """Where this user's key lives (see the module docstring)."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "pgjax" / "secret.key"


@functools.lru_cache(maxsize=8)
def _key_at(path: str) -> bytes | None:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: read its key
            data = path.read_bytes() if path.exists() else b""
        except OSError:
            return None
        else:
            data = secrets.token_bytes(KEY_BYTES)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return data
    except OSError:
        return None
    if len(data) != KEY_BYTES:  # a torn or foreign file is no key
        return None
    st = path.stat()
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
        return None  # readable or writable by others: anyone could tag with it
    return data


def user_key() -> bytes | None:
    """This user's key (made on first use), or None where it cannot be made or read safely."""
    return _key_at(str(key_file()))


def tag(data: bytes, purpose: str) -> str | None:
    """The tag of ``data`` for ``purpose`` (a word that keeps tags of one kind of file from
    passing for another's), or None without a key."""
    key = user_key()
    if key is None:
        return None
    return hmac.new(key, purpose.encode() + b"\0" + data, hashlib.sha256).hexdigest()


def verify(data: bytes, purpose: str, mark) -> bool:
    """Whether ``mark`` is this user's tag of ``data`` for ``purpose``."""
    if not isinstance(mark, str):
        return False
    expected = tag(data, purpose)
    return expected is not None and hmac.compare_digest(expected, mark)


def sha256(path) -> str:
    """The hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


__all__ = ["key_file", "sha256", "tag", "user_key", "verify"]
