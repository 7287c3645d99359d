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
:class:`Tulap`                :math:`\tanh(\tfrac{1}{2t}) e^{-|\mathrm{rint}(e)|/t}` on the reals  :math:`\varepsilon = \Delta_1 / t`
:class:`CustomMechanism`      user-defined (a PyTensor log-density)             stated by the user
============================  ===============================================  ===================

(epsilon-DP, or rho-zCDP as in Bun & Steinke 2016; the discrete ones follow Canonne, Kamath &
Steinke 2020; Tulap is Awan & Slavkovic 2018.) The Tulap mechanism takes an integer statistic and
releases a real number. ``docs/mechanisms.md`` has every formula, domain, guarantee and sampler.

The arguments are keyword-only (``Laplace(epsilon=1.0, sensitivity=2.0)``, ``Gaussian(rho=0.5)``):
a positional call still works but is deprecated (``FutureWarning``), since the first argument
used to be epsilon for the Laplace family and sigma for the Gaussian family. The repr shows the
guarantee, the sensitivity and the scale: ``Laplace(epsilon=1.0, sensitivity=1.0, scale=1.0)``.
Every mechanism, built-in or :class:`CustomMechanism`, simulates with one signature,
``simulate(size=None, *, rng=None)`` (``random_seed=`` is accepted as PyMC's name for ``rng``).

Releasing (:meth:`Mechanism.release`) refuses what the exact samplers cannot represent: non-finite
values, and for a statistic on the integers, values or results outside the int64 range
``[-2**63, 2**63 - 1]`` (a ``ValueError`` naming ``value``; never a wrapped integer).
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import secrets
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import ClassVar

import numba as nb
import numpy as np
import pytensor
import pytensor.tensor as pt

from pymc_unbounded_dp import _secure
from pymc_unbounded_dp._graph import ancestors
from pymc_unbounded_dp.kernels._noise import (
    SHAPE_ABS,
    SHAPE_CUSTOM,
    SHAPE_SQUARE,
    SHAPE_TULAP,
    ScalarLogDensity,
)

__all__ = [
    "CustomMechanism",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "Tulap",
]

#: Grid on which a continuous mechanism's :meth:`release` works, relative to the noise scale.
_RELEASE_GRID_BITS = 30
#: The range of an exact integer release (int64).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT64_RANGE = "[-2**63, 2**63 - 1]"


def _positive_finite(value: float, name: str, owner: str) -> float:
    if isinstance(value, str | bool | np.bool_):  # float() would take "1" and True
        raise TypeError(f"{owner}: `{name}` must be a number, got {value!r}.")
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `{name}` must be a number, got {value!r}.") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: `{name}` must be finite and > 0, got {value}.")
    return value


def _sensitivity(value: float, owner: str, integer: bool) -> float:
    if isinstance(value, str | bool | np.bool_):  # float() would take "1" and True
        raise TypeError(f"{owner}: `sensitivity` must be a number, got {value!r}.")
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


def _number_text(value: float) -> str:
    """A parameter for a repr: 6 significant digits, and ``1.0`` rather than ``1``."""
    text = f"{value:.6g}"
    return f"{text}.0" if text.lstrip("-").isdigit() else text


def _from_positional(owner: str, args: tuple, given: dict, names: tuple[str, ...]) -> dict:
    """Map deprecated positional arguments onto the keywords ``names`` (in order), warning with
    the call to write instead; ``given`` are the keyword values (``None``: not given)."""
    if not args:
        return given
    if len(args) > len(names):
        keywords = ", ".join(f"`{name}=`" for name in given)
        raise TypeError(
            f"{owner} takes its arguments by keyword ({keywords}); got {len(args)} positional."
        )
    for name, value in zip(names, args, strict=False):
        if given[name] is not None:
            raise TypeError(f"{owner}: `{name}` given both positionally and as `{name}=`.")
        given = {**given, name: value}
    spelled = ", ".join(f"{k}={v!r}" for k, v in given.items() if v is not None)
    warnings.warn(
        f"Positional arguments to pmdp.{owner} are deprecated; write pmdp.{owner}({spelled}).",
        FutureWarning,
        stacklevel=3,
    )
    return given


def _refuse_unknown(owner: str, unknown: dict, accepted: tuple[str, ...]) -> None:
    """A ``TypeError`` naming an argument the mechanism does not take and what to pass instead."""
    if not unknown:
        return
    name = next(iter(unknown))
    keywords = ", ".join(f"`{k}=`" for k in accepted)
    if "rho" in accepted and name in ("epsilon", "delta"):
        hint = (
            f"{owner} is calibrated in zCDP: pass `rho=` or `sigma=` (epsilon-DP implies "
            "rho = epsilon**2 / 2, Bun & Steinke 2016); for epsilon-DP noise use "
            "pmdp.Laplace(epsilon=...) or, for counts, pmdp.DiscreteLaplace(epsilon=...)."
        )
    elif "epsilon" in accepted and name in ("rho", "sigma", "delta"):
        hint = (
            f"{owner} is calibrated in pure epsilon-DP: pass `epsilon=` or `scale=`; for zCDP "
            "noise use pmdp.Gaussian(rho=...) or, for counts, pmdp.DiscreteGaussian(rho=...)."
        )
    else:
        hint = f"its arguments are {keywords}."
    raise TypeError(f"{owner} has no argument `{name}`: {hint}")


def _release_integers(value, owner: str) -> tuple[tuple[int, ...], list[int]]:
    """``(shape, exact Python ints)`` of a statistic on the integers, refused (``ValueError``
    naming ``value``) if not finite, not integer-valued or outside the int64 range."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf" and array.dtype != object:
        raise TypeError(f"{owner}: `value` must be numeric, got dtype {array.dtype}.")
    ints = []
    for v in array.reshape(-1).tolist():
        if isinstance(v, float | np.floating):
            if not math.isfinite(v):
                raise ValueError(f"{owner}: `value` must be finite, got {v}.")
            if v != math.floor(v):
                raise ValueError(
                    f"{owner}: `value` must be integer-valued (the mechanism's domain is the "
                    f"integers), got {v}."
                )
        elif not isinstance(v, int | np.integer):  # bool is an int
            raise TypeError(f"{owner}: `value` must be numeric, got {v!r}.")
        v = int(v)
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise ValueError(
                f"{owner}: `value` {v} is outside the int64 range {_INT64_RANGE} of an exact "
                "integer release."
            )
        ints.append(v)
    return array.shape, ints


def _release_reals(value, owner: str) -> np.ndarray:
    """``value`` as floats, refused (naming ``value``) if not numeric or not finite."""
    array = np.asarray(value)
    numeric = array.dtype.kind in "biuf" or (
        array.dtype == object and all(isinstance(v, numbers.Real) for v in array.flat)
    )
    if not numeric:
        raise TypeError(f"{owner}: `value` must be numeric, got {value!r}.")
    array = array.astype(float)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{owner}: `value` must be finite, got {array}.")
    return array


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
    #: Whether the scale was calibrated from a privacy budget (``epsilon``/``rho``) rather than
    #: given (``scale``/``sigma``): the sensitivity check of ``PrivatizedSum`` reads it.
    from_budget: bool = field(default=False, compare=False, repr=False)

    discrete: ClassVar[bool]
    shape_code: ClassVar[int]
    #: The norm of the sensitivity the mechanism is calibrated to (``"l1"`` or ``"l2"``).
    norm: ClassVar[str]

    #: The name of ``scale`` in the mechanism's arguments and repr (``"sigma"`` for Gaussians).
    scale_name: ClassVar[str] = "scale"
    #: The sensitivity when none is given (an integer for mechanisms on the integers).
    default_sensitivity: ClassVar[float] = 1.0

    def __repr__(self) -> str:
        """``Laplace(epsilon=1.0, sensitivity=1.0, scale=1.0)``: guarantee, sensitivity, scale."""
        parts = [f"{k}={_number_text(v)}" for k, v in self.privacy.items()]
        parts.append(f"sensitivity={_number_text(self.sensitivity)}")
        parts.append(f"{self.scale_name}={_number_text(self.scale)}")
        return f"{type(self).__name__}({', '.join(parts)})"

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

    @property
    def scalar_log_density(self) -> ScalarLogDensity | None:
        """The log-density the kernels call as a function (user-defined mechanisms only)."""
        return None

    def tail_width(self, nats: float) -> float:
        """A half-width beyond which the log-density is more than ``nats`` below its maximum.

        Used to bound sums over the values of ``n`` (e.g. the simulated likelihood's window).
        """
        if self.shape_code == SHAPE_SQUARE:
            return math.sqrt(2.0 * nats) * self.scale + 1.0
        return nats * self.scale + 1.0

    # -- noise ----------------------------------------------------------------------------------
    def simulate(self, size=None, *args, rng=None, random_seed=None) -> np.ndarray:
        """Seeded NumPy noise **for simulation studies only** (not for releasing private data).

        The same signature as the ``simulate`` function a :class:`CustomMechanism` is given, so
        either can stand for the other. Publishing uses :meth:`release` (exact samplers).

        Parameters
        ----------
        size : int or tuple of int, optional
            Shape of the noise array (``None``: one draw).
        rng : int, numpy.random.Generator or None, optional
            The generator, or a seed for one (anything ``numpy.random.default_rng`` takes).
        random_seed : int, numpy.random.Generator or None, optional
            PyMC's name for ``rng``; give at most one of the two.

        Examples
        --------
        >>> import pymc_unbounded_dp as pmdp
        >>> pmdp.Laplace(epsilon=1.0).simulate(size=3, rng=1).shape
        (3,)
        """
        owner = f"{type(self).__name__}.simulate"
        if args:
            if len(args) > 1 or rng is not None or random_seed is not None:
                raise TypeError(
                    f"{owner} takes `size` and then keywords only: simulate(size, rng=...)."
                )
            warnings.warn(
                f"A positional seed to {owner} is deprecated; write simulate({size!r}, "
                f"rng={args[0]!r}) (`rng=` takes a seed or a numpy Generator).",
                FutureWarning,
                stacklevel=2,
            )
            rng = args[0]
        if rng is not None and random_seed is not None:
            raise TypeError(f"{owner}: give `rng` or `random_seed` (the same thing), not both.")
        return self._simulate(np.random.default_rng(rng if rng is not None else random_seed), size)

    @abstractmethod
    def _simulate(self, rng: np.random.Generator, size) -> np.ndarray: ...

    def release(self, value) -> np.ndarray:
        """Privatize ``value`` for publication with an exact, cryptographically secure sampler.

        Discrete mechanisms add exact integer noise to an integer statistic and return int64.
        Continuous ones snap the statistic to a grid of ``2**-30`` noise scales and add exact
        discrete noise on that grid (OpenDP's approach); the guarantee then holds for the snapped
        statistic, whose sensitivity exceeds the stated one by at most one grid step.

        Raises
        ------
        ValueError
            If ``value`` is not finite; for discrete mechanisms also if it is not integer-valued or
            it, or the noisy result, lies outside the int64 range ``[-2**63, 2**63 - 1]`` (the
            release is refused, never wrapped around; refusing a result is a function of the
            released value only, so it reveals nothing more than the release would).
        """
        owner = f"{type(self).__name__}.release"
        if self.discrete:
            shape, ints = _release_integers(value, owner)
            out = [v + self._exact_draw(Fraction(self.scale)) for v in ints]
            outside = [r for r in out if not _INT64_MIN <= r <= _INT64_MAX]
            if outside:
                raise ValueError(
                    f"{owner}: `value` plus its noise is {outside[0]}, outside the int64 range "
                    f"{_INT64_RANGE} of an exact integer release; the statistic is too close to "
                    "the limit of int64."
                )
            return np.asarray(out, dtype=np.int64).reshape(shape)
        values = _release_reals(value, owner)
        grid = Fraction(2.0 ** math.floor(math.log2(self.scale) - _RELEASE_GRID_BITS))
        out = []
        for v in values.reshape(-1).tolist():
            steps = round(Fraction(v) / grid) + self._exact_draw(Fraction(self.scale) / grid)
            out.append(float(steps * grid))
        return np.asarray(out).reshape(values.shape)

    @abstractmethod
    def _exact_draw(self, scale: Fraction) -> int: ...


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
            value = sensitivity / value
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "from_budget", key in ("epsilon", "rho"))

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
            value = sensitivity / math.sqrt(2.0 * value)
        object.__setattr__(self, "scale", value)
        object.__setattr__(self, "sensitivity", sensitivity)
        object.__setattr__(self, "from_budget", key in ("epsilon", "rho"))

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

    @property
    def log_normalizer(self) -> float:
        return -math.log(2.0 * self.scale)

    def _simulate(self, rng, size):
        return rng.laplace(0.0, self.scale, size)


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

    @property
    def log_normalizer(self) -> float:
        return -math.log(self.scale * math.sqrt(2.0 * math.pi))

    def _simulate(self, rng, size):
        return rng.normal(0.0, self.scale, size)


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
    default_sensitivity = 1

    @property
    def log_normalizer(self) -> float:
        return math.log(math.tanh(0.5 / self.scale))

    def _simulate(self, rng, size):
        p = -math.expm1(-1.0 / self.scale)
        return rng.geometric(p, size) - rng.geometric(p, size)


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
            z = _secure.discrete_laplace(Fraction(self.scale))
            u = Fraction(2 * secrets.randbits(53) + 1 - 2**53, 2**54)
            out.append(float(v + z + u))
        return np.asarray(out, dtype=float).reshape(shape)


#: Keys a user-defined mechanism's stated guarantee may have.
_PRIVACY_KEYS = ("epsilon", "delta", "rho")
#: Noise values at which a given numba log-density is checked against the PyTensor one.
_CHECK_POINTS = np.array([0.0, 0.25, -0.5, 1.0, -1.0, 2.5, -3.0, 10.0, -30.0, 1e3])


@dataclass(frozen=True, init=False, eq=False, repr=False)
class CustomMechanism(Mechanism):
    r"""A user-defined additive noise mechanism: a log-density and a simulator of the noise.

    The release is ``s_dp = s + e`` with ``e`` drawn coordinate-wise from the user's noise law.
    The log-density ``logp`` is written with PyTensor operations applied elementwise, so one
    function serves the model graph (NUTS, the interweaving move, MCEM) and, compiled once, the
    NumPy :meth:`logpdf`. The record kernels call it per coordinate:

    * with ``numba_logp`` (an ``nb.njit`` function of one float, the same density): at compiled
      speed (19 ns per record in the refresh loop, against 11 ns for the built-in Laplace;
      ``pmdp.sample`` on a Bernoulli model of 1000 records ran at the built-in speed);
    * without it: through a callback into Python, exact but slower (about 6 us per record and
      coordinate; the same model sampled 3.5-4.5x slower). ``docs/mechanisms.md`` has the
      measurements.

    ``numba_logp`` is checked against ``logp`` at a few noise values when the mechanism is built.

    Parameters
    ----------
    logp : callable
        ``logp(noise) -> log-density`` of a PyTensor tensor of noise values, elementwise, with
        the normalising constant, depending on nothing but ``noise`` (``-inf`` outside the
        support). For ``discrete=True`` it is the log-pmf on the integers.
    simulate : callable
        ``simulate(size, rng) -> noise``, called by keyword as ``simulate(size=size, rng=rng)``
        (the signature of :meth:`Mechanism.simulate`; a parameter named ``random_seed`` instead of
        ``rng`` works too): seeded draws of the noise (``rng`` a ``numpy.random.Generator``,
        ``size`` an int, a tuple or ``None`` for one draw), for simulation studies and predictive
        checks only. A function whose parameters have other names is called the old way,
        ``simulate(rng, size)``, with a ``FutureWarning`` (deprecated).
    privacy : mapping
        The guarantee the mechanism gives, e.g. ``{"epsilon": 1.0}`` (keys ``epsilon``,
        ``delta``, ``rho``; values finite and >= 0). Stated by the user, not computed.
    domain : {"reals", "integers"}, default "reals"
        Input domain of the statistic (``"integers"``: the statistic must be integer-valued).
    discrete : bool, default False
        Whether the noise, and so the release, lies on the integers (needs ``domain="integers"``).
    sensitivity : float, optional
        The sensitivity the mechanism was calibrated for, with ``norm``; both or neither
        (``None``: no sensitivity check on the model side).
    norm : {"l1", "l2"}, optional
        The norm of ``sensitivity``.
    name : str, default "custom"
        A name for messages and ``repr``.
    numba_logp : numba function, optional
        The same log-density as an ``nb.njit`` function of one float, for compiled-speed kernels.
    release : callable, optional
        ``release(value) -> released``, an exact sampler for publishing. Without it
        :meth:`release` refuses: the simulator is not fit for releasing private data.

    Examples
    --------
    A truncated Laplace mechanism: Laplace noise of scale ``b`` truncated to ``[-c, c]``.

    >>> import numba as nb, numpy as np, pytensor.tensor as pt
    >>> import pymc_unbounded_dp as pmdp
    >>> b, c = 2.0, 5.0
    >>> log_z = float(np.log(2 * b * -np.expm1(-c / b)))
    >>> def logp(e):
    ...     return pt.switch(pt.le(pt.abs(e), c), -pt.abs(e) / b - log_z, -np.inf)
    >>> def simulate(size, rng):
    ...     u = rng.uniform(0.0, 1.0, size)  # inverse CDF of |e|, random sign
    ...     magnitude = -b * np.log1p(-u * -np.expm1(-c / b))
    ...     return np.where(rng.random(size) < 0.5, -magnitude, magnitude)
    >>> @nb.njit
    ... def numba_logp(e):
    ...     return -abs(e) / b - log_z if abs(e) <= c else -np.inf
    >>> truncated = pmdp.CustomMechanism(
    ...     logp=logp, simulate=simulate, privacy={"epsilon": 1.0, "delta": 1e-3},
    ...     sensitivity=1.0, norm="l1", name="truncated Laplace", numba_logp=numba_logp)
    >>> truncated
    CustomMechanism('truncated Laplace', epsilon=1.0, delta=0.001, sensitivity=1.0, norm='l1')
    >>> bool(np.isneginf(truncated.logpdf(6.0)))
    True
    """

    name: str

    def __init__(
        self,
        logp: Callable,
        simulate: Callable,
        *,
        privacy: Mapping[str, float],
        domain: str = "reals",
        discrete: bool = False,
        sensitivity: float | None = None,
        norm: str | None = None,
        name: str = "custom",
        numba_logp: Callable | None = None,
        release: Callable | None = None,
    ):
        if not isinstance(name, str):
            raise TypeError(f"CustomMechanism: `name` must be a string, got {name!r}.")
        owner = f"CustomMechanism({name!r})"
        if domain not in ("reals", "integers"):
            raise ValueError(f"{owner}: `domain` must be 'reals' or 'integers', got {domain!r}.")
        if not isinstance(discrete, bool | np.bool_):
            raise TypeError(f"{owner}: `discrete` must be True or False, got {discrete!r}.")
        if discrete and domain != "integers":
            raise ValueError(
                f"{owner}: `discrete`=True (noise on the integers) needs domain='integers'."
            )
        if (sensitivity is None) != (norm is None):
            raise ValueError(f"{owner}: give both `sensitivity` and `norm`, or neither.")
        if norm is not None and norm not in ("l1", "l2"):
            raise ValueError(f"{owner}: `norm` must be 'l1' or 'l2', got {norm!r}.")
        if sensitivity is not None:
            sensitivity = _sensitivity(sensitivity, owner, domain == "integers")
        for argument, function in (("logp", logp), ("simulate", simulate)):
            if not callable(function):
                raise TypeError(f"{owner}: `{argument}` must be callable, got {function!r}.")
        if release is not None and not callable(release):
            raise TypeError(f"{owner}: `release` must be callable or None, got {release!r}.")
        if numba_logp is not None and not isinstance(numba_logp, nb.core.dispatcher.Dispatcher):
            raise TypeError(
                f"{owner}: `numba_logp` must be a numba function (decorated with @numba.njit), "
                f"got {numba_logp!r}."
            )
        for key, value in (
            ("name", name),
            ("scale", math.nan),
            ("sensitivity", sensitivity),
            ("norm", norm),
            ("discrete", bool(discrete)),
            ("_domain", domain),
            ("_privacy", _check_privacy(privacy, owner)),
            ("_logp", logp),
            ("_simulator", _simulator_of(simulate, owner)),
            ("_numba_logp", numba_logp),
            ("_release", release),
        ):
            object.__setattr__(self, key, value)
        self._symbolic_logp(pt.dvector("noise"), check=True)  # validates `logp` now
        self._check_elementwise(owner)
        self._simulate(np.random.default_rng(0), 3)  # validates `simulate` now
        if numba_logp is not None:
            self._check_numba_logp(owner)

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        """``CustomMechanism('name', epsilon=1.0, sensitivity=1.0)``: the stated guarantee and
        sensitivity (no scale: the noise law is the user's)."""
        parts = [repr(self.name)] + [f"{k}={_number_text(v)}" for k, v in self._privacy.items()]
        if self.sensitivity is not None:
            parts.append(f"sensitivity={_number_text(self.sensitivity)}, norm={self.norm!r}")
        return f"CustomMechanism({', '.join(parts)})"

    shape_code = SHAPE_CUSTOM

    @property
    def domain(self) -> str:
        return self._domain

    @property
    def privacy(self) -> dict[str, float]:
        return dict(self._privacy)

    @property
    def log_normalizer(self) -> float:
        """0: ``logp`` includes its normalising constant."""
        return 0.0

    # -- inference ------------------------------------------------------------------------------
    def _symbolic_logp(self, noise: pt.TensorVariable, check: bool = False) -> pt.TensorVariable:
        """The user's ``logp`` of ``noise`` as float64 of ``noise``'s shape; with ``check``
        (``noise`` a fresh input), refused unless it depends on ``noise`` only."""
        owner = f"CustomMechanism({self.name!r})"
        try:
            out = pt.as_tensor_variable(self._logp(noise))
        except Exception as error:
            raise TypeError(
                f"{owner}: `logp` must build a PyTensor expression of its noise tensor; calling "
                f"it on one raised {error!r}."
            ) from error
        if out.ndim > noise.ndim or not out.dtype.startswith(("float", "int", "uint")):
            raise ValueError(
                f"{owner}: `logp` must act elementwise on the noise and return numbers; on a "
                f"noise of ndim {noise.ndim} it returned ndim {out.ndim}, dtype {out.dtype}."
            )
        free = [
            v
            for v in ancestors([out])
            if v.owner is None and v is not noise and not isinstance(v, pt.TensorConstant)
        ]
        if check and free:
            raise ValueError(
                f"{owner}: `logp` must depend on the noise only (the mechanism is fixed), but it "
                f"uses {free}."
            )
        return pt.cast(pt.broadcast_to(out, noise.shape), "float64")

    def logp(self, noise: pt.TensorLike) -> pt.TensorVariable:
        """Log-density of each noise coordinate: the user's ``logp`` on ``noise`` as float64."""
        return self._symbolic_logp(pt.cast(pt.as_tensor_variable(noise), "float64"))

    @cached_property
    def _logpdf_function(self):
        noise = pt.dvector("noise")
        function = pytensor.function([noise], self._symbolic_logp(noise))
        function.trust_input = True
        return function

    def logpdf(self, noise) -> np.ndarray:
        """Log-density of each noise coordinate (NumPy; the compiled ``logp``). Off-lattice values
        of a discrete mechanism have log-probability ``-inf``."""
        noise = np.asarray(noise, dtype=float)
        out = self._logpdf_function(np.ascontiguousarray(noise.reshape(-1))).reshape(noise.shape)
        if self.discrete:
            out = np.where(noise == np.round(noise), out, -np.inf)
        return out

    def _python_log_density(self, x: float) -> float:
        return float(self.logpdf(np.array([x]))[0])

    @property
    def scalar_log_density(self) -> ScalarLogDensity:
        """``numba_logp`` (if given) and the compiled ``logp`` as a function of one float."""
        return ScalarLogDensity(self._numba_logp, self._python_log_density)

    @property
    def kernel_parameters(self) -> tuple[int, bool, float, float]:
        return SHAPE_CUSTOM, self.discrete, 1.0, 0.0

    def _check_elementwise(self, owner: str) -> None:
        """``logp`` on a vector equals ``logp`` on each of its values alone."""
        try:
            whole = self._logpdf_function(_CHECK_POINTS)
        except Exception as error:  # noqa: BLE001 - any failure: not elementwise
            raise ValueError(
                f"{owner}: `logp` must act elementwise on the noise; on {_CHECK_POINTS.size} "
                f"values it raised {str(error).splitlines()[0]!r}."
            ) from None
        alone = np.concatenate(
            [self._logpdf_function(_CHECK_POINTS[i : i + 1]) for i in range(_CHECK_POINTS.size)]
        )
        if not np.allclose(whole, alone, rtol=1e-12, atol=0.0, equal_nan=True):
            raise ValueError(
                f"{owner}: `logp` must act elementwise on the noise (no sums or other operations "
                "across values): on a vector it differs from its values taken one at a time."
            )

    def _check_numba_logp(self, owner: str) -> None:
        points = np.concatenate([_CHECK_POINTS, np.ravel(self.simulate(16, random_seed=0))])
        if self.discrete:
            points = np.round(points)
        expected = self.logpdf(points)
        try:
            got = np.array([float(self._numba_logp(float(x))) for x in points])
        except Exception as error:
            raise TypeError(
                f"{owner}: `numba_logp` must be a numba function of one float returning a float; "
                f"calling it raised {error!r}."
            ) from error
        if not np.allclose(got, expected, rtol=1e-9, atol=1e-12, equal_nan=True):
            worst = int(np.argmax(np.where(got == expected, 0.0, np.abs(got - expected))))
            raise ValueError(
                f"{owner}: `numba_logp` and `logp` differ at noise {points[worst]:g}: "
                f"{got[worst]:g} vs {expected[worst]:g}; they must be the same log-density."
            )

    def tail_width(self, nats: float) -> float:
        """A half-width beyond which the log-density is more than ``nats`` below its value at 0,
        found by doubling (assumes a density that decreases away from 0 beyond it)."""
        peak = float(self.logpdf(0.0))
        width = 1.0
        while np.any(self.logpdf([-width, width]) >= peak - nats):
            width *= 2.0
            if width > 2.0**62:
                raise ValueError(
                    f"CustomMechanism({self.name!r}): the log-density does not fall {nats:g} below "
                    "its value at 0 within 2**62; it cannot bound a sum over n."
                )
        return width

    # -- noise ----------------------------------------------------------------------------------
    def _simulate(self, rng, size):
        out = np.asarray(self._simulator(rng, size))
        expected = () if size is None else tuple(np.atleast_1d(size))
        if out.shape != expected or out.dtype.kind not in "biuf":
            raise ValueError(
                f"CustomMechanism({self.name!r}): `simulate`(size, rng) must return numbers of "
                f"shape `size` {expected}, got shape {out.shape} and dtype {out.dtype}."
            )
        return out

    def _exact_draw(self, scale):  # pragma: no cover - release is overridden
        raise NotImplementedError

    def release(self, value) -> np.ndarray:
        """Release ``value`` with the user's exact sampler (``release=`` at construction).

        Raises
        ------
        ValueError
            If no exact sampler was given (the simulator is not fit for publishing), or if
            ``value`` is not finite (or, on the integers, not an integer in the int64 range).
        """
        owner = f"CustomMechanism({self.name!r}).release"
        if self._release is None:
            raise ValueError(
                f"{owner}: no exact release sampler was given; pass `release=` (a function "
                "value -> released value with exact arithmetic and a secure generator) to "
                "CustomMechanism. `simulate` is for simulation studies only."
            )
        if self.domain == "integers":
            shape, ints = _release_integers(value, owner)
            values = np.asarray(ints, dtype=np.int64).reshape(shape)
        else:
            values = _release_reals(value, owner)
        return np.asarray(self._release(values))


def _simulator_of(function: Callable, owner: str) -> Callable:
    """``(rng, size) -> noise`` calling the user's ``simulate`` by keyword, ``size=`` and ``rng=``
    (or ``random_seed=``), as :meth:`Mechanism.simulate` is called. A function that takes neither
    is called the old way, ``simulate(rng, size)``, with a ``FutureWarning``."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # some builtins have none
        signature = None
    for seed in ("rng", "random_seed"):
        if signature is not None and _binds(signature, size=None, **{seed: None}):
            return functools.partial(_call_by_keyword, function, seed)
    warnings.warn(
        f"{owner}: `simulate` is called as simulate(size=..., rng=...), the signature of "
        "Mechanism.simulate; name its parameters `size` and `rng` (def simulate(size, rng): ...). "
        "Calling it positionally as simulate(rng, size) is deprecated.",
        FutureWarning,
        stacklevel=3,
    )
    return function


def _binds(signature: inspect.Signature, **arguments) -> bool:
    try:
        signature.bind(**arguments)
    except TypeError:
        return False
    return True


def _call_by_keyword(function: Callable, seed: str, rng, size):
    return function(size=size, **{seed: rng})


def _check_privacy(privacy, owner: str) -> dict[str, float]:
    if not isinstance(privacy, Mapping) or not privacy:
        raise TypeError(
            f"{owner}: `privacy` must be a non-empty mapping such as {{'epsilon': 1.0}}, got "
            f"{privacy!r}."
        )
    out = {}
    for key, value in privacy.items():
        if key not in _PRIVACY_KEYS:
            raise ValueError(f"{owner}: `privacy` keys must be among {_PRIVACY_KEYS}, got {key!r}.")
        if isinstance(value, str | bool | np.bool_):
            raise TypeError(f"{owner}: `privacy`[{key!r}] must be a number, got {value!r}.")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise TypeError(
                f"{owner}: `privacy`[{key!r}] must be a number, got {value!r}."
            ) from None
        if not math.isfinite(number) or number < 0:
            raise ValueError(f"{owner}: `privacy`[{key!r}] must be finite and >= 0, got {value}.")
        out[key] = number
    return out
