"""Where a run of :func:`~pymc_unbounded_dp.mcem` starts: :func:`start`.

A previous :class:`~pymc_unbounded_dp.mcem.MCEMResult` is continued from its estimate, kernel
state, Monte Carlo size and history; otherwise the run starts at the model's initial point (or
given starting values) with a record kernel chain tuned there.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import xarray as xr

import pymc_unbounded_dp.kernels as kernels
from pymc_unbounded_dp.mcem.objective import CompleteDataLogLik
from pymc_unbounded_dp.mcem.options import Options
from pymc_unbounded_dp.mcem.result import MCEMResult


class Start(NamedTuple):
    """The start of a run: the estimate (unconstrained), the first Monte Carlo size, the history
    of the run continued (``None`` for a new run) and the record kernel state."""

    unconstrained: np.ndarray
    n_samples: int
    previous: xr.Dataset | None
    records: kernels.RecordState


def start(
    objective: CompleteDataLogLik,
    options: Options,
    rng: np.random.Generator,
    init: MCEMResult | dict | None,
) -> Start:
    """The :class:`Start` of a run from ``init`` (see :func:`~pymc_unbounded_dp.mcem`).

    Raises
    ------
    ValueError
        If ``init`` is a result for other parameters, names unknown parameters, or has values
        outside the parameters' support.
    TypeError
        If ``init`` is neither a result nor a dict.
    """
    table = objective.table
    if isinstance(init, MCEMResult):
        state = init.state
        if state.parameter_names != objective.unconstrained.names:
            raise ValueError(
                "mcem: `init` is a result for a model with parameters "
                f"{state.parameter_names}, not {objective.unconstrained.names}."
            )
        u = state.unconstrained.copy()
        if state.records is not None:
            table.reseed(int(rng.integers(2**62)))
            return Start(u, state.n_samples, init.history, _copy_state(state.records))
        return Start(u, state.n_samples, init.history, tuned_chain(objective, options, rng, u))
    u = objective.unconstrained.join(objective.initial_point)
    if init is not None:
        u = _from_natural(objective, u, init)
    return Start(u, options.initial_samples, None, tuned_chain(objective, options, rng, u))


def tuned_chain(
    objective: CompleteDataLogLik, options: Options, rng: np.random.Generator, u: np.ndarray
) -> kernels.RecordState:
    """A record kernel state at ``u`` (unconstrained), started at the table's initial ``n`` (for
    the current ``n_dp``) and run for ``options.tune`` sweeps."""
    table = objective.table
    n0 = table.chain_start_n()
    target = table.record_target(objective.point(u, n0))
    table.reseed(int(rng.integers(2**62)))
    state = kernels.init(target, n0, rng)
    moves = n_moves(objective, options, n0)
    for _ in range(options.tune):
        state, _ = kernels.sweep(target, state, rng, moves)
    return state


def n_moves(objective: CompleteDataLogLik, options: Options, n0: int) -> int:
    """Birth/death moves per sweep: 0 under bounded DP, else ``options.n_moves`` or the table's
    default at ``n0``."""
    if objective.table.sample_size is None:
        return 0
    return options.n_moves or objective.table.default_n_moves(n0)


def _from_natural(objective: CompleteDataLogLik, u: np.ndarray, values) -> np.ndarray:
    """``u`` with the parameters named in ``values`` set to them (natural scale)."""
    if not isinstance(values, dict):
        raise TypeError(
            f"mcem: `init` must be an MCEMResult or a dict of starting values, got {values!r}."
        )
    layout = objective.natural
    unknown = sorted(set(values) - set(layout.names))
    if unknown:
        raise ValueError(
            f"mcem: `init` has unknown parameter(s) {unknown}; the parameters are "
            f"{list(layout.names)}."
        )
    natural = layout.split(objective.to_natural(u).copy())
    for name, value in values.items():
        natural[name] = np.broadcast_to(np.asarray(value, dtype=float), natural[name].shape)
    u = objective.to_unconstrained(layout.join(natural))
    if not np.all(np.isfinite(u)):
        raise ValueError(f"mcem: `init` values {values} are outside the parameters' support.")
    return u


def _copy_state(state: kernels.RecordState) -> kernels.RecordState:
    return state._replace(
        records=tuple(b.copy() for b in state.records),
        stats=state.stats.copy(),
        residual=state.residual.copy(),
    )
