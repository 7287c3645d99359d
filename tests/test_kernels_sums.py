"""The sums level's kernel and laws, without PyMC: each family's law against SciPy, the NumPy and
PyTensor forms of one formula against each other, the death moves' conditional laws, and chains
of the kernel at fixed parameters against the exact joint law of ``(n, L)``.

The chain checks enumerate ``pi(n, L) ∝ p_n(L | theta) eta_s(s_dp - L) eta_n(n_dp - n)`` (flat
prior on n) at small n, where ``p_n`` is as wide as the noise: dropping the law's ratio from the
sum moves, or drawing a death from ``theta`` instead of the current sum, moves the pmf of ``n``
and the mean of ``L`` by many standard errors (see ``test_a_wrong_death_law_is_caught``).
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
import pytest
from mcmc_checks import (
    assert_mean_and_spread_match,
    assert_pmf_matches,
    assert_sbc_ranks_uniform,
    sbc_rank,
)
from oracles import log_gamma_laplace, log_normal_laplace
from scipy import special, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import laws
from pymc_unbounded_dp.kernels import NoiseArrays
from pymc_unbounded_dp.kernels import sums as kernel

SUM_NOISE = pmdp.Laplace(epsilon=0.5)
COUNT_NOISE = pmdp.DiscreteLaplace(epsilon=0.5)

#: (family, params, latent values, n) with the SciPy log-pmf/pdf of the sum of n records.
CASES = {
    "counts": (
        laws.COUNTS,
        (np.log([0.2, 0.3, 0.5]),),
        np.array([[2.0, 3.0, 5.0], [0.0, 10.0, 0.0]]),
        10,
        lambda x, n: stats.multinomial.logpmf(x, n, [0.2, 0.3, 0.5]),
    ),
    "poisson": (
        laws.POISSON,
        (np.float64(1.7),),
        np.array([[0.0], [12.0], [40.0]]),
        13,
        lambda x, n: stats.poisson.logpmf(x[:, 0], n * 1.7),
    ),
    "negative-binomial": (
        laws.NEGATIVE_BINOMIAL,
        (np.float64(2.5), np.float64(0.4)),
        np.array([[0.0], [30.0], [90.0]]),
        7,
        lambda x, n: stats.nbinom.logpmf(x[:, 0], n * 2.5, 0.4),
    ),
    "normal": (
        laws.NORMAL,
        (np.float64(-0.3), np.float64(1.9)),
        np.array([[-10.0], [0.5], [3.0]]),
        11,
        lambda x, n: stats.norm.logpdf(x[:, 0], -3.3, 1.9 * np.sqrt(11)),
    ),
    "gamma": (
        laws.GAMMA,
        (np.float64(1.5), np.float64(2.0)),
        np.array([[0.5], [20.0], [70.0]]),
        9,
        lambda x, n: stats.gamma.logpdf(x[:, 0], 13.5, scale=2.0),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_law_is_the_law_of_the_sum(case):
    family, params, latent, n, reference = CASES[case]
    numpy_values = [family.log_p(row, n, params) for row in latent]
    np.testing.assert_allclose(numpy_values, reference(latent, n), rtol=1e-10)
    value = pt.dvector("latent")
    graph = family.log_density(
        value,
        pt.constant(float(n), dtype="float64"),
        [pt.constant(p) for p in params],
        laws.PYTENSOR,
    )
    pytensor_values = [float(graph.eval({value: row})) for row in latent]
    np.testing.assert_allclose(pytensor_values, numpy_values, rtol=1e-12)


@pytest.mark.parametrize("case", [c for c in CASES if c != "counts"])
def test_zero_records_sum_to_zero(case):
    family, params, *_ = CASES[case]
    assert family.log_p(np.zeros(1), 0, params) == 0.0
    assert family.log_p(np.ones(1), 0, params) == -np.inf


#: (family, params, latent of n records, n, d): the removed sum's exact mean and variance.
REMOVED = {
    # multivariate hypergeometric: d of n records with these counts
    "counts": (laws.COUNTS, (np.log([0.2, 0.3, 0.5]),), np.array([4.0, 10.0, 6.0]), 20, 5),
    # binomial thinning of the total
    "poisson": (laws.POISSON, (np.float64(3.0),), np.array([45.0]), 15, 4),
    # beta-binomial(total; d r, (n - d) r)
    "negative-binomial": (
        laws.NEGATIVE_BINOMIAL,
        (np.float64(2.0), np.float64(0.3)),
        np.array([60.0]),
        12,
        3,
    ),
    # the normal bridge
    "normal": (laws.NORMAL, (np.float64(1.0), np.float64(2.0)), np.array([7.0]), 10, 4),
    # a Beta(d alpha, (n - d) alpha) share of the total
    "gamma": (laws.GAMMA, (np.float64(1.5), np.float64(2.0)), np.array([30.0]), 10, 3),
}


def _removed_moments(case):
    family, params, latent, n, d = REMOVED[case]
    total = latent
    if case == "counts":
        mean = d * total / n
        var = d * (total / n) * (1 - total / n) * (n - d) / (n - 1)
    elif case == "poisson":
        mean, var = total * d / n, total * (d / n) * (1 - d / n)
    elif case == "negative-binomial":
        a, b, t = d * params[0], (n - d) * params[0], total
        mean = t * a / (a + b)
        var = t * a * b * (a + b + t) / ((a + b) ** 2 * (a + b + 1))
    elif case == "normal":
        mean, var = total * d / n, params[1] ** 2 * d * (n - d) / n * np.ones(1)
    else:
        a, b = d * params[0], (n - d) * params[0]
        mean, var = total * a / (a + b), total**2 * a * b / ((a + b) ** 2 * (a + b + 1))
    return mean, var


@pytest.mark.parametrize("case", list(REMOVED))
def test_a_death_removes_a_sum_drawn_from_its_conditional_law(case):
    family, params, latent, n, d = REMOVED[case]
    rng = np.random.default_rng(5)
    draws = np.array([family.draw_removed(rng, latent, n, d, params) for _ in range(20000)])
    mean, var = _removed_moments(case)
    for k in range(draws.shape[1]):
        assert_mean_and_spread_match(draws[None, :, k], mean[k], var[k], f"{case} removed [{k}]")


@pytest.mark.parametrize("case", list(REMOVED))
def test_a_birth_adds_the_sum_of_fresh_records(case):
    family, params, *_ = REMOVED[case]
    rng = np.random.default_rng(6)
    d = 4
    draws = np.array([family.draw_new(rng, d, params) for _ in range(20000)])
    if case == "counts":
        p = np.exp(params[0])
        mean, var = d * p, d * p * (1 - p)
    elif case == "poisson":
        mean, var = np.array([d * params[0]]), np.array([d * params[0]])
    elif case == "negative-binomial":
        r, p = params
        mean, var = np.array([d * r * (1 - p) / p]), np.array([d * r * (1 - p) / p**2])
    elif case == "normal":
        mean, var = np.array([d * params[0]]), np.array([d * params[1] ** 2])
    else:
        mean, var = (
            np.array([d * params[0] * params[1]]),
            np.array([d * params[0] * params[1] ** 2]),
        )
    for k in range(draws.shape[1]):
        assert_mean_and_spread_match(draws[None, :, k], mean[k], var[k], f"{case} born [{k}]")


def test_the_normal_approximation_births_and_deaths_have_their_correlated_laws():
    """Births: the totals of d fresh records, N(d m, d C); deaths: the normal bridge,
    N(d L / n, d (n - d) / n C); with a full C, each total's variance and their sum's (which
    has the covariance). An upper Cholesky factor in place of the lower draws with ``L'L``
    instead of C: here a variance of 1.64 C_11 against C_11, many standard errors off."""
    mean, covariance = np.array([0.5, -0.3]), np.array([[1.0, 0.8], [0.8, 2.0]])
    params, latent, n, d = (mean, covariance), np.array([6.0, -2.0]), 10, 4
    family, rng = laws.NORMAL_APPROXIMATION, np.random.default_rng(7)
    born = np.array([family.draw_new(rng, d, params) for _ in range(20000)])
    removed = np.array([family.draw_removed(rng, latent, n, d, params) for _ in range(20000)])
    for label, draws, centre, spread in (
        ("born", born, d * mean, d * covariance),
        ("removed", removed, d * latent / n, d * (n - d) / n * covariance),
    ):
        for k in range(2):
            assert_mean_and_spread_match(
                draws[None, :, k], centre[k], spread[k, k], f"{label} [{k}]"
            )
        total = draws.sum(axis=1)[None, :]
        assert_mean_and_spread_match(total, centre.sum(), spread.sum(), f"{label}, their sum")


# -- chains of the kernel at fixed parameters against the exact joint law of (n, L) ----------------
def _target(family, params, released, matrix, n_dp=None, death_law=None):
    released = np.atleast_1d(np.asarray(released, dtype=float))
    if death_law is not None:
        family = laws.Family(
            family.name,
            family.integer,
            family.lower,
            family.log_density,
            family.draw_new,
            death_law,
            family.counts,
        )
    return kernel.SumsTarget(
        released=released,
        noise=NoiseArrays.of([SUM_NOISE], [released.size]),
        matrix=matrix,
        family=family,
        params=params,
        n_dp=None if n_dp is None else float(n_dp),
        n_noise=None if n_dp is None else NoiseArrays.of([COUNT_NOISE], [1]),
    )


def _run(target, n, steps=6000, seed=1, chains=2, collapsed=False):
    """``chains`` kernel chains from the release: ``(chains, steps)`` draws of n and of L; with
    ``collapsed``, of :func:`~pymc_unbounded_dp.kernels.sums.collapsed_step` (which ignores the
    moves of the latent sum), starting from the noise's own mixing variances."""
    params = kernel.SumsParams(sums_scale=3.0, n_scale=2.0, sums_moves=3, n_moves=3)
    move = kernel.collapsed_step if collapsed else kernel.step
    ns, latents = [], []
    for chain in range(chains):
        rng = np.random.default_rng([seed, chain])
        state = kernel.init(target, n, kernel.starting_latent(target, n, rng))
        if collapsed:
            state = state._replace(variances=kernel.noise_variances(target.noise))
        chain_n, chain_latent = [], []
        for _ in range(steps):
            state, _ = move(rng, state, target, params)
            chain_n.append(state.n)
            chain_latent.append(state.latent.copy())
        ns.append(chain_n)
        latents.append(chain_latent)
    return np.array(ns)[:, 500:], np.array(latents)[:, 500:]


def _exact_integer(log_law, s_dp, n_dp, ns, ts):
    """pi(n, t) on the grid ``ns x ts`` for an integer sum released with SUM_NOISE."""
    N, T = np.meshgrid(ns, ts, indexing="ij")
    log_w = log_law(T, N) + SUM_NOISE.logpdf(s_dp - T) + COUNT_NOISE.logpdf(n_dp - N)
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def _check_integer_chain(label, ns_draws, t_draws, w, ns, ts):
    n_pmf, t_pmf = w.sum(axis=1), w.sum(axis=0)
    assert_pmf_matches(ns_draws, ns, n_pmf, f"{label} n")
    n_mean, t_mean = np.sum(n_pmf * ns), np.sum(t_pmf * ts)
    assert_mean_and_spread_match(ns_draws, n_mean, np.sum(n_pmf * (ns - n_mean) ** 2), f"{label} n")
    assert_mean_and_spread_match(t_draws, t_mean, np.sum(t_pmf * (ts - t_mean) ** 2), f"{label} L")


@pytest.mark.parametrize(
    ("mu", "s_dp", "n_dp"),
    [(2.0, 43.3, 20), (0.15, 0.4, 6)],
    ids=["bulk", "near-a-zero-total"],
)
def test_the_poisson_chain_has_the_exact_joint_law(mu, s_dp, n_dp):
    """Also where a total of 0 has much of the mass (``n mu`` about 1): the moves of the sum
    must reach the support's lower end."""
    target = _target(laws.POISSON, (np.float64(mu),), s_dp, np.ones((1, 1)), n_dp)
    ns_draws, latent = _run(target, n_dp)
    ns, ts = np.arange(0, 60), np.arange(0, 120)
    with np.errstate(divide="ignore"):
        w = _exact_integer(lambda t, n: stats.poisson.logpmf(t, n * mu), s_dp, n_dp, ns, ts)
    _check_integer_chain("Poisson", ns_draws, latent[..., 0], w, ns, ts)


def test_the_negative_binomial_chain_has_the_exact_joint_law():
    r, p, s_dp, n_dp = 1.5, 0.4, 51.0, 18
    target = _target(
        laws.NEGATIVE_BINOMIAL, (np.float64(r), np.float64(p)), s_dp, np.ones((1, 1)), n_dp
    )
    ns_draws, latent = _run(target, n_dp)
    ns, ts = np.arange(0, 60), np.arange(0, 200)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = _exact_integer(
            lambda t, n: np.where(
                n > 0,
                stats.nbinom.logpmf(t, np.maximum(n, 1) * r, p),
                np.where(t == 0, 0.0, -np.inf),
            ),
            s_dp,
            n_dp,
            ns,
            ts,
        )
    _check_integer_chain("NegativeBinomial", ns_draws, latent[..., 0], w, ns, ts)


@pytest.mark.parametrize(
    ("theta", "s_dp", "n_dp"),
    [(0.3, 7.6, 25), (0.04, 0.3, 8)],
    ids=["bulk", "near-an-empty-count"],
)
def test_the_counts_chain_has_the_exact_joint_law(theta, s_dp, n_dp):
    """Bernoulli records (two support points), statistic x: L = (zeros, ones). Also where no one
    is the likeliest count (``n theta`` about 0.3): the moves of the counts must empty a support
    point as often as they fill it."""
    matrix = np.array([[0.0], [1.0]])
    target = _target(laws.COUNTS, (np.log([1 - theta, theta]),), s_dp, matrix, n_dp)
    ns_draws, latent = _run(target, n_dp)
    ns, ts = np.arange(0, 60), np.arange(0, 60)
    with np.errstate(divide="ignore"):
        w = _exact_integer(lambda t, n: stats.binom.logpmf(t, n, theta), s_dp, n_dp, ns, ts)
    _check_integer_chain("Bernoulli counts", ns_draws, latent[..., 1], w, ns, ts)
    np.testing.assert_array_equal(latent.sum(axis=-1), ns_draws)


def test_a_wrong_death_law_is_caught():
    """The power of the chain checks: a death that removes Binomial(d, theta) ones (the birth's
    law) instead of the hypergeometric draw from the current counts is not exact, and the checks
    fail on it."""
    theta, s_dp, n_dp = 0.3, 7.6, 25
    matrix = np.array([[0.0], [1.0]])

    def from_theta(rng, latent, n, d, params):
        ones = min(rng.binomial(d, theta), latent[1], d)
        return np.array([d - ones, ones], dtype=float) if d - ones <= latent[0] else latent.copy()

    target = _target(laws.COUNTS, (np.log([1 - theta, theta]),), s_dp, matrix, n_dp, from_theta)
    ns_draws, latent = _run(target, n_dp)
    ns, ts = np.arange(0, 60), np.arange(0, 60)
    with np.errstate(divide="ignore"):
        w = _exact_integer(lambda t, n: stats.binom.logpmf(t, n, theta), s_dp, n_dp, ns, ts)
    with pytest.raises(AssertionError):
        _check_integer_chain("Bernoulli counts, wrong death", ns_draws, latent[..., 1], w, ns, ts)


def _exact_continuous_n(log_marginal, n_dp, ns):
    log_w = log_marginal(ns) + COUNT_NOISE.logpdf(n_dp - ns)
    w = np.exp(log_w - log_w.max())
    return w / w.sum()


def test_the_normal_chain_has_the_exact_law_of_n():
    mu, sigma, s_dp, n_dp = 1.2, 1.5, 26.0, 20
    target = _target(laws.NORMAL, (np.float64(mu), np.float64(sigma)), s_dp, np.ones((1, 1)), n_dp)
    ns_draws, _ = _run(target, n_dp)
    ns = np.arange(1, 60)  # n = 0 has weight exp(-s_dp / 2) x eta_n(20): below 1e-9
    pmf = _exact_continuous_n(
        lambda n: log_normal_laplace(s_dp, n * mu, n * sigma**2, SUM_NOISE.scale), n_dp, ns
    )
    assert_pmf_matches(ns_draws, ns, pmf, "Normal n")


def test_the_gamma_chain_has_the_exact_law_of_n():
    alpha, s_dp, n_dp = 0.8, 14.0, 20
    target = _target(laws.GAMMA, (np.float64(alpha), np.float64(1.0)), s_dp, np.ones((1, 1)), n_dp)
    ns_draws, _ = _run(target, n_dp)
    ns = np.arange(1, 60)
    pmf = _exact_continuous_n(
        lambda n: log_gamma_laplace(s_dp, n * alpha, SUM_NOISE.scale), n_dp, ns
    )
    assert_pmf_matches(ns_draws, ns, pmf, "Gamma n")


def test_the_normal_approximation_chain_has_the_exact_law_of_n():
    """A vector latent (the normal approximation's ``N(n m, n C)`` of four totals) under
    ``step``'s moves: the pmf of ``n`` against the exact one, a product of normal-Laplace
    convolutions (diagonal ``C``) times the count's noise, ``n = 0`` included (the totals are
    then exactly 0). The normaliser's ``(2 pi n)^(d/2)`` matters here: with ``d = 1`` in it
    instead of 4 the pmf of ``n`` tilts by ``n^1.5``."""
    mean = np.array([0.5, -0.3, 0.2, 0.1])
    variances = np.array([1.0, 0.5, 2.0, 1.0])
    s_dp, n_dp = np.array([4.3, -2.0, 1.1, 0.2]), 8
    params = (mean, np.diag(variances))
    target = _target(laws.NORMAL_APPROXIMATION, params, s_dp, np.eye(4), n_dp)
    ns_draws, latent = _run(target, n_dp)
    ns = np.arange(0, 60)

    def log_marginal(n):
        out = np.empty(n.shape)
        positive = n > 0
        m = n[positive, None]
        out[positive] = log_normal_laplace(s_dp, m * mean, m * variances, SUM_NOISE.scale).sum(1)
        out[~positive] = SUM_NOISE.logpdf(s_dp).sum()
        return out

    pmf = _exact_continuous_n(log_marginal, n_dp, ns)
    assert_pmf_matches(ns_draws, ns, pmf, "Normal approx n")
    # each total: mean and centred variance of its mixture over n, by quadrature given each n
    grid = np.linspace(-40.0, 40.0, 16_001)
    for j in range(4):
        first, second = 0.0, 0.0
        for n, weight in zip(ns[1:], pmf[1:]):
            log_w = stats.norm.logpdf(grid, n * mean[j], np.sqrt(n * variances[j]))
            log_w = log_w + SUM_NOISE.logpdf(s_dp[j] - grid)
            w = np.exp(log_w - log_w.max())
            w /= w.sum()
            first += weight * (w @ grid)
            second += weight * (w @ grid**2)
        total_mean = first
        assert_mean_and_spread_match(
            latent[..., j], total_mean, second - total_mean**2, f"Normal approx L[{j}]"
        )


def test_the_kernel_is_reproducible_at_a_hundred_million_records():
    """Same seed, same draws; the state of a 10^8-record table is a few numbers, and the chain
    stays at the release."""
    theta = 0.3
    matrix = np.array([[0.0], [1.0]])
    target = _target(laws.COUNTS, (np.log([1 - theta, theta]),), 3e7, matrix, 10**8)
    first, second = (_run(target, 10**8, steps=600, seed=3, chains=1) for _ in range(2))
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[1].shape[-1] == 2
    assert abs(first[0].mean() - 10**8) < 30 and abs(first[1][..., 1].mean() - 3e7) < 30


# -- simulation-based calibration of the sums-level Gibbs loop at n = 10^6 ------------------------
SBC_REPLICATIONS = 500
SBC_KEPT, SBC_THIN, SBC_BURN_IN = 39, 5, 60
SBC_N_MEAN = 1e6  # n ~ Poisson(1e6)


def _sbc_replication(rng):
    """One SBC replication: truth from the prior, release from the model, ranks of theta and n
    among the thinned draws of the Gibbs loop (the sums kernel at the current theta, then the
    exact draw ``theta | n, L ~ Beta(2 + ones, 2 + zeros)``), started from an independent prior
    draw of theta."""
    theta, n = rng.beta(2.0, 2.0), int(rng.poisson(SBC_N_MEAN))
    ones = rng.binomial(n, theta)
    s_dp = ones + SUM_NOISE.simulate(size=(), random_seed=rng)
    n_dp = n + COUNT_NOISE.simulate(size=(), random_seed=rng)

    def log_prior_n(values):
        return values * np.log(SBC_N_MEAN) - SBC_N_MEAN - special.gammaln(values + 1.0)

    current = rng.beta(2.0, 2.0)
    params = kernel.SumsParams(sums_scale=2.0, n_scale=2.0, sums_moves=3, n_moves=3)
    target = _target(
        laws.COUNTS, (np.log([1 - current, current]),), s_dp, np.array([[0.0], [1.0]]), n_dp
    )
    target = target._replace(log_prior_n=log_prior_n)
    state = kernel.init(target, int(n_dp), kernel.starting_latent(target, int(n_dp), rng))
    thetas, ns = [], []
    for i in range(SBC_BURN_IN + SBC_KEPT * SBC_THIN):
        target = target._replace(params=(np.log([1 - current, current]),))
        state, _ = kernel.step(rng, state, target, params)
        zeros, ones_now = state.latent
        current = rng.beta(2.0 + ones_now, 2.0 + zeros)
        if i >= SBC_BURN_IN and (i - SBC_BURN_IN) % SBC_THIN == SBC_THIN - 1:
            thetas.append(current)
            ns.append(state.n)
    return sbc_rank(theta, np.array(thetas), rng), sbc_rank(n, np.array(ns), rng)


def test_sbc_of_the_sums_level_at_a_million_records():
    """Power as in tests/test_sbc.py (500 x 39: a posterior sd 20% off is caught with
    probability 0.86-0.98)."""
    rng = np.random.default_rng(2026)
    ranks = np.array([_sbc_replication(rng) for _ in range(SBC_REPLICATIONS)])
    assert_sbc_ranks_uniform(ranks[:, 0], SBC_KEPT + 1, "theta (sums level, n ~ 1e6)")
    assert_sbc_ranks_uniform(ranks[:, 1], SBC_KEPT + 1, "n (sums level, n ~ 1e6)")


@pytest.mark.parametrize(
    "mechanisms",
    [
        [pmdp.Laplace(scale=1.7, sensitivity=3.0)],
        [pmdp.Laplace(epsilon=0.4), pmdp.Gaussian(sigma=2.5)],
        [pmdp.DiscreteLaplace(epsilon=0.3, sensitivity=2)],
        [pmdp.DiscreteGaussian(sigma=1.5), pmdp.Tulap(epsilon=1.0)],
        [pmdp.Gaussian(sigma=0.7)],
        [pmdp.Tulap(epsilon=0.5)],
    ],
)
def test_the_noise_density_of_the_moves_is_the_kernels(mechanisms):
    """noise_function (Python/NumPy) against the numba kernels' log-density, one and several
    coordinates, on and off the integer lattice, sensitivities other than 1."""
    from pymc_unbounded_dp.kernels._noise import residual_log_density

    sizes = [2] * len(mechanisms)
    for noise in (NoiseArrays.of(mechanisms, sizes), NoiseArrays.of(mechanisms[:1], [1])):
        function = kernel.noise_function(noise)
        for residual in (np.array([0.0, 3.0, -2.0, 7.0]), np.array([0.5, -1.25, 2.5, 0.0])):
            residual = residual[: noise.scale.shape[0]]
            out = np.empty_like(residual)
            residual_log_density(residual, out, *noise.per_coordinate)
            assert function(residual) == pytest.approx(float(out.sum()), rel=1e-12, abs=1e-12)


# -- the collapsed sweep of the normal approximation (Laplace noise as a scale mixture) -----------
def _approximation_target(mean, covariance, released, n_dp=None):
    released = np.asarray(released, dtype=float)
    return kernel.SumsTarget(
        released=released,
        noise=NoiseArrays.of([SUM_NOISE], [released.size]),
        matrix=np.eye(released.size),
        family=laws.NORMAL_APPROXIMATION,
        params=(np.asarray(mean, dtype=float), np.asarray(covariance, dtype=float)),
        n_dp=None if n_dp is None else float(n_dp),
        n_noise=None if n_dp is None else NoiseArrays.of([COUNT_NOISE], [1]),
    )


@pytest.mark.parametrize(
    ("mu", "sigma", "s_dp", "n_dp"),
    [(1.2, 1.5, 26.0, 20), (1.2, 1.5, 1.0, 1)],
    ids=["bulk", "near-no-records"],
)
def test_the_collapsed_sweep_has_the_exact_joint_law_of_n_and_the_total(mu, sigma, s_dp, n_dp):
    """One total, latent n: the pmf of n, and the mean and centred variance of L and of
    ``L - n mu`` (which couples the two: a total left at the n before the sweep's moves of n
    widens it by ``mu^2`` times the jump's variance), against quadrature of
    ``g(n) eta_n N(L; n mu, n sigma^2) eta_s(s_dp - L)``; at n = 0 the total is exactly 0 (a
    point mass, about half the posterior near no records). Power: at 4 standard errors
    (2 x 5,500 sweeps) a shift of the total's mean by ~0.05 of its sd or a 10% error in its
    variance fails; a mixing law with the wrong shape is caught below."""
    target = _approximation_target([mu], [[sigma**2]], [s_dp], n_dp)
    ns_draws, latent = _run(target, n_dp, seed=3, collapsed=True)
    ns, grid = np.arange(1, 60), np.linspace(-40.0, 100.0, 14001)
    log_w = (
        stats.norm.logpdf(grid[None, :], ns[:, None] * mu, np.sqrt(ns[:, None]) * sigma)
        + SUM_NOISE.logpdf(s_dp - grid)[None, :]
        + COUNT_NOISE.logpdf(n_dp - ns)[:, None]
        + np.log(grid[1] - grid[0])  # a density times the cell: a mass, like n = 0's below
    )
    log_zero = float(SUM_NOISE.logpdf(s_dp) + COUNT_NOISE.logpdf(n_dp))  # n = 0, L = 0
    top = max(log_w.max(), log_zero)
    w, w_zero = np.exp(log_w - top), np.exp(log_zero - top)
    total = w.sum() + w_zero
    w, w_zero = w / total, w_zero / total
    assert_pmf_matches(ns_draws, np.arange(0, 60), np.r_[w_zero, w.sum(axis=1)], "collapsed n")
    for label, values, at in (
        ("L", latent[..., 0], grid[None, :]),
        ("L - n mu", latent[..., 0] - mu * ns_draws, grid[None, :] - mu * ns[:, None]),
    ):
        mean = float(np.sum(w * at))  # n = 0 adds w_zero x 0
        var = float(np.sum(w * (at - mean) ** 2) + w_zero * mean**2)
        assert_mean_and_spread_match(values, mean, var, f"collapsed {label}")


def test_the_collapsed_sweep_is_for_continuous_laplace_or_gaussian_noise_on_every_total():
    """The sweep writes each coordinate's noise as a normal scale mixture, which only Laplace
    and Gaussian noise are: one other coordinate (Tulap, discrete, user-defined) rules it out."""
    laplace, gaussian = pmdp.Laplace(epsilon=1.0), pmdp.Gaussian(sigma=1.0)
    assert kernel.collapsible_noise(NoiseArrays.of([laplace, gaussian], [2, 1]))
    for other in (pmdp.Tulap(epsilon=1.0), pmdp.DiscreteLaplace(epsilon=1.0)):
        assert not kernel.collapsible_noise(NoiseArrays.of([laplace, other], [2, 1]))
        assert not kernel.collapsible_noise(NoiseArrays.of([other, gaussian], [1, 2]))


def _two_totals_moments(mean, covariance, s_dp, n):
    """The mean and covariance of L | s_dp at ``n`` records, by quadrature on a 2-D grid."""
    prior_sd = np.sqrt(np.diag(n * covariance))
    axes = [np.linspace(s - 8 * sd - 30, s + 8 * sd + 30, 700) for s, sd in zip(s_dp, prior_sd)]
    a, b = np.meshgrid(*axes, indexing="ij")
    points = np.stack([a.ravel(), b.ravel()], axis=1)
    log_w = stats.multivariate_normal(n * mean, n * covariance).logpdf(points)
    log_w += SUM_NOISE.logpdf(s_dp[0] - points[:, 0]) + SUM_NOISE.logpdf(s_dp[1] - points[:, 1])
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    centre = w @ points
    spread = (points - centre).T @ ((points - centre) * w[:, None])
    return centre, spread


def test_the_collapsed_sweep_draws_two_correlated_totals_from_their_exact_law():
    """Two correlated totals at a known n (the mixing variances are per coordinate, the
    covariance is full): the mean and the variance of each total, and their covariance (through
    the variance of their sum), against 2-D quadrature."""
    mean, covariance = np.array([0.4, -0.2]), np.array([[1.0, 0.6], [0.6, 2.0]])
    s_dp, n = np.array([7.0, -10.0]), 12
    target = _approximation_target(mean, covariance, s_dp)
    _, latent = _run(target, n, seed=3, collapsed=True)
    centre, spread = _two_totals_moments(mean, covariance, s_dp, n)
    for k in range(2):
        assert_mean_and_spread_match(latent[..., k], centre[k], spread[k, k], f"two totals [{k}]")
    total = latent.sum(axis=-1)
    assert_mean_and_spread_match(total, centre.sum(), spread.sum(), "two totals, their sum")


def test_a_wrong_mixing_law_is_caught(monkeypatch):
    """The power of the collapsed checks: drawing ``1 / v`` with shape ``1 / b`` instead of
    ``1 / b^2`` (a plausible slip in the inverse-Gaussian law) is not exact, and they fail."""

    def wrong(rng, noise, residual):
        magnitude = np.maximum(np.abs(residual), 1e-300)
        return 1.0 / rng.wald(1.0 / (noise.scale * magnitude), 1.0 / noise.scale)

    monkeypatch.setattr(kernel, "_draw_variances", wrong)
    with pytest.raises(AssertionError):
        test_the_collapsed_sweep_draws_two_correlated_totals_from_their_exact_law()


# -- the prior of n, the move counts, the chain's start and the largest n (a second hand audit) ---
def _poisson_prior(rate):
    """The log-pmf of Poisson(rate) (in NumPy: SciPy's per-call cost would dominate the chain)."""
    return lambda values: values * np.log(rate) - rate - special.gammaln(values + 1.0)


def test_the_prior_of_n_weighs_the_moves_over_n():
    """Bernoulli counts as in ``test_the_counts_chain_has_the_exact_joint_law`` with a Poisson(14)
    prior on n: the exact pmf of n (enumeration times the prior) has its mean 3.6 records (1.2
    posterior sd) below the flat-prior one, ~50 Monte Carlo standard errors of the mean of n
    (2 x 3,500 draws), so a ratio that drops the prior or reads it at the old n fails."""
    theta, s_dp, n_dp, rate = 0.3, 7.6, 25, 14.0
    matrix = np.array([[0.0], [1.0]])
    target = _target(laws.COUNTS, (np.log([1 - theta, theta]),), s_dp, matrix, n_dp)
    target = target._replace(log_prior_n=_poisson_prior(rate))
    ns_draws, latent = _run(target, n_dp, steps=4000, seed=4)
    ns, ts = np.arange(0, 60), np.arange(0, 60)
    with np.errstate(divide="ignore"):
        w = _exact_integer(
            lambda t, n: stats.binom.logpmf(t, n, theta) + stats.poisson.logpmf(n, rate),
            s_dp,
            n_dp,
            ns,
            ts,
        )
    _check_integer_chain(
        "Bernoulli counts, Poisson prior on n", ns_draws, latent[..., 1], w, ns, ts
    )


def test_the_collapsed_sweep_weighs_n_by_its_prior():
    """The collapsed sweep of one Normal total with a Poisson(14) prior on n: the pmf of n against
    ``g(n) eta_n(n_dp - n) (N(n mu, n sigma^2) * Laplace)(s_dp)``; the prior moves the mean of n
    by 1.5 records (0.65 posterior sd), ~35 Monte Carlo standard errors of the mean of n
    (2 x 2,500 sweeps), far beyond the pmf check's resolution."""
    mu, sigma, s_dp, n_dp, rate = 1.2, 1.5, 26.0, 20, 14.0
    target = _approximation_target([mu], [[sigma**2]], [s_dp], n_dp)
    target = target._replace(log_prior_n=_poisson_prior(rate))
    ns_draws, _ = _run(target, n_dp, steps=3000, seed=5, collapsed=True)
    ns = np.arange(0, 60)
    n = ns[1:].astype(float)
    log_w = np.r_[
        SUM_NOISE.logpdf(s_dp), log_normal_laplace(s_dp, n * mu, n * sigma**2, SUM_NOISE.scale)
    ]
    log_w = log_w + COUNT_NOISE.logpdf(n_dp - ns) + stats.poisson.logpmf(ns, rate)
    pmf = np.exp(log_w - log_w.max())
    assert_pmf_matches(ns_draws, ns, pmf / pmf.sum(), "collapsed n, Poisson prior")


@pytest.mark.parametrize("collapsed", [False, True], ids=["moves", "collapsed-sweep"])
def test_the_move_counts_add_up_to_the_change_in_n(collapsed):
    """With jumps of one record (``n_scale`` 0), each step's accepted births (steps up) minus its
    accepted deaths (steps down) is the change in n; no kind accepts more than it proposed, and
    the proposals of both kinds add up to ``n_moves`` (the samplers' birth/death stats)."""
    if collapsed:
        target = _approximation_target([1.2], [[1.5**2]], [26.0], 20)
    else:
        matrix = np.array([[0.0], [1.0]])
        target = _target(laws.COUNTS, (np.log([0.7, 0.3]),), 7.6, matrix, 25)
    params = kernel.SumsParams(sums_scale=2.0, n_scale=0.0, sums_moves=2, n_moves=3)
    rng = np.random.default_rng(8)
    n = 20 if collapsed else 25
    state = kernel.init(target, n, kernel.starting_latent(target, n, rng))
    if collapsed:
        state = state._replace(variances=kernel.noise_variances(target.noise))
    move = kernel.collapsed_step if collapsed else kernel.step
    changed = 0
    for _ in range(300):
        before = state.n
        state, info = move(rng, state, target, params)
        assert state.n - before == info.births_accepted - info.deaths_accepted
        assert info.births_accepted <= info.births_proposed
        assert info.deaths_accepted <= info.deaths_proposed
        assert info.births_proposed + info.deaths_proposed == 3
        assert info.sums_accepted <= info.sums_proposed == (0 if collapsed else 2)
        changed += state.n != before
    assert changed > 50  # the moves do move n


def test_a_collapsed_chain_starts_from_the_noises_own_variances():
    """Laplace(b) noise is N(0, v) with v of mean 2 b^2; Gaussian noise has v = sigma^2."""
    laplace, gaussian = pmdp.Laplace(scale=1.7, sensitivity=3.0), pmdp.Gaussian(sigma=2.5)
    noise = NoiseArrays.of([laplace, gaussian], [2, 1])
    np.testing.assert_allclose(
        kernel.noise_variances(noise), [2 * 1.7**2, 2 * 1.7**2, 2.5**2], rtol=1e-12
    )


def test_the_starting_counts_round_the_largest_remainders_up():
    """Counts released exactly (one-hot totals adding up to n): the fit is the release, and the
    rounding to counts adding up to n gives the extra units to the largest remainders."""
    for released, expected in (
        ([3.2, 4.5, 2.3], [3.0, 5.0, 2.0]),
        ([1.6, 2.7, 5.7], [1.0, 3.0, 6.0]),
    ):
        target = _target(laws.COUNTS, (np.log([0.2, 0.3, 0.5]),), released, np.eye(3))
        start = kernel.starting_latent(target, 10, np.random.default_rng(0))
        np.testing.assert_array_equal(start, expected)


def test_a_sum_released_below_its_support_starts_inside_it():
    """An integer sum released below 0 starts at 0, a Gamma sum at a small positive total, a
    Normal sum (no lower bound) at the release itself: each start has a finite density."""
    for family, params, expected in (
        (laws.POISSON, (np.float64(1.5),), 0.0),
        (laws.NEGATIVE_BINOMIAL, (np.float64(2.0), np.float64(0.4)), 0.0),
        (laws.NORMAL, (np.float64(1.0), np.float64(2.0)), -3.4),
    ):
        target = _target(family, params, -3.4, np.ones((1, 1)))
        start = kernel.starting_latent(target, 5, np.random.default_rng(0))
        np.testing.assert_array_equal(start, [expected])
        assert np.isfinite(family.log_p(start, 5, params))
    target = _target(laws.GAMMA, (np.float64(1.5), np.float64(2.0)), -3.4, np.ones((1, 1)))
    (start,) = kernel.starting_latent(target, 5, np.random.default_rng(0))
    assert 0.0 < start <= 1e-5


def test_a_birth_may_reach_the_largest_supported_n_but_not_pass_it():
    """``MAX_N`` records are supported: a birth from ``MAX_N - 1`` to ``MAX_N`` is an ordinary
    move, a birth beyond it raises (jumps of one record: ``n_scale`` 0)."""
    top = kernel.MAX_N
    target = _target(laws.POISSON, (np.float64(1.0),), float(top), np.ones((1, 1)), top)
    params = kernel.SumsParams(sums_scale=1.0, n_scale=0.0, sums_moves=0, n_moves=1)
    below = kernel.init(target, top - 1, np.array([float(top - 1)]))
    births = 0
    for seed in range(20):
        state, info = kernel.step(np.random.default_rng(seed), below, target, params)
        births += info.births_proposed
        assert state.n in (top - 1, top, top - 2)
    assert births >= 5
    at_top = kernel.init(target, top, np.array([float(top)]))
    with pytest.raises(RuntimeError, match="more than it supports"):
        for seed in range(20):
            kernel.step(np.random.default_rng(seed), at_top, target, params)


def test_a_chain_starts_at_zero_without_records_and_at_the_release_for_released_totals():
    """No records: a zero sum whatever the release; the normal approximation's totals (the
    latent is the released totals themselves): the release."""
    released = np.array([4.3, -2.0])
    target = _approximation_target([0.5, -0.3], np.eye(2), released)
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(kernel.starting_latent(target, 8, rng), released)
    np.testing.assert_array_equal(kernel.starting_latent(target, 0, rng), np.zeros(2))
    counts = _target(laws.COUNTS, (np.log([0.2, 0.3, 0.5]),), [3.2, 4.5, 2.3], np.eye(3))
    np.testing.assert_array_equal(kernel.starting_latent(counts, 0, rng), np.zeros(3))
