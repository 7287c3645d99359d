"""The moments of one record's statistic vector (:mod:`pymc_unbounded_dp.moments`), the building
block of the sums level's normal approximation, against exact integrals and Monte Carlo."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import integrate, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model, statistic_function
from pymc_unbounded_dp.examples import regression as reg
from pymc_unbounded_dp.moments import integration_error, moment_function, record_moments

LOW, HIGH, CUT = -1.0, 2.0, 0.5


@pytest.fixture(scope="module")
def clamped():
    """One Normal record; a clamp, its square and an indicator (a kink, a kink and a jump)."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        sigma = pm.HalfNormal("sigma")
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=50)
        t = pt.stack([pt.clip(x, LOW, HIGH), pt.clip(x, LOW, HIGH) ** 2, x > CUT], axis=1)
        pmdp.PrivatizedSum("s", t, pmdp.Laplace(epsilon=1.0, sensitivity=7.0), observed=np.zeros(3))
    table = compile_model(model).tables[0]
    return table, moment_function(record_moments(table))


def _clamp_and_indicator(x):
    c = np.clip(x, LOW, HIGH)
    return np.array([c, c * c, float(x > CUT)])


def _exact(mu: float, sigma: float, t=_clamp_and_indicator):
    def expect(f):
        points = [LOW, HIGH, CUT]
        return integrate.quad(
            lambda x: f(x) * stats.norm.pdf(x, mu, sigma),
            mu - 12 * sigma,
            mu + 12 * sigma,
            points=[p for p in points if abs(p - mu) < 12 * sigma],
            epsabs=1e-13,
            epsrel=1e-13,
            limit=400,
        )[0]

    mean = np.array([expect(lambda x, j=j: t(x)[j]) for j in range(3)])
    cov = np.array(
        [
            [
                expect(lambda x, i=i, j=j: (t(x)[i] - mean[i]) * (t(x)[j] - mean[j]))
                for j in range(3)
            ]
            for i in range(3)
        ]
    )
    third = np.array([expect(lambda x, j=j: abs(t(x)[j] - mean[j]) ** 3) for j in range(3)])
    return mean, cov, third


@pytest.mark.parametrize(
    "mu, sigma",
    [(0.0, 1.0), (1.7, 0.05), (-3.0, 2.0), (0.4, 6.0), (5.0, 1.0)],
)
def test_clamped_normal_moments_match_exact_integrals(clamped, mu, sigma):
    # The default rule (6 points a piece) is good to ~1e-5 of the statistics (O(1) here); a cut
    # missed, or a piece's weight slipped, moves these by 1e-4 or more (the rule without its
    # cuts is off by ~1e-3 here); the tolerance is 2e-5. The third absolute moment has a kink
    # of its own at the mean, which the rule does not cut: it is an accuracy figure, good to
    # ~1e-5 relative (a slip in it, e.g. the raw instead of the centred moment, is off by > 10%).
    _, fn = clamped
    mean, cov, third = fn(np.float64(mu), np.float64(sigma))
    exact_mean, exact_cov, exact_third = _exact(mu, sigma)
    np.testing.assert_allclose(mean, exact_mean, rtol=0, atol=2e-5)
    np.testing.assert_allclose(cov, exact_cov, rtol=0, atol=2e-5)
    np.testing.assert_allclose(third, exact_third, rtol=1e-3, atol=1e-6)


def test_integration_error_is_small_and_reported(clamped):
    table, _ = clamped
    mean_error, covariance_error = integration_error(table, [np.float64(0.3), np.float64(1.2)])
    assert 0.0 < mean_error < 1e-5
    assert 0.0 < covariance_error < 1e-5


def test_regression_moments_match_monte_carlo():
    """Three record variables, each a Normal given the earlier ones, every coordinate clamped:
    the nested rule against 10^6 simulated records (means and variances within 4.5 SE; a wrong
    conditional law, e.g. x2 | x1 taken as independent of x1, moves sum_x1x2 by ~40 SE)."""
    data = reg.simulate_regression(n=200, seed=1)
    model = reg.regression_model(reg.privatize_regression(data, 1.0, 0.5, seed=2))
    table = compile_model(model).tables[0]
    values = {
        "mu": np.array([1.0, -1.0]),
        "Phi_c1": np.float64(1.5),
        "Phi_c2": np.float64(0.8),
        "Phi_z": np.float64(0.6),
        "tau": np.float64(0.7),
        "beta": np.array([0.5, -1.0, 1.0]),
        "n": np.int64(200),
    }
    fn = moment_function(record_moments(table))
    mean, cov, _ = fn(*[values[rv.name] for rv in model.free_RVs])

    rng = np.random.default_rng(7)
    c1, c2, z = values["Phi_c1"], values["Phi_c2"], values["Phi_z"]
    a = np.array([[np.sqrt(c1), 0.0], [z, np.sqrt(c2)]])
    x = rng.multivariate_normal(values["mu"], np.linalg.inv(a @ a.T), size=1_000_000)
    b = values["beta"]
    y = b[0] + x @ b[1:] + rng.normal(0.0, 1.0 / np.sqrt(values["tau"]), size=len(x))
    t = np.asarray(statistic_function(table.spec)(x[:, 0], x[:, 1], y))
    mc_mean, mc_var = t.mean(axis=0), t.var(axis=0)
    se_mean = t.std(axis=0) / np.sqrt(len(t))
    se_var = ((t - mc_mean) ** 2).std(axis=0) / np.sqrt(len(t))
    assert np.all(np.abs(mean - mc_mean) < 4.5 * se_mean)
    assert np.all(np.abs(np.diag(cov) - mc_var) < 4.5 * se_var)


def test_records_without_a_moment_rule_are_named():
    with pm.Model() as model:
        lam = pm.Exponential("lam", 1.0)
        x = pmdp.Records("x", pm.Poisson.dist(lam), n=20)
        pmdp.PrivatizedSum(
            "s", pm.math.clip(x, 0, 3), pmdp.Laplace(epsilon=1.0, sensitivity=3.0), observed=5.0
        )
    reason = record_moments(compile_model(model).tables[0])
    assert isinstance(reason, str)
    assert "'x'" in reason and "Poisson" in reason


def _clamp_polynomials(x):
    c = np.clip(x, LOW, HIGH)
    return np.array([c, c * c, 3 * c**3 - 1])


@pytest.fixture(scope="module")
def closed_form():
    with pm.Model() as model:
        mu = pm.Normal("mu")
        sigma = pm.HalfNormal("sigma")
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=50)
        c = pt.clip(x, LOW, HIGH)
        t = pt.stack([c, pt.sqr(c), 3 * c**3 - 1], axis=1)  # Sqr, Pow and Mul: degrees 2, 3
        pmdp.PrivatizedSum(
            "s", t, pmdp.Laplace(epsilon=1.0, sensitivity=29.0), observed=np.zeros(3)
        )
    moments = record_moments(compile_model(model).tables[0])
    return moments, moment_function(moments)


@pytest.mark.parametrize(
    "mu, sigma", [(0.0, 1.0), (1.7, 0.05), (-3.0, 2.0), (0.4, 6.0), (5.0, 1.0)]
)
def test_the_last_normal_record_is_integrated_in_closed_form(closed_form, mu, sigma):
    # A clamp and polynomials of it: the closed form against exact integrals, to 1e-10 (and
    # 1e-11 relative: the cubic's variance reaches ~160, where quad's own rounding is ~1e-10).
    # A slip in it (a point mass at a bound dropped, a wrong binomial term) is off by > 1e-3.
    moments, fn = closed_form
    assert moments.closed_form and moments.third is None
    mean, cov, _ = fn(np.float64(mu), np.float64(sigma))
    exact_mean, exact_cov, _ = _exact(mu, sigma, _clamp_polynomials)
    np.testing.assert_allclose(mean, exact_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cov, exact_cov, rtol=1e-11, atol=1e-10)


def _normal_table(statistic, size):
    with pm.Model() as model:
        mu = pm.Normal("mu")
        sigma = pm.HalfNormal("sigma")
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=50)
        pmdp.PrivatizedSum(
            "s", statistic(x), pmdp.Laplace(epsilon=1.0), observed=np.zeros(size),
            check_sensitivity=False,
        )  # fmt: skip
    return compile_model(model).tables[0]


def test_a_kink_of_abs_is_cut_and_the_error_is_the_worst_coordinates():
    """``|x|`` has a kink at 0, where the rule cuts (7.9e-6 off the exact mean at mu = 0.4,
    sigma = 1; about 1e-3 without the cut). The integration error reported for several
    statistics is the largest of theirs: ``sqrt|x|`` (error about 1e-3) beside ``x``."""
    values = [np.float64(0.4), np.float64(1.0)]
    table = _normal_table(lambda x: pt.stack([x, pt.abs(x)], axis=1), 2)
    mean = moment_function(record_moments(table))(*values)[0]
    exact = integrate.quad(lambda x: abs(x) * stats.norm.pdf(x, 0.4, 1.0), -12, 12, points=[0])
    assert mean[1] == pytest.approx(exact[0], abs=2e-5)
    root = _normal_table(lambda x: pt.sqrt(pt.abs(x))[:, None], 1)
    both = _normal_table(lambda x: pt.stack([pt.sqrt(pt.abs(x)), x], axis=1), 2)
    alone = integration_error(root, values)[0]
    assert alone > 1e-4 and integration_error(both, values)[0] == pytest.approx(alone, rel=1e-9)


def test_a_constant_statistic_has_no_integration_error():
    """A count of records released beside a root (a coordinate of standard deviation 0, exact at
    any rule): the error is the root's alone, with no division by its zero spread."""
    values = [np.float64(0.4), np.float64(1.0)]
    root = _normal_table(lambda x: pt.sqrt(pt.abs(x))[:, None], 1)
    counted = _normal_table(lambda x: pt.stack([pt.sqrt(pt.abs(x)), pt.ones_like(x)], axis=1), 2)
    alone = integration_error(root, values)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert integration_error(counted, values) == pytest.approx(alone, rel=1e-9)


def _assert_closed_form_is_exact(statistic, by_hand, atol: float, rtol: float) -> None:
    """Three coordinates of one normal record in closed form, against quadrature at
    ``mu = 0.4``, ``sigma = 1.3``."""
    moments = record_moments(_normal_table(statistic, 3))
    assert moments.closed_form
    mean, cov, _ = moment_function(moments)(np.float64(0.4), np.float64(1.3))
    exact_mean, exact_cov, _ = _exact(0.4, 1.3, by_hand)
    np.testing.assert_allclose(mean, exact_mean, rtol=0, atol=atol)
    np.testing.assert_allclose(cov, exact_cov, rtol=rtol, atol=atol)


def test_a_power_of_a_product_has_the_degree_of_both():
    """``(c * c) ** 2`` is of degree 4 (the power times its base's degree 2): a rule fitted to
    degree 2 would miss ``E[c^4]``."""

    def fourth(x):
        c = np.clip(x, LOW, HIGH)
        return np.array([c, (c * c) ** 2, c * c])

    def statistic(x):
        c = pt.clip(x, LOW, HIGH)
        return pt.stack([c, (c * c) ** 2, c * c], axis=1)

    _assert_closed_form_is_exact(statistic, fourth, atol=1e-9, rtol=1e-9)


def test_a_square_written_with_sqr_has_degree_two_in_the_closed_form():
    """``pt.sqr`` as the highest power: the closed form's polynomial degree is 2 (with degree 1
    the rule would be fitted to a line and miss ``E[c^2]`` by ~0.1 here)."""

    def squares(x):
        c = np.clip(x, LOW, HIGH)
        return np.array([c, c * c, 2 * c * c])

    def statistic(x):
        c = pt.clip(x, LOW, HIGH)
        return pt.stack([c, pt.sqr(c), 2 * pt.sqr(c)], axis=1)

    _assert_closed_form_is_exact(statistic, squares, atol=1e-10, rtol=1e-11)
