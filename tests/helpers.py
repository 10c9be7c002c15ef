"""Helpers shared by the tests: a run killed after a number of chunks, record trees
compared file by file (wall-clock columns left out), and the KL-penalty coefficient a run
should have recorded."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pgjax.analysis.results import run_metrics


def run_files(root: Path) -> dict:
    """Every record of a run directory tree, with wall-clock columns removed."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir() or "checkpoint" in p.parts or p.suffix in (".png", ".svg"):
            continue
        if p.name in ("metrics.csv", "metrics.csv.gz"):
            out[rel] = run_metrics(p.parent).drop(columns="wall_time_s").to_csv(index=False)
        elif p.name == "sweep.json":
            st = json.loads(p.read_text())
            out[rel] = {g: {k: v for k, v in e.items() if k != "wall_time_s"}
                        for g, e in st["groups"].items()}
        elif p.name == "settings.json":  # a sweep's {group: config}: where they live differs
            st = json.loads(p.read_text())
            for g in st.values():
                for d in (g, g.get("config") if isinstance(g.get("config"), dict) else {}):
                    d.pop("out", None)
                    d.pop("name", None)
            out[rel] = st
        elif p.name == "config.json":
            c = json.loads(p.read_text())
            if "config" in c:  # where the records live differs between the compared trees
                c["config"].pop("out")
                c["config"].pop("name")
            c.pop("uid", None)  # each run directory's own identity
            out[rel] = c
        else:
            out[rel] = p.read_bytes()
    return out


def assert_same_records(a: Path, b: Path):
    fa, fb = run_files(a), run_files(b)
    assert sorted(fa) == sorted(fb), sorted(set(fa) ^ set(fb))
    for k in fa:
        assert fa[k] == fb[k], k


class Interrupt(Exception):
    pass


def interrupting(monkeypatch, after_chunks: int):
    import pgjax.loop.runner as train_mod

    real = train_mod.VmappedRuns

    class Crashing(real):
        def __init__(self, trainer, *args):
            super().__init__(trainer, *args)
            chunk, calls = self.chunk, [0]

            def counted(*a, **k):
                calls[0] += 1
                if calls[0] > after_chunks:
                    raise Interrupt
                return chunk(*a, **k)

            self.chunk = counted

    monkeypatch.setattr(train_mod, "VmappedRuns", Crashing)


def assert_adaptive_beta(beta, kl, beta0: float, d_targ: float) -> None:
    """Every update's recorded beta is the previous one (``beta0`` before the first) doubled
    when that update's batch KL exceeds 1.5 d_targ, halved below d_targ / 1.5 (Schulman et
    al. 2017, sec. 4), computed here independently of pgjax."""
    beta, kl = np.asarray(beta), np.asarray(kl)
    prev = np.concatenate([[beta0], beta[:-1]])
    want = np.where(kl > 1.5 * d_targ, 2 * prev, np.where(kl < d_targ / 1.5, prev / 2, prev))
    np.testing.assert_allclose(beta, want, rtol=1e-6)
