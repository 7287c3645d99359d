"""What a release is: the declared statistics, the published values, and the file that carries them.

:class:`Statistic` and :func:`Count` declare a released value by its per-record bounds;
:class:`Released` is one published value with its mechanism, :class:`Release` all of them (with
the analyst's helpers), written as JSON (:meth:`Release.save`) and read back by :func:`load`, which
checks the file. The curator's side, :class:`~pymc_unbounded_dp.release.Plan`, is in
``release.py``; both are imported from there.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pymc_unbounded_dp._checks import is_real
from pymc_unbounded_dp.blocks import PrivatizedSum, SampleSize
from pymc_unbounded_dp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    for_budget,
)
from pymc_unbounded_dp.privacy import compose
from pymc_unbounded_dp.sensitivity import check_neighbouring, sum_sensitivity

#: Identifies a release file; ``VERSION`` is bumped on any incompatible change of its layout.
FORMAT = "pymc-unbounded-dp release"
VERSION = 1
#: The budget measures a release file may state.
MEASURES = ("epsilon", "rho")

_COMPOSITION = {
    "epsilon": "basic composition: the values' epsilons add up (pure epsilon-DP)",
    "rho": "zCDP composition: the values' rhos add up (Bun & Steinke 2016)",
}
_FAMILIES = {cls.__name__: cls for cls in (Laplace, DiscreteLaplace, Gaussian, DiscreteGaussian)}


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


def _plain(value, integer: bool):
    """A released value as the analyst reads it: a Python number, or an array."""
    array = np.asarray(value, dtype=np.int64 if integer else float)
    return array.item() if array.ndim == 0 else array


def _compose(mechanisms, measure: str) -> float:
    """The ``measure`` of the composed guarantee of the mechanisms (``None``: released exactly)."""
    guarantees = [m.guarantee for m in mechanisms if m is not None]
    return compose(guarantees).as_dict()[measure] if guarantees else 0.0


def _describe(statistics, sensitivities, mechanisms, measure, neighbouring) -> str:
    norm = for_budget(measure, integer=False).norm
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
    version = document.get("version")
    if isinstance(version, bool) or version != VERSION:  # JSON's true is not version 1
        raise ValueError(
            f"{where} has format version {version}, this package reads version {VERSION}."
        )
    try:
        budget, guarantee = document["budget"], document["guarantee"]
        measure = next(iter(budget)) if len(budget) == 1 else None
        if measure not in MEASURES or set(guarantee) != {measure}:
            raise ValueError(
                f"{where} has budget {budget} and guarantee {guarantee}; expected one measure, "
                "'epsilon' or 'rho', in both."
            )
        stated = _file_number(guarantee[measure], "guarantee", where)
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
            entries,
            neighbouring=neighbouring,
            measure=measure,
            budget=_file_number(budget[measure], "budget", where),
        )
    except KeyError as error:
        raise ValueError(
            f"{where} is not a valid release file: it has no {error.args[0]!r} entry."
        ) from None
    except (TypeError, AttributeError) as error:
        raise ValueError(f"{where} is not a valid release file ({error}).") from None
    composed = release.guarantee[measure]
    if not math.isclose(stated, composed, rel_tol=1e-12) or (
        composed > release.budget[measure] * (1 + 1e-9)
    ):
        raise ValueError(
            f"{where} states guarantee {guarantee} and budget {budget}, but its mechanisms "
            f"compose to {measure}={composed}."
        )
    return release


def _file_number(value, what: str, where: str) -> float:
    """A budget or guarantee of a release file as a float; a string, a boolean or ``null`` is
    refused with a message naming the file."""
    if not is_real(value):
        raise ValueError(
            f"{where} is not a valid release file: its {what} is {value!r}, not a number."
        )
    return float(value)


def _released_value(value, integer: bool) -> np.ndarray | None:
    """A file's released value as an array: finite numbers (not strings or booleans), and for an
    integer statistic integer-valued (``1.5`` is refused, never truncated); ``None`` if not."""
    try:
        array = np.asarray(value)
    except ValueError:  # ragged lists
        return None
    if array.dtype.kind not in "iuf" or not np.all(np.isfinite(array)):
        return None
    if integer:
        return array.astype(np.int64) if np.all(array == np.round(array)) else None
    return array.astype(float)


def _entry_from(name: str, spec: dict, neighbouring: str, measure: str, where: str) -> Released:
    try:
        stat = Statistic(
            name, spec["lower"], spec["upper"], integer=spec["integer"], kind=spec["kind"]
        )
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: value {name!r}: {error}") from None
    norm = for_budget(measure, integer=False).norm
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
        try:
            mechanism = family(
                **{family.scale_name: described["scale"]}, sensitivity=described["sensitivity"]
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: value {name!r}: {error}") from None
        if mechanism.sensitivity < sensitivity * (1 - 1e-12):
            raise ValueError(
                f"{where}: value {name!r} is calibrated to sensitivity "
                f"{mechanism.sensitivity} but its bounds give {sensitivity} under {neighbouring}."
            )
    value = _released_value(spec["value"], stat.integer)
    if value is None:
        raise ValueError(
            f"{where}: value {name!r} is not {'an integer' if stat.integer else 'a finite number'} "
            f"array: {spec['value']!r}."
        )
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
