"""The risk tutorial notebook executes top to bottom, in under a minute."""

import os
import time
from pathlib import Path

import nbclient  # a dev dependency: a missing one fails here rather than skipping the notebook
import nbformat

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "risk_tutorial.ipynb"


def test_risk_tutorial_executes_within_a_minute(monkeypatch):
    # the kernel imports the package of this checkout, whether or not it is installed
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=60,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    assert time.perf_counter() - start < 60

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    assert not [output for output in outputs if output.output_type == "error"]
    assert any("image/png" in output.get("data", {}) for output in outputs)  # the risk plot
    text = "".join(output.get("text", "") for output in outputs)
    assert "largest loss" in text and "<= bound" in text
    assert "would evaluate 1,679,616 rules" in text
