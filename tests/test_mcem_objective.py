"""MCEM's complete-data log-likelihood (``pmdp.mcem.objective``) against closed forms.

The objective of ``M`` stacked imputed sets is
``Q(theta) = (1/M) [sum_i log f(x_i | theta) + sum_m log g(n_m | theta)] (+ log pi(theta))``;
here it is written independently with scipy for a model with a vector location, a log-transformed
scale and a Poisson prior on ``n``, and compared value by value, with its gradient and Hessian
(on both scales), its chunked evaluation and its conversions between scales. Fast (one model
compiled per module), so that mutants of the objective are caught without an MCEM run.
"""

from __future__ import annotations

import functools

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.mcem import objective as objective_module
from pymc_unbounded_dp.mcem.objective import Layout, Sets, average, complete_data_loglik

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")

N_VALUES = np.array([3, 5, 4])
RNG = np.random.default_rng(7)
X = RNG.normal(1.0, 2.0, size=N_VALUES.sum())
Z = RNG.normal(size=N_VALUES.sum())
#: natural-scale parameters in the layout's order: mu (2), sigma, lam
NATURAL = np.array([0.7, -0.4, 1.8, 6.5])


@pytest.fixture(scope="module")
def model():
    """``x ~ N(mu[0], sigma)``, ``z ~ N(mu[1] x, 1)``, ``n ~ Poisson(lam)``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 3.0, shape=2)
        sigma = pm.HalfNormal("sigma", 2.0)
        lam = pm.Gamma("lam", 2.0, 0.5)
        n = pmdp.SampleSize(
            "n", n_dp=5, mechanism=pmdp.DiscreteLaplace(epsilon=1.0), prior=pm.Poisson.dist(lam)
        )
        x = pmdp.Records("x", pm.Normal.dist(mu[0], sigma), n=n)
        z = pmdp.Records("z", pm.Normal.dist(mu[1] * x, 1.0), n=n)
        pmdp.PrivatizedSum("s", pm.math.stack([x, z], axis=1), pmdp.Laplace(scale=3.0), [4.0, 1.0])
    return model


@pytest.fixture(scope="module")
def mle_objective(model):
    return complete_data_loglik(compile_model(model), include_prior=False)


@pytest.fixture(scope="module")
def map_objective(mle_objective):
    return complete_data_loglik(mle_objective.compiled, include_prior=True)


@functools.cache
def _log_prior():
    """The priors' log densities, PyMC's own (scipy's differ from them by ~1e-8 in constants)."""
    mu, sigma, lam = pt.dvector("mu"), pt.dscalar("sigma"), pt.dscalar("lam")
    total = (
        pm.logp(pm.Normal.dist(0.0, 3.0, shape=2), mu).sum()
        + pm.logp(pm.HalfNormal.dist(2.0), sigma)
        + pm.logp(pm.Gamma.dist(2.0, 0.5), lam)
    )
    function = pytensor.function([mu, sigma, lam], total)
    return lambda *values: float(function(*values))


def exact_q(natural, include_prior=False, n_values=N_VALUES, x=X, z=Z):
    mu0, mu1, sigma, lam = natural
    records = stats.norm.logpdf(x, mu0, sigma).sum() + stats.norm.logpdf(z, mu1 * x, 1.0).sum()
    q = (records + stats.poisson.logpmf(n_values, lam).sum()) / n_values.size
    if include_prior:
        q += _log_prior()(np.array([mu0, mu1]), sigma, lam)
    return q


def unconstrained(natural):
    return np.array([natural[0], natural[1], np.log(natural[2]), np.log(natural[3])])


def evaluate(objective, scale, flat, n_values=N_VALUES, x=X, z=Z):
    fns = objective.scale(scale)
    value, gradient = fns.value_and_grad(flat, n_values, x, z)
    (hessian,) = fns.hessian(flat, n_values, x, z)
    return float(value), np.asarray(gradient), np.asarray(hessian)


def finite_differences(function, flat, h=1e-5):
    """Central differences of a scalar or vector function of a flat vector."""
    columns = []
    for j in range(flat.size):
        e = np.zeros(flat.size)
        e[j] = h
        columns.append((np.asarray(function(flat + e)) - np.asarray(function(flat - e))) / (2 * h))
    return np.stack(columns, axis=-1)


def test_layout_and_conversions(mle_objective):
    """The value variables (mu, log sigma, log lam) and the parameters, in the model's order."""
    assert mle_objective.unconstrained.names == ("mu", "sigma_log__", "lam_log__")
    assert mle_objective.natural.names == ("mu", "sigma", "lam")
    assert mle_objective.unconstrained.bounds == ((0, 2), (2, 3), (3, 4))
    assert mle_objective.unconstrained.shapes == ((2,), (), ())
    np.testing.assert_array_equal(mle_objective.transformed, [False, False, True, True])
    u = unconstrained(NATURAL)
    np.testing.assert_allclose(mle_objective.to_natural(u), NATURAL, rtol=1e-14)
    np.testing.assert_allclose(mle_objective.to_unconstrained(NATURAL), u, rtol=1e-14)
    point = mle_objective.point(u, 9)
    np.testing.assert_allclose(point["mu"], NATURAL[:2], rtol=1e-15)
    np.testing.assert_allclose(point["sigma_log__"], u[2], rtol=1e-15)
    assert int(point["n"]) == 9
    assert mle_objective.prior_of_n_depends_on_parameters


def test_layout_splits_and_joins_by_name():
    layout = Layout.of(["a", "b", "c"], [(2, 3), (), (4,)])
    assert layout.size == 11 and layout.bounds == ((0, 6), (6, 7), (7, 11))
    flat = np.arange(11.0)
    parts = layout.split(flat)
    np.testing.assert_array_equal(parts["a"], flat[:6].reshape(2, 3))
    assert parts["b"].shape == () and float(parts["b"]) == 6.0
    np.testing.assert_array_equal(layout.join(parts), flat)
    assert Layout.of([], []).size == 0 and Layout.of([], []).join({}).size == 0


def natural_of(scale, flat):
    """The natural-scale parameters of a flat vector on ``scale`` (sigma and lam log-transformed)."""
    if scale == "natural":
        return flat
    return np.array([flat[0], flat[1], np.exp(flat[2]), np.exp(flat[3])])


@pytest.mark.parametrize("scale", ["natural", "unconstrained"])
@pytest.mark.parametrize("include_prior", [False, True], ids=["mle", "map"])
def test_the_objective_is_the_average_complete_data_loglik(
    mle_objective, map_objective, include_prior, scale
):
    """Value on both scales (no Jacobian on either), gradient and Hessian by finite differences
    of the exact value and of the gradient."""
    objective = map_objective if include_prior else mle_objective
    flat = NATURAL if scale == "natural" else unconstrained(NATURAL)
    value, gradient, hessian = evaluate(objective, scale, flat)
    np.testing.assert_allclose(value, exact_q(NATURAL, include_prior), rtol=1e-12)
    exact_gradient = finite_differences(
        lambda v: exact_q(natural_of(scale, v), include_prior), flat
    )
    np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-6, atol=1e-8)
    exact_hessian = finite_differences(lambda v: evaluate(objective, scale, v)[1], flat, h=1e-6)
    np.testing.assert_allclose(hessian, exact_hessian, rtol=1e-5, atol=1e-6)


def test_one_set_and_a_prior_of_n_that_depends_on_no_parameter(mle_objective):
    """``M = 1``: no division; the Poisson term is that of the one ``n``."""
    value, _, _ = evaluate(mle_objective, "natural", NATURAL, N_VALUES[:1], X[:3], Z[:3])
    np.testing.assert_allclose(
        value, exact_q(NATURAL, n_values=N_VALUES[:1], x=X[:3], z=Z[:3]), rtol=1e-12
    )
    with pm.Model() as fixed_prior:
        mu = pm.Normal("mu", 0.0, 3.0)
        n = pmdp.SampleSize(
            "n", n_dp=5, mechanism=pmdp.DiscreteLaplace(epsilon=1.0), prior=pm.Poisson.dist(6.0)
        )
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=3.0), 4.0)
    objective = complete_data_loglik(compile_model(fixed_prior), include_prior=False)
    assert not objective.prior_of_n_depends_on_parameters
    fns = objective.scale("natural")
    value, _ = fns.value_and_grad(np.array([0.7]), N_VALUES, X)
    np.testing.assert_allclose(
        value, stats.norm.logpdf(X, 0.7, 1.0).sum() / N_VALUES.size, rtol=1e-12
    )


def test_vector_records_under_unbounded_dp():
    """Records with a coordinate axis (``MvNormal``) under unbounded DP: the objective of the
    stacked sets (12 rows of 2 coordinates) is scipy's."""
    cov = np.array([[1.0, 0.3], [0.3, 0.5]])
    with pm.Model() as vector_model:
        mu = pm.Normal("mu", 0.0, 3.0, shape=2)
        n = pmdp.SampleSize("n", n_dp=5, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.MvNormal.dist(mu, cov=cov), n=n)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -3, 3), pmdp.Laplace(scale=3.0, sensitivity=6.0), [4.0, 1.0]
        )
    objective = complete_data_loglik(compile_model(vector_model), include_prior=False)
    records = np.column_stack([X, Z])  # 12 rows of 2 coordinates, in 3 sets
    value, _ = objective.scale("natural").value_and_grad(NATURAL[:2], N_VALUES, records)
    exact = stats.multivariate_normal(NATURAL[:2], cov).logpdf(records).sum() / N_VALUES.size
    np.testing.assert_allclose(value, exact, rtol=1e-12)


def test_a_transform_that_reads_another_parameter_sees_its_natural_value():
    """``w ~ Uniform(lo + 1, lo + 4)``: on the natural scale the interval transform of ``w`` is built
    from the natural value of ``lo`` (not from a random draw of ``lo``)."""
    with pm.Model() as bounds_model:
        lo = pm.Normal("lo", 0.0, 1.0)
        w = pm.Uniform("w", lower=lo + 1.0, upper=lo + 4.0)
        n = pmdp.SampleSize("n", n_dp=5, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Normal.dist(lo, w), n=n)
        pmdp.PrivatizedSum("s", pt.clip(x, -3, 3), pmdp.Laplace(scale=6.0, sensitivity=3.0), 4.0)
    objective = complete_data_loglik(compile_model(bounds_model), include_prior=False)
    fns = objective.scale("natural")
    for natural in ([0.3, 2.5], [-0.8, 0.9]):
        value, gradient = fns.value_and_grad(np.array(natural), N_VALUES, X)
        exact = lambda v: stats.norm.logpdf(X, v[0], v[1]).sum() / N_VALUES.size  # noqa: E731
        np.testing.assert_allclose(value, exact(natural), rtol=1e-12)
        np.testing.assert_allclose(
            gradient, finite_differences(exact, np.array(natural)), rtol=1e-6, atol=1e-8
        )


def test_sets_each_and_chunks_keep_whole_sets():
    n_values = np.array([3, 5, 4, 2])
    rows = np.arange(n_values.sum())
    sets = Sets([rows, -rows], n_values)
    each = list(sets.each())
    assert [s.n_values.tolist() for s in each] == [[3], [5], [4], [2]]
    np.testing.assert_array_equal(each[2].records[0], [8, 9, 10, 11])
    np.testing.assert_array_equal(each[2].records[1], [-8, -9, -10, -11])
    for max_rows, groups in (
        (8, [[3, 5], [4, 2]]),
        (7, [[3], [5], [4, 2]]),
        (2, [[3], [5], [4], [2]]),
    ):
        chunks = list(sets.chunks(max_rows))
        assert [c.n_values.tolist() for c in chunks] == groups
        np.testing.assert_array_equal(np.concatenate([c.records[0] for c in chunks]), rows)


@pytest.mark.parametrize("chunk_rows", [1, 5, 8, 12, 10_000])
def test_average_over_chunks_is_the_average_over_sets(mle_objective, monkeypatch, chunk_rows):
    monkeypatch.setattr(objective_module, "CHUNK_ROWS", chunk_rows)
    fns = mle_objective.scale("natural")
    value, gradient = average(fns.value_and_grad, NATURAL, Sets([X, Z], N_VALUES))
    np.testing.assert_allclose(value, exact_q(NATURAL), rtol=1e-12)
    _, exact_gradient, _ = evaluate(mle_objective, "natural", NATURAL)
    np.testing.assert_allclose(gradient, exact_gradient, rtol=1e-12)


def test_records_that_depend_on_no_parameter_beside_ones_that_do_are_estimated():
    """``w ~ N(0, 2)`` released beside ``x ~ N(mu, 1)``: one record that depends on a parameter is
    enough for an estimate (``w``'s density is a constant of the objective); with no parameter
    among the records' inputs there is nothing to estimate. The check of
    :func:`complete_data_loglik` on the model's blocks (no compilation)."""
    from types import SimpleNamespace

    from pymc_unbounded_dp._registry import model_blocks
    from pymc_unbounded_dp.mcem.objective import check_parameters

    with pm.Model() as mixed:
        mu = pm.Normal("mu", 0.0, 3.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=4)
        w = pmdp.Records("w", pm.Normal.dist(0.0, 2.0), n=4)
        pmdp.PrivatizedSum("s", pm.math.stack([x, w], axis=1), pmdp.Laplace(scale=3.0), [4.0, 1.0])
    blocks = model_blocks(mixed)
    assert [r.rv.name for r in blocks.records] == ["x", "w"]
    check_parameters(SimpleNamespace(blocks=blocks), [mu])  # no error
    with pytest.raises(ValueError, match="does not depend on any model parameter"):
        check_parameters(SimpleNamespace(blocks=blocks), [pm.Normal.dist(0.0, 1.0)])


def test_a_new_run_starts_at_the_models_initial_point_after_the_objective_was_used(
    model, mle_objective
):
    """The kernels' points at other parameters (each E-step's) do not move the start of the next
    run on the same model."""
    from pymc_unbounded_dp.mcem.options import validated_options
    from pymc_unbounded_dp.mcem.start import start

    initial = mle_objective.unconstrained.join(model.initial_point())
    point = mle_objective.point(unconstrained(NATURAL), 9)
    np.testing.assert_allclose(point["sigma_log__"], np.log(NATURAL[2]), rtol=1e-15)
    options = validated_options(
        initial_samples=10, growth=1.25, min_samples=100, max_samples=5000, max_iterations=60,
        tol=0.05, patience=3, thin=1, tune=0, n_moves=None, switch_rate=0.9, replicates=100,
        batches=4, max_replicates=3200,
    )  # fmt: skip
    begun = start(mle_objective, options, np.random.default_rng(0), None)
    np.testing.assert_allclose(begun.unconstrained, initial, rtol=1e-15)
    assert np.all(np.abs(begun.unconstrained - unconstrained(NATURAL)) > 0.1)


@pytest.mark.parametrize("include_prior", [False, True], ids=["mle", "map"])
def test_public_data_enter_the_objective_once_for_mle_and_map(include_prior):
    """``y ~ N(mu, 2)`` observed at ``[1, 2.5]`` beside the records: its log density is part of
    the likelihood, added once (not averaged over the 2 imputed sets), and for MAP the prior
    ``N(0, 3)`` joins it. Value and gradient against scipy (PyMC's constants differ by ~1e-9)."""
    with pm.Model() as public:
        mu = pm.Normal("mu", 0.0, 3.0)
        pm.Normal("y", mu, 2.0, observed=[1.0, 2.5])
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=4)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=3.0), 4.0)
    objective = complete_data_loglik(compile_model(public), include_prior)
    records, n_values = X[:8], np.array([4, 4])

    def exact(v):
        q = stats.norm.logpdf(records, v[0], 1.0).sum() / 2
        q += stats.norm.logpdf([1.0, 2.5], v[0], 2.0).sum()
        return q + (stats.norm.logpdf(v[0], 0.0, 3.0) if include_prior else 0.0)

    for mu_value in (0.4, -1.3):
        flat = np.array([mu_value])
        value, gradient = objective.scale("natural").value_and_grad(flat, n_values, records)
        np.testing.assert_allclose(value, exact(flat), rtol=1e-8)
        np.testing.assert_allclose(gradient, finite_differences(exact, flat), rtol=1e-6)
