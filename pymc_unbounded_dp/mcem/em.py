"""Monte Carlo EM: pure E-step and M-step functions, Louis' information and the EM loop.

* :func:`e_step` continues the record kernel chain at fixed parameters and returns the imputed
  sets (a new kernel state; nothing is written into the model);
* :func:`m_step` maximises the sets' average complete-data log-likelihood (L-BFGS-B on the
  unconstrained scale, warm-started);
* :func:`information` gives Louis' complete-data and observed information from the sets;
* :class:`EMLoop` iterates them with a growing Monte Carlo size until the stopping rule holds,
  the M-step diverges, the budget is spent or the caller's ``switch`` asks for another method, and
  gives the stage's :class:`~pymc_unbounded_dp.mcem.result.StageResult` (:meth:`EMLoop.result`).
"""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

import pymc_unbounded_dp.kernels as kernels
from pymc_unbounded_dp.mcem.information import (
    inverse_information,
    mean_variance,
    missing_information,
)
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik, Sets, average
from pymc_unbounded_dp.mcem.optimise import BOUNDARY, INFINITY
from pymc_unbounded_dp.mcem.options import Options
from pymc_unbounded_dp.mcem.result import Convergence, StageResult

#: Fewest imputed sets for a Monte Carlo error estimate.
_MIN_MC_ROWS = 4
#: Imputed sets an EM iteration needs before its fraction of missing information is trusted.
SWITCH_MIN_SETS = 20


class Diverged(Exception):
    """The M-step left the region where the complete-data log-likelihood is finite and bounded."""


# --------------------------------------------------------------------------------------------------
# E-step and M-step
# --------------------------------------------------------------------------------------------------
class EStep(NamedTuple):
    """What an E-step returns: the new kernel state, the imputed sets and the refresh rate."""

    state: kernels.RecordState
    sets: Sets
    accept_rate: float


def e_step(
    target: kernels.RecordTarget,
    state: kernels.RecordState,
    rng: np.random.Generator,
    count: int,
    thin: int,
    n_moves: int,
) -> EStep:
    """``count`` imputed data sets, one per ``thin`` kernel sweeps at the fixed ``target``."""
    records, n_values, accepted, proposed = [], [], 0, 0
    for _ in range(count):
        for _ in range(thin):
            state, info = kernels.sweep(target, state, rng, n_moves)
            accepted += info.refresh_accepted
            proposed += info.refresh_proposed
        records.append([r.copy() for r in state.active_records()])
        n_values.append(state.n)
    stacked = [np.concatenate(parts) for parts in zip(*records)]
    rate = accepted / proposed if proposed else float("nan")
    return EStep(state, Sets(stacked, np.asarray(n_values, dtype=np.int64)), rate)


def m_step(objective: CompleteDataLogLik, u0: np.ndarray, sets: Sets) -> tuple[np.ndarray, float]:
    """The maximiser of the sets' average complete-data log-likelihood, from ``u0``.

    Raises
    ------
    Diverged
        If the objective is not finite at ``u0`` or at the maximiser, or the maximiser runs off to
        the boundary of the parameter space (:data:`~pymc_unbounded_dp.mcem.optimise.BOUNDARY`,
        :data:`~pymc_unbounded_dp.mcem.optimise.INFINITY`).
    """
    value_and_grad = objective.scale("unconstrained").value_and_grad

    def negative(u):
        value, grad = average(value_and_grad, u, sets)
        if not np.isfinite(value) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros_like(u)
        return -float(value), -np.asarray(grad, dtype=float)

    start, _ = negative(u0)
    if not np.isfinite(start):
        raise Diverged(
            "the complete-data log-likelihood of the imputed data is not finite at the current "
            f"parameters {describe(objective, u0)}"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = minimize(
            negative,
            u0,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 1000, "ftol": 1e-13, "gtol": 1e-12},
        )
    u = np.asarray(result.x, dtype=float)
    natural = objective.to_natural(u)
    if not (np.isfinite(result.fun) and np.all(np.isfinite(natural))):
        raise Diverged(
            "the complete-data log-likelihood is not finite at the M-step maximiser (it is "
            f"unbounded): the optimiser reached {describe(objective, u)}"
        )
    if np.any(np.abs(u) > np.where(objective.transformed, BOUNDARY, INFINITY)):
        raise Diverged(
            "the M-step maximiser runs off to the boundary of the parameter space or to "
            "infinity (the likelihood has its supremum there: an MLE on the boundary, or an "
            f"unbounded likelihood): the optimiser reached {describe(objective, u)}"
        )
    return u, -float(result.fun)


def describe(objective: CompleteDataLogLik, u: np.ndarray) -> str:
    """The parameters at the unconstrained ``u``, by name, for messages."""
    values = objective.natural.split(objective.to_natural(u))
    return ", ".join(f"{k}={np.array2string(v, precision=4)}" for k, v in values.items())


class Information(NamedTuple):
    """Louis' identity from imputed sets: complete-data and observed information, and the
    complete-data score of each set (rows in the order the sets were imputed)."""

    complete: np.ndarray
    observed: np.ndarray
    scores: np.ndarray

    @property
    def missing_fraction(self) -> float:
        """The fraction of missing information, EM's rate (no difference of estimates)."""
        return missing_information(self.complete, self.complete - self.observed)


def information(
    objective: CompleteDataLogLik, scale: str, flat: np.ndarray, sets: Sets
) -> Information:
    """Louis (1982): ``I_obs = E[-H] - Var[s]`` over the imputed ``sets`` at ``flat``."""
    functions = objective.scale(scale)
    (hessian,) = average(functions.hessian, flat, sets)
    complete = -hessian
    scores = np.stack([average(functions.value_and_grad, flat, one)[1] for one in sets.each()])
    centred = scores - scores.mean(axis=0)
    missing = centred.T @ centred / scores.shape[0]
    return Information(complete, complete - missing, scores)


def stopping_statistics(info: Information, step: np.ndarray) -> tuple[float, float]:
    """``distance`` and ``mc_error`` of an EM iteration, in observed-data standard errors.

    ``distance``: the EM step extrapolated to the fixed point, ``I_obs^{-1} I_c delta``.
    ``mc_error``: the Monte Carlo standard error of the M-step maximiser,
    ``sqrt(diag(I_c^{-1} V I_c^{-1}))`` with ``V`` the Monte Carlo variance of the average score,
    autocorrelation of the kernel chain included (:func:`mean_variance`).
    """
    try:
        covariance = np.linalg.inv(info.observed)
        complete_inverse = np.linalg.inv(info.complete)
    except np.linalg.LinAlgError:
        return np.inf, np.inf
    variances = np.diag(covariance)
    if not np.all(variances > 0):
        return np.inf, np.inf
    se = np.sqrt(variances)
    distance = float(np.max(np.abs(covariance @ info.complete @ step) / se))
    if info.scores.shape[0] < _MIN_MC_ROWS:
        return distance, np.inf
    mc_covariance = complete_inverse @ mean_variance(info.scores) @ complete_inverse.T
    return distance, float(np.max(np.sqrt(np.maximum(np.diag(mc_covariance), 0.0)) / se))


def mc_error(info: Information, count: int) -> np.ndarray:
    """Monte Carlo standard error of an EM estimate from ``count`` imputed sets:
    ``sqrt(diag(I_c^{-1} V I_c^{-1}))`` (NaN if ``I_c`` is singular or ``count < 4``)."""
    try:
        inverse = np.linalg.inv(info.complete)
    except np.linalg.LinAlgError:
        return np.full(info.complete.shape[0], np.nan)
    if count < _MIN_MC_ROWS:
        return np.full(info.complete.shape[0], np.nan)
    return np.sqrt(np.maximum(np.diag(inverse @ mean_variance(info.scores) @ inverse.T), 0.0))


# --------------------------------------------------------------------------------------------------
# the loop
# --------------------------------------------------------------------------------------------------
class EMOutcome(NamedTuple):
    """How an EM stage ended: the estimate (unconstrained), the last Monte Carlo size, the status
    and its reason, the kernel state and the last estimated fraction of missing information."""

    unconstrained: np.ndarray
    n_samples: int
    status: Convergence | None  # None: stopped by ``switch`` (another method continues)
    reason: str
    state: kernels.RecordState
    missing_fraction: float


@dataclass
class EMLoop:
    """The EM iterations of one :func:`~pymc_unbounded_dp.mcem` call.

    Parameters
    ----------
    objective : CompleteDataLogLik
    options : Options
    rng : numpy.random.Generator
    state : kernels.RecordState
        The record kernel state to continue from.
    n_moves : int
        Birth/death moves per sweep (0 under bounded DP).
    first_iteration : int
        Number of iterations of the runs this one continues (for the history).
    """

    objective: CompleteDataLogLik
    options: Options
    rng: np.random.Generator
    state: kernels.RecordState
    n_moves: int
    first_iteration: int = 0
    rows: list[dict] = field(default_factory=list)
    last_n_values: np.ndarray | None = None

    def impute(self, u: np.ndarray, count: int) -> EStep:
        """An E-step of ``count`` sets at ``u``, continuing (and advancing) the kernel chain."""
        table = self.objective.table
        target = table.record_target(self.objective.point(u, self.state.n))
        step = e_step(target, self.state, self.rng, count, self.options.thin, self.n_moves)
        self.state = step.state
        self.last_n_values = step.sets.n_values
        return step

    def run(self, u: np.ndarray, first_samples: int, switch=None, progress=None) -> EMOutcome:
        """Iterate from ``u`` until the stopping rule holds, the M-step diverges, the budget is
        spent, or ``switch(missing_fraction, n_samples)`` returns true (after an iteration).

        With a ``switch``, a diverging M-step also hands over (status ``None``): the complete-data
        likelihood may run to a boundary where the observed-data likelihood does not.
        """
        options = self.options
        trail: deque[tuple[np.ndarray, int]] = deque(maxlen=options.patience)
        streak, rate, count = 0, float("nan"), first_samples
        for k in range(options.max_iterations):
            count = min(options.max_samples, math.ceil(first_samples * options.growth**k))
            step = self.impute(u, count)
            try:
                new_u, value = m_step(self.objective, u, step.sets)
            except Diverged as error:
                if switch is not None:  # the other method sees the observed-data likelihood
                    return EMOutcome(u, count, None, "", self.state, rate)
                reason = f"iteration {self.first_iteration + k + 1}: {error}"
                return EMOutcome(u, count, Convergence.DIVERGED, reason, self.state, rate)
            info = information(self.objective, "unconstrained", u, step.sets)
            rate = info.missing_fraction
            distance, mc_error = stopping_statistics(info, new_u - u)
            self._record(new_u, step, distance, mc_error, value, rate)
            trail.append((new_u, count))
            small = max(distance, mc_error) < options.tol
            streak = streak + 1 if small and count >= options.min_samples else 0
            u = new_u
            if progress is not None:
                progress(M=count, distance=distance, mc_error=mc_error)
            if streak >= options.patience:
                weights = np.array([c for _, c in trail], dtype=float)
                u = np.average(np.stack([x for x, _ in trail]), axis=0, weights=weights)
                reason = (
                    f"EM converged after {self.first_iteration + k + 1} iterations: distance "
                    f"and mc_error below tol={options.tol} standard errors for "
                    f"{options.patience} consecutive iterations with M >= {options.min_samples}"
                )
                return EMOutcome(u, count, Convergence.INTERIOR, reason, self.state, rate)
            if switch is not None and switch(rate, count):
                return EMOutcome(u, count, None, "", self.state, rate)
        reason = (
            f"max_iterations={options.max_iterations} reached without meeting the stopping rule "
            f"(distance and mc_error < tol={options.tol} for {options.patience} iterations with "
            f"M >= {options.min_samples}; last {self._last_statistics()}); continue with "
            "pmdp.mcem(model, init=result) or raise max_iterations"
        )
        return EMOutcome(u, count, Convergence.BUDGET, reason, self.state, rate)

    def result(self, outcome: EMOutcome) -> StageResult:
        """The stage's result: unless it diverged, Louis' observed information (standard errors)
        and the Monte Carlo error from ``outcome.n_samples`` fresh sets at the estimate."""
        objective = self.objective
        natural = objective.to_natural(outcome.unconstrained)
        size = natural.size
        covariance = np.full((size, size), np.nan)
        mc_sd = np.full(size, np.nan)
        rate = outcome.missing_fraction
        if outcome.status is not Convergence.DIVERGED:
            step = self.impute(outcome.unconstrained, outcome.n_samples)
            info = information(objective, "natural", natural, step.sets)
            covariance = inverse_information(info.observed)
            rate = info.missing_fraction
            mc_sd = mc_error(info, step.sets.n_values.size)
        return StageResult(
            unconstrained=outcome.unconstrained,
            covariance=covariance,
            mc_error=mc_sd,
            standard_error_mc_error=np.full(size, np.nan),
            converged=outcome.status,
            reason=outcome.reason,
            method="em",
            missing_information=rate,
            n_samples=outcome.n_samples,
        )

    def complete_information(self, u: np.ndarray) -> np.ndarray:
        """Louis' complete-data information ``I_c`` at ``u`` (unconstrained) from fresh imputed
        sets, after moving the kernel chain to ``u`` (``tune`` sets)."""
        self.impute(u, self.options.tune)
        step = self.impute(u, max(self.options.min_samples, SWITCH_MIN_SETS))
        return information(self.objective, "unconstrained", u, step.sets).complete

    def _last_statistics(self) -> str:
        if not self.rows:
            return "none"
        row = self.rows[-1]
        text = (
            f"distance {row['distance']:.3g}, mc_error {row['mc_error']:.3g}, M {row['n_samples']}"
        )
        if not np.isfinite(row["distance"]):
            text += " (inf: the Monte Carlo observed information is not positive definite)"
        return text

    def _record(self, u, step: EStep, distance, mc_error, value, rate) -> None:
        row = {
            "iteration": self.first_iteration + len(self.rows) + 1,
            "method": "em",
            "n_samples": step.sets.n_values.size,
            "distance": distance,
            "mc_error": mc_error,
            "complete_loglik": value,
            "missing_information": rate,
            "refresh_accept_rate": step.accept_rate,
            **self.objective.natural.split(self.objective.to_natural(u)),
        }
        if self.objective.table.sample_size is not None:
            row["n_mean"] = float(step.sets.n_values.mean())
        self.rows.append(row)
