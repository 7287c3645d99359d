"""The public result types of :func:`pymc_unbounded_dp.mcem`, and the :class:`StageResult` each
stage ends with."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from statistics import NormalDist
from typing import NamedTuple

import numpy as np
import pandas as pd
import xarray as xr

import pymc_unbounded_dp.kernels as kernels
from pymc_unbounded_dp._checks import is_real


class Convergence(str, Enum):
    """How a maximum-likelihood run ended.

    Compares equal to its value (``fit.converged == "boundary"``) and is true only for an interior
    optimum, so ``if fit.converged:`` means "an MLE with standard errors was found".

    * ``INTERIOR`` (``"interior"``): an interior optimum, within ``tol`` standard errors;
    * ``BOUNDARY`` (``"boundary"``): the likelihood increases towards the boundary of the parameter
      space; :attr:`MCEMResult.boundary` names the parameter and shows the profile;
    * ``BUDGET`` (``"budget"``): the budget of iterations or Monte Carlo replicates was spent
      before the stopping rule held (continue with ``init=result``);
    * ``DIVERGED`` (``"diverged"``): the (complete-data) likelihood is unbounded or not finite.
    """

    INTERIOR = "interior"
    BOUNDARY = "boundary"
    BUDGET = "budget"
    DIVERGED = "diverged"

    def __bool__(self) -> bool:
        return self is Convergence.INTERIOR

    def __repr__(self) -> str:
        return repr(self.value)

    __str__ = str.__str__


@dataclass(frozen=True)
class Boundary:
    """A supremum of the likelihood on the boundary of the parameter space.

    Attributes
    ----------
    parameter : str
        The parameter (with its index for a vector, e.g. ``"beta[1]"``) whose profile likelihood
        increases towards the boundary.
    direction : str
        ``"upper"`` or ``"lower"``: the end of the parameter's range it runs to.
    limit : float
        The value it runs to (``inf``, ``0``, ``1``, a bound of a uniform prior, ...).
    values : numpy.ndarray
        Parameter values (natural scale) along the profile, towards ``limit``.
    profile_loglik : numpy.ndarray
        The profile log-likelihood at ``values`` (the other parameters maximised), up to a
        constant that does not depend on the parameters.
    profile_mc_error : numpy.ndarray
        Monte Carlo standard error of each ``profile_loglik`` value.
    """

    parameter: str
    direction: str
    limit: float
    values: np.ndarray
    profile_loglik: np.ndarray
    profile_mc_error: np.ndarray

    def describe(self) -> str:
        """One sentence with the numbers that show the boundary."""
        pairs = ", ".join(
            f"{v:.4g}: {ll:.3f} ± {e:.3f}"
            for v, ll, e in zip(self.values, self.profile_loglik, self.profile_mc_error)
        )
        return (
            f"the likelihood increases as {self.parameter} -> {self.limit:g} ({self.direction} "
            f"boundary); profile log-likelihood (value: log L ± Monte Carlo error) {pairs}"
        )


class StageResult(NamedTuple):
    """How a stage of :func:`~pymc_unbounded_dp.mcem` (EM or simulated likelihood) ended: what
    :class:`MCEMResult` is built from. Arrays are flat, natural scale, in the parameters' layout
    order (each parameter raveled in C order), except ``unconstrained``.
    """

    unconstrained: np.ndarray
    covariance: np.ndarray
    mc_error: np.ndarray
    standard_error_mc_error: np.ndarray
    converged: Convergence
    reason: str
    method: str
    missing_information: float
    n_samples: int
    boundary: Boundary | None = None
    loglik: float = math.nan


@dataclass(frozen=True)
class MCEMState:
    """Where a run stopped: enough to continue it with ``mcem(..., init=result)``.

    Attributes
    ----------
    records : kernels.RecordState or None
        The record kernel state after the last E-step (``None`` if the run never imputed).
    unconstrained : numpy.ndarray
        The estimate as a flat vector of the parameters' unconstrained values.
    n_samples : int
        The Monte Carlo size of the last iteration: imputed sets (EM) or replicates per batch
        (simulated likelihood).
    parameter_names : tuple of str
        Value-variable names of the parameters, in the order of ``unconstrained``.
    method : str
        ``"em"`` or ``"simulated"``: the method of the last stage.
    """

    records: kernels.RecordState | None = field(repr=False)
    unconstrained: np.ndarray
    n_samples: int
    parameter_names: tuple[str, ...]
    method: str = "em"


@dataclass(frozen=True)
class MCEMResult:
    """The result of :func:`pymc_unbounded_dp.mcem`.

    Attributes
    ----------
    estimate : dict of str to numpy.ndarray
        Maximum-likelihood (or MAP) estimate of each parameter on its natural scale.
    standard_error : dict of str to numpy.ndarray
        Standard errors from the observed information, shaped like ``estimate``; NaN if the
        information is not positive definite, the estimate is on the boundary or the run diverged.
    covariance : numpy.ndarray
        Inverse observed information of the flattened natural-scale parameters, in the order of
        ``estimate`` (each parameter raveled in C order).
    mc_error : dict of str to numpy.ndarray
        Monte Carlo standard error of ``estimate`` (how far another seed's estimate would be).
    standard_error_mc_error : dict of str to numpy.ndarray
        Monte Carlo standard error of ``standard_error`` (NaN where not estimated).
    history : xarray.Dataset
        Per iteration (dim ``iteration``): each parameter's value, ``method``, ``n_samples`` and
        the stopping statistics (see :func:`~pymc_unbounded_dp.mcem`).
    converged : Convergence
        ``"interior"`` (true), ``"boundary"``, ``"budget"`` or ``"diverged"`` (false).
    reason : str
        Why the run stopped, with the numbers.
    method : str
        ``"em"`` (Monte Carlo EM) or ``"simulated"`` (simulated likelihood): the method that
        produced ``estimate``.
    missing_information : float
        Estimated fraction of missing information: the largest eigenvalue of
        ``I_c^{-1} (I_c - I_obs)``, EM's rate of convergence (near 1: EM creeps). NaN if not
        estimated.
    boundary : Boundary or None
        The boundary the likelihood runs to, if ``converged == "boundary"``.
    loglik : float
        The simulated observed-data log-likelihood at ``estimate`` (up to a constant that does not
        depend on the parameters); NaN for EM.
    state : MCEMState
        The last state, to continue the run: ``mcem(model, init=result)``.

    ``print(result)`` shows the method, how the run ended, the estimates with their standard and
    Monte Carlo errors (the first 8 elements) and the reason, in under 1,000 characters;
    :meth:`summary` is the full table and :meth:`to_dataframe` the iterations.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=40)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=14.3)
    >>> fit = pmdp.mcem(model, random_seed=1, progressbar=False)
    >>> print(fit)  # doctest: +ELLIPSIS
    MCEMResult(method='em', converged='interior', iterations=14, n_samples=182, ...)
           estimate        se  mc_error
    theta     0.356   0.08094  0.001996
    reason: EM converged after 14 iterations: ...
    >>> list(fit.summary().columns)
    ['estimate', 'se', 'lower', 'upper', 'mc_error', 'se_mc_error']
    """

    estimate: dict[str, np.ndarray]
    standard_error: dict[str, np.ndarray]
    covariance: np.ndarray
    mc_error: dict[str, np.ndarray]
    standard_error_mc_error: dict[str, np.ndarray]
    history: xr.Dataset
    converged: Convergence
    reason: str
    method: str
    missing_information: float
    boundary: Boundary | None
    loglik: float
    state: MCEMState

    def __repr__(self) -> str:
        labels, columns = _elements(
            {
                "estimate": self.estimate,
                "se": self.standard_error,
                "mc_error": self.mc_error,
            }
        )
        header = (
            f"MCEMResult(method={self.method!r}, converged={self.converged.value!r}, "
            f"iterations={self.history.sizes.get('iteration', 0)}, "
            f"n_samples={self.state.n_samples}, "
            f"missing_information={self.missing_information:.3g}"
            + ("" if np.isnan(self.loglik) else f", loglik={self.loglik:.6g}")
            + ")"
        )
        shown = [_clip_label(label) for label in labels[:_REPR_ROWS]]
        width = max(len(label) for label in shown) if shown else 0
        lines = [header, " " * width + "".join(f"{name:>10}" for name in columns)]
        for i, label in enumerate(shown):
            lines.append(f"{label:<{width}}" + "".join(f"{v[i]:>10.4g}" for v in columns.values()))
        if len(labels) > _REPR_ROWS:
            lines.append(f"... {len(labels) - _REPR_ROWS} more elements: fit.summary()")
        lines.append(f"reason: {_clip(self.reason, _REASON_WIDTH)}")
        return "\n".join(lines)

    def summary(self, prob: float = 0.95) -> pd.DataFrame:
        """The estimates as a table: one row per scalar element of each parameter.

        Parameters
        ----------
        prob : float, default 0.95
            Probability of the Wald interval ``estimate -/+ z se`` (``z`` the normal quantile
            of ``(1 + prob) / 2``), on the parameter's natural scale: it can reach beyond a
            bounded parameter's range, and is NaN where the standard error is.

        Returns
        -------
        pandas.DataFrame
            Index ``parameter`` (``"theta"``, ``"beta[1]"``, ``"Phi[0,1]"``: the labels of
            :attr:`boundary` and of :meth:`to_dataframe`'s columns); columns ``estimate``,
            ``se`` (:attr:`standard_error`), ``lower``, ``upper`` (the interval), ``mc_error``
            (:attr:`mc_error`: how far another seed's estimate would be) and ``se_mc_error``
            (:attr:`standard_error_mc_error`). ``attrs["prob"]`` is ``prob``.

        Examples
        --------
        >>> fit.summary().loc["theta", ["estimate", "se"]]  # doctest: +SKIP
        estimate    0.355955
        se          0.080940
        Name: theta, dtype: float64
        """
        if not is_real(prob) or not 0 < prob < 1:
            raise ValueError(f"MCEMResult.summary: `prob` must be in (0, 1), got {prob!r}.")
        labels, columns = _elements(
            {
                "estimate": self.estimate,
                "se": self.standard_error,
                "mc_error": self.mc_error,
                "se_mc_error": self.standard_error_mc_error,
            }
        )
        z = NormalDist().inv_cdf((1 + prob) / 2)
        table = pd.DataFrame(columns, index=pd.Index(labels, name="parameter"))
        table.insert(2, "lower", table["estimate"] - z * table["se"])
        table.insert(3, "upper", table["estimate"] + z * table["se"])
        table.attrs["prob"] = prob
        return table

    def to_dataframe(self) -> pd.DataFrame:
        """The iterations (:attr:`history`) as a table: one row per iteration.

        Returns
        -------
        pandas.DataFrame
            Index ``iteration`` (1, 2, ...; a continued run's iterations follow those of the
            run it continued); columns ``method`` and ``n_samples``, then each parameter
            element (labelled as in :meth:`summary`, natural scale: that iteration's maximiser),
            then the stopping statistics and diagnostics of :attr:`history` (``mc_error``; EM
            rows ``distance``, ``complete_loglik``, ``missing_information``,
            ``refresh_accept_rate``, ``n_mean`` under unbounded DP; simulated-likelihood rows
            ``simulated_loglik``, ``effective_replicates``; NaN where a row's method has none).

        Examples
        --------
        >>> fit.to_dataframe()[["method", "n_samples", "theta"]].tail(2)  # doctest: +SKIP
                  method  n_samples     theta
        iteration
        13            em      146.0  0.355308
        14            em      182.0  0.356868
        """
        history = self.history
        count = history.sizes.get("iteration", 0)
        first = [name for name in ("method", "n_samples") if name in history]
        parameters = [name for name in self.estimate if name in history]
        rest = [name for name in history.data_vars if name not in (*first, *parameters)]
        columns = {}
        for name in (*first, *parameters, *rest):
            values = history[name].values
            if values.ndim == 1:
                columns[name] = values
                continue
            labels = element_labels(name, values.shape[1:])
            columns.update(zip(labels, values.reshape(count, -1).T, strict=True))
        index = pd.Index(history["iteration"].values, name="iteration")
        return pd.DataFrame(columns, index=index)


def history(rows: list[dict], layout, previous: xr.Dataset | None) -> xr.Dataset:
    """:attr:`MCEMResult.history`: the iterations' ``rows`` as a Dataset (dim ``iteration``;
    parameters by the natural ``layout``), after those of the run continued (``previous``)."""
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


#: ``repr(MCEMResult)``: at most this many parameter elements, labels and reason cut to these
#: widths (so it stays under 1,000 characters for any model).
_REPR_ROWS = 8
_LABEL_WIDTH = 20
_REASON_WIDTH = 160


def element_labels(name: str, shape: tuple[int, ...]) -> list[str]:
    """``name`` for a scalar, ``name[i]`` / ``name[i,j]`` for the elements of an array (the
    labels of :attr:`MCEMResult.boundary`)."""
    if not shape:
        return [name]
    return [f"{name}[{','.join(map(str, index))}]" for index in np.ndindex(*shape)]


def _elements(fields: dict[str, dict[str, np.ndarray]]) -> tuple[list[str], dict]:
    """The element labels of the parameters of ``fields["estimate"]`` and each field's values
    flattened in that order (C order within a parameter, as :attr:`MCEMResult.covariance`)."""
    estimate = fields["estimate"]
    labels = [label for name, v in estimate.items() for label in element_labels(name, np.shape(v))]
    columns = {
        key: np.concatenate(
            [np.ravel(np.asarray(values[name], dtype=float)) for name in estimate] or [[]]
        )
        for key, values in fields.items()
    }
    return labels, columns


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _clip_label(label: str) -> str:
    """``label`` in at most ``_LABEL_WIDTH`` characters, its index kept (``a_long_na...[4,9]``)."""
    name, bracket, index = label.partition("[")
    kept = _clip(name, max(_LABEL_WIDTH - len(bracket + index), 6)) + bracket + index
    return _clip(kept, 2 * _LABEL_WIDTH)
