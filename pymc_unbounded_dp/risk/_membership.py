r"""Exact risk of a planned release: membership and attribute inference by the best attacker.

The attacker of differential privacy's definition knows every record but the target's, the
target's record value, the plan (statistics, bounds, mechanisms) and sees the whole release (every
noisy sum and ``n_dp``). The other records then only shift each released value by a known constant,
so the attacker faces a test between the mechanisms' noise and the noise shifted by the target's
clamped statistic ``Delta`` (1 for the count under add/remove neighbours). Its Bayes risk under 0-1
loss is computed exactly, or by quadrature with rigorous bounds, from the privacy-loss
distribution (see ``docs/risk.md``), never by simulation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pymc_unbounded_dp._checks import is_real
from pymc_unbounded_dp.mechanisms import Mechanism
from pymc_unbounded_dp.release import Plan, Release, Statistic

from ._attribute import attribute_success
from ._privacy_loss import shift_risk

__all__ = ["AttributeRisk", "MembershipRisk", "attribute_risk", "membership_risk"]


@dataclass(frozen=True)
class MembershipRisk:
    """The membership risk of one record under a planned release (:func:`membership_risk`).

    Attributes
    ----------
    risk : float
        Bayes risk (0-1 loss) of the best attacker: the probability that it decides wrongly
        whether the target is in the data (add/remove) or which of the two records it holds
        (replace-one). The midpoint of ``[lower, upper]``.
    trivial_risk : float
        ``min(prior, 1 - prior)``: the risk of an attacker who sees nothing.
    advantage : float
        ``trivial_risk - risk`` (>= 0): what the release adds to the attacker's success
        probability. 0 means the release tells it nothing about this record.
    posterior_odds_bound : float
        The largest factor by which any release multiplies the attacker's prior odds, for this
        record: ``exp(sum_j |Delta_j| / scale_j)`` under Laplace-type noise (``<=
        epsilon_bound``), ``inf`` when a Gaussian-type (or exactly released) value moves (the loss
        is unbounded there). For a :class:`~pymc_unbounded_dp.CustomMechanism` it is the largest
        value seen on the quadrature grid, not a proof.
    epsilon_bound : float
        ``exp(epsilon)`` of the plan's pure epsilon-DP guarantee, the bound on the posterior odds
        factor for every record; ``inf`` where the plan bounds no factor: a ``rho`` (zCDP) plan
        or a stated ``delta`` (``release.approx_dp(rho, delta)`` gives the epsilon that holds
        except with probability ``delta``), or a value released exactly that a neighbour moves.
    lower, upper : float
        Rigorous bounds on ``risk`` (up to floating-point rounding), equal when exact.
    method : str
        ``"exact"`` (closed forms and exact sums) or ``"quadrature"`` (lattice or ``y`` grid).
    neighbouring : str
        ``"add/remove"`` (H1: the target is in the data, H0: it is not) or ``"replace-one"`` (H0:
        the target's record is replaced by ``replacement``).
    """

    risk: float
    trivial_risk: float
    advantage: float
    posterior_odds_bound: float
    epsilon_bound: float
    lower: float
    upper: float
    method: str
    neighbouring: str


@dataclass(frozen=True)
class AttributeRisk:
    """The attribute risk of one record under a planned release (:func:`attribute_risk`).

    Attributes
    ----------
    risk : float
        Bayes risk (0-1 loss) of the attacker guessing the target's record among the candidates
        by maximum a posteriori: ``1 - integral of max_k prior_k f_k(y)``.
    trivial_risk : float
        ``1 - max(prior)``: the risk of guessing the most probable candidate without the release.
    advantage : float
        ``trivial_risk - risk`` (>= 0).
    lower, upper : float
        Rigorous bounds on ``risk`` (up to floating-point rounding; for a
        :class:`~pymc_unbounded_dp.CustomMechanism` numerical, not a proof), equal when exact.
    method : str
        ``"exact"`` or ``"quadrature"``.
    """

    risk: float
    trivial_risk: float
    advantage: float
    lower: float
    upper: float
    method: str


# -- the plan -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Values:
    """The released values of a plan: statistic, mechanism (None: exact), and the guarantee."""

    statistics: dict[str, Statistic]
    mechanisms: dict[str, Mechanism | None]
    neighbouring: str | None
    epsilon_bound: float


def _plan_values(plan, owner: str, relations: tuple[str, ...]) -> _Values:
    """The plan's values; a dict's mechanisms are checked against its statistics' sensitivity
    under ``relations`` (the smallest of them)."""
    if isinstance(plan, Plan):
        guarantee = plan.guarantee
        return _Values(
            dict(plan.statistics), dict(plan.mechanisms), plan.neighbouring, _exp_epsilon(guarantee)
        )
    if isinstance(plan, Release):
        entries = plan.values()
        statistics = {
            e.name: Statistic(e.name, e.lower, e.upper, integer=e.integer, kind=e.kind)
            for e in entries
        }
        mechanisms = {e.name: e.mechanism for e in entries}
        return _Values(statistics, mechanisms, plan.neighbouring, _exp_epsilon(plan.guarantee))
    if isinstance(plan, Mapping) and plan:
        statistics, mechanisms = {}, {}
        for name, pair in plan.items():
            if not (
                isinstance(pair, tuple)
                and len(pair) == 2
                and isinstance(pair[0], Statistic)
                and (pair[1] is None or isinstance(pair[1], Mechanism))
            ):
                raise TypeError(
                    f"{owner}: `plan`[{name!r}] must be a pair (Statistic, Mechanism or None), "
                    f"got {pair!r}."
                )
            stat, mechanism = pair
            if stat.name != name:
                raise ValueError(f"{owner}: `plan`[{name!r}] holds Statistic({stat.name!r}).")
            _check_pair(stat, mechanism, owner, relations)
            statistics[name], mechanisms[name] = stat, mechanism
        if sum(s.kind == "count" for s in statistics.values()) > 1:
            raise ValueError(f"{owner}: `plan` may hold one Count (one table of records).")
        guarantee: dict[str, float] = {}
        for mechanism in mechanisms.values():
            for key, value in ({} if mechanism is None else mechanism.privacy).items():
                guarantee[key] = guarantee.get(key, 0.0) + value
        exact_and_moving = any(  # a value released exactly that a neighbour moves: no bound
            mechanism is None
            and min(statistics[name].sensitivity("l1", relation) for relation in relations) > 0
            for name, mechanism in mechanisms.items()
        )
        bound = math.inf if exact_and_moving else _exp_epsilon(guarantee)
        return _Values(statistics, mechanisms, None, bound)
    got = "an empty dict" if isinstance(plan, Mapping) else type(plan).__name__
    raise TypeError(
        f"{owner}: `plan` must be a pmdp.release.Plan, a Release, or a dict {{name: (Statistic, "
        f"Mechanism or None)}} with at least one entry; got {got}."
    )


def _check_pair(
    stat: Statistic, mechanism: Mechanism | None, owner: str, relations: tuple[str, ...]
) -> None:
    if mechanism is None:
        return
    if mechanism.domain == "integers" and not stat.integer:
        raise ValueError(
            f"{owner}: `plan`[{stat.name!r}]: {mechanism!r} takes an integer statistic; declare "
            f"Statistic({stat.name!r}, ..., integer=True)."
        )
    if mechanism.norm is not None and mechanism.sensitivity is not None:
        needed = min(stat.sensitivity(mechanism.norm, relation) for relation in relations)
        if mechanism.sensitivity < needed * (1 - 1e-12):
            raise ValueError(
                f"{owner}: `plan`[{stat.name!r}]: {mechanism!r} is calibrated to sensitivity "
                f"{mechanism.sensitivity:g} but the statistic's bounds give {needed:g}; its "
                "guarantee would not hold."
            )


def _exp_epsilon(guarantee: Mapping[str, float]) -> float:
    if set(guarantee) - {"epsilon"} or "epsilon" not in guarantee:
        return math.inf
    return math.exp(guarantee["epsilon"]) if guarantee["epsilon"] < 700 else math.inf


def checked_record(plan: Plan, record, owner: str, label: str) -> dict[str, np.ndarray]:
    """``record`` checked as :func:`membership_risk` checks its own (a value per summed statistic,
    numeric, finite, integer-valued for an integer statistic, within the declared bounds), by
    summed statistic; the count is left out."""
    values = _plan_values(plan, owner, ())
    checked = _record(values, record, owner, label)
    return {k: v for k, v in checked.items() if values.statistics[k].kind != "count"}


def _record(values: _Values, record, owner: str, label: str) -> dict[str, np.ndarray]:
    """``record`` checked against the plan: one value per non-count statistic, within bounds;
    the count's value 1 added."""
    if not isinstance(record, Mapping):
        raise TypeError(
            f"{owner}: `{label}` must be a dict {{statistic name: value of one record}}, got "
            f"{type(record).__name__}."
        )
    sums = {k: s for k, s in values.statistics.items() if s.kind == "sum"}
    missing = sorted(set(sums) - set(record))
    unknown = sorted(map(str, set(record) - set(sums)))
    if missing or unknown:
        counts = [k for k, s in values.statistics.items() if s.kind == "count"]
        note = f" (the count {counts[0]!r} is 1 for every record, implicitly)" if counts else ""
        raise ValueError(
            f"{owner}: `{label}` must give one value per statistic {sorted(sums)}{note}; "
            + (f"missing {missing}" if missing else "")
            + ("; " if missing and unknown else "")
            + (f"not in the plan {unknown}" if unknown else "")
            + "."
        )
    out = {}
    for name, stat in values.statistics.items():
        if stat.kind == "count":
            out[name] = np.ones(stat.shape)
            continue
        where = f"`{label}`[{name!r}]"
        try:
            value = np.asarray(record[name], dtype=float)
        except (TypeError, ValueError):
            raise TypeError(f"{owner}: {where} must be numeric, got {record[name]!r}.") from None
        try:
            value = np.broadcast_to(value, stat.shape)
        except ValueError:
            raise ValueError(
                f"{owner}: {where} has shape {value.shape}; statistic {name!r} has shape "
                f"{stat.shape} (give a scalar or that shape)."
            ) from None
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{owner}: {where} must be finite, got {value}.")
        if stat.integer and np.any(value != np.round(value)):
            raise ValueError(
                f"{owner}: {where} must be integer-valued (statistic {name!r} is an integer "
                f"statistic), got {value}."
            )
        if np.any(value < stat.lower) or np.any(value > stat.upper):
            raise ValueError(
                f"{owner}: {where} = {value} lies outside the plan's declared bounds "
                f"[{stat.lower}, {stat.upper}] of statistic {name!r}. The curator clamps each "
                "record to these bounds before summing, so the release holds the clamped value, "
                "not this one: pass np.clip(value, lower, upper)."
            )
        out[name] = value
    return out


def _prior(prior, owner: str) -> float:
    if not is_real(prior):
        raise TypeError(f"{owner}: `prior` must be a number in (0, 1), got {prior!r}.")
    prior = float(prior)
    if not 0.0 < prior < 1.0:
        raise ValueError(
            f"{owner}: `prior` (the attacker's probability of H1) must lie strictly between 0 "
            f"and 1, got {prior}."
        )
    return prior


def _shifts(values: _Values, h1: dict, h0: dict) -> list[tuple[Mechanism | None, float]]:
    """One ``(mechanism, Delta_j)`` per released coordinate, ``Delta = h1 - h0``."""
    out = []
    for name, mechanism in values.mechanisms.items():
        delta = np.asarray(h1[name], float) - np.asarray(h0[name], float)
        out.extend((mechanism, float(d)) for d in delta.reshape(-1))
    return out


def _result(bounds_lower: float, bounds_upper: float, trivial: float) -> tuple[float, float, float]:
    lower = min(max(bounds_lower, 0.0), trivial)
    upper = min(max(bounds_upper, lower), trivial)
    return 0.5 * (lower + upper), lower, upper


# -- membership -----------------------------------------------------------------------------------
def membership_risk(
    plan: Plan | Release | Mapping[str, tuple[Statistic, Mechanism | None]],
    record: Mapping[str, object],
    prior: float = 0.5,
    *,
    replacement: Mapping[str, object] | None = None,
) -> MembershipRisk:
    r"""Bayes risk of the best attacker deciding whether the target's record is in the data.

    The attacker knows every other record, the target's record value and the plan, sees every
    released value (all sums and ``n_dp``) and has prior probability ``prior`` that the target is
    in (H1). Under add/remove neighbours H0 is "the target is not in the data"; under replace-one
    (``n`` public) H0 is "the target's record is replaced by ``replacement``". Its Bayes risk under
    0-1 loss is :math:`\int \min(\pi f_1, (1 - \pi) f_0)\,dy`, computed from the privacy-loss
    distribution (``docs/risk.md``): exact sums and closed forms for discrete Laplace, Tulap,
    discrete Gaussian (truncated at mass 1e-18), Gaussian (all coordinates at once) and one
    Laplace coordinate; further Laplace coordinates and many atoms on a lattice of 2**20 points,
    user-defined mechanisms on a grid of their ``y``. ``lower`` and ``upper`` bracket the risk
    rigorously up to rounding (numerically for a :class:`~pymc_unbounded_dp.CustomMechanism`);
    ``method="exact"`` when they agree to 1e-18. On the lattice ``upper - lower`` is about ``m /
    2**20`` times the risk for ``m`` discretised Laplace coordinates, and ``risk``, the midpoint, is
    far closer than that (the rounding errors of the two versions cancel to first order).

    Parameters
    ----------
    plan : Plan, Release or dict
        A :class:`pymc_unbounded_dp.release.Plan` (the curator's, before the release), a
        :class:`~pymc_unbounded_dp.release.Release`, or ``{name: (Statistic, mechanism)}`` for
        mechanisms a plan does not calibrate (:class:`~pymc_unbounded_dp.Tulap`,
        :class:`~pymc_unbounded_dp.CustomMechanism`; ``None``: released exactly). With a dict the
        relation is add/remove without ``replacement`` and replace-one with it.
    record : dict
        The target's per-record statistics ``{statistic name: value}`` (a scalar or the
        statistic's shape), within the declared bounds; the count's value is 1 implicitly.
    prior : float, default 0.5
        The attacker's prior probability of H1, in (0, 1).
    replacement : dict, optional
        Under replace-one (required then): the record that replaces the target under H0. Under
        add/remove, compare two records with :func:`attribute_risk` instead.

    Returns
    -------
    MembershipRisk

    Raises
    ------
    ValueError
        If ``record`` (or ``replacement``) misses a statistic or lies outside its bounds, if
        ``prior`` is not in (0, 1), or if ``replacement`` does not match the relation.

    Examples
    --------
    A count released with a discrete Laplace at epsilon: the risk is :math:`1/(1 + e^\varepsilon)`.

    >>> import math
    >>> from pymc_unbounded_dp import release as rl, risk
    >>> plan = rl.Plan([rl.Count("n")], epsilon=1.0)
    >>> r = risk.membership_risk(plan, {})
    >>> round(r.risk, 12) == round(1 / (1 + math.e), 12), r.method, r.trivial_risk
    (True, 'exact', 0.5)

    A count and a sum clamped to ``[0, 10]``: a record at the top of the range is easier to detect
    than one at 0, which only the count gives away.

    >>> plan = rl.Plan(
    ...     [rl.Statistic("s", 0, 10, integer=True), rl.Count("n")], epsilon={"s": 2.0, "n": 0.5})
    >>> for value in (0, 10):
    ...     r = risk.membership_risk(plan, {"s": value})
    ...     print(round(r.risk, 4), round(r.posterior_odds_bound, 4), round(r.epsilon_bound, 4))
    0.3775 1.6487 12.1825
    0.1777 12.1825 12.1825
    """
    owner = "membership_risk"
    relation = "add/remove" if replacement is None else "replace-one"
    values = _plan_values(plan, owner, (relation,))
    prior = _prior(prior, owner)
    neighbouring = values.neighbouring or relation
    target = _record(values, record, owner, "record")
    if neighbouring == "replace-one":
        if replacement is None:
            raise ValueError(
                f"{owner}: the plan's neighbouring relation is replace-one (n is public), so H0 "
                "needs the record that replaces the target: pass `replacement=` (a record like "
                "`record`)."
            )
        other = _record(values, replacement, owner, "replacement")
    else:
        if replacement is not None:
            raise ValueError(
                f"{owner}: `replacement` is for replace-one plans; under add/remove H0 is the "
                "target's absence. To compare two records, use attribute_risk(plan, [record, "
                "replacement], prior=[p, 1 - p])."
            )
        other = {
            k: np.zeros(s.shape) for k, s in values.statistics.items()
        }  # absent: contributes 0 to every sum and to the count
    result = shift_risk(_shifts(values, target, other), prior)
    trivial = min(prior, 1.0 - prior)
    risk_value, lower, upper = _result(result.lower, result.upper, trivial)
    odds = math.exp(result.log_odds_bound) if result.log_odds_bound < 700 else math.inf
    return MembershipRisk(
        risk=risk_value,
        trivial_risk=trivial,
        advantage=trivial - risk_value,
        posterior_odds_bound=odds,
        epsilon_bound=values.epsilon_bound,
        lower=lower,
        upper=upper,
        method="exact" if result.exact else "quadrature",
        neighbouring=neighbouring,
    )


# -- attribute ------------------------------------------------------------------------------------
def attribute_risk(
    plan: Plan | Release | Mapping[str, tuple[Statistic, Mechanism | None]],
    candidates: Sequence[Mapping[str, object]],
    prior: Sequence[float] | None = None,
) -> AttributeRisk:
    r"""Bayes risk of the best attacker guessing which candidate record the target holds.

    The target is in the data (under either relation); the attacker knows every other record,
    that the target's record is one of ``candidates`` with probabilities ``prior``, sees the whole
    release and guesses by maximum a posteriori. Its Bayes risk under 0-1 loss is
    :math:`1 - \int \max_k \pi_k f_k(y)\,dy` over the coordinates in which the candidates differ
    (the count never does). Two candidates reduce to :func:`membership_risk`'s engine (the shift is
    their difference). More are summed exactly over the integers for discrete mechanisms and
    integrated by a tensor-product rule over at most 3 continuous coordinates (cell-wise maxima
    and minima of each density give ``upper`` and ``lower``; tight in one continuous coordinate
    alone, looser in two or three, or beside discrete coordinates, which leave ``2**20`` cells
    divided by their joint support's points to the continuous ones: then read the bounds).

    Parameters
    ----------
    plan : Plan, Release or dict
        As in :func:`membership_risk`.
    candidates : sequence of dict
        At least two records, each as ``record`` in :func:`membership_risk`.
    prior : sequence of float, optional
        The attacker's prior probabilities of the candidates: positive, summing to 1. Default
        uniform.

    Returns
    -------
    AttributeRisk

    Raises
    ------
    ValueError
        If a candidate misses a statistic or lies outside its bounds, or ``prior`` is not
        positive, does not sum to 1 or has the wrong length.
    NotImplementedError
        For more than two candidates that differ in more than 3 continuous coordinates, or in
        discrete ones whose joint support is too large to sum.

    Examples
    --------
    A binary attribute counted with a discrete Laplace at epsilon 1 (its sensitivity is 1): the
    attacker guesses right with probability :math:`e/(1 + e)`.

    >>> from pymc_unbounded_dp import release as rl, risk
    >>> plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True)], epsilon=1.0)
    >>> r = risk.attribute_risk(plan, [{"s": 0}, {"s": 1}])
    >>> round(1 - r.risk, 6), r.trivial_risk
    (0.731059, 0.5)
    """
    owner = "attribute_risk"
    values = _plan_values(plan, owner, ("add/remove", "replace-one"))
    if isinstance(candidates, Mapping | str) or not isinstance(candidates, Sequence):
        raise TypeError(
            f"{owner}: `candidates` must be a list of records (dicts), got "
            f"{type(candidates).__name__}."
        )
    if len(candidates) < 2:
        raise ValueError(f"{owner}: `candidates` must hold at least two records.")
    records = [_record(values, c, owner, f"candidates[{i}]") for i, c in enumerate(candidates)]
    weights = _candidate_prior(prior, len(records), owner)
    trivial = 1.0 - float(weights.max())
    if len(records) == 2:
        shifts = _shifts(values, records[0], records[1])
        result = shift_risk(shifts, float(weights[0]))
        risk_value, lower, upper = _result(result.lower, result.upper, trivial)
        exact = result.exact
    else:
        risk_value, lower, upper, exact = attribute_success(
            values.mechanisms, records, weights, owner
        )
    return AttributeRisk(
        risk=risk_value,
        trivial_risk=trivial,
        advantage=trivial - risk_value,
        lower=lower,
        upper=upper,
        method="exact" if exact else "quadrature",
    )


def _candidate_prior(prior, size: int, owner: str) -> np.ndarray:
    if prior is None:
        return np.full(size, 1.0 / size)
    try:
        weights = np.asarray(prior, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `prior` must be a list of numbers, got {prior!r}.") from None
    if weights.shape != (size,):
        raise ValueError(
            f"{owner}: `prior` must give one probability per candidate ({size}), got shape "
            f"{weights.shape}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
        raise ValueError(f"{owner}: `prior` must be positive, got {weights.tolist()}.")
    if not math.isclose(math.fsum(weights), 1.0, rel_tol=0, abs_tol=1e-9):
        raise ValueError(
            f"{owner}: `prior` must sum to 1 (a probability per candidate), got sum "
            f"{math.fsum(weights)!r}."
        )
    return weights / math.fsum(weights)
