"""Families of disclosure rules and the exhaustive search for the optimal rule.

Three families, each disclosing exactly ``k`` cells in some unit:

``"total"``
    ``k`` disclosed cells in the whole table: ``C(n m, k)`` rules.
``"per_record"``
    ``k`` disclosed attributes in every record: ``C(m, k) ** n`` rules.
``"per_attribute"``
    ``k`` disclosed records in every attribute: ``C(n, k) ** m`` rules.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pandas as pd

from ._core import encode, loss_values
from ._sensitivity import Sensitivity
from ._validation import check_count, check_model, check_records

FAMILIES = ("total", "per_record", "per_attribute")


class OptimalRule(NamedTuple):
    """Result of :func:`optimal_rule`: the best rule, its risk and the search size."""

    rule: pd.DataFrame
    risk: float
    n_rules: int


def _check_family(records: pd.DataFrame, k: object, family: object) -> int:
    if family not in FAMILIES:
        raise ValueError(f"`family` must be one of {FAMILIES}, got {family!r}")
    k = check_count(k, "k")
    n, m = records.shape
    limit, unit = {
        "total": (n * m, "number of cells"),
        "per_record": (m, "number of attributes"),
        "per_attribute": (n, "number of records"),
    }[family]
    if k > limit:
        raise ValueError(
            f"`k`={k} is larger than the {unit} of `records` ({limit}) for the "
            f"{family!r} family; choose k <= {limit}"
        )
    return k


def count_rules(records: pd.DataFrame, k: int, family: str = "per_record") -> int:
    """Number of rules in a family.

    Parameters
    ----------
    records : pandas.DataFrame
        The records the rules apply to.
    k : int
        Disclosed cells per unit of the family (see the module notes).
    family : {"total", "per_record", "per_attribute"}
        The rule family.

    Returns
    -------
    int
        ``C(n m, k)``, ``C(m, k) ** n`` or ``C(n, k) ** m``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40, 50], "zip": ["a", "b", "c"]})
    >>> risk.count_rules(records, 1, "per_record"), risk.count_rules(records, 2, "total")
    (8, 15)
    """
    records = check_records(records)
    k = _check_family(records, k, family)
    n, m = records.shape
    if family == "total":
        return math.comb(n * m, k)
    if family == "per_record":
        return math.comb(m, k) ** n
    return math.comb(n, k) ** m


def _masks(n: int, m: int, k: int, family: str) -> Iterator[np.ndarray]:
    if family == "total":
        for cells in itertools.combinations(range(n * m), k):
            mask = np.zeros(n * m, dtype=bool)
            mask[list(cells)] = True
            yield mask.reshape(n, m)
        return
    rows, width = (n, m) if family == "per_record" else (m, n)
    patterns = np.zeros((math.comb(width, k), width), dtype=bool)
    for p, chosen in enumerate(itertools.combinations(range(width), k)):
        patterns[p, list(chosen)] = True
    for choice in itertools.product(range(len(patterns)), repeat=rows):
        mask = patterns[list(choice)]
        yield mask if family == "per_record" else mask.T


def enumerate_rules(
    records: pd.DataFrame, k: int, family: str = "per_record"
) -> Iterator[pd.DataFrame]:
    """Generate every rule of a family, as boolean tables (True = disclosed).

    Parameters
    ----------
    records : pandas.DataFrame
        The records the rules apply to.
    k : int
        Disclosed cells per unit of the family.
    family : {"total", "per_record", "per_attribute"}
        ``k`` cells in total, ``k`` attributes per record, or ``k`` records
        per attribute.

    Returns
    -------
    iterator of pandas.DataFrame
        Each rule once, with the labels of ``records`` (arguments are checked
        at the call, rules are built lazily); :func:`count_rules` tells how
        many there are.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]})
    >>> [rule["age"].tolist() for rule in risk.enumerate_rules(records, 1, "per_attribute")]
    [[True, False], [True, False], [False, True], [False, True]]
    """
    records = check_records(records)
    k = _check_family(records, k, family)
    return (
        pd.DataFrame(mask, index=records.index, columns=records.columns)
        for mask in _masks(*records.shape, k, family)
    )


def random_rule(
    records: pd.DataFrame,
    k: int,
    family: str = "per_record",
    *,
    seed: int | np.random.Generator | None = None,
) -> pd.DataFrame:
    """Draw a rule uniformly at random from a family.

    Parameters
    ----------
    records : pandas.DataFrame
        The records the rule applies to.
    k : int
        Disclosed cells per unit of the family.
    family : {"total", "per_record", "per_attribute"}
        The rule family.
    seed : int, numpy.random.Generator or None
        Seed of the random draw.

    Returns
    -------
    pandas.DataFrame
        A boolean table with the labels of ``records``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"], "sex": ["f", "m"]})
    >>> risk.random_rule(records, 2, "per_record", seed=0).sum(axis=1).tolist()
    [2, 2]
    """
    records = check_records(records)
    k = _check_family(records, k, family)
    rng = np.random.default_rng(seed)
    n, m = records.shape
    if family == "total":
        mask = np.zeros(n * m, dtype=bool)
        mask[rng.choice(n * m, size=k, replace=False)] = True
        mask = mask.reshape(n, m)
    else:
        axis = 1 if family == "per_record" else 0
        ranks = np.argsort(np.argsort(rng.random((n, m)), axis=axis), axis=axis)
        mask = ranks < k
    return pd.DataFrame(mask, index=records.index, columns=records.columns)


def optimal_rule(
    records: pd.DataFrame,
    dictionary: pd.DataFrame,
    sensitivity: Sensitivity,
    k: int,
    family: str = "per_record",
    *,
    model: str = "exact",
    max_rules: int = 10_000,
) -> OptimalRule:
    """The rule of a family with the smallest risk, by exhaustive search.

    Only for small problems: the search evaluates every rule of the family
    (see :func:`count_rules`) and refuses to start when there are more than
    ``max_rules``.

    Parameters
    ----------
    records, dictionary, sensitivity
        As in :func:`risk`.
    k : int
        Disclosed cells per unit of the family.
    family : {"total", "per_record", "per_attribute"}
        The rule family searched.
    model : {"exact", "independent"}
        How ``|rho|`` is computed (see :func:`consistent_counts`).
    max_rules : int
        Largest number of rules the search may evaluate.

    Returns
    -------
    OptimalRule
        ``(rule, risk, n_rules)``: the first rule (in :func:`enumerate_rules`
        order) reaching the smallest risk, that risk, and the number of rules
        evaluated.

    Raises
    ------
    ValueError
        If the family holds more than ``max_rules`` rules.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> dictionary = pd.DataFrame({"age": [30, 30, 40], "zip": ["a", "b", "b"]})
    >>> best = risk.optimal_rule(records, dictionary, risk.constant(1.0), 1)
    >>> best.risk, best.n_rules
    (0.5, 4)
    """
    records = check_records(records)
    k = _check_family(records, k, family)
    model = check_model(model)
    max_rules = check_count(max_rules, "max_rules", minimum=1)
    size = count_rules(records, k, family)
    if size > max_rules:
        raise ValueError(
            f"exhaustive search over the {family!r} family with k={k} on "
            f"{records.shape[0]} records x {records.shape[1]} attributes would evaluate "
            f"{size:,} rules, more than `max_rules`={max_rules:,}; raise `max_rules`, "
            "use a smaller table, or use min_risk_rule for the per-record family"
        )
    encoded = encode(records, dictionary)
    best_rule, best_risk = None, np.inf
    for rule in enumerate_rules(records, k, family):
        value = float(loss_values(records, rule, encoded, sensitivity, model).mean())
        if value < best_risk:
            best_rule, best_risk = rule, value
    return OptimalRule(best_rule, best_risk, size)
