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

import json
import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pymc_unbounded_dp._opendp import (
    _enable_contrib,
    from_opendp,
    opendp_version,
    to_opendp,
)
from pymc_unbounded_dp.blocks import PrivatizedSum, SampleSize
from pymc_unbounded_dp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
)
from pymc_unbounded_dp.sensitivity import check_neighbouring, sum_sensitivity

__all__ = [
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

#: Identifies a release file; ``VERSION`` is bumped on any incompatible change of its layout.
FORMAT = "pymc-unbounded-dp release"
VERSION = 1
#: Exact range of the integer samplers: |value| <= 2**62 (64-bit results never saturate), and
#: scale <= 2**52 (then P(|noise| > 2**62) < exp(-1024), zero in double precision).
_INT_RANGE = 2**62
_MAX_INT_SCALE = 2.0**52
#: A real value is released exactly when its float spacing is 2**-12 of the noise scale or finer:
#: |value| <= scale * 2**40.
_FLOAT_RANGE = 2.0**40
_MEASURES = {"epsilon": ("l1", DiscreteLaplace, Laplace), "rho": ("l2", DiscreteGaussian, Gaussian)}
_COMPOSITION = {
    "epsilon": "basic composition: the values' epsilons add up (pure epsilon-DP)",
    "rho": "zCDP composition: the values' rhos add up (Bun & Steinke 2016)",
}
_FAMILIES = {cls.__name__: cls for cls in (Laplace, DiscreteLaplace, Gaussian, DiscreteGaussian)}
_SAMPLERS = ("auto", "opendp", "pmdp")


# -- declaring ----------------------------------------------------------------------------------
@dataclass(frozen=True, init=False, eq=False)
class Statistic:
    """A released sum ``sum_i clip(t(x_i), lower, upper)`` of a per-record statistic.

    Parameters
    ----------
    name : str
        Name of the released value (and of the model variable built from it).
    lower, upper : array_like
        Bounds of one record's statistic, per coordinate (broadcast together; their shape is the
        statistic's). Finite, ``lower <= upper``; integers for an integer statistic (kept as
        ``int64``, so that ``pt.clip(t, lower, upper)`` of integer records stays integer).
    integer : bool, default False
        Whether the statistic takes integer values (then a discrete mechanism releases it).

    Examples
    --------
    >>> from pymc_unbounded_dp.release import Statistic
    >>> Statistic("s", [-1, 0], 1).shape
    (2,)
    """

    name: str
    lower: np.ndarray
    upper: np.ndarray
    integer: bool
    #: ``"sum"``, or ``"count"`` for the number of records (see :func:`Count`).
    kind: str

    def __init__(self, name: str, lower, upper, *, integer: bool = False, kind: str = "sum"):
        owner = f"Statistic({name!r})"
        if not isinstance(name, str) or not name:
            raise TypeError(f"Statistic: `name` must be a non-empty string, got {name!r}.")
        if kind not in ("sum", "count"):
            raise ValueError(f"{owner}: `kind` must be 'sum' or 'count', got {kind!r}.")
        if not isinstance(integer, bool | np.bool_):
            raise TypeError(f"{owner}: `integer` must be True or False, got {integer!r}.")
        bounds = []
        for label, value in (("lower", lower), ("upper", upper)):
            try:
                array = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise TypeError(f"{owner}: `{label}` must be numeric, got {value!r}.") from None
            if not np.all(np.isfinite(array)):
                raise ValueError(
                    f"{owner}: `{label}` must be finite (the clamp to the bounds is what "
                    f"bounds the sensitivity), got {array}."
                )
            if integer and np.any(array != np.round(array)):
                raise ValueError(f"{owner}: `{label}` must be integers for an integer statistic.")
            bounds.append(array)
        try:
            lower, upper = np.broadcast_arrays(*bounds)
        except ValueError:
            raise ValueError(
                f"{owner}: `lower` {bounds[0].shape} and `upper` {bounds[1].shape} do not "
                "broadcast."
            ) from None
        if np.any(lower > upper):
            raise ValueError(
                f"{owner}: `lower` must be <= `upper` in every coordinate (reversed bounds?); got "
                f"lower={lower}, upper={upper}."
            )
        object.__setattr__(self, "name", name)
        dtype = np.int64 if integer else float
        object.__setattr__(self, "lower", lower.astype(dtype))
        object.__setattr__(self, "upper", upper.astype(dtype))
        object.__setattr__(self, "integer", bool(integer))
        object.__setattr__(self, "kind", kind)

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one record's statistic (and of the released sum)."""
        return self.lower.shape

    def sensitivity(self, norm: str, neighbouring: str) -> float:
        """Sensitivity of the sum in ``norm`` (``"l1"``, ``"l2"``) under ``neighbouring``."""
        return sum_sensitivity(self.lower, self.upper, norm=norm, neighbouring=neighbouring)


def Count(name: str = "n") -> Statistic:
    """The number of records ``n``: the sum of a per-record statistic equal to 1.

    Its sensitivity is 1 under add/remove neighbours (unbounded DP: ``n`` is private) and 0 under
    replace-one (bounded DP: ``n`` is public and released exactly).

    Examples
    --------
    >>> from pymc_unbounded_dp.release import Count
    >>> Count().sensitivity("l1", "add/remove"), Count().sensitivity("l1", "replace-one")
    (1.0, 0.0)
    """
    return Statistic(name, 1, 1, integer=True, kind="count")


def _positive(value, label: str, owner: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
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
        norm, discrete, continuous = _MEASURES[self.measure]
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
            family = discrete if stat.integer else continuous
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
                _enable_contrib()
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
    from pymc_unbounded_dp import __version__

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


def _plain(value, integer: bool):
    """A released value as the analyst reads it: a Python number, or an array."""
    array = np.asarray(value, dtype=np.int64 if integer else float)
    return array.item() if array.ndim == 0 else array


def _compose(mechanisms, measure: str) -> float:
    return math.fsum(m.privacy[measure] for m in mechanisms if m is not None)


def _describe(statistics, sensitivities, mechanisms, measure, neighbouring) -> str:
    norm = _MEASURES[measure][0]
    lines = [f"{'value':<10} {'kind':<6} {'shape':<8} {'sensitivity (' + norm + ')':<18} mechanism"]
    for stat in statistics:
        mechanism = mechanisms[stat.name]
        text = "exact (public)" if mechanism is None else repr(mechanism)
        columns = f"{stat.name:<10} {stat.kind:<6} {stat.shape!s:<8}"
        lines.append(f"{columns} {sensitivities[stat.name]:<18.6g} {text}")
    total = _compose(mechanisms.values(), measure)
    lines.append(
        f"guarantee: {measure} = {total:.6g} under {neighbouring} neighbours "
        f"({_COMPOSITION[measure]})"
    )
    return "\n".join(lines)


# -- the release --------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Released:
    """One released value: what the analyst needs to model it.

    ``value`` is the noisy release (``observed`` of :func:`PrivatizedSum`, ``n_dp`` of
    :func:`SampleSize`); ``mechanism`` the noise it carries (``None``: released exactly);
    ``lower``/``upper`` the per-record clamp the model's statistic must apply
    (``pt.clip(t, lower, upper)``).
    """

    name: str
    kind: str
    value: int | float | np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    integer: bool
    sensitivity: float
    mechanism: Mechanism | None
    share: float | None
    sampler: str

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one record's statistic (and of the released value)."""
        return self.lower.shape


class Release(Mapping[str, Released]):
    """A published release: ``rel[name]`` is a :class:`Released`; save/load as JSON.

    Built by :meth:`Plan.release` or :func:`load`. ``budget`` is the total budget the plan spent
    (``{"epsilon": ...}`` or ``{"rho": ...}``) and ``guarantee`` the composition of the values'
    mechanisms, computed from their scales and sensitivities.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp import release as rl
    >>> plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    >>> rel = plan.release({"s": np.array([0, 1, 1, 0, 1] * 4)})
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=rel.sample_size("n"))
    ...     _ = rel.privatized_sum("s", x)
    """

    def __init__(
        self, entries: Mapping[str, Released], *, neighbouring: str, measure: str, budget: float
    ):
        self._entries = dict(entries)
        self.neighbouring = neighbouring
        self.measure = measure
        self.budget = {measure: budget}

    def __getitem__(self, name: str) -> Released:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(
                f"Release: no value named {name!r}; it has {sorted(self._entries)}."
            ) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Release({sorted(self._entries)}, {self.neighbouring}, budget={self.budget})"

    @property
    def guarantee(self) -> dict[str, float]:
        """The composed guarantee of the values' mechanisms, e.g. ``{"epsilon": 1.1}``."""
        return {self.measure: _compose((e.mechanism for e in self.values()), self.measure)}

    def describe(self) -> str:
        """A table of the values' sensitivities, mechanisms and shares, and the guarantee."""
        entries = self._entries.values()
        return _describe(
            entries,
            {e.name: e.sensitivity for e in entries},
            {e.name: e.mechanism for e in entries},
            self.measure,
            self.neighbouring,
        )

    # -- the analyst's helpers ------------------------------------------------------------------
    def privatized_sum(self, name: str, statistic, **kwargs):
        """``pmdp.PrivatizedSum(name, statistic, mechanism, observed, neighbouring=...)`` of the
        released value; ``kwargs`` (``dims``, ``check_sensitivity``, ``model``) are passed on.

        ``statistic`` must be the per-record statistic clamped as declared
        (``pt.clip(t, rel[name].lower, rel[name].upper)`` unless the records are bounded anyway).
        """
        entry = self._entry(name, "sum", "privatized_sum")
        if entry.mechanism is None:
            raise ValueError(
                f"Release.privatized_sum: `name` {name!r} was released exactly (sensitivity 0); "
                "it carries no noise to model."
            )
        return PrivatizedSum(
            name, statistic, entry.mechanism, entry.value, neighbouring=self.neighbouring, **kwargs
        )

    def sample_size(self, name: str = "n", *, prior=None, model=None):
        """The model's ``n``: ``pmdp.SampleSize(name, n_dp, mechanism, prior)`` under add/remove
        neighbours, or the public ``n`` (an int, for ``Records(n=...)``) under replace-one."""
        entry = self._entry(name, "count", "sample_size")
        if entry.mechanism is None:
            return int(entry.value)
        return SampleSize(name, entry.value, entry.mechanism, prior, model=model)

    def _entry(self, name: str, kind: str, owner: str) -> Released:
        if name not in self._entries:
            raise ValueError(
                f"Release.{owner}: `name` {name!r} is not released; it has {sorted(self)}."
            )
        entry = self._entries[name]
        if entry.kind != kind:
            raise ValueError(f"Release.{owner}: `name` {name!r} is a {entry.kind}, not a {kind}.")
        return entry

    # -- files ----------------------------------------------------------------------------------
    def to_json(self) -> str:
        """The release as a JSON document (floats written exactly: ``repr`` round-trips)."""
        values = {}
        for e in self.values():
            mechanism = (
                None
                if e.mechanism is None
                else {
                    "family": type(e.mechanism).__name__,
                    "scale": float(e.mechanism.scale),
                    "sensitivity": float(e.mechanism.sensitivity),
                    "norm": e.mechanism.norm,
                    "privacy": e.mechanism.privacy,
                }
            )
            values[e.name] = {
                "kind": e.kind,
                "value": np.asarray(e.value).tolist(),
                "integer": e.integer,
                "lower": e.lower.tolist(),
                "upper": e.upper.tolist(),
                "sensitivity": e.sensitivity,
                "mechanism": mechanism,
                "share": e.share,
                "sampler": e.sampler,
            }
        document = {
            "format": FORMAT,
            "version": VERSION,
            "neighbouring": self.neighbouring,
            "budget": self.budget,
            "guarantee": self.guarantee,
            "composition": _COMPOSITION[self.measure],
            "values": values,
        }
        text = json.dumps(document, indent=1, allow_nan=False)
        # One line per innermost list of numbers (whitespace only: the numbers are untouched).
        return re.sub(r"\[[^\[\]{}\"]*\]", lambda m: " ".join(m.group(0).split()), text)

    @classmethod
    def from_json(cls, text: str) -> Release:
        """Rebuild a release from :meth:`to_json`'s document, mechanisms exactly; checks it."""
        return _parse(text, "Release.from_json: `text`")

    def save(self, path) -> Path:
        """Write the release file (JSON) to ``path``; returns the path.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from pymc_unbounded_dp import release as rl
        >>> rel = rl.Plan([rl.Count("n")], epsilon=1.0).release(sums={}, n=40)
        >>> path = rel.save(pathlib.Path(tempfile.mkdtemp()) / "release.json")
        >>> rl.load(path)["n"].mechanism == rel["n"].mechanism
        True
        """
        path = Path(path)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path


def _parse(text: str, where: str) -> Release:
    """The release in the JSON document ``text``; errors start with ``where`` (the argument or the
    file) and say what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{where} is not a valid release file: not JSON ({error.msg} at line {error.lineno}, "
            f"column {error.colno})."
        ) from None
    if not isinstance(document, dict):
        raise ValueError(
            f"{where} is not a {FORMAT} file: it holds a {type(document).__name__}, not a JSON "
            "object."
        )
    if document.get("format") != FORMAT:
        keys = [str(k) for k in document]
        found = (
            f"its 'format' is {document['format']!r}"
            if "format" in document
            else f"it has no 'format' entry (its entries: {', '.join(keys[:10])}"
            + (", ...)" if len(keys) > 10 else ")")
        )
        raise ValueError(f"{where} is not a {FORMAT} file: {found}.")
    if document.get("version") != VERSION:
        raise ValueError(
            f"{where} has format version {document.get('version')}, this package reads version "
            f"{VERSION}."
        )
    try:
        budget, guarantee = document["budget"], document["guarantee"]
        measure = next(iter(budget)) if len(budget) == 1 else None
        if measure not in _MEASURES or set(guarantee) != {measure}:
            raise ValueError(
                f"{where} has budget {budget} and guarantee {guarantee}; expected one measure, "
                "'epsilon' or 'rho', in both."
            )
        neighbouring = check_neighbouring(document["neighbouring"], where)
        entries = {}
        for name, spec in document["values"].items():
            try:
                entries[name] = _entry_from(name, spec, neighbouring, measure, where)
            except KeyError as error:
                raise ValueError(
                    f"{where} is not a valid release file: value {name!r} has no "
                    f"{error.args[0]!r} entry."
                ) from None
        release = Release(
            entries, neighbouring=neighbouring, measure=measure, budget=float(budget[measure])
        )
    except KeyError as error:
        raise ValueError(
            f"{where} is not a valid release file: it has no {error.args[0]!r} entry."
        ) from None
    except (TypeError, AttributeError) as error:
        raise ValueError(f"{where} is not a valid release file ({error}).") from None
    composed = release.guarantee[measure]
    if not math.isclose(guarantee[measure], composed, rel_tol=1e-12) or (
        composed > release.budget[measure] * (1 + 1e-9)
    ):
        raise ValueError(
            f"{where} states guarantee {guarantee} and budget {budget}, but its mechanisms "
            f"compose to {measure}={composed}."
        )
    return release


def _entry_from(name: str, spec: dict, neighbouring: str, measure: str, where: str) -> Released:
    try:
        stat = Statistic(
            name, spec["lower"], spec["upper"], integer=spec["integer"], kind=spec["kind"]
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: value {name!r}: {error}") from None
    norm = _MEASURES[measure][0]
    sensitivity = stat.sensitivity(norm, neighbouring)
    described = spec["mechanism"]
    if described is None:
        if sensitivity != 0:
            raise ValueError(
                f"{where}: value {name!r} has no mechanism but sensitivity {sensitivity}."
            )
        mechanism = None
    else:
        family = _FAMILIES.get(described["family"])
        if family is None or family.norm != norm or described["norm"] != norm:
            raise ValueError(
                f"{where}: value {name!r} has mechanism family {described['family']!r} "
                f"(norm {described['norm']!r}); a {measure} budget uses {norm} mechanisms."
            )
        if family.discrete != stat.integer:
            raise ValueError(
                f"{where}: value {name!r} is integer={stat.integer} but its "
                f"mechanism {family.__name__} is for the "
                f"{'integers' if family.discrete else 'reals'}."
            )
        scale_key = "scale" if norm == "l1" else "sigma"
        try:
            mechanism = family(
                **{scale_key: described["scale"]}, sensitivity=described["sensitivity"]
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: value {name!r}: {error}") from None
        if mechanism.sensitivity < sensitivity * (1 - 1e-12):
            raise ValueError(
                f"{where}: value {name!r} is calibrated to sensitivity "
                f"{mechanism.sensitivity} but its bounds give {sensitivity} under {neighbouring}."
            )
    try:
        value = np.asarray(spec["value"], dtype=np.int64 if stat.integer else float)
    except (TypeError, ValueError):
        raise ValueError(
            f"{where}: value {name!r} is not {'an integer' if stat.integer else 'a number'} "
            f"array: {spec['value']!r}."
        ) from None
    if value.shape != stat.shape:
        raise ValueError(
            f"{where}: value {name!r} has shape {value.shape}, its bounds {stat.shape}."
        )
    return Released(
        name=name,
        kind=stat.kind,
        value=_plain(value, stat.integer),
        lower=stat.lower,
        upper=stat.upper,
        integer=stat.integer,
        sensitivity=sensitivity,
        mechanism=mechanism,
        share=spec["share"],
        sampler=spec["sampler"],
    )


def load(path) -> Release:
    """Read a release file written by :meth:`Release.save`.

    The mechanisms are rebuilt from their recorded scale and sensitivity (bit for bit); the file
    is checked: format and version, each mechanism's family against the budget and the value's
    domain, its sensitivity against the one the bounds give, and the stated guarantee against the
    composition of the mechanisms.

    Raises
    ------
    ValueError
        If the file is not a valid release file; the message names the file and what is wrong
        (``release.load: 'out/release.json' is not a pymc-unbounded-dp release file: it has no
        'format' entry (its entries: ...)``).

    Examples
    --------
    >>> import tempfile, pathlib
    >>> from pymc_unbounded_dp import release as rl
    >>> rel = rl.Plan([rl.Statistic("s", -1, 1)], rho=0.5).release(sums={"s": 3.5}, n=10)
    >>> path = rel.save(pathlib.Path(tempfile.mkdtemp()) / "release.json")
    >>> rl.load(path)["s"].mechanism
    Gaussian(rho=0.5, sensitivity=1.0, sigma=1.0)
    """
    path = Path(path)
    where = f"release.load: {str(path)!r}"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where} is not a release file: not UTF-8 text.") from None
    return _parse(text, where)


def approx_dp(rho: float, delta: float) -> float:
    r"""The epsilon of the (epsilon, delta)-DP guarantee implied by rho-zCDP (OpenDP's accountant).

    OpenDP's conversion (``make_zCDP_to_approxDP``) is tighter than Bun & Steinke's
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
    dp = _enable_contrib()
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    # A Gaussian measurement whose map at distance 1 is rho (rounded up by OpenDP: conservative).
    gaussian = dp.m.make_gaussian(*space, scale=1.0 / math.sqrt(2.0 * rho))
    epsilon, _ = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gaussian), delta).map(1.0)
    return float(epsilon)
