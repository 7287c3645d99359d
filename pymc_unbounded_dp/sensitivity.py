r"""Sensitivity of a sum of clamped per-record statistics, from the statistic's bounds.

A release ``s = sum_i t(x_i)`` of a statistic ``t`` whose every coordinate lies in ``[lower_j,
upper_j]`` changes, between *neighbouring* data sets, by at most

==============================  ===========================================  =====================
neighbouring relation           L1 sensitivity                               L2 sensitivity
==============================  ===========================================  =====================
``"add/remove"`` (unbounded DP)  :math:`\sum_j \max(|l_j|, |u_j|)`           :math:`\sqrt{\sum_j \max(|l_j|, |u_j|)^2}`
``"replace-one"`` (bounded DP)   :math:`\sum_j (u_j - l_j)`                  :math:`\sqrt{\sum_j (u_j - l_j)^2}`
==============================  ===========================================  =====================

Add/remove neighbours differ by one record's presence (the count ``n`` itself is private);
replace-one neighbours have the same ``n`` and differ in one record's values. The Laplace family is
calibrated to the L1 sensitivity, the Gaussian family to the L2 sensitivity.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

__all__ = [
    "NEIGHBOURING",
    "Neighbouring",
    "Norm",
    "SensitivityWarning",
    "check_neighbouring",
    "sum_sensitivity",
]

Neighbouring = Literal["add/remove", "replace-one"]
Norm = Literal["l1", "l2"]


class SensitivityWarning(UserWarning):
    """A mechanism's declared sensitivity does not match the one derived from the statistic.

    Issued by :func:`~pymc_unbounded_dp.PrivatizedSum` when the statistic's bounds give a larger
    sensitivity than declared (the stated guarantee does not hold), a smaller one (the guarantee
    is stronger than stated: the noise is larger than the bounds need), or none at all while the
    mechanism was calibrated from a privacy budget. Filter it with
    ``warnings.filterwarnings("ignore", category=pmdp.SensitivityWarning)`` or turn the check off
    per release with ``check_sensitivity=False``.
    """


#: The neighbouring relations a sensitivity can be stated for.
NEIGHBOURING: tuple[str, ...] = ("add/remove", "replace-one")


def check_neighbouring(neighbouring, owner: str) -> str:
    """``neighbouring`` if it is one of :data:`NEIGHBOURING`, else a ``ValueError`` naming it."""
    if neighbouring not in NEIGHBOURING:
        raise ValueError(
            f"{owner}: `neighbouring` must be one of {NEIGHBOURING}, got {neighbouring!r}."
        )
    return neighbouring


def sum_sensitivity(
    lower, upper, *, norm: Norm, neighbouring: Neighbouring = "add/remove"
) -> float:
    """Sensitivity of ``sum_i t(x_i)`` when every coordinate ``t_j`` lies in ``[lower_j, upper_j]``.

    Parameters
    ----------
    lower, upper : array_like
        Bounds of each coordinate of one record's statistic (broadcast together); infinite bounds
        give an infinite sensitivity.
    norm : {"l1", "l2"}
        The norm the mechanism is calibrated to (``Mechanism.norm``).
    neighbouring : {"add/remove", "replace-one"}
        The neighbouring relation of the privacy guarantee.

    Returns
    -------
    float

    Examples
    --------
    >>> sum_sensitivity([-1, 0], [1, 1], norm="l1")
    2.0
    >>> sum_sensitivity([-1, 0], [1, 1], norm="l1", neighbouring="replace-one")
    3.0
    """
    lower, upper = np.broadcast_arrays(np.asarray(lower, float), np.asarray(upper, float))
    if np.any(np.isnan(lower)) or np.any(np.isnan(upper)) or np.any(lower > upper):
        raise ValueError(f"sum_sensitivity: need lower <= upper, got {lower} and {upper}.")
    check_neighbouring(neighbouring, "sum_sensitivity")
    if neighbouring == "add/remove":
        change = np.maximum(np.abs(lower), np.abs(upper))
    else:
        change = upper - lower
    if norm == "l1":
        return float(np.sum(change))
    if norm == "l2":
        return float(math.sqrt(np.sum(change**2)))
    raise ValueError(f"sum_sensitivity: `norm` must be 'l1' or 'l2', got {norm!r}.")
