"""Run the speed benchmarks and print a table: ``python benchmarks/run.py [--quick]``.

Sections (``--only`` picks some, comma-separated):

* ``regression``: the §7 regression (N = 1000, unbounded DP) with ``pmdp.sample`` and with the
  NumPy reference sampler (``reference/r_port.py``, not installed), same process: seconds per 1,000
  iterations and effective samples per second for beta, tau and n;
* ``profile``: where ``pmdp.sample``'s time goes on that model (cProfile);
* ``kernels``: record updates per second of the compiled refresh, scalar and 9-dim statistic,
  N = 1e3 ... 1e6, whole sweep and numba loop alone;
* ``atus``: the ATUS model (n = 6656), seconds per iteration, bounded and unbounded;
* ``memory``: peak memory while sampling, against N and against the number of draws;
* ``ess``: effective draws per second (bulk ESS/s, IAT) of ``pmdp.sample`` with the interweaving
  move (the default) against ``interweave=False`` and the reference sampler, same release, on the
  regression (user-written model with NUTS; example model with its conjugate step), ATUS, a
  two-group model and Bernoulli/Poisson counts (``chains=2, cores=1``);
* ``mle``: ``pmdp.mcem`` on the regression (``epsilon_s = 1``, ``epsilon_n = 1``): the default
  (EM handing over to the simulated likelihood) against plain Monte Carlo EM, same releases;
* ``census``: the sums level (``augment="sums"``) against the records level, n_dp = 1e3 ... 1e8,
  Bernoulli count and Poisson sum: seconds and ms per iteration (compilation excluded), bulk ESS/s
  and peak memory, each fit in a fresh process; the Bernoulli count at 1e8 with 4 chains on 2 cores.
* ``n_moves``: birth/death moves per iteration at n = 1e4, 1e6, 1e7 (records level, unbounded
  Bernoulli count): the old default (one per record) beside the new one, ms per iteration and
  ESS/s of theta and n (``bench_n_moves.py``, also runnable alone).

Everything runs on one core: BLAS/OpenMP/numba thread pools are limited to one thread before
NumPy is imported (on a shared 2-core machine, multi-threaded OpenBLAS on 2x2 solves was 40x slower).
Results go to ``benchmarks/results.json`` and ``benchmarks/results.md`` (``--out`` to change).
"""

from __future__ import annotations

import os

for _variable in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
):
    os.environ.setdefault(_variable, "1")

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
# the benchmark helpers, and the reference sampler (reference/r_port.py, outside the package)
sys.path[:0] = [str(HERE), str(HERE.parent / "reference")]

SECTIONS = (
    "regression",
    "profile",
    "kernels",
    "atus",
    "memory",
    "ess",
    "mle",
    "census",
    "n_moves",
)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations and sizes (~3 min)")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections among {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--out",
        default=str(HERE / "results"),
        help="output path without extension (.json and .md are written)",
    )
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {unknown}; choose among {SECTIONS}")

    warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
    import logging

    logging.getLogger("pymc").setLevel(logging.ERROR)

    import bench_census
    import bench_ess
    import bench_kernels
    import bench_memory
    import bench_mle
    import bench_n_moves
    import bench_sampling
    from _util import machine, table

    runners = {
        "regression": bench_sampling.regression,
        "profile": bench_sampling.profile,
        "kernels": bench_kernels.run,
        "atus": bench_sampling.atus,
        "memory": bench_memory.run,
        "ess": bench_ess.run,
        "mle": bench_mle.run,
        "census": bench_census.run,
        "n_moves": bench_n_moves.run,
    }
    info = machine()
    print(f"# pmdp benchmarks ({'quick' if args.quick else 'full'})")
    print(
        f"{info['cpu']}, {info['cpus']} CPUs, load average {info['load_average_at_start']}; "
        f"Python {info['python']}, PyMC {info['pymc']}, PyTensor {info['pytensor']}, "
        f"numba {info['numba']}, NumPy {info['numpy']}\n",
        flush=True,
    )
    rows, raw = [], {"machine": info, "quick": args.quick, "seconds": {}}
    for section in chosen:
        start = time.perf_counter()
        section_rows, section_raw = runners[section](args.quick)
        raw["seconds"][section] = time.perf_counter() - start
        rows += section_rows
        raw.update(section_raw)
        print(table(section_rows), flush=True)
    raw["rows"] = [r.as_dict() for r in rows]

    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=float))
    header = (
        f"# Benchmark results ({'quick' if args.quick else 'full'} run)\n\n"
        f"{info['cpu']}, {info['cpus']} CPUs ({info['platform']}), load average at start "
        f"{info['load_average_at_start']}; Python {info['python']}, PyMC {info['pymc']}, "
        f"PyTensor {info['pytensor']}, numba {info['numba']}, NumPy {info['numpy']}; one thread; "
        f"commit {info['commit']}.\n"
        f"Re-run: `python benchmarks/run.py{' --quick' if args.quick else ''}`.\n\n"
    )
    out.with_suffix(".md").write_text(header + table(rows))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
