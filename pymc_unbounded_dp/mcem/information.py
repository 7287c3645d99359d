"""Information matrices and the Monte Carlo variance of averages over the kernel chain.

* :func:`mean_variance`, :func:`integrated_autocorrelation_time`: the Monte Carlo covariance of a
  mean of autocorrelated rows (the imputed sets' scores), Geyer's estimator;
* :func:`missing_information`: the fraction of missing information, EM's rate;
* :func:`inverse_information`: the covariance from an observed information, NaN if it is not
  positive definite.
"""

from __future__ import annotations

import numpy as np

from pymc_unbounded_dp._warnings import warn_at_caller


def mean_variance(rows: np.ndarray) -> np.ndarray:
    """Monte Carlo covariance of the mean of an autocorrelated sequence of rows.

    The i.i.d. covariance scaled by the integrated autocorrelation time of each column (Geyer's
    initial monotone sequence estimator): ``V_jk = C_jk sqrt(tau_j tau_k) / M``.

    Examples
    --------
    >>> import numpy as np
    >>> rows = np.random.default_rng(1).normal(size=(4000, 2))
    >>> bool(np.allclose(np.diag(mean_variance(rows)) * 4000, 1.0, atol=0.15))
    True
    """
    count = rows.shape[0]
    centred = rows - rows.mean(axis=0)
    covariance = centred.T @ centred / count
    size = 1 << (2 * count - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=0)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:count] / count
    tau = np.array([integrated_autocorrelation_time(column) for column in autocovariance.T])
    scale = np.sqrt(tau)
    return covariance * np.outer(scale, scale) / count


def integrated_autocorrelation_time(autocovariance: np.ndarray) -> float:
    """Integrated autocorrelation time from one column's autocovariances (Geyer 1992, IMSE)."""
    if autocovariance[0] <= 0:
        return 1.0
    rho = autocovariance / autocovariance[0]
    pairs = rho[: 2 * (rho.size // 2)].reshape(-1, 2).sum(axis=1)
    non_positive = np.flatnonzero(pairs <= 0)
    pairs = pairs[: non_positive[0] if non_positive.size else pairs.size]
    monotone = np.minimum.accumulate(pairs)
    return float(max(1.0, -1.0 + 2.0 * monotone.sum()))


def missing_information(complete: np.ndarray, missing: np.ndarray) -> float:
    """The fraction of missing information: the largest eigenvalue of ``I_c^{-1} I_miss``.

    It is EM's linear rate of convergence (Dempster, Laird & Rubin 1977); NaN if ``I_c`` is not
    positive definite.
    """
    try:
        chol = np.linalg.cholesky(0.5 * (complete + complete.T))
    except np.linalg.LinAlgError:
        return float("nan")
    inverse = np.linalg.inv(chol)
    symmetric = inverse @ (0.5 * (missing + missing.T)) @ inverse.T
    return float(np.max(np.linalg.eigvalsh(symmetric)))


def inverse_information(observed: np.ndarray, warn: bool = True) -> np.ndarray:
    """The inverse of an observed information matrix, or NaN (with a warning) if it is not PD."""
    symmetric = 0.5 * (observed + observed.T)
    try:
        np.linalg.cholesky(symmetric)
    except np.linalg.LinAlgError:
        if warn:
            warn_at_caller(
                "mcem: the estimated observed information is not positive definite, so the "
                "standard errors are NaN (too few Monte Carlo draws for the fraction of missing "
                "information, or an estimate on the boundary).",
                UserWarning,
            )
        return np.full_like(symmetric, np.nan)
    return np.linalg.inv(symmetric)
