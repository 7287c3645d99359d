"""Birth/death moves per iteration at large n: the old default (one per record) beside the new
one (``kernels.default_n_moves``: 20 count-noise variances, at most one per record).

The unbounded Bernoulli count at the records level (``theta ~ Beta(2, 3)``, ``n_dp`` with
``DiscreteLaplace(epsilon=0.5)`` noise, sd 2.8: 157 moves by the new default; the sum with
``Laplace(epsilon=1)``), ``pmdp.sample`` with its defaults otherwise (the interweaving move on), one
chain on one core; the old default is passed as ``n_moves=n``. Reported: ms per iteration (PyMC's
timing of the sampling loop, no compilation) and bulk ESS per second of ``theta`` and ``n``.

Run: ``python benchmarks/run.py --only n_moves --out benchmarks/results-n-moves``.
"""

from __future__ import annotations

import gc

from _models import bernoulli_model
from _util import Row, ess, sampling_seconds

import pymc_unbounded_dp as pmdp

#: ``n -> (draws, tune)``: a few hundred draws are enough for ESS/s.
DRAWS = {10**4: (400, 200), 10**6: (200, 100), 10**7: (120, 60)}
QUICK = {10**4: (200, 100), 10**6: (60, 40)}


def fit(n: int, n_moves: int | None, draws: int, tune: int) -> dict:
    """One chain of the unbounded Bernoulli count at ``n`` records: timing and ESS."""
    model = bernoulli_model(n, unbounded=True)
    idata = pmdp.sample(
        model=model,
        augment="records",
        n_moves=n_moves,
        draws=draws,
        tune=tune,
        chains=1,
        cores=1,
        random_seed=7,
        progressbar=False,
        compute_convergence_checks=False,
    )
    seconds = sampling_seconds(idata)
    posterior = idata["posterior"]
    moves = int(idata["sample_stats"]["n_moves"].values[0, -1])
    out = {
        "n": n,
        "n_moves": moves,
        "seconds": seconds,
        "ms_per_iteration": 1e3 * seconds / (draws + tune),
        "ess_theta": ess(posterior["theta"].values),
        "ess_n": ess(posterior["n"].values),
        "draws": draws,
    }
    draw_seconds = seconds * draws / (draws + tune)
    out["ess_theta_per_s"] = out["ess_theta"] / draw_seconds
    out["ess_n_per_s"] = out["ess_n"] / draw_seconds
    del idata, model
    gc.collect()
    return out


def run(quick: bool = False, sizes=None) -> tuple[list[Row], dict]:
    plan = QUICK if quick else DRAWS
    sizes = sorted(plan) if sizes is None else sizes
    rows, raw = [], {"n_moves": []}
    for n in sizes:
        draws, tune = plan.get(n, DRAWS.get(n, (200, 100)))
        for label, n_moves in (("old default (one per record)", n), ("new default", None)):
            result = fit(n, n_moves, draws, tune)
            result["default"] = label
            raw["n_moves"].append(result)
            note = f"n = {n:.0e}, {label}: {result['n_moves']} moves, {draws} draws"
            rows += [
                Row("n_moves", "ms per iteration", result["ms_per_iteration"], "ms", note=note),
                Row("n_moves", "ESS/s theta", result["ess_theta_per_s"], "1/s", note=note),
                Row("n_moves", "ESS/s n", result["ess_n_per_s"], "1/s", note=note),
            ]
            print(
                f"n={n:.0e} {label:30s} moves={result['n_moves']:>8d} "
                f"ms/it={result['ms_per_iteration']:9.1f} ESS theta={result['ess_theta']:6.0f} "
                f"n={result['ess_n']:6.0f} ESS/s theta={result['ess_theta_per_s']:8.2f} "
                f"n={result['ess_n_per_s']:8.2f}",
                flush=True,
            )
    return rows, raw
