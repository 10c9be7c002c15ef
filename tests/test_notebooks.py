"""The notebooks in notebooks/ are stored clean and run top to bottom.

The slow test executes each notebook in a fresh Jupyter kernel at a tenth of its step budgets
(``PGJAX_NOTEBOOK_SCALE=0.1``), in a temporary working directory, and fails on the first
cell that raises. It needs the ``dev`` extra (nbclient, nbformat, ipykernel).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SCALE = "0.1"


def test_notebooks_are_stored_without_outputs():
    assert {p.name for p in NOTEBOOKS} >= {"quickstart.ipynb", "extending.ipynb",
                                          "multiagent.ipynb", "stateful.ipynb"}
    for path in NOTEBOOKS:
        nb = json.loads(path.read_text())
        assert nb["nbformat"] == 4, path.name
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [], f"{path.name}: cell {i} has stored outputs"
                assert cell["execution_count"] is None, \
                    f"{path.name}: cell {i} has an execution count"


def test_notebooks_are_valid_nbformat():
    nbformat = pytest.importorskip("nbformat")
    for path in NOTEBOOKS:
        nbformat.validate(nbformat.read(path, as_version=4))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("PGJAX_NOTEBOOK_SCALE", SCALE)  # inherited by the kernel process
    shutil.copy(path, tmp_path / path.name)
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on the first error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), \
        f"{path.name} showed no figure"
    assert (tmp_path / "runs" / "notebooks" / path.stem).is_dir()
