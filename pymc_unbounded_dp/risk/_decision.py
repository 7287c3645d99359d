"""Bayes risk under a prior over dictionaries, and the minimax rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._core import encode, loss_values
from ._sensitivity import Sensitivity
from ._validation import check_count, check_model, check_records, check_rule

DictionarySampler = Callable[[np.random.Generator], pd.DataFrame]


class BayesRisk(NamedTuple):
    """Bayes risk estimate and its Monte Carlo standard error (0 when exact)."""

    estimate: float
    std_error: float


class MinimaxResult(NamedTuple):
    """The minimax rule, its position among the candidates and all their risks."""

    rule: pd.DataFrame
    index: int
    worst_risk: float
    risks: pd.DataFrame  # one row per candidate rule, one column per dictionary


def _dictionary_list(dictionaries: object) -> list[pd.DataFrame]:
    if isinstance(dictionaries, pd.DataFrame) or not isinstance(dictionaries, Sequence):
        raise TypeError(
            "`dictionaries` must be a list of DataFrames (wrap a single dictionary in a list)"
        )
    if len(dictionaries) == 0:
        raise ValueError("`dictionaries` is empty; give at least one dictionary")
    return list(dictionaries)


def bayes_risk(
    records: pd.DataFrame,
    rule: pd.DataFrame,
    dictionaries: Sequence[pd.DataFrame] | DictionarySampler,
    prior: ArrayLike | None,
    sensitivity: Sensitivity,
    *,
    n_samples: int = 1000,
    seed: int | np.random.Generator | None = None,
    model: str = "exact",
) -> BayesRisk:
    """Bayes risk ``E_{theta ~ prior} R(delta, theta)`` of a rule.

    Parameters
    ----------
    records, rule, sensitivity
        As in :func:`losses`.
    dictionaries : list of pandas.DataFrame or callable
        Either a finite list of dictionaries, weighted by ``prior``, or a
        sampler ``sampler(rng) -> DataFrame`` drawing one dictionary from the
        prior with the :class:`numpy.random.Generator` it is given.
    prior : array_like or None
        With a list: the prior probability of each dictionary (non-negative,
        summing to 1). With a sampler: must be None.
    n_samples : int
        Monte Carlo size (>= 2) when ``dictionaries`` is a sampler.
    seed : int, numpy.random.Generator or None
        Seeds the generator handed to the sampler.
    model : {"exact", "independent"}
        How ``|rho|`` is computed (see :func:`consistent_counts`).

    Returns
    -------
    BayesRisk
        ``(estimate, std_error)``. For a finite list the estimate is exact and
        ``std_error`` is 0; for a sampler it is the Monte Carlo mean of the
        risks and its standard error ``sd / sqrt(n_samples)``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40]}, index=["ann", "bob"])
    >>> rule = pd.DataFrame({"age": [True, True]}, index=records.index)
    >>> small = pd.DataFrame({"age": [30, 40]})
    >>> large = pd.DataFrame({"age": [30, 30, 40, 40]})
    >>> risk.bayes_risk(records, rule, [small, large], [0.5, 0.5], risk.constant(1.0))
    BayesRisk(estimate=0.75, std_error=0.0)
    """
    records = check_records(records)
    rule = check_rule(rule, records)
    model = check_model(model)

    def risk_of(dictionary: pd.DataFrame) -> float:
        encoded = encode(records, dictionary)
        return float(loss_values(records, rule, encoded, sensitivity, model).mean())

    if callable(dictionaries):
        if prior is not None:
            raise ValueError(
                "`prior` must be None when `dictionaries` is a sampler: the sampler draws "
                "from the prior"
            )
        n_samples = check_count(n_samples, "n_samples", minimum=2)
        rng = np.random.default_rng(seed)
        risks = np.array([risk_of(dictionaries(rng)) for _ in range(n_samples)])
        return BayesRisk(float(risks.mean()), float(risks.std(ddof=1) / np.sqrt(n_samples)))

    dictionaries = _dictionary_list(dictionaries)
    if prior is None:
        raise ValueError("`prior` is required with a list of dictionaries: one weight each")
    try:
        weights = np.asarray(prior, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(
            f"`prior` must hold numbers (one weight per dictionary), got {prior!r}"
        ) from None
    if weights.shape != (len(dictionaries),):
        raise ValueError(
            f"`prior` must have one weight per dictionary ({len(dictionaries)}), "
            f"got shape {weights.shape}"
        )
    if not np.isfinite(weights).all() or (weights < 0).any():
        raise ValueError("`prior` must hold finite, non-negative probabilities")
    if not np.isclose(weights.sum(), 1.0, rtol=0, atol=1e-9):
        raise ValueError(
            f"`prior` must sum to 1, sums to {weights.sum():.6g}; divide it by its sum"
        )
    risks = np.array([risk_of(dictionary) for dictionary in dictionaries])
    return BayesRisk(float(weights @ risks), 0.0)


def minimax_rule(
    records: pd.DataFrame,
    rules: Sequence[pd.DataFrame],
    dictionaries: Sequence[pd.DataFrame],
    sensitivity: Sensitivity,
    *,
    model: str = "exact",
) -> MinimaxResult:
    """The candidate rule whose worst risk over a set of dictionaries is smallest.

    Parameters
    ----------
    records, sensitivity
        As in :func:`losses`.
    rules : list of pandas.DataFrame
        Candidate disclosure rules (boolean tables with the labels of
        ``records``), e.g. from :func:`enumerate_rules`.
    dictionaries : list of pandas.DataFrame
        The dictionaries the attacker might hold.
    model : {"exact", "independent"}
        How ``|rho|`` is computed (see :func:`consistent_counts`).

    Returns
    -------
    MinimaxResult
        ``rule`` (the first minimiser if several tie), its ``index`` in
        ``rules``, its ``worst_risk`` and the table ``risks`` of every
        candidate's risk (rows) against every dictionary (columns).

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> rules = list(risk.enumerate_rules(records, 1, "per_record"))
    >>> dictionaries = [pd.DataFrame({"age": [30, 30, 40], "zip": ["a", "b", "b"]})]
    >>> result = risk.minimax_rule(records, rules, dictionaries, risk.constant(1.0))
    >>> result.worst_risk
    0.5
    """
    records = check_records(records)
    model = check_model(model)
    if isinstance(rules, pd.DataFrame) or not isinstance(rules, Sequence):
        raise TypeError("`rules` must be a list of boolean DataFrames (wrap a single rule)")
    if len(rules) == 0:
        raise ValueError("`rules` is empty; give at least one candidate rule")
    rules = [check_rule(rule, records, f"rules[{i}]") for i, rule in enumerate(rules)]
    dictionaries = _dictionary_list(dictionaries)
    table = np.empty((len(rules), len(dictionaries)))
    for d, dictionary in enumerate(dictionaries):
        encoded = encode(records, dictionary)
        for r, rule in enumerate(rules):
            table[r, d] = loss_values(records, rule, encoded, sensitivity, model).mean()
    worst = table.max(axis=1)
    best = int(np.argmin(worst))
    risks = pd.DataFrame(table, index=pd.RangeIndex(len(rules), name="rule"))
    risks.columns.name = "dictionary"
    return MinimaxResult(rules[best], best, float(worst[best]), risks)
