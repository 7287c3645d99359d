"""The linear algebra of the exact conditional draws of :mod:`pymc_unbounded_dp.conjugate`, in numba.

The building blocks there draw their random numbers from the step's generator (so any object with
NumPy's ``Generator`` methods serves, and a seed gives the same draws as before) and hand the rest
to these functions: each is one compiled call instead of ten to twenty small NumPy calls (the
paper's regression, three predictors and 1,000 records: the normal-gamma draw costs about 6 us
instead of 33). Inputs are contiguous ``float64`` arrays.
"""

from __future__ import annotations

import numba as nb
import numpy as np

__all__ = [
    "bartlett_pieces",
    "lower_outer",
    "mvnormal_from_precision",
    "normal_gamma_posterior",
    "normal_mean_posterior",
    "wishart_scale_factor",
]


@nb.njit(cache=True)
def normal_gamma_posterior(design, response, prior_mean, prior_precision, rate):
    """``(P_n, m_n, b_n)`` of the normal-gamma regression: ``P_n = P + Z'Z``,
    ``m_n = P_n^-1 (P m + Z'y)`` and ``b_n = b + (y'y + m'Pm - m_n' P_n m_n) / 2``."""
    posterior_precision = prior_precision + design.T @ design
    mean = np.linalg.solve(posterior_precision, prior_precision @ prior_mean + design.T @ response)
    posterior_rate = rate + 0.5 * (
        response @ response
        + prior_mean @ (prior_precision @ prior_mean)
        - mean @ (posterior_precision @ mean)
    )
    return posterior_precision, mean, posterior_rate


@nb.njit(cache=True)
def mvnormal_from_precision(mean, precision, normals):
    """``mean + L'^-1 z`` with ``L L' = precision``: a draw of ``N(mean, precision^-1)`` from the
    standard normals ``z``."""
    chol = np.linalg.cholesky(precision)
    return mean + np.linalg.solve(np.ascontiguousarray(chol.T), normals)


@nb.njit(cache=True)
def normal_mean_posterior(x, precision, prior_mean, prior_precision):
    """``(P_n, m_n)`` of a normal mean with known precision ``Phi``: ``P_n = P + n Phi`` and
    ``m_n = P_n^-1 (P m + Phi sum_i x_i)`` (``x`` is ``(n, p)``)."""
    total = np.zeros(x.shape[1])
    for i in range(x.shape[0]):
        total += x[i]
    posterior_precision = prior_precision + x.shape[0] * precision
    mean = np.linalg.solve(posterior_precision, prior_precision @ prior_mean + precision @ total)
    return posterior_precision, mean


@nb.njit(cache=True)
def wishart_scale_factor(x, mean, inverse_scale):
    """``chol((V^-1 + S)^-1)`` with ``S = sum_i (x_i - mu)(x_i - mu)'``: the Cholesky factor of the
    Wishart conditional's scale matrix."""
    centred = x - mean
    return np.linalg.cholesky(np.linalg.inv(inverse_scale + centred.T @ centred))


@nb.njit(cache=True)
def lower_outer(chol, bartlett):
    """``(L A)(L A)'``: the Wishart draw from its scale's factor ``L`` and the Bartlett matrix
    ``A``."""
    factor = chol @ bartlett
    return factor @ np.ascontiguousarray(factor.T)


@nb.njit(cache=True)
def bartlett_pieces(precision):
    """``(c, z)`` of ``precision = A A'`` (``A`` its Cholesky factor): ``c`` the squared diagonal
    of ``A`` and ``z`` its strictly lower triangle, row by row."""
    factor = np.linalg.cholesky(precision)
    p = factor.shape[0]
    diagonal = np.empty(p)
    below = np.empty(p * (p - 1) // 2)
    k = 0
    for i in range(p):
        diagonal[i] = factor[i, i] ** 2
        for j in range(i):
            below[k] = factor[i, j]
            k += 1
    return diagonal, below
