"""The paper's workloads end to end: linear regression and ATUS time use (Awan, Barrientos & Ju).

Each example simulates or loads the confidential data, privatizes it the way the curator does
(clamping, the released statistics and their sensitivities, seeded simulated noise) and builds the
PyMC model of the release with the public API only:

* :mod:`~pymc_unbounded_dp.examples.regression` — Section 6.1: 9 noisy sufficient statistics of a
  linear regression, ``n`` released with discrete Laplace noise;
* :mod:`~pymc_unbounded_dp.examples.atus` — Section 6.2: Dirichlet time-use shares, noisy sums of
  clamped log-shares (the 2019 data packaged with the library, or a folder of your own given as a
  path or ``$PMDP_ATUS_DIR``; a simulated stand-in only on request);
* :mod:`~pymc_unbounded_dp.examples.two_sample` — a treatment/control comparison, each arm its
  own record table with its own noisy count and sums (several tables in one model);
* :mod:`~pymc_unbounded_dp.examples.study` — the paper's simulation studies (regression coverage,
  ATUS, Table 2's MLEs) as Dask tasks with a resumable store, behind ``pmdp reproduce``;
* :mod:`~pymc_unbounded_dp.examples.demo` — ``pmdp demo``: one regression release fitted end to end.

The examples need the ``examples`` extra (``pip install "pymc-unbounded-dp[examples]"``: Dask,
matplotlib, the netCDF writer, tabulate); the core library does not.
"""

from pymc_unbounded_dp.examples import atus, demo, regression, study, two_sample
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
    "demo",
    "atus_model",
    "load_atus",
    "load_atus_by_sex",
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
    "study",
    "two_sample",
    "two_sample_model",
]
