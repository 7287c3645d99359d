"""Profiles towards a bound, and the :class:`~pymc_unbounded_dp.mcem.Boundary` they name.

A parameter with a bound (PyMC transforms: log, logit, interval) whose estimate runs to the cap
of the unconstrained scale (:data:`~pymc_unbounded_dp.mcem.optimise.BOUNDARY`) or is weakly
identified is profiled towards the bound, the other parameters maximised (:func:`find`). A
profile that does not decrease means the supremum is on the boundary; :func:`named` reports it on
the natural scale.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik
from pymc_unbounded_dp.mcem.optimise import BOUNDARY, LogLik, Maximum, maximise
from pymc_unbounded_dp.mcem.result import Boundary, element_labels

#: Where the profile is evaluated, as fractions of the way from the start to the bound.
PROFILE_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
#: A profile that drops by less than this (nats) towards the bound is taken as non-decreasing.
PROFILE_TOLERANCE = 1e-3
#: Transformed parameters with an unconstrained standard error above this are checked.
WEAK_IDENTIFICATION_SE = 1.0


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


def find(
    loglik: LogLik,
    estimate: Maximum,
    start: np.ndarray,
    information: np.ndarray,
    transformed: np.ndarray,
) -> Profile | None:
    """The first profile of the :func:`candidates` that does not decrease towards its bound
    (``start``: where the run started), or ``None`` if the estimate is interior."""
    for index, direction in candidates(estimate.x, start, information, transformed):
        found = profile(loglik, estimate, index, direction, transformed, origin=float(start[index]))
        if found.increasing:
            return found
    return None


def named(objective: CompleteDataLogLik, found: Profile, errors) -> Boundary:
    """The boundary ``found`` runs to, on the natural scale: the parameter element that moves
    with the profiled unconstrained coordinate, its limit, and the profile (``errors``: the Monte
    Carlo standard error of each profile value)."""
    x = found.maximisers[-1]
    names = [
        label
        for name, shape in zip(objective.natural.names, objective.natural.shapes)
        for label in element_labels(name, shape)
    ]
    # the natural-scale coordinate that moves with the profiled unconstrained one
    probe = x.copy()
    probe[found.index] -= found.direction
    moved = np.abs(objective.to_natural(x) - objective.to_natural(probe))
    coordinate = int(np.argmax(moved))
    values = np.array([objective.to_natural(m)[coordinate] for m in found.maximisers])
    far = x.copy()
    far[found.index] = found.direction * 700.0
    with np.errstate(over="ignore", invalid="ignore"):
        limit = float(objective.to_natural(far)[coordinate])
    if abs(limit) > 1e300:
        limit = math.copysign(math.inf, limit)
    elif abs(limit) < 1e-300:
        limit = 0.0
    direction = "upper" if limit > values[0] else "lower"
    return Boundary(names[coordinate], direction, limit, values, found.values, np.asarray(errors))
