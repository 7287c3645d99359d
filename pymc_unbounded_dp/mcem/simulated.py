r"""The simulated observed-data likelihood in the records' non-centred form.

With every record variable written as ``x = g(theta, u)`` (:mod:`pymc_unbounded_dp.noncentred`)
and ``u`` ancillary, the observed-data likelihood of the releases is

.. math::

    L(\theta) = \sum_n g(n \mid \theta)\, \eta_n(n_{dp} - n)\;
        E_u\bigl[\eta_s\bigl(s_{dp} - \textstyle\sum_{i \le n} t(g(\theta, u_i))\bigr)\bigr],

an expectation over a law that does not depend on ``theta``. It is estimated with ``R`` common
replicates ``u^(r)`` (each a sequence of ``n_max`` records), the same for every ``theta``, so the
estimate is a smooth function of ``theta`` that PyTensor differentiates and L-BFGS-B maximises:

.. math::

    \hat L(\theta) = \frac1R \sum_r \sum_{n = n_{lo}}^{n_{hi}} q(n)\, g(n \mid \theta)\,
        \eta_s\bigl(s_{dp} - T_r(n; \theta)\bigr),
    \qquad T_r(n; \theta) = \sum_{i \le n} t(g(\theta, u^{(r)}_i)),

with ``q(n) = eta_n(n_dp - n)`` on the window where it is within ``exp(-20)`` of its mode (every
``n`` of the window is summed, through the cumulative sums of one replicate: no sampling of
``n``). Under bounded DP the window is the known ``n``. ``g`` is the prior of ``n`` (flat: 1).

The estimate is accurate where EM is slow: when the release noise dominates the variation of
``T`` (much missing information), the replicates' weights are even. The replicates are drawn in
``K`` independent batches; the maximiser of the pooled estimate is the MLE, and the spread of the
batch maximisers gives its Monte Carlo error.

* :class:`SimulatedLikelihood` compiles the estimate (the graph ``theta -> log L_hat`` over
  batches of ancillaries) and places the window of ``n``;
* :class:`SimulatedLoop` is the stage of :func:`~pymc_unbounded_dp.mcem` beside
  :class:`~pymc_unbounded_dp.mcem.em.EMLoop`: rounds of more replicates (:meth:`~SimulatedLoop.step`
  on a :class:`SimulatedState`) until the Monte Carlo error of the maximiser is below ``tol``
  standard errors, the budget is spent, or a profile shows a supremum on the boundary.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.pytensorf import compile as compile_pymc
from pytensor.graph.replace import clone_replace
from scipy.special import logsumexp

from pymc_unbounded_dp._compile import flat_statistics
from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.mcem import boundary
from pymc_unbounded_dp.mcem.em import EMLoop
from pymc_unbounded_dp.mcem.information import inverse_information, missing_information
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik
from pymc_unbounded_dp.mcem.optimise import (
    LogLik,
    Maximum,
    hessian,
    hessian_steps,
    jacobian,
    maximise,
    observed_information,
)
from pymc_unbounded_dp.mcem.options import Options
from pymc_unbounded_dp.mcem.result import Convergence, StageResult
from pymc_unbounded_dp.noncentred import noncentred_graphs, record_forms

#: Non-centred forms whose records are differentiable in the parameters (randomized PITs of
#: discrete records are step functions of theta, Dirichlet's Gamma quantiles have no gradient).
DIFFERENTIABLE_FORMS = ("location-scale", "cholesky", "inverse-cdf")
#: Width of the window of n, in nats below the mode of the release density of n (and of the
#: posterior of n, when the window is checked): the terms left out weigh less than exp(-20) ~ 2e-9
#: of the largest, so the log-likelihood changes by less than ~1e-8.
N_WINDOW_NATS = 20.0
#: Placements of the window of n (at the start, then at each maximiser until it stays put).
WINDOW_ROUNDS = 3


class Batch(NamedTuple):
    """One batch of replicates: the ancillaries ``u`` of each record variable (``R * n_max`` rows,
    replicate by replicate) and the number of replicates ``R``."""

    u: list[np.ndarray]
    replicates: int

    def truncated(self, rows: int) -> Batch:
        """The same replicates with their first ``rows`` records only."""
        u = []
        for values in self.u:
            per_replicate = values.reshape(self.replicates, -1, *values.shape[1:])
            u.append(
                np.ascontiguousarray(per_replicate[:, : max(rows, 1)]).reshape(
                    -1, *values.shape[1:]
                )
            )
        return Batch(u, self.replicates)


class Evaluation(NamedTuple):
    """One batch's simulated log-likelihood, its gradient, the replicates' log-weights ``log W_r``
    and the unnormalised log-posterior of ``n`` on the window."""

    value: float
    grad: np.ndarray
    log_weights: np.ndarray
    log_n_weights: np.ndarray


class Window(NamedTuple):
    """The values ``lo..hi`` of ``n`` summed over and ``log q(n)`` on them."""

    lo: int
    hi: int
    log_q: np.ndarray


@dataclass(eq=False)
class SimulatedLikelihood:
    """Compiled simulated log-likelihood of a one-table model (see the module docstring).

    Parameters
    ----------
    objective : CompleteDataLogLik
        The model's complete-data objective (its parameters, layouts, transforms and table).

    Attributes
    ----------
    unavailable : str
        Empty if the model has a differentiable non-centred form; otherwise why not.
    """

    objective: CompleteDataLogLik

    def __post_init__(self) -> None:
        objective = self.objective
        table = objective.table
        forms = record_forms(table.records, objective.param_rvs)
        missing = [
            spec.name
            for spec, form in zip(table.records, forms)
            if form is None or form.kind not in DIFFERENTIABLE_FORMS
        ]
        self.unavailable = ""
        self._functions: dict[str, object] = {}
        if missing:
            self.unavailable = (
                f"record variable(s) {missing} have no differentiable non-centred form (discrete "
                "records, Dirichlet, or a distribution without a location-scale form or inverse "
                "CDF)"
            )
            return
        self._build(forms)

    # ------------------------------------------------------------------------------------------
    # graph
    # ------------------------------------------------------------------------------------------
    def _build(self, forms) -> None:
        objective, table = self.objective, self.objective.table
        model = table.model
        graphs = noncentred_graphs(model, table.records, forms)
        self._u_inputs = graphs.u_inputs
        self._uniform_free = not graphs.uniforms
        record_inputs = objective.record_inputs
        containers = {spec.data: x for spec, x in zip(table.records, record_inputs)}
        self._ancillary = compile_pymc(
            [*objective.value_vars, *record_inputs],
            [clone_replace(a, containers) for a in graphs.ancillaries],
            on_unused_input="ignore",
            mode=KERNEL_MODE,
        )

        free = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
        records_to_values = {spec.rv: spec.data for spec in table.records}

        def at_values(graphs_):
            return replace_rvs_by_values(
                graphs_,
                rvs_to_values={**free, **records_to_values},
                rvs_to_transforms=model.rvs_to_transforms,
            )

        (stats,) = at_values([flat_statistics(table.spec.sums)])
        stats = clone_replace(stats, graphs.records)  # (R * n_max, D) at g(theta, u)
        self._replicates = pt.scalar("replicates", dtype="int64")
        self._lo = pt.scalar("n_lo", dtype="int64")
        self._hi = pt.scalar("n_hi", dtype="int64")
        self._released = pt.vector("s_dp", dtype="float64")
        self._log_q = pt.vector("log_q", dtype="float64")
        size = stats.shape[1]
        per_replicate = stats.reshape((self._replicates, -1, size))
        # T_r(n) for n = lo..hi: the sum of the first lo records, then cumulative sums over the
        # window only (a cumulative sum over all records costs a quarter of an evaluation)
        head = per_replicate[:, : self._lo, :].sum(axis=1, keepdims=True)
        tail = head + pt.cumsum(per_replicate[:, self._lo : self._hi, :], axis=1)
        noise = self._released - pt.concatenate([head, tail], axis=1)  # (R, J, D)
        log_release = 0.0
        start = 0
        for spec in table.spec.sums:
            stop = start + int(np.prod(spec.shape, dtype=int))
            log_release = log_release + spec.mechanism.logp(noise[..., start:stop]).sum(axis=-1)
            start = stop
        log_terms = log_release + self._log_q[None, :]
        n_spec = table.sample_size
        if n_spec is not None and not n_spec.flat_prior:
            grid = pt.arange(self._lo, self._hi + 1, dtype="int64")
            (log_g,) = at_values([pm.logp(n_spec.rv, grid, warn_rvs=False)])
            log_terms = log_terms + log_g[None, :]
        self._log_weights = pt.logsumexp(log_terms, axis=1)  # (R,): log W_r
        self._log_n_weights = pt.logsumexp(log_terms, axis=0)  # (J,): posterior of n, unnormalised
        total = pt.logsumexp(self._log_weights) - pt.log(pt.cast(self._replicates, "float64"))
        if objective.parameter_terms:  # public data; for MAP, the priors and Potentials
            terms = model.logp(vars=objective.parameter_terms, jacobian=False)
            total = total + at_values([terms])[0]
        if depends_on(total, [model.rvs_to_values[n_spec.rv]] if n_spec is not None else []):
            raise NotImplementedError("the simulated likelihood depends on the value of n")
        self._total = total

    def _compiled(self, scale: str):
        if scale not in self._functions:
            flat = pt.vector(scale, dtype="float64")
            inputs = self.objective.inputs_on(scale, flat)
            total, log_weights, log_n_weights = clone_replace(
                [self._total, self._log_weights, self._log_n_weights], inputs
            )
            grad = pytensor.grad(total, flat)
            args = [
                flat,
                self._released,
                self._log_q,
                self._lo,
                self._hi,
                self._replicates,
                *self._u_inputs,
            ]
            self._functions[scale] = compile_pymc(
                args,
                [total, grad, log_weights, log_n_weights],
                on_unused_input="ignore",
                mode=KERNEL_MODE,
            )
        return self._functions[scale]

    # ------------------------------------------------------------------------------------------
    # numbers
    # ------------------------------------------------------------------------------------------
    def window(self) -> Window:
        """The values of ``n`` summed over, with ``log q(n)`` (reads the current ``n_dp``)."""
        table = self.objective.table
        if table.sample_size is None:
            return Window(table.fixed_n, table.fixed_n, np.zeros(1))
        n_dp = table.released_n()
        mechanism = table.sample_size.mechanism
        half = int(np.ceil(_tail_width(mechanism)))
        lo, hi = max(0, int(np.floor(n_dp)) - half), int(np.ceil(n_dp)) + half
        grid = np.arange(lo, hi + 1)
        log_q = mechanism.logpdf(n_dp - grid)
        keep = np.flatnonzero(log_q >= log_q.max() - N_WINDOW_NATS)
        lo, hi = int(grid[keep[0]]), int(grid[keep[-1]])
        return Window(lo, hi, np.asarray(log_q[keep[0] : keep[-1] + 1], dtype=float))

    def draw(self, unconstrained: np.ndarray, replicates: int, window: Window, seed: int) -> Batch:
        """A batch of ``replicates`` ancillary sequences of ``window.hi`` records each.

        Records are drawn from the model at ``unconstrained`` and mapped to their ancillaries
        there; the ancillaries' law does not depend on the parameters.
        """
        objective, table = self.objective, self.objective.table
        point = objective.point(unconstrained, window.hi)
        table.reseed(seed)
        records, _ = table.propose(point, replicates * max(window.hi, 1))
        values = [np.asarray(point[v.name], dtype=v.dtype) for v in objective.value_vars]
        u = [np.asarray(a, dtype=np.float64) for a in self._ancillary(*values, *records)]
        return Batch(u, replicates)

    def evaluate(self, scale: str, flat: np.ndarray, batch: Batch, window: Window) -> Evaluation:
        """The simulated log-likelihood of one batch at ``flat`` on ``scale``, with its gradient,
        the replicates' log-weights and the (unnormalised) log-posterior of ``n`` on the window."""
        function = self._compiled(scale)
        value, grad, log_weights, log_n = function(
            flat,
            self.objective.table.released_sums(),
            window.log_q,
            np.int64(window.lo),
            np.int64(window.hi),
            np.int64(batch.replicates),
            *batch.u,
        )
        return Evaluation(
            float(value), np.asarray(grad, dtype=float), np.asarray(log_weights), np.asarray(log_n)
        )

    def pooled(self, scale: str, flat: np.ndarray, batches: list[Batch], window: Window):
        """``(log L_hat, gradient)`` of all batches pooled (equal replicates per batch)."""
        values, grads = [], []
        for batch in batches:
            value, grad, *_ = self.evaluate(scale, flat, batch, window)
            values.append(value)
            grads.append(grad)
        values = np.asarray(values)
        if not np.all(np.isfinite(values)):
            return -np.inf, np.zeros_like(flat)
        weights = np.exp(values - values.max())
        weights /= weights.sum()
        return float(logsumexp(values) - np.log(len(batches))), weights @ np.stack(grads)

    def loglik(self, batches: list[Batch], window: Window) -> LogLik:
        """The pooled simulated log-likelihood of ``batches`` on ``window`` as a function of the
        unconstrained parameters (see :meth:`pooled`)."""
        return partial(self.pooled, "unconstrained", batches=batches, window=window)

    def evaluate_batches(
        self, flat: np.ndarray, batches: list[Batch], window: Window
    ) -> list[Evaluation]:
        """:meth:`evaluate` of each batch at ``flat`` (unconstrained scale)."""
        return [self.evaluate("unconstrained", flat, b, window) for b in batches]

    @staticmethod
    def effective_replicates(evaluations: list[Evaluation]) -> float:
        """Kish's effective number of replicates of the pooled estimate."""
        w = _relative_weights(evaluations)
        return float(w.sum() ** 2 / np.sum(w**2))

    @staticmethod
    def loglik_mc_error(evaluations: list[Evaluation]) -> float:
        """Monte Carlo standard error of the pooled ``log L_hat`` (delta method:
        ``sd(W) / (sqrt(N) mean(W))`` over the ``N`` replicates' weights)."""
        w = _relative_weights(evaluations)
        return float(np.std(w, ddof=1) / (np.sqrt(w.size) * w.mean()))

    def posterior_window(self, flat: np.ndarray, batch: Batch, full: Window) -> Window:
        """The part of ``full`` where the posterior of ``n`` at ``flat`` (estimated from
        ``batch``, drawn for ``full``) is within :data:`N_WINDOW_NATS` of its mode, widened by
        half its width on each side (the parameters will move)."""
        if full.lo == full.hi:
            return full
        log_n = self.evaluate("unconstrained", flat, batch, full).log_n_weights
        keep = np.flatnonzero(log_n >= log_n.max() - N_WINDOW_NATS)
        extra = max(5, (keep[-1] - keep[0]) // 2)
        first, last = max(0, keep[0] - extra), min(log_n.size - 1, keep[-1] + extra)
        return Window(full.lo + int(first), full.lo + int(last), full.log_q[first : last + 1])

    @staticmethod
    def union(first: Window, second: Window, full: Window) -> Window:
        """The smallest window of ``full`` containing both windows."""
        lo, hi = min(first.lo, second.lo), max(first.hi, second.hi)
        return Window(lo, hi, full.log_q[lo - full.lo : hi - full.lo + 1])


def batch_mean_covariance(per_batch: np.ndarray) -> np.ndarray:
    """The Monte Carlo covariance of the mean of independent batches' values (one row per
    batch): their covariance (``ddof=1``) over the number of batches.

    >>> batch_mean_covariance(np.array([[1.0, 10.0], [3.0, 12.0], [2.0, 13.0], [2.0, 11.0]]))
    array([[0.16666667, 0.16666667],
           [0.16666667, 0.41666667]])
    """
    return np.atleast_2d(np.cov(per_batch, rowvar=False)) / per_batch.shape[0]


def batch_mean_error(per_batch: np.ndarray) -> np.ndarray:
    """The Monte Carlo standard error of the mean of independent batches' values: the root of
    the diagonal of :func:`batch_mean_covariance`.

    >>> batch_mean_error(np.array([[1.0, 10.0], [3.0, 10.0], [2.0, 13.0], [2.0, 11.0]]))
    array([0.40824829, 0.70710678])
    """
    return np.sqrt(np.diag(batch_mean_covariance(per_batch)))


def _relative_weights(evaluations: list[Evaluation]) -> np.ndarray:
    """The replicates' weights ``W_r`` of all batches, divided by the largest."""
    log_w = np.concatenate([e.log_weights for e in evaluations])
    return np.exp(log_w - log_w.max())


def _tail_width(mechanism) -> float:
    """Half-width where the noise density of ``n`` falls :data:`N_WINDOW_NATS` below its mode."""
    return float(mechanism.tail_width(N_WINDOW_NATS))


_CACHE: weakref.WeakKeyDictionary[CompleteDataLogLik, SimulatedLikelihood] = (
    weakref.WeakKeyDictionary()
)


def simulated_likelihood(objective: CompleteDataLogLik) -> SimulatedLikelihood:
    """The (cached) :class:`SimulatedLikelihood` of a model's objective."""
    if objective not in _CACHE:
        _CACHE[objective] = SimulatedLikelihood(objective)
    return _CACHE[objective]


# --------------------------------------------------------------------------------------------------
# the loop
# --------------------------------------------------------------------------------------------------
class SimulatedState(NamedTuple):
    """Where the simulated-likelihood stage stands before a round: the start of the maximiser,
    the replicates per batch and how often the information was not positive definite."""

    start: np.ndarray
    replicates: int
    flat_retries: int = 0


class Placed(NamedTuple):
    """A round's batches (cut to the window of ``n``), the window and the maximum on them."""

    batches: list[Batch]
    window: Window
    best: Maximum


class RoundInfo(NamedTuple):
    """What a round found: its maximum, the observed information there (unconstrained), and either
    a profile to the boundary or the Monte Carlo covariance of the maximiser, the stopping
    statistic (its largest Monte Carlo error in standard errors) and Kish's effective replicates.
    """

    placed: Placed
    observed: np.ndarray
    found: boundary.Profile | None
    mc_covariance: np.ndarray | None = None
    statistic: float = math.nan
    effective: float = math.nan


def advance(
    state: SimulatedState, statistic: float, maximiser: np.ndarray, options: Options
) -> tuple[Convergence | None, SimulatedState]:
    """The status after a round whose maximiser has the stopping ``statistic`` (its largest Monte
    Carlo error, in standard errors), and the state of the next round.

    Below ``tol``: an interior maximum. Otherwise the replicates grow by
    ``max(2, ceil((statistic / tol)^2))`` (by 4 if the information was not positive definite,
    which is retried once) up to ``max_replicates``, from the maximiser; ``None`` means go on.

    Examples
    --------
    >>> from pymc_unbounded_dp.mcem.options import validated_options
    >>> options = validated_options(
    ...     initial_samples=10, growth=1.25, min_samples=100, max_samples=5000,
    ...     max_iterations=60, tol=0.05, patience=3, thin=1, tune=100, n_moves=None,
    ...     switch_rate=0.9, replicates=100, batches=4, max_replicates=3200,
    ... )
    >>> status, state = advance(SimulatedState(np.zeros(1), 100), 0.12, np.ones(1), options)
    >>> status, state.replicates, state.start
    (None, 600, array([1.]))
    """
    if statistic < options.tol:
        return Convergence.INTERIOR, state
    retries = state.flat_retries
    if not np.isfinite(statistic):
        # the information is not positive definite: a Hessian too noisy at this many
        # replicates (retried once with 4 times more), or a flat direction
        retries, factor = retries + 1, 4
    else:
        factor = max(2, math.ceil((statistic / options.tol) ** 2))
    if state.replicates >= options.max_replicates or retries > 1:
        return Convergence.BUDGET, state
    more = min(options.max_replicates, state.replicates * factor)
    return None, SimulatedState(maximiser, more, retries)


@dataclass
class SimulatedLoop:
    """The simulated-likelihood stage of one :func:`~pymc_unbounded_dp.mcem` call.

    Parameters
    ----------
    simulated : SimulatedLikelihood
    options : Options
    rng : numpy.random.Generator
    chain : EMLoop
        The EM stage, whose record kernel chain gives Louis' complete-data information at the
        estimate (the fraction of missing information).
    first_iteration : int
        Number of the iteration before this stage's first (for the history).
    """

    simulated: SimulatedLikelihood
    options: Options
    rng: np.random.Generator
    chain: EMLoop
    first_iteration: int = 0
    rows: list[dict] = field(default_factory=list)

    def run(self, origin: np.ndarray, replicates: int, progress=None) -> StageResult:
        """Rounds from ``origin`` (the estimate EM handed over, where profiles start) with
        ``replicates`` per batch until :meth:`step` ends the stage; ``progress(**postfix)`` is
        called after each round."""
        full = self.simulated.window()
        state = SimulatedState(origin, replicates)
        while True:
            status, info, next_state = self.step(state, origin, full)
            if info.found is not None:
                return self._boundary_result(info, state.replicates)
            if progress is not None:
                progress(method="simulated", R=state.replicates, mc_error=f"{info.statistic:.3g}")
            if status is not None:
                return self._result(status, info, state)
            state = next_state

    def step(
        self, state: SimulatedState, origin: np.ndarray, full: Window
    ) -> tuple[Convergence | None, RoundInfo, SimulatedState]:
        """One round: fresh batches, the maximum, a boundary check and the Monte Carlo error.

        Returns the status (``None``: go on), what the round found and the next state (more
        replicates, from the maximiser).
        """
        placed = self._maximise(state, full)
        loglik = self.simulated.loglik(placed.batches, placed.window)
        observed = observed_information(loglik, placed.best.x)
        found = boundary.find(
            loglik, placed.best, origin, observed, self.simulated.objective.transformed
        )
        if found is not None:
            return Convergence.BOUNDARY, RoundInfo(placed, observed, found), state
        info = self._mc_error(placed, observed)
        self._record(info, state.replicates)
        status, next_state = advance(state, info.statistic, placed.best.x, self.options)
        return status, info, next_state

    def _maximise(self, state: SimulatedState, full: Window) -> Placed:
        """Draw the round's batches at ``state.start`` and maximise their pooled likelihood,
        placing the window of ``n`` again at each maximiser (up to :data:`WINDOW_ROUNDS`)."""
        simulated, start = self.simulated, state.start
        seeds = [int(self.rng.integers(2**62)) for _ in range(self.options.batches)]
        drawn = [simulated.draw(start, state.replicates, full, seed) for seed in seeds]
        window = simulated.posterior_window(start, drawn[0], full)
        for round_ in range(WINDOW_ROUNDS):
            batches = [b.truncated(window.hi) for b in drawn]
            best = maximise(
                simulated.loglik(batches, window), start, simulated.objective.transformed
            )
            # place the window of n again at the maximiser (where the posterior of n is usually
            # narrower than at the start); the last round maximises on it
            placed = simulated.posterior_window(best.x, drawn[0], full)
            inside = window.lo <= placed.lo and placed.hi <= window.hi
            narrower = placed.hi - placed.lo < 0.7 * (window.hi - window.lo)
            if inside and not narrower:
                break
            if round_ == WINDOW_ROUNDS - 1:
                if not inside:
                    warn_at_caller(
                        "mcem: the posterior of n at the estimate reaches beyond the window of n "
                        f"[{window.lo}, {window.hi}] after {WINDOW_ROUNDS} placements; the "
                        "simulated likelihood may be truncated.",
                        UserWarning,
                    )
                break
            window = placed if inside else simulated.union(window, placed, full)
            start = best.x
        return Placed(batches, window, best)

    def _mc_error(self, placed: Placed, observed: np.ndarray) -> RoundInfo:
        """Monte Carlo covariance of the maximiser: each batch's maximiser is one Newton step
        from the pooled one, ``I^-1 g_b``; their covariance over ``K``."""
        information_inverse = inverse_information(observed, warn=False)
        evaluations = self.simulated.evaluate_batches(placed.best.x, placed.batches, placed.window)
        steps = np.stack([e.grad for e in evaluations]) @ information_inverse
        mc_covariance = batch_mean_covariance(steps)
        se_u = np.sqrt(np.diag(information_inverse))
        statistic = float(np.max(np.sqrt(np.diag(mc_covariance)) / se_u))
        effective = self.simulated.effective_replicates(evaluations)
        return RoundInfo(placed, observed, None, mc_covariance, statistic, effective)

    def _record(self, info: RoundInfo, replicates: int) -> None:
        objective, best = self.simulated.objective, info.placed.best
        self.rows.append(
            {
                "iteration": self.first_iteration + len(self.rows) + 1,
                "method": "simulated",
                "n_samples": replicates,
                "mc_error": info.statistic,
                "simulated_loglik": best.value,
                "effective_replicates": info.effective,
                **objective.natural.split(objective.to_natural(best.x)),
            }
        )

    # -- results ------------------------------------------------------------------------------
    def _result(self, status: Convergence, info: RoundInfo, state: SimulatedState) -> StageResult:
        """An interior maximum, or the budget spent: standard errors from the observed
        information, with their Monte Carlo errors and the fraction of missing information."""
        objective, options, replicates = self.simulated.objective, self.options, state.replicates
        x = info.placed.best.x
        complete = self.chain.complete_information(x)  # Louis' I_c; I_obs the simulated one's
        rate = missing_information(complete, complete - info.observed)
        if status is Convergence.INTERIOR:
            reason = (
                f"simulated likelihood: interior maximum, Monte Carlo error {info.statistic:.3g} "
                f"standard errors (tol={options.tol}) from {options.batches} x {replicates} "
                f"replicates ({info.effective:.0f} effective); fraction of missing information "
                f"{rate:.3f}"
            )
        elif not np.isfinite(info.statistic):
            reason = (
                "simulated likelihood: the observed information at the maximum is not positive "
                f"definite with {options.batches} x {replicates} replicates (a flat direction of "
                "the likelihood, or too few replicates: continue with init=result)"
            )
        else:
            reason = (
                f"simulated likelihood: max_replicates={options.max_replicates} reached with a "
                f"Monte Carlo error of {info.statistic:.3g} standard errors (tol={options.tol}); "
                "continue with init=result or raise max_replicates"
            )
        se_spread = self._standard_error_spread(info)
        to_natural = jacobian(objective.to_natural, x)
        covariance = to_natural @ inverse_information(info.observed) @ to_natural.T
        mc_variance = np.diag(to_natural @ info.mc_covariance @ to_natural.T)
        return StageResult(
            unconstrained=x,
            covariance=covariance,
            mc_error=np.sqrt(np.maximum(mc_variance, 0.0)),
            standard_error_mc_error=se_spread,
            converged=status,
            reason=reason,
            method="simulated",
            missing_information=rate,
            n_samples=replicates,
            loglik=float(info.placed.best.value),
        )

    def _boundary_result(self, info: RoundInfo, replicates: int) -> StageResult:
        """A supremum on the boundary: the profile, with the Monte Carlo error of each value; no
        standard errors."""
        simulated, found, placed = self.simulated, info.found, info.placed
        errors = [
            simulated.loglik_mc_error(simulated.evaluate_batches(m, placed.batches, placed.window))
            for m in found.maximisers
        ]
        named = boundary.named(simulated.objective, found, errors)
        size = simulated.objective.natural.size
        return StageResult(
            unconstrained=found.maximisers[-1],
            covariance=np.full((size, size), np.nan),
            mc_error=np.full(size, np.nan),
            standard_error_mc_error=np.full(size, np.nan),
            converged=Convergence.BOUNDARY,
            reason="supremum on the boundary: " + named.describe(),
            method="simulated",
            missing_information=math.nan,
            n_samples=replicates,
            boundary=named,
            loglik=float(found.values[-1]),
        )

    def _standard_error_spread(self, info: RoundInfo) -> np.ndarray:
        """Monte Carlo error of the pooled standard errors: the spread of the batches' standard
        errors (each from its own Hessian, with the pooled Hessian's steps) over
        ``sqrt(batches)``."""
        simulated, placed = self.simulated, info.placed
        x = placed.best.x
        to_natural = jacobian(simulated.objective.to_natural, x)
        steps = hessian_steps(info.observed)
        per_batch = []
        for batch in placed.batches:
            information = -hessian(simulated.loglik([batch], placed.window), x, steps)
            covariance = to_natural @ inverse_information(information, warn=False) @ to_natural.T
            per_batch.append(np.sqrt(np.diag(covariance)))
        return batch_mean_error(np.stack(per_batch))
