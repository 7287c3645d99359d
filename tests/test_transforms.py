"""PyMC's model transforms and drawings on a pmdp model with a latent ``n``, and short refusals.

``pm.do``, ``pm.observe``, ``clone_model`` and ``freeze_dims_and_data`` rebuild a model from a copy
of its graph; the copy keeps the privacy blocks (remapped by name) and ``n``'s start (carried by
its op, not by a registered initial value, which those transforms refuse). The intervened model is
checked against the exact posterior of ``n`` with ``theta`` fixed, by enumeration. Every refusal of
an evaluation on frozen records is a few lines, without PyTensor's node dump.
"""

import warnings

import numpy as np
import pymc as pm
import pytest
from mcmc_checks import assert_centred_variance_matches, assert_mean_matches, draws_of
from oracles import bernoulli_posterior
from pymc.model.fgraph import clone_model
from pymc.model.transform.optimization import freeze_dims_and_data
from pytensor.tensor.variable import TensorConstant
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import model_blocks

S_DP, N_DP = 9.3, 20
MECHANISM = pmdp.Laplace(epsilon=1.0)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)
SAMPLE = dict(draws=1000, tune=300, chains=2, cores=1, progressbar=False)
# PyMC 6 draws with numba and runs a CustomDist's Python draws (the flat prior's) in object mode
OBJECT_MODE = pytest.mark.filterwarnings("ignore:Numba will use object mode:UserWarning")
#: The longest refusal accepted (the message with its way out, and nothing else).
SHORT = 600


def _model(prior=None) -> pm.Model:
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 2.0)
        pm.Normal("phi", 0.0, 1.0)  # a parameter the records do not depend on
        n = pmdp.SampleSize(
            "n", n_dp=pm.Data("n_released", N_DP), mechanism=N_MECHANISM, prior=prior
        )
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, MECHANISM, observed=pm.Data("s_released", S_DP))
    return model


@pytest.fixture(scope="module")
def model() -> pm.Model:
    return _model()


def _n_posterior_at(theta: float, n_max: int = 120) -> dict:
    """Exact posterior of ``n`` (flat prior) given ``theta``: sum over ``k = sum x`` of
    ``DL(n_dp - n) Binomial(k; n, theta) Laplace(s_dp - k)``."""
    ns, ks = np.arange(n_max + 1), np.arange(n_max + 1)
    N, K = np.meshgrid(ns, ks, indexing="ij")
    with np.errstate(divide="ignore"):
        log_w = (
            N_MECHANISM.logpdf(N_DP - N)
            + stats.binom.logpmf(K, N, theta)
            + MECHANISM.logpdf(S_DP - K)
        )
    pmf = np.exp(log_w - log_w.max()).sum(axis=1)
    pmf /= pmf.sum()
    mean = float(np.sum(pmf * ns))
    return {"mean": mean, "var": float(np.sum(pmf * (ns - mean) ** 2)), "pmf": pmf}


def test_n_starts_at_n_dp_without_a_registered_initial_value(model):
    assert all(value is None for value in model.rvs_to_initial_values.values())
    assert int(model.initial_point()["n"]) == N_DP
    poisson = _model(prior=pm.Poisson.dist(60))  # the start is the support's closest to n_dp
    assert int(poisson.initial_point()["n"]) == N_DP
    assert int(clone_model(poisson).initial_point()["n"]) == N_DP


def test_an_intervened_model_samples_the_exact_posterior_of_n(model):
    derived = pm.do(model, {"theta": 0.3})
    assert "theta" not in [rv.name for rv in derived.free_RVs]
    idata = pmdp.sample(model=derived, random_seed=11, **SAMPLE)
    exact = _n_posterior_at(0.3)
    n = draws_of(idata, "n")
    assert_mean_matches(n, exact["mean"], "n under pm.do")
    assert_centred_variance_matches(n, exact["mean"], exact["var"], "n under pm.do")
    # the derived model's blocks are its own variables; the source model's are untouched
    assert model_blocks(derived).records[0].rv is derived["x"]
    assert model_blocks(model).records[0].rv is model["x"]


def test_an_observed_parameter_beside_the_records_keeps_their_exact_posterior(model):
    derived = pm.observe(model, {"phi": 0.2})
    assert "phi" in [rv.name for rv in derived.observed_RVs]
    idata = pmdp.sample(model=derived, random_seed=12, **SAMPLE)
    exact = bernoulli_posterior(
        S_DP, MECHANISM, 2.0, 2.0, n_dp=N_DP, n_mechanism=N_MECHANISM, n_max=120
    )
    for name in ("theta", "n"):
        draws = draws_of(idata, name)
        assert_mean_matches(draws, exact[f"{name}_mean"], f"{name} under pm.observe")
        assert_centred_variance_matches(
            draws, exact[f"{name}_mean"], exact[f"{name}_var"], f"{name} under pm.observe"
        )


def test_observing_a_parameter_of_the_records_is_refused_with_pm_do(model):
    derived = pm.observe(model, {"theta": 0.6})
    with pytest.raises(ValueError, match=r"pm.observe on 'theta'.*pm.do\(model, \{'theta': value"):
        pmdp.sample(model=derived, draws=5, tune=5, chains=1, progressbar=False)


def test_a_cloned_model_gives_the_same_draws_as_its_source(model):
    quick = dict(draws=50, tune=50, chains=1, progressbar=False, compute_convergence_checks=False)
    source = pmdp.sample(model=model, random_seed=5, **quick)
    clone = pmdp.sample(model=clone_model(model), random_seed=5, **quick)
    for name in ("theta", "n"):
        np.testing.assert_array_equal(draws_of(source, name), draws_of(clone, name))


def test_a_cloned_model_with_a_clamped_statistic_gives_the_same_draws_as_its_source():
    """A statistic that is a graph of the records (a clamp), not the records themselves, is
    rebuilt on the clone's variables (it once failed there: "not a part of graph")."""
    import pytensor.tensor as pt

    with pm.Model() as clamped:
        mu = pm.Normal("mu", 0, 2)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=15)
        pmdp.PrivatizedSum("s", pt.clip(x, -2, 2), pmdp.Laplace(epsilon=1.0, sensitivity=2), 4.2)
    quick = dict(draws=30, tune=30, chains=1, progressbar=False, compute_convergence_checks=False)
    source = pmdp.sample(model=clamped, random_seed=6, **quick)
    clone = pmdp.sample(model=clone_model(clamped), random_seed=6, **quick)
    np.testing.assert_array_equal(draws_of(source, "mu"), draws_of(clone, "mu"))


def test_a_frozen_model_samples_with_its_data_as_constants(model):
    frozen = freeze_dims_and_data(model)
    assert all(isinstance(v, TensorConstant) for v in frozen.data_vars)
    quick = dict(draws=20, tune=20, chains=1, progressbar=False, compute_convergence_checks=False)
    idata = pmdp.sample(model=frozen, random_seed=5, **quick)
    assert np.all(draws_of(idata, "n") >= 0)


@pytest.mark.parametrize(
    ("transform", "name"),
    [("do", "n"), ("observe", "n"), ("do", "x")],
)
def test_a_transform_of_the_latent_n_or_records_is_refused_by_name(model, transform, name):
    value = np.array(N_DP) if name == "n" else np.zeros(N_DP, dtype="int64")
    derived = getattr(pm, transform)(model, {name: value})
    with pytest.raises(ValueError, match=rf"changed the .* {name!r}.*n=<int>") as error:
        pmdp.sample(model=derived, draws=5, tune=5, chains=1, progressbar=False)
    assert len(str(error.value)) < SHORT


@OBJECT_MODE
@pytest.mark.parametrize("prior", [None, pm.Poisson.dist(60)], ids=["flat", "poisson"])
def test_the_model_graph_draws_the_record_plate_at_n_start(prior):
    model = _model(prior)
    graph = pm.model_to_graphviz(model)
    assert "n -> x" in graph.source
    assert f"label={N_DP} " in graph.source  # the plate: n's start, not a draw from the prior
    assert ("n", "x") in pm.model_to_networkx(model).edges
    with pytest.raises(pmdp.ImproperPriorError if prior is None else AssertionError):
        # elsewhere n's prior draws are the prior's own (none for the flat prior)
        assert pm.draw(model["n"], random_seed=3) == N_DP


def _refusals(model: pm.Model) -> dict:
    quick = dict(draws=5, tune=5, chains=1, progressbar=False, compute_convergence_checks=False)
    return {
        "compile_logp": lambda: model.compile_logp()(model.initial_point()),
        "find_MAP": lambda: pm.find_MAP(model=model, progressbar=False),
        "NUTS outside": lambda: pm.sample(
            step=pm.NUTS([model["theta"]], model=model), model=model, **quick
        ),
        "compute_log_likelihood": lambda: pm.compute_log_likelihood(
            pmdp.sample(model=model, random_seed=1, **quick), model=model, progressbar=False
        ),
    }


@pytest.mark.parametrize(
    "entry", ["compile_logp", "find_MAP", "NUTS outside", "compute_log_likelihood"]
)
def test_refusals_are_short_and_name_the_way_out(model, entry):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # PyMC 6 announces a new find_MAP return
        with pytest.raises(pmdp.FrozenRecordsError, match=r"records frozen.*pmdp\.sample") as err:
            _refusals(model)[entry]()
    message = str(err.value)
    assert len(message) < SHORT, message
    assert "Apply node" not in message and "HINT" not in message


@OBJECT_MODE
def test_a_prior_draw_of_the_flat_prior_is_refused_in_a_few_lines(model):
    with pytest.raises(
        pmdp.ImproperPriorError, match=r"SampleSize\('n'\).*prior=pm\.Poisson"
    ) as err:
        pm.sample_prior_predictive(draws=5, model=model)
    assert len(str(err.value)) < SHORT and "Apply node" not in str(err.value)


def test_records_drawn_from_an_observed_variable_are_refused_at_build_time():
    with pm.Model():
        z = pm.Beta("z", 2.0, 2.0, observed=0.6)
        with pytest.raises(ValueError, match=r"Records\('x'\): `dist` depends on 'z', an observed"):
            pmdp.Records("x", pm.Bernoulli.dist(z), n=20)


def test_variational_fit_of_a_bounded_model_is_refused_in_a_few_lines():
    with pm.Model() as bounded:
        theta = pm.Beta("theta", 2.0, 2.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=20)
        pmdp.PrivatizedSum("s", x, MECHANISM, observed=S_DP)
    with pytest.raises(pmdp.FrozenRecordsError, match="records frozen") as err:
        pm.fit(n=10, model=bounded, progressbar=False)
    assert len(str(err.value)) < SHORT and "Apply node" not in str(err.value)
