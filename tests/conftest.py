"""Test-suite setup: the reference sampler ``reference/r_port.py`` (not installed) is importable."""

import sys
from pathlib import Path

_REFERENCE = Path(__file__).resolve().parents[1] / "reference"
if str(_REFERENCE) not in sys.path:
    sys.path.insert(0, str(_REFERENCE))

#: Modules with tests of a minute or more (Dask clusters in subprocesses, notebooks, SBC): run first,
#: so that under ``pytest -n 2`` the suite does not end with one worker alone on one of them.
LONG_MODULES = frozenset(
    {
        "test_study.py",
        "test_cli.py",
        "test_notebooks.py",
        "test_interweave.py",
        "test_examples.py",
        "test_kernels_sums.py",
    }
)


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in LONG_MODULES)  # stable within each group
