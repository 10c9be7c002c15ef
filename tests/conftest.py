"""Test-session settings: no GPU preallocation, and one compilation cache shared by every test
of the session (in-process and the `pgjax` subprocesses), fresh for each session so that timings
measured from a clean checkout stay honest; set PGJAX_COMPILE_CACHE to keep one across sessions."""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if "PGJAX_COMPILE_CACHE" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="pgjax-test-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["PGJAX_COMPILE_CACHE"] = _cache

from pgjax import compile_cache  # noqa: E402

compile_cache.enable()
