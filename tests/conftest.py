"""Test-suite setup: the reference sampler ``reference/r_port.py`` (not installed) is importable."""

import sys
from pathlib import Path

_REFERENCE = Path(__file__).resolve().parents[1] / "reference"
if str(_REFERENCE) not in sys.path:
    sys.path.insert(0, str(_REFERENCE))
