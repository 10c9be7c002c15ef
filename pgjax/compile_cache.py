"""JAX's persistent compilation cache for pgjax: the per-user directory and the switch for it.

A compiled program is stored on disk keyed by its XLA computation, so a later run of the same
configuration (a resume, a rerun, another sweep group with the same shapes) loads it instead
of compiling again. ``pgjax train`` and ``pgjax sweep`` turn it on unless ``--no-compile-cache``
is given; Python code calls :func:`enable`. The directory is ``$PGJAX_COMPILE_CACHE`` if set
(``off`` disables the cache), else ``$XDG_CACHE_HOME/pgjax/jax``, else ``~/.cache/pgjax/jax``.
The cache never changes results: a loaded program is the one the compiler would produce.
"""
from __future__ import annotations

import os
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
