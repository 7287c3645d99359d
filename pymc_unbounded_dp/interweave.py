r"""``Interweave``: the non-centred move on the parameters (ancillarity-sufficiency interweaving).

Data augmentation alternates ``records | theta`` and ``theta | records``; when the release is noisy,
most of the information about ``theta`` is missing from the records and that chain crawls: its lag-one
autocorrelation is the fraction of missing information (Liu, Wong & Kong 1994), about 0.99 on the
paper's regression. This step adds the *non-centred* update of Yu & Meng (2011): it writes the
records as ``x_i = g(theta, u_i)`` with ancillary ``u_i`` (:mod:`pymc_unbounded_dp.noncentred`),
holds ``u`` fixed and moves ``theta`` by random-walk Metropolis
(:mod:`pymc_unbounded_dp.kernels.interweave`) on

.. math::

    \pi_u(\theta) \propto \pi(\theta)\, g(n \mid \theta)\,
        \eta_s\bigl(s_{dp} - \textstyle\sum_i t(g(\theta, u_i))\bigr),

then sets the records to ``g(theta_new, u)``. There ``theta`` is informed by the release directly,
and moves fast exactly where the centred step is slow. For records without a non-centred form the
step falls back to the exact *full-refresh* move: propose ``theta'``, draw all records afresh from
the model at ``theta'`` and accept with ``pi(theta') eta_s(s_dp - T(x')) / (pi(theta) eta_s(s_dp -
T(x)))``.

The step reads the current records from the model's record containers and writes the new ones back,
so it composes with :class:`~pymc_unbounded_dp.DataAugmentation` and
:class:`~pymc_unbounded_dp.ReversibleJump` in any ``pm.sample(step=[...])`` list (after them);
``pmdp.sample`` adds it by default.
"""

from __future__ import annotations

import logging
from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp._compile import CompiledModel, compile_model
from pymc_unbounded_dp._graph import KERNEL_MODE
from pymc_unbounded_dp._numba_backend import NUMBA_MIN_RECORDS, records_at_start
from pymc_unbounded_dp._pymc_bridge import PackageStep
from pymc_unbounded_dp.kernels import interweave as rw
from pymc_unbounded_dp.kernels._noise import residual_log_density
from pymc_unbounded_dp.noncentred import (
    FlatLogTarget,
    NonCentredModel,
    build_noncentred,
    describe_forms,
)
from pymc_unbounded_dp.sums import acceptance_rate

__all__ = ["Interweave", "ParameterMove", "moving_parameters"]

_log = logging.getLogger(__name__)
_METHODS = ("auto", "noncentred", "full-refresh")
_BACKENDS = ("auto", "numba", "python")
#: A step in numba costs at most about this fraction of the same step from Python (measured on
#: the paper's regression at n = 1000, its nine column sums split by
#: :func:`~pymc_unbounded_dp._graph.split_column_sums` and, on PyTensor 2, summed inside the
#: elementwise loop (:mod:`~pymc_unbounded_dp._fused_sums`): 3-5 us on PyTensor 2 (PyMC 5)
#: and 0.9 us on PyTensor 3 (PyMC 6) against 21-29 us for the target's evaluation from Python;
#: the Python calls between steps are gone). A fixed figure, not a timing, so that seeds
#: reproduce.
COMPILED_COST_FACTOR = 0.1
#: Default upper bounds of the steps per iteration, in numba and from Python.
MAX_STEPS_COMPILED = 100
MAX_STEPS_PYTHON = 20
#: At most this many full-refresh steps per iteration when the number is chosen automatically.
FULL_REFRESH_MAX_STEPS = 5


def moving_parameters(model: pm.Model, compiled: CompiledModel) -> list:
    """The value variables an interweaving move changes: every continuous parameter (not ``n``)."""
    n_names = set(compiled.n_value_names)
    return [v for v in model.value_vars if v.name not in n_names and v.dtype.startswith("float")]


class ParameterMove(PackageStep):
    """What the moves of the parameters with the records held fixed share besides the step
    plumbing (:class:`~pymc_unbounded_dp._pymc_bridge.PackageStep`): the per-chain tuner and the
    flat vector of the moving parameters ``_names`` (``_layout``, ``_with_position``). A subclass
    sets ``rng``, ``tune``, ``_names``, and ``_tuner`` and ``_slices`` to ``None`` (they are built
    at the chain's first step and dropped at the start of the next chain)."""

    _names: tuple[str, ...]
    _tuner: rw.Tuner | None
    _slices: dict | None

    def start_chain(self, rng) -> None:
        """A new chain: its generator, and tuning from scratch."""
        super().start_chain(rng)
        self._tuner = None
        self._slices = None

    @staticmethod
    def _chosen(model: pm.Model, vars, allowed: list, owner: str) -> list:
        """The value variables of ``allowed`` that ``vars`` (variables or their values) name, in
        the order given; a ``ValueError`` naming any other."""
        by_name = {v.name: v for v in allowed}
        values = []
        for var in vars:
            name = getattr(model.rvs_to_values.get(var, var), "name", None)
            if name not in by_name:
                raise ValueError(
                    f"{owner}: {getattr(var, 'name', var)!r} is not a continuous parameter of "
                    f"the model; choose among {sorted(by_name)}."
                )
            values.append(by_name[name])
        return values

    # -- the flat vector of the moving parameters ------------------------------------------------
    def _with_position(self, point: dict, flat: np.ndarray) -> dict:
        """``point`` with the moving parameters taken from the flat vector ``flat``."""
        point = dict(point)
        for name, (start, stop, shape, dtype) in self._layout(point).items():
            point[name] = flat[start:stop].reshape(shape).astype(dtype, copy=False)
        return point

    def _layout(self, point: dict) -> dict:
        """Where each moving parameter sits in the flat vector (computed once per chain)."""
        if self._slices is None:
            self._slices = _flat_layout(point, self._names)
        return self._slices


class Interweave(ParameterMove):
    """Move the parameters with the records held fixed in their non-centred form.

    Parameters
    ----------
    vars : list, optional
        Parameters to move (model variables or value variables). Default: every continuous
        parameter (:func:`moving_parameters`).
    n_steps : int, optional
        Random-walk Metropolis steps per iteration. Default: for the non-centred move, chosen during
        tuning so that one iteration's walk crosses the posterior
        (:func:`~pymc_unbounded_dp.kernels.interweave.steps_for`), at most ``max_steps``; for the
        full-refresh move, 1 at first and at most 5. Either may become 0 after tuning where the move
        does not pay for its cost.
    max_steps : int, optional
        Upper bound of the automatic choice, which maximises effective draws per unit of cost
        (:func:`~pymc_unbounded_dp.kernels.interweave.steps_for`) from the measured jumps and a
        fixed cost estimate per step (the form's ``relative_cost``, times
        ``COMPILED_COST_FACTOR`` in numba). Default: 100 for steps in numba, 20 from Python. On
        the paper's regression (``d = 9``) the integrated autocorrelation time falls as about
        ``1 + 100 / K`` and a numba step costs about 1% of an iteration: the choice is 50-100
        steps there; from Python, where each step pays the calls' fixed cost, ESS per second was
        flat between 15 and 30 steps.
    method : {"auto", "noncentred", "full-refresh"}
        ``"auto"``: the non-centred move where every record variable has a non-centred form
        (:func:`pymc_unbounded_dp.noncentred.describe_forms`), else the full-refresh move.
    backend : {"auto", "numba", "python"}
        How the non-centred move evaluates its target. ``"numba"``: the target compiled by
        PyTensor's numba backend, all steps of an iteration in one compiled loop
        (:func:`~pymc_unbounded_dp.kernels.interweave.step_compiled`); ``"python"``: the C-compiled
        target called from Python once per step. Both draw the same random numbers and give the
        same chain up to floating-point order. ``"auto"``: numba from ``NUMBA_MIN_RECORDS`` (500)
        records, where the graph has a numba implementation of every op (else Python, said in the
        log). The full-refresh move always runs in Python.
    switch_off : bool, default True
        Whether tuning may turn the move off where it does not pay for its cost
        (:class:`~pymc_unbounded_dp.kernels.interweave.Tuner`): decided from the measured jumps
        of the move and of the rest of the iteration and a fixed cost estimate per step, never
        from timings, so a seed reproduces the run. ``False`` keeps at least one step per
        iteration (``pmdp.sample(interweave=True)``).
    model : pm.Model, optional

    Notes
    -----
    Statistics in ``sample_stats``: ``interweave_on`` (whether the move made a step in the
    iteration; ``False`` in every draw where tuning switched it off), ``interweave_accept_rate``
    (accepted / proposed random-walk steps of the iteration, 0.0 when the move is off: never NaN),
    ``interweave_steps`` and ``interweave_compiled`` (whether the steps ran in numba). The proposal covariance (from the chain's
    tuning draws), its scale (towards an acceptance of 0.234) and the number of steps adapt during
    tuning only.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 5)
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=100)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=30.0), observed=160.0)
    ...     step = [pmdp.DataAugmentation(interweave=False), pmdp.Interweave()]
    ...     idata = pm.sample(draws=100, tune=100, chains=1, step=step, progressbar=False,
    ...                       random_seed=1, compute_convergence_checks=False)
    """

    name = "dp_interweave"
    stats_dtypes_shapes: ClassVar[dict] = {
        "tune": (bool, []),
        "interweave_on": (bool, []),
        "interweave_accept_rate": (np.float64, []),
        "interweave_steps": (np.int64, []),
        "interweave_compiled": (bool, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_steps: int | None = None,
        max_steps: int | None = None,
        method: str = "auto",
        backend: str = "auto",
        switch_off: bool = True,
        model: pm.Model | None = None,
        blocked: bool = True,
        rng=None,
    ):
        model = modelcontext(model)
        compiled = compile_model(model)
        if method not in _METHODS:
            raise ValueError(f"Interweave: `method` must be one of {_METHODS}, got {method!r}.")
        if backend not in _BACKENDS:
            raise ValueError(f"Interweave: `backend` must be one of {_BACKENDS}, got {backend!r}.")
        for name, value in (("n_steps", n_steps), ("max_steps", max_steps)):
            check_integer(value, name, "Interweave", allow_none=True)
        self.vars = self._moving(model, compiled, vars)
        self.compiled = compiled
        self.n_steps = n_steps
        self._max_steps = max_steps
        self.tune = True
        self.rng = np.random.default_rng(rng)
        names = tuple(v.name for v in self.vars)
        self._names = names
        self.noncentred: NonCentredModel | None = None
        if method != "full-refresh":
            key = ("noncentred", names)
            self.noncentred = compiled.memoised(
                key, lambda: build_noncentred(model, compiled.blocks, names)
            )
        if method == "noncentred" and self.noncentred is None:
            missing = [
                k for k, form in describe_forms(model, compiled.blocks).items() if form is None
            ]
            raise ValueError(
                f"Interweave: record variable(s) {missing} have no non-centred form; use "
                "method='auto' or 'full-refresh'."
            )
        self.method = "noncentred" if self.noncentred is not None else "full-refresh"
        if backend == "numba" and self.method != "noncentred":
            raise ValueError(
                "Interweave: backend='numba' needs the non-centred move, and this model's records "
                "have no non-centred form (the full-refresh move runs in Python); use "
                "backend='auto'."
            )
        self.backend = backend
        self.switch_off = bool(switch_off)
        self._flat_target = self._numba_target(model)
        if self.method == "noncentred":
            _log.info(
                "Interweave: the non-centred move runs in %s",
                "numba" if self._flat_target is not None else "Python (C-compiled target)",
            )
        self._log_prior = (
            None if self.noncentred is not None else self._compile_log_prior(model, compiled)
        )
        self._tuner: rw.Tuner | None = None
        self._slices: dict | None = None
        self._last_exit: np.ndarray | None = None

    @staticmethod
    def _moving(model: pm.Model, compiled: CompiledModel, vars) -> list:
        allowed = moving_parameters(model, compiled)
        if vars is None:
            if not allowed:
                raise ValueError(
                    "Interweave: the model has no continuous parameters to move; sample it with "
                    "interweave=False."
                )
            return allowed
        return ParameterMove._chosen(model, vars, allowed, "Interweave")

    @staticmethod
    def _compile_log_prior(model: pm.Model, compiled: CompiledModel):
        """``log pi(theta)`` for the full-refresh move: free variables with their Jacobians,
        potentials and public observed data (everything but the records and the releases of their
        sums, whose terms the move computes from the drawn records)."""
        private = {spec.rv for spec in compiled.blocks.records}
        private.update(spec.release_rv for spec in compiled.blocks.sums)
        public = [rv for rv in model.observed_RVs if rv not in private]
        free_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
        log_prior = model.logp(vars=[*model.free_RVs, *model.potentials, *public], jacobian=True)
        (log_prior,) = replace_rvs_by_values(
            [log_prior], rvs_to_values=free_values, rvs_to_transforms=model.rvs_to_transforms
        )
        return compile_pymc(model.value_vars, log_prior, on_unused_input="ignore", mode=KERNEL_MODE)

    # -- the move ------------------------------------------------------------------------------
    def step(self, point):
        compiled = self.compiled
        records = [table.current_records() for table in compiled.tables]
        if any(r[0].shape[0] != t.n_at(point) for t, r in zip(compiled.tables, records)):
            # The containers do not hold this chain's records yet (this step ran before the
            # records step in its first iteration): nothing to condition on.
            return point, [self._stats(0, 0)]
        flat = np.concatenate([np.ravel(point[name]) for name in self._names]).astype(np.float64)
        if self._tuner is None:
            # The full-refresh fallback redraws every record per step (about half a plain
            # iteration) and is rarely accepted on informative releases: it starts with one step
            # and takes at most FULL_REFRESH_MAX_STEPS.
            # Costly forms start with fewer steps: the first tuning window measures whether the
            # move pays at all (10 steps of a step costing 0.05 of an iteration, 1 of 0.5).
            if self.method == "noncentred":
                cost = max(f.relative_cost for f in self.noncentred.forms)
                default = int(min(10, max(1, round(0.5 / cost))))
                most = self.max_steps
                if self._flat_target is not None:
                    cost *= COMPILED_COST_FACTOR
            else:
                default, most, cost = 1, min(self.max_steps, FULL_REFRESH_MAX_STEPS), 0.5
            self._tuner = rw.Tuner(
                flat.shape[0],
                self.n_steps or default,
                most,
                adapt_steps=self.n_steps is None,
                relative_cost=cost,
                may_switch_off=self.switch_off,
            )
            self._last_exit = None
        steps = self._tuner.n_steps if self.tune else self._tuner.final_steps()
        if steps == 0:
            return point, [self._stats(0, 0)]
        if self._flat_target is not None:
            args, ancillary = self._compiled_arguments(point)
            state = rw.init_compiled(flat, self._flat_target.fn, args)
            state, info = rw.step_compiled(
                self.rng, state, self._flat_target.fn, args, self._tuner.params, steps
            )
        else:
            log_density, state, ancillary = self._target(point, records, flat)
            state, info = rw.step(self.rng, state, log_density, self._tuner.params, steps)
        if self.tune:
            centred = None if self._last_exit is None else flat - self._last_exit
            self._tuner.update(state.position, info, centred)
            self._last_exit = state.position
        if not info.accepted:
            return point, [self._stats(0, steps)]
        point = self._with_position(point, state.position)
        new_records = (
            self.noncentred.records(self.noncentred.values(point), ancillary)
            if self.noncentred is not None
            else state.extra
        )
        compiled.set_records(new_records)
        return point, [self._stats(info.accepted, steps)]

    def _stats(self, accepted: int, steps: int) -> dict:
        return {
            "tune": self.tune,
            "interweave_on": steps > 0,
            "interweave_accept_rate": acceptance_rate(accepted, steps),
            "interweave_steps": steps,
            "interweave_compiled": steps > 0 and self._flat_target is not None,
        }

    @property
    def max_steps(self) -> int:
        """The most steps per iteration the tuning may choose (see the class docstring)."""
        if self._max_steps is not None:
            return int(self._max_steps)
        return MAX_STEPS_COMPILED if self._flat_target is not None else MAX_STEPS_PYTHON

    def _numba_target(self, model: pm.Model) -> FlatLogTarget | None:
        """The numba-compiled target where ``backend`` asks for it and every op has a numba
        implementation (``backend="numba"`` without one is refused here, at build time)."""
        if self.method != "noncentred" or self.backend == "python":
            return None
        if self.backend == "auto" and records_at_start(model, self.compiled) < NUMBA_MIN_RECORDS:
            return None
        layout = _flat_layout(model.initial_point(), self._names)
        key = ("numba", tuple((name, *place[:3]) for name, place in layout.items()))
        target = self.compiled.memoised(key, lambda: self.noncentred.flat_log_target(layout))
        if target is None and self.backend == "numba":
            raise ValueError(
                "Interweave: backend='numba', but an op of this model's non-centred target has "
                "no numba implementation (the log names it); use backend='auto' or 'python'."
            )
        return target

    def _compiled_arguments(self, point: dict) -> tuple[tuple, list[np.ndarray]]:
        """The numba target's arguments after the flat vector, and the fresh ancillaries in
        them."""
        nc = self.noncentred
        ancillary = nc.ancillary(nc.values(point), self.rng)
        return self._flat_target.arguments(point, ancillary), ancillary

    def _target(self, point: dict, records: list, flat: np.ndarray):
        """The log-density function of the move, the state at the current point, and the fresh
        ancillaries the non-centred target holds fixed (``None`` for the full-refresh move)."""
        if self.noncentred is not None:
            nc = self.noncentred
            values = nc.values(point)
            ancillary = nc.ancillary(values, self.rng)
            # Fill the moving parameters of `values` in place from each proposed flat vector.
            layout = self._layout(point)
            slots = [
                (nc.input_names.index(name), start, stop, shape, dtype)
                for name, (start, stop, shape, dtype) in layout.items()
            ]

            def log_density(position):
                for index, start, stop, shape, dtype in slots:
                    values[index] = position[start:stop].reshape(shape).astype(dtype, copy=False)
                return nc.log_target(values, ancillary), None

            return log_density, rw.init(flat, log_density), ancillary

        compiled = self.compiled

        def log_release(table, stats):
            released = table.released_sums()
            out = np.empty(released.shape[0])
            residual_log_density(released - stats.sum(axis=0), out, *table.noise.per_coordinate)
            table.noise.raise_errors()
            return float(out.sum())

        def log_prior(at):
            return float(self._log_prior(*(at[v.name] for v in compiled.model.value_vars)))

        def log_density(position):
            proposed = self._with_position(point, position)
            log_p, drawn_by_name = log_prior(proposed), {}
            for table, table_records in zip(compiled.tables, records):
                drawn, stats = table.propose(proposed, table_records[0].shape[0])
                log_p += log_release(table, stats)
                drawn_by_name.update(zip(table.record_names, drawn))
            # In the order of the model's record variables, as the non-centred records.
            return log_p, [drawn_by_name[name] for name in compiled.record_names]

        current = log_prior(point) + sum(
            log_release(table, table.statistics(table_records))
            for table, table_records in zip(compiled.tables, records)
        )
        return log_density, rw.RWState(flat, current, None), None


def _flat_layout(point: dict, names: tuple[str, ...]) -> dict[str, tuple]:
    """``name -> (start, stop, shape, dtype)`` of each of ``names`` in the flat parameter vector."""
    layout, start = {}, 0
    for name in names:
        value = np.asarray(point[name])
        layout[name] = (start, start + value.size, value.shape, value.dtype)
        start += value.size
    return layout
