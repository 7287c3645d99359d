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
from pytensor.graph.replace import clone_replace
from scipy.special import logsumexp

from pymc_unbounded_dp._compile import flat_statistics
from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik
from pymc_unbounded_dp.noncentred import noncentred_graphs, record_forms

#: Non-centred forms whose records are differentiable in the parameters (randomized PITs of
#: discrete records are step functions of theta, Dirichlet's Gamma quantiles have no gradient).
DIFFERENTIABLE_FORMS = ("location-scale", "cholesky", "inverse-cdf")
#: Width of the window of n, in nats below the mode of the release density of n (and of the
#: posterior of n, when the window is checked): the terms left out weigh less than exp(-20) ~ 2e-9
#: of the largest, so the log-likelihood changes by less than ~1e-8.
N_WINDOW_NATS = 20.0


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
