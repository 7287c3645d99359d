r"""Non-centred forms of the record distributions, derived from the model graph.

Each record variable ``x`` with distribution ``f(. | theta)`` is written as ``x = g(theta, u)`` with an
*ancillary* ``u`` whose law does not depend on ``theta`` (Papaspiliopoulos, Roberts & Skold 2007):

===================  ===========================================  ==================================
form                 records                                       ancillary ``u`` (given ``x``)
===================  ===========================================  ==================================
location-scale       ``x = loc + scale * w`` (Normal, StudentT      ``w = (x - loc) / scale``
                     with fixed ``nu``, Laplace, Logistic, Cauchy,
                     Gumbel, HalfNormal, HalfCauchy, Exponential,
                     Gamma and Weibull with fixed shape, Uniform),
                     ``x = exp(loc + scale * w)`` (LogNormal)
inverse CDF          any continuous univariate with a PyMC          ``u = F(x; theta)``
                     ``icdf`` (Beta, Gamma with unknown shape, ...)
randomized PIT       discrete univariates: Bernoulli, Binomial,     ``u ~ U(F(x - 1), F(x))``
                     Poisson, NegativeBinomial, Geometric, ...      (drawn afresh every time)
Gammas               Dirichlet(alpha): ``G_j = F^-1(u_j; alpha_j)``, ``S ~ Gamma(sum alpha)`` drawn,
                     ``x = G / sum G``                              ``u_j = F(x_j S; alpha_j)``
Cholesky             MvNormal(mu, Sigma): ``x = mu + L w``          ``w = L^-1 (x - mu)``
===================  ===========================================  ==================================

Row-wise records (``y | X``) are handled by their parameters: ``y = m(X, theta) + s(theta) w`` is
evaluated at the records ``X = g(theta, u_X)`` of the same ``theta``, in the order the records were
declared.

:func:`build_noncentred` compiles, for a model whose records all have a form, three functions of
PyMC's value variables: the ancillaries of the current records, the log of the *non-centred target*

.. math::

    \log \pi_u(\theta) = \log \pi(\theta) + \log g(n \mid \theta)
        + \log \eta_s\bigl(s_{dp} - \textstyle\sum_i t(g(\theta, u_i))\bigr) \;(+\ \text{potentials})

(PyMC's log prior of every free variable with the Jacobians of its transforms; no Jacobian for
``u``, whose density does not depend on ``theta``), and the records ``g(theta, u)``.
:meth:`NonCentredModel.flat_log_target` compiles the log target once more, with PyTensor's numba
backend, as a function of the *flat* vector of the moving parameters, for the compiled random walk
of :func:`pymc_unbounded_dp.kernels.interweave.step_compiled`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.pytensorf import compile as compile_pymc
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.graph.replace import clone_replace
from pytensor.tensor import random as ptr
from pytensor.tensor.linalg import cholesky, solve_triangular
from pytensor.tensor.random.op import RandomVariable
from scipy import special

from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on, split_column_sums, without_guards
from pymc_unbounded_dp._numba_backend import numba_function
from pymc_unbounded_dp._registry import ModelBlocks, RecordsSpec

__all__ = [
    "FlatLogTarget",
    "NonCentredGraphs",
    "NonCentredModel",
    "build_noncentred",
    "describe_forms",
    "noncentred_graphs",
    "record_forms",
]

_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------------
# forms of one record variable
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _LocationScale:
    """Which distribution parameters are the location and the scale; the others must be fixed."""

    loc: int | None
    scale: int | None
    log: bool = False  # x = exp(loc + scale * w)
    bounds: bool = False  # Uniform(lower, upper): loc = lower, scale = upper - lower


def _location_scale_table() -> dict[type, _LocationScale]:
    table = {
        ptr.basic.NormalRV: _LocationScale(0, 1),
        ptr.basic.StudentTRV: _LocationScale(1, 2),
        ptr.basic.LaplaceRV: _LocationScale(0, 1),
        ptr.basic.LogisticRV: _LocationScale(0, 1),
        ptr.basic.CauchyRV: _LocationScale(0, 1),
        ptr.basic.GumbelRV: _LocationScale(0, 1),
        ptr.basic.HalfNormalRV: _LocationScale(0, 1),
        ptr.basic.ExponentialRV: _LocationScale(None, 0),
        ptr.basic.GammaRV: _LocationScale(None, 1),
        ptr.basic.LogNormalRV: _LocationScale(0, 1, log=True),
        ptr.basic.UniformRV: _LocationScale(0, 1, bounds=True),
    }
    # PyMC's own symbolic random variables (their parameters in PyMC's order)
    continuous = pm.distributions.continuous
    table[continuous.HalfCauchyRV] = _LocationScale(None, 0)
    weibull = getattr(continuous, "WeibullBetaRV", None)
    if weibull is not None:
        table[weibull] = _LocationScale(None, 1)
    return table


_LOCATION_SCALE = _location_scale_table()


class _DiscreteCDF(Op):
    """``F(k; params)`` of a discrete distribution by a SciPy function, elementwise (no gradient).

    Used for the randomized PIT of discrete records whose PyMC distribution has no ``icdf``; the
    same function gives the quantile (:class:`_DiscreteQuantile`), so both sides agree exactly.
    """

    __props__ = ("name",)

    def __init__(self, name: str, cdf: Callable):
        self.name = name
        self.cdf = cdf

    def make_node(self, k, *params):
        inputs = [pt.as_tensor_variable(v) for v in (k, *params)]
        out = pt.tensor(dtype="float64", shape=(None,) * max(v.ndim for v in inputs))
        return Apply(self, inputs, [out])

    def perform(self, node, inputs, outputs):
        k, *params = inputs
        outputs[0][0] = _cdf(self.cdf, k, params)


def _cdf(cdf: Callable, k: np.ndarray, params) -> np.ndarray:
    k = np.asarray(k, dtype=np.float64)
    f = np.where(k < 0, 0.0, cdf(np.maximum(k, 0.0), *params)).astype(np.float64)
    if np.isnan(f).any():  # NaN never crosses u: the search would double its step forever
        raise FloatingPointError(
            "discrete_quantile: the CDF returned NaN at k = "
            f"{k[np.isnan(f)][:3]} (a CDF must be defined, as 1, above its support)."
        )
    return f


class _DiscreteQuantile(Op):
    """``min {k : F(k; params) >= u}`` by search from a hint (the current records).

    Moves of ``theta`` are small, so most records keep their value: the search checks the hint, then
    brackets by doubling steps and bisects, vectorised over the records that are still open.
    """

    __props__ = ("name",)

    def __init__(self, name: str, cdf: Callable):
        self.name = name
        self.cdf = cdf

    def make_node(self, u, hint, *params):
        inputs = [pt.as_tensor_variable(v) for v in (u, hint, *params)]
        out = pt.tensor(dtype="int64", shape=(None,) * inputs[0].ndim)
        return Apply(self, inputs, [out])

    def perform(self, node, inputs, outputs):
        u, hint, *params = inputs
        outputs[0][0] = discrete_quantile(self.cdf, u, hint, params)


#: The doubling search for a quantile above its start gives up once its step passes this (the
#: trial ``k`` stays below ``2**62``, inside int64).
_LARGEST_STEP = 2**60


def discrete_quantile(cdf: Callable, u: np.ndarray, hint: np.ndarray, params) -> np.ndarray:
    """Smallest integer ``k >= 0`` with ``cdf(k, *params) >= u``, elementwise, searched from ``hint``.

    ``params`` broadcast against ``u``. Exact for any ``u`` in ``[0, 1)`` up to the precision of
    ``cdf`` (``u = 0`` gives 0); ``u >= 1``, and a ``u`` that ``cdf`` does not reach by
    ``k = 2**61`` (a Poisson mean past 1e19), return -1 (no quantile), which the caller treats as
    an impossible move.
    """
    u = np.asarray(u, dtype=np.float64)
    params = [np.broadcast_to(p, u.shape) for p in params]
    k = np.broadcast_to(np.maximum(np.asarray(hint, dtype=np.int64), 0), u.shape).copy()
    out = np.full(u.shape, -1, dtype=np.int64)
    out[u <= 0.0] = 0  # F(0) >= 0 >= u (a search down from the hint would never find F < u)
    solvable = (u > 0.0) & (u < 1.0)
    # hi: smallest known k with F(k) >= u; lo: largest known k with F(k) < u (-1 means none).
    f_k = _cdf(cdf, k, params)
    f_below = _cdf(cdf, k - 1, params)
    done = solvable & (f_k >= u) & (f_below < u)
    out[done] = k[done]
    open_ = solvable & ~done
    if not open_.any():
        return out
    index = np.flatnonzero(open_)
    u_open = u.reshape(-1)[index]
    p_open = [p.reshape(-1)[index] for p in params]
    up = f_k.reshape(-1)[index] < u_open
    lo = np.where(up, k.reshape(-1)[index], -1)
    hi = np.where(up, -1, k.reshape(-1)[index] - 1)
    step = np.ones(index.shape, dtype=np.int64)
    # Bracket: move the open end by doubling steps until F crosses u (or give up past 2**61).
    searching = up.copy()
    unreached = np.zeros(index.shape, dtype=bool)
    while searching.any():
        trial = lo[searching] + step[searching]
        f = _cdf(cdf, trial, [p[searching] for p in p_open])
        crossed = f >= u_open[searching]
        sub = np.flatnonzero(searching)
        hi[sub[crossed]] = trial[crossed]
        lo[sub[~crossed]] = trial[~crossed]
        step[sub] *= 2
        searching[sub[crossed]] = False
        beyond = sub[~crossed & (step[sub] > _LARGEST_STEP)]
        unreached[beyond], searching[beyond], hi[beyond] = True, False, lo[beyond] + 1
    searching = ~up
    step[:] = 1
    while searching.any():
        sub = np.flatnonzero(searching)
        trial = np.maximum(hi[sub] - step[sub], -1)
        f = _cdf(cdf, trial, [p[sub] for p in p_open])
        below = f < u_open[sub]
        lo[sub[below]] = trial[below]
        hi[sub[~below]] = trial[~below]
        step[sub] *= 2
        searching[sub[below]] = False
    # Bisect between lo (F < u) and hi (F >= u).
    while np.any(hi - lo > 1):
        wide = np.flatnonzero(hi - lo > 1)
        mid = (lo[wide] + hi[wide]) // 2
        f = _cdf(cdf, mid, [p[wide] for p in p_open])
        at_or_above = f >= u_open[wide]
        hi[wide[at_or_above]] = mid[at_or_above]
        lo[wide[~at_or_above]] = mid[~at_or_above]
    flat = out.reshape(-1)
    flat[index] = np.where(unreached, -1, hi)
    return flat.reshape(u.shape)


#: SciPy CDFs of discrete distributions without a PyMC ``icdf``, by PyTensor op (parameters in the
#: op's order).
_DISCRETE_CDFS: dict[type, Callable] = {
    ptr.basic.PoissonRV: lambda k, mu: special.pdtr(k, mu),
    ptr.basic.BinomialRV: lambda k, n, p: special.bdtr(np.minimum(k, n), n, p),  # NaN above n
    ptr.basic.NegBinomialRV: lambda k, n, p: special.betainc(n, k + 1, p),
}


def _is_discrete(rv) -> bool:
    return rv.dtype.startswith(("int", "uint")) or rv.dtype == "bool"


def _has(function, rv) -> bool:
    try:
        function(rv, pt.zeros_like(rv, dtype="float64"))
    except NotImplementedError:
        return False
    except Exception:  # noqa: BLE001 - any failure to build the graph means "not available"
        return False
    return True


@dataclass(frozen=True)
class Form:
    """The non-centred form of one record variable.

    ``kind``: ``"location-scale"``, ``"inverse-cdf"``, ``"randomized-pit"``, ``"gammas"`` or
    ``"cholesky"``. ``uniforms``: the auxiliary uniforms the ancillary needs (``None``: none;
    ``"simplex"``: one per simplex of a record, all its axes but the last; ``"like"``: one per
    record entry). ``relative_cost``: a rough, fixed estimate of one evaluation of the
    non-centred target as a fraction of a plain data-augmentation iteration (affine maps ~0.05;
    special functions and searches per record cost more), used to decide whether extra steps pay
    for themselves; fixed numbers rather than timings, so that a seed reproduces the run.
    """

    name: str
    kind: str
    ancillary: Callable  # (rv, params, v) -> u, in terms of model random variables
    records: Callable  # (u, rv, params) -> x
    uniforms: str | None = None
    relative_cost: float = 0.05  # one evaluation, as a fraction of a plain iteration (rough)


def _form_of(spec: RecordsSpec, moving: list, record_rvs: list) -> Form | None:
    rv = spec.rv
    op = rv.owner.op
    location_scale = _LOCATION_SCALE.get(type(op))
    if not isinstance(op, RandomVariable) and location_scale is None:
        return None
    params = list(op.dist_params(rv.owner))
    varying = [bool(depends_on(p, moving + record_rvs)) for p in params]
    if location_scale is not None and not any(
        v for i, v in enumerate(varying) if i not in (location_scale.loc, location_scale.scale)
    ):
        return _location_scale_form(spec.name, location_scale)
    # pm.Dirichlet's own op only: examples.atus draws through a subclass and keeps the
    # full-refresh move, 4x cheaper per iteration there (the Gammas' quantiles cost ~1.5 ms)
    if type(op) is ptr.basic.DirichletRV:
        return Form(
            spec.name,
            "gammas",
            _dirichlet_ancillary,
            _dirichlet_records,
            uniforms="simplex",
            relative_cost=5.0,
        )
    if isinstance(op, ptr.basic.MvNormalRV):
        return Form(
            spec.name, "cholesky", _mvnormal_ancillary, _mvnormal_records, relative_cost=0.1
        )
    if rv.ndim != 1:  # univariate records only below (record axis only)
        return None
    if _is_discrete(rv):
        return _discrete_form(spec.name, rv, op)
    if _has(pm.icdf, rv) and _has(pm.logcdf, rv):
        return Form(
            spec.name,
            "inverse-cdf",
            ancillary=lambda rv, params, v: pt.exp(pm.logcdf(rv, rv)),
            records=lambda u, rv, params: pm.icdf(rv, u),
            relative_cost=0.5,
        )
    return None


def _location_scale_form(name: str, form: _LocationScale) -> Form:
    def loc_scale(params):
        if form.bounds:
            return params[0], params[1] - params[0]
        loc = params[form.loc] if form.loc is not None else 0.0
        return loc, params[form.scale]

    def ancillary(rv, params, v):
        loc, scale = loc_scale(params)
        x = pt.log(rv) if form.log else rv
        return (x - loc) / scale

    def records(u, rv, params):
        loc, scale = loc_scale(params)
        x = loc + scale * u
        return pt.exp(x) if form.log else x

    return Form(name, "location-scale", ancillary, records)


def _discrete_form(name: str, rv, op) -> Form | None:
    cdf = _DISCRETE_CDFS.get(type(op))
    cost = 1.0
    if isinstance(op, ptr.basic.BernoulliRV):
        cost = 0.05

        def records(u, rv, params):
            return pt.gt(u, 1.0 - params[0])

        def bounds(rv, params):
            p = params[0]
            below = pt.switch(pt.ge(rv, 1), 1.0 - p, 0.0)
            return below, pt.switch(pt.ge(rv, 1), 1.0, 1.0 - p)

    elif cdf is not None:
        cdf_op = _DiscreteCDF(type(op).__name__, cdf)
        quantile_op = _DiscreteQuantile(type(op).__name__, cdf)

        def records(u, rv, params):
            return quantile_op(u, rv, *params)

        def bounds(rv, params):
            return cdf_op(rv - 1, *params), cdf_op(rv, *params)

    elif _has(pm.icdf, rv) and _has(pm.logcdf, rv):

        def records(u, rv, params):
            return pm.icdf(rv, u)

        def bounds(rv, params):
            return pt.exp(pm.logcdf(rv, rv - 1)), pt.exp(pm.logcdf(rv, rv))

    else:
        return None

    def ancillary(rv, params, v):
        below, at = bounds(rv, params)
        return below + (at - below) * v

    return Form(name, "randomized-pit", ancillary, records, uniforms="like", relative_cost=cost)


def _dirichlet_ancillary(rv, params, v):
    alpha = pt.broadcast_to(params[0], rv.shape)
    total = pt.gammaincinv(alpha.sum(axis=-1), v)  # S ~ Gamma(sum alpha), independent of x
    return pt.gammainc(alpha, rv * total[..., None])


def _dirichlet_records(u, rv, params):
    alpha = pt.broadcast_to(params[0], u.shape)
    gammas = pt.gammaincinv(alpha, u)
    return gammas / gammas.sum(axis=-1, keepdims=True)


def _mvnormal_ancillary(rv, params, v):
    mu, cov = params[:2]
    chol = cholesky(cov)  # batched over any leading axes, as the solve below
    return solve_triangular(chol, (rv - mu)[..., None], lower=True)[..., 0]


def _mvnormal_records(u, rv, params):
    mu, cov = params[:2]
    return mu + (cholesky(cov) @ u[..., None])[..., 0]


def describe_forms(model: pm.Model, blocks: ModelBlocks) -> dict[str, str | None]:
    """The form of each record variable (``None``: no non-centred form), for messages and docs."""
    moving = _moving_rvs(model)
    record_rvs = [r.rv for r in blocks.records]
    forms = {}
    for spec in blocks.records:
        form = _form_of(spec, moving, record_rvs)
        forms[spec.name] = form.kind if form is not None else None
    return forms


def _moving_rvs(model: pm.Model) -> list:
    """The parameters the interweaving step moves by default: the continuous free variables."""
    return [rv for rv in model.free_RVs if rv.dtype.startswith("float")]


# --------------------------------------------------------------------------------------------------
# the compiled non-centred target
# --------------------------------------------------------------------------------------------------
@dataclass(eq=False)
class NonCentredModel:
    """Compiled functions of the non-centred target of a model (see the module docstring).

    All take PyMC's value variables (in ``input_names`` order, transformed scale) first.

    * ``ancillary(*values, *uniforms) -> u``: one array per record variable, from the records in
      the model's containers; ``uniforms`` (one array per entry of ``uniform_shapes`` that is not
      ``None``) are the auxiliary uniforms of randomized PITs and Dirichlet totals;
    * ``log_target(*values, *u) -> float``;
    * ``records(*values, *u) -> x``: one array per record variable.
    """

    forms: tuple[Form, ...]
    input_names: tuple[str, ...]
    input_dtypes: tuple[np.dtype, ...]
    _ancillary: Callable
    _log_target: Callable
    _records: Callable
    _record_specs: tuple[RecordsSpec, ...]
    _log_target_graph: pt.TensorVariable
    _value_vars: tuple
    _u_inputs: tuple

    def values(self, point: dict) -> list[np.ndarray]:
        return [np.asarray(point[k], dtype=t) for k, t in zip(self.input_names, self.input_dtypes)]

    def ancillary(self, values: list[np.ndarray], rng: np.random.Generator) -> list[np.ndarray]:
        """Ancillaries of the current records, drawing the auxiliary uniforms from ``rng``."""
        uniforms = []
        for form, spec in zip(self.forms, self._record_specs):
            shape = spec.data.get_value(borrow=True).shape
            if form.uniforms == "like":
                uniforms.append(rng.random(shape))
            elif form.uniforms == "simplex":
                uniforms.append(rng.random(shape[:-1]))
        return [np.asarray(u) for u in self._ancillary(*values, *uniforms)]

    def log_target(self, values: list[np.ndarray], u: list[np.ndarray]) -> float:
        return float(self._log_target(*values, *u))

    def records(self, values: list[np.ndarray], u: list[np.ndarray]) -> list[np.ndarray]:
        return [np.asarray(x) for x in self._records(*values, *u)]

    def flat_log_target(self, layout: dict[str, tuple]) -> FlatLogTarget | None:
        """The log target as a numba function of the flat moving parameters, or ``None`` where the
        graph has an op without a numba implementation (then the Python path serves).

        ``layout`` maps each moving value variable's name to ``(start, stop, shape, dtype)``: where
        it sits in the flat vector. The other value variables and the ancillaries are the
        function's further arguments (:meth:`FlatLogTarget.arguments`).
        """
        inputs, graph = self.flat_log_target_graph(layout)
        fixed = inputs[1 : len(inputs) - len(self._u_inputs)]
        function = numba_function(inputs, graph)
        if function is None:
            return None
        return FlatLogTarget(
            function.vm.jit_fn,
            tuple(v.name for v in fixed),
            tuple(np.dtype(v.dtype) for v in fixed),
            tuple(function.maker.fgraph.inputs[len(inputs) :]),
        )

    def flat_log_target_graph(self, layout: dict[str, tuple]) -> tuple[list, pt.TensorVariable]:
        """The log target's graph on a flat vector of the moving parameters (``layout`` as in
        :meth:`flat_log_target`) and its inputs: the flat vector, the other value variables,
        the ancillaries' inputs."""
        size = max((place[1] for place in layout.values()), default=0)
        flat = pt.tensor("flat_parameters", shape=(size,), dtype="float64")
        replacements, fixed = {}, []
        for value in self._value_vars:
            if value.name not in layout:
                fixed.append(value)
                continue
            start, stop, shape, dtype = layout[value.name]
            piece = flat[start] if shape == () else flat[start:stop].reshape(shape)
            replacements[value] = pt.cast(piece, dtype)
        graph = clone_replace(self._log_target_graph, replacements)
        return [flat, *fixed, *self._u_inputs], graph


class FlatLogTarget(NamedTuple):
    """The non-centred log target ``fn(flat, *fixed values, *u) -> (log density,)`` in numba.

    ``fn`` is the whole-graph function PyTensor's numba backend compiles (``fn.vm.jit_fn``), which
    numba code calls directly (see :func:`pymc_unbounded_dp.kernels.interweave.step_compiled`).
    """

    fn: Callable
    fixed_names: tuple[str, ...]
    fixed_dtypes: tuple[np.dtype, ...]
    shared: tuple  # shared variables the graph reads (record containers, data), passed last

    def arguments(self, point: dict, u: list[np.ndarray]) -> tuple:
        """The arguments after the flat vector: the fixed value variables at ``point``, ``u``, and
        the current values of the shared variables."""
        fixed = (np.asarray(point[k], dtype=t) for k, t in zip(self.fixed_names, self.fixed_dtypes))
        return (
            *fixed,
            *(np.ascontiguousarray(x, dtype=np.float64) for x in u),
            *(variable.get_value(borrow=True) for variable in self.shared),
        )


def record_forms(specs, moving: list) -> list[Form | None]:
    """The non-centred form of each record variable in ``specs`` when the parameters ``moving``
    (random variables) change; ``None`` where there is none."""
    record_rvs = [spec.rv for spec in specs]
    return [_form_of(spec, moving, record_rvs) for spec in specs]


class NonCentredGraphs(NamedTuple):
    """Symbolic non-centred pieces of some record variables, on PyMC's value variables.

    ``uniforms``: auxiliary uniform inputs of the ancillaries; ``ancillaries``: ``u`` of the
    records in the model's containers; ``u_inputs``: one input per record variable;
    ``records``: each record container mapped to ``g(theta, u)`` (parents already replaced).
    """

    uniforms: list
    ancillaries: list
    u_inputs: list
    records: dict


def noncentred_graphs(model: pm.Model, specs, forms: list[Form]) -> NonCentredGraphs:
    """The graphs of ``x -> u`` and ``(theta, u) -> x`` of record variables with forms ``forms``."""

    def at_values(graphs):
        return replace_rvs_by_values(
            graphs, rvs_to_values=model.rvs_to_values, rvs_to_transforms=model.rvs_to_transforms
        )

    uniforms, ancillaries, u_inputs, new_records = [], [], [], {}
    for form, spec in zip(forms, specs):
        rv = spec.rv
        params = list(rv.owner.op.dist_params(rv.owner))
        v = None
        if form.uniforms == "like":
            v = pt.tensor(f"{spec.name}_v", dtype="float64", shape=(None,) * rv.ndim)
        elif form.uniforms == "simplex":
            v = pt.tensor(f"{spec.name}_v", dtype="float64", shape=(None,) * (rv.ndim - 1))
        if v is not None:
            uniforms.append(v)
        ancillaries.append(pt.cast(form.ancillary(rv, params, v), "float64"))
        u = pt.tensor(f"{spec.name}_u", dtype="float64", shape=(None,) * rv.ndim)
        u_inputs.append(u)
        # x = g(theta, u) on the value variables, then parent records (their containers) replaced
        # by their own new values. (Value variables and containers are graph inputs, which
        # clone_replace keeps; random variables would be cloned and no longer recognised.)
        (x_new,) = at_values([pt.cast(form.records(u, rv, params), rv.dtype)])
        new_records[spec.data] = clone_replace(x_new, new_records) if new_records else x_new
    return NonCentredGraphs(uniforms, at_values(ancillaries), u_inputs, new_records)


def build_noncentred(
    model: pm.Model, blocks: ModelBlocks, moving_names: tuple[str, ...]
) -> NonCentredModel | None:
    """Compile the non-centred target of ``model``, or ``None`` if a record variable has no form.

    Parameters
    ----------
    model : pm.Model
    blocks : ModelBlocks
        The model's privacy blocks.
    moving_names : tuple of str
        Value-variable names of the parameters the move changes (the others are held fixed).
    """
    values_to_rvs = {v.name: rv for rv, v in model.rvs_to_values.items()}
    forms = record_forms(blocks.records, [values_to_rvs[name] for name in moving_names])
    if any(f is None for f in forms):
        return None
    graphs = noncentred_graphs(model, blocks.records, forms)
    value_vars = list(model.value_vars)
    ancillary_fn = compile_pymc(
        [*value_vars, *graphs.uniforms],
        graphs.ancillaries,
        on_unused_input="ignore",
        mode=KERNEL_MODE,
    )
    # Every term but the records' own density (a fixed density of u under the non-centred
    # parametrisation): the priors with their Jacobians, potentials, the releases of the sums and
    # any public observed data of the parameters.
    record_rvs = {spec.rv for spec in blocks.records}
    observed = [rv for rv in model.observed_RVs if rv not in record_rvs]
    log_target = model.logp(vars=[*model.free_RVs, *model.potentials, *observed], jacobian=True)
    (log_target,) = split_column_sums(without_guards([clone_replace(log_target, graphs.records)]))
    log_target_fn = compile_pymc(
        [*value_vars, *graphs.u_inputs], log_target, on_unused_input="ignore", mode=KERNEL_MODE
    )
    records_fn = compile_pymc(
        [*value_vars, *graphs.u_inputs],
        list(graphs.records.values()),
        on_unused_input="ignore",
        mode=KERNEL_MODE,
    )
    for fn in (ancillary_fn, log_target_fn, records_fn):
        fn.trust_input = True
    return NonCentredModel(
        forms=tuple(forms),
        input_names=tuple(v.name for v in value_vars),
        input_dtypes=tuple(np.dtype(v.dtype) for v in value_vars),
        _ancillary=ancillary_fn,
        _log_target=log_target_fn,
        _records=records_fn,
        _record_specs=tuple(blocks.records),
        _log_target_graph=log_target,
        _value_vars=tuple(value_vars),
        _u_inputs=tuple(graphs.u_inputs),
    )
