"""This user's secret key and the tags made with it: what marks a record or a cache entry as
written by this user on this machine, so that pgjax can tell its own files from files that
anyone else could have put in a folder.

The key is 32 random bytes in ``$XDG_CONFIG_HOME/pgjax/secret.key`` (default
``~/.config/pgjax/secret.key``; ``$PGJAX_KEY_FILE`` names another file), made on first use:
a 0600 file filled and then linked into place in a 0700 folder, so no reader sees part of a
key and two processes racing keep one. It is used only while it is this user's, readable by
nobody else, in a folder nobody else can write. A tag is an HMAC-SHA256 of some bytes under
that key, for one purpose: nobody without the key can make one, and a tag made on another
machine or by another user does not verify here. Where no usable key can be had (no home, a
read-only one), nothing is tagged and nothing verifies: pgjax then asks for explicit trust
and keeps no cache entries that need a tag, which costs time, never safety.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_ENV = "PGJAX_KEY_FILE"
KEY_BYTES = 32


def key_file() -> Path:
    """Where this user's key lives (see the module docstring)."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "pgjax" / "secret.key"


def mkdir_private(path: Path) -> None:
    """Make ``path`` and its missing parents, each with mode 0700 (``os.makedirs`` ignores
    the mode for parents)."""
    path = Path(path)
    if path.is_dir():
        return
    if path.parent != path:
        mkdir_private(path.parent)
    path.mkdir(mode=0o700, exist_ok=True)


def foreign(path, st: os.stat_result) -> tuple[str, str] | None:
    """(why, the start of a fix) when a user other than this one could write ``path`` (its
    stat ``st``): owned by another user, or group- or other-writable; else None."""
    if not hasattr(os, "getuid"):
        return None
    uid = os.getuid()
    if st.st_uid != uid:
        return f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})", ""
    if st.st_mode & 0o022:
        return (f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})",
                f"run `chmod go-w {path}`, or ")
    return None


@functools.lru_cache(maxsize=None)
def _key_at(path: Path) -> bytes | None:
    try:
        mkdir_private(path.parent)
        if foreign(path.parent, path.parent.stat()):
            return None
        if not path.exists():
            _make_key(path)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
                return None
            key = f.read(KEY_BYTES + 1)
    except OSError:
        return None
    return key if len(key) == KEY_BYTES else None


def _make_key(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(8)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:  # another process linked its key first: that one stays
            pass
    finally:
        tmp.unlink(missing_ok=True)


def user_key() -> bytes | None:
    """This user's key (made on first use), or None where it cannot be had safely."""
    try:
        return _key_at(key_file())
    except RuntimeError:  # no home directory
        return None


def mac(data: bytes, purpose: str) -> bytes | None:
    """The HMAC-SHA256 of ``data`` for ``purpose`` (a word that keeps a tag of one kind of
    file from passing for another's) under this user's key; None without a key."""
    key = user_key()
    if key is None:
        return None
    return hmac.new(key, purpose.encode() + b"\0" + data, hashlib.sha256).digest()


def tag(data: bytes, purpose: str) -> str | None:
    """``mac`` as hex, for a JSON record."""
    m = mac(data, purpose)
    return None if m is None else m.hex()


def verify(data: bytes, purpose: str, mark) -> bool:
    """Whether ``mark`` (hex or bytes) is this user's tag of ``data`` for ``purpose``."""
    expected = mac(data, purpose)
    if expected is None or not isinstance(mark, (str, bytes)):
        return False
    if isinstance(mark, str):
        try:
            mark = bytes.fromhex(mark)
        except ValueError:
            return False
    return hmac.compare_digest(expected, mark)


def sha256(path) -> str:
    """The hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


__all__ = ["foreign", "key_file", "mac", "mkdir_private", "sha256", "tag", "user_key",
           "verify"]
