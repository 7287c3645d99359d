"""The tutorial notebooks run top to bottom in quick mode (PMDP_NOTEBOOK_QUICK=1)."""

import os
import sys
import time
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient", reason="nbclient is needed to run the notebooks")
import nbformat
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: Wall-clock budget per notebook in quick mode (they take well under a minute on 2 free cores).
BUDGET = 240


class ThisPythonKernel(KernelManager):
    """The ``python3`` kernel, always on *this* interpreter (whatever the kernel spec points to)."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        connection = cmd[cmd.index("-f"):] if "-f" in cmd else ["-f", self.connection_file]
        return [sys.executable, "-m", "ipykernel_launcher", *connection]


@pytest.mark.parametrize(
    "name",
    [
        "quickstart.ipynb",
        "unbounded_sample_size.ipynb",
        "regression.ipynb",
        "atus.ipynb",
        "interweaving.ipynb",
        "multiple_tables.ipynb",
    ],
)
def test_notebook_runs_in_quick_mode(name, monkeypatch):
    monkeypatch.setenv("PMDP_NOTEBOOK_QUICK", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # the kernel imports the package of this checkout, whether or not it is installed
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    notebook.cells.insert(0, nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = nbclient.NotebookClient(
        notebook,
        kernel_name="python3",
        kernel_manager_class=ThisPythonKernel,
        timeout=BUDGET,
        resources={"metadata": {"path": str(NOTEBOOKS)}},
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    assert elapsed < BUDGET, f"{name} took {elapsed:.0f} s"

    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    errors = [output for output in outputs if output.output_type == "error"]
    assert not errors, errors[0]
    assert notebook.cells[0].outputs[0]["text"].strip() == sys.executable
    text = "".join(output.get("text", "") for output in outputs)
    assert "quick mode" in text
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert len(images) >= 2  # the density figures
