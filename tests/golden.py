"""Tiny runs of every built-in update rule kind whose records are kept in
``tests/data/golden`` (metrics without wall-clock columns, one CSV per run): a refactor that
changes none of the computation leaves them identical to the bit. ``python tests/golden.py``
rewrites them, for a change that means to alter what a run computes (say so in its commit)."""
from __future__ import annotations

from pathlib import Path

from pgjax.training.config import TrainConfig
from pgjax.loop.runner import run

HERE = Path(__file__).parent / "data" / "golden"
SMALL = dict(steps=8 * 16 * 6, num_envs=8, rollout_len=16, eval_every=2, eval_envs=4,
             episode_length=100, seeds=2, quiet=True, checkpoint_seconds=0)
CASES = {
    "ppo": dict(algo="ppo", env="jax:cartpole", grid=("ppo.lr=1e-4,3e-4",),
                diagnostics="full", eval_mode="both", evals=3,
                **{"ppo.minibatches": 4, "ppo.epochs": 2}),
    "trpo": dict(algo="trpo", env="jax:cartpole", **{"trpo.vf_minibatches": 4}),
    "spo": dict(algo="spo", env="jax:cartpole", **{"spo.minibatches": 4, "spo.epochs": 2}),
    "fixpo": dict(algo="fixpo", env="jax:cartpole",
                  **{"fixpo.minibatches": 4, "fixpo.epochs": 2}),
    "s2pg": dict(algo="ppo", env="jax:cartpole", policy="stateful",
                 **{"ppo.minibatches": 4, "ppo.epochs": 2}),
    "happo": dict(algo="happo", env="matrix:climbing", episode_length=None,
                  **{"ppo.minibatches": 4, "ppo.epochs": 2}),
}


def params_digest(path: Path) -> str:
    """sha256 over a run's final parameters (``params.msgpack``), leaf by leaf in the order
    of their paths, so that the digest does not depend on the container types."""
    import hashlib

    import numpy as np
    from flax import serialization

    def leaves(tree, prefix=""):
        if isinstance(tree, dict):
            for k in sorted(tree):
                yield from leaves(tree[k], f"{prefix}/{k}")
        else:
            yield prefix, np.asarray(tree)

    h = hashlib.sha256()
    for name, x in leaves(serialization.msgpack_restore(path.read_bytes())):
        h.update(f"{name}:{x.dtype}:{x.shape}".encode())
        h.update(np.ascontiguousarray(x).tobytes())
    return h.hexdigest()


def records(name: str, out: Path) -> str:
    """Case ``name`` trained into ``out``: for each run, its metrics as CSV (wall-clock
    columns dropped) and the digest of its final parameters."""
    from pgjax.analysis.results import run_metrics

    options = {**SMALL, **CASES[name], "out": str(out), "name": name}
    run(TrainConfig().with_options(options, "the golden case", every_rule=True))
    text = []
    for run_dir in sorted((out / name / "runs").iterdir()):
        text += [f"# run {run_dir.name} params {params_digest(run_dir / 'params.msgpack')}",
                 run_metrics(run_dir).drop(columns="wall_time_s").to_csv(index=False)]
    return "\n".join(text)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            (HERE / f"{case}.csv").write_text(records(case, Path(tmp)))
            print("wrote", HERE / f"{case}.csv")
