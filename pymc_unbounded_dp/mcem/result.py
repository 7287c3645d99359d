"""The public result types of :func:`pymc_unbounded_dp.mcem`."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np
import xarray as xr

from pymc_unbounded_dp import kernels


class Convergence(str, Enum):
    """How a maximum-likelihood run ended.

    Compares equal to its value (``fit.converged == "boundary"``) and is true only for an interior
    optimum, so ``if fit.converged:`` means "an MLE with standard errors was found".

    * ``INTERIOR`` (``"interior"``): an interior optimum, within ``tol`` standard errors;
    * ``BOUNDARY`` (``"boundary"``): the likelihood increases towards the boundary of the parameter
      space; :attr:`MCEMResult.boundary` names the parameter and shows the profile;
    * ``BUDGET`` (``"budget"``): the budget of iterations or Monte Carlo replicates was spent
      before the stopping rule held (continue with ``init=result``);
    * ``DIVERGED`` (``"diverged"``): the (complete-data) likelihood is unbounded or not finite.
    """

    INTERIOR = "interior"
    BOUNDARY = "boundary"
    BUDGET = "budget"
    DIVERGED = "diverged"

    def __bool__(self) -> bool:
        return self is Convergence.INTERIOR

    def __repr__(self) -> str:
        return repr(self.value)

    __str__ = str.__str__


@dataclass(frozen=True)
class Boundary:
    """A supremum of the likelihood on the boundary of the parameter space.

    Attributes
    ----------
    parameter : str
        The parameter (with its index for a vector, e.g. ``"beta[1]"``) whose profile likelihood
        increases towards the boundary.
    direction : str
        ``"upper"`` or ``"lower"``: the end of the parameter's range it runs to.
    limit : float
        The value it runs to (``inf``, ``0``, ``1``, a bound of a uniform prior, ...).
    values : numpy.ndarray
        Parameter values (natural scale) along the profile, towards ``limit``.
    profile_loglik : numpy.ndarray
        The profile log-likelihood at ``values`` (the other parameters maximised), up to a
        constant that does not depend on the parameters.
    profile_mc_error : numpy.ndarray
        Monte Carlo standard error of each ``profile_loglik`` value.
    """

    parameter: str
    direction: str
    limit: float
    values: np.ndarray
    profile_loglik: np.ndarray
    profile_mc_error: np.ndarray

    def describe(self) -> str:
        """One sentence with the numbers that show the boundary."""
        pairs = ", ".join(
            f"{v:.4g}: {ll:.3f} ± {e:.3f}"
            for v, ll, e in zip(self.values, self.profile_loglik, self.profile_mc_error)
        )
        return (
            f"the likelihood increases as {self.parameter} -> {self.limit:g} ({self.direction} "
            f"boundary); profile log-likelihood (value: log L ± Monte Carlo error) {pairs}"
        )


@dataclass(frozen=True)
class MCEMState:
    """Where a run stopped: enough to continue it with ``mcem(..., init=result)``.

    Attributes
    ----------
    records : kernels.RecordState or None
        The record kernel state after the last E-step (``None`` if the run never imputed).
    unconstrained : numpy.ndarray
        The estimate as a flat vector of the parameters' unconstrained values.
    n_samples : int
        The Monte Carlo size of the last iteration: imputed sets (EM) or replicates per batch
        (simulated likelihood).
    parameter_names : tuple of str
        Value-variable names of the parameters, in the order of ``unconstrained``.
    method : str
        ``"em"`` or ``"simulated"``: the method of the last stage.
    """

    records: kernels.RecordState | None
    unconstrained: np.ndarray
    n_samples: int
    parameter_names: tuple[str, ...]
    method: str = "em"


@dataclass(frozen=True)
class MCEMResult:
    """The result of :func:`pymc_unbounded_dp.mcem`.

    Attributes
    ----------
    estimate : dict of str to numpy.ndarray
        Maximum-likelihood (or MAP) estimate of each parameter on its natural scale.
    standard_error : dict of str to numpy.ndarray
        Standard errors from the observed information, shaped like ``estimate``; NaN if the
        information is not positive definite, the estimate is on the boundary or the run diverged.
    covariance : numpy.ndarray
        Inverse observed information of the flattened natural-scale parameters, in the order of
        ``estimate`` (each parameter raveled in C order).
    mc_error : dict of str to numpy.ndarray
        Monte Carlo standard error of ``estimate`` (how far another seed's estimate would be).
    standard_error_mc_error : dict of str to numpy.ndarray
        Monte Carlo standard error of ``standard_error`` (NaN where not estimated).
    history : xarray.Dataset
        Per iteration (dim ``iteration``): each parameter's value, ``method``, ``n_samples`` and
        the stopping statistics (see :func:`~pymc_unbounded_dp.mcem`).
    converged : Convergence
        ``"interior"`` (true), ``"boundary"``, ``"budget"`` or ``"diverged"`` (false).
    reason : str
        Why the run stopped, with the numbers.
    method : str
        ``"em"`` (Monte Carlo EM) or ``"simulated"`` (simulated likelihood): the method that
        produced ``estimate``.
    missing_information : float
        Estimated fraction of missing information: the largest eigenvalue of
        ``I_c^{-1} (I_c - I_obs)``, EM's rate of convergence (near 1: EM creeps). NaN if not
        estimated.
    boundary : Boundary or None
        The boundary the likelihood runs to, if ``converged == "boundary"``.
    loglik : float
        The simulated observed-data log-likelihood at ``estimate`` (up to a constant that does not
        depend on the parameters); NaN for EM.
    state : MCEMState
        The last state, to continue the run: ``mcem(model, init=result)``.
    """

    estimate: dict[str, np.ndarray]
    standard_error: dict[str, np.ndarray]
    covariance: np.ndarray
    mc_error: dict[str, np.ndarray]
    standard_error_mc_error: dict[str, np.ndarray]
    history: xr.Dataset
    converged: Convergence
    reason: str
    method: str
    missing_information: float
    boundary: Boundary | None
    loglik: float
    state: MCEMState
