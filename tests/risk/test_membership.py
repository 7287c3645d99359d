"""membership_risk and attribute_risk: closed forms, brute force over the outputs, bad input."""

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytensor.tensor as pt
import pytest
from scipy import integrate, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import release as rl
from pymc_unbounded_dp import risk

Y = np.arange(-600, 601)  # a window of integer outputs with mass < 1e-20 outside, at these scales


def discrete_laplace(k, scale):
    return math.tanh(0.5 / scale) * np.exp(-np.abs(k) / scale)


def laplace(y, scale):
    return math.exp(-abs(y) / scale) / (2.0 * scale)


def crossing_quad(log_a, log_b, x, scale, kind):
    """``integral of min(e^log_a f(y - x), e^log_b f(y))`` over the reals, by quad with the
    breakpoints where the integrand has kinks (0, x and where the two terms cross)."""
    if kind == "laplace":
        f = laplace
        cross = (scale * (log_b - log_a) + x) / 2.0  # on (0, x) the ratio is linear in y
    else:

        def f(y, s):
            return stats.norm.pdf(y, scale=s)

        cross = (scale**2 * (log_b - log_a) + x * x / 2.0) / x if x else 0.0
    points = sorted({0.0, float(x), float(np.clip(cross, -1e3, 1e3))})

    def integrand(y):
        return min(math.exp(log_a) * f(y - x, scale), math.exp(log_b) * f(y, scale))

    pieces = [(-np.inf, points[0])] + list(zip(points[:-1], points[1:])) + [(points[-1], np.inf)]
    return math.fsum(
        integrate.quad(integrand, lo, hi, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
        for lo, hi in pieces
        if hi > lo
    )


# -- closed forms -----------------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.05, 0.5, 1.0, 2.0, 5.0])
def test_closed_forms_of_a_count(epsilon):
    count = rl.Count("n")
    plan = rl.Plan([count], epsilon=epsilon)
    result = risk.membership_risk(plan, {})
    assert abs(result.risk - 1.0 / (1.0 + math.exp(epsilon))) < 1e-12
    assert result.method == "exact" and result.lower == result.upper
    assert result.trivial_risk == 0.5 and result.neighbouring == "add/remove"
    assert abs(result.posterior_odds_bound - math.exp(epsilon)) < 1e-9 * math.exp(epsilon)
    assert abs(result.epsilon_bound - math.exp(epsilon)) < 1e-9 * math.exp(epsilon)
    tulap = risk.membership_risk({"n": (count, pmdp.Tulap(epsilon=epsilon))}, {})
    assert abs(tulap.risk - 1.0 / (1.0 + math.exp(epsilon))) < 1e-12
    continuous = risk.membership_risk({"n": (count, pmdp.Laplace(epsilon=epsilon))}, {})
    assert abs(continuous.risk - math.exp(-epsilon / 2.0) / 2.0) < 1e-12
    rho = epsilon**2 / 2.0
    gaussian = risk.membership_risk({"n": (count, pmdp.Gaussian(rho=rho))}, {})
    mu = math.sqrt(2.0 * rho)
    assert abs(gaussian.risk - stats.norm.cdf(-mu / 2.0)) < 1e-12
    assert gaussian.method == "exact" and gaussian.posterior_odds_bound == math.inf


def test_gaussian_coordinates_combine_into_one_normal():
    plan = rl.Plan([rl.Statistic("s", [-1, 0], [1, 2]), rl.Count("n")], rho=0.5)
    sigma_s = plan.mechanisms["s"].scale
    result = risk.membership_risk(
        {
            "s": (plan.statistics["s"], plan.mechanisms["s"]),
            "n": (plan.statistics["n"], pmdp.Gaussian(sigma=plan.mechanisms["n"].scale)),
        },
        {"s": [0.5, 1.5]},
        prior=0.5,
    )
    mu = math.sqrt((0.5**2 + 1.5**2) / sigma_s**2 + 1.0 / plan.mechanisms["n"].scale ** 2)
    assert abs(result.risk - stats.norm.cdf(-mu / 2.0)) < 1e-12
    assert result.epsilon_bound == math.inf


def test_a_laplace_and_a_gaussian_coordinate_against_two_dimensional_quadrature():
    """A Laplace sum (shift 1.5, scale 1) beside a Gaussian count (shift 1, sigma 1.2): the
    risk integrates both outputs. Every other coordinate mix goes through the same sum; with
    the Laplace shift dropped the risk would be 0.32, not 0.21."""
    b, sigma, shift, prior = 1.0, 1.2, 1.5, 0.4
    plan = {
        "s": (rl.Statistic("s", 0, 2), pmdp.Laplace(scale=b, sensitivity=2.0)),
        "n": (rl.Count("n"), pmdp.Gaussian(sigma=sigma)),
    }
    result = risk.membership_risk(plan, {"s": shift}, prior)
    y1, y2 = np.linspace(-40, 40, 8001), np.linspace(-14, 15, 5801)
    f0 = np.outer(np.exp(-np.abs(y1) / b) / (2 * b), stats.norm.pdf(y2, 0, sigma))
    f1 = np.outer(np.exp(-np.abs(y1 - shift) / b) / (2 * b), stats.norm.pdf(y2, 1, sigma))
    brute = np.minimum(prior * f1, (1 - prior) * f0).sum() * (y1[1] - y1[0]) * (y2[1] - y2[0])
    assert result.lower <= result.risk <= result.upper
    assert result.risk == pytest.approx(brute, abs=1e-5)
    # epsilon with a Gaussian (rho) part is no pure guarantee: no finite epsilon bound
    assert math.isinf(result.epsilon_bound)


@pytest.mark.parametrize(("d", "t"), [(1, 0.7), (3, 1.0), (6, 2.5), (40, 10.0)])
def test_the_discrete_laplace_loss_law_is_the_enumerated_one(d, t):
    """The privacy-loss law of a shift by ``d`` under discrete Laplace noise of scale ``t``,
    atom by atom against the enumeration of ``L(y) = (|y| - |y - d|) / t`` under H0: both of its
    versions (lower and upper values) are the exact law. (The risk alone cannot show a lower
    version that is too high: the risk's lower bound is capped at the upper one.)"""
    from pymc_unbounded_dp.risk._privacy_loss import discrete_laplace_law

    law = discrete_laplace_law(d, t)
    loss = (np.abs(Y) - np.abs(Y - d)) / t
    values, where = np.unique(np.round(loss, 12), return_inverse=True)
    weights = np.bincount(where, weights=discrete_laplace(Y, t))
    assert law.exact and law.missing == 0.0
    for got, got_weights in ((law.lo_values, law.lo_weights), (law.hi_values, law.hi_weights)):
        np.testing.assert_allclose(got, values, rtol=0, atol=1e-12)
        np.testing.assert_allclose(got_weights, weights, rtol=1e-12, atol=1e-15)


# -- brute force: discrete mechanisms --------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
@pytest.mark.parametrize("prior", [0.3, 0.5, 0.8])
def test_count_and_clamped_integer_sum_against_enumeration(epsilon, prior):
    plan = rl.Plan(
        [rl.Statistic("s", -2, 3, integer=True), rl.Count("n")],
        epsilon={"s": epsilon, "n": epsilon / 2},
    )
    t_s, t_n = plan.mechanisms["s"].scale, plan.mechanisms["n"].scale
    for x in (-2, 0, 1, 3):
        result = risk.membership_risk(plan, {"s": x}, prior)
        in_data = prior * np.outer(discrete_laplace(Y - x, t_s), discrete_laplace(Y - 1, t_n))
        absent = (1 - prior) * np.outer(discrete_laplace(Y, t_s), discrete_laplace(Y, t_n))
        assert result.risk == pytest.approx(np.minimum(in_data, absent).sum(), abs=1e-13)
        assert result.trivial_risk == min(prior, 1 - prior)  # guessing the likelier hypothesis
        assert result.advantage == pytest.approx(result.trivial_risk - result.risk, abs=1e-15)
        assert result.method == "exact"


@pytest.mark.parametrize("prior", [0.2, 0.5, 0.7])
def test_replace_one_against_enumeration(prior):
    plan = rl.Plan(
        [rl.Statistic("s", [0, -3], [4, 3], integer=True), rl.Count("n")],
        epsilon=2.0,
        neighbouring="replace-one",
    )
    t = plan.mechanisms["s"].scale
    result = risk.membership_risk(plan, {"s": [4, -1]}, prior, replacement={"s": [1, 2]})
    in_data = prior * np.outer(discrete_laplace(Y - 4, t), discrete_laplace(Y + 1, t))
    replaced = (1 - prior) * np.outer(discrete_laplace(Y - 1, t), discrete_laplace(Y - 2, t))
    assert result.risk == pytest.approx(np.minimum(in_data, replaced).sum(), abs=1e-13)
    assert result.neighbouring == "replace-one" and plan.mechanisms["n"] is None


@pytest.mark.parametrize("prior", [0.5, 0.7])
def test_discrete_gaussian_plan_against_enumeration(prior):
    plan = rl.Plan([rl.Statistic("s", 0, 3, integer=True), rl.Count("n")], rho={"s": 0.3, "n": 0.2})
    pmf_s = np.exp(plan.mechanisms["s"].logpdf(Y - 2)), np.exp(plan.mechanisms["s"].logpdf(Y))
    pmf_n = np.exp(plan.mechanisms["n"].logpdf(Y - 1)), np.exp(plan.mechanisms["n"].logpdf(Y))
    result = risk.membership_risk(plan, {"s": 2}, prior)
    in_data = prior * np.outer(pmf_s[0], pmf_n[0])
    absent = (1 - prior) * np.outer(pmf_s[1], pmf_n[1])
    assert result.risk == pytest.approx(np.minimum(in_data, absent).sum(), abs=1e-13)
    assert result.method == "exact" and result.upper - result.lower < 1e-15
    # the discrete Gaussian's loss is unbounded: no finite bound on the posterior odds
    assert math.isinf(result.posterior_odds_bound)


# -- brute force: continuous mechanisms -------------------------------------------------------------
@pytest.mark.parametrize("prior", [0.35, 0.5, 0.75])
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_count_and_clamped_real_sum_against_quadrature(prior, epsilon):
    plan = rl.Plan([rl.Statistic("s", -1, 2), rl.Count("n")], epsilon={"s": epsilon, "n": 1.0})
    b, t_n = plan.mechanisms["s"].scale, plan.mechanisms["n"].scale
    k = np.arange(-60, 61)
    for x in (-1.0, 0.4, 2.0):
        result = risk.membership_risk(plan, {"s": x}, prior)
        brute = math.fsum(
            crossing_quad(
                math.log(prior * discrete_laplace(j - 1, t_n)),
                math.log((1 - prior) * discrete_laplace(j, t_n)),
                x,
                b,
                "laplace",
            )
            for j in k
        )
        assert result.risk == pytest.approx(brute, abs=1e-10)
        assert result.lower <= result.risk <= result.upper


def test_gaussian_sum_with_discrete_gaussian_count_against_quadrature():
    plan = rl.Plan([rl.Statistic("s", -1, 1), rl.Count("n")], rho={"s": 0.4, "n": 0.3})
    sigma = plan.mechanisms["s"].scale
    pmf = plan.mechanisms["n"].logpdf
    k = np.arange(-40, 41)
    for prior, x in ((0.5, 0.8), (0.3, -1.0)):
        result = risk.membership_risk(plan, {"s": x}, prior)
        brute = math.fsum(
            crossing_quad(
                math.log(prior) + float(pmf(j - 1)),
                math.log(1 - prior) + float(pmf(j)),
                x,
                sigma,
                "gaussian",
            )
            for j in k
        )
        assert result.risk == pytest.approx(brute, abs=1e-10)


def test_two_laplace_coordinates_on_the_lattice_against_nested_quadrature():
    """Replace-one with a 2-vector real sum: one coordinate exact, the other on the lattice."""
    plan = rl.Plan([rl.Statistic("s", [0, -1], [2, 1])], epsilon=1.5, neighbouring="replace-one")
    b, prior = plan.mechanisms["s"].scale, 0.45
    result = risk.membership_risk(plan, {"s": [1.7, 0.5]}, prior, replacement={"s": [0.2, -0.6]})
    (x1, x2), (z1, z2) = (1.7, 0.5), (0.2, -0.6)

    def inner(y2):
        log_a = math.log(prior * laplace(y2 - x2, b))
        log_b = math.log((1 - prior) * laplace(y2 - z2, b))
        return crossing_quad(log_a, log_b, x1 - z1, b, "laplace")

    brute = integrate.quad(inner, -60, 60, points=[z2, x2], epsabs=1e-12, limit=200)[0]
    assert result.method == "quadrature"
    assert result.lower <= brute + 1e-9 and brute - 1e-9 <= result.upper
    assert result.upper - result.lower < 1e-5
    assert result.risk == pytest.approx(brute, abs=1e-8)


def test_custom_mechanism_matches_the_builtin_within_its_bounds():
    scale = 2.0
    custom = pmdp.CustomMechanism(
        logp=lambda e: -pt.abs(e) / scale - math.log(2 * scale),
        simulate=lambda size, rng: rng.laplace(0.0, scale, size),
        privacy={"epsilon": 0.5},
        sensitivity=1.0,
        norm="l1",
    )
    statistic = rl.Statistic("s", 0, 1, integer=True)
    given = {"s": (statistic, pmdp.DiscreteLaplace(epsilon=1.0))}
    result = risk.membership_risk({**given, "n": (rl.Count(), custom)}, {"s": 1}, 0.4)
    builtin = risk.membership_risk(
        {**given, "n": (rl.Count(), pmdp.Laplace(scale=scale))}, {"s": 1}, 0.4
    )
    assert result.method == "quadrature"
    assert result.lower <= builtin.risk <= result.upper
    assert result.risk == pytest.approx(builtin.risk, abs=1e-5)
    assert result.posterior_odds_bound == pytest.approx(builtin.posterior_odds_bound, rel=1e-9)


@pytest.mark.parametrize("noisy", ["n", "s"])
def test_a_discrete_custom_mechanism_matches_the_builtin_to_rounding(noisy):
    """A discrete ``CustomMechanism`` (the discrete Laplace pmf, one atom per integer) against the
    built-in ``DiscreteLaplace`` of the same scale, on the count (shift 1) and on a sum (shift 2):
    the same atoms, so the same risk to rounding. The loss atoms are weighted by the pmf without
    the record (H0); weights under H1 give E_1 g(L), another number (here the trivial 0.3)."""
    scale = 1.5
    q = math.exp(-1.0 / scale)
    log_norm = math.log((1 - q) / (1 + q))
    custom = pmdp.CustomMechanism(
        logp=lambda e: -pt.abs(e) / scale + log_norm,
        simulate=lambda size, rng: rng.geometric(1 - q, size) - rng.geometric(1 - q, size),
        privacy={"epsilon": 1 / scale},
        sensitivity=1.0 if noisy == "n" else 3.0,
        norm="l1",
        domain="integers",
        discrete=True,
    )
    builtin = pmdp.DiscreteLaplace(scale=scale, sensitivity=custom.sensitivity)
    statistic = rl.Statistic("s", 0, 3, integer=True)
    others = {
        "s": pmdp.DiscreteLaplace(epsilon=0.8, sensitivity=3),
        "n": pmdp.DiscreteLaplace(epsilon=1.0),
    }
    statistics = {"s": statistic, "n": rl.Count()}

    def plan(mechanism):
        chosen = {**others, noisy: mechanism}
        return {name: (statistics[name], chosen[name]) for name in statistics}

    result = risk.membership_risk(plan(custom), {"s": 2}, 0.3)
    exact = risk.membership_risk(plan(builtin), {"s": 2}, 0.3)
    assert (result.method, exact.method) == ("quadrature", "exact")
    assert exact.risk < 0.3 - 0.02  # the record is exposed: a slip in the weights shows
    assert result.risk == pytest.approx(exact.risk, abs=1e-12)
    assert result.lower <= exact.risk + 1e-12 and exact.risk - 1e-12 <= result.upper


# -- behaviour -------------------------------------------------------------------------------------
@pytest.mark.parametrize("rho", [False, True])
def test_risk_rises_toward_the_trivial_risk_as_epsilon_shrinks(rho):
    budgets = [0.01, 0.1, 0.5, 1.0, 2.0, 4.0]
    risks = []
    for budget in budgets:
        plan = rl.Plan(
            [rl.Statistic("s", 0, 5), rl.Count("n")], **{"rho" if rho else "epsilon": budget}
        )
        result = risk.membership_risk(plan, {"s": 3.0}, 0.5)
        assert result.lower <= result.risk <= result.upper <= result.trivial_risk
        assert result.advantage == pytest.approx(result.trivial_risk - result.risk)
        if not rho:
            assert result.posterior_odds_bound <= result.epsilon_bound * (1 + 1e-12)
        risks.append(result.risk)
    assert all(a > b for a, b in zip(risks, risks[1:]))
    assert risks[0] > 0.47 and risks[-1] < 0.2


def test_posterior_odds_bound_is_the_records_own_factor():
    plan = rl.Plan([rl.Statistic("s", -2, 4), rl.Count("n")], epsilon={"s": 1.2, "n": 0.3})
    result = risk.membership_risk(plan, {"s": -1.5})
    scale = plan.mechanisms["s"].scale  # 4 / 1.2
    assert result.posterior_odds_bound == pytest.approx(math.exp(1.5 / scale + 0.3), rel=1e-12)
    assert result.epsilon_bound == pytest.approx(math.exp(1.5), rel=1e-12)


def test_attribute_risk_of_two_candidates_is_replace_one_membership():
    plan = rl.Plan(
        [rl.Statistic("s", 0, 4), rl.Count("n")], epsilon=3.0, neighbouring="replace-one"
    )
    membership = risk.membership_risk(plan, {"s": 3.0}, 0.4, replacement={"s": 0.5})
    attribute = risk.attribute_risk(plan, [{"s": 3.0}, {"s": 0.5}], [0.4, 0.6])
    assert attribute.risk == membership.risk < attribute.trivial_risk == 0.4


def test_attribute_risk_of_three_candidates_against_enumeration_and_quadrature():
    prior = [0.2, 0.5, 0.3]
    candidates = [{"s": 0}, {"s": 2}, {"s": 4}]
    discrete = rl.Plan([rl.Statistic("s", 0, 4, integer=True), rl.Count("n")], epsilon=6.0)
    t = discrete.mechanisms["s"].scale
    result = risk.attribute_risk(discrete, candidates, prior)
    best = np.max([p * discrete_laplace(Y - c["s"], t) for p, c in zip(prior, candidates)], 0)
    assert result.risk == pytest.approx(1 - best.sum(), abs=1e-13)
    # the same under a discrete Gaussian (its pmf by direct normalisation over the integers)
    dgauss = rl.Plan([rl.Statistic("s", 0, 4, integer=True), rl.Count("n")], rho=2.0)
    sigma = dgauss.mechanisms["s"].scale

    def pmf(e):
        weights = np.exp(-(Y.astype(float) ** 2) / (2 * sigma**2))
        return np.exp(-(e.astype(float) ** 2) / (2 * sigma**2)) / weights.sum()

    best = np.max([p * pmf(Y - c["s"]) for p, c in zip(prior, candidates)], 0)
    result = risk.attribute_risk(dgauss, candidates, prior)
    assert result.risk == pytest.approx(1 - best.sum(), abs=1e-12)
    assert result.method == "exact" and result.risk < result.trivial_risk == 0.5

    continuous = rl.Plan([rl.Statistic("s", 0, 4), rl.Count("n")], epsilon=6.0)
    b = continuous.mechanisms["s"].scale
    result = risk.attribute_risk(continuous, candidates, prior)

    def envelope(y):
        return max(p * laplace(y - c["s"], b) for p, c in zip(prior, candidates))

    brute = 1 - integrate.quad(envelope, -80, 80, points=[0, 1, 2, 3, 4], limit=400)[0]
    assert result.method == "quadrature"
    assert result.lower <= brute <= result.upper and result.upper - result.lower < 1e-4
    assert result.risk == pytest.approx(brute, abs=1e-8)
    assert result.advantage == pytest.approx(result.trivial_risk - result.risk, abs=1e-15)

    gaussian = rl.Plan([rl.Statistic("s", 0, 4), rl.Count("n")], rho=2.0)
    sigma = gaussian.mechanisms["s"].scale
    result = risk.attribute_risk(gaussian, candidates, prior)

    def gaussian_envelope(y):
        return max(p * stats.norm.pdf(y, c["s"], sigma) for p, c in zip(prior, candidates))

    brute = 1 - integrate.quad(gaussian_envelope, -60, 60, points=[0, 2, 4], limit=400)[0]
    assert result.lower <= brute <= result.upper and result.risk == pytest.approx(brute, abs=1e-8)
    # candidates that no release tells apart: the attacker guesses the likeliest, 1 - 0.5
    same = risk.attribute_risk(continuous, [{"s": 1.0}] * 3, prior)
    assert same.risk == same.trivial_risk == 0.5


def test_attribute_risk_refuses_too_many_continuous_coordinates():
    plan = rl.Plan([rl.Statistic("s", [0] * 4, 1)], epsilon=1.0)
    candidates = [{"s": [0, 0, 0, 0]}, {"s": [1, 1, 1, 1]}, {"s": [0.5] * 4}]
    with pytest.raises(NotImplementedError, match="4 coordinates with continuous noise"):
        risk.attribute_risk(plan, candidates)


# -- bad input -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plan():
    return rl.Plan([rl.Statistic("s", 0, 10), rl.Count("n")], epsilon=1.0)


@pytest.mark.parametrize(
    "call, error, pattern",
    [
        (lambda p: risk.membership_risk(p, {"s": 11.0}), ValueError, r"`record`\['s'\].*outside"),
        (lambda p: risk.membership_risk(p, {"s": -1}), ValueError, r"clamps each record"),
        (lambda p: risk.membership_risk(p, {}), ValueError, r"`record`.*missing \['s'\]"),
        (lambda p: risk.membership_risk(p, {"s": 1, "t": 2}), ValueError, r"not in the plan"),
        (lambda p: risk.membership_risk(p, {"s": 1}, 0.0), ValueError, r"`prior`"),
        (lambda p: risk.membership_risk(p, {"s": 1}, 1.0), ValueError, r"`prior`"),
        (lambda p: risk.membership_risk(p, {"s": 1}, 1.5), ValueError, r"`prior`"),
        (lambda p: risk.membership_risk(p, {"s": [1, 2]}), ValueError, r"`record`\['s'\].*shape"),
        (
            lambda p: risk.membership_risk(p, {"s": 1}, replacement={"s": 2}),
            ValueError,
            r"`replacement`.*attribute_risk",
        ),
        (
            lambda p: risk.attribute_risk(p, [{"s": 1}, {"s": 2}], [0.5, 0.6]),
            ValueError,
            r"`prior` must sum to 1",
        ),
        (
            lambda p: risk.attribute_risk(p, [{"s": 1}, {"s": 2}], [1.0, 0.0]),
            ValueError,
            r"`prior` must be positive",
        ),
        (
            lambda p: risk.attribute_risk(p, [{"s": 1}, {"s": 12}]),
            ValueError,
            r"`candidates\[1\]`\['s'\].*outside",
        ),
        (lambda p: risk.attribute_risk(p, [{"s": 1}]), ValueError, r"at least two"),
        (lambda p: risk.membership_risk([p], {"s": 1}), TypeError, r"`plan`"),
    ],
)
def test_bad_input_names_the_argument(plan, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(plan)


def test_replace_one_needs_a_replacement():
    plan = rl.Plan([rl.Statistic("s", 0, 1)], epsilon=1.0, neighbouring="replace-one")
    with pytest.raises(ValueError, match="pass `replacement=`"):
        risk.membership_risk(plan, {"s": 1})


def test_a_mapping_refuses_a_mechanism_calibrated_below_the_bounds():
    statistic = rl.Statistic("s", 0, 10)
    with pytest.raises(ValueError, match="calibrated to sensitivity 1"):
        risk.membership_risk({"s": (statistic, pmdp.Laplace(epsilon=1.0))}, {"s": 1})


def test_attribute_risk_of_a_mapping_accepts_the_add_remove_calibration():
    """A statistic whose bounds straddle 0: add/remove sensitivity 3, replace-one 4. A mapping's
    mechanism is checked against the smaller of the two (either relation is a valid release), so
    Laplace calibrated to 3 is accepted, and below 3 refused. The risk is the two-candidate Bayes
    error by hand: 0.5 * (1 - TV) with TV = 1 - exp(-shift / (2 b)) between Laplace laws."""
    statistic = rl.Statistic("s", -3, 1)
    candidates = [{"s": -3.0}, {"s": 1.0}]
    calibrated = {"s": (statistic, pmdp.Laplace(scale=3.0, sensitivity=3.0))}
    result = risk.attribute_risk(calibrated, candidates)
    assert result.risk == pytest.approx(0.5 * math.exp(-4.0 / 6.0), rel=1e-12)
    below = {"s": (statistic, pmdp.Laplace(scale=3.0, sensitivity=2.5))}
    with pytest.raises(
        ValueError, match="calibrated to sensitivity 2.5 but the statistic's bounds give 3"
    ):
        risk.attribute_risk(below, candidates)


# -- the seed paper's framework --------------------------------------------------------------------
def test_relation_to_the_decision_theoretic_framework():
    """Small-cell suppression (Lebanon et al. 2006) and a DP count of the same table, side by side.

    Both numbers are probabilities of a correct guess under 0-1 loss, for different attackers:
    the seed's loss with Phi = 1 is 1/|rho|, the chance that an attacker who knows the
    quasi-identifiers (the dictionary) and picks uniformly among the consistent entries names the
    released row's person; 1 - attribute_risk is the best attacker's chance of naming the
    target's diagnosis when it knows every other record. docs/risk.md states the comparison.
    """
    records = pd.DataFrame(
        {
            "zip": ["A", "A", "A", "B", "B", "C"],
            "age": [30, 30, 40, 30, 30, 50],
            "diagnosis": [0, 1, 1, 0, 1, 1],
        },
        index=[f"p{i}" for i in range(1, 7)],
    )
    dictionary = records[["zip", "age"]]
    small = records.groupby(["zip", "age"])["zip"].transform("size") < 2  # p3 and p6
    rule = pd.DataFrame(True, index=records.index, columns=records.columns)
    rule.loc[small, ["zip", "age"]] = False
    losses = risk.losses(records, rule, dictionary, risk.constant(1.0))
    # p1, p2: class (A, 30) of 2; p4, p5: (B, 30) of 2; p3, p6 suppressed: all 6 consistent.
    assert losses.tolist() == [0.5, 0.5, 1 / 6, 0.5, 0.5, 1 / 6]
    assert risk.risk(records, rule, dictionary, risk.constant(1.0)) == pytest.approx(7 / 18)
    # Against the stronger attacker (every other record known), suppression does not protect:
    # the released rows minus the others' leave p6's row, diagnosis included.
    released = Counter(risk.disclose(records, rule).astype(str).itertuples(index=False))
    others = Counter(
        risk.disclose(records, rule).drop(index="p6").astype(str).itertuples(index=False)
    )
    (left,) = (released - others).elements()
    assert left.diagnosis == str(records.loc["p6", "diagnosis"])

    # The DP alternative: the number of diagnoses per zip (one-hot, clamped to [0, 1]) and n.
    epsilon = 1.0
    plan = rl.Plan(
        [rl.Statistic("cases", [0, 0, 0], 1, integer=True), rl.Count("n")],
        epsilon={"cases": epsilon, "n": epsilon},
    )
    p6 = {"cases": [0, 0, records.loc["p6", "diagnosis"]]}
    attribute = risk.attribute_risk(plan, [p6, {"cases": [0, 0, 0]}])
    share = epsilon / 3  # the bounds give L1 sensitivity 3: each zip costs a third
    assert 1 - attribute.risk == pytest.approx(math.exp(share) / (1 + math.exp(share)), abs=1e-12)
    membership = risk.membership_risk(plan, p6)
    assert membership.risk < attribute.risk < 0.5  # n and the count both move under add/remove
    # The uniform guesser of the seed's framework is the trivial attacker of ours: one guess among
    # the 6 identities the dictionary cannot tell apart succeeds with 1/6 = 1 - trivial risk.
    everyone = [{"cases": [0, 0, 0]}] * 6
    nothing = risk.attribute_risk(plan, everyone)
    assert 1 - nothing.risk == pytest.approx(1 / 6) == losses["p6"]


def test_a_release_and_a_dict_of_pairs_give_the_plans_risk():
    plan = rl.Plan([rl.Statistic("s", 0, 3, integer=True), rl.Count("n")], epsilon=1.0)
    release = plan.release(sums={"s": 10}, n=8, sampler="pmdp")
    pairs = {name: (plan.statistics[name], plan.mechanisms[name]) for name in plan.statistics}
    expected = risk.membership_risk(plan, {"s": 2}, 0.4)
    assert risk.membership_risk(release, {"s": 2}, 0.4) == expected
    assert risk.membership_risk(pairs, {"s": 2}, 0.4) == expected
    with pytest.raises(TypeError, match=r"`plan`\['s'\] must be a pair"):
        risk.membership_risk(dict(plan.mechanisms), {"s": 2})
    with pytest.raises(TypeError, match="with at least one entry; got an empty dict"):
        risk.membership_risk({}, {})


def test_a_replace_one_release_needs_a_replacement_as_its_plan_does():
    """A Release keeps its plan's neighbouring relation: replace-one (``n`` public) needs the
    record that replaces the target, and with it the risk is the plan's. Without the relation the
    release would be taken as add/remove and the target compared with its absence."""
    plan = rl.Plan(
        [rl.Statistic("s", 0, 3, integer=True), rl.Count("n")],
        epsilon=1.0,
        neighbouring="replace-one",
    )
    release = plan.release(sums={"s": 10}, n=8, sampler="pmdp")
    expected = risk.membership_risk(plan, {"s": 3}, 0.4, replacement={"s": 0})
    assert expected.neighbouring == "replace-one"
    assert risk.membership_risk(release, {"s": 3}, 0.4, replacement={"s": 0}) == expected
    with pytest.raises(ValueError, match="pass `replacement=`"):
        risk.membership_risk(release, {"s": 3}, 0.4)


def test_a_releases_integer_statistic_takes_integer_records_only():
    """The statistics read back from a Release keep ``integer=True``: a record of 1.5 for a count
    of integers released with discrete noise is refused, as it is for the plan."""
    plan = rl.Plan([rl.Statistic("s", 0, 3, integer=True), rl.Count("n")], epsilon=1.0)
    release = plan.release(sums={"s": 10}, n=8, sampler="pmdp")
    for given in (plan, release):
        with pytest.raises(ValueError, match=r"`record`\['s'\] must be integer-valued"):
            risk.membership_risk(given, {"s": 1.5}, 0.4)


def test_a_vector_record_with_one_coordinate_outside_the_bounds_is_refused():
    """Every coordinate is checked against the bounds ``[0, 4] x [-2, 2]``: ``[2, 3]`` (the second
    above 2) and ``[-1, 0]`` (the first below 0) are refused though their other coordinate lies
    within, for membership_risk's record and attribute_risk's candidates alike."""
    plan = rl.Plan([rl.Statistic("s", [0, -2], [4, 2]), rl.Count("n")], epsilon=1.0)
    for record in ({"s": [2, 3]}, {"s": [-1, 0]}):
        with pytest.raises(ValueError, match=r"`record`\['s'\] = .* outside the plan's declared"):
            risk.membership_risk(plan, record)
        with pytest.raises(ValueError, match=r"`candidates\[1\]`\['s'\] = .* outside the plan's"):
            risk.attribute_risk(plan, [{"s": [1, 1]}, record])


def test_an_exactly_released_value_that_moves_leaves_no_epsilon_bound():
    """A dict plan releasing a sum exactly: its guarantee cannot bound the odds (the sum moves
    between neighbours), so ``epsilon_bound`` is ``inf``, never below the posterior odds bound;
    a count released exactly under replace-one does not move and keeps the sum's ``e``."""
    exact_sum = {
        "s": (rl.Statistic("s", 0, 3, integer=True), None),
        "n": (rl.Count("n"), pmdp.DiscreteLaplace(epsilon=1.0)),
    }
    r = risk.membership_risk(exact_sum, {"s": 2})
    assert math.isinf(r.posterior_odds_bound) and math.isinf(r.epsilon_bound)
    exact_count = {
        "s": (
            rl.Statistic("s", 0, 3, integer=True),
            pmdp.DiscreteLaplace(epsilon=1.0, sensitivity=3),
        ),
        "n": (rl.Count("n"), None),
    }
    r = risk.membership_risk(exact_count, {"s": 2}, replacement={"s": 0})
    assert r.epsilon_bound == pytest.approx(math.e, rel=1e-12)
    assert r.posterior_odds_bound <= r.epsilon_bound * (1 + 1e-12)
    unbounded = risk.membership_risk(exact_count, {"s": 2})  # add/remove: the count moves
    assert math.isinf(unbounded.epsilon_bound)


@pytest.mark.parametrize("prior", [0.3, 0.7])
def test_a_release_that_cannot_cross_the_decision_threshold_has_exactly_the_trivial_risk(prior):
    """No output moves the posterior odds past the prior's threshold (``sup |L|`` below
    ``|log((1 - prior) / prior)|``): the best attacker answers by the prior, so the risk is exactly
    ``min(prior, 1 - prior)`` and the advantage 0 (quadrature once gave 1.8e-7 less). Just above
    the threshold the release helps, by a margin no rounding explains."""
    plan = rl.Plan([rl.Statistic("s", [0.0, 0.0], [2.1, 2.1]), rl.Count("n")], epsilon=1.0)
    record = np.array([1.5229373171527942, 1.08529468414046])
    threshold = abs(math.log((1 - prior) / prior))
    below = risk.membership_risk(plan, {"s": record}, prior=prior)
    assert math.log(below.posterior_odds_bound) < threshold < math.log(below.epsilon_bound)
    assert (below.risk, below.advantage, below.method) == (min(prior, 1 - prior), 0.0, "exact")
    above = risk.membership_risk(plan, {"s": 1.3 * record}, prior=prior)
    assert math.log(above.posterior_odds_bound) > threshold
    assert above.upper < above.trivial_risk and above.advantage > 1e-4
