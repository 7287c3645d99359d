"""Monte Carlo EM against exact maximum-likelihood estimates, and its handling of bad input.

The exact references maximise the observed-data likelihood of the release, computed by
enumeration (Bernoulli records: sum over the count ``k`` and, under unbounded DP, over ``n``) or in
closed form (normal records: ``sum x`` is normal, convolved with Laplace noise). Their standard
errors come from a numerical second derivative of the exact log-likelihood.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pymc as pm
import pytest
from oracles import log_normal_laplace
from scipy import optimize, special, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import model_blocks
from pymc_unbounded_dp.mcem import Convergence, MCEMResult, mcem
from pymc_unbounded_dp.mcem import objective as objective_module

S_MECHANISM = pmdp.Laplace(epsilon=1.0)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)
N_BOUNDED, S_BOUNDED = 40, 14.3
N_DP, S_UNBOUNDED = 57, 20.4
N_NORMAL, S_NORMAL, B_NORMAL, PRIOR_SD = 50, 61.0, 2.0, 0.3
N_MAX = 200

# PyTensor warns once per process, at the first BLAS-using compilation, when no BLAS is linked;
# which test compiles first depends on the selection, so the warning is silenced for all of them.
pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")


# --------------------------------------------------------------------------------------------------
# exact references
# --------------------------------------------------------------------------------------------------
def exact_mle(loglik, low, high):
    """Maximiser of a scalar log-likelihood and its observed-information standard error."""
    result = optimize.minimize_scalar(
        lambda t: -loglik(t), bounds=(low, high), method="bounded", options={"xatol": 1e-10}
    )
    t, h = result.x, 1e-4
    curvature = (loglik(t + h) - 2 * loglik(t) + loglik(t - h)) / h**2
    return t, 1 / math.sqrt(-curvature)


def bounded_loglik(theta):
    k = np.arange(N_BOUNDED + 1)
    return special.logsumexp(
        stats.binom.logpmf(k, N_BOUNDED, theta) + S_MECHANISM.logpdf(S_BOUNDED - k)
    )


def unbounded_log_terms(theta, log_prior_n=None):
    """``log [g(n) eta_n(n_dp - n) Binom(k; n, theta) eta_s(s - k)]`` on an (n, k) grid."""
    n, k = np.meshgrid(np.arange(N_MAX), np.arange(N_MAX), indexing="ij")
    log_g = 0.0 if log_prior_n is None else log_prior_n(n)
    return (
        log_g
        + N_MECHANISM.logpdf(N_DP - n)
        + stats.binom.logpmf(k, n, theta)
        + S_MECHANISM.logpdf(S_UNBOUNDED - k)
    )


def unbounded_loglik(theta):
    return special.logsumexp(unbounded_log_terms(theta))


def normal_loglik(mu):
    return log_normal_laplace(S_NORMAL, N_NORMAL * mu, N_NORMAL, B_NORMAL)


# --------------------------------------------------------------------------------------------------
# models (compiled once per module)
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bounded_model():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=N_BOUNDED)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=S_BOUNDED)
    return model


@pytest.fixture(scope="module")
def unbounded_model():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=N_DP, mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=S_UNBOUNDED)
    return model


@pytest.fixture(scope="module")
def normal_model():
    """``x_i ~ N(mu, 1)``, ``s_dp = sum x + Laplace(2)``; the prior only matters for MAP."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, PRIOR_SD)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=N_NORMAL)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=B_NORMAL), observed=S_NORMAL)
    return model


@pytest.fixture(scope="module")
def bounded_fit(bounded_model):
    return mcem(bounded_model, random_seed=1, tol=0.02, progressbar=False)


@pytest.fixture(scope="module")
def normal_fit(normal_model):
    return mcem(normal_model, random_seed=2, tol=0.02, progressbar=False)


# --------------------------------------------------------------------------------------------------
# agreement with the exact MLE
# --------------------------------------------------------------------------------------------------
def test_bounded_bernoulli_matches_exact_mle(bounded_fit):
    mle, se = exact_mle(bounded_loglik, 1e-4, 1 - 1e-4)
    assert bounded_fit.converged, bounded_fit.reason
    assert abs(float(bounded_fit.estimate["theta"]) - mle) < 0.005
    assert float(bounded_fit.standard_error["theta"]) == pytest.approx(se, rel=0.1)


def test_unbounded_bernoulli_matches_exact_mle(unbounded_model):
    fit = mcem(unbounded_model, random_seed=3, tol=0.02, progressbar=False)
    mle, se = exact_mle(unbounded_loglik, 1e-3, 1 - 1e-3)
    assert fit.converged, fit.reason
    assert abs(float(fit.estimate["theta"]) - mle) < 0.005
    assert float(fit.standard_error["theta"]) == pytest.approx(se, rel=0.1)
    # n is integrated out: it is no parameter, but its imputed mean is in the history.
    assert set(fit.estimate) == {"theta"}
    assert abs(float(fit.history["n_mean"][-1]) - N_DP) < 3


def test_normal_matches_quadrature_mle(normal_fit):
    mle, se = exact_mle(normal_loglik, -5.0, 5.0)
    assert normal_fit.converged, normal_fit.reason
    assert abs(float(normal_fit.estimate["mu"]) - mle) < 0.005
    assert float(normal_fit.standard_error["mu"]) == pytest.approx(se, rel=0.1)


def test_map_matches_exact_posterior_mode(normal_model):
    fit = mcem(normal_model, map=True, random_seed=4, tol=0.02, progressbar=False)
    mode, _ = exact_mle(lambda m: normal_loglik(m) + stats.norm.logpdf(m, 0, PRIOR_SD), -5, 5)
    mle, _ = exact_mle(normal_loglik, -5.0, 5.0)
    assert fit.converged, fit.reason
    assert abs(float(fit.estimate["mu"]) - mode) < 0.005
    assert mle - mode > 0.1  # the prior matters here


def test_parameter_dependent_prior_of_n():
    """``n ~ Poisson(lam)``: ``log g(n | lam)`` enters the complete-data likelihood."""
    with pm.Model() as model:
        lam = pm.Gamma("lam", 2.0, 0.05)
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=N_DP, mechanism=N_MECHANISM, prior=pm.Poisson.dist(lam))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=S_UNBOUNDED)
    fit = mcem(model, random_seed=5, tol=0.05, progressbar=False)

    def negative(params):
        lam, theta = params
        return -special.logsumexp(
            unbounded_log_terms(theta, lambda n: stats.poisson.logpmf(n, lam))
        )

    exact = optimize.minimize(
        negative, [50.0, 0.4], method="Nelder-Mead", options={"xatol": 1e-8, "fatol": 1e-12}
    ).x
    assert fit.converged, fit.reason
    assert abs(float(fit.estimate["lam"]) - exact[0]) < 0.1 * float(fit.standard_error["lam"])
    assert abs(float(fit.estimate["theta"]) - exact[1]) < 0.005


# --------------------------------------------------------------------------------------------------
# the result object, the schedule and continuing a run
# --------------------------------------------------------------------------------------------------
def test_result_structure(bounded_fit):
    assert isinstance(bounded_fit, MCEMResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bounded_fit.converged = False
    history = bounded_fit.history
    iterations = history.sizes["iteration"]
    assert list(history["iteration"].values) == list(range(1, iterations + 1))
    expected = [math.ceil(10 * 1.25**k) for k in range(iterations)]
    assert list(history["n_samples"].values) == expected
    for name in ("theta", "distance", "mc_error", "complete_loglik", "refresh_accept_rate"):
        assert history[name].dims == ("iteration",)
    # The stopping rule held for the last three iterations, all with M >= min_samples.
    last = history.isel(iteration=slice(-3, None))
    assert np.all(last["distance"] < 0.02) and np.all(last["mc_error"] < 0.02)
    assert np.all(last["n_samples"] >= 100)
    # ... and it stopped at the first chance: the iteration before did not qualify
    before = history.isel(iteration=-4)
    qualified = before["distance"] < 0.02 and before["mc_error"] < 0.02
    assert not (qualified and before["n_samples"] >= 100)
    assert "converged" in bounded_fit.reason
    assert np.shape(bounded_fit.estimate["theta"]) == ()
    assert 0 < bounded_fit.estimate["theta"] < 1  # natural scale, not log-odds
    assert bounded_fit.covariance.shape == (1, 1)
    assert bounded_fit.state.n_samples == expected[-1]
    assert bounded_fit.state.records.n == N_BOUNDED


def test_model_records_are_untouched(bounded_model, bounded_fit):
    """The objective takes the imputed records as inputs: the model's containers never change."""
    data = model_blocks(bounded_model).records[0].data.get_value()
    assert data.shape == (N_BOUNDED,)


def test_result_reports_method_status_and_errors(bounded_fit):
    assert bounded_fit.converged == "interior" and bounded_fit.converged is Convergence.INTERIOR
    assert bool(bounded_fit.converged)
    assert not Convergence.BUDGET and not Convergence.BOUNDARY and not Convergence.DIVERGED
    assert repr(Convergence.BOUNDARY) == "'boundary'"
    assert bounded_fit.method == "em"  # Bernoulli records: no differentiable non-centred form
    assert 0 < bounded_fit.missing_information < 0.9
    assert bounded_fit.boundary is None and np.isnan(bounded_fit.loglik)
    se, mc = float(bounded_fit.standard_error["theta"]), float(bounded_fit.mc_error["theta"])
    # EM stops at the first M whose Monte Carlo error is below tol = 0.02 standard errors three
    # times running, with M growing by 1.25 per iteration: the final error is near tol (0.014
    # here), far above tol / 10. A variance reported as the error would be ~1e-5 standard errors.
    assert 0.002 * se < mc < 0.1 * se
    assert set(bounded_fit.history["method"].values) == {"em"}


def _assert_stopped_at_the_first_streak(history, tol: float, patience: int, min_samples: int):
    """EM's rule: stop after ``patience`` consecutive iterations with distance and mc_error below
    ``tol`` and M >= ``min_samples``, at the first such run."""
    qualified = (
        (history["distance"].values < tol)
        & (history["mc_error"].values < tol)
        & (history["n_samples"].values >= min_samples)
    )
    assert qualified[-patience:].all(), qualified
    runs = [qualified[k : k + patience].all() for k in range(qualified.size - patience + 1)]
    assert runs.index(True) == qualified.size - patience, qualified


def test_em_stops_at_the_first_run_of_qualifying_iterations(bounded_model, bounded_fit):
    """With tol = 0.1 and min_samples = 10, the qualifying iterations of this seed come as
    0 0 1 1 0 1 1 1: counted without a reset after the fifth, EM would stop at the sixth."""
    _assert_stopped_at_the_first_streak(bounded_fit.history, 0.02, 3, 100)
    early = mcem(bounded_model, random_seed=1, tol=0.1, min_samples=10, progressbar=False)
    assert early.converged == "interior"
    assert early.history.sizes["iteration"] == 8
    _assert_stopped_at_the_first_streak(early.history, 0.1, 3, 10)


def test_em_estimate_is_the_m_weighted_average_of_the_last_maximisers(normal_fit):
    """The estimate averages the M-step maximisers of the last ``patience`` (3) iterations, the
    values the history records, weighted by M; ``mu`` has no transform, so the average is on the
    natural scale. The average of the iterations' starting values (one row earlier) is 2e-5 away."""
    history = normal_fit.history.isel(iteration=slice(-3, None))
    weights = history["n_samples"].values
    expected = np.average(history["mu"].values, weights=weights)
    assert float(normal_fit.estimate["mu"]) == pytest.approx(expected, rel=1e-12)
    lagged = normal_fit.history.isel(iteration=slice(-4, -1))
    assert abs(np.average(lagged["mu"].values, weights=weights) - expected) > 1e-6


def test_em_mc_error_is_a_standard_deviation_in_the_parameters_units():
    """``mc_error`` is ``sqrt(diag(I_c^-1 V I_c^-1))`` with ``V`` the Monte Carlo variance of the
    mean score: scores k times larger give an error k times larger (a variance: k^2), and a
    complete information c times larger an error c times smaller."""
    from pymc_unbounded_dp.mcem.em import Information, mc_error
    from pymc_unbounded_dp.mcem.information import mean_variance

    scores = np.random.default_rng(4).normal(size=(400, 2)) * [0.5, 3.0]
    complete = np.array([[4.0, 1.0], [1.0, 2.0]])
    base = mc_error(Information(complete, complete / 2, scores), 400)
    inverse = np.linalg.inv(complete)
    np.testing.assert_allclose(
        base, np.sqrt(np.diag(inverse @ mean_variance(scores) @ inverse.T)), rtol=1e-12
    )
    scaled = mc_error(Information(complete, complete / 2, 10.0 * scores), 400)
    np.testing.assert_allclose(scaled, 10.0 * base, rtol=1e-12)
    stiffer = mc_error(Information(4.0 * complete, 2.0 * complete, scores), 400)
    np.testing.assert_allclose(stiffer, base / 4.0, rtol=1e-12)


def test_simulated_method_needs_a_differentiable_form(bounded_model):
    with pytest.raises(ValueError, match="no differentiable non-centred form"):
        mcem(bounded_model, method="simulated", progressbar=False)


@pytest.fixture(scope="module")
def vector_fit():
    """A vector ``mu`` and a scalar ``sigma``, four EM iterations (no convergence)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10, shape=2)
        sigma = pm.HalfNormal("sigma", 5)
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=30)
        pmdp.PrivatizedSum(
            "s",
            pm.math.clip(x, -4, 4),
            pmdp.Laplace(epsilon=1.0, sensitivity=8),
            observed=[28.0, -31.0],
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # few iterations: no convergence
        return mcem(model, random_seed=6, max_iterations=4, progressbar=False)


def test_vector_parameter_and_estimate_shapes(vector_fit):
    fit = vector_fit
    assert fit.estimate["mu"].shape == (2,) and fit.standard_error["mu"].shape == (2,)
    assert fit.history["mu"].dims == ("iteration", "mu_dim_0")
    assert fit.estimate["sigma"] > 0
    assert np.all(np.sign(fit.estimate["mu"]) == [1, -1])


def test_print_of_a_result_is_short_and_says_what_was_fitted(bounded_fit, vector_fit):
    text = repr(bounded_fit)
    assert len(text) < 1000 and str(bounded_fit) == text
    assert (
        "method='em'" in text and "converged='interior'" in text and "reason: EM converged" in text
    )
    row = next(line for line in text.splitlines() if line.startswith("theta"))
    estimate, se, mc_error = map(float, row.split()[1:])
    assert estimate == pytest.approx(float(bounded_fit.estimate["theta"]), rel=1e-3)
    assert se == pytest.approx(float(bounded_fit.standard_error["theta"]), rel=1e-3)
    assert mc_error == pytest.approx(float(bounded_fit.mc_error["theta"]), rel=1e-3)
    assert len(repr(bounded_fit.state)) < 1000  # the imputed records are not printed
    text = repr(vector_fit)
    assert "converged='budget'" in text and all(
        f"\n{k}" in text for k in ("mu[0]", "mu[1]", "sigma")
    )
    # any model: a 50 x 100 parameter with a long name and a long reason
    shape, name = (50, 100), "a_parameter_with_a_rather_long_name"
    huge = dataclasses.replace(
        vector_fit,
        **{
            field: {name: np.ones(shape)}
            for field in ("estimate", "standard_error", "mc_error", "standard_error_mc_error")
        },
        reason="the budget was spent " * 100,
    )
    assert len(repr(huge)) < 1000 and "4992 more elements: fit.summary()" in repr(huge)
    assert "\na_parameter_...[0,1] " in repr(huge)  # a long name is cut, the index kept


def test_summary_is_a_table_of_the_results_fields(vector_fit, bounded_fit):
    table = vector_fit.summary()
    assert list(table.columns) == ["estimate", "se", "lower", "upper", "mc_error", "se_mc_error"]
    assert list(table.index) == ["mu[0]", "mu[1]", "sigma"] and table.index.name == "parameter"
    for column, field in [
        ("estimate", vector_fit.estimate),
        ("se", vector_fit.standard_error),
        ("mc_error", vector_fit.mc_error),
        ("se_mc_error", vector_fit.standard_error_mc_error),
    ]:
        expected = np.concatenate([np.ravel(field["mu"]), np.ravel(field["sigma"])])
        np.testing.assert_array_equal(table[column].to_numpy(), expected)
    half = stats.norm.ppf(0.975) * table["se"]
    np.testing.assert_allclose(table["lower"], table["estimate"] - half, rtol=1e-12)
    np.testing.assert_allclose(table["upper"], table["estimate"] + half, rtol=1e-12)
    theta = bounded_fit.summary(prob=0.5).loc["theta"]
    se = float(bounded_fit.standard_error["theta"])
    assert theta["upper"] - theta["lower"] == pytest.approx(2 * stats.norm.ppf(0.75) * se)
    with pytest.raises(ValueError, match=r"summary: `prob` must be in \(0, 1\), got 95"):
        bounded_fit.summary(prob=95)


def test_to_dataframe_is_the_iteration_history(vector_fit):
    frame = vector_fit.to_dataframe()
    history = vector_fit.history
    assert frame.index.name == "iteration"
    assert list(frame.index) == list(history["iteration"].values) == [1, 2, 3, 4]
    assert list(frame.columns[:5]) == ["method", "n_samples", "mu[0]", "mu[1]", "sigma"]
    np.testing.assert_array_equal(frame["mu[1]"], history["mu"].values[:, 1])
    np.testing.assert_array_equal(frame["sigma"], history["sigma"].values)
    assert {"distance", "mc_error", "complete_loglik"} <= set(frame.columns)
    # the complete-data log-likelihood of 30 normal records: a log density, below 0 here
    assert (frame["complete_loglik"] < 0).all()
    assert list(frame["method"]) == ["em"] * 4


def test_same_seed_same_result(normal_model, normal_fit):
    again = mcem(normal_model, random_seed=2, tol=0.02, progressbar=False)
    assert float(again.estimate["mu"]) == float(normal_fit.estimate["mu"])
    assert again.history.equals(normal_fit.history)


def test_continue_from_result(normal_model, normal_fit):
    before = normal_fit.state.records.records[0].copy()
    more = mcem(
        normal_model, init=normal_fit, random_seed=7, max_iterations=5, tol=0.02, progressbar=False
    )
    done = normal_fit.history.sizes["iteration"]
    total = more.history.sizes["iteration"]
    assert total > done
    assert list(more.history["iteration"].values) == list(range(1, total + 1))
    # The Monte Carlo size carries on from where the previous run stopped.
    assert int(more.history["n_samples"][done]) == normal_fit.state.n_samples
    assert abs(float(more.estimate["mu"]) - float(normal_fit.estimate["mu"])) < 0.01
    np.testing.assert_array_equal(normal_fit.state.records.records[0], before)  # not mutated
    assert normal_fit.method == more.method == "em"  # an EM fit continues with EM
    # and so a second continuation with the same seed is the same run (the records, their
    # residual and the table's random stream are copied or reseeded, not carried on)
    again = mcem(
        normal_model, init=normal_fit, random_seed=7, max_iterations=5, tol=0.02, progressbar=False
    )
    assert again.history.equals(more.history)


def test_starting_values(normal_model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fit = mcem(
            normal_model, init={"mu": 1.2}, random_seed=8, max_iterations=1, progressbar=False
        )
    assert abs(float(fit.history["mu"][0]) - 1.2) < 0.2  # one EM step from 1.2, not from 0
    # the history's row is the step's maximiser (the estimate of a one-step run), not its start
    assert float(fit.history["mu"][0]) == float(fit.estimate["mu"]) != 1.2


def test_the_monte_carlo_size_grows_to_max_samples_and_stays(normal_model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # not converged at this tolerance
        fit = mcem(
            normal_model, initial_samples=10, growth=2.0, min_samples=10, max_samples=25,
            max_iterations=5, tol=1e-6, random_seed=3, progressbar=False,
        )  # fmt: skip
    assert fit.history["n_samples"].values.tolist() == [10, 20, 25, 25, 25]
    with pytest.raises(ValueError, match="unknown parameter"):
        mcem(normal_model, init={"nu": 1.0}, progressbar=False)


def test_starting_values_are_on_the_natural_scale(bounded_model):
    """``init`` gives theta itself, not its logit: 1.5 is outside theta's support."""
    with pytest.raises(ValueError, match="outside the parameters' support"):
        mcem(bounded_model, init={"theta": 1.5}, progressbar=False)


def _count_sweeps(monkeypatch) -> list[int]:
    """The ``n_moves`` of every sweep of the records' kernel from now on (the sweeps still run)."""
    from pymc_unbounded_dp import kernels

    made = []
    sweep = kernels.sweep

    def counted(target, state, rng, n_moves):
        made.append(n_moves)
        return sweep(target, state, rng, n_moves)

    monkeypatch.setattr(kernels, "sweep", counted)
    return made


def test_the_n_moves_asked_for_are_the_moves_made(unbounded_model, monkeypatch):
    made = _count_sweeps(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # one iteration: no convergence
        mcem(unbounded_model, n_moves=7, tune=3, max_iterations=1, random_seed=1, progressbar=False)
    assert made and set(made) == {7}


# --------------------------------------------------------------------------------------------------
# bad input and failures
# --------------------------------------------------------------------------------------------------
def test_discrete_parameter_is_rejected():
    with pm.Model() as model:
        pm.Poisson("k", 3.0)
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=3.0)
    with pytest.raises(ValueError, match="discrete parameter.*'k'"):
        mcem(model, progressbar=False)


def test_model_without_release_is_rejected():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
    with pytest.raises(ValueError, match="PrivatizedSum"):
        mcem(model, progressbar=False)


def test_records_without_parameters_are_rejected():
    with pm.Model() as model:
        pm.Normal("mu", 0, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(0.3), n=10)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=3.0)
    with pytest.raises(ValueError, match="does not depend on any model parameter"):
        mcem(model, progressbar=False)


def test_boundary_maximiser_stops_with_reason():
    """Noise so small that every imputed count is 0: the likelihood's supremum is at theta = 0."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=20)
        pmdp.PrivatizedSum("s", x, pmdp.DiscreteLaplace(epsilon=40.0), observed=0)
    with pytest.warns(UserWarning, match="boundary of the parameter space"):
        fit = mcem(model, random_seed=9, progressbar=False)
    assert not fit.converged
    assert "boundary" in fit.reason and "theta" in fit.reason
    assert np.isnan(fit.standard_error["theta"])


def test_unbounded_complete_data_likelihood_stops_with_reason():
    """One record and one imputed set per iteration: sigma -> 0 makes the complete-data
    likelihood unbounded. EM alone stops ("diverged"); the default hands over to the simulated
    likelihood, whose supremum is indeed at sigma -> 0: [N(mu, sigma^2) * Laplace(1)](0.3) is
    largest at mu = 0.3, sigma = 0."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 10)
        sigma = pm.HalfNormal("sigma", 1)
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=1)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=1.0), observed=0.3)
    options = {"initial_samples": 1, "growth": 1.0, "min_samples": 1, "progressbar": False}
    with pytest.warns(UserWarning, match="did not converge"):
        fit = mcem(model, method="em", random_seed=10, **options)
    assert not fit.converged and fit.converged == "diverged"
    assert "unbounded" in fit.reason
    with pytest.warns(UserWarning, match="boundary"):
        fit = mcem(model, random_seed=10, **options)
    assert fit.converged == "boundary" and fit.method == "simulated"
    assert fit.boundary.parameter == "sigma" and fit.boundary.limit == 0.0
    assert abs(float(fit.estimate["mu"]) - 0.3) < 0.05


def test_budget_exhausted_is_reported(bounded_model):
    with pytest.warns(UserWarning, match="max_iterations=2"):
        fit = mcem(bounded_model, random_seed=11, max_iterations=2, progressbar=False)
    assert not fit.converged and fit.converged == "budget"
    assert "max_iterations=2" in fit.reason
    assert fit.history.sizes["iteration"] == 2
    assert np.isfinite(fit.estimate["theta"])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"initial_samples": 0}, "initial_samples"),
        ({"growth": 0.5}, "growth"),
        ({"tol": -1.0}, "tol"),
        ({"tol": 0.0}, "tol"),  # a tolerance of 0 never stops
        ({"thin": 1.5}, "thin"),
        ({"max_samples": 50}, "max_samples"),
        ({"init": [0.3]}, "init"),
        ({"method": "newton"}, "method"),
        ({"batches": 1}, "batches"),
        ({"replicates": 0}, "replicates"),
        ({"switch_rate": 0.0}, "switch_rate"),
        ({"replicates": 400, "max_replicates": 200}, "max_replicates"),
    ],
)
def test_bad_options(bounded_model, options, message):
    with pytest.raises((ValueError, TypeError), match=message):
        mcem(bounded_model, progressbar=False, **options)


def test_chunked_evaluation_gives_the_same_fit(normal_model, normal_fit, monkeypatch):
    """The objective is evaluated over groups of imputed sets; the grouping changes nothing."""
    monkeypatch.setattr(objective_module, "CHUNK_ROWS", 7 * N_NORMAL + 3)
    chunked = mcem(normal_model, random_seed=2, tol=0.02, progressbar=False)
    assert chunked.history.sizes == normal_fit.history.sizes
    np.testing.assert_allclose(chunked.history["mu"], normal_fit.history["mu"], rtol=1e-8)
    np.testing.assert_allclose(
        chunked.standard_error["mu"], normal_fit.standard_error["mu"], rtol=1e-6
    )


# --------------------------------------------------------------------------------------------------
# the start of a run, what a run prints and warns
# --------------------------------------------------------------------------------------------------
def _options(**changes):
    from pymc_unbounded_dp.mcem.options import validated_options

    defaults = dict(
        initial_samples=10, growth=1.25, min_samples=100, max_samples=5000, max_iterations=60,
        tol=0.05, patience=3, thin=1, tune=100, n_moves=None, switch_rate=0.9, replicates=100,
        batches=4, max_replicates=3200,
    )  # fmt: skip
    return validated_options(**{**defaults, **changes})


def _objective(model):
    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp.mcem.objective import complete_data_loglik

    return complete_data_loglik(compile_model(model), include_prior=False)


def test_a_new_run_tunes_the_chain_for_tune_sweeps_at_the_initial_point(bounded_model, monkeypatch):
    from pymc_unbounded_dp.mcem.start import start

    made = _count_sweeps(monkeypatch)
    objective = _objective(bounded_model)
    for tune in (0, 1, 5):
        made.clear()
        begun = start(objective, _options(tune=tune), np.random.default_rng(0), None)
        assert len(made) == tune and set(made) <= {0}  # bounded DP: no birth/death moves
        assert begun.n_samples == 10 and begun.previous is None
        np.testing.assert_allclose(begun.unconstrained, [0.0])  # theta = 1/2, log-odds 0
        assert begun.records.n == N_BOUNDED


def test_a_fit_of_a_transformed_parameter_continues_from_its_state(bounded_model, bounded_fit):
    """theta's value variable is ``theta_logodds__``: the result's names are the unconstrained
    ones; a result for other parameters is refused."""
    from pymc_unbounded_dp.mcem.start import start

    objective = _objective(bounded_model)
    state = bounded_fit.state
    assert state.parameter_names == ("theta_logodds__",)
    begun = start(objective, _options(), np.random.default_rng(0), bounded_fit)
    np.testing.assert_array_equal(begun.unconstrained, state.unconstrained)
    assert begun.unconstrained is not state.unconstrained
    assert begun.n_samples == state.n_samples and begun.previous is bounded_fit.history
    np.testing.assert_array_equal(begun.records.records[0], state.records.records[0])
    other = dataclasses.replace(
        bounded_fit, state=dataclasses.replace(state, parameter_names=("mu",))
    )
    with pytest.raises(ValueError, match="is a result for a model with parameters"):
        start(objective, _options(), np.random.default_rng(0), other)


def test_print_shows_the_simulated_loglik_only_when_there_is_one(bounded_fit):
    assert "loglik" not in repr(bounded_fit)  # EM: NaN, not shown
    simulated = dataclasses.replace(bounded_fit, method="simulated", loglik=-12.25)
    header = repr(simulated).splitlines()[0]
    assert header.startswith("MCEMResult(method='simulated'") and header.endswith(
        ", loglik=-12.25)"
    )


def test_a_boundary_describes_each_profile_value_with_its_loglik_and_error():
    from pymc_unbounded_dp.mcem import Boundary

    boundary = Boundary(
        "sigma", "lower", 0.0, np.array([1.0, 0.5]), np.array([-3.0, -2.5]), np.array([0.01, 0.2])
    )
    assert boundary.describe() == (
        "the likelihood increases as sigma -> 0 (lower boundary); profile log-likelihood "
        "(value: log L ± Monte Carlo error) 1: -3.000 ± 0.010, 0.5: -2.500 ± 0.200"
    )


def test_progressbar_false_prints_nothing_and_true_shows_the_iterations(bounded_model, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # one iteration: no convergence
        mcem(bounded_model, random_seed=1, max_iterations=1, tune=0, progressbar=False)
        assert capsys.readouterr().err == ""
        mcem(bounded_model, random_seed=1, max_iterations=1, tune=0, progressbar=True)
    assert "MCEM" in capsys.readouterr().err


def test_the_not_converged_warning_points_at_the_callers_line(bounded_model):
    import inspect

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mcem(bounded_model, random_seed=1, max_iterations=1, tune=0, progressbar=False)
        line = inspect.currentframe().f_lineno - 1
    hits = [(w.filename, w.lineno) for w in caught if "did not converge" in str(w.message)]
    assert hits == [(__file__, line)]


def _result_of(estimate: dict) -> MCEMResult:
    """A result built by hand: the given estimates, and as ``standard_error``, ``mc_error`` and
    ``standard_error_mc_error`` the estimates plus 100, 200 and 300."""
    import xarray as xr

    from pymc_unbounded_dp.mcem import MCEMState

    def plus(offset):
        return {name: np.asarray(value, dtype=float) + offset for name, value in estimate.items()}

    size = sum(np.size(value) for value in estimate.values())
    return MCEMResult(
        estimate=plus(0.0),
        standard_error=plus(100.0),
        covariance=np.eye(size),
        mc_error=plus(200.0),
        standard_error_mc_error=plus(300.0),
        history=xr.Dataset(),
        converged=Convergence.BUDGET,
        reason="the budget was spent",
        method="em",
        missing_information=0.5,
        boundary=None,
        loglik=math.nan,
        state=MCEMState(None, np.zeros(size), 10, tuple(estimate), "em"),
    )


def test_print_lists_eight_elements_and_says_how_many_more_only_beyond_eight():
    """``print(result)`` shows at most 8 parameter elements: 8 are all shown with no note, of 9
    the ninth is announced as '1 more elements'."""
    eight = repr(_result_of({"beta": np.arange(8.0)}))
    assert "more elements" not in eight
    assert eight.splitlines()[-2].startswith("beta[7] ")
    nine = repr(_result_of({"beta": np.arange(9.0)}))
    assert nine.splitlines()[-3].startswith("beta[7] ") and "beta[8]" not in nine
    assert nine.splitlines()[-2] == "... 1 more elements: fit.summary()"


def test_a_matrix_parameters_elements_are_labelled_in_row_major_order():
    """``Phi`` of shape (2, 3) holding 0..5 in C order: ``Phi[i,j]`` is ``3 i + j`` in the summary
    (estimate, se = +100, mc_error = +200, se_mc_error = +300) and in the print."""
    fit = _result_of({"Phi": np.arange(6.0).reshape(2, 3), "sigma": 7.0})
    table = fit.summary()
    labels = ["Phi[0,0]", "Phi[0,1]", "Phi[0,2]", "Phi[1,0]", "Phi[1,1]", "Phi[1,2]", "sigma"]
    assert list(table.index) == labels
    expected = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0])
    for column, offset in (("estimate", 0), ("se", 100), ("mc_error", 200), ("se_mc_error", 300)):
        np.testing.assert_array_equal(table[column].to_numpy(), expected + offset)
    rows = {line.split()[0]: line.split()[1:] for line in repr(fit).splitlines()[2:-1]}
    assert rows["Phi[0,2]"] == ["2", "102", "202"] and rows["Phi[1,0]"] == ["3", "103", "203"]


def test_summary_refuses_a_probability_of_zero_or_one():
    """The Wald interval needs ``0 < prob < 1``: at 1 it would be infinite, at 0 empty."""
    fit = _result_of({"mu": 1.0})
    for prob in (0, 0.0, 1, 1.0):
        with pytest.raises(ValueError, match=r"summary: `prob` must be in \(0, 1\)"):
            fit.summary(prob=prob)
    assert fit.summary(prob=0.999).loc["mu", "upper"] < math.inf


def test_the_history_keeps_the_continued_runs_rows_and_marks_absent_statistics_nan():
    """:func:`history`: an EM row and a simulated row each lack the other's statistics (NaN, not
    0); a continued run appends its rows after the previous ones, and one that recorded no
    iteration keeps the previous history whole."""
    from pymc_unbounded_dp.mcem.objective import Layout
    from pymc_unbounded_dp.mcem.result import history

    layout = Layout.of(["mu"], [()])
    rows = [
        {"iteration": 1, "method": "em", "n_samples": 10, "mu": 0.5, "distance": 0.3},
        {"iteration": 2, "method": "simulated", "n_samples": 100, "mu": 0.6, "simulated_loglik": -4.0},
    ]  # fmt: skip
    first = history(rows, layout, None)
    assert list(first["iteration"].values) == [1, 2]
    assert list(first["method"].values) == ["em", "simulated"]
    np.testing.assert_array_equal(first["distance"].values, [0.3, np.nan])
    np.testing.assert_array_equal(first["simulated_loglik"].values, [np.nan, -4.0])
    np.testing.assert_array_equal(first["mu"].values, [0.5, 0.6])
    more = [{"iteration": 3, "method": "simulated", "n_samples": 200, "mu": 0.7, "simulated_loglik": -3.5}]  # fmt: skip
    continued = history(more, layout, first)
    assert list(continued["iteration"].values) == [1, 2, 3]
    np.testing.assert_array_equal(continued["mu"].values, [0.5, 0.6, 0.7])
    np.testing.assert_array_equal(continued["distance"].values, [0.3, np.nan, np.nan])
    assert history([], layout, first).equals(first)
