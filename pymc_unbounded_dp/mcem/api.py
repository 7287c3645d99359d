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
of missing information exceeds ``switch_rate``. Each method is a loop of its own
(:class:`~pymc_unbounded_dp.mcem.em.EMLoop`,
:class:`~pymc_unbounded_dp.mcem.simulated.SimulatedLoop`) that ends with a
:class:`~pymc_unbounded_dp.mcem.result.StageResult`; this module is the driver: it validates the
options, starts the run (:mod:`~pymc_unbounded_dp.mcem.start`), chooses and runs the stages and
builds the :class:`MCEMResult`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from tqdm.auto import tqdm

import pymc_unbounded_dp.kernels as kernels
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._keywords import named_keywords
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.mcem.em import SWITCH_MIN_SETS, EMLoop
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik, complete_data_loglik
from pymc_unbounded_dp.mcem.options import Options, validated_options
from pymc_unbounded_dp.mcem.result import MCEMResult, MCEMState, StageResult, history
from pymc_unbounded_dp.mcem.simulated import (
    SimulatedLikelihood,
    SimulatedLoop,
    simulated_likelihood,
)
from pymc_unbounded_dp.mcem.start import n_moves, start
from pymc_unbounded_dp.sums import AUGMENT_LEVELS, resolve_augment

__all__ = ["mcem"]

METHODS = ("auto", "em", "simulated")


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
    options = validated_options(
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
    """One call of :func:`mcem`: the start, the EM stage, the simulated-likelihood stage and the
    result."""

    def __init__(self, objective, options, rng, simulated, method, progressbar):
        self.objective: CompleteDataLogLik = objective
        self.options: Options = options
        self.rng: np.random.Generator = rng
        self.simulated: SimulatedLikelihood | None = simulated
        self.method = method
        self.progressbar = progressbar

    def run(self, init) -> MCEMResult:
        u, samples, previous, state = start(self.objective, self.options, self.rng, init)
        loop = EMLoop(
            self.objective,
            self.options,
            self.rng,
            state,
            n_moves(self.objective, self.options, state.n),
            first_iteration=0 if previous is None else previous.sizes["iteration"],
        )
        bar = tqdm(total=self.options.max_iterations, disable=not self.progressbar, desc="MCEM")
        try:
            if isinstance(init, MCEMResult) and init.state.method == "simulated" and self.simulated:
                stage, rows = self._simulated_stage(loop, u, samples, bar)
            else:
                em = loop.run(u, samples, self._switch(), _progress(bar))
                if em.status is None:
                    stage, rows = self._simulated_stage(
                        loop, em.unconstrained, self.options.replicates, bar
                    )
                else:
                    stage, rows = loop.result(em), loop.rows
        finally:
            bar.close()
        result = self._result(stage, loop.state, rows, previous)
        if not result.converged:
            warn_at_caller(
                f"mcem did not converge ({result.converged.value}): {result.reason}.", UserWarning
            )
        return result

    def _simulated_stage(
        self, loop: EMLoop, u: np.ndarray, replicates: int, bar
    ) -> tuple[StageResult, list[dict]]:
        """The simulated-likelihood stage from ``u`` after the EM ``loop``: its result and the
        history rows of both stages."""
        stage = SimulatedLoop(
            self.simulated,
            self.options,
            self.rng,
            loop,
            first_iteration=loop.rows[-1]["iteration"] if loop.rows else loop.first_iteration,
        )
        result = stage.run(u, replicates, lambda **postfix: bar.set_postfix(**postfix))
        return result, [*loop.rows, *stage.rows]

    def _switch(self):
        if self.simulated is None:
            return None
        if self.method == "simulated":
            return lambda rate, count: True
        rate_at_least = self.options.switch_rate
        return lambda rate, count: count >= SWITCH_MIN_SETS and rate >= rate_at_least

    def _result(
        self,
        stage: StageResult,
        records: kernels.RecordState,
        rows: list[dict],
        previous: xr.Dataset | None,
    ) -> MCEMResult:
        """The public result of ``stage`` (its arrays flat in the natural layout's order), with
        the kernel state ``records`` to continue from and the history: ``previous``, then
        ``rows``."""
        objective = self.objective
        layout = objective.natural
        state = MCEMState(
            records,
            stage.unconstrained,
            stage.n_samples,
            objective.unconstrained.names,
            stage.method,
        )
        return MCEMResult(
            estimate=layout.split(objective.to_natural(stage.unconstrained)),
            standard_error=layout.split(np.sqrt(np.diag(stage.covariance))),
            covariance=stage.covariance,
            mc_error=layout.split(stage.mc_error),
            standard_error_mc_error=layout.split(stage.standard_error_mc_error),
            history=history(rows, layout, previous),
            converged=stage.converged,
            reason=stage.reason,
            method=stage.method,
            missing_information=stage.missing_information,
            boundary=stage.boundary,
            loglik=stage.loglik,
            state=state,
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
