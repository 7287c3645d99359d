r"""The curator's side: declare a release, calibrate it from bounds and a budget, publish a file.

A curator declares each released statistic by its **per-record bounds** (one record's clamped
statistic lies in ``[lower, upper]`` coordinate-wise) and, for unbounded DP, the **count** ``n``;
states the **neighbouring relation** and a total **budget**, pure ``epsilon`` or ``rho`` (zCDP),
split across the released values. :class:`Plan` derives each value's sensitivity from its bounds
(:func:`~pymc_unbounded_dp.sensitivity.sum_sensitivity`), calibrates its mechanism and states the
composed guarantee; :meth:`Plan.release` clamps the confidential records, sums them and adds exact
noise (OpenDP's samplers, else the package's own); the :class:`Release` is saved as a small JSON
file from which the analyst builds the model with nothing recomputed by hand::

    from pymc_unbounded_dp import release as rl

    plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    plan.release({"s": confidential_x}).save("release.json")       # curator

    rel = rl.load("release.json")                                  # analyst
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=rel.sample_size("n"))
        rel.privatized_sum("s", x)

==================  =================  =========================  ================================
budget              real statistic     integer statistic, n       composition of the values
==================  =================  =========================  ================================
``epsilon=``        :class:`Laplace`   :class:`DiscreteLaplace`   epsilons add up (basic)
``rho=`` (zCDP)     :class:`Gaussian`  :class:`DiscreteGaussian`  rhos add up (Bun & Steinke 2016)
==================  =================  =========================  ================================

A value whose sensitivity is 0 under the relation (the count ``n`` under replace-one, where ``n``
is public) is released exactly and takes no share of the budget.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from pymc_unbounded_dp._checks import is_real
from pymc_unbounded_dp._opendp import from_opendp, opendp_version, to_opendp
from pymc_unbounded_dp._release_file import (
    FORMAT,
    VERSION,
    Count,
    Release,
    Released,
    Statistic,
    _compose,
    _describe,
    _plain,
    load,
)
from pymc_unbounded_dp._version import __version__
from pymc_unbounded_dp.mechanisms import Mechanism, for_budget
from pymc_unbounded_dp.privacy import Guarantee, _opendp_prelude
from pymc_unbounded_dp.sensitivity import check_neighbouring

__all__ = [
    "FORMAT",
    "VERSION",
    "Count",
    "Plan",
    "Release",
    "Released",
    "Statistic",
    "approx_dp",
    "from_opendp",
    "load",
    "to_opendp",
]

#: Exact range of the integer samplers: |value| <= 2**62 (64-bit results never saturate), and
#: scale <= 2**52 (then P(|noise| > 2**62) < exp(-1024), zero in double precision).
_INT_RANGE = 2**62
_MAX_INT_SCALE = 2.0**52
#: A real value is released exactly when its float spacing is 2**-12 of the noise scale or finer:
#: |value| <= scale * 2**40.
_FLOAT_RANGE = 2.0**40
_SAMPLERS = ("auto", "opendp", "pmdp")


def _positive(value, label: str, owner: str) -> float:
    if not is_real(value):
        raise TypeError(f"{owner}: `{label}` must be a number, got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}: `{label}` must be finite and > 0, got {value}.")
    return value


def _split(budget, weights, names: list[str], measure: str, owner: str) -> dict[str, float]:
    """Each noisy value's share of the budget: explicit, weighted, or equal."""
    if isinstance(budget, Mapping):
        if weights is not None:
            raise ValueError(f"{owner}: give `weights` with a total `{measure}`, not with shares.")
        _same_keys(budget, names, measure, owner)
        return {k: _positive(budget[k], f"{measure}[{k!r}]", owner) for k in names}
    total = _positive(budget, measure, owner)
    if weights is None:
        return {k: total / len(names) for k in names}
    if not isinstance(weights, Mapping):
        raise TypeError(f"{owner}: `weights` must be a dict {{name: fraction}}, got {weights!r}.")
    _same_keys(weights, names, "weights", owner)
    fractions = {k: _positive(weights[k], f"weights[{k!r}]", owner) for k in names}
    if not math.isclose(math.fsum(fractions.values()), 1.0, rel_tol=1e-9):
        raise ValueError(
            f"{owner}: `weights` must sum to 1, got {math.fsum(fractions.values())} ({fractions})."
        )
    return {k: total * w for k, w in fractions.items()}


def _same_keys(given: Mapping, names: list[str], label: str, owner: str) -> None:
    if set(given) != set(names):
        raise ValueError(
            f"{owner}: `{label}` must have one entry per noisy value {sorted(names)}, got "
            f"{sorted(map(str, given))} (values of sensitivity 0 are released exactly, no share)."
        )


class Plan:
    """A declared release: statistics, neighbouring relation, budget -> calibrated mechanisms.

    Parameters
    ----------
    statistics : sequence of Statistic
        The released values of one table of records (at most one :func:`Count`).
    neighbouring : {"add/remove", "replace-one"}
        Add/remove (unbounded DP: ``n`` private) or replace-one (bounded DP: ``n`` public).
    epsilon : float or dict, optional
        Pure epsilon-DP budget: the total (split by ``weights``, else equally) or explicit shares
        ``{name: epsilon}`` whose sum is the total. Laplace-family mechanisms.
    rho : float or dict, optional
        rho-zCDP budget, as ``epsilon``. Gaussian-family mechanisms.
    weights : dict, optional
        ``{name: fraction}`` of a total budget, one per noisy value, summing to 1.

    Attributes
    ----------
    sensitivities : dict
        Each value's sensitivity (L1 for ``epsilon``, L2 for ``rho``) from its bounds.
    shares : dict
        Each noisy value's share of the budget (values of sensitivity 0 have none).
    mechanisms : dict
        Each value's calibrated mechanism, ``None`` for one released exactly (sensitivity 0).

    Examples
    --------
    The paper's regression: nine statistics of records rescaled to ``[-1, 1]``, and ``n``.

    >>> import numpy as np
    >>> from pymc_unbounded_dp import release as rl
    >>> lower = [-1, -1, -1, 0, -1, -1, 0, -1, 0]   # y, x1 y, x2 y, y^2, x1, x2, x1^2, x1 x2, x2^2
    >>> plan = rl.Plan([rl.Statistic("s", lower, 1), rl.Count("n")], epsilon={"s": 1.0, "n": 0.1})
    >>> plan.sensitivities["s"], plan.mechanisms["s"].scale, plan.guarantee
    (9.0, 9.0, {'epsilon': 1.1})
    """

    def __init__(
        self,
        statistics: Sequence[Statistic],
        *,
        neighbouring: str = "add/remove",
        epsilon: float | Mapping[str, float] | None = None,
        rho: float | Mapping[str, float] | None = None,
        weights: Mapping[str, float] | None = None,
    ):
        owner = "Plan"
        if (
            isinstance(statistics, Statistic)
            or not isinstance(statistics, Sequence)
            or not all(isinstance(s, Statistic) for s in statistics)
        ):
            raise TypeError(
                f"{owner}: `statistics` must be a list of Statistic/Count, got {statistics!r}."
            )
        names = [s.name for s in statistics]
        if not names or len(set(names)) != len(names):
            raise ValueError(
                f"{owner}: `statistics` must be non-empty with distinct names, got {names}."
            )
        if sum(s.kind == "count" for s in statistics) > 1:
            raise ValueError(
                f"{owner}: `statistics` may hold one Count (one table of records per Plan)."
            )
        self.neighbouring = check_neighbouring(neighbouring, owner)
        if (epsilon is None) == (rho is None):
            raise ValueError(f"{owner}: give exactly one of `epsilon` or `rho` (the total budget).")
        self.measure = "epsilon" if epsilon is not None else "rho"
        norm = for_budget(self.measure, integer=False).norm
        self.statistics = {s.name: s for s in statistics}
        self.sensitivities = {s.name: s.sensitivity(norm, self.neighbouring) for s in statistics}
        noisy = [k for k, d in self.sensitivities.items() if d > 0]
        if not noisy:
            raise ValueError(
                f"{owner}: every value in `statistics` has sensitivity 0 under {neighbouring!r}; "
                "there is nothing to privatize."
            )
        self.shares = _split(
            epsilon if epsilon is not None else rho, weights, noisy, self.measure, owner
        )
        self.mechanisms: dict[str, Mechanism | None] = {}
        for name, stat in self.statistics.items():
            sensitivity = self.sensitivities[name]
            if sensitivity == 0:
                self.mechanisms[name] = None
                continue
            if stat.integer and sensitivity != round(sensitivity):
                raise ValueError(
                    f"{owner}: integer statistic {name!r} in `statistics` has L2 sensitivity "
                    f"{sensitivity:g}, not an integer as DiscreteGaussian needs; declare its "
                    "coordinates as separate statistics, or use `epsilon`."
                )
            family = for_budget(self.measure, integer=stat.integer)
            mechanism = family(**{self.measure: self.shares[name]}, sensitivity=sensitivity)
            if stat.integer and mechanism.scale > _MAX_INT_SCALE:
                raise ValueError(
                    f"{owner}: `{self.measure}` share {self.shares[name]:g} of {name!r} gives "
                    f"noise scale {mechanism.scale:g}, beyond the exact range of the integer "
                    "samplers (scale <= 2**52)."
                )
            self.mechanisms[name] = mechanism

    @property
    def guarantee(self) -> dict[str, float]:
        """The composed guarantee, ``{"epsilon": ...}`` or ``{"rho": ...}``, from the mechanisms."""
        return {self.measure: _compose(self.mechanisms.values(), self.measure)}

    def describe(self) -> str:
        """A table of the values' sensitivities, mechanisms and shares, and the guarantee."""
        return _describe(
            self.statistics.values(),
            self.sensitivities,
            self.mechanisms,
            self.measure,
            self.neighbouring,
        )

    def release(
        self, records=None, *, sums=None, n: int | None = None, sampler: str = "auto"
    ) -> Release:
        """Privatize the confidential data: clamp, sum and add exact noise to each value.

        Each call spends the budget again.

        Parameters
        ----------
        records : dict, optional
            ``{name: rows}`` for every non-count statistic: one row per record (shape
            ``(n, *statistic.shape)``), all with the same ``n``. Rows are **clamped** to the
            declared bounds and summed here (exactly rounded sums); the count is ``n``.
        sums : dict, optional
            Instead of ``records``: the exact sums ``{name: value}``, already of clamped rows; they
            must lie within ``[n * lower, n * upper]``. Needs ``n``.
        n : int, optional
            The number of records, with ``sums``.
        sampler : {"auto", "opendp", "pmdp"}
            OpenDP's vetted samplers (``"auto"`` when OpenDP imports) or the package's own exact
            samplers (:meth:`Mechanism.release`). Both draw exact discrete noise from a secure
            generator.

        Returns
        -------
        Release

        Examples
        --------
        >>> import numpy as np
        >>> from pymc_unbounded_dp import release as rl
        >>> plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
        >>> rel = plan.release({"s": np.array([0, 1, 1, 0, 1])})
        >>> sorted(rel), rel["n"].mechanism
        (['n', 's'], DiscreteLaplace(epsilon=0.5, sensitivity=1.0, scale=2.0))
        """
        owner = "Plan.release"
        if sampler not in _SAMPLERS:
            raise ValueError(f"{owner}: `sampler` must be one of {_SAMPLERS}, got {sampler!r}.")
        if sampler == "auto":
            try:
                _opendp_prelude()
                sampler = "opendp"
            except ImportError:
                sampler = "pmdp"
        summed = {k: s for k, s in self.statistics.items() if s.kind == "sum"}
        if (records is None) == (sums is None):
            raise ValueError(f"{owner}: give exactly one of `records` or `sums`.")
        if records is not None:
            exact, n = _sum_records(records, summed, owner)
        else:
            exact, n = _check_sums(sums, n, summed, owner)
        noisy = {}
        for name, stat in self.statistics.items():
            value = n if stat.kind == "count" else exact[name]
            mechanism = self.mechanisms[name]
            if mechanism is None:
                released, used = value, "exact (public)"
            else:
                source = "records" if records is not None else "sums"
                source = "n" if stat.kind == "count" and sums is not None else source
                where = f"{owner}: `{source}` (value {name!r})"
                released = _add_noise(value, mechanism, sampler, where)
                used = f"opendp {opendp_version()}" if sampler == "opendp" else _own_sampler()
            noisy[name] = released, used
        return self._release_of(noisy)

    def _release_of(self, noisy: Mapping[str, tuple]) -> Release:
        """The :class:`Release` of ``noisy``, ``{name: (released value, sampler)}`` for every
        value of the plan: :meth:`release` draws the values with exact noise,
        :func:`pymc_unbounded_dp.epsilon.simulate_release` with simulated noise for studies."""
        entries = {
            name: Released(
                name=name,
                kind=stat.kind,
                value=_plain(noisy[name][0], stat.integer),
                lower=stat.lower,
                upper=stat.upper,
                integer=stat.integer,
                sensitivity=self.sensitivities[name],
                mechanism=self.mechanisms[name],
                share=self.shares.get(name),
                sampler=noisy[name][1],
            )
            for name, stat in self.statistics.items()
        }
        return Release(
            entries,
            neighbouring=self.neighbouring,
            measure=self.measure,
            budget=math.fsum(self.shares.values()),
        )


def _own_sampler() -> str:
    return f"pymc_unbounded_dp {__version__}"


def _rows_of(value, stat: Statistic, label: str, owner: str) -> np.ndarray:
    """``value`` as a numeric array (integers kept exact), checked finite and, for an integer
    statistic, integer-valued."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        try:
            array = array.astype(float)
        except (TypeError, ValueError):
            raise TypeError(
                f"{owner}: `{label}` must be numeric, got {type(value).__name__}."
            ) from None
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise ValueError(f"{owner}: `{label}` contains NaN or infinite values.")
    if stat.integer and array.dtype.kind == "f" and np.any(array != np.round(array)):
        raise ValueError(
            f"{owner}: `{label}` must be integer-valued ({stat.name!r} is an integer statistic)."
        )
    return array


def _sum_records(records, summed: dict[str, Statistic], owner: str):
    if not isinstance(records, Mapping):
        raise TypeError(
            f"{owner}: `records` must be a dict {{name: rows}}, got {type(records).__name__}."
        )
    if set(records) != set(summed) or not summed:
        raise ValueError(
            f"{owner}: `records` must have the rows of each statistic {sorted(summed)}, got "
            f"{sorted(map(str, records))}"
            + ("" if summed else "; with only a Count, use `sums={}, n=`")
            + "."
        )
    exact, n = {}, None
    for name, stat in summed.items():
        label = f"records[{name!r}]"
        rows = _rows_of(records[name], stat, label, owner)
        if rows.shape[1:] != stat.shape or rows.ndim != 1 + len(stat.shape):
            raise ValueError(
                f"{owner}: `{label}` has shape {rows.shape}; expected (n, *{stat.shape}) (one row "
                "per record)."
            )
        if n is not None and rows.shape[0] != n:
            raise ValueError(
                f"{owner}: `{label}` has {rows.shape[0]} rows, others {n}; one table, one n."
            )
        n = rows.shape[0]
        if stat.integer:
            reach = n * np.maximum(np.abs(stat.lower), np.abs(stat.upper)).astype(float)
            if np.any(reach > _INT_RANGE):
                raise ValueError(
                    f"{owner}: `{label}` can reach {np.max(reach):g}, outside the exact range of "
                    "the integer samplers (|value| <= 2**62)."
                )
            total = (
                np.clip(rows, stat.lower, stat.upper).astype(np.int64).reshape(n, -1).sum(axis=0)
            )
        else:
            clamped = np.clip(rows, stat.lower, stat.upper).reshape(n, -1)
            total = np.array([math.fsum(column) for column in clamped.T])  # exactly rounded
        exact[name] = total.reshape(stat.shape)
    return exact, n


def _check_sums(sums, n, summed: dict[str, Statistic], owner: str):
    if not isinstance(sums, Mapping):
        raise TypeError(f"{owner}: `sums` must be a dict {{name: sum}}, got {type(sums).__name__}.")
    if set(sums) != set(summed):
        raise ValueError(
            f"{owner}: `sums` must have one entry per statistic {sorted(summed)}, got "
            f"{sorted(map(str, sums))}."
        )
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise ValueError(
            f"{owner}: `n` (the number of records) must be an integer >= 0 with `sums`, got {n!r}."
        )
    n = int(n)
    exact = {}
    for name, stat in summed.items():
        label = f"sums[{name!r}]"
        value = _rows_of(sums[name], stat, label, owner)
        if value.shape != stat.shape:
            raise ValueError(
                f"{owner}: `{label}` has shape {value.shape}; the statistic's is {stat.shape}."
            )
        low, high = n * stat.lower.astype(float), n * stat.upper.astype(float)
        slack = (
            0.0 if stat.integer else 1e-9 * np.maximum(1.0, np.maximum(np.abs(low), np.abs(high)))
        )
        if np.any(value < low - slack) or np.any(value > high + slack):
            raise ValueError(
                f"{owner}: `{label}`={value} is outside the declared bounds: a sum of {n} clamped "
                f"rows lies in [{low}, {high}]."
            )
        exact[name] = value.astype(np.int64) if stat.integer else value
    return exact, n


def _add_noise(value, mechanism: Mechanism, sampler: str, where: str):
    """``value`` plus exact noise; refuses values outside the sampler's exact range."""
    array = np.asarray(value)
    if mechanism.discrete:
        if np.any(np.abs(array) > _INT_RANGE):
            raise ValueError(
                f"{where} is outside the exact range of the integer samplers (|value| <= 2**62)."
            )
        data = [int(v) for v in array.reshape(-1)]
    else:
        if np.any(np.abs(array) > mechanism.scale * _FLOAT_RANGE):
            raise ValueError(
                f"{where} is beyond 2**40 noise scales ({mechanism.scale:g}) from 0: its float "
                "spacing would swamp the noise, outside the samplers' exact range."
            )
        data = [float(v) for v in array.reshape(-1)]
    if sampler == "pmdp":
        return mechanism.release(np.asarray(data).reshape(array.shape))
    out = to_opendp(mechanism, array.shape)(data if array.shape else data[0])
    return np.asarray(out).reshape(array.shape)


def approx_dp(rho: float, delta: float) -> float:
    r"""The epsilon of the (epsilon, delta)-DP guarantee implied by rho-zCDP (OpenDP's accountant).

    :meth:`Guarantee.to_approx <pymc_unbounded_dp.privacy.Guarantee.to_approx>`: OpenDP's
    conversion (``make_zCDP_to_approxDP``) is tighter than Bun & Steinke's
    :math:`\varepsilon = \rho + 2\sqrt{\rho \log(1/\delta)}`.

    Examples
    --------
    >>> from pymc_unbounded_dp.release import approx_dp
    >>> round(approx_dp(0.5, 1e-6), 3)
    5.222
    """
    rho = _positive(rho, "rho", "approx_dp")
    delta = _positive(delta, "delta", "approx_dp")
    if delta >= 1:
        raise ValueError(f"approx_dp: `delta` must be < 1, got {delta}.")
    return Guarantee(rho=rho).to_approx(delta).epsilon
