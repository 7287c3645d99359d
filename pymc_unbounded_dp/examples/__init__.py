"""The paper's workloads end to end: linear regression and ATUS time use (Awan, Barrientos & Ju).

Each example simulates or loads the confidential data, privatizes it the way the curator does
(clamping, the released statistics and their sensitivities, seeded simulated noise) and builds the
PyMC model of the release with the public API only.
"""

from pymc_unbounded_dp.examples.regression import (
    RegressionData,
    RegressionRelease,
    privatize_regression,
    regression_model,
    regression_statistics,
    regression_truth,
    simulate_regression,
)

__all__ = [
    "RegressionData",
    "RegressionRelease",
    "privatize_regression",
    "regression_model",
    "regression_statistics",
    "regression_truth",
    "simulate_regression",
]
