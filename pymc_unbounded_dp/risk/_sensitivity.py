"""Sensitivities ``Phi(y)`` of released records.

A sensitivity is any callable ``sensitivity(records, rule) -> values`` that gets
the records table and the boolean rule table (True = disclosed, same labels as
the records) and returns one non-negative, finite value per record (an array of
length ``len(records)`` in the records' order, or a Series indexed like the
records). It may depend on the record (through its row of ``records`` or its
identifier, the index label) and on which of its attributes are disclosed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from ._validation import align_like, check_weights

Sensitivity: TypeAlias = Callable[[pd.DataFrame, pd.DataFrame], ArrayLike]


class _Constant:
    def __init__(self, c: float) -> None:
        self.c = c

    def __call__(self, records: pd.DataFrame, rule: pd.DataFrame) -> np.ndarray:
        return np.full(len(records), self.c)

    def __repr__(self) -> str:
        return f"constant({self.c!r})"


class _Weighted:
    """Sensitivity driven by the sum of the weights of the disclosed cells."""

    def __init__(self, weights: pd.DataFrame) -> None:
        self.weights = weights

    def disclosed_weight(self, records: pd.DataFrame, rule: pd.DataFrame) -> np.ndarray:
        weights = align_like(self.weights, records, "weights").to_numpy(dtype=float)
        mask = align_like(rule, records, "rule").to_numpy(dtype=bool)
        return np.where(mask, weights, 0.0).sum(axis=1)

    def __repr__(self) -> str:
        return f"{type(self).__name__[1:].lower()}(weights of shape {self.weights.shape})"


class _Additive(_Weighted):
    def __call__(self, records: pd.DataFrame, rule: pd.DataFrame) -> np.ndarray:
        return self.disclosed_weight(records, rule)


class _Multiplicative(_Weighted):
    def __call__(self, records: pd.DataFrame, rule: pd.DataFrame) -> np.ndarray:
        return np.exp(self.disclosed_weight(records, rule))


def constant(c: float) -> Sensitivity:
    """Constant sensitivity ``Phi(y) = c`` for every released record.

    Parameters
    ----------
    c : float
        The sensitivity of every record; finite and non-negative.

    Returns
    -------
    callable
        ``sensitivity(records, rule)`` returning ``c`` for every record.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40]}, index=["ann", "bob"])
    >>> rule = pd.DataFrame({"age": [True, False]}, index=["ann", "bob"])
    >>> risk.constant(2.0)(records, rule)
    array([2., 2.])
    """
    c = float(c)
    if not np.isfinite(c) or c < 0:
        raise ValueError(f"`c` must be a finite, non-negative number, got {c}")
    return _Constant(c)


def additive(weights: pd.DataFrame) -> Sensitivity:
    """Additive sensitivity ``Phi(y_i) = sum_{j disclosed} w_ij``.

    Parameters
    ----------
    weights : pandas.DataFrame
        Non-negative, finite weights with the labels (index and columns) of the
        records it will be applied to; no missing entries.

    Returns
    -------
    callable
        ``sensitivity(records, rule)``; 0 for a record with nothing disclosed.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> weights = pd.DataFrame({"age": [1.0, 2.0], "zip": [0.5, 0.5]}, index=records.index)
    >>> rule = pd.DataFrame({"age": [True, False], "zip": [True, True]}, index=records.index)
    >>> risk.additive(weights)(records, rule)
    array([1.5, 0.5])
    """
    return _Additive(check_weights(weights, nonnegative=True))


def multiplicative(weights: pd.DataFrame) -> Sensitivity:
    """Multiplicative sensitivity ``Phi(y_i) = prod_{j disclosed} exp(w_ij)``.

    Parameters
    ----------
    weights : pandas.DataFrame
        Finite weights (of any sign) with the labels of the records it will be
        applied to; no missing entries.

    Returns
    -------
    callable
        ``sensitivity(records, rule)``; 1 for a record with nothing disclosed.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> records = pd.DataFrame({"age": [30, 40], "zip": ["a", "b"]}, index=["ann", "bob"])
    >>> weights = pd.DataFrame({"age": [1.0, 2.0], "zip": [0.5, 0.5]}, index=records.index)
    >>> rule = pd.DataFrame({"age": [True, False], "zip": [True, True]}, index=records.index)
    >>> risk.multiplicative(weights)(records, rule).round(4)
    array([4.4817, 1.6487])
    """
    return _Multiplicative(check_weights(weights))


def evaluate_sensitivity(
    sensitivity: Sensitivity, records: pd.DataFrame, rule: pd.DataFrame
) -> np.ndarray:
    """Call ``sensitivity`` and check it returned one finite value >= 0 per record."""
    if not callable(sensitivity):
        raise TypeError(
            "`sensitivity` must be callable as sensitivity(records, rule), e.g. "
            f"risk.constant(1.0); got {type(sensitivity).__name__}"
        )
    values = sensitivity(records, rule)
    if isinstance(values, pd.Series):
        if set(values.index) != set(records.index) or not values.index.is_unique:
            raise ValueError(
                "`sensitivity` returned a Series whose index is not the index of `records`"
            )
        values = values.reindex(records.index)
    values = np.asarray(values, dtype=float)
    if values.shape != (len(records),):
        raise ValueError(
            f"`sensitivity` must return one value per record ({len(records)}), "
            f"returned shape {values.shape}"
        )
    if not np.isfinite(values).all() or (values < 0).any():
        raise ValueError("`sensitivity` must return finite, non-negative values")
    return values
