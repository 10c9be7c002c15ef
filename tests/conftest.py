"""Test-session settings: no GPU preallocation; one compilation cache shared by every test of
the session (in-process, the xdist workers and the `pgjax` subprocesses), fresh for each session
so that timings measured from a clean checkout stay honest (set PGJAX_COMPILE_CACHE to keep one
across sessions); and for the fast subset (`-m "not slow"`, whose programs are tiny and
compile-bound) XLA's backend optimisation level 0 and its CPU loop emitters in place of the
fusion emitters, which together compile a training program in about 0.4 of the defaults' time
(benchmarks/README.md). The learning tests run at XLA's defaults, as users' runs do."""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
if "PGJAX_COMPILE_CACHE" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="pgjax-test-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["PGJAX_COMPILE_CACHE"] = _cache

from pgjax.core import compile_cache  # noqa: E402

compile_cache.enable()

FAST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def pytest_configure(config):
    # before any test touches a JAX backend (which reads XLA_FLAGS once)
    if (config.getoption("markexpr") or "").replace(" ", "") == "notslow":
        flags = os.environ.get("XLA_FLAGS", "").split()
        os.environ["XLA_FLAGS"] = " ".join(flags + [f for f in FAST_XLA_FLAGS if f not in flags])
