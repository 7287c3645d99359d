"""PyMC step methods: data augmentation (bounded DP) and reversible jump over ``n`` (unbounded DP).

Both are :class:`pymc.step_methods.CompoundStep`\\ s of the same shape::

    [RecordsStep, *parameter steps]

:class:`RecordsStep` runs the record kernels of :mod:`pymc_unbounded_dp.kernels` and writes the
imputed records into the model's record containers; the parameter steps (NUTS by default, chosen
the way ``pm.sample`` chooses) then update the parameters given those records. Under unbounded DP
``RecordsStep`` owns ``n``; under bounded DP there is no latent variable to own, so it claims the
parameters it conditions on (it never changes them) and the parameter steps update them.

The record state belongs to the chain: PyMC hands each chain its generator at the chain's start
(:meth:`~pymc_unbounded_dp._pymc_bridge.PackageStep.start_chain`), and the step then re-imputes the
records from the model at the chain's starting point, so chains never share records, also when
``cores=1`` runs them through the same step object. What the steps need from PyMC's internals
(the step assignment, its list of step methods, the log density without the release terms) goes
through :mod:`pymc_unbounded_dp._pymc_bridge`.
"""

from __future__ import annotations

import inspect

import numpy as np
import pymc as pm
from pymc.model import modelcontext
from pymc.step_methods import NUTS
from pymc.step_methods.compound import BlockedStep, Competence, CompoundStep

import pymc_unbounded_dp.kernels as kernels
from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp._compile import CompiledModel, compile_model
from pymc_unbounded_dp._keywords import check_keywords, named_keywords
from pymc_unbounded_dp._log_density import ModelLogDensity
from pymc_unbounded_dp._pymc_bridge import (
    PackageStep,
    flat_steps,
    register_step_method,
    step_method_names,
)
from pymc_unbounded_dp._registry import (
    is_private_model_variable,
    observed_value,
    records_in_containers,
)
from pymc_unbounded_dp._step_assembly import check_interweave, interweave_steps, parameter_steps
from pymc_unbounded_dp.blocks import check_releases
from pymc_unbounded_dp.interweave import Interweave
from pymc_unbounded_dp.sums import (
    MODEL_LOGP_STAT,
    N_MOVE_STATS,
    SumsStep,
    resolve_augment,
)
from pymc_unbounded_dp.sums import acceptance_rate as _rate

__all__ = [
    "DataAugmentation",
    "PrivateDataStep",
    "RecordsStep",
    "ReleaseLogLikelihood",
    "ReversibleJump",
]


class RecordsStep(PackageStep):
    """Impute the latent records (and move ``n``): the kernel half of the augmentation steps.

    Not meant to be used alone; :class:`DataAugmentation` and :class:`ReversibleJump` build it.

    Parameters
    ----------
    vars : list
        Value variables it claims: the latent sample sizes under unbounded DP; under bounded DP
        any non-empty list (PyMC requires one), and the step then claims none.
    compiled : CompiledModel
    n_moves : int
        Birth/death moves per iteration (0 under bounded DP).
    adapt_n_moves : bool
        During tuning, reset ``n_moves`` every iteration to
        :func:`~pymc_unbounded_dp.kernels.default_n_moves` of the current ``n`` and the sd of the
        noise on ``n_dp``; it stays at its last tuning value for the draws (a fixed kernel, so the
        draws target the posterior).
    keep_records : int or None
        Keep a copy of the imputed records every ``keep_records`` post-tuning iterations.
    model_logp : bool
        Declare the ``model_logp`` stat (PyMC's ``lp``), which the augmentation step around this
        one fills with the model's log density at the end of each iteration (when no parameter
        step declares it).
    """

    name = "dp_records"
    stats_dtypes_shapes = {
        "tune": (bool, []),
        "refresh_accept_rate": (np.float64, []),
    }
    _unbounded_stats = N_MOVE_STATS

    def __init__(
        self,
        vars,
        compiled: CompiledModel,
        *,
        model_logp: bool,
        n_moves: int | None = None,
        keep_records: int | None = None,
        model=None,
        blocked: bool = True,
        rng=None,
    ):
        # Under bounded DP this step changes no model variable: PyMC requires some at construction
        # (the parameters are passed), but listing them would show them sampled twice.
        self.vars = list(vars) if compiled.unbounded else []
        self.compiled = compiled
        self._requested_moves = n_moves
        self.adapt_n_moves = n_moves is None
        self.n_moves = self._initial_n_moves()
        self.keep_records = keep_records
        self.tune = True
        self.rng = np.random.default_rng(rng)
        extra = dict(self._unbounded_stats) if compiled.unbounded else {}
        if keep_records:
            extra["records"] = (object, None)
        if model_logp:
            extra["model_logp"] = MODEL_LOGP_STAT
        self._add_stats(extra)
        self._states: list[kernels.RecordState] | None = None
        self._targets: list[kernels.RecordTarget] = []
        # each table's record version (CompiledTable.version) after this step's last write
        self._versions: list[int] = []
        self._iteration = 0

    def _initial_n_moves(self) -> list[int]:
        """Birth/death moves per iteration of each table (0 for a table with a known ``n``)."""
        return [
            0
            if t.sample_size is None
            else t.default_n_moves(t.chain_start_n())
            if self._requested_moves is None
            else int(self._requested_moves)
            for t in self.compiled.tables
        ]

    def start_chain(self, rng) -> None:
        """A new chain: its generator, and records imputed afresh at its first step."""
        # The releases may have been changed by pm.set_data since this step was built.
        check_releases(self.compiled.model)
        super().start_chain(rng)
        self._states = None
        self._iteration = 0
        self.n_moves = self._initial_n_moves()

    def step(self, point):
        tables = self.compiled.tables
        self._targets = targets = [table.record_target(point) for table in tables]
        if self._states is None:
            self._states = [
                kernels.init(target, table.n_at(point), self.rng)
                for table, target in zip(tables, targets)
            ]
        else:
            self._adopt_changed_records()
        totals = np.zeros(6, dtype=np.int64)
        point = dict(point)
        for k, (table, target) in enumerate(zip(tables, targets)):
            if self.adapt_n_moves and self.tune and table.sample_size is not None:
                self.n_moves[k] = table.default_n_moves(self._states[k].n)
            self._states[k], info = kernels.sweep(
                target, self._states[k], self.rng, self.n_moves[k]
            )
            totals += [
                info.refresh_accepted,
                info.refresh_proposed,
                info.births_accepted,
                info.births_proposed,
                info.deaths_accepted,
                info.deaths_proposed,
            ]
            table.set_records(self._states[k].active_records())
            if table.n_value_name is not None:
                name = table.n_value_name
                point[name] = np.asarray(self._states[k].n, dtype=point[name].dtype)
        self._versions = [table.version for table in tables]
        stats = {"tune": self.tune, "refresh_accept_rate": _rate(totals[0], totals[1])}
        if self.compiled.unbounded:
            stats["birth_accept_rate"] = _rate(totals[2], totals[3])
            stats["death_accept_rate"] = _rate(totals[4], totals[5])
            stats["n_moves"] = sum(self.n_moves)
        if self.keep_records:
            keep = not self.tune and self._iteration % self.keep_records == 0
            stats["records"] = self.kept_records() if keep else None
            self._iteration += not self.tune
        return point, [stats]

    def release_log_density(self) -> float:
        """``log eta_s(s_dp - T(x)) + log eta_n(n_dp - n)`` of every table at the records and
        ``n`` of its last step (:func:`~pymc_unbounded_dp.kernels.release_log_density`)."""
        return sum(
            kernels.release_log_density(target, state)
            for target, state in zip(self._targets, self._states)
        )

    def kept_records(self) -> dict[str, np.ndarray]:
        """A copy of the records in the model's containers, by record name (the ``records``
        stat; the augmentation step takes it again at the end of the iteration, after the moves
        that follow this step)."""
        return {
            name: np.array(records, copy=True)
            for table in self.compiled.tables
            for name, records in zip(table.record_names, table.current_records())
        }

    def _adopt_changed_records(self) -> None:
        """Take over records that another step (:class:`~pymc_unbounded_dp.Interweave`) wrote into
        the model's containers (:meth:`~pymc_unbounded_dp._compile.CompiledTable.set_records`)
        since this step wrote its own (same ``n``)."""
        for table, state, seen in zip(self.compiled.tables, self._states, self._versions):
            if table.version == seen:
                continue
            current = table.current_records()
            n = state.n
            if any(c.shape[0] != n for c in current):
                raise RuntimeError(
                    "The record containers were resized by another step; only the records step "
                    "may change the number of records."
                )
            for buffer, values in zip(state.records, current):
                buffer[:n] = values
            state.stats[:n] = table.statistics(current)


class ReleaseLogLikelihood(PackageStep):
    """Record the log-density of every released value given the iteration's records.

    The last step of an augmentation step asked for log-likelihoods: for each released sum, per
    coordinate, ``log eta(s_dp - T(x))`` with the records ``x`` of this draw, and for each
    released count ``log eta_n(n_dp - n)``: what LOO and WAIC over the releases need (the release
    density given the draw's records and ``n``). :func:`pmdp.sample` turns the stats into the
    ``log_likelihood`` group. It changes nothing.
    """

    name = "dp_log_likelihood"

    def __init__(
        self,
        vars,
        compiled: CompiledModel,
        sums_step: SumsStep | None = None,
        model=None,
        blocked: bool = True,
        rng=None,
    ):
        self.vars = []  # PyMC needs some variables at construction; this step changes none
        self.compiled = compiled
        self.sums_step = sums_step  # the sums level: the true totals are its latent sums
        # Array-valued stats go as objects (PyMC's NDArray trace stores scalar stats only).
        stats = {
            f"log_likelihood_{s.name}": (np.float64, []) if s.shape == () else (object, None)
            for s in compiled.blocks.sums
        }
        stats.update(
            {f"log_likelihood_{n.name}_dp": (np.float64, []) for n in compiled.blocks.sample_sizes}
        )
        self._add_stats(stats)

    def step(self, point):
        model, stats = self.compiled.model, {}
        for k, table in enumerate(self.compiled.tables):
            if self.sums_step is not None:
                totals = self.sums_step.release_totals()[k]
            else:
                totals = table.statistics(table.current_records()).sum(axis=0)
            start = 0
            for spec in table.spec.sums:
                size = int(np.prod(spec.shape, dtype=int))
                released = observed_value(model, spec.release_rv).reshape(-1)
                noise = released - totals[start : start + size]
                log_density = spec.mechanism.logpdf(noise).reshape(spec.shape)
                stats[f"log_likelihood_{spec.name}"] = (
                    float(log_density) if spec.shape == () else log_density
                )
                start += size
            if table.sample_size is not None:
                size = table.sample_size
                noise = table.released_n() - table.n_at(point)
                stats[f"log_likelihood_{size.name}_dp"] = float(size.mechanism.logpdf(noise))
        return point, [stats]


class DataAugmentation(CompoundStep):
    """Data-augmentation MCMC for bounded DP (Ju, Awan, Gong & Rao, NeurIPS 2022).

    Each iteration refreshes every latent record by independent Metropolis with proposals from the
    record model (acceptance depends only on the privacy noise density), then updates the model
    parameters with ``parameter_step`` (default: what ``pm.sample`` would choose, NUTS for
    continuous parameters) given the imputed records.

    Parameters
    ----------
    parameter_step : step or list of steps, optional
        PyMC steps for (some of) the parameters; the rest are assigned as ``pm.sample`` does.
    interweave : {"auto", True, False} or dict, default "auto"
        The interweaving move :class:`~pymc_unbounded_dp.Interweave` after the parameter steps:
        ``"auto"``, where every record variable has a non-centred form, with the move switched off
        during tuning where it does not pay; ``True`` forces it on (the full-refresh move where a
        form is missing); ``False``, none; a dict, its options.
    model : pm.Model, optional
    keep_records : int, optional
        Keep the imputed records every ``keep_records`` post-tuning draws (as the ``records``
        sampler stat; :func:`pmdp.sample` turns them into an ``imputed_records`` group).
    step_kwargs : dict, optional
        Keyword arguments for automatically assigned steps, keyed by their lower-case name, e.g.
        ``{"nuts": {"target_accept": 0.9}}``.
    vars : list, optional
        Value variables to assign parameter steps to (default: all that ``parameter_step`` leaves
        out); how ``pm.sample()`` hands this step the model's variables.
    log_likelihood : bool, default False
        Also record the log-density of each released value given each draw's records
        (:class:`ReleaseLogLikelihood`); :func:`pmdp.sample` asks for it with
        ``idata_kwargs={"log_likelihood": True}``.
    augment : {"auto", "records", "sums"}, default "auto"
        The augmentation level. ``"records"``: the latent records are imputed (the paper's
        method). ``"sums"``: each table's latent state is its true sums and ``n``, moved with the
        records summed out by their exact law (:mod:`pymc_unbounded_dp.sums`; no record is
        materialised, and an iteration costs the same at any ``n``); refused, with the reason,
        for a table whose sums have no exact law. ``"auto"``: the sums level exactly when every
        table has an exact law (and ``keep_records`` is not asked for), else the records level.
        The level used is :attr:`augment`.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=50)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    ...     step = pmdp.DataAugmentation()
    ...     idata = pm.sample(draws=50, tune=50, chains=1, step=step, progressbar=False,
    ...                       random_seed=1, compute_convergence_checks=False)
    """

    @named_keywords("pmdp.DataAugmentation()")
    def __init__(
        self,
        parameter_step=None,
        *,
        interweave: bool | dict | str = "auto",
        model: pm.Model | None = None,
        keep_records: int | None = None,
        step_kwargs: dict | None = None,
        vars=None,
        log_likelihood: bool = False,
        augment: str = "auto",
    ):
        model = modelcontext(model)
        compiled = compile_model(model)
        self._check_kind(compiled)
        check_integer(keep_records, "keep_records", allow_none=True)
        owner = type(self).__name__
        self.augment, table_laws = resolve_augment(compiled, augment, owner, keep_records)
        claimed = self._claimed_vars(model, compiled)
        parameters = parameter_steps(
            model,
            compiled,
            parameter_step,
            step_kwargs,
            only=vars,
            table_laws=table_laws,
            exclude=(PrivateDataStep,),
        )
        # PyMC's lp: a parameter step's `model_logp` stat (NUTS), else the leaf's
        own_logp = not any("model_logp" in m.stats_dtypes_shapes for m in parameters)
        if table_laws is None:
            leaf = RecordsStep(
                claimed,
                compiled,
                n_moves=self._n_moves(),
                keep_records=keep_records,
                model_logp=own_logp,
                model=model,
            )
            methods = [leaf, *parameters, *interweave_steps(model, compiled, interweave)]
        else:
            check_interweave(interweave)
            if isinstance(interweave, dict):
                raise ValueError(
                    f"{owner}: `interweave` options apply to the records level; the sums level "
                    "(augment='sums') moves the parameters given the latent sums, with no "
                    "interweaving move. Drop `interweave` or use augment='records'."
                )
            leaf = SumsStep(
                claimed,
                compiled,
                table_laws,
                n_moves=self._n_moves(),
                model_logp=own_logp,
                model=model,
            )
            # a collapsed table's totals are drawn after the parameters, given them (their
            # target has the totals integrated out): each draw is then a joint one
            collapsed = any(law.variances is not None for law in table_laws)
            methods = [*parameters, leaf] if collapsed else [leaf, *parameters]
        if log_likelihood:
            sums_step = leaf if table_laws is not None else None
            methods.append(ReleaseLogLikelihood(claimed, compiled, sums_step, model=model))
        super().__init__(methods)
        self._logp_slots = [i for i, d in enumerate(self.stats_dtypes) if "model_logp" in d]
        # NUTS built here (its target without the release terms) as the last move: its lp at the
        # final state plus the release terms is the model's log density there
        last = methods[-1]
        own_nuts = isinstance(last, NUTS) and all(last is not s for s in flat_steps(parameter_step))
        self._parameter_lp_slot = (
            len(self.stats_dtypes) - 1 if table_laws is None and own_nuts else None
        )
        self._log_density = None
        if self._parameter_lp_slot is None and table_laws is not None:
            self._log_density = ModelLogDensity(compiled, leaf)  # reads this fit's latent sums
        elif self._parameter_lp_slot is None:  # reads the records' containers: reused by refits
            self._log_density = compiled.memoised(
                "model log density", lambda: ModelLogDensity(compiled)
            )
        self._records_slot = next(
            (i for i, d in enumerate(self.stats_dtypes) if "records" in d), None
        )

    def step(self, point):
        # The release densities may be evaluated (by parameter steps inside this one) only while
        # the records are being imputed: see FrozenRecordsGuard.
        with records_in_containers(self.records_step.compiled.model):
            point, stats = super().step(point)
            # PyMC's compound step keeps the last step's `model_logp` only, and NUTS's leaves out
            # the release terms and predates the moves after it: lp is the model's log density
            # at the state the iteration ends in (see pymc_unbounded_dp._log_density).
            slot = self._parameter_lp_slot
            if slot is None:
                log_density = self._log_density(point)
            else:
                log_density = stats[slot]["model_logp"] + self.records_step.release_log_density()
            for slot in self._logp_slots:
                stats[slot]["model_logp"] = log_density
            slot = self._records_slot
            if slot is not None and stats[slot].get("records") is not None:
                # the records of the draw: an interweaving move may have changed them since
                stats[slot]["records"] = self.records_step.kept_records()
        return point, stats

    @property
    def interweave_step(self) -> Interweave | None:
        """The interweaving move of this step (``None`` with ``interweave=False``)."""
        return next((m for m in self.methods if isinstance(m, Interweave)), None)

    @property
    def records_step(self) -> RecordsStep | SumsStep:
        """The augmentation part of this step: the records' imputation, or the latent sums'
        moves at the sums level."""
        return next(m for m in self.methods if isinstance(m, RecordsStep | SumsStep))

    def _check_kind(self, compiled: CompiledModel) -> None:
        if compiled.unbounded:
            names = ", ".join(repr(s.name) for s in compiled.blocks.sample_sizes)
            raise ValueError(
                "DataAugmentation is for bounded DP (known n) but the model has latent sample "
                f"sizes ({names}: pmdp.SampleSize); use pmdp.ReversibleJump (or pmdp.sample)."
            )

    def _n_moves(self) -> int | None:
        return 0

    def _claimed_vars(self, model: pm.Model, compiled: CompiledModel) -> list:
        claimed = [v for v in model.value_vars if v.name in compiled.parameter_names]
        if not claimed:
            raise ValueError(
                "The model has no parameters to sample: the records' distribution must depend on "
                "at least one model parameter."
            )
        return claimed


class ReversibleJump(DataAugmentation):
    """Reversible-jump data augmentation for unbounded DP (Awan, Barrientos & Ju 2024).

    Each iteration refreshes every record, makes ``n_moves`` birth/death moves over the latent
    sample size ``n`` (births drawn from the record model; acceptance from the privacy noise of the
    sums and of ``n_dp`` and the prior of ``n``), then updates the parameters given the records.
    A model with several record tables gets these moves per table, each over its own ``n`` (tables
    with a known ``n`` are refreshed only).

    Parameters
    ----------
    parameter_step : step or list of steps, optional
        As for :class:`DataAugmentation`.
    n_moves : int, optional
        Birth/death moves per iteration (of each latent ``n``), fixed for the whole run. At the
        sums level each moves several records at once (default
        :data:`~pymc_unbounded_dp.sums.N_MOVES` moves). Default at the records level:
        :func:`~pymc_unbounded_dp.kernels.default_n_moves`, ``20`` times the variance of the
        noise on ``n_dp`` (enough for ``n`` to cross its posterior in an iteration), at least 10
        and at most one per record, of the current ``n`` during tuning (starting from ``n_dp``
        moved into the prior's support, which a small ``epsilon_n`` can put far from the
        records' ``n``) and of the last tuning ``n`` for the draws.
    model, keep_records, step_kwargs, augment
        As for :class:`DataAugmentation`.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    ...     step = pmdp.ReversibleJump(n_moves=5)
    ...     idata = pm.sample(draws=50, tune=50, chains=1, step=step, progressbar=False,
    ...                       random_seed=1, compute_convergence_checks=False)
    """

    @named_keywords("pmdp.ReversibleJump()")
    def __init__(
        self,
        parameter_step=None,
        *,
        n_moves: int | None = None,
        interweave: bool | dict | str = "auto",
        model: pm.Model | None = None,
        keep_records: int | None = None,
        step_kwargs: dict | None = None,
        vars=None,
        log_likelihood: bool = False,
        augment: str = "auto",
    ):
        check_integer(n_moves, "n_moves", allow_none=True)
        self._requested_moves = n_moves
        super().__init__(
            parameter_step,
            interweave=interweave,
            model=model,
            keep_records=keep_records,
            step_kwargs=step_kwargs,
            vars=vars,
            log_likelihood=log_likelihood,
            augment=augment,
        )

    def _check_kind(self, compiled: CompiledModel) -> None:
        if not compiled.unbounded:
            raise ValueError(
                "ReversibleJump moves a latent sample size but the model's Records have a known "
                "n; declare n with pmdp.SampleSize(...) or use pmdp.DataAugmentation."
            )

    def _n_moves(self) -> int | None:
        return self._requested_moves

    def _claimed_vars(self, model: pm.Model, compiled: CompiledModel) -> list:
        return [model.rvs_to_values[s.rv] for s in compiled.blocks.sample_sizes]


def augmentation_step(
    model: pm.Model,
    parameter_step=None,
    *,
    n_moves: int | None = None,
    interweave: bool | dict | str = "auto",
    keep_records: int | None = None,
    step_kwargs: dict | None = None,
    vars=None,
    log_likelihood: bool = False,
    augment: str = "auto",
) -> DataAugmentation:
    """The right augmentation step for ``model``: bounded or unbounded DP."""
    compiled = compile_model(model)
    kwargs = {
        "augment": augment,
        "model": model,
        "keep_records": keep_records,
        "step_kwargs": step_kwargs,
        "interweave": interweave,
        "vars": vars,
        "log_likelihood": log_likelihood,
    }
    if not compiled.unbounded:
        if n_moves is not None:
            raise ValueError(
                "`n_moves` applies to unbounded DP only (the model has no SampleSize)."
            )
        return DataAugmentation(parameter_step, **kwargs)
    return ReversibleJump(parameter_step, n_moves=n_moves, **kwargs)


class PrivateDataStep(BlockedStep):
    """What ``pm.sample()`` assigns to the variables of a model with privacy blocks.

    Registered in PyMC's step methods when the package is imported
    (:func:`~pymc_unbounded_dp._pymc_bridge.register_step_method`). Its competence for every
    free variable of a model with :func:`~pymc_unbounded_dp.Records` is above ``IDEAL``, so plain
    ``pm.sample()`` hands the whole model to it, and instantiating it builds the model's
    :class:`DataAugmentation` or :class:`ReversibleJump` (with PyMC's own choice of parameter
    steps inside it): the records are imputed every iteration instead of staying frozen.
    Options go by its name, ``pm.sample(dp_augmentation={"interweave": False})``, and so do the
    inner steps' options, by their step names:
    ``pm.sample(dp_augmentation={"nuts": {"target_accept": 0.95}})`` (PyMC refuses
    ``pm.sample(target_accept=...)`` here, as NUTS is not assigned at top level; it points to
    this spelling). :func:`pmdp.sample` takes ``target_accept`` directly.

    PyMC instantiates the classes it assigns (``cls(vars=..., model=..., **options)``) and uses
    what that returns; this class returns the augmentation step, as PyMC's own
    ``BlockedStep.__new__`` returns a ``CompoundStep`` for a non-blocked step.
    """

    name = "dp_augmentation"

    def __new__(cls, vars=None, model=None, initial_point=None, compile_kwargs=None, **kwargs):
        model = modelcontext(model)
        names = step_method_names()
        step_kwargs = {key: kwargs.pop(key) for key in list(kwargs) if key in names}
        options = inspect.signature(augmentation_step).parameters
        check_keywords(
            f"pm.sample({cls.name}={{...}})",
            kwargs,
            [*names, *(k for k in options if k not in ("model", "vars", "step_kwargs"))],
        )
        return augmentation_step(model, vars=vars, step_kwargs=step_kwargs or None, **kwargs)

    @staticmethod
    def competence(var, has_grad):
        if is_private_model_variable(var):
            return Competence.IDEAL + 1  # above every PyMC step: nothing else imputes records
        return Competence.INCOMPATIBLE


register_step_method(PrivateDataStep)
