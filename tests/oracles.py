"""Exact posteriors of small privatized-data models, by enumeration and quadrature.

These are the references the samplers are tested against. They use only NumPy/SciPy and the
mechanisms' own log-densities (which the mechanism tests check independently).
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats


def log_beta_binomial(k, n, a, b):
    """log P(K = k) for K ~ BetaBinomial(n, a, b); -inf outside 0..n."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    inside = (k >= 0) & (k <= n)
    k_in, n_in = np.where(inside, k, 0.0), np.where(inside, n, 0.0)
    out = (
        special.gammaln(n_in + 1) - special.gammaln(k_in + 1) - special.gammaln(n_in - k_in + 1)
        + special.betaln(k_in + a, n_in - k_in + b) - special.betaln(a, b)
    )
    return np.where(inside, out, -np.inf)


def _normalise(log_w):
    w = np.exp(log_w - np.max(log_w))
    return w / w.sum()


def bernoulli_posterior(s_dp, mechanism, a, b, n=None, n_dp=None, n_mechanism=None, log_prior_n=None,
                        n_max=None):
    """Exact posterior of ``theta ~ Beta(a, b)``, ``x_i ~ Bernoulli(theta)``, ``s_dp = sum x + e``.

    Bounded DP: give ``n``. Unbounded DP: give ``n_dp``, ``n_mechanism`` and ``log_prior_n``
    (a function of an integer array; ``None`` = flat on n >= 0); ``n`` is summed over 0..n_max.

    Returns a dict with ``theta_mean``, ``theta_var``, ``n_mean``, ``n_var`` and ``n_pmf``.
    """
    if n is not None:
        ns = np.array([n])
        log_w_n = np.zeros(1)
    else:
        ns = np.arange(0, n_max + 1)
        log_w_n = n_mechanism.logpdf(n_dp - ns)
        if log_prior_n is not None:
            log_w_n = log_w_n + log_prior_n(ns)
    ks = np.arange(0, ns.max() + 1)
    N, K = np.meshgrid(ns, ks, indexing="ij")
    log_w = log_w_n[:, None] + log_beta_binomial(K, N, a, b) + mechanism.logpdf(s_dp - K)
    w = _normalise(log_w)
    m1 = (a + K) / (a + b + N)
    m2 = m1 * (a + K + 1) / (a + b + N + 1)
    theta_mean = np.sum(w * m1)
    n_pmf = w.sum(axis=1)
    n_mean = np.sum(n_pmf * ns)
    return {
        "theta_mean": theta_mean,
        "theta_var": np.sum(w * m2) - theta_mean**2,
        "n_mean": n_mean,
        "n_var": np.sum(n_pmf * ns**2) - n_mean**2,
        "n_values": ns,
        "n_pmf": n_pmf,
    }


def two_variable_posterior(s_dp, mechanisms, n, a=1.0, b=1.0, c=1.0, d=1.0):
    """Exact posterior of the two-record-variable model.

    ``alpha ~ Beta(a, b)``, ``beta ~ Beta(c, d)``, ``X_i ~ Bernoulli(alpha)``,
    ``y_i | X_i ~ Bernoulli(beta if X_i else 1/2)``; released ``s_dp[0] = sum X + e_0`` and
    ``s_dp[1] = sum X*y + e_1`` with noise from ``mechanisms[0]`` and ``mechanisms[1]``.
    """
    k1 = np.arange(n + 1)[:, None]
    k2 = np.arange(n + 1)[None, :]
    log_w = (
        log_beta_binomial(k1, n, a, b) + log_beta_binomial(k2, k1, c, d)
        + mechanisms[0].logpdf(s_dp[0] - k1) + mechanisms[1].logpdf(s_dp[1] - k2)
    )
    w = _normalise(log_w)
    alpha = (a + k1) / (a + b + n)
    beta = (c + k2) / (c + d + k1)
    return {"alpha_mean": np.sum(w * alpha), "beta_mean": np.sum(w * beta)}


def log_normal_laplace(s, mean, var, scale):
    """log of the density at ``s`` of ``N(mean, var) + Laplace(0, scale)`` (closed form).

    With ``z = s - mean`` and ``sd = sqrt(var)``: ``1/(4b) exp(var/(2b^2)) [exp(-z/b) erfc((var/b -
    z)/(sd sqrt 2)) + exp(z/b) erfc((var/b + z)/(sd sqrt 2))]``, computed in log space.
    """
    z = s - mean
    sd = np.sqrt(var)
    t1 = -z / scale + special.log_ndtr((z - var / scale) / sd)
    t2 = z / scale + special.log_ndtr((-z - var / scale) / sd)
    return np.log(0.5 / scale) + var / (2 * scale**2) + np.logaddexp(t1, t2)


def normal_posterior(s_dp, laplace_scale, sigma, prior_mean, prior_sd, n=None, n_dp=None,
                     n_mechanism=None, n_max=None, grid=4001):
    """Posterior of ``mu ~ N(prior_mean, prior_sd)``, ``x_i ~ N(mu, sigma)``, ``s_dp = sum x + Lap``.

    Quadrature over ``mu`` on a fine grid; ``n`` fixed or summed over ``1..n_max`` with a flat prior
    and ``n_dp ~ n + n_mechanism`` noise.
    """
    mu = np.linspace(prior_mean - 8 * prior_sd, prior_mean + 8 * prior_sd, grid)
    ns = np.array([n]) if n is not None else np.arange(1, n_max + 1)
    log_w = (
        stats.norm.logpdf(mu[None, :], prior_mean, prior_sd)
        + log_normal_laplace(s_dp, ns[:, None] * mu[None, :], ns[:, None] * sigma**2, laplace_scale)
    )
    if n is None:
        log_w = log_w + n_mechanism.logpdf(n_dp - ns)[:, None]
    w = _normalise(log_w)
    mu_mean = np.sum(w * mu[None, :])
    n_pmf = w.sum(axis=1)
    return {
        "mu_mean": mu_mean,
        "mu_var": np.sum(w * mu[None, :] ** 2) - mu_mean**2,
        "n_mean": np.sum(n_pmf * ns),
        "n_var": np.sum(n_pmf * ns**2) - np.sum(n_pmf * ns) ** 2,
    }
