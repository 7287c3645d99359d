"""Which study to run with which options: the registry of workloads and their quick presets.

:func:`make_study` is the one place a study is configured from names (the command line, a
notebook): it starts from the workload's defaults (the paper's scale), applies the ``quick``
preset if asked, then the overrides, and refuses an option the workload does not have.

Examples
--------
>>> study = make_study("regression", quick=True, replicates=3)
>>> study.replicates, study.epsilon_n
(3, (0.01, 0.5, 10.0))
>>> make_study("mcem", draws=10)
Traceback (most recent call last):
...
ValueError: draws: not an option of the mcem study (its options: epsilon_s, epsilon_n, ...
"""

from __future__ import annotations

import dataclasses

from pymc_unbounded_dp.examples.study.atus import AtusStudy
from pymc_unbounded_dp.examples.study.base import Workload
from pymc_unbounded_dp.examples.study.mle import MLEStudy
from pymc_unbounded_dp.examples.study.regression import RegressionStudy

__all__ = ["QUICK", "STUDIES", "make_study"]

#: The workloads by name.
STUDIES: dict[str, type[Workload]] = {
    "regression": RegressionStudy,
    "atus": AtusStudy,
    "mcem": MLEStudy,
}

#: A reduced grid per study that finishes in minutes on a laptop.
QUICK: dict[str, dict] = {
    "regression": {
        "epsilon_s": (1.0,),
        "epsilon_n": (0.01, 0.5, 10.0),
        "replicates": 1,
        "draws": 2000,
        "tune": 500,
    },
    "atus": {
        "epsilon_s": (1.0,),
        "epsilon_n": (0.01, 1.0, 10.0),
        "replicates": 1,
        "draws": 3000,
        "tune": 1000,
    },
    "mcem": {"epsilon_n": (1.0, float("inf")), "replicates": 2},
}


def options(name: str) -> list[str]:
    """The option names of study ``name``."""
    return [f.name for f in dataclasses.fields(STUDIES[name])]


def make_study(name: str, quick: bool = False, **overrides) -> Workload:
    """The study ``name`` at the paper's scale (or its ``quick`` preset) with ``overrides``.

    ``None`` overrides are ignored (an option not given on the command line).

    Raises
    ------
    ValueError
        For an unknown study, an option the study does not have, or an invalid value.
    """
    if name not in STUDIES:
        raise ValueError(f"study: choose one of {', '.join(STUDIES)}, got {name!r}")
    given = {k: v for k, v in overrides.items() if v is not None}
    known = options(name)
    for option in given:
        if option not in known:
            raise ValueError(
                f"{option}: not an option of the {name} study (its options: {', '.join(known)})"
            )
    values = {**(QUICK[name] if quick else {}), **given}
    for grid in ("epsilon_s", "epsilon_n"):
        if isinstance(values.get(grid), list | tuple):
            values[grid] = tuple(float(e) for e in values[grid])
    return STUDIES[name](**values)
