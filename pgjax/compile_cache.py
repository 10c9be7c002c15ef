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
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

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
    is. Returns the directory in use, or None when the cache is off."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    path = default_dir() if path is None else Path(path).expanduser()
    if path is None:
        return None
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:  # an unusable directory only costs compile time
        print(f"pgjax: compilation cache off: cannot create {path} ({e.strerror}); set "
              f"{ENV}=DIR to use another directory or {ENV}=off", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    return path


# -- traced and lowered programs ---------------------------------------------------------------
PROGRAMS = "programs"  # subdirectory of the cache directory (JAX's own entries sit beside it)
MAX_PROGRAMS = 256  # least recently used programs are dropped beyond this many
_FORMAT = 1
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
    root = Path(__file__).resolve().parent
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

    def __call__(self, *args):
        import jax

        leaves, tree = jax.tree.flatten(args)
        signature = (tree, tuple((x.shape, str(x.dtype), bool(getattr(x, "weak_type", False)))
                                 for x in map(jax.typeof, leaves)))
        if signature not in self._programs:
            self._programs[signature] = self._program(args, leaves, tree, signature)
        program, out_tree = self._programs[signature]
        if out_tree is None:  # the plain jit
            return program(*args)
        return jax.tree.unflatten(out_tree, program(*leaves))

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


def _load(path: Path):
    """(exported program, output structure) from ``path``, or None when it is missing or
    unreadable (then it is exported again and the file replaced)."""
    import jax

    try:
        data = pickle.loads(path.read_bytes())
        if data.get("format") != _FORMAT:
            return None
        exported = jax.export.deserialize(bytearray(data["exported"]))
        os.utime(path)  # recently used
        return exported, data["out_tree"]
    except Exception:
        return None


def _save(path: Path, blob: bytes, out_tree) -> None:
    """Write atomically (a crash leaves the old file or none), then drop the least recently
    used programs beyond ``MAX_PROGRAMS``. A directory that cannot be written only costs
    the next run its tracing time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps({"format": _FORMAT, "exported": blob, "out_tree": out_tree}))
        os.replace(tmp, path)
        stored = sorted(path.parent.glob("*.program"), key=lambda p: p.stat().st_mtime)
        for old in stored[:-MAX_PROGRAMS]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
