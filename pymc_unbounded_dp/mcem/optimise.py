"""Maximisation of a (simulated) log-likelihood and its derivatives by finite differences.

* :func:`maximise`: restarted L-BFGS-B, optionally with one coordinate held fixed;
* :func:`hessian`, :func:`observed_information`, :func:`hessian_steps`: the wide-step Hessian of a
  simulated log-likelihood from central differences of its gradient;
* :func:`jacobian`: central differences of a map (the unconstrained-to-natural transform).

All functions work on the unconstrained scale (PyMC's transforms): a parameter with a bound is
on a log or logit scale, so "towards the boundary" is "towards +-infinity" there, capped at
:data:`BOUNDARY`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

from pymc_unbounded_dp._warnings import warn_at_caller

#: ``flat -> (log-likelihood, gradient)`` on the unconstrained scale.
LogLik = Callable[[np.ndarray], tuple[float, np.ndarray]]

#: Largest absolute unconstrained value of a transformed parameter accepted from a maximiser (log
#: and logit scales: within exp(-30) ~ 1e-13 of a bound, or beyond exp(30) ~ 1e13): the maximiser
#: is taken to run off to the boundary of the parameter space.
BOUNDARY = 30.0
#: The same for parameters on the real line: beyond it the maximiser runs off to infinity.
INFINITY = 1e8
#: Most passes of :func:`observed_information`, and how close (a factor) two passes' steps must be.
HESSIAN_PASSES = 8
STEP_AGREEMENT = 1.5

#: Restarts of L-BFGS-B, and the improvement (nats) below which it stops restarting.
MAX_RESTARTS = 8
RESTART_IMPROVEMENT = 1e-4


class Maximum(NamedTuple):
    """A maximiser, its value and whether L-BFGS-B reported success."""

    x: np.ndarray
    value: float
    success: bool
    message: str


def maximise(loglik: LogLik, start: np.ndarray, transformed: np.ndarray, fixed=None) -> Maximum:
    """L-BFGS-B maximiser of ``loglik`` from ``start``; transformed parameters are kept within
    ``+-BOUNDARY``; ``fixed`` (an index) holds one coordinate at its value in ``start``."""
    free = np.ones(start.size, dtype=bool)
    if fixed is not None:
        free[fixed] = False

    def negative(x_free):
        x = start.copy()
        x[free] = x_free
        value, grad = loglik(x)
        if not np.isfinite(value):
            return np.inf, np.zeros(free.sum())
        return -value, -grad[free]

    if not free.any():
        return Maximum(start.copy(), float(loglik(start)[0]), True, "nothing to maximise")
    bounds = [(-BOUNDARY, BOUNDARY) if t else (None, None) for t in transformed[free]]
    x_free, value = start[free], -np.inf
    # Restarted until it stops improving: the line search of L-BFGS-B can stall on the kinks of
    # a simulated likelihood, and a restart (fresh curvature memory) moves on.
    for _ in range(MAX_RESTARTS):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = minimize(
                negative,
                x_free,
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options={"maxiter": 2000, "ftol": 1e-10, "gtol": 1e-6},
            )
        improvement = -float(result.fun) - value
        x_free, value = result.x, -float(result.fun)
        if improvement < RESTART_IMPROVEMENT:
            break
    x = start.copy()
    x[free] = x_free
    return Maximum(x, value, bool(result.success), str(result.message))


def hessian(loglik: LogLik, x: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Symmetrised central differences of the gradient of ``loglik`` at ``x``."""
    size = x.size
    out = np.empty((size, size))
    for j in range(size):
        shift = np.zeros(size)
        shift[j] = steps[j]
        out[:, j] = (loglik(x + shift)[1] - loglik(x - shift)[1]) / (2.0 * steps[j])
    return 0.5 * (out + out.T)


def observed_information(loglik: LogLik, x: np.ndarray) -> np.ndarray:
    """``-Hessian`` at ``x`` from central differences of the gradient over steps of half a
    standard error per coordinate.

    The steps are wide on purpose: a simulated log-likelihood with Laplace noise is piecewise
    smooth in the parameters (each replicate's density has a kink where its statistic crosses the
    release), so its curvature is carried by the kinks, which a step much smaller than their
    spacing misses (measured: a step of 1e-4 standard errors gives 40% of the curvature, half a
    standard error within 5% of the exact one). A first pass with steps of 0.1 finds the standard
    errors; the steps are then taken again from the last pass's standard errors until they agree
    with it within a factor of ``STEP_AGREEMENT`` (at most ``HESSIAN_PASSES`` passes), so a
    parameter whose standard error is far below 0.1 (1e-3, 1e-4) still gets steps of half its
    own: a step of many standard errors sees the Laplace tails' constant slope, not the curvature
    at the maximum (a mean with standard error 0.0016 came out at 0.0057 from two passes). Steps
    stay at most 1 (:func:`hessian_steps`), so a flat direction does not send them off; a
    standard error of 16 is still found within 10% with them (tests/test_mle.py).
    """
    information = -hessian(loglik, x, np.full(x.size, 0.1))
    wanted = hessian_steps(information)
    for _ in range(HESSIAN_PASSES - 1):
        steps = wanted
        information = -hessian(loglik, x, steps)
        wanted = hessian_steps(information)
        ratio = wanted / steps
        if np.all((ratio <= STEP_AGREEMENT) & (ratio >= 1.0 / STEP_AGREEMENT)):
            return information
    warn_at_caller(
        f"mcem: the finite-difference steps of the observed information did not settle within "
        f"{HESSIAN_PASSES} passes (last steps {steps}); its standard errors may be off.",
        UserWarning,
    )
    return information


def hessian_steps(information: np.ndarray) -> np.ndarray:
    """Half a standard error per coordinate (from the diagonal), at most 1: a flat direction (a
    supremum on the boundary, where the diagonal falls with every wider step, or is not
    positive) keeps steps of 1."""
    diagonal = np.diag(information)
    scale = np.where(diagonal > 0, 1.0 / np.sqrt(np.abs(diagonal) + 1e-300), 2.0)
    return np.minimum(0.5 * scale, 1.0)


def jacobian(function: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian of ``function`` at ``x`` (steps ``1e-6 max(1, |x_j|)``)."""
    columns = []
    for j in range(x.size):
        h = 1e-6 * max(1.0, abs(x[j]))
        shift = np.zeros_like(x)
        shift[j] = h
        columns.append((function(x + shift) - function(x - shift)) / (2 * h))
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))
