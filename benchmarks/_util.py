"""Timing, effective sample sizes and the result table shared by the benchmark sections."""

from __future__ import annotations

import math
import os
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass
class Row:
    """One benchmark measurement."""

    section: str
    metric: str
    value: float
    unit: str
    target: str = ""
    note: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def best_time(fn, repeats: int = 5, min_time: float = 0.2) -> float:
    """Best CPU time of one call of ``fn`` over ``repeats`` batches (each at least ``min_time``).

    CPU time of this process (``time.process_time``), not wall time: on a shared machine other
    processes' load then does not count, and everything here runs on one thread.
    """
    fn()  # warm up (numba / PyTensor first-call costs)
    best = math.inf
    for _ in range(repeats):
        calls, start = 0, time.process_time()
        while True:
            fn()
            calls += 1
            elapsed = time.process_time() - start
            if elapsed >= min_time:
                break
        best = min(best, elapsed / calls)
    return best


def timed(fn):
    """``(fn(), wall seconds, CPU seconds)``."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def ess(draws) -> float:
    """ArviZ's bulk effective sample size of ``(chain, draw)`` or ``(draw,)`` draws."""
    import arviz as az

    draws = np.asarray(draws, dtype=float)
    if draws.ndim == 1:
        draws = draws[None, :]
    return float(az.ess(draws))


def sampling_seconds(idata) -> float:
    """PyMC's own timing of the sampling loop (no compilation), from the posterior attributes."""
    return float(idata["posterior"].attrs["sampling_time"])


def machine() -> dict:
    """Hardware and software this run used."""
    import numba
    import pymc
    import pytensor

    info = {
        "python": sys.version.split()[0],
        "pymc": pymc.__version__,
        "pytensor": pytensor.__version__,
        "numba": numba.__version__,
        "numpy": np.__version__,
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "threads": {k: os.environ.get(k) for k in _THREAD_VARIABLES},
        "commit": _commit(),
    }
    return info


def _commit() -> str:
    """The repository's commit, with ``+dirty`` if the working tree has changes."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
)


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return platform.processor()
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def format_value(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if abs(value) >= 1e5 or (value != 0 and abs(value) < 1e-2):
        return f"{value:.3g}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def table(rows: list[Row]) -> str:
    """The rows as a Markdown table, grouped by section."""
    lines = []
    for section in dict.fromkeys(r.section for r in rows):
        lines += [
            f"### {section}",
            "",
            "| metric | value | unit | target | note |",
            "|---|---:|---|---|---|",
        ]
        for r in rows:
            if r.section == section:
                lines.append(
                    f"| {r.metric} | {format_value(r.value)} | {r.unit} | {r.target} | {r.note} |"
                )
        lines.append("")
    return "\n".join(lines)
