"""Monte Carlo error checks used by the statistical tests (independent of ArviZ versions)."""

from __future__ import annotations

import numpy as np
from scipy import stats

#: z-score beyond which a Monte Carlo estimate is declared wrong. With the fixed seeds in the
#: tests, a correct sampler passes each check with probability about 0.9999.
Z_LIMIT = 4.0

#: ``pmdp.sample`` settings of the small exact-posterior checks (one process: fast to start).
EXACT_POSTERIOR_SAMPLING = {
    "draws": 2000,
    "tune": 500,
    "chains": 2,
    "cores": 1,
    "progressbar": False,
    "compute_convergence_checks": False,
}


def trace_of(groups: dict, **options):
    """A trace of ``groups`` (group name -> dict of ``(chain, draw, ...)`` arrays, or an
    ``xarray.Dataset``) as the installed ArviZ builds one: InferenceData before ArviZ 1.0, an
    ``xarray.DataTree`` from it. ``options`` (``coords``, ``dims``) go to ``az.from_dict``."""
    import arviz as az
    import xarray as xr

    datasets = {k: v for k, v in groups.items() if isinstance(v, xr.Dataset)}
    if datasets:
        assert len(datasets) == len(groups) and not options, "Datasets or arrays, not both"
        if az.__version__.startswith("0."):
            return az.InferenceData(**datasets)
        return xr.DataTree.from_dict(datasets)
    if az.__version__.startswith("0."):
        return az.from_dict(**groups, **options)
    return az.from_dict(groups, **options)


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


def assert_mean_matches(
    samples: np.ndarray, exact: float, label: str, exact_se: float = 0.0
) -> None:
    """Fail unless the sample mean is within ``Z_LIMIT`` Monte Carlo standard errors of ``exact``.

    ``exact_se``: standard error of ``exact`` when the oracle is itself a Monte Carlo estimate.
    """
    z = mean_z(samples, exact, exact_se)
    estimate = float(samples.mean())
    assert abs(z) < Z_LIMIT, f"{label}: estimate {estimate:.5f} vs exact {exact:.5f} (z = {z:.1f})"


def assert_centred_variance_matches(
    samples: np.ndarray, mean: float, var: float, label: str, var_se: float = 0.0
) -> None:
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


def assert_cdf_matches(
    samples: np.ndarray,
    values: np.ndarray,
    pmf: np.ndarray,
    label: str,
    probs=(0.25, 0.5, 0.75),
    cdf_se: np.ndarray | None = None,
) -> None:
    """Check ``P(x <= q)`` at the exact ``probs``-quantiles ``q`` of a discrete law (``values``,
    ``pmf``), each against its batch-means band (``cdf_se``: per-value standard errors of a Monte
    Carlo oracle's CDF)."""
    cdf = np.cumsum(pmf)
    for p in probs:
        i = int(np.searchsorted(cdf, p))
        se = 0.0 if cdf_se is None else float(cdf_se[i])
        assert_mean_matches(samples <= values[i], float(cdf[i]), f"{label} P(<= {values[i]})", se)


def assert_moments_match(samples: np.ndarray, mean: float, var: float, label: str) -> None:
    """The mean and the variance centred at the exact mean (kept under its old name: the raw second
    moment it used to check let an ``n`` spread off by +65% pass)."""
    assert_mean_and_spread_match(samples, mean, var, label)


def effective_sample_size(samples: np.ndarray, n_batches: int = 20) -> float:
    """Batch-means effective sample size of the mean of ``(chain, draw)`` samples."""
    se = mcse_of_mean(samples, n_batches)
    var = float(np.var(samples))
    if se == 0.0:
        return float(samples.size) if var == 0.0 else 0.0
    return min(float(samples.size), var / se**2)


def assert_effective_draws(samples: np.ndarray, minimum: float, label: str) -> None:
    """Fail unless the batch-means effective sample size is at least ``minimum``: the floor a
    test's stated power rests on (with ``N`` effective draws the Monte Carlo error of a mean is
    ``sd / sqrt(N)``, so a mean ``6 sd / sqrt(N)`` off fails ``|z| < 4`` with probability
    > 0.97)."""
    ess = effective_sample_size(samples)
    assert ess >= minimum, f"{label}: {ess:.0f} effective draws, fewer than the {minimum} assumed"


#: p-value below which a goodness-of-fit test declares a sampled law wrong (about the two-sided
#: tail of ``Z_LIMIT`` = 4).
P_LIMIT = 1e-4


def assert_pmf_matches(
    samples: np.ndarray, values: np.ndarray, pmf: np.ndarray, label: str, min_expected: float = 5.0
) -> float:
    """Chi-square test of the sampled law of a discrete variable (``(chain, draw)`` integer
    samples) against an exact pmf on ``values``, after thinning each chain to the effective sample
    size (so the draws are close to independent). Adjacent values are pooled until every cell
    expects at least ``min_expected`` draws; values outside ``values`` fail. Returns the p-value.
    """
    values = np.asarray(values)
    pmf = np.asarray(pmf, dtype=float) / np.sum(pmf)
    assert np.all(np.isin(samples, values)), f"{label}: draws outside the support of the exact pmf"
    ess = effective_sample_size(samples.astype(float))
    chains, draws = samples.shape
    thin = max(1, int(np.ceil(samples.size / max(ess, 1.0))))
    kept = samples[:, ::thin].ravel()
    m = kept.size
    counts = np.array([np.sum(kept == v) for v in values], dtype=float)
    # pool adjacent cells (in order of values) until each expects >= min_expected
    cells_obs, cells_exp, obs, exp = [], [], 0.0, 0.0
    for c, p in zip(counts, pmf):
        obs, exp = obs + c, exp + p * m
        if exp >= min_expected:
            cells_obs.append(obs)
            cells_exp.append(exp)
            obs, exp = 0.0, 0.0
    if cells_exp:
        cells_obs[-1] += obs
        cells_exp[-1] += exp
    assert len(cells_exp) >= 3, f"{label}: too few effective draws ({m}) for a chi-square test"
    p_value = float(stats.chisquare(cells_obs, cells_exp).pvalue)
    assert p_value > P_LIMIT, (
        f"{label}: sampled pmf differs from the exact one (chi-square p = {p_value:.2g}, "
        f"{m} draws after thinning by {thin}, {len(cells_exp)} cells)"
    )
    return p_value


def sbc_ranks_uniform(ranks: np.ndarray, n_ranks: int, bins: int = 10) -> float:
    """Chi-square p-value of SBC ranks in ``0..n_ranks-1`` against the discrete uniform."""
    counts = np.bincount(ranks * bins // n_ranks, minlength=bins)
    return float(stats.chisquare(counts).pvalue)


def sbc_rank(truth: float, draws: np.ndarray, rng: np.random.Generator) -> int:
    """Rank of ``truth`` among ``draws``, ties broken at random (needed for discrete ``n``)."""
    below = int(np.sum(draws < truth))
    ties = int(np.sum(draws == truth))
    return below + int(rng.integers(0, ties + 1))


def sbc_rank_z(ranks: np.ndarray, n_ranks: int) -> tuple[float, float]:
    """z-scores of SBC ranks in ``0..n_ranks-1``: of their mean (a biased posterior) and of their
    mean distance from the middle, ``|u - 1/2|`` with ``u = (rank + 1/2) / n_ranks`` (too narrow a
    posterior puts the truths in the tails: distance above its uniform mean; too wide, below).

    Measured power of :func:`assert_sbc_ranks_uniform` (``tests/sbc_power.py``, docs/validation.md):
    with 500 replications and 40 ranks it fails for a posterior sd 20% too small with probability
    0.98 and 20% too large with probability 0.86-0.89; a correct sampler fails with probability
    0.006-0.009 (independent draws to a lag-one correlation of 0.1).
    """
    ranks = np.asarray(ranks)
    u_all = (np.arange(n_ranks) + 0.5) / n_ranks
    u = (ranks + 0.5) / n_ranks
    z_mean = (u.mean() - 0.5) / np.sqrt(np.var(u_all) / ranks.size)
    d_all = np.abs(u_all - 0.5)
    z_spread = (np.abs(u - 0.5).mean() - d_all.mean()) / np.sqrt(np.var(d_all) / ranks.size)
    return float(z_mean), float(z_spread)


def assert_sbc_ranks_uniform(ranks: np.ndarray, n_ranks: int, label: str) -> None:
    """Chi-square of the ranks (10 bins, p > P_LIMIT) and ``|z| < 3`` for their mean and their
    spread (:func:`sbc_rank_z`)."""
    p = sbc_ranks_uniform(np.asarray(ranks), n_ranks)
    z_mean, z_spread = sbc_rank_z(ranks, n_ranks)
    assert p > P_LIMIT and abs(z_mean) < 3 and abs(z_spread) < 3, (
        f"{label}: SBC ranks not uniform (chi-square p = {p:.2g}, mean z = {z_mean:.2f}, "
        f"spread z = {z_spread:.2f}; spread z > 0: posterior too narrow)"
    )
