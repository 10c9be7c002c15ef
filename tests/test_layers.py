"""Code shape: pgjax's layers import one way (the import-linter contract in pyproject.toml)
and no module of pgjax imports itself through a cycle."""
from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports() -> dict[str, set[str]]:
    """Every pgjax module -> the pgjax modules it imports (at module or function level)."""
    mods = {}
    for p in (ROOT / "pgjax").rglob("*.py"):
        name = ".".join(p.relative_to(ROOT).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p
    graph = {}
    for name, p in mods.items():
        pkg = name if p.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                out |= {base} | {f"{base}.{a.name}" for a in node.names}
        graph[name] = {d for d in out if d in mods and d != name
                       and not d.startswith(name + ".")}
    return graph


def _cycle(graph):
    seen, stack = set(), []

    def visit(u):
        seen.add(u)
        stack.append(u)
        for v in sorted(graph[u]):
            if v in stack:
                return stack[stack.index(v):] + [v]
            if v not in seen and (found := visit(v)):
                return found
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in seen and (found := visit(m)):
            return found
    return None


def test_no_import_cycle_inside_pgjax():
    assert _cycle(_imports()) is None, " -> ".join(_cycle(_imports()))
    # the check finds a cycle when there is one
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_layers_import_one_way():
    exe = shutil.which("lint-imports", path=str(pathlib.Path(sys.executable).parent))
    if exe is None:
        pytest.fail("lint-imports not found: install the dev extra (pip install -e '.[dev]')")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "2 kept, 0 broken" in out.stdout  # the packages' order and the modules'


def test_modules_are_in_layer_packages_and_none_is_over_500_lines():
    """Every module of pgjax lives in one of the layer packages (or is the cli), and none is
    longer than 500 lines."""
    packages = {"core", "envs", "model", "algos", "training", "analysis", "loop", "tools"}
    flat = sorted(p.name for p in (ROOT / "pgjax").glob("*.py"))
    assert flat == ["__init__.py", "cli.py"], flat
    assert {p.name for p in (ROOT / "pgjax").iterdir() if p.is_dir()
            and p.name != "__pycache__"} == packages
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "pgjax").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_the_flat_module_paths_of_0_2_still_import_with_a_warning():
    code = """
import warnings
warnings.simplefilter("error", FutureWarning)
import pgjax, pgjax.loop.runner, pgjax.analysis.results   # the new paths: no warning
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import pgjax.runner
    from pgjax import results
    from pgjax.records import RunRecords
assert pgjax.runner is pgjax.loop.runner and results is pgjax.analysis.results
assert RunRecords.__module__ == "pgjax.loop.records"
said = [str(w.message) for w in caught if w.category is FutureWarning]
assert any(s.startswith("pgjax.runner is pgjax.loop.runner since pgjax 0.3.0") for s in said), said
assert any(s.startswith("pgjax.results is pgjax.analysis.results") for s in said), said
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
