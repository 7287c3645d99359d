"""The tutorial notebooks run top to bottom in quick mode (PMDP_NOTEBOOK_QUICK=1), and their stored
outputs (what the documentation site shows) are clean.

nbclient, nbformat and ipykernel are in the ``dev`` extra: a missing one fails these tests rather
than skipping them, and so does missing input data (``load_atus`` has no silent fallback).
"""

import os
import sys
import time
from pathlib import Path

import nbclient
import nbformat
import pytest
from jupyter_client.manager import KernelManager

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: Wall-clock budget per notebook in quick mode (they take well under a minute on 2 free cores).
BUDGET = 240
#: The notebooks with a quick mode, run here.
QUICK_MODE = [
    "quickstart.ipynb",
    "unbounded_sample_size.ipynb",
    "regression.ipynb",
    "atus.ipynb",
    "interweaving.ipynb",
    "multiple_tables.ipynb",
    "census_scale.ipynb",
    "choosing_epsilon.ipynb",
]
#: Notebooks run by another test.
ELSEWHERE = {"risk_tutorial.ipynb": "tests/risk/test_risk_notebook.py"}
#: Text that must not appear in a stored output: machine paths, warnings, tracebacks.
FORBIDDEN = ["/work/", "/root/", "/home/", "/tmp/", "Warning:", "warnings.warn", "Traceback"]


class ThisPythonKernel(KernelManager):
    """The ``python3`` kernel, always on *this* interpreter (whatever the kernel spec points to)."""

    def format_kernel_cmd(self, extra_arguments=None):
        cmd = super().format_kernel_cmd(extra_arguments)
        connection = cmd[cmd.index("-f") :] if "-f" in cmd else ["-f", self.connection_file]
        return [sys.executable, "-m", "ipykernel_launcher", *connection]


def test_every_notebook_is_run_by_a_test():
    found = {path.name for path in NOTEBOOKS.glob("*.ipynb")}
    assert found == set(QUICK_MODE) | set(ELSEWHERE)


@pytest.mark.parametrize("name", QUICK_MODE + list(ELSEWHERE))
def test_stored_outputs_are_clean_and_have_figures(name):
    """What the site renders (stored outputs, not re-executed there): figures, no machine paths,
    no warnings or errors, and a first cell saying what the reader will learn."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    assert outputs, f"{name} has no stored outputs: run it (tools/ or nbclient) before committing"
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.get("name") == "stderr"], "stderr in the stored outputs"
    text = "".join(
        output.get("text", "") + str(output.get("data", {}).get("text/plain", ""))
        for output in outputs
    )
    found = [fragment for fragment in FORBIDDEN if fragment in text]
    assert not found, f"{name}: {found} in the stored outputs"
    assert any("image/png" in output.get("data", {}) for output in outputs)
    if name in QUICK_MODE:
        assert "What you will learn" in notebook.cells[0].source


@pytest.mark.parametrize("name", QUICK_MODE)
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
