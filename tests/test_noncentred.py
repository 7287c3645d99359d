"""Non-centred forms: which form each record distribution gets, exact round trips
``g(theta, h(x, theta)) = x``, the law of the ancillaries, and the non-centred target's value.

These drive :mod:`pymc_unbounded_dp.noncentred` through the compiled functions that the
``Interweave`` step uses.
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import special, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._registry import records_in_containers
from pymc_unbounded_dp.noncentred import (
    _DISCRETE_CDFS,
    _DiscreteQuantile,
    _has,
    _is_discrete,
    describe_forms,
    discrete_quantile,
)

ROWS = 4000  # records drawn to check the law of the ancillaries


def one_table(record_dist, n=ROWS, statistic=lambda x: x, observed=0.0):
    """A model with parameters ``a > 0`` and ``b > 0`` and one record variable from ``record_dist``."""
    with pm.Model() as model:
        a = pm.Gamma("a", 4.0, 2.0)
        b = pm.Gamma("b", 4.0, 2.0)
        x = pmdp.Records("x", record_dist(a, b), n=n)
        # The noise is given by its scale and the families' statistics have all sorts of ranges:
        # these tests are about the records' non-centred forms, not about a privacy guarantee.
        pmdp.PrivatizedSum(
            "s", statistic(x), pmdp.Laplace(scale=50.0), observed=observed, check_sensitivity=False
        )
    return model


FAMILIES = {
    # name: (record distribution of (a, b), expected form, law of u: "uniform" or a scipy dist)
    "normal": (lambda a, b: pm.Normal.dist(a, b), "location-scale", stats.norm()),
    "student-t": (lambda a, b: pm.StudentT.dist(nu=5, mu=a, sigma=b), "location-scale", stats.t(5)),
    "laplace": (lambda a, b: pm.Laplace.dist(a, b), "location-scale", stats.laplace()),
    "logistic": (lambda a, b: pm.Logistic.dist(a, b), "location-scale", stats.logistic()),
    "gumbel": (lambda a, b: pm.Gumbel.dist(a, b), "location-scale", stats.gumbel_r()),
    "cauchy": (lambda a, b: pm.Cauchy.dist(a, b), "location-scale", stats.cauchy()),
    "half-normal": (lambda a, b: pm.HalfNormal.dist(b), "location-scale", stats.halfnorm()),
    "half-cauchy": (lambda a, b: pm.HalfCauchy.dist(b), "location-scale", stats.halfcauchy()),
    "weibull": (
        lambda a, b: pm.Weibull.dist(alpha=2.0, beta=b),
        "location-scale",
        stats.weibull_min(2.0),
    ),
    "exponential": (lambda a, b: pm.Exponential.dist(b), "location-scale", stats.expon()),
    "gamma-rate": (lambda a, b: pm.Gamma.dist(3.0, b), "location-scale", stats.gamma(3.0)),
    "lognormal": (lambda a, b: pm.LogNormal.dist(a, b), "location-scale", stats.norm()),
    "uniform": (lambda a, b: pm.Uniform.dist(-a, b), "location-scale", stats.uniform()),
    "gamma-shape": (lambda a, b: pm.Gamma.dist(a, b), "inverse-cdf", "uniform"),
    "beta": (lambda a, b: pm.Beta.dist(a, b), "inverse-cdf", "uniform"),
    "bernoulli": (lambda a, b: pm.Bernoulli.dist(a / (a + b)), "randomized-pit", "uniform"),
    "poisson": (lambda a, b: pm.Poisson.dist(a * b), "randomized-pit", "uniform"),
    "binomial": (lambda a, b: pm.Binomial.dist(7, a / (a + b)), "randomized-pit", "uniform"),
    "negative-binomial": (
        lambda a, b: pm.NegativeBinomial.dist(mu=a, alpha=b),
        "randomized-pit",
        "uniform",
    ),
    "geometric": (lambda a, b: pm.Geometric.dist(a / (a + b)), "randomized-pit", "uniform"),
    "dirichlet": (lambda a, b: pm.Dirichlet.dist(pt.stack([a, b, 1.5])), "gammas", "uniform"),
    # two compositions per record: one total S per simplex, not per record
    "dirichlet-batched": (
        lambda a, b: pm.Dirichlet.dist(pt.stack([pt.stack([a, b, 1.5]), pt.stack([b, 2.0, a])])),
        "gammas",
        "uniform",
    ),
}
SIMPLEX_SHAPES = {"dirichlet": (3,), "dirichlet-batched": (2, 3)}  # a record of a Dirichlet family


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request):
    dist, kind, law = FAMILIES[request.param]
    statistic = (lambda x: pt.log(pt.maximum(x, 1e-3))) if kind == "gammas" else (lambda x: x)
    observed = np.zeros(SIMPLEX_SHAPES[request.param]) if kind == "gammas" else 0.0
    model = one_table(dist, statistic=statistic, observed=observed)
    step = pmdp.Interweave(model=model)
    return request.param, model, step, kind, law


def at_point(model, step, a=1.7, b=0.8):
    """A point with ``a`` and ``b`` set, and ``ROWS`` records drawn from the model there."""
    point = model.initial_point()
    point["a_log__"] = np.array(np.log(a))
    point["b_log__"] = np.array(np.log(b))
    compiled = step.compiled.tables[0]
    compiled.reseed(11)
    records, _ = compiled.propose(point, ROWS)
    compiled.set_records(records)
    return point, records


def test_each_family_gets_its_form(family):
    _, model, step, kind, _ = family
    assert step.method == "noncentred"
    assert describe_forms(model, compile_model(model).blocks) == {"x": kind}


def test_records_round_trip_exactly(family):
    """``g(theta, h(x, theta))`` gives the records back (also for the randomized PIT's random u)."""
    _, model, step, _, _ = family
    point, records = at_point(model, step)
    nc = step.noncentred
    u = nc.ancillary(nc.values(point), np.random.default_rng(1))
    (back,) = nc.records(nc.values(point), u)
    if np.issubdtype(records[0].dtype, np.integer):
        np.testing.assert_array_equal(back, records[0])
    else:
        np.testing.assert_allclose(back, records[0], rtol=1e-7, atol=1e-9)


def test_ancillaries_have_their_law(family):
    """Records drawn at theta give ancillaries with a law free of theta (KS test, 4,000 rows)."""
    name, model, step, _, law = family
    point, _ = at_point(model, step)
    nc = step.noncentred
    (u,) = nc.ancillary(nc.values(point), np.random.default_rng(2))
    if name == "lognormal":
        law = stats.norm()
    reference = stats.uniform() if law == "uniform" else law
    p_value = stats.kstest(np.ravel(u), reference.cdf).pvalue
    assert p_value > 1e-4, f"{name}: KS p = {p_value:.2g}"


def test_log_target_is_prior_plus_release_at_the_current_records(family):
    """At the current theta, the non-centred target equals PyMC's log prior (with Jacobians) plus
    the release's log density of the current records: the map adds no Jacobian."""
    _, model, step, _, _ = family
    point, _ = at_point(model, step)
    nc = step.noncentred
    values = nc.values(point)
    u = nc.ancillary(values, np.random.default_rng(3))
    with records_in_containers(model):  # at_point put the records there
        expected = model.compile_logp(vars=[*model.free_RVs, model["s"]], jacobian=True)(point)
    assert nc.log_target(values, u) == pytest.approx(float(expected), rel=1e-9, abs=1e-6)


def row_wise_model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        beta = pm.Normal("beta", 0, 1)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=6)
        y = pmdp.Records("y", pm.Normal.dist(beta * x, 0.5), n=6)
        pmdp.PrivatizedSum(
            "s", pt.stack([x, y], axis=1), pmdp.Laplace(scale=5.0), observed=[1.0, 2.0]
        )
    return model


def test_row_wise_records_are_rebuilt_from_their_parents():
    """``y | x``: moving theta moves x, and y follows the new x with its own ancillary."""
    model = row_wise_model()
    nc = pmdp.Interweave(model=model).noncentred
    point = model.initial_point()
    point.update(mu=np.array(0.3), beta=np.array(2.0))
    x0 = model.rvs_to_values[model["x"]].get_value()
    y0 = model.rvs_to_values[model["y"]].get_value()
    u = nc.ancillary(nc.values(point), np.random.default_rng(0))
    np.testing.assert_allclose(u[0], x0 - 0.3)
    np.testing.assert_allclose(u[1], (y0 - 2.0 * x0) / 0.5)
    moved = dict(point, mu=np.array(-1.0), beta=np.array(0.5))
    x1, y1 = nc.records(nc.values(moved), u)
    np.testing.assert_allclose(x1, -1.0 + u[0])
    np.testing.assert_allclose(y1, 0.5 * x1 + 0.5 * u[1])


# PyTensor warns once per process that its C code found no BLAS to link for matrix products
# (the machine's NumPy BLAS is used instead); not a problem of the code under test.
@pytest.mark.filterwarnings("ignore:.*BLAS:UserWarning")
def test_multivariate_normal_records_use_the_cholesky_factor():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1, shape=2)
        sigma = pm.HalfNormal("sigma", 1.0)
        cov = sigma**2 * pt.as_tensor([[1.0, 0.6], [0.6, 2.0]])
        x = pmdp.Records("x", pm.MvNormal.dist(mu, cov=cov), n=5)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=5.0), observed=[1.0, 2.0])
    step = pmdp.Interweave(model=model)
    assert describe_forms(model, compile_model(model).blocks) == {"x": "cholesky"}
    nc = step.noncentred
    assert [f.relative_cost for f in nc.forms] == [0.1]  # a triangular solve per record
    point = model.initial_point()
    point["mu"] = np.array([0.5, -0.2])
    u = nc.ancillary(nc.values(point), np.random.default_rng(0))
    (back,) = nc.records(nc.values(point), u)
    np.testing.assert_allclose(back, model.rvs_to_values[model["x"]].get_value(), atol=1e-9)


def test_records_without_a_form_fall_back_to_full_refresh():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Categorical.dist(pt.stack([1 - theta, theta])), n=10)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=2.0), observed=4.0)
    assert describe_forms(model, compile_model(model).blocks) == {"x": None}
    assert pmdp.Interweave(model=model).method == "full-refresh"
    with pytest.raises(ValueError, match="no non-centred form"):
        pmdp.Interweave(model=model, method="noncentred")


@pytest.mark.parametrize("mu", [0.3, 4.0, 60.0])
def test_discrete_quantile_matches_scipy(mu):
    """The bracketing search gives scipy's quantile from any starting hint."""
    rng = np.random.default_rng(0)
    u = rng.random(500)
    hint = rng.integers(0, 200, size=500)
    k = discrete_quantile(lambda k, m: stats.poisson.cdf(k, m), u, hint, [np.float64(mu)])
    np.testing.assert_array_equal(k, stats.poisson.ppf(u, mu).astype(int))


def test_discrete_quantile_with_a_parameter_per_record_matches_scipy():
    """Each record's search reads its own parameter (a regression's per-record means), including
    the records a first guess does not settle."""
    rng = np.random.default_rng(1)
    u, mu = rng.random(500), rng.uniform(0.3, 60.0, size=500)
    hint = rng.integers(0, 200, size=500)
    k = discrete_quantile(lambda k, m: stats.poisson.cdf(k, m), u, hint, [mu])
    np.testing.assert_array_equal(k, stats.poisson.ppf(u, mu).astype(int))


def counting(cdf, limit=2000):
    """``cdf`` that fails after ``limit`` calls: a search that does not end fails, not hangs."""
    calls = [0]

    def counted(k, *params):
        calls[0] += 1
        assert calls[0] <= limit, "the quantile search does not end"
        return cdf(k, *params)

    return counted


def poisson_cdf(k, mu):
    return stats.poisson.cdf(k, mu)


def brute_force_quantile(u, mu):
    """``min {k >= 0 : F(k) >= u}`` by scanning the whole table of ``F``."""
    table = stats.poisson.cdf(np.arange(1000), mu)
    return np.array([int(np.argmax(table >= v)) for v in np.ravel(u)]).reshape(np.shape(u))


@pytest.mark.parametrize(
    "mu, hints",
    [
        (6.0, "above"),
        (6.0, "next"),
        (6.0, "below"),
        (6.0, "zero"),
        (6.0, "negative"),
        (40.0, "mixed"),
    ],
)
def test_discrete_quantile_at_the_cdf_values_themselves(mu, hints):
    """``u = F(j)`` exactly gives ``j`` (the smallest ``k`` with ``F(k) >= u``, so ties count as
    reached), searched upwards only, downwards only or both, from the next integer, and from hints
    at or below zero."""
    j = np.arange(0, 2 * int(mu))  # where F still grows in floating point
    u = stats.poisson.cdf(j, mu)
    np.testing.assert_array_equal(brute_force_quantile(u, mu), j)
    rng = np.random.default_rng(1)
    hint = {
        "above": j + rng.integers(1, 50, size=j.size),
        "next": j + 1,  # F(hint - 1) = u: reached already below the hint
        "below": np.zeros_like(j),
        "zero": np.zeros_like(j),
        "negative": np.full_like(j, -5),
        "mixed": rng.integers(-3, 200, size=j.size),
    }[hints]
    if hints == "above":
        u, j, hint = u[1:], j[1:], hint[1:]
    np.testing.assert_array_equal(
        discrete_quantile(counting(poisson_cdf), u, hint, [np.float64(mu)]), j
    )
    # between the table's values: the next j
    inner = (u[:-1] + u[1:]) / 2
    np.testing.assert_array_equal(
        discrete_quantile(counting(poisson_cdf), inner, hint[1:], [np.float64(mu)]), j[1:]
    )
    np.testing.assert_array_equal(brute_force_quantile(inner, mu), j[1:])


PACKAGED_CDFS = {  # each CDF the package searches, with scipy's quantile and parameter grid
    "poisson": ("PoissonRV", stats.poisson.ppf, [(0.3,), (4.0,), (60.0,)]),
    "binomial": ("BinomialRV", stats.binom.ppf, [(3, 0.9), (3, 0.05), (1, 0.5), (20, 0.6)]),
    "negative binomial": ("NegBinomialRV", stats.nbinom.ppf, [(2.5, 0.3), (0.7, 0.9)]),
}


@pytest.mark.parametrize("family", list(PACKAGED_CDFS))
def test_each_packaged_cdf_gives_scipys_quantile_from_any_hint(family):
    """Every u on a fine grid, from every hint 0..30: below the answer, at it, above it and
    past the top of a bounded support (Binomial(3, 0.9) from hint 1: the doubling steps 2, 4 pass
    n = 3, where SciPy's ``bdtr`` is NaN, which hung the search)."""
    op_name, ppf, grid = PACKAGED_CDFS[family]
    (cdf,) = [f for op, f in _DISCRETE_CDFS.items() if op.__name__ == op_name]
    u = np.concatenate([np.linspace(0.001, 0.999, 60), [0.99, 1e-9, 1.0 - 1e-9]])
    hints = np.arange(31)
    uu, hh = (a.ravel() for a in np.meshgrid(u, hints))
    for params in grid:
        expected = ppf(uu, *params).astype(int)
        k = discrete_quantile(counting(cdf), uu, hh, [np.asarray(p) for p in params])
        np.testing.assert_array_equal(k, expected, err_msg=f"{family}{params}")


def test_a_cdf_that_returns_nan_is_refused_not_searched_forever():
    """NaN is never at or above u: a CDF undefined above its support must fail loudly."""
    with pytest.raises(FloatingPointError, match="CDF returned NaN"):
        discrete_quantile(
            counting(lambda k, n, p: special.bdtr(k, n, p)),
            np.array([0.99]),
            np.array([1]),
            [3, 0.9],
        )


def test_discrete_quantile_has_none_at_or_above_one():
    """``u >= 1`` has no quantile: -1, the caller's impossible move (never a search that hangs)."""
    u = np.array([1.0, 1.5, 0.5, 1.0 + 1e-12])
    k = discrete_quantile(counting(poisson_cdf), u, np.array([3, 0, 7, 100]), [np.float64(2.0)])
    np.testing.assert_array_equal(k, [-1, -1, brute_force_quantile(0.5, 2.0), -1])


def test_discrete_quantile_of_zero_is_zero_and_of_an_unreached_u_is_none():
    """``u = 0`` (a CDF that underflows, as at a record far below a huge mean): the smallest
    ``k >= 0`` is 0 from any hint (the downward search looked for ``F(k) < 0`` forever); a ``u``
    the CDF does not reach by ``k = 2**61`` (a Poisson mean of 1e20, or inf): -1, the caller's
    impossible move (the doubling step overflowed and the search never ended). A large but finite
    mean is still searched exactly."""
    k = discrete_quantile(counting(poisson_cdf), np.zeros(3), np.array([5, 0, 40]), [2.0])
    np.testing.assert_array_equal(k, [0, 0, 0])
    means = np.array([1e20, np.inf, 1e10])
    k = discrete_quantile(counting(poisson_cdf), np.full(3, 0.5), np.array([0, 3, 10]), [means])
    np.testing.assert_array_equal(k, [-1, -1, stats.poisson.ppf(0.5, 1e10)])


def test_discrete_quantile_op_output_has_the_ndim_of_u():
    """The op's output type follows ``u`` (the records), not the parameters' rank."""
    op = _DiscreteQuantile("Poisson", poisson_cdf)
    node = op.make_node(pt.dvector("u"), pt.lvector("hint"), pt.dscalar("mu"))
    assert node.outputs[0].type.ndim == 1
    node = op.make_node(pt.dmatrix("u"), pt.lmatrix("hint"), pt.dvector("mu"))
    assert node.outputs[0].type.ndim == 2
    node = op.make_node(pt.dvector("u"), pt.lscalar("hint"), pt.dscalar("mu"))  # hints broadcast
    assert node.outputs[0].type.ndim == 1


def test_which_distributions_count_as_discrete_and_which_have_a_quantile_function():
    assert _is_discrete(pt.lvector()) and _is_discrete(pt.vector(dtype="uint8"))
    assert _is_discrete(pt.vector(dtype="bool"))
    assert not _is_discrete(pt.dvector()) and not _is_discrete(pt.fvector())
    rv = pm.Normal.dist(0.0, 1.0, shape=3)
    assert _has(pm.icdf, rv)

    def fails(rv, value):
        raise TypeError("expects a scalar value")

    assert not _has(fails, rv)


@pytest.mark.parametrize(
    "record_dist, observed",
    [
        # logcdf but no icdf: no inverse-cdf form (both are needed)
        (lambda a, b: pm.Wald.dist(mu=a, lam=b), 0.0),
        (lambda a, b: pm.ExGaussian.dist(mu=0.0, sigma=1.0, nu=a), 0.0),
        # records with their own axis (ndim 2) that are neither Dirichlet nor multivariate normal
        (lambda a, b: pm.Beta.dist(a, b, shape=(2,)), np.zeros(2)),
    ],
    ids=["wald", "ex-gaussian", "beta-pairs"],
)
def test_records_without_both_cdf_and_quantile_or_with_their_own_axis_have_no_form(
    record_dist, observed
):
    model = one_table(record_dist, n=5, observed=observed)
    assert describe_forms(model, compile_model(model).blocks) == {"x": None}


# --------------------------------------------------------------------------------------------------
# what each form depends on: the moving parameters, the op's own class, fresh uniforms, the cost
# --------------------------------------------------------------------------------------------------
#: ``Form.relative_cost`` of each form (Bernoulli records: the affine map of their PIT).
RELATIVE_COSTS = {"location-scale": 0.05, "inverse-cdf": 0.5, "randomized-pit": 1.0, "gammas": 5.0}


def test_each_form_has_its_relative_cost(family):
    """The fixed cost estimates that decide whether extra interweaving steps pay: affine maps are
    cheap, special functions dearer, per-record searches and the Gammas' quantiles dearest."""
    name, _, step, kind, _ = family
    (form,) = step.noncentred.forms
    expected = 0.05 if name == "bernoulli" else RELATIVE_COSTS[kind]
    assert form.relative_cost == expected


def test_the_forms_follow_the_parameters_the_move_changes():
    """``Gamma(k, b)`` records: a move of ``b`` alone holds the shape fixed (location-scale form),
    a move of both needs the inverse CDF."""
    with pm.Model() as model:
        k = pm.Gamma("k", 4.0, 2.0)
        b = pm.Gamma("b", 4.0, 2.0)
        x = pmdp.Records("x", pm.Gamma.dist(k, b), n=5)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=50.0), observed=0.0, check_sensitivity=False)
    assert [f.kind for f in pmdp.Interweave(model=model, vars=[b]).noncentred.forms] == [
        "location-scale"
    ]
    assert [f.kind for f in pmdp.Interweave(model=model).noncentred.forms] == ["inverse-cdf"]


def test_a_dirichlet_subclass_has_no_gammas_form():
    """Only ``pm.Dirichlet``'s own op gets the Gammas form: the ATUS example's subclass keeps the
    full-refresh move (cheaper there, see ``_form_of``)."""
    from pymc_unbounded_dp.examples.atus import dirichlet_dist

    def subclass(a, b):
        return dirichlet_dist(pt.stack([a, b, 1.5]))

    model = one_table(
        subclass, n=5, statistic=lambda x: pt.log(pt.maximum(x, 1e-3)), observed=np.zeros(3)
    )
    assert describe_forms(model, compile_model(model).blocks) == {"x": None}


def test_the_auxiliary_uniforms_are_drawn_afresh_from_the_generator(family):
    """The randomized PIT's uniforms and the Dirichlet totals come from the generator passed in:
    the same seed gives the same ancillaries, another seed other ones (a fixed draw would keep
    each single draw's law but not refresh the auxiliary variable); forms without auxiliary
    uniforms give the same ancillaries whatever the generator."""
    name, model, step, kind, _ = family
    point, _ = at_point(model, step)
    nc = step.noncentred
    values = nc.values(point)
    (u1,) = nc.ancillary(values, np.random.default_rng(1))
    (again,) = nc.ancillary(values, np.random.default_rng(1))
    (u2,) = nc.ancillary(values, np.random.default_rng(2))
    np.testing.assert_array_equal(u1, again)
    if kind in ("randomized-pit", "gammas"):
        assert np.mean(u1 != u2) > 0.9, name  # each entry moves with its uniform
    else:
        np.testing.assert_array_equal(u1, u2)


def test_the_numba_target_of_some_parameters_with_two_record_variables_matches_the_target():
    """The flat numba target (``mu`` moving, ``beta`` held; two record variables, so two
    ancillaries after the fixed values) equals the compiled target at the same values."""
    model = row_wise_model()
    nc = pmdp.Interweave(model=model, backend="python").noncentred
    point = model.initial_point()
    point.update(mu=np.array(0.3), beta=np.array(2.0))
    u = nc.ancillary(nc.values(point), np.random.default_rng(0))
    target = nc.flat_log_target({"mu": (0, 1, (), np.dtype("float64"))})
    assert target is not None and target.fixed_names == ("beta",)
    moved = dict(point, mu=np.array(-0.7))
    (got,) = target.fn(np.array([-0.7]), *target.arguments(moved, u))
    expected = nc.log_target(nc.values(moved), u)
    assert float(got) == pytest.approx(expected, rel=1e-12)
    assert expected != pytest.approx(nc.log_target(nc.values(point), u))  # mu matters
