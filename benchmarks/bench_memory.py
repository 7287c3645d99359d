"""Peak memory of ``pmdp.sample``: O(N) for the records, not O(N x draws).

Each configuration runs in a fresh Python process: it builds the Bernoulli model (unbounded DP)
with ``N`` records and samples ``draws`` iterations under ``tracemalloc`` (which sees NumPy's and
PyTensor's array allocations), reporting the peak of memory allocated while sampling, and the
process's peak resident memory (``VmHWM``, which also counts the interpreter, PyMC and
compiled code). The records live in one buffer per chain, overwritten in place; the trace stores
only the parameters and ``n``. The peak therefore grows with ``N`` and not with ``draws``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from _util import Row

SECTION = "Peak memory while sampling (Bernoulli records, unbounded DP, one chain)"
HERE = Path(__file__).resolve().parent


def _child(n: int, draws: int) -> None:
    from _models import bernoulli_model

    import pymc_unbounded_dp as pmdp

    model = bernoulli_model(n, unbounded=True)
    import tracemalloc

    from pymc_unbounded_dp._compile import compile_model

    compile_model(model)
    tracemalloc.start()
    pmdp.sample(
        model=model,
        draws=draws,
        tune=50,
        chains=1,
        random_seed=1,
        progressbar=False,
        compute_convergence_checks=False,
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        json.dumps({"n": n, "draws": draws, "traced_peak_bytes": peak, "maxrss_kb": _peak_rss_kb()})
    )


def _peak_rss_kb() -> int:
    """This process's peak resident memory in KiB: ``VmHWM`` (Linux) or ``ru_maxrss``.

    (On Linux ``ru_maxrss`` of a child started by fork + exec reports its parent's peak.)
    """
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(n: int, draws: int) -> dict:
    env = dict(os.environ)
    out = subprocess.run(
        [sys.executable, str(HERE / "bench_memory.py"), "--child", str(n), str(draws)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=HERE,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def run(quick: bool) -> tuple[list[Row], dict]:
    sizes = [10**4, 10**5] if quick else [10**4, 10**5, 10**6]
    draw_counts = [200, 1000] if quick else [200, 2000]
    rows, raw = [], []
    for n in sizes:
        for draws in draw_counts:
            if n >= 10**6 and draws > draw_counts[0]:
                continue  # one point is enough at the largest N (the trace does not depend on N)
            m = measure(n, draws)
            raw.append(m)
            peak = m["traced_peak_bytes"]
            rows.append(
                Row(
                    SECTION,
                    f"N={n:.0e}, {draws} draws: peak allocated while sampling",
                    peak / 2**20,
                    "MB",
                    "O(N), flat in draws",
                    f"{peak / n:.0f} bytes per record; process peak RSS "
                    f"{m['maxrss_kb'] / 1024:.0f} MB",
                )
            )
    first = [m for m in raw if m["draws"] == draw_counts[0]]
    slope = (first[-1]["traced_peak_bytes"] - first[0]["traced_peak_bytes"]) / (
        first[-1]["n"] - first[0]["n"]
    )
    rows.append(
        Row(
            SECTION,
            f"marginal memory per record (N={first[0]['n']:.0e} to {first[-1]['n']:.0e})",
            slope,
            "bytes/record",
            "O(1)",
            "records, their statistics, proposals and the kernel's buffers",
        )
    )
    return rows, {"memory": raw}


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    sys.path[:0] = [str(HERE), str(HERE.parent / "reference")]  # _models imports r_port
    _child(int(sys.argv[2]), int(sys.argv[3]))
