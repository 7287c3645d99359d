"""Maximum likelihood on the paper's regression (N = 1000, epsilon_s = 1): ``pmdp.mcem``'s default
(EM handing over to the simulated likelihood) against plain Monte Carlo EM (``method="em"``, the
paper's algorithm) on the same releases, in the same run.

Two releases at ``epsilon_n = 1``: data seed 1 with release seed 2 (docs/mcem.md's example, whose
likelihood has its supremum at ``tau -> inf``) and the first data set of the Table 2 study
(``pymc_unbounded_dp.examples.study.MLEStudy``, an interior optimum). Reported per fit: wall and CPU
seconds, how it ended, the method, the fraction of missing information, ``beta`` and ``tau`` with
standard errors and Monte Carlo errors.
"""

from __future__ import annotations

import warnings

import numpy as np
from _util import Row, timed

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import regression
from pymc_unbounded_dp.examples.study import MLEStudy, fit_seed


def _releases():
    data = regression.simulate_regression(n=1000, seed=1)
    yield "seed 1/2 (boundary)", regression.privatize_regression(data, 1.0, 1.0, seed=2)
    seed = MLEStudy().seed
    data = regression.simulate_regression(1000, seed=fit_seed(seed, 0, 0))
    release = regression.privatize_regression(data, 1.0, 1.0, seed=fit_seed(seed, 1, 0))
    yield "Table 2 data set 0", release


def run(quick: bool) -> tuple[list[Row], dict]:
    rows, raw = [], {"mle": []}
    em_iterations = 20 if quick else 60
    for label, release in _releases():
        model = regression.regression_model(release)
        for method, options in (("auto", {}), ("em", {"max_iterations": em_iterations})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit, wall, cpu = timed(
                    lambda m=method, o=options, model=model: pmdp.mcem(
                        model, method=m, random_seed=1, progressbar=False, **o
                    )
                )
            beta = np.round(np.asarray(fit.estimate["beta"], dtype=float), 3).tolist()
            tau = float(fit.estimate["tau"])
            se = np.round(np.asarray(fit.standard_error["beta"], dtype=float), 3).tolist()
            mc = np.round(np.asarray(fit.mc_error["beta"], dtype=float), 4).tolist()
            note = (
                f"{fit.converged.value} ({fit.method}); beta {beta} se {se} mc {mc}; "
                f"tau {tau:.4g}; missing information {fit.missing_information:.3f}"
            )
            rows.append(
                Row(
                    "mle",
                    f"{label}: method={method}",
                    wall,
                    "s (wall)",
                    "<= 300 s" if method == "auto" else "",
                    note,
                )
            )
            raw["mle"].append(
                {
                    "release": label,
                    "method": method,
                    "wall": wall,
                    "cpu": cpu,
                    "converged": fit.converged.value,
                    "fit_method": fit.method,
                    "beta": beta,
                    "tau": tau,
                    "se_beta": se,
                    "mc_beta": mc,
                    "missing_information": fit.missing_information,
                    "reason": fit.reason,
                }
            )
    return rows, raw
