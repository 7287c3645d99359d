"""Predictive draws of the releases: exact given each draw of (theta, n), on PyMC 5 and 6.

The checks condition on the draws of the parameters (posterior or prior): given draw ``d``, the
predictive release ``s_d = sum of n_d Bernoulli(theta_d) + Laplace(b)`` is independent of the other
draws, with mean ``n_d theta_d`` and variance ``n_d theta_d (1 - theta_d) + 2 b^2``. So every
statistic below is an average of independent terms with known conditional means, and its standard
error comes from the terms themselves: a z-score beyond ``Z_LIMIT`` (4) is a failure, not noise.
"""

import numpy as np
import pymc as pm
import pytest
import xarray as xr
from mcmc_checks import Z_LIMIT, assert_mean_and_spread_match, trace_of

import pymc_unbounded_dp as pmdp

S_MECHANISM = pmdp.Laplace(epsilon=1.0)  # scale b = 1: noise variance 2
S_NOISE_VAR = 2 * S_MECHANISM.scale**2
A, B = 2.0, 3.0  # Beta prior of theta
SAMPLE = {
    "chains": 2,
    "draws": 500,
    "tune": 300,
    "cores": 1,
    "progressbar": False,
    "compute_convergence_checks": False,
}


def discrete_laplace_moments(mechanism) -> tuple[float, float]:
    """Variance of ``P(k) ∝ exp(-|k| / t)`` on the integers (``2 q / (1 - q)^2``,
    ``q = e^{-1/t}``) and the variance of ``k^2`` (from the probabilities, summed far into the
    tails)."""
    t = mechanism.scale
    k = np.arange(-int(80 * t) - 10, int(80 * t) + 11, dtype=float)
    pmf = np.exp(-np.abs(k) / t)
    pmf /= pmf.sum()
    var, fourth = np.sum(k**2 * pmf), np.sum(k**4 * pmf)
    q = np.exp(-1.0 / t)
    assert var == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-9)
    return float(var), float(fourth - var**2)


def bernoulli_model(n, *, n_dp=100, n_mechanism=None, prior=None, s_dp=30.4):
    """``theta ~ Beta(2, 3)``, Bernoulli records, their count released with Laplace noise; ``n`` an
    int (bounded DP) or a SampleSize released with ``n_mechanism``."""
    with pm.Model() as model:
        theta = pm.Beta("theta", A, B)
        if n is None:
            n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=n_mechanism, prior=prior)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=s_dp)
    return model


# --------------------------------------------------------------------------------------------------
# InferenceData (PyMC 5) and DataTree (PyMC 6) alike
# --------------------------------------------------------------------------------------------------
def group(result, name: str) -> xr.Dataset:
    node = result[name]
    return node.to_dataset() if isinstance(node, xr.DataTree) else node


def has_group(result, name: str) -> bool:
    return name in (result.children if isinstance(result, xr.DataTree) else result.groups())


def flat(result, name: str, var: str) -> np.ndarray:
    """Draws of ``var`` in group ``name``, with ``(chain, draw)`` flattened into one axis."""
    values = group(result, name)[var].values
    return values.reshape(-1, *values.shape[2:]).astype(float)


def copy_of(result):
    return result.copy(deep=True) if isinstance(result, xr.DataTree) else result.copy()


def z_of_mean(terms: np.ndarray, expected: float, sd: float | None = None) -> float:
    """z-score of the mean of independent ``terms`` against ``expected``; ``sd``: the terms'
    exact standard deviation (for skewed terms such as squared noise, whose sample standard
    deviation is too small exactly when the mean is), else the sample's."""
    sd = terms.std(ddof=1) if sd is None else sd
    return float((terms.mean() - expected) / (sd / np.sqrt(terms.size)))


def release_z_scores(theta, n, s_rep, n_dp_rep=None, n_mechanism=None) -> dict[str, float]:
    """z-scores of the predictive releases against their exact laws given the draws (theta, n).

    * ``residual mean``, ``residual variance``: the standardized residuals
      ``(s - n theta) / sqrt(n theta (1 - theta) + 2 b^2)`` have mean 0 and variance 1;
    * ``slope on n``: the residual does not depend on ``(n - mean n) theta`` (weighted least
      squares slope 0, its exact standard error from the conditional variances): the records
      drawn for draw ``d`` number ``n_d``, not a fixed count (a fixed count gives slope -1);
    * ``total variance``: ``mean((s - mean(n theta))^2)`` equals the law of total variance over
      the draws, ``mean(var_d) + var(n theta)``;
    * ``n_dp mean``, ``n_dp variance``: ``n_dp - n`` is the count's noise (``n_mechanism``).
    """
    mean = n * theta
    var = n * theta * (1 - theta) + S_NOISE_VAR
    residual = s_rep - mean
    standardized = residual / np.sqrt(var)
    z = {
        "residual mean": z_of_mean(standardized, 0.0),
        "residual variance": z_of_mean(standardized**2, 1.0),
        "total variance": z_of_mean((s_rep - mean.mean()) ** 2, var.mean() + mean.var()),
    }
    w = (n - n.mean()) * theta
    if np.any(n != n[0]):  # (a known n: no regressor)
        slope = np.sum(w * residual) / np.sum(w**2)
        slope_se = np.sqrt(np.sum(w**2 * var)) / np.sum(w**2)
        z["slope on n"] = float(slope / slope_se)
    if n_dp_rep is not None:
        noise = n_dp_rep - n
        noise_var, noise_sq_var = discrete_laplace_moments(n_mechanism)
        z["n_dp mean"] = z_of_mean(noise, 0.0, np.sqrt(noise_var))
        z["n_dp variance"] = z_of_mean(noise**2, noise_var, np.sqrt(noise_sq_var))
    return z


def assert_all_small(z: dict[str, float]) -> None:
    large = {k: round(v, 1) for k, v in z.items() if not abs(v) < Z_LIMIT}
    assert not large, f"z-scores beyond {Z_LIMIT}: {large} (all: {z})"


def refuse_to_sample(monkeypatch):
    """Make PyMC's samplers fail loudly: a check must have raised before any draw."""

    def sampled(*args, **kwargs):
        raise AssertionError("PyMC was asked to sample before the check")

    monkeypatch.setattr(pm, "sample_posterior_predictive", sampled)
    monkeypatch.setattr(pm, "sample_prior_predictive", sampled)


# --------------------------------------------------------------------------------------------------
# fixtures: one posterior per model, shared by the module
# --------------------------------------------------------------------------------------------------
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.1)  # sd ~ 14 on n_dp = 100: n varies a lot


@pytest.fixture(scope="module")
def unbounded():
    model = bernoulli_model(None, n_mechanism=N_MECHANISM)
    return model, pmdp.sample(augment="records", model=model, random_seed=11, **SAMPLE)


@pytest.fixture(scope="module")
def bounded():
    model = bernoulli_model(40, s_dp=15.3)
    return model, pmdp.sample(augment="records", model=model, random_seed=12, **SAMPLE)


@pytest.fixture(scope="module")
def unbounded_predictive(unbounded):
    model, trace = unbounded
    return pmdp.sample_posterior_predictive(trace, model, random_seed=13)


# --------------------------------------------------------------------------------------------------
# 1. posterior predictive under unbounded DP
# --------------------------------------------------------------------------------------------------
def test_posterior_predictive_is_exact_given_each_draw_of_theta_and_n(
    unbounded, unbounded_predictive
):
    _, trace = unbounded
    pp = unbounded_predictive
    assert sorted(group(pp, "posterior_predictive").data_vars) == ["n_dp", "s"]
    theta, n = flat(trace, "posterior", "theta"), flat(trace, "posterior", "n")
    assert n.std() > 8  # the posterior of n is wide: a wrong count per draw would show
    z = release_z_scores(
        theta,
        n,
        flat(pp, "posterior_predictive", "s"),
        flat(pp, "posterior_predictive", "n_dp"),
        N_MECHANISM,
    )
    assert_all_small(z)
    assert group(pp, "posterior_predictive")["n_dp"].dtype.kind == "i"


def test_the_checks_detect_a_fixed_record_count(unbounded):
    """Power: predictive draws that all used one ``n`` (the last draw's) fail the checks."""
    model, trace = unbounded
    frozen = copy_of(trace)
    posterior = group(frozen, "posterior")
    last = posterior["n"].values[-1, -1]
    posterior["n"] = posterior["n"].copy(data=np.full_like(posterior["n"].values, last))
    if isinstance(frozen, xr.DataTree):
        frozen["posterior"] = xr.DataTree(posterior)
    else:
        frozen.posterior = posterior
    pp = pmdp.sample_posterior_predictive(frozen, model, var_names=["s"], random_seed=13)
    theta, n = flat(trace, "posterior", "theta"), flat(trace, "posterior", "n")
    z = release_z_scores(theta, n, flat(pp, "posterior_predictive", "s"))
    assert z["slope on n"] < -10 * Z_LIMIT
    assert z["residual variance"] > Z_LIMIT


def test_observed_data_has_the_releases_only(unbounded_predictive):
    observed = group(unbounded_predictive, "observed_data")
    assert sorted(observed.data_vars) == ["n_dp", "s"]
    assert observed["s"].values.item() == pytest.approx(30.4)  # shape () or (1,): ArviZ versions
    assert observed["n_dp"].values.item() == 100


# --------------------------------------------------------------------------------------------------
# 2. prior predictive
# --------------------------------------------------------------------------------------------------
POISSON_MEAN = 60
PRIOR_DRAWS = 2000


def test_prior_predictive_draws_n_from_its_prior_and_the_releases_given_it():
    n_mechanism = pmdp.DiscreteLaplace(epsilon=0.3)
    model = bernoulli_model(
        None, n_dp=55, n_mechanism=n_mechanism, s_dp=20.0, prior=pm.Poisson.dist(POISSON_MEAN)
    )
    prior = pmdp.sample_prior_predictive(PRIOR_DRAWS, model, random_seed=21)
    assert sorted(group(prior, "prior").data_vars) == ["n", "theta"]
    assert sorted(group(prior, "prior_predictive").data_vars) == ["n_dp", "s"]
    assert sorted(group(prior, "observed_data").data_vars) == ["n_dp", "s"]
    theta, n = flat(prior, "prior", "theta"), flat(prior, "prior", "n")
    s = flat(prior, "prior_predictive", "s")
    mean_theta = A / (A + B)
    mean_theta2 = A * (A + 1) / ((A + B) * (A + B + 1))
    mean_n, mean_n2 = POISSON_MEAN, POISSON_MEAN + POISSON_MEAN**2
    s_mean = mean_n * mean_theta
    # law of total variance: E[n theta (1 - theta)] + 2 b^2 + Var(n theta)
    s_var = mean_n * (mean_theta - mean_theta2) + S_NOISE_VAR + mean_n2 * mean_theta2 - s_mean**2
    z = {
        "n mean": z_of_mean(n, mean_n, np.sqrt(POISSON_MEAN)),
        # Poisson: central fourth moment mu (1 + 3 mu), so (n - mu)^2 has variance mu + 2 mu^2
        "n variance": z_of_mean(
            (n - mean_n) ** 2, POISSON_MEAN, np.sqrt(POISSON_MEAN + 2 * POISSON_MEAN**2)
        ),
        "theta mean": z_of_mean(theta, mean_theta),
        "s mean": z_of_mean(s, s_mean),
        "s variance": z_of_mean((s - s_mean) ** 2, s_var),
    }
    # and given each prior draw, as for the posterior
    z |= release_z_scores(theta, n, s, flat(prior, "prior_predictive", "n_dp"), n_mechanism)
    assert_all_small(z)


def test_flat_prior_on_n_is_refused_before_sampling(monkeypatch):
    model = bernoulli_model(None, n_mechanism=N_MECHANISM)
    refuse_to_sample(monkeypatch)
    for var_names in (None, ["s"], ["n"], ["n_dp"]):
        with pytest.raises(ValueError, match=r"SampleSize\('n'\).*flat prior.*prior=pm\.Poisson"):
            pmdp.sample_prior_predictive(10, model, var_names=var_names)


def test_flat_prior_on_n_does_not_block_variables_that_do_not_need_n():
    model = bernoulli_model(None, n_mechanism=N_MECHANISM)
    prior = pmdp.sample_prior_predictive(200, model, var_names=["theta"], random_seed=22)
    assert z_of_mean(flat(prior, "prior", "theta"), A / (A + B)) == pytest.approx(0, abs=Z_LIMIT)


# --------------------------------------------------------------------------------------------------
# 3. bounded DP, and the refusals
# --------------------------------------------------------------------------------------------------
def test_bounded_posterior_predictive_draws_records_and_their_release(bounded):
    model, trace = bounded
    pp = pmdp.sample_posterior_predictive(trace, model, var_names=["x", "s"], random_seed=31)
    x = flat(pp, "posterior_predictive", "x")
    s = flat(pp, "posterior_predictive", "s")
    assert x.shape == (1000, 40) and set(np.unique(x)) <= {0.0, 1.0}
    # s is the sum of the same records plus Laplace noise
    noise = s - x.sum(axis=1)
    b = S_MECHANISM.scale  # Laplace: E e^4 = 24 b^4, so e^2 has variance 20 b^4
    z = {
        "noise mean": z_of_mean(noise, 0.0, np.sqrt(S_NOISE_VAR)),
        "noise variance": z_of_mean(noise**2, S_NOISE_VAR, np.sqrt(20 * b**4)),
    }
    z |= release_z_scores(flat(trace, "posterior", "theta"), np.full(s.size, 40.0), s)
    assert_all_small(z)
    assert "x" not in group(pp, "observed_data")

    default = pmdp.sample_posterior_predictive(trace, model, random_seed=31)
    assert sorted(group(default, "posterior_predictive").data_vars) == ["s"]


def test_bounded_prior_predictive_may_draw_the_records():
    model = bernoulli_model(40, s_dp=15.3)
    prior = pmdp.sample_prior_predictive(300, model, var_names=["theta", "x", "s"], random_seed=32)
    x = flat(prior, "prior_predictive", "x")
    assert x.shape == (300, 40)
    default = pmdp.sample_prior_predictive(10, model, random_seed=32)
    assert sorted(group(default, "prior").data_vars) == ["theta"]
    assert sorted(group(default, "prior_predictive").data_vars) == ["s"]
    assert "x" not in group(default, "observed_data")


@pytest.mark.parametrize("var_names", [["x"], ["s", "x"], "x"])
def test_latent_n_records_are_refused_before_sampling(unbounded, monkeypatch, var_names):
    model, trace = unbounded
    refuse_to_sample(monkeypatch)
    with pytest.raises(ValueError, match=r"'x'.*latent SampleSize 'n'.*keep_records"):
        pmdp.sample_posterior_predictive(trace, model, var_names=var_names)
    with pytest.raises(ValueError, match=r"'x'.*latent SampleSize 'n'.*keep_records"):
        pmdp.sample_prior_predictive(10, model, var_names=var_names)


def test_the_refusal_names_the_first_latent_record_variable_asked_for(monkeypatch):
    """Two record variables of one latent table, asked for in the order y, x: the message names
    y, the first."""
    import pytensor.tensor as pt

    with pm.Model() as model:
        mu = pm.Normal("mu")
        n = pmdp.SampleSize("n", n_dp=30, mechanism=N_MECHANISM, prior=pm.Poisson.dist(30))
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=n)
        y = pmdp.Records("y", pm.Normal.dist(x, 1), n=n)
        pmdp.PrivatizedSum(
            "s", pt.stack([pt.clip(x, -1, 1), pt.clip(y, -1, 1)], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=2),
            observed=[3.1, 2.2],
        )  # fmt: skip
    refuse_to_sample(monkeypatch)
    with pytest.raises(ValueError, match=r"record variable 'y', whose"):
        pmdp.sample_prior_predictive(10, model, var_names=["s", "y", "x"])


def test_unknown_names_are_refused_before_sampling(unbounded, bounded, monkeypatch):
    refuse_to_sample(monkeypatch)
    for model, trace in (unbounded, bounded):
        with pytest.raises(ValueError, match=r"'s_rep', which is not a variable.*releases are"):
            pmdp.sample_posterior_predictive(trace, model, var_names=["s", "s_rep"])
        with pytest.raises(ValueError, match=r"'mu', which is not a variable"):
            pmdp.sample_prior_predictive(10, model, var_names=["mu"])
    with pytest.raises(TypeError, match="var_names"):
        pmdp.sample_posterior_predictive(trace, model, var_names=[1])


def test_a_trace_without_n_is_refused(unbounded, monkeypatch):
    model, trace = unbounded
    refuse_to_sample(monkeypatch)
    theta_only = group(trace, "posterior")[["theta"]]
    with pytest.raises(ValueError, match=r"no draws of the latent SampleSize 'n'.*'s'"):
        pmdp.sample_posterior_predictive(theta_only, model)


# --------------------------------------------------------------------------------------------------
# 4. return types: InferenceData on PyMC 5, DataTree on PyMC 6
# --------------------------------------------------------------------------------------------------
def test_returns_what_pymc_returns(unbounded, unbounded_predictive):
    model, trace = unbounded
    assert type(unbounded_predictive) is type(trace)
    assert has_group(unbounded_predictive, "posterior_predictive")
    draws = group(unbounded_predictive, "posterior_predictive")["s"]
    assert draws.dims == ("chain", "draw") and draws.shape == (2, 500)
    as_dict = pmdp.sample_posterior_predictive(
        trace, model, random_seed=41, return_inferencedata=False
    )
    assert sorted(as_dict) == ["n_dp", "s"]


def test_extend_inferencedata_adds_the_group_and_drops_records(unbounded):
    model, trace = unbounded
    extended = copy_of(trace)
    # as pm.sample (not pmdp.sample) leaves it: the imputed records in observed_data
    observed = group(extended, "observed_data")
    observed = observed.assign(x=("x_dim_0", np.ones(7, dtype="int64")))
    if isinstance(extended, xr.DataTree):
        extended["observed_data"] = xr.DataTree(observed)
    else:
        extended.observed_data = observed
    result = pmdp.sample_posterior_predictive(
        extended, model, extend_inferencedata=True, random_seed=42
    )
    assert result is extended
    assert has_group(extended, "posterior") and has_group(extended, "posterior_predictive")
    assert sorted(group(extended, "posterior_predictive").data_vars) == ["n_dp", "s"]
    assert sorted(group(extended, "observed_data").data_vars) == ["n_dp", "s"]
    assert "x_dim_0" not in group(extended, "observed_data").dims
    assert not has_group(trace, "posterior_predictive")  # the fixture is untouched


# --------------------------------------------------------------------------------------------------
# 5. the sums level: vector releases, their dims, the choice of level; defaults and a plain model
# --------------------------------------------------------------------------------------------------
CATEGORY_P = np.array([0.2, 0.3, 0.5])
CATEGORY_N = 40


def categorical_model(dims: bool) -> pm.Model:
    """Categorical records (3 categories), their one-hot counts released as one vector, with the
    release dim ``"category"`` declared or not."""
    import pytensor.tensor as pt

    with pm.Model(coords={"category": ["a", "b", "c"]} if dims else None) as model:
        p = pm.Dirichlet("p", np.ones(3))
        n = pmdp.SampleSize("n", n_dp=CATEGORY_N, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Categorical.dist(p), n=n)
        pmdp.PrivatizedSum(
            "s",
            pt.eq(x[:, None], pt.arange(3)[None, :]),
            S_MECHANISM,
            observed=np.array([8.2, 12.1, 19.6]),
            dims="category" if dims else None,
            check_sensitivity=False,  # one-hot rows: L1 sensitivity 1
        )
    return model


def fixed_posterior(chains: int = 2, draws: int = 1500):
    """A trace whose every draw is ``p = CATEGORY_P``, ``n = CATEGORY_N``."""

    posterior = {
        "p": np.broadcast_to(CATEGORY_P, (chains, draws, 3)).copy(),
        "n": np.full((chains, draws), CATEGORY_N, dtype=np.int64),
    }
    return trace_of({"posterior": posterior})


@pytest.mark.parametrize("dims", [True, False], ids=["declared dim", "no dim"])
@pytest.mark.parametrize("augment", ["auto", "sums", "records"])
def test_a_vector_release_is_drawn_with_its_law_and_dims_at_either_level(dims, augment):
    """Given p and n, the predictive one-hot counts are Multinomial(n, p) plus Laplace noise per
    coordinate: mean n p_k, variance n p_k (1 - p_k) + 2 b^2. ``"auto"`` and ``"sums"`` draw at the
    sums level, ``"records"`` through PyMC (the group's ``pmdp_augment`` says which); both keep the
    release's shape ``(chain, draw, 3)`` and its dim (declared, or PyMC's ``s_dim_0``).
    Power: 3,000 draws give a mean's z-score of 1 for an error of ~0.06 (sd ~3.3 / sqrt(3000)),
    and a variance off by 10% (a slip that drops the noise's 2 b^2 = 2 from ~6.8-11.2) is a z of
    ~5-8."""
    model = categorical_model(dims)
    predictive = pmdp.sample_posterior_predictive(
        fixed_posterior(), model, augment=augment, random_seed=5
    )
    drawn = group(predictive, "posterior_predictive")
    level = "records" if augment == "records" else "sums"
    assert drawn.attrs["pmdp_augment"] == level
    dim = "category" if dims else "s_dim_0"
    assert drawn["s"].dims == ("chain", "draw", dim) and drawn["s"].shape == (2, 1500, 3)
    assert group(predictive, "observed_data")["s"].dims == (dim,)
    s = np.asarray(drawn["s"].values, dtype=float)
    for k, p in enumerate(CATEGORY_P):
        expected_var = CATEGORY_N * p * (1 - p) + S_NOISE_VAR
        assert_mean_and_spread_match(s[..., k], CATEGORY_N * p, expected_var, f"s[{k}]")


def test_the_sums_level_refuses_what_it_cannot_draw_and_auto_falls_back(monkeypatch):
    """``augment="sums"`` with PyMC's options or a non-release refuses, naming both; ``"auto"``
    with the same falls back to PyMC's records level."""
    model = categorical_model(dims=False)
    trace = fixed_posterior(draws=20)
    with pytest.raises(ValueError, match="PyMC's"):
        pmdp.sample_posterior_predictive(
            trace, model, augment="sums", idata_kwargs={"log_likelihood": False}
        )
    with pytest.raises(ValueError, match="not releases"):
        pmdp.sample_posterior_predictive(trace, model, var_names=["s", "p"], augment="sums")
    fallback = pmdp.sample_posterior_predictive(
        trace, model, idata_kwargs={"log_likelihood": False}, random_seed=1
    )
    assert group(fallback, "posterior_predictive").attrs["pmdp_augment"] == "records"
    # as many chains as draws: the draws are flattened chain by chain and shaped back
    wide = pmdp.sample_posterior_predictive(
        fixed_posterior(chains=3, draws=3), model, random_seed=1
    )
    assert group(wide, "posterior_predictive")["s"].shape == (3, 3, 3)


def test_defaults_are_pymcs_own(monkeypatch):
    """No progress bar by default (as PyMC's samplers inside pmdp), 500 prior draws of the
    parameters and of the deterministics that do not read the records, keyword calls."""
    seen = {}
    original = pm.sample_posterior_predictive

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(pm, "sample_posterior_predictive", spy)
    model = bernoulli_model(40, s_dp=15.3)
    with model:
        pm.Deterministic("odds", model["theta"] / (1 - model["theta"]))  # a parameter's function
        pm.Deterministic("share", model["x"].mean())  # a function of the records: not drawn
    prior = pmdp.sample_prior_predictive(model=model, random_seed=3)
    assert group(prior, "prior")["theta"].shape == (1, 500)
    assert sorted(group(prior, "prior").data_vars) == ["odds", "theta"]
    pmdp.sample_posterior_predictive(trace=group(prior, "prior"), model=model, random_seed=4)
    assert seen["progressbar"] is False


def test_a_model_without_privacy_blocks_draws_as_pymc_does():
    """On a plain PyMC model the wrappers are PyMC's samplers: the same draws for the same seed."""
    with pm.Model() as plain:
        mu = pm.Normal("mu")
        pm.Deterministic("twice", 2 * mu)
        pm.Normal("y", mu, 1, observed=[0.3, -0.2])
    ours = pmdp.sample_prior_predictive(model=plain, random_seed=6)
    theirs = pm.sample_prior_predictive(500, model=plain, random_seed=6)
    for name, values in group(theirs, "prior").data_vars.items():
        np.testing.assert_array_equal(group(ours, "prior")[name].values, values.values)
    np.testing.assert_array_equal(
        group(ours, "prior_predictive")["y"].values, group(theirs, "prior_predictive")["y"].values
    )


# --------------------------------------------------------------------------------------------------
# 6. several tables, thinned traces, known beside latent n (a third hand audit, issue 32)
# --------------------------------------------------------------------------------------------------
def _two_tables(known_b: bool = False) -> pm.Model:
    """Two tables of Bernoulli records sharing theta: a latent n_a, and n_b latent or 30."""
    with pm.Model() as model:
        theta = pm.Beta("theta", A, B)
        for table in ("a", "b"):
            known = known_b and table == "b"
            n = 30 if known else pmdp.SampleSize(f"n_{table}", n_dp=30, mechanism=N_MECHANISM)
            x = pmdp.Records(f"x_{table}", pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{table}", x, S_MECHANISM, observed=10.3)
    return model


def _posterior(**values):
    return trace_of({"posterior": values})


def test_the_sums_level_draws_each_table_from_its_own_stream_and_keeps_the_draw_labels():
    """Two tables with one law and one n at every draw: their release draws differ; a thinned
    trace's draw labels (0, 2, 4, ...) are the predictive's."""
    rng = np.random.default_rng(3)
    trace = _posterior(
        theta=rng.uniform(0.2, 0.5, (2, 40)), n_a=np.full((2, 40), 30), n_b=np.full((2, 40), 30)
    ).isel(draw=slice(0, None, 2))
    drawn = pmdp.sample_posterior_predictive(trace, _two_tables(), augment="sums", random_seed=5)
    predictive = group(drawn, "posterior_predictive")
    assert not np.array_equal(predictive["s_a"].values, predictive["s_b"].values)
    np.testing.assert_array_equal(
        predictive["draw"].values, group(trace, "posterior")["draw"].values
    )
    assert predictive["draw"].values[:3].tolist() == [0, 2, 4]


def test_records_of_a_known_table_are_drawn_beside_a_latent_one():
    """Only a table whose n is latent refuses to draw its records; a known table's are drawn."""
    drawn = pmdp.sample_prior_predictive(7, _two_tables(known_b=True), var_names=["x_b"])
    assert group(drawn, "prior_predictive")["x_b"].shape[-1] == 30
    with pytest.raises(ValueError, match=r"'x_a'.*latent SampleSize 'n_a'"):
        pmdp.sample_prior_predictive(7, _two_tables(known_b=True), var_names=["x_a"])


def test_the_posterior_predictive_of_a_plain_model_is_pymcs():
    with pm.Model() as plain:
        mu = pm.Normal("mu")
        pm.Normal("y", mu, 1, observed=[0.3, -0.2])
    trace = _posterior(mu=np.random.default_rng(2).normal(size=(2, 20)))
    ours = pmdp.sample_posterior_predictive(trace, plain, random_seed=6)
    theirs = pm.sample_posterior_predictive(trace, plain, random_seed=6)
    np.testing.assert_array_equal(
        group(ours, "posterior_predictive")["y"].values,
        group(theirs, "posterior_predictive")["y"].values,
    )


def test_a_trace_without_n_is_refused_whatever_else_is_asked_for(unbounded, monkeypatch):
    """Among the variables asked for, one that needs n is enough for the refusal."""
    model, trace = unbounded
    refuse_to_sample(monkeypatch)
    theta_only = group(trace, "posterior")[["theta"]]
    with pytest.raises(ValueError, match=r"no draws of the latent SampleSize 'n'"):
        pmdp.sample_posterior_predictive(theta_only, model, var_names=["theta", "s"])


# --------------------------------------------------------------------------------------------------
# 7. what each setting reaches (a fourth hand audit, issue 32)
# --------------------------------------------------------------------------------------------------
def test_the_sums_level_draws_only_the_releases_asked_for():
    """``var_names=["s"]`` at the sums level: the group holds s alone (as at the records level),
    though the table's law draws n_dp too; ``["n_dp"]`` gives n_dp alone, whose noise is the
    count's (integers, here within a few scales of the fixed n = 40)."""
    model = bernoulli_model(None, n_dp=40, n_mechanism=N_MECHANISM)
    trace = _posterior(theta=np.full((2, 50), 0.3), n=np.full((2, 50), 40))
    for names in (["s"], ["n_dp"]):
        drawn = pmdp.sample_posterior_predictive(
            trace, model, var_names=names, augment="sums", random_seed=7
        )
        assert sorted(group(drawn, "posterior_predictive").data_vars) == names
        assert sorted(group(drawn, "observed_data").data_vars) == names
    n_dp = group(drawn, "posterior_predictive")["n_dp"].values
    assert n_dp.dtype.kind == "i" and np.all(np.abs(n_dp - 40) < 40 * N_MECHANISM.scale)


def test_the_sums_level_keeps_the_labels_of_a_release_dim():
    """The release dim ``"category"`` carries the model's labels ``a, b, c`` in the predictive
    draws and in ``observed_data``, as at PyMC's records level, so ``.sel(category="b")``
    works."""
    model = categorical_model(dims=True)
    trace = fixed_posterior(draws=20)
    for augment in ("sums", "records"):
        drawn = pmdp.sample_posterior_predictive(trace, model, augment=augment, random_seed=8)
        predictive, observed = group(drawn, "posterior_predictive"), group(drawn, "observed_data")
        assert predictive["category"].values.tolist() == ["a", "b", "c"], augment
        assert observed["category"].values.tolist() == ["a", "b", "c"], augment
        assert observed["s"].sel(category="b").item() == pytest.approx(12.1)
        assert predictive["s"].sel(category="c").shape == (2, 20)


def test_the_sums_level_leaves_out_the_dims_of_variables_not_drawn():
    """A model coordinate that no release uses (``"group"``, of a parameter) is not a dim of the
    predictive group, as at PyMC's records level: the group's dims are the releases'."""
    import pytensor.tensor as pt

    with pm.Model(coords={"category": ["a", "b", "c"], "group": ["g1", "g2"]}) as model:
        p = pm.Dirichlet("p", np.ones(3))
        pm.Normal("g", dims="group")
        n = pmdp.SampleSize("n", n_dp=CATEGORY_N, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Categorical.dist(p), n=n)
        pmdp.PrivatizedSum(
            "s", pt.eq(x[:, None], pt.arange(3)[None, :]), S_MECHANISM,
            observed=np.array([8.2, 12.1, 19.6]), dims="category", check_sensitivity=False,
        )  # fmt: skip
    values = {
        "p": np.broadcast_to(CATEGORY_P, (2, 5, 3)).copy(),
        "n": np.full((2, 5), CATEGORY_N),
        "g": np.zeros((2, 5, 2)),
    }
    trace = trace_of({"posterior": values}, coords={"group": ["g1", "g2"]}, dims={"g": ["group"]})
    for augment in ("sums", "records"):
        drawn = pmdp.sample_posterior_predictive(trace, model, augment=augment, random_seed=9)
        predictive = group(drawn, "posterior_predictive")
        assert set(predictive.dims) == {"chain", "draw", "category"}, augment
        assert "group" not in predictive.coords, augment
