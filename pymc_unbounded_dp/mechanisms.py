r"""Additive noise mechanisms: the privacy model of a release.

A mechanism releases ``s_dp = s + e`` where ``s`` is a statistic of the confidential data and ``e``
independent noise, one draw per coordinate. Each class states

* its **input domain** (reals or integers),
* the **sensitivity** it was calibrated for (L1 for the Laplace family, L2 for the Gaussian family),
* its **privacy guarantee**, computed from scale and sensitivity (never stored),
* its **log-density** as a NumPy function and as a PyTensor expression (for inference), and
* two ways to draw noise: :meth:`Mechanism.simulate` (seeded NumPy, for simulation studies only,
  **not** for releasing private data) and :meth:`Mechanism.release` (exact arithmetic and a
  cryptographically secure generator, for publishing).

============================  ===============================================  ===================
mechanism                     density of one noise coordinate ``e``             guarantee
============================  ===============================================  ===================
:class:`Laplace`              :math:`\frac{1}{2b} e^{-|e|/b}` on the reals        :math:`\varepsilon = \Delta_1 / b`
:class:`Gaussian`             :math:`\mathcal N(0, \sigma^2)` on the reals        :math:`\rho = \Delta_2^2 / (2\sigma^2)`
:class:`DiscreteLaplace`      :math:`\tanh(\tfrac{1}{2t}) e^{-|e|/t}` on the integers  :math:`\varepsilon = \Delta_1 / t`
:class:`DiscreteGaussian`     :math:`e^{-e^2/(2\sigma^2)} / Z_\sigma` on the integers  :math:`\rho = \Delta_2^2/(2\sigma^2)`
============================  ===============================================  ===================

(epsilon-DP, or rho-zCDP as in Bun & Steinke 2016; the discrete ones follow Canonne, Kamath &
Steinke 2020.)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt

from pymc_unbounded_dp import _secure
from pymc_unbounded_dp.kernels._noise import SHAPE_ABS, SHAPE_SQUARE

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "Gaussian", "Laplace", "Mechanism"]

#: Grid on which a continuous mechanism's :meth:`release` works, relative to the noise scale.
_RELEASE_GRID_BITS = 30


def _positive_finite(value: float, name: str, owner: str) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `{name}` must be a number, got {value!r}.") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: `{name}` must be finite and > 0, got {value}.")
    return value


def _sensitivity(value: float, owner: str, integer: bool) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `sensitivity` must be a number, got {value!r}.") from None
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{owner}: `sensitivity` must be finite and >= 0, got {value}.")
    if integer and value != int(value):
        raise ValueError(
            f"{owner}: `sensitivity` must be an integer for a mechanism on the integers, got {value}."
        )
    return value


def _one_of(owner: str, **given: float | None) -> tuple[str, float]:
    named = {k: v for k, v in given.items() if v is not None}
    if len(named) != 1:
        options = " or ".join(f"`{k}`" for k in given)
        raise ValueError(f"{owner}: give exactly one of {options} (got {sorted(named) or 'none'}).")
    ((key, value),) = named.items()
    return key, _positive_finite(value, key, owner)


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


@dataclass(frozen=True)
class Mechanism(ABC):
    """An additive, coordinate-wise independent noise mechanism.

    Subclasses define ``scale`` (Laplace ``b``/``t`` or Gaussian ``sigma``) and ``sensitivity``.
    """

    scale: float
    sensitivity: float

    discrete: ClassVar[bool]
    shape_code: ClassVar[int]
    #: The norm of the sensitivity the mechanism is calibrated to (``"l1"`` or ``"l2"``).
    norm: ClassVar[str]

    @property
    def domain(self) -> str:
        """Input domain of the statistic: ``"integers"`` or ``"reals"``."""
        return "integers" if self.discrete else "reals"

    @property
    @abstractmethod
    def privacy(self) -> dict[str, float]:
        """The guarantee as a dict, e.g. ``{"epsilon": 0.5}`` or ``{"rho": 0.1}``."""

    @property
    @abstractmethod
    def log_normalizer(self) -> float:
        """Additive constant of the log-density of one noise coordinate."""

    # -- inference ------------------------------------------------------------------------------
    def _kernel_of(self, noise):
        if self.shape_code == SHAPE_ABS:
            return -abs(noise) / self.scale
        return -(noise**2) / (2.0 * self.scale**2)

    def logpdf(self, noise) -> np.ndarray:
        """Log-density (log-pmf for discrete mechanisms) of each noise coordinate, NumPy version.

        Off-lattice values of a discrete mechanism have log-probability ``-inf``.
        """
        noise = np.asarray(noise, dtype=float)
        out = self.log_normalizer + self._kernel_of(noise)
        if self.discrete:
            out = np.where(noise == np.round(noise), out, -np.inf)
        return out

    def logp(self, noise: pt.TensorLike) -> pt.TensorVariable:
        """Log-density of each noise coordinate as a PyTensor expression (for model graphs)."""
        noise = pt.as_tensor_variable(noise)
        return self.log_normalizer + self._kernel_of(noise)

    @property
    def kernel_parameters(self) -> tuple[int, bool, float, float]:
        """``(shape_code, discrete, scale, log_normalizer)``, the form the compiled kernels use."""
        return self.shape_code, self.discrete, float(self.scale), float(self.log_normalizer)

    # -- noise ----------------------------------------------------------------------------------
    def simulate(self, size=None, random_seed=None) -> np.ndarray:
        """Seeded NumPy noise **for simulation studies only** (not for releasing private data).

        Parameters
        ----------
        size : int or tuple of int, optional
            Shape of the noise array.
        random_seed : int or numpy.random.Generator, optional
        """
        return self._simulate(np.random.default_rng(random_seed), size)

    @abstractmethod
    def _simulate(self, rng: np.random.Generator, size) -> np.ndarray: ...

    def release(self, value) -> np.ndarray:
        """Privatize ``value`` for publication with an exact, cryptographically secure sampler.

        Discrete mechanisms add exact integer noise to an integer statistic. Continuous ones snap
        the statistic to a grid of ``2**-30`` noise scales and add exact discrete noise on that grid
        (OpenDP's approach); the guarantee then holds for the snapped statistic, whose sensitivity
        exceeds the stated one by at most one grid step.
        """
        value = np.asarray(value)
        flat = value.reshape(-1)
        if self.discrete:
            integer_valued = np.issubdtype(value.dtype, np.integer) or (
                np.all(np.isfinite(flat)) and np.all(flat == np.round(flat))
            )
            if not integer_valued:
                raise ValueError(
                    f"{type(self).__name__}.release: `value` must be integer-valued "
                    "(the mechanism's domain is the integers)."
                )
            noise = [self._exact_draw(Fraction(self.scale)) for _ in flat]
            return (flat.astype(np.int64) + np.asarray(noise, dtype=np.int64)).reshape(value.shape)
        grid = Fraction(2.0 ** math.floor(math.log2(self.scale) - _RELEASE_GRID_BITS))
        out = []
        for v in flat.astype(float):
            if not math.isfinite(v):
                raise ValueError(f"{type(self).__name__}.release: `value` must be finite.")
            steps = round(Fraction(v) / grid) + self._exact_draw(Fraction(self.scale) / grid)
            out.append(float(steps * grid))
        return np.asarray(out).reshape(value.shape)

    @abstractmethod
    def _exact_draw(self, scale: Fraction) -> int: ...


class _LaplaceFamily(Mechanism):
    shape_code = SHAPE_ABS
    norm = "l1"

    def __init__(self, epsilon=None, sensitivity=1.0, *, scale=None):
        owner = type(self).__name__
        sensitivity = _sensitivity(sensitivity, owner, self.discrete)
        key, value = _one_of(owner, epsilon=epsilon, scale=scale)
        if key == "epsilon":
            if sensitivity == 0:
                raise ValueError(f"{owner}: `sensitivity` must be > 0 to calibrate from `epsilon`.")
            value = sensitivity / value
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)

    @property
    def epsilon(self) -> float:
        """Pure epsilon-DP guarantee ``sensitivity / scale`` (L1 sensitivity)."""
        return self.sensitivity / self.scale

    @property
    def privacy(self) -> dict[str, float]:
        return {"epsilon": self.epsilon}

    def _exact_draw(self, scale: Fraction) -> int:
        return _secure.discrete_laplace(scale)


class _GaussianFamily(Mechanism):
    shape_code = SHAPE_SQUARE
    norm = "l2"

    def __init__(self, sigma=None, *, rho=None, sensitivity=1.0):
        owner = type(self).__name__
        sensitivity = _sensitivity(sensitivity, owner, self.discrete)
        key, value = _one_of(owner, sigma=sigma, rho=rho)
        if key == "rho":
            if sensitivity == 0:
                raise ValueError(f"{owner}: `sensitivity` must be > 0 to calibrate from `rho`.")
            value = sensitivity / math.sqrt(2.0 * value)
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)

    @property
    def sigma(self) -> float:
        """Standard deviation parameter of the noise."""
        return self.scale

    @property
    def rho(self) -> float:
        """rho-zCDP guarantee ``sensitivity**2 / (2 sigma**2)`` (L2 sensitivity)."""
        return self.sensitivity**2 / (2.0 * self.scale**2)

    @property
    def privacy(self) -> dict[str, float]:
        return {"rho": self.rho}

    def _exact_draw(self, scale: Fraction) -> int:
        return _secure.discrete_gaussian(scale)


@dataclass(frozen=True, init=False)
class Laplace(_LaplaceFamily):
    r"""Laplace mechanism on the reals: :math:`e \sim \mathrm{Laplace}(0, b)`, :math:`b = \Delta_1/\varepsilon`.

    Parameters
    ----------
    epsilon : float, optional
        Privacy budget; the scale is ``sensitivity / epsilon``.
    sensitivity : float, default 1.0
        L1 sensitivity of the whole (possibly vector) statistic.
    scale : float, optional
        The Laplace scale ``b`` directly (instead of ``epsilon``).

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> m = pmdp.Laplace(epsilon=0.5, sensitivity=2.0)
    >>> m.scale, m.privacy
    (4.0, {'epsilon': 0.5})
    """

    discrete = False

    @property
    def log_normalizer(self) -> float:
        return -math.log(2.0 * self.scale)

    def _simulate(self, rng, size):
        return rng.laplace(0.0, self.scale, size)


@dataclass(frozen=True, init=False)
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

    @property
    def log_normalizer(self) -> float:
        return -math.log(self.scale * math.sqrt(2.0 * math.pi))

    def _simulate(self, rng, size):
        return rng.normal(0.0, self.scale, size)


@dataclass(frozen=True, init=False)
class DiscreteLaplace(_LaplaceFamily):
    r"""Discrete Laplace (two-sided geometric) mechanism on the integers.

    :math:`P(e = k) = \tanh\!\big(\tfrac{1}{2t}\big)\, e^{-|k|/t}`, :math:`t = \Delta_1/\varepsilon`.
    The statistic must be integer-valued; the release is an integer.

    Parameters
    ----------
    epsilon : float, optional
        Privacy budget; the scale is ``sensitivity / epsilon``.
    sensitivity : int, default 1
        L1 sensitivity (an integer).
    scale : float, optional
        The scale ``t`` directly.

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> pmdp.DiscreteLaplace(epsilon=0.5).scale
    2.0
    """

    discrete = True

    def __init__(self, epsilon=None, sensitivity=1, *, scale=None):
        super().__init__(epsilon, sensitivity, scale=scale)

    @property
    def log_normalizer(self) -> float:
        return math.log(math.tanh(0.5 / self.scale))

    def _simulate(self, rng, size):
        p = -math.expm1(-1.0 / self.scale)
        return rng.geometric(p, size) - rng.geometric(p, size)


@dataclass(frozen=True, init=False)
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

    def __init__(self, sigma=None, *, rho=None, sensitivity=1):
        super().__init__(sigma, rho=rho, sensitivity=sensitivity)

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
