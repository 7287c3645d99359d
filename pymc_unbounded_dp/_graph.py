"""Small PyTensor graph utilities shared by the model blocks and the model compiler."""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence

import numpy as np
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.distributions.distribution import _support_point
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Constant
from pytensor.graph.rewriting.basic import in2out, node_rewriter
from pytensor.raise_op import CheckAndRaise
from pytensor.tensor.basic import Join, MakeVector
from pytensor.tensor.elemwise import CAReduce, DimShuffle, Elemwise
from pytensor.tensor.math import Dot, Sum
from pytensor.tensor.random.basic import (
    BernoulliRV,
    HalfNormalRV,
    NegBinomialRV,
    NormalRV,
    StudentTRV,
)
from pytensor.tensor.shape import Reshape, Shape, Shape_i, SpecifyShape
from pytensor.tensor.subtensor import Subtensor

try:  # PyTensor >= 2.31
    from pytensor.graph.traversal import ancestors, io_toposort
except ImportError:  # pragma: no cover
    from pytensor.graph.basic import ancestors, io_toposort
from pytensor.graph.replace import clone_replace

from pymc_unbounded_dp.errors import FrozenRecordsError

#: Mode for one-off evaluations at model-build time: no C compilation, no heavy rewrites.
QUICK_MODE = Mode(linker="py", optimizer="fast_compile")


# --------------------------------------------------------------------------------------------------
# NumPy draws for random variables that PyTensor samples through scipy.stats
# --------------------------------------------------------------------------------------------------
def _draw_shape(size, *parameters) -> tuple:
    return tuple(size) if size is not None else np.broadcast_shapes(*map(np.shape, parameters))


class _BernoulliFromUniform(BernoulliRV):
    """Bernoulli(p) as ``u < p`` with ``u ~ U[0, 1)``."""

    @classmethod
    def rng_fn(cls, rng, p, size):
        return rng.random(_draw_shape(size, p)) < p


class _NormalFromStandard(NormalRV):
    """``loc + scale * z`` with ``z ~ N(0, 1)``: ``Generator.normal``'s own arithmetic, without its
    check of the scales (a NumPy ``any`` call, a few microseconds per draw call); the same draws
    bit for bit."""

    @classmethod
    def rng_fn(cls, rng, loc, scale, size):
        return loc + scale * rng.standard_normal(_draw_shape(size, loc, scale))


class _HalfNormalFromNormal(HalfNormalRV):
    """``loc + scale * |z|`` with ``z ~ N(0, 1)``."""

    @classmethod
    def rng_fn(cls, rng, loc, scale, size):
        return loc + scale * np.abs(rng.standard_normal(_draw_shape(size, loc, scale)))


class _StudentTFromNumPy(StudentTRV):
    """``loc + scale * t`` with ``t`` from ``Generator.standard_t``."""

    @classmethod
    def rng_fn(cls, rng, df, loc, scale, size):
        shape = _draw_shape(size, df, loc, scale)
        return loc + scale * rng.standard_t(np.broadcast_to(df, shape), size=shape)


class _NegBinomialFromNumPy(NegBinomialRV):
    """``Generator.negative_binomial(n, p)``: failures before the ``n``-th success, as scipy's."""

    @classmethod
    def rng_fn(cls, rng, n, p, size):
        return rng.negative_binomial(n, p, size=_draw_shape(size, n, p))


_NUMPY_DRAWS = {
    NormalRV: _NormalFromStandard,
    BernoulliRV: _BernoulliFromUniform,
    HalfNormalRV: _HalfNormalFromNormal,
    StudentTRV: _StudentTFromNumPy,
    NegBinomialRV: _NegBinomialFromNumPy,
}


@node_rewriter(list(_NUMPY_DRAWS))
def numpy_draws(fgraph, node):
    """Draw with one NumPy call where PyTensor goes through ``scipy.stats`` (same distribution),
    and normals without NumPy's check of the scales (same draws).

    ``scipy.stats`` costs ~25 us per call in argument checks and ~13 ns per Bernoulli draw, against
    ~3 ns for ``u < p``: at a thousand records that is most of a record sweep.
    """
    faster = _NUMPY_DRAWS.get(type(node.op))  # exact type: not the replacements themselves
    if faster is None:
        return None
    op = node.op
    replacement = faster(signature=op.signature, dtype=op.dtype, inplace=op.inplace)
    return replacement.make_node(*node.inputs).outputs


#: Mode for the functions called every iteration (proposals, prior of n): the C virtual machine,
#: whose per-call overhead is a few microseconds (PyTensor 3 defaults to numba, whose argument
#: typing costs ~0.1 ms per call), and :func:`numpy_draws`.
KERNEL_MODE = Mode(linker="cvm", optimizer="fast_run").register((in2out(numpy_draws), 0.5))


def depends_on(graph: pt.TensorVariable, targets: Sequence, blockers: Sequence = ()) -> list:
    """The members of ``targets`` that ``graph`` depends on, not looking past ``blockers``."""
    found = set(ancestors([graph], blockers=list(blockers)))
    return [t for t in targets if t in found]


def with_record_count(
    outputs: Sequence, containers: Sequence, m: pt.TensorVariable, sizes: Sequence = ()
) -> list:
    """Rewrite ``outputs`` so that record variables have ``m`` rows.

    Non-row-wise record variables take their size from their data container's length (known
    ``n``; for a large table whose container is filled later, the shared scalar
    ``container.tag.record_count``) or from the latent ``n`` (``sizes``: its random variable or
    value variable); replacing
    each container by an ``m``-row placeholder and each size by ``m`` makes them (and everything
    downstream, such as row-wise children and statistics) draw ``m`` fresh records.
    """
    replacements = {
        data: pt.zeros((m, *data.get_value().shape[1:]), dtype=data.dtype) for data in containers
    }
    # a large table's known n is a shared scalar beside its (not yet filled) container
    sizes = [*sizes, *(d.tag.record_count for d in containers if hasattr(d.tag, "record_count"))]
    replacements.update({size: pt.cast(m, size.dtype) for size in sizes})
    return list(clone_replace(list(outputs), replacements))


def quick_draw(outputs: Sequence, seed: int = 0) -> list[np.ndarray]:
    """Evaluate random ``outputs`` once, seeded, without compiling C code."""
    from pymc.pytensorf import compile as compile_pymc

    fn = compile_pymc([], list(outputs), random_seed=seed, mode=QUICK_MODE)
    return [np.asarray(v) for v in fn()]


def quick_function(inputs: Sequence, outputs: Sequence):
    """Compile a function for build-time checks without C compilation."""
    return pytensor.function(list(inputs), list(outputs), mode=QUICK_MODE, on_unused_input="ignore")


# --------------------------------------------------------------------------------------------------
# a discrete prior whose initial point is given (the latent n starts next to n_dp)
# --------------------------------------------------------------------------------------------------
_STARTING_CLASSES: dict[type, type] = {}


def starting_at(prior: pt.TensorVariable, start: int) -> pt.TensorVariable:
    """``prior`` (an unregistered scalar distribution) with PyMC's initial point at ``start``.

    PyMC's model transforms (``pm.do``, ``pm.observe``, ``clone_model``,
    ``freeze_dims_and_data``, ``compute_log_likelihood``) refuse models with a registered initial
    value, and the initial point of their results comes from each variable's ``support_point``.
    So the start is carried by the variable's op instead: a subclass of the prior's op (one per
    op class, with ``start`` among its props) whose ``support_point`` is ``start``. Its density,
    draws and everything else dispatched on the op are the prior's own (by inheritance), with
    one exception: when PyMC draws the model's graph (``pm.model_to_graphviz``), which evaluates
    every variable's shape and so draws ``n`` for the record plate, ``n`` is its start (a flat
    prior has no draws; a proper prior's draw would label the plate with a random number).
    """
    node = prior.owner
    base = type(node.op)
    cls = _STARTING_CLASSES.get(base)
    if cls is None:

        def __init__(self, *args, start: int = 0, **kwargs):
            base.__init__(self, *args, **kwargs)
            self.start = start

        def rng_fn(self, rng, *args, **kwargs):
            if _drawing_model_graph():
                return np.asarray(self.start, dtype=self.dtype)
            return super(cls, self).rng_fn(rng, *args, **kwargs)

        cls = type(
            f"{base.__name__}StartingAt",
            (base,),
            {"__props__": (*base.__props__, "start"), "__init__": __init__, "rng_fn": rng_fn},
        )
        _support_point.register(cls)(lambda op, rv, *inputs: pt.constant(op.start, dtype=rv.dtype))
        _STARTING_CLASSES[base] = cls
    op = copy.copy(node.op)
    op.__class__ = cls
    op.start = int(start)
    return op.make_node(*node.inputs).outputs[node.outputs.index(prior)]


def _drawing_model_graph() -> bool:
    """Whether the caller is PyMC's model-graph drawing (``pm.model_to_graphviz`` and friends)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == "pymc.model_graph":
            return True
        frame = frame.f_back
    return False


# --------------------------------------------------------------------------------------------------
# the frozen-records guard
# --------------------------------------------------------------------------------------------------
class FrozenRecordsGuard(CheckAndRaise):
    """A check on a release's log-density: it holds only while the records are imputed.

    A release's density reads the records in the model's containers. They are current only inside
    the package's steps, which switch the model's ``imputing`` flag on around each iteration (so
    parameter steps placed inside them, even ones compiled by the user, work); the package's own
    graphs drop the guard (:func:`without_guards`). Any other evaluation (``pm.find_MAP``,
    ``pm.sample`` with steps that do not impute the records, ``pm.compute_log_likelihood``,
    ``pm.fit``) would condition on frozen records: it raises
    :class:`~pymc_unbounded_dp.errors.FrozenRecordsError` with the message instead.
    """

    def __init__(self, msg: str):
        super().__init__(FrozenRecordsError, msg)


def frozen_records_guard(
    log_density: pt.TensorVariable, message: str, imputing
) -> pt.TensorVariable:
    """``log_density`` behind a :class:`FrozenRecordsGuard` on the shared flag ``imputing``."""
    return FrozenRecordsGuard(message)(log_density, imputing)


def without_guards(graphs: Sequence) -> list:
    """``graphs`` with every :class:`FrozenRecordsGuard` removed (for the package's own use)."""
    guarded = {
        var: var.owner.inputs[0]
        for var in ancestors(list(graphs))
        if var.owner is not None and isinstance(var.owner.op, FrozenRecordsGuard)
    }
    return list(clone_replace(list(graphs), guarded)) if guarded else list(graphs)


def split_column_sums(graphs: Sequence) -> list:
    """``graphs`` with each sum over the rows of joined columns taken column by column.

    A released sum of several per-record statistics is ``sum(join(columns, axis=1), axis=0)``:
    compiled as written, the record loop writes every column, the join copies them into one
    matrix and the sum reads it again. Summed one by one (then joined, a few numbers), each
    column's record computation fuses into its own reduction loop, with no array in between: the
    non-centred target at N = 1,000 costs 6 us in numba instead of 17 (the totals agree up to the
    order of the additions).
    """
    split = {}
    for var in ancestors(list(graphs)):
        if var.owner is not None and isinstance(var.owner.op, Sum):
            columns = _column_sums(var)
            if columns is not None:
                split[var] = columns
    return list(clone_replace(list(graphs), split)) if split else list(graphs)


def _column_sums(total: pt.TensorVariable) -> pt.TensorVariable | None:
    """``total`` (a ``Sum`` of a ``Join``) as the join of its pieces' sums, or ``None`` where the
    join's axis is summed over or not a constant. Joins nested along the same axis (a
    ``concatenate`` of ``stack``s) give their own pieces."""
    (joined,) = total.owner.inputs
    found = _join_of(joined)
    if found is None:
        return None
    axis, pieces = found
    ndim = joined.ndim
    summed = tuple(range(ndim)) if total.owner.op.axis is None else tuple(total.owner.op.axis)
    summed = tuple(a % ndim for a in summed)
    if axis in summed:
        return None
    kept_axis = axis - sum(a < axis for a in summed)  # where the join's axis is after the sum
    sums = []
    for piece in pieces:
        if piece.type.broadcastable[axis]:  # one column: sum it as a vector, a loop of its own
            inner = tuple(a - (a > axis) for a in summed)
            sums.append(pt.expand_dims(piece.squeeze(axis=axis).sum(axis=inner), kept_axis))
        else:
            sums.append(piece.sum(axis=summed))
    return pt.join(kept_axis, *sums).astype(total.dtype)


def _join_of(var) -> tuple[int, list] | None:
    """``(axis, pieces)`` of a ``Join`` with a constant axis (non-negative), the pieces of joins
    nested along the same axis in their place; ``None`` for anything else."""
    if var.owner is None or not isinstance(var.owner.op, Join):
        return None
    op, pieces = var.owner.op, list(var.owner.inputs)
    if isinstance(getattr(op, "axis", None), int):  # PyTensor 3: the axis is the op's
        axis = op.axis
    else:  # PyTensor 2: the axis is the first input
        value = constant_value(pieces.pop(0))
        if value is None:
            return None
        axis = int(value)
    axis %= var.ndim
    flat = []
    for piece in pieces:
        inner = _join_of(piece)
        flat.extend(inner[1] if inner is not None and inner[0] == axis else [piece])
    return axis, flat


# --------------------------------------------------------------------------------------------------
# Reading statistics' graphs (the sums level's moment rules)
# --------------------------------------------------------------------------------------------------
def strip_casts(var):
    """``var`` without the casts, identities and dimshuffles on top of it."""
    while var.owner is not None and (
        isinstance(var.owner.op, DimShuffle)
        or (
            isinstance(var.owner.op, Elemwise)
            and isinstance(var.owner.op.scalar_op, ps.Cast | ps.Identity)
        )
    ):
        var = var.owner.inputs[0]
    return var


def constant_value(var) -> float | None:
    """The value of a scalar constant under casts and dimshuffles, else ``None``."""
    var = strip_casts(var)
    if isinstance(var, Constant) and np.size(var.data) == 1:
        return float(np.asarray(var.data).reshape(-1)[0])
    return None


_SAME_DEGREE = (ps.Add, ps.Sub, ps.Neg, ps.Cast, ps.Identity)
_STRUCTURAL = (DimShuffle, Join, MakeVector, Reshape, Subtensor, SpecifyShape)


def polynomial_degree(output, variable) -> int | None:
    """The degree of ``output`` as a polynomial in ``variable`` (elementwise), or ``None``."""
    degree = {variable: 1}
    for node in io_toposort([variable], [output]):
        inputs = [degree.get(i, 0) for i in node.inputs]
        op = node.op
        if isinstance(op, Shape | Shape_i) or not any(inputs):
            continue
        scalar = op.scalar_op if isinstance(op, Elemwise) else None
        summed = isinstance(op, CAReduce) and isinstance(op.scalar_op, ps.Add)
        if isinstance(op, _STRUCTURAL) or isinstance(scalar, _SAME_DEGREE) or summed:
            value = max(inputs)
        elif isinstance(scalar, ps.Mul) or isinstance(op, Dot):
            value = sum(inputs)
        elif isinstance(scalar, ps.Sqr):
            value = 2 * inputs[0]
        elif isinstance(scalar, ps.TrueDiv) and inputs[1] == 0:
            value = inputs[0]
        elif isinstance(scalar, ps.Pow) and inputs[1] == 0:
            power = constant_value(node.inputs[1])
            if power is None or power != int(power) or power < 0:
                return None
            value = int(power) * inputs[0]
        else:
            return None
        for out in node.outputs:
            degree[out] = value
    return degree.get(output, 0)
