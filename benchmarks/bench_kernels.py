"""Record updates per second of the compiled refresh, for a scalar and a 9-dimensional statistic.

Drives :mod:`pymc_unbounded_dp.kernels` directly on the ``RecordTarget`` of
``_compile.compile_model(model)`` (as MCEM does; see ``docs/architecture.md``), bounded DP so that
only the refresh runs. Reported per ``N``:

* **sweep**: ``CompiledModel.record_target`` and ``kernels.sweep`` = proposal drawing and statistics
  (one PyTensor call), the uniforms, the numba accept/reject loop and the write-back of accepted
  records (what the records step does per iteration);
* **numba loop**: ``kernels.records._refresh_kernel`` alone on pre-drawn proposals and statistics;
* **proposals**: ``CompiledModel.propose`` alone.
"""

from __future__ import annotations

import numpy as np
from _models import bernoulli_model, regression_model, regression_release
from _util import Row, best_time

from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import compile_model

SECTION = "Record kernels (refresh, bounded DP, one core)"


def _kernel_model(kind: str, n: int):
    if kind == "scalar":
        return bernoulli_model(n)
    release, _ = regression_release(n=n, seed=5)
    return regression_model(release, bounded_n=n)


def sweeper(model, n: int, n_moves: int = 0, seed: int = 1):
    """A function running one ``kernels.sweep`` of ``model``'s records (state kept between calls)."""
    compiled = compile_model(model).tables[0]
    point = model.initial_point()
    rng = np.random.default_rng(seed)
    holder = {"state": kernels.init(compiled.record_target(point), n, rng)}

    def sweep():
        target = compiled.record_target(point)
        holder["state"], _ = kernels.sweep(target, holder["state"], rng, n_moves)
        return holder["state"]

    return sweep


def measure(kind: str, n: int, min_time: float = 0.2, repeats: int = 5) -> dict:
    """Seconds per sweep, per numba loop and per proposal batch of ``n`` records."""
    model = _kernel_model(kind, n)
    compiled = compile_model(model).tables[0]
    point = model.initial_point()
    rng = np.random.default_rng(1)
    sweep = sweeper(model, n)
    sweep_s = best_time(sweep, repeats, min_time)
    _, proposed = compiled.propose(point, n)
    stats = sweep().stats[:n].copy()
    residual = compiled.released_sums() - stats.sum(axis=0)
    log_u = np.log(rng.random(n))

    def loop():
        kernels.records._refresh_kernel(stats, proposed, residual.copy(), log_u, *compiled.noise)

    loop_s = best_time(loop, repeats, min_time)
    propose_s = best_time(lambda: compiled.propose(point, n), repeats, min_time)
    return {
        "kind": kind,
        "n": n,
        "dim": int(proposed.shape[1]),
        "sweep_s": sweep_s,
        "loop_s": loop_s,
        "propose_s": propose_s,
    }


def run(quick: bool) -> tuple[list[Row], dict]:
    sizes = [10**3, 10**4, 10**5] if quick else [10**3, 10**4, 10**5, 10**6]
    rows, raw = [], []
    for kind in ("scalar", "9-dim"):
        for n in sizes:
            m = measure(kind, n, min_time=0.1 if quick else 0.3, repeats=3 if quick else 5)
            raw.append(m)
            label = f"{kind} (d={m['dim']}), N={n:.0e}"
            target = ">= 2e7" if kind == "scalar" else ""
            rows.append(
                Row(
                    SECTION,
                    f"{label}: whole sweep",
                    n / m["sweep_s"],
                    "records/s",
                    target,
                    f"{1e9 * m['sweep_s'] / n:.0f} ns/record",
                )
            )
            rows.append(
                Row(
                    SECTION,
                    f"{label}: numba loop alone",
                    n / m["loop_s"],
                    "records/s",
                    "",
                    f"{1e9 * m['loop_s'] / n:.1f} ns/record",
                )
            )
            rows.append(
                Row(
                    SECTION,
                    f"{label}: proposals alone",
                    n / m["propose_s"],
                    "records/s",
                    "",
                    f"{1e9 * m['propose_s'] / n:.0f} ns/record",
                )
            )
    for kind in ("scalar", "9-dim"):
        per_record = [m["sweep_s"] / m["n"] for m in raw if m["kind"] == kind]
        growth = per_record[-1] / per_record[1]  # from N = 1e4 (no call overhead) to the largest N
        rows.append(
            Row(
                SECTION,
                f"{kind}: ns/record at N={sizes[-1]:.0e} over N=1e4",
                growth,
                "x",
                "~1 (linear in N)",
                "cost per record; 1 = exactly linear",
            )
        )
    return rows, {"kernels": raw}
