"""The paper's Table 2 protocol: maximum-likelihood estimates of the regression across data sets.

For ``n = 1000`` records, ``epsilon_s = 1`` and each ``epsilon_n`` in ``{0.01, 0.1, 1, 10, inf}``
(``inf``: ``n`` public, bounded DP), ``replicates`` data sets are simulated and released (the
statistics' noise is shared by all ``epsilon_n`` of a data set: common random numbers) and fitted
by :func:`pymc_unbounded_dp.mcem`. Per ``epsilon_n`` the report gives, over the fits with an
interior optimum, the mean and standard deviation across data sets of each estimate, and over all
fits the shares that ended ``interior``, on the ``boundary`` or with the budget spent.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import MLEStudy
>>> study = MLEStudy(replicates=1, epsilon_n=(1.0, float("inf")))
>>> [fit.key for fit in study.fits()]
['mcem_r000_es1_unbounded_en1', 'mcem_r000_es1_bounded']
>>> MLEStudy(mcem_options=(("tolerance", 0.1),))
Traceback (most recent call last):
...
ValueError: mcem_options: pymc_unbounded_dp.mcem has no option 'tolerance' ...
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from pymc_unbounded_dp.examples import regression
from pymc_unbounded_dp.examples.study.base import Fit, Workload, fit_seed, int_seed, number

__all__ = ["MLEStudy"]

PARAMETERS = ("beta[0]", "beta[1]", "beta[2]", "tau", "mu[0]", "mu[1]")
ENDINGS = ("interior", "boundary", "budget", "diverged")


@dataclass(frozen=True)
class MLEStudy(Workload):
    """MCEM fits of the regression across data sets (Table 2).

    Parameters
    ----------
    epsilon_s : float
        Budget of the statistics.
    epsilon_n : tuple of float
        Budgets of ``n``; ``inf`` is the bounded-DP column (``n`` public).
    replicates : int
        Data sets (the paper: 100 per ``epsilon_n``).
    n, seed : int
        Records per data set; study seed.
    mcem_options : tuple of (name, value) pairs
        Options of :func:`pymc_unbounded_dp.mcem`; a name it does not take is refused here.
        The defaults halve the simulated likelihood's replicates (4 x 50) and accept a Monte
        Carlo error of 0.1 standard errors: across data sets the estimates spread by about one
        standard error, so this adds 1% to their variance and halves the time per fit.
    """

    name: ClassVar[str] = "mcem"

    epsilon_s: float = 1.0
    epsilon_n: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, math.inf)
    replicates: int = 20
    n: int = 1000
    seed: int = 20240610
    mcem_options: tuple[tuple[str, object], ...] = (("replicates", 50), ("tol", 0.1))

    grid_fields: ClassVar[tuple[str, ...]] = ("replicates", "epsilon_n")

    def __post_init__(self):
        from pymc_unbounded_dp.mcem import mcem

        if isinstance(self.epsilon_s, tuple | list):  # one value, as a one-element grid
            if len(self.epsilon_s) != 1:
                raise ValueError(
                    f"epsilon_s: the mcem study has one epsilon_s, got {list(self.epsilon_s)}"
                )
            object.__setattr__(self, "epsilon_s", float(self.epsilon_s[0]))
        if not 0 < self.epsilon_s < math.inf:
            raise ValueError(f"epsilon_s: must be positive and finite, got {self.epsilon_s!r}")
        if any(not e > 0 for e in self.epsilon_n) or self.replicates < 1:
            raise ValueError(
                "epsilon_n: values must be positive ('inf': n public); replicates: "
                f"at least 1; got {list(self.epsilon_n)}, {self.replicates}"
            )

        accepted = inspect.signature(mcem).parameters
        for option, _ in self.mcem_options:
            if option not in accepted or option in ("model", "random_seed", "progressbar"):
                raise ValueError(
                    f"mcem_options: pymc_unbounded_dp.mcem has no option {option!r} (its "
                    f"options: {', '.join(p for p in accepted if p not in ('model',))})"
                )

    def fits(self) -> list[Fit]:
        return [
            Fit(
                self.name,
                "bounded" if math.isinf(e) else "unbounded",
                float(self.epsilon_s),
                None if math.isinf(e) else float(e),
                r,
            )
            for r in range(self.replicates)
            for e in self.epsilon_n
        ]

    def run(self, fit: Fit) -> dict:
        from pymc_unbounded_dp.mcem import mcem
        from pymc_unbounded_dp.mechanisms import DiscreteLaplace

        data = regression.simulate_regression(self.n, seed=fit_seed(self.seed, 0, fit.replicate))
        release = regression.privatize_regression(
            data, self.epsilon_s, fit.epsilon_n or 1.0, seed=fit_seed(self.seed, 1, fit.replicate)
        )
        if not fit.bounded:  # the count's noise depends on epsilon_n; the statistics' noise not
            count = DiscreteLaplace(epsilon=fit.epsilon_n)
            noise = count.simulate(
                random_seed=np.random.default_rng(fit_seed(self.seed, 2, fit.replicate))
            )
            release = dataclasses.replace(
                release, n_dp=int(data.n + noise), epsilon_n=fit.epsilon_n
            )
        model = regression.regression_model(release, bounded=fit.bounded)
        seed = int_seed(
            fit_seed(self.seed, 3, fit.replicate, 1e9 if fit.bounded else min(fit.epsilon_n, 1e9))
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = mcem(model, random_seed=seed, progressbar=False, **dict(self.mcem_options))
        return {
            "key": fit.key,
            "fit": dataclasses.asdict(fit),
            "settings": self.settings(),
            "n": data.n,
            "n_dp": None if fit.bounded else int(release.n_dp),
            "released": [float(v) for v in release.values],
            "estimate": _flat(result.estimate),
            "standard_error": _flat(result.standard_error),
            "mc_error": _flat(result.mc_error),
            "converged": result.converged.value,
            "boundary": None if result.boundary is None else result.boundary.parameter,
            "method": result.method,
            "missing_information": number(result.missing_information),
            "reason": result.reason,
            "seconds": time.perf_counter() - start,
        }

    def per_fit(self, records: list[dict]) -> pd.DataFrame:
        """One row per fit: ``epsilon_n`` (``inf`` when bounded), ending, time, estimates."""
        rows = []
        for record in records:
            eps_n = record["fit"]["epsilon_n"]
            row = {
                "epsilon_n": math.inf if eps_n is None else eps_n,
                "replicate": record["fit"]["replicate"],
                "converged": record["converged"],
                "boundary": record["boundary"],
                "method": record["method"],
                "seconds": record["seconds"],
            }
            row.update({p: record["estimate"].get(p) for p in PARAMETERS})
            rows.append(row)
        return pd.DataFrame(rows)

    def tables(self, records: list[dict]) -> dict[str, pd.DataFrame]:
        frame = self.per_fit(records)
        rows = []
        for eps_n, group in frame.groupby("epsilon_n", sort=True):
            interior = group[group["converged"] == "interior"]
            row = {"epsilon_n": f"{eps_n:g}", "fits": len(group)}
            for p in PARAMETERS:
                values = interior[p].astype(float)
                row[p] = f"{values.mean():.3f} ({values.std(ddof=1):.3f})"
            for ending in ENDINGS[:3]:
                row[ending] = float((group["converged"] == ending).mean())
            row["s/fit mean (max)"] = (
                f"{group['seconds'].mean():.0f} ({group['seconds'].max():.0f})"
            )
            rows.append(row)
        title = "MLE mean (sd) across data sets of interior fits; shares of endings"
        return {title: pd.DataFrame(rows)}


def _flat(values: dict) -> dict:
    out = {}
    for name, value in values.items():
        value = np.asarray(value, dtype=float)
        for index in np.ndindex(value.shape):
            label = name if not value.shape else f"{name}[{','.join(map(str, index))}]"
            out[label] = number(value[index])
    return {k: v for k, v in out.items() if k.split("[")[0] in ("beta", "tau", "mu")}
