"""Tulap mechanism: density and CDF against independent computations, the simulator and the exact
release sampler by goodness-of-fit tests, the kernels' exact acceptance ratio, and exact posteriors
through ``pmdp.sample`` (bounded and unbounded DP)."""

import itertools
import math

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
from pymc_unbounded_dp.kernels._noise import residual_log_density

TULAPS = [pmdp.Tulap(epsilon=1.0), pmdp.Tulap(epsilon=0.3), pmdp.Tulap(epsilon=2.0, sensitivity=3)]


def discrete_laplace_pmf_by_convolution(b: float, support: np.ndarray) -> np.ndarray:
    """``P(G1 - G2 = k)`` for iid geometric ``P(G = j) = (1 - b) b^j``, by summing the product of
    the two geometric pmfs (scipy's geometric counts trials, hence the shift)."""
    j = np.arange(0, 4000)
    g = stats.geom.pmf(j + 1, 1 - b)
    return np.array(
        [
            np.sum(g[max(0, -k) : len(j) - max(0, k)] * g[max(0, k) : len(j) - max(0, -k)])
            for k in support
        ]
    )


@pytest.mark.parametrize("mechanism", TULAPS, ids=repr)
def test_density_is_the_discrete_laplace_pmf_smoothed_by_a_uniform(mechanism):
    """Density at x = sum_k P(G1 - G2 = k) * (density of U at x - k) (U uniform on (-1/2, 1/2))."""
    b = math.exp(-1.0 / mechanism.scale)
    support = np.arange(-60, 61)
    pmf = discrete_laplace_pmf_by_convolution(b, support)
    x = np.random.default_rng(0).uniform(-20, 20, 500)
    density = np.sum(pmf[None, :] * (np.abs(x[:, None] - support[None, :]) < 0.5), axis=1)
    np.testing.assert_allclose(np.exp(mechanism.logpdf(x)), density, rtol=1e-9)
    # staircase normalised on the reals (quad piece by piece between half-integers)
    edges = np.arange(-400.5, 401.0)
    total = sum(
        integrate.quad(lambda e: np.exp(mechanism.logpdf(e)), lo, hi)[0]
        for lo, hi in itertools.pairwise(edges)
    )
    assert total == pytest.approx(1.0, abs=1e-10)


@pytest.mark.parametrize("mechanism", TULAPS, ids=repr)
def test_cdf_is_the_integral_of_the_density(mechanism):
    x = np.concatenate([np.random.default_rng(1).uniform(-15, 15, 40), [-3.5, -0.5, 0.0, 0.5, 2.5]])

    def integral(v):
        """quad of the density from -400.5 (mass below < 1e-50) to v, one step at a time."""
        pieces = np.append(np.arange(-400.5, v, 1.0), v)
        return sum(
            integrate.quad(lambda e: np.exp(mechanism.logpdf(e)), lo, hi)[0]
            for lo, hi in itertools.pairwise(pieces)
        )

    expected = np.array([integral(v) for v in x])
    np.testing.assert_allclose(mechanism.cdf(x), expected, rtol=1e-9, atol=1e-12)
    assert mechanism.cdf(-np.inf) == 0.0 and mechanism.cdf(np.inf) == 1.0
    assert mechanism.cdf(0.0) == pytest.approx(0.5, abs=1e-15)


def test_log_density_is_the_same_in_numpy_pytensor_and_the_kernels():
    mechanism = pmdp.Tulap(scale=1.7)
    x = np.array([-7.2, -2.5, -0.49, 0.0, 0.3, 0.5, 1.5, 2.51, 40.0])
    expected = mechanism.log_normalizer - np.abs(np.rint(x)) / 1.7
    np.testing.assert_allclose(mechanism.logpdf(x), expected, rtol=1e-15)
    np.testing.assert_allclose(mechanism.logp(pt.as_tensor(x)).eval(), expected, rtol=1e-15)
    out = np.empty(x.size)
    residual_log_density(x, out, *NoiseArrays.of([mechanism], [x.size]).per_coordinate)
    np.testing.assert_allclose(out, expected, rtol=1e-15)
    assert mechanism.log_normalizer == pytest.approx(math.log(math.tanh(0.5 / 1.7)))


def _rounded_chi_square_pvalue(draws, mechanism):
    """Chi-square of ``rint(draws)`` (the discrete Laplace part) against its pmf."""
    discrete = pmdp.DiscreteLaplace(scale=mechanism.scale)
    values, counts = np.unique(np.rint(draws), return_counts=True)
    expected = np.exp(discrete.logpdf(values)) * len(draws)
    keep = expected >= 5
    observed = np.append(counts[keep], counts[~keep].sum())
    expected = np.append(expected[keep], len(draws) - expected[keep].sum())
    return stats.chisquare(observed, expected).pvalue


@pytest.mark.parametrize("mechanism", TULAPS[:2], ids=repr)
def test_simulator_matches_the_cdf_and_the_discrete_laplace_pmf(mechanism):
    draws = mechanism.simulate(2000, random_seed=4)
    assert draws.shape == (2000,) and draws.dtype == np.float64
    assert stats.kstest(draws, mechanism.cdf).pvalue > 1e-3
    assert _rounded_chi_square_pvalue(draws, mechanism) > 1e-3
    # power: the discrete part alone, or a Tulap of a 1.5x scale, are told apart
    without_uniform = pmdp.DiscreteLaplace(scale=mechanism.scale).simulate(2000, rng=4)
    assert stats.kstest(without_uniform, mechanism.cdf).pvalue < 1e-3
    wider = pmdp.Tulap(scale=1.5 * mechanism.scale).simulate(2000, rng=4)
    assert stats.kstest(wider, mechanism.cdf).pvalue < 1e-3


def test_exact_release_matches_the_cdf_and_the_discrete_laplace_pmf():
    mechanism = pmdp.Tulap(epsilon=0.8)
    released = mechanism.release(np.full(2000, 5, dtype=np.int64))
    assert released.dtype == np.float64 and released.shape == (2000,)
    assert stats.kstest(released - 5, mechanism.cdf).pvalue > 1e-3
    assert _rounded_chi_square_pvalue(released - 5, mechanism) > 1e-3
    # the uniform part is continuous: no two releases coincide, fractional parts are uniform
    assert np.unique(released).size == released.size
    assert stats.kstest(released - np.rint(released), stats.uniform(-0.5, 1).cdf).pvalue > 1e-3


@pytest.mark.parametrize(
    "value, error, message",
    [
        (2.5, ValueError, "integer-valued"),
        (np.nan, ValueError, "finite"),
        ([1, np.inf], ValueError, "finite"),
        (2.0**64, ValueError, "int64"),
        (["a"], TypeError, "numeric"),
    ],
)
def test_release_refuses_what_it_cannot_release_exactly(value, error, message):
    with pytest.raises(error, match=rf"Tulap.release: `value`.*{message}"):
        pmdp.Tulap(epsilon=1.0).release(value)


def test_parameters_and_guarantee():
    m = pmdp.Tulap(epsilon=0.5, sensitivity=2)
    assert m.scale == 4.0 and m.privacy == {"epsilon": 0.5} and m.norm == "l1"
    assert m.domain == "integers" and not m.discrete
    assert pmdp.Tulap(scale=2.0).epsilon == 0.5
    with pytest.raises(ValueError, match="`sensitivity`.*integer"):
        pmdp.Tulap(epsilon=1.0, sensitivity=1.5)
    with pytest.raises(ValueError, match="`epsilon`"):
        pmdp.Tulap(epsilon=-1.0)


def test_a_tulap_release_needs_an_integer_statistic():
    with pm.Model():
        mu = pm.Normal("mu")
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=5)
        with pytest.raises(ValueError, match="`mechanism` Tulap works on the integers"):
            pmdp.PrivatizedSum("s", x, pmdp.Tulap(epsilon=1.0), observed=2.3)


# --------------------------------------------------------------------------------------------------
# kernels: the exact acceptance ratio
# --------------------------------------------------------------------------------------------------
class Stub:
    """``propose(m)``: the next ``m`` rows of a table of statistics (records are their ids)."""

    def __init__(self, table):
        self.table, self.used = np.asarray(table, dtype=float), 0

    def __call__(self, m):
        ids = np.arange(self.used, self.used + m)
        self.used += m
        return [ids], self.table[ids].copy()


@pytest.mark.parametrize("accept", [True, False], ids=["accepted", "rejected"])
def test_refresh_and_birth_accept_by_the_exact_tulap_ratio(accept):
    sums, counts = pmdp.Tulap(scale=1.3), pmdp.Tulap(scale=2.0)
    table = [[3.0], [1.0], [0.0], [4.0], [2.0]]
    target = RecordTarget(
        released=np.array([6.4]),
        noise=NoiseArrays.of([sums], [1]),
        propose=Stub(table),
        n_dp=3.3,
        n_noise=NoiseArrays.of([counts], [1]),
    )
    state = kernels.init(target, 2, np.random.default_rng(0))  # records 0, 1: residual 2.4
    offset = -1e-9 if accept else 1e-9

    def log_eta(m, r):
        return math.log(math.tanh(0.5 / m.scale)) - abs(round(r)) / m.scale

    # refresh of record 0 (t = 3) by record 2 (t = 0): residual 2.4 -> 5.4
    ratio = log_eta(sums, 5.4) - log_eta(sums, 2.4)
    assert ratio == pytest.approx(-3.0 / 1.3)
    state, accepted = kernels.refresh(
        target, state, Proposals(*target.propose(1)), np.array([ratio + offset])
    )
    assert accepted == int(accept)
    residual = 5.4 if accept else 2.4
    np.testing.assert_allclose(state.residual, [residual])
    # a birth of record 3 (t = 4) at n = 2: residual r -> r - 4, n_dp - n: 1.3 -> 0.3
    ratio = (
        log_eta(sums, residual - 4)
        - log_eta(sums, residual)
        + log_eta(counts, 0.3)
        - log_eta(counts, 1.3)
    )
    state, moves = kernels.birth_death(
        target,
        state,
        np.array([True]),
        Proposals(*target.propose(1)),
        np.array([0.99]),
        np.array([ratio + offset]),
    )
    assert moves.tolist() == [int(accept), 1, 0, 0] and state.n == 2 + accept
    np.testing.assert_allclose(state.residual, [residual - 4 * accept])


# --------------------------------------------------------------------------------------------------
# exact posteriors through pmdp.sample
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("interweave", [True, False], ids=["interweave", "data-augmentation"])
def test_bernoulli_count_released_with_tulap_matches_enumeration(interweave):
    """At s_dp = 8.45 the staircase favours k = 8 over k = 9 where a Laplace density would not:
    the exact means differ by 0.0125, about 8 (interweaving) and 5 (plain data augmentation)
    Monte Carlo standard errors of these runs, so a Laplace density in the kernels would fail."""
    mechanism = pmdp.Tulap(epsilon=1.0)
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, mechanism, observed=8.45)
    idata = pmdp.sample(
        model=model, random_seed=7, interweave=interweave, **{**SAMPLE, "draws": 3000}
    )
    exact = bernoulli_posterior(8.45, mechanism, 2.0, 3.0, n=30)
    assert_mean_and_spread_match(
        draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta"
    )


def test_unbounded_tulap_count_and_sum_match_enumeration():
    sums, counts = pmdp.Tulap(epsilon=0.8), pmdp.Tulap(epsilon=0.5)
    with pm.Model() as model:
        theta = pm.Beta("theta", 1.0, 1.0)
        n = pmdp.SampleSize("n", n_dp=24.3, mechanism=counts)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, sums, observed=15.8)
    idata = pmdp.sample(model=model, random_seed=3, **SAMPLE)
    exact = bernoulli_posterior(15.8, sums, 1.0, 1.0, n_dp=24.3, n_mechanism=counts, n_max=120)
    assert exact["n_pmf"][-1] < 1e-12
    assert_mean_and_spread_match(
        draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta"
    )
    assert_mean_and_spread_match(draws_of(idata, "n"), exact["n_mean"], exact["n_var"], "n")


@pytest.mark.parametrize("bits, expected", [(0, -0.5 + 2.0**-54), (2**53 - 1, 0.5 - 2.0**-54)])
def test_the_exact_releases_uniform_is_the_midpoint_of_its_cell(monkeypatch, bits, expected):
    """The uniform part of ``Tulap.release`` is ``(2 k + 1) / 2**54 - 1/2`` for 53 random bits
    ``k``: the midpoints of 2**53 equal cells, never the ends -1/2 or 1/2 (at 0 both are exact
    doubles). Here the bits and the integer part are fixed."""
    import pymc_unbounded_dp.mechanisms.laplace as laplace

    monkeypatch.setattr(laplace.secrets, "randbits", lambda k: bits)
    monkeypatch.setattr(laplace, "discrete_laplace", lambda scale: 0)
    assert pmdp.Tulap(epsilon=0.7).release(0.0) == expected
