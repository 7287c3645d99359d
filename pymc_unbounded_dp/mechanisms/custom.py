"""User-defined mechanisms: :class:`CustomMechanism`, a log-density and a simulator of the noise,
with the guarantee stated by the user."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property

import numba as nb
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.basic import Constant

from pymc_unbounded_dp._graph import ancestors
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.kernels._noise import SHAPE_CUSTOM, ScalarLogDensity
from pymc_unbounded_dp.mechanisms.base import (
    Mechanism,
    _number_text,
    _release_integers,
    _release_reals,
    _sensitivity,
)

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
    privacy_loss_law = "custom"

    @property
    def domain(self) -> str:
        return self._domain

    @property
    def _owner(self) -> str:
        return f"CustomMechanism({self.name!r})"

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
        if check:
            inputs = [v for v in ancestors([out]) if v.owner is None]
            free = [v for v in inputs if v is not noise and not isinstance(v, Constant)]
            if free:
                raise ValueError(
                    f"{owner}: `logp` must depend on the noise only (the mechanism is fixed), but "
                    f"it uses {free}."
                )
            if not any(v is noise for v in inputs):
                raise ValueError(
                    f"{owner}: `logp` must be a log-density of the noise, but it does not depend "
                    "on its argument (a constant is not a normalised density)."
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
        function = self._logpdf_function  # compiled outside the check: its errors are not ours
        try:
            whole = function(_CHECK_POINTS)
        except Exception as error:  # noqa: BLE001 - any failure: not elementwise
            raise ValueError(
                f"{owner}: `logp` must act elementwise on the noise; on {_CHECK_POINTS.size} "
                f"values it raised {str(error).splitlines()[0]!r}."
            ) from None
        _refuse_nan(whole, _CHECK_POINTS, owner)
        alone = np.concatenate(
            [function(_CHECK_POINTS[i : i + 1]) for i in range(_CHECK_POINTS.size)]
        )
        if not np.allclose(whole, alone, rtol=1e-12, atol=0.0):
            raise ValueError(
                f"{owner}: `logp` must act elementwise on the noise (no sums or other operations "
                "across values): on a vector it differs from its values taken one at a time."
            )

    def _check_numba_logp(self, owner: str) -> None:
        points = np.concatenate([_CHECK_POINTS, np.ravel(self.simulate(16, random_seed=0))])
        if self.discrete:
            points = np.round(points)
        expected = self.logpdf(points)
        _refuse_nan(expected, points, owner)
        try:
            got = np.array([float(self._numba_logp(float(x))) for x in points])
        except Exception as error:
            raise TypeError(
                f"{owner}: `numba_logp` must be a numba function of one float returning a float; "
                f"calling it raised {error!r}."
            ) from error
        if not np.allclose(got, expected, rtol=1e-9, atol=1e-12):
            same = got == expected  # -inf == -inf too
            gap = np.zeros_like(got)
            gap[~same] = np.abs(got[~same] - expected[~same])  # no inf - inf; NaN if `got` is
            worst = int(np.argmax(gap))  # the first NaN, else the largest gap
            raise ValueError(
                f"{owner}: `numba_logp` and `logp` differ at noise {points[worst]:g}: "
                f"{got[worst]:g} vs {expected[worst]:g}; they must be the same log-density."
            )

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


def _refuse_nan(log_density: np.ndarray, points: np.ndarray, owner: str) -> None:
    """A ``ValueError`` naming the first noise value at which the user's ``logp`` is NaN."""
    nan = np.flatnonzero(np.isnan(log_density))
    if nan.size:
        raise ValueError(
            f"{owner}: `logp` is NaN at noise {points[nan[0]]:g}; a log-density must be a number "
            "or -inf (outside the support) at every noise value."
        )


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
    warn_at_caller(
        f"{owner}: `simulate` is called as simulate(size=..., rng=...), the signature of "
        "Mechanism.simulate; name its parameters `size` and `rng` (def simulate(size, rng): ...). "
        "Calling it positionally as simulate(rng, size) is deprecated.",
        FutureWarning,
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
