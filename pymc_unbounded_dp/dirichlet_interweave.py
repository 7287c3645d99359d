r"""``DirichletInterweave``: an exact, cheap interweaving move for Dirichlet records.

Plain data augmentation on Dirichlet records with a noisy release of their log-shares (the ATUS
workload, :mod:`pymc_unbounded_dp.examples.atus`) crawls along the *total concentration*
``sum_j alpha_j``: given the records it is pinned to about 1% of its posterior spread (on ATUS the
lag-one autocorrelation of ``sum alpha`` is 0.988, its integrated autocorrelation time ~180), while
the release only weakly informs it. This step moves the parameters with the records written in
nearly ancillary coordinates (:mod:`pymc_unbounded_dp.kernels.dirichlet`: normalised Gammas,
boosted and Wilson-Hilferty standardised), at a few elementwise operations per record entry and
evaluation, and keeps the move exact by including the coordinates' (weak) dependence on ``alpha``
in the target:

.. math::

    \log \pi_{z, L}(\theta) = \log \pi(\theta)
        + \sum_{i, j} \log p(z_{ij} \mid \alpha_j(\theta) + m)
        + \sum_{\text{tables}} \log \eta_s\bigl(s_{dp} - \textstyle\sum_i t(x_i(\alpha(\theta),
          z_i, L_i))\bigr),

with ``log pi(theta)`` PyMC's log prior of the free variables on their transformed scale (Jacobians
included; the terms of ``n``, held fixed, are constants). The proof of exactness is in the kernel
module's docstring. The parameters move by random-walk Metropolis
(:mod:`pymc_unbounded_dp.kernels.interweave`, with its tuner: proposal covariance, scale and
number of steps adapt during tuning only).

It reads the current records from the model's record containers and writes the new ones back, so it
composes with :class:`~pymc_unbounded_dp.DataAugmentation` and
:class:`~pymc_unbounded_dp.ReversibleJump` after the parameter step, e.g.::

    pmdp.sample(step=[atus_gibbs_step(model), DirichletInterweave(model=model)], interweave=False)
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pytensor.tensor.random.basic import DirichletRV

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp._compile import CompiledModel, compile_model
from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on
from pymc_unbounded_dp.interweave import ParameterMove
from pymc_unbounded_dp.kernels import dirichlet as kd
from pymc_unbounded_dp.kernels import interweave as rw
from pymc_unbounded_dp.kernels._noise import NoiseArrays, residual_log_density

__all__ = ["DirichletInterweave", "dirichlet_concentrations"]

#: Default random-walk steps per iteration. On ATUS (real data, epsilon_s = epsilon_n = 1) one step
#: costs ~0.5 ms against ~4.5 ms for the rest of an iteration; the integrated autocorrelation
#: time of ``alpha`` is ~7 with 5 steps and ~2.6 with 15, and ESS per CPU second is flat between
#: 10 and 20 steps.
N_STEPS = 15


def dirichlet_concentrations(model: pm.Model, compiled: CompiledModel) -> list | None:
    """The concentration graph of every record variable, or ``None`` unless all are Dirichlet
    records (PyTensor's ``DirichletRV`` or a subclass) of one vector each, whose concentration
    does not depend on other records (records with batch axes, ``(n, 1, K)``, are not the move's
    ``(n, K)`` rows)."""
    record_rvs = [spec.rv for spec in compiled.blocks.records]
    concentrations = []
    for spec in compiled.blocks.records:
        op = spec.rv.owner.op
        if not isinstance(op, DirichletRV) or spec.rv.ndim != 2:
            return None
        (alpha,) = op.dist_params(spec.rv.owner)
        if depends_on(alpha, record_rvs):
            return None
        concentrations.append(alpha)
    return concentrations


def _release_log_density(residual: np.ndarray, noise: NoiseArrays) -> float:
    """``sum_j log eta_j(residual_j)``; continuous Laplace noise in NumPy (calling the numba
    kernel with the noise's first-class function argument costs ~40 us of typing per call)."""
    if noise.laplace_only:
        return float(np.sum(noise.log_normalizer - np.abs(residual) / noise.scale))
    out = np.empty(residual.shape[0])
    residual_log_density(residual, out, *noise.per_coordinate)
    noise.raise_errors()
    return float(out.sum())


class DirichletInterweave(ParameterMove):
    """Move the parameters of Dirichlet records with the records held in nearly ancillary
    coordinates (see the module docstring).

    Parameters
    ----------
    vars : list, optional
        Parameters to move (model variables or value variables). Default: the continuous free
        variables that some record variable's concentration depends on.
    n_steps : int, default :data:`N_STEPS`
        Random-walk Metropolis steps per iteration (fixed: the proposal's covariance and scale
        adapt during tuning, the number of steps does not).
    boosts : int, default :data:`~pymc_unbounded_dp.kernels.dirichlet.BOOSTS`
        Shape boosts ``m`` of the coordinates (:mod:`pymc_unbounded_dp.kernels.dirichlet`).
    model : pm.Model, optional

    Raises
    ------
    ValueError
        If a record variable is not a Dirichlet whose concentration is shared by all records (a
        function of the parameters only, the same for every record), or ``vars`` names something
        that is not a continuous parameter.

    Notes
    -----
    Statistics in ``sample_stats``, named as :class:`~pymc_unbounded_dp.Interweave`'s:
    ``interweave_on``, ``interweave_accept_rate`` (accepted / proposed steps of the iteration, 0.0
    when none) and ``interweave_steps``.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp.dirichlet_interweave import DirichletInterweave
    >>> with pm.Model() as model:
    ...     alpha = pm.Gamma("alpha", 2.0, 1.0, shape=3)
    ...     x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=20)
    ...     _ = pmdp.PrivatizedSum("s", pm.math.log(pm.math.clip(x, 0.01, 1.0)),
    ...                            pmdp.Laplace(scale=5.0), observed=[-25.0, -20.0, -30.0])
    ...     step = [pmdp.DataAugmentation(interweave=False), DirichletInterweave()]
    ...     idata = pm.sample(draws=50, tune=50, chains=1, step=step, progressbar=False,
    ...                       random_seed=1, compute_convergence_checks=False)
    """

    name = "dp_dirichlet_interweave"
    stats_dtypes_shapes: ClassVar[dict] = {
        "tune": (bool, []),
        "interweave_on": (bool, []),
        "interweave_accept_rate": (np.float64, []),
        "interweave_steps": (np.int64, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_steps: int | None = None,
        boosts: int = kd.BOOSTS,
        model: pm.Model | None = None,
        blocked: bool = True,
        rng=None,
    ):
        model = modelcontext(model)
        compiled = compile_model(model)
        n_steps = N_STEPS if n_steps is None else n_steps
        check_integer(n_steps, "n_steps", "DirichletInterweave")
        check_integer(boosts, "boosts", "DirichletInterweave", minimum=0)
        concentrations = dirichlet_concentrations(model, compiled)
        if concentrations is None:
            raise ValueError(
                "DirichletInterweave: every pmdp.Records variable must be a Dirichlet of one "
                "vector per record whose concentration depends on the parameters only; use "
                "pmdp.Interweave otherwise."
            )
        self.compiled = compiled
        self.vars = self._moving(model, compiled, concentrations, vars)
        self._names = tuple(v.name for v in self.vars)
        self.n_steps = int(n_steps)
        self.boosts = int(boosts)
        self.tune = True
        self.rng = np.random.default_rng(rng)
        value_vars = list(model.value_vars)
        self._input_names = tuple(v.name for v in value_vars)
        self._input_dtypes = tuple(np.dtype(v.dtype) for v in value_vars)
        free = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
        at_values = replace_rvs_by_values(
            concentrations, rvs_to_values=free, rvs_to_transforms=model.rvs_to_transforms
        )
        self._alpha_fn = compile_pymc(
            value_vars, at_values, on_unused_input="ignore", mode=KERNEL_MODE
        )
        # everything but the records and the releases of their sums (computed from the records
        # at each proposal): priors with Jacobians, potentials, public observed data
        private = {spec.rv for spec in compiled.blocks.records}
        private.update(spec.release_rv for spec in compiled.blocks.sums)
        public = [rv for rv in model.observed_RVs if rv not in private]
        log_prior = model.logp(vars=[*model.free_RVs, *model.potentials, *public], jacobian=True)
        (log_prior,) = replace_rvs_by_values(
            [log_prior], rvs_to_values=free, rvs_to_transforms=model.rvs_to_transforms
        )
        self._log_prior_fn = compile_pymc(
            value_vars, log_prior, on_unused_input="ignore", mode=KERNEL_MODE
        )
        for fn in (self._alpha_fn, self._log_prior_fn):
            fn.trust_input = True
        # table of each record variable, in the order of compiled.blocks.records
        self._table_of = [
            next(k for k, t in enumerate(compiled.tables) if spec.name in t.record_names)
            for spec in compiled.blocks.records
        ]
        self._tuner: rw.Tuner | None = None
        self._slices: dict | None = None

    @staticmethod
    def _moving(model: pm.Model, compiled: CompiledModel, concentrations: list, vars) -> list:
        n_names = set(compiled.n_value_names)
        continuous = [
            rv
            for rv in model.free_RVs
            if rv.dtype.startswith("float") and model.rvs_to_values[rv].name not in n_names
        ]
        if vars is None:
            used = {rv for alpha in concentrations for rv in depends_on(alpha, continuous)}
            chosen = [model.rvs_to_values[rv] for rv in continuous if rv in used]
            if not chosen:
                raise ValueError(
                    "DirichletInterweave: no continuous parameter enters the records' "
                    "concentration; there is nothing to move."
                )
            return chosen
        allowed = [model.rvs_to_values[rv] for rv in continuous]
        return ParameterMove._chosen(model, vars, allowed, "DirichletInterweave")

    # -- the move ------------------------------------------------------------------------------
    def step(self, point):
        compiled = self.compiled
        records = [spec.data.get_value(borrow=True) for spec in compiled.blocks.records]
        tables = compiled.tables
        if any(x.shape[0] != tables[k].n_at(point) for x, k in zip(records, self._table_of)):
            # The containers do not hold this chain's records yet (first iteration).
            return point, [self._stats(0, 0)]
        flat = np.concatenate([np.ravel(point[name]) for name in self._names]).astype(np.float64)
        if self._tuner is None:
            self._tuner = rw.Tuner(flat.shape[0], self.n_steps, self.n_steps, adapt_steps=False)
        steps = self.n_steps
        values = self._values(point)
        alphas = self._alphas(values)
        coords = [
            kd.coordinates(self.rng, np.asarray(x, dtype=np.float64), alpha, self.boosts)
            for x, alpha in zip(records, alphas)
        ]
        log_density = self._log_density_fn(point, values, coords)
        state = rw.init(flat, log_density)
        state, info = rw.step(self.rng, state, log_density, self._tuner.params, steps)
        if self.tune:
            self._tuner.update(state.position, info)
        if not info.accepted:
            return point, [self._stats(0, steps)]
        point = self._with_position(point, state.position)
        compiled.set_records(state.extra)
        return point, [self._stats(info.accepted, steps)]

    def check_shared_concentration(self, point: dict) -> None:
        """Raise ``ValueError`` unless each record variable's concentration at ``point`` is one
        vector for all its records."""
        self._alphas(self._values(point))

    def _values(self, point: dict) -> list[np.ndarray]:
        return [
            np.asarray(point[k], dtype=t) for k, t in zip(self._input_names, self._input_dtypes)
        ]

    def _alphas(self, values: list[np.ndarray]) -> list[np.ndarray]:
        out = []
        for alpha in self._alpha_fn(*values):
            alpha = np.asarray(alpha, dtype=np.float64)
            if any(d != 1 for d in alpha.shape[:-1]):
                raise ValueError(
                    "DirichletInterweave: the records' concentration must be the same for every "
                    f"record (a vector), got shape {alpha.shape}."
                )
            out.append(alpha.reshape(-1))
        return out

    def _log_density_fn(self, point: dict, values: list[np.ndarray], coords: list):
        """``position -> (log pi_{z, L}(theta), records at theta)``."""
        compiled = self.compiled
        layout = self._layout(point)
        slots = [
            (self._input_names.index(name), start, stop, shape, dtype)
            for name, (start, stop, shape, dtype) in layout.items()
        ]
        values = list(values)
        released = [table.released_sums() for table in compiled.tables]

        def log_density(position):
            for index, start, stop, shape, dtype in slots:
                values[index] = position[start:stop].reshape(shape).astype(dtype, copy=False)
            log_p = float(self._log_prior_fn(*values))
            if not np.isfinite(log_p):
                return -np.inf, None
            new_records, totals = [], [None] * len(compiled.tables)
            for alpha, coord in zip(self._alphas(values), coords):
                x, log_coords = kd.records(alpha, coord)
                if x is None:
                    return -np.inf, None
                log_p += log_coords
                new_records.append(x)
            for k, table in enumerate(compiled.tables):
                mine = [x for x, t in zip(new_records, self._table_of) if t == k]
                stats = table.statistics(mine)
                # ones @ t: numpy's sum over the long axis of an (n, D) array costs ~15 ns per
                # entry (a strided reduction), the product ~0.2 ns
                totals[k] = np.ones(stats.shape[0]) @ stats
                log_p += _release_log_density(released[k] - totals[k], table.noise)
            return log_p, new_records

        return log_density

    def _stats(self, accepted: int, steps: int) -> dict:
        return {
            "tune": self.tune,
            "interweave_on": steps > 0,
            "interweave_accept_rate": accepted / steps if steps else 0.0,
            "interweave_steps": steps,
        }
