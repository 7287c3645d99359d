"""Noise models in the array form the compiled kernels read, and their log-densities in numba.

A released coordinate ``s_dp_j = s_j + e_j`` has a noise log-density chosen by its shape code:

* :data:`SHAPE_ABS` (the Laplace family): ``log_normalizer_j - |e_j| / scale_j``;
* :data:`SHAPE_SQUARE` (the Gaussian family): ``log_normalizer_j - e_j**2 / (2 scale_j**2)``;
* :data:`SHAPE_TULAP` (Tulap): ``log_normalizer_j - |rint(e_j)| / scale_j``, a staircase;
* ``SHAPE_CUSTOM + k`` (a user-defined mechanism): ``custom(e_j, k)``, the ``k``-th user-defined
  log-density of the table, called as a first-class function (see :func:`custom_log_density`;
  ``custom`` is ``None`` where no coordinate has one, which spares every kernel call the type
  dispatch of a function argument, 7-16 us per call);

and ``-inf`` off the integer lattice for a discrete mechanism. The codes are those of
``pymc_unbounded_dp.mechanisms``.
"""

from __future__ import annotations

import ctypes
import functools
import math
from collections.abc import Callable, Sequence
from typing import NamedTuple, Protocol

import numba as nb
import numba.experimental.function_type  # registers the typing of WrapperAddressProtocol
import numpy as np
from numba.core.types import WrapperAddressProtocol

#: Shape codes of one coordinate's log-density (the values of ``Mechanism.shape_code``); a
#: user-defined mechanism's coordinates have ``SHAPE_CUSTOM + k``.
SHAPE_ABS, SHAPE_SQUARE, SHAPE_TULAP, SHAPE_CUSTOM = 0, 1, 2, 3

#: Signature of the first-class function the kernels call for user-defined log-densities:
#: ``custom(x, k) -> log density of the k-th user-defined mechanism at x``.
CUSTOM_SIGNATURE = nb.types.float64(nb.types.float64, nb.types.int64)


class ScalarLogDensity(NamedTuple):
    """A user-defined log-density of one noise coordinate in the two forms the kernels can call.

    ``numba``: an ``nb.njit`` function of one float (``None`` if not given); ``python``: a Python
    callable of one float returning a float (always given; used when ``numba`` is ``None``).
    """

    numba: Callable[[float], float] | None
    python: Callable[[float], float]


class KernelMechanism(Protocol):
    """What :meth:`NoiseArrays.of` reads of a mechanism (``pymc_unbounded_dp.Mechanism`` has it)."""

    @property
    def kernel_parameters(self) -> tuple[int, bool, float, float]:
        """``(shape_code, discrete, scale, log_normalizer)``."""

    @property
    def scalar_log_density(self) -> ScalarLogDensity | None:
        """The user-defined log-density (shape code :data:`SHAPE_CUSTOM`), else ``None``."""


class PythonLogDensity(WrapperAddressProtocol):
    """User-defined log-densities called from numba through a C callback into Python.

    Correct for any Python callable, at about a microsecond per call plus the callable's own cost
    (the compiled path, :func:`custom_log_density` with numba functions, costs nanoseconds). An
    exception inside a callable cannot cross the compiled kernel: the call returns NaN (which
    rejects the move) and the first exception is re-raised by :meth:`raise_errors`, which the
    kernels' Python wrappers call after every kernel run.
    """

    _CALLBACK = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_double, ctypes.c_int64)

    def __init__(self, functions: Sequence[Callable[[float], float]]):
        self.errors: list[BaseException] = []
        functions = tuple(functions)

        def call(x, k):
            try:
                return float(functions[k](x))
            except BaseException as error:  # noqa: BLE001 - re-raised after the kernel
                self.errors.append(error)
                return math.nan

        self._callback = self._CALLBACK(call)

    def __wrapper_address__(self) -> int:
        return ctypes.cast(self._callback, ctypes.c_void_p).value

    def signature(self):
        return CUSTOM_SIGNATURE

    def raise_errors(self) -> None:
        """Re-raise the first exception of a user-defined log-density since the last call."""
        if self.errors:
            error, self.errors = self.errors[0], []
            raise RuntimeError(
                "a user-defined mechanism's log-density raised an exception inside the kernel "
                f"(the move was rejected and the run stopped): {error!r}"
            ) from error


def _chain(functions: tuple) -> Callable:
    """``chained(x, k) = functions[k](x)`` as one numba function (an if-chain over ``k``)."""
    head = functions[0]
    if len(functions) == 1:

        @nb.njit
        def chained(x, k):
            return float(head(x))

        return chained
    rest = _chain(functions[1:])

    @nb.njit
    def chained(x, k):
        if k == 0:
            return float(head(x))
        return rest(x, k - 1)

    return chained


@functools.lru_cache(maxsize=64)
def _compiled_chain(functions: tuple):
    return nb.cfunc(CUSTOM_SIGNATURE)(_chain(functions))


def custom_log_density(densities: Sequence[ScalarLogDensity]):
    """The first-class function ``custom(x, k)`` the kernels call for ``densities[k]``.

    All numba: one compiled C function (compiled once per combination, about a second), called
    at compiled speed. Otherwise every density goes through :class:`PythonLogDensity`. No
    densities: ``None``, for which the kernels compile without the call (numba types a
    first-class function argument anew on every call of a kernel, 7-16 us; ``None`` costs
    nothing).
    """
    densities = tuple(densities)
    if not densities:
        return None
    if all(d.numba is not None for d in densities):
        return _compiled_chain(tuple(d.numba for d in densities))
    return PythonLogDensity([d.python for d in densities])


class NoiseArrays(NamedTuple):
    """Per-coordinate mechanism parameters of ``D`` released numbers.

    ``laplace_only``: every coordinate has continuous Laplace noise (the kernels' fast path).
    ``custom``: the user-defined log-densities of the coordinates with shape code ``>=
    SHAPE_CUSTOM`` (see :func:`custom_log_density`); ``None`` if there are none.
    """

    shape_code: np.ndarray
    discrete: np.ndarray
    scale: np.ndarray
    log_normalizer: np.ndarray
    laplace_only: bool
    custom: object = None

    @classmethod
    def of(cls, mechanisms: Sequence[KernelMechanism], sizes: Sequence[int]) -> NoiseArrays:
        """The arrays of ``sizes[k]`` coordinates released with ``mechanisms[k]``, side by side.

        Examples
        --------
        >>> import pymc_unbounded_dp as pmdp
        >>> noise = NoiseArrays.of([pmdp.Laplace(scale=2.0), pmdp.Gaussian(sigma=1.0)], [2, 1])
        >>> noise.scale.tolist(), noise.laplace_only
        ([2.0, 2.0, 1.0], False)
        """
        customs: list = []  # distinct user-defined mechanisms, by identity
        rows = []
        for mechanism, size in zip(mechanisms, sizes):
            code, discrete, scale, log_normalizer = mechanism.kernel_parameters
            if code == SHAPE_CUSTOM:
                index = next((k for k, m in enumerate(customs) if m is mechanism), len(customs))
                if index == len(customs):
                    customs.append(mechanism)
                code = SHAPE_CUSTOM + index
            rows.extend([(code, discrete, scale, log_normalizer)] * size)
        columns = list(zip(*rows)) if rows else [(), (), (), ()]
        dtypes = (np.int64, np.bool_, np.float64, np.float64)
        shape_code, discrete, scale, log_normalizer = (
            np.asarray(c, dtype=t) for c, t in zip(columns, dtypes)
        )
        laplace_only = bool(np.all((shape_code == SHAPE_ABS) & ~discrete))
        custom = custom_log_density([m.scalar_log_density for m in customs])
        return cls(shape_code, discrete, scale, log_normalizer, laplace_only, custom)

    @property
    def per_coordinate(self) -> tuple:
        """``(shape_code, discrete, scale, log_normalizer, custom)``: the arguments of
        :func:`residual_log_density` after ``residual`` and ``out``."""
        return self.shape_code, self.discrete, self.scale, self.log_normalizer, self.custom

    def scalar(self) -> tuple:
        """The parameters of a one-coordinate noise (the noise on ``n_dp``) as scalars, and
        ``custom``."""
        return (
            int(self.shape_code[0]),
            bool(self.discrete[0]),
            float(self.scale[0]),
            float(self.log_normalizer[0]),
            self.custom,
        )

    def raise_errors(self) -> None:
        """Re-raise an exception of a user-defined log-density called by the last kernel run."""
        if isinstance(self.custom, PythonLogDensity):
            self.custom.raise_errors()


@nb.njit(cache=True, inline="never")
def _call_custom(custom, x, k):
    """``custom(x, k)``, kept out of line: an indirect call inlined into the kernels' loops
    made every coordinate 7x slower, user-defined or not (numba 0.65). ``custom`` is ``None``
    only where no coordinate has a custom shape code (never called then); numba prunes the
    branch that does not apply to the argument's type."""
    if custom is None:
        return np.nan
    return custom(x, k)


@nb.njit(cache=True, inline="always")
def log_density(x, shape_code, discrete, scale, log_normalizer, custom):
    """Log-density of one noise coordinate at ``x``."""
    if discrete and x != np.floor(x):
        return -np.inf
    if shape_code == SHAPE_ABS:
        return log_normalizer - abs(x) / scale
    if shape_code == SHAPE_SQUARE:
        z = x / scale
        return log_normalizer - 0.5 * z * z
    if shape_code == SHAPE_TULAP:
        return log_normalizer - abs(np.rint(x)) / scale
    return _call_custom(custom, x, shape_code - SHAPE_CUSTOM)


@nb.njit(cache=True)
def residual_log_density(residual, out, shape_code, discrete, scale, log_normalizer, custom):
    """``out[j] = log eta_j(residual[j])``."""
    for j in range(residual.shape[0]):
        out[j] = log_density(
            residual[j], shape_code[j], discrete[j], scale[j], log_normalizer[j], custom
        )


@nb.njit(cache=True)
def log_ratio(
    residual,
    trial,
    current,
    trial_lp,
    shape_code,
    discrete,
    scale,
    log_normalizer,
    laplace_only,
    custom,
):
    """Log ratio ``eta(trial) / eta(residual)``, with ``current = log eta(residual)`` per
    coordinate; fills ``trial_lp = log eta(trial)``.

    ``laplace_only`` (every coordinate continuous Laplace): the ratio is
    ``sum_j (|r_j| - |r_j'|) / b_j``, with no normaliser, lattice test or per-coordinate branch;
    ``current`` and ``trial_lp`` are then not used.

    ``+inf`` if ``residual`` is outside the support (some ``current`` is ``-inf``, e.g. bounded
    noise of a user-defined mechanism before the chain has reached the support): every move is
    accepted from there. The support is absorbing (a move out of it has ratio ``-inf``), so the
    target stays the stationary law; this is how a chain started outside finds the support.
    """
    # One loop with the branch inside: an early-returning fast-path loop compiled 10x slower on
    # some numba versions (0.68; 0.65 when inlined).
    total = 0.0
    outside = False
    for j in range(residual.shape[0]):
        if laplace_only:
            total += (abs(residual[j]) - abs(trial[j])) / scale[j]
        else:
            trial_lp[j] = log_density(
                trial[j], shape_code[j], discrete[j], scale[j], log_normalizer[j], custom
            )
            total += trial_lp[j] - current[j]
            outside |= current[j] == -np.inf
    return np.inf if outside else total
