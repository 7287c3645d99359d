"""The paper's workloads end to end: linear regression and ATUS time use (Awan, Barrientos & Ju).

Each example simulates or loads the confidential data, privatizes it the way the curator does
(clamping, the released statistics and their sensitivities, seeded simulated noise) and builds the
PyMC model of the release with the public API only:

* :mod:`~pymc_unbounded_dp.examples.regression` — Section 6.1: 9 noisy sufficient statistics of a
  linear regression, ``n`` released with discrete Laplace noise;
* :mod:`~pymc_unbounded_dp.examples.atus` — Section 6.2: Dirichlet time-use shares, noisy sums of
  clamped log-shares (real data from a path or ``$PMDP_ATUS_DIR``, else a simulated stand-in);
* :mod:`~pymc_unbounded_dp.examples.two_sample` — a treatment/control comparison, each arm its
  own record table with its own noisy count and sums (several tables in one model);
* :mod:`~pymc_unbounded_dp.examples.studies` — the grids ``epsilon_s x epsilon_n x replicates``
  behind ``pmdp reproduce`` (one result file per fit, resumable);
* :mod:`~pymc_unbounded_dp.examples.summary`, :mod:`~pymc_unbounded_dp.examples.figures` —
  posterior summaries and plots that work with PyMC 5 and PyMC 6 output.
"""

from pymc_unbounded_dp.examples import atus, figures, regression, studies, summary, two_sample
from pymc_unbounded_dp.examples.atus import (
    AtusData,
    AtusRelease,
    atus_gibbs_step,
    atus_joint_model,
    atus_model,
    load_atus,
    load_atus_by_sex,
    privatize_atus,
    simulate_atus,
)
from pymc_unbounded_dp.examples.regression import (
    RegressionData,
    RegressionRelease,
    privatize_regression,
    regression_gibbs_step,
    regression_model,
    regression_statistics,
    regression_truth,
    simulate_regression,
)
from pymc_unbounded_dp.examples.summary import flat_draws, posterior_summary
from pymc_unbounded_dp.examples.two_sample import (
    TwoSampleData,
    TwoSampleRelease,
    privatize_two_sample,
    simulate_two_sample,
    two_sample_model,
)

__all__ = [
    "AtusData",
    "AtusRelease",
    "RegressionData",
    "RegressionRelease",
    "TwoSampleData",
    "TwoSampleRelease",
    "atus",
    "atus_gibbs_step",
    "atus_joint_model",
    "atus_model",
    "figures",
    "flat_draws",
    "load_atus",
    "load_atus_by_sex",
    "posterior_summary",
    "privatize_atus",
    "privatize_regression",
    "privatize_two_sample",
    "regression",
    "regression_gibbs_step",
    "regression_model",
    "regression_statistics",
    "regression_truth",
    "simulate_atus",
    "simulate_regression",
    "simulate_two_sample",
    "studies",
    "summary",
    "two_sample",
    "two_sample_model",
]
