"""Monte Carlo error checks used by the statistical tests (independent of ArviZ versions)."""

from __future__ import annotations

import numpy as np
from scipy import stats

#: z-score beyond which a Monte Carlo estimate is declared wrong. With the fixed seeds in the
#: tests, a correct sampler passes each check with probability about 0.9999.
Z_LIMIT = 4.0


def draws_of(idata, name: str) -> np.ndarray:
    """Posterior draws of ``name`` as ``(chain, draw, ...)`` for InferenceData or DataTree."""
    return np.asarray(idata["posterior"][name].values, dtype=float)


def mcse_of_mean(samples: np.ndarray, n_batches: int = 20) -> float:
    """Batch-means Monte Carlo standard error of the mean of ``(chain, draw)`` samples."""
    chains, draws = samples.shape
    size = draws // n_batches
    batches = samples[:, : size * n_batches].reshape(chains, n_batches, size).mean(axis=2)
    return float(np.std(batches, ddof=1) / np.sqrt(batches.size))


def assert_mean_matches(samples: np.ndarray, exact: float, label: str) -> None:
    """Fail unless the sample mean is within ``Z_LIMIT`` Monte Carlo standard errors of ``exact``."""
    estimate = float(samples.mean())
    se = mcse_of_mean(samples)
    z = (estimate - exact) / se
    assert abs(z) < Z_LIMIT, f"{label}: estimate {estimate:.5f} vs exact {exact:.5f} (z = {z:.1f})"


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
