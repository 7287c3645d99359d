r"""Interval arithmetic over a statistic's PyTensor graph: the range of one record's statistic.

:func:`statistic_range` walks the graph of a per-record statistic from the records up and gives
every coordinate an interval ``[lower, upper]`` that contains all its possible values, or an
infinite bound where none can be derived. It is what :func:`~pymc_unbounded_dp.PrivatizedSum`
compares with the mechanism's declared sensitivity (:mod:`pymc_unbounded_dp.sensitivity`).

What is understood (anything else gives an infinite interval, which is always safe):

* **leaves**: constants; the support of a random variable read from its distribution and the
  ranges of its parameters (Bernoulli ``[0, 1]``, Binomial ``[0, n]``, Categorical ``[0, k-1]``,
  Beta and Dirichlet ``[0, 1]``, Uniform and DiscreteUniform ``[lower, upper]``, Poisson
  ``[0, inf)``, Normal ``(-inf, inf)``, ..., ``pm.Censored`` and ``pm.Truncated`` ``[lower,
  upper]``); a record defined from other records (``y | X``) has the support of its own
  distribution. Data containers (``pm.Data``) can change, so they are unbounded.
* **elementwise**: ``pt.clip`` (reversed constant bounds are a ``ValueError``), comparisons and
  logical operators (``[0, 1]``), casts, ``+``, ``-``, ``*``, ``/``, ``sqr``, ``**`` (integer or,
  on a non-negative base, real exponents; ``x * x`` is a square), ``abs``, ``minimum``,
  ``maximum``, ``switch`` and monotone functions (``exp``, ``log``, ``sqrt``, ``sigmoid``, ``tanh``,
  rounding, ...).
* **structure**: ``pt.stack`` / ``pt.concatenate`` (join), axis insertion and transposition,
  basic indexing with constant indices (``x[:, 0]``, ``x[:, 1:3]``), sums, maxima and minima over
  trailing axes. Other indexing (advanced, or with variable indices) takes the hull of the indexed
  array's range: every value of the result is one of its values.

The bounds are the usual rules of interval arithmetic (Moore, *Interval Analysis*, 1966): sound
(the true range is inside) but not always tight, e.g. ``x - x`` is ``[l - u, u - l]``, not ``0``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pytensor.scalar as ps
from pymc.distributions.censored import CensoredRV
from pymc.distributions.continuous import (
    HalfCauchyRV,
    KumaraswamyRV,
    TruncatedNormalRV,
    WeibullBetaRV,
)
from pymc.distributions.discrete import DiscreteUniformRV
from pymc.distributions.distribution import SymbolicRandomVariable
from pymc.distributions.truncated import TruncatedRV
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Constant, Variable, equal_computations
from pytensor.tensor import random as ptr
from pytensor.tensor import subtensor
from pytensor.tensor.basic import Join, MakeVector
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.shape import SpecifyShape
from pytensor.tensor.subtensor import Subtensor, indices_from_subtensor
from scipy.special import erf

__all__ = ["Range", "statistic_range"]

#: Advanced indexing ops (``AdvancedSubtensor1`` exists before PyTensor 3 only).
_ADVANCED_INDEXING = tuple(
    getattr(subtensor, name)
    for name in ("AdvancedSubtensor", "AdvancedSubtensor1")
    if hasattr(subtensor, name)
)


@dataclass(frozen=True)
class Range:
    """Bounds of each coordinate of one record's statistic.

    ``lower`` and ``upper`` broadcast to one record's statistic shape; ``unbounded`` names what
    made a bound infinite (e.g. ``"records 'x' ~ normal"``), empty when all bounds are finite.
    """

    lower: np.ndarray
    upper: np.ndarray
    unbounded: tuple[str, ...]

    @property
    def finite(self) -> bool:
        return bool(np.all(np.isfinite(self.lower)) and np.all(np.isfinite(self.upper)))


@dataclass(frozen=True)
class _Interval:
    """Bounds of a variable: arrays with the variable's ndim (length-1 axes broadcast)."""

    lo: np.ndarray
    hi: np.ndarray
    #: What made a bound infinite (empty when both bounds are finite everywhere).
    sources: frozenset[str] = frozenset()


def _interval(lo, hi, sources=frozenset()) -> _Interval:
    """An interval with NaN bounds made infinite and ``sources`` kept only if a bound is."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
    lo = np.where(np.isnan(lo), -np.inf, lo)
    hi = np.where(np.isnan(hi), np.inf, hi)
    finite = bool(np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))
    return _Interval(lo, hi, frozenset() if finite else frozenset(sources))


def _unbounded(ndim: int, source: str) -> _Interval:
    shape = (1,) * ndim
    return _Interval(np.full(shape, -np.inf), np.full(shape, np.inf), frozenset([source]))


def _union(*intervals: _Interval) -> frozenset[str]:
    return frozenset().union(*(i.sources for i in intervals))


def _hull(interval: _Interval, ndim: int) -> _Interval:
    """One interval containing every coordinate of ``interval``, with ``ndim`` length-1 axes."""
    shape = (1,) * ndim
    lo = np.full(shape, interval.lo.min() if interval.lo.size else -np.inf)
    hi = np.full(shape, interval.hi.max() if interval.hi.size else np.inf)
    return _interval(lo, hi, interval.sources)


def _stack_hull(intervals: Sequence[_Interval]) -> _Interval:
    """A scalar interval containing every coordinate of all ``intervals``."""
    lo = min((float(i.lo.min()) for i in intervals if i.lo.size), default=-np.inf)
    hi = max((float(i.hi.max()) for i in intervals if i.hi.size), default=np.inf)
    return _interval(lo, hi, _union(*intervals))


def _with_length(shape: tuple, axis: int, length: int) -> tuple:
    return (*shape[:axis], length, *shape[axis + 1 :])


def _pad(array: np.ndarray, ndim: int) -> np.ndarray:
    """``array`` with leading length-1 axes up to ``ndim`` (NumPy broadcasting's alignment)."""
    return array.reshape((1,) * (ndim - array.ndim) + array.shape)


def _is_constant(interval: _Interval) -> bool:
    return bool(np.all(interval.lo == interval.hi) and np.all(np.isfinite(interval.lo)))


def _corners(values: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Minimum and maximum of candidate bounds; ``0 * inf`` counts as 0 (closed intervals)."""
    stacked = np.stack(np.broadcast_arrays(*values))
    stacked = np.where(np.isnan(stacked), 0.0, stacked)
    return stacked.min(axis=0), stacked.max(axis=0)


def _product(a: _Interval, b: _Interval) -> _Interval:
    with np.errstate(invalid="ignore"):
        lo, hi = _corners([a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi])
    return _interval(lo, hi, _union(a, b))


def _integer_power(a: _Interval, k: int) -> _Interval:
    """``x**k`` for an integer ``k >= 0`` (even powers are non-negative and fold at 0)."""
    if k == 0:
        return _interval(np.ones_like(a.lo), np.ones_like(a.hi))
    with np.errstate(over="ignore"):
        lo_k, hi_k = a.lo**k, a.hi**k
    if k % 2:
        return _interval(lo_k, hi_k, a.sources)
    straddles = (a.lo < 0) & (a.hi > 0)
    lower = np.where(straddles, 0.0, np.minimum(lo_k, hi_k))
    return _interval(lower, np.maximum(lo_k, hi_k), a.sources)


def _power(a: _Interval, exponent: _Interval, ndim: int, what: str) -> _Interval:
    if not _is_constant(exponent) or np.unique(exponent.lo).size != 1:
        return _unbounded(ndim, what)
    p = float(exponent.lo.reshape(-1)[0])
    if p == int(p) and p >= 0:
        return _integer_power(a, int(p))
    if np.all(a.lo >= 0) and (p > 0 or np.all(a.lo > 0)):
        with np.errstate(divide="ignore", over="ignore"):
            ends = (a.lo**p, a.hi**p)
        return _interval(np.minimum(*ends), np.maximum(*ends), a.sources)
    return _unbounded(ndim, what)


def _monotone(function: Callable, a: _Interval, what: str) -> _Interval:
    """A non-decreasing function; values outside its domain (NaN) make the bound infinite."""
    with np.errstate(all="ignore"):
        own = {f"{what} on [{a.lo.min():g}, {a.hi.max():g}]"}
        return _interval(function(a.lo), function(a.hi), a.sources or own)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


#: Non-decreasing elementwise functions and their NumPy counterparts.
_MONOTONE = {
    ps.Exp: np.exp,
    ps.Exp2: np.exp2,
    ps.Expm1: np.expm1,
    ps.Log: np.log,
    ps.Log2: np.log2,
    ps.Log10: np.log10,
    ps.Log1p: np.log1p,
    ps.Sqrt: np.sqrt,
    ps.Tanh: np.tanh,
    ps.ArcTan: np.arctan,
    ps.ArcSinh: np.arcsinh,
    ps.Sigmoid: _sigmoid,
    ps.Erf: erf,
    ps.Floor: np.floor,
    ps.Ceil: np.ceil,
    ps.Trunc: np.trunc,
    ps.RoundHalfToEven: np.round,
    ps.RoundHalfAwayFromZero: lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
    ps.Identity: lambda x: x,
}
#: Elementwise operators whose values lie in [0, 1] (comparisons, logic, indicators).
_INDICATORS = (
    ps.EQ,
    ps.NEQ,
    ps.LT,
    ps.GT,
    ps.LE,
    ps.GE,
    ps.AND,
    ps.OR,
    ps.XOR,
    ps.Invert,
    ps.IsNan,
    ps.IsInf,
)
#: Elementwise functions bounded by [-1, 1] whatever their argument.
_UNIT = (ps.Sign, ps.Sin, ps.Cos)


# --------------------------------------------------------------------------------------------------
# supports of distributions, from the ranges of their parameters
# --------------------------------------------------------------------------------------------------
def _fixed(lower: float, upper: float) -> Callable:
    return lambda params, variables: (lower, upper)


def _from(lower: int, upper: int | None = None, offset: float = 0.0) -> Callable:
    """``[lower bound of parameter lower, upper bound of parameter upper + offset]``."""

    def rule(params, variables):
        return params[lower].lo, np.inf if upper is None else params[upper].hi + offset

    return rule


def _zero_to(upper: int) -> Callable:
    return lambda params, variables: (0.0, params[upper].hi)


def _categorical(params, variables) -> tuple:
    k = variables[0].type.shape[-1]  # the number of categories, if static
    return 0.0, np.inf if k is None else k - 1.0


#: ``rule(parameter intervals, parameter variables) -> (lower, upper)``: the support of each
#: distribution that has a bound (the others, e.g. Normal, are unbounded).
_SUPPORTS: dict[type, Callable] = {
    ptr.basic.BernoulliRV: _fixed(0.0, 1.0),
    ptr.basic.BetaRV: _fixed(0.0, 1.0),
    ptr.basic.DirichletRV: _fixed(0.0, 1.0),
    KumaraswamyRV: _fixed(0.0, 1.0),
    ptr.basic.VonMisesRV: _fixed(-np.pi, np.pi),
    ptr.basic.BinomialRV: _zero_to(0),
    ptr.basic.BetaBinomialRV: _zero_to(0),
    ptr.basic.MultinomialRV: _zero_to(0),
    ptr.basic.HyperGeometricRV: lambda p, v: (0.0, np.minimum(p[0].hi, p[2].hi)),  # good, sample
    ptr.basic.CategoricalRV: _categorical,
    ptr.basic.UniformRV: _from(0, 1),
    DiscreteUniformRV: _from(0, 1),
    ptr.basic.IntegersRV: _from(0, 1, offset=-1.0),  # high is exclusive
    ptr.basic.TriangularRV: _from(0, 2),
    TruncatedNormalRV: _from(2, 3),
    ptr.basic.HalfNormalRV: _from(0),
    ptr.basic.HalfCauchyRV: _from(0),
    ptr.basic.ParetoRV: _from(1),
    ptr.basic.GeometricRV: _fixed(1.0, np.inf),
    **{
        rv: _fixed(0.0, np.inf)
        for rv in (
            ptr.basic.PoissonRV,
            ptr.basic.NegBinomialRV,
            ptr.basic.GammaRV,
            ptr.basic.ExponentialRV,
            ptr.basic.LogNormalRV,
            ptr.basic.InvGammaRV,
            ptr.basic.WaldRV,
            ptr.basic.WeibullRV,
            WeibullBetaRV,
            HalfCauchyRV,  # PyMC's own (scale only); pytensor's takes a location, above
        )
    },
}


def _distribution_name(op) -> str:
    name = getattr(op, "name", None)
    return name if isinstance(name, str) and name else type(op).__name__


# --------------------------------------------------------------------------------------------------
# the walk
# --------------------------------------------------------------------------------------------------
class _Walker:
    """Intervals of the variables of one graph (memoised)."""

    def __init__(self, records: Sequence[Variable], owner: str):
        self.records = set(records)
        self.owner = owner
        self.memo: dict[Variable, _Interval] = {}

    def __call__(self, var: Variable) -> _Interval:
        if var not in self.memo:
            self.memo[var] = self._compute(var)
        return self.memo[var]

    def _describe(self, var: Variable) -> str:
        if var in self.records:
            return f"records {var.name!r}"
        return repr(var.name) if var.name else str(var)

    def _compute(self, var: Variable) -> _Interval:
        ndim = getattr(var.type, "ndim", 0)
        if isinstance(var, Constant):
            value = np.asarray(var.data, dtype=float)
            return _interval(value, value, {f"the constant {value}"})
        if getattr(var, "dtype", None) == "bool":
            return _interval(np.zeros((1,) * ndim), np.ones((1,) * ndim))
        if isinstance(var, SharedVariable):
            return _unbounded(ndim, f"the data container {self._describe(var)} (it can change)")
        if var.owner is None:
            return _unbounded(ndim, f"the input {self._describe(var)}")
        return self._owner_interval(var, ndim)

    def _owner_interval(self, var: Variable, ndim: int) -> _Interval:
        node, op = var.owner, var.owner.op
        if isinstance(op, RandomVariable | SymbolicRandomVariable):
            return self._support(var, ndim)
        if isinstance(op, Elemwise):
            return self._elemwise(var, ndim)
        if isinstance(op, DimShuffle):
            return self._dimshuffle(self(node.inputs[0]), op)
        if isinstance(op, Join):
            return self._join(var, ndim)
        if isinstance(op, MakeVector):
            parts = [self(x) for x in node.inputs]
            return _interval(
                np.concatenate([p.lo.reshape(1) for p in parts]),
                np.concatenate([p.hi.reshape(1) for p in parts]),
                _union(*parts),
            )
        if isinstance(op, Subtensor):
            return self._subtensor(var, ndim)
        if isinstance(op, _ADVANCED_INDEXING):
            return _hull(self(node.inputs[0]), ndim)
        if isinstance(op, SpecifyShape):
            return self(node.inputs[0])
        if isinstance(op, CAReduce):
            return self._reduce(var, ndim)
        return _unbounded(ndim, f"the operation {op}")

    # -- leaves: supports -------------------------------------------------------------------------
    def _support(self, var: Variable, ndim: int) -> _Interval:
        node, op = var.owner, var.owner.op
        label = f"{self._describe(var)} ~ {_distribution_name(op)}"
        if isinstance(op, CensoredRV | TruncatedRV):
            # Censoring clips the draw to [lower, upper]; truncation keeps draws inside it.
            lower, upper = self(node.inputs[-2]), self(node.inputs[-1])
            inner = self(node.inputs[0]) if isinstance(op, CensoredRV) else _unbounded(ndim, label)
            return self._clip(inner, lower, upper, label)
        rule = _SUPPORTS.get(type(op))
        if rule is None:  # unbounded, or a distribution not in the table (e.g. a CustomDist)
            return _unbounded(ndim, label)
        variables = op.dist_params(node)
        lo, hi = (np.asarray(b, float) for b in rule([self(p) for p in variables], variables))
        return _interval(_pad(lo, ndim), _pad(hi, ndim), {label})

    # -- elementwise ------------------------------------------------------------------------------
    def _elemwise(self, var: Variable, ndim: int) -> _Interval:
        node = var.owner
        scalar = node.op.scalar_op
        what = f"the operation {scalar}"
        if isinstance(scalar, ps.Mul):
            return self._mul(node.inputs, ndim)
        args = [self(x) for x in node.inputs]
        kind = type(scalar)
        if kind in _MONOTONE:
            return _monotone(_MONOTONE[kind], args[0], what)
        if isinstance(scalar, _INDICATORS):
            return _interval(np.zeros((1,) * ndim), np.ones((1,) * ndim))
        if isinstance(scalar, _UNIT):
            return _interval(-np.ones((1,) * ndim), np.ones((1,) * ndim))
        if isinstance(scalar, ps.Clip):
            return self._clip(*args, label=None, clipped=node.inputs[0])
        if isinstance(scalar, ps.Add):
            return _interval(sum(a.lo for a in args), sum(a.hi for a in args), _union(*args))
        if isinstance(scalar, ps.Sub):
            a, b = args
            return _interval(a.lo - b.hi, a.hi - b.lo, _union(a, b))
        if isinstance(scalar, ps.Neg):
            return _interval(-args[0].hi, -args[0].lo, args[0].sources)
        if isinstance(scalar, ps.TrueDiv):
            return self._divide(*args, ndim=ndim, what=what)
        if isinstance(scalar, ps.Reciprocal):
            one = _interval(np.ones((1,) * ndim), np.ones((1,) * ndim))
            return self._divide(one, args[0], ndim=ndim, what=what)
        if isinstance(scalar, ps.Sqr):
            return _integer_power(args[0], 2)
        if isinstance(scalar, ps.Pow):
            return _power(args[0], args[1], ndim, what)
        if isinstance(scalar, ps.Abs):
            a = args[0]
            straddles = (a.lo < 0) & (a.hi > 0)
            low = np.where(straddles, 0.0, np.minimum(np.abs(a.lo), np.abs(a.hi)))
            return _interval(low, np.maximum(np.abs(a.lo), np.abs(a.hi)), a.sources)
        if isinstance(scalar, ps.Minimum | ps.Maximum):
            pick = np.minimum if isinstance(scalar, ps.Minimum) else np.maximum
            a, b = args
            return _interval(pick(a.lo, b.lo), pick(a.hi, b.hi), _union(a, b))
        if isinstance(scalar, ps.Switch):
            a, b = args[1], args[2]
            return _interval(np.minimum(a.lo, b.lo), np.maximum(a.hi, b.hi), _union(a, b))
        if isinstance(scalar, ps.Second):
            return args[1]
        if isinstance(scalar, ps.Cast):
            return self._cast(args[0], var.dtype)
        return _unbounded(ndim, what)

    def _mul(self, inputs, ndim: int) -> _Interval:
        """A product; a factor repeated ``k`` times is a ``k``-th power (``x * x >= 0``)."""
        groups: list[list] = []  # [factor, count], equal computations counted together
        for x in inputs:
            same = next((g for g in groups if equal_computations([g[0]], [x])), None)
            if same is None:
                groups.append([x, 1])
            else:
                same[1] += 1
        result = None
        for x, k in groups:
            factor = _integer_power(self(x), k)
            result = factor if result is None else _product(result, factor)
        return result

    def _divide(self, a: _Interval, b: _Interval, ndim: int, what: str) -> _Interval:
        if np.any((b.lo <= 0) & (b.hi >= 0)):
            if np.all(a.lo == 0) and np.all(a.hi == 0):
                return a
            return _unbounded(ndim, f"{what} (a divisor whose range contains 0)")
        inverse = _interval(1.0 / b.hi, 1.0 / b.lo, b.sources)
        return _product(a, inverse)

    def _clip(self, x: _Interval, lower: _Interval, upper: _Interval, label, clipped=None):
        """``clip(x, lower, upper) = min(max(x, lower), upper)``; reversed bounds are an error."""
        reversed_ = lower.lo > upper.hi
        if np.any(reversed_):
            low, high = np.broadcast_arrays(lower.lo, upper.hi)
            i = np.argwhere(np.broadcast_to(reversed_, low.shape))[0]
            a, b = float(low[tuple(i)]), float(high[tuple(i)])
            if label is None:
                target = clipped.name or "..."
                raise ValueError(
                    f"{self.owner}: `statistic` has pt.clip({target}, {a:g}, {b:g}) with reversed "
                    f"bounds: the lower bound {a:g} is above the upper bound {b:g}, so every value "
                    f"becomes {b:g}. Swap them: pt.clip({target}, {b:g}, {a:g})."
                )
            raise ValueError(
                f"{self.owner}: {label} has reversed bounds: lower {a:g} is above upper {b:g}."
            )
        lo = np.minimum(np.maximum(x.lo, lower.lo), upper.lo)
        hi = np.minimum(np.maximum(x.hi, lower.hi), upper.hi)
        return _interval(lo, hi, _union(x, lower, upper))

    @staticmethod
    def _cast(a: _Interval, dtype: str) -> _Interval:
        """A cast to an integer type truncates toward zero; out of its range, values wrap."""
        if not dtype.startswith(("int", "uint")) or a.sources:
            return a
        info = np.iinfo(dtype)
        lo, hi = np.trunc(a.lo), np.trunc(a.hi)
        if np.any(lo < info.min) or np.any(hi > info.max):
            return _interval(np.full_like(lo, info.min), np.full_like(hi, info.max))
        return _interval(lo, hi)

    # -- structure --------------------------------------------------------------------------------
    @staticmethod
    def _dimshuffle(a: _Interval, op: DimShuffle) -> _Interval:
        kept = [i for i in op.new_order if i != "x"]
        dropped = [i for i in range(a.lo.ndim) if i not in kept]

        def shuffle(array):
            array = np.transpose(array, kept + dropped)
            array = array.reshape(array.shape[: len(kept)])  # dropped axes have length 1
            for position, i in enumerate(op.new_order):
                if i == "x":
                    array = np.expand_dims(array, position)
            return array

        return _Interval(shuffle(a.lo), shuffle(a.hi), a.sources)

    def _join(self, var: Variable, ndim: int) -> _Interval:
        node, op = var.owner, var.owner.op
        if hasattr(op, "axis"):  # PyTensor >= 2.31 keeps the axis on the op
            axis, parts = op.axis, node.inputs
        else:
            axis, parts = int(np.asarray(node.inputs[0].data)), node.inputs[1:]
        axis %= ndim
        pieces = [self(part) for part in parts]
        # Each piece's length along the axis: its bounds', or its static length where they are
        # the same along the axis.
        lengths = [
            piece.lo.shape[axis] if piece.lo.shape[axis] != 1 else part.type.shape[axis]
            for piece, part in zip(pieces, parts)
        ]
        if None in lengths:  # a piece of unknown length: the positions after it are unknown
            return _hull(_stack_hull(pieces), ndim)
        others = np.broadcast_shapes(*[_with_length(p.lo.shape, axis, 1) for p in pieces])

        def joined(bounds):
            shapes = [_with_length(others, axis, k) for k in lengths]
            return np.concatenate([np.broadcast_to(b, s) for b, s in zip(bounds, shapes)], axis)

        return _interval(
            joined([p.lo for p in pieces]), joined([p.hi for p in pieces]), _union(*pieces)
        )

    def _subtensor(self, var: Variable, ndim: int) -> _Interval:
        node = var.owner
        a = self(node.inputs[0])
        index = []
        for axis, entry in enumerate(indices_from_subtensor(node.inputs[1:], node.op.idx_list)):
            entry = self._constant_index(entry)
            if entry is None:
                return _hull(a, ndim)
            if a.lo.shape[axis] == 1:  # the same bounds along this axis
                index.append(0 if isinstance(entry, int) else slice(None))
            else:
                index.append(entry)
        return _Interval(a.lo[tuple(index)], a.hi[tuple(index)], a.sources)

    @staticmethod
    def _constant_index(entry):
        """A NumPy index from a Subtensor entry, or ``None`` if it is not constant."""

        def value(x):
            if x is None:
                return None
            if isinstance(x, Constant):
                return int(np.asarray(x.data))
            raise LookupError

        try:
            if isinstance(entry, slice):
                return slice(value(entry.start), value(entry.stop), value(entry.step))
            return value(entry)
        except LookupError:
            return None

    def _reduce(self, var: Variable, ndim: int) -> _Interval:
        node, op = var.owner, var.owner.op
        x = node.inputs[0]
        a = self(x)
        axes = tuple(range(x.ndim)) if op.axis is None else tuple(op.axis)
        scalar = op.scalar_op
        if isinstance(scalar, ps.Maximum | ps.Minimum):
            pick = np.max if isinstance(scalar, ps.Maximum) else np.min
            return _interval(pick(a.lo, axis=axes), pick(a.hi, axis=axes), a.sources)
        if isinstance(scalar, ps.Add):
            lo, hi = a.lo, a.hi
            for axis in axes:
                length = lo.shape[axis] if lo.shape[axis] != 1 else x.type.shape[axis]
                if length is None:
                    return _unbounded(ndim, f"a sum over an axis of unknown length of {x}")
                shape = list(lo.shape)
                shape[axis] = length
                lo, hi = np.broadcast_to(lo, shape), np.broadcast_to(hi, shape)
            return _interval(lo.sum(axis=axes), hi.sum(axis=axes), a.sources)
        return _unbounded(ndim, f"the reduction {op}")


def statistic_range(
    statistic: Variable, records: Sequence[Variable], owner: str = "statistic_range"
) -> Range:
    """The range of each coordinate of one record's ``statistic``, derived from its graph.

    Parameters
    ----------
    statistic : TensorVariable
        A per-record statistic with a leading record axis (as given to ``PrivatizedSum``).
    records : sequence of TensorVariable
        The model's record variables (named ``records '<name>'`` in :attr:`Range.unbounded`).
    owner : str
        Prefix of error messages.

    Returns
    -------
    Range
        Bounds broadcasting to ``statistic.shape[1:]``; infinite where not derivable.

    Raises
    ------
    ValueError
        If the statistic clips with constant bounds in the wrong order (``pt.clip(x, 3, -3)``).

    Examples
    --------
    >>> import pymc as pm, pytensor.tensor as pt
    >>> x = pm.Normal.dist(0, 1, size=10)
    >>> r = statistic_range(pt.stack([pt.clip(x, -2, 3), pt.clip(x, -2, 3) ** 2], axis=1), [x])
    >>> r.lower.tolist(), r.upper.tolist()
    ([-2.0, 0.0], [3.0, 9.0])
    """
    interval = _Walker(records, owner)(statistic)
    # Rows are records; bounds that differ across rows (per-record constants) are hulled.
    lower = interval.lo.min(axis=0) if interval.lo.ndim else interval.lo
    upper = interval.hi.max(axis=0) if interval.hi.ndim else interval.hi
    return Range(lower, upper, tuple(sorted(interval.sources)))
