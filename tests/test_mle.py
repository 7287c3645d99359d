"""Maximum likelihood where EM creeps: the simulated likelihood against exact likelihoods.

Exact references (closed form or one-dimensional quadrature):

* ``two``: ``x ~ N(mu, 1)``, ``y | x ~ N(beta x, 1)``, ``n = 40`` known, release
  ``(sum x, sum y) + Laplace(15)``: about 95% of the information is missing. ``S_x ~ N(n mu, n)``
  and ``S_y | S_x ~ N(beta S_x, n)``, so ``L = int N(a; n mu, n) eta(s_x - a)
  [N(beta a, n) * Laplace](s_y) da`` (inner convolution in closed form, outer by quadrature).
* ``unbounded``: ``x ~ N(mu, 1)``, ``n`` latent with ``n_dp`` (discrete Laplace), flat prior:
  ``L = sum_n eta_n(n_dp - n) [N(n mu, n) * Laplace](s)``.
* ``boundary``: ``x ~ N(0, sigma)``, release ``sum x^2 + Laplace(2)`` observed at ``-3`` < 0:
  ``L(sigma) = exp(s/b) / (2b) (1 + 2 sigma^2 / b)^(-n/2)`` decreases in ``sigma``, so the
  supremum is at ``sigma = 0``.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from oracles import log_normal_laplace
from scipy import optimize, special, stats

import pymc_unbounded_dp as pmdp

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")

N_TWO, B_TWO, S_TWO = 40, 15.0, (45.0, 30.0)
N_DP, N_EPSILON, B_UNB, S_UNB = 60, 0.3, 3.0, 75.0
N_BOUND, B_BOUND, S_BOUND = 20, 2.0, -3.0


# --------------------------------------------------------------------------------------------------
# exact likelihoods
# --------------------------------------------------------------------------------------------------
def two_loglik(params) -> float:
    mu, beta = params
    sd = np.sqrt(N_TWO)
    a = np.linspace(N_TWO * mu - 12 * sd, N_TWO * mu + 12 * sd, 12001)
    log_terms = (
        -0.5 * ((a - N_TWO * mu) / sd) ** 2
        - np.log(sd * np.sqrt(2 * np.pi))
        + pmdp.Laplace(scale=B_TWO).logpdf(S_TWO[0] - a)
        + log_normal_laplace(S_TWO[1], beta * a, N_TWO, B_TWO)
    )
    return float(special.logsumexp(log_terms) + np.log(a[1] - a[0]))


def unbounded_loglik(mu, n_prior=None) -> float:
    n = np.arange(1, 400)
    log_q = pmdp.DiscreteLaplace(epsilon=N_EPSILON).logpdf(N_DP - n)
    if n_prior is not None:  # a Poisson(n_prior) prior of n
        log_q = log_q + stats.poisson.logpmf(n, n_prior)
    return float(special.logsumexp(log_q + log_normal_laplace(S_UNB, n * mu, n, B_UNB)))


def boundary_loglik(sigma):
    sigma = np.asarray(sigma, dtype=float)
    return S_BOUND / B_BOUND - np.log(2 * B_BOUND) - N_BOUND / 2 * np.log1p(2 * sigma**2 / B_BOUND)


def exact_mle(loglik, start):
    """Maximiser and observed-information standard errors (central second differences)."""
    result = optimize.minimize(
        lambda p: -loglik(p),
        start,
        method="Nelder-Mead",
        options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 20000},
    )
    x, h = np.atleast_1d(result.x), 1e-3
    size = x.size
    hess = np.empty((size, size))
    for i in range(size):
        for j in range(size):
            ei, ej = np.eye(size)[i] * h, np.eye(size)[j] * h
            hess[i, j] = (
                loglik(x + ei + ej)
                - loglik(x + ei - ej)
                - loglik(x - ei + ej)
                + loglik(x - ei - ej)
            ) / (4 * h * h)
    return x, np.sqrt(np.diag(np.linalg.inv(-hess)))


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=N_TWO)
        y = pmdp.Records("y", pm.Normal.dist(beta * x, 1.0), n=N_TWO)
        pmdp.PrivatizedSum(
            "s", pt.stack([x, y], axis=1), pmdp.Laplace(scale=B_TWO), observed=np.array(S_TWO)
        )
    return model


@pytest.fixture(scope="module")
def two_exact():
    return exact_mle(lambda p: two_loglik(p), np.array([1.1, 0.6]))


@pytest.fixture(scope="module")
def two_fit(two_model):
    return pmdp.mcem(two_model, random_seed=1, progressbar=False)


# --------------------------------------------------------------------------------------------------
# much missing information: the simulated likelihood converges, EM does not
# --------------------------------------------------------------------------------------------------
def test_auto_switches_to_the_simulated_likelihood(two_fit):
    assert two_fit.method == "simulated"
    assert two_fit.converged == "interior" and bool(two_fit.converged)
    assert two_fit.missing_information > 0.8  # at the MLE (Louis' I_c, the simulated I_obs)
    history = two_fit.history
    em_rows = history.where(history["method"] == "em", drop=True)
    assert em_rows.sizes["iteration"] >= 1  # EM ran first, then handed over at the switch rate
    assert float(em_rows["missing_information"][-1]) >= 0.9
    # the simulated rows' own columns, NaN in the EM rows before them
    simulated = history.where(history["method"] == "simulated", drop=True)
    for column in ("simulated_loglik", "effective_replicates"):
        assert np.all(np.isnan(em_rows[column])) and np.all(np.isfinite(simulated[column]))


def test_simulated_mle_matches_the_exact_mle(two_fit, two_exact):
    mle, se = two_exact
    estimate = np.array([two_fit.estimate["mu"], two_fit.estimate["beta"]], dtype=float)
    mc_error = np.array([two_fit.mc_error["mu"], two_fit.mc_error["beta"]], dtype=float)
    standard_error = np.array(
        [two_fit.standard_error["mu"], two_fit.standard_error["beta"]], dtype=float
    )
    # the reported Monte Carlo error is below tol=0.05 standard errors, and honest
    assert np.all(mc_error < 0.05 * se * 1.2)
    # the stopping statistic of the last round is the worst parameter's error in standard errors
    # (mu and beta have no transform: the natural scale's ratios are the unconstrained ones)
    ratios = mc_error / standard_error
    assert abs(ratios[0] - ratios[1]) > 0.01 * ratios.max()  # their mean is 1.3% below the max
    assert float(two_fit.history["mc_error"][-1]) == pytest.approx(ratios.max(), rel=1e-6)
    assert np.all(np.abs(estimate - mle) < 4 * mc_error + 0.02 * se), (estimate, mle, mc_error)
    np.testing.assert_allclose(standard_error, se, rtol=0.1)


def test_plain_em_does_not_converge_within_the_same_budget(two_model, two_exact):
    with pytest.warns(UserWarning, match="did not converge"):
        em = pmdp.mcem(two_model, method="em", random_seed=1, max_iterations=40, progressbar=False)
    assert em.converged == "budget" and not em.converged
    mle, se = two_exact
    distance = abs(float(em.estimate["beta"]) - mle[1]) / se[1]
    assert distance > 0.05  # still creeping towards the MLE


def test_same_seed_same_simulated_fit(two_model, two_fit):
    again = pmdp.mcem(two_model, random_seed=1, progressbar=False)
    assert float(again.estimate["beta"]) == float(two_fit.estimate["beta"])
    assert again.history.equals(two_fit.history)


def test_continue_a_simulated_fit(two_model, two_fit, two_exact):
    """``init=result`` continues with the simulated likelihood, from the estimate, with more
    replicates; the history carries on."""
    more = pmdp.mcem(two_model, init=two_fit, random_seed=2, progressbar=False)
    assert more.method == "simulated" and more.converged == "interior"
    done = two_fit.history.sizes["iteration"]
    total = more.history.sizes["iteration"]
    assert total > done
    assert list(more.history["iteration"].values) == list(range(1, total + 1))  # numbered on
    assert int(more.history["n_samples"][done]) == two_fit.state.n_samples
    mle, se = two_exact
    assert (
        abs(float(more.estimate["beta"]) - mle[1]) < 4 * float(more.mc_error["beta"]) + 0.02 * se[1]
    )


# --------------------------------------------------------------------------------------------------
# unbounded DP: the window of n
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "positive, n_prior",
    [(False, None), (True, None), (False, 70.0)],
    ids=["flat", "log-transformed-mean", "poisson-prior-of-n"],
)
def test_simulated_mle_under_unbounded_dp(positive, n_prior):
    """Also with the mean on a log scale (the standard error is the natural scale's, through
    the transform's Jacobian: without it, it would be ``se / mu``, 20% off) and with a proper
    prior of n, Poisson(70), which is part of the likelihood (``g(n)`` in the sum over n)."""
    with pm.Model() as model:
        mu = pm.Exponential("mu", 1.0) if positive else pm.Normal("mu", 0.0, 10.0)
        prior = None if n_prior is None else pm.Poisson.dist(n_prior)
        n = pmdp.SampleSize(
            "n", n_dp=N_DP, mechanism=pmdp.DiscreteLaplace(epsilon=N_EPSILON), prior=prior
        )
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=B_UNB), observed=S_UNB)
    fit = pmdp.mcem(model, method="simulated", random_seed=3, progressbar=False)
    (mle,), (se,) = exact_mle(lambda p: unbounded_loglik(p[0], n_prior), np.array([1.2]))
    assert fit.converged == "interior"
    assert abs(float(fit.estimate["mu"]) - mle) < 4 * float(fit.mc_error["mu"]) + 0.02 * se
    np.testing.assert_allclose(float(fit.standard_error["mu"]), se, rtol=0.1)
    # the Monte Carlo error and the standard error on the same (natural) scale: their ratio is the
    # last round's statistic, on any scale (off by the Jacobian, mu = 1.25, if one of them were
    # left on the log scale)
    ratio = float(fit.mc_error["mu"]) / float(fit.standard_error["mu"])
    assert float(fit.history["mc_error"][-1]) == pytest.approx(ratio, rel=1e-6)


@pytest.mark.parametrize("scale", [0.01, 100.0])
def test_simulated_standard_errors_follow_the_parameters_scale(scale):
    """The unbounded model with records, noise and release all ``scale`` times larger: the MLE
    and its standard error are ``scale`` times the exact ones. The observed information's
    finite-difference steps follow the standard error (two fixed-size passes gave 0.0057 for
    0.0016 at scale 0.01: steps of 14 standard errors see the Laplace tails' constant slope).

    The Monte Carlo error of the standard error is a standard error's spread over the batches
    (0.5-1.5% of it at the four scales 0.001 to 100 measured); the spread of the batches'
    variances would be 2 * se times that: 0.003% at scale 0.01, 17% at 100.
    """
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0 * scale)
        n = pmdp.SampleSize("n", n_dp=N_DP, mechanism=pmdp.DiscreteLaplace(epsilon=N_EPSILON))
        x = pmdp.Records("x", pm.Normal.dist(mu, scale), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=B_UNB * scale), observed=S_UNB * scale)
    fit = pmdp.mcem(model, method="simulated", random_seed=3, progressbar=False)
    (mle,), (se,) = exact_mle(lambda p: unbounded_loglik(p[0]), np.array([1.2]))
    assert fit.converged == "interior"
    estimate, mc = float(fit.estimate["mu"]) / scale, float(fit.mc_error["mu"]) / scale
    assert abs(estimate - mle) < 4 * mc + 0.02 * se
    standard_error = float(fit.standard_error["mu"]) / scale
    np.testing.assert_allclose(standard_error, se, rtol=0.1)
    relative = float(fit.standard_error_mc_error["mu"]) / float(fit.standard_error["mu"])
    assert 0.001 < relative < 0.05


# --------------------------------------------------------------------------------------------------
# a supremum on the boundary
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def boundary_model():
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 5.0)
        x = pmdp.Records("x", pm.Normal.dist(0.0, sigma), n=N_BOUND)
        pmdp.PrivatizedSum("s", x**2, pmdp.Laplace(scale=B_BOUND), observed=S_BOUND)
    return model


@pytest.mark.parametrize("method", ["simulated", "auto"])
def test_boundary_supremum_is_named(boundary_model, method):
    with pytest.warns(UserWarning, match="boundary"):
        fit = pmdp.mcem(
            boundary_model, method=method, random_seed=4, replicates=800, progressbar=False
        )
    assert fit.converged == "boundary" and not fit.converged
    boundary = fit.boundary
    assert boundary.parameter == "sigma" and boundary.direction == "lower"
    assert boundary.limit == 0.0
    assert np.all(np.diff(boundary.values) < 0)  # towards 0
    assert np.all(np.diff(boundary.profile_loglik) > 0)  # increasing on the way
    # the profile is the exact log-likelihood up to a constant, within its Monte Carlo error
    exact = boundary_loglik(boundary.values)
    errors = boundary.profile_mc_error
    assert np.all(errors < 0.1)
    difference = (boundary.profile_loglik - boundary.profile_loglik[-1]) - (exact - exact[-1])
    assert np.all(np.abs(difference) <= 4 * np.hypot(errors, errors[-1]) + 1e-6), difference
    assert "sigma" in fit.reason and "boundary" in fit.reason
    assert np.isnan(fit.standard_error["sigma"])


# --------------------------------------------------------------------------------------------------
# the estimator itself: log L_hat(theta) against the exact log-likelihood, point by point
# --------------------------------------------------------------------------------------------------
N_DP_SMALL, S_SMALL = 8, 42.0


def small_loglik(mu) -> float:
    """``x ~ N(mu, 1)``, ``n_dp = 8`` (discrete Laplace, epsilon 1), ``sum x + Laplace(1)``."""
    n = np.arange(0, 60)
    log_q = pmdp.DiscreteLaplace(epsilon=1.0).logpdf(N_DP_SMALL - n)
    return float(
        special.logsumexp(log_q + log_normal_laplace(S_SMALL, n * mu, np.maximum(n, 1e-12), 1.0))
    )


def test_simulated_loglik_matches_the_exact_loglik_pointwise():
    """Small n with informative sums: one record more or less moves the sum by ~5 noise scales,
    so the window of n and the cumulative sums must be exact."""
    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp.mcem.objective import complete_data_loglik
    from pymc_unbounded_dp.mcem.simulated import simulated_likelihood

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        n = pmdp.SampleSize("n", n_dp=N_DP_SMALL, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=1.0), observed=S_SMALL)
    simulated = simulated_likelihood(complete_data_loglik(compile_model(model), False))
    window = simulated.window()
    assert window.lo == 0 and window.hi >= N_DP_SMALL + 15
    batches = [simulated.draw(np.array([5.0]), 4000, window, seed) for seed in range(4)]
    grid = np.array([4.6, 5.0, 5.4, 6.0])
    values = np.array(
        [simulated.pooled("unconstrained", np.array([m]), batches, window)[0] for m in grid]
    )
    errors = np.array(
        [
            simulated.loglik_mc_error(simulated.evaluate_batches(np.array([m]), batches, window))
            for m in grid
        ]
    )
    exact = np.array([small_loglik(m) for m in grid])
    assert np.all(errors < 0.05)
    np.testing.assert_array_less(np.abs(values - exact), 4 * errors + 1e-3)


def test_simulated_map_matches_the_exact_posterior_mode():
    """``map=True`` adds the log priors (natural scale) to the simulated log-likelihood; the prior
    on ``beta`` is strong enough to move the mode by ~1.5 standard errors from the MLE."""
    prior_sd = 0.3
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, prior_sd)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=N_TWO)
        y = pmdp.Records("y", pm.Normal.dist(beta * x, 1.0), n=N_TWO)
        pmdp.PrivatizedSum(
            "s", pt.stack([x, y], axis=1), pmdp.Laplace(scale=B_TWO), observed=np.array(S_TWO)
        )

    def log_posterior(p):
        return two_loglik(p) - 0.5 * (p[0] / 10.0) ** 2 - 0.5 * (p[1] / prior_sd) ** 2

    mode, sd = exact_mle(log_posterior, np.array([1.1, 0.3]))
    mle, se = exact_mle(two_loglik, np.array([1.1, 0.6]))
    assert abs(mode[1] - mle[1]) > se[1]  # the prior matters here
    fit = pmdp.mcem(model, map=True, random_seed=5, progressbar=False)
    assert fit.method == "simulated" and fit.converged == "interior"
    estimate = np.array([fit.estimate["mu"], fit.estimate["beta"]], dtype=float)
    mc_error = np.array([fit.mc_error["mu"], fit.mc_error["beta"]], dtype=float)
    assert np.all(np.abs(estimate - mode) < 4 * mc_error + 0.02 * sd), (estimate, mode)


def test_the_standard_errors_monte_carlo_error_is_the_batch_spread_over_root_b():
    """The simulated likelihood's ``standard_error_mc_error``: the spread of the batches' standard
    errors over the root of the number of batches (numbers by hand: sd 0.816 and 1.414 over 4
    batches)."""
    from pymc_unbounded_dp.mcem.simulated import batch_mean_covariance, batch_mean_error

    per_batch = np.array([[1.0, 10.0], [3.0, 10.0], [2.0, 13.0], [2.0, 11.0]])
    np.testing.assert_allclose(
        batch_mean_error(per_batch), [np.sqrt(2 / 3) / 2, np.sqrt(2.0) / 2], rtol=1e-12
    )
    # the maximiser's Monte Carlo covariance: the batches' covariance over their number
    per_batch[1, 1] = 12.0  # covariance 2/3 between the columns, variances 2/3 and 5/3
    np.testing.assert_allclose(
        batch_mean_covariance(per_batch), [[1 / 6, 1 / 6], [1 / 6, 5 / 12]], rtol=1e-12
    )
