"""Monte Carlo error checks used by the statistical tests (independent of ArviZ versions)."""

from __future__ import annotations

import numpy as np
from scipy import stats

#: z-score beyond which a Monte Carlo estimate is declared wrong. With the fixed seeds in the
#: tests, a correct sampler passes each check with probability about 0.9999.
Z_LIMIT = 4.0

#: ``pmdp.sample`` settings of the small exact-posterior checks (one process: fast to start).
EXACT_POSTERIOR_SAMPLING = {
    "draws": 2000, "tune": 500, "chains": 2, "cores": 1, "progressbar": False,
    "compute_convergence_checks": False,
}


def draws_of(idata, name: str) -> np.ndarray:
    """Posterior draws of ``name`` as ``(chain, draw, ...)`` for InferenceData or DataTree."""
    return np.asarray(idata["posterior"][name].values, dtype=float)


def mcse_of_mean(samples: np.ndarray, n_batches: int = 20) -> float:
    """Batch-means Monte Carlo standard error of the mean of ``(chain, draw)`` samples."""
    chains, draws = samples.shape
    size = draws // n_batches
    batches = samples[:, : size * n_batches].reshape(chains, n_batches, size).mean(axis=2)
    return float(np.std(batches, ddof=1) / np.sqrt(batches.size))


def mean_z(samples: np.ndarray, exact: float, exact_se: float = 0.0) -> float:
    """z-score of the sample mean against ``exact``: batch-means MCSE, plus ``exact_se`` (the
    standard error of a Monte Carlo oracle) in quadrature."""
    se = np.hypot(mcse_of_mean(samples), exact_se)
    return float((samples.mean() - exact) / se)


def assert_mean_matches(samples: np.ndarray, exact: float, label: str,
                        exact_se: float = 0.0) -> None:
    """Fail unless the sample mean is within ``Z_LIMIT`` Monte Carlo standard errors of ``exact``.

    ``exact_se``: standard error of ``exact`` when the oracle is itself a Monte Carlo estimate.
    """
    z = mean_z(samples, exact, exact_se)
    estimate = float(samples.mean())
    assert abs(z) < Z_LIMIT, f"{label}: estimate {estimate:.5f} vs exact {exact:.5f} (z = {z:.1f})"


def assert_centred_variance_matches(samples: np.ndarray, mean: float, var: float, label: str,
                                    var_se: float = 0.0) -> None:
    """Check the mean of ``(samples - mean)^2`` (centred at the *exact* mean) against the exact
    variance, with a batch-means band (plus ``var_se`` for a Monte Carlo oracle).

    Centring at the exact mean (not the sample mean) keeps the check sharp: the raw second moment
    of a parameter far from 0 has a Monte Carlo error dominated by ``mean^2`` and misses a wrong
    spread; ``E[(x - mean)^2] = var`` exactly when the mean is right.
    """
    assert_mean_matches((samples - mean) ** 2, var, f"{label} centred variance", var_se)


def assert_mean_and_spread_match(samples: np.ndarray, mean: float, var: float, label: str) -> None:
    """The mean and the centred variance of ``(chain, draw)`` samples against exact values."""
    assert_mean_matches(samples, mean, f"{label} mean")
    assert_centred_variance_matches(samples, mean, var, label)


def assert_cdf_matches(samples: np.ndarray, values: np.ndarray, pmf: np.ndarray, label: str,
                       probs=(0.25, 0.5, 0.75), cdf_se: np.ndarray | None = None) -> None:
    """Check ``P(x <= q)`` at the exact ``probs``-quantiles ``q`` of a discrete law (``values``,
    ``pmf``), each against its batch-means band (``cdf_se``: per-value standard errors of a Monte
    Carlo oracle's CDF)."""
    cdf = np.cumsum(pmf)
    for p in probs:
        i = int(np.searchsorted(cdf, p))
        se = 0.0 if cdf_se is None else float(cdf_se[i])
        assert_mean_matches(samples <= values[i], float(cdf[i]), f"{label} P(<= {values[i]})", se)


def assert_moments_match(samples: np.ndarray, mean: float, var: float, label: str) -> None:
    """Check the first two moments of ``(chain, draw)`` samples against exact values."""
    assert_mean_matches(samples, mean, f"{label} mean")
    assert_mean_matches(samples**2, var + mean**2, f"{label} second moment")


def sbc_ranks_uniform(ranks: np.ndarray, n_ranks: int, bins: int = 10) -> float:
    """Chi-square p-value of SBC ranks in ``0..n_ranks-1`` against the discrete uniform."""
    counts = np.bincount(ranks * bins // n_ranks, minlength=bins)
    return float(stats.chisquare(counts).pvalue)


def sbc_rank(truth: float, draws: np.ndarray, rng: np.random.Generator) -> int:
    """Rank of ``truth`` among ``draws``, ties broken at random (needed for discrete ``n``)."""
    below = int(np.sum(draws < truth))
    ties = int(np.sum(draws == truth))
    return below + int(rng.integers(0, ties + 1))
