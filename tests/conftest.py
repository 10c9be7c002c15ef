import os

# XLA's CPU runtime can wedge its Eigen thread pool while materialising the result of a large
# vmapped program after many others have run in the same process (seen here as a test hanging
# at 0% CPU inside device_get; the same workaround is reported upstream). The tests run many
# programs in one process, so they use single-threaded Eigen; pgjax's CLI does the same on CPU.
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false").strip()
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
