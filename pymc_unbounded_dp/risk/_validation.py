"""Argument checks shared by the risk modules.

Every check raises ``TypeError`` or ``ValueError`` with a message that names
the offending argument and says what to change.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

MODELS = ("exact", "independent")


def _preview(labels) -> str:
    labels = list(labels)
    shown = ", ".join(repr(label) for label in labels[:5])
    return shown + (", ..." if len(labels) > 5 else "")


def check_records(records: object, name: str = "records") -> pd.DataFrame:
    """Check a table of records: a non-empty DataFrame with unique labels."""
    if not isinstance(records, pd.DataFrame):
        raise TypeError(
            f"`{name}` must be a pandas DataFrame (one row per record, one column per "
            f"attribute), got {type(records).__name__}"
        )
    if records.shape[0] == 0 or records.shape[1] == 0:
        raise ValueError(
            f"`{name}` must have at least one row and one column, got shape {records.shape}"
        )
    if not records.index.is_unique:
        dup = records.index[records.index.duplicated()].unique()
        raise ValueError(
            f"the index of `{name}` identifies records and must be unique; "
            f"duplicated labels: {_preview(dup)}"
        )
    if not records.columns.is_unique:
        dup = records.columns[records.columns.duplicated()].unique()
        raise ValueError(f"the columns of `{name}` must be unique; duplicated: {_preview(dup)}")
    return records


def align_like(table: object, records: pd.DataFrame, name: str) -> pd.DataFrame:
    """Check that ``table`` has the labels of ``records`` and return it in their order."""
    if not isinstance(table, pd.DataFrame):
        raise TypeError(
            f"`{name}` must be a pandas DataFrame shaped like `records`, got {type(table).__name__}"
        )
    if table.shape != records.shape:
        raise ValueError(
            f"`{name}` has shape {table.shape} but `records` has shape {records.shape}; "
            f"`{name}` needs one row per record and one column per attribute"
        )
    missing_rows = records.index.difference(table.index, sort=False)
    if len(missing_rows):
        raise ValueError(
            f"the index of `{name}` must hold the record identifiers of `records`; "
            f"missing: {_preview(missing_rows)}"
        )
    missing_cols = records.columns.difference(table.columns, sort=False)
    if len(missing_cols):
        raise ValueError(
            f"the columns of `{name}` must be the attributes of `records`; "
            f"missing: {_preview(missing_cols)}"
        )
    return table.reindex(index=records.index, columns=records.columns)


def check_rule(rule: object, records: pd.DataFrame, name: str = "rule") -> pd.DataFrame:
    """Check a disclosure rule: a boolean table with the labels of ``records``."""
    rule = align_like(rule, records, name)
    for column, dtype in rule.dtypes.items():
        if dtype != np.bool_:
            raise TypeError(
                f"`{name}` must be a boolean table (True = disclosed); column {column!r} has "
                f"dtype {dtype}; convert it, e.g. `{name}.astype(bool)` after filling missing "
                "cells"
            )
    return rule


def check_weights(
    weights: object, name: str = "weights", nonnegative: bool = False
) -> pd.DataFrame:
    """Check a table of numeric, finite, non-missing weights."""
    if not isinstance(weights, pd.DataFrame):
        raise TypeError(
            f"`{name}` must be a pandas DataFrame shaped like the records, "
            f"got {type(weights).__name__}"
        )
    for column, dtype in weights.dtypes.items():
        if not (pd.api.types.is_numeric_dtype(dtype) and not pd.api.types.is_bool_dtype(dtype)):
            raise TypeError(f"`{name}` must hold numbers; column {column!r} has dtype {dtype}")
    missing = weights.isna().to_numpy()
    if missing.any():
        row, col = np.argwhere(missing)[0]
        raise ValueError(
            f"`{name}` has {int(missing.sum())} missing entries (first at record "
            f"{weights.index[row]!r}, attribute {weights.columns[col]!r}); give every cell a "
            "weight (0 for an attribute that adds no sensitivity)"
        )
    values = weights.to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise ValueError(f"`{name}` must be finite; it holds infinite entries")
    if nonnegative and (values < 0).any():
        raise ValueError(
            f"`{name}` must be non-negative for an additive sensitivity (a negative "
            "sensitivity would reward disclosure); shift or clip the weights"
        )
    return weights


def check_count(value: object, name: str, minimum: int = 0) -> int:
    """Check an integer argument such as ``k`` or ``n_samples``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"`{name}` must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"`{name}` must be >= {minimum}, got {value}")
    return int(value)


def check_k_attributes(k: object, records: pd.DataFrame) -> int:
    """Check ``k`` disclosed attributes per record: 0 <= k <= number of attributes."""
    k = check_count(k, "k")
    if k > records.shape[1]:
        raise ValueError(
            f"`k`={k} is larger than the number of attributes of `records` "
            f"({records.shape[1]}); choose k <= {records.shape[1]}"
        )
    return k


#: Kinds of values that can equal each other, by ``pandas.api.types.infer_dtype``.
_VALUE_KINDS = {
    "integer": "numbers",
    "floating": "numbers",
    "mixed-integer-float": "numbers",
    "decimal": "numbers",
    "integer-na": "numbers",
    "complex": "numbers",
    "string": "strings",
    "bytes": "bytes",
    "boolean": "booleans",
    "datetime64": "dates",
    "datetime": "dates",
    "date": "dates",
    "timedelta64": "durations",
    "timedelta": "durations",
    "time": "times",
    "period": "periods",
}


def _value_kind(column: pd.Series) -> str | None:
    """What a column holds (``"numbers"``, ``"strings"``, ...); ``None`` if all missing or mixed."""
    present = column.dropna()
    if present.empty:
        return None
    if isinstance(present.dtype, pd.CategoricalDtype):
        present = pd.Series(np.asarray(present, dtype=object))
    return _VALUE_KINDS.get(pd.api.types.infer_dtype(present, skipna=True))


def check_comparable(
    records: pd.DataFrame,
    dictionary: pd.DataFrame,
    attributes: list,
    records_name: str,
    name: str,
) -> None:
    """Refuse an attribute whose values in ``records`` and ``dictionary`` cannot be equal.

    Strings never equal integers: the dictionary would match no record on that attribute, every
    loss would be 0, and a risk-minimising rule would disclose the attribute everywhere.
    """
    for attribute in attributes:
        ours, theirs = _value_kind(records[attribute]), _value_kind(dictionary[attribute])
        if ours is not None and theirs is not None and ours != theirs:
            raise TypeError(
                f"attribute {attribute!r} holds {ours} in `{records_name}` (dtype "
                f"{records[attribute].dtype}) but {theirs} in `{name}` (dtype "
                f"{dictionary[attribute].dtype}): no entry of `{name}` could match a record on "
                "it, so every risk would be 0 and a rule minimising risk would disclose it for "
                f"every record. Convert one column to the other's type, e.g. "
                f"`{name}[{attribute!r}] = {name}[{attribute!r}].astype("
                f"{records_name}[{attribute!r}].dtype)`"
            )


def common_attributes(
    records: pd.DataFrame,
    dictionary: object,
    name: str = "dictionary",
    records_name: str = "records",
) -> list:
    """Attributes of ``records`` that the dictionary also holds (in the records' order), checked
    to hold values of the same kind in both (:func:`check_comparable`)."""
    if not isinstance(dictionary, pd.DataFrame):
        raise TypeError(
            f"`{name}` must be a pandas DataFrame (one row per known identity, one column per "
            f"attribute), got {type(dictionary).__name__}"
        )
    if not dictionary.columns.is_unique:
        dup = dictionary.columns[dictionary.columns.duplicated()].unique()
        raise ValueError(f"the columns of `{name}` must be unique; duplicated: {_preview(dup)}")
    common = [column for column in records.columns if column in dictionary.columns]
    if not common:
        raise ValueError(
            f"`{name}` has no attribute in common with the records (records: "
            f"{_preview(records.columns)}; {name}: {_preview(dictionary.columns)}), so every "
            f"entry would be consistent with every record; name the columns of `{name}` "
            "after the attributes of the records"
        )
    check_comparable(records, dictionary, common, records_name, name)
    return common


def check_model(model: object) -> str:
    """Check the dictionary model name."""
    if model not in MODELS:
        raise ValueError(f"`model` must be one of {MODELS}, got {model!r}")
    return model
