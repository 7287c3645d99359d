"""The Laplace family: :class:`Laplace` on the reals, :class:`DiscreteLaplace` on the integers and
:class:`Tulap` (an integer statistic, a real release); pure epsilon-DP, calibrated in L1."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytensor.tensor as pt

from pymc_unbounded_dp._secure import discrete_laplace
from pymc_unbounded_dp.kernels._noise import SHAPE_ABS, SHAPE_TULAP
from pymc_unbounded_dp.mechanisms.base import (
    Mechanism,
    _from_positional,
    _one_of,
    _refuse_unknown,
    _release_integers,
    _sensitivity,
)
from pymc_unbounded_dp.privacy import PURE, Guarantee


class _LaplaceFamily(Mechanism):
    shape_code = SHAPE_ABS
    norm = "l1"

    def __init__(self, *args, epsilon=None, sensitivity=None, scale=None, **unknown):
        owner = type(self).__name__
        _refuse_unknown(owner, unknown, ("epsilon", "scale", "sensitivity"))
        given = _from_positional(
            owner,
            args,
            {"epsilon": epsilon, "sensitivity": sensitivity, "scale": scale},
            ("epsilon", "sensitivity"),
        )
        epsilon, scale = given["epsilon"], given["scale"]
        sensitivity = (
            self.default_sensitivity if given["sensitivity"] is None else given["sensitivity"]
        )
        sensitivity = _sensitivity(sensitivity, owner, self.domain == "integers")
        key, value = _one_of(owner, epsilon=epsilon, scale=scale)
        if key == "epsilon":
            if sensitivity == 0:
                raise ValueError(f"{owner}: `sensitivity` must be > 0 to calibrate from `epsilon`.")
            value = self.calibrate(Guarantee(epsilon=value), sensitivity)
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "from_budget", key == "epsilon")

    # -- privacy accounting -----------------------------------------------------------------------
    def privacy_map(self, sensitivity: float) -> Guarantee:
        """Pure epsilon-DP with ``epsilon = sensitivity / scale`` (L1 sensitivity)."""
        sensitivity = _sensitivity(sensitivity, f"{type(self).__name__}.privacy_map", False)
        return Guarantee(epsilon=sensitivity / self.scale)

    @classmethod
    def calibrate(cls, budget: Guarantee, sensitivity: float) -> float:
        """The scale ``sensitivity / epsilon`` of a pure epsilon-DP ``budget``.

        Raises
        ------
        ValueError
            If ``budget`` is not pure epsilon-DP with ``epsilon > 0``.
        """
        if not isinstance(budget, Guarantee) or budget.measure != PURE or budget.epsilon <= 0:
            raise ValueError(
                f"{cls.__name__}.calibrate: `budget` must be pure epsilon-DP with epsilon > 0 "
                f"(Guarantee(epsilon=...)), got {budget!r}."
            )
        return sensitivity / budget.epsilon

    @property
    def epsilon(self) -> float:
        """Pure epsilon-DP guarantee ``sensitivity / scale`` (L1 sensitivity)."""
        return self.privacy_map(self.sensitivity).epsilon

    @property
    def privacy(self) -> dict[str, float]:
        """The guarantee at the mechanism's own sensitivity (:meth:`privacy_map`), as a dict."""
        return self.privacy_map(self.sensitivity).as_dict()

    def tail_width(self, nats: float) -> float:
        """``nats * scale + 1``: the log-density falls by ``|e| / scale``."""
        return nats * self.scale + 1.0

    def budget_for_mean_abs(self, mean_abs: float) -> Guarantee:
        """``epsilon = -sensitivity log q`` with ``2 q / (1 - q^2) = mean_abs``: the mean absolute
        value of the noise on the integers (discrete, or continuous read at integers)."""
        sensitivity = float(self.sensitivity) or 1.0
        q = mean_abs / (1.0 + math.sqrt(1.0 + mean_abs**2))  # root of m q^2 + 2 q - m = 0
        return Guarantee(epsilon=-sensitivity * math.log(q))

    def _exact_draw(self, scale: Fraction) -> int:
        return discrete_laplace(scale)


@dataclass(frozen=True, init=False, repr=False)
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
    >>> m
    Laplace(epsilon=0.5, sensitivity=2.0, scale=4.0)
    """

    discrete = False
    privacy_loss_law = "laplace"

    @property
    def log_normalizer(self) -> float:
        return -math.log(2.0 * self.scale)

    def _simulate(self, rng, size):
        return rng.laplace(0.0, self.scale, size)


@dataclass(frozen=True, init=False, repr=False)
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
    privacy_loss_law = "discrete laplace"
    default_sensitivity = 1

    @property
    def log_normalizer(self) -> float:
        return math.log(math.tanh(0.5 / self.scale))

    def _simulate(self, rng, size):
        p = -math.expm1(-1.0 / self.scale)
        return rng.geometric(p, size) - rng.geometric(p, size)


@dataclass(frozen=True, init=False, repr=False)
class Tulap(_LaplaceFamily):
    r"""Tulap mechanism (Awan & Slavkovic 2018): an integer statistic, a real release.

    The noise is :math:`N = G_1 - G_2 + U` with :math:`G_1, G_2` iid geometric,
    :math:`P(G = k) = (1 - b) b^k` for :math:`k \ge 0`, :math:`b = e^{-1/t}`, and
    :math:`U \sim \mathrm{Uniform}(-\tfrac12, \tfrac12)`: discrete Laplace noise smoothed by a
    uniform. Its density is a staircase,

    .. math::

        f(x) = \frac{1 - b}{1 + b}\, b^{|\mathrm{rint}(x)|}
             = \tanh\!\big(\tfrac{1}{2t}\big)\, e^{-|\mathrm{rint}(x)|/t},

    and it is :math:`\varepsilon`-DP with :math:`t = \Delta_1 / \varepsilon` for a statistic on
    the integers with L1 sensitivity :math:`\Delta_1` (an integer): shifting an integer statistic
    by :math:`k` shifts ``rint`` by :math:`k`. It is the mechanism behind the uniformly most
    powerful DP tests for binomial data ("Differentially private uniformly most powerful tests
    for binomial data", NeurIPS 2018). Only the untruncated Tulap (their ``q = 0``) is provided.

    The statistic must be integer-valued (like :class:`DiscreteLaplace`); the release is real.
    :meth:`release` draws the integer part with the exact discrete Laplace sampler and the
    uniform part from :mod:`secrets` with 53 random bits (a float: the sum is rounded once to the
    nearest double). The privacy guarantee rests on the exact integer part only: adding an
    independent uniform is post-processing, so its finite precision costs no privacy.

    Parameters
    ----------
    epsilon : float, optional
        Privacy budget; the scale is ``sensitivity / epsilon`` (``b = exp(-epsilon /
        sensitivity)``).
    sensitivity : int, default 1
        L1 sensitivity of the integer statistic (an integer).
    scale : float, optional
        The scale ``t`` directly.

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> m = pmdp.Tulap(epsilon=0.5)
    >>> m.scale, m.privacy, m.domain
    (2.0, {'epsilon': 0.5}, 'integers')
    >>> round(float(m.cdf(0.0)), 12)
    0.5
    """

    discrete = False
    privacy_loss_law = "discrete laplace"
    shape_code = SHAPE_TULAP
    default_sensitivity = 1

    @property
    def domain(self) -> str:
        """``"integers"``: the statistic is an integer (the release is real)."""
        return "integers"

    @property
    def log_normalizer(self) -> float:
        return math.log(math.tanh(0.5 / self.scale))

    def logpdf(self, noise) -> np.ndarray:
        """Log-density of each noise coordinate (NumPy), ``log_normalizer - |rint(e)| / t``."""
        noise = np.asarray(noise, dtype=float)
        return self.log_normalizer - np.abs(np.rint(noise)) / self.scale

    def logp(self, noise: pt.TensorLike) -> pt.TensorVariable:
        """Log-density of each noise coordinate as a PyTensor expression (for model graphs)."""
        noise = pt.as_tensor_variable(noise)
        return self.log_normalizer - pt.abs(pt.round(noise, mode="half_to_even")) / self.scale

    def cdf(self, noise) -> np.ndarray:
        r"""Distribution function of the noise at each coordinate (NumPy, closed form).

        For :math:`x \le 0` with :math:`m = \mathrm{rint}(x)`,
        :math:`F(x) = \frac{b^{-m}}{1 + b}\big(b + (x - m + \tfrac12)(1 - b)\big)`, and
        :math:`F(x) = 1 - F(-x)` for :math:`x > 0` (Awan & Slavkovic 2018, Definition 4.1 with
        ``q = 0``).
        """
        x = np.asarray(noise, dtype=float)
        left = -np.abs(x)
        m = np.rint(left)
        b = math.exp(-1.0 / self.scale)
        with np.errstate(over="ignore", invalid="ignore"):
            lower = np.exp(m / self.scale) / (1.0 + b) * (b + (left - m + 0.5) * (1.0 - b))
        lower = np.where(np.isneginf(left), 0.0, lower)
        return np.where(x > 0, 1.0 - lower, lower)

    def _simulate(self, rng, size):
        p = -math.expm1(-1.0 / self.scale)
        return rng.geometric(p, size) - rng.geometric(p, size) + rng.uniform(-0.5, 0.5, size)

    def release(self, value) -> np.ndarray:
        """Privatize an integer ``value``: exact discrete Laplace noise plus a secure uniform.

        Returns floats. The integer part is exact (CKS sampler, :mod:`secrets`); the uniform is
        ``(2 k + 1) / 2**54 - 1/2`` with ``k`` 53 random bits from :mod:`secrets`, and the exact
        sum is rounded once to the nearest double.

        Raises
        ------
        ValueError
            If ``value`` is not finite, not integer-valued, or outside the int64 range.
        """
        shape, ints = _release_integers(value, f"{type(self).__name__}.release")
        out = []
        for v in ints:
            z = discrete_laplace(Fraction(self.scale))
            u = Fraction(2 * secrets.randbits(53) + 1 - 2**53, 2**54)
            out.append(float(v + z + u))
        return np.asarray(out, dtype=float).reshape(shape)
