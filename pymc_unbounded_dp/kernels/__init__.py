"""PyMC-free kernel cores (BlackJAX style: a state, an info, ``init`` and ``step`` functions).

* :mod:`~pymc_unbounded_dp.kernels.records` — the record refresh and the birth/death moves over ``n``,
  on a :class:`RecordTarget` of plain data;
* :mod:`~pymc_unbounded_dp.kernels.interweave` — random-walk Metropolis moves of the parameters on
  the non-centred (or full-refresh) target.

Nothing here imports PyMC or :mod:`pymc_unbounded_dp._compile` (which imports this package).
"""

from pymc_unbounded_dp.kernels import interweave, records
from pymc_unbounded_dp.kernels._noise import NoiseArrays
from pymc_unbounded_dp.kernels.records import (
    Proposals,
    RecordState,
    RecordTarget,
    SweepInfo,
    birth_death,
    default_n_moves,
    init,
    refresh,
    release_log_density,
    sweep,
)

__all__ = [
    "NoiseArrays",
    "Proposals",
    "RecordState",
    "RecordTarget",
    "SweepInfo",
    "birth_death",
    "default_n_moves",
    "init",
    "interweave",
    "records",
    "refresh",
    "release_log_density",
    "sweep",
]
