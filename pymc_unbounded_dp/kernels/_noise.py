"""Noise models in the array form the compiled kernels read, and their log-densities in numba.

A released coordinate ``s_dp_j = s_j + e_j`` has noise log-density ``log_normalizer_j - |e_j| /
scale_j`` (shape code :data:`SHAPE_ABS`, the Laplace family) or ``log_normalizer_j - e_j**2 /
(2 scale_j**2)`` (:data:`SHAPE_SQUARE`, the Gaussian family), and ``-inf`` off the integer lattice
for a discrete mechanism. The codes are those of ``pymc_unbounded_dp.mechanisms``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

import numba as nb
import numpy as np

#: Shape codes of one coordinate's log-density (the values of ``Mechanism.shape_code``).
SHAPE_ABS, SHAPE_SQUARE = 0, 1


class KernelMechanism(Protocol):
    """What :meth:`NoiseArrays.of` reads of a mechanism (``pymc_unbounded_dp.Mechanism`` has it)."""

    @property
    def kernel_parameters(self) -> tuple[int, bool, float, float]:
        """``(shape_code, discrete, scale, log_normalizer)``."""


class NoiseArrays(NamedTuple):
    """Per-coordinate mechanism parameters of ``D`` released numbers.

    ``laplace_only``: every coordinate has continuous Laplace noise (the kernels' fast path).
    """

    shape_code: np.ndarray
    discrete: np.ndarray
    scale: np.ndarray
    log_normalizer: np.ndarray
    laplace_only: bool

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
        rows = [m.kernel_parameters for m, k in zip(mechanisms, sizes) for _ in range(k)]
        columns = list(zip(*rows)) if rows else [(), (), (), ()]
        dtypes = (np.int64, np.bool_, np.float64, np.float64)
        shape_code, discrete, scale, log_normalizer = (
            np.asarray(c, dtype=t) for c, t in zip(columns, dtypes)
        )
        laplace_only = bool(np.all((shape_code == SHAPE_ABS) & ~discrete))
        return cls(shape_code, discrete, scale, log_normalizer, laplace_only)

    def scalar(self) -> tuple[int, bool, float, float]:
        """The parameters of a one-coordinate noise (the noise on ``n_dp``) as scalars."""
        return (
            int(self.shape_code[0]), bool(self.discrete[0]), float(self.scale[0]),
            float(self.log_normalizer[0]),
        )


@nb.njit(cache=True, inline="always")
def log_density(x, shape_code, discrete, scale, log_normalizer):
    """Log-density of one noise coordinate at ``x``."""
    if discrete and x != np.floor(x):
        return -np.inf
    if shape_code == SHAPE_ABS:
        return log_normalizer - abs(x) / scale
    z = x / scale
    return log_normalizer - 0.5 * z * z


@nb.njit(cache=True)
def residual_log_density(residual, out, shape_code, discrete, scale, log_normalizer):
    """``out[j] = log eta_j(residual[j])``."""
    for j in range(residual.shape[0]):
        out[j] = log_density(residual[j], shape_code[j], discrete[j], scale[j], log_normalizer[j])


@nb.njit(cache=True)
def log_ratio(
    residual, trial, current, trial_lp, shape_code, discrete, scale, log_normalizer, laplace_only
):
    """Log ratio ``eta(trial) / eta(residual)``, with ``current = log eta(residual)`` per
    coordinate; fills ``trial_lp = log eta(trial)``.

    ``laplace_only`` (every coordinate continuous Laplace): the ratio is
    ``sum_j (|r_j| - |r_j'|) / b_j``, with no normaliser, lattice test or per-coordinate branch;
    ``current`` and ``trial_lp`` are then not used.
    """
    # One loop with the branch inside: an early-returning fast-path loop compiled 10x slower on
    # some numba versions (0.68; 0.65 when inlined).
    total = 0.0
    for j in range(residual.shape[0]):
        if laplace_only:
            total += (abs(residual[j]) - abs(trial[j])) / scale[j]
        else:
            trial_lp[j] = log_density(
                trial[j], shape_code[j], discrete[j], scale[j], log_normalizer[j]
            )
            total += trial_lp[j] - current[j]
    return total
