"""Digests of the draws of the benchmark workloads at fixed seeds, to show that a refactoring
changes no draw: ``python tools/draws_digest.py [--draws N]``.

Runs the regression (user-written model with NUTS, and ``examples.regression`` with its conjugate
step) and ATUS (real data, unbounded, ``atus_gibbs_step``) of ``benchmarks/bench_ess.py`` with
``pmdp.sample``'s default and with ``interweave=False``, 2 chains on 1 core, and prints one SHA-256
per run over every posterior variable (``n`` included) and the sample stats the steps write.
Run it before and after a change, on each Python; equal lines mean the same draws.

On PyMC 6 a run right after PyTensor's compile cache was emptied can differ from later runs for
the same seed (docs/getting_started.md, "Reproducibility"): compare warm runs.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "reference")]  # bench_ess imports r_port

import bench_ess  # noqa: E402

import pymc_unbounded_dp as pmdp  # noqa: E402
from pymc_unbounded_dp.examples import atus as atus_example  # noqa: E402
from pymc_unbounded_dp.examples import regression as regression_example  # noqa: E402

STATS = ("interweave_accept_rate", "interweave_steps", "n_accept_rate", "lp")


def _digest(idata) -> str:
    groups = [bench_ess._group(idata, "posterior"), bench_ess._group(idata, "sample_stats")]
    h = hashlib.sha256()
    for name in sorted(groups[0].data_vars):
        h.update(name.encode() + np.ascontiguousarray(groups[0][name].values).tobytes())
    for name in STATS:
        if name in groups[1]:
            h.update(name.encode() + np.ascontiguousarray(groups[1][name].values).tobytes())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=100, help="draws (and tuning) per chain")
    args = parser.parse_args(argv)
    _, example = bench_ess.regression_release(seed=1)
    atus_release = atus_example.privatize_atus(
        atus_example.load_atus(), epsilon_s=1.0, epsilon_n=1.0, seed=3
    )
    workloads = [
        ("regression, user-written, NUTS", lambda: bench_ess.user_regression_model(example), None),
        (
            "regression, example, conjugate step",
            lambda: regression_example.regression_model(example),
            regression_example.regression_gibbs_step,
        ),
        (
            "ATUS, unbounded, atus_gibbs_step",
            lambda: atus_example.atus_model(atus_release, bounded=False),
            atus_example.atus_gibbs_step,
        ),
    ]
    for label, build, step_factory in workloads:
        for interweave in ("auto", False):
            model = build()
            with model:
                step = step_factory(model) if step_factory else None
                idata = pmdp.sample(
                    draws=args.draws,
                    tune=args.draws,
                    chains=2,
                    cores=1,
                    random_seed=7,
                    step=step,
                    interweave=interweave,
                    progressbar=False,
                    compute_convergence_checks=False,
                )
            print(f"{label:40s} interweave={interweave!s:5s} {_digest(idata)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
