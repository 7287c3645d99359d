"""Unbounded DP: the reversible-jump sampler against exact posteriors of theta and n."""

import numpy as np
import pymc as pm
import pytest
from mcmc_checks import assert_mean_matches, assert_moments_match, assert_pmf_matches, draws_of
from oracles import bernoulli_posterior, normal_posterior
from scipy import stats

import pymc_unbounded_dp as pmdp

SAMPLE = dict(
    draws=2000, tune=500, chains=4, cores=1, progressbar=False, compute_convergence_checks=False
)
S_MECHANISM = pmdp.Laplace(epsilon=1.0)


def unbounded_bernoulli(n_dp, n_mechanism, s_dp, prior=None, a=2.0, b=3.0):
    with pm.Model() as model:
        theta = pm.Beta("theta", a, b)
        n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=n_mechanism, prior=prior)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=s_dp)
    return model


def check_bernoulli(idata, exact):
    assert_moments_match(draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta")
    assert_moments_match(draws_of(idata, "n"), exact["n_mean"], exact["n_var"], "n")
    n = draws_of(idata, "n")
    median = int(exact["n_values"][np.searchsorted(np.cumsum(exact["n_pmf"]), 0.5)])
    assert_mean_matches(n <= median, exact["n_pmf"][exact["n_values"] <= median].sum(), "P(n<=med)")
    assert_pmf_matches(n.astype(int), exact["n_values"], exact["n_pmf"], "n")


@pytest.mark.parametrize(
    "n_mechanism, n_dp, s_dp",
    [
        (pmdp.DiscreteLaplace(epsilon=0.3), 25, 8.4),
        (pmdp.DiscreteGaussian(sigma=4.0), 31, 14.0),
        (pmdp.Laplace(epsilon=0.4), 22.6, 3.1),  # continuous noise on n, as in the reference code
    ],
    ids=["discrete-laplace", "discrete-gaussian", "continuous-laplace"],
)
def test_bernoulli_flat_prior_matches_enumeration(n_mechanism, n_dp, s_dp):
    idata = pmdp.sample(
        augment="records",
        model=unbounded_bernoulli(n_dp, n_mechanism, s_dp),
        random_seed=21,
        **SAMPLE,
    )
    check_bernoulli(
        idata,
        bernoulli_posterior(
            s_dp, S_MECHANISM, 2.0, 3.0, n_dp=n_dp, n_mechanism=n_mechanism, n_max=400
        ),
    )
    for stat in ("refresh_accept_rate", "birth_accept_rate", "death_accept_rate"):
        assert 0.1 < float(np.nanmean(idata["sample_stats"][stat].values)) <= 1.0


def test_default_n_moves_from_the_count_noise_matches_enumeration():
    """The default number of birth/death moves is 20 count-noise variances, here 37 for
    ``n ~ 150`` records (DiscreteLaplace(epsilon=1) on ``n``: variance 1.84): far fewer than one
    per record, and the exact pmf of ``n`` all the same."""
    n_mechanism = pmdp.DiscreteLaplace(epsilon=1.0)
    model = unbounded_bernoulli(150, n_mechanism, 60.3)
    variance = 2 * np.exp(-1.0) / (1 - np.exp(-1.0)) ** 2
    expected = int(np.ceil(20 * variance))
    assert pmdp.ReversibleJump(model=model, augment="records").records_step.n_moves == [expected]
    idata = pmdp.sample(
        augment="records", model=model, random_seed=23, **{**SAMPLE, "draws": 1000, "tune": 300}
    )
    assert np.all(idata["sample_stats"]["n_moves"].values == expected)
    check_bernoulli(
        idata,
        bernoulli_posterior(
            60.3, S_MECHANISM, 2.0, 3.0, n_dp=150, n_mechanism=n_mechanism, n_max=400
        ),
    )


def test_chunked_sweeps_match_enumeration(monkeypatch):
    """Sweeps larger than ``kernels.records.CHUNK_ROWS`` draw proposals chunk by chunk: same
    target.

    With 8-row chunks every sweep of this model (n ~ 25, 25 moves) is chunked.
    """
    from pymc_unbounded_dp.kernels import records

    monkeypatch.setattr(records, "CHUNK_ROWS", 8)
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.3)
    model = unbounded_bernoulli(25, n_mechanism, 8.4)
    idata = pmdp.sample(
        augment="records", model=model, random_seed=27, **{**SAMPLE, "cores": 1}
    )  # patch stays here
    check_bernoulli(
        idata,
        bernoulli_posterior(
            8.4, S_MECHANISM, 2.0, 3.0, n_dp=25, n_mechanism=n_mechanism, n_max=400
        ),
    )


def test_bernoulli_poisson_prior_matches_enumeration():
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.2)
    model = unbounded_bernoulli(12, n_mechanism, 6.5, prior=pm.Poisson.dist(18.0))
    idata = pmdp.sample(augment="records", model=model, random_seed=22, n_moves=7, **SAMPLE)
    exact = bernoulli_posterior(
        6.5,
        S_MECHANISM,
        2.0,
        3.0,
        n_dp=12,
        n_mechanism=n_mechanism,
        log_prior_n=lambda n: stats.poisson.logpmf(n, 18.0),
        n_max=300,
    )
    check_bernoulli(idata, exact)


def test_prior_with_parameters_and_bounded_support():
    """n ~ DiscreteUniform(10, 40): deaths below 10 and births above 40 are rejected."""
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.1)
    model = unbounded_bernoulli(8, n_mechanism, 2.0, prior=pm.DiscreteUniform.dist(10, 40))
    idata = pmdp.sample(augment="records", model=model, random_seed=23, **SAMPLE)
    n = draws_of(idata, "n")
    assert n.min() >= 10 and n.max() <= 40
    exact = bernoulli_posterior(
        2.0,
        S_MECHANISM,
        2.0,
        3.0,
        n_dp=8,
        n_mechanism=n_mechanism,
        log_prior_n=lambda v: np.where((v >= 10) & (v <= 40), 0.0, -np.inf),
        n_max=60,
    )
    check_bernoulli(idata, exact)


def test_normal_records_match_quadrature():
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.5)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 2.0)
        n = pmdp.SampleSize("n", n_dp=18, mechanism=n_mechanism)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=3.0), observed=31.0)
    idata = pmdp.sample(augment="records", model=model, random_seed=24, **SAMPLE)
    exact = normal_posterior(31.0, 3.0, 1.0, 0.5, 2.0, n_dp=18, n_mechanism=n_mechanism, n_max=120)
    assert_moments_match(draws_of(idata, "mu"), exact["mu_mean"], exact["mu_var"], "mu")
    assert_moments_match(draws_of(idata, "n"), exact["n_mean"], exact["n_var"], "n")


def test_large_epsilon_n_reproduces_bounded_posterior():
    model = unbounded_bernoulli(30, pmdp.DiscreteLaplace(epsilon=40.0), 8.4)
    idata = pmdp.sample(augment="records", model=model, random_seed=25, **SAMPLE)
    assert np.all(draws_of(idata, "n") == 30)
    exact = bernoulli_posterior(8.4, S_MECHANISM, 2.0, 3.0, n=30)
    assert_moments_match(draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta")


def test_chains_started_far_from_n_dp_converge():
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.3)
    model = unbounded_bernoulli(25, n_mechanism, 8.4)
    idata = pmdp.sample(
        augment="records", model=model, random_seed=26, initvals={"n": 300}, **SAMPLE
    )
    exact = bernoulli_posterior(
        8.4, S_MECHANISM, 2.0, 3.0, n_dp=25, n_mechanism=n_mechanism, n_max=400
    )
    assert_mean_matches(draws_of(idata, "n"), exact["n_mean"], "n")


def test_n_is_an_ordinary_posterior_variable():
    import arviz as az

    model = unbounded_bernoulli(25, pmdp.DiscreteLaplace(epsilon=0.3), 8.4)
    idata = pmdp.sample(
        augment="records",
        model=model,
        random_seed=27,
        draws=200,
        tune=100,
        chains=2,
        cores=1,
        progressbar=False,
        compute_convergence_checks=False,
    )
    assert idata["posterior"]["n"].dtype.kind == "i"
    summary = az.summary(idata, var_names=["n"], kind="stats")
    assert list(summary.index) == ["n"]
    n = draws_of(idata, "n")
    assert float(summary.loc["n", "mean"]) == pytest.approx(n.mean(), abs=0.01)
    assert float(summary.loc["n", "sd"]) == pytest.approx(n.std(ddof=1), rel=0.01)
    assert "n_dp" in idata["observed_data"]


def test_default_moves_adapt_during_tuning_from_a_start_far_below_n():
    """``n_dp`` < 0 puts the chain at ``n = 0`` while the release says ``n ~ 200``: during tuning
    the default number of birth/death moves follows ``n``; the draws match enumeration, and the
    adaptation restarts with each chain (same draws with one or two processes)."""
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.002)
    model = unbounded_bernoulli(-40, n_mechanism, 100.0, a=200.0, b=200.0)
    assert model.initial_point()["n"] == 0
    with model:
        step = pmdp.ReversibleJump(augment="records")
        assert step.records_step.n_moves == [10]
        idata = pm.sample(step=step, random_seed=28, **SAMPLE)
    moves = idata["sample_stats"]["n_moves"].values
    assert np.all(moves == moves[:, :1])  # fixed after tuning
    assert np.all((120 <= moves) & (moves <= 300))  # ~ n at the end of tuning
    check_bernoulli(
        idata,
        bernoulli_posterior(
            100.0, S_MECHANISM, 200.0, 200.0, n_dp=-40, n_mechanism=n_mechanism, n_max=1500
        ),
    )
    short = {**SAMPLE, "draws": 50, "tune": 60, "chains": 2}
    one = pmdp.sample(augment="records", model=model, random_seed=3, **{**short, "cores": 1})
    two = pmdp.sample(augment="records", model=model, random_seed=3, **{**short, "cores": 2})
    np.testing.assert_array_equal(draws_of(one, "n"), draws_of(two, "n"))
