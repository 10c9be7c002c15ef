"""Helpers shared by the tests: a run killed after a number of chunks, and record trees
compared file by file (wall-clock columns left out)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd


def run_files(root: Path) -> dict:
    """Every record of a run directory tree, with wall-clock columns removed."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir() or "checkpoint" in p.parts or p.suffix in (".png", ".svg"):
            continue
        if p.name == "metrics.csv":
            out[rel] = pd.read_csv(p).drop(columns="wall_time_s").to_csv(index=False)
        elif p.name == "sweep.json":
            st = json.loads(p.read_text())
            out[rel] = {g: {k: v for k, v in e.items() if k != "wall_time_s"}
                        for g, e in st["groups"].items()}
        elif p.name == "config.json":
            c = json.loads(p.read_text())
            if "config" in c:  # where the records live differs between the compared trees
                c["config"].pop("out")
                c["config"].pop("name")
            out[rel] = c
        else:
            out[rel] = p.read_bytes()
    return out


def assert_same_records(a: Path, b: Path):
    fa, fb = run_files(a), run_files(b)
    assert sorted(fa) == sorted(fb)
    for k in fa:
        assert fa[k] == fb[k], k


class Interrupt(Exception):
    pass


def interrupting(monkeypatch, after_chunks: int):
    import pgjax.runner as train_mod

    real = train_mod.VmappedRuns

    class Crashing(real):
        def __init__(self, trainer):
            super().__init__(trainer)
            chunk, calls = self.chunk, [0]

            def counted(*a, **k):
                calls[0] += 1
                if calls[0] > after_chunks:
                    raise Interrupt
                return chunk(*a, **k)

            self.chunk = counted

    monkeypatch.setattr(train_mod, "VmappedRuns", Crashing)
