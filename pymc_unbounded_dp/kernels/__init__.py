"""PyMC-free kernel cores (BlackJAX style: a state, an info, ``init`` and ``step`` functions).

* :mod:`~pymc_unbounded_dp.kernels.records` — the record refresh and the birth/death moves over ``n``;
* :mod:`~pymc_unbounded_dp.kernels.interweave` — random-walk Metropolis moves of the parameters on
  the non-centred (or full-refresh) target.
"""

from pymc_unbounded_dp.kernels import interweave, records
from pymc_unbounded_dp.kernels.records import (
    CHUNK_ROWS,
    Proposals,
    RecordState,
    SweepInfo,
    birth_death,
    default_n_moves,
    init,
    refresh,
    sweep,
)

__all__ = [
    "CHUNK_ROWS",
    "Proposals",
    "RecordState",
    "SweepInfo",
    "birth_death",
    "default_n_moves",
    "init",
    "interweave",
    "records",
    "refresh",
    "sweep",
]
