"""Maximisation of a (simulated) log-likelihood, its Hessian, and the profile that names a
boundary supremum.

All functions work on the unconstrained scale (PyMC's transforms): a parameter with a bound is
on a log or logit scale, so "towards the boundary" is "towards +-infinity" there, capped at
:data:`~pymc_unbounded_dp.mcem.em.BOUNDARY`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.optimize import minimize

from pymc_unbounded_dp.mcem.em import BOUNDARY

#: ``flat -> (log-likelihood, gradient)`` on the unconstrained scale.
LogLik = Callable[[np.ndarray], tuple[float, np.ndarray]]

#: Profile points between the estimate and the bound (unconstrained scale).
PROFILE_POINTS = 4
#: A profile that drops by less than this (nats) towards the bound is taken as non-decreasing.
PROFILE_TOLERANCE = 1e-3
#: Transformed parameters with an unconstrained standard error above this are checked.
WEAK_IDENTIFICATION_SE = 1.0


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

    bounds = [(-BOUNDARY, BOUNDARY) if t else (None, None) for t in transformed[free]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        result = minimize(
            negative, start[free], jac=True, method="L-BFGS-B", bounds=bounds,
            options={"maxiter": 2000, "ftol": 1e-12, "gtol": 1e-7},
        )
    x = start.copy()
    x[free] = result.x
    return Maximum(x, -float(result.fun), bool(result.success), str(result.message))


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
    """``-Hessian`` at ``x`` with steps scaled to the curvature (a first pass at step 0.01, then
    a fifth of each coordinate's standard error, within ``[1e-4, 0.5]``)."""
    first = -hessian(loglik, x, np.full(x.size, 1e-2))
    diagonal = np.diag(first)
    scale = np.where(diagonal > 0, 1.0 / np.sqrt(np.abs(diagonal) + 1e-300), 0.5)
    return -hessian(loglik, x, np.clip(0.2 * scale, 1e-4, 0.5))


class Profile(NamedTuple):
    """The profile log-likelihood of one coordinate towards one bound."""

    index: int
    direction: float  # +1: towards +BOUNDARY, -1: towards -BOUNDARY
    points: np.ndarray  # the coordinate's values (unconstrained)
    values: np.ndarray  # profile log-likelihood at points
    maximisers: list[np.ndarray]

    @property
    def increasing(self) -> bool:
        """Whether the profile does not decrease towards the bound (within the tolerance)."""
        return bool(np.all(np.diff(self.values) > -PROFILE_TOLERANCE))


def profile(
    loglik: LogLik, estimate: Maximum, index: int, direction: float, transformed: np.ndarray
) -> Profile:
    """The profile of coordinate ``index`` from the estimate to the bound in ``direction``.

    The farthest point (the bound itself) is computed first: if the profile there is below the
    estimate's value, the remaining points are skipped.
    """
    start = estimate.x[index]
    points = np.linspace(start, direction * BOUNDARY, PROFILE_POINTS + 1)
    values, maximisers = [estimate.value], [estimate.x]
    far = _profile_point(loglik, estimate.x, index, points[-1], transformed)
    if far.value < estimate.value - PROFILE_TOLERANCE:
        return Profile(index, direction, points[[0, -1]], np.array([estimate.value, far.value]),
                       [estimate.x, far.x])
    current = estimate.x
    for point in points[1:-1]:
        inner = _profile_point(loglik, current, index, point, transformed)
        values.append(inner.value)
        maximisers.append(inner.x)
        current = inner.x
    values.append(far.value)
    maximisers.append(far.x)
    return Profile(index, direction, points, np.asarray(values), maximisers)


def _profile_point(loglik, start, index, value, transformed) -> Maximum:
    x = start.copy()
    x[index] = value
    return maximise(loglik, x, transformed, fixed=index)


def candidates(
    estimate: np.ndarray, start: np.ndarray, information: np.ndarray, transformed: np.ndarray
) -> list[tuple[int, float]]:
    """Coordinates to profile, with the direction: transformed parameters at the cap, or weakly
    identified (unconstrained standard error above :data:`WEAK_IDENTIFICATION_SE`, or an
    information that is not positive definite). The direction is where the estimate moved from
    ``start`` (or the sign of the estimate)."""
    try:
        variances = np.diag(np.linalg.inv(information))
    except np.linalg.LinAlgError:
        variances = np.full(estimate.size, np.inf)
    out = []
    for j in np.flatnonzero(transformed):
        weak = not np.isfinite(variances[j]) or variances[j] <= 0
        weak = weak or variances[j] > WEAK_IDENTIFICATION_SE**2
        at_cap = abs(estimate[j]) >= BOUNDARY - 1e-6
        if weak or at_cap:
            moved = estimate[j] - start[j]
            direction = np.sign(moved) if moved != 0 else (np.sign(estimate[j]) or 1.0)
            out.append((int(j), float(direction)))
    return out
