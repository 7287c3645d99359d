"""The regression study (the paper's Table 1 design): coverage and width of 95% intervals of
``beta`` and ``tau`` per ``(epsilon_s, epsilon_n)``, bounded beside unbounded DP.

Each replicate simulates ``n`` records (:func:`~pymc_unbounded_dp.examples.regression.
simulate_regression`), releases the 9 statistics and ``n``, and samples the posterior with
:func:`pymc_unbounded_dp.sample`: exact conjugate parameter draws (``sampler="gibbs"``, the fastest
exact sampler here) or NUTS, with the record refresh, the birth/death moves over ``n`` and the
default interweaving move.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import RegressionStudy
>>> study = RegressionStudy(epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=2)
>>> len(study.fits())
4
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pandas as pd

from pymc_unbounded_dp.examples import regression
from pymc_unbounded_dp.examples.study.base import Fit, PosteriorWorkload, fit_seed
from pymc_unbounded_dp.examples.study.reporting import coverage_table, mean_table

__all__ = ["RegressionStudy", "suggested_n_moves"]


def suggested_n_moves(release) -> int:
    """Birth/death moves per iteration: a tenth of the plausible range of ``n``.

    ``max(10, 0.1 * max(n_dp, 3 * scale of the n noise))``: a tenth of the sampler's default (one
    move per record) keeps the studies' iterations cheap, and the noise term lets chains travel
    when a tiny ``epsilon_n`` starts them far from the bulk of ``n``.

    >>> from pymc_unbounded_dp.examples import regression as reg
    >>> release = reg.privatize_regression(reg.simulate_regression(500, seed=1), 1.0, 0.5, seed=2)
    >>> suggested_n_moves(release)
    50
    """
    spread = 3.0 * release.n_mechanism.scale
    return int(max(10, round(0.1 * max(release.n_dp, spread))))


@dataclass(frozen=True)
class RegressionStudy(PosteriorWorkload):
    """Linear regression from 9 noisy sufficient statistics (Section 6.1), Table 1's grid.

    Parameters
    ----------
    epsilon_s, epsilon_n : tuple of float
        Budgets of the statistics and of ``n`` (one bounded fit per ``epsilon_s``).
    replicates : int
        Data sets per grid point (the paper: 100).
    draws, tune, chains : int
        Per fit; chains run one after another (the study's parallelism is across fits).
    seed : int
        Study seed; every fit's streams derive from it and the fit's coordinates.
    prob : float
        Probability of the equal-tailed intervals whose coverage is reported.
    n : int
        Records per data set.
    sampler : {"gibbs", "nuts"}
        Parameter update given the records: exact conjugate draws or NUTS.
    """

    name: ClassVar[str] = "regression"
    parameters: ClassVar[tuple[str, ...]] = ("beta", "tau")

    epsilon_s: tuple[float, ...] = (1.0, 0.1)
    epsilon_n: tuple[float, ...] = (1e-4, 0.01, 0.1, 0.5, 1.0, 10.0)
    replicates: int = 100
    n: int = 1000
    sampler: str = "gibbs"

    def __post_init__(self):
        super().__post_init__()
        if self.sampler not in ("gibbs", "nuts"):
            raise ValueError(f"sampler: choose 'gibbs' or 'nuts', got {self.sampler!r}")

    def simulate(self, replicate: int) -> regression.RegressionData:
        return regression.simulate_regression(self.n, seed=fit_seed(self.seed, 0, replicate))

    def privatize(self, data, fit: Fit) -> regression.RegressionRelease:
        return regression.privatize_regression(
            data, fit.epsilon_s, fit.epsilon_n or 1.0, seed=self.release_seed(fit)
        )

    def model(self, release, fit: Fit):
        return regression.regression_model(release, bounded=fit.bounded)

    def sample_options(self, model, release, fit: Fit) -> dict:
        options = {} if fit.bounded else {"n_moves": suggested_n_moves(release)}
        if self.sampler == "gibbs":
            options["step"] = regression.regression_gibbs_step(model)
        return options

    def truth(self, data) -> dict[str, float]:
        truth = regression.regression_truth()
        return {k: v for k, v in truth.items() if k.split("[")[0] in self.parameters}

    def tables(self, records: list[dict]) -> dict[str, pd.DataFrame]:
        per_fit = self.per_fit(records)
        labels = ["beta[0]", "beta[1]", "beta[2]", "tau"]
        return {
            f"coverage of {self.prob:.0%} intervals (binomial standard error)": coverage_table(
                per_fit, labels, "coverage"
            ),
            f"mean width of {self.prob:.0%} intervals": coverage_table(per_fit, labels, "width"),
            "posterior means (averaged over replicates)": mean_table(
                per_fit, [*labels, "n"], "mean"
            ),
            "sampling diagnostics": mean_table(
                per_fit, ["beta[1]", "tau", "n"], ("ess_bulk", "r_hat", "seconds")
            ),
        }
