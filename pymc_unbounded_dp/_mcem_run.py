"""The loop behind :func:`pymc_unbounded_dp.mcem`: E-step, M-step, stopping rule, Louis' SEs."""

from __future__ import annotations

import math
import warnings
from collections import deque
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import xarray as xr
from scipy.optimize import minimize
from tqdm.auto import tqdm

from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import CompiledTable
from pymc_unbounded_dp._mcem_loglik import CompleteDataLogLik


@dataclass(frozen=True)
class MCEMState:
    """Where a run stopped: enough to continue it with ``mcem(..., init=result)``.

    Attributes
    ----------
    records : kernels.RecordState
        The record kernel state after the last E-step (imputed records, residual, ``n``).
    unconstrained : numpy.ndarray
        The estimate as a flat vector of the parameters' unconstrained values.
    n_samples : int
        The Monte Carlo sample size of the last iteration.
    parameter_names : tuple of str
        Value-variable names of the parameters, in the order of ``unconstrained``.
    """

    records: kernels.RecordState
    unconstrained: np.ndarray
    n_samples: int
    parameter_names: tuple[str, ...]


@dataclass(frozen=True)
class MCEMResult:
    """The result of :func:`mcem`.

    Attributes
    ----------
    estimate : dict of str to numpy.ndarray
        Maximum-likelihood (or MAP) estimate of each parameter on its natural scale.
    standard_error : dict of str to numpy.ndarray
        Standard errors from the observed information (Louis' identity), shaped like ``estimate``;
        NaN if the estimated information is not positive definite or the run diverged.
    covariance : numpy.ndarray
        Inverse observed information of the flattened natural-scale parameters, in the order of
        ``estimate`` (each parameter raveled in C order).
    history : xarray.Dataset
        Per iteration (dim ``iteration``): each parameter's M-step maximiser, ``n_samples`` (the
        Monte Carlo size M), ``distance`` and ``mc_error`` (the stopping statistics, see
        :func:`mcem`), ``complete_loglik`` (the maximised Monte Carlo objective),
        ``refresh_accept_rate`` and, under unbounded DP, ``n_mean`` (average imputed ``n``).
    converged : bool
        Whether the stopping rule was met.
    reason : str
        Why the run stopped.
    state : MCEMState
        The last E-step state, to continue the run: ``mcem(model, init=result)``.
    """

    estimate: dict[str, np.ndarray]
    standard_error: dict[str, np.ndarray]
    covariance: np.ndarray
    history: xr.Dataset
    converged: bool
    reason: str
    state: MCEMState


class Sets(NamedTuple):
    """``M`` imputed data sets stacked row-wise, with the sample size of each."""

    records: list[np.ndarray]
    n_values: np.ndarray

    def each(self):
        """The record arrays of each set in turn (views into the stacked arrays)."""
        stops = np.cumsum(self.n_values)
        for start, stop in zip(stops - self.n_values, stops):
            yield [r[start:stop] for r in self.records]

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


@dataclass(frozen=True)
class Options:
    """The validated schedule and stopping options of :func:`pymc_unbounded_dp.mcem`."""

    initial_samples: int
    growth: float
    min_samples: int
    max_samples: int
    max_iterations: int
    tol: float
    patience: int
    thin: int
    tune: int
    n_moves: int | None


class _Diverged(Exception):
    """The M-step left the region where the complete-data log-likelihood is finite and bounded."""


#: Largest absolute unconstrained value of a transformed parameter accepted from an M-step (log and
#: logit scales: within exp(-30) ~ 1e-13 of a bound, or beyond exp(30) ~ 1e13): the maximiser is
#: taken to run off to the boundary of the parameter space.
_BOUNDARY = 30.0
#: The same for parameters on the real line: beyond it the maximiser runs off to infinity.
_INFINITY = 1e8
#: Rows of stacked records per evaluation of the objective: bounds the memory of the intermediate
#: arrays (the objective is additive over the imputed sets).
_CHUNK_ROWS = 200_000
#: Fewest imputed sets for a Monte Carlo error estimate.
_MIN_MC_ROWS = 4


class Run:
    """One MCEM run: the E-step/M-step loop with its schedule, stopping rule and bookkeeping."""

    def __init__(self, compiled: CompiledTable, loglik: CompleteDataLogLik, options: Options, rng):
        self.compiled = compiled
        self.loglik = loglik
        self.options = options
        self.rng = rng
        self.rows: list[dict] = []

    # -- E-step ------------------------------------------------------------------------------
    def e_step(self, u: np.ndarray, count: int) -> Sets:
        """``count`` imputed data sets at the parameters ``u``, continuing the kernel chain."""
        target = self.compiled.record_target(self.loglik.point(u, self.state.n))
        records, n_values, accepted, proposed = [], [], 0, 0
        for _ in range(count):
            for _ in range(self.options.thin):
                self.state, info = kernels.sweep(target, self.state, self.rng, self.n_moves)
                accepted += info.refresh_accepted
                proposed += info.refresh_proposed
            records.append([r.copy() for r in self.state.active_records()])
            n_values.append(self.state.n)
        self.accept_rate = accepted / proposed if proposed else np.nan
        stacked = [np.concatenate(parts) for parts in zip(*records)]
        return Sets(stacked, np.asarray(n_values, dtype=np.int64))

    # -- M-step ------------------------------------------------------------------------------
    def m_step(self, u0: np.ndarray, sets: Sets) -> tuple[np.ndarray, float]:
        """The maximiser of the sets' average complete-data log-likelihood, from ``u0``."""
        value_and_grad = self.loglik.scale("unconstrained").value_and_grad

        def negative(u):
            value, grad = self.average(value_and_grad, u, sets)
            if not np.isfinite(value) or not np.all(np.isfinite(grad)):
                return np.inf, np.zeros_like(u)
            return -float(value), -np.asarray(grad, dtype=float)

        start, _ = negative(u0)
        if not np.isfinite(start):
            raise _Diverged(
                "the complete-data log-likelihood of the imputed data is not finite at the current "
                f"parameters {self._describe(u0)}"
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            result = minimize(
                negative, u0, jac=True, method="L-BFGS-B",
                options={"maxiter": 1000, "ftol": 1e-13, "gtol": 1e-12},
            )
        u = np.asarray(result.x, dtype=float)
        natural = self.loglik.to_natural(u)
        if not (np.isfinite(result.fun) and np.all(np.isfinite(natural))):
            raise _Diverged(
                "the complete-data log-likelihood is not finite at the M-step maximiser (it is "
                f"unbounded): the optimiser reached {self._describe(u)}"
            )
        limit = np.where(self.loglik.transformed, _BOUNDARY, _INFINITY)
        if np.any(np.abs(u) > limit):
            raise _Diverged(
                "the M-step maximiser runs off to the boundary of the parameter space or to "
                "infinity (the likelihood has its supremum there: an MLE on the boundary, or an "
                f"unbounded likelihood): the optimiser reached {self._describe(u)}"
            )
        return u, -float(result.fun)

    def _describe(self, u: np.ndarray) -> str:
        values = self.loglik.natural.split(self.loglik.to_natural(u))
        return ", ".join(f"{k}={np.array2string(v, precision=4)}" for k, v in values.items())

    def average(self, function, flat: np.ndarray, sets: Sets) -> list[np.ndarray]:
        """``function(flat, n_values)`` of all ``sets`` (an average over sets), chunk by chunk."""
        total = None
        for chunk in sets.chunks(_CHUNK_ROWS):
            self.compiled.set_records(chunk.records)
            weight = chunk.n_values.size / sets.n_values.size
            parts = [weight * np.asarray(x, dtype=float) for x in function(flat, chunk.n_values)]
            total = parts if total is None else [t + x for t, x in zip(total, parts)]
        return total

    # -- Louis' identity ---------------------------------------------------------------------
    def information(self, scale: str, flat: np.ndarray, sets: Sets):
        """Complete-data and observed information at ``flat`` from the imputed ``sets``.

        Also returns the complete-data score of each set (rows in the order they were imputed).
        """
        functions = self.loglik.scale(scale)
        (hessian,) = self.average(functions.hessian, flat, sets)
        complete = -hessian
        scores = np.empty((sets.n_values.size, flat.size))
        for m, records in enumerate(sets.each()):
            self.compiled.set_records(records)
            scores[m] = functions.value_and_grad(flat, sets.n_values[m : m + 1])[1]
        centred = scores - scores.mean(axis=0)
        missing = centred.T @ centred / scores.shape[0]
        return complete, complete - missing, scores

    # -- driver ------------------------------------------------------------------------------
    def start(self, init) -> tuple[np.ndarray, int, xr.Dataset | None]:
        """Starting parameters, Monte Carlo size and previous history; sets the kernel state."""
        loglik, compiled, options = self.loglik, self.compiled, self.options
        if isinstance(init, MCEMResult):
            state = init.state
            if state.parameter_names != loglik.unconstrained.names:
                raise ValueError(
                    "mcem: `init` is a result for a model with parameters "
                    f"{state.parameter_names}, not {loglik.unconstrained.names}."
                )
            compiled.reseed(int(self.rng.integers(2**62)))
            self.state = _copy_state(state.records)
            self.n_moves = self._n_moves(self.state.n)
            return state.unconstrained.copy(), state.n_samples, init.history
        u = loglik.unconstrained.join(loglik.initial_point)
        if init is not None:
            u = self._from_natural(u, init)
        n0 = compiled.spec.initial_n
        target = compiled.record_target(loglik.point(u, n0))
        self.state = kernels.init(target, n0, self.rng)
        self.n_moves = self._n_moves(n0)
        for _ in range(options.tune):
            self.state, _ = kernels.sweep(target, self.state, self.rng, self.n_moves)
        return u, options.initial_samples, None

    def _n_moves(self, n0: int) -> int:
        if self.compiled.sample_size is None:
            return 0
        return self.options.n_moves or kernels.default_n_moves(n0)

    def _from_natural(self, u: np.ndarray, values: dict) -> np.ndarray:
        if not isinstance(values, dict):
            raise TypeError(
                f"mcem: `init` must be an MCEMResult or a dict of starting values, got {values!r}."
            )
        layout = self.loglik.natural
        unknown = sorted(set(values) - set(layout.names))
        if unknown:
            raise ValueError(
                f"mcem: `init` has unknown parameter(s) {unknown}; the parameters are "
                f"{list(layout.names)}."
            )
        natural = layout.split(self.loglik.to_natural(u).copy())
        for name, value in values.items():
            natural[name] = np.broadcast_to(np.asarray(value, dtype=float), natural[name].shape)
        u = self.loglik.to_unconstrained(layout.join(natural))
        if not np.all(np.isfinite(u)):
            raise ValueError(f"mcem: `init` values {values} are outside the parameters' support.")
        return u

    def run(self, init, progressbar: bool) -> MCEMResult:
        """Iterate until the stopping rule holds, the M-step diverges or the budget is spent."""
        options = self.options
        u, first_samples, previous = self.start(init)
        first = 0 if previous is None else previous.sizes["iteration"]
        trail: deque[tuple[np.ndarray, int]] = deque(maxlen=options.patience)
        streak, converged, diverged, reason = 0, False, False, ""
        count = first_samples
        bar = tqdm(total=options.max_iterations, disable=not progressbar, desc="MCEM")
        try:
            for k in range(options.max_iterations):
                count = min(options.max_samples, math.ceil(first_samples * options.growth**k))
                sets = self.e_step(u, count)
                try:
                    new_u, value = self.m_step(u, sets)
                except _Diverged as error:
                    diverged, reason = True, f"iteration {first + k + 1}: {error}"
                    break
                distance, mc_error = self.diagnostics(u, new_u, sets)
                self.record(first + k + 1, new_u, sets, distance, mc_error, value)
                trail.append((new_u, count))
                small = max(distance, mc_error) < options.tol
                streak = streak + 1 if small and count >= options.min_samples else 0
                u = new_u
                bar.update()
                bar.set_postfix(M=count, distance=f"{distance:.3g}", mc_error=f"{mc_error:.3g}")
                if streak >= options.patience:
                    converged = True
                    reason = (
                        f"converged after {first + k + 1} iterations: distance and mc_error "
                        f"below tol={options.tol} standard errors for {options.patience} "
                        f"consecutive iterations with M >= {options.min_samples}"
                    )
                    break
        finally:
            bar.close()
        if not converged and not diverged:
            reason = (
                f"max_iterations={options.max_iterations} reached without meeting the stopping "
                f"rule (distance and mc_error < tol={options.tol} for {options.patience} "
                f"iterations with M >= {options.min_samples}; last {self._last_statistics()}); "
                "continue with pmdp.mcem(model, init=result) or raise max_iterations"
            )
        if not converged:
            warnings.warn(f"mcem did not converge: {reason}.", UserWarning, stacklevel=3)
        if trail and not diverged:
            weights = np.array([c for _, c in trail], dtype=float)
            u = np.average(np.stack([x for x, _ in trail]), axis=0, weights=weights)
        return self.finish(u, count, previous, converged, reason, diverged)

    def diagnostics(self, u: np.ndarray, new_u: np.ndarray, sets: Sets) -> tuple[float, float]:
        """The stopping statistics, in observed-data standard errors (unconstrained scale).

        ``distance``: the EM step extrapolated to the fixed point, ``I_obs^{-1} I_c delta``.
        ``mc_error``: the Monte Carlo standard error of the M-step maximiser,
        ``sqrt(diag(I_c^{-1} V I_c^{-1}))`` with ``V`` the Monte Carlo variance of the average
        score, which accounts for the autocorrelation of the kernel chain (:func:`_mean_variance`).
        """
        complete, observed, scores = self.information("unconstrained", u, sets)
        try:
            covariance = np.linalg.inv(observed)
            complete_inverse = np.linalg.inv(complete)
        except np.linalg.LinAlgError:
            return np.inf, np.inf
        variances = np.diag(covariance)
        if not np.all(variances > 0):
            return np.inf, np.inf
        se = np.sqrt(variances)
        distance = np.max(np.abs(covariance @ complete @ (new_u - u)) / se)
        if scores.shape[0] < _MIN_MC_ROWS:
            return float(distance), np.inf
        mc_covariance = complete_inverse @ _mean_variance(scores) @ complete_inverse.T
        mc_error = np.max(np.sqrt(np.maximum(np.diag(mc_covariance), 0.0)) / se)
        return float(distance), float(mc_error)

    def _last_statistics(self) -> str:
        if not self.rows:
            return "none"
        row = self.rows[-1]
        text = (
            f"distance {row['distance']:.3g}, mc_error {row['mc_error']:.3g}, "
            f"M {row['n_samples']}"
        )
        if not np.isfinite(row["distance"]):
            text += " (inf: the Monte Carlo observed information is not positive definite)"
        return text

    def record(self, iteration, u: np.ndarray, sets: Sets, distance, mc_error, value) -> None:
        """Append one iteration to the history."""
        row = {
            "iteration": iteration,
            "n_samples": sets.n_values.size,
            "distance": distance,
            "mc_error": mc_error,
            "complete_loglik": value,
            "refresh_accept_rate": self.accept_rate,
            **self.loglik.natural.split(self.loglik.to_natural(u)),
        }
        if self.compiled.sample_size is not None:
            row["n_mean"] = float(sets.n_values.mean())
        self.rows.append(row)

    def finish(self, u, samples, previous, converged, reason, diverged) -> MCEMResult:
        """The result at ``u``, with standard errors from a last E-step of ``samples`` sets."""
        layout = self.loglik.natural
        natural = self.loglik.to_natural(u)
        covariance = np.full((natural.size, natural.size), np.nan)
        if not diverged:
            sets = self.e_step(u, samples)
            _, observed, _ = self.information("natural", natural, sets)
            covariance = _inverse_information(observed)
        history = self.history(previous)
        state = MCEMState(self.state, u, samples, self.loglik.unconstrained.names)
        return MCEMResult(
            estimate=layout.split(natural),
            standard_error=layout.split(np.sqrt(np.diag(covariance))),
            covariance=covariance,
            history=history,
            converged=converged,
            reason=reason,
            state=state,
        )

    def history(self, previous: xr.Dataset | None) -> xr.Dataset:
        """This run's iterations as a Dataset, after those of the run it continues."""
        layout = self.loglik.natural
        data = {}
        names = [k for k in (self.rows[0] if self.rows else {}) if k != "iteration"]
        for name in names:
            values = np.asarray([row[name] for row in self.rows])
            dims = ["iteration"]
            if name in layout.names:
                dims += [f"{name}_dim_{i}" for i in range(values.ndim - 1)]
            data[name] = (dims, values)
        iterations = [row["iteration"] for row in self.rows]
        current = xr.Dataset(data, coords={"iteration": iterations})
        if previous is None:
            return current
        return xr.concat([previous, current], dim="iteration") if self.rows else previous


def _inverse_information(observed: np.ndarray) -> np.ndarray:
    """The inverse of the observed information, or NaN (with a warning) if it is not PD."""
    symmetric = 0.5 * (observed + observed.T)
    try:
        np.linalg.cholesky(symmetric)
    except np.linalg.LinAlgError:
        warnings.warn(
            "mcem: the estimated observed information is not positive definite, so the standard "
            "errors are NaN. Louis' I_obs = I_c - I_miss is a difference of two Monte Carlo "
            "estimates: too few imputed data sets for the fraction of missing information, or an "
            "estimate on the boundary.",
            UserWarning,
            stacklevel=5,
        )
        return np.full_like(symmetric, np.nan)
    return np.linalg.inv(symmetric)


def _mean_variance(rows: np.ndarray) -> np.ndarray:
    """Monte Carlo covariance of the mean of an autocorrelated sequence of rows.

    The i.i.d. covariance scaled by the integrated autocorrelation time of each column (Geyer's
    initial monotone sequence estimator): ``V_jk = C_jk sqrt(tau_j tau_k) / M``.
    """
    count = rows.shape[0]
    centred = rows - rows.mean(axis=0)
    covariance = centred.T @ centred / count
    size = 1 << (2 * count - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=0)
    autocovariance = np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:count] / count
    tau = np.array([_geyer_tau(column) for column in autocovariance.T])
    scale = np.sqrt(tau)
    return covariance * np.outer(scale, scale) / count


def _geyer_tau(autocovariance: np.ndarray) -> float:
    """Integrated autocorrelation time from one column's autocovariances (Geyer 1992, IMSE)."""
    if autocovariance[0] <= 0:
        return 1.0
    rho = autocovariance / autocovariance[0]
    pairs = rho[: 2 * (rho.size // 2)].reshape(-1, 2).sum(axis=1)
    non_positive = np.flatnonzero(pairs <= 0)
    pairs = pairs[: non_positive[0] if non_positive.size else pairs.size]
    monotone = np.minimum.accumulate(pairs)
    return float(max(1.0, -1.0 + 2.0 * monotone.sum()))


def _copy_state(state: kernels.RecordState) -> kernels.RecordState:
    return state._replace(
        records=tuple(b.copy() for b in state.records),
        stats=state.stats.copy(),
        residual=state.residual.copy(),
    )


