"""The proposal functions' NumPy draws: same distributions as PyTensor's scipy-based samplers."""

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from pymc.pytensorf import compile as compile_pymc
from pytensor.compile.mode import Mode
from scipy import stats

from pymc_unbounded_dp._graph import _NUMPY_DRAWS, KERNEL_MODE, QUICK_MODE, polynomial_degree
from pymc_unbounded_dp._ranges import statistic_range

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


# --------------------------------------------------------------------------------------------------
# ranges of statistics (``_ranges``) off the usual settings, and the degree of a statistic
# --------------------------------------------------------------------------------------------------
def _bounds(statistic, records=()):
    """The bounds of each coordinate of one record's ``statistic``, as lists."""
    found = statistic_range(statistic, list(records))
    shape = tuple(statistic.type.shape[1:])
    return (
        np.broadcast_to(found.lower, shape).tolist(),
        np.broadcast_to(found.upper, shape).tolist(),
    )


def _drawn_range(statistic, draws=200):
    """The smallest and largest values of ``statistic`` over ``draws`` seeded draws."""
    fn = compile_pymc([], statistic, random_seed=3, mode=QUICK_MODE)
    values = np.stack([fn() for _ in range(draws)])
    return values.min(), values.max()


def test_integer_draws_do_exclude_their_high_end():
    """``pt.random.integers(low, high)`` draws from ``low`` to ``high - 1``."""
    with warnings.catch_warnings():
        # PyTensor 3 warns that its random ops will return their rng (its own business)
        warnings.simplefilter("ignore", DeprecationWarning)
        x = pt.random.integers(2, 6, size=50)
    found = statistic_range(x, [x])
    assert (float(found.lower), float(found.upper)) == (2.0, 5.0)
    assert _drawn_range(x) == (2, 5)  # the bound is attained, and not exceeded


def test_hypergeometric_records_are_bounded_by_the_successes_and_the_sample():
    """HyperGeometric(N, k, n) counts successes among ``n`` drawn: at most ``min(k, n)``."""
    for N, k, n, upper in [(10, 3, 5, 3), (10, 7, 5, 5), (20, 2, 9, 2)]:
        x = pm.HyperGeometric.dist(N=N, k=k, n=n, size=4)
        found = statistic_range(x, [x])
        assert (float(found.lower), float(found.upper)) == (0.0, upper), (N, k, n)


def test_a_cast_to_integers_does_truncate_toward_zero():
    """``astype('int64')`` of values in [-2.5, 2.5] gives -2 .. 2, as NumPy's cast does."""
    x = pm.Normal.dist(0, 1, size=5)
    found = statistic_range(pt.clip(x, -2.5, 2.5).astype("int64"), [x])
    expected = np.array([-2.5, 2.5]).astype("int64").tolist()
    assert [float(found.lower), float(found.upper)] == expected == [-2, 2]


def test_joined_statistics_do_keep_each_piece_at_its_coordinates():
    """A piece with the same bounds on each of its coordinates counts all of them, along a
    positive or a negative axis."""
    X = pm.Normal.dist(0, 1, shape=(4, 2))
    for axis in (1, -1):
        joined = pt.concatenate([pt.clip(X, -1, 1), pt.clip(X[:, :1], 0, 3)], axis=axis)
        assert _bounds(joined, [X]) == ([-1, -1, 0], [1, 1, 3]), axis
        first_last = pt.concatenate([pt.clip(X[:, :1], 0, 3), pt.clip(X, -1, 1)], axis=axis)
        assert _bounds(first_last, [X]) == ([0, -1, -1], [3, 1, 1]), axis


def test_slices_of_a_statistic_with_shared_bounds_do_keep_the_bounds():
    X = pm.Normal.dist(0, 1, shape=(4, 3))
    clipped = pt.clip(X, -1, 2)
    assert _bounds(clipped[:, 1:], [X]) == ([-1, -1], [2, 2])
    assert _bounds(clipped[:, 2:3], [X]) == ([-1], [2])
    found = statistic_range(clipped[:, 2], [X])
    assert (float(found.lower), float(found.upper)) == (-1.0, 2.0)


def test_maxima_and_minima_over_coordinates_do_bound_the_right_end():
    """``max`` of coordinates in [-1, 1] and [0, 4] lies in [0, 4]; their ``min`` in [-1, 1]."""
    X = pm.Normal.dist(0, 1, shape=(4, 2))
    clamped = pt.clip(X, pt.as_tensor([-1.0, 0.0]), pt.as_tensor([1.0, 4.0]))
    found = statistic_range(clamped.max(axis=1), [X])
    assert (float(found.lower), float(found.upper)) == (0.0, 4.0)
    found = statistic_range(clamped.min(axis=1), [X])
    assert (float(found.lower), float(found.upper)) == (-1.0, 1.0)


def test_a_division_by_a_range_with_zero_is_unbounded_unless_the_numerator_is_zero():
    x, z = pm.Normal.dist(0, 1, size=5), pm.Normal.dist(0, 1, size=5)
    for numerator in (pt.clip(x, 0, 1), pt.clip(x, -1, 0), pt.clip(x, 1, 2)):
        found = statistic_range(numerator / pt.clip(z, -1, 1), [x, z])
        assert not found.finite and found.unbounded
        assert (float(found.lower), float(found.upper)) == (-np.inf, np.inf)
    found = statistic_range((x * 0) / pt.clip(z, -1, 1), [x, z])
    assert (float(found.lower), float(found.upper)) == (0.0, 0.0) and found.finite


def test_a_clip_with_a_random_lower_bound_does_reach_its_highest_value():
    """``clip(b, lower, 10)`` with ``b`` in [0, 1] and ``lower`` in [2, 3] is ``lower``."""
    lower = pm.Uniform.dist(2, 3)
    b = pm.Bernoulli.dist(0.5, size=5)
    found = statistic_range(pt.clip(b, lower, 10), [b])
    assert (float(found.lower), float(found.upper)) == (2.0, 3.0)
    found = statistic_range(pt.clip(b, -1, lower), [b])  # the upper end: b itself
    assert (float(found.lower), float(found.upper)) == (0.0, 1.0)


def test_censored_records_do_keep_the_support_of_their_distribution():
    """Censoring a Beta at -1 and 2 leaves it in [0, 1]; a normal's becomes [-1, 2]."""
    beta = pm.Censored.dist(pm.Beta.dist(2, 2), lower=-1, upper=2, size=4)
    normal = pm.Censored.dist(pm.Normal.dist(0, 1), lower=-1, upper=2, size=4)
    found = statistic_range(pt.stack([beta, normal], axis=1), [beta, normal])
    assert found.lower.tolist() == [0.0, -1.0] and found.upper.tolist() == [1.0, 2.0]


def test_the_degree_of_a_division_by_the_variable_is_not_a_polynomial():
    x = pt.vector("x")
    assert polynomial_degree(x / 2.0, x) == 1
    assert polynomial_degree((x * x) / 3.0 + x, x) == 2
    assert polynomial_degree(x / x, x) is None
    assert polynomial_degree(1.0 / (x + 1.0), x) is None
    assert polynomial_degree((x**2) / pt.sqrt(x), x) is None


def _sums_of_joins(graph) -> int:
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.basic import Join
    from pytensor.tensor.math import Sum

    return sum(
        1
        for var in ancestors([graph])
        if var.owner is not None
        and isinstance(var.owner.op, Sum)
        and var.owner.inputs[0].owner is not None
        and isinstance(var.owner.inputs[0].owner.op, Join)
    )


def _joins(graph) -> int:
    from pytensor.graph.traversal import ancestors
    from pytensor.tensor.basic import Join

    return sum(
        1 for v in ancestors([graph]) if v.owner is not None and isinstance(v.owner.op, Join)
    )


@pytest.mark.parametrize(
    ("join_axis", "sum_axis", "split"),
    [
        (1, 0, True),  # a released sum of several per-record statistics: stack(..., axis=1).sum(0)
        (-1, (0,), True),
        (1, None, False),  # the join's axis is summed too: left as it is
        (1, 1, False),
        (0, 1, True),  # rows summed along the columns
        (2, (0, 1), True),  # a 3-d join
    ],
)
def test_column_sums_split_a_sum_of_joined_pieces_into_the_join_of_their_sums(
    join_axis, sum_axis, split
):
    """One-column and wider pieces, negative axes, 2 and 3 dimensions: the rewritten graph has
    no sum of a join where one was split, and its value is the original's up to rounding."""
    from pymc_unbounded_dp._graph import split_column_sums

    rng = np.random.default_rng(0)
    ndim = 3 if join_axis == 2 else 2
    x = pt.tensor("x", shape=(None,) * ndim)
    one = pt.expand_dims(pt.exp(x).sum(axis=join_axis), join_axis)  # one slice along the axis
    pieces = [x**2, one, pt.clip(x, -0.5, 0.5) * 3.0]
    inner = pt.join(join_axis, one * 2.0, pt.sin(x))  # a join nested along the same axis
    total = pt.join(join_axis, *pieces, inner).sum(axis=sum_axis)
    (rewritten,) = split_column_sums([total])
    assert _sums_of_joins(total) == 1 and _sums_of_joins(rewritten) == (0 if split else 1)
    joins = _joins(rewritten)  # split: the nested join's pieces summed too, one join of sums
    assert joins == (1 if split else 2)
    value = rng.normal(size=(5, 4, 3)[:ndim])
    expected = total.eval({x: value})
    np.testing.assert_allclose(rewritten.eval({x: value}), expected, rtol=1e-13, atol=0)
    assert rewritten.type.shape == total.type.shape
    assert rewritten.dtype == total.dtype
