"""JAX's persistent compilation cache for pgjax: the per-user directory, the switch for it, and
the traced programs kept beside it.

A compiled program is stored on disk keyed by its XLA computation, so a later run of the same
configuration (a resume, a rerun, another sweep group with the same shapes) loads it instead
of compiling again. ``pgjax train`` and ``pgjax sweep`` turn it on unless ``--no-compile-cache``
is given; Python code calls :func:`enable`. The directory is ``$PGJAX_COMPILE_CACHE`` if set
(``off`` disables the cache), else ``$XDG_CACHE_HOME/pgjax/jax``, else ``~/.cache/pgjax/jax``.
The cache never changes results: a loaded program is the one the compiler would produce.

Compiling is not all of a start: tracing a training chunk from Python and lowering it takes
seconds too. :class:`StoredProgram` keeps the traced and lowered program (``jax.export``) in
``programs/`` under the same directory, keyed by the config, the input shapes, pgjax's source
and the library versions, so a rerun of the same configuration skips both.

Whoever can write into the cache directory can make a later run execute their code: JAX's
entries are compiled native programs, and a stored program's output structure is a pickle.
So :func:`enable` refuses a directory that another user could write (it, or ``programs/``
in it, is group- or other-writable or owned by someone else; or, where others can reach
the files inside, one of JAX's files is) and says so on one line of stderr, and it creates
a missing directory, and its missing parents, with mode 0700. Stored programs are, in
addition, authenticated: each file is an HMAC-SHA256 tag, over its name and the rest of
the file, under this user's secret key kept outside the cache (``pgjax.core.trust``: made once,
mode 0600 in a 0700 directory, and used only while that stays so), followed by the pickle. A file whose tag
does not verify (crafted, another user's, an older format) is never parsed nor unpickled:
the function is traced again and the file replaced. The tags hold in a cache directory
that JAX was pointed at before pgjax too (:func:`enable` keeps it as it is, and JAX's own
entries there are the business of whoever chose it). Without a usable key, programs are
neither stored nor loaded, which costs only tracing time.

Authenticating was chosen over writing the output structure as plain data: the structure
is a ``PyTreeDef`` whose custom nodes (flax struct dataclasses, named tuples, registered
classes) name Python classes and carry static data that can be any Python object, so
rebuilding it from plain data would take a second deserialiser that imports and calls
classes named in the file, a code path that crafted input could steer too, and
``jax.export`` serialises only trees of node types registered with it one by one. The tag
is checked before anything in the file is read, ``jax.export``'s serialised program
included, so a file pgjax parses is one this user's pgjax wrote.
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path

from pgjax.core.trust import foreign, mac, mkdir_private, user_key

ENV = "PGJAX_COMPILE_CACHE"
OFF = ("off", "0", "false", "no", "none", "")
MAX_BYTES = 4 << 30  # least recently used entries are dropped beyond this
MIN_COMPILE_SECONDS = 0.5  # programs that compile faster than this are not stored


def default_dir() -> Path | None:
    """The cache directory pgjax uses, or None when ``$PGJAX_COMPILE_CACHE`` switches it off."""
    value = os.environ.get(ENV)
    if value is not None:
        return None if value.strip().lower() in OFF else Path(value).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pgjax" / "jax"


def enable(path: str | Path | None = None) -> Path | None:
    """Store and reuse compiled programs under ``path`` (default :func:`default_dir`).

    A cache directory already configured in JAX (``jax_compilation_cache_dir``) is kept as it
    is. A missing directory is made with mode 0700; one that another user could write is
    refused, with one line on stderr. Returns the directory in use, or None when the cache
    is off."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = default_dir() if path is None else Path(path).expanduser()
    if path is None:
        return None
    try:
        mkdir_private(path)
        unsafe = _writable_by_others(path)
    except OSError as e:  # an unusable directory only costs compile time
        print(f"pgjax: compilation cache off: cannot create {path} ({e.strerror}); set "
              f"{ENV}=DIR to use another directory or {ENV}=off", file=sys.stderr)
        return None
    if unsafe is not None:
        reason, fix = unsafe
        print(f"pgjax: compilation cache off: {reason}, so others could put programs there "
              f"that pgjax would run; {fix}set {ENV} to a folder only you can write, or "
              f"{ENV}=off", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path


def _writable_by_others(path: Path) -> tuple[str, str] | None:
    """(why, fix) when a user other than this one could write into the cache directory
    ``path``: the directory or its ``programs/`` owned by another user or group- or
    other-writable, or, where other users can reach the files in it, one of JAX's files
    so. None when only this user can (and where there are no users: no ``os.getuid``)."""
    if not hasattr(os, "getuid"):
        return None
    st = path.stat()
    found = foreign(path, st)
    programs = path / PROGRAMS
    if found is None and programs.exists():
        found = foreign(programs, programs.stat())
    if found is None and st.st_mode & 0o011:  # others can open the files in it
        for entry in os.scandir(path):
            try:
                file = entry.name != PROGRAMS and foreign(entry.path, entry.stat())
            except OSError:  # gone, or a dangling link
                continue
            if file:
                return file[0], f"run `chmod go-rwx {path}`, or "
    return found


# -- traced and lowered programs ---------------------------------------------------------------
PROGRAMS = "programs"  # subdirectory of the cache directory (JAX's own entries sit beside it)
MAX_PROGRAMS = 256  # least recently used programs are dropped beyond this many
_FORMAT = 2  # a file: HMAC-SHA256 tag (over the name and the rest), then the pickle
_TAG_BYTES = 32
# what else decides the program a function traces to, besides its code and inputs
_PACKAGES = ("jax", "jaxlib", "brax", "mujoco", "mujoco-mjx", "flax", "optax", "chex", "numpy")
_JAX_OPTIONS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_numpy_rank_promotion",
                "jax_default_prng_impl", "jax_threefry_partitionable")


def program_dir() -> Path | None:
    """Where exported programs are kept: ``programs/`` in the compilation cache in use, or
    None when the cache is off."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    return Path(current) / PROGRAMS if current else None


@functools.lru_cache(maxsize=None)
def code_digest() -> str:
    """A digest of everything besides a function's inputs that decides what it traces to:
    pgjax's own source files, the versions of the libraries it traces through, JAX's
    numerics options, ``XLA_FLAGS`` and the device kind."""
    import importlib.metadata

    import jax

    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # the pgjax package
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    for name in _PACKAGES:
        try:
            h.update(f"{name}={importlib.metadata.version(name)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{name}=absent".encode())
    for option in _JAX_OPTIONS:
        h.update(f"{option}={getattr(jax.config, option, None)}".encode())
    device = jax.devices()[0]
    h.update(f"{os.environ.get('XLA_FLAGS', '')}|{device.platform}|{device.device_kind}".encode())
    return h.hexdigest()


def signature(args) -> tuple:
    """What decides which compiled program a call takes: the arguments' tree structure and
    each leaf's shape, dtype and weak type (of arrays or ``jax.ShapeDtypeStruct``)."""
    import jax

    leaves, tree = jax.tree.flatten(args)
    avals = (x if isinstance(x, jax.ShapeDtypeStruct) else jax.typeof(x) for x in leaves)
    return tree, tuple((tuple(x.shape), str(x.dtype), bool(getattr(x, "weak_type", False)))
                       for x in avals)


class _FlatLowered:
    """A lowered program of flat leaves whose ``compile()`` takes and returns trees."""

    def __init__(self, lowered, out_tree):
        self.lowered, self.out_tree = lowered, out_tree

    def compile(self):
        import jax

        compiled, out_tree = self.lowered.compile(), self.out_tree
        return lambda *args: jax.tree.unflatten(out_tree, compiled(*jax.tree.leaves(args)))


class StoredProgram:
    """``jax.jit(fn, donate_argnums=...)`` whose traced and lowered program is kept on disk
    (``jax.export``), so a later process with the same ``key``, code and input shapes skips
    tracing and lowering, seconds for a training chunk, and its compilation hits the
    persistent cache. ``key`` must name everything that decides what ``fn`` computes other
    than its array inputs (for a trainer's functions: the config). The program run is the
    exported one, in the first process as in every later one, so results do not depend on
    whether it was loaded; where export fails (a host callback, an unsupported operation)
    it is the plain ``jit``."""

    def __init__(self, fn, key: str, directory: Path, donate_argnums: tuple[int, ...] = ()):
        self.fn, self.key, self.directory = fn, key, Path(directory)
        self.donate_argnums = tuple(donate_argnums)
        self._programs = {}  # input signature -> (jitted program, output structure or None)

    def _for(self, args):
        """(jitted program, output structure or None for the plain jit, input leaves)."""
        import jax

        leaves, tree = jax.tree.flatten(args)
        sig = signature(args)
        if sig not in self._programs:
            self._programs[sig] = self._program(args, leaves, tree, sig)
        return (*self._programs[sig], leaves)

    def __call__(self, *args):
        import jax

        program, out_tree, leaves = self._for(args)
        if out_tree is None:  # the plain jit
            return program(*args)
        return jax.tree.unflatten(out_tree, program(*leaves))

    def eval_shape(self, *args):
        """The outputs' shapes, dtypes and weak types for ``args`` (as ``jax.eval_shape``),
        from the stored or traced program."""
        import jax

        program, out_tree, leaves = self._for(args)
        if out_tree is None:
            return jax.eval_shape(program, *args)
        return jax.tree.unflatten(out_tree, jax.eval_shape(program, *leaves))

    def lower(self, *args):
        """The program for ``args`` (arrays or ``jax.ShapeDtypeStruct``) traced, stored and
        lowered, as ``jax.jit(...).lower`` gives it: its ``compile()`` is a function of the
        same arguments as this one, for compiling ahead of the first call."""
        program, out_tree, leaves = self._for(args)
        return program.lower(*args) if out_tree is None else _FlatLowered(
            program.lower(*leaves), out_tree)

    def _path(self, signature) -> Path:
        text = json.dumps([_FORMAT, code_digest(), self.key, str(signature[0]),
                           [list(map(str, s)) for s in signature[1]],
                           list(self.donate_argnums)])
        return self.directory / f"{hashlib.sha256(text.encode()).hexdigest()}.program"

    def _program(self, args, leaves, tree, signature):
        import jax
        import numpy as np

        # argument a's leaves are leaves[first[a]:first[a + 1]]
        first = np.cumsum([0, *(len(jax.tree.leaves(x)) for x in args)])
        donated = [i for a in self.donate_argnums for i in range(first[a], first[a + 1])]
        path = self._path(signature)
        loaded = _load(path)
        if loaded is None:
            out_trees = []

            def flat(*flat_args):
                out = self.fn(*jax.tree.unflatten(tree, flat_args))
                out_trees.append(jax.tree.structure(out))
                return jax.tree.leaves(out)

            try:
                exported = jax.export.export(jax.jit(flat))(*leaves)
                blob = bytes(exported.serialize())
            except Exception:  # not exportable: the plain jit (traces again, in this process)
                return jax.jit(self.fn, donate_argnums=self.donate_argnums), None
            loaded = exported, out_trees[-1]
            _save(path, blob, out_trees[-1])
        exported, out_tree = loaded
        return jax.jit(exported.call, donate_argnums=tuple(donated)), out_tree


def _tag(path: Path, payload: bytes) -> bytes | None:
    """This user's tag of a stored program (its file name and payload), None without a key."""
    return mac(path.name.encode() + b"\0" + payload, "program")


def _load(path: Path):
    """(exported program, output structure) from ``path``, or None when it is missing,
    unreadable, or not authenticated by this user's key (then it is exported again and the
    file replaced). Nothing in the file is parsed before its tag verifies."""
    import jax

    if user_key() is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            raw = f.read()
    except OSError:
        return None
    tag, payload = raw[:_TAG_BYTES], raw[_TAG_BYTES:]
    expected = _tag(path, payload)
    if len(tag) != _TAG_BYTES or expected is None or not hmac.compare_digest(tag, expected):
        return None
    try:
        data = pickle.loads(payload)  # written by this user's pgjax: the tag says so
        if data.get("format") != _FORMAT:
            return None
        exported = jax.export.deserialize(bytearray(data["exported"]))
        os.utime(path)  # recently used
        return exported, data["out_tree"]
    except Exception:
        return None


def _save(path: Path, blob: bytes, out_tree) -> None:
    """Write atomically (a crash leaves the old file or none), tagged with this user's key,
    then drop the least recently used programs beyond ``MAX_PROGRAMS``. Without a key, or
    where the directory cannot be written, nothing is stored: the next run only traces
    again."""
    if user_key() is None:
        return
    try:
        payload = pickle.dumps({"format": _FORMAT, "exported": blob, "out_tree": out_tree})
    except Exception:  # an output structure that does not pickle: not stored
        return
    tmp = None
    try:
        mkdir_private(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(_tag(path, payload) + payload)
        os.replace(tmp, path)
        tmp = None
        stored = sorted(path.parent.glob("*.program"), key=lambda p: p.stat().st_mtime)
        for old in stored[:-MAX_PROGRAMS]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
