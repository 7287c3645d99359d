"""User-defined mechanisms: a truncated Laplace written as a PyTensor log-density, with and
without a numba twin; its use by the kernels (compiled and through Python), validation, release,
and exact posteriors through ``pmdp.sample``."""

import math
import re

import numba as nb
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import EXACT_POSTERIOR_SAMPLING as SAMPLE
from mcmc_checks import assert_mean_and_spread_match, draws_of
from oracles import bernoulli_posterior
from scipy import integrate, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp.kernels import NoiseArrays, Proposals, RecordTarget
from pymc_unbounded_dp.kernels._noise import (
    PythonLogDensity,
    ScalarLogDensity,
    custom_log_density,
    residual_log_density,
)

#: Laplace noise of scale B truncated to [-C, C].
B, C = 2.0, 5.0
LOG_Z = math.log(2 * B * -math.expm1(-C / B))


def truncated_logp(e):
    return pt.switch(pt.le(pt.abs(e), C), -pt.abs(e) / B - LOG_Z, -np.inf)


def truncated_simulate(size, rng):
    u = rng.uniform(0.0, 1.0, size)
    magnitude = -B * np.log1p(-u * -math.expm1(-C / B))  # inverse CDF of |e|
    return np.where(rng.random(size) < 0.5, -magnitude, magnitude)


@nb.njit
def truncated_numba(e):
    return -abs(e) / B - LOG_Z if abs(e) <= C else -np.inf


def truncated(compiled: bool = True, **kwargs) -> pmdp.CustomMechanism:
    options = {
        "logp": truncated_logp,
        "simulate": truncated_simulate,
        "privacy": {"epsilon": 1.0, "delta": 0.01},
        "sensitivity": 1.0,
        "norm": "l1",
        "name": "truncated Laplace",
        "numba_logp": truncated_numba if compiled else None,
    }
    return pmdp.CustomMechanism(**{**options, **kwargs})


class TruncatedLaplaceOracle:
    """The same density written directly in NumPy (the oracle does not use the mechanism)."""

    @staticmethod
    def logpdf(e):
        e = np.asarray(e, dtype=float)
        return np.where(np.abs(e) <= C, -np.abs(e) / B - LOG_Z, -np.inf)


def truncated_cdf(x):
    laplace = stats.laplace(scale=B)
    return np.clip((laplace.cdf(x) - laplace.cdf(-C)) / (laplace.cdf(C) - laplace.cdf(-C)), 0, 1)


# --------------------------------------------------------------------------------------------------
# the mechanism
# --------------------------------------------------------------------------------------------------
def test_density_is_normalised_and_the_simulator_matches_its_cdf():
    mechanism = truncated()
    total, _ = integrate.quad(lambda e: np.exp(mechanism.logpdf(e)), -C, C)
    assert total == pytest.approx(1.0, abs=1e-10)
    draws = mechanism.simulate(2000, random_seed=1)
    assert stats.kstest(draws, truncated_cdf).pvalue > 1e-3
    assert (
        stats.kstest(pmdp.Laplace(scale=B).simulate(2000, random_seed=1), truncated_cdf).pvalue
        < 1e-3
    )  # power: the untruncated law is told apart


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "python"])
def test_log_density_is_the_same_in_numpy_pytensor_and_the_kernels(compiled):
    mechanism = truncated(compiled)
    x = np.array([-6.0, -5.0, -1.3, 0.0, 0.7, 4.99, 5.01, 30.0])
    expected = TruncatedLaplaceOracle.logpdf(x)
    np.testing.assert_array_equal(mechanism.logpdf(x), expected)
    np.testing.assert_allclose(mechanism.logp(pt.as_tensor(x)).eval(), expected, rtol=1e-15)
    assert mechanism.logpdf(x.reshape(2, 4)).shape == (2, 4)
    noise = NoiseArrays.of([mechanism], [x.size])
    assert isinstance(noise.custom, PythonLogDensity) != compiled
    out = np.empty(x.size)
    residual_log_density(x, out, *noise.per_coordinate)
    np.testing.assert_allclose(out, expected, rtol=1e-15)


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "python"])
def test_several_mechanisms_side_by_side_in_the_kernels(compiled):
    """Two user-defined mechanisms (one used twice) next to built-in ones: each coordinate gets
    its own density."""

    @nb.njit
    def gaussian_numba(e):
        return -0.5 * e * e - 0.5 * math.log(2 * math.pi)

    gaussian = pmdp.CustomMechanism(
        lambda e: -0.5 * e**2 - 0.5 * np.log(2 * np.pi),
        lambda rng, size: rng.normal(size=size),
        privacy={"rho": 0.5},
        numba_logp=gaussian_numba if compiled else None,
    )
    first = truncated(compiled)
    mechanisms = [pmdp.Laplace(scale=1.5), first, gaussian, pmdp.Tulap(scale=1.0), first]
    noise = NoiseArrays.of(mechanisms, [1, 2, 1, 1, 1])
    x = np.array([0.4, -2.0, 6.0, 1.7, 2.6, -4.2])
    expected = np.concatenate(
        [
            mechanisms[0].logpdf(x[:1]),
            TruncatedLaplaceOracle.logpdf(x[1:3]),
            [-0.5 * x[3] ** 2 - 0.5 * math.log(2 * math.pi)],
            mechanisms[3].logpdf(x[4:5]),
            TruncatedLaplaceOracle.logpdf(x[5:]),
        ]
    )
    out = np.empty(x.size)
    residual_log_density(x, out, *noise.per_coordinate)
    np.testing.assert_allclose(out, expected, rtol=1e-14)


def test_an_exception_in_a_python_log_density_stops_the_kernel():
    def failing(x):
        raise ZeroDivisionError("user code failed")

    target = RecordTarget(
        released=np.array([1.0]),
        propose=lambda m: ([np.zeros(m)], np.zeros((m, 1))),
        noise=NoiseArrays.of([pmdp.Laplace(scale=1.0)], [1])._replace(
            shape_code=np.array([3]),
            laplace_only=False,
            custom=custom_log_density([ScalarLogDensity(None, failing)]),
        ),
    )
    state = kernels.init(target, 2, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="user code failed") as info:
        kernels.refresh(target, state, Proposals(*target.propose(2)), np.zeros(2))
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    np.testing.assert_array_equal(state.residual, [1.0])  # NaN ratios rejected every move


def test_statements_of_the_mechanism():
    mechanism = truncated()
    assert repr(mechanism) == (
        "CustomMechanism('truncated Laplace', epsilon=1.0, delta=0.01, sensitivity=1.0, norm='l1')"
    )
    assert mechanism.privacy == {"epsilon": 1.0, "delta": 0.01}
    assert (mechanism.sensitivity, mechanism.norm, mechanism.domain) == (1.0, "l1", "reals")
    assert not mechanism.discrete and mechanism != truncated()  # compared by identity
    assert {mechanism: 1}[mechanism] == 1
    assert C <= mechanism.tail_width(20.0) <= 4 * C
    bare = pmdp.CustomMechanism(truncated_logp, truncated_simulate, privacy={"epsilon": 1.0})
    assert bare.norm is None and bare.sensitivity is None
    pure = truncated(privacy={"epsilon": 1.0, "delta": 0.0})  # a zero is a figure like another
    assert pure.privacy == {"epsilon": 1.0, "delta": 0.0}


def test_simulate_has_the_signature_of_the_built_in_one():
    """The user's ``simulate`` is called as ``simulate(size=..., rng=...)``, the signature of
    ``Mechanism.simulate``: a built-in mechanism's method serves as one, parameter order does not
    matter, ``random_seed`` is PyMC's name for ``rng``; other names get the old positional call
    ``simulate(rng, size)`` with a FutureWarning naming the new spelling."""
    laplace = pmdp.Laplace(scale=B)
    expected = laplace.simulate(size=(2, 3), rng=7)
    as_method = truncated(simulate=laplace.simulate, numba_logp=None)
    np.testing.assert_array_equal(as_method.simulate(size=(2, 3), rng=7), expected)
    for function in (
        lambda size, rng: rng.laplace(0.0, B, size),
        lambda rng, size: rng.laplace(0.0, B, size),
        lambda size=None, random_seed=None: np.random.default_rng(random_seed).laplace(0, B, size),
    ):
        mechanism = truncated(simulate=function, numba_logp=None)
        np.testing.assert_array_equal(mechanism.simulate((2, 3), random_seed=7), expected)
    with pytest.warns(FutureWarning, match=r"simulate\(size=..., rng=...\).*name its parameters"):
        legacy = truncated(simulate=lambda g, s: g.laplace(0.0, B, s), numba_logp=None)
    np.testing.assert_array_equal(legacy.simulate((2, 3), rng=7), expected)

    P = {"epsilon": 1.0}

    def build_legacy():
        return pmdp.CustomMechanism(truncated_logp, lambda g, s: g.laplace(0, B, s), privacy=P)

    with pytest.warns(FutureWarning) as got:
        build_legacy()
    call = build_legacy.__code__.co_firstlineno + 1
    assert (got[0].filename, got[0].lineno) == (__file__, call)  # the warning names the user's line


def test_release_refuses_without_an_exact_sampler_and_uses_the_one_given():
    with pytest.raises(ValueError, match=r"release: no exact release sampler.*`release=`"):
        truncated().release(3.0)
    given = truncated(release=lambda value: value + 0.5)
    np.testing.assert_array_equal(given.release([1.0, 2.0]), [1.5, 2.5])
    with pytest.raises(ValueError, match="`value` must be finite"):
        given.release(np.nan)
    on_integers = truncated(domain="integers", release=lambda value: value + 1)
    assert on_integers.release(np.int64(2**62)) == 2**62 + 1
    with pytest.raises(ValueError, match="`value`.*int64"):
        on_integers.release(2.0**70)


def _bad(**kwargs):
    return lambda: truncated(**kwargs)


@pytest.mark.parametrize(
    "build, error, argument",
    [
        (_bad(logp=None), TypeError, "logp"),
        (_bad(logp=lambda e: pt.sum(e)), ValueError, "logp"),  # not elementwise: reduces
        (_bad(logp=lambda e: e @ pt.ones((3, 3))), ValueError, "logp"),
        (_bad(logp=lambda e: -pt.abs(e) / pt.scalar("b")), ValueError, "logp"),  # a free input
        (_bad(logp=lambda e: "not a tensor"), TypeError, "logp"),
        (_bad(simulate=None), TypeError, "simulate"),
        (_bad(simulate=lambda rng, size: np.zeros(2)), ValueError, "simulate"),
        (_bad(simulate=lambda rng, size: np.zeros(size + 1)), ValueError, "simulate"),
        # nearly elementwise: a mean over the vector moves each value a little
        (
            _bad(logp=lambda e: -pt.abs(e) - 1.0 + 1e-3 * pt.mean(e), numba_logp=None),
            ValueError,
            "logp` must act elementwise on the noise (no sums",
        ),
        (_bad(simulate=lambda rng, size: np.full(size, "a")), ValueError, "simulate"),
        (_bad(privacy=None), TypeError, "privacy"),
        (_bad(privacy={}), TypeError, "privacy"),
        (_bad(privacy={"eps": 1.0}), ValueError, "privacy"),
        (_bad(privacy={"epsilon": -1.0}), ValueError, "privacy"),
        (_bad(privacy={"epsilon": "1"}), TypeError, "privacy"),
        (_bad(domain="complex"), ValueError, "domain"),
        (_bad(discrete=True), ValueError, "discrete"),
        (_bad(discrete="yes"), TypeError, "discrete"),
        (_bad(norm=None), ValueError, "sensitivity"),
        (_bad(sensitivity=None), ValueError, "sensitivity"),  # a norm without a sensitivity
        (_bad(norm="l3"), ValueError, "norm"),
        (_bad(sensitivity=-1.0), ValueError, "sensitivity"),
        (_bad(name=3), TypeError, "name"),
        (_bad(release="exact"), TypeError, "release"),
        (_bad(numba_logp=lambda e: 0.0), TypeError, "numba_logp"),
        (_bad(numba_logp=nb.njit(lambda e: -abs(e) / B - LOG_Z)), ValueError, "numba_logp"),
    ],
)
def test_bad_input_names_the_argument(build, error, argument):
    with pytest.raises(error, match=rf"CustomMechanism.*`{re.escape(argument)}"):
        build()


def test_the_checks_of_a_custom_density_say_what_went_wrong_and_where():
    """A ``logp`` that fails on a vector: the first line of its error (PyTensor's error goes on
    with pages of hints). A ``numba_logp`` off at one point only (by 0.5): that point."""
    first_lines = (  # PyTensor 2 (PyMC 5) and PyTensor 3 (PyMC 6)
        r"shapes \(3,3\) and \(10,\) not aligned.*",
        r"gemm: operands have mismatched contraction dimensions",
    )
    with pytest.raises(ValueError, match=rf"it raised '({'|'.join(first_lines)})'\.$"):
        truncated(logp=lambda e: e @ pt.ones((3, 3)))

    @nb.njit
    def off_at_2_5(e):
        return truncated_numba(e) + (0.5 if e == 2.5 else 0.0)

    with pytest.raises(ValueError, match=r"differ at noise 2.5: -2.05064 vs -2.55064;"):
        truncated(numba_logp=off_at_2_5)

    @nb.njit
    def off_at_two_points(e):  # the larger error (2.0, below) at 0.25: that is the point named
        return truncated_numba(e) + (0.5 if e == 2.5 else -2.0 if e == 0.25 else 0.0)

    with pytest.raises(ValueError, match=r"differ at noise 0.25: "):
        truncated(numba_logp=off_at_two_points)


def test_a_logp_that_is_not_a_density_of_its_noise_is_refused_with_the_reason():
    """Each check says what it found: the shape or type of what ``logp`` returned, a constant,
    a NaN (at the first noise value where it is NaN, also one the simulator draws)."""
    cases = [
        (lambda e: pt.outer(e, e), r"on a noise of ndim 1 it returned ndim 2, dtype float64"),
        (lambda e: pt.lt(e, 1.0), r"return numbers; .* it returned ndim 1, dtype bool"),
        (lambda e: pt.constant(-1.0), r"does not depend on its argument"),
        (lambda e: pt.log(e + 10.0), r"`logp` is NaN at noise -30; a log-density must be"),
    ]
    for logp, message in cases:
        with pytest.raises(
            ValueError, match=rf"CustomMechanism\('truncated Laplace'\): .*{message}"
        ):
            truncated(logp=logp, numba_logp=None)
    lower_half = lambda e: pt.switch(pt.ge(e, -40.0), truncated_logp(e), np.nan)  # noqa: E731
    truncated(logp=lower_half, numba_logp=None)  # NaN below every check point: accepted
    with pytest.raises(ValueError, match=r"`logp` is NaN at noise -4[0-9.]*; a log-density"):
        truncated(
            logp=lower_half,
            simulate=lambda size, rng: np.full(size, -45.0),
            numba_logp=truncated_numba,
        )


def test_a_logp_elementwise_up_to_rounding_is_accepted():
    """A vector and its values one at a time may differ in the last bits (vectorised
    arithmetic); a relative difference of about 1e-14 is accepted (the check's rtol is 1e-12),
    while the 1e-3 mean of the bad-input cases is refused."""
    rounding = lambda e: truncated_logp(e) + 1e-17 * pt.sum(e)  # noqa: E731
    mechanism = truncated(logp=rounding)
    np.testing.assert_allclose(mechanism.logpdf([0.0]), [-LOG_Z], rtol=1e-15)


def test_a_custom_mechanism_on_the_integers_is_minus_infinity_off_the_lattice():
    q = math.exp(-1.0 / B)
    log_norm = math.log((1 - q) / (1 + q))

    @nb.njit
    def numba_logp(e):
        return -abs(e) / B + log_norm if e == np.floor(e) else -np.inf

    discrete = truncated(
        logp=lambda e: -pt.abs(e) / B + log_norm,
        simulate=lambda size, rng: rng.geometric(1 - q, size) - rng.geometric(1 - q, size),
        domain="integers",
        discrete=True,
        numba_logp=numba_logp,
    )
    np.testing.assert_allclose(
        discrete.logpdf([0.0, 1.0, -2.0, 0.5, 0.7, -1.2]),
        [log_norm, log_norm - 1 / B, log_norm - 2 / B, -np.inf, -np.inf, -np.inf],
    )


def test_a_logp_with_scalar_constants_in_its_graph_is_accepted():
    """``pt.mean`` divides by a ScalarConstant (not a TensorConstant): a constant all the same,
    not an input the density depends on (it was refused as one)."""
    log_z = pt.log(pt.mean(pt.as_tensor([2 * B * -math.expm1(-C / B)] * 3)))
    mechanism = truncated(
        logp=lambda e: pt.switch(pt.le(pt.abs(e), C), -pt.abs(e) / B - log_z, -np.inf)
    )
    np.testing.assert_allclose(mechanism.logpdf([0.0, 1.0]), [-LOG_Z, -LOG_Z - 1 / B])


def test_a_numba_logp_that_agrees_to_rounding_is_accepted():
    @nb.njit
    def rounded(e):  # 1e-13 off: another order of operations
        return truncated_numba(e) + 1e-13

    assert truncated(numba_logp=rounded).sensitivity == 1.0


def test_a_custom_mechanism_on_the_reals_takes_real_values_and_sensitivities():
    mechanism = truncated(sensitivity=2.5, release=lambda value: value + 0.5)
    assert mechanism.sensitivity == 2.5
    np.testing.assert_array_equal(mechanism.release([1.25, -3.0]), [1.75, -2.5])
    with pytest.raises(ValueError, match="`sensitivity` must be an integer"):
        truncated(domain="integers", sensitivity=2.5)
    # the log-density of an expression of other variables (the model's noise: s_dp - T(x))
    x = pt.dvector("x")
    np.testing.assert_allclose(
        mechanism.logp(x - 1.0).eval({x: [1.5, 3.0]}),
        truncated_logp(pt.as_tensor([0.5, 2.0])).eval(),
    )


# --------------------------------------------------------------------------------------------------
# exact posteriors through pmdp.sample
# --------------------------------------------------------------------------------------------------


def bernoulli_model(mechanism, observed, n=30):
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, mechanism, observed=observed)
    return model


@pytest.mark.parametrize("interweave", [True, False], ids=["interweave", "data-augmentation"])
def test_truncated_laplace_release_matches_enumeration(interweave):
    """The compiled and the Python path give the same chain draw for draw, and it matches the
    exact posterior. The truncation matters: with the untruncated Laplace the posterior mean is
    0.010 higher and the variance 26% larger (about 5 Monte Carlo standard errors each). The
    chains start outside the support (the prior's records give |s_dp - T| > C)."""
    draws = {}
    for compiled in (True, False):
        model = bernoulli_model(truncated(compiled), observed=4.6)
        idata = pmdp.sample(model=model, random_seed=5, interweave=interweave, **SAMPLE)
        draws[compiled] = draws_of(idata, "theta")
    np.testing.assert_array_equal(draws[True], draws[False])
    exact = bernoulli_posterior(4.6, TruncatedLaplaceOracle, 2.0, 3.0, n=30)
    assert_mean_and_spread_match(draws[True], exact["theta_mean"], exact["theta_var"], "theta")


def test_unbounded_with_truncated_laplace_sum_and_count_matches_enumeration():
    """Truncated Laplace noise on the sum (compiled) and on the count (through Python)."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        n = pmdp.SampleSize("n", n_dp=30.5, mechanism=truncated(compiled=False))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, truncated(), observed=4.6)
    idata = pmdp.sample(model=model, random_seed=2, **SAMPLE)
    exact = bernoulli_posterior(
        4.6,
        TruncatedLaplaceOracle,
        2.0,
        3.0,
        n_dp=30.5,
        n_mechanism=TruncatedLaplaceOracle,
        n_max=60,
    )
    n_draws = draws_of(idata, "n")
    assert 26 <= n_draws.min() and n_draws.max() <= 35  # |n_dp - n| <= C
    assert_mean_and_spread_match(
        draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta"
    )
    assert_mean_and_spread_match(n_draws, exact["n_mean"], exact["n_var"], "n")


# --------------------------------------------------------------------------------------------------
# the kernels with several user-defined densities, and noise on the integers (issue 32)
# --------------------------------------------------------------------------------------------------
def _shifted_laplace(shift: float, compiled: bool) -> pmdp.CustomMechanism:
    """Laplace noise of scale 1 centred at ``shift``: densities told apart at every point."""

    @nb.njit
    def numba_logp(e):
        return -abs(e - shift) - math.log(2.0)

    return pmdp.CustomMechanism(
        lambda e: -pt.abs(e - shift) - math.log(2.0),
        lambda size, rng: shift + rng.laplace(0.0, 1.0, size),
        privacy={"epsilon": 1.0},
        name=f"shifted by {shift}",
        numba_logp=numba_logp if compiled else None,
    )


def _oracle_shifted(x, shift):
    return -np.abs(np.asarray(x) - shift) - math.log(2.0)


@pytest.mark.parametrize(
    "compiled",
    [(True, True, True), (True, False, True), (False, True, False)],
    ids=["numba", "numba-python-numba", "python-numba-python"],
)
def test_each_of_three_user_defined_densities_does_reach_its_own_coordinates(compiled):
    """Three user-defined mechanisms in one table (all compiled, or some without ``numba_logp``,
    which then all go through Python): the k-th coordinate's density is the k-th mechanism's."""
    shifts = (-1.0, 0.5, 3.0)
    mechanisms = [_shifted_laplace(s, c) for s, c in zip(shifts, compiled)]
    noise = NoiseArrays.of([mechanisms[2], pmdp.Laplace(scale=1.5), *mechanisms], [1, 1, 2, 1, 1])
    assert isinstance(noise.custom, PythonLogDensity) == (not all(compiled))
    x = np.array([0.7, -0.4, 2.0, -2.5, 1.1, 0.2])
    expected = np.concatenate(
        [
            _oracle_shifted(x[:1], shifts[2]),
            pmdp.Laplace(scale=1.5).logpdf(x[1:2]),
            _oracle_shifted(x[2:4], shifts[0]),
            _oracle_shifted(x[4:5], shifts[1]),
            _oracle_shifted(x[5:], shifts[2]),
        ]
    )
    out = np.empty(x.size)
    residual_log_density(x, out, *noise.per_coordinate)
    noise.raise_errors()
    np.testing.assert_allclose(out, expected, rtol=1e-14)


def test_a_python_log_density_that_fails_does_report_its_first_exception():
    """Two user-defined densities failing differently in one kernel run: the first exception
    (coordinate 0's) is re-raised, once."""

    def first(x):
        raise ZeroDivisionError("first failure")

    def second(x):
        raise KeyError("second failure")

    noise = NoiseArrays.of([pmdp.Laplace(scale=1.0)], [2])._replace(
        shape_code=np.array([3, 4]),
        laplace_only=False,
        custom=custom_log_density([ScalarLogDensity(None, first), ScalarLogDensity(None, second)]),
    )
    out = np.empty(2)
    residual_log_density(np.array([0.5, 1.5]), out, *noise.per_coordinate)
    assert np.all(np.isnan(out))
    with pytest.raises(RuntimeError, match="first failure") as info:
        noise.raise_errors()
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    noise.raise_errors()  # reported once


Q_DISCRETE = math.exp(-1.0 / B)
LOG_NORM_DISCRETE = math.log((1 - Q_DISCRETE) / (1 + Q_DISCRETE))


@nb.njit
def discrete_laplace_numba_without_lattice(e):
    """The discrete Laplace log-pmf at integers, written without a lattice test."""
    return -abs(e) / B + LOG_NORM_DISCRETE


def _discrete_custom(**kwargs) -> pmdp.CustomMechanism:
    options = {
        "logp": lambda e: -pt.abs(e) / B + LOG_NORM_DISCRETE,
        "simulate": lambda size, rng: (
            rng.geometric(1 - Q_DISCRETE, size) - rng.geometric(1 - Q_DISCRETE, size)
        ),
        "domain": "integers",
        "discrete": True,
        "numba_logp": discrete_laplace_numba_without_lattice,
    }
    return truncated(**{**options, **kwargs})


def test_a_numba_log_density_on_the_integers_does_not_need_its_own_lattice_test():
    """``discrete=True`` puts the noise on the integers: ``numba_logp`` is checked against
    ``logp`` at integers only, so one written for integers (finite between them) is accepted."""
    mechanism = _discrete_custom()
    assert mechanism.discrete
    np.testing.assert_allclose(
        mechanism.logpdf([0.0, 2.0, -3.0]),
        [LOG_NORM_DISCRETE, LOG_NORM_DISCRETE - 2 / B, LOG_NORM_DISCRETE - 3 / B],
        rtol=1e-15,
    )


@pytest.mark.parametrize("compiled", [True, False], ids=["numba", "python"])
def test_the_kernels_do_put_user_defined_noise_on_the_integers(compiled):
    """In the kernels, a discrete user-defined mechanism's noise is -inf off the integers even if
    its ``logp`` (and ``numba_logp``) is finite there, and its log-pmf on them."""
    mechanism = _discrete_custom(
        numba_logp=discrete_laplace_numba_without_lattice if compiled else None
    )
    x = np.array([0.0, 1.0, -2.0, 0.5, 0.7, -1.2])
    noise = NoiseArrays.of([mechanism], [x.size])
    out = np.empty(x.size)
    residual_log_density(x, out, *noise.per_coordinate)
    np.testing.assert_allclose(
        out,
        [LOG_NORM_DISCRETE, LOG_NORM_DISCRETE - 1 / B, LOG_NORM_DISCRETE - 2 / B] + [-np.inf] * 3,
        rtol=1e-15,
    )
