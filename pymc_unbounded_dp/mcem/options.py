"""The options of :func:`~pymc_unbounded_dp.mcem`, validated once: :func:`validated_options`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_unbounded_dp._checks import check_integer

#: Options that are counts, with the least value each accepts.
_INTEGER_MINIMUM = {
    "initial_samples": 1,
    "min_samples": 1,
    "max_samples": 1,
    "max_iterations": 1,
    "patience": 1,
    "thin": 1,
    "replicates": 1,
    "batches": 2,
    "max_replicates": 1,
    "tune": 0,
}


@dataclass(frozen=True)
class Options:
    """The validated schedule and stopping options of :func:`pymc_unbounded_dp.mcem`."""

    initial_samples: int
    growth: float
    min_samples: int
    max_samples: int
    max_iterations: int
    tol: float
    patience: int
    thin: int
    tune: int
    n_moves: int | None
    switch_rate: float = 0.9
    replicates: int = 100
    batches: int = 4
    max_replicates: int = 3200


def validated_options(**values) -> Options:
    """The :class:`Options` of ``values`` (by field name), or a ``ValueError`` naming the option.

    Raises
    ------
    ValueError
        If a count is not an integer at or above its least value, ``growth`` is not a finite
        number >= 1, ``tol`` or ``switch_rate`` is not a finite number > 0, or a cap is below the
        value it caps (``max_samples < min_samples``, ``max_replicates < replicates``).
    """
    for name, minimum in _INTEGER_MINIMUM.items():
        check_integer(values[name], name, "mcem", minimum)
    if values["n_moves"] is not None:
        check_integer(values["n_moves"], "n_moves", "mcem")
    growth = values["growth"]
    if not isinstance(growth, int | float | np.number) or not np.isfinite(growth) or growth < 1:
        raise ValueError(f"mcem: `growth` must be a finite number >= 1, got {growth!r}.")
    for name in ("tol", "switch_rate"):
        value = values[name]
        if not isinstance(value, int | float | np.number) or not np.isfinite(value) or value <= 0:
            raise ValueError(f"mcem: `{name}` must be a finite number > 0, got {value!r}.")
    if values["max_samples"] < values["min_samples"]:
        raise ValueError(
            f"mcem: `max_samples`={values['max_samples']} is below `min_samples`="
            f"{values['min_samples']}; the stopping rule could never apply."
        )
    if values["max_replicates"] < values["replicates"]:
        raise ValueError(
            f"mcem: `max_replicates`={values['max_replicates']} is below `replicates`="
            f"{values['replicates']}."
        )
    return Options(**{k: (float(v) if isinstance(v, float) else v) for k, v in values.items()})
