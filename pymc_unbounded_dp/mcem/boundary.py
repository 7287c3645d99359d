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

#: Restarts of L-BFGS-B, and the improvement (nats) below which it stops restarting.
MAX_RESTARTS = 8
RESTART_IMPROVEMENT = 1e-4
#: Where the profile is evaluated, as fractions of the way from the start to the bound.
PROFILE_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
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
    standard error per coordinate (a first pass with steps of 0.1 finds them).

    The steps are wide on purpose: a simulated log-likelihood with Laplace noise is piecewise
    smooth in the parameters (each replicate's density has a kink where its statistic crosses the
    release), so its curvature is carried by the kinks, which a step much smaller than their
    spacing misses (measured: a step of 1e-4 standard errors gives 40% of the curvature, half a
    standard error within 5% of the exact one).
    """
    first = -hessian(loglik, x, np.full(x.size, 0.1))
    return -hessian(loglik, x, hessian_steps(first))


def hessian_steps(information: np.ndarray) -> np.ndarray:
    """Half a standard error per coordinate (from the diagonal), within ``[1e-3, 1]``."""
    diagonal = np.diag(information)
    scale = np.where(diagonal > 0, 1.0 / np.sqrt(np.abs(diagonal) + 1e-300), 2.0)
    return np.clip(0.5 * scale, 1e-3, 1.0)


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
    loglik: LogLik,
    estimate: Maximum,
    index: int,
    direction: float,
    transformed: np.ndarray,
    origin: float,
) -> Profile:
    """The profile of coordinate ``index`` from ``origin`` (where the run started) to the bound
    in ``direction``, at the fractions :data:`PROFILE_FRACTIONS` of the way (unconstrained scale).

    The bound itself is computed first: if the profile there is below the estimate's value, the
    other points are skipped (no boundary).
    """
    bound = direction * BOUNDARY
    points = origin + (bound - origin) * np.asarray(PROFILE_FRACTIONS)
    far = _profile_point(loglik, estimate.x, index, bound, transformed)
    if far.value < estimate.value - PROFILE_TOLERANCE:
        return Profile(
            index,
            direction,
            np.array([estimate.x[index], bound]),
            np.array([estimate.value, far.value]),
            [estimate.x, far.x],
        )
    inner = [_profile_point(loglik, estimate.x, index, p, transformed) for p in points[:-1]]
    maximisers = [*inner, far]
    return Profile(
        index, direction, points, np.array([m.value for m in maximisers]), [m.x for m in maximisers]
    )


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
