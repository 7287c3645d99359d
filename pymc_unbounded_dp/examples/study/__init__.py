"""The paper's simulation studies on Dask: workloads, a resumable store, a runner and reports.

* :mod:`~.base` -- the :class:`Workload` shape (a grid of :class:`Fit` s, each run by a pure
  function of the study and the fit), shared by
* :mod:`~.regression` (:class:`RegressionStudy`, Table 1's coverage design),
  :mod:`~.atus` (:class:`AtusStudy`) and :mod:`~.mle` (:class:`MLEStudy`, Table 2);
* :mod:`~.config` -- :func:`make_study`: a study from its name, a quick preset and options;
* :mod:`~.store` -- :class:`FitStore`: one JSON file per finished fit, written atomically;
* :mod:`~.running` -- :func:`run_study`: the fits as Dask tasks on a local cluster or a scheduler;
* :mod:`~.reporting` -- tables (pandas, Markdown) and figures from the stored records.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import make_study
>>> len(make_study("regression").fits())   # Table 1: 2 x (1 + 6) settings x 100 data sets
1400
"""

from pymc_unbounded_dp.examples.study.atus import AtusStudy
from pymc_unbounded_dp.examples.study.base import (
    Fit,
    PosteriorWorkload,
    TruncatedFit,
    Workload,
    fit_seed,
    posterior_table,
)
from pymc_unbounded_dp.examples.study.config import QUICK, STUDIES, make_study
from pymc_unbounded_dp.examples.study.mle import MLEStudy
from pymc_unbounded_dp.examples.study.regression import RegressionStudy, suggested_n_moves
from pymc_unbounded_dp.examples.study.reporting import write_report
from pymc_unbounded_dp.examples.study.running import StudyFailed, run_fit, run_study
from pymc_unbounded_dp.examples.study.store import FitStore, SettingsMismatch

__all__ = [
    "QUICK",
    "STUDIES",
    "AtusStudy",
    "Fit",
    "FitStore",
    "MLEStudy",
    "PosteriorWorkload",
    "RegressionStudy",
    "SettingsMismatch",
    "StudyFailed",
    "TruncatedFit",
    "Workload",
    "fit_seed",
    "make_study",
    "posterior_table",
    "run_fit",
    "run_study",
    "suggested_n_moves",
    "write_report",
]
