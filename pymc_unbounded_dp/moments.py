r"""The moments of one record's statistic vector, by quadrature in the records' non-centred form.

The sums level's normal approximation (``augment="sums"`` on a table whose sums have no exact law,
:mod:`pymc_unbounded_dp.laws`) models a table's true totals as

.. math::

    T \mid \theta, n \sim \mathcal N\bigl(n\, m(\theta),\; n\, C(\theta)\bigr),

where ``m`` and ``C`` are the mean and covariance of one record's statistic vector ``t(x)`` under
the record model. :func:`record_moments` builds ``m``, ``C`` (and the third absolute central
moments, for the Berry--Esseen figure) as PyTensor graphs of the model's parameters, so that NUTS
differentiates them.

Each record variable ``x_j = g_j(theta, x_{<j}, u_j)`` is integrated over its ancillary ``u_j``
(:mod:`pymc_unbounded_dp.noncentred`), in the order the records were declared, by a nested
product rule:

* a standard-normal ancillary (Normal records) on ``[-TAIL, TAIL]``, a uniform one
  (Uniform records) on ``[0, 1]``;
* a normal range is cut at ``NORMAL_CUTS``, and each range where a statistic has a kink or a jump in ``x_j`` (a clamp ``clip(x_j, a, b)``,
  ``maximum``/``minimum`` with a constant, a comparison with a constant, ``abs``), at the
  ancillary of the cut, which moves with ``theta`` and with the parent records; each piece gets
  ``nodes`` Gauss--Legendre points, so the rule is smooth in ``theta`` and converges
  geometrically in ``nodes`` on each piece;
* a normal ancillary with no cut gets Gauss--Hermite points (exact for polynomials);
* the last record variable, when it is Normal and every statistic is a polynomial in it or in
  one clamp ``clip(x, a, b)`` of it (the regression's ``y``, a clamped sum), is integrated in
  closed form: the statistics' coefficients in the clamp are read off the graph, and the clamped
  normal's raw moments (point masses at the bounds plus truncated-normal moments) are exact.
  This removes the innermost rule (the regression's 46,656 points become 2,304) and its error.

The integration error is estimated by the difference with a rule of twice the nodes
(:func:`integration_error`), reported with the results, and a model whose error is not far below
the posterior's scale is refused at build time.
"""

from __future__ import annotations

from math import comb
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor.scalar as ps
import pytensor.tensor as pt

try:  # PyTensor >= 2.31
    from pytensor.graph.traversal import io_toposort
except ImportError:  # pragma: no cover
    from pytensor.graph.basic import io_toposort
from pytensor.graph.replace import clone_replace
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random import basic as ptr
from pytensor.tensor.random.op import RandomVariable

from pymc_unbounded_dp._compile import CompiledTable, flat_statistics
from pymc_unbounded_dp._graph import (
    KERNEL_MODE,
    ancestors,
    constant_value,
    polynomial_degree,
    strip_casts,
)
from pymc_unbounded_dp.dirichlet_moments import (
    LAGUERRE_PER_NODE,
    is_dirichlet,
    log_share_moments,
    log_shares,
)
from pymc_unbounded_dp.noncentred import record_forms

__all__ = [
    "GAUSS_NODES",
    "TAIL",
    "MomentGraphs",
    "integration_error",
    "moment_function",
    "record_moments",
    "varying_coordinates",
]

#: Gauss--Legendre points per piece of an ancillary's range (Gauss--Hermite points: twice that).
GAUSS_NODES = 6
#: Fixed cuts of a standard-normal ancillary's range, so that no piece is much wider than the
#: density's core (a Gauss--Legendre rule on a wide piece converges slowly).
NORMAL_CUTS = (-3.0, 0.0, 3.0)
#: A standard-normal ancillary is integrated over ``[-TAIL, TAIL]`` (outside: mass 1.9e-17).
TAIL = 8.5
#: The most quadrature points of one table's rule.
MAX_NODES = 200_000
#: The highest degree of a statistic in the last record (or its clamp) integrated in closed form.
MAX_DEGREE = 4

_NORMAL_ANCILLARY = (ptr.NormalRV,)
_UNIFORM_ANCILLARY = (ptr.UniformRV,)
_KINKS = (ps.Clip, ps.Maximum, ps.Minimum, ps.GT, ps.GE, ps.LT, ps.LE, ps.Abs, ps.Sign)


class MomentGraphs(NamedTuple):
    """One record's statistic moments as graphs of ``inputs`` (one per free random variable of
    the model, natural scale, in ``model.free_RVs`` order).

    ``mean`` is ``(D,)``, ``covariance`` ``(D, D)``, ``third`` the third absolute central moment
    of each coordinate ``(D,)`` (for the Berry--Esseen figure; its own kink at the mean is not
    cut, so it is good to about ``1e-4`` relative; the mean and covariance of the default rule
    to about ``1e-5`` of the statistics' scale, see :func:`integration_error`), or ``None`` when
    the last record is integrated in closed form (``closed_form``: the third moment then needs
    the rule, ``record_moments(..., closed_form=False)``); ``nodes`` the number of quadrature
    points.
    """

    inputs: list
    mean: pt.TensorVariable
    covariance: pt.TensorVariable
    third: pt.TensorVariable | None
    nodes: int
    closed_form: bool = False
    method: str | None = None  # how m and C are computed, where not a plain rule (messages)


def _cuts(statistics, record) -> list[float]:
    """The constants at which a statistic has a kink or a jump in ``record`` (see the module
    docstring)."""
    cuts = set()
    for node in io_toposort([record], [statistics]):
        if not isinstance(node.op, Elemwise) or not isinstance(node.op.scalar_op, _KINKS):
            continue
        if not any(strip_casts(i) is record for i in node.inputs):
            continue
        if isinstance(node.op.scalar_op, ps.Abs | ps.Sign):
            cuts.add(0.0)
        for other in node.inputs:
            if strip_casts(other) is not record and (value := constant_value(other)) is not None:
                cuts.add(value)
    return sorted(cuts)


def _piecewise(cuts: list, count, low: float, high: float, nodes: int, density):
    """Gauss--Legendre points and weights on ``[low, high]`` cut at ``cuts`` (graphs, each
    ``(count,)``, or constants): two ``(count, pieces * nodes)`` graphs."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    ones = pt.ones((count, 1), dtype="float64")
    columns = [pt.cast(c, "float64") + pt.zeros((count,), dtype="float64") for c in cuts]
    inner = [pt.sort(pt.clip(pt.stack(columns, axis=1), low, high), axis=1)] if cuts else []
    edges = pt.concatenate([low * ones, *inner, high * ones], axis=1)
    half = 0.5 * (edges[:, 1:] - edges[:, :-1])
    middle = 0.5 * (edges[:, 1:] + edges[:, :-1])
    points = middle[:, :, None] + half[:, :, None] * x
    weights = half[:, :, None] * w * density(points)
    size = (len(cuts) + 1) * nodes
    return points.reshape((count, size)), weights.reshape((count, size)), size


def _standard_normal_density(u):
    return pt.exp(-0.5 * u * u) / np.sqrt(2.0 * np.pi)


def _ancillary_law(rv) -> str | None:
    op = rv.owner.op
    if isinstance(op, _NORMAL_ANCILLARY):
        return "normal"
    if isinstance(op, _UNIFORM_ANCILLARY):
        return "uniform"
    return None


def record_moments(
    compiled: CompiledTable, nodes: int = GAUSS_NODES, closed_form: bool = True
) -> MomentGraphs | str:
    """The moments of one record's statistic vector in ``compiled``'s table, or why they cannot
    be computed (a short phrase).

    With ``closed_form`` (the default), the last record variable is integrated exactly where the
    statistics are polynomials in it or in one clamp of it (see the module docstring); the third
    absolute moment is then not computed.

    Examples
    --------
    >>> import pymc as pm, pytensor, pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp._compile import compile_model
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=100)
    ...     _ = pmdp.PrivatizedSum("s", pm.math.clip(x, -2, 2),
    ...                            pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=10.0)
    >>> moments = record_moments(compile_model(model).tables[0])
    >>> fn = pytensor.function(moments.inputs, moments.mean)
    >>> abs(round(float(fn(0.0)[0]), 12)), moments.nodes, moments.closed_form
    (0.0, 1, True)
    """
    spec, model = compiled.spec, compiled.model
    records = [r.rv for r in spec.records]
    if len(records) == 1 and is_dirichlet(records[0]):
        return _dirichlet_record_moments(compiled, nodes)
    if any(rv.ndim != 1 for rv in records):
        names = ", ".join(repr(r.name) for r in spec.records if r.rv.ndim != 1)
        return f"its records {names} are not scalars (one number per record)"
    forms = record_forms(spec.records, list(model.free_RVs))
    for record, form in zip(spec.records, forms):
        law = _ancillary_law(record.rv)
        if form is None or form.kind != "location-scale" or law is None:
            kind = type(record.rv.owner.op).__name__.removesuffix("RV")
            return (
                f"its records {record.name!r} ({kind}) have no moment rule: the normal "
                "approximation integrates Normal and Uniform records whose location and "
                "scale are the only parameters that vary, and one Dirichlet record variable"
            )
    inputs = [rv.type(name=rv.name) for rv in model.free_RVs]
    placeholders = [rv.type(name=f"{rv.name}_record") for rv in records]
    replace = {**dict(zip(model.free_RVs, inputs)), **dict(zip(records, placeholders))}
    statistics = clone_replace(flat_statistics(spec.sums), replace)
    parameters = [clone_replace(list(rv.owner.op.dist_params(rv.owner)), replace) for rv in records]
    leftover = [
        v.name or str(v)
        for v in ancestors([statistics, *sum(parameters, [])])
        if v.owner is not None and isinstance(v.owner.op, RandomVariable)
    ]
    if leftover:
        return f"its statistics depend on random variables that are not parameters ({leftover})"

    last = _clamp_polynomial(statistics, placeholders[-1]) if closed_form else None
    if last is not None and not isinstance(records[-1].owner.op, ptr.NormalRV):
        last = None
    current: dict = {}  # record placeholder -> its values at the quadrature points so far
    weights = pt.ones((1,), dtype="float64")
    total = 1
    for rv, form, placeholder, params in zip(records, forms, placeholders, parameters):
        params = [clone_replace(p, current) if current else p for p in params]
        count = weights.shape[0]
        params = [pt.cast(p, "float64") + pt.zeros((count,), dtype="float64") for p in params]
        if last is not None and placeholder is placeholders[-1]:
            weights = weights / pt.sum(weights)
            mean, covariance = _closed_form_moments(last, current, weights, params)
            return MomentGraphs(inputs, mean, covariance, None, total, closed_form=True)
        points, rule, size = _quadrature_rule(
            statistics, placeholder, rv, form, params, count, nodes
        )
        total *= size
        if total > MAX_NODES:
            return (
                f"its quadrature rule needs more than {MAX_NODES} points ({len(records)} record "
                "variables with kinks)"
            )
        values = form.records(points, rv, [p[:, None] for p in params])
        current = {k: pt.repeat(v, size) for k, v in current.items()}
        current[placeholder] = pt.cast(values, "float64").reshape((-1,))
        weights = (weights[:, None] * rule).reshape((-1,))
    at_points = clone_replace(statistics, current)
    weights = weights / pt.sum(weights)
    column = weights[:, None]
    mean = pt.sum(column * at_points, axis=0)
    centred = at_points - mean
    covariance = pt.dot((column * centred).T, centred)
    third = pt.sum(column * pt.abs(centred) ** 3, axis=0)
    return MomentGraphs(inputs, mean, covariance, third, total)


def _quadrature_rule(statistics, placeholder, rv, form, params, count, nodes: int):
    """The points (in the ancillary ``u``), weights and size of the rule that integrates one
    record variable, for each of the ``count`` rows of ``params``: Gauss-Hermite for a Normal
    record where the statistics have no kink in it, else a piecewise Gauss-Legendre rule between
    the kinks (the clamps' cuts)."""
    cuts = _cuts(statistics, placeholder)
    law = _ancillary_law(rv)
    if law == "normal" and not cuts:
        x, w = np.polynomial.hermite_e.hermegauss(2 * nodes)
        points = pt.zeros((count, 1), dtype="float64") + x
        rule = pt.zeros((count, 1), dtype="float64") + w / np.sqrt(2.0 * np.pi)
        return points, rule, 2 * nodes
    at_cuts = [form.ancillary(pt.constant(c, dtype="float64"), params, None) for c in cuts]
    low, high, density = (
        (-TAIL, TAIL, _standard_normal_density)
        if law == "normal"
        else (0.0, 1.0, lambda u: pt.ones_like(u))
    )
    if law == "normal":
        at_cuts += list(NORMAL_CUTS)
    return _piecewise(at_cuts, count, low, high, nodes, density)


def _dirichlet_record_moments(compiled: CompiledTable, nodes: int) -> MomentGraphs | str:
    """The moments of a Dirichlet record's statistics, affine in its floored log-shares
    (:mod:`pymc_unbounded_dp.dirichlet_moments`), or why they cannot be computed."""
    spec, model = compiled.spec, compiled.model
    (record,) = spec.records
    rv = record.rv
    (alpha,) = rv.owner.op.dist_params(rv.owner)
    if not all(alpha.type.broadcastable[:-1]):
        return f"the concentration of {record.name!r} varies across records"
    size = alpha.type.shape[-1]
    if size is None:
        return f"the number of shares of {record.name!r} is not known when the model is built"
    inputs = [v.type(name=v.name) for v in model.free_RVs]
    placeholder = rv.type(name=f"{rv.name}_record")
    replace = {**dict(zip(model.free_RVs, inputs)), rv: placeholder}
    statistics = clone_replace(flat_statistics(spec.sums), replace)
    shares = log_shares(statistics, placeholder, int(size))
    if isinstance(shares, str):
        return f"its Dirichlet records {record.name!r}: {shares}"
    alpha = clone_replace(alpha, replace).reshape((int(size),))
    mean, covariance, third = log_share_moments(alpha, shares, nodes)
    points = LAGUERRE_PER_NODE * nodes
    method = "m and C of the log-shares by digamma and trigamma" + (
        f", their floors by a {points}-point Gauss-Laguerre rule" if shares.floors.any() else ""
    )
    return MomentGraphs(inputs, mean, covariance, third, points, method=method)


class _ClampPolynomial(NamedTuple):
    """The statistics as a polynomial of degree ``degree`` in ``variable``, which stands for
    ``clip(x, low, high)`` of the last record ``x`` (or ``x`` itself: infinite bounds)."""

    variable: pt.TensorVariable
    statistics: pt.TensorVariable
    low: float
    high: float
    degree: int


def _clamp_polynomial(statistics, record) -> _ClampPolynomial | None:
    """``statistics`` as a polynomial in one clamp of ``record`` (or in ``record``), if it is."""
    clamps = [
        node
        for node in io_toposort([record], [statistics])
        if isinstance(node.op, Elemwise)
        and isinstance(node.op.scalar_op, ps.Clip)
        and strip_casts(node.inputs[0]) is record
    ]
    bounds = {tuple(constant_value(i) for i in node.inputs[1:]) for node in clamps}
    if len(bounds) > 1 or any(b is None for b in next(iter(bounds), ())):
        return None
    low, high = next(iter(bounds), (-np.inf, np.inf))
    if clamps:
        variable = clamps[0].outputs[0].type()
        replaced = clone_replace(statistics, {node.outputs[0]: variable for node in clamps})
        if record in ancestors([replaced]):
            return None
    else:
        variable = record.type()
        replaced = clone_replace(statistics, {record: variable})
    degree = polynomial_degree(replaced, variable)
    if degree is None or degree > MAX_DEGREE:
        return None
    return _ClampPolynomial(variable, replaced, float(low), float(high), degree)


def _clamped_normal_raw_moments(mu, sigma, low: float, high: float, top: int) -> list:
    """``E[w^p]``, ``p = 0..top``, of ``w = clip(y, low, high)``, ``y ~ N(mu, sigma^2)``: the
    point masses at the bounds plus the truncated-normal integrals ``I_k = int_a^b z^k phi(z)``,
    by ``I_k = (k - 1) I_{k-2} + a^{k-1} phi(a) - b^{k-1} phi(b)``. An infinite bound has no
    mass and no boundary term (``clip(y, 0, inf)`` is clamped on one side only)."""
    if not (np.isfinite(low) or np.isfinite(high)):  # no clamp: E[z^k] = (k - 1)!! for even k
        below = above = 0.0
        integrals = [float(_double_factorial(k - 1)) if k % 2 == 0 else 0.0 for k in range(top + 1)]
    else:
        root2 = np.sqrt(2.0)
        a = (low - mu) / sigma if np.isfinite(low) else None  # None: no bound on that side
        b = (high - mu) / sigma if np.isfinite(high) else None
        phi_a = _standard_normal_density(a) if a is not None else 0.0
        phi_b = _standard_normal_density(b) if b is not None else 0.0
        erf_a = pt.erf(a / root2) if a is not None else -1.0
        erf_b = pt.erf(b / root2) if b is not None else 1.0
        # the masses at the bounds, by the complementary error function (the far tail's digits)
        below = 0.5 * pt.erfc(-a / root2) if a is not None else 0.0
        above = 0.5 * pt.erfc(b / root2) if b is not None else 0.0
        integrals = [0.5 * (erf_b - erf_a), phi_a - phi_b]
        for k in range(2, top + 1):
            ends_term = (a ** (k - 1) * phi_a if a is not None else 0.0) - (
                b ** (k - 1) * phi_b if b is not None else 0.0
            )
            integrals.append((k - 1) * integrals[k - 2] + ends_term)
    moments = []
    for p in range(top + 1):
        inner = sum(
            comb(p, k) * mu ** (p - k) * sigma**k * integrals[k]
            for k in range(p + 1)
            if not (isinstance(integrals[k], float) and integrals[k] == 0.0)
        )
        masses = (low**p * below if np.isfinite(low) else 0.0) + (
            high**p * above if np.isfinite(high) else 0.0
        )
        moments.append(inner + masses)
    return moments


def _double_factorial(k: int) -> int:
    return 1 if k <= 0 else k * _double_factorial(k - 2)


def _closed_form_moments(last: _ClampPolynomial, current: dict, weights, params):
    """The mean and covariance, with the last (Normal) record integrated in closed form at each
    point of the earlier records' rule (``current``, ``weights``)."""
    count = weights.shape[0]
    points = np.arange(last.degree + 1) - last.degree // 2
    vandermonde = np.vander(points.astype(float), increasing=True)
    inverse = np.linalg.inv(vandermonde)
    at = [
        clone_replace(
            last.statistics,
            {**current, last.variable: pt.full((count,), float(c), dtype=last.variable.dtype)},
        )
        for c in points
    ]
    # coefficients[k][i, j]: of w^k in statistic j at point i
    coefficients = [
        sum(float(inverse[k, c]) * at[c] for c in range(len(points)) if inverse[k, c] != 0.0)
        for k in range(last.degree + 1)
    ]
    raw = _clamped_normal_raw_moments(params[0], params[1], last.low, last.high, 2 * last.degree)
    column = weights[:, None]
    mean = pt.sum(column * sum(c * m[:, None] for c, m in zip(coefficients, raw)), axis=0)
    centred = [coefficients[0] - mean, *coefficients[1:]]
    # sum_p w_p sum_kj centred_k[p]' centred_j[p] E[w^(k+j)][p], as one (D, KP) x (KP, D) product
    # (the (P, D, D) elementwise form recomputed the coefficients in every cell: 9x slower)
    degrees = range(last.degree + 1)
    weighted = [sum(centred[k] * (weights * raw[k + j])[:, None] for k in degrees) for j in degrees]
    covariance = pt.dot(pt.concatenate(weighted, axis=0).T, pt.concatenate(centred, axis=0))
    return mean, covariance


def moment_function(moments: MomentGraphs):
    """A compiled ``(*free values) -> (mean, covariance, third)`` of :func:`record_moments`'s
    graphs (NumPy; used for the error estimate and the accuracy figure); ``third`` is ``None``
    when the graphs have none (``closed_form``)."""
    outputs = [moments.mean, moments.covariance]
    outputs += [] if moments.third is None else [moments.third]
    fn = pm.pytensorf.compile(moments.inputs, outputs, on_unused_input="ignore", mode=KERNEL_MODE)
    if moments.third is not None:
        return fn
    return lambda *values: (*fn(*values), None)


def integration_error(
    compiled: CompiledTable,
    values: list[np.ndarray],
    nodes: int = GAUSS_NODES,
    closed_form: bool = True,
) -> tuple[float, float]:
    """The estimated error of :func:`record_moments`'s rule of ``nodes`` points per piece at
    ``values`` (one array per free random variable, natural scale): its difference with the rule
    of ``nodes + 2`` points, as ``(mean error in standard deviations of one record's statistic,
    relative covariance error)``, the largest over coordinates.

    At the sums level the mean error is multiplied by ``n`` against a standard deviation of
    ``sqrt(n)``: the shift of the approximate law of the sums is ``sqrt(n)`` times the first number
    in units of their standard deviation.
    """
    coarse, fine = (
        moment_function(record_moments(compiled, q, closed_form)) for q in (nodes, nodes + 2)
    )
    (m0, c0, _), (m1, c1, _) = coarse(*values), fine(*values)
    sd = np.sqrt(np.maximum(np.diag(c1), 0.0))
    varying = varying_coordinates(sd)
    if not varying.any():
        return 0.0, 0.0
    mean_error = float(np.max(np.abs(m0 - m1)[varying] / sd[varying]))
    block = np.ix_(varying, varying)
    covariance_error = float(np.max(np.abs(c0[block] - c1[block])) / np.max(np.abs(c1[block])))
    return mean_error, covariance_error


def varying_coordinates(sd: np.ndarray) -> np.ndarray:
    """Which coordinates of a statistic vary, given their standard deviations ``sd``: those above
    1e-6 of the largest. A constant coordinate (a count of records, ``ones_like(x)``) is exact
    under any rule; its computed spread is rounding, ~1e-16 of its value, and dividing by it would
    report that rounding as an error of about one standard deviation."""
    scale = max(float(np.max(sd, initial=0.0)), 1e-300)
    return sd > 1e-6 * scale
