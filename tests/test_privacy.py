"""privacy.py: Guarantee values, their composition and conversion (hand numbers and OpenDP), and the
privacy accounting each mechanism carries (privacy map, calibration), built-in and user-defined."""

import dataclasses
import math

import numpy as np
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.mechanisms import Mechanism, for_budget
from pymc_unbounded_dp.privacy import (
    APPROXIMATE,
    GAUSSIAN_DP,
    PURE,
    ZCDP,
    Guarantee,
    _opendp_prelude,
    compose,
    zero_delta,
)


@pytest.fixture(scope="module")
def dp():
    return _opendp_prelude()


def _float_space(dp):
    return dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)


# -- the value ----------------------------------------------------------------------------------
def test_a_guarantee_is_named_by_its_parameters():
    assert Guarantee(epsilon=1.0).measure == PURE
    assert Guarantee(epsilon=1.0, delta=1e-6).measure == APPROXIMATE
    assert Guarantee(rho=0.5).measure == ZCDP
    assert Guarantee(mu=1.0).measure == GAUSSIAN_DP
    # delta = 0 is pure epsilon-DP
    assert Guarantee(epsilon=1.0, delta=0.0) == Guarantee(epsilon=1.0)
    assert Guarantee(epsilon=1.0, delta=1e-6).as_dict() == {"epsilon": 1.0, "delta": 1e-6}
    assert Guarantee(rho=0.5).epsilon is None
    assert repr(Guarantee(rho=0.5)) == "Guarantee(rho=0.5)"
    assert f"{Guarantee(epsilon=1 / 3, delta=1e-6):.3g}" == "epsilon=0.333, delta=1e-06"
    assert Guarantee.from_dict({"epsilon": 2, "delta": 0}) == Guarantee(epsilon=2.0)
    for bad in ({"epsilon": -1.0}, {"rho": math.nan}, {"epsilon": 1.0, "delta": 1.5}):
        with pytest.raises(ValueError, match=r"`guarantee`: '\w+' must be >= 0 \(delta <= 1\)"):
            Guarantee.from_dict(bad)
    assert Guarantee.from_dict({"epsilon": 1.0, "delta": 1.0}).delta == 1.0  # no guarantee, valid
    # a value: immutable and hashable, equal guarantees hash equal
    with pytest.raises(dataclasses.FrozenInstanceError):
        Guarantee(rho=0.5).rho = 1.0
    assert len({Guarantee(epsilon=1), Guarantee(epsilon=1.0), Guarantee(rho=1.0)}) == 2


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({}, ValueError, "give `epsilon`"),
        ({"rho": 1.0, "epsilon": 1.0}, ValueError, r"got \['epsilon', 'rho'\]"),
        ({"delta": 0.1}, ValueError, "give `epsilon`"),
        ({"epsilon": -1.0}, ValueError, "`epsilon` must be >= 0"),
        ({"epsilon": 1.0, "delta": 2.0}, ValueError, "delta <= 1"),
        ({"rho": math.nan}, ValueError, "`rho` must be >= 0"),
        ({"mu": "1"}, TypeError, "`mu` must be a number"),
        ({"epsilon": True}, TypeError, "`epsilon` must be a number"),
    ],
)
def test_a_guarantee_refuses_what_is_not_one(arguments, error, match):
    with pytest.raises(error, match=match):
        Guarantee(**arguments)


# -- composition ----------------------------------------------------------------------------------
def test_composition_adds_in_each_measure():
    assert compose([Guarantee(epsilon=0.5), Guarantee(epsilon=0.25)]) == Guarantee(epsilon=0.75)
    with pytest.raises(TypeError):  # delta is keyword-only: compose(gs, 1e-6) would be unclear
        compose([Guarantee(rho=0.1)], 1e-6)
    assert Guarantee(epsilon=0.5) + Guarantee(epsilon=0.5, delta=1e-6) == Guarantee(
        epsilon=1.0, delta=1e-6
    )
    assert compose([Guarantee(rho=0.1), Guarantee(rho=0.2)]).rho == pytest.approx(0.3, rel=1e-15)
    assert compose([Guarantee(mu=3.0), Guarantee(mu=4.0)]) == Guarantee(mu=5.0)
    # exactly rounded: the order of the guarantees does not matter
    values = [0.1, 1e-17, 0.2, 3e-17, 0.3]
    forward = compose([Guarantee(epsilon=v) for v in values])
    backward = compose([Guarantee(epsilon=v) for v in reversed(values)])
    assert forward == backward and forward.epsilon == math.fsum(values)


def test_mixed_measures_compose_in_a_common_one():
    # pure -> zCDP (eps^2 / 2) and GDP -> zCDP (mu^2 / 2), then the rhos add
    mixed = compose([Guarantee(rho=0.25), Guarantee(epsilon=1.0), Guarantee(mu=1.0)])
    assert mixed == Guarantee(rho=1.25)
    # (epsilon, delta)-DP with zCDP: the zCDP part converted at the given delta
    with pytest.raises(ValueError, match="give the `delta`"):
        compose([Guarantee(epsilon=1.0, delta=1e-6), Guarantee(rho=0.5)])
    both = compose([Guarantee(epsilon=1.0, delta=1e-6), Guarantee(rho=0.5)], delta=1e-6)
    converted = Guarantee(rho=0.5).to_approx(1e-6)
    assert both == Guarantee(epsilon=1.0 + converted.epsilon, delta=2e-6)
    with pytest.raises(TypeError, match="one or more"):
        compose([])


def test_composition_matches_opendps(dp):
    space = _float_space(dp)
    laplaces = [dp.m.make_laplace(*space, scale=s) for s in (2.0, 4.0, 0.5)]
    gaussians = [dp.m.make_gaussian(*space, scale=s) for s in (1.0, 3.0)]
    ours = compose(Guarantee(epsilon=float(m.map(1.0))) for m in laplaces)
    assert ours.epsilon == pytest.approx(dp.c.make_composition(laplaces).map(1.0), rel=1e-12)
    ours = compose(Guarantee(rho=float(m.map(1.0))) for m in gaussians)
    assert ours.rho == pytest.approx(dp.c.make_composition(gaussians).map(1.0), rel=1e-12)


# -- conversion -----------------------------------------------------------------------------------
def test_pure_dp_to_zcdp_is_half_epsilon_squared_as_in_opendp(dp):
    assert Guarantee(epsilon=1.0).to_zcdp() == Guarantee(rho=0.5)
    assert Guarantee(mu=2.0).to_zcdp() == Guarantee(rho=2.0)
    laplace = dp.m.make_laplace(*_float_space(dp), scale=0.8)
    opendp_rho = dp.c.make_pureDP_to_zCDP(laplace).map(1.0)
    assert Guarantee(epsilon=1.25).to_zcdp().rho == pytest.approx(opendp_rho, rel=1e-12)
    with pytest.raises(ValueError, match="implies no rho-zCDP"):
        Guarantee(epsilon=1.0, delta=1e-6).to_zcdp()


@pytest.mark.parametrize(("rho", "delta"), [(0.5, 1e-6), (0.01, 1e-9), (2.0, 1e-5)])
def test_zcdp_to_approximate_dp_is_opendps_and_within_the_known_bounds(dp, rho, delta):
    converted = Guarantee(rho=rho).to_approx(delta)
    assert converted.measure == APPROXIMATE and converted.delta == delta
    gaussian = dp.m.make_gaussian(*_float_space(dp), scale=1.0 / math.sqrt(2.0 * rho))
    opendp_epsilon, _ = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gaussian), delta).map(1.0)
    assert converted.epsilon == opendp_epsilon
    assert pmdp.release.approx_dp(rho, delta) == converted.epsilon
    # below Bun & Steinke's rho + 2 sqrt(rho log(1/delta)), above the Gaussian mechanism's curve
    mu, epsilon = math.sqrt(2 * rho), converted.epsilon
    gaussian_delta = stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(
        -epsilon / mu - mu / 2
    )
    assert gaussian_delta <= delta
    assert converted.epsilon < rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_no_privacy_loss_converts_to_epsilon_zero():
    assert Guarantee(rho=0.0).to_approx(1e-6) == Guarantee(epsilon=0.0)
    assert Guarantee(mu=0.0).to_approx(1e-6) == Guarantee(epsilon=0.0)


def test_to_approx_keeps_pure_and_approximate_guarantees():
    assert Guarantee(epsilon=1.0).to_approx(1e-6) == Guarantee(epsilon=1.0)
    approximate = Guarantee(epsilon=1.0, delta=1e-6)
    assert approximate.to_approx(1e-5) == approximate
    assert approximate.to_approx(1e-6) == approximate  # at its own delta
    with pytest.raises(ValueError, match="holds for delta >= 1e-06"):
        approximate.to_approx(1e-7)
    for delta in (0.0, -0.1, 1.0, 1.5, True, "0.5"):
        with pytest.raises(ValueError, match=r"`delta` must be in \(0, 1\)"):
            Guarantee(rho=0.5).to_approx(delta)


def test_numpy_numbers_of_any_precision_are_numbers():
    """NumPy scalars (a float32 delta, an int64 epsilon) are taken as Python's numbers are; they
    were once refused, a delta in (0, 1) with a message saying it was not."""
    assert Guarantee(epsilon=np.int64(1)) == Guarantee(epsilon=1.0)
    assert Guarantee(rho=np.float32(0.5)) == Guarantee(rho=0.5)
    expected = Guarantee(rho=0.5).to_approx(float(np.float32(1e-6)))
    assert Guarantee(rho=0.5).to_approx(np.float32(1e-6)) == expected
    parts = [Guarantee(rho=0.5), Guarantee(epsilon=1.0, delta=1e-7)]
    assert compose(parts, delta=np.float32(1e-6)) == compose(parts, delta=float(np.float32(1e-6)))


def test_zero_delta_hand_numbers():
    assert Guarantee(epsilon=1.0).zero_delta() == pytest.approx(math.tanh(0.5))
    assert zero_delta({"epsilon": 1.0, "delta": 0.01}) == pytest.approx(
        (0.02 + math.e - 1) / (math.e + 1)
    )
    assert Guarantee(rho=0.5).zero_delta() == pytest.approx(0.5)
    assert Guarantee(mu=1.0).zero_delta() == pytest.approx(2 * stats.norm.cdf(0.5) - 1)
    assert Guarantee(epsilon=math.inf).zero_delta() == 1.0


# -- each mechanism's own accounting --------------------------------------------------------------
BUILT_IN = [
    pmdp.Laplace(scale=2.5, sensitivity=1.0),
    pmdp.DiscreteLaplace(scale=3.0, sensitivity=2),
    pmdp.Tulap(scale=1.5),
    pmdp.Gaussian(sigma=2.0, sensitivity=1.5),
    pmdp.DiscreteGaussian(sigma=4.0, sensitivity=3),
]


def _opendp_measurement(dp, mechanism):
    """OpenDP's measurement of the same noise on a scalar, and the type of its input distance."""
    if mechanism.norm == "l1":
        if mechanism.discrete or isinstance(mechanism, pmdp.Tulap):
            space = dp.atom_domain(T="i64"), dp.absolute_distance(T="i64")
            return dp.m.make_laplace(*space, scale=mechanism.scale), int
        return dp.m.make_laplace(*_float_space(dp), scale=mechanism.scale), float
    if mechanism.discrete:
        space = dp.atom_domain(T="i64"), dp.absolute_distance(T=float)
        return dp.m.make_gaussian(*space, scale=mechanism.scale), float
    return dp.m.make_gaussian(*_float_space(dp), scale=mechanism.scale), float


@pytest.mark.parametrize("mechanism", BUILT_IN, ids=repr)
@pytest.mark.parametrize("sensitivity", [2, 5])
def test_a_built_in_privacy_map_at_a_sensitivity_other_than_one_is_opendps(
    dp, mechanism, sensitivity
):
    ours = mechanism.privacy_map(sensitivity)
    measurement, distance = _opendp_measurement(dp, mechanism)
    ((key, value),) = ours.as_dict().items()
    assert key == ("epsilon" if mechanism.norm == "l1" else "rho")
    assert value == pytest.approx(float(measurement.map(distance(sensitivity))), rel=1e-9)
    # epsilon grows with the sensitivity, rho with its square; 0 at sensitivity 0
    power = 1 if key == "epsilon" else 2
    unit = mechanism.privacy_map(1).as_dict()[key]
    assert value == pytest.approx(unit * sensitivity**power, rel=1e-14)
    assert mechanism.privacy_map(0).as_dict()[key] == 0.0
    # a sensitivity need not be an integer, even for noise on the integers (an L2 sensitivity of
    # integer sums is a square root)
    assert mechanism.privacy_map(2.5).as_dict()[key] == pytest.approx(unit * 2.5**power, rel=1e-14)
    assert mechanism.guarantee == mechanism.privacy_map(mechanism.sensitivity)
    assert mechanism.privacy == mechanism.guarantee.as_dict()
    with pytest.raises(ValueError, match="`sensitivity` must be finite and >= 0"):
        mechanism.privacy_map(-1.0)


@pytest.mark.parametrize("mechanism", BUILT_IN, ids=repr)
@pytest.mark.parametrize("nats", [3.0, 40.0])
def test_a_built_in_tail_width_is_its_documented_bound(mechanism, nats):
    """``nats * scale + 1`` (Laplace family) and ``sqrt(2 nats) * sigma + 1`` (Gaussian family):
    one unit beyond where the log-density has fallen by ``nats`` (a margin for noise on the
    integers), so the density there is below ``peak - nats`` on both sides, and no wider."""
    reach = (
        nats * mechanism.scale if mechanism.norm == "l1" else math.sqrt(2 * nats) * mechanism.scale
    )
    width = mechanism.tail_width(nats)
    assert width == reach + 1.0
    peak = float(mechanism.logpdf(0.0))
    for e in (-width, width):
        assert float(mechanism.logpdf(e)) < peak - nats


@pytest.mark.parametrize("mechanism", BUILT_IN, ids=repr)
def test_a_built_in_calibration_round_trips(mechanism):
    family = type(mechanism)
    for sensitivity in (1, 3, 7):
        budget = mechanism.privacy_map(sensitivity)
        scale = family.calibrate(budget, sensitivity)
        rebuilt = family(**{family.scale_name: scale}, sensitivity=sensitivity)
        assert rebuilt.scale == pytest.approx(mechanism.scale, rel=1e-14)
        assert rebuilt.privacy_map(sensitivity).as_dict() == pytest.approx(budget.as_dict())
        # the constructor calibrates the same way
        by_budget = family(**budget.as_dict(), sensitivity=sensitivity)
        assert by_budget.scale == scale and by_budget.from_budget
    others = [Guarantee(mu=1.0), Guarantee(epsilon=0.5, delta=1e-6)]
    others += [Guarantee(epsilon=0.0)] if mechanism.norm == "l1" else [Guarantee(rho=0.0)]
    others += [Guarantee(rho=0.5)] if mechanism.norm == "l1" else [Guarantee(epsilon=0.5)]
    for other in others:
        with pytest.raises(ValueError, match="calibrate: `budget` must be"):
            family.calibrate(other, 1.0)


def test_the_budget_for_a_release_follows_the_measure_and_the_domain():
    with pytest.raises(TypeError, match="positional argument"):
        for_budget("epsilon", True)
    assert for_budget("epsilon", integer=False) is pmdp.Laplace
    assert for_budget("epsilon", integer=True) is pmdp.DiscreteLaplace
    assert for_budget("rho", integer=False) is pmdp.Gaussian
    assert for_budget("rho", integer=True) is pmdp.DiscreteGaussian
    with pytest.raises(ValueError, match="'epsilon' or 'rho'"):
        for_budget("delta", integer=False)


def test_the_budget_for_a_large_mean_absolute_error_uses_the_continuous_limit():
    """Beyond an error of 500 the discrete Gaussian's ``E|e|`` is ``sigma sqrt(2 / pi)`` to far
    below 1e-6 (relative): the budget's sigma is ``mean_abs sqrt(pi / 2)``, rho from it."""
    mechanism = pmdp.DiscreteGaussian(sigma=1.0, sensitivity=3)
    rho = mechanism.budget_for_mean_abs(1000.0).rho
    sigma = 3 / math.sqrt(2 * rho)
    assert sigma == pytest.approx(1000.0 * math.sqrt(math.pi / 2), rel=1e-12)
    k = np.arange(-int(12 * sigma), int(12 * sigma) + 1, dtype=float)
    weights = np.exp(-(k**2) / (2 * sigma**2))
    assert float(np.abs(k) @ weights / weights.sum()) == pytest.approx(1000.0, rel=1e-6)


@pytest.mark.parametrize(
    "mechanism", [pmdp.DiscreteLaplace(epsilon=1.0), pmdp.DiscreteGaussian(sigma=2.0)], ids=repr
)
def test_the_budget_for_a_mean_absolute_error_gives_that_error(mechanism):
    target = 0.9 * float(
        np.abs(np.arange(-400, 401)) @ np.exp(mechanism.logpdf(np.arange(-400, 401)))
    )
    family = type(mechanism)
    weakest = family(**mechanism.budget_for_mean_abs(target).as_dict())
    k = np.arange(-600, 601)
    assert float(np.abs(k) @ np.exp(weakest.logpdf(k))) == pytest.approx(target, rel=1e-10)
    # a tiny error (the search's bracket must still hold it) and, without a sensitivity, the
    # budget per unit of sensitivity
    for small in (0.01, 1e-4):  # 1e-4: the discrete Gaussian's sigma 0.22, one term of E|e|
        tiny = family(**mechanism.budget_for_mean_abs(small).as_dict())
        assert float(np.abs(k) @ np.exp(tiny.logpdf(k))) == pytest.approx(small, rel=1e-6)
    wide = family(**mechanism.budget_for_mean_abs(50.0).as_dict())  # sigma ~ 63, scale ~ 50
    k = np.arange(-2000, 2001)
    assert float(np.abs(k) @ np.exp(wide.logpdf(k))) == pytest.approx(50.0, rel=1e-6)
    unit = family(**{family.scale_name: mechanism.scale}, sensitivity=1)
    free = family(**{family.scale_name: mechanism.scale}, sensitivity=0)
    assert free.budget_for_mean_abs(target) == unit.budget_for_mean_abs(target)


# -- user-defined mechanisms ----------------------------------------------------------------------
def _truncated(privacy, **kwargs):
    b, c = 2.0, 5.0
    log_z = float(np.log(2 * b * -np.expm1(-c / b)))

    def logp(e):
        return pt.switch(pt.le(pt.abs(e), c), -pt.abs(e) / b - log_z, -np.inf)

    def simulate(size, rng):
        return np.clip(rng.laplace(0.0, b, size), -c, c)

    return pmdp.CustomMechanism(logp=logp, simulate=simulate, privacy=privacy, **kwargs)


def test_a_custom_mechanism_knows_its_stated_guarantee_and_no_more():
    stated = _truncated({"epsilon": 1.0, "delta": 1e-3}, sensitivity=2.0, norm="l1")
    assert stated.guarantee == Guarantee(epsilon=1.0, delta=1e-3)
    # the stated guarantee holds at any smaller sensitivity; beyond it none is known
    assert stated.privacy_map(1.0) == stated.guarantee == stated.privacy_map(2.0)
    assert stated.privacy_map(3.0) is None
    assert type(stated).calibrate(Guarantee(epsilon=1.0), 1.0) is None
    assert stated.budget_for_mean_abs(1.0) is None
    # no sensitivity declared: no map at all
    assert _truncated({"epsilon": 1.0}).privacy_map(1.0) is None
    # a stated guarantee that is not one of the measures
    odd = _truncated({"rho": 0.5, "delta": 1e-6})
    assert odd.guarantee is None and odd.privacy == {"rho": 0.5, "delta": 1e-6}
    # the tail is found by doubling on the log-density: the support ends at 5
    assert stated.tail_width(20.0) == 8.0


def test_the_default_tail_width_bounds_both_tails_of_an_asymmetric_density():
    """Noise that decays 4 times more slowly below 0: the log-density falls by ``|e| / 4`` on
    the left and ``|e|`` on the right (normaliser 5). The doubling stops only when both tails are
    ``nats`` below the peak: 3 nats are reached at 3 on the right but at 12 on the left."""

    def logp(e):
        return pt.switch(pt.lt(e, 0), e / 4.0, -e) - math.log(5.0)

    def simulate(size, rng):
        left = rng.random(size) < 0.8
        return np.where(left, -rng.exponential(4.0, size), rng.exponential(1.0, size))

    skewed = pmdp.CustomMechanism(logp=logp, simulate=simulate, privacy={"epsilon": 1.0})
    assert skewed.tail_width(3.0) == 16.0
    assert skewed.tail_width(0.5) == 4.0  # left 2, right 0.5: the doubling 1, 2, 4
    # falling by 1 nat at 2**61 and 2 at 2**62: the widest width given is 2**62
    half = 2.0**61
    reaching = pmdp.CustomMechanism(
        logp=lambda e: -pt.abs(e) / half - math.log(2 * half),
        simulate=lambda size, rng: rng.laplace(0.0, half, size),
        privacy={"epsilon": 1.0},
    )
    assert reaching.tail_width(1.0) == 2.0**62
    # noise that falls by 1 nat only at 2**62 has no tail width the sums over n can use
    scale = 2.0**62
    wide = pmdp.CustomMechanism(
        logp=lambda e: -pt.abs(e) / scale - math.log(2 * scale),
        simulate=lambda size, rng: rng.laplace(0.0, scale, size),
        privacy={"epsilon": 1.0},
    )
    with pytest.raises(ValueError, match=r"does not fall 1 below its value at 0 within 2\*\*62"):
        wide.tail_width(1.0)


def test_a_subclass_of_mechanism_without_the_methods_gets_the_defaults():
    class Staircase(Mechanism):
        """Laplace noise stated as 1-DP, without a privacy map or a calibration."""

        discrete = False
        shape_code = pmdp.Laplace.shape_code
        norm = "l1"

        def __init__(self):
            object.__setattr__(self, "scale", 1.0)
            object.__setattr__(self, "sensitivity", 1.0)

        @property
        def privacy(self):
            return {"epsilon": 1.0}

        @property
        def log_normalizer(self):
            return -math.log(2.0)

        def _simulate(self, rng, size):
            return rng.laplace(0.0, 1.0, size)

        def _exact_draw(self, scale):
            raise NotImplementedError

    mechanism = Staircase()
    assert mechanism.guarantee == Guarantee(epsilon=1.0)
    assert mechanism.privacy_map(0.5) == Guarantee(epsilon=1.0)
    assert mechanism.privacy_map(2.0) is None
    assert Staircase.calibrate(Guarantee(epsilon=1.0), 1.0) is None
    assert mechanism.budget_for_mean_abs(1.0) is None
    assert mechanism.tail_width(3.0) == 4.0  # the log-density falls by |e|: 3 nats beyond 3


def test_a_guarantee_takes_its_figures_by_name_only():
    """``Guarantee(1.0)`` could be epsilon, rho or mu: the figures are keyword-only."""
    with pytest.raises(TypeError):
        Guarantee(1.0)
    assert Guarantee(epsilon=1.0).epsilon == 1.0


# -- found by the hand audit of release.py and privacy.py (2026-12-05) -------------------------
def test_gaussian_dp_converts_to_approximate_dp_through_its_zcdp_guarantee():
    """mu-GDP is (mu**2 / 2)-zCDP: mu = 1 converts as rho = 0.5, mu = 2 as rho = 2."""
    for mu, rho in ((1.0, 0.5), (2.0, 2.0), (0.5, 0.125)):
        assert Guarantee(mu=mu).to_approx(1e-6) == Guarantee(rho=rho).to_approx(1e-6)


def test_approximate_dp_composes_with_gdp_and_with_several_zcdp_guarantees_summed_first():
    """The zCDP and GDP guarantees beside an (epsilon, delta)-DP one are composed in zCDP first
    (rhos add, mu = 1 is rho = 0.5), then converted once at ``delta``: one delta, not one each."""
    approximate = Guarantee(epsilon=1.0, delta=1e-6)
    once = Guarantee(rho=1.0).to_approx(1e-6)
    expected = Guarantee(epsilon=1.0 + once.epsilon, delta=2e-6)
    zcdp = [Guarantee(rho=0.25), Guarantee(rho=0.25), Guarantee(mu=1.0)]
    assert compose([approximate, *zcdp], delta=1e-6) == expected
    gdp = compose([approximate, Guarantee(mu=1.0)], delta=1e-6)
    assert gdp == Guarantee(epsilon=1.0 + Guarantee(rho=0.5).to_approx(1e-6).epsilon, delta=2e-6)
    # converting each separately is looser: 0.25 twice costs more than 0.5 once
    assert (
        2 * Guarantee(rho=0.25).to_approx(1e-6).epsilon > Guarantee(rho=0.5).to_approx(1e-6).epsilon
    )


def test_zero_delta_of_zcdp_uses_the_smaller_of_its_two_bounds():
    """Pinsker's sqrt(rho / 2) below rho ~ 1.6, Bretagnolle-Huber's sqrt(1 - e^-rho) above (it
    stays below 1 where Pinsker's exceeds it)."""
    assert Guarantee(rho=0.02).zero_delta() == pytest.approx(0.1, rel=1e-14)
    assert Guarantee(rho=5.0).zero_delta() == pytest.approx(math.sqrt(1 - math.exp(-5.0)))
    assert Guarantee(rho=20.0).zero_delta() == pytest.approx(math.sqrt(-math.expm1(-20.0)))
    assert Guarantee(rho=20.0).zero_delta() < 1.0


def test_zero_delta_never_exceeds_one():
    """(epsilon, 1)-DP gives delta = (2 + e^eps - 1) / (e^eps + 1) = 1 exactly; in floating point
    tanh(eps / 2) + 2 expit(-eps) is one ulp above 1 at some epsilon (0.2 among them)."""
    assert Guarantee(epsilon=0.2, delta=1.0).zero_delta() == 1.0
    for epsilon in np.linspace(0.01, 40.0, 400):
        assert 0.0 <= Guarantee(epsilon=float(epsilon), delta=1.0).zero_delta() <= 1.0


def test_a_guarantee_dict_of_text_is_refused_as_a_type_error():
    for bad in ({"rho": "a"}, {"epsilon": "1e-3x", "delta": 1e-6}):
        with pytest.raises(TypeError, match=r"`guarantee`: '\w+' must be a number"):
            zero_delta(bad)
    with pytest.raises(TypeError, match=r"`budget`: 'mu' must be a number, got 'one'"):
        Guarantee.from_dict({"mu": "one"}, "budget")
