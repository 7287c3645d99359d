r"""The MAP attacker's success among more than two candidate records: sums and quadrature.

``1 - risk = integral of max_k prior_k prod_j f_j(y_j - x_kj)`` over the coordinates ``j`` in
which the candidates ``x_k`` differ. Each such coordinate is an axis: the integers of a window
(discrete noise, Tulap's integer part, or the distinct values of an exactly released coordinate)
or cells of a window (continuous noise). On a cell, the largest and smallest value of each
density (at the point of the cell nearest to and farthest from the shift, for the built-in
symmetric unimodal noises) give an upper and a lower integral; the midpoint rule the estimate.
The window leaves out less than 1e-18 of each candidate's mass per axis, added to the bounds.
"""

from __future__ import annotations

import math

import numpy as np

from pymc_unbounded_dp.mechanisms import Mechanism, discrete_gaussian_log_normalizer

from ._privacy_loss import TAIL, coordinate_kind

#: Largest number of grid points over all differing coordinates together (discrete ones).
MAX_GRID = 1 << 22
#: Largest number of cells over all differing coordinates when some are continuous.
MAX_CELLS = 1 << 20
#: Largest number of continuous coordinates integrated by the tensor-product rule.
MAX_CONTINUOUS = 3
_NATS = -math.log(TAIL) + 5.0


def _discrete_axis(mechanism: Mechanism | None, shifts: np.ndarray):
    """``(log f of shape (K, points), log cell volumes, tail)`` on the integers of a window."""
    if mechanism is None:
        points = np.unique(shifts)
        log_f = np.where(points[None, :] == shifts[:, None], 0.0, -np.inf)
        return log_f, log_f, log_f, np.zeros(points.size), 0.0
    kind = coordinate_kind(mechanism)
    if kind == "discrete laplace":
        t = mechanism.scale
        width = math.ceil(t * _NATS) + 1
        tail = 2.0 * math.exp(-(width + 1) / t) / (1.0 + math.exp(-1.0 / t))

        def log_pmf(e):
            return math.log(math.tanh(0.5 / t)) - np.abs(e) / t
    elif kind == "discrete gaussian":
        sigma = mechanism.scale
        width = math.ceil(sigma * math.sqrt(2.0 * _NATS)) + 1
        log_z = discrete_gaussian_log_normalizer(sigma)
        ratio = math.exp(-(2 * width + 3) / (2.0 * sigma**2))
        tail = 2.0 * math.exp(-((width + 1) ** 2) / (2.0 * sigma**2) - log_z) / (1.0 - ratio)

        def log_pmf(e):
            return -(e**2) / (2.0 * sigma**2) - log_z
    else:  # a user-defined mechanism on the integers
        width = math.ceil(mechanism.tail_width(_NATS))
        tail = None
        log_pmf = mechanism.logpdf
    points = np.arange(math.floor(shifts.min()) - width, math.ceil(shifts.max()) + width + 1.0)
    if points.size > MAX_GRID:
        raise NotImplementedError(
            f"attribute_risk: a discrete coordinate needs {points.size} points (more than "
            f"{MAX_GRID}); the noise scale is too large for exact summation."
        )
    log_f = np.stack([log_pmf(points - x) for x in shifts])
    if tail is None:
        tail = max(0.0, 1.0 - float(np.exp(log_f).sum(axis=1).min()))
    return log_f, log_f, log_f, np.zeros(points.size), tail


def _continuous_axis(mechanism: Mechanism, shifts: np.ndarray, cells: int):
    """``(log f at midpoints, log of the cell maxima, of the cell minima, log volumes, tail)``."""
    kind = coordinate_kind(mechanism)
    if kind == "laplace":
        scale = mechanism.scale
        width, tail = scale * _NATS, math.exp(-_NATS)

        def log_density(distance):
            return -math.log(2.0 * scale) - distance / scale
    elif kind == "gaussian":
        scale = mechanism.scale
        width = scale * math.sqrt(2.0 * _NATS)
        tail = math.erfc(math.sqrt(_NATS))

        def log_density(distance):
            return -math.log(scale * math.sqrt(2.0 * math.pi)) - distance**2 / (2.0 * scale**2)
    else:
        width = mechanism.tail_width(_NATS)
        scale = width / 20.0
        tail = None
    # Cells concentrated near each shift: x_k + scale * sinh(v) for v uniform.
    reach = math.asinh(width / scale)
    per = max(8, cells // shifts.size)
    grid = np.sinh(np.linspace(-reach, reach, per + 1)) * scale
    edges = np.unique(np.concatenate([x + grid for x in shifts]))
    left, right = edges[:-1], edges[1:]
    middle = 0.5 * (left + right)
    if kind in ("laplace", "gaussian"):
        near = np.maximum(0.0, np.maximum(left[None, :] - shifts[:, None], shifts[:, None] - right))
        far = np.maximum(np.abs(left[None, :] - shifts[:, None]), np.abs(right - shifts[:, None]))
        log_mid = log_density(np.abs(middle[None, :] - shifts[:, None]))
        log_max, log_min = log_density(near), log_density(far)
    else:
        values = np.stack(
            [np.stack([mechanism.logpdf(p - x) for p in (left, middle, right)]) for x in shifts]
        )  # (K, 3, cells)
        log_mid, log_max, log_min = values[:, 1], values.max(axis=1), values.min(axis=1)
    log_volume = np.log(right - left)
    if tail is None:
        tail = max(0.0, 1.0 - float(np.exp(log_mid + log_volume).sum(axis=1).min()))
    return log_mid, log_max, log_min, log_volume, tail


def attribute_success(mechanisms: dict, records: list[dict], weights: np.ndarray, owner: str):
    """``(risk estimate, lower, upper, exact)`` of the MAP attacker among ``records``."""
    axes = []  # (mechanism, shifts (K,), continuous?)
    for name, mechanism in mechanisms.items():
        stacked = np.stack([np.asarray(r[name], float).reshape(-1) for r in records])
        for j in range(stacked.shape[1]):
            column = stacked[:, j]
            if np.all(column == column[0]):
                continue
            continuous = mechanism is not None and (
                coordinate_kind(mechanism) in ("laplace", "gaussian")
                or (coordinate_kind(mechanism) == "custom" and not mechanism.discrete)
            )
            axes.append((mechanism, column, continuous))
    trivial = 1.0 - float(weights.max())
    if not axes:
        return trivial, trivial, trivial, True
    n_continuous = sum(c for _, _, c in axes)
    if n_continuous > MAX_CONTINUOUS:
        raise NotImplementedError(
            f"{owner}: the `candidates` differ in {n_continuous} coordinates with continuous "
            f"noise; more than {MAX_CONTINUOUS} is not integrated. Compare them two at a time "
            "(two candidates use the exact membership engine), or let them differ in fewer "
            "coordinates."
        )
    built = [None] * len(axes)
    discrete_points = 1
    for i, (mechanism, shifts, continuous) in enumerate(axes):
        if not continuous:
            built[i] = _discrete_axis(mechanism, shifts)
            discrete_points *= built[i][0].shape[1]
    if discrete_points > MAX_GRID:
        raise NotImplementedError(
            f"{owner}: the `candidates` differ in discrete coordinates whose joint support has "
            f"{discrete_points} points (more than {MAX_GRID}); compare them two at a time."
        )
    if n_continuous:
        if discrete_points * 16**n_continuous > MAX_CELLS:
            raise NotImplementedError(
                f"{owner}: the `candidates` differ in discrete coordinates with {discrete_points} "
                "points and in continuous ones: too many cells for the tensor-product rule; "
                "compare them two at a time."
            )
        cells = int((MAX_CELLS / discrete_points) ** (1.0 / n_continuous))
        for i, (mechanism, shifts, continuous) in enumerate(axes):
            if continuous:
                built[i] = _continuous_axis(mechanism, shifts, cells)
    tail = math.fsum(axis[4] for axis in built)
    shape = [axis[0].shape[1] for axis in built]

    def along(array, i):
        return array.reshape([-1 if j == i else 1 for j in range(len(built))])

    log_volume = sum(along(axis[3], i) for i, axis in enumerate(built))
    success = []
    for version in range(3):  # midpoint, maxima, minima
        best = np.full(shape, -np.inf)
        for k, weight in enumerate(weights):
            log_joint = math.log(weight) + sum(
                along(axis[version][k], i) for i, axis in enumerate(built)
            )
            np.maximum(best, log_joint, out=best)
        success.append(math.fsum(np.exp(best + log_volume).ravel()))
    middle, high, low = success
    lower = max(0.0, 1.0 - high - tail)
    upper = min(trivial, 1.0 - low)
    estimate = min(max(1.0 - middle, lower), upper)
    exact = n_continuous == 0 and all(
        m is None or coordinate_kind(m) != "custom" for m, _, _ in axes
    )
    return estimate, lower, upper, exact
