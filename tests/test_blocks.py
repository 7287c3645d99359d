"""Model blocks: what they register, and clear errors at model-build time for bad input."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from release_models import histogram_model

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._registry import model_blocks

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
    return histogram_model(observed, dims=dims, coords=coords, n=("latent", n_dp))


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


# --------------------------------------------------------------------------------------------------
# what each branch of the blocks and of the compilation depends on
# --------------------------------------------------------------------------------------------------
def test_a_vector_release_is_drawn_with_independent_noise_per_coordinate():
    """With no records the release is noise alone: each coordinate gets its own draw (a scalar
    draw broadcast to every coordinate would make them equal)."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=0)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([x, 1 - x], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=2),
            observed=[0.0, 0.0],
        )
    draws = pm.draw(model["s"], draws=20, random_seed=1, mode="FAST_COMPILE")  # no C compilation
    assert draws.shape == (20, 2)
    assert np.all(draws[:, 0] != draws[:, 1])


def test_a_count_released_with_continuous_noise_is_observed_as_released():
    """``n_dp`` of a continuous mechanism is a float (24.7 is not truncated to 24); a discrete
    mechanism's is an integer."""
    from pymc_unbounded_dp._registry import observed_value

    with pm.Model() as model:
        pmdp.SampleSize("n", n_dp=24.7, mechanism=pmdp.Laplace(epsilon=1.0))
        pmdp.SampleSize("m", n_dp=24, mechanism=pmdp.DiscreteLaplace(epsilon=1.0))
    n_dp, m_dp = observed_value(model, model["n_dp"]), observed_value(model, model["m_dp"])
    assert n_dp == 24.7 and n_dp.dtype == np.float64
    assert m_dp == 24 and m_dp.dtype == np.int64


def test_a_table_of_exactly_eager_records_is_filled_when_built():
    """Up to ``EAGER_RECORDS`` known records the container holds them all from the start; above
    it, a few rows and a shared record count of ``n``."""
    from pymc_unbounded_dp._additivity import CHECK_ROWS
    from pymc_unbounded_dp.blocks import EAGER_RECORDS

    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        at = pmdp.Records("at", pm.Bernoulli.dist(theta), n=EAGER_RECORDS)
        above = pmdp.Records("above", pm.Bernoulli.dist(theta), n=EAGER_RECORDS + 1)
    specs = {r.name: r for r in model_blocks(model).records}
    assert specs["at"].data.get_value().shape == (EAGER_RECORDS,)
    assert not hasattr(specs["at"].data.tag, "record_count")
    assert specs["above"].data.get_value().shape == (CHECK_ROWS,)
    assert specs["above"].data.tag.record_count.get_value() == EAGER_RECORDS + 1
    assert at.ndim == above.ndim == 1


def test_the_largest_tables_are_accepted_up_to_their_limits():
    """A known ``n`` of ``MAX_SUMS_RECORDS`` is accepted and one more is refused; a latent ``n``
    starting above ``MAX_RECORDS`` (the records level's limit) is accepted (the sums level takes
    it)."""
    from pymc_unbounded_dp.blocks import MAX_RECORDS, MAX_SUMS_RECORDS

    count = pmdp.DiscreteLaplace(epsilon=1.0)
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=MAX_SUMS_RECORDS)
        with pytest.raises(ValueError, match="MAX_SUMS_RECORDS"):
            pmdp.Records("y", pm.Bernoulli.dist(theta), n=MAX_SUMS_RECORDS + 1)
        n = pmdp.SampleSize("n", n_dp=2 * MAX_RECORDS, mechanism=count)
        pmdp.Records("z", pm.Bernoulli.dist(theta), n=n)
    assert [r.name for r in model_blocks(model).records] == ["x", "z"]


def _clipped_release(lower, upper, sensitivity, neighbouring):
    with pm.Model():
        mu = pm.Normal("mu", 0, 1)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=10)
        pmdp.PrivatizedSum(
            "s",
            pt.clip(x, lower, upper),
            pmdp.Laplace(scale=1.0, sensitivity=sensitivity),
            observed=1.0,
            neighbouring=neighbouring,
        )


def test_sensitivities_equal_up_to_rounding_do_not_warn():
    """Declared and derived sensitivities one rounding error apart are equal (warnings are
    errors here), on either side; a real difference of 3% warns."""
    from pymc_unbounded_dp.sensitivity import sum_sensitivity

    # the derived sensitivities really are a rounding error off the declared ones
    assert (
        sum_sensitivity(np.array(-0.1), np.array(0.2), norm="l1", neighbouring="replace-one") > 0.3
    )
    assert 0.1 + 0.2 > sum_sensitivity(np.array(0.0), np.array(0.3), norm="l1")
    _clipped_release(-0.1, 0.2, 0.3, "replace-one")  # derived 0.30000000000000004
    _clipped_release(0.0, 0.3, 0.1 + 0.2, "add/remove")  # declared 0.30000000000000004
    with pytest.warns(pmdp.SensitivityWarning, match="does not hold"):
        _clipped_release(-0.1, 0.2, 0.29, "replace-one")
    with pytest.warns(pmdp.SensitivityWarning, match="stronger than stated"):
        _clipped_release(0.0, 0.3, 0.31, "add/remove")


def test_the_other_relation_is_suggested_only_when_its_sensitivity_is_declared():
    """clip(x, -3, 3) with sensitivity 1: 6 under replace-one and 3 under add/remove, both above
    1: no relation is suggested. With sensitivity 3, add/remove is."""
    with pytest.warns(pmdp.SensitivityWarning) as caught:
        _clipped_release(-3, 3, 1.0, "replace-one")
    (message,) = [str(w.message) for w in caught]
    assert "sensitivity of 6 under replace-one" in message
    assert "Under add/remove" not in message
    with pytest.warns(pmdp.SensitivityWarning) as caught:
        _clipped_release(-3, 3, 3.0, "replace-one")
    (message,) = [str(w.message) for w in caught]
    assert "Under add/remove neighbours they give 3: pass neighbouring='add/remove'" in message


def test_a_pm_data_n_dp_keeps_its_shape():
    """A number in a length-1 array is one count, but a pm.Data container of shape (1,) keeps its
    shape (``pm.set_data`` could not make it a scalar): refused, as for a release."""
    mechanism = pmdp.DiscreteLaplace(epsilon=0.5)
    with pm.Model() as model:
        pmdp.SampleSize("n", n_dp=np.array([57]), mechanism=mechanism)
        with pytest.raises(ValueError, match="pm.Data container keeps its shape"):
            pmdp.SampleSize("m", n_dp=pm.Data("m_released", np.array([57])), mechanism=mechanism)
    assert model.initial_point()["n"] == 57


@pytest.fixture(scope="module")
def twin_tables():
    """Two tables with the same record law (and the same parameter), one latent n."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        n = pmdp.SampleSize("n", n_dp=15, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        a = pmdp.Records("a", pm.Normal.dist(mu, 1), n=n)
        b = pmdp.Records("b", pm.Normal.dist(mu, 1), n=6)
        clip = pmdp.Laplace(epsilon=1.0, sensitivity=2.0)
        pmdp.PrivatizedSum("sa", pt.clip(a, -2, 2), clip, observed=1.0)
        pmdp.PrivatizedSum("sb", pt.clip(b, -2, 2), clip, observed=-1.0)
    return model, compile_model(model)


def test_each_table_proposes_from_its_own_stream(twin_tables):
    """After ``reseed``, the two tables (same law) draw different records, and the same seed
    draws the same records again."""
    model, compiled = twin_tables
    point = model.initial_point()

    def first_proposals(seed):
        compiled.reseed(seed)
        return [table.propose(point, 5)[0][0] for table in compiled.tables]

    a, b = first_proposals(3)
    assert not np.allclose(a, b)
    again = first_proposals(3)
    np.testing.assert_array_equal(again[0], a)
    np.testing.assert_array_equal(again[1], b)


def test_a_latent_n_table_proposes_as_many_records_as_asked(twin_tables):
    model, compiled = twin_tables
    point = {**model.initial_point(), "n": np.int64(15)}
    for table in compiled.tables:
        records, stats = table.propose(point, 4)
        assert [r.shape for r in records] == [(4,)] and stats.shape == (4, 1)
        np.testing.assert_allclose(stats[:, 0], np.clip(records[0], -2, 2))


def test_the_noise_sd_matches_closed_forms():
    """``noise_sd`` against the closed forms of continuous and discrete Laplace and Gaussian
    noise (and a direct sum over the integers for the discrete Gaussian), to 1e-7."""
    from pymc_unbounded_dp._compile import noise_sd

    t = np.exp(-1 / 2.0)  # discrete Laplace of scale 2: variance 2t / (1 - t)^2
    k = np.arange(-200, 201)
    weights = np.exp(-(k**2) / (2 * 3.0**2))
    discrete_gaussian_var = np.sum(weights * k**2) / np.sum(weights)
    cases = [
        (pmdp.Laplace(scale=2.0), 2.0 * np.sqrt(2.0)),
        (pmdp.Gaussian(sigma=1.5), 1.5),
        (pmdp.DiscreteLaplace(scale=2.0), np.sqrt(2 * t) / (1 - t)),
        (pmdp.DiscreteGaussian(sigma=3.0), np.sqrt(discrete_gaussian_var)),
    ]
    for mechanism, sd in cases:
        assert noise_sd(mechanism) == pytest.approx(sd, rel=1e-7), mechanism


def test_the_default_n_moves_follow_the_noise_sd_of_n_dp(twin_tables):
    """The latent-n table reads the sd of its own ``n_dp`` noise; the known-n table makes no
    moves over n."""
    from pymc_unbounded_dp.kernels import default_n_moves

    _, compiled = twin_tables
    latent, known = compiled.tables
    t = np.exp(-0.5)  # DiscreteLaplace(epsilon=0.5): scale 2
    assert latent.n_noise_sd == pytest.approx(np.sqrt(2 * t) / (1 - t), rel=1e-7)
    assert latent.default_n_moves(10**6) == default_n_moves(10**6, noise_sd=latent.n_noise_sd)
    assert known.n_noise_sd is None and known.default_n_moves(10**6) == 0


def test_statistics_are_a_float_matrix_whatever_the_statistic_dtype():
    """A count of Bernoulli records (an integer statistic) alone in its table still gives the
    documented float64 ``(rows, D)`` matrix, from ``propose`` and from ``statistics``."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("s", x, pmdp.DiscreteLaplace(epsilon=1.0), observed=4)
    (table,) = compile_model(model).tables
    records, stats = table.propose(model.initial_point(), 6)
    assert stats.dtype == np.float64 and stats.shape == (6, 1)
    np.testing.assert_array_equal(stats[:, 0], records[0])
    by_statistics = table.statistics(records)
    assert by_statistics.dtype == np.float64
    np.testing.assert_array_equal(by_statistics, stats)


def test_a_matrix_valued_release_is_flattened_in_row_major_order():
    """A contingency table per record (2 x 3 indicators of ``(y, x)``) is 6 released numbers,
    flattened as NumPy does, after a scalar release."""
    with pm.Model() as model:
        p = pm.Dirichlet("p", np.ones(3))
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Categorical.dist(p), n=10)
        y = pmdp.Records("y", pm.Bernoulli.dist(theta), n=10)
        cells = pt.stack(
            [pt.stack([pt.eq(y, a) & pt.eq(x, b) for b in range(3)], axis=1) for a in range(2)],
            axis=1,
        )
        released = np.arange(6.0).reshape(2, 3)
        pmdp.PrivatizedSum("count", y, pmdp.Laplace(epsilon=1.0), observed=5.0)
        pmdp.PrivatizedSum(
            "table", cells, pmdp.Laplace(epsilon=1.0), observed=released, check_sensitivity=False
        )
    (table,) = compile_model(model).tables
    np.testing.assert_array_equal(table.released_sums(), [5.0, *range(6)])
    (xs, ys), stats = table.propose(model.initial_point(), 7)
    assert stats.shape == (7, 7)
    expected = np.zeros((7, 2, 3))
    expected[np.arange(7), ys, xs] = 1.0
    np.testing.assert_array_equal(stats[:, 0], ys)
    np.testing.assert_array_equal(stats[:, 1:], expected.reshape(7, 6))
