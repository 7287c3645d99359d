"""Maximum likelihood (or MAP) from privatized data: :func:`mcem`.

Modules, in the order of the data flow:

* :mod:`~pymc_unbounded_dp.mcem.objective` — the complete-data log-likelihood compiled from the
  model graph with the records as explicit inputs;
* :mod:`~pymc_unbounded_dp.mcem.em` — pure E-step and M-step functions, Louis' information, the
  EM loop;
* :mod:`~pymc_unbounded_dp.mcem.simulated` — the observed-data likelihood simulated with common
  random numbers in the records' non-centred form;
* :mod:`~pymc_unbounded_dp.mcem.boundary` — maximisation, Hessian, profiles towards a boundary;
* :mod:`~pymc_unbounded_dp.mcem.diagnostics` — autocorrelation, missing information;
* :mod:`~pymc_unbounded_dp.mcem.api` — :func:`mcem`, which chooses and runs the methods;
* :mod:`~pymc_unbounded_dp.mcem.result` — the public result types.
"""

from pymc_unbounded_dp.mcem.api import mcem
from pymc_unbounded_dp.mcem.result import Boundary, Convergence, MCEMResult, MCEMState

__all__ = ["Boundary", "Convergence", "MCEMResult", "MCEMState", "mcem"]
