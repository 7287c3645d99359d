"""PyMC habits on a pmdp model: each entry point is either right or refused before it answers.

``pm.sample()`` is checked against exact posteriors here (bounded DP) and in ``test_tables.py``
(two tables with latent ``n``); the refusals are checked for their message, and the
log-likelihood of the releases against a direct computation from the kept records.
"""

import warnings

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import assert_centred_variance_matches, assert_mean_matches, draws_of
from oracles import bernoulli_posterior

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import model_blocks

MECHANISM = pmdp.Laplace(epsilon=1.0)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)
QUICK = dict(
    draws=200, tune=100, chains=2, cores=1, progressbar=False, compute_convergence_checks=False
)


@pytest.fixture(scope="module")
def bounded():
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, MECHANISM, observed=8.4)
    return model


@pytest.fixture(scope="module")
def unbounded():
    with pm.Model(coords={"stat": ["sum", "sum_sq"]}) as model:
        mu = pm.Normal("mu", 0.0, 2.0)
        n = pmdp.SampleSize("n", n_dp=40, mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        clamped = pt.clip(x, -3, 3)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([clamped, clamped**2], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=12.0),
            observed=[21.0, 75.0],
            dims="stat",
        )
    return model


@pytest.fixture
def nuts_options(monkeypatch) -> dict:
    """The keyword arguments NUTS is built with (filled in when a NUTS step is constructed)."""
    seen = {}
    original = pm.NUTS.__init__

    def spy(self, *args, **kwargs):
        seen.update(kwargs)
        original(self, *args, **kwargs)

    monkeypatch.setattr(pm.NUTS, "__init__", spy)
    return seen


def test_plain_pm_sample_is_exact_under_bounded_dp(bounded):
    with bounded:
        idata = pm.sample(
            draws=2000,
            tune=500,
            chains=4,
            cores=1,
            random_seed=41,
            progressbar=False,
            compute_convergence_checks=False,
        )
    exact = bernoulli_posterior(8.4, MECHANISM, 2.0, 3.0, n=30)
    theta = draws_of(idata, "theta")
    assert_mean_matches(theta, exact["theta_mean"], "theta")
    assert_centred_variance_matches(theta, exact["theta_mean"], exact["theta_var"], "theta")


@pytest.mark.parametrize("fixture", ["bounded", "unbounded"])
def test_find_map_is_refused_with_the_way_out(fixture, request):
    model = request.getfixturevalue(fixture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # PyMC 6 announces a new return type
        with model, pytest.raises(pmdp.FrozenRecordsError, match=r"records frozen.*pmdp\.mcem"):
            pm.find_MAP(progressbar=False)


def test_a_step_outside_the_package_step_is_refused_before_any_draw(bounded):
    with (
        bounded,
        pytest.raises(pmdp.FrozenRecordsError, match=r"pmdp.DataAugmentation\(parameter_step"),
    ):
        pm.sample(
            step=pm.NUTS([bounded["theta"]]),
            draws=5,
            tune=5,
            chains=1,
            progressbar=False,
            compute_convergence_checks=False,
        )


def test_logp_of_the_releases_refuses_outside_the_steps(unbounded):
    logp = unbounded.compile_logp()
    with pytest.raises(pmdp.FrozenRecordsError, match="records frozen"):
        logp(unbounded.initial_point())
    assert not model_blocks(unbounded).imputing.get_value()  # left off after sampling elsewhere


def test_log_likelihood_is_the_release_density_given_each_draws_records(unbounded):
    idata = pmdp.sample(
        model=unbounded,
        random_seed=42,
        interweave=False,
        keep_records=1,
        idata_kwargs={"log_likelihood": True},
        **QUICK,
    )
    log_lik = idata["log_likelihood"]
    assert set(log_lik.data_vars) == {"s", "n_dp"}
    assert log_lik["s"].dims == ("chain", "draw", "stat")
    assert not any(name.startswith("log_likelihood_") for name in idata["sample_stats"].data_vars)
    records = idata["imputed_records"]["x"].values  # (chain, draw, record), NaN-padded
    clamped = np.clip(records, -3, 3)
    totals = np.stack([np.nansum(clamped, axis=2), np.nansum(clamped**2, axis=2)], axis=-1)
    mechanism = pmdp.Laplace(epsilon=1.0, sensitivity=12.0)
    expected = mechanism.logpdf(np.array([21.0, 75.0]) - totals)
    np.testing.assert_allclose(log_lik["s"].values, expected, rtol=1e-10)
    n = draws_of(idata, "n")
    # shaped like the release in observed_data (ArviZ stores the scalar n_dp with one axis)
    assert log_lik["n_dp"].dims[2:] == idata["observed_data"]["n_dp"].dims
    np.testing.assert_allclose(log_lik["n_dp"].values.reshape(n.shape), N_MECHANISM.logpdf(40 - n))
    loo = az.loo(idata, var_name="s")
    assert np.isfinite(getattr(loo, "elpd_loo", getattr(loo, "elpd", np.nan)))  # ArviZ 0.x / 1.x


def test_log_likelihood_without_inference_data_is_refused_before_sampling(bounded):
    with pytest.raises(ValueError, match="return_inferencedata=True"):
        pmdp.sample(
            model=bounded,
            return_inferencedata=False,
            idata_kwargs={"log_likelihood": True},
            **QUICK,
        )


def test_pm_sample_arguments_pass_through(bounded, nuts_options):
    idata = pmdp.sample(model=bounded, target_accept=0.95, random_seed=43, **QUICK)
    assert nuts_options["target_accept"] == 0.95
    assert "theta" in idata["posterior"]
    for bad in (-5, 2.5):
        with pytest.raises(ValueError, match="`tune` must be a non-negative integer"):
            pmdp.sample(model=bounded, tune=bad, draws=10, progressbar=False)


def test_pm_sample_takes_inner_step_options_by_the_package_steps_name(bounded, nuts_options):
    """PyMC refuses ``pm.sample(target_accept=...)`` when NUTS is not its top-level step and
    suggests ``dp_augmentation={"nuts": ...}``: that spelling reaches the inner NUTS."""
    with bounded:
        with pytest.raises(ValueError, match="dp_augmentation"):
            pm.sample(target_accept=0.9, random_seed=45, **QUICK)
        idata = pm.sample(
            dp_augmentation={"nuts": {"target_accept": 0.9}, "interweave": False},
            random_seed=45,
            **QUICK,
        )
    assert nuts_options["target_accept"] == 0.9
    assert "interweave_steps" not in idata["sample_stats"]


def test_the_step_listing_has_no_duplicates(bounded, unbounded):
    for model in (bounded, unbounded):
        with model:
            step = pmdp.DataAugmentation() if model is bounded else pmdp.ReversibleJump()
        listed = [(type(m).__name__, v.name) for m in step.methods for v in m.vars]
        assert len(listed) == len(set(listed))
        assert not step.records_step.vars if model is bounded else step.records_step.vars
        samplers = {name for name, var in listed if var.startswith("theta")}
        assert "RecordsStep" not in samplers


def test_dims_label_releases_and_kept_records():
    with pm.Model(coords={"part": ["care", "eating", "other"]}) as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0, dims="part")
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=20, dims="part")
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.maximum(x, 0.01)),
            pmdp.Laplace(epsilon=1.0, sensitivity=-3 * np.log(0.01)),
            observed=[-20.0, -30.0, -25.0],
            dims="part",
        )
        with pytest.raises(ValueError, match="must name each of the 1 axes"):
            pmdp.PrivatizedSum(
                "s2", x, pmdp.Laplace(epsilon=1.0), observed=[1.0, 2.0, 3.0], dims=("part", "other")
            )
    idata = pmdp.sample(model=model, random_seed=44, keep_records=50, **QUICK)
    assert idata["observed_data"]["s"].dims == ("part",)
    assert list(idata["imputed_records"]["part"].values) == ["care", "eating", "other"]
    assert idata["imputed_records"]["x"].dims == ("chain", "kept_draw", "record", "part")


def refit_model(n_dp: int, s_dp: float) -> pm.Model:
    """Bernoulli records whose ``n_dp`` and ``s_dp`` are ``pm.Data`` (refits by ``pm.set_data``)."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize(
            "n", n_dp=pm.Data("n_dp_data", n_dp), mechanism=pmdp.DiscreteLaplace(epsilon=0.5)
        )
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=pm.Data("s_data", s_dp))
    return model


@pytest.mark.parametrize("augment", ["records", "sums"])
def test_a_refit_after_set_data_of_n_dp_draws_what_a_fresh_model_draws(augment):
    """``pm.set_data`` on ``n_dp`` (20 -> 14): the refit's chain starts ``n`` at the new
    release, as a model built with it does, so the draws are the same seed for seed (it started
    at the build's 20, and a large change, 20 -> 100,000, left the chain far from its posterior)."""
    refit, fresh = refit_model(20, 8.3), refit_model(14, 3.7)
    with refit:
        pm.set_data({"n_dp_data": 14, "s_data": 3.7})
    options = {"draws": 15, "tune": 10, "chains": 1, "cores": 1, "random_seed": 3}
    options |= {"progressbar": False, "compute_convergence_checks": False, "augment": augment}
    drawn = [pmdp.sample(model=model, **options) for model in (refit, fresh)]
    for name in ("theta", "n"):
        np.testing.assert_array_equal(draws_of(drawn[0], name), draws_of(drawn[1], name))


def test_initial_values_given_for_n_win_over_the_start_at_the_current_release():
    """The start that follows ``pm.set_data`` fills in only what the caller left out: a dict,
    one dict per chain, or PyMC 5's old name ``start``; a release below or above the build's."""
    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp.sampling import _starting_n_at_current_releases as starting

    model = refit_model(20, 8.3)
    compiled = compile_model(model)
    assert starting(compiled, {"draws": 5}) == {"draws": 5}  # n_dp unchanged: nothing added
    with model:
        pm.set_data({"n_dp_data": 14})
    assert starting(compiled, {})["initvals"] == {"n": 14}
    assert starting(compiled, {"initvals": {"n": 30, "theta": 0.2}})["initvals"] == {
        "n": 30,
        "theta": 0.2,
    }
    per_chain = starting(compiled, {"initvals": [{"n": 30}, None]})["initvals"]
    assert per_chain == [{"n": 30}, {"n": 14}]
    assert starting(compiled, {"start": {"theta": 0.2}}) == {"start": {"n": 14, "theta": 0.2}}
    with model:  # a release above the build's (the chain would otherwise start below it)
        pm.set_data({"n_dp_data": 31})
    assert starting(compiled, {})["initvals"] == {"n": 31}
