r"""Record kernels: the record refresh and the birth/death moves over ``n``.

Target (Awan, Barrientos & Ju 2024; Ju, Awan, Gong & Rao 2022)::

    pi(theta, n, x | s_dp, n_dp) ∝ pi(theta) g(n) prod_i f(x_i | theta) eta_s(s_dp - T(x)) eta_n(n_dp - n)

with ``T(x) = sum_i t(x_i)``. With ``theta`` fixed, one :func:`sweep` is

1. a **refresh** of every record (systematic scan): propose ``x_i* ~ f(. | theta)`` and accept with
   probability ``min(1, eta_s(r + t(x_i) - t(x_i*)) / eta_s(r))``, where ``r = s_dp - T`` is the
   residual (``f`` cancels);
2. under unbounded DP, ``K`` **birth/death** moves: with probability 1/2 a birth ``x* ~ f(.|theta)``
   accepted with ``eta_s(r - t(x*)) / eta_s(r) * eta_n(n_dp - n - 1) / eta_n(n_dp - n) *
   g(n + 1) / g(n)``, otherwise the death of a uniformly chosen record with the mirror ratio. A
   death at ``n = 0`` (or where ``g(n - 1) = 0``) is rejected, so the move probabilities stay 1/2
   everywhere and no proposal-ratio correction appears.

The kernels take their target as plain data, a :class:`RecordTarget` (released values, noise
arrays, ``n_dp``, and the model's proposal and prior of ``n`` as callables bound to ``theta``), so
they run and are tested without PyMC; ``CompiledModel.record_target`` builds one from a model.
The state is a :class:`RecordState` (BlackJAX style); its arrays are updated in place for speed.
Proposals are drawn in one vectorised call and their statistics computed in the same call; the
sequential accept/reject loops run in numba. Every move accepts iff ``log u < log ratio`` (a NaN
ratio rejects), with ``u`` uniform on ``[0, 1)``. From a state outside the support of the release
densities (bounded noise of a user-defined mechanism, before the chain has reached its support)
every move within the prior's support of ``n`` is accepted: the support is absorbing, so the
target stays the stationary law (see ``_noise.log_ratio``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numba as nb
import numpy as np

from pymc_unbounded_dp.kernels._noise import NoiseArrays
from pymc_unbounded_dp.kernels._noise import log_density as _log_density
from pymc_unbounded_dp.kernels._noise import log_ratio as _log_ratio
from pymc_unbounded_dp.kernels._noise import residual_log_density as _residual_log_density

__all__ = [
    "CHUNK_ROWS",
    "LogPriorFn",
    "MIN_N_MOVES",
    "MOVES_PER_NOISE_VARIANCE",
    "Proposals",
    "ProposeFn",
    "RecordState",
    "RecordTarget",
    "SweepInfo",
    "birth_death",
    "default_n_moves",
    "init",
    "refresh",
    "release_log_density",
    "sweep",
]


class RecordState(NamedTuple):
    """What the next sweep needs. Buffers have spare rows; the first ``n`` are the records."""

    records: tuple[np.ndarray, ...]
    stats: np.ndarray
    residual: np.ndarray
    n: int

    def active_records(self) -> list[np.ndarray]:
        """Views of the ``n`` current records of each record variable."""
        return [buffer[: self.n] for buffer in self.records]


class SweepInfo(NamedTuple):
    """Move counts of one sweep."""

    refresh_accepted: int
    refresh_proposed: int
    births_accepted: int
    births_proposed: int
    deaths_accepted: int
    deaths_proposed: int


# --------------------------------------------------------------------------------------------------
# compiled cores
# --------------------------------------------------------------------------------------------------
@nb.njit(cache=True, inline="always")
def _accepts(log_u, log_ratio):
    """The Metropolis decision ``log u < log ratio`` (a NaN ratio rejects)."""
    return log_u < log_ratio


@nb.njit(cache=True, inline="always")
def _copy_row(target, i, source, k):
    """``target[i] = source[k]`` (an explicit loop: numba's row slices cost more than the copy)."""
    for j in range(target.shape[1]):
        target[i, j] = source[k, j]


@nb.njit(cache=True)
def _refresh_kernel(
    stats,
    proposed,
    residual,
    log_u,
    shape_code,
    discrete,
    scale,
    log_normalizer,
    laplace_only,
    custom,
):
    n, d = proposed.shape
    accepted = np.zeros(n, dtype=np.bool_)
    current = np.empty(d)
    trial = np.empty(d)
    trial_lp = np.empty(d)
    _residual_log_density(residual, current, shape_code, discrete, scale, log_normalizer, custom)
    for i in range(n):
        for j in range(d):
            trial[j] = residual[j] + stats[i, j] - proposed[i, j]
        log_ratio = _log_ratio(
            residual,
            trial,
            current,
            trial_lp,
            shape_code,
            discrete,
            scale,
            log_normalizer,
            laplace_only,
            custom,
        )
        if _accepts(log_u[i], log_ratio):
            accepted[i] = True
            for j in range(d):
                residual[j] = trial[j]
                current[j] = trial_lp[j]
                stats[i, j] = proposed[i, j]
    return accepted


@nb.njit(cache=True)
def _copy_accepted(buffer, proposal, accepted):
    """``buffer[accepted] = proposal[accepted]`` on ``(rows, width)`` views (several times faster
    than NumPy's boolean-mask assignment)."""
    for i in range(accepted.shape[0]):
        if accepted[i]:
            _copy_row(buffer, i, proposal, i)


#: Move codes: ``REJECTED``; ``BIRTH - j`` for a birth into slot ``j``; ``i >= 0`` for the death of
#: record ``i`` (the last record takes its slot).
BIRTH, REJECTED = -2, -1


@nb.njit(cache=True)
def _birth_death_kernel(
    stats,
    n,
    residual,
    born,
    is_birth,
    u_pick,
    log_u,
    log_prior,
    prior_offset,
    n_dp,
    n_noise_shape,
    n_noise_discrete,
    n_noise_scale,
    n_noise_norm,
    n_noise_custom,
    shape_code,
    discrete,
    scale,
    log_normalizer,
    laplace_only,
    custom,
):
    """Move ``k`` is a birth of the next unused row of ``born`` if ``is_birth[k]``, else a death."""
    moves_count = is_birth.shape[0]
    d = residual.shape[0]
    moves = np.full(moves_count, REJECTED, dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)  # births accepted/proposed, deaths accepted/proposed
    current = np.empty(d)
    trial = np.empty(d)
    trial_lp = np.empty(d)
    _residual_log_density(residual, current, shape_code, discrete, scale, log_normalizer, custom)
    lp_n = _log_density(
        n_dp - n, n_noise_shape, n_noise_discrete, n_noise_scale, n_noise_norm, n_noise_custom
    )
    for k in range(moves_count):
        birth = is_birth[k]
        if birth:
            newborn = counts[1]
            counts[1] += 1
            step = 1
            for j in range(d):
                trial[j] = residual[j] - born[newborn, j]
        else:
            counts[3] += 1
            if n == 0:
                continue
            victim = min(int(u_pick[k] * n), n - 1)
            step = -1
            for j in range(d):
                trial[j] = residual[j] + stats[victim, j]
        log_ratio = _log_ratio(
            residual,
            trial,
            current,
            trial_lp,
            shape_code,
            discrete,
            scale,
            log_normalizer,
            laplace_only,
            custom,
        )
        lp_n_new = _log_density(
            n_dp - (n + step),
            n_noise_shape,
            n_noise_discrete,
            n_noise_scale,
            n_noise_norm,
            n_noise_custom,
        )
        log_prior_step = log_prior[n + step - prior_offset] - log_prior[n - prior_offset]
        if log_ratio == np.inf or lp_n == -np.inf:
            # Outside the support of the release densities (see _noise.log_ratio): any move
            # within the prior's support is accepted.
            log_ratio = np.inf if log_prior_step > -np.inf else -np.inf
        else:
            log_ratio += lp_n_new - lp_n
            log_ratio += log_prior_step
        if not _accepts(log_u[k], log_ratio):
            continue
        for j in range(d):
            residual[j] = trial[j]
            current[j] = trial_lp[j]
        lp_n = lp_n_new
        if birth:
            # The newborn takes a uniformly random slot and that slot's record moves to the end:
            # the record order stays exchangeable, which the positional refresh scan relies on
            # (always appending would bias the combined chain).
            slot = min(int(u_pick[k] * (n + 1)), n)
            _copy_row(stats, n, stats, slot)
            _copy_row(stats, slot, born, newborn)
            moves[k] = BIRTH - slot
            counts[0] += 1
        else:
            _copy_row(stats, victim, stats, n - 1)
            moves[k] = victim
            counts[2] += 1
        n += step
    return n, moves, counts


@nb.njit(cache=True)
def _apply_moves(buffer, born, is_birth, moves, n):
    """Replay accepted births/deaths on a record buffer viewed as ``(capacity, width)``."""
    births = 0
    for k in range(moves.shape[0]):
        move = moves[k]
        if move <= BIRTH:
            slot = BIRTH - move
            _copy_row(buffer, n, buffer, slot)
            _copy_row(buffer, slot, born, births)
            n += 1
        elif move >= 0:
            _copy_row(buffer, move, buffer, n - 1)
            n -= 1
        births += is_birth[k]
    return n


@nb.njit(cache=True)
def _column_sums(rows, n):
    """``rows[:n].sum(axis=0)`` of a ``(rows, columns)`` array, adding row after row."""
    out = np.zeros(rows.shape[1])
    for i in range(n):
        for j in range(rows.shape[1]):
            out[j] += rows[i, j]
    return out


def _totals(stats: np.ndarray, n: int) -> np.ndarray:
    """``stats[:n].sum(axis=0)``, bit for bit.

    NumPy sums one column pairwise, and several row after row, as :func:`_column_sums` does at a
    third of the cost (NumPy's axis-0 reduction over a few columns takes ~20 ns per row).
    """
    if stats.shape[1] == 1:
        return stats[:n].sum(axis=0)
    return _column_sums(stats, n)


def _as_rows(array: np.ndarray) -> np.ndarray:
    """A ``(rows, width)`` view (also for zero rows, where ``reshape(rows, -1)`` fails)."""
    return array.reshape(array.shape[0], math.prod(array.shape[1:]))


# --------------------------------------------------------------------------------------------------
# kernel API
# --------------------------------------------------------------------------------------------------
#: ``propose(m) -> (records, stats)``: ``m`` fresh records from ``f(. | theta)``, one array per record
#: variable (leading axis ``m``), and their statistics ``t`` as a float ``(m, D)`` array.
ProposeFn = Callable[[int], tuple[list[np.ndarray], np.ndarray]]
#: ``log_prior_n(values) -> log g(values)`` at an int64 array of values ``>= 0``.
LogPriorFn = Callable[[np.ndarray], np.ndarray]


class RecordTarget(NamedTuple):
    """The target of the record kernels at fixed parameters ``theta``, as plain data.

    Attributes
    ----------
    released : numpy.ndarray
        The released sums ``s_dp``, all coordinates side by side, shape ``(D,)``.
    noise : NoiseArrays
        The mechanisms of the ``D`` released coordinates.
    propose : callable
        ``propose(m) -> (records, stats)`` (see :data:`ProposeFn`), bound to ``theta``.
    n_dp : float or None
        The released sample size (unbounded DP); ``None`` under bounded DP, where ``n`` is fixed.
    n_noise : NoiseArrays or None
        The mechanism of ``n_dp`` (one coordinate); ``None`` under bounded DP.
    log_prior_n : callable or None
        ``log g`` of the latent ``n`` (see :data:`LogPriorFn`), only called at values ``>= 0``;
        ``None`` is the flat prior on ``n >= 0``.
    reseed : callable or None
        ``reseed(seed)`` seeds the generator behind ``propose`` (:func:`init` calls it); ``None``
        if ``propose`` has no generator of its own.
    """

    released: np.ndarray
    noise: NoiseArrays
    propose: ProposeFn
    n_dp: float | None = None
    n_noise: NoiseArrays | None = None
    log_prior_n: LogPriorFn | None = None
    reseed: Callable[[int], None] | None = None

    @property
    def unbounded(self) -> bool:
        """Whether ``n`` is latent (unbounded DP)."""
        return self.n_dp is not None


class Proposals(NamedTuple):
    """Fresh records drawn from the model, one array per record variable, and their statistics."""

    records: list[np.ndarray]
    stats: np.ndarray

    def rows(self, start: int, stop: int | None = None) -> Proposals:
        """Rows ``start:stop`` of the records and the statistics."""
        return Proposals([r[start:stop] for r in self.records], self.stats[start:stop])


def init(target: RecordTarget, n: int, rng: np.random.Generator) -> RecordState:
    """Impute ``n`` records from ``target.propose``: the state a new chain starts from.

    Parameters
    ----------
    target : RecordTarget
    n : int
        The number of records.
    rng : numpy.random.Generator
        One integer is drawn from it to seed ``target.reseed`` (drawn also when ``reseed`` is
        ``None``), so a chain is reproducible from ``rng``.

    Returns
    -------
    RecordState
        Buffers with room for ``2 n`` records (at least 16) under unbounded DP, ``n`` otherwise.
    """
    seed = int(rng.integers(2**62))
    if target.reseed is not None:
        target.reseed(seed)
    records, stats = target.propose(n)
    capacity = max(2 * n, 16) if target.unbounded else n
    buffers = tuple(_with_capacity(r, capacity) for r in records)
    stats_buffer = _with_capacity(stats, capacity)
    residual = target.released - stats.sum(axis=0)
    return RecordState(records=buffers, stats=stats_buffer, residual=residual, n=n)


def _with_capacity(array: np.ndarray, capacity: int) -> np.ndarray:
    out = np.empty((capacity, *array.shape[1:]), dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


def refresh(
    target: RecordTarget,
    state: RecordState,
    proposals: Proposals,
    log_u: np.ndarray,
    start: int = 0,
) -> tuple[RecordState, int]:
    """Refresh records ``start, ..., start + m - 1`` once, in order (independent Metropolis with
    proposals from the model), updating ``state`` in place.

    Parameters
    ----------
    target : RecordTarget
    state : RecordState
    proposals : Proposals
        One fresh record per refreshed record (``m`` rows).
    log_u : numpy.ndarray
        ``log`` of ``m`` uniforms: proposal ``i`` is accepted iff ``log_u[i] <
        log eta_s(r + t(x_i) - t(x_i*)) - log eta_s(r)``, with ``r`` the residual before it.
    start : int
        The first refreshed record.

    Returns
    -------
    state : RecordState
    accepted : int
        The number of accepted proposals.
    """
    stop = start + proposals.stats.shape[0]
    accepted = _refresh_kernel(
        state.stats[start:stop], proposals.stats, state.residual, log_u, *target.noise
    )
    target.noise.raise_errors()
    for buffer, proposal in zip(state.records, proposals.records):
        _copy_accepted(_as_rows(buffer[start:stop]), _as_rows(proposal), accepted)
    return state, int(accepted.sum())


def birth_death(
    target: RecordTarget,
    state: RecordState,
    is_birth: np.ndarray,
    born: Proposals,
    u_pick: np.ndarray,
    log_u: np.ndarray,
) -> tuple[RecordState, np.ndarray]:
    """``K = len(is_birth)`` birth/death moves over ``n`` (unbounded DP), in order.

    Move ``k`` proposes a birth of the next unused row of ``born`` if ``is_birth[k]``, else the
    death of a record, and is accepted iff ``log_u[k]`` is below its log ratio (see the module
    docstring). ``u_pick[k]`` (a uniform on ``[0, 1)``) picks the record that dies,
    ``floor(u_pick[k] n)``, or the slot a newborn takes, ``floor(u_pick[k] (n + 1))``; the record
    in that slot moves to the end, the last record fills a dead record's slot.

    Parameters
    ----------
    target : RecordTarget
    state : RecordState
    is_birth : numpy.ndarray of bool
        Shape ``(K,)``.
    born : Proposals
        ``is_birth.sum()`` fresh records.
    u_pick, log_u : numpy.ndarray
        Shape ``(K,)`` each.

    Returns
    -------
    state : RecordState
    counts : numpy.ndarray
        ``[births accepted, births proposed, deaths accepted, deaths proposed]`` (int64).
    """
    n = state.n
    n_moves = is_birth.shape[0]
    state = _ensure_capacity(state, n + n_moves)
    log_prior = _log_prior_window(target.log_prior_n, n - n_moves, n + n_moves)
    new_n, moves, counts = _birth_death_kernel(
        state.stats,
        n,
        state.residual,
        born.stats,
        is_birth,
        u_pick,
        log_u,
        log_prior,
        n - n_moves,
        target.n_dp,
        *target.n_noise.scalar(),
        *target.noise,
    )
    target.noise.raise_errors()
    target.n_noise.raise_errors()
    for buffer, new in zip(state.records, born.records):
        _apply_moves(_as_rows(buffer), _as_rows(new), is_birth, moves, n)
    return state._replace(n=int(new_n)), counts


def release_log_density(target: RecordTarget, state: RecordState) -> float:
    """``log eta_s(s_dp - T(x))`` summed over the released coordinates, plus ``log eta_n(n_dp -
    n)`` under unbounded DP: the release terms of the target at ``state``.

    From the residual ``s_dp - T`` the kernels keep up to date (recomputed from the records'
    statistics at the start of each :func:`sweep`, then moved by each accepted move), with the
    kernels' noise densities.
    """
    out = np.empty_like(state.residual)
    _residual_log_density(state.residual, out, *target.noise.per_coordinate)
    target.noise.raise_errors()
    total = float(out.sum())
    if target.unbounded:
        count = np.array([target.n_dp - state.n], dtype=np.float64)
        _residual_log_density(count, out[:1], *target.n_noise.per_coordinate)
        target.n_noise.raise_errors()
        total += float(out[0])
    return total


def _log_prior_window(log_prior_n: LogPriorFn | None, low: int, high: int) -> np.ndarray:
    """``log g(n)`` at ``n = low, ..., high``: ``-inf`` below 0, 0 above under a flat prior."""
    values = np.arange(low, high + 1, dtype=np.int64)
    out = np.full(values.shape, -np.inf)
    valid = values >= 0
    if log_prior_n is None:
        out[valid] = 0.0
    elif np.any(valid):
        out[valid] = log_prior_n(values[valid])
    return out


def _ensure_capacity(state: RecordState, rows: int) -> RecordState:
    capacity = state.stats.shape[0]
    if rows <= capacity:
        return state
    capacity = max(rows, 2 * capacity)
    return state._replace(
        records=tuple(_with_capacity(b[: state.n], capacity) for b in state.records),
        stats=_with_capacity(state.stats[: state.n], capacity),
    )


#: The fewest birth/death moves per sweep of the default.
MIN_N_MOVES = 10
#: Birth/death moves per unit of the count noise's variance in the default (see
#: :func:`default_n_moves`).
MOVES_PER_NOISE_VARIANCE = 20


def default_n_moves(n0: int, noise_sd: float | None = None) -> int:
    """Default birth/death moves per sweep: enough for ``n`` to cross its posterior, at most one
    per record (and at least :data:`MIN_N_MOVES`).

    Each move changes ``n`` by one, so ``K`` moves accepted at a rate ``a`` move it by about
    ``sqrt(a K)``: crossing a posterior of sd ``sd_n`` takes ``K`` of about ``sd_n**2 / a``. The
    posterior sd of ``n`` is at most about the sd of the noise on ``n_dp`` (the flat prior and
    records that barely inform ``n`` leave that much; a prior or the records only narrow it), and
    the moves are accepted at a rate of at least ``exp(-epsilon_s)``-ish (0.3 to 0.8 on the
    benchmarks), so ``K = 20 * noise_sd**2`` crosses it about twice. More moves than that do
    not mix ``n`` faster (the parameters and the records then limit it) but cost time: at
    ``n = 1e6`` one move per record took about half of each iteration. One move per record
    (``n0``) stays the ceiling, the old default, which is where a very noisy ``n_dp`` lands.

    Parameters
    ----------
    n0 : int
        The current (or starting) number of records.
    noise_sd : float, optional
        Standard deviation of the noise on ``n_dp``. ``None``: one move per record.

    Examples
    --------
    >>> default_n_moves(1_000_000, noise_sd=2.8)  # DiscreteLaplace(epsilon=0.5) on n
    157
    >>> default_n_moves(230), default_n_moves(5, noise_sd=100.0)
    (230, 10)
    """
    per_record = max(MIN_N_MOVES, int(n0))
    if noise_sd is None:
        return per_record
    crossing = math.ceil(MOVES_PER_NOISE_VARIANCE * float(noise_sd) ** 2)
    return min(per_record, max(MIN_N_MOVES, crossing))


#: Most proposal rows drawn in one call. Larger sweeps draw and consume their proposals in chunks,
#: so that the arrays of a chunk stay in cache and the cost per record does not depend on ``n``.
CHUNK_ROWS = 2**14


def _chunks(total: int) -> list[tuple[int, int]]:
    return [(start, min(start + CHUNK_ROWS, total)) for start in range(0, total, CHUNK_ROWS)]


def _log_uniforms(rng: np.random.Generator, size: int) -> np.ndarray:
    """``log(u)`` for ``size`` uniforms on ``[0, 1)``, computed in place."""
    u = rng.random(size)
    return np.log(u, out=u)


def sweep(
    target: RecordTarget,
    state: RecordState,
    rng: np.random.Generator,
    n_moves: int = 0,
) -> tuple[RecordState, SweepInfo]:
    """One refresh of all records, then ``n_moves`` birth/death moves (unbounded DP only).

    Each move is a birth or a death with probability 1/2, decided up front, so that only births
    draw a proposal and all proposals of a sweep come from one call of ``target.propose`` (one per
    :data:`CHUNK_ROWS` rows for large sweeps). The residual is recomputed from ``target.released``
    first.

    Parameters
    ----------
    target : RecordTarget
    state : RecordState
    rng : numpy.random.Generator
        Only ``rng.random(size)`` is called, in this order: ``n_moves`` uniforms (move ``k`` is a
        birth iff its uniform is below 1/2; none under bounded DP), the refresh's uniforms (one
        call per chunk of records), then ``u_pick`` and the move uniforms (per chunk of moves).
    n_moves : int
        Birth/death moves (ignored under bounded DP).

    Returns
    -------
    state : RecordState
    info : SweepInfo
    """
    n = state.n
    moves = n_moves if target.unbounded else 0
    is_birth = rng.random(moves) < 0.5
    births = int(is_birth.sum())
    # Recompute the residual exactly once per sweep: no drift from incremental updates.
    state = state._replace(residual=target.released - _totals(state.stats, n))
    if n + births <= CHUNK_ROWS:
        proposals = Proposals(*target.propose(n + births))
        state, refreshed = refresh(target, state, proposals.rows(0, n), _log_uniforms(rng, n))
        move_chunks = [(is_birth, proposals.rows(n))] if moves else []
    else:
        refreshed = 0
        for start, stop in _chunks(n):
            chunk = Proposals(*target.propose(stop - start))
            log_u = _log_uniforms(rng, stop - start)
            state, accepted = refresh(target, state, chunk, log_u, start)
            refreshed += accepted
        move_chunks = [(is_birth[start:stop], None) for start, stop in _chunks(moves)]
    counts = np.zeros(4, dtype=np.int64)
    for chunk_is_birth, born in move_chunks:
        if born is None:
            born = Proposals(*target.propose(int(chunk_is_birth.sum())))
        k = chunk_is_birth.shape[0]
        u_pick = rng.random(k)
        log_u = _log_uniforms(rng, k)
        state, chunk_counts = birth_death(target, state, chunk_is_birth, born, u_pick, log_u)
        counts += chunk_counts
    return state, SweepInfo(refreshed, n, *counts.tolist())
