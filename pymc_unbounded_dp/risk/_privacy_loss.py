r"""The Bayes risk of a test between a noise law and its shift: the privacy-loss distribution.

An attacker who knows every record but the target's sees ``y = c + Delta + e`` (H1) or ``y = c + e``
(H0), with ``c`` known and ``e`` the mechanisms' independent noise. Its Bayes risk under 0-1 loss
with prior ``pi = P(H1)`` is

.. math::

    r = \int \min(\pi f_1, (1 - \pi) f_0)
      = \mathrm E_0\big[g(L)\big], \qquad g(l) = \min(\pi e^l, 1 - \pi),

with :math:`L = \sum_j l_j(y_j)` the privacy loss (log-likelihood ratio) summed over the coordinates.
:math:`g` is nondecreasing, so a law whose values lie below (above) the true :math:`L` atom by atom,
with the exact H0 weights, gives a lower (upper) bound. Each law here is carried twice, as a lower
and an upper version, and the risk is bracketed by the two.

Per coordinate (``a = |Delta| / scale``):

* discrete Laplace and Tulap: :math:`l` takes the values ``(2y - d)/t``, ``y = 0..d``, with
  closed-form geometric weights (Tulap's density depends on ``rint(y)`` only);
* discrete Gaussian: one atom per integer, truncated where the remaining mass is below 1e-18
  (added to the upper bound);
* Gaussian: :math:`l \sim \mathcal N(-\mu^2/2, \mu^2)` under H0, :math:`\mu = |\Delta|/\sigma`;
  all Gaussian coordinates combine into one normal with :math:`\mu^2 = \sum_j \mu_j^2`;
* Laplace: atoms at :math:`-a` (mass 1/2) and :math:`a` (mass :math:`e^{-a}/2`) and density
  :math:`e^{-(l + a)/2}/4` on :math:`(-a, a)`;
* a user-defined log-density: cells of a ``y`` grid (Simpson weights), the loss's smallest and
  largest value on each cell's three points as its lower and upper value.

One continuous component (the combined Gaussian, else the widest Laplace coordinate) is kept exact
through its closed-form distribution function; the atoms are kept exact while they are few, and
otherwise everything else is put on one lattice of ``2**20`` points (lower values rounded down,
upper values up) and convolved by FFT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import signal, special

from pymc_unbounded_dp.mechanisms import (
    CustomMechanism,
    Mechanism,
    discrete_gaussian_log_normalizer,
)

#: Mass left out when an infinite support is truncated (it widens the bounds by at most this).
TAIL = 1e-18
#: Largest number of atoms kept exactly (products of several coordinates' atoms).
EXACT_ATOMS = 1 << 20
#: Lattice points when the atoms are too many or a second continuous coordinate is discretised.
LATTICE = 1 << 20
#: Largest support of one discrete coordinate enumerated atom by atom.
MAX_SUPPORT = 1 << 22
#: Cells of the ``y`` grid of a user-defined continuous mechanism.
CUSTOM_CELLS = 1 << 15


@dataclass(frozen=True)
class Law:
    """A discrete law of a privacy loss in two versions: values below and above the true ones.

    ``missing`` is H0 mass left out of both (its contribution to the risk lies in
    ``[0, (1 - prior) * missing]``); ``exact`` says whether the lower and upper versions are the
    same law (no rounding, no quadrature).
    """

    lo_values: np.ndarray
    lo_weights: np.ndarray
    hi_values: np.ndarray
    hi_weights: np.ndarray
    missing: float = 0.0
    exact: bool = True

    @classmethod
    def atoms(cls, values, weights, missing: float = 0.0) -> Law:
        values, weights = np.asarray(values, float), np.asarray(weights, float)
        return cls(values, weights, values, weights, missing)

    @property
    def size(self) -> int:
        return max(self.lo_values.size, self.hi_values.size)

    @property
    def span(self) -> float:
        return float(self.hi_values.max() - self.lo_values.min())


@dataclass(frozen=True)
class Bounds:
    """Lower and upper bounds of a risk and whether they are exact (equal up to rounding)."""

    lower: float
    upper: float
    exact: bool


# -- one coordinate -----------------------------------------------------------------------------
def discrete_laplace_law(d: int, t: float) -> Law:
    """The loss of a shift by ``d >= 1`` under discrete Laplace noise of scale ``t``.

    ``P0(y <= 0) = 1/(1+q)``, ``P0(y) = (1-q)/(1+q) q^y`` for ``0 < y < d``, ``P0(y >= d) =
    q^d/(1+q)`` with ``q = e^{-1/t}``, at loss ``(2y - d)/t``. Far in the tail (``q^y < 1e-18``)
    the atoms are lumped into one, and beyond ``MAX_SUPPORT`` atoms consecutive ones are lumped in
    blocks (closed-form geometric sums), each bracketed by its smallest and largest loss.
    """
    q = math.exp(-1.0 / t)
    keep = min(d, max(1, math.ceil(t * -math.log(TAIL))))  # q**keep <= TAIL
    block = max(1, math.ceil((keep + 1) / MAX_SUPPORT))
    first = np.arange(1, keep, block, dtype=float)  # blocks of 0 < y < keep
    last = np.minimum(first + block - 1, keep - 1)
    interior = np.exp(-first / t) * -np.expm1(-(last - first + 1) / t) / (1.0 + q)
    weights = np.concatenate([[1.0 / (1.0 + q)], interior, [math.exp(-keep / t) / (1.0 + q)]])
    lo = np.concatenate([[-d / t], (2.0 * first - d) / t, [(2.0 * keep - d) / t]])
    hi = np.concatenate([[-d / t], (2.0 * last - d) / t, [d / t]])
    return Law(lo, weights, hi, weights.copy(), exact=block == 1)


def discrete_gaussian_law(d: int, sigma: float) -> Law:
    """The loss ``(2 y d - d^2) / (2 sigma^2)`` at each integer ``y`` (truncated at mass 1e-18)."""
    half = math.ceil(sigma * math.sqrt(-2.0 * math.log(TAIL))) + 1
    if 2 * half + 1 > MAX_SUPPORT:
        raise NotImplementedError(
            f"the discrete Gaussian of sigma {sigma:g} needs {2 * half + 1} atoms (more than "
            f"{MAX_SUPPORT}); the noise scale is too large for exact summation."
        )
    y = np.arange(-half, half + 1, dtype=float)
    log_z = discrete_gaussian_log_normalizer(sigma)
    weights = np.exp(-(y**2) / (2.0 * sigma**2) - log_z)
    # Both tails beyond |y| = half: terms fall at least geometrically (ratio below `ratio`).
    ratio = math.exp(-(2 * half + 3) / (2.0 * sigma**2))
    tail = 2.0 * math.exp(-((half + 1) ** 2) / (2.0 * sigma**2) - log_z) / (1.0 - ratio)
    values = (2.0 * y * d - d * d) / (2.0 * sigma**2)
    return Law.atoms(values, weights, missing=tail)


def custom_law(mechanism: CustomMechanism, delta: float) -> tuple[Law, float]:
    """The loss of a shift by ``delta`` under a user-defined noise law, and ``max |loss|`` seen.

    Discrete noise: one atom per integer of a window outside which the log-density is more than
    46 nats below its peak. Continuous noise: Simpson weights on ``CUSTOM_CELLS`` cells of that
    window; each cell's loss bracketed by its smallest and largest value at the cell's ends and
    midpoint. The mass outside the window is ``1 - sum of the weights``. Numerical, not a proof.
    """
    width = mechanism.tail_width(-math.log(TAIL))
    start, stop = min(0.0, delta) - width, max(0.0, delta) + width
    if mechanism.discrete:
        y = np.arange(math.floor(start), math.ceil(stop) + 1, dtype=float)
        if y.size > MAX_SUPPORT:
            raise NotImplementedError(
                f"CustomMechanism({mechanism.name!r}): its support window has {y.size} integers "
                f"(more than {MAX_SUPPORT}); too wide for exact summation."
            )
        log0, log1 = mechanism.logpdf(y), mechanism.logpdf(y - delta)
        weights = np.exp(log0)
        loss = _loss(log1, log0)
        lo = hi = loss
    else:
        y = np.linspace(start, stop, 2 * CUSTOM_CELLS + 1)
        log0, log1 = mechanism.logpdf(y), mechanism.logpdf(y - delta)
        density = np.exp(log0)
        cell = (stop - start) / CUSTOM_CELLS
        weights = cell / 6.0 * (density[:-2:2] + 4.0 * density[1:-1:2] + density[2::2])
        loss = _loss(log1, log0)
        points = np.stack([loss[:-2:2], loss[1:-1:2], loss[2::2]])
        with np.errstate(invalid="ignore"):
            lo, hi = np.nanmin(points, axis=0), np.nanmax(points, axis=0)
    seen = np.abs(loss[np.isfinite(log0) | np.isfinite(log1)])
    odds = float(seen.max()) if seen.size else 0.0
    missing = max(0.0, 1.0 - float(weights.sum()))
    # A loss of -inf contributes 0 (dropped); +inf is (1 - prior) at most: left out of the lower
    # version, counted as missing in the upper one.
    lo_keep = np.isfinite(lo) & (weights > 0)
    hi_keep = np.isfinite(hi) & (weights > 0)
    hi_infinite = float(weights[np.isposinf(hi)].sum())
    law = Law(
        lo[lo_keep],
        weights[lo_keep],
        hi[hi_keep],
        weights[hi_keep],
        missing=missing + hi_infinite,
        exact=False,
    )
    return law, odds


def _loss(log1: np.ndarray, log0: np.ndarray) -> np.ndarray:
    """``log1 - log0`` with ``-inf`` where both are ``-inf`` (no mass under either)."""
    with np.errstate(invalid="ignore"):
        out = log1 - log0
    return np.where(np.isneginf(log1) & np.isneginf(log0), -np.inf, out)


def laplace_lattice(a: float, step: float) -> tuple[int, np.ndarray, int, np.ndarray]:
    """The loss of one Laplace coordinate (``a = |Delta|/b``) on the lattice ``step * Z``.

    Returns ``(offset_lo, weights_lo, offset_hi, weights_hi)``: the lower version rounds every
    value down to the lattice, the upper version up; the continuous part's mass on each cell
    ``[k step, (k + 1) step)`` is exact (its distribution function is
    ``(1 - e^{-(u + a)/2}) / 2``).
    """
    first, last = math.floor(-a / step), math.ceil(a / step)
    edges = np.clip(np.arange(first, last + 1) * step, -a, a)
    cdf = -0.5 * np.expm1(-(edges + a) / 2.0)
    cells = np.diff(cdf)  # cell k = [edges[k], edges[k+1]): lower value edges[k], upper edges[k+1]
    lo = np.zeros(last - first + 1)
    hi = np.zeros(last - first + 1)
    lo[:-1] += cells
    hi[1:] += cells
    top = math.exp(-a) / 2.0
    lo[0] += 0.5  # the atom at -a: floor is `first`
    hi[math.ceil(-a / step) - first] += 0.5
    lo[math.floor(a / step) - first] += top
    hi[-1] += top
    return first, lo, first, hi


# -- the exact continuous component ---------------------------------------------------------------
def expected_g(
    values: np.ndarray, prior: float, gaussian_mu: float, laplace_a: float
) -> np.ndarray:
    r"""``G(x) = E_0[g(x + C)]`` at each ``x``, with ``C`` the exact continuous component.

    ``G(x) = prior e^x P_1(C < t - x) + (1 - prior) P_0(C >= t - x)``, ``t = log((1-prior)/prior)``,
    with ``P_1`` the law of ``C`` when the target is in (``e^C dP_0``). ``C`` is the Gaussian loss
    (``gaussian_mu > 0``), else one Laplace coordinate's (``laplace_a > 0``), else 0.
    """
    x = np.asarray(values, dtype=float)
    t = math.log1p(-prior) - math.log(prior)
    s = t - x
    if gaussian_mu > 0:
        mu = gaussian_mu
        with np.errstate(over="ignore"):
            first = np.exp(math.log(prior) + x + special.log_ndtr((s - mu * mu / 2.0) / mu))
        second = (1.0 - prior) * special.ndtr(-(s + mu * mu / 2.0) / mu)
        return first + second
    if laplace_a > 0:
        a = laplace_a
        inside = (s > -a) & (s <= a)
        below = s > a  # C < s surely: P_1 = 1, P_0(C >= s) = 0
        with np.errstate(over="ignore"):
            first = np.where(
                below,
                prior * np.exp(np.minimum(x, t)),
                np.where(inside, prior / 2.0 * np.exp((x + t - a) / 2.0), 0.0),
            )
        second = (1.0 - prior) * np.where(
            s <= -a, 1.0, np.where(inside, 0.5 * np.exp(-(np.clip(s, -a, a) + a) / 2.0), 0.0)
        )
        return first + second
    return np.where(x < t, prior * np.exp(np.minimum(x, t)), 1.0 - prior)


# -- composition ---------------------------------------------------------------------------------
def _merge(values: np.ndarray, weights: np.ndarray, upper: bool) -> tuple[np.ndarray, np.ndarray]:
    """Atoms whose values agree to 1e-12 merged, at the smallest (``upper=False``) or largest."""
    order = np.argsort(values, kind="stable")
    values, weights = values[order], weights[order]
    if values.size == 0:
        return values, weights
    tolerance = 1e-12 * np.maximum(1.0, np.abs(values))
    start = np.concatenate([[True], np.diff(values) > tolerance[1:]])
    group = np.cumsum(start) - 1
    merged = np.bincount(group, weights)
    ends = np.flatnonzero(np.concatenate([start[1:], [True]]))
    return (values[ends] if upper else values[start]), merged


def _outer(a: Law, b: Law) -> Law:
    lo = _merge(
        np.add.outer(a.lo_values, b.lo_values).ravel(),
        np.multiply.outer(a.lo_weights, b.lo_weights).ravel(),
        upper=False,
    )
    hi = _merge(
        np.add.outer(a.hi_values, b.hi_values).ravel(),
        np.multiply.outer(a.hi_weights, b.hi_weights).ravel(),
        upper=True,
    )
    return Law(*lo, *hi, missing=a.missing + b.missing, exact=a.exact and b.exact)


def _on_lattice(values, weights, step: float, up: bool) -> tuple[int, np.ndarray]:
    index = np.ceil(values / step) if up else np.floor(values / step)
    index = index.astype(np.int64)
    first = int(index.min())
    return first, np.bincount(index - first, weights)


def _convolve(a: tuple[int, np.ndarray], b: tuple[int, np.ndarray]) -> tuple[int, np.ndarray]:
    out = (
        signal.fftconvolve(a[1], b[1])
        if min(a[1].size, b[1].size) > 64
        else np.convolve(a[1], b[1])
    )
    return a[0] + b[0], np.clip(out, 0.0, None)


def compose_risk(
    laws: list[Law], extra_laplace: list[float], prior: float, gaussian_mu: float, laplace_a: float
) -> Bounds:
    """Bounds on ``E_0 g(L)`` for ``L`` = the sum of the ``laws``, of further Laplace coordinates
    (``extra_laplace``, their ``a``) and of the exact continuous component."""
    missing = math.fsum(law.missing for law in laws)
    total = Law.atoms([0.0], [1.0])
    exact = not extra_laplace
    if not extra_laplace:
        for law in sorted(laws, key=lambda law: law.size):
            if total.size * law.size > 4 * EXACT_ATOMS:
                exact = False
                break
            total = _outer(total, law)
            if total.size > EXACT_ATOMS:
                exact = False
                break
    if exact:
        lo_values, lo_weights = total.lo_values, total.lo_weights
        hi_values, hi_weights = total.hi_values, total.hi_weights
        exact = total.exact
    else:
        span = sum(law.span for law in laws) + 2.0 * sum(extra_laplace)
        step = span / LATTICE
        lo, hi = (0, np.ones(1)), (0, np.ones(1))
        for law in laws:
            lo = _convolve(lo, _on_lattice(law.lo_values, law.lo_weights, step, up=False))
            hi = _convolve(hi, _on_lattice(law.hi_values, law.hi_weights, step, up=True))
        for a in extra_laplace:
            lo_first, lo_weights, hi_first, hi_weights = laplace_lattice(a, step)
            lo = _convolve(lo, (lo_first, lo_weights))
            hi = _convolve(hi, (hi_first, hi_weights))
        lo_values, lo_weights = (lo[0] + np.arange(lo[1].size)) * step, lo[1]
        hi_values, hi_weights = (hi[0] + np.arange(hi[1].size)) * step, hi[1]
    lower = math.fsum(lo_weights * expected_g(lo_values, prior, gaussian_mu, laplace_a))
    upper = math.fsum(hi_weights * expected_g(hi_values, prior, gaussian_mu, laplace_a))
    upper = min(upper + (1.0 - prior) * missing, min(prior, 1.0 - prior))
    return Bounds(min(lower, upper), upper, exact and missing <= TAIL)


def coordinate_kind(mechanism: Mechanism) -> str:
    """How the loss of one coordinate is computed: the mechanism's own ``privacy_loss_law``."""
    law = getattr(mechanism, "privacy_loss_law", None)
    if law is None:
        raise TypeError(f"no privacy-loss law for the mechanism {mechanism!r}.")
    return law


@dataclass(frozen=True)
class ShiftRisk:
    """The result of :func:`shift_risk`."""

    lower: float
    upper: float
    exact: bool
    #: ``sup |L|``: the largest factor (as a log) by which an output multiplies the prior odds.
    log_odds_bound: float


def shift_risk(shifts: list[tuple[Mechanism | None, float]], prior: float) -> ShiftRisk:
    """Bayes risk bounds of the test "noise shifted by ``Delta``" (H1) against "noise" (H0).

    ``shifts`` lists one ``(mechanism, Delta)`` per released coordinate (``None``: released
    exactly); ``prior`` is ``P(H1)``. Where ``sup |L|`` is known exactly and no output can move
    the posterior odds past the decision threshold (``sup |L| <= |log((1 - prior) / prior)|``),
    the best attacker decides by the prior alone, and the risk is exactly ``min(prior, 1 - prior)``.
    """
    mu2, laplace, laws, odds, odds_exact = 0.0, [], [], 0.0, True
    for mechanism, delta in shifts:
        if delta == 0:
            continue
        if mechanism is None:  # an exact value that differs: the attacker always knows
            return ShiftRisk(0.0, 0.0, True, math.inf)
        kind = coordinate_kind(mechanism)
        size = abs(delta)
        if kind == "gaussian":
            mu2 += (size / mechanism.scale) ** 2
            odds = math.inf
        elif kind == "laplace":
            laplace.append(size / mechanism.scale)
            odds += size / mechanism.scale
        elif kind == "discrete laplace":
            laws.append(discrete_laplace_law(round(size), mechanism.scale))
            odds += size / mechanism.scale
        elif kind == "discrete gaussian":
            laws.append(discrete_gaussian_law(round(size), mechanism.scale))
            odds = math.inf
        else:
            law, seen = custom_law(mechanism, float(delta))
            laws.append(law)
            odds += seen
            odds_exact = False  # the largest loss seen on a grid, not its supremum
    trivial = min(prior, 1.0 - prior)
    if odds_exact and odds <= abs(math.log((1.0 - prior) / prior)):
        return ShiftRisk(trivial, trivial, True, odds)
    mu = math.sqrt(mu2)
    laplace.sort()
    exact_laplace = laplace.pop() if laplace and mu == 0 else 0.0
    bounds = compose_risk(laws, laplace, prior, mu, exact_laplace)
    return ShiftRisk(bounds.lower, bounds.upper, bounds.exact, odds)
