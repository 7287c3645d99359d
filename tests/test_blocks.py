"""Model blocks: what they register, and clear errors at model-build time for bad input."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model

LAPLACE = pmdp.Laplace(epsilon=1.0)


@pytest.fixture
def model():
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1, shape=2)
        pm.Normal("beta", 0, 1, shape=2)
        pmdp.Records("X", pm.Normal.dist(mu, 1), n=30)
    return model


def test_records_are_observed_data_with_a_leading_record_axis(model):
    assert model["X"] in model.observed_RVs
    assert [v.name for v in model.value_vars] == ["mu", "beta"]
    assert model["X"].eval().shape == (30, 2)


def test_row_wise_records_and_several_sums(model):
    with model:
        y = pmdp.Records("y", pm.Normal.dist(model["X"] @ model["beta"], 1), n=30)
        X = model["X"]
        # Unclamped on purpose (the test is about row-wise records): no finite sensitivity.
        pmdp.PrivatizedSum(
            "xy",
            pt.stack([X[:, 0] * y, X[:, 1] * y], axis=1),
            LAPLACE,
            [1.0, 2.0],
            check_sensitivity=False,
        )
        pmdp.PrivatizedSum("yy", pt.clip(y, -1, 1) ** 2, pmdp.Gaussian(sigma=1.0), 3.0)
    compiled = compile_model(model).tables[0]
    assert compiled.record_names == ("X", "y")
    records, stats = compiled.propose(model.initial_point(), 7)
    assert [r.shape for r in records] == [(7, 2), (7,)]
    expected = np.column_stack(
        [
            records[0][:, 0] * records[1],
            records[0][:, 1] * records[1],
            np.clip(records[1], -1, 1) ** 2,
        ]
    )
    np.testing.assert_allclose(stats, expected)
    np.testing.assert_array_equal(compiled.released_sums(), [1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda m: pmdp.PrivatizedSum("s", m["X"] - m["X"].mean(0), LAPLACE, [1, 2]),
            "not record-additive",
        ),
        (
            lambda m: pmdp.PrivatizedSum("s", pt.sort(m["X"], axis=0), LAPLACE, [1, 2]),
            "not record-additive",
        ),
        (lambda m: pmdp.PrivatizedSum("s", m["X"].sum(0), LAPLACE, [1, 2]), "leading record axis"),
        (
            lambda m: pmdp.PrivatizedSum("s", m["X"] * m["mu"], LAPLACE, [1, 2]),
            "depends on model parameter",
        ),
        (lambda m: pmdp.PrivatizedSum("s", m["X"], LAPLACE, [1, 2, 3]), "shape"),
        (lambda m: pmdp.PrivatizedSum("s", m["X"], LAPLACE, [1, np.nan]), "NaN"),
        (
            lambda m: pmdp.PrivatizedSum("s", m["X"], pmdp.DiscreteLaplace(epsilon=1), [1, 2]),
            "integers",
        ),
        (lambda m: pmdp.PrivatizedSum("s", m["mu"] * 2, LAPLACE, [1, 2]), "does not depend on any"),
        (lambda m: pmdp.PrivatizedSum("s", m["X"], "laplace", [1, 2]), "mechanism"),
        (
            lambda m: pmdp.Records("z", pm.Normal.dist(m["X"][:, 0], 1), n=31),
            "row-wise on records of its own table",
        ),
        (lambda m: pmdp.Records("z", pm.Normal.dist(0, 1), n=-1), "non-negative integer"),
        (lambda m: pmdp.Records("z", pm.Normal.dist(0, 1), n=2.5), "non-negative integer"),
        (lambda m: pmdp.Records("z", m["mu"], n=30), "already a model variable"),
        (lambda m: pmdp.Records("z", np.ones(3), n=30), "unregistered PyMC distribution"),
        (lambda m: pmdp.Records("X", pm.Normal.dist(0, 1), n=30), "already has a variable"),
    ],
)
def test_bad_input_fails_at_build_time(model, build, message):
    with model, pytest.raises((ValueError, TypeError), match=message):
        build(model)


def test_discrete_mechanism_needs_integer_observed():
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        with pytest.raises(ValueError, match="integer-valued"):
            pmdp.PrivatizedSum("s", x, pmdp.DiscreteLaplace(epsilon=1.0), observed=3.5)


def test_models_without_records_or_sums_are_refused():
    with pm.Model() as empty:
        pm.Normal("a")
    with pytest.raises(ValueError, match="no pmdp.Records"):
        pmdp.sample(model=empty)
    with pm.Model() as no_sum:
        theta = pm.Beta("theta", 1, 1)
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
    with pytest.raises(ValueError, match="no pmdp.PrivatizedSum"):
        pmdp.sample(model=no_sum)


def test_sample_size_bad_input():
    mechanism = pmdp.DiscreteLaplace(epsilon=0.5)
    with pm.Model():
        with pytest.raises(ValueError, match="must be an integer"):
            pmdp.SampleSize("n", n_dp=10.5, mechanism=mechanism)
        with pytest.raises(ValueError, match="n < 0"):
            pmdp.SampleSize(
                "n", n_dp=10, mechanism=mechanism, prior=pm.DiscreteUniform.dist(-3, 20)
            )
        with pytest.raises(TypeError, match="discrete distribution"):
            pmdp.SampleSize("n", n_dp=10, mechanism=mechanism, prior=pm.Normal.dist(10, 1))
        with pytest.raises(ValueError, match="NaN"):
            pmdp.SampleSize("n", n_dp=np.nan, mechanism=mechanism)
        n = pmdp.SampleSize("n", n_dp=-4, mechanism=mechanism)  # noisy counts can be negative
        m = pmdp.SampleSize("m", n_dp=10, mechanism=mechanism)  # a second table's n
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        z = pmdp.Records("z", pm.Bernoulli.dist(theta), n=m)
        with pytest.raises(ValueError, match="differs from `n`=SampleSize 'm'"):
            pmdp.Records("y", pm.Normal.dist(x, 1), n=m)
        with pytest.raises(ValueError, match="of different tables"):
            pmdp.PrivatizedSum("s", x * z, pmdp.Laplace(epsilon=1.0), 3.0)
        # a latent n beside a known one (in either order of the expression), and two known ones
        w = pmdp.Records("w", pm.Bernoulli.dist(theta), n=5)
        v = pmdp.Records("v", pm.Bernoulli.dist(theta), n=6)
        for first, second, shown in ((x, w, "n=5"), (w, x, "n=5"), (w, v, "n=6")):
            with pytest.raises(ValueError, match=f"{shown}\\) of different tables"):
                pmdp.PrivatizedSum(
                    f"s_{first.name}{second.name}", first + second, pmdp.Laplace(epsilon=1.0), 3.0
                )


def test_sample_size_starts_at_the_supported_value_closest_to_n_dp():
    mechanism = pmdp.DiscreteLaplace(epsilon=0.5)
    with pm.Model() as model:
        pmdp.SampleSize("a", n_dp=-4, mechanism=mechanism)
    assert model.initial_point()["a"] == 0
    with pm.Model() as model:
        pmdp.SampleSize("b", n_dp=50, mechanism=mechanism, prior=pm.DiscreteUniform.dist(10, 20))
    assert model.initial_point()["b"] == 20


def test_steps_refuse_the_wrong_kind_of_model():
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("s", x, LAPLACE, observed=3.0)
        with pytest.raises(ValueError, match="known n"):
            pmdp.ReversibleJump()
        with pytest.raises(ValueError, match="unbounded DP only"):
            pmdp.sample(n_moves=3)
        with pytest.raises(ValueError, match="nuts_sampler"):
            pmdp.sample(nuts_sampler="numpyro")
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=10, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, LAPLACE, observed=3.0)
        with pytest.raises(ValueError, match="SampleSize"):
            pmdp.DataAugmentation()
        with pytest.raises(ValueError, match="n_moves"):
            pmdp.ReversibleJump(n_moves=0)


def categories(observed, dims=None, coords=None, n_dp=60):
    """A histogram of three categories released from records with a latent n."""
    with pm.Model(coords=coords) as model:
        p = pm.Dirichlet("p", np.ones(3))
        n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Categorical.dist(p), n=n)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([pt.eq(x, k) for k in range(3)], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=3.0),
            observed=observed,
            dims=dims,
        )
    return model


def test_pandas_and_xarray_releases_are_taken_as_pymc_takes_them():
    import pandas as pd
    import xarray as xr

    from pymc_unbounded_dp._registry import observed_value

    region = pd.Index(["north", "south", "west"], name="region")
    counts = pd.Series([30.0, 12.0, 18.0], index=region)
    # a length-1 Series (a filtered table) as the released count and as a scalar release
    one = pd.Series([57], index=["2020"])
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=one, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, LAPLACE, observed=pd.Series([20.4], index=["2020"]))
    assert observed_value(model, model["n_dp"]).shape == ()
    assert float(observed_value(model, model["s"])) == 20.4
    # PyMC takes the same Series as observed of a scalar
    with pm.Model():
        pm.Normal("y", 0, 1, observed=pd.Series([20.4], index=["2020"]))

    # dims without coords: the index labels the release, as pm.Data(infer_dims_and_coords=True)
    model = categories(counts, dims="region")
    assert model.coords["region"] == ("north", "south", "west")
    assert model.named_vars_to_dims["s"] == ("region",)
    np.testing.assert_array_equal(observed_value(model, model["s"]), [30.0, 12.0, 18.0])
    # the same from a one-column DataFrame and from an xarray DataArray
    frame = categories(counts.to_frame("count"), dims="region")
    assert frame.coords["region"] == ("north", "south", "west")
    array = xr.DataArray(counts.to_numpy(), dims=["k"], coords={"k": list(region)})
    assert categories(array, dims="region").coords["region"] == ("north", "south", "west")
    # declared coords: the same labels are fine; others (a reordering) are refused
    same = categories(counts, dims="region", coords={"region": list(region)})
    assert same.coords["region"] == ("north", "south", "west")
    with pytest.raises(ValueError, match=r"not the model's coords\['region'\].*reindex"):
        categories(counts, dims="region", coords={"region": ["south", "north", "west"]})
    with pytest.raises(ValueError, match="declares with 4 coordinates"):
        categories(counts.to_numpy(), dims="region", coords={"region": list("abcd")})
    # without dims the labels are dropped, as PyMC drops them from an observed value
    assert not categories(counts).coords
    with pm.Model() as plain:
        pm.Normal("y", 0, 1, observed=counts)
    assert not plain.coords and not plain.named_vars_to_dims
    # a missing value of a nullable column is named as such
    with pytest.raises(ValueError, match=r"`n_dp` \(pandas Series 'n_dp'\) contains NaN"):
        categories(counts, n_dp=pd.Series([pd.NA], dtype="Int64", name="n_dp"))
    # a pm.Data container keeps its shape: a length-1 one for a scalar release is refused
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        with pytest.raises(ValueError, match="pm.Data container keeps its shape"):
            pmdp.PrivatizedSum("s", x, LAPLACE, observed=pm.Data("s_dp", np.array([2.0])))


def test_a_known_table_of_no_records_leaves_the_prior():
    """``n=0`` is a table like another (bounded DP, nobody in it): the release is of noise
    alone, so the posterior of theta is its Beta(2, 5) prior (mean and centred variance)."""
    from mcmc_checks import assert_mean_and_spread_match, draws_of

    with pm.Model() as model:
        theta = pm.Beta("theta", 2, 5)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=0)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=0.7)
    idata = pmdp.sample(
        model=model, draws=2000, tune=300, chains=2, random_seed=1, progressbar=False
    )
    assert_mean_and_spread_match(draws_of(idata, "theta"), 2 / 7, 10 / (49 * 8), "theta")
