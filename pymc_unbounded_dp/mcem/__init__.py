"""Maximum likelihood (or MAP) from privatized data: :func:`mcem`.

Modules, in the order of the data flow:

* :mod:`~pymc_unbounded_dp.mcem.objective` — the complete-data log-likelihood compiled from the
  model graph with the records as explicit inputs;
* :mod:`~pymc_unbounded_dp.mcem.options` — the validated options;
* :mod:`~pymc_unbounded_dp.mcem.start` — where a run starts (a previous result, starting values,
  the model's initial point) and the tuned record kernel chain;
* :mod:`~pymc_unbounded_dp.mcem.em` — pure E-step and M-step functions, Louis' information, the
  EM stage's loop (:class:`~pymc_unbounded_dp.mcem.em.EMLoop`);
* :mod:`~pymc_unbounded_dp.mcem.simulated` — the observed-data likelihood simulated with common
  random numbers in the records' non-centred form, and the simulated-likelihood stage's loop
  (:class:`~pymc_unbounded_dp.mcem.simulated.SimulatedLoop`);
* :mod:`~pymc_unbounded_dp.mcem.optimise` — restarted L-BFGS-B, finite-difference Hessian and
  Jacobian;
* :mod:`~pymc_unbounded_dp.mcem.boundary` — profiles towards a bound, the boundary they name;
* :mod:`~pymc_unbounded_dp.mcem.information` — autocorrelated Monte Carlo variance, fraction of
  missing information, inverse information;
* :mod:`~pymc_unbounded_dp.mcem.result` — the public result types, and the
  :class:`~pymc_unbounded_dp.mcem.result.StageResult` each stage ends with;
* :mod:`~pymc_unbounded_dp.mcem.api` — :func:`mcem`, the driver that chooses and runs the stages.
"""

from pymc_unbounded_dp.mcem.api import mcem
from pymc_unbounded_dp.mcem.result import Boundary, Convergence, MCEMResult, MCEMState

__all__ = ["Boundary", "Convergence", "MCEMResult", "MCEMState", "mcem"]
