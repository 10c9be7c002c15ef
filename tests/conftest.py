import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
