"""The complete-data log-likelihood of a DP model as compiled functions of its parameters (MCEM).

Built once per model from its graph, with the records as explicit inputs (the model's record
containers are replaced by symbolic arrays; nothing is written into the model). The M imputed
record sets of an E-step are stacked row-wise (records are i.i.d. given the parameters, so the
records' log-density summed over all stacked rows is the Monte Carlo sum); the latent sample sizes
of the sets are passed as a vector ``n_values`` of length M. The objective is

    Q(theta) = (1/M) [ sum_i log f(x_i | theta) + sum_m log g(n_m | theta) ] + log p(y | theta)
               (+ log pi(theta) + Potentials)

where the ``g`` term is present only if the prior of ``n`` depends on the parameters, ``y`` are the
model's other observed variables (public data), and the prior and Potential terms only for MAP. It is compiled on two scales, both as functions of one flat vector:

* ``unconstrained``: the model's value variables (PyMC's transforms, no Jacobian), used by the
  optimiser and by the stopping rule;
* ``natural``: the parameters themselves, used for the reported standard errors.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.pytensorf import compile as compile_pymc
from pytensor.gradient import hessian
from pytensor.graph.replace import clone_replace

from pymc_unbounded_dp._compile import CompiledModel
from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on


class Layout(NamedTuple):
    """Where each parameter sits in a flat vector: names, shapes and ``(start, stop)`` slices."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    bounds: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, names, shapes) -> Layout:
        sizes = [int(np.prod(s, dtype=int)) for s in shapes]
        stops = np.cumsum(sizes).tolist()
        starts = [0, *stops[:-1]]
        return cls(tuple(names), tuple(tuple(s) for s in shapes), tuple(zip(starts, stops)))

    @property
    def size(self) -> int:
        return self.bounds[-1][1] if self.bounds else 0

    def split(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The parameters in ``flat`` by name, in their shapes."""
        return {
            name: flat[start:stop].reshape(shape)
            for name, shape, (start, stop) in zip(self.names, self.shapes, self.bounds)
        }

    def join(self, values: dict) -> np.ndarray:
        """The flat vector of ``values`` (a dict by name)."""
        parts = [np.asarray(values[name], dtype=float).reshape(-1) for name in self.names]
        return np.concatenate(parts) if parts else np.zeros(0)

    def symbolic(self, flat: pt.TensorVariable, like: list) -> list[pt.TensorVariable]:
        """Slices of a symbolic flat vector shaped (and typed) like the variables ``like``."""
        return [
            pt.cast(flat[start:stop].reshape(shape), var.dtype)
            for var, shape, (start, stop) in zip(like, self.shapes, self.bounds)
        ]


class Sets(NamedTuple):
    """``M`` imputed data sets stacked row-wise, with the sample size of each."""

    records: list[np.ndarray]
    n_values: np.ndarray

    def each(self):
        """Each set in turn as a one-set :class:`Sets` (views into the stacked arrays)."""
        stops = np.cumsum(self.n_values)
        for m, (start, stop) in enumerate(zip(stops - self.n_values, stops)):
            yield Sets([r[start:stop] for r in self.records], self.n_values[m : m + 1])

    def chunks(self, max_rows: int):
        """Consecutive groups of whole sets with at most ``max_rows`` rows (or one set) each."""
        stops = np.cumsum(self.n_values)
        first = 0
        while first < self.n_values.size:
            base = stops[first] - self.n_values[first]
            last = max(first + 1, int(np.searchsorted(stops, base + max_rows, side="right")))
            rows = slice(base, stops[last - 1])
            yield Sets([r[rows] for r in self.records], self.n_values[first:last])
            first = last


#: Rows of stacked records per evaluation of the objective: bounds the memory of the intermediate
#: arrays (the objective is additive over the imputed sets).
CHUNK_ROWS = 200_000


def average(function, flat: np.ndarray, sets: Sets) -> list[np.ndarray]:
    """``function(flat, n_values, *records)`` of all ``sets`` (an average over sets), evaluated
    chunk by chunk (see :data:`CHUNK_ROWS`)."""
    total = None
    for chunk in sets.chunks(CHUNK_ROWS):
        weight = chunk.n_values.size / sets.n_values.size
        parts = [
            weight * np.asarray(x, dtype=float)
            for x in function(flat, chunk.n_values, *chunk.records)
        ]
        total = parts if total is None else [t + x for t, x in zip(total, parts)]
    return total


class ScaleFunctions(NamedTuple):
    """The compiled objective on one scale, as functions of ``(flat, n_values, *records)``
    returning lists: ``value_and_grad -> [value, gradient]`` and ``hessian -> [hessian]``."""

    value_and_grad: object
    hessian: object


@dataclass(eq=False)
class CompleteDataLogLik:
    """Compiled complete-data log-likelihood of a model (see the module docstring).

    Parameters
    ----------
    compiled : CompiledModel
    include_prior : bool
        Add the log prior density of the parameters and the model's Potentials (natural scale, no
        Jacobian): MAP.
    """

    compiled: CompiledModel
    include_prior: bool

    def __post_init__(self) -> None:
        self.table = self.compiled.single_table("pmdp.mcem")
        model = self.compiled.model
        param_names = self.compiled.parameter_names
        self.value_vars = [v for v in model.value_vars if v.name in param_names]
        self.param_rvs = [model.values_to_rvs[v] for v in self.value_vars]
        check_parameters(self.compiled, self.param_rvs)
        point = model.initial_point()
        self.initial_point = point
        self.unconstrained = Layout.of(
            [v.name for v in self.value_vars], [np.shape(point[v.name]) for v in self.value_vars]
        )
        transforms = [model.rvs_to_transforms.get(rv) for rv in self.param_rvs]
        self.transformed = np.concatenate(
            [
                np.full(stop - start, transform is not None)
                for transform, (start, stop) in zip(transforms, self.unconstrained.bounds)
            ]
        )
        self.n_values = pt.vector("n_values", dtype="int64")
        self.record_inputs = [
            pt.tensor(f"{spec.name}_stacked", dtype=spec.data.dtype, shape=(None,) * spec.data.ndim)
            for spec in self.table.records
        ]
        self._objective = self._objective_graph()
        natural = self._at_values(self.param_rvs)
        flat_u = pt.vector("unconstrained", dtype="float64")
        slices = self.unconstrained.symbolic(flat_u, self.value_vars)
        natural_of_u = clone_replace(natural, dict(zip(self.value_vars, slices)))
        flat_natural = pt.concatenate([pt.cast(x, "float64").reshape((-1,)) for x in natural_of_u])
        self._to_natural = _function([flat_u], flat_natural)
        self.natural = Layout.of(
            [rv.name for rv in self.param_rvs], self._natural_shapes(natural, point)
        )
        self._scales: dict[str, ScaleFunctions] = {}
        self._to_unconstrained = None

    # ------------------------------------------------------------------------------------------
    # graphs
    # ------------------------------------------------------------------------------------------
    def _at_values(self, graphs: list) -> list:
        model = self.compiled.model
        free = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
        return replace_rvs_by_values(
            graphs, rvs_to_values=free, rvs_to_transforms=model.rvs_to_transforms
        )

    def _natural_shapes(self, natural: list, point: dict) -> list[tuple]:
        fn = _function(self.value_vars, natural)
        return [np.shape(v) for v in fn(*(point[v.name] for v in self.value_vars))]

    def _objective_graph(self) -> pt.TensorVariable:
        """``Q`` as a function of the parameters' value variables and ``n_values``."""
        model = self.compiled.model
        record_rvs = [r.rv for r in self.compiled.blocks.records]
        total = model.logp(vars=record_rvs, jacobian=False)
        replacements = {spec.data: x for spec, x in zip(self.table.records, self.record_inputs)}
        size = self.table.sample_size
        if size is not None:
            # The records' graph is sized by n; here n is the length of the records evaluated.
            n_value = model.rvs_to_values[size.rv]
            rows = self.record_inputs[0].shape[0]
            replacements[n_value] = pt.cast(rows, n_value.dtype)
        total = clone_replace(total, replacements)
        if self.prior_of_n_depends_on_parameters:
            n_rv = self.table.sample_size.rv
            log_g = pm.logp(n_rv, self.n_values, warn_rvs=False)
            total = total + self._at_values([log_g])[0].sum()
        objective = total / pt.cast(self.n_values.shape[0], "float64")
        if self.parameter_terms:
            objective = objective + model.logp(vars=self.parameter_terms, jacobian=False)
        return objective

    @property
    def parameter_terms(self) -> list:
        """The model's terms of the parameters alone, added once (not per imputed set): observed
        variables other than the records and the releases (public data, part of the likelihood)
        and, for MAP, the priors and the Potentials (``compile_model`` refuses terms that read
        the records or ``n``)."""
        model, blocks = self.compiled.model, self.compiled.blocks
        skipped = {r.rv for r in blocks.records} | {s.release_rv for s in blocks.sums}
        skipped |= {s.release_rv for s in blocks.sample_sizes}
        terms = [v for v in model.observed_RVs if v not in skipped]
        if self.include_prior:
            terms = [*self.param_rvs, *model.potentials, *terms]
        return terms

    @property
    def prior_of_n_depends_on_parameters(self) -> bool:
        """Whether ``g(n | theta)`` enters the likelihood (e.g. ``n ~ Poisson(lam)``)."""
        n = self.table.sample_size
        return n is not None and bool(depends_on(n.rv, self.param_rvs))

    def inputs_on(self, scale: str, flat: pt.TensorVariable) -> dict:
        """The parameters' value variables as functions of a flat vector on ``scale``
        (``"unconstrained"``: the value variables themselves; ``"natural"``: the parameters)."""
        if scale == "unconstrained":
            return dict(zip(self.value_vars, self.unconstrained.symbolic(flat, self.value_vars)))
        return self._natural_inputs(flat)

    def _natural_inputs(self, flat: pt.TensorVariable) -> dict:
        """Value variables as functions of a natural-scale flat vector (``forward`` transforms)."""
        model = self.compiled.model
        natural = dict(zip(self.param_rvs, self.natural.symbolic(flat, self.param_rvs)))
        replacements = {}
        for value, rv in zip(self.value_vars, self.param_rvs):
            transform = model.rvs_to_transforms.get(rv)
            replacements[value] = (
                natural[rv]
                if transform is None
                else transform.forward(natural[rv], *rv.owner.inputs)
            )
        # Transforms may read other parameters (e.g. bounds): those are the natural values too.
        return {
            value: clone_replace(expr, natural) if depends_on(expr, self.param_rvs) else expr
            for value, expr in replacements.items()
        }

    def scale(self, name: str) -> ScaleFunctions:
        """The compiled objective on the ``"unconstrained"`` or ``"natural"`` scale (cached)."""
        if name not in self._scales:
            flat = pt.vector(name, dtype="float64")
            objective = clone_replace(self._objective, self.inputs_on(name, flat))
            grad = pytensor.grad(objective, flat)
            args = [flat, self.n_values, *self.record_inputs]
            self._scales[name] = ScaleFunctions(
                value_and_grad=_function(args, [objective, grad]),
                hessian=_function(args, [hessian(objective, flat)]),
            )
        return self._scales[name]

    # ------------------------------------------------------------------------------------------
    # conversions
    # ------------------------------------------------------------------------------------------
    def to_natural(self, unconstrained: np.ndarray) -> np.ndarray:
        """Flat natural-scale parameters of a flat unconstrained vector."""
        return np.asarray(self._to_natural(unconstrained), dtype=float)

    def to_unconstrained(self, natural: np.ndarray) -> np.ndarray:
        """Flat unconstrained parameters of a flat natural-scale vector."""
        if self._to_unconstrained is None:
            flat = pt.vector("natural", dtype="float64")
            inputs = self._natural_inputs(flat)
            out = pt.concatenate(
                [pt.cast(inputs[v], "float64").reshape((-1,)) for v in self.value_vars]
            )
            self._to_unconstrained = _function([flat], out)
        return np.asarray(self._to_unconstrained(natural), dtype=float)

    def point(self, unconstrained: np.ndarray, n: int) -> dict:
        """A model point (value-variable dict) for the kernels: parameters at ``unconstrained``."""
        point = dict(self.initial_point)
        point.update(
            {
                name: np.asarray(value, dtype=point[name].dtype)
                for name, value in self.unconstrained.split(unconstrained).items()
            }
        )
        n_name = self.table.n_value_name
        if n_name is not None:
            point[n_name] = np.asarray(n, dtype=point[n_name].dtype)
        return point


def _function(inputs: list, outputs):
    """Compile with PyMC's rewrites (failed parameter checks give ``-inf``, not an exception)."""
    return compile_pymc(inputs, outputs, mode=KERNEL_MODE, on_unused_input="ignore")


_CACHE: weakref.WeakKeyDictionary[CompiledModel, dict[bool, CompleteDataLogLik]] = (
    weakref.WeakKeyDictionary()
)


def complete_data_loglik(compiled: CompiledModel, include_prior: bool) -> CompleteDataLogLik:
    """The (cached) :class:`CompleteDataLogLik` of a compiled model."""
    per_model = _CACHE.setdefault(compiled, {})
    if include_prior not in per_model:
        per_model[include_prior] = CompleteDataLogLik(compiled, include_prior)
    return per_model[include_prior]


def check_parameters(compiled: CompiledModel, param_rvs: list) -> None:
    """MCEM maximises over continuous parameters only; ``n`` is integrated out."""
    discrete = [rv.name for rv in param_rvs if rv.dtype.startswith(("int", "uint", "bool"))]
    if discrete:
        raise ValueError(
            f"mcem: the model has discrete parameter(s) {', '.join(map(repr, discrete))}. MCEM "
            "maximises over continuous parameters only (the latent sample size n is integrated "
            "out); make them continuous, fix them as constants, or use pmdp.sample."
        )
    if not param_rvs:
        raise ValueError("mcem: the model has no parameters to estimate.")
    record_rvs = [r.rv for r in compiled.blocks.records]
    if not any(depends_on(rv, param_rvs) for rv in record_rvs):
        raise ValueError(
            "mcem: the records' distribution does not depend on any model parameter; there is "
            "nothing to estimate."
        )
