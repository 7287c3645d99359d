r"""Monte Carlo EM: maximum likelihood (or MAP) from privatized data on the model graph.

The observed-data likelihood of the parameters given the releases,

    L(theta) = sum_n g(n | theta) eta_n(n_dp - n) int prod_i f(x_i | theta) eta_s(s_dp - T(x)) dx,

has no closed form. EM maximises it through the complete-data log-likelihood
``l(theta; x, n) = sum_i log f(x_i | theta) + log g(n | theta)``:

* **E-step** at the current estimate ``theta_k``: ``M_k`` imputed data sets ``(x, n)`` from the
  record kernels of :mod:`pymc_unbounded_dp.kernels` (refresh; birth/death over ``n`` under
  unbounded DP), one per sweep, the kernel state carried over from the previous iteration;
* **M-step**: ``theta_{k+1} = argmax (1/M_k) sum_m l(theta; x^(m), n^(m))`` with L-BFGS-B on the
  unconstrained scale, warm-started, gradients from PyTensor.

``n`` is integrated out by the E-step, never maximised. The Monte Carlo size grows geometrically;
the run stops when both the estimated distance to the EM fixed point and the Monte Carlo error of
the M-step are small in standard errors (see
:func:`mcem`). Standard errors come from Louis' identity.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from pymc.model import modelcontext

from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._mcem_loglik import complete_data_loglik
from pymc_unbounded_dp._mcem_run import MCEMResult, MCEMState, Options, Run

__all__ = ["mcem", "MCEMResult", "MCEMState"]


def mcem(
    model: pm.Model | None = None,
    *,
    random_seed=None,
    init: MCEMResult | dict | None = None,
    map: bool = False,  # noqa: A002 - the documented option name
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
    progressbar: bool = True,
) -> MCEMResult:
    r"""Maximum-likelihood estimate from privatized data by Monte Carlo EM.

    Iteration ``k`` imputes ``M_k = min(max_samples, ceil(initial_samples * growth**k))`` data
    sets (records and, under unbounded DP, ``n``) with the record kernels at the current estimate,
    one per ``thin`` sweeps, and maximises their average complete-data log-likelihood. Priors are
    ignored unless ``map=True``.

    **Stopping rule.** After each M-step, Louis' identity on the iteration's imputed sets gives the
    complete-data information ``I_c`` and the observed information ``I_obs = I_c - I_miss``
    (unconstrained scale, at the E-step's parameters), hence standard errors
    ``se = sqrt(diag(I_obs^{-1}))``. Two statistics, in units of ``se``, must both stay below
    ``tol`` for ``patience`` consecutive iterations with ``M_k >= min_samples``:

    * ``distance``: the EM step ``delta`` extrapolated to the EM fixed point,
      ``max_j |(I_obs^{-1} I_c delta)_j| / se_j`` (EM converges linearly with rate matrix
      ``I_c^{-1} I_miss``, so a small step alone is no proof of being close when much information
      is missing);
    * ``mc_error``: the Monte Carlo standard error of the M-step maximiser,
      ``sqrt(diag(I_c^{-1} V I_c^{-1})) / se`` with ``V`` the Monte Carlo variance of the average
      complete-data score, its autocorrelation along the kernel chain included (Geyer's initial
      monotone sequence estimate of the integrated autocorrelation time).

    The estimate is then the ``M``-weighted average of the last ``patience`` maximisers
    (unconstrained scale), which averages out part of their Monte Carlo noise.

    **Standard errors.** A last E-step at the estimate (``M`` = the last iteration's size) gives
    ``I_obs = E[-H] - Var[s]`` (Louis 1982) with ``H`` and ``s`` the Hessian and the score of the
    complete-data log-likelihood on the natural scale (PyTensor derivatives), averaged over the
    imputed sets; ``standard_error`` is ``sqrt(diag(I_obs^{-1}))``.

    Parameters
    ----------
    model : pm.Model, optional
        A model with :func:`~pymc_unbounded_dp.Records` and
        :func:`~pymc_unbounded_dp.PrivatizedSum` (and :func:`~pymc_unbounded_dp.SampleSize` under
        unbounded DP). Its parameters must be continuous.
    random_seed : int or numpy.random.Generator, optional
    init : MCEMResult or dict, optional
        A previous result to continue (its estimate, kernel state and Monte Carlo size; the
        histories are concatenated), or starting values by parameter name on the natural scale
        (missing ones start at the model's initial point).
    map : bool, default False
        Maximise the posterior density instead (adds the log priors of the parameters, natural
        scale, no Jacobian).
    initial_samples, growth : int, float
        The Monte Carlo schedule ``M_k = ceil(initial_samples * growth**k)``.
    min_samples : int
        Iterations with fewer imputed sets do not count towards convergence.
    max_samples : int
        Cap on ``M_k``.
    max_iterations : int
        Budget of EM iterations (per call).
    tol : float
        Threshold of both stopping statistics, in standard errors.
    patience : int
        Consecutive iterations the statistic must stay below ``tol``; also the number of final
        maximisers averaged into the estimate.
    thin : int
        Kernel sweeps per imputed data set.
    tune : int
        Sweeps at the starting point before the first E-step (not when continuing a result).
    n_moves : int, optional
        Birth/death moves per sweep under unbounded DP; default ``kernels.default_n_moves(n0)``.
    progressbar : bool, default True

    Returns
    -------
    MCEMResult

    Raises
    ------
    ValueError
        If the model has discrete parameters other than ``n``, no parameter the records depend on,
        no ``Records``/``PrivatizedSum``, or an option is out of range.

    Warns
    -----
    UserWarning
        If the run stops without meeting the stopping rule (budget exhausted, or the M-step
        diverged because the complete-data likelihood is unbounded or not finite); the result then
        has ``converged=False`` and says why in ``reason``.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=40)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=14.3)
    >>> fit = pmdp.mcem(model, random_seed=1, progressbar=False)
    >>> fit.converged, round(float(fit.estimate["theta"]), 2)
    (True, 0.36)
    """
    model = modelcontext(model)
    compiled = compile_model(model)
    options = Options(
        initial_samples=_positive_int(initial_samples, "initial_samples"),
        growth=_at_least_one(growth),
        min_samples=_positive_int(min_samples, "min_samples"),
        max_samples=_positive_int(max_samples, "max_samples"),
        max_iterations=_positive_int(max_iterations, "max_iterations"),
        tol=_positive_float(tol, "tol"),
        patience=_positive_int(patience, "patience"),
        thin=_positive_int(thin, "thin"),
        tune=_positive_int(tune, "tune", allow_zero=True),
        n_moves=None if n_moves is None else _positive_int(n_moves, "n_moves"),
    )
    if options.max_samples < options.min_samples:
        raise ValueError(
            f"mcem: `max_samples`={max_samples} is below `min_samples`={min_samples}; the stopping "
            "rule could never apply."
        )
    loglik = complete_data_loglik(compiled, include_prior=bool(map))
    table = loglik.table
    saved = [values.copy() for values in table.current_records()]
    try:
        return Run(table, loglik, options, np.random.default_rng(random_seed)).run(
            init, progressbar
        )
    finally:
        table.set_records(saved)


def _positive_int(value, name: str, allow_zero: bool = False) -> int:
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"mcem: `{name}` must be an integer >= {low}, got {value!r}.")
    return int(value)


def _positive_float(value, name: str) -> float:
    if not isinstance(value, int | float | np.number) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"mcem: `{name}` must be a finite number > 0, got {value!r}.")
    return float(value)


def _at_least_one(growth) -> float:
    if not isinstance(growth, int | float | np.number) or not np.isfinite(growth) or growth < 1:
        raise ValueError(f"mcem: `growth` must be a finite number >= 1, got {growth!r}.")
    return float(growth)
