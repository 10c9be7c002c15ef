"""The host loop and what it leaves: the vmapped program and its placement, resumes, the chunk
loop, run records, checkpoints, loggers and claiming a run directory."""
