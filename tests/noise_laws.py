"""Exact laws of one noise coordinate, from closed forms written here (not the package's), and a
goodness-of-fit check of draws against them: the oracle of the mechanisms' simulators and release
samplers at sensitivities other than 1 (``test_mechanisms.py``, ``test_release.py``)."""

import math

import numpy as np
from scipy import stats

#: Families of ``Law``: continuous Laplace and normal, discrete Laplace and Gaussian, Tulap.
EPSILON_FAMILIES = ("laplace", "dlaplace", "tulap")


class Law:
    """The law of one noise coordinate of ``family`` at ``scale`` (Laplace ``b``, Gaussian sigma).

    ``logpdf``; ``variance``; ``cdf`` (every family: on the lattice for the discrete ones)."""

    def __init__(self, family: str, scale: float):
        self.family, self.scale = family, scale
        self.discrete = family in ("dlaplace", "dgauss")
        if family in ("dlaplace", "tulap", "dgauss"):
            width = 45 * scale if family != "dgauss" else 12 * scale  # tail mass < 1e-19
            self.lattice = np.arange(-math.ceil(width) - 2, math.ceil(width) + 3)
            if family == "dgauss":
                weights = np.exp(-(self.lattice**2) / (2 * scale**2))
                self.pmf = weights / weights.sum()
            else:
                q = math.exp(-1.0 / scale)
                self.pmf = (1 - q) / (1 + q) * q ** np.abs(self.lattice)
            self.lattice_cdf = np.cumsum(self.pmf)
        discrete_variance = (
            float(np.sum(self.pmf * self.lattice.astype(float) ** 2)) if hasattr(self, "pmf") else 0
        )
        self.variance = {
            "laplace": 2 * scale**2,
            "normal": scale**2,
            "dlaplace": discrete_variance,
            "dgauss": discrete_variance,
            "tulap": discrete_variance + 1 / 12,
        }[family]

    def _index(self, k):
        return np.clip(np.searchsorted(self.lattice, k), 0, self.lattice.size - 1)

    def logpdf(self, e):
        e = np.asarray(e, dtype=float)
        if self.family == "laplace":
            return stats.laplace(scale=self.scale).logpdf(e)
        if self.family == "normal":
            return stats.norm(scale=self.scale).logpdf(e)
        if self.family == "tulap":
            return np.log(self.pmf[self._index(np.rint(e))])
        on = e == np.round(e)
        return np.where(on, np.log(self.pmf[self._index(np.where(on, e, 0))]), -np.inf)

    def cdf(self, x):
        x = np.asarray(x, dtype=float)
        if self.family == "laplace":
            return stats.laplace(scale=self.scale).cdf(x)
        if self.family == "normal":
            return stats.norm(scale=self.scale).cdf(x)
        if self.discrete:
            index = np.searchsorted(self.lattice, np.floor(x), side="right") - 1
            return np.where(index < 0, 0.0, self.lattice_cdf[np.maximum(index, 0)])
        # Tulap: the discrete Laplace pmf smoothed by U(-1/2, 1/2)
        index = self._index(np.rint(x))
        below = np.where(index > 0, self.lattice_cdf[np.maximum(index - 1, 0)], 0.0)
        return below + self.pmf[index] * np.clip(x - self.lattice[index] + 0.5, 0.0, 1.0)


def assert_draws_follow(draws, law: Law, label: str, cells: int = 40):
    """The draws' law and their variance match ``law``.

    Law: KS for a continuous law; for a discrete one, a chi-square of ``cells`` cells of about
    equal probability (edges on the lattice, so it works at any scale); p > 1e-4 each. Variance:
    ``|z| < 4`` against the exact variance, the standard error from the draws' fourth moment.

    Power: every law here has kurtosis <= 6, so the variance of N draws has a relative standard
    error <= sqrt(5 / N) (1.6% at N = 20,000, 2.5% at 8,000, 3.5% at 4,000, 4.5% at 2,500): a
    variance off by 6 standard errors (10% to 27%, a scale off by 5% to 13%) fails with
    probability > 0.97."""
    draws = np.asarray(draws, dtype=float).ravel()
    if law.discrete:
        assert np.all(draws == np.round(draws)), f"{label}: off-lattice draws"
        edges = np.unique(
            law.lattice[np.searchsorted(law.lattice_cdf, np.arange(1, cells) / cells)]
        )
        edges = np.concatenate([edges, [np.inf]])  # cell j: (edges[j-1], edges[j]]
        probabilities = np.diff(np.concatenate([[0.0], law.cdf(edges[:-1]), [1.0]]))
        observed = np.bincount(np.searchsorted(edges, draws, side="left"), minlength=edges.size)
        p = stats.chisquare(observed, probabilities * draws.size).pvalue
    else:
        p = stats.kstest(draws, law.cdf).pvalue
    assert p > 1e-4, f"{label}: goodness of fit p = {p:.2g}"
    centred = draws - draws.mean()
    variance = np.mean(centred**2)
    se = math.sqrt((np.mean(centred**4) - variance**2) / draws.size)
    z = (variance - law.variance) / se
    assert abs(z) < 4, f"{label}: variance {variance:.4g} vs exact {law.variance:.4g} (z = {z:.1f})"
