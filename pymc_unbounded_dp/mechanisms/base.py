"""The base class of the additive noise mechanisms, and the checks their arguments share.

A :class:`Mechanism` carries its own privacy accounting (OpenDP's model: a measurement carries its
privacy map): :meth:`Mechanism.privacy_map` (the guarantee at a given sensitivity),
:meth:`Mechanism.calibrate` (the scale for a budget), :meth:`Mechanism.tail_width` and
:meth:`Mechanism.budget_for_mean_abs`. The defaults here serve a user-defined subclass that defines
none of them: no guarantee known beyond the stated one, no calibration known, a tail found by
search. Guarantees are :class:`~pymc_unbounded_dp.privacy.Guarantee` values.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytensor.tensor as pt

from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.kernels._noise import SHAPE_ABS, ScalarLogDensity
from pymc_unbounded_dp.privacy import Guarantee

#: Grid on which a continuous mechanism's :meth:`release` works, relative to the noise scale.
_RELEASE_GRID_BITS = 30
#: The range of an exact integer release (int64).
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_INT64_RANGE = "[-2**63, 2**63 - 1]"


def _number(value, name: str, owner: str) -> float:
    """``value`` as a float, or a ``TypeError`` naming ``name`` for anything but a number."""
    if isinstance(value, str | bool | np.bool_):  # float() would take "1" and True
        raise TypeError(f"{owner}: `{name}` must be a number, got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `{name}` must be a number, got {value!r}.") from None


def _positive_finite(value: float, name: str, owner: str) -> float:
    value = _number(value, name, owner)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: `{name}` must be finite and > 0, got {value}.")
    return value


def _sensitivity(value: float, owner: str, integer: bool) -> float:
    value = _number(value, "sensitivity", owner)
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
    warn_at_caller(
        f"Positional arguments to pmdp.{owner} are deprecated; write pmdp.{owner}({spelled}).",
        FutureWarning,
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
    #: The law of the privacy loss of one released coordinate that :mod:`pymc_unbounded_dp.risk`
    #: computes the risk with (``"laplace"``, ``"discrete laplace"``, ``"gaussian"``, ``"discrete
    #: gaussian"``, ``"custom"``: from the density); ``None``: the risk module has none.
    privacy_loss_law: ClassVar[str | None] = None

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

    # -- privacy accounting -----------------------------------------------------------------------
    @property
    def guarantee(self) -> Guarantee | None:
        """The guarantee at the mechanism's own sensitivity, as a
        :class:`~pymc_unbounded_dp.privacy.Guarantee`; ``None`` when :attr:`privacy` states none
        that reads as one (a user-defined mechanism may state ``{"rho": r, "delta": d}``)."""
        try:
            return Guarantee.from_dict(self.privacy, "privacy")
        except (TypeError, ValueError, NotImplementedError):
            return None

    def privacy_map(self, sensitivity: float) -> Guarantee | None:
        """The guarantee the mechanism gives a statistic of sensitivity ``sensitivity`` (in its
        :attr:`norm`), computed from the scale; ``None``: no guarantee known.

        This default knows only the stated guarantee (:attr:`guarantee`), which holds at any
        sensitivity up to the one the mechanism was calibrated for.

        Raises
        ------
        ValueError
            If ``sensitivity`` is negative or not finite.
        """
        sensitivity = _sensitivity(sensitivity, f"{self._owner}.privacy_map", False)
        declared = self.sensitivity
        if declared is None or math.isnan(declared) or sensitivity > declared:
            return None
        return self.guarantee

    @classmethod
    def calibrate(cls, budget: Guarantee, sensitivity: float) -> float | None:
        """The scale at which the mechanism gives ``budget`` to a statistic of sensitivity
        ``sensitivity``; ``None``: no calibration known (this default)."""
        return None

    def budget_for_mean_abs(self, mean_abs: float) -> Guarantee | None:
        """The weakest guarantee of the mechanism's family, at its sensitivity, whose noise on the
        integers has ``E|e| <= mean_abs``; ``None``: not known (this default)."""
        return None

    @property
    def _owner(self) -> str:
        """How messages name the mechanism."""
        return type(self).__name__

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
        """A half-width beyond which the log-density is more than ``nats`` below its value at 0.

        Used to bound sums over the values of ``n`` (e.g. the simulated likelihood's window). This
        default doubles a width until :meth:`logpdf` falls below (it assumes a density that
        decreases away from 0 beyond it); the built-in families compute it from their scale.
        """
        peak = float(self.logpdf(0.0))
        width = 1.0
        while np.any(self.logpdf([-width, width]) >= peak - nats):
            width *= 2.0
            if width > 2.0**62:
                raise ValueError(
                    f"{self._owner}: the log-density does not fall {nats:g} below its value at 0 "
                    "within 2**62; it cannot bound a sum over n."
                )
        return width

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
            warn_at_caller(
                f"A positional seed to {owner} is deprecated; write simulate({size!r}, "
                f"rng={args[0]!r}) (`rng=` takes a seed or a numpy Generator).",
                FutureWarning,
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
