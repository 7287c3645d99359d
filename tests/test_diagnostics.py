"""The plug-in diagnostic: (0, delta)-DP conversions, the posterior of n from the count release,
the bound of Awan, Barrientos & Ju, and the empirical comparison of two posteriors."""

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import xarray as xr
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.diagnostics import (
    PluginCheck,
    compare_posteriors,
    count_posterior,
    zero_delta,
)
from pymc_unbounded_dp.privacy import Guarantee


def _laplace_mean_abs(epsilon: float) -> float:
    """``E|e|`` of the discrete Laplace on the integers with scale ``1/epsilon``.

    ``P(e = k) = (1 - q)/(1 + q) q^|k|`` with ``q = e^-epsilon``, so ``E|e| = 2 (1 - q)/(1 + q)
    sum_k k q^k = 2 (1 - q)/(1 + q) q/(1 - q)^2 = 2q / (1 - q^2)``.
    """
    q = math.exp(-epsilon)
    return 2.0 * q / (1.0 - q * q)


def _direct(log_weight, top: int):
    """Posterior of n on 0..top by brute-force summation (the independent computation)."""
    n = np.arange(top + 1)
    log_w = log_weight(n)
    w = np.exp(log_w - log_w.max())
    return n, w / w.sum()


def _bernoulli_model(epsilon_n, n_dp=1000, s_mechanism=None, prior=None):
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        mechanism = (
            epsilon_n
            if isinstance(epsilon_n, pmdp.Mechanism)
            else pmdp.DiscreteLaplace(epsilon=epsilon_n)
        )
        n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=mechanism, prior=prior)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, s_mechanism or pmdp.Laplace(epsilon=1.0), observed=300.0)
    return model


# --------------------------------------------------------------------------------------------------
# conversions
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("guarantee", "expected"),
    [
        ({"epsilon": 1.0}, 0.46211715726),  # (e - 1) / (e + 1)
        ({"epsilon": 0.1}, 0.04995837495),  # tanh(0.05)
        ({"epsilon": 1.0, "delta": 0.01}, 0.46749598569),  # (0.02 + e - 1) / (e + 1)
        ({"epsilon": 1.0, "delta": 0.0}, 0.46211715726),
        ({"rho": 0.5}, 0.5),  # sqrt(0.25) < sqrt(1 - e^-0.5) = 0.627
        ({"rho": 0.02}, 0.1),  # sqrt(0.01)
        ({"rho": 5.0}, 0.99662533231),  # sqrt(1 - e^-5) < sqrt(2.5)
        ({"mu": 1.0}, 0.38292492254),  # 2 Phi(0.5) - 1
        ({"epsilon": 0.0}, 0.0),
        ({"epsilon": math.inf}, 1.0),
    ],
)
def test_zero_delta_matches_hand_numbers(guarantee, expected):
    assert zero_delta(guarantee) == pytest.approx(expected, abs=1e-10)


def test_zero_delta_of_rho_switches_bound_where_the_two_cross():
    rho = np.linspace(0.01, 6.0, 200)
    values = np.array([zero_delta({"rho": r}) for r in rho])
    np.testing.assert_allclose(values, np.minimum(np.sqrt(rho / 2), np.sqrt(1 - np.exp(-rho))))
    assert np.all(np.diff(values) > 0)


@pytest.mark.parametrize(
    ("guarantee", "error", "match"),
    [
        ({"eps": 1.0}, ValueError, "`guarantee`"),
        ({"rho": -1.0}, ValueError, "`guarantee`"),
        ({"epsilon": 1.0, "delta": 2.0}, ValueError, "`guarantee`"),
        ({"rho": "a"}, TypeError, "`guarantee`"),
        (1.0, TypeError, "`guarantee`"),
    ],
)
def test_zero_delta_refuses_bad_guarantees(guarantee, error, match):
    with pytest.raises(error, match=match):
        zero_delta(guarantee)


def _releases_model(*mechanisms):
    """A table of ``n_dp = 50`` Normal records, each mechanism releasing ``sum clip(x, 0, 1)``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        n = pmdp.SampleSize("n", n_dp=50, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=n)
        for i, mechanism in enumerate(mechanisms):
            pmdp.PrivatizedSum(f"s{i}", pt.clip(x, 0, 1), mechanism, observed=10.0)
    return model


@pytest.mark.parametrize(
    ("mechanisms", "guarantee", "delta"),
    [
        # pure epsilon adds: 0.5 + 0.5
        ([pmdp.Laplace(epsilon=0.5), pmdp.Laplace(epsilon=0.5)], "epsilon=1", 0.46211715726),
        # rho adds: 0.25 + 0.25 = 0.5
        ([pmdp.Gaussian(rho=0.25), pmdp.Gaussian(rho=0.25)], "rho=0.5", 0.5),
        # mixed: eps 0.5 -> rho 0.125, plus 0.125: sqrt(0.25 / 2), below 0.2449 + 0.25
        (
            [pmdp.Laplace(epsilon=0.5), pmdp.Gaussian(rho=0.125)],
            "epsilon=0.5 + rho=0.125",
            math.sqrt(0.125),
        ),
    ],
)
def test_a_tables_releases_are_composed_then_converted(mechanisms, guarantee, delta):
    (row,) = pmdp.plugin_check(_releases_model(*mechanisms)).tables
    assert row.guarantee == guarantee
    assert row.sums == ("s0", "s1")
    assert row.delta_s == pytest.approx(delta, abs=1e-10)
    assert row.bound == pytest.approx(min(1.0, delta * _laplace_mean_abs(1.0)), rel=1e-9)


def test_pure_and_zcdp_compose_in_zcdp_beside_a_gaussian_dp_release():
    """epsilon 0.5 and rho 0.125 compose to rho 0.25 (delta sqrt(0.125)), below their separate
    deltas (0.2449 + 0.25); a mu-GDP release beside them still adds its own delta
    (``2 Phi(mu / 2) - 1``), on either route."""
    from pymc_unbounded_dp.diagnostics import _composed_delta

    gdp = 2 * stats.norm.cdf(0.25) - 1
    guarantees = [Guarantee(epsilon=0.5), Guarantee(rho=0.125), Guarantee(mu=0.5)]
    label, delta = _composed_delta(guarantees)
    assert label == "epsilon=0.5 + rho=0.125 + mu=0.5"
    assert delta == pytest.approx(math.sqrt(0.125) + gdp, rel=1e-12)
    assert _composed_delta(guarantees[:2])[1] == pytest.approx(math.sqrt(0.125), rel=1e-12)
    # deltas that add up beyond 1 are capped: (0, delta)-DP with delta > 1 says nothing more
    assert _composed_delta([Guarantee(epsilon=20.0), Guarantee(mu=5.0)])[1] == 1.0


# --------------------------------------------------------------------------------------------------
# the posterior of n from the count release
# --------------------------------------------------------------------------------------------------
class _Lopsided:
    """Count noise with a long right tail: ``log eta(e) = -e / 8`` above 0, ``e / 2`` below."""

    @staticmethod
    def logpdf(noise):
        noise = np.asarray(noise, dtype=float)
        return np.where(noise >= 0, -noise / 8.0, noise / 2.0)


@pytest.mark.parametrize(
    ("mechanism", "n_dp", "log_noise", "log_prior"),
    [
        (pmdp.DiscreteLaplace(scale=3.0), 40, lambda e: -np.abs(e) / 3.0, None),
        (pmdp.DiscreteLaplace(scale=3.0), 2, lambda e: -np.abs(e) / 3.0, None),  # near 0
        (pmdp.DiscreteLaplace(scale=3.0), -7, lambda e: -np.abs(e) / 3.0, None),  # below 0
        (pmdp.DiscreteGaussian(sigma=4.0), 60, lambda e: -(e**2) / 32.0, None),
        (pmdp.DiscreteGaussian(sigma=4.0), -3, lambda e: -(e**2) / 32.0, None),
        (pmdp.DiscreteGaussian(sigma=0.4), 1, lambda e: -(e**2) / 0.32, None),
        (pmdp.Laplace(scale=2.5), 3.3, lambda e: -np.abs(e) / 2.5, None),  # continuous noise
        (
            pmdp.DiscreteLaplace(scale=5.0),
            25,
            lambda e: -np.abs(e) / 5.0,
            lambda n: stats.poisson.logpmf(n, 30.0),
        ),
        (  # a window far from 0, and a prior that pulls the mass 260 below n_dp
            pmdp.DiscreteLaplace(scale=3.0),
            400,
            lambda e: -np.abs(e) / 3.0,
            lambda n: stats.poisson.logpmf(n, 100.0),
        ),
        (_Lopsided(), 50, _Lopsided().logpdf, None),  # noise that is not symmetric
    ],
)
def test_count_posterior_is_exact_against_direct_summation(mechanism, n_dp, log_noise, log_prior):
    post = count_posterior(mechanism, n_dp, log_prior)
    n, pmf = _direct(
        lambda n: log_noise(n_dp - n) + (0 if log_prior is None else log_prior(n)), top=200_000
    )
    assert post.n[0] >= 0 and np.all(np.diff(post.n) == 1)
    inside = (n >= post.n[0]) & (n <= post.n[-1])
    assert pmf[~inside].sum() < 1e-12  # the window holds all the mass
    np.testing.assert_allclose(post.pmf, pmf[post.n[0] : post.n[-1] + 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(post.pmf.sum(), 1.0, rtol=1e-14)
    assert post.mean == pytest.approx(pmf @ n, abs=1e-10)
    assert post.sd == pytest.approx(math.sqrt(pmf @ (n - pmf @ n) ** 2), abs=1e-9)
    assert post.mean_abs_deviation == pytest.approx(pmf @ np.abs(n - n_dp), abs=1e-10)


def test_truncation_at_zero_matters_near_zero():
    mechanism = pmdp.DiscreteLaplace(scale=3.0)
    truncated = count_posterior(mechanism, 1)
    untruncated = count_posterior(mechanism, 1, lower=None)
    assert untruncated.n[0] < 0 and truncated.n[0] == 0
    assert untruncated.mean == pytest.approx(1.0, abs=1e-12)  # symmetric noise
    assert truncated.mean > 2.0  # pushed up by the n >= 0 constraint
    assert untruncated.mean_abs_deviation == pytest.approx(_laplace_mean_abs(1 / 3), rel=1e-12)
    # no mass below 0: n stays closer to n_dp = 1 than the noise alone would put it
    assert truncated.mean_abs_deviation < untruncated.mean_abs_deviation - 0.5
    below = count_posterior(mechanism, -7)  # all mass at n >= 0, at least 7 above n_dp
    assert below.n[0] == 0 and below.mean_abs_deviation > 7.0


@pytest.mark.parametrize("epsilon", [0.01, 0.1, 0.5, 1.0, 3.0, 10.0])
def test_mean_abs_deviation_far_from_zero_is_the_discrete_laplace_formula(epsilon):
    post = count_posterior(pmdp.DiscreteLaplace(epsilon=epsilon), n_dp=100_000)
    assert post.mean_abs_deviation == pytest.approx(_laplace_mean_abs(epsilon), rel=1e-10)
    assert post.mean == pytest.approx(100_000, abs=1e-6)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 7.5, 100.0])
def test_mean_abs_deviation_far_from_zero_is_the_discrete_gaussian_one(sigma):
    k = np.arange(1, int(40 * sigma) + 10)
    w = np.exp(-(k**2) / (2 * sigma**2))
    expected = 2 * (k @ w) / (1 + 2 * w.sum())
    post = count_posterior(pmdp.DiscreteGaussian(sigma=sigma), n_dp=10**6)
    assert post.mean_abs_deviation == pytest.approx(expected, rel=1e-10)
    if sigma >= 7.5:  # of order sigma sqrt(2 / pi), i.e. 1 / epsilon_n
        assert post.mean_abs_deviation == pytest.approx(sigma * math.sqrt(2 / math.pi), rel=1e-2)


@pytest.mark.parametrize(
    "mechanism", [pmdp.DiscreteLaplace(epsilon=0.5), pmdp.DiscreteGaussian(sigma=3.0)]
)
def test_a_huge_n_dp_sums_over_a_small_window_only(mechanism):
    post = count_posterior(mechanism, n_dp=1e9)
    far = count_posterior(mechanism, n_dp=1e4)
    assert post.n.size < 200  # sized by the noise scale, not by n_dp
    assert post.n.size == far.n.size
    assert post.mean_abs_deviation == pytest.approx(far.mean_abs_deviation, rel=1e-12)
    assert post.mean == pytest.approx(1e9, abs=1e-6)


def test_count_posterior_refuses_bad_input():
    with pytest.raises(ValueError, match="`n_dp`"):
        count_posterior(pmdp.DiscreteLaplace(epsilon=1.0), math.nan)
    with pytest.raises(TypeError, match="`n_dp`"):
        count_posterior(pmdp.DiscreteLaplace(epsilon=1.0), "many")
    with pytest.raises(TypeError, match="`mechanism`"):
        count_posterior(object(), 10)
    with pytest.raises(ValueError, match="`n_dp`.*too wide"):
        count_posterior(pmdp.DiscreteLaplace(epsilon=1e-7), 10)


# --------------------------------------------------------------------------------------------------
# the bound from the model
# --------------------------------------------------------------------------------------------------
def test_bound_is_delta_times_mean_abs_deviation_and_vacuous_flag():
    small = pmdp.plugin_check(_bernoulli_model(0.01))
    large = pmdp.plugin_check(_bernoulli_model(10.0))
    assert isinstance(small, PluginCheck)
    (row,) = small.tables
    assert row.name == "n" and row.n_dp == 1000 and row.sums == ("s",)
    assert row.delta_s == pytest.approx(0.46211715726, abs=1e-10)
    # ~100 (the n >= 0 limit, ten noise scales below n_dp, takes 2e-4 of it off)
    assert row.mean_abs_deviation == pytest.approx(_laplace_mean_abs(0.01), rel=1e-3)
    assert row.bound == 1.0 and row.vacuous and small.vacuous and small.bound == 1.0
    (row,) = large.tables
    assert row.bound == pytest.approx(0.46211715726 * _laplace_mean_abs(10.0), rel=1e-9)
    assert not row.vacuous and large.bound == row.bound
    # the vacuity threshold of epsilon_s = 1: E|n - n_dp| < 1 / 0.4621 = 2.164
    assert row.max_mean_abs_deviation == pytest.approx(0.1 / 0.46211715726, rel=1e-10)
    assert pmdp.plugin_check(_bernoulli_model(10.0), target=1.0).tables[
        0
    ].max_mean_abs_deviation == pytest.approx(2.16395, abs=1e-5)


def test_bound_decreases_with_epsilon_n_and_increases_with_epsilon_s():
    grid = [0.01, 0.1, 0.3, 0.6, 1.0, 2.0, 5.0, 10.0]
    bounds = np.array([pmdp.plugin_check(_bernoulli_model(e)).bound for e in grid])
    assert np.all(np.diff(bounds) <= 0)
    assert np.all(np.diff(bounds[bounds < 1]) < 0)
    assert bounds[0] == 1.0 and bounds[-1] < 1e-4
    by_epsilon_s = [
        pmdp.plugin_check(_bernoulli_model(1.0, s_mechanism=pmdp.Laplace(epsilon=e))).bound
        for e in (0.05, 0.2, 1.0, 3.0)
    ]
    assert np.all(np.diff(by_epsilon_s) > 0)


@pytest.mark.parametrize(
    "mechanism", [pmdp.DiscreteLaplace(epsilon=1.0), pmdp.DiscreteGaussian(sigma=2.0)]
)
def test_the_required_count_privacy_attains_the_target(mechanism):
    row = pmdp.plugin_check(_bernoulli_model(mechanism), target=0.1).tables[0]
    ((key, value),) = row.required_count_privacy.items()
    family = type(mechanism)
    attaining = family(epsilon=value) if key == "epsilon" else family(rho=value)
    again = pmdp.plugin_check(_bernoulli_model(attaining), target=0.1).tables[0]
    assert again.bound == pytest.approx(0.1, rel=1e-8)
    assert again.required_count_privacy[key] == pytest.approx(value, rel=1e-10)
    if key == "epsilon":  # epsilon_s = 1 needs epsilon_n >= 2.2353 for a bound of 0.1
        assert value == pytest.approx(2.2353018, abs=1e-6)


def test_the_count_prior_is_used_and_a_parameter_dependent_prior_voids_the_bound():
    model = _bernoulli_model(
        pmdp.DiscreteLaplace(scale=5.0), n_dp=25, prior=pm.Poisson.dist(np.float64(30.0))
    )  # float64 rate
    row = pmdp.plugin_check(model).tables[0]
    n, pmf = _direct(lambda n: -np.abs(25 - n) / 5.0 + stats.poisson.logpmf(n, 30.0), 10_000)
    assert row.n_mean == pytest.approx(pmf @ n, abs=1e-9)
    assert row.mean_abs_deviation == pytest.approx(pmf @ np.abs(n - 25), abs=1e-9)
    assert row.note == ""

    with pm.Model() as model:
        rate = pm.Gamma("rate", 30.0, 1.0)
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize(
            "n", n_dp=25, mechanism=pmdp.DiscreteLaplace(epsilon=3.0), prior=pm.Poisson.dist(rate)
        )
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=8.0)
    row = pmdp.plugin_check(model).tables[0]
    assert row.vacuous and row.bound == 1.0 and "'rate'" in row.note
    assert math.isnan(row.mean_abs_deviation)


def test_a_mechanism_without_a_stated_guarantee_gives_delta_one():
    class Unknown(pmdp.Laplace):
        @property
        def privacy(self):
            return {}

    unknown = Unknown(scale=1.0)
    row = pmdp.plugin_check(_bernoulli_model(0.5, s_mechanism=unknown)).tables[0]
    assert row.guarantee == "unknown" and row.delta_s == 1.0 and "no privacy guarantee" in row.note
    assert row.mean_abs_deviation > 1.0 and row.bound == 1.0 and row.vacuous
    row = pmdp.plugin_check(_bernoulli_model(10.0, s_mechanism=unknown)).tables[0]
    # TV <= 1 always: the bound is P(n != n_dp) <= E|n - n_dp|, useful when the count is exact
    assert row.bound == pytest.approx(_laplace_mean_abs(10.0), rel=1e-9)


def test_several_tables_one_row_each_and_the_total():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        mu = pm.Normal("mu", 0, 1)
        n_a = pmdp.SampleSize("n_a", n_dp=80, mechanism=pmdp.DiscreteLaplace(epsilon=3.0))
        n_b = pmdp.SampleSize("n_b", n_dp=120, mechanism=pmdp.DiscreteGaussian(sigma=0.6))
        a = pmdp.Records("a", pm.Bernoulli.dist(theta), n=n_a)
        b = pmdp.Records("b", pm.Normal.dist(mu, 1), n=n_b)
        c = pmdp.Records("c", pm.Normal.dist(mu, 1), n=30)  # bounded: not a row
        pmdp.PrivatizedSum("sa", a, pmdp.Laplace(epsilon=0.5), observed=20.0)
        pmdp.PrivatizedSum("sb", pt.clip(b, 0, 1), pmdp.Gaussian(rho=0.2), observed=3.0)
        pmdp.PrivatizedSum("sc", pt.clip(c, 0, 1), pmdp.Laplace(epsilon=1.0), observed=1.0)
    check = pmdp.plugin_check(model)
    frame = check.to_dataframe()
    assert list(frame.index) == ["n_a", "n_b"]
    assert list(frame["sums"]) == ["sa", "sb"]
    assert frame.loc["n_a", "delta_s"] == pytest.approx(math.tanh(0.25), rel=1e-12)
    assert frame.loc["n_b", "delta_s"] == pytest.approx(math.sqrt(0.1), rel=1e-12)
    assert frame.loc["n_a", "mean_abs_deviation"] == pytest.approx(_laplace_mean_abs(3.0), rel=1e-9)
    assert check.bound == pytest.approx(min(1.0, frame["bound"].sum()), rel=1e-12)
    assert not check.vacuous
    text = repr(check)
    assert "n_a" in text and "n_b" in text and "delta_s" in text and "E|n - n_dp|" in text


def test_plugin_check_refuses_bad_input():
    with pm.Model() as bounded:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=3.0)
    with pytest.raises(ValueError, match="`model` has no pmdp.SampleSize"):
        pmdp.plugin_check(bounded)
    with pytest.raises(TypeError, match="`model`"):
        pmdp.plugin_check("model")
    model = _bernoulli_model(1.0)
    with pytest.raises(ValueError, match="`target`"):
        pmdp.plugin_check(model, target=0.0)
    draws = xr.Dataset({"theta": (("chain", "draw"), np.zeros((1, 10)))})
    with pytest.raises(ValueError, match="`plugin_idata` is missing"):
        pmdp.plugin_check(model, idata=draws)
    with pytest.raises(ValueError, match="`idata` is missing"):
        pmdp.plugin_check(model, plugin_idata=draws)
    with model:  # the model from the context
        assert pmdp.plugin_check().tables[0].name == "n"


# --------------------------------------------------------------------------------------------------
# the empirical comparison
# --------------------------------------------------------------------------------------------------
def _synthetic(rng, loc, scale, draws=20_000, chains=2):
    return xr.Dataset(
        {
            "mu": (("chain", "draw"), rng.normal(loc, scale, (chains, draws))),
            "beta": (("chain", "draw", "beta_dim_0"), rng.normal(0.0, 1.0, (chains, draws, 2))),
            "n": (("chain", "draw"), rng.integers(0, 100, (chains, draws))),  # unbounded only
        }
    )


def _as(kind, dataset):
    if kind == "datatree":
        return xr.DataTree.from_dict({"posterior": dataset})
    if kind == "inferencedata":
        az = pytest.importorskip("arviz")
        if not az.__version__.startswith("0."):
            pytest.skip("ArviZ 1.x has no InferenceData (PyMC 6 returns a DataTree)")
        return az.InferenceData(posterior=dataset)
    return dataset


@pytest.mark.parametrize("kind", ["dataset", "datatree", "inferencedata"])
def test_compare_posteriors_recovers_known_shifts(kind):
    rng = np.random.default_rng(11)
    unbounded = _synthetic(rng, 0.0, 1.0)
    plugin = _synthetic(rng, 0.5, 0.5).drop_vars("n")
    table = compare_posteriors(_as(kind, unbounded), _as(kind, plugin))
    assert list(table.index) == ["mu", "beta[0]", "beta[1]"]  # n is not in the plug-in fit
    mu = table.loc["mu"]
    # N(0, 1) vs N(0.5, 0.5^2): shift -0.5 sd, sd ratio 0.5, the plug-in's 94% interval is half
    # as long and inside the other (overlap 0.5); KS = sup |Phi(x) - Phi((x - 0.5) / 0.5)|
    x = np.linspace(-3, 3, 600_001)
    ks = np.max(np.abs(stats.norm.cdf(x) - stats.norm.cdf((x - 0.5) / 0.5)))
    assert mu["mean_shift"] == pytest.approx(-0.5, abs=0.025)  # s.e. 0.006
    assert mu["sd_ratio"] == pytest.approx(0.5, abs=0.012)  # s.e. 0.003
    assert mu["interval_overlap"] == pytest.approx(0.5, abs=0.02)
    assert mu["ks"] == pytest.approx(ks, abs=0.02)
    assert mu["lower_94_plugin"] == pytest.approx(0.5 - 0.5 * stats.norm.ppf(0.97), abs=0.02)
    for label in ("beta[0]", "beta[1]"):  # the same law in both: no shift
        row = table.loc[label]
        assert abs(row["mean_shift"]) < 0.03 and abs(row["sd_ratio"] - 1) < 0.02
        assert row["interval_overlap"] > 0.96 and row["ks"] < 0.02
    # intervals 10 sd apart do not overlap: 0, not a negative length
    far = compare_posteriors(_as(kind, unbounded), _as(kind, _synthetic(rng, 10.0, 1.0)))
    assert far.loc["mu", "interval_overlap"] == 0.0


def test_compare_posteriors_on_six_draws_by_hand():
    """Two chains of three draws each: means and sample sds (``ddof=1``) of the pooled draws."""
    unbounded = xr.Dataset({"mu": (("chain", "draw"), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])})
    plugin = xr.Dataset({"mu": (("chain", "draw"), [[1.0, 1.0, 1.0], [2.0, 2.0, 3.0]])})
    row = compare_posteriors(unbounded, plugin).loc["mu"]
    sd_u, sd_p = math.sqrt(17.5 / 5), math.sqrt((3 * 4 / 9 + 2 / 9 + 16 / 9) / 5)
    assert row["mean_unbounded"] == 2.5 and row["mean_plugin"] == pytest.approx(10 / 6)
    assert row["sd_unbounded"] == pytest.approx(sd_u) and row["sd_plugin"] == pytest.approx(sd_p)
    assert row["mean_shift"] == pytest.approx((2.5 - 10 / 6) / sd_u)
    assert row["sd_ratio"] == pytest.approx(sd_p / sd_u)


def test_compare_posteriors_refuses_bad_input():
    rng = np.random.default_rng(1)
    unbounded, plugin = _synthetic(rng, 0, 1, draws=50), _synthetic(rng, 0, 1, draws=50)
    with pytest.raises(ValueError, match="`var_names`"):
        compare_posteriors(unbounded, plugin.drop_vars("n"), var_names=["n"])
    with pytest.raises(ValueError, match="`var_names`"):
        compare_posteriors(unbounded, plugin.isel(beta_dim_0=[0]), var_names=["beta"])
    with pytest.raises(ValueError, match="`prob`"):
        compare_posteriors(unbounded, plugin, prob=1.5)
    with pytest.raises(TypeError, match="`plugin_idata`"):
        compare_posteriors(unbounded, {"mu": [1, 2]})
    with pytest.raises(ValueError, match="`idata`.*'posterior'"):
        compare_posteriors(xr.DataTree.from_dict({"prior": unbounded}), plugin)


def test_plugin_check_on_a_tiny_real_fit():
    """The unbounded and the plug-in fit of a small model, through pmdp.sample (InferenceData on
    PyMC 5, DataTree on PyMC 6). With epsilon_n = 3 the count is nearly exact: the posteriors of
    theta agree up to Monte Carlo error (ESS ~ hundreds: 0.5 sd is about 5 standard errors)."""
    n_dp, s_dp, n_mechanism = 40, 12.3, pmdp.DiscreteLaplace(epsilon=3.0)
    with pm.Model() as unbounded:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=n_mechanism)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=s_dp)
    with pm.Model() as plugin:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n_dp)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=s_dp)
    options = {
        "draws": 400,
        "tune": 200,
        "chains": 2,
        "cores": 1,
        "progressbar": False,
        "compute_convergence_checks": False,
    }
    idata = pmdp.sample(model=unbounded, random_seed=5, **options)
    plugin_idata = pmdp.sample(model=plugin, random_seed=6, **options)
    check = pmdp.plugin_check(unbounded, idata, plugin_idata)
    assert list(check.comparison.index) == ["theta"]
    row = check.comparison.loc["theta"]
    assert abs(row["mean_shift"]) < 0.5 and 0.7 < row["sd_ratio"] < 1.4
    assert 0.0 <= row["ks"] <= 1.0 and 0.0 <= row["interval_overlap"] <= 1.0
    assert check.bound == pytest.approx(0.46211715726 * _laplace_mean_abs(3.0), rel=1e-9)
    assert "unbounded vs plug-in posterior" in repr(check)


# --------------------------------------------------------------------------------------------------
# the bound does not depend on n; the large-sample regime does
# --------------------------------------------------------------------------------------------------
def test_the_bound_is_the_same_at_any_n_dp_but_the_large_n_ratio_shrinks_as_one_over_sqrt_n():
    """THEORY.md 3: bound = delta_s E|n - n_dp|, delta_s = tanh(epsilon_s / 2) and, far from 0,
    E|n - n_dp| = E|e| = 2q / (1 - q^2) for discrete Laplace noise (q = e^-epsilon_n): nothing
    depends on n_dp. The large-n ratio rms(n - n_dp) / sqrt(n) = sd(e) / sqrt(n_dp), with
    Var(e) = 2q / (1 - q)^2, does."""
    q = math.exp(-1.0)
    sd = math.sqrt(2 * q) / (1 - q)
    rows = {}
    for n_dp in (400, 1_000_000):
        check = pmdp.plugin_check(_bernoulli_model(1.0, n_dp=n_dp))
        (rows[n_dp],) = check.tables
        text = repr(check)
        assert "does not shrink as n grows" in text
        assert f"rms(n - n_dp) / sqrt(n) = {sd / math.sqrt(n_dp):.4g}" in text
    small, large = rows[400], rows[1_000_000]
    expected_bound = math.tanh(0.5) * _laplace_mean_abs(1.0)
    assert small.bound == pytest.approx(expected_bound, rel=1e-10)
    assert large.bound == pytest.approx(expected_bound, rel=1e-10)
    assert small.large_n_ratio == pytest.approx(sd / 20.0, rel=1e-9)
    assert large.large_n_ratio == pytest.approx(sd / 1000.0, rel=1e-9)
    assert small.large_n_ratio / large.large_n_ratio == pytest.approx(50.0, rel=1e-9)
    assert small.plugin_sd_ratio(2.0) == pytest.approx((1 + (2 * sd / 20) ** 2) ** -0.5)
    frame = pmdp.plugin_check(_bernoulli_model(1.0, n_dp=400)).to_dataframe()
    assert frame.loc["n", "large_n_ratio"] == pytest.approx(sd / 20.0, rel=1e-9)
    with pytest.raises(ValueError, match="`kappa`"):
        small.plugin_sd_ratio(-1.0)


def test_near_zero_the_large_n_ratio_has_the_bias_and_the_posterior_mean_of_n():
    """Near ``n = 0`` the posterior of ``n`` is pushed above ``n_dp``: the ratio's numerator is
    the root mean square of ``n - n_dp`` (sd and bias together) and its denominator the root of
    ``E[n | n_dp]``, not of ``n_dp``; against direct summation. Here the bias is 1.5 (against an
    sd of 3.1) and ``E[n | n_dp]`` is 3.5 against ``n_dp = 2``: the ratio is 1.84, 1.66 without
    the bias and 2.44 over ``sqrt(n_dp)``."""
    mechanism = pmdp.DiscreteLaplace(scale=3.0)
    n_dp = 2
    (row,) = pmdp.plugin_check(_bernoulli_model(mechanism, n_dp=n_dp)).tables
    n, pmf = _direct(lambda n: mechanism.logpdf(n_dp - n), 400)
    mean = pmf @ n
    rms = math.sqrt(pmf @ (n - n_dp) ** 2)
    assert row.large_n_ratio == pytest.approx(rms / math.sqrt(mean), rel=1e-9)
    sd = math.sqrt(pmf @ (n - mean) ** 2)
    assert mean - n_dp > 1.0 and abs(sd / rms - 1) > 0.1 and abs(math.sqrt(mean / n_dp) - 1) > 0.1


def test_the_large_n_sd_ratio_matches_an_exact_plug_in_and_unbounded_posterior():
    """Bernoulli(0.4) records, s = 4000 of n_dp = 10,000 known exactly, count noise discrete
    Laplace of scale 100: the plug-in posterior Beta(s + 1, n_dp - s + 1) against the unbounded
    one by enumeration over (theta, n), flat priors. kappa = |mean| / sd = sqrt(0.4 / 0.6)."""
    n_dp, s, scale = 10_000, 4_000, 100.0
    row = pmdp.plugin_check(_bernoulli_model(pmdp.DiscreteLaplace(scale=scale), n_dp=n_dp)).tables[
        0
    ]
    theta = np.linspace(0.33, 0.47, 1401)
    n = np.arange(n_dp - 1500, n_dp + 1501)
    log_w = -np.abs(n - n_dp)[:, None] / scale + stats.binom.logpmf(s, n[:, None], theta)
    w = np.exp(log_w - log_w.max()).sum(axis=0)
    w /= w.sum()
    unbounded_sd = math.sqrt(w @ theta**2 - (w @ theta) ** 2)
    exact = stats.beta(s + 1, n_dp - s + 1).std() / unbounded_sd
    assert exact == pytest.approx(0.653, abs=0.005)  # far from 1: the count's noise matters
    assert row.plugin_sd_ratio(math.sqrt(0.4 / 0.6)) == pytest.approx(exact, abs=0.01)


# --------------------------------------------------------------------------------------------------
# what each setting reaches (a hand audit, issue 32)
# --------------------------------------------------------------------------------------------------
def test_pure_and_zcdp_releases_keep_the_separate_conversion_when_it_is_smaller():
    """epsilon 3 and rho 0.01: converted separately, tanh(1.5) + sqrt(0.01 / 2) = 0.9759; composed
    in zCDP (rho 4.51), sqrt(1 - e^-4.51) = 0.9945. The smaller is the bound's delta_s."""
    separate = math.tanh(1.5) + math.sqrt(0.005)
    composed = math.sqrt(1 - math.exp(-4.51))
    assert separate < composed - 0.01
    model = _releases_model(pmdp.Laplace(epsilon=3.0), pmdp.Gaussian(rho=0.01))
    (row,) = pmdp.plugin_check(model).tables
    assert row.guarantee == "epsilon=3 + rho=0.01"
    assert row.delta_s == pytest.approx(separate, rel=1e-12)
    assert row.bound == pytest.approx(separate * _laplace_mean_abs(1.0), rel=1e-9)


class _ApproximateLaplace(pmdp.Laplace):
    """A Laplace mechanism whose stated guarantee is (epsilon, delta)-DP, as a user's may be."""

    @property
    def privacy(self):
        return {"epsilon": 1.0, "delta": 0.01}


def _approximate_delta(epsilon: float, delta: float) -> float:
    """(0, delta')-DP of (epsilon, delta)-DP: ``(2 delta + e^epsilon - 1) / (e^epsilon + 1)``."""
    return (2 * delta + math.expm1(epsilon)) / (math.exp(epsilon) + 1)


def test_an_epsilon_delta_release_counts_in_the_bound_alone_or_beside_others():
    """A release stating (1, 0.01)-DP gives delta_s = (0.02 + e - 1) / (e + 1) alone; beside a pure
    epsilon 0.5 and a rho 0.125 release it composes with the pure one to (1.5, 0.01)-DP and the
    rho one adds its own sqrt(0.125 / 2) (zCDP does not compose with (epsilon, delta)-DP)."""
    (alone,) = pmdp.plugin_check(_releases_model(_ApproximateLaplace(scale=1.0))).tables
    assert alone.guarantee == "epsilon=1, delta=0.01"
    assert alone.delta_s == pytest.approx(0.46749598569, abs=1e-10)
    assert alone.delta_s == pytest.approx(_approximate_delta(1.0, 0.01), rel=1e-12)
    model = _releases_model(
        _ApproximateLaplace(scale=1.0), pmdp.Laplace(epsilon=0.5), pmdp.Gaussian(rho=0.125)
    )
    (row,) = pmdp.plugin_check(model).tables
    expected = _approximate_delta(1.5, 0.01) + math.sqrt(0.0625)
    assert row.delta_s == pytest.approx(expected, rel=1e-12)
    assert row.guarantee == "epsilon=1.5, delta=0.01 + rho=0.125"


@pytest.mark.parametrize("n_dp", [12, 5, 40])
def test_count_posterior_above_a_lower_limit_other_than_zero(n_dp):
    """``lower=10``: the posterior of n lives on n >= 10 (a census floor, say), against direct
    summation from 10 on; at n_dp = 40 the floor is 10 noise scales away and changes nothing."""
    mechanism = pmdp.DiscreteLaplace(scale=3.0)
    post = count_posterior(mechanism, n_dp, lower=10)
    n = np.arange(10, 2_000)
    w = np.exp(-np.abs(n_dp - n) / 3.0)
    pmf = w / w.sum()
    assert post.n[0] == 10 and np.all(np.diff(post.n) == 1)
    np.testing.assert_allclose(post.pmf, pmf[: post.n.size], rtol=0, atol=1e-12)
    assert post.mean == pytest.approx(pmf @ n, abs=1e-10)
    assert post.mean_abs_deviation == pytest.approx(pmf @ np.abs(n - n_dp), abs=1e-10)


def test_plugin_check_compares_at_the_given_prob_and_names():
    """``prob`` and ``var_names`` reach the comparison: the same table as compare_posteriors', with
    the 50% intervals (the quartiles of the pooled draws) of mu only."""
    rng = np.random.default_rng(4)
    unbounded, plugin = _synthetic(rng, 0.0, 1.0, draws=500), _synthetic(rng, 0.5, 0.5, draws=500)
    check = pmdp.plugin_check(
        _bernoulli_model(1.0), unbounded, plugin.drop_vars("n"), var_names=["mu"], prob=0.5
    )
    direct = compare_posteriors(unbounded, plugin, var_names=["mu"], prob=0.5)
    assert list(check.comparison.index) == ["mu"]
    assert check.comparison.equals(direct)
    quartiles = np.quantile(unbounded["mu"].values.ravel(), [0.25, 0.75])
    assert check.comparison.loc["mu", "lower_50_unbounded"] == quartiles[0]
    assert check.comparison.loc["mu", "upper_50_unbounded"] == quartiles[1]


def test_compare_posteriors_takes_one_name_as_a_string():
    rng = np.random.default_rng(5)
    unbounded, plugin = _synthetic(rng, 0.0, 1.0, draws=200), _synthetic(rng, 0.0, 1.0, draws=200)
    one = compare_posteriors(unbounded, plugin, var_names="mu")
    assert list(one.index) == ["mu"]
    assert one.equals(compare_posteriors(unbounded, plugin, var_names=["mu"]))


def test_compare_posteriors_leaves_out_the_latent_true_sums_by_default():
    """A sums-level fit's posterior holds each table's true total (attribute ``pmdp_latent_sum``):
    latent data, not a parameter, so the default comparison skips it; named, it is compared."""
    from pymc_unbounded_dp.sums import LATENT_SUM_ROLE

    rng = np.random.default_rng(6)
    unbounded, plugin = _synthetic(rng, 0.0, 1.0, draws=200), _synthetic(rng, 0.0, 1.0, draws=200)
    for fit in (unbounded, plugin):
        fit["s_total"] = fit["mu"] * 10
        fit["s_total"].attrs[LATENT_SUM_ROLE] = "the true total of 's'"
    assert "s_total" not in compare_posteriors(unbounded, plugin).index
    named = compare_posteriors(unbounded, plugin, var_names=["s_total"])
    assert named.loc["s_total", "mean_unbounded"] == pytest.approx(unbounded["mu"].mean() * 10)
