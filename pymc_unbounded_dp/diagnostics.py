r"""Release-level diagnostics: may the noisy sample size ``n_dp`` be plugged in as if it were ``n``?

Under unbounded DP the analyst knows only ``n_dp = n + e_n``. The shortcut of fitting the bounded-DP
model with ``n = n_dp`` (the *plug-in* model) ignores the noise of the count. Awan, Barrientos & Ju
(arXiv 2406.06231, appendix) bound what it costs:

1. every common guarantee of the statistics' release implies a :math:`(0, \delta_s)`-DP guarantee,
   i.e. a bound :math:`\delta_s` on the total-variation (TV) distance between the release
   distributions of neighbouring (add/remove one record) data sets (:func:`zero_delta`);
2. adding or removing one i.i.d. record moves the release's sampling distribution by at most
   :math:`\delta_s` in TV, so ``|n - n'|`` records move it by at most :math:`\delta_s |n - n'|`;
3. with ``n`` independent of the parameters a priori, the unbounded model's release distribution
   is a mixture over the posterior of ``n`` from the count alone,
   :math:`p(n \mid n_{dp}) \propto g(n)\, \eta_n(n_{dp} - n)` on ``n >= 0``, hence

   .. math::

      \sup_\theta \mathrm{TV}\big(p_{\mathrm{unbounded}}(s \mid \theta, n_{dp}),\;
      p(s \mid \theta, n = n_{dp})\big) \;\le\; \delta_s\, E\big[|n - n_{dp}| \,\big|\, n_{dp}\big].

The bound is about the *sampling distributions of the release*, uniformly in the parameters (how
well any test could tell the two models apart from one release); it is not a bound on the distance
between the two posteriors, which :func:`compare_posteriors` measures from draws of both fits.
:func:`plugin_check` reports both. See ``docs/plugin.md``.

The bound does not depend on ``n``: a count noise of a given scale gives the same bound at
``n_dp = 400`` as at ``1e6`` (away from ``n = 0``). What does shrink with ``n`` is the large-sample
regime: a released sum of ``n`` records has sampling sd of order :math:`\sqrt n`, so the count's
error matters through :math:`r = \sqrt{E[(n - n_{dp})^2 \mid n_{dp}]} / \sqrt{E[n \mid n_{dp}]}`,
which goes to 0 when the count noise is :math:`o(\sqrt n)` (any fixed mechanism as ``n`` grows).
By the central limit theorem the plug-in posterior of a record mean is then about
:math:`1/\sqrt{1 + (\kappa r)^2}` times as wide as the unbounded one, with :math:`\kappa` the
record statistic's ``|mean| / sd`` (:meth:`TableBound.plugin_sd_ratio`). The paper's asymptotic
results rest on a rate condition on the noise of ``n`` whose exact form is not stated in the
material we have; this rate is our derivation for sums (``docs/plugin.md``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import arviz as az
import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.model import modelcontext
from scipy import stats

from pymc_unbounded_dp._checks import is_real
from pymc_unbounded_dp._graph import depends_on, quick_function
from pymc_unbounded_dp._registry import SampleSizeSpec, TableSpec, model_blocks, observed_value
from pymc_unbounded_dp.privacy import APPROXIMATE, GAUSSIAN_DP, PURE, ZCDP, Guarantee, compose
from pymc_unbounded_dp.privacy import zero_delta as zero_delta
from pymc_unbounded_dp.sums import LATENT_SUM_ROLE

__all__ = [
    "CountPosterior",
    "PluginCheck",
    "TableBound",
    "compare_posteriors",
    "count_posterior",
    "plugin_check",
    "zero_delta",
]

#: Largest number of values of ``n`` summed over for the posterior of ``n`` from the count.
_MAX_WINDOW = 2**24
#: Posterior mass of ``n`` allowed outside the summation window.
_TAIL = 1e-12
#: The first window holds the noise where its log-density is within this of its peak (e**-36).
_WINDOW_NATS = 36.0


# --------------------------------------------------------------------------------------------------
# the releases' guarantee as a (0, delta)-DP one
# --------------------------------------------------------------------------------------------------
def _composed_delta(guarantees: Sequence[Guarantee | None]) -> tuple[str, float]:
    """Compose the guarantees of one table's releases, then convert: ``(description, delta)``.

    Each measure is composed on its own (:func:`~pymc_unbounded_dp.privacy.compose`: pure and
    (epsilon, delta)-DP together, rho-zCDP, mu-GDP), converted to (0, delta)-DP
    (:meth:`~pymc_unbounded_dp.privacy.Guarantee.zero_delta`) and the deltas added ((0, delta)-DP
    composes additively); or, when it is smaller, the epsilon-DP ones are composed with the zCDP
    ones in zCDP (Bun & Steinke 2016, Prop. 1.4).
    """
    if not guarantees:
        return "nothing released", 0.0
    if any(g is None for g in guarantees):
        return "unknown", 1.0
    groups = [
        [g for g in guarantees if g.measure in kinds]
        for kinds in ((PURE, APPROXIMATE), (ZCDP,), (GAUSSIAN_DP,))
    ]
    parts = [compose(group) for group in groups if group]
    delta = sum(part.zero_delta() for part in parts)
    measures = {g.measure for g in guarantees}
    if {PURE, ZCDP} <= measures and APPROXIMATE not in measures:
        concentrated = compose(groups[0] + groups[1]).zero_delta()
        delta = min(delta, concentrated + (compose(groups[2]).zero_delta() if groups[2] else 0.0))
    return " + ".join(f"{part:.4g}" for part in parts), min(1.0, delta)


# --------------------------------------------------------------------------------------------------
# the posterior of n from the count release alone
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CountPosterior:
    """``p(n | n_dp)`` on a window of ``n`` outside which its mass is below ``1e-12``.

    Attributes
    ----------
    n : ndarray of int64
        Consecutive values of ``n``.
    pmf : ndarray
        Their posterior probabilities (summing to 1).
    n_dp : float
        The released count.
    """

    n: np.ndarray
    pmf: np.ndarray
    n_dp: float

    @property
    def _offset(self) -> np.ndarray:
        """``n - n_dp`` (exact: the window's first value minus ``n_dp``, plus small integers)."""
        return (float(self.n[0]) - self.n_dp) + np.arange(self.n.size, dtype=float)

    @property
    def mean(self) -> float:
        """Posterior mean of ``n``."""
        return self.n_dp + float(self.pmf @ self._offset)

    @property
    def sd(self) -> float:
        """Posterior standard deviation of ``n``."""
        offset = self._offset
        centre = float(self.pmf @ offset)
        return math.sqrt(float(self.pmf @ (offset - centre) ** 2))

    @property
    def mean_abs_deviation(self) -> float:
        """``E[|n - n_dp| | n_dp]``, the factor of the plug-in bound."""
        return float(self.pmf @ np.abs(self._offset))


def _initial_halfwidth(mechanism) -> int:
    """Half-width of a window holding all but ~1e-16 of the noise, from the mechanism's
    :meth:`~pymc_unbounded_dp.Mechanism.tail_width` if it has one."""
    tail_width = getattr(mechanism, "tail_width", None)
    if callable(tail_width):
        return math.ceil(tail_width(_WINDOW_NATS)) + 3
    return 64


def _tail_beyond(edge: float, inner: float) -> float:
    """Mass beyond a window edge, extrapolating the decay ``edge / inner`` geometrically."""
    if edge == 0.0:
        return 0.0
    if edge >= inner:
        return math.inf
    ratio = edge / inner
    return edge * ratio / (1.0 - ratio)


def count_posterior(
    mechanism,
    n_dp: float,
    log_prior: Callable[[np.ndarray], np.ndarray] | None = None,
    *,
    lower: int | None = 0,
) -> CountPosterior:
    r"""The posterior of ``n`` from the count release alone: :math:`p(n \mid n_{dp}) \propto g(n)\,\eta_n(n_{dp} - n)`.

    Computed exactly by summation over a window of consecutive ``n`` around ``n_dp`` (vectorised;
    the window is sized from the noise scale, so a huge ``n_dp`` costs nothing extra), widened
    until the mass beyond each edge is below ``1e-12``. The mass beyond an edge is extrapolated
    from the decay of the last two terms, which is an upper bound when the posterior is
    log-concave there (Laplace and Gaussian noise, flat, Poisson or negative binomial priors).

    Parameters
    ----------
    mechanism : Mechanism
        The noise of the count; its ``logpdf`` gives :math:`\log \eta_n` (a discrete mechanism's
        pmf or a continuous one's density, evaluated at integer ``n``).
    n_dp : float
        The released count.
    log_prior : callable, optional
        ``log g(n)`` for an int64 array of ``n``; ``None`` is the flat prior.
    lower : int or None, default 0
        Smallest possible ``n`` (``None``: no lower limit, which gives the noise distribution
        itself, reflected).

    Returns
    -------
    CountPosterior

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp.diagnostics import count_posterior
    >>> post = count_posterior(pmdp.DiscreteLaplace(epsilon=1.0), n_dp=1000)
    >>> round(post.mean_abs_deviation, 4)  # 2 q / (1 - q^2), q = e^-1
    0.8509
    """
    try:
        n_dp = float(n_dp)
    except (TypeError, ValueError):
        raise TypeError(f"count_posterior: `n_dp` must be a number, got {n_dp!r}.") from None
    if not math.isfinite(n_dp):
        raise ValueError(f"count_posterior: `n_dp` must be finite, got {n_dp}.")
    if not callable(getattr(mechanism, "logpdf", None)):
        raise TypeError(
            f"count_posterior: `mechanism` must have a `logpdf(noise)` method, got {mechanism!r}."
        )
    centre = math.floor(n_dp + 0.5)
    if lower is not None:
        centre = max(int(lower), centre)
    half = _initial_halfwidth(mechanism)
    while True:
        first = centre - half if lower is None else max(int(lower), centre - half)
        size = centre + half - first + 1
        if size > _MAX_WINDOW:
            raise ValueError(
                f"count_posterior: the posterior of n given `n_dp`={n_dp:g} under `mechanism` "
                f"{mechanism!r} (and the prior) is not within {_MAX_WINDOW} consecutive values "
                "of n: the count's noise is too wide (or the prior too far from n_dp) to sum "
                "exactly."
            )
        offsets = np.arange(size, dtype=np.int64)
        log_w = np.asarray(mechanism.logpdf((n_dp - first) - offsets.astype(float)), dtype=float)
        if log_prior is not None:
            log_w = log_w + np.asarray(log_prior(first + offsets), dtype=float)
        top = np.max(log_w)
        if np.isfinite(top):
            pmf = np.exp(log_w - top)
            pmf /= pmf.sum()
            upper = _tail_beyond(pmf[-1], pmf[-2])
            below = 0.0 if first == lower else _tail_beyond(pmf[0], pmf[1])
            if upper + below < _TAIL:
                return CountPosterior(n=first + offsets, pmf=pmf, n_dp=n_dp)
        half *= 2


def _required_count_privacy(mechanism, mean_abs: float) -> dict[str, float] | None:
    """The weakest guarantee of the count's mechanism family with ``E|e| <= mean_abs``
    (:meth:`~pymc_unbounded_dp.Mechanism.budget_for_mean_abs`: far from ``n = 0``, flat prior)."""
    if not (math.isfinite(mean_abs) and mean_abs > 0):
        return None
    guarantee = mechanism.budget_for_mean_abs(mean_abs)
    return None if guarantee is None else guarantee.as_dict()


def _log_prior_of(model: pm.Model, spec: SampleSizeSpec):
    """``(log g, note)``: the prior of ``n`` as a NumPy function (``None`` if flat), and a note
    when it depends on model parameters (the theorem then does not apply)."""
    if spec.flat_prior:
        return None, ""
    value = pt.vector(f"{spec.name}_value", dtype="int64")
    logp = pm.logp(spec.rv, value)
    parents = depends_on(logp, [rv for rv in model.free_RVs if rv is not spec.rv])
    if parents:
        names = ", ".join(repr(p.name) for p in parents)
        return None, (
            f"the prior of {spec.name!r} depends on {names}: the bound needs n independent of "
            "the parameters a priori"
        )
    fn = quick_function([value], [logp])

    def log_prior(n: np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(fn(np.asarray(n, dtype=np.int64))[0]), np.shape(n))

    return log_prior, ""


# --------------------------------------------------------------------------------------------------
# result objects
# --------------------------------------------------------------------------------------------------
def _format_privacy(privacy: dict[str, float] | None) -> str:
    if not privacy:
        return "n/a"
    return ", ".join(f"{k} >= {v:.3g}" for k, v in privacy.items())


@dataclass(frozen=True, eq=False)
class TableBound:
    r"""The plug-in bound for one table with a latent ``n`` (one row of :class:`PluginCheck`).

    Attributes
    ----------
    name : str
        The :func:`~pymc_unbounded_dp.SampleSize`'s name.
    n_dp : float
        The released count.
    count_mechanism : str
        The count's mechanism.
    sums : tuple of str
        The table's released sums (:func:`~pymc_unbounded_dp.PrivatizedSum` names).
    guarantee : str
        Their composed guarantee (``"unknown"`` when a mechanism states none).
    delta_s : float
        Its (0, delta)-DP conversion (:func:`zero_delta`); 1 when a mechanism states no
        guarantee (the total-variation distance never exceeds 1).
    n_mean, n_sd : float
        Mean and standard deviation of ``p(n | n_dp)`` (count release and prior only).
    mean_abs_deviation : float
        ``E[|n - n_dp| | n_dp]`` under that posterior.
    bound : float
        ``min(1, delta_s * mean_abs_deviation)``.
    vacuous : bool
        ``bound == 1``: the bound says nothing.
    max_mean_abs_deviation : float
        The largest ``E|n - n_dp|`` for which the bound would be ``<= target``.
    required_count_privacy : dict or None
        The weakest guarantee of the count's mechanism family giving that ``E|n - n_dp|`` (far
        from ``n = 0``, flat prior), e.g. ``{"epsilon": 2.24}``; ``None`` for other families.
    large_n_ratio : float
        :math:`r = \sqrt{E[(n - n_{dp})^2 \mid n_{dp}]} / \sqrt{E[n \mid n_{dp}]}`: the
        count's error beside the sampling sd of a sum over ``n`` records (the large-sample regime
        needs ``r -> 0``, i.e. count noise :math:`o(\sqrt n)`). Unlike ``bound``, it shrinks as
        ``1/sqrt(n_dp)`` for a given count noise. NaN when the bound does not apply.
    note : str
        Why the bound does not apply, if it does not.
    """

    name: str
    n_dp: float
    count_mechanism: str
    sums: tuple[str, ...]
    guarantee: str
    delta_s: float
    n_mean: float
    n_sd: float
    mean_abs_deviation: float
    bound: float
    vacuous: bool
    max_mean_abs_deviation: float
    required_count_privacy: dict[str, float] | None
    large_n_ratio: float = math.nan
    note: str = ""

    def plugin_sd_ratio(self, kappa: float = 1.0) -> float:
        r"""Large-sample sd of the plug-in posterior of a record mean over the unbounded one.

        :math:`1 / \sqrt{1 + (\kappa r)^2}` with :math:`r` = ``large_n_ratio`` and ``kappa`` the
        record statistic's ``|mean| / sd``: given ``n`` the sum has mean ``n m`` and sd
        :math:`\sqrt n\,\sigma`, and mixing over ``n`` adds about :math:`m^2\,
        \mathrm{Var}(n) / n^2` to the variance of ``m``. The noise on the sum, ignored here, only
        brings the ratio closer to 1.

        Examples
        --------
        >>> import pymc as pm
        >>> import pymc_unbounded_dp as pmdp
        >>> with pm.Model() as model:
        ...     theta = pm.Beta("theta", 1, 1)
        ...     n = pmdp.SampleSize("n", n_dp=400, mechanism=pmdp.DiscreteLaplace(epsilon=0.05))
        ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=160.0)
        >>> row = pmdp.plugin_check(model).tables[0]
        >>> round(row.large_n_ratio, 3), round(row.plugin_sd_ratio(kappa=(0.4 / 0.6) ** 0.5), 3)
        (1.414, 0.655)
        """
        if not is_real(kappa) or not kappa >= 0:
            raise ValueError(f"`kappa` must be a number >= 0, got {kappa!r}.")
        return 1.0 / math.sqrt(1.0 + (kappa * self.large_n_ratio) ** 2)


@dataclass(frozen=True, eq=False)
class PluginCheck:
    """What :func:`plugin_check` found.

    Attributes
    ----------
    tables : tuple of TableBound
        One entry per table with a latent ``n``.
    bound : float
        Bound on the TV distance between the whole release's distributions under the unbounded
        and the plug-in model, ``min(1, sum of the tables' bounds)`` (the tables are independent
        given the parameters).
    vacuous : bool
        ``bound == 1``.
    target : float
        The bound asked for in ``max_mean_abs_deviation`` and ``required_count_privacy``.
    comparison : pandas.DataFrame or None
        The empirical comparison of the two posteriors (:func:`compare_posteriors`), when draws
        were given.
    """

    tables: tuple[TableBound, ...]
    bound: float
    vacuous: bool
    target: float
    comparison: pd.DataFrame | None = None

    def to_dataframe(self) -> pd.DataFrame:
        """One row per table (index: the sample size's name), one column per attribute."""
        rows = {t.name: {k: v for k, v in vars(t).items() if k != "name"} for t in self.tables}
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame["sums"] = frame["sums"].map(", ".join)
        frame["required_count_privacy"] = [
            _format_privacy(t.required_count_privacy) for t in self.tables
        ]
        return frame

    def __repr__(self) -> str:
        lines = [
            f"PluginCheck: TV(unbounded, plug-in release distributions) <= {self.bound:.4g}"
            + ("  (vacuous)" if self.vacuous else "")
        ]
        for t in self.tables:
            lines.append(
                f"  {t.name}: n_dp = {t.n_dp:g} ({t.count_mechanism}); sums {', '.join(t.sums)}: "
                f"{t.guarantee} -> delta_s = {t.delta_s:.4g}"
            )
            lines.append(
                f"    E|n - n_dp| = {t.mean_abs_deviation:.4g}, bound = {t.bound:.4g}"
                + ("  (vacuous)" if t.vacuous else "")
                + f"; <= {self.target:g} needs E|n - n_dp| <= {t.max_mean_abs_deviation:.4g}"
                + (
                    f" (count: {_format_privacy(t.required_count_privacy)})"
                    if t.required_count_privacy
                    else ""
                )
            )
            if t.note:
                lines.append(f"    note: {t.note}")
            if math.isfinite(t.large_n_ratio):
                lines.append(
                    "    the bound does not shrink as n grows: it depends on the count noise, not "
                    "on the size of n"
                )
                lines.append(
                    f"    large n: rms(n - n_dp) / sqrt(n) = {t.large_n_ratio:.4g}, -> 0 as "
                    f"1/sqrt(n); plug-in/unbounded sd of a mean ~ {t.plugin_sd_ratio(1.0):.4f} "
                    "(|mean|/sd = 1)"
                )
        if self.comparison is not None:
            lines.append("  unbounded vs plug-in posterior:")
            columns = ["mean_shift", "sd_ratio", "interval_overlap", "ks"]
            text = self.comparison[columns].to_string(float_format=lambda v: f"{v:.3f}")
            lines.extend("    " + line for line in text.splitlines())
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# the empirical comparison
# --------------------------------------------------------------------------------------------------
def _posterior_dataset(idata, argument: str) -> xr.Dataset:
    if isinstance(idata, xr.Dataset):
        dataset = idata
    elif hasattr(idata, "children"):  # xarray.DataTree (PyMC 6)
        if "posterior" not in idata.children:
            raise ValueError(f"`{argument}` has no 'posterior' group.")
        dataset = idata["posterior"].to_dataset()
    elif hasattr(idata, "groups") and callable(idata.groups):  # arviz.InferenceData (PyMC 5)
        if "posterior" not in idata.groups():
            raise ValueError(f"`{argument}` has no 'posterior' group.")
        dataset = idata.posterior
    else:
        raise TypeError(
            f"`{argument}` must be an arviz.InferenceData, an xarray.DataTree (what pmdp.sample "
            f"returns) or a posterior xarray.Dataset, got {type(idata).__name__}."
        )
    if not {"chain", "draw"} <= set(dataset.dims):
        raise ValueError(f"`{argument}`: the posterior must have 'chain' and 'draw' dimensions.")
    return dataset


def _interval_overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Length of the intersection over the length of the union (1: equal; 0: disjoint)."""
    inter = min(a[1], b[1]) - max(a[0], b[0])
    union = max(a[1], b[1]) - min(a[0], b[0])
    if union <= 0:
        return 1.0 if a == b else 0.0
    return max(inter, 0.0) / union


def compare_posteriors(
    idata, plugin_idata, var_names: Sequence[str] | None = None, prob: float = 0.94
) -> pd.DataFrame:
    """Compare the unbounded posterior with the plug-in one, per scalar parameter.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        The fit of the unbounded model (``n`` latent).
    plugin_idata : arviz.InferenceData or xarray.DataTree
        The fit of the same model with ``n`` fixed at ``n_dp`` (``Records(..., n=int(n_dp))``).
    var_names : list of str, optional
        Posterior variables to compare (default: those in both posteriors).
    prob : float, default 0.94
        Probability of the central (equal-tailed) intervals.

    Returns
    -------
    pandas.DataFrame
        One row per scalar component (``"beta[1]"``): ``mean_unbounded``, ``mean_plugin``,
        ``sd_unbounded``, ``sd_plugin``, ``mean_shift`` = ``(mean_unbounded - mean_plugin) /
        sd_unbounded``, ``sd_ratio`` = ``sd_plugin / sd_unbounded``, the two intervals,
        ``interval_overlap`` (length of their intersection over that of their union: 1 equal, 0
        disjoint) and ``ks``, the two-sample Kolmogorov-Smirnov statistic (the largest distance
        between the two empirical CDFs; a distance, not a test: MCMC draws are autocorrelated).

    Examples
    --------
    >>> import numpy as np, xarray as xr
    >>> from pymc_unbounded_dp.diagnostics import compare_posteriors
    >>> rng = np.random.default_rng(0)
    >>> u = xr.Dataset({"mu": (("chain", "draw"), rng.normal(0.0, 1.0, (2, 2000)))})
    >>> p = xr.Dataset({"mu": (("chain", "draw"), rng.normal(0.5, 0.5, (2, 2000)))})
    >>> table = compare_posteriors(u, p)
    >>> bool(abs(table.loc["mu", "mean_shift"] + 0.5) < 0.1)
    True
    """
    unbounded = _posterior_dataset(idata, "idata")
    plugin = _posterior_dataset(plugin_idata, "plugin_idata")
    if not is_real(prob) or not 0 < prob < 1:
        raise ValueError(f"`prob` must be a number in (0, 1), got {prob!r}.")
    if var_names is None:
        # the model's parameters; not the true totals of the sums level (they are latent data)
        names = [
            v
            for v in unbounded.data_vars
            if v in plugin.data_vars and LATENT_SUM_ROLE not in unbounded[v].attrs
        ]
        if not names:
            raise ValueError(
                "`idata` and `plugin_idata` have no posterior variable in common; pass the fits "
                "of the same model with n latent and with n fixed at n_dp."
            )
    else:
        names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [v for v in names if v not in unbounded.data_vars or v not in plugin.data_vars]
        if not names or missing:
            raise ValueError(
                f"`var_names`: {missing or names!r} must be posterior variables of both "
                "`idata` and `plugin_idata`."
            )
    for name in names:
        if unbounded[name].shape[2:] != plugin[name].shape[2:]:
            raise ValueError(
                f"`var_names`: {name!r} has shape {unbounded[name].shape[2:]} in `idata` but "
                f"{plugin[name].shape[2:]} in `plugin_idata`."
            )
    draws_u = az.extract(unbounded, var_names=names, combined=True, keep_dataset=True)
    draws_p = az.extract(plugin, var_names=names, combined=True, keep_dataset=True)
    lo, hi = (1.0 - prob) / 2.0, (1.0 + prob) / 2.0
    tag = f"{100 * prob:g}"
    rows = {}
    for name in names:
        u_all = np.asarray(draws_u[name].transpose("sample", ...).values, dtype=float)
        p_all = np.asarray(draws_p[name].transpose("sample", ...).values, dtype=float)
        for index in np.ndindex(u_all.shape[1:]):
            label = f"{name}[{','.join(map(str, index))}]" if index else name
            u, p = u_all[(slice(None), *index)], p_all[(slice(None), *index)]
            mean_u, mean_p = float(u.mean()), float(p.mean())
            sd_u, sd_p = float(u.std(ddof=1)), float(p.std(ddof=1))
            interval_u = tuple(float(v) for v in np.quantile(u, [lo, hi]))
            interval_p = tuple(float(v) for v in np.quantile(p, [lo, hi]))
            with np.errstate(divide="ignore", invalid="ignore"):
                shift = float(np.divide(mean_u - mean_p, sd_u))
                ratio = float(np.divide(sd_p, sd_u))
            rows[label] = {
                "mean_unbounded": mean_u,
                "mean_plugin": mean_p,
                "sd_unbounded": sd_u,
                "sd_plugin": sd_p,
                "mean_shift": shift,
                "sd_ratio": ratio,
                f"lower_{tag}_unbounded": interval_u[0],
                f"upper_{tag}_unbounded": interval_u[1],
                f"lower_{tag}_plugin": interval_p[0],
                f"upper_{tag}_plugin": interval_p[1],
                "interval_overlap": _interval_overlap(interval_u, interval_p),
                "ks": float(stats.ks_2samp(u, p).statistic),
            }
    return pd.DataFrame.from_dict(rows, orient="index")


# --------------------------------------------------------------------------------------------------
# the check
# --------------------------------------------------------------------------------------------------
def _table_bound(model: pm.Model, table: TableSpec, target: float) -> TableBound:
    spec = table.sample_size
    label, delta_s = _composed_delta([s.mechanism.guarantee for s in table.sums])
    n_dp = float(np.asarray(observed_value(model, spec.release_rv), dtype=float).reshape(-1)[0])
    log_prior, note = _log_prior_of(model, spec)
    if note:  # the theorem does not apply: report no posterior of n and a vacuous bound
        n_mean = n_sd = mean_abs = large_n_ratio = math.nan
        bound = 1.0
    else:
        post = count_posterior(spec.mechanism, n_dp, log_prior)
        n_mean, n_sd, mean_abs = post.mean, post.sd, post.mean_abs_deviation
        bound = min(1.0, delta_s * mean_abs)
        rms = math.hypot(n_sd, n_mean - n_dp)
        large_n_ratio = rms / math.sqrt(n_mean) if n_mean > 0 else math.inf
        if label == "unknown":
            note = (
                "a released sum's mechanism states no privacy guarantee: delta_s = 1 (TV never "
                "exceeds 1), so the bound is min(1, E|n - n_dp|)"
            )
    max_mean_abs = target / delta_s if delta_s > 0 else math.inf
    return TableBound(
        name=spec.name,
        n_dp=n_dp,
        count_mechanism=repr(spec.mechanism),
        sums=tuple(s.name for s in table.sums),
        guarantee=label,
        delta_s=delta_s,
        n_mean=n_mean,
        n_sd=n_sd,
        mean_abs_deviation=mean_abs,
        bound=bound,
        vacuous=bound >= 1.0,
        max_mean_abs_deviation=max_mean_abs,
        required_count_privacy=_required_count_privacy(spec.mechanism, max_mean_abs),
        large_n_ratio=large_n_ratio,
        note=note,
    )


def plugin_check(
    model: pm.Model | None = None,
    idata=None,
    plugin_idata=None,
    *,
    var_names: Sequence[str] | None = None,
    prob: float = 0.94,
    target: float = 0.1,
) -> PluginCheck:
    r"""May the noisy sample size be plugged in? The paper's bound, and the observed difference.

    For each table with a latent ``n`` (:func:`~pymc_unbounded_dp.SampleSize`), from the model
    alone: the released sums' guarantees (``mechanism.privacy``) composed over the table and
    converted to :math:`(0, \delta_s)`-DP (:func:`zero_delta`); the posterior of ``n`` from the
    count release alone, :math:`p(n \mid n_{dp}) \propto g(n)\,\eta_n(n_{dp} - n)` on ``n >= 0``
    with the ``SampleSize``'s prior ``g`` (:func:`count_posterior`); and the bound

    .. math:: \min\big(1,\; \delta_s\, E[|n - n_{dp}| \mid n_{dp}]\big)

    on the total-variation distance between the release's sampling distributions under the
    unbounded model and under the plug-in model (``n = n_dp``), uniformly in the parameters
    (Awan, Barrientos & Ju, arXiv 2406.06231). It holds for add/remove-neighbour guarantees (the
    mechanisms' sensitivities must be add/remove ones), i.i.d. records and a prior of ``n`` that
    does not depend on the parameters. It bounds how well any test could tell the two models apart
    from one release, not the distance between the two posteriors: for that, pass the draws of
    both fits and read ``comparison``.

    The bound does not shrink as ``n`` grows (it is the same at ``n_dp = 400`` and ``1e6`` for a
    given count noise). Each table also reports the large-sample regime, which does:
    ``large_n_ratio`` :math:`= \sqrt{E[(n - n_{dp})^2 \mid n_{dp}]} / \sqrt{E[n \mid n_{dp}]}`,
    the count's error beside the :math:`\sqrt n` sampling sd of a released sum, which goes to 0
    when the count noise is :math:`o(\sqrt n)`; :meth:`TableBound.plugin_sd_ratio` turns it into
    the central-limit approximation of how much narrower the plug-in posterior of a record mean
    is. That rate is our derivation for sums, not a statement of the paper's (``docs/plugin.md``).

    Parameters
    ----------
    model : pm.Model, optional
        The unbounded model (default: the model on the context stack).
    idata : arviz.InferenceData or xarray.DataTree, optional
        Its fit (``pmdp.sample``).
    plugin_idata : arviz.InferenceData or xarray.DataTree, optional
        The fit of the same model with ``n`` fixed at ``n_dp``: build it as the unbounded one
        with ``Records(..., n=int(n_dp))`` in place of the ``SampleSize`` (e.g.
        ``examples.regression.regression_model(dataclasses.replace(release, n=release.n_dp),
        bounded=True)``).
    var_names : list of str, optional
        Parameters to compare (default: all those in both posteriors).
    prob : float, default 0.94
        Probability of the central intervals compared.
    target : float, default 0.1
        The bound to ask for: each table reports the largest ``E|n - n_dp|`` (and the weakest
        guarantee of the count's mechanism family) that would give ``bound <= target``.

    Returns
    -------
    PluginCheck
        ``.bound``, ``.vacuous``, ``.tables`` (one :class:`TableBound` per table),
        ``.to_dataframe()`` and, with draws, ``.comparison`` (:func:`compare_posteriors`).

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=2.0))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    >>> check = pmdp.plugin_check(model)
    >>> round(check.bound, 3), check.vacuous
    (0.127, False)
    """
    if model is not None and not isinstance(model, pm.Model):
        raise TypeError(f"`model` must be a pm.Model, got {type(model).__name__}.")
    model = modelcontext(model)
    if not is_real(target) or not 0 < target <= 1:
        raise ValueError(f"`target` must be a number in (0, 1], got {target!r}.")
    if (idata is None) != (plugin_idata is None):
        missing = "plugin_idata" if plugin_idata is None else "idata"
        raise ValueError(
            f"`{missing}` is missing: the empirical comparison needs both the unbounded fit "
            "(`idata`) and the plug-in fit (`plugin_idata`)."
        )
    tables = [t for t in model_blocks(model).tables() if t.sample_size is not None]
    if not tables:
        raise ValueError(
            "`model` has no pmdp.SampleSize: n is known (bounded DP), there is nothing to plug in."
        )
    comparison = (
        compare_posteriors(idata, plugin_idata, var_names=var_names, prob=prob)
        if idata is not None
        else None
    )
    rows = tuple(_table_bound(model, table, float(target)) for table in tables)
    bound = min(1.0, sum(row.bound for row in rows))
    return PluginCheck(
        tables=rows,
        bound=bound,
        vacuous=bound >= 1.0,
        target=float(target),
        comparison=comparison,
    )
