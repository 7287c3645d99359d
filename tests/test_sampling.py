"""Bounded DP: the data-augmentation sampler against exact posteriors, reproducibility, output."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import assert_mean_matches, assert_moments_match, draws_of
from oracles import bernoulli_posterior, normal_posterior, two_variable_posterior

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.blocks import records_in_containers

SAMPLE = dict(
    draws=2000, tune=500, chains=4, cores=2, progressbar=False, compute_convergence_checks=False
)


def bernoulli_model(mechanism, observed, n=30, a=2.0, b=3.0):
    with pm.Model() as model:
        theta = pm.Beta("theta", a, b)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, mechanism, observed=observed)
    return model


@pytest.mark.parametrize(
    "mechanism, observed",
    [
        (pmdp.Laplace(epsilon=1.0), 8.4),
        (pmdp.Gaussian(sigma=1.5), 21.7),
        (pmdp.DiscreteLaplace(epsilon=0.7), 6),
        (pmdp.DiscreteGaussian(sigma=1.2), 14),
    ],
    ids=["laplace", "gaussian", "discrete-laplace", "discrete-gaussian"],
)
def test_bernoulli_matches_enumeration(mechanism, observed):
    model = bernoulli_model(mechanism, observed)
    idata = pmdp.sample(augment="records", model=model, random_seed=11, **SAMPLE)
    exact = bernoulli_posterior(observed, mechanism, 2.0, 3.0, n=30)
    assert_moments_match(draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta")
    rate = float(idata["sample_stats"]["refresh_accept_rate"].mean())
    assert 0.2 < rate <= 1.0


def test_normal_records_match_quadrature():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 2.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=20)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=3.0), observed=31.0)
    idata = pmdp.sample(augment="records", model=model, random_seed=3, **SAMPLE)
    exact = normal_posterior(31.0, 3.0, 1.0, 0.5, 2.0, n=20)
    assert_moments_match(draws_of(idata, "mu"), exact["mu_mean"], exact["mu_var"], "mu")


def test_two_record_variables_and_two_sums_match_enumeration():
    """``y | X`` row-wise, two releases with different mechanisms."""
    mechanisms = (pmdp.Laplace(epsilon=0.8), pmdp.DiscreteLaplace(epsilon=0.6))
    s_dp = np.array([14.3, 5.0])
    with pm.Model() as model:
        alpha = pm.Beta("alpha", 1, 1)
        beta = pm.Beta("beta", 1, 1)
        X = pmdp.Records("X", pm.Bernoulli.dist(alpha), n=25)
        y = pmdp.Records("y", pm.Bernoulli.dist(X * beta + (1 - X) * 0.5), n=25)
        pmdp.PrivatizedSum("s_x", X, mechanisms[0], observed=s_dp[0])
        pmdp.PrivatizedSum("s_xy", X * y, mechanisms[1], observed=s_dp[1])
    idata = pmdp.sample(augment="records", model=model, random_seed=5, **SAMPLE)
    exact = two_variable_posterior(s_dp, mechanisms, 25)
    assert_mean_matches(draws_of(idata, "alpha"), exact["alpha_mean"], "alpha")
    assert_mean_matches(draws_of(idata, "beta"), exact["beta_mean"], "beta")


def test_vector_statistic_with_clipping_and_stacking():
    """A stacked, clamped statistic gives the same posterior as separate sums would."""
    mechanism = pmdp.Laplace(scale=2.0, sensitivity=2.0)  # (x, 1 - x) in [0, 1]^2: L1 2
    with pm.Model() as model:
        theta = pm.Beta("theta", 2, 3)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        clamped = pt.clip(x, 0, 1)
        pmdp.PrivatizedSum(
            "s", pt.stack([clamped, 1 - clamped], axis=1), mechanism, observed=[9.0, 20.5]
        )
    idata = pmdp.sample(augment="records", model=model, random_seed=2, **SAMPLE)
    # sum(1 - x) = 30 - k: the second release is a Laplace observation of k at 30 - 20.5.
    ks = np.arange(31)
    log_w = (
        mechanism.logpdf(9.0 - ks)
        + mechanism.logpdf(20.5 - (30 - ks))
        + np.log(np.array([__import__("math").comb(30, k) for k in ks], dtype=float))
        + __import__("scipy").special.betaln(2 + ks, 3 + 30 - ks)
    )
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    assert_mean_matches(draws_of(idata, "theta"), np.sum(w * (2 + ks) / 35), "theta")


@pytest.fixture(scope="module")
def small_model():
    return bernoulli_model(pmdp.Laplace(epsilon=1.0), 8.4, n=20)


def test_same_seed_same_draws_with_one_or_several_processes(small_model):
    """Also shows chains don't share records with cores=1 (each process has its own step)."""
    kwargs = dict(
        model=small_model,
        draws=200,
        tune=100,
        chains=2,
        random_seed=42,
        progressbar=False,
        compute_convergence_checks=False,
    )
    one = pmdp.sample(augment="records", cores=1, **kwargs)
    two = pmdp.sample(augment="records", cores=2, **kwargs)
    again = pmdp.sample(augment="records", cores=1, **kwargs)
    np.testing.assert_array_equal(draws_of(one, "theta"), draws_of(two, "theta"))
    np.testing.assert_array_equal(draws_of(one, "theta"), draws_of(again, "theta"))
    other = pmdp.sample(augment="records", cores=1, **{**kwargs, "random_seed": 43})
    assert not np.array_equal(draws_of(one, "theta"), draws_of(other, "theta"))


def test_output_groups_and_kept_records(small_model):
    idata = pmdp.sample(
        augment="records",
        model=small_model,
        draws=100,
        tune=50,
        chains=2,
        cores=1,
        random_seed=1,
        keep_records=25,
        progressbar=False,
        compute_convergence_checks=False,
    )
    assert "x" not in idata["observed_data"]
    assert "s" in idata["observed_data"]
    kept = idata["imputed_records"]
    assert kept["x"].shape == (2, 4, 20)
    np.testing.assert_array_equal(kept["kept_draw"].values, [0, 25, 50, 75])
    assert set(np.unique(kept["x"].values)) <= {0, 1}
    assert "records" not in idata["sample_stats"]


def test_steps_work_inside_pm_sample_with_a_user_parameter_step():
    mechanism = pmdp.Laplace(epsilon=1.0)
    model = bernoulli_model(mechanism, 8.4)
    with model:
        step = pmdp.DataAugmentation(pm.Slice([model["theta"]]), augment="records")
        idata = pm.sample(step=step, random_seed=9, **SAMPLE)
    exact = bernoulli_posterior(8.4, mechanism, 2.0, 3.0, n=30)
    assert_mean_matches(draws_of(idata, "theta"), exact["theta_mean"], "theta")
    assert [type(m).__name__ for m in step.methods] == ["RecordsStep", "Slice", "Interweave"]


def test_observed_can_be_changed_with_set_data():
    mechanism = pmdp.Laplace(epsilon=1.0)
    with pm.Model():
        observed = pm.Data("s_observed", 8.4)
        theta = pm.Beta("theta", 2, 3)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, mechanism, observed=observed)
        step = pmdp.DataAugmentation(augment="records")
        for value in (3.0, 25.0):
            pm.set_data({"s_observed": value})
            idata = pm.sample(step=step, random_seed=4, **SAMPLE)
            exact = bernoulli_posterior(value, mechanism, 2.0, 3.0, n=30)
            assert_mean_matches(draws_of(idata, "theta"), exact["theta_mean"], f"s={value}")


def test_blas_threads_are_limited_while_sampling_and_restored_after(small_model):
    from threadpoolctl import threadpool_info

    from pymc_unbounded_dp.conjugate import ConjugateGibbs

    def blas_threads():
        return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}

    seen = []

    def update(rng, records, values):
        seen.append(blas_threads())
        return {"theta": rng.beta(2 + records["x"].sum(), 3 + 20 - records["x"].sum())}

    before = blas_threads()
    with small_model:
        step = ConjugateGibbs([small_model["theta"]], update)
    pmdp.sample(
        augment="records",
        model=small_model,
        step=step,
        draws=3,
        tune=2,
        chains=1,
        random_seed=1,
        progressbar=False,
        compute_convergence_checks=False,
    )
    assert seen and all(threads == {1} for threads in seen)  # a BLAS pool, at one thread
    assert blas_threads() == before
    with pytest.raises(ValueError, match="blas_threads"):
        pmdp.sample(augment="records", model=small_model, blas_threads=0, draws=3, tune=2, chains=1)


def test_parameter_steps_leave_out_the_release_terms(small_model):
    """The release terms are constant for a parameter step: its logp is the model's without them,
    and the model's own logp is untouched."""
    with small_model:
        step = pmdp.DataAugmentation(augment="records")
    assert "logp" not in vars(small_model)  # the shadowing attribute is gone again
    nuts = step.methods[1]
    assert isinstance(nuts, pm.NUTS)
    point = small_model.initial_point()
    point["theta_logodds__"] = np.asarray(0.3)
    logp_dlogp = nuts._logp_dlogp_func
    logp_dlogp.set_extra_values({})
    step_logp = logp_dlogp(np.array([0.3]))[0]
    theta, x = small_model["theta"], small_model["x"]
    without = small_model.compile_logp(vars=[theta, x])(point)
    full_logp = small_model.compile_logp()
    with pytest.raises(pmdp.FrozenRecordsError, match="records frozen"):
        full_logp(point)  # outside the package's steps the release terms refuse to evaluate
    with records_in_containers(small_model):
        full = full_logp(point)
    np.testing.assert_allclose(step_logp, without)
    assert abs(full - without) > 1e-3  # the release term is not zero here
