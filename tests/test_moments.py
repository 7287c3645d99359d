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


@pytest.mark.parametrize("low, high", [(LOW, np.inf), (-np.inf, HIGH)])
def test_a_clamp_on_one_side_only_has_the_moments_of_that_clamp(low, high):
    """``clip(x, 0, inf)`` (``check_sensitivity=False``) is clamped below only: a point mass at
    the finite bound and none at the infinite one. It once went to the no-clamp branch and
    came out NaN (``inf * 0``)."""

    def by_hand(x):
        c = np.clip(x, low, high)
        return np.array([c, c * c, c * c * c])

    def statistic(x):
        c = pt.clip(x, low, high)
        return pt.stack([c, c * c, c * c * c], axis=1)

    # a clamp taken for no clamp is off by O(1) (E[x] = 0.4 against E[max(x, -1)] ~ 0.53)
    _assert_closed_form_is_exact(statistic, by_hand, atol=1e-9, rtol=1e-9)


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


# --------------------------------------------------------------------------------------------------
# each rule and branch at a setting where it differs from the default one
# --------------------------------------------------------------------------------------------------
def _normal_raw_moments(mu: float, sigma: float, top: int) -> np.ndarray:
    """``E[x^k]``, ``k = 0..top``, of ``N(mu, sigma^2)`` (SciPy's closed form)."""
    return np.array([1.0] + [stats.norm(mu, sigma).moment(k) for k in range(1, top + 1)])


def _polynomial_moments(raw: np.ndarray, powers: list[int]):
    """Mean and covariance of ``(x^p for p in powers)`` from the raw moments of ``x``."""
    mean = np.array([raw[p] for p in powers])
    cov = np.array([[raw[p + q] - raw[p] * raw[q] for q in powers] for p in powers])
    return mean, cov


@pytest.fixture(scope="module")
def cubic():
    """One Normal record and its first three powers, with no clamp: the closed form (the
    normal's own moments) and the Gauss--Hermite rule (no kink to cut)."""
    table = _normal_table(lambda x: pt.stack([x, x * x, x**3], axis=1), 3)
    return table, record_moments(table), record_moments(table, closed_form=False)


def test_powers_of_an_unclamped_normal_record_have_the_normal_moments_in_closed_form(cubic):
    """``E[x^k]`` up to ``k = 6`` (the cube's variance): the closed form's unclamped branch, with
    ``E[z^k] = (k - 1)!!``, to rounding. A slipped double factorial (``k!!``) doubles ``E[z^2]``."""
    _, moments, _ = cubic
    assert moments.closed_form
    fn = moment_function(moments)
    for mu, sigma in ((0.4, 1.3), (-2.0, 0.5)):
        mean, cov, third = fn(np.float64(mu), np.float64(sigma))
        exact_mean, exact_cov = _polynomial_moments(_normal_raw_moments(mu, sigma, 6), [1, 2, 3])
        assert third is None
        np.testing.assert_allclose(mean, exact_mean, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cov, exact_cov, rtol=1e-11, atol=1e-11)


def test_the_rule_for_a_normal_record_without_kinks_is_exact_for_polynomials(cubic):
    """Without the closed form, a Normal record with no kink gets ``2 * nodes`` Gauss--Hermite
    points of the standard normal (probabilists' Hermite), exact for these degrees (<= 6 < 24);
    the physicists' rule (weight ``exp(-u^2)``) would halve the variance."""
    _, _, moments = cubic
    assert not moments.closed_form and moments.nodes == 12
    mu, sigma = 0.4, 1.3
    mean, cov, third = moment_function(moments)(np.float64(mu), np.float64(sigma))
    exact_mean, exact_cov = _polynomial_moments(_normal_raw_moments(mu, sigma, 6), [1, 2, 3])
    np.testing.assert_allclose(mean, exact_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cov, exact_cov, rtol=1e-11, atol=1e-11)
    # E|x - mu|^3 = 2 sqrt(2 / pi) sigma^3 (|z|^3 is not a polynomial: the rule is good to 1e-2)
    assert third[0] == pytest.approx(2.0 * np.sqrt(2.0 / np.pi) * sigma**3, rel=1e-2)


def test_the_jump_of_a_sign_is_cut_where_the_record_crosses_zero():
    """``sign(x)`` jumps at ``x = 0`` (the ancillary ``-mu / sigma``, which moves with the
    parameters): the rule cuts there, so its mean ``2 Phi(mu / sigma) - 1`` and variance
    ``1 - mean^2`` are good to ~1e-6 (the rule's accuracy on the pieces; a jump inside a piece
    is off by ~1e-2)."""
    table = _normal_table(lambda x: pt.sign(x)[:, None], 1)
    fn = moment_function(record_moments(table))
    for mu, sigma in ((0.4, 1.3), (-1.1, 0.7)):
        mean, cov, _ = fn(np.float64(mu), np.float64(sigma))
        expected = 2.0 * stats.norm.cdf(mu / sigma) - 1.0
        assert mean[0] == pytest.approx(expected, abs=1e-5)
        assert cov[0, 0] == pytest.approx(1.0 - expected**2, abs=1e-5)


def _uniform_moments(statistic, size: int):
    """The moment function of a Normal record then a Uniform one whose bounds move with the
    parameters (``mu``, ``sigma``, ``a``, ``w``: ``x ~ N(mu, sigma^2)``, ``u ~ U(a, a + w)``)."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        sigma = pm.HalfNormal("sigma")
        a = pm.Normal("a")
        w = pm.HalfNormal("w")
        x = pmdp.Records("x", pm.Normal.dist(mu, sigma), n=50)
        u = pmdp.Records("u", pm.Uniform.dist(a, a + w), n=50)
        pmdp.PrivatizedSum(
            "s", statistic(x, u), pmdp.Laplace(epsilon=1.0), observed=np.zeros(size),
            check_sensitivity=False,
        )  # fmt: skip
    moments = record_moments(compile_model(model).tables[0])
    assert not moments.closed_form
    return moment_function(moments)


def test_uniform_records_are_integrated_over_their_range_beside_a_normal_one():
    """Statistics polynomial in both records (no kink; once a crash: the rule stacked an empty
    list of cuts): the uniform's ancillary is integrated on ``[0, 1]`` by Gauss--Legendre (not as a normal one by Gauss--Hermite), and the last record
    is not integrated in closed form (that form is the Normal law's): the moments are exact."""
    fn = _uniform_moments(lambda x, u: pt.stack([x, u, u * u, x * u], axis=1), 4)
    m, s, lo, width = 0.4, 1.3, -0.5, 2.0
    mean, cov, _ = fn(*map(np.float64, (m, s, lo, width)))
    # E[x^p u^q]: x ~ N(m, s^2) and u ~ U(lo, lo + width) independent
    x_raw = _normal_raw_moments(m, s, 2)
    hi = lo + width
    u_raw = [(hi ** (q + 1) - lo ** (q + 1)) / ((q + 1) * width) for q in range(5)]
    powers = [(1, 0), (0, 1), (0, 2), (1, 1)]
    raw = lambda p, q: x_raw[p] * u_raw[q]  # noqa: E731
    exact_mean = np.array([raw(p, q) for p, q in powers])
    exact_cov = np.array(
        [[raw(p + r, q + t) - raw(p, q) * raw(r, t) for r, t in powers] for p, q in powers]
    )
    np.testing.assert_allclose(mean, exact_mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cov, exact_cov, rtol=1e-11, atol=1e-12)


def test_a_clamp_of_a_uniform_record_is_cut_at_its_bounds():
    """``clip(u, 0.2, 1)``, ``u ~ U(-0.5, 1.5)``: 0.2 below 0.2 (mass 0.35), ``u`` between
    (0.4), 1 above (0.25), by hand; the cuts at the bounds' ancillaries make the rule exact."""
    fn = _uniform_moments(lambda x, u: pt.stack([x, pt.clip(u, 0.2, 1.0)], axis=1), 2)
    width = 2.0
    mean, cov, _ = fn(*map(np.float64, (0.4, 1.3, -0.5, width)))
    clamp_mean = 0.2 * 0.35 + (1.0 - 0.04) / (2.0 * width) + 1.0 * 0.25
    clamp_square = 0.04 * 0.35 + (1.0 - 0.008) / (3.0 * width) + 1.0 * 0.25
    assert mean[1] == pytest.approx(clamp_mean, abs=1e-12)
    assert cov[1, 1] == pytest.approx(clamp_square - clamp_mean**2, abs=1e-12)


def test_two_different_clamps_of_the_last_record_are_not_one_polynomial():
    """``clip(x, -1, 2)`` beside ``clip(x, 0, 1)``: no single clamp to integrate in closed form,
    so the rule (cut at all four bounds) gives each its own moments."""
    table = _normal_table(lambda x: pt.stack([pt.clip(x, LOW, HIGH), pt.clip(x, 0, 1)], axis=1), 2)
    moments = record_moments(table)
    assert not moments.closed_form
    mu, sigma = 0.4, 1.3

    def expect(f):
        density = lambda x: f(x) * stats.norm.pdf(x, mu, sigma)  # noqa: E731
        points = [LOW, 0.0, 1.0, HIGH]
        return integrate.quad(density, mu - 12 * sigma, mu + 12 * sigma, points=points)[0]

    wide, narrow = (lambda x: np.clip(x, LOW, HIGH)), (lambda x: np.clip(x, 0.0, 1.0))
    m = np.array([expect(wide), expect(narrow)])
    exact = [
        [expect(lambda x, f=f, g=g: f(x) * g(x)) for g in (wide, narrow)] for f in (wide, narrow)
    ]
    mean, cov, _ = moment_function(moments)(np.float64(mu), np.float64(sigma))
    # the rule is good to ~1e-5 of the statistics' scale; the narrow clamp taken as the wide
    # one would be off by ~0.5
    np.testing.assert_allclose(mean, m, rtol=0, atol=2e-5)
    np.testing.assert_allclose(cov, np.array(exact) - np.outer(m, m), rtol=0, atol=2e-5)


def test_integration_error_follows_the_closed_form_setting():
    """A clamp and its square in closed form have no rule to err: ``(0, 0)`` exactly; with
    ``closed_form=False`` the error is that of the rule, the difference of the rules of 6 and 8
    points a piece, by hand."""
    table = _normal_table(
        lambda x: pt.stack([pt.clip(x, LOW, HIGH), pt.clip(x, LOW, HIGH) ** 2], axis=1), 2
    )
    values = [np.float64(0.4), np.float64(1.3)]
    assert integration_error(table, values) == (0.0, 0.0)
    coarse = moment_function(record_moments(table, 6, closed_form=False))(*values)
    fine = moment_function(record_moments(table, 8, closed_form=False))(*values)
    sd = np.sqrt(np.diag(fine[1]))
    mean_error = np.max(np.abs(coarse[0] - fine[0]) / sd)
    covariance_error = np.max(np.abs(coarse[1] - fine[1])) / np.max(np.abs(fine[1]))
    got = integration_error(table, values, closed_form=False)
    assert mean_error > 0.0 and covariance_error > 0.0
    assert got == pytest.approx((mean_error, covariance_error), rel=1e-9)


def _gaussian_expectation(f, points: int = 10) -> float:
    """``E f(z_1, z_2, z_3)`` over three independent standard normals by a tensor Gauss--Hermite
    rule (exact for polynomials of degree < 2 * points in each)."""
    z, w = np.polynomial.hermite_e.hermegauss(points)
    w = w / np.sqrt(2.0 * np.pi)
    z1, z2, z3 = np.meshgrid(z, z, z, indexing="ij")
    weight = w[:, None, None] * w[None, :, None] * w[None, None, :]
    return float(np.sum(weight * f(z1, z2, z3)))


def test_a_chain_of_normal_records_has_its_joint_moments_with_the_last_in_closed_form():
    """``x1 ~ N(mu, 1)``, ``x2 | x1 ~ N(x1, 0.5^2)``, ``y | x2 ~ N(c + x2, s^2)``, statistics
    polynomial in each: ``x1`` and ``x2`` by the nested Hermite rules (each point of ``x1``
    repeated under the ``x2`` points, with the product weights), ``y`` in closed form at each
    of their points. The exact joint moments of the Gaussian vector, by an independent tensor
    rule, to rounding."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        c = pm.Normal("c")
        s = pm.HalfNormal("s")
        x1 = pmdp.Records("x1", pm.Normal.dist(mu, 1.0), n=50)
        x2 = pmdp.Records("x2", pm.Normal.dist(x1, 0.5), n=50)
        y = pmdp.Records("y", pm.Normal.dist(c + x2, s), n=50)
        t = pt.stack([x1, x2, x1 * x2, y, y * x1, y * y], axis=1)
        pmdp.PrivatizedSum(
            "s_dp", t, pmdp.Laplace(epsilon=1.0), observed=np.zeros(6), check_sensitivity=False
        )
    moments = record_moments(compile_model(model).tables[0])
    assert moments.closed_form and moments.nodes == 144
    m, cc, ss = 0.7, -0.4, 0.8
    mean, cov, _ = moment_function(moments)(*map(np.float64, (m, cc, ss)))

    def statistics(z1, z2, z3):
        a = m + z1
        b = a + 0.5 * z2
        v = cc + b + ss * z3
        return [a, b, a * b, v, v * a, v * v]

    exact_mean = np.array(
        [_gaussian_expectation(lambda *z, j=j: statistics(*z)[j]) for j in range(6)]
    )
    exact_cov = np.array(
        [
            [
                _gaussian_expectation(
                    lambda *z, i=i, j=j: (
                        (statistics(*z)[i] - exact_mean[i]) * (statistics(*z)[j] - exact_mean[j])
                    ),
                )
                for j in range(6)
            ]
            for i in range(6)
        ]
    )
    np.testing.assert_allclose(mean, exact_mean, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(cov, exact_cov, rtol=1e-10, atol=1e-11)
