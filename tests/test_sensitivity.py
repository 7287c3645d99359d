"""Sensitivity from the statistic's graph (``_ranges``) and the check in ``PrivatizedSum``."""

import math
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._ranges import statistic_range
from pymc_unbounded_dp._registry import model_blocks
from pymc_unbounded_dp.examples import atus
from pymc_unbounded_dp.examples import regression as reg
from pymc_unbounded_dp.sensitivity import sum_sensitivity

INF = math.inf


@pytest.fixture(scope="module")
def records():
    """A model with records of several families; ``y`` depends on ``X`` row-wise."""
    with pm.Model():
        mu = pm.Normal("mu", 0, 1)
        theta = pm.Beta("theta", 1, 1)
        beta = pm.Normal("beta", 0, 1)
        n = 6
        found = {
            "x": pmdp.Records("x", pm.Normal.dist(mu, 1), n=n),
            "z": pmdp.Records("z", pm.Normal.dist(0, 2), n=n),
            "b": pmdp.Records("b", pm.Bernoulli.dist(theta), n=n),
            "c": pmdp.Records("c", pm.Categorical.dist([0.2, 0.3, 0.5]), n=n),
            "k": pmdp.Records("k", pm.Binomial.dist(7, theta), n=n),
            "u": pmdp.Records("u", pm.Uniform.dist(-2, 3), n=n),
            "d": pmdp.Records("d", pm.DiscreteUniform.dist(1, 6), n=n),
            "p": pmdp.Records("p", pm.Poisson.dist(3), n=n),
            "r": pmdp.Records("r", pm.Beta.dist(2, 2), n=n),
            "hc": pmdp.Records("hc", pm.HalfCauchy.dist(2.0), n=n),
            "wb": pmdp.Records("wb", pm.Weibull.dist(alpha=2.0, beta=1.0), n=n),
            "X": pmdp.Records("X", pm.Normal.dist(0, 1, shape=2), n=n),
            "tri": pmdp.Records("tri", pm.Triangular.dist(lower=-1, c=0.5, upper=2), n=n),
        }
        lower = pm.Uniform("lower", 0, 1)
        found["ul"] = pmdp.Records("ul", pm.Uniform.dist(lower=lower, upper=5), n=n)
        X = found["X"]
        found["y"] = pmdp.Records("y", pm.Bernoulli.dist(pm.math.sigmoid(X[:, 0] * beta)), n=n)
        found["w"] = pmdp.Records("w", pm.Normal.dist(X[:, 1] * beta, 1), n=n)
    return found


def clip(v, a, b):
    return pt.clip(v, a, b)


# (statistic of the records, lower, upper) with the bounds worked out by hand.
CASES = {
    "clip": (lambda r: clip(r["x"], -2, 3), -2, 3),
    "clip squared (pow)": (lambda r: clip(r["x"], -2, 3) ** 2, 0, 9),
    "clip squared (x * x)": (lambda r: clip(r["x"], -2, 1) * clip(r["x"], -2, 1), 0, 4),
    "clip cubed": (lambda r: clip(r["x"], -2, 1) ** 3, -8, 1),
    "product of two clipped records": (lambda r: clip(r["x"], -1, 2) * clip(r["z"], 0, 3), -3, 6),
    "difference": (lambda r: clip(r["x"], -1, 2) - clip(r["z"], 0, 3), -4, 2),
    "rescaled clip": (lambda r: clip(r["x"], -5, 5) / 5, -1, 1),
    "absolute value": (lambda r: abs(clip(r["x"], -4, 1)), 0, 4),
    "minimum": (lambda r: pt.minimum(clip(r["x"], -4, 1), 0.5), -4, 0.5),
    "indicator eq": (lambda r: pt.eq(r["c"], 2), 0, 1),
    "indicator gt, cast": (lambda r: (r["x"] > 0).astype("float64"), 0, 1),
    "switch": (lambda r: pt.switch(r["x"] > 0, clip(r["x"], 0, 4), -1), -1, 4),
    "log of a clamp": (lambda r: pt.log(pt.maximum(r["r"], 0.01)), math.log(0.01), 0),
    "constant offset": (lambda r: clip(r["x"], -1, 1) + 2, 1, 3),
    "times zero": (lambda r: r["x"] * 0, 0, 0),
    "Bernoulli": (lambda r: r["b"], 0, 1),
    "Binomial": (lambda r: r["k"], 0, 7),
    "Categorical": (lambda r: r["c"], 0, 2),
    "Beta": (lambda r: r["r"], 0, 1),
    "Uniform": (lambda r: r["u"], -2, 3),
    "Triangular": (lambda r: r["tri"], -1, 2),  # from its lower to its upper end, not its mode
    "clip with per-record bounds": (
        lambda r: clip(r["x"], np.array([-2.0, -1.0, 0.0, -3.0, 1.0, 0.0]), 3),
        -3,
        3,
    ),  # the hull over the records
    "DiscreteUniform": (lambda r: r["d"], 1, 6),
    "Poisson": (lambda r: r["p"], 0, INF),
    "HalfCauchy": (lambda r: r["hc"], 0, INF),
    "clipped HalfCauchy": (lambda r: pt.minimum(r["hc"], 4), 0, 4),
    "clipped Weibull": (lambda r: pt.minimum(r["wb"], 4), 0, 4),
    "clipped Poisson": (lambda r: pt.minimum(r["p"], 10), 0, 10),
    "Normal": (lambda r: r["x"], -INF, INF),
    "y | X, Bernoulli": (lambda r: r["y"], 0, 1),
    "y | X, clipped normal times X": (
        lambda r: clip(r["w"], -1, 1) * clip(r["X"][:, 0], 0, 2),
        -2,
        2,
    ),
    "y | X, normal": (lambda r: r["w"], -INF, INF),
    "exp of a normal": (lambda r: pt.exp(r["x"]), 0, INF),
    "division by a range with 0": (lambda r: 1 / clip(r["x"], -1, 1), -INF, INF),
    "sigmoid of a clamp": (
        lambda r: pt.sigmoid(clip(r["x"], -1, 2)),
        1 / (1 + math.e),
        1 / (1 + math.exp(-2)),
    ),
    "a negative power of a positive clamp": (lambda r: clip(r["x"], 1, 2) ** -1, 0.5, 1),
    "Uniform from a parameter's range": (lambda r: r["ul"], 0, 5),  # lower ~ Uniform(0, 1)
}


@pytest.mark.parametrize("case", list(CASES))
def test_range_of_a_scalar_statistic(records, case):
    found = records
    build, lower, upper = CASES[case]
    bounds = statistic_range(build(found), list(found.values()))
    assert bounds.lower.shape == bounds.upper.shape == ()
    np.testing.assert_allclose([bounds.lower, bounds.upper], [lower, upper])
    assert bounds.finite == (math.isfinite(lower) and math.isfinite(upper))
    assert bool(bounds.unbounded) != bounds.finite


def test_range_of_stacked_and_indexed_statistics(records):
    found = records
    x, b, c, X = found["x"], found["b"], found["c"], found["X"]
    stacked = pt.stack([clip(x, -1, 1), b, pt.eq(c, 2), clip(x, 0, 3) ** 2, c * 2 - 1], axis=1)
    bounds = statistic_range(stacked, list(found.values()))
    np.testing.assert_allclose(bounds.lower, [-1, 0, 0, 0, -1])
    np.testing.assert_allclose(bounds.upper, [1, 1, 1, 9, 3])

    clamped = pt.clip(X, pt.as_tensor([-1.0, 0.0]), pt.as_tensor([1.0, 4.0]))  # per coordinate
    joined = pt.concatenate([clamped, clamped[:, ::-1], clamped[:, :1] * clamped[:, 1:]], axis=1)
    bounds = statistic_range(joined, list(found.values()))
    np.testing.assert_allclose(bounds.lower, [-1, 0, 0, -1, -4])
    np.testing.assert_allclose(bounds.upper, [1, 4, 4, 1, 4])
    bounds = statistic_range(clamped.sum(axis=1), list(found.values()))
    np.testing.assert_allclose([bounds.lower, bounds.upper], [-1, 5])
    # scalar bounds broadcast over the 2 coordinates: the sum counts both
    bounds = statistic_range(pt.clip(X, -1, 1).sum(axis=1), list(found.values()))
    np.testing.assert_allclose([bounds.lower, bounds.upper], [-2, 2])
    # Advanced indexing takes the hull of the indexed array.
    bounds = statistic_range(clamped[:, [1, 0]], list(found.values()))
    np.testing.assert_allclose(np.broadcast_to(bounds.lower, 2), [-1, -1])
    np.testing.assert_allclose(np.broadcast_to(bounds.upper, 2), [4, 4])
    table = pt.as_tensor(np.array([5.0, -2.0, 7.0]))
    bounds = statistic_range(table[c], list(found.values()))
    np.testing.assert_allclose([bounds.lower, bounds.upper], [-2, 7])


def test_unbounded_ranges_name_the_record_distribution(records):
    found = records
    statistic = pt.stack([clip(found["x"], -1, 1), found["w"]], axis=1)
    bounds = statistic_range(statistic, list(found.values()))
    np.testing.assert_allclose(bounds.lower, [-1, -INF])
    np.testing.assert_allclose(bounds.upper, [1, INF])
    assert bounds.unbounded == ("records 'w' ~ normal",)
    # Operations the check does not understand count as unbounded, and are named.
    bounds = statistic_range(pt.cosh(clip(found["x"], -1, 1)), list(found.values()))
    assert not bounds.finite and "cosh" in bounds.unbounded[0]


def test_censored_and_truncated_records_have_their_bounds():
    with pm.Model(), warnings.catch_warnings():
        # PyMC 5's pm.Truncated calls PyTensor's scan the deprecated way (its own business).
        warnings.simplefilter("ignore", DeprecationWarning)
        c = pmdp.Records("c", pm.Censored.dist(pm.Normal.dist(0, 1), lower=-1, upper=2), n=4)
        t = pmdp.Records("t", pm.Truncated.dist(pm.Poisson.dist(3), lower=1, upper=5), n=4)
        bounds = statistic_range(pt.stack([c, t], axis=1), [c, t])
    np.testing.assert_allclose(bounds.lower, [-1, 1])
    np.testing.assert_allclose(bounds.upper, [2, 5])


def test_the_regression_statistics_give_9_add_remove_and_15_replace_one():
    with pm.Model():
        x1 = pmdp.Records("x1", pm.Normal.dist(0, 1), n=5)
        x2 = pmdp.Records("x2", pm.Normal.dist(x1, 1), n=5)
        y = pmdp.Records("y", pm.Normal.dist(x1 - x2, 1), n=5)
        bounds = statistic_range(reg.regression_statistic_tensor(x1, x2, y), [x1, x2, y])
    # y, x1 y, x2 y, y y, x1, x2, x1 x1, x1 x2, x2 x2: squares in [0, 1], the rest in [-1, 1].
    np.testing.assert_allclose(bounds.lower, [-1, -1, -1, 0, -1, -1, 0, -1, 0])
    np.testing.assert_allclose(bounds.upper, np.ones(9))
    assert sum_sensitivity(bounds.lower, bounds.upper, norm="l1") == reg.SENSITIVITY == 9
    assert sum_sensitivity(bounds.lower, bounds.upper, norm="l1", neighbouring="replace-one") == 15


def test_the_paper_examples_build_without_a_warning():
    data = reg.simulate_regression(n=50, seed=1)
    release = reg.privatize_regression(data, epsilon_s=1.0, epsilon_n=0.5, seed=2)
    atus_release = atus.privatize_atus(atus.simulate_atus(n=50, seed=3), 1.0, 1.0, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.regression_model(release)
        reg.regression_model(release, bounded=True)
        atus.atus_model(atus_release)


def test_reversed_clip_bounds_are_refused_naming_both_numbers():
    for check in (True, False):
        with pm.Model():
            x = pmdp.Records("x", pm.Normal.dist(0, 1), n=5)
            with pytest.raises(ValueError) as caught:
                pmdp.PrivatizedSum(
                    "s",
                    pt.clip(x, 3, -3),
                    pmdp.Laplace(epsilon=1.0, sensitivity=6),
                    observed=1.0,
                    check_sensitivity=check,
                )
        assert caught.type is ValueError
        message = str(caught.value)
        assert "PrivatizedSum('s')" in message and "`statistic`" in message
        assert "pt.clip(x, 3, -3)" in message and "lower bound 3" in message
        assert "upper bound -3" in message and "pt.clip(x, -3, 3)" in message
    with pytest.raises(ValueError, match=r"lower bound 2 is above the upper bound 1"):
        statistic_range(pt.clip(pt.vector("v"), [0.0, 2.0], [1.0, 1.0]), [])


def _release(statistic, mechanism, observed=0.0, records="normal", **kwargs):
    """Build a model with one release; return the warnings it gave (as errors: none expected)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pm.Model() as model:
            theta = pm.Beta("theta", 1, 1)
            dist = pm.Normal.dist(theta, 1) if records == "normal" else pm.Bernoulli.dist(theta)
            x = pmdp.Records("x", dist, n=10)
            pmdp.PrivatizedSum("s", statistic(x), mechanism, observed=observed, **kwargs)
    return model, [w for w in caught if issubclass(w.category, pmdp.SensitivityWarning)], caught


def test_a_declared_sensitivity_below_the_bounds_warns_with_both_numbers():
    _, found, _ = _release(lambda x: pt.clip(x, -3, 3), pmdp.Laplace(epsilon=1.0))
    (warning,) = found
    message = str(warning.message)
    assert issubclass(warning.category, UserWarning)
    assert "PrivatizedSum('s')" in message and "[-3, 3]" in message
    assert "sensitivity of 3 under add/remove" in message and "sensitivity 1 declared" in message
    assert "does not hold" in message and "epsilon=3" in message
    # The other relation is suggested when it would match the declaration.
    _, found, _ = _release(
        lambda x: pt.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), neighbouring="replace-one"
    )
    (warning,) = found
    message = str(warning.message)
    assert "sensitivity of 2 under replace-one" in message and "sensitivity 1 declared" in message
    assert "Under add/remove neighbours they give 1: pass neighbouring='add/remove'" in message


def test_an_l2_mechanism_is_checked_in_l2():
    def stack(x):
        return pt.stack([pt.clip(x, -3, 3), pt.clip(x, -3, 3) ** 2], axis=1)

    _, found, _ = _release(stack, pmdp.Gaussian(rho=0.5, sensitivity=math.sqrt(90)), [0.0, 0.0])
    assert not found
    _, found, _ = _release(stack, pmdp.Gaussian(rho=0.5, sensitivity=9.0), [0.0, 0.0])
    (warning,) = found
    assert "L2 sensitivity of 9.48683" in str(warning.message)
    assert "sensitivity 9 declared" in str(warning.message)


def test_a_declared_sensitivity_above_the_bounds_warns_it_is_conservative():
    _, found, _ = _release(
        lambda x: x, pmdp.Laplace(epsilon=1.0, sensitivity=4), records="bernoulli"
    )
    (warning,) = found
    message = str(warning.message)
    assert "sensitivity of 1 under add/remove" in message and "sensitivity 4 declared" in message
    assert "stronger than stated" in message and "epsilon=0.25" in message


def test_an_unbounded_statistic_with_a_budget_warns():
    mechanism = pmdp.Laplace(epsilon=1.0)
    assert hasattr(mechanism, "from_budget"), "needs the Mechanism.from_budget field"
    _, found, _ = _release(lambda x: x * 2, mechanism)
    (warning,) = found
    message = str(warning.message)
    assert "no finite sensitivity" in message and "records 'x' ~ normal" in message
    assert "pt.clip(x, lower, upper)" in message and "epsilon=1" in message
    # The same noise given by its scale models a release: no claim is checked.
    for by_scale in (pmdp.Laplace(scale=1.0), pmdp.Gaussian(sigma=1.0)):
        _, found, _ = _release(lambda x: x * 2, by_scale)
        assert not found
    _, found, _ = _release(lambda x: x * 2, pmdp.Gaussian(rho=0.5))  # a budget: checked
    assert len(found) == 1 and "rho=0.5" in str(found[0].message)


def test_check_sensitivity_false_silences_every_warning():
    for statistic, mechanism, kind in [
        (lambda x: pt.clip(x, -3, 3), pmdp.Laplace(epsilon=1.0), "normal"),
        (lambda x: x, pmdp.Laplace(epsilon=1.0, sensitivity=4), "bernoulli"),
        (lambda x: x, pmdp.Laplace(epsilon=1.0), "normal"),
    ]:
        model, _, caught = _release(statistic, mechanism, records=kind, check_sensitivity=False)
        assert not caught
        assert model_blocks(model).sums[0].neighbouring == "add/remove"


@pytest.mark.parametrize(
    ("statistic", "mechanism", "observed", "kind", "neighbouring"),
    [
        (lambda x: x, pmdp.Laplace(epsilon=1.0), 3.0, "bernoulli", "add/remove"),
        (lambda x: x, pmdp.DiscreteLaplace(epsilon=1.0), 3, "bernoulli", "replace-one"),
        (lambda x: x, pmdp.DiscreteGaussian(rho=1.0), 3, "bernoulli", "add/remove"),
        (
            lambda x: pt.stack([pt.clip(x, -3, 3), pt.clip(x, -3, 3) ** 2], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=12.0),
            [0.0, 0.0],
            "normal",
            "add/remove",
        ),
        (
            lambda x: pt.stack([pt.clip(x, -3, 3), pt.clip(x, -3, 3) ** 2], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=15.0),
            [0.0, 0.0],
            "normal",
            "replace-one",
        ),
        (lambda x: pt.clip(x, -5, 5) / 5, pmdp.Laplace(scale=2.0), 0.0, "normal", "add/remove"),
        (lambda x: x, pmdp.Laplace(scale=2.0), 0.0, "normal", "add/remove"),
    ],
)
def test_matching_declarations_are_silent(statistic, mechanism, observed, kind, neighbouring):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, _, caught = _release(statistic, mechanism, observed, kind, neighbouring=neighbouring)
    assert not caught
    assert model_blocks(model).sums[0].neighbouring == neighbouring


def test_a_mechanism_without_a_norm_is_not_checked():
    class NoNorm(pmdp.Laplace):
        norm = None

    _, _, caught = _release(lambda x: pt.clip(x, -3, 3), NoNorm(epsilon=1.0))
    assert not caught


def test_bad_neighbouring_and_check_sensitivity_are_refused():
    with pytest.raises(ValueError, match=r"PrivatizedSum\('s'\): `neighbouring` must be one of"):
        _release(lambda x: x, pmdp.Laplace(epsilon=1.0), records="bernoulli", neighbouring="swap")
    with pytest.raises(TypeError, match=r"PrivatizedSum\('s'\): `check_sensitivity` must be"):
        _release(
            lambda x: x, pmdp.Laplace(epsilon=1.0), records="bernoulli", check_sensitivity="no"
        )
