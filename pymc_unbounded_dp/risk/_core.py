"""Consistency, loss and risk of a disclosure rule against one dictionary.

Notation (Lebanon, Scannapieco, Fouad and Bertino, PSD 2006): records
``x_i``, a rule ``delta`` releasing ``y_i = delta(x_i)`` (suppressed cells
become missing), an attacker's dictionary ``theta``, the set ``rho(y, theta)``
of dictionary entries consistent with ``y``, the loss
``l(y, theta) = Phi(y) / |rho(y, theta)|`` (0 if ``rho`` is empty) and the risk
``R(delta, theta) = mean_i l(delta(x_i), theta)``.

Internally every attribute is encoded as integer codes shared by the records
and the dictionary, with -1 for a missing value (which matches anything).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ._sensitivity import Sensitivity, evaluate_sensitivity
from ._validation import check_model, check_records, check_rule, common_attributes

#: Number of boolean cells (released rows x dictionary rows) compared at once.
CHUNK_CELLS = 1 << 22


class Encoded(NamedTuple):
    """Integer codes of the attributes shared by records and a dictionary."""

    positions: np.ndarray  # column positions of the shared attributes in the records
    records: np.ndarray  # (n, m) codes of the records, -1 where missing
    dictionary: np.ndarray  # (N, m) codes of the dictionary, -1 where missing


def encode(
    records: pd.DataFrame, dictionary: pd.DataFrame, records_name: str = "records"
) -> Encoded:
    """Encode the attributes shared by ``records`` and ``dictionary`` as integer codes.

    The ``m`` shared attributes are taken in the records' column order; equal
    values get equal codes in both tables and missing values get -1. An
    attribute holding values of different kinds in the two (strings against
    integers) is refused: it could never match.
    """
    attributes = common_attributes(records, dictionary, records_name=records_name)
    n = len(records)
    record_codes = np.empty((n, len(attributes)), dtype=np.int64)
    dictionary_codes = np.empty((len(dictionary), len(attributes)), dtype=np.int64)
    for j, attribute in enumerate(attributes):
        values = np.concatenate(
            [
                records[attribute].to_numpy(dtype=object),
                dictionary[attribute].to_numpy(dtype=object),
            ]
        )
        codes, _ = pd.factorize(values)
        record_codes[:, j] = codes[:n]
        dictionary_codes[:, j] = codes[n:]
    positions = records.columns.get_indexer(attributes)
    return Encoded(positions, record_codes, dictionary_codes)


def count_exact(released: np.ndarray, dictionary: np.ndarray) -> np.ndarray:
    """``|rho(y, theta)|`` for every row of ``released`` (codes from :func:`encode`).

    Identical rows are compared once; the comparison is a boolean broadcast over
    blocks of released rows against all distinct dictionary rows, one attribute
    at a time, so memory stays below ``CHUNK_CELLS`` booleans per block.
    """
    if len(dictionary) == 0:
        return np.zeros(len(released), dtype=np.int64)
    entries, multiplicity = np.unique(dictionary, axis=0, return_counts=True)
    rows, inverse = np.unique(released, axis=0, return_inverse=True)
    entry_missing = entries < 0
    counts = np.empty(len(rows), dtype=np.int64)
    step = max(1, CHUNK_CELLS // len(entries))
    for start in range(0, len(rows), step):
        block = rows[start : start + step]
        match = np.ones((len(block), len(entries)), dtype=bool)
        for j in range(block.shape[1]):
            match &= (
                (block[:, j, None] == entries[None, :, j])
                | entry_missing[None, :, j]
                | (block[:, j, None] < 0)
            )
        counts[start : start + step] = match @ multiplicity
    return counts[inverse.reshape(-1)]


def match_shares(released: np.ndarray, dictionary: np.ndarray) -> np.ndarray:
    """``p_j(y_ij)``: share of dictionary entries whose attribute j is ``y_ij`` or missing.

    1 where ``y_ij`` is missing. Computed from value counts per attribute, so the
    cost is linear in the number of records plus dictionary entries.
    """
    size = len(dictionary)
    shares = np.ones(released.shape, dtype=float)
    for j in range(released.shape[1]):
        entry = dictionary[:, j]
        known = released[:, j] >= 0
        n_codes = int(max(released[:, j].max(), entry.max(initial=-1))) + 1
        value_counts = np.bincount(entry[entry >= 0], minlength=n_codes)
        n_missing = int((entry < 0).sum())
        shares[known, j] = (value_counts[released[known, j]] + n_missing) / size
    return shares


def count_independent(released: np.ndarray, dictionary: np.ndarray) -> np.ndarray:
    """``N * prod_j p_j(y_j)``: the consistent count if attributes were independent."""
    if len(dictionary) == 0:
        return np.zeros(len(released))
    return len(dictionary) * match_shares(released, dictionary).prod(axis=1)


COUNTERS = {"exact": count_exact, "independent": count_independent}


def loss_values(
    records: pd.DataFrame,
    rule: pd.DataFrame,
    encoded: Encoded,
    sensitivity: Sensitivity,
    model: str,
) -> np.ndarray:
    """Losses of ``rule`` from pre-encoded records and dictionary (arguments checked)."""
    disclosed = rule.to_numpy(dtype=bool)[:, encoded.positions]
    released = np.where(disclosed, encoded.records, -1)
    counts = COUNTERS[model](released, encoded.dictionary)
    phi = evaluate_sensitivity(sensitivity, records, rule)
    return np.divide(phi, counts, out=np.zeros(len(phi)), where=counts > 0)


def disclose(records: pd.DataFrame, rule: pd.DataFrame) -> pd.DataFrame:
    """Apply a disclosure rule: keep the disclosed cells, suppress the others.

    Parameters
    ----------
    records : pandas.DataFrame
        One row per record (the index is the record identifier), one column per
        attribute; missing values are NA.
    rule : pandas.DataFrame
        Boolean table with the labels of ``records``; True = disclosed.

    Returns
    -------
    pandas.DataFrame
        The released records ``y_i = delta(x_i)``: suppressed cells are missing
        (integer columns become float, as with :meth:`pandas.DataFrame.where`).

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> rule = pd.DataFrame({"age": [True, False], "zip": [False, True]}, index=records.index)
    >>> risk.disclose(records, rule)
          age  zip
    ann  30.0  NaN
    bob   NaN    b
    """
    records = check_records(records)
    return records.where(check_rule(rule, records))


def consistent_counts(
    released: pd.DataFrame, dictionary: pd.DataFrame, *, model: str = "exact"
) -> pd.Series:
    """Number ``|rho(y, theta)|`` of dictionary entries consistent with each released record.

    An entry is consistent with ``y`` if it agrees with ``y`` on every attribute
    (column present in both tables) where both are non-missing; attributes the
    dictionary lacks do not constrain.

    Parameters
    ----------
    released : pandas.DataFrame
        Released records (suppressed cells missing), e.g. from :func:`disclose`.
    dictionary : pandas.DataFrame
        The attacker's dictionary: one row per known identity (the index), one
        column per attribute; missing values match anything. It must share at
        least one attribute with ``released``.
    model : {"exact", "independent"}
        ``"exact"`` counts the consistent entries. ``"independent"`` returns
        ``N * prod_{j: y_j non-missing} p_j(y_j)`` with ``p_j(v)`` the share of
        entries whose attribute ``j`` is ``v`` or missing: the count if the
        attributes of the dictionary were independent (used by
        :func:`min_risk_rule`).

    Returns
    -------
    pandas.Series
        Indexed like ``released``: integers for ``"exact"``, floats for
        ``"independent"``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> released = pd.DataFrame({"age": [30, None], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> dictionary = pd.DataFrame({"age": [30, 30, None], "zip": ["a", "b", "a"]})
    >>> risk.consistent_counts(released, dictionary).tolist()
    [2, 1]
    """
    released = check_records(released, "released")
    model = check_model(model)
    encoded = encode(released, dictionary, "released")
    counts = COUNTERS[model](encoded.records, encoded.dictionary)
    return pd.Series(counts, index=released.index, name="consistent")


def losses(
    records: pd.DataFrame,
    rule: pd.DataFrame,
    dictionary: pd.DataFrame,
    sensitivity: Sensitivity,
    *,
    model: str = "exact",
) -> pd.Series:
    """Loss ``l(delta(x_i), theta) = Phi / |rho|`` of every record (0 if ``rho`` is empty).

    Parameters
    ----------
    records : pandas.DataFrame
        The records ``x_i`` (index = record identifier; missing values NA).
    rule : pandas.DataFrame
        Boolean table with the labels of ``records``; True = disclosed.
    dictionary : pandas.DataFrame
        The attacker's dictionary (see :func:`consistent_counts`).
    sensitivity : callable
        ``sensitivity(records, rule)`` returning one finite value >= 0 per
        record, e.g. :func:`constant`, :func:`additive`, :func:`multiplicative`.
    model : {"exact", "independent"}
        How ``|rho|`` is computed (see :func:`consistent_counts`).

    Returns
    -------
    pandas.Series
        The losses, indexed like ``records``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> rule = pd.DataFrame({"age": [True, True], "zip": [False, True]}, index=records.index)
    >>> dictionary = pd.DataFrame({"age": [30, 30, 40], "zip": ["a", "b", "c"]})
    >>> risk.losses(records, rule, dictionary, risk.constant(1.0)).tolist()
    [0.5, 0.0]
    """
    records = check_records(records)
    rule = check_rule(rule, records)
    model = check_model(model)
    values = loss_values(records, rule, encode(records, dictionary), sensitivity, model)
    return pd.Series(values, index=records.index, name="loss")


def risk(
    records: pd.DataFrame,
    rule: pd.DataFrame,
    dictionary: pd.DataFrame,
    sensitivity: Sensitivity,
    *,
    model: str = "exact",
) -> float:
    """Risk ``R(delta, theta)``: the mean loss over the records.

    Parameters are those of :func:`losses`.

    Returns
    -------
    float
        ``mean_i l(delta(x_i), theta)``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> rule = pd.DataFrame({"age": [True, True], "zip": [False, False]}, index=records.index)
    >>> dictionary = pd.DataFrame({"age": [30, 30, 40], "zip": ["a", "b", "c"]})
    >>> risk.risk(records, rule, dictionary, risk.constant(1.0))
    0.75
    """
    return float(losses(records, rule, dictionary, sensitivity, model=model).mean())
