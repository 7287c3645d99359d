"""Mechanisms: normalisation, moments, simulators and exact release samplers, guarantees."""

import inspect
import math
from fractions import Fraction

import numpy as np
import pytensor.tensor as pt
import pytest
from noise_laws import EPSILON_FAMILIES, Law, assert_draws_follow
from scipy import integrate, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import _secure, laws
from pymc_unbounded_dp.kernels._noise import NoiseArrays, log_ratio, residual_log_density
from pymc_unbounded_dp.mechanisms import discrete_gaussian_log_normalizer

CONTINUOUS = [pmdp.Laplace(scale=1.7), pmdp.Gaussian(sigma=0.8)]
DISCRETE = [
    pmdp.DiscreteLaplace(scale=1.7),
    pmdp.DiscreteLaplace(scale=0.3),
    pmdp.DiscreteGaussian(sigma=0.4),
    pmdp.DiscreteGaussian(sigma=2.5),
    pmdp.DiscreteGaussian(sigma=40.0),
]


@pytest.mark.parametrize("mechanism", CONTINUOUS, ids=repr)
def test_continuous_density_integrates_to_one(mechanism):
    total, _ = integrate.quad(lambda e: np.exp(mechanism.logpdf(e)), -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("mechanism", DISCRETE, ids=repr)
def test_discrete_pmf_sums_to_one_and_moments(mechanism):
    k = np.arange(-4000, 4001)
    pmf = np.exp(mechanism.logpdf(k))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    if isinstance(mechanism, pmdp.DiscreteLaplace):
        q = math.exp(-1 / mechanism.scale)
        assert np.sum(pmf * k**2) == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-10)
    else:
        assert np.sum(pmf * k**2) <= mechanism.sigma**2 + 1e-12  # CKS: variance < sigma^2
    assert mechanism.logpdf(0.5) == -np.inf


def test_discrete_gaussian_normaliser_both_branches_agree_with_direct_sum():
    for sigma in (0.2, 0.99, 1.0, 1.1, 1.2, 3.0, 25.0):  # 1.1: the second series' terms count
        k = np.arange(-3000, 3001)
        direct = math.log(np.sum(np.exp(-(k**2) / (2 * sigma**2))))
        assert discrete_gaussian_log_normalizer(sigma) == pytest.approx(direct, rel=1e-13)


@pytest.mark.parametrize("mechanism", CONTINUOUS + DISCRETE, ids=repr)
def test_pytensor_log_density_equals_numpy(mechanism):
    values = np.array([-3.0, 0.0, 1.0, 7.0])
    np.testing.assert_allclose(
        mechanism.logp(pt.as_tensor(values)).eval(), mechanism.logpdf(values)
    )


@pytest.mark.parametrize("mechanism", CONTINUOUS, ids=repr)
def test_continuous_simulator_matches_cdf(mechanism):
    draws = mechanism.simulate(20000, random_seed=1)
    dist = (
        stats.laplace(scale=mechanism.scale)
        if isinstance(mechanism, pmdp.Laplace)
        else stats.norm(scale=mechanism.scale)
    )
    assert stats.kstest(draws, dist.cdf).pvalue > 1e-3


def _chi_square_pvalue(draws, mechanism):
    values, counts = np.unique(draws, return_counts=True)
    expected = np.exp(mechanism.logpdf(values)) * len(draws)
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], len(draws) - expected[keep].sum())
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("mechanism", DISCRETE, ids=repr)
def test_discrete_simulator_matches_pmf(mechanism):
    draws = mechanism.simulate(20000, random_seed=2)
    assert draws.dtype.kind == "i"
    assert _chi_square_pvalue(draws, mechanism) > 1e-3


@pytest.mark.parametrize(
    "mechanism", [pmdp.DiscreteLaplace(scale=1.5), pmdp.DiscreteGaussian(sigma=1.3)], ids=repr
)
def test_exact_release_matches_pmf(mechanism):
    released = mechanism.release(np.zeros(3000, dtype=int))
    assert released.dtype == np.int64
    assert _chi_square_pvalue(released, mechanism) > 1e-3


def test_exact_bernoulli_exp():
    rng_draws = [_secure.bernoulli_exp(Fraction(3, 2)) for _ in range(4000)]
    p = math.exp(-1.5)
    assert abs(np.mean(rng_draws) - p) < 4 * math.sqrt(p * (1 - p) / 4000)


def test_continuous_release_is_on_a_fine_grid_near_the_value():
    mechanism = pmdp.Laplace(scale=2.0)
    released = mechanism.release(np.full(2000, 10.25))
    assert stats.kstest(released - 10.25, stats.laplace(scale=2.0).cdf).pvalue > 1e-3
    # the grid is the scale times 2**-30, rounded down to a power of 2: 2**-29 here, and no coarser
    steps = (released - 10.25) / 2.0**-29
    assert np.array_equal(steps, np.round(steps)) and np.any(steps % 2 == 1)
    with pytest.raises(ValueError, match="integer-valued"):
        pmdp.DiscreteLaplace(epsilon=1).release([1.5])


@pytest.mark.parametrize("sigma", [0.15, 0.4, 0.999, 1.0, 1.5])
def test_the_discrete_gaussian_normaliser_on_both_sides_of_its_switch(sigma):
    """Direct summation below sigma = 1, Poisson summation from 1: a pmf summing to 1 either way."""
    k = np.arange(-60, 61)
    assert float(np.exp(pmdp.DiscreteGaussian(sigma=sigma).logpdf(k)).sum()) == pytest.approx(
        1.0, abs=1e-14
    )


def test_a_continuous_mechanism_takes_a_real_sensitivity():
    """Only mechanisms on the integers need an integer sensitivity."""
    assert pmdp.Laplace(epsilon=1.0, sensitivity=2.5).scale == 2.5
    assert pmdp.Gaussian(rho=0.5, sensitivity=2.5).sigma == pytest.approx(2.5)
    with pytest.raises(ValueError, match="`sensitivity` must be an integer"):
        pmdp.DiscreteLaplace(epsilon=1.0, sensitivity=2.5)


def test_a_mechanism_is_equal_however_it_was_built():
    assert pmdp.Laplace(epsilon=0.5, sensitivity=2) == pmdp.Laplace(scale=4.0, sensitivity=2)
    assert pmdp.Gaussian(rho=0.5) == pmdp.Gaussian(sigma=1.0)


def test_guarantees_are_computed_from_scale_and_sensitivity():
    assert pmdp.Laplace(epsilon=0.5, sensitivity=9).scale == 18.0
    assert pmdp.Laplace(scale=18.0, sensitivity=9).epsilon == 0.5
    assert pmdp.Laplace(scale=2.0, sensitivity=0).epsilon == 0.0
    assert pmdp.Gaussian(rho=0.125, sensitivity=2).sigma == pytest.approx(4.0)
    assert pmdp.DiscreteGaussian(sigma=2.0, sensitivity=2).rho == pytest.approx(0.5)
    assert pmdp.DiscreteLaplace(epsilon=0.25).privacy == {"epsilon": 0.25}
    assert pmdp.Gaussian(sigma=1.0).privacy == {"rho": 0.5}
    assert pmdp.DiscreteLaplace(epsilon=1).domain == "integers"
    assert pmdp.Laplace(epsilon=1).domain == "reals"


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: pmdp.Laplace(epsilon=0), "epsilon"),
        (lambda: pmdp.Laplace(epsilon=-1), "epsilon"),
        (lambda: pmdp.Laplace(epsilon=math.inf), "epsilon"),
        (lambda: pmdp.Laplace(scale=0), "scale"),
        (lambda: pmdp.Laplace(scale=-1), "`scale` must be finite and > 0"),  # not its epsilon
        (lambda: pmdp.Gaussian(sigma=-1), "`sigma` must be finite and > 0"),
        (lambda: pmdp.Laplace(epsilon=1, scale=1), r"exactly one.*\(got \['epsilon', 'scale'\]\)"),
        (lambda: pmdp.Laplace(epsilon=1, sensitivity=0), "`sensitivity` must be > 0 to calibrate"),
        (lambda: pmdp.Laplace(scale=1).simulate(3, 1, 2), "takes `size` and then keywords only"),
        (lambda: pmdp.Laplace(), "exactly one"),
        (lambda: pmdp.Laplace(epsilon=1, sensitivity=-1), "sensitivity"),
        (lambda: pmdp.Gaussian(rho=0), "rho"),
        (lambda: pmdp.Gaussian(sigma="a"), "number"),
        (lambda: pmdp.DiscreteLaplace(epsilon=1, sensitivity=1.5), "integer"),
        (lambda: pmdp.DiscreteGaussian(rho=1, sensitivity=0), "sensitivity"),
    ],
)
def test_bad_parameters(build, message):
    with pytest.raises((ValueError, TypeError), match=message):
        build()


# --------------------------------------------------------------------------------------------------
# releases outside what the exact samplers represent
# --------------------------------------------------------------------------------------------------
INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("value", [1e19, -1e19, 2**63, np.uint64(2**64 - 1), [0, 2.0**70]])
@pytest.mark.parametrize(
    "mechanism",
    [pmdp.DiscreteLaplace(epsilon=1), pmdp.DiscreteGaussian(sigma=1), pmdp.Tulap(epsilon=1)],
    ids=repr,
)
def test_release_refuses_integers_outside_int64(mechanism, value):
    message = r"`value` -?\d+ is outside the int64 range \[-2\*\*63, 2\*\*63 - 1\]"
    with pytest.raises(ValueError, match=message):
        mechanism.release(value)


def test_discrete_release_never_wraps_around():
    """At the edge of int64 the result is refused when the noise pushes it out, never wrapped."""
    mechanism = pmdp.DiscreteLaplace(epsilon=1)
    outcomes = []
    for _ in range(40):
        try:
            released = mechanism.release(np.array([INT64_MAX]))
        except ValueError as error:
            assert "`value` plus its noise" in str(error) and "int64" in str(error)
            outcomes.append("refused")
        else:
            assert released.dtype == np.int64 and INT64_MAX - 60 < int(released[0]) <= INT64_MAX
            outcomes.append("released")
    assert set(outcomes) == {"refused", "released"}
    low = pmdp.DiscreteLaplace(epsilon=1).release(np.array([-(2**63) + 100]))
    assert -(2**63) <= int(low[0]) < -(2**63) + 200
    # the ends of int64 themselves are inside (noise of scale 1e-3 is 0 but with prob. 2e-434)
    ends = pmdp.DiscreteLaplace(scale=1e-3).release(np.array([-(2**63), 2**63 - 1]))
    assert ends.tolist() == [-(2**63), 2**63 - 1]


@pytest.mark.parametrize("value", [np.nan, np.inf, [1.0, -np.inf]])
@pytest.mark.parametrize("mechanism", CONTINUOUS + DISCRETE[:1] + [pmdp.Tulap(epsilon=1)], ids=repr)
def test_release_refuses_non_finite_values(mechanism, value):
    with pytest.raises(ValueError, match=r"release: `value` must be finite"):
        mechanism.release(value)


@pytest.mark.parametrize("value", [["a"], "3", None])
def test_release_refuses_non_numeric_values(value):
    for mechanism in (pmdp.Laplace(epsilon=1), pmdp.DiscreteLaplace(epsilon=1)):
        with pytest.raises(TypeError, match=r"release: `value` must be numeric"):
            mechanism.release(value)


def test_a_discrete_release_beyond_int64_names_the_first_value_outside(monkeypatch):
    noise = iter([5, 7])
    monkeypatch.setattr(pmdp.DiscreteLaplace, "_exact_draw", lambda self, scale: next(noise))
    with pytest.raises(ValueError, match=rf"`value` plus its noise is {2**63 + 2}, outside"):
        pmdp.DiscreteLaplace(epsilon=1).release(np.array([2**63 - 3, 2**63 - 4]))


def test_discrete_release_keeps_exact_large_integers():
    """int64 inputs are used exactly (no float rounding on the way): 2**62 + 1 stays odd."""
    released = pmdp.DiscreteLaplace(scale=1e-3).release(np.array([2**62 + 1, 2**62 + 2]))
    assert released.tolist() == [2**62 + 1, 2**62 + 2]
    # and Python floats in an object array by a continuous mechanism
    released = pmdp.Laplace(scale=1e-9).release(np.array([1.5, 2], dtype=object))
    np.testing.assert_allclose(released, [1.5, 2.0], atol=1e-6)
    # Python ints in an object array (NumPy's array of big integers) are taken exactly too
    released = pmdp.DiscreteLaplace(scale=1e-3).release(np.array([2**62 + 1, 3], dtype=object))
    assert released.tolist() == [2**62 + 1, 3]
    with pytest.raises(TypeError, match=r"`value` must be numeric, got dtype <U1\."):
        pmdp.DiscreteLaplace(epsilon=1).release(np.array(["1"]))  # strings are not numbers


# --------------------------------------------------------------------------------------------------
# one interface: keyword budgets, a repr with the guarantee, one `simulate` signature
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "positional, spelled, keyword",
    [
        (
            lambda: pmdp.Laplace(1.0, 2.0),
            "pmdp.Laplace(epsilon=1.0, sensitivity=2.0)",
            lambda: pmdp.Laplace(epsilon=1.0, sensitivity=2.0),
        ),
        (
            lambda: pmdp.Laplace(0.5, sensitivity=3),
            "pmdp.Laplace(epsilon=0.5, sensitivity=3)",
            lambda: pmdp.Laplace(epsilon=0.5, sensitivity=3),
        ),
        (lambda: pmdp.Gaussian(2.0), "pmdp.Gaussian(sigma=2.0)", lambda: pmdp.Gaussian(sigma=2.0)),
        (
            lambda: pmdp.DiscreteLaplace(0.5),
            "pmdp.DiscreteLaplace(epsilon=0.5)",
            lambda: pmdp.DiscreteLaplace(epsilon=0.5),
        ),
        (
            lambda: pmdp.DiscreteGaussian(3.0, sensitivity=2),
            "pmdp.DiscreteGaussian(sigma=3.0, sen",
            lambda: pmdp.DiscreteGaussian(sigma=3.0, sensitivity=2),
        ),
        (
            lambda: pmdp.Tulap(0.5, 2),
            "pmdp.Tulap(epsilon=0.5, sensitivity=2)",
            lambda: pmdp.Tulap(epsilon=0.5, sensitivity=2),
        ),
    ],
    ids=[
        "Laplace",
        "Laplace-sensitivity",
        "Gaussian",
        "DiscreteLaplace",
        "DiscreteGaussian",
        "Tulap",
    ],
)
def test_a_positional_budget_still_works_but_warns_with_the_keyword_to_use(
    positional, spelled, keyword
):
    with pytest.warns(FutureWarning, match="deprecated") as caught:
        mechanism = positional()
    assert spelled in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller
    assert mechanism == keyword()  # the keyword form builds it without a warning (errors here)
    with pytest.warns(FutureWarning, match="deprecated") as caught:
        pmdp.Laplace(2.0)  # called from the test itself, not through a lambda: this very line
    assert (caught[0].filename, caught[0].lineno) == (__file__, inspect.currentframe().f_lineno - 1)


def test_positional_arguments_beyond_the_old_ones_or_twice_are_refused():
    with pytest.raises(TypeError, match="by keyword.*`epsilon=`"):
        pmdp.Laplace(1.0, 1.0, 2.0)
    with pytest.raises(TypeError, match="by keyword.*`sigma=`"):
        pmdp.Gaussian(1.0, 2.0)
    with pytest.raises(TypeError, match="`epsilon` given both"):
        pmdp.Laplace(1.0, epsilon=2.0)


@pytest.mark.parametrize(
    "build, argument, instead",
    [
        (lambda: pmdp.Gaussian(epsilon=1), "epsilon", "`rho=` or `sigma=`"),
        (lambda: pmdp.DiscreteGaussian(delta=1e-5, sigma=1), "delta", "`rho=` or `sigma=`"),
        (lambda: pmdp.Laplace(rho=0.5), "rho", "`epsilon=` or `scale=`"),
        (lambda: pmdp.Laplace(epsilon=1.0, delta=1e-6), "delta", "calibrated in pure epsilon-DP"),
        (lambda: pmdp.Tulap(sigma=1.0), "sigma", "`epsilon=` or `scale=`"),
        (lambda: pmdp.DiscreteLaplace(epsilom=1), "epsilom", "`epsilon=`, `scale=`"),
    ],
)
def test_a_budget_the_mechanism_does_not_take_is_named_with_what_to_pass(build, argument, instead):
    with pytest.raises(TypeError) as caught:
        build()
    message = str(caught.value)
    assert f"no argument `{argument}`" in message and instead in message
    assert "Family" not in message and "__init__" not in message and len(message) < 400


def test_repr_shows_the_guarantee_the_sensitivity_and_the_scale():
    assert repr(pmdp.Laplace(epsilon=1.0)) == "Laplace(epsilon=1.0, sensitivity=1.0, scale=1.0)"
    assert repr(pmdp.Laplace(scale=30, sensitivity=9)) == (
        "Laplace(epsilon=0.3, sensitivity=9.0, scale=30.0)"
    )
    assert repr(pmdp.Gaussian(rho=0.125, sensitivity=2)) == (
        "Gaussian(rho=0.125, sensitivity=2.0, sigma=4.0)"
    )
    assert repr(pmdp.DiscreteGaussian(sigma=3.0)) == (
        "DiscreteGaussian(rho=0.0555556, sensitivity=1.0, sigma=3.0)"
    )
    assert repr(pmdp.DiscreteLaplace(epsilon=0.1)) == (
        "DiscreteLaplace(epsilon=0.1, sensitivity=1.0, scale=10.0)"
    )
    assert repr(pmdp.Tulap(epsilon=3.0)) == "Tulap(epsilon=3.0, sensitivity=1.0, scale=0.333333)"


@pytest.mark.parametrize("mechanism", [pmdp.Laplace(epsilon=1), pmdp.DiscreteGaussian(sigma=2)])
def test_simulate_takes_size_and_rng_or_random_seed_by_keyword(mechanism):
    expected = mechanism.simulate(size=(2, 3), rng=5)
    assert expected.shape == (2, 3)
    np.testing.assert_array_equal(mechanism.simulate((2, 3), random_seed=5), expected)
    np.testing.assert_array_equal(
        mechanism.simulate(size=(2, 3), rng=np.random.default_rng(5)), expected
    )
    with pytest.warns(FutureWarning, match=r"write simulate\(\(2, 3\), rng=5\)") as caught:
        np.testing.assert_array_equal(mechanism.simulate((2, 3), 5), expected)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    with pytest.raises(TypeError, match="`rng` or `random_seed`"):
        mechanism.simulate(3, rng=1, random_seed=1)
    for extra in ({"rng": 1}, {"random_seed": 1}):  # a positional seed and a keyword one
        with pytest.raises(TypeError, match=r"takes `size` and then keywords only"):
            mechanism.simulate(3, 5, **extra)
    assert np.ndim(mechanism.simulate(rng=1)) == 0


# --------------------------------------------------------------------------------------------------
# sensitivities other than 1, and scales not derived from epsilon alone (issue 32)
# --------------------------------------------------------------------------------------------------
# The distribution tests above build their mechanisms with sensitivity 1, where the scale equals
# 1 / epsilon (or sigma = 1 / sqrt(2 rho)): a code path that reads `1 / epsilon` where it should
# read `scale` (or drops the sensitivity) passes them all. Here each family is built twice, from a
# budget with a sensitivity of 3 and from a scale with a sensitivity of 4, and its density (NumPy,
# PyTensor, the kernels), simulator and exact release are compared with the law at the scale the
# test computes itself. The plausible slips (scale `1 / epsilon`, `epsilon / sensitivity`,
# `sensitivity / sqrt(rho)`, `sensitivity**2 / sqrt(2 rho)`, ...) move the scale by a factor of
# 1.3 to 9 (variance 1.7 to 80 times); the checks of `noise_laws.assert_draws_follow` detect a
# scale 5% off (20,000 simulated draws) or 10% off (4,000 released draws) with probability > 0.97.
EPSILON, RHO = 0.7, 0.3

NON_UNIT = [
    # (mechanism, family of the law, the scale it must have, its guarantee)
    (pmdp.Laplace(epsilon=EPSILON, sensitivity=3.0), "laplace", 3 / EPSILON, 0.7),
    (pmdp.Laplace(scale=2.6, sensitivity=4.0), "laplace", 2.6, 4 / 2.6),
    (pmdp.Gaussian(rho=RHO, sensitivity=3.0), "normal", 3 / math.sqrt(2 * RHO), 0.3),
    (pmdp.Gaussian(sigma=2.6, sensitivity=4.0), "normal", 2.6, 16 / (2 * 2.6**2)),
    (pmdp.DiscreteLaplace(epsilon=EPSILON, sensitivity=3), "dlaplace", 3 / EPSILON, 0.7),
    (pmdp.DiscreteLaplace(scale=2.6, sensitivity=4), "dlaplace", 2.6, 4 / 2.6),
    (pmdp.DiscreteGaussian(rho=RHO, sensitivity=3), "dgauss", 3 / math.sqrt(2 * RHO), 0.3),
    (pmdp.DiscreteGaussian(sigma=2.6, sensitivity=4), "dgauss", 2.6, 16 / (2 * 2.6**2)),
    (pmdp.Tulap(epsilon=EPSILON, sensitivity=3), "tulap", 3 / EPSILON, 0.7),
    (pmdp.Tulap(scale=2.6, sensitivity=4), "tulap", 2.6, 4 / 2.6),
]
NON_UNIT_IDS = [repr(case[0]) for case in NON_UNIT]


@pytest.mark.parametrize("mechanism, family, scale, guarantee", NON_UNIT, ids=NON_UNIT_IDS)
def test_scale_and_guarantee_with_a_sensitivity_other_than_one(mechanism, family, scale, guarantee):
    assert mechanism.scale == pytest.approx(scale, rel=1e-12)
    ((key, value),) = mechanism.privacy.items()
    assert key == ("epsilon" if family in EPSILON_FAMILIES else "rho")
    assert value == pytest.approx(guarantee, rel=1e-12)
    assert mechanism.kernel_parameters[2] == pytest.approx(scale, rel=1e-12)


@pytest.mark.parametrize("mechanism, family, scale, guarantee", NON_UNIT, ids=NON_UNIT_IDS)
def test_density_in_numpy_pytensor_and_the_kernels_at_a_sensitivity_other_than_one(
    mechanism, family, scale, guarantee
):
    law = Law(family, scale)
    values = np.array([-9.0, -3.0, -1.0, 0.0, 2.0, 5.0, 13.0])
    if not law.discrete:
        values = np.append(values, [-4.3, 0.45, 0.55, 7.7])
    expected = law.logpdf(values)
    np.testing.assert_allclose(mechanism.logpdf(values), expected, rtol=1e-10)
    np.testing.assert_allclose(mechanism.logp(pt.as_tensor(values)).eval(), expected, rtol=1e-10)
    noise = NoiseArrays.of([mechanism], [values.size])
    out = np.empty(values.size)
    residual_log_density(values, out, *noise.per_coordinate)
    np.testing.assert_allclose(out, expected, rtol=1e-10)
    # the kernels' ratio for moving every coordinate by +1 (the Laplace-only fast path too)
    trial = values + 1.0
    ratio = log_ratio(values, trial, out, np.empty(values.size), *noise[:5], noise.custom)
    assert ratio == pytest.approx(np.sum(law.logpdf(trial) - expected), rel=1e-10)
    if law.discrete:
        assert mechanism.logpdf(0.5) == -np.inf
        assert np.all(mechanism.logpdf([0.6, -0.4, 2.7, -1.2]) == -np.inf)


@pytest.mark.parametrize("mechanism, family, scale, guarantee", NON_UNIT, ids=NON_UNIT_IDS)
def test_simulator_at_a_sensitivity_other_than_one(mechanism, family, scale, guarantee):
    draws = mechanism.simulate(20_000, rng=11)
    assert_draws_follow(draws, Law(family, scale), repr(mechanism))


@pytest.mark.parametrize("mechanism, family, scale, guarantee", NON_UNIT, ids=NON_UNIT_IDS)
def test_one_draw_at_a_time_follows_the_law(mechanism, family, scale, guarantee):
    """``simulate()`` without a size, 3,000 seeds: each draw is the first of its own stream (a
    batched sampler that returned a stale first element would fail)."""
    draws = np.array([mechanism.simulate(rng=seed) for seed in range(3_000)])
    assert_draws_follow(draws, Law(family, scale), repr(mechanism))


@pytest.mark.parametrize("mechanism, family, scale, guarantee", NON_UNIT, ids=NON_UNIT_IDS)
def test_exact_release_at_a_sensitivity_other_than_one(mechanism, family, scale, guarantee):
    """4,000 draws of the exact (secure, unseedable) sampler: each check fails a correct sampler
    with probability about 1e-4."""
    law = Law(family, scale)
    value = np.zeros(4_000, dtype=int if mechanism.domain == "integers" else float)
    released = mechanism.release(value + 5)
    assert_draws_follow(released - 5, law, repr(mechanism))


# --------------------------------------------------------------------------------------------------
# the continuous release's grid at scales that are not powers of 2 (issue 32)
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mechanism, grid",
    [
        (pmdp.Laplace(scale=3.0), Fraction(1, 2**29)),
        (pmdp.Gaussian(sigma=0.75), Fraction(1, 2**31)),
    ],
    ids=repr,
)
def test_a_continuous_release_snaps_to_the_nearest_point_of_its_grid_and_draws_in_grid_steps(
    monkeypatch, mechanism, grid
):
    """The grid is the scale times 2**-30 rounded *down* to a power of 2 (3 * 2**-30 -> 2**-29,
    0.75 * 2**-30 -> 2**-31); the statistic goes to its nearest grid point (0.3 is 0.6 of a step
    above one: up; -0.3 down) and the exact sampler draws in grid steps, at the scale in steps.
    Here the sampler is replaced by one that records its scale and returns fixed steps."""
    asked = []

    def draw(self, scale):
        asked.append(scale)
        return 5

    monkeypatch.setattr(type(mechanism), "_exact_draw", draw)
    values = [0.3, -0.3, 10.25, -7.0]
    released = mechanism.release(np.array(values))
    assert asked == [Fraction(mechanism.scale) / grid] * len(values)
    for value, out in zip(values, released.tolist()):
        nearest = round(Fraction(value) / grid)
        assert abs(Fraction(value) / grid - nearest) <= Fraction(1, 2)
        assert Fraction(out) == (nearest + 5) * grid


# --------------------------------------------------------------------------------------------------
# accounting at a sensitivity other than one, and the integer sensitivity of noise on the integers
# --------------------------------------------------------------------------------------------------
def _mean_abs(mechanism, width=3000):
    k = np.arange(-width, width + 1)
    return float(np.abs(k) @ np.exp(mechanism.logpdf(k)))


@pytest.mark.parametrize(
    "mechanism",
    [
        pmdp.DiscreteLaplace(epsilon=1.0, sensitivity=3),
        pmdp.DiscreteGaussian(sigma=2.0, sensitivity=3),
    ],
    ids=repr,
)
def test_the_budget_for_a_mean_absolute_error_does_scale_with_the_sensitivity(mechanism):
    """The budget whose noise has ``E|e| = 2.5`` at sensitivity 3 builds, at sensitivity 3, a
    mechanism with that error (summed over the integers): epsilon three times, rho nine times the
    budget per unit of sensitivity."""
    family = type(mechanism)
    budget = mechanism.budget_for_mean_abs(2.5)
    built = family(**budget.as_dict(), sensitivity=3)
    assert _mean_abs(built) == pytest.approx(2.5, rel=1e-9)
    unit = family(**{family.scale_name: 1.0}, sensitivity=1).budget_for_mean_abs(2.5)
    ((key, value),) = budget.as_dict().items()
    assert value == pytest.approx(unit.as_dict()[key] * (3 if key == "epsilon" else 9), rel=1e-12)


def test_a_discrete_gaussian_does_refuse_a_sensitivity_that_is_not_an_integer():
    for build in (
        lambda: pmdp.DiscreteGaussian(rho=0.5, sensitivity=2.5),
        lambda: pmdp.DiscreteGaussian(sigma=1.0, sensitivity=0.5),
    ):
        with pytest.raises(ValueError, match="`sensitivity` must be an integer"):
            build()
    assert pmdp.DiscreteGaussian(sigma=1.0, sensitivity=2.0).sensitivity == 2.0


# --------------------------------------------------------------------------------------------------
# the kernels' ratio for noise on the integers off the lattice
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mechanism",
    [pmdp.DiscreteLaplace(scale=2.6, sensitivity=4), pmdp.DiscreteGaussian(sigma=2.6)],
    ids=repr,
)
def test_the_kernels_ratio_to_an_off_lattice_residual_of_noise_on_the_integers_is_minus_infinity(
    mechanism,
):
    """Moving a residual of integer noise off the integers has probability 0: a ratio of -inf
    (also for discrete Laplace noise, whose shape is continuous Laplace's), on the lattice the
    ratio of the pmfs."""
    noise = NoiseArrays.of([mechanism], [3])
    residual = np.array([1.0, -2.0, 4.0])
    current = mechanism.logpdf(residual)
    for trial, expected in (
        (np.array([1.5, -2.0, 4.0]), -np.inf),
        (np.array([2.0, -3.0, 0.0]), float(np.sum(mechanism.logpdf([2.0, -3.0, 0.0]) - current))),
    ):
        ratio = log_ratio(residual, trial, current, np.empty(3), *noise[:5], noise.custom)
        assert ratio == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# the exact laws of a table's sums (pymc_unbounded_dp.laws) off their usual setting
# --------------------------------------------------------------------------------------------------
def test_the_law_of_counts_does_allow_a_support_point_of_probability_zero():
    """A support point of probability 0 (a record value the parameters exclude) is never counted:
    the log-pmf is the multinomial's with ``0 log 0 = 0`` (one formula for NumPy and PyTensor),
    ``-inf`` if the point is counted, and births never count it."""
    p = np.array([0.3, 0.0, 0.7])
    with np.errstate(divide="ignore"):
        params = (np.log(p),)
    for counts in ([3.0, 0.0, 7.0], [0.0, 0.0, 10.0], [3.0, 1.0, 6.0]):
        expected = stats.multinomial.logpmf(counts, 10, p)
        assert laws.COUNTS.log_p(np.array(counts), 10, params) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(4)
    born = np.array([laws.COUNTS.draw_new(rng, 6, params) for _ in range(2000)])
    assert np.all(born[:, 1] == 0) and np.all(born.sum(axis=1) == 6)
    # mean 6 * 0.3 = 1.8, sd sqrt(6 * 0.21 / 2000) = 0.025
    assert abs(born[:, 0].mean() - 1.8) < 0.13


def test_zero_records_do_sum_to_the_zero_vector_only():
    """With ``n = 0`` the totals are exactly 0, every coordinate: a vector with opposite
    coordinates (whose plain sum is 0) has probability 0."""
    params = (np.array([0.5, -0.3]), np.array([[1.0, 0.2], [0.2, 2.0]]))
    family = laws.NORMAL_APPROXIMATION
    assert family.log_p(np.zeros(2), 0, params) == 0.0
    assert family.log_p(np.array([1.0, -1.0]), 0, params) == -np.inf
    assert family.log_p(np.array([1.0, -1.0]), 3, params) == pytest.approx(
        stats.multivariate_normal.logpdf([1.0, -1.0], 3 * params[0], 3 * params[1]), rel=1e-12
    )


def test_a_gamma_sum_of_records_does_not_reach_zero():
    """The sum of n >= 1 positive (Gamma) records is positive: density 0 at 0 and below."""
    params = (1.5, 2.0)
    for t in (0.0, -1.0):
        assert laws.GAMMA.log_p(np.array([t]), 3, params) == -np.inf
    assert laws.GAMMA.log_p(np.array([0.5]), 3, params) == pytest.approx(
        stats.gamma.logpdf(0.5, 4.5, scale=2.0), rel=1e-12
    )
