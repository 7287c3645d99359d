"""The Gaussian family: :class:`Gaussian` on the reals and :class:`DiscreteGaussian` on the integers
(Canonne, Kamath & Steinke 2020); rho-zCDP (Bun & Steinke 2016), calibrated in L2."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import optimize

from pymc_unbounded_dp._secure import discrete_gaussian
from pymc_unbounded_dp.kernels._noise import SHAPE_SQUARE
from pymc_unbounded_dp.mechanisms.base import (
    Mechanism,
    _from_positional,
    _one_of,
    _refuse_unknown,
    _sensitivity,
)
from pymc_unbounded_dp.privacy import ZCDP, Guarantee


def discrete_gaussian_log_normalizer(sigma: float) -> float:
    r"""``log Z`` with :math:`Z = \sum_{k \in \mathbb Z} e^{-k^2/(2\sigma^2)}`, to double precision.

    Direct summation for small ``sigma``; for ``sigma >= 1`` the Poisson-summation (Jacobi theta)
    identity :math:`Z = \sigma\sqrt{2\pi}\,\sum_m e^{-2\pi^2\sigma^2 m^2}`, whose terms vanish after
    the first one or two.
    """
    if sigma < 1.0:
        k = np.arange(1, 60)
        return math.log1p(2.0 * float(np.sum(np.exp(-(k**2) / (2.0 * sigma**2)))))
    m = np.arange(1, 6)
    tail = 2.0 * float(np.sum(np.exp(-2.0 * math.pi**2 * sigma**2 * m**2)))
    return math.log(sigma * math.sqrt(2.0 * math.pi)) + math.log1p(tail)


def _discrete_gaussian_mean_abs(sigma: float) -> float:
    """``E|e|`` of the discrete Gaussian with parameter ``sigma`` (direct summation)."""
    k = np.arange(1, math.ceil(12.0 * sigma) + 2, dtype=float)
    weights = np.exp(-(k**2) / (2.0 * sigma**2))
    return float(2.0 * (k @ weights) / (1.0 + 2.0 * weights.sum()))


class _GaussianFamily(Mechanism):
    shape_code = SHAPE_SQUARE
    norm = "l2"
    scale_name = "sigma"

    def __init__(self, *args, sigma=None, rho=None, sensitivity=None, **unknown):
        owner = type(self).__name__
        _refuse_unknown(owner, unknown, ("sigma", "rho", "sensitivity"))
        sigma = _from_positional(
            owner, args, {"sigma": sigma, "rho": rho, "sensitivity": sensitivity}, ("sigma",)
        )["sigma"]
        sensitivity = self.default_sensitivity if sensitivity is None else sensitivity
        sensitivity = _sensitivity(sensitivity, owner, self.discrete)
        key, value = _one_of(owner, sigma=sigma, rho=rho)
        if key == "rho":
            if sensitivity == 0:
                raise ValueError(f"{owner}: `sensitivity` must be > 0 to calibrate from `rho`.")
            value = self.calibrate(Guarantee(rho=value), sensitivity)
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "from_budget", key == "rho")

    # -- privacy accounting -----------------------------------------------------------------------
    def privacy_map(self, sensitivity: float) -> Guarantee:
        """rho-zCDP with ``rho = sensitivity**2 / (2 sigma**2)`` (L2 sensitivity)."""
        sensitivity = _sensitivity(sensitivity, f"{type(self).__name__}.privacy_map", False)
        return Guarantee(rho=sensitivity**2 / (2.0 * self.scale**2))

    @classmethod
    def calibrate(cls, budget: Guarantee, sensitivity: float) -> float:
        """The scale ``sigma = sensitivity / sqrt(2 rho)`` of a rho-zCDP ``budget``.

        Raises
        ------
        ValueError
            If ``budget`` is not rho-zCDP with ``rho > 0``.
        """
        if not isinstance(budget, Guarantee) or budget.measure != ZCDP or budget.rho <= 0:
            raise ValueError(
                f"{cls.__name__}.calibrate: `budget` must be rho-zCDP with rho > 0 "
                f"(Guarantee(rho=...)), got {budget!r}."
            )
        return sensitivity / math.sqrt(2.0 * budget.rho)

    @property
    def sigma(self) -> float:
        """Standard deviation parameter of the noise."""
        return self.scale

    @property
    def rho(self) -> float:
        """rho-zCDP guarantee ``sensitivity**2 / (2 sigma**2)`` (L2 sensitivity)."""
        return self.privacy_map(self.sensitivity).rho

    @property
    def privacy(self) -> dict[str, float]:
        """The guarantee at the mechanism's own sensitivity (:meth:`privacy_map`), as a dict."""
        return self.privacy_map(self.sensitivity).as_dict()

    def tail_width(self, nats: float) -> float:
        """``sqrt(2 nats) * sigma + 1``: the log-density falls by ``e**2 / (2 sigma**2)``."""
        return math.sqrt(2.0 * nats) * self.scale + 1.0

    def budget_for_mean_abs(self, mean_abs: float) -> Guarantee:
        """``rho = sensitivity**2 / (2 sigma**2)`` with ``sigma`` the discrete Gaussian's whose
        ``E|e|`` is ``mean_abs`` (``E|e| ~ sigma sqrt(2/pi)`` beyond ``mean_abs = 500``)."""
        sensitivity = float(self.sensitivity) or 1.0
        if mean_abs > 500.0:
            sigma = mean_abs * math.sqrt(math.pi / 2.0)
        else:
            sigma = optimize.brentq(
                lambda s: _discrete_gaussian_mean_abs(s) - mean_abs,
                1e-3,
                2.0 * mean_abs + 2.0,
                xtol=1e-12,
                rtol=1e-12,
            )
        return Guarantee(rho=sensitivity**2 / (2.0 * sigma**2))

    def _exact_draw(self, scale: Fraction) -> int:
        return discrete_gaussian(scale)


@dataclass(frozen=True, init=False, repr=False)
class Gaussian(_GaussianFamily):
    r"""Gaussian mechanism on the reals: :math:`e \sim \mathcal N(0, \sigma^2)`.

    Calibrated in zero-concentrated DP: :math:`\rho = \Delta_2^2 / (2\sigma^2)`.

    Parameters
    ----------
    sigma : float, optional
        Noise standard deviation.
    rho : float, optional
        zCDP budget; then ``sigma = sensitivity / sqrt(2 rho)``.
    sensitivity : float, default 1.0
        L2 sensitivity of the whole statistic.

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> pmdp.Gaussian(rho=0.5).sigma
    1.0
    """

    discrete = False
    privacy_loss_law = "gaussian"

    @property
    def log_normalizer(self) -> float:
        return -math.log(self.scale * math.sqrt(2.0 * math.pi))

    def _simulate(self, rng, size):
        return rng.normal(0.0, self.scale, size)


@dataclass(frozen=True, init=False, repr=False)
class DiscreteGaussian(_GaussianFamily):
    r"""Discrete Gaussian mechanism on the integers (Canonne, Kamath & Steinke 2020).

    :math:`P(e = k) = e^{-k^2/(2\sigma^2)} / Z_\sigma`, with the normaliser computed to double
    precision; :math:`\rho = \Delta_2^2 / (2\sigma^2)`.

    Parameters
    ----------
    sigma : float, optional
        Scale parameter (close to, and slightly above, the standard deviation).
    rho : float, optional
        zCDP budget; then ``sigma = sensitivity / sqrt(2 rho)``.
    sensitivity : int, default 1
        L2 sensitivity (an integer).

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> round(pmdp.DiscreteGaussian(sigma=3.0).rho, 4)
    0.0556
    """

    discrete = True
    privacy_loss_law = "discrete gaussian"
    default_sensitivity = 1

    @property
    def log_normalizer(self) -> float:
        return -discrete_gaussian_log_normalizer(self.scale)

    def _simulate(self, rng, size):
        # CKS rejection from a discrete Laplace proposal, vectorised over the batch.
        total = int(np.prod(size)) if size is not None else 1
        sigma2 = self.scale**2
        t = math.floor(self.scale) + 1
        p = -math.expm1(-1.0 / t)
        out = np.empty(0, dtype=np.int64)
        while out.size < total:
            batch = max(2 * (total - out.size), 16)
            y = rng.geometric(p, batch) - rng.geometric(p, batch)
            keep = rng.random(batch) < np.exp(-((np.abs(y) - sigma2 / t) ** 2) / (2.0 * sigma2))
            out = np.concatenate([out, y[keep]])
        out = out[:total]
        return out.reshape(size) if size is not None else out[0]
