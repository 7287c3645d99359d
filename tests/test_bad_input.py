"""No silent wrong answers on bad input (issue 14, item 5).

One catalogue of bad inputs, each giving a clear error (exact type, message naming the argument)
at model build or before any draw; then the releases changed by ``pm.set_data`` after the model
was built, the record-additivity and row-wise checks, and a huge ``n_dp``.
"""

import time
import tracemalloc

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import pytest
from release_models import histogram_model

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._graph import QUICK_MODE
from pymc_unbounded_dp._registry import model_blocks
from pymc_unbounded_dp.blocks import MAX_RECORDS, check_releases
from pymc_unbounded_dp.steps import RecordsStep

LAPLACE = pmdp.Laplace(epsilon=1.0)
COUNT = pmdp.DiscreteLaplace(epsilon=0.5)


# --------------------------------------------------------------------------------------------------
# cheap models and builders
# --------------------------------------------------------------------------------------------------
def bernoulli(n=10) -> pm.Model:
    """``theta ~ Beta(1, 1)`` and ``n`` Bernoulli(theta) records ``x``, no release yet."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    return model


def released() -> pm.Model:
    """:func:`bernoulli` with the release ``s`` of the count."""
    model = bernoulli()
    with model:
        pmdp.PrivatizedSum("s", model["x"], LAPLACE, observed=3.4)
    return model


def in_model(make_model, action):
    """A builder: ``action(model)`` inside a fresh ``make_model()``."""

    def build():
        model = make_model()
        with model:
            action(model)

    return build


def statistic_sum(statistic, observed=3.0, mechanism=LAPLACE):
    """A builder: ``PrivatizedSum("s", statistic(model), mechanism, observed)`` on Bernoulli records."""
    return in_model(bernoulli, lambda m: pmdp.PrivatizedSum("s", statistic(m), mechanism, observed))


def normal_sum(observed):
    """A builder: the release of clamped normal records with ``observed``."""

    def build():
        with pm.Model():
            mu = pm.Normal("mu", 0, 1)
            x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=10)
            pmdp.PrivatizedSum(
                "s", pt.clip(x, -3, 3), pmdp.Laplace(epsilon=1, sensitivity=6), observed
            )

    return build


def sample_size(n_dp=57, mechanism=COUNT, prior=None):
    return in_model(pm.Model, lambda m: pmdp.SampleSize("n", n_dp, mechanism, prior))


def records(n, dist=lambda m: pm.Bernoulli.dist(m["theta"]), name="x"):
    def build():
        with pm.Model() as model:
            pm.Beta("theta", 1, 1)
            pmdp.Records(name, dist(model), n=n)

    return build


def huge_sample_size():
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=1e9, mechanism=COUNT)
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)


def row_wise_other_table():
    with pm.Model():
        beta = pm.Normal("beta")
        X = pmdp.Records("X", pm.Normal.dist(0, 1), n=10)
        pmdp.Records("y", pm.Normal.dist(X * beta, 1), n=11)


def count_of_floats():
    with pm.Model():
        x = pmdp.Records("x", pm.Normal.dist(pm.Normal("mu"), 1), n=10)
        pmdp.PrivatizedSum("s", x, COUNT, 3)


def two_tables():
    with bernoulli() as model:
        z = pmdp.Records("z", pm.Bernoulli.dist(model["theta"]), n=12)
        pmdp.PrivatizedSum("s", model["x"] + z[:10], LAPLACE, 3.0)


def sample(**kwargs):
    def build():
        with released():
            pmdp.sample(**{"draws": 5, "tune": 5, "chains": 1, "progressbar": False, **kwargs})

    return build


def mcem(**kwargs):
    return lambda: pmdp.mcem(released(), progressbar=False, **kwargs)


RECORDS = pd.DataFrame({"age": [30, 40, 30], "zip": ["a", "b", "b"]}, index=["ann", "bob", "cy"])
AGES_AS_TEXT = pd.DataFrame({"age": ["30", "30", "40"], "zip": ["a", "b", "b"]})
WEIGHTS = pd.DataFrame(0.0, index=RECORDS.index, columns=RECORDS.columns)
RULE = pd.DataFrame(True, index=RECORDS.index, columns=RECORDS.columns)

# (id, builder, exception type, substrings of the message: the block and the argument named)
CATALOGUE = [
    # SampleSize: the released count and the prior
    ("n_dp-nan", sample_size(np.nan), ValueError, ["SampleSize('n')", "`n_dp`", "NaN"]),
    ("n_dp-vector", sample_size([57, 58]), ValueError, ["`n_dp`", "one number", "(2,)"]),
    ("n_dp-inf", sample_size(np.inf), ValueError, ["`n_dp`", "infinite"]),
    ("n_dp-string", sample_size("57"), TypeError, ["`n_dp`", "numeric"]),
    ("n_dp-none", sample_size(None), TypeError, ["`n_dp`", "required"]),
    ("n_dp-bool", sample_size(True), TypeError, ["`n_dp`", "numeric"]),
    ("n_dp-beyond-2**53", sample_size(1e300), ValueError, ["`n_dp`", "2**53"]),
    ("n_dp-below-minus-2**53", sample_size(-1e300), ValueError, ["`n_dp`", "2**53"]),
    ("n_dp-not-integer", sample_size(10.5), ValueError, ["`n_dp`", "must be an integer"]),
    (
        "n_dp-masked",
        sample_size(np.ma.masked_array(5, mask=True)),
        ValueError,
        ["`n_dp`", "masked"],
    ),
    (
        "n_dp-huge-records",
        huge_sample_size,
        ValueError,
        ["Records('x')", "`n`", "`n_dp`", "MAX_RECORDS"],
    ),
    ("n-mechanism-string", sample_size(mechanism="laplace"), TypeError, ["`mechanism`"]),
    (
        "n-prior-negative-support",
        sample_size(prior=pm.DiscreteUniform.dist(-5, 10)),
        ValueError,
        ["`prior`", "n < 0"],
    ),
    (
        "n-prior-continuous",
        sample_size(prior=pm.Normal.dist(50, 5)),
        TypeError,
        ["`prior`", "discrete"],
    ),
    ("n-prior-not-a-distribution", sample_size(prior=50), TypeError, ["`prior`", ".dist("]),
    # Records: the number of records, the distribution, the name
    ("n-nan", records(np.nan), ValueError, ["Records('x')", "`n`", "non-negative integer"]),
    ("n-negative", records(-1), ValueError, ["`n`", "non-negative integer"]),
    ("n-fraction", records(2.5), ValueError, ["`n`", "non-negative integer"]),
    ("n-inf", records(np.inf), ValueError, ["`n`", "non-negative integer"]),
    ("n-string", records("10"), TypeError, ["`n`", "non-negative integer"]),
    ("n-array", records(np.array([3, 4])), TypeError, ["`n`", "non-negative integer"]),
    ("n-bool", records(True), TypeError, ["`n`", "non-negative integer"]),
    ("n-above-limit", records(10**10), ValueError, ["`n`", "MAX_RECORDS"]),
    ("n-other-tensor", records(pt.constant(5)), TypeError, ["`n`", "SampleSize"]),
    (
        "dist-registered",
        records(10, lambda m: pm.Bernoulli("b", m["theta"])),
        ValueError,
        ["Records('x')", "`dist`", "already a model variable"],
    ),
    ("dist-array", records(10, lambda m: np.ones(3)), TypeError, ["`dist`", ".dist("]),
    ("dist-expression", records(10, lambda m: m["theta"] * 2), TypeError, ["`dist`", ".dist("]),
    (
        "dist-row-wise-other-table",
        row_wise_other_table,
        ValueError,
        ["Records('y')", "`dist`", "own table"],
    ),
    ("name-taken", records(10, name="theta"), ValueError, ["Records('theta')", "`name`"]),
    ("name-empty", records(10, name=""), TypeError, ["`name`", "non-empty string"]),
    # PrivatizedSum: the statistic
    (
        "statistic-none",
        statistic_sum(lambda m: None),
        TypeError,
        ["PrivatizedSum('s')", "`statistic`"],
    ),
    (
        "statistic-numpy",
        statistic_sum(lambda m: np.ones(10)),
        TypeError,
        ["`statistic`", "ndarray"],
    ),
    ("statistic-string", statistic_sum(lambda m: "x"), TypeError, ["`statistic`", "str"]),
    (
        "statistic-list",
        statistic_sum(lambda m: [m["x"], 1 - m["x"]], [1.0, 2.0]),
        TypeError,
        ["`statistic`", "pt.stack"],
    ),
    (
        "statistic-of-parameter",
        statistic_sum(lambda m: m["x"] * m["theta"]),
        ValueError,
        ["`statistic`", "model parameter"],
    ),
    (
        "statistic-no-records",
        statistic_sum(lambda m: m["theta"] * 2),
        ValueError,
        ["`statistic`", "does not depend on any pmdp.Records"],
    ),
    (
        "statistic-summed",
        statistic_sum(lambda m: m["x"].sum()),
        ValueError,
        ["`statistic`", "leading record axis"],
    ),
    (
        "statistic-mean-centred",
        statistic_sum(lambda m: m["x"] - m["x"].mean()),
        ValueError,
        ["`statistic`", "not record-additive"],
    ),
    ("statistic-two-tables", two_tables, ValueError, ["`statistic`", "different tables"]),
    # PrivatizedSum: the released value
    (
        "observed-none",
        statistic_sum(lambda m: m["x"], None),
        TypeError,
        ["PrivatizedSum('s')", "`observed`", "required"],
    ),
    (
        "observed-masked",
        statistic_sum(lambda m: m["x"], np.ma.masked_array([3.0], mask=[True])),
        ValueError,
        ["`observed`", "masked"],
    ),
    (
        "observed-masked-scalar",
        statistic_sum(lambda m: m["x"], np.ma.masked_array(3.0, mask=True)),
        ValueError,
        ["`observed`", "masked"],
    ),
    ("observed-nan", statistic_sum(lambda m: m["x"], np.nan), ValueError, ["`observed`", "NaN"]),
    (
        "observed-inf",
        statistic_sum(lambda m: m["x"], -np.inf),
        ValueError,
        ["`observed`", "infinite"],
    ),
    (
        "observed-wrong-shape",
        statistic_sum(lambda m: m["x"], [1.0, 2.0]),
        ValueError,
        ["`observed`", "shape (2,)"],
    ),
    ("observed-wrong-shape-vector", normal_sum([1.0, 2.0]), ValueError, ["`observed`", "shape"]),
    (  # as many numbers as the (2, 3) release, transposed: refused, not reshaped
        "observed-transposed",
        statistic_sum(
            lambda m: pt.stack([pt.stack([m["x"]] * 3, axis=-1)] * 2, axis=1),
            np.zeros((3, 2)),
            pmdp.Laplace(epsilon=1, sensitivity=6),
        ),
        ValueError,
        ["`observed`", "shape (3, 2)", "shape (2, 3)"],
    ),
    ("observed-string", statistic_sum(lambda m: m["x"], "3"), TypeError, ["`observed`", "numeric"]),
    ("observed-bool", statistic_sum(lambda m: m["x"], True), TypeError, ["`observed`", "numeric"]),
    ("observed-ragged", normal_sum([[1.0], 2.0]), TypeError, ["`observed`", "rectangular"]),
    (
        "observed-expression",
        statistic_sum(lambda m: m["x"], pt.as_tensor(3.0) * 2),
        TypeError,
        ["`observed`", "PyTensor expression"],
    ),
    (
        "observed-not-integer",
        statistic_sum(lambda m: m["x"], 3.5, COUNT),
        ValueError,
        ["`observed`", "integer-valued", "DiscreteLaplace"],
    ),
    # PrivatizedSum: the mechanism, name, dims
    (
        "mechanism-string",
        statistic_sum(lambda m: m["x"], 3.0, "laplace"),
        TypeError,
        ["PrivatizedSum('s')", "`mechanism`"],
    ),
    (
        "mechanism-discrete-on-floats",
        count_of_floats,
        ValueError,
        ["`mechanism`", "integers", "float64"],
    ),
    (
        "sum-name-taken",
        in_model(bernoulli, lambda m: pmdp.PrivatizedSum("theta", m["x"], LAPLACE, 3.0)),
        ValueError,
        ["PrivatizedSum('theta')", "`name`"],
    ),
    (
        "sum-dims",
        in_model(bernoulli, lambda m: pmdp.PrivatizedSum("s", m["x"], LAPLACE, 3.0, dims="stat")),
        ValueError,
        ["`dims`"],
    ),
    # mechanisms
    ("epsilon-zero", lambda: pmdp.Laplace(epsilon=0), ValueError, ["Laplace", "`epsilon`"]),
    ("epsilon-negative", lambda: pmdp.Laplace(epsilon=-1), ValueError, ["`epsilon`"]),
    ("epsilon-nan", lambda: pmdp.DiscreteLaplace(epsilon=np.nan), ValueError, ["`epsilon`"]),
    ("epsilon-inf", lambda: pmdp.Laplace(epsilon=np.inf), ValueError, ["`epsilon`"]),
    ("epsilon-string", lambda: pmdp.Laplace(epsilon="1"), TypeError, ["`epsilon`", "number"]),
    ("epsilon-bool", lambda: pmdp.Laplace(epsilon=True), TypeError, ["`epsilon`", "number"]),
    (
        "epsilon-and-scale",
        lambda: pmdp.Laplace(epsilon=1, scale=1),
        ValueError,
        ["`epsilon`", "`scale`"],
    ),
    (
        "sensitivity-negative",
        lambda: pmdp.Laplace(epsilon=1, sensitivity=-1),
        ValueError,
        ["`sensitivity`"],
    ),
    (
        "sensitivity-string",
        lambda: pmdp.Gaussian(sigma=1, sensitivity="2"),
        TypeError,
        ["`sensitivity`"],
    ),
    (
        "sensitivity-fraction-discrete",
        lambda: pmdp.DiscreteLaplace(epsilon=1, sensitivity=1.5),
        ValueError,
        ["`sensitivity`", "integer"],
    ),
    ("sigma-zero", lambda: pmdp.Gaussian(sigma=0), ValueError, ["Gaussian", "`sigma`"]),
    ("rho-negative", lambda: pmdp.DiscreteGaussian(rho=-1), ValueError, ["`rho`"]),
    # before sampling: pmdp.sample, the steps, mcem
    ("sample-tune-negative", sample(tune=-5), ValueError, ["`tune`", "-5"]),
    ("sample-draws-negative", sample(draws=-1), ValueError, ["`draws`"]),
    ("sample-draws-fraction", sample(draws=2.5), ValueError, ["`draws`"]),
    ("sample-chains-zero", sample(chains=0), ValueError, ["`chains`"]),
    ("sample-cores-zero", sample(cores=0), ValueError, ["`cores`"]),
    ("sample-interweave-string", sample(interweave="yes"), TypeError, ["`interweave`"]),
    ("sample-nuts-sampler", sample(nuts_sampler="numpyro"), ValueError, ["`nuts_sampler`"]),
    ("sample-n-moves-bounded", sample(n_moves=3), ValueError, ["`n_moves`"]),
    ("sample-keep-records-zero", sample(keep_records=0), ValueError, ["`keep_records`"]),
    ("sample-blas-threads-zero", sample(blas_threads=0), ValueError, ["`blas_threads`"]),
    (
        "sample-no-release",
        lambda: pmdp.sample(model=bernoulli(), progressbar=False),
        ValueError,
        ["'x'", "no pmdp.PrivatizedSum"],
    ),
    (
        "sample-no-records",
        in_model(pm.Model, lambda m: (pm.Normal("a"), pmdp.sample())),
        ValueError,
        ["no pmdp.Records"],
    ),
    (
        "sample-unused-sample-size",
        in_model(released, lambda m: (pmdp.SampleSize("m", 57, COUNT), pmdp.sample())),
        ValueError,
        ["SampleSize 'm'", "no pmdp.Records use it", "n=<the SampleSize>"],
    ),
    (
        "reversible-jump-n-moves",
        in_model(released, lambda m: pmdp.ReversibleJump(n_moves=0)),
        ValueError,
        ["`n_moves`"],
    ),
    ("mcem-replicates-zero", mcem(replicates=0), ValueError, ["`replicates`"]),
    ("mcem-tol-negative", mcem(tol=-1), ValueError, ["`tol`"]),
    ("mcem-method-unknown", mcem(method="newton"), ValueError, ["`method`", "newton"]),
    ("mcem-batches-one", mcem(batches=1), ValueError, ["`batches`"]),
    # risk: dictionaries whose columns cannot match the records'
    (
        "risk-min-risk-dtypes",
        lambda: pmdp.risk.min_risk_rule(RECORDS, AGES_AS_TEXT, WEIGHTS, 1),
        TypeError,
        ["'age'", "`dictionary`", "`records`", "int64", "strings"],
    ),
    (
        "risk-risk-dtypes",
        lambda: pmdp.risk.risk(RECORDS, RULE, AGES_AS_TEXT, pmdp.risk.constant(1)),
        TypeError,
        ["'age'", "`dictionary`", "int64"],
    ),
    (
        "risk-counts-dtypes",
        lambda: pmdp.risk.consistent_counts(RECORDS, AGES_AS_TEXT),
        TypeError,
        ["'age'", "`released`", "`dictionary`"],
    ),
    (
        "risk-bool-against-numbers",
        lambda: pmdp.risk.consistent_counts(RECORDS, pd.DataFrame({"age": [True, False]})),
        TypeError,
        ["'age'", "booleans"],
    ),
]


@pytest.fixture
def no_draws(monkeypatch):
    """Fail the test if sampling or a kernel sweep starts: the errors must come before any draw."""

    def started(*args, **kwargs):
        raise AssertionError("sampling started before the bad input was refused")

    monkeypatch.setattr(pm, "sample", started)
    monkeypatch.setattr(kernels, "sweep", started)


def test_the_catalogue_is_large_and_unique():
    ids = [case[0] for case in CATALOGUE]
    assert len(ids) >= 45
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    "build, error, fragments", [c[1:] for c in CATALOGUE], ids=[c[0] for c in CATALOGUE]
)
def test_bad_input_is_refused_with_a_message_naming_it(no_draws, build, error, fragments):
    with pytest.raises(Exception) as caught:
        build()
    assert type(caught.value) is error, f"{type(caught.value).__name__}: {caught.value}"
    message = str(caught.value)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"{missing} not in: {message}"


# --------------------------------------------------------------------------------------------------
# pm.Data releases changed after the model was built
# --------------------------------------------------------------------------------------------------
def data_model() -> pm.Model:
    """Releases in pm.Data containers: a count ``c`` (discrete), two moments ``m``, and ``n_dp``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        n = pmdp.SampleSize("n", pm.Data("n_released", 20.0), COUNT)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=n)
        clamped = pt.clip(x, -2, 2)
        pmdp.PrivatizedSum(
            "m",
            pt.stack([clamped, clamped**2], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=6.0),
            pm.Data("m_dp", [4.0, 25.0]),
        )
        pmdp.PrivatizedSum("c", x > 0, COUNT, pm.Data("c_dp", 11.0))
    return model


SET_DATA = [
    ("m_dp", [np.nan, 25.0], ["PrivatizedSum('m')", "`observed` (pm.Data 'm_dp')", "NaN"]),
    ("m_dp", [4.0, 25.0, 1.0], ["PrivatizedSum('m')", "`observed`", "shape (3,)"]),
    ("c_dp", 11.5, ["PrivatizedSum('c')", "`observed` (pm.Data 'c_dp')", "integer-valued"]),
    ("c_dp", np.inf, ["PrivatizedSum('c')", "infinite"]),
    ("n_released", np.nan, ["SampleSize('n')", "`n_dp` (pm.Data 'n_released')", "NaN"]),
    ("n_released", 20.5, ["SampleSize('n')", "`n_dp`", "must be an integer"]),
]
SET_DATA_IDS = [
    "nan",
    "wrong-shape",
    "count-not-integer",
    "count-inf",
    "n_dp-nan",
    "n_dp-not-integer",
]


@pytest.fixture
def steps_spy(monkeypatch) -> list:
    """Every call of the records step (there must be none before the error)."""
    calls = []
    original = RecordsStep.step

    def spy(self, point):
        calls.append(point)
        return original(self, point)

    monkeypatch.setattr(RecordsStep, "step", spy)
    return calls


def expect(error_fragments, call):
    with pytest.raises(ValueError) as caught:
        call()
    missing = [f for f in error_fragments if f not in str(caught.value)]
    assert not missing, f"{missing} not in: {caught.value}"


QUICK = {
    "draws": 1,
    "tune": 0,
    "chains": 1,
    "cores": 1,
    "progressbar": False,
    "compute_convergence_checks": False,
}


@pytest.mark.parametrize("name, value, fragments", SET_DATA, ids=SET_DATA_IDS)
def test_set_data_releases_are_checked_again_before_sampling(steps_spy, name, value, fragments):
    model = data_model()
    with model:
        step = pmdp.ReversibleJump()  # built while the releases were valid
        pm.set_data({name: value})
        # pm.sample(step=...) with a step built before pm.set_data: checked at the chain's start
        expect(fragments, lambda: pm.sample(step=step, random_seed=1, **QUICK))
        # pmdp.sample, plain pm.sample() (which builds the package's step), the steps, mcem
        expect(fragments, lambda: pmdp.sample(random_seed=1, **QUICK))
        expect(fragments, lambda: pm.sample(random_seed=1, **QUICK))
        expect(fragments, lambda: pmdp.ReversibleJump())
    expect(fragments, lambda: pmdp.mcem(model, progressbar=False))
    assert steps_spy == []


def test_a_negative_noisy_count_is_a_valid_release():
    """Noisy counts can be negative (``n_dp`` and a count released with DiscreteLaplace): they are
    accepted, and the sampler keeps ``n >= 0``."""
    model = data_model()
    with model:
        pm.set_data({"n_released": -3.0, "c_dp": -2.0})
    check_releases(model)
    with model:
        idata = pmdp.sample(
            draws=30,
            tune=20,
            chains=1,
            cores=1,
            random_seed=2,
            progressbar=False,
            compute_convergence_checks=False,
        )
    n = np.asarray(idata.posterior["n"]).ravel()
    assert n.min() >= 0 and n.max() < 20


# --------------------------------------------------------------------------------------------------
# the record-additivity and row-wise checks
# --------------------------------------------------------------------------------------------------
def x_minus_mean(p=None):
    with pm.Model():
        theta = pm.Beta("theta", 1, 1) if p is None else p
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x - x.mean(), LAPLACE, 0.0)


def covariate(transform):
    """``y | X`` with ``X`` transformed by ``transform`` inside the distribution of ``y``."""

    def build():
        with pm.Model():
            beta = pm.Normal("beta", 0, 1)
            X = pmdp.Records("X", pm.Normal.dist(1, 1), n=30)
            y = pmdp.Records("y", pm.Normal.dist(transform(X) * beta, 1), n=30)
            pmdp.PrivatizedSum(
                "s", pt.clip(y, -3, 3), pmdp.Laplace(epsilon=1.0, sensitivity=6), 1.0
            )

    return build


def two_columns(statistic):
    def build():
        with pm.Model():
            mu = pm.Normal("mu", 0, 1)
            X = pmdp.Records("X", pm.Normal.dist(mu, 1), n=20)
            y = pmdp.Records("y", pm.Poisson.dist(pt.exp(X)), n=20)
            pmdp.PrivatizedSum("s", statistic(X, y), LAPLACE, 1.0)

    return build


NOT_ADDITIVE = [
    ("bernoulli-minus-mean", x_minus_mean, ["PrivatizedSum('s')", "not record-additive"]),
    ("degenerate-records-minus-mean", lambda: x_minus_mean(0.0), ["not record-additive"]),
    ("cumulative-sum", two_columns(lambda X, y: pt.cumsum(y)), ["not record-additive"]),
    ("reversed-partner", two_columns(lambda X, y: X * y[::-1]), ["not record-additive"]),
    ("minus-first-record", two_columns(lambda X, y: X - X[0]), ["not record-additive"]),
    ("share-of-maximum", two_columns(lambda X, y: y / (1 + y.max())), ["not record-additive"]),
    (
        "covariate-centred",
        covariate(lambda X: X - X.mean()),
        ["Records('y')", "`dist`", "mixes rows", "'X'"],
    ),
    ("covariate-sorted", covariate(lambda X: pt.sort(X)), ["Records('y')", "mixes rows"]),
    ("covariate-standardised", covariate(lambda X: X / X.std()), ["Records('y')", "mixes rows"]),
    ("covariate-previous-record", covariate(lambda X: pt.roll(X, 1)), ["mixes rows"]),
]


@pytest.mark.parametrize(
    "build, fragments", [c[1:] for c in NOT_ADDITIVE], ids=[c[0] for c in NOT_ADDITIVE]
)
def test_statistics_and_records_that_mix_rows_are_refused(build, fragments):
    with pytest.raises(ValueError) as caught:
        build()
    missing = [f for f in fragments if f not in str(caught.value)]
    assert not missing, f"{missing} not in: {caught.value}"


def test_row_wise_models_are_accepted():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1, shape=2)
        sigma = pm.HalfNormal("sigma", 1)
        X = pmdp.Records("X", pm.MvNormal.dist(np.zeros(2), np.eye(2)), n=25)
        y = pmdp.Records("y", pm.Normal.dist(X @ beta + pt.switch(X[:, 0] > 0, 1, 0), sigma), n=25)
        count = pmdp.Records("k", pm.Poisson.dist(pt.exp(X[:, 1] - 3)), n=25)
        z = pt.clip(pt.concatenate([X, y[:, None]], axis=1), -3, 3)
        pmdp.PrivatizedSum(
            "xy", z[:, :2] * z[:, 2:], pmdp.Laplace(epsilon=1.0, sensitivity=18), [1, 2]
        )
        pmdp.PrivatizedSum(
            "k_sum", pt.minimum(count, 5), COUNT.__class__(epsilon=1.0, sensitivity=5), 3
        )
        w = pmdp.Records("w", pm.Dirichlet.dist(np.ones(3)), n=15)
        pmdp.PrivatizedSum(
            "logw",
            pt.log(pt.maximum(w, 1e-3)),
            pmdp.Laplace(epsilon=1.0, sensitivity=3 * np.log(1e3)),
            [-20.0, -21.0, -19.0],
        )
    assert [s.name for s in model_blocks(model).sums] == ["xy", "k_sum", "logw"]


def _unbounded_with(term):
    """Unbounded Bernoulli records with ``term(theta, n, x)`` added to the model."""

    def build():
        with pm.Model() as model:
            n = pmdp.SampleSize("n", n_dp=15, mechanism=COUNT, prior=pm.Poisson.dist(15.0))
            theta = pm.Beta("theta", 2, 2)
            x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum("s", x, LAPLACE, observed=5.0)
            term(theta, n, x)
        return model

    return build


TERMS_THE_MOVES_CANNOT_SEE = [
    ("potential-of-n", lambda theta, n, x: pm.Potential("tilt", -0.3 * n), ["'tilt' reads 'n'"]),
    (
        "potential-of-records",
        lambda theta, n, x: pm.Potential("tilt", -0.5 * x.sum()),
        ["'tilt' reads 'x'"],
    ),
    (
        "observed-of-n",
        lambda theta, n, x: pm.Normal("public", n, 1.0, observed=10.0),
        ["observed variable 'public' reads 'n'"],
    ),
    (
        "parameter-of-n",
        lambda theta, n, x: pm.Normal("mu", 0.0, n + 1.0),
        ["parameter 'mu' reads 'n'"],
    ),
]


@pytest.mark.parametrize(
    "term, fragments",
    [c[1:] for c in TERMS_THE_MOVES_CANNOT_SEE],
    ids=[c[0] for c in TERMS_THE_MOVES_CANNOT_SEE],
)
def test_terms_that_read_the_records_or_n_are_refused_before_sampling(term, fragments):
    """The record and birth/death moves evaluate the priors, the records' law, the prior of ``n``
    and the releases only: a Potential (or observed variable, or prior) that reads the records or
    ``n`` used to be silently left out of their targets (with ``pm.Potential("tilt", -0.3 * n)``
    the posterior mean of ``n`` was 14.1-14.4 at both levels against the exact 9.6)."""
    model = _unbounded_with(term)()
    for augment in ("records", "sums"):
        with pytest.raises(ValueError) as caught:
            pmdp.sample(model=model, draws=5, tune=5, chains=1, augment=augment, progressbar=False)
        missing = [
            f for f in [*fragments, "SampleSize(..., prior=...)"] if f not in str(caught.value)
        ]
        assert not missing, f"{missing} not in: {caught.value}"
    with pytest.raises(ValueError, match="left out of their targets"):
        pmdp.mcem(model=model, progressbar=False)


def test_terms_of_the_parameters_only_and_deterministics_of_anything_are_accepted():
    model = _unbounded_with(
        lambda theta, n, x: (
            pm.Potential("tilt", pt.log(theta)),
            pm.Deterministic("share", x.mean()),
            pm.Deterministic("total", n * theta),
            pm.Normal("public", theta, 0.1, observed=0.3),
        )
    )()
    compile_model(model)  # no error


# --------------------------------------------------------------------------------------------------
# a huge n_dp
# --------------------------------------------------------------------------------------------------
def test_a_huge_n_dp_builds_in_bounded_memory_and_records_are_refused_clearly():
    tracemalloc.start()
    start = time.perf_counter()
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=1e9, mechanism=COUNT)
        poisson = pmdp.SampleSize("m", n_dp=1e9, mechanism=COUNT, prior=pm.Poisson.dist(1e9))
    elapsed = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert elapsed < 60 and peak < 50e6, (elapsed, peak)
    assert model.initial_point()["n"] == 10**9 and model.initial_point()["m"] == 10**9
    with model, pytest.raises(ValueError, match="MAX_RECORDS") as caught:
        pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    assert "`n_dp`" in str(caught.value) and str(MAX_RECORDS) in str(caught.value)
    assert model_blocks(model).records == [] and poisson is not None


def test_the_start_of_n_is_the_prior_support_closest_to_n_dp_however_far():
    with pm.Model() as model:
        pmdp.SampleSize("a", n_dp=1e9, mechanism=COUNT, prior=pm.DiscreteUniform.dist(0, 500))
        pmdp.SampleSize("b", n_dp=57, mechanism=COUNT, prior=pm.DiscreteUniform.dist(5000, 6000))
        pmdp.SampleSize("c", n_dp=1e9, mechanism=COUNT, prior=pm.Binomial.dist(123_456_789, 0.5))
        pmdp.SampleSize("d", n_dp=-40, mechanism=COUNT, prior=pm.Geometric.dist(0.1))
        pmdp.SampleSize("e", n_dp=2**40 + 0.4, mechanism=LAPLACE)
        pmdp.SampleSize("f", n_dp=24.7, mechanism=LAPLACE)  # the closest integer, not the floor
    start = model.initial_point()
    assert [int(start[k]) for k in "abcdef"] == [500, 5000, 123_456_789, 1, 2**40, 25]


# --------------------------------------------------------------------------------------------------
# inputs that are handled rather than refused
# --------------------------------------------------------------------------------------------------
def test_equivalent_inputs_are_handled():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=np.float64(12.0))  # a whole float
        pmdp.PrivatizedSum("s", x, COUNT, observed=np.ma.masked_array(5.0))  # nothing masked
        pmdp.PrivatizedSum(
            "t",
            pt.stack([x, 1 - x], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=2),
            observed=np.array([5, 7], dtype=object),
        )
    assert model["x"].eval().shape == (12,)
    assert model.rvs_to_values[model["s"]].data == 5
    # integers against floats, and a column that is missing in the dictionary, still match
    dictionary = pd.DataFrame({"age": [30.0, 40.0, np.nan], "zip": [np.nan, np.nan, np.nan]})
    counts = pmdp.risk.consistent_counts(RECORDS, dictionary)
    assert counts.tolist() == [2, 2, 2]


# --------------------------------------------------------------------------------------------------
# labels of pandas releases, dims declared by length, the start of n, nested record contexts
# --------------------------------------------------------------------------------------------------
def histogram(observed, dims="k", build=None) -> pm.Model:
    """Counts of 3 categories of 10 records released as ``s`` with ``dims`` (``build(model)``
    first, e.g. to declare the dims)."""
    return histogram_model(observed, dims=dims, build=build)


def test_a_one_row_frame_does_label_the_release_with_its_columns():
    """A one-row DataFrame of a 3-vector release: the row axis is dropped, the columns label
    ``dims`` (as the index of a one-column DataFrame does)."""
    frame = pd.DataFrame([[4.0, 3.0, 5.0]], columns=["north", "south", "west"])
    model = histogram(frame)
    assert model.coords["k"] == ("north", "south", "west")
    assert model.rvs_to_values[model["s"]].data.tolist() == [4.0, 3.0, 5.0]
    column = histogram(frame.T)
    assert column.coords["k"] == ("north", "south", "west")


def test_a_release_cut_from_a_longer_table_does_keep_its_row_labels():
    """Rows 5..7 of a table (a ``RangeIndex`` from 5) label the release 5, 6, 7; a default index
    (from 0) gives 0, 1, 2 as well."""
    table = pd.Series(np.arange(10.0))
    assert histogram(table.iloc[5:8]).coords["k"] == (5, 6, 7)
    assert histogram(table.iloc[:3]).coords["k"] == (0, 1, 2)
    with pytest.raises(ValueError, match=r"not the model's coords\['k'\]"):
        histogram(table.iloc[5:8], build=lambda m: m.add_coords({"k": [0, 1, 2]}))


def test_dims_declared_by_length_only_are_checked_against_the_release():
    """``model.add_coord('k', length=...)`` declares a length without labels: a release of
    that length is accepted, one of another length is refused naming both."""
    model = histogram(np.array([4.0, 3.0, 5.0]), build=lambda m: m.add_coord("k", length=3))
    assert model.named_vars_to_dims["s"] == ("k",)
    with pytest.raises(ValueError, match="declares with 4 coordinates"):
        histogram(np.array([4.0, 3.0, 5.0]), build=lambda m: m.add_coord("k", length=4))


def test_the_start_of_n_is_exactly_the_edge_of_the_prior_support():
    """For ``DiscreteUniform(lower, upper)`` (draws far from both edges), ``n`` starts at
    ``lower`` for an ``n_dp`` below it and at ``upper`` for one above it."""
    from pymc_unbounded_dp._inputs import initial_n

    for lower in (1234, 5001, 77_777, 10**7 + 3):
        upper = lower + 10**6 + 1
        prior = pm.DiscreteUniform.dist(lower, upper)
        assert initial_n(prior, 3.0, "test") == lower, lower
        assert initial_n(prior, 4.0 * upper, "test") == upper, upper
        assert initial_n(prior, lower + 17.4, "test") == lower + 17


def test_nested_records_in_containers_does_keep_densities_open_until_the_outer_exit():
    """A diagnostic that vouches for the records inside a step (or another diagnostic) must not
    close the release densities when it is done: the flag goes back to what it was."""
    from pymc_unbounded_dp._registry import records_in_containers
    from pymc_unbounded_dp.errors import FrozenRecordsError

    model = released()
    imputing = model_blocks(model).imputing
    logp = model.compile_logp(mode=QUICK_MODE)  # no C compilation: one-off evaluations
    point = model.initial_point()
    with records_in_containers(model):
        with records_in_containers(model):
            inner = float(logp(point))
        outer = float(logp(point))  # still open
        assert imputing.get_value()
    assert inner == outer and np.isfinite(outer)
    assert not imputing.get_value()
    with pytest.raises(FrozenRecordsError):
        logp(point)
