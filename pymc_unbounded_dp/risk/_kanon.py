"""k-anonymity in the decision-theoretic language (Theorem 3 of Lebanon et al.).

A released table is k-anonymous on a set of quasi-identifiers when every
record shares its quasi-identifier values (a missing value counting as a value
of its own, the suppression symbol) with at least k - 1 other records.

If the attacker's dictionary is the table itself, that is it holds, for every
record, one entry that agrees with the record's quasi-identifiers wherever both
are non-missing and holds no attribute other than quasi-identifiers (the
original records or the released table restricted to the quasi-identifiers,
possibly with more cells missing), then each of the k (or more) records of an
equivalence class contributes a consistent entry, so ``|rho(y)| >= k`` and, for
the constant sensitivity ``Phi = c``, every loss is at most ``c / k``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import pandas as pd

from ._validation import check_count, check_records


def _class_sizes(released: pd.DataFrame, quasi_identifiers: object) -> np.ndarray:
    """Size of each record's equivalence class on the quasi-identifiers."""
    released = check_records(released, "released")
    if quasi_identifiers is None:
        columns = list(released.columns)
    else:
        if isinstance(quasi_identifiers, str) or not isinstance(quasi_identifiers, Iterable):
            quasi_identifiers = [quasi_identifiers]
        columns = list(quasi_identifiers)
        unknown = [column for column in columns if column not in released.columns]
        if not columns or unknown:
            raise ValueError(
                "`quasi_identifiers` must be a non-empty list of columns of `released`; "
                f"not columns: {unknown}"
            )
    codes = np.column_stack(
        [pd.factorize(released[column].to_numpy(dtype=object))[0] for column in columns]
    )
    _, inverse, sizes = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    return sizes[inverse.reshape(-1)]


def anonymity_level(
    released: pd.DataFrame, quasi_identifiers: Sequence[Hashable] | None = None
) -> int:
    """Largest k for which ``released`` is k-anonymous: its smallest class size.

    Parameters
    ----------
    released : pandas.DataFrame
        Released records (suppressed cells missing).
    quasi_identifiers : list of column labels, optional
        The columns an attacker can link on; all columns by default.

    Returns
    -------
    int
        The size of the smallest equivalence class.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> released = pd.DataFrame({"age": [30, 30, None, None], "sex": ["f", "f", "m", "m"]})
    >>> risk.anonymity_level(released)
    2
    """
    return int(_class_sizes(released, quasi_identifiers).min())


def is_k_anonymous(
    released: pd.DataFrame, k: int, quasi_identifiers: Sequence[Hashable] | None = None
) -> bool:
    """Whether every record shares its quasi-identifiers with at least k - 1 others.

    Parameters
    ----------
    released : pandas.DataFrame
        Released records (suppressed cells missing; a missing value is a value
        of its own when forming equivalence classes).
    k : int
        The anonymity parameter, at least 1.
    quasi_identifiers : list of column labels, optional
        The columns an attacker can link on; all columns by default.

    Returns
    -------
    bool

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> released = pd.DataFrame({"age": [30, 30, 40, 40], "sex": ["f", "f", "m", "f"]})
    >>> risk.is_k_anonymous(released, 2), risk.is_k_anonymous(released, 2, ["age"])
    (False, True)
    """
    k = check_count(k, "k", minimum=1)
    return bool(_class_sizes(released, quasi_identifiers).min() >= k)


def k_anonymity_bound(
    released: pd.DataFrame, c: float, quasi_identifiers: Sequence[Hashable] | None = None
) -> float:
    """Theorem 3 bound ``c / k`` on every loss when the dictionary is the table itself.

    ``k`` is :func:`anonymity_level` of ``released``. The bound holds for the
    constant sensitivity :func:`constant` ``(c)`` against any dictionary made
    of the records' quasi-identifiers (see the module notes).

    Parameters
    ----------
    released : pandas.DataFrame
        Released records.
    c : float
        The constant sensitivity, at least 0.
    quasi_identifiers : list of column labels, optional
        The columns an attacker can link on; all columns by default.

    Returns
    -------
    float
        ``c / k``.

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp import risk
    >>> released = pd.DataFrame({"age": [30, 30, 30, 40, 40]})
    >>> risk.k_anonymity_bound(released, 1.0)
    0.5
    """
    c = float(c)
    if not np.isfinite(c) or c < 0:
        raise ValueError(f"`c` must be a finite, non-negative number, got {c}")
    return c / anonymity_level(released, quasi_identifiers)
