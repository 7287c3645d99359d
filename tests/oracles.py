"""Exact posteriors of small privatized-data models, by enumeration and quadrature.

These are the references the samplers are tested against. They use only NumPy/SciPy and the
mechanisms' own log-densities (which the mechanism tests check independently).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal, special, stats


def log_beta_binomial(k, n, a, b):
    """log P(K = k) for K ~ BetaBinomial(n, a, b); -inf outside 0..n."""
    k, n = np.broadcast_arrays(np.asarray(k, dtype=float), np.asarray(n, dtype=float))
    inside = (k >= 0) & (k <= n)
    k_in, n_in = np.where(inside, k, 0.0), np.where(inside, n, 0.0)
    out = (
        special.gammaln(n_in + 1)
        - special.gammaln(k_in + 1)
        - special.gammaln(n_in - k_in + 1)
        + special.betaln(k_in + a, n_in - k_in + b)
        - special.betaln(a, b)
    )
    return np.where(inside, out, -np.inf)


def _normalise(log_w):
    w = np.exp(log_w - np.max(log_w))
    return w / w.sum()


def bernoulli_posterior(
    s_dp,
    mechanism,
    a,
    b,
    n=None,
    n_dp=None,
    n_mechanism=None,
    log_prior_n=None,
    n_max=None,
    trials=1,
):
    """Exact posterior of ``theta ~ Beta(a, b)``, ``x_i ~ Bernoulli(theta)``, ``s_dp = sum x + e``.

    Bounded DP: give ``n``. Unbounded DP: give ``n_dp``, ``n_mechanism`` and ``log_prior_n``
    (a function of an integer array; ``None`` = flat on n >= 0); ``n`` is summed over 0..n_max.
    ``trials``: records ``Binomial(trials, theta)`` instead (their sum is that of ``trials * n``
    Bernoulli records).

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
    ks = np.arange(0, trials * ns.max() + 1)
    N, K = np.meshgrid(trials * ns, ks, indexing="ij")
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
        log_beta_binomial(k1, n, a, b)
        + log_beta_binomial(k2, k1, c, d)
        + mechanisms[0].logpdf(s_dp[0] - k1)
        + mechanisms[1].logpdf(s_dp[1] - k2)
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


def normal_posterior(
    s_dp,
    laplace_scale,
    sigma,
    prior_mean,
    prior_sd,
    n=None,
    n_dp=None,
    n_mechanism=None,
    n_max=None,
    grid=4001,
    slope=1.0,
    shift=0.0,
):
    """Posterior of ``mu ~ N(prior_mean, prior_sd)``, ``x_i ~ N(mu, sigma)``,
    ``s_dp = sum(slope x + shift) + Lap``.

    Quadrature over ``mu`` on a fine grid; ``n`` fixed or summed over ``1..n_max`` with a flat prior
    and ``n_dp ~ n + n_mechanism`` noise.
    """
    mu = np.linspace(prior_mean - 8 * prior_sd, prior_mean + 8 * prior_sd, grid)
    ns = np.array([n]) if n is not None else np.arange(1, n_max + 1)
    log_w = stats.norm.logpdf(mu[None, :], prior_mean, prior_sd) + log_normal_laplace(
        s_dp,
        ns[:, None] * (slope * mu[None, :] + shift),
        ns[:, None] * (slope * sigma) ** 2,
        laplace_scale,
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
        "n_values": ns,
        "n_pmf": n_pmf,
    }


# --------------------------------------------------------------------------------------------------
# Oracles of the interweaving tests (tests/test_interweave.py)
# --------------------------------------------------------------------------------------------------
def _sample_sizes(n, n_dp, n_mechanism, n_max):
    """``(ns, log_w_n)``: the values of ``n`` and their log weights (flat prior on ``n >= 0``)."""
    if n is not None:
        return np.array([n]), np.zeros(1)
    ns = np.arange(0, n_max + 1)
    return ns, n_mechanism.logpdf(n_dp - ns)


def _n_summary(ns, n_pmf):
    n_mean = float(np.sum(n_pmf * ns))
    return {
        "n_mean": n_mean,
        "n_var": float(np.sum(n_pmf * (ns - n_mean) ** 2)),  # centred: exact at n = 1e8 too
        "n_values": ns,
        "n_pmf": n_pmf,
    }


def _grid_summary(name, grid, w):
    """Mean, variance and CDF on ``grid`` of a posterior given by weights ``w`` on ``grid``."""
    mean = float(np.sum(w * grid))
    return {
        f"{name}_mean": mean,
        f"{name}_var": float(np.sum(w * (grid - mean) ** 2)),
        f"{name}_grid": grid,
        f"{name}_cdf": np.cumsum(w),
    }


def regression_posterior(
    s_dp,
    scales,
    n=None,
    n_dp=None,
    n_mechanism=None,
    n_max=None,
    mu_prior=(0.0, 1.0),
    beta_prior=(0.0, 1.0),
    grid=121,
    sx_points=8,
):
    r"""Posterior of ``mu ~ N(mu_prior)``, ``beta ~ N(beta_prior)``, ``x_i ~ N(mu, 1)``,
    ``y_i | x_i ~ N(beta x_i, 1)``, released ``s_dp = (sum x + Lap(scales[0]), sum y + Lap(scales[1]))``.

    How it is computed: given ``(mu, beta, n)``, ``Sx = sum x ~ N(n mu, n)`` and, given ``Sx``,
    ``Sy = sum y ~ N(beta Sx, n)``. The noise of ``Sy`` is integrated in closed form
    (:func:`log_normal_laplace`, tabulated in ``s_dp[1] - beta Sx`` and interpolated linearly);
    the remaining integral over ``Sx`` is a trapezoid rule on a grid of
    step ``sqrt(n) / sx_points`` covering ``n mu +- 10 sqrt(n)`` for every ``mu`` of the grid (the Laplace
    kink of ``Sx`` costs O(h^2)). For all ``(mu, beta)`` at once it is a matrix product
    ``A[mu, Sx] @ B[Sx, beta]``, scaled row- and column-wise in log space. ``(mu, beta)`` lie on a
    ``grid x grid`` product grid over the prior means +- 7 prior sds; ``n`` is fixed or summed over
    ``0..n_max`` (flat prior, ``n_dp - n ~ n_mechanism``; at ``n = 0`` both sums are exactly 0).
    Checked in ``test_interweave.py`` against the conjugate posterior with almost no noise and
    against importance sampling from the prior.

    Returns a dict with ``mu_mean``, ``mu_var``, ``beta_mean``, ``beta_var`` (and their grids and
    CDFs), ``n_mean``, ``n_var``, ``n_values``, ``n_pmf``.
    """
    mu = np.linspace(mu_prior[0] - 7 * mu_prior[1], mu_prior[0] + 7 * mu_prior[1], grid)
    beta = np.linspace(beta_prior[0] - 7 * beta_prior[1], beta_prior[0] + 7 * beta_prior[1], grid)
    ns, log_w_n = _sample_sizes(n, n_dp, n_mechanism, n_max)
    lap_x, lap_y = (lambda e, b=b: -np.abs(e) / b - np.log(2 * b) for b in scales)
    log_lik = np.empty((len(ns), grid, grid))
    for j, size in enumerate(ns):
        if size == 0:
            log_lik[j] = lap_x(s_dp[0]) + lap_y(s_dp[1])
            continue
        sd = np.sqrt(size)
        step = sd / sx_points
        sx = np.arange(size * mu[0] - 10 * sd, size * mu[-1] + 10 * sd + step, step)
        log_a = -0.5 * ((sx[None, :] - size * mu[:, None]) / sd) ** 2 - np.log(
            sd * np.sqrt(2 * np.pi)
        )
        log_a = log_a + lap_x(s_dp[0] - sx) + np.log(step)
        # log density of Sy + noise at s_dp[1], a smooth function of z = s_dp[1] - beta Sx:
        # tabulated once per n on a fine grid and interpolated (error < 1e-6 in log).
        z = s_dp[1] - beta[None, :] * sx[:, None]
        z_grid = np.linspace(z.min(), z.max(), 20_001)
        log_b = np.interp(z, z_grid, log_normal_laplace(z_grid, 0.0, size, scales[1]))
        a_max = log_a.max(axis=1, keepdims=True)
        b_max = log_b.max(axis=0, keepdims=True)
        with np.errstate(divide="ignore"):
            log_lik[j] = a_max + b_max + np.log(np.exp(log_a - a_max) @ np.exp(log_b - b_max))
    log_w = (
        log_w_n[:, None, None]
        + log_lik
        + stats.norm.logpdf(mu, *mu_prior)[None, :, None]
        + stats.norm.logpdf(beta, *beta_prior)[None, None, :]
    )
    w = _normalise(log_w)
    return {
        **_grid_summary("mu", mu, w.sum(axis=(0, 2))),
        **_grid_summary("beta", beta, w.sum(axis=(0, 1))),
        **_n_summary(ns, w.sum(axis=(1, 2))),
    }


def poisson_posterior(
    s_dp, mechanism, a, b, n=None, n_dp=None, n_mechanism=None, n_max=None, k_max=3000
):
    """Posterior of ``lam ~ Gamma(a, rate b)``, ``x_i ~ Poisson(lam)``, ``s_dp = sum x + e``.

    How it is computed: ``K = sum x ~ Poisson(n lam)``, so with ``lam`` integrated out ``K | n`` is
    negative binomial, ``P(K = k | n) = Gamma(a + k) / (Gamma(a) k!) (b / (b + n))^a
    (n / (b + n))^k``, and ``lam | k, n ~ Gamma(a + k, b + n)``. The posterior is the mixture of
    these Gammas with weights ``P(k | n) eta_s(s_dp - k) [eta_n(n_dp - n)]``, enumerated over
    ``k = 0..k_max`` and ``n`` (fixed, or ``0..n_max`` with a flat prior). Checked in
    ``test_interweave.py`` against the conjugate case without noise and importance sampling.

    Returns ``lam_mean``, ``lam_var``, ``n_mean``, ``n_var``, ``n_values``, ``n_pmf``.
    """
    ns, log_w_n = _sample_sizes(n, n_dp, n_mechanism, n_max)
    return _poisson_mixture(s_dp, mechanism, a, b, ns, log_w_n, np.arange(k_max + 1))


def _poisson_mixture(s_dp, mechanism, a, b, ns, log_w_n, ks):
    """The Gamma mixture of :func:`poisson_posterior` over ``n`` in ``ns`` (log weights
    ``log_w_n``) and the true sum ``k`` in ``ks``."""
    N, K = np.meshgrid(ns.astype(float), ks.astype(float), indexing="ij")
    with np.errstate(divide="ignore", invalid="ignore"):
        log_pk = (
            special.gammaln(a + K)
            - special.gammaln(a)
            - special.gammaln(K + 1)
            + a * np.log(b / (b + N))
            + special.xlogy(K, N / (b + N))
        )
    log_pk = np.where((N == 0) & (K > 0), -np.inf, log_pk)
    w = _normalise(log_w_n[:, None] + log_pk + mechanism.logpdf(s_dp - K))
    m1 = (a + K) / (b + N)
    m2 = m1 * (a + K + 1) / (b + N)
    lam_mean = float(np.sum(w * m1))
    return {
        "lam_mean": lam_mean,
        "lam_var": float(np.sum(w * m2) - lam_mean**2),
        **_n_summary(ns, w.sum(axis=1)),
    }


def log_gamma_laplace(s, shape, scale):
    r"""log of the density at ``s`` of ``Gamma(shape, rate 1) + Laplace(0, scale)``, ``scale > 1``.

    Closed form: splitting the convolution integral at ``S = s``,

    .. math::

        \frac{1}{2b}\Bigl[e^{-s/b} (1 - 1/b)^{-k} P(k, (1 - 1/b) s)\,[s > 0]
            + e^{s/b} (1 + 1/b)^{-k} Q(k, (1 + 1/b) \max(s, 0))\Bigr]

    with ``P``, ``Q`` the regularised incomplete gamma functions (each piece is a Gamma integral
    with rate ``1 -+ 1/b``, hence ``b > 1``). Checked against ``scipy.integrate.quad``.
    """
    if scale <= 1:
        raise ValueError("log_gamma_laplace needs scale > 1")
    s, k = np.broadcast_arrays(np.asarray(s, dtype=float), np.asarray(shape, dtype=float))
    lo, hi = 1 - 1 / scale, 1 + 1 / scale
    with np.errstate(divide="ignore"):
        upper = s / scale - k * np.log(hi) + np.log(special.gammaincc(k, hi * np.maximum(s, 0)))
        lower = np.where(
            s > 0,
            -s / scale - k * np.log(lo) + np.log(special.gammainc(k, lo * np.maximum(s, 0))),
            -np.inf,
        )
    return -np.log(2 * scale) + np.logaddexp(upper, lower)


def gamma_shape_posterior(
    s_dp, scale, a, b, n=None, n_dp=None, n_mechanism=None, n_max=None, theta_max=25.0, grid=10001
):
    """Posterior of ``theta ~ Gamma(a, rate b)``, ``x_i ~ Gamma(theta, rate 1)``,
    ``s_dp = sum x + Lap(scale)``.

    How it is computed: ``sum x ~ Gamma(n theta, 1)``; its convolution with the Laplace noise is
    :func:`log_gamma_laplace` (closed form); the posterior of ``theta`` is a trapezoid rule on a
    uniform grid over ``(0, theta_max]``, ``n`` fixed or summed over ``0..n_max`` (flat prior; at
    ``n = 0`` the sum is exactly 0 and the release says nothing about ``theta``).

    Returns ``theta_mean``, ``theta_var`` (grid and CDF), ``n_mean``, ``n_var``, ``n_values``,
    ``n_pmf``.
    """
    theta = np.linspace(theta_max / grid, theta_max, grid)
    ns, log_w_n = _sample_sizes(n, n_dp, n_mechanism, n_max)
    log_lik = np.where(
        ns[:, None] == 0,
        -np.abs(s_dp) / scale - np.log(2 * scale),
        log_gamma_laplace(s_dp, np.maximum(ns[:, None], 1) * theta[None, :], scale),
    )
    w = _normalise(log_w_n[:, None] + log_lik + stats.gamma.logpdf(theta, a, scale=1 / b)[None, :])
    return {**_grid_summary("theta", theta, w.sum(axis=0)), **_n_summary(ns, w.sum(axis=1))}


def importance_posterior(
    simulate, log_eta, draws, rng, n_values=None, n_log_weights=None, batch=100_000
):
    r"""Self-normalised importance sampling of ``pi(theta, n | s_dp)`` from the prior.

    How it is computed: ``theta`` from the prior, ``n`` from ``q(n) ∝ exp(n_log_weights)`` (the
    flat prior times ``eta_n(n_dp - n)``: the exact ``n`` part of the target) or fixed, the records'
    statistic ``T`` simulated given both (one row per draw), and the weight
    ``eta_s(s_dp - T)`` (``log_eta(T)``). Then ``E[h] ~ sum w h / sum w`` with the delta-method
    standard error ``sqrt(sum w^2 (h - E[h])^2) / sum w`` (the weights' ESS is reported).

    ``simulate(rng, size, n) -> (theta, T)`` draws ``size`` parameters from the prior and, for each,
    the statistic of ``n`` records (``n`` is ``None`` when fixed by the caller).

    Returns ``{"theta": (mean, se), "theta_var": (var, se), "n": (mean, se), "n_var", "n_values",
    "n_pmf", "n_cdf_se", "ess"}`` (``n`` entries only with ``n_values``; ``n_cdf_se`` are the
    standard errors of the estimated ``P(n <= v)`` for each ``v`` of ``n_values``).
    """
    thetas, ns, log_ws = [], [], []
    done = 0
    while done < draws:
        size = min(batch, draws - done)
        if n_values is None:
            n = np.full(size, -1)
            theta, T = simulate(rng, size, None)
        else:
            p = _normalise(np.asarray(n_log_weights, dtype=float))
            n = rng.choice(n_values, size=size, p=p)
            theta, T = np.empty(size), None
            for value in np.unique(n):
                rows = np.flatnonzero(n == value)
                theta[rows], T_rows = simulate(rng, rows.size, int(value))
                if T is None:
                    T = np.empty((size, *np.shape(T_rows)[1:]))
                T[rows] = T_rows
        thetas.append(theta)
        ns.append(n)
        log_ws.append(log_eta(T))
        done += size
    theta, n, log_w = (np.concatenate(v) for v in (thetas, ns, log_ws))
    w = _normalise(log_w)

    def estimate(h):
        mean = float(np.sum(w * h))
        return mean, float(np.sqrt(np.sum(w**2 * (h - mean) ** 2)))

    mean = estimate(theta)
    out = {
        "theta": mean,
        "theta_var": estimate((theta - mean[0]) ** 2),
        "ess": float(1 / np.sum(w**2)),
    }
    if n_values is not None:
        out["n"] = estimate(n.astype(float))
        out["n_var"] = estimate((n - out["n"][0]) ** 2)
        out["n_values"] = np.asarray(n_values)
        out["n_pmf"] = np.bincount(n - np.min(n_values), weights=w, minlength=len(n_values))
        out["n_cdf_se"] = np.array([estimate((n <= v).astype(float))[1] for v in n_values])
    return out


def dirichlet_posterior_mc(
    s_dp, scale, clamp, a, b, rng, n=None, n_dp=None, n_mechanism=None, n_max=None, draws=1_000_000
):
    """Posterior of ``c ~ Gamma(a, rate b)``, ``x_i ~ Dirichlet(c (1, 1, 1))``, released
    ``s_dp = sum_i log(max(x_i, clamp)) + Lap(scale)`` per coordinate, by Monte Carlo.

    How it is computed: :func:`importance_posterior` from the prior of ``c`` (and ``q(n) ∝
    eta_n(n_dp - n)`` on ``0..n_max``), records drawn as normalised Gammas; no closed form of the
    law of the clamped sum of log-shares is known. Its Monte Carlo standard errors are returned
    with the estimates and enter the tests' tolerances. The importance sampler itself is checked
    against the exact oracles of the other models in ``test_interweave.py``.
    """
    s_dp = np.asarray(s_dp, dtype=float)

    def simulate(rng, size, size_n):
        c = rng.gamma(a, 1 / b, size=size)
        rows = n if size_n is None else size_n
        g = rng.gamma(c[:, None, None], size=(size, rows, 3))
        total = g.sum(axis=2, keepdims=True)
        # All three Gammas can underflow to 0 for c below ~1e-3 (prior mass < 1e-6): then one share
        # is 1 up to rounding, a uniformly chosen one.
        empty = total[..., 0] == 0
        g[empty] = np.eye(3)[rng.integers(0, 3, size=int(empty.sum()))]
        x = g / np.where(empty[..., None], 1.0, total)
        return c, np.log(np.maximum(x, clamp)).sum(axis=1)

    def log_eta(T):
        return np.sum(-np.abs(s_dp - T) / scale - np.log(2 * scale), axis=1)

    if n is not None:
        return importance_posterior(simulate, log_eta, draws, rng)
    ns, log_w_n = _sample_sizes(None, n_dp, n_mechanism, n_max)
    return importance_posterior(simulate, log_eta, draws, rng, n_values=ns, n_log_weights=log_w_n)


# --------------------------------------------------------------------------------------------------
# Several record tables (tests/test_tables.py)
# --------------------------------------------------------------------------------------------------
def bernoulli_tables_posterior(tables, a, b, size_max=60):
    """Exact posterior of ``theta ~ Beta(a, b)`` shared by two tables of Bernoulli(theta) records.

    Each table is a dict with ``s_dp`` and ``mechanism`` (its release ``s_dp = sum x + e``) and
    either ``n`` (known) or ``n_dp``, ``n_mechanism`` and optionally ``log_prior_n`` (``None``:
    flat on ``n >= 0``). Tables are independent given ``theta``; enumerated over each table's
    successes ``k`` and failures ``f`` (``k + f = n <= size_max``), with ``theta`` integrated out
    (Beta-Binomial): ``p(k, f) ∝ prod_t w_t(k_t, f_t) B(a + k_1 + k_2, b + f_1 + f_2)``.

    Returns ``theta_mean``, ``theta_var`` and, per table ``t``, ``n{t}_values``, ``n{t}_pmf``,
    ``n{t}_mean``, ``n{t}_var``.
    """
    counts = np.arange(size_max + 1)
    K, F = np.meshgrid(counts, counts, indexing="ij")
    N = K + F
    log_w = []
    for table in tables:
        lw = (
            special.gammaln(N + 1)
            - special.gammaln(K + 1)
            - special.gammaln(F + 1)
            + table["mechanism"].logpdf(table["s_dp"] - K)
        )
        if "n" in table:
            lw = np.where(N == table["n"], lw, -np.inf)
        else:
            lw = lw + table["n_mechanism"].logpdf(table["n_dp"] - N)
            if table.get("log_prior_n") is not None:
                lw = lw + table["log_prior_n"](N)
        log_w.append(np.where(N <= size_max, lw, -np.inf))
    (lw1, lw2) = log_w
    k1, f1 = K.ravel(), F.ravel()
    keep = np.isfinite(lw1.ravel())
    k1, f1, l1 = k1[keep], f1[keep], lw1.ravel()[keep]
    # log joint over (entry of table 1) x (k2, f2), theta integrated out
    log_joint = (
        l1[:, None, None]
        + lw2[None]
        + special.betaln(a + k1[:, None, None] + K[None], b + f1[:, None, None] + F[None])
    )
    w = _normalise(np.where(np.isfinite(log_joint), log_joint, -np.inf))
    s_k = a + k1[:, None, None] + K[None]
    s_f = b + f1[:, None, None] + F[None]
    m1 = s_k / (s_k + s_f)
    m2 = m1 * (s_k + 1) / (s_k + s_f + 1)
    theta_mean = float(np.sum(w * m1))
    out = {"theta_mean": theta_mean, "theta_var": float(np.sum(w * m2) - theta_mean**2)}
    n1 = k1 + f1
    pmf1 = np.bincount(n1, weights=w.sum(axis=(1, 2)), minlength=size_max + 1)
    pmf2 = np.bincount(N.ravel(), weights=w.sum(axis=0).ravel(), minlength=size_max + 1)
    for t, pmf in ((1, pmf1), (2, pmf2)):
        values = np.arange(pmf.size)
        mean = float(np.sum(values * pmf))
        out.update(
            {
                f"n{t}_values": values,
                f"n{t}_pmf": pmf,
                f"n{t}_mean": mean,
                f"n{t}_var": float(np.sum(pmf * (values - mean) ** 2)),
            }
        )
    return out


# --------------------------------------------------------------------------------------------------
# Oracles of the sums level (tests/test_sums.py): windows around the release, so n may be 1e8
# --------------------------------------------------------------------------------------------------
def _window(centre: float, half: int, low: int = 0) -> np.ndarray:
    """The integers within ``half`` of ``centre`` and ``>= low``."""
    middle = int(round(centre))
    return np.arange(max(middle - half, low), middle + half + 1)


def bernoulli_window_posterior(s_dp, mechanism, a, b, n_dp, n_mechanism, half=200):
    """:func:`bernoulli_posterior` under unbounded DP with a flat prior, summed over ``n`` and
    ``k = sum x`` within ``half`` of ``n_dp`` and ``s_dp`` only (the noise's weight beyond is
    below ``exp(-half / scale)``), so that ``n`` may be 10^8. Also returns the mean and variance
    of ``k``, the true sum."""
    ns, ks = _window(n_dp, half), _window(s_dp, half)
    N, K = np.meshgrid(ns, ks, indexing="ij")
    log_w = (
        n_mechanism.logpdf(n_dp - N) + log_beta_binomial(K, N, a, b) + mechanism.logpdf(s_dp - K)
    )
    w = _normalise(log_w)
    m1 = (a + K) / (a + b + N)
    m2 = m1 * (a + K + 1) / (a + b + N + 1)
    theta_mean = float(np.sum(w * m1))
    k_pmf = w.sum(axis=0)
    k_mean = float(np.sum(k_pmf * ks))
    return {
        "theta_mean": theta_mean,
        "theta_var": float(np.sum(w * m2) - theta_mean**2),
        "k_mean": k_mean,
        "k_var": float(np.sum(k_pmf * (ks - k_mean) ** 2)),
        **_n_summary(ns, w.sum(axis=1)),
    }


def poisson_window_posterior(s_dp, mechanism, a, b, n_dp, n_mechanism, half=200):
    """:func:`poisson_posterior` under unbounded DP (flat prior on ``n``), summed over windows
    around ``n_dp`` and ``s_dp`` (see :func:`bernoulli_window_posterior`)."""
    ns, ks = _window(n_dp, half), _window(s_dp, half)
    return _poisson_mixture(s_dp, mechanism, a, b, ns, n_mechanism.logpdf(n_dp - ns), ks)


def categorical_posterior(s_dp, mechanism, alpha, n_dp, n_mechanism, half=40):
    """Posterior of ``p ~ Dirichlet(alpha)`` (3 categories), ``x_i ~ Categorical(p)``, the one-hot
    counts released as ``s_dp = c + e`` (one noise draw per category), ``n_dp = n + e_n`` (flat
    prior on ``n``).

    How it is computed: with ``p`` integrated out the counts are Dirichlet-multinomial,
    ``P(c | n) = n! / prod c_k! * Gamma(A) / Gamma(n + A) * prod Gamma(c_k + alpha_k) /
    Gamma(alpha_k)`` (``A = sum alpha``), and ``p | c ~ Dirichlet(alpha + c)``; the posterior is
    that mixture, enumerated over ``c_1, c_2`` within ``half`` of ``s_dp[:2]`` and ``n`` within
    ``half`` of ``n_dp`` (``c_3 = n - c_1 - c_2``).

    Returns ``p_mean``, ``p_var`` (per category), ``n_mean``, ``n_var``, ``n_values``, ``n_pmf``.
    """
    alpha = np.asarray(alpha, dtype=float)
    total = alpha.sum()
    ns, c1, c2 = _window(n_dp, half), _window(s_dp[0], half), _window(s_dp[1], half)
    N, C1, C2 = np.meshgrid(ns, c1, c2, indexing="ij")
    C3 = N - C1 - C2
    counts = np.stack([C1, C2, C3]).astype(float)
    inside = C3 >= 0
    safe = np.where(inside, counts, 0.0)
    log_w = (
        special.gammaln(N + 1.0)
        - special.gammaln(safe + 1.0).sum(axis=0)
        + special.gammaln(total)
        - special.gammaln(N + total)
        + (
            special.gammaln(safe + alpha[:, None, None, None])
            - special.gammaln(alpha)[:, None, None, None]
        ).sum(axis=0)
        + n_mechanism.logpdf(n_dp - N)
        + sum(mechanism.logpdf(s_dp[k] - counts[k]) for k in range(3))
    )
    w = _normalise(np.where(inside, log_w, -np.inf))
    posterior_alpha = safe + alpha[:, None, None, None]
    a0 = posterior_alpha.sum(axis=0)
    m1 = posterior_alpha / a0
    m2 = m1 * (posterior_alpha + 1) / (a0 + 1)
    p_mean = np.sum(w * m1, axis=(1, 2, 3))
    return {
        "p_mean": p_mean,
        "p_var": np.sum(w * m2, axis=(1, 2, 3)) - p_mean**2,
        **_n_summary(ns, w.sum(axis=(1, 2))),
    }


def negative_binomial_posterior(s_dp, mechanism, r, a, b, n, k_max=2000):
    """Posterior of ``p ~ Beta(a, b)``, ``x_i ~ NegativeBinomial(r, p)`` (failures before the
    ``r``-th success, ``r`` known), ``s_dp = sum x + e``, ``n`` known.

    How it is computed: ``K = sum x ~ NegativeBinomial(n r, p)``; with ``p`` integrated out
    ``P(K = k) = Gamma(k + n r) / (Gamma(n r) k!) B(a + n r, b + k) / B(a, b)`` and
    ``p | k ~ Beta(a + n r, b + k)``: the mixture over ``k = 0..k_max``.
    """
    k = np.arange(k_max + 1.0)
    shape = n * r
    log_w = (
        special.gammaln(k + shape)
        - special.gammaln(shape)
        - special.gammaln(k + 1)
        + special.betaln(a + shape, b + k)
        + mechanism.logpdf(s_dp - k)
    )
    w = _normalise(log_w)
    a_post, b_post = a + shape, b + k
    m1 = a_post / (a_post + b_post)
    m2 = m1 * (a_post + 1) / (a_post + b_post + 1)
    p_mean = float(np.sum(w * m1))
    return {"p_mean": p_mean, "p_var": float(np.sum(w * m2) - p_mean**2)}


# --------------------------------------------------------------------------------------------------
# A model with a Potential, a Deterministic and a transformed parameter (tests/test_model_terms.py)
# --------------------------------------------------------------------------------------------------
def bernoulli_release_log_likelihood(p, s_dp, mechanism, ns, log_w_n):
    """``log sum_n w(n) sum_k Binom(k; n, p) eta(s_dp - k)`` for each ``p`` (an array), and the
    per-``n`` terms ``(len(ns), len(p))``; ``log_w_n`` = ``log g(n) eta_n(n_dp - n)`` (zeros for a
    known ``n``)."""
    p = np.asarray(p, dtype=float)
    ks = np.arange(int(np.max(ns)) + 1)
    log_binom = stats.binom.logpmf(ks[None, None, :], ns[:, None, None], p[None, :, None])
    log_noise = mechanism.logpdf(s_dp - ks)
    per_n = np.asarray(log_w_n)[:, None] + special.logsumexp(
        log_binom + log_noise[None, None, :], axis=2
    )
    return special.logsumexp(per_n, axis=0), per_n


def tilted_tables_posterior(a_table, b_table, tilt, grid=601, potential=True):
    """Exact posterior of the two-table model of ``test_model_terms.py`` by quadrature.

    ``theta ~ Beta(2, 2)`` (moved on the logit scale), ``eta ~ N(0, 1.5)``, ``p = invlogit(eta)``
    (a Deterministic), ``Potential = (tilt[0] + tilt[1] p) log theta``; table A: Bernoulli(theta)
    records, known ``n``, ``s_A = sum x + e``; table B: Bernoulli(p) records, latent ``n`` (flat
    prior, ``n_dp`` with its noise), ``s_B = sum y + e``. A ``grid`` x ``grid`` rule on
    ``(logit theta, eta)`` in ``[-10, 10]^2`` (the integrand is smooth and negligible at the edges,
    so the uniform rule converges geometrically), summed over ``n_B``; ``potential=False`` drops
    the Potential (the effect a bug that ignores it would have).

    Returns ``{name: (mean, variance)}`` for ``theta``, ``eta``, ``p`` and ``n_B``, and
    ``n_B_values``, ``n_B_pmf``.
    """
    u = np.linspace(-10.0, 10.0, grid)
    eta = np.linspace(-10.0, 10.0, grid)
    theta, p = special.expit(u), special.expit(eta)
    log_a, _ = bernoulli_release_log_likelihood(
        theta, a_table["s_dp"], a_table["mechanism"], np.array([a_table["n"]]), np.zeros(1)
    )
    ns = np.arange(0, int(b_table["n_dp"] + 40 * b_table["n_mechanism"].scale) + 1)
    log_w_n = b_table["n_mechanism"].logpdf(b_table["n_dp"] - ns)
    _, log_b_per_n = bernoulli_release_log_likelihood(
        p, b_table["s_dp"], b_table["mechanism"], ns, log_w_n
    )
    log_prior_u = stats.beta(2, 2).logpdf(theta) + np.log(theta) + np.log1p(-theta)  # Jacobian
    log_joint = (log_prior_u + log_a)[:, None] + stats.norm(0, 1.5).logpdf(eta)[None, :]
    if potential:
        log_joint = log_joint + (tilt[0] + tilt[1] * p[None, :]) * np.log(theta[:, None])
    log_joint = log_joint[None] + log_b_per_n[:, None, :]  # (n_B, u, eta)
    w = _normalise(log_joint)
    w_params = w.sum(axis=0)
    out = {}
    for name, values in (
        ("theta", theta[:, None]),
        ("eta", eta[None, :]),
        ("p", p[None, :]),
    ):
        values = np.broadcast_to(values, w_params.shape)
        mean = float(np.sum(w_params * values))
        out[name] = (mean, float(np.sum(w_params * (values - mean) ** 2)))
    pmf = w.sum(axis=(1, 2))
    mean = float(np.sum(pmf * ns))
    out["n_B"] = (mean, float(np.sum(pmf * (ns - mean) ** 2)))
    out["n_B_values"], out["n_B_pmf"] = ns, pmf
    return out


def exgaussian_sum_posterior(s_dp, laplace_scale, n, nu, prior_mean, prior_sd, step=0.004):
    """Posterior of ``lam ~ N(prior_mean, prior_sd)``, ``x_i ~ ExGaussian(lam, 1, nu)`` (a normal
    plus an exponential of mean ``nu``: no non-centred form), ``n`` known, ``s_dp = sum x +
    Laplace(laplace_scale)``.

    ``sum x - n lam = Z + G`` with ``Z ~ N(0, n)`` and ``G ~ Gamma(n, scale nu)``, so
    ``p(s_dp | lam) = k(s_dp - n lam)`` with ``k`` the density of ``Z + G + e``: two numerical
    convolutions (FFT) on a grid of ``step`` (Riemann sums; ``k`` integrates to 1 and has mean
    ``n nu`` to 1e-6, checked here), then quadrature over ``lam``.
    """
    half = 12 * math.sqrt(n) + 40 * laplace_scale
    grid = np.arange(-half, half + step / 2, step)  # the normal and the Laplace, centred
    g = np.arange(0.0, n * nu + 40 * nu * math.sqrt(n), step)  # the gamma, from 0
    normal = stats.norm.pdf(grid, 0.0, math.sqrt(n))
    laplace = stats.laplace.pdf(grid, 0.0, laplace_scale)
    k = signal.fftconvolve(signal.fftconvolve(stats.gamma.pdf(g, n, scale=nu), normal), laplace)
    k = np.maximum(k, 0.0) * step**2
    support = 2 * grid[0] + step * np.arange(k.size)
    assert abs(np.sum(k) * step - 1) < 1e-6
    assert abs(np.sum(k * support) * step - n * nu) < 1e-6 * max(1.0, n * nu)
    lam = np.linspace(prior_mean - 8 * prior_sd, prior_mean + 8 * prior_sd, 4001)
    likelihood = np.interp(s_dp - n * lam, support, k, left=0.0, right=0.0)
    w = stats.norm.pdf(lam, prior_mean, prior_sd) * likelihood
    w /= w.sum()
    mean = float(np.sum(w * lam))
    return {"lam_mean": mean, "lam_var": float(np.sum(w * (lam - mean) ** 2))}
