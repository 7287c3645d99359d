"""The proposal functions' NumPy draws: same distributions as PyTensor's scipy-based samplers."""

import numpy as np
import pymc as pm
import pytest
from pymc.pytensorf import compile as compile_pymc
from pytensor.compile.mode import Mode
from scipy import stats

from pymc_unbounded_dp._graph import _NUMPY_DRAWS, KERNEL_MODE

SIZE = 20_000

CASES = {
    "normal": (
        pm.Normal.dist(mu=[1.0, -2.0], sigma=[2.0, 0.5], shape=(SIZE, 2)),
        [stats.norm(1.0, 2.0), stats.norm(-2.0, 0.5)],
    ),
    "bernoulli": (
        pm.Bernoulli.dist(p=[0.0, 0.3, 1.0], shape=(SIZE, 3)),
        [stats.bernoulli(0.0), stats.bernoulli(0.3), stats.bernoulli(1.0)],
    ),
    "halfnormal": (
        pm.HalfNormal.dist(sigma=[0.5, 2.0], shape=(SIZE, 2)),
        [stats.halfnorm(scale=0.5), stats.halfnorm(scale=2.0)],
    ),
    "studentt": (
        pm.StudentT.dist(nu=[3.0, 30.0], mu=[1.0, -2.0], sigma=[2.0, 0.5], shape=(SIZE, 2)),
        [stats.t(3.0, loc=1.0, scale=2.0), stats.t(30.0, loc=-2.0, scale=0.5)],
    ),
    "negativebinomial": (
        pm.NegativeBinomial.dist(n=[2.0, 7.5], p=[0.3, 0.8], shape=(SIZE, 2)),
        [stats.nbinom(2.0, 0.3), stats.nbinom(7.5, 0.8)],
    ),
}


def _is_discrete(reference) -> bool:
    return isinstance(reference.dist, stats.rv_discrete)


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_draws_replace_the_scipy_samplers_with_the_same_distribution(name):
    rv, references = CASES[name]
    fn = compile_pymc([], rv, random_seed=11, mode=KERNEL_MODE)
    ops = [type(node.op) for node in fn.maker.fgraph.apply_nodes]
    assert any(op in _NUMPY_DRAWS.values() for op in ops), ops
    assert not any(op in _NUMPY_DRAWS for op in ops), ops
    draws = fn()
    assert draws.shape == (SIZE, len(references)) and str(draws.dtype) == rv.dtype
    for column, reference in zip(draws.T, references):
        if _is_discrete(reference):
            values, counts = np.unique(column, return_counts=True)
            expected = SIZE * reference.pmf(values)
            assert np.all(expected > 0)  # nothing outside the support
            # chi-square over the values expected at least 5 times, the rest lumped together
            big = expected >= 5
            observed, expected = counts[big], expected[big]
            rest = SIZE - expected.sum()
            if rest > 1e-6:
                observed = np.append(observed, SIZE - observed.sum())
                expected = np.append(expected, rest)
            if len(observed) == 1:  # a point mass
                assert observed[0] == SIZE
            else:
                assert stats.chisquare(observed, expected).pvalue > 1e-3
        else:
            assert stats.kstest(column, reference.cdf).pvalue > 1e-3


def test_normal_draws_are_numpys_own_bit_for_bit():
    """``loc + scale * z`` is what ``Generator.normal`` computes: seeded draws do not change."""
    plain = Mode(linker="cvm", optimizer="fast_run")
    locations = np.linspace(-3.0, 3.0, 6).reshape(2, 3)
    for mu in ([[1.0], [-2.0]], locations):  # broadcast and full-shape parameters
        rv = pm.Normal.dist(mu=mu, sigma=[0.5, 2.0, 3.0], shape=(2, 3))
        for seed in range(3):
            # one generator behind both functions: each reseeds it when compiled
            fast = compile_pymc([], rv, random_seed=seed, mode=KERNEL_MODE)
            ops = [type(node.op) for node in fast.maker.fgraph.apply_nodes]
            assert any(op in _NUMPY_DRAWS.values() for op in ops), ops
            draws = [fast(), fast()]
            expected = compile_pymc([], rv, random_seed=seed, mode=plain)
            np.testing.assert_array_equal(draws, [expected(), expected()])
