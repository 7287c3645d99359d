r"""``pmdp.mcem``: maximum likelihood (or MAP) from privatized data, on the model graph.

Two methods share one objective (:mod:`~pymc_unbounded_dp.mcem.objective`):

* **Monte Carlo EM** (:mod:`~pymc_unbounded_dp.mcem.em`): E-steps of the record kernels at the
  current estimate, M-steps maximising the imputed sets' complete-data log-likelihood. Exact for
  every model, but it converges at the rate of the fraction of missing information, which is
  near 1 when the release noise dominates.
* **Simulated likelihood** (:mod:`~pymc_unbounded_dp.mcem.simulated`): the observed-data
  likelihood estimated with common random numbers in the records' non-centred form and maximised
  directly; accurate exactly where EM creeps. It needs a differentiable non-centred form
  (continuous records).

``method="auto"`` runs EM and switches to the simulated likelihood once EM's estimated fraction
of missing information exceeds ``switch_rate``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from tqdm.auto import tqdm

from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._keywords import named_keywords
from pymc_unbounded_dp.mcem import boundary as bd
from pymc_unbounded_dp.mcem.diagnostics import (
    inverse_information,
    mean_variance,
    missing_information,
)
from pymc_unbounded_dp.mcem.em import EMLoop, EMOutcome, Options, information
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik, complete_data_loglik
from pymc_unbounded_dp.mcem.result import Boundary, Convergence, MCEMResult, MCEMState
from pymc_unbounded_dp.mcem.simulated import SimulatedLikelihood, simulated_likelihood
from pymc_unbounded_dp.sums import AUGMENT_LEVELS, resolve_augment

__all__ = ["mcem"]

METHODS = ("auto", "em", "simulated")
#: Imputed sets an EM iteration needs before its fraction of missing information is trusted.
_SWITCH_MIN_SETS = 20
#: Placements of the window of n (at the start, then at each maximiser until it stays put).
_WINDOW_ROUNDS = 3


@named_keywords("pmdp.mcem()")
def mcem(
    model: pm.Model | None = None,
    *,
    random_seed=None,
    init: MCEMResult | dict | None = None,
    map: bool = False,
    method: str = "auto",
    initial_samples: int = 10,
    growth: float = 1.25,
    min_samples: int = 100,
    max_samples: int = 5000,
    max_iterations: int = 60,
    tol: float = 0.05,
    patience: int = 3,
    thin: int = 1,
    tune: int = 100,
    n_moves: int | None = None,
    switch_rate: float = 0.9,
    replicates: int = 100,
    batches: int = 4,
    max_replicates: int = 3200,
    progressbar: bool = True,
    augment: str = "auto",
) -> MCEMResult:
    r"""Maximum-likelihood estimate from privatized data (Monte Carlo EM or simulated likelihood).

    **EM** iteration ``k`` imputes ``M_k = min(max_samples, ceil(initial_samples * growth**k))``
    data sets (records and, under unbounded DP, ``n``) with the record kernels at the current
    estimate, one per ``thin`` sweeps, and maximises their average complete-data log-likelihood.
    After each M-step, Louis' identity gives the complete-data information ``I_c``, the observed
    information ``I_obs`` and the fraction of missing information (the largest eigenvalue of
    ``I_c^{-1} I_miss``, EM's rate). EM has converged when, for ``patience`` iterations with
    ``M_k >= min_samples``, both the EM step extrapolated to the fixed point
    (``I_obs^{-1} I_c delta``) and the Monte Carlo error of the M-step are below ``tol``
    standard errors; the estimate is the ``M``-weighted average of the last ``patience``
    maximisers and the standard errors come from Louis' ``I_obs`` at it.

    **Simulated likelihood** (``method="simulated"``, or ``"auto"`` once EM's fraction of missing
    information reaches ``switch_rate``): ``batches`` independent batches of ``replicates``
    ancillary sequences ``u`` estimate the observed-data likelihood
    ``L(theta) = sum_n g(n) eta_n(n_dp - n) E_u[eta_s(s_dp - T(g(theta, u)))]`` with common random
    numbers; the pooled estimate is maximised by L-BFGS-B (PyTensor gradients). Its Hessian
    (central differences of the gradient) gives the standard errors, the spread of the batches'
    maximisers the Monte Carlo error of the estimate and of the standard errors. If that error
    exceeds ``tol`` standard errors, the replicates grow (up to ``max_replicates``).

    **Boundaries.** Parameters with a bound (PyMC transforms: log, logit, interval) whose estimate
    runs to the bound or is weakly identified are profiled towards the bound (the other parameters
    maximised). A profile that does not decrease means the supremum is on the boundary:
    ``converged == "boundary"`` and ``boundary`` holds the parameter, the direction and the
    profile values.

    Parameters
    ----------
    model : pm.Model, optional
        A model with :func:`~pymc_unbounded_dp.Records` and
        :func:`~pymc_unbounded_dp.PrivatizedSum` (and :func:`~pymc_unbounded_dp.SampleSize` under
        unbounded DP), one record table. Its parameters must be continuous.
    random_seed : int or numpy.random.Generator, optional
    init : MCEMResult or dict, optional
        A previous result to continue (its estimate, kernel state, Monte Carlo size and history),
        or starting values by parameter name on the natural scale (missing ones start at the
        model's initial point).
    map : bool, default False
        Maximise the posterior density instead (adds the log priors of the parameters and the
        model's ``pm.Potential`` terms, natural scale, no Jacobian). The likelihood includes the
        model's other observed variables (public data) either way; the MLE leaves Potentials out,
        as prior terms.
    method : {"auto", "em", "simulated"}, default "auto"
    initial_samples, growth : int, float
        EM's Monte Carlo schedule ``M_k = ceil(initial_samples * growth**k)``.
    min_samples : int
        EM iterations with fewer imputed sets do not count towards convergence.
    max_samples : int
        Cap on ``M_k``.
    max_iterations : int
        Budget of EM iterations (per call).
    tol : float
        Threshold of the stopping statistics, in standard errors.
    patience : int
        Consecutive EM iterations the statistics must stay below ``tol``.
    thin : int
        Kernel sweeps per imputed data set.
    tune : int
        Sweeps at the starting point before the first E-step (not when continuing a result).
    n_moves : int, optional
        Birth/death moves per sweep under unbounded DP; default
        :func:`~pymc_unbounded_dp.kernels.default_n_moves` at ``n0`` and the noise on ``n_dp``.
    switch_rate : float, default 0.9
        ``method="auto"``: the fraction of missing information at which EM hands over to the
        simulated likelihood.
    replicates, batches : int
        Simulated likelihood: replicates per batch (first round) and number of batches.
    max_replicates : int
        Cap on the replicates per batch.
    progressbar : bool, default True
    augment : {"auto", "records"}, default "auto"
        The augmentation level of the E-step. MCEM imputes records (``"auto"`` is
        ``"records"`` here); ``"sums"`` (:func:`pmdp.sample`'s census-scale level) is refused
        until MCEM has an M-step on the latent sums. A table of more than
        :data:`~pymc_unbounded_dp.blocks.MAX_RECORDS` records is refused with that message.

    Returns
    -------
    MCEMResult

    Raises
    ------
    ValueError
        If the model has discrete parameters other than ``n``, no parameter the records depend on,
        no ``Records``/``PrivatizedSum``, ``method="simulated"`` without a differentiable
        non-centred form, or an option is out of range.
    NotImplementedError
        If the model has several record tables.

    Warns
    -----
    UserWarning
        If the run ends without an interior optimum (``converged`` is ``"boundary"``,
        ``"budget"`` or ``"diverged"``); ``reason`` says why.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=40)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=14.3)
    >>> fit = pmdp.mcem(model, random_seed=1, progressbar=False)
    >>> bool(fit.converged), fit.method, round(float(fit.estimate["theta"]), 2)
    (True, 'em', 0.36)
    """
    model = modelcontext(model)
    if method not in METHODS:
        raise ValueError(f"mcem: `method` must be one of {METHODS}, got {method!r}.")
    if augment == "sums":
        raise ValueError(
            "mcem: `augment`='sums' is not available: MCEM's E-step imputes records and its M-step "
            "maximises their log-likelihood. Use augment='records' (the default), or "
            "pmdp.sample(augment='sums') for the posterior at census scale."
        )
    if augment not in AUGMENT_LEVELS:
        raise ValueError(f"mcem: `augment` must be 'auto' or 'records', got {augment!r}.")
    resolve_augment(compile_model(model), "records", "mcem")  # refuses tables too large for it
    options = _options(
        initial_samples=initial_samples,
        growth=growth,
        min_samples=min_samples,
        max_samples=max_samples,
        max_iterations=max_iterations,
        tol=tol,
        patience=patience,
        thin=thin,
        tune=tune,
        n_moves=n_moves,
        switch_rate=switch_rate,
        replicates=replicates,
        batches=batches,
        max_replicates=max_replicates,
    )
    objective = complete_data_loglik(compile_model(model), include_prior=bool(map))
    simulated = None
    if method != "em":
        simulated = simulated_likelihood(objective)
        if simulated.unavailable:
            if method == "simulated":
                raise ValueError(
                    f"mcem: method='simulated' is not available: {simulated.unavailable}. "
                    "Use method='em'."
                )
            simulated = None
    rng = np.random.default_rng(random_seed)
    driver = _Driver(objective, options, rng, simulated, method, progressbar)
    return driver.run(init)


class _Driver:
    """One call of :func:`mcem`: the EM stage, the simulated-likelihood stage and the result."""

    def __init__(self, objective, options, rng, simulated, method, progressbar):
        self.objective: CompleteDataLogLik = objective
        self.options: Options = options
        self.rng: np.random.Generator = rng
        self.simulated: SimulatedLikelihood | None = simulated
        self.method = method
        self.progressbar = progressbar
        self.rows: list[dict] = []

    # -- start -----------------------------------------------------------------------------
    def run(self, init) -> MCEMResult:
        u, samples, previous, state = self._start(init)
        loop = EMLoop(
            self.objective,
            self.options,
            self.rng,
            state,
            self._n_moves(state.n),
            first_iteration=0 if previous is None else previous.sizes["iteration"],
        )
        bar = tqdm(total=self.options.max_iterations, disable=not self.progressbar, desc="MCEM")
        try:
            if isinstance(init, MCEMResult) and init.state.method == "simulated" and self.simulated:
                em = EMOutcome(u, samples, None, "", state, init.missing_information)
                first_replicates = samples
            else:
                em = loop.run(u, samples, self._switch(), _progress(bar))
                first_replicates = self.options.replicates
            self.rows = list(loop.rows)
            if em.status is None:
                result = self._simulated_stage(loop, em, first_replicates, previous, bar)
            else:
                result = self._em_result(loop, em, previous)
        finally:
            bar.close()
        if not result.converged:
            warnings.warn(
                f"mcem did not converge ({result.converged.value}): {result.reason}.",
                UserWarning,
                stacklevel=3,
            )
        return result

    def _switch(self):
        if self.simulated is None:
            return None
        if self.method == "simulated":
            return lambda rate, count: True
        rate_at_least = self.options.switch_rate
        return lambda rate, count: count >= _SWITCH_MIN_SETS and rate >= rate_at_least

    def _start(self, init) -> tuple[np.ndarray, int, xr.Dataset | None, kernels.RecordState]:
        objective, options, table = self.objective, self.options, self.objective.table
        if isinstance(init, MCEMResult):
            state = init.state
            if state.parameter_names != objective.unconstrained.names:
                raise ValueError(
                    "mcem: `init` is a result for a model with parameters "
                    f"{state.parameter_names}, not {objective.unconstrained.names}."
                )
            if state.records is not None:
                table.reseed(int(self.rng.integers(2**62)))
                records = _copy_state(state.records)
                return state.unconstrained.copy(), state.n_samples, init.history, records
            u = state.unconstrained.copy()
            return u, state.n_samples, init.history, self._tuned_state(u)
        u = objective.unconstrained.join(objective.initial_point)
        if init is not None:
            u = self._from_natural(u, init)
        return u, options.initial_samples, None, self._tuned_state(u)

    def _tuned_state(self, u: np.ndarray) -> kernels.RecordState:
        table = self.objective.table
        n0 = table.spec.initial_n
        target = table.record_target(self.objective.point(u, n0))
        table.reseed(int(self.rng.integers(2**62)))
        state = kernels.init(target, n0, self.rng)
        n_moves = self._n_moves(n0)
        for _ in range(self.options.tune):
            state, _ = kernels.sweep(target, state, self.rng, n_moves)
        return state

    def _n_moves(self, n0: int) -> int:
        if self.objective.table.sample_size is None:
            return 0
        return self.options.n_moves or self.objective.table.default_n_moves(n0)

    def _from_natural(self, u: np.ndarray, values) -> np.ndarray:
        if not isinstance(values, dict):
            raise TypeError(
                f"mcem: `init` must be an MCEMResult or a dict of starting values, got {values!r}."
            )
        layout = self.objective.natural
        unknown = sorted(set(values) - set(layout.names))
        if unknown:
            raise ValueError(
                f"mcem: `init` has unknown parameter(s) {unknown}; the parameters are "
                f"{list(layout.names)}."
            )
        natural = layout.split(self.objective.to_natural(u).copy())
        for name, value in values.items():
            natural[name] = np.broadcast_to(np.asarray(value, dtype=float), natural[name].shape)
        u = self.objective.to_unconstrained(layout.join(natural))
        if not np.all(np.isfinite(u)):
            raise ValueError(f"mcem: `init` values {values} are outside the parameters' support.")
        return u

    # -- EM result --------------------------------------------------------------------------
    def _em_result(self, loop: EMLoop, em: EMOutcome, previous) -> MCEMResult:
        objective = self.objective
        natural = objective.to_natural(em.unconstrained)
        size = natural.size
        covariance = np.full((size, size), np.nan)
        mc_sd = np.full(size, np.nan)
        rate = em.missing_fraction
        if em.status is not Convergence.DIVERGED:
            step = loop.impute(em.unconstrained, em.n_samples)
            info = information(objective, "natural", natural, step.sets)
            covariance = inverse_information(info.observed)
            rate = info.missing_fraction
            mc_sd = _em_mc_error(info, step.sets.n_values.size)
        return self._result(
            loop,
            em.unconstrained,
            covariance,
            mc_sd,
            np.full(size, np.nan),
            em.status,
            em.reason,
            "em",
            rate,
            None,
            float("nan"),
            em.n_samples,
            previous,
        )

    # -- simulated-likelihood stage -----------------------------------------------------------
    def _simulated_stage(self, loop: EMLoop, em: EMOutcome, replicates: int, previous, bar):
        objective, options, simulated = self.objective, self.options, self.simulated
        transformed = objective.transformed
        full = simulated.window()
        start = em.unconstrained
        flat_retries = 0
        while True:
            seeds = [int(self.rng.integers(2**62)) for _ in range(options.batches)]
            drawn = [simulated.draw(start, replicates, full, seed) for seed in seeds]
            window = simulated.posterior_window(start, drawn[0], full)
            for round_ in range(_WINDOW_ROUNDS):
                batches = [b.truncated(window.hi) for b in drawn]

                def pooled(x, batches=batches, window=window):
                    return simulated.pooled("unconstrained", x, batches, window)

                best = bd.maximise(pooled, start, transformed)
                # place the window of n again at the maximiser (where the posterior of n is
                # usually narrower than at the start); the last round maximises on it
                placed = simulated.posterior_window(best.x, drawn[0], full)
                inside = window.lo <= placed.lo and placed.hi <= window.hi
                narrower = placed.hi - placed.lo < 0.7 * (window.hi - window.lo)
                if inside and not narrower:
                    break
                if round_ == _WINDOW_ROUNDS - 1:
                    if not inside:
                        warnings.warn(
                            "mcem: the posterior of n at the estimate reaches beyond the window "
                            f"of n [{window.lo}, {window.hi}] after {_WINDOW_ROUNDS} placements; "
                            "the simulated likelihood may be truncated.",
                            UserWarning,
                            stacklevel=4,
                        )
                    break
                window = placed if inside else simulated.union(window, placed, full)
                start = best.x
            observed = bd.observed_information(pooled, best.x)
            found = self._boundary(pooled, best, em.unconstrained, observed)
            if found is not None:
                errors = [
                    simulated.loglik_mc_error(simulated.evaluate_batches(m, batches, window))
                    for m in found.maximisers
                ]
                return self._boundary_result(loop, found, replicates, observed, previous, errors)
            # Monte Carlo covariance of the estimate: each batch's maximiser is one Newton step
            # from the pooled one, I^-1 g_b; their covariance over K
            information_inverse = inverse_information(observed, warn=False)
            evaluations = simulated.evaluate_batches(best.x, batches, window)
            steps = np.stack([e.grad for e in evaluations]) @ information_inverse
            mc_covariance = np.atleast_2d(np.cov(steps, rowvar=False)) / len(batches)
            se_u = np.sqrt(np.diag(information_inverse))
            statistic = float(np.max(np.sqrt(np.diag(mc_covariance)) / se_u))
            effective = simulated.effective_replicates(evaluations)
            self._record_simulated(best, replicates, statistic, effective)
            bar.set_postfix(method="simulated", R=replicates, mc_error=f"{statistic:.3g}")
            if statistic < options.tol:
                status = Convergence.INTERIOR
                break
            if not np.isfinite(statistic):
                # the information is not positive definite: a Hessian too noisy at this many
                # replicates (retried once with 4 times more), or a flat direction
                flat_retries += 1
                factor = 4
            else:
                factor = max(2, math.ceil((statistic / options.tol) ** 2))
            if replicates >= options.max_replicates or flat_retries > 1:
                status = Convergence.BUDGET
                break
            replicates = min(options.max_replicates, replicates * factor)
            start = best.x
        rate = self._missing_fraction(loop, best.x, observed)
        if status is Convergence.INTERIOR:
            reason = (
                f"simulated likelihood: interior maximum, Monte Carlo error {statistic:.3g} "
                f"standard errors (tol={options.tol}) from {options.batches} x {replicates} "
                f"replicates ({effective:.0f} effective); fraction of missing information "
                f"{rate:.3f}"
            )
        elif not np.isfinite(statistic):
            reason = (
                "simulated likelihood: the observed information at the maximum is not positive "
                f"definite with {options.batches} x {replicates} replicates (a flat direction of "
                "the likelihood, or too few replicates: continue with init=result)"
            )
        else:
            reason = (
                f"simulated likelihood: max_replicates={options.max_replicates} reached with a "
                f"Monte Carlo error of {statistic:.3g} standard errors (tol={options.tol}); "
                "continue with init=result or raise max_replicates"
            )
        se_spread = self._standard_error_spread(batches, window, best.x, observed)
        return self._simulated_result(
            loop,
            best,
            observed,
            mc_covariance,
            se_spread,
            status,
            reason,
            rate,
            None,
            replicates,
            previous,
        )

    def _boundary(self, pooled, best, start, observed) -> bd.Profile | None:
        for index, direction in bd.candidates(best.x, start, observed, self.objective.transformed):
            found = bd.profile(
                pooled,
                best,
                index,
                direction,
                self.objective.transformed,
                origin=float(start[index]),
            )
            if found.increasing:
                return found
        return None

    def _boundary_result(self, loop, found: bd.Profile, replicates, observed, previous, errors):
        objective = self.objective
        x = found.maximisers[-1]
        names = _flat_names(objective.natural)
        # the natural-scale coordinate that moves with the profiled unconstrained one
        probe = x.copy()
        probe[found.index] -= found.direction
        moved = np.abs(objective.to_natural(x) - objective.to_natural(probe))
        coordinate = int(np.argmax(moved))
        values = np.array([objective.to_natural(m)[coordinate] for m in found.maximisers])
        far = x.copy()
        far[found.index] = found.direction * 700.0
        with np.errstate(over="ignore", invalid="ignore"):
            limit = float(objective.to_natural(far)[coordinate])
        if abs(limit) > 1e300:
            limit = math.copysign(math.inf, limit)
        elif abs(limit) < 1e-300:
            limit = 0.0
        direction = "upper" if limit > values[0] else "lower"
        boundary = Boundary(
            names[coordinate], direction, limit, values, found.values, np.asarray(errors)
        )
        reason = "supremum on the boundary: " + boundary.describe()
        best = bd.Maximum(x, float(found.values[-1]), True, "")
        nan = np.full((x.size, x.size), np.nan)
        return self._simulated_result(
            loop,
            best,
            observed,
            nan,
            None,
            Convergence.BOUNDARY,
            reason,
            float("nan"),
            boundary,
            replicates,
            previous,
            keep_covariance=False,
        )

    def _simulated_result(
        self,
        loop,
        best,
        observed,
        mc_covariance,
        se_spread,
        status,
        reason,
        rate,
        boundary,
        replicates,
        previous,
        keep_covariance=True,
    ):
        objective = self.objective
        natural = objective.to_natural(best.x)
        jacobian = _jacobian(objective.to_natural, best.x)
        size = natural.size
        if keep_covariance:
            covariance = jacobian @ inverse_information(observed) @ jacobian.T
            mc_sd = np.sqrt(np.maximum(np.diag(jacobian @ mc_covariance @ jacobian.T), 0.0))
        else:
            covariance = np.full((size, size), np.nan)
            mc_sd = np.full(size, np.nan)
        se_mc = np.full(size, np.nan) if se_spread is None else se_spread
        return self._result(
            loop,
            best.x,
            covariance,
            mc_sd,
            se_mc,
            status,
            reason,
            "simulated",
            rate,
            boundary,
            float(best.value),
            replicates,
            previous,
        )

    def _result(
        self,
        loop,
        u,
        covariance,
        mc_sd,
        se_mc,
        status,
        reason,
        method,
        rate,
        boundary,
        loglik,
        n_samples,
        previous,
    ) -> MCEMResult:
        """The result at the unconstrained ``u`` (natural-scale arrays flattened in layout
        order)."""
        objective = self.objective
        layout = objective.natural
        state = MCEMState(loop.state, u, n_samples, objective.unconstrained.names, method)
        return MCEMResult(
            estimate=layout.split(objective.to_natural(u)),
            standard_error=layout.split(np.sqrt(np.diag(covariance))),
            covariance=covariance,
            mc_error=layout.split(mc_sd),
            standard_error_mc_error=layout.split(se_mc),
            history=_history(self.rows, layout, previous),
            converged=status,
            reason=reason,
            method=method,
            missing_information=rate,
            boundary=boundary,
            loglik=loglik,
            state=state,
        )

    def _standard_error_spread(self, batches, window, x, observed) -> np.ndarray:
        """Monte Carlo error of the pooled standard errors: the spread of the batches' standard
        errors (each from its own Hessian, with the pooled Hessian's steps) over
        ``sqrt(batches)``."""
        objective, simulated = self.objective, self.simulated
        jacobian = _jacobian(objective.to_natural, x)
        steps = bd.hessian_steps(observed)
        per_batch = []
        for batch in batches:
            information = -bd.hessian(
                lambda y, b=batch: simulated.pooled("unconstrained", y, [b], window), x, steps
            )
            covariance = jacobian @ inverse_information(information, warn=False) @ jacobian.T
            per_batch.append(np.sqrt(np.diag(covariance)))
        return np.std(np.stack(per_batch), axis=0, ddof=1) / np.sqrt(len(batches))

    def _missing_fraction(self, loop: EMLoop, x: np.ndarray, observed: np.ndarray) -> float:
        """``I_c^{-1} (I_c - I_obs)`` with ``I_c`` from imputed sets at ``x`` (Louis) and
        ``I_obs`` the simulated likelihood's: no difference of two Monte Carlo estimates."""
        loop.impute(x, self.options.tune)  # move the kernel chain to x
        step = loop.impute(x, max(self.options.min_samples, _SWITCH_MIN_SETS))
        complete = information(self.objective, "unconstrained", x, step.sets).complete
        return missing_information(complete, complete - observed)

    def _record_simulated(self, best, replicates, statistic, effective) -> None:
        objective = self.objective
        self.rows.append(
            {
                "iteration": (self.rows[-1]["iteration"] if self.rows else 0) + 1,
                "method": "simulated",
                "n_samples": replicates,
                "mc_error": statistic,
                "simulated_loglik": best.value,
                "effective_replicates": effective,
                **objective.natural.split(objective.to_natural(best.x)),
            }
        )


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _progress(bar):
    def update(**postfix):
        bar.update()
        bar.set_postfix(
            {k: (f"{v:.3g}" if isinstance(v, float) else v) for k, v in postfix.items()}
        )

    return update


def _jacobian(function, x: np.ndarray) -> np.ndarray:
    """Central-difference Jacobian of ``function`` at ``x``."""
    columns = []
    for j in range(x.size):
        h = 1e-6 * max(1.0, abs(x[j]))
        shift = np.zeros_like(x)
        shift[j] = h
        columns.append((function(x + shift) - function(x - shift)) / (2 * h))
    return np.stack(columns, axis=1) if columns else np.zeros((0, 0))


def _em_mc_error(info, count: int) -> np.ndarray:
    """Monte Carlo standard error of an EM estimate: ``sqrt(diag(I_c^{-1} V I_c^{-1}))``."""
    try:
        inverse = np.linalg.inv(info.complete)
    except np.linalg.LinAlgError:
        return np.full(info.complete.shape[0], np.nan)
    if count < 4:
        return np.full(info.complete.shape[0], np.nan)
    return np.sqrt(np.maximum(np.diag(inverse @ mean_variance(info.scores) @ inverse.T), 0.0))


def _flat_names(layout) -> list[str]:
    names = []
    for name, shape in zip(layout.names, layout.shapes):
        if not shape:
            names.append(name)
        else:
            names.extend(f"{name}[{','.join(map(str, i))}]" for i in np.ndindex(*shape))
    return names


def _history(rows: list[dict], layout, previous: xr.Dataset | None) -> xr.Dataset:
    """The iterations as a Dataset (dim ``iteration``), after those of the run continued."""
    keys: list[str] = []
    for row in rows:
        keys += [k for k in row if k not in keys and k != "iteration"]
    data = {}
    for name in keys:
        if name in layout.names:
            shape = layout.shapes[layout.names.index(name)]
            values = np.stack([np.asarray(row.get(name, np.full(shape, np.nan))) for row in rows])
            dims = ["iteration", *(f"{name}_dim_{i}" for i in range(values.ndim - 1))]
        elif name == "method":
            values, dims = np.asarray([row[name] for row in rows]), ["iteration"]
        else:
            values = np.asarray([row.get(name, np.nan) for row in rows], dtype=float)
            dims = ["iteration"]
        data[name] = (dims, values)
    current = xr.Dataset(data, coords={"iteration": [row["iteration"] for row in rows]})
    if previous is None:
        return current
    return xr.concat([previous, current], dim="iteration") if rows else previous


def _copy_state(state: kernels.RecordState) -> kernels.RecordState:
    return state._replace(
        records=tuple(b.copy() for b in state.records),
        stats=state.stats.copy(),
        residual=state.residual.copy(),
    )


def _options(**values) -> Options:
    ints = (
        "initial_samples",
        "min_samples",
        "max_samples",
        "max_iterations",
        "patience",
        "thin",
        "replicates",
        "batches",
        "max_replicates",
    )
    for name in ints:
        _check_int(values[name], name, low=2 if name == "batches" else 1)
    _check_int(values["tune"], "tune", low=0)
    if values["n_moves"] is not None:
        _check_int(values["n_moves"], "n_moves", low=1)
    growth = values["growth"]
    if not isinstance(growth, int | float | np.number) or not np.isfinite(growth) or growth < 1:
        raise ValueError(f"mcem: `growth` must be a finite number >= 1, got {growth!r}.")
    for name in ("tol", "switch_rate"):
        value = values[name]
        if not isinstance(value, int | float | np.number) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"mcem: `{name}` must be a finite number > 0, got {value!r}.")
    if values["max_samples"] < values["min_samples"]:
        raise ValueError(
            f"mcem: `max_samples`={values['max_samples']} is below `min_samples`="
            f"{values['min_samples']}; the stopping rule could never apply."
        )
    if values["max_replicates"] < values["replicates"]:
        raise ValueError(
            f"mcem: `max_replicates`={values['max_replicates']} is below `replicates`="
            f"{values['replicates']}."
        )
    return Options(**{k: (float(v) if isinstance(v, float) else v) for k, v in values.items()})


def _check_int(value, name: str, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"mcem: `{name}` must be an integer >= {low}, got {value!r}.")
