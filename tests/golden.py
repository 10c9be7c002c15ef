"""Tiny runs of every built-in update rule kind whose records are kept in
``tests/data/golden`` (metrics without wall-clock columns and final-parameter statistics, one
CSV per case): a refactor that changes none of the computation leaves them identical to the
bit on the CPU that wrote them, and within float32 rounding on any other. ``python
tests/golden.py`` rewrites them, for a change that means to alter what a run computes (say so
in its commit).

XLA compiles for the CPU it runs on (vector width, instruction set, the loop vectoriser's
choices), so the order of a reduction, and with it the last bits of a float32 sum, differ
between CPUs. Six updates grow those bits to at most 0.5% of a column's scale (measured
between an AMD EPYC with AVX-512, the same CPU capped at AVX2, AVX and SSE4.2, and the CPU
that first wrote the records). Where the host key in a kept file names this CPU the records
must match to the bit; elsewhere every value must lie within ``tolerance`` of the kept one,
and a 1% change of the learning rate must not (``tests/test_golden_records.py``)."""
from __future__ import annotations

import io
import math
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
# |now - kept| <= ABS + REL * |kept| + SCALE * (the largest |kept| of the run's column): the
# measured cross-CPU drift is at most 0.49% of a column's scale (PPO's kl_stats_max) and
# 1.2e-7 on a column that is all rounding (HAPPO's explained variance on a constant return)
ABS, REL, SCALE = 2e-7, 1e-3, 1e-2


def host_key() -> str:
    """What XLA's CPU code generation depends on here: the CPU (vendor, family, model and
    vector extensions), the JAX and jaxlib versions and XLA_FLAGS."""
    import hashlib
    import os
    import platform

    import jax
    import jaxlib

    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = sorted(f for f in info.get("flags", "").split()
                   if f.startswith(("avx", "fma", "sse", "amx", "f16c")))
    parts = [platform.machine(), platform.processor(), info.get("vendor_id", ""),
             info.get("cpu family", ""), info.get("model", ""), info.get("model name", ""),
             " ".join(flags), jax.__version__, jaxlib.__version__,
             os.environ.get("XLA_FLAGS", "")]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def leaf_stats(path: Path) -> list[str]:
    """One line per leaf of a run's final parameters (``params.msgpack``), in the order of
    their paths: its sha256, sum and root of the sum of squares."""
    import hashlib

    import numpy as np
    from flax import serialization, traverse_util

    tree = serialization.msgpack_restore(path.read_bytes())
    lines = []
    for name, x in sorted(traverse_util.flatten_dict(tree, sep="/").items()):
        name, x = f"/{name}", np.asarray(x)
        digest = hashlib.sha256(f"{x.dtype}:{x.shape}".encode()
                                + np.ascontiguousarray(x).tobytes()).hexdigest()[:16]
        x64 = x.astype(np.float64)
        lines.append(f"# leaf {name} {digest} sum={x64.sum():.9g} "
                     f"norm={math.sqrt((x64 ** 2).sum()):.9g}")
    return lines


def records(name: str, out: Path, **changes) -> str:
    """Case ``name`` (with ``changes`` to its options) trained into ``out``: a line naming
    the host, then for each run its final parameters' leaf statistics and its metrics as CSV
    (wall-clock columns dropped)."""
    from pgjax.analysis.results import run_metrics

    options = {**SMALL, **CASES[name], **changes, "out": str(out), "name": name}
    run(TrainConfig().with_options(options, "the golden case", every_rule=True))
    text = [f"# host {host_key()}"]
    for run_dir in sorted((out / name / "runs").iterdir()):
        text += [f"# run {run_dir.name}", *leaf_stats(run_dir / "params.msgpack"),
                 run_metrics(run_dir).drop(columns="wall_time_s").to_csv(index=False)]
    return "\n".join(text)


def kept_host(text: str) -> str:
    """The host key on a kept file's first line."""
    first = text.splitlines()[0]
    return first.split()[2] if first.startswith("# host ") else ""


def parse(text: str) -> dict[str, dict]:
    """Records text back to {run: {"leaves": {path: (sum, norm)}, "metrics": DataFrame}}."""
    import pandas as pd

    runs, name, rows = {}, None, []

    def close():
        if name is not None:
            runs[name]["metrics"] = pd.read_csv(io.StringIO("\n".join(rows)))

    for line in text.splitlines():
        if line.startswith("# run "):
            close()
            name, rows = line.split()[2], []
            runs[name] = {"leaves": {}}
        elif line.startswith("# leaf "):
            _, _, path, _, total, norm = line.split()
            runs[name]["leaves"][path] = (float(total[4:]), float(norm[5:]))
        elif line.strip() and not line.startswith("#"):
            rows.append(line)
    close()
    return runs


def differences(now: str, kept: str) -> list[str]:
    """Where ``now`` departs from ``kept`` by more than float32 rounding across CPUs: other
    runs, leaves, columns or missing values, or a value outside the tolerance (ABS, REL,
    SCALE). Empty when they agree."""
    import numpy as np

    a, b = parse(now), parse(kept)
    if list(a) != list(b):
        return [f"runs {list(a)} != kept {list(b)}"]
    out = []
    for run_name in b:
        ra, rb = a[run_name], b[run_name]
        if list(ra["leaves"]) != list(rb["leaves"]):
            out.append(f"{run_name}: parameter leaves differ")
            continue
        for leaf, (sum_b, norm_b) in rb["leaves"].items():
            sum_a, norm_a = ra["leaves"][leaf]
            # a leaf's sum cancels; it is held to the scale of its norm
            if (abs(norm_a - norm_b) > ABS + SCALE * abs(norm_b)
                    or abs(sum_a - sum_b) > ABS + SCALE * abs(norm_b)):
                out.append(f"{run_name} {leaf}: sum {sum_a:.6g} norm {norm_a:.6g}, kept "
                           f"{sum_b:.6g} {norm_b:.6g}")
        ma, mb = ra["metrics"], rb["metrics"]
        if list(ma.columns) != list(mb.columns) or len(ma) != len(mb):
            out.append(f"{run_name}: metric columns or rows differ")
            continue
        for col in mb.columns:
            x, y = ma[col].to_numpy(float), mb[col].to_numpy(float)
            if not (np.isnan(x) == np.isnan(y)).all():
                out.append(f"{run_name} {col}: recorded at other iterations")
                continue
            seen = ~np.isnan(y)
            if not seen.any():
                continue
            bound = ABS + REL * np.abs(y[seen]) + SCALE * np.abs(y[seen]).max()
            far = np.abs(x[seen] - y[seen]) > bound
            if far.any():
                i = int(np.flatnonzero(far)[0])
                out.append(f"{run_name} {col}: {x[seen][i]:.7g} at row {i}, kept "
                           f"{y[seen][i]:.7g}")
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            (HERE / f"{case}.csv").write_text(records(case, Path(tmp)))
            print("wrote", HERE / f"{case}.csv")
