"""Bounded DP: the data-augmentation sampler against exact posteriors, reproducibility, output."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import assert_mean_matches, assert_moments_match, draws_of, trace_of
from oracles import bernoulli_posterior, normal_posterior, two_variable_posterior
from pytensor.link.vm import VMLinker
from release_models import histogram_model

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import records_in_containers

SAMPLE = dict(
    draws=2000, tune=500, chains=4, cores=1, progressbar=False, compute_convergence_checks=False
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
    def fit(draws, chains, keep_records):
        return pmdp.sample(
            augment="records",
            model=small_model,
            draws=draws,
            tune=5 if draws < 50 else 50,
            chains=chains,
            cores=1,
            random_seed=1,
            keep_records=keep_records,
            progressbar=False,
            compute_convergence_checks=False,
        )

    idata = fit(draws=100, chains=2, keep_records=25)
    assert "x" not in idata["observed_data"]
    assert "s" in idata["observed_data"]
    kept = idata["imputed_records"]
    assert kept["x"].shape == (2, 4, 20)
    # one table: its axis is "record" and its count "n"
    assert kept["x"].dims == ("chain", "kept_draw", "record") and set(kept.data_vars) == {"x", "n"}
    np.testing.assert_array_equal(kept["kept_draw"].values, [0, 25, 50, 75])
    assert set(np.unique(kept["x"].values)) <= {0, 1}
    assert kept["x"].dtype.kind == "i"  # a known n: no padding, the records' own dtype
    assert "records" not in idata["sample_stats"]
    groups = idata.children if hasattr(idata, "children") else idata.groups()
    assert "log_likelihood" not in groups  # not asked for
    # one chain, one kept draw
    assert fit(draws=10, chains=1, keep_records=10)["imputed_records"]["x"].shape == (1, 1, 20)


def test_kept_vector_records_get_an_axis_per_coordinate():
    """Records of 3 coordinates with no ``dims``: the kept records have the axis ``x_dim_0``."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0, shape=3)
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=5)
        pmdp.PrivatizedSum(
            "s", x, pmdp.Laplace(epsilon=1.0, sensitivity=3.0), observed=[1.0, 2.0, 2.0]
        )
    idata = pmdp.sample(
        model=model,
        augment="records",
        draws=4,
        tune=4,
        chains=1,
        keep_records=2,
        random_seed=1,
        progressbar=False,
        compute_convergence_checks=False,
    )
    kept = idata["imputed_records"]["x"]
    assert kept.dims == ("chain", "kept_draw", "record", "x_dim_0") and kept.shape == (1, 2, 5, 3)


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
    # PyMC's own trust_input never reaches the compiled function; the package passes it there,
    # and keeps the gradient's intermediates between calls on PyTensor's virtual machines
    gradient = nuts._logp_dlogp_func._pytensor_function
    assert gradient.trust_input
    if isinstance(gradient.maker.linker, VMLinker):  # PyMC 5 (PyMC 6 compiles with numba)
        assert not gradient.maker.linker.allow_gc
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


@pytest.fixture(scope="module")
def labelled():
    """Three released counts labelled by a pandas index and a released n (four numbers), with
    the releases' log-likelihood."""
    import pandas as pd

    counts = pd.Series([30.0, 12.0, 18.0], index=pd.Index(["north", "south", "west"]))
    n_dp = pd.Series([62], index=["2020"])  # a filtered table's row
    model = histogram_model(counts, dims="region", n=("latent", n_dp))
    idata = pmdp.sample(
        model=model,
        draws=200,
        tune=100,
        chains=2,
        cores=1,
        random_seed=7,
        progressbar=False,
        compute_convergence_checks=False,
        idata_kwargs={"log_likelihood": True},
    )
    return model, idata


def test_index_labels_reach_the_release_draws_and_log_likelihood(labelled):
    model, idata = labelled
    regions = ["north", "south", "west"]
    predictive = pmdp.sample_posterior_predictive(idata, model=model, random_seed=8)
    for group in (idata["observed_data"], idata["log_likelihood"]):
        assert list(group["s"]["region"].values) == regions
    assert list(predictive["posterior_predictive"]["s"]["region"].values) == regions
    assert float(idata["observed_data"]["n_dp"].values.reshape(())) == 62


# ArviZ 0.x's compare calls a pandas method that pandas 3.1 deprecates; not ours to fix.
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.sort_values")
def test_stacked_log_likelihood_makes_each_released_number_a_loo_point(labelled):
    import arviz as az

    _, idata = labelled
    with pytest.raises(TypeError, match="several log likelihood arrays"):
        az.loo(idata)  # what ArviZ says about one variable per release
    stacked = pmdp.stack_log_likelihood(idata)
    points = stacked["log_likelihood"]["releases"]
    assert points.dims == ("chain", "draw", "release")
    assert list(points["release"].values) == ["n_dp", "s[north]", "s[south]", "s[west]"]
    per_release = idata["log_likelihood"]
    np.testing.assert_array_equal(points.sel(release="s[south]"), per_release["s"][:, :, 1])
    n_dp = points.sel(release="n_dp")  # ArviZ 0.x gives the scalar n_dp an axis, 1.x none
    np.testing.assert_array_equal(n_dp, per_release["n_dp"].values.reshape(n_dp.shape))
    assert set(idata["log_likelihood"].data_vars) == {"s", "n_dp"}  # idata is unchanged
    loo = az.loo(stacked, pointwise=True)
    elpd = getattr(loo, "elpd_loo", getattr(loo, "elpd", np.nan))  # ArviZ 0.x / 1.x
    assert np.isfinite(elpd)
    assert np.isfinite(loo.se) and loo.se > 0  # four points, not one
    assert np.asarray(loo.pareto_k).size == 4
    compared = az.compare({"a": stacked, "b": stacked})
    assert len(compared) == 2
    with pytest.raises(ValueError, match="no log_likelihood group"):
        pmdp.stack_log_likelihood(
            pmdp.sample(
                model=labelled[0],
                draws=5,
                tune=5,
                chains=1,
                progressbar=False,
                compute_convergence_checks=False,
            )
        )


def test_unknown_keywords_are_named_with_the_closest_valid_one(small_model, labelled):
    unbounded = labelled[0]
    cases = [
        (lambda: pmdp.sample(model=small_model, draw=10), "'draw' (did you mean 'draws'?)"),
        (
            lambda: pmdp.sample(model=small_model, interweve=False),
            "'interweve' (did you mean 'interweave'?)",
        ),
        (lambda: pmdp.sample(model=unbounded, n_move=3), "'n_move' (did you mean 'n_moves'?)"),
        (lambda: pmdp.mcem(small_model, max_iter=3), "'max_iter' (did you mean 'max_iterations'?)"),
        (
            lambda: pmdp.DataAugmentation(model=small_model, interweve=False),
            "pmdp.DataAugmentation() got an unexpected keyword argument 'interweve'",
        ),
        (
            lambda: pmdp.ReversibleJump(model=unbounded, n_move=3),
            "'n_move' (did you mean 'n_moves'?)",
        ),
        (
            lambda: pm.sample(model=small_model, dp_augmentation={"n_move": 3}, progressbar=False),
            "pm.sample(dp_augmentation={...}) got an unexpected keyword argument 'n_move'",
        ),
    ]
    for call, named in cases:
        with pytest.raises(TypeError) as error:
            call()
        message = str(error.value)
        assert named in message
        assert len(message) < 600 and "step_kwargs" not in message and "Apply node" not in message
    # pm.sample's own keywords and a step's options by its name still pass through
    idata = pmdp.sample(
        model=small_model,
        draws=20,
        tune=20,
        chains=1,
        random_seed=3,
        progressbar=False,
        compute_convergence_checks=False,
        initvals={"theta": 0.4},
        discard_tuned_samples=False,
        nuts={"max_treedepth": 6},
        target_accept=0.9,
    )
    groups = idata.children if hasattr(idata, "children") else idata.groups()
    assert "warmup_posterior" in groups


def test_the_compilation_time_is_the_time_building_the_steps_took(small_model, monkeypatch):
    import time

    from pymc_unbounded_dp import sampling

    seen = []
    monkeypatch.setattr(sampling, "_log_compilation", seen.append)
    start = time.perf_counter()
    pmdp.sample(model=small_model, draws=5, tune=5, chains=1, progressbar=False, random_seed=1)
    (seconds,) = seen
    assert 0.0 < seconds < time.perf_counter() - start


def test_stack_log_likelihood_takes_its_options_by_keyword():
    with pytest.raises(TypeError, match="positional"):
        pmdp.stack_log_likelihood(None, "releases")


def test_a_slow_compilation_is_said_in_one_line(caplog):
    """Building the samplers for 5 s or more is logged at INFO on PyMC's logger; less is not."""
    import logging

    from pymc_unbounded_dp.sampling import SLOW_COMPILATION, _log_compilation

    with caplog.at_level(logging.INFO, logger="pymc"):
        _log_compilation(SLOW_COMPILATION - 0.1)
        assert not caplog.records
        _log_compilation(SLOW_COMPILATION)
        _log_compilation(12.0)
    assert [r.name for r in caplog.records] == ["pymc.pymc_unbounded_dp"] * 2
    assert [r.getMessage()[:40] for r in caplog.records] == [
        "pmdp: compiled the model's samplers in 5",
        "pmdp: compiled the model's samplers in 1",
    ]


@pytest.mark.parametrize("shape", [(), (2,), (2, 3)])
def test_an_array_stat_is_shaped_per_draw_however_the_trace_stored_it(shape):
    """Stored as numbers (chain, draw, ...) or as objects (one array per draw), a stat becomes
    the same ``(chain, draw, *shape)`` array."""
    from pymc_unbounded_dp.sampling import _per_draw

    numbers = np.arange(3 * 4 * int(np.prod(shape)), dtype=float).reshape(3, 4, -1)
    objects = np.empty((3, 4), dtype=object)
    for index in np.ndindex(3, 4):
        objects[index] = numbers[index].reshape(shape)
    expected = numbers.reshape(3, 4, *shape)
    for stored in (numbers.reshape(3, 4, *shape), objects):
        np.testing.assert_array_equal(_per_draw(stored, shape), expected)


def test_the_defaults_shared_with_pm_sample_are_pymcs():
    """``draws``, ``tune``, ``chains``, ``cores`` and ``random_seed`` default as in ``pm.sample``:
    a user moving from one to the other gets the same run (``nuts_sampler`` is PyMC's own NUTS
    only: other samplers are refused)."""
    import inspect

    ours = inspect.signature(pmdp.sample).parameters
    pymcs = {name: p.default for name, p in inspect.signature(pm.sample).parameters.items()}
    if pymcs["tune"] is None:  # PyMC 6: the steps' own default_tune_steps, else PyMC's default
        from pymc.sampling.mcmc import get_default_tune_steps

        pymcs["tune"] = (
            inspect.signature(get_default_tune_steps).parameters["default_tune_steps"].default
        )
    for name in ("draws", "tune", "chains", "cores", "random_seed"):
        assert ours[name].default == pymcs[name], name


def test_the_accuracy_figure_is_taken_at_the_posterior_means_with_only_integers_rounded():
    """The sums level's accuracy figure is the law's accuracy at the posterior means, where a
    float parameter's mean is used as it is and an integer one's (``n``) is rounded. Compared at
    full precision (the two-digit figure the posterior's attributes quote hides a rounded mu)."""
    import xarray as xr

    from pymc_unbounded_dp.sampling import _accuracy
    from pymc_unbounded_dp.sums import approximation_accuracy

    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        n = pmdp.SampleSize("n", n_dp=8, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -3, 3), pmdp.Laplace(epsilon=1.0, sensitivity=3.0), observed=10.0
        )
    (law,) = pmdp.ReversibleJump(model=model, augment="sums").records_step.laws
    posterior = xr.Dataset(
        {
            "mu": (("chain", "draw"), [[1.5, 1.6, 1.7]]),  # mean 1.6: rounded would be 2
            "n": (("chain", "draw"), [[7, 8, 8]]),  # mean 7.67: truncated would be 7
        }
    )
    figure = _accuracy(law, posterior)
    expected = approximation_accuracy(law, [np.array(1.6), np.array(8)], 8)
    assert figure.berry_esseen == pytest.approx(expected.berry_esseen, rel=1e-12)
    assert figure.n == 8
    # the test has power: the figure at a rounded mu, or at n = 7, is not the same number
    for values, size in (([np.array(2.0), np.array(8)], 8), ([np.array(1.6), np.array(7)], 7)):
        other = approximation_accuracy(law, values, size).berry_esseen
        assert abs(other - expected.berry_esseen) > 1e-6 * expected.berry_esseen


def test_idata_kwargs_reach_pymc_and_blas_threads_may_be_none(small_model):
    """``idata_kwargs`` other than the package's ``log_likelihood`` go to ``pm.sample`` (here
    ``include_transformed``), and ``blas_threads=None`` leaves the BLAS threads as they are."""
    idata = pmdp.sample(
        model=small_model,
        random_seed=1,
        blas_threads=None,
        idata_kwargs={"include_transformed": True},
        **{**SAMPLE, "draws": 5, "tune": 5, "chains": 1},
    )
    assert "theta_logodds__" in idata["posterior"]


def test_draw_counts_are_checked_before_pymc_sees_them():
    """No draws or no tuning is a run PyMC makes; ``None`` chains or cores let PyMC choose; a
    negative count (``tune=-1`` runs one draw more) or a missing ``draws`` is refused by name."""
    from pymc_unbounded_dp.sampling import _check_draws

    _check_draws(0, 0, None, None)
    allowed = {"draws": 10, "tune": 10, "chains": 1, "cores": 1}
    for name, bad in (("draws", -1), ("tune", -1), ("draws", None), ("tune", None), ("chains", 0)):
        with pytest.raises((TypeError, ValueError), match=f"`{name}`"):
            _check_draws(**{**allowed, name: bad})


# -- what each path of the sampler's assembly depends on (issue 32) ------------------------------
def test_target_accept_reaches_nuts_beside_its_other_options_and_given_twice_is_refused(
    small_model, monkeypatch
):
    """``target_accept`` reaches NUTS's options as ``pm.sample``'s does, beside the other
    ``nuts`` options and without changing the caller's dict; given in ``nuts`` as well, it is
    refused (as ``pm.sample`` refuses it), not silently resolved one way."""
    from pymc_unbounded_dp import sampling

    options_seen = []

    def augmentation_step(model, step, *, step_kwargs, **kwargs):
        options_seen.append(step_kwargs)

    monkeypatch.setattr(sampling, "augmentation_step", augmentation_step)
    monkeypatch.setattr(pm, "sample", lambda *args, **kwargs: None)
    pmdp.sample(model=small_model, target_accept=0.6, return_inferencedata=False)
    assert options_seen.pop() == {"nuts": {"target_accept": 0.6}}
    nuts = {"max_treedepth": 7}
    pmdp.sample(model=small_model, target_accept=0.6, nuts=nuts, return_inferencedata=False)
    assert options_seen.pop() == {"nuts": {"max_treedepth": 7, "target_accept": 0.6}}
    assert nuts == {"max_treedepth": 7}
    with pytest.raises(ValueError, match="`target_accept` was given twice"):
        pmdp.sample(
            model=small_model,
            target_accept=0.6,
            nuts={"target_accept": 0.95},
            return_inferencedata=False,
        )


def test_the_accuracy_figure_averages_every_chain_and_reads_a_fixed_n(monkeypatch):
    """The figure is taken at the mean over all chains and draws (not per chain), ``n`` the
    rounded mean of the latent ``n``, or the table's fixed ``n``."""
    from types import SimpleNamespace

    import xarray as xr

    from pymc_unbounded_dp import sampling

    with pm.Model() as model:
        pm.Normal("mu", 0.0, 1.0)
        size = pm.Poisson("n", 5.0)
    seen = []
    monkeypatch.setattr(
        sampling, "approximation_accuracy", lambda law, values, n: seen.append((values, n))
    )
    posterior = xr.Dataset(
        {
            "mu": (("chain", "draw"), [[1.0, 1.2], [2.0, 2.2]]),  # chain means 1.1 and 2.1
            "n": (("chain", "draw"), [[7, 8], [9, 9]]),  # mean 8.25
        }
    )
    for sample_size, fixed_n, expected_n in ((size, None, 8), (None, 30, 30)):
        spec = SimpleNamespace(sample_size=sample_size)
        table = SimpleNamespace(model=model, spec=spec, fixed_n=fixed_n)
        law = SimpleNamespace(family=SimpleNamespace(exact=False), table=table)
        sampling._accuracy(law, posterior)
        (mu, n_value), n = seen.pop()
        assert np.shape(mu) == () and float(mu) == pytest.approx(1.6, rel=1e-12)
        assert int(n_value) == 8 and n == expected_n


@pytest.fixture(scope="module")
def two_tables_at_the_sums_level():
    """Two bounded tables with their own parameters: Bernoulli records released as a count
    ``a`` and Categorical records released as a histogram ``z``; two sums-level steps."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("a", x, pmdp.Laplace(epsilon=1.0), observed=4.2)
        p = pm.Dirichlet("p", np.ones(3))
        z = pmdp.Records("z_rec", pm.Categorical.dist(p), n=6)
        pmdp.PrivatizedSum(
            "z",
            pt.eq(z[:, None], np.arange(3)),
            pmdp.Laplace(epsilon=1.0, sensitivity=3.0),
            observed=[1.0, 2.0, 3.0],
        )
    steps = [pmdp.DataAugmentation(model=model, augment="sums") for _ in range(2)]
    return model, steps


def test_the_sums_level_parameter_target_is_the_prior_and_each_tables_own_sum_law(
    two_tables_at_the_sums_level,
):
    """The parameters' target at the sums level: prior (with Jacobians) + the Binomial law of
    table ``a``'s latent counts + the Multinomial law of table ``z``'s, read from the step's own
    latent state (a second fit of the model does not read the first one's); no record term."""
    from pymc.blocking import DictToArrayBijection
    from scipy import special, stats

    model, steps = two_tables_at_the_sums_level
    latents = [([7.0, 3.0], [1.0, 2.0, 3.0]), ([3.0, 7.0], [4.0, 0.0, 2.0])]  # per-value counts
    for step, (counts_x, counts_z) in zip(steps, latents):
        law_x, law_z = step.records_step.laws
        law_x.latent.set_value(np.array(counts_x))
        law_z.latent.set_value(np.array(counts_z))
    prior = model.compile_logp(vars=[model["theta"], model["p"]])
    simplex = model.rvs_to_transforms[model["p"]]
    for step, (counts_x, counts_z) in zip(steps, latents):
        (nuts,) = [m for m in step.methods if isinstance(m, pm.NUTS)]
        function = nuts._logp_dlogp_func
        function.set_extra_values({})
        for logodds, unconstrained in ((0.3, [0.2, -0.5]), (-0.8, [0.6, 0.1])):
            point = {"theta_logodds__": np.asarray(logodds), "p_simplex__": np.array(unconstrained)}
            p = simplex.backward(pt.as_tensor(point["p_simplex__"])).eval()
            expected = (
                prior(point)
                + stats.binom.logpmf(counts_x[1], 10, special.expit(logodds))
                + stats.multinomial.logpmf(counts_z, 6, p)
            )
            flat = DictToArrayBijection.map({v.name: point[v.name] for v in nuts.vars})
            np.testing.assert_allclose(function(flat)[0], expected, rtol=1e-10)


def test_the_latent_totals_move_to_the_posterior_each_shaped_like_its_own_release(
    two_tables_at_the_sums_level,
):
    """A scalar release ``a`` declared before a histogram ``z``: each stat ``<name>_total``
    moves to the posterior under the same name, with its own release's shape and values."""

    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp.sampling import _record_level

    model, (step, _) = two_tables_at_the_sums_level
    totals_a = np.array([[4.0, 5.0]])
    totals_z = np.arange(6.0).reshape(1, 2, 3)
    result = trace_of(
        {
            "posterior": xr_dataset({"theta": (("chain", "draw"), [[0.4, 0.5]])}),
            "sample_stats": xr_dataset(
                {
                    "a_total": (("chain", "draw"), totals_a),
                    "z_total": (("chain", "draw", "z_total_dim_0"), totals_z),
                    "lp": (("chain", "draw"), [[-1.0, -2.0]]),
                }
            ),
        }
    )
    _record_level(result, compile_model(model), step)
    posterior = result["posterior"]
    np.testing.assert_array_equal(posterior["a_total"].values, totals_a)
    np.testing.assert_array_equal(posterior["z_total"].values, totals_z)
    assert posterior["z_total"].dims == ("chain", "draw", "z_total_dim_0")
    assert set(result["sample_stats"].data_vars) == {"lp"}
    assert posterior.attrs["pmdp_augment"] == "sums"


def xr_dataset(variables):
    import xarray as xr

    return xr.Dataset(variables, coords={"chain": [0], "draw": [0, 1]})


def test_stacking_a_two_dimensional_release_labels_each_value_by_its_coordinates():
    """A release on a (row, column) grid, stored in either axis order: each point's label names
    its row and column and carries that cell's values."""
    import xarray as xr

    values = np.arange(2 * 3 * 2 * 3, dtype=float).reshape(2, 3, 2, 3)  # chain, draw, row, col
    coords = {"chain": [0, 1], "draw": [0, 1, 2], "row": ["r0", "r1"], "col": ["c0", "c1", "c2"]}
    grid = xr.DataArray(values, dims=("chain", "draw", "row", "col"), coords=coords)
    for stored in (grid, grid.transpose("chain", "draw", "col", "row")):
        idata = trace_of({"log_likelihood": xr.Dataset({"s": stored})})
        points = pmdp.stack_log_likelihood(idata)["log_likelihood"]["releases"]
        by_row = stored is grid  # labels name the coordinates in the stored order
        label = "s[r{i}, c{j}]" if by_row else "s[c{j}, r{i}]"
        cells = [(i, j) for i in range(2) for j in range(3)]
        if not by_row:
            cells = [(i, j) for j in range(3) for i in range(2)]
        assert list(points["release"].values) == [label.format(i=i, j=j) for i, j in cells]
        for i, j in cells:
            cell = points.sel(release=label.format(i=i, j=j)).values
            np.testing.assert_array_equal(cell, values[:, :, i, j])


def test_kept_records_of_a_latent_and_a_known_table_are_padded_and_counted_per_table():
    """``imputed_records`` of two tables: the latent table's records padded with NaN to its
    largest ``n``, counted under its sample size's name; the known table's kept in their own
    dtype, counted as ``n_<label>``; the draws kept are labelled by their draw."""
    import xarray as xr

    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp.sampling import _records_dataset

    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        size = pmdp.SampleSize("n_a", n_dp=3, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x_a = pmdp.Records("x_a", pm.Bernoulli.dist(theta), n=size)
        x_b = pmdp.Records("x_b", pm.Bernoulli.dist(theta), n=4)
        pmdp.PrivatizedSum("s_a", x_a, pmdp.Laplace(epsilon=1.0), observed=1.5)
        pmdp.PrivatizedSum("s_b", x_b, pmdp.Laplace(epsilon=1.0), observed=2.5)
    tables = compile_model(model).tables
    sets = {
        (0, 1): {"x_a": np.array([1, 0]), "x_b": np.array([1, 1, 0, 1])},
        (0, 3): {"x_a": np.array([0, 1, 1]), "x_b": np.array([0, 0, 0, 1])},
        (1, 1): {"x_a": np.array([1]), "x_b": np.array([1, 0, 0, 0])},
        (1, 3): {"x_a": np.array([0, 0]), "x_b": np.array([1, 1, 1, 1])},
    }
    cells = np.empty((2, 4), dtype=object)
    for index, records in sets.items():
        cells[index] = records
    kept = xr.DataArray(cells, dims=("chain", "draw"), coords={"chain": [0, 1], "draw": range(4)})
    dataset = _records_dataset(kept, tables)
    assert set(dataset.data_vars) == {"x_a", "x_b", "n_a", "n_x_b"}
    np.testing.assert_array_equal(dataset["kept_draw"].values, [1, 3])
    np.testing.assert_array_equal(dataset["n_a"].values, [[2, 3], [1, 2]])
    np.testing.assert_array_equal(dataset["n_x_b"].values, [[4, 4], [4, 4]])
    nan = np.nan
    expected_a = [[[1, 0, nan], [0, 1, 1]], [[1, nan, nan], [0, 0, nan]]]
    np.testing.assert_array_equal(dataset["x_a"].values, expected_a)
    assert dataset["x_b"].dtype.kind == "i" and dataset["x_b"].shape == (2, 2, 4)
    np.testing.assert_array_equal(dataset["x_b"].values[1, 0], [1, 0, 0, 0])
    assert dataset["x_a"].dims[2] != dataset["x_b"].dims[2]


def test_the_tidied_groups_keep_no_dimension_of_a_dropped_variable(labelled):
    """The records dropped from ``observed_data`` and the log-likelihood stats moved out of
    ``sample_stats`` leave no dimension behind."""
    _, idata = labelled
    for name in ("observed_data", "sample_stats"):
        group = idata[name]
        used = {dim for var in group.data_vars.values() for dim in var.dims}
        assert set(group.dims) == used, name
    assert "x" not in idata["observed_data"]


def test_no_pymc_step_is_given_the_sample_size_even_when_asked_for_it(labelled):
    """``pm.sample`` hands the augmentation step every value variable, ``n`` among them: the
    parameter steps PyMC would choose leave ``n`` to the reversible-jump moves."""
    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp._step_assembly import parameter_steps
    from pymc_unbounded_dp.steps import PrivateDataStep

    model, _ = labelled
    compiled = compile_model(model)
    n_value = model.rvs_to_values[model["n"]]
    steps = parameter_steps(model, compiled, None, None, only=[n_value], exclude=(PrivateDataStep,))
    assert steps == []


def test_interweave_options_given_as_a_dict_reach_the_move(small_model):
    """``interweave={"n_steps": 4, "switch_off": False}`` builds the move with those options;
    ``True`` forces it on with its own step count."""
    from pymc_unbounded_dp._compile import compile_model
    from pymc_unbounded_dp._step_assembly import interweave_steps

    compiled = compile_model(small_model)
    (move,) = interweave_steps(small_model, compiled, {"n_steps": 4, "switch_off": False})
    assert isinstance(move, pmdp.Interweave) and move.n_steps == 4 and not move.switch_off
    (forced,) = interweave_steps(small_model, compiled, True)
    assert forced.n_steps is None and not forced.switch_off
