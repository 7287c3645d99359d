"""The record kernels against a plain-Python reference of DESIGN.md section 2, move by move.

Each test drives the public kernel functions (``kernels.refresh``, ``kernels.birth_death``,
``kernels.sweep``) on plain :class:`RecordTarget` s with stubbed proposals (records carry ids, so
every slot move is visible) and with uniforms placed a hair (``1e-7``) on either side of the
reference's log acceptance ratio. The reference is written independently of the kernels: the
mechanisms' own ``logpdf``, a prior ``g`` evaluated where it is needed, list operations for the
slots. Any error in a ratio larger than ``1e-7`` (a prior term evaluated at a shifted ``n``, a
missing ``eta_n`` term, a wrong slot, a missing counter) flips some decision and fails the test.

The priors of ``n`` are not log-linear (Poisson, a Poisson restricted to a bounded support), births
take every slot (``u_pick`` spread over ``[0, 1)``), deaths happen at the bounds of the support and
at ``n = 0``, and every counter is asserted exactly.
"""

from __future__ import annotations

import zlib

import numba
import numpy as np
import pytest
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp.kernels import NoiseArrays, Proposals, RecordTarget, records

HAIR = 1e-7  # log u = reference log ratio -/+ HAIR: accepted / rejected

S_MECHANISMS = {
    "laplace-only": [pmdp.Laplace(scale=2.0), pmdp.Laplace(scale=0.7)],
    "laplace+gaussian": [pmdp.Laplace(scale=2.0), pmdp.Gaussian(sigma=1.5)],
    "discrete": [pmdp.DiscreteLaplace(scale=2.5), pmdp.DiscreteGaussian(sigma=3.0)],
}
N_MECHANISMS = {
    "discrete-laplace": pmdp.DiscreteLaplace(scale=3.0),
    "laplace": pmdp.Laplace(scale=2.0),
    "discrete-gaussian": pmdp.DiscreteGaussian(sigma=2.5),
}


def poisson(values):
    return stats.poisson.logpmf(values, 6.5)


def poisson_on_3_to_9(values):
    values = np.asarray(values)
    return np.where((values >= 3) & (values <= 9), stats.poisson.logpmf(values, 4.0), -np.inf)


def flat(values):
    return np.where(np.asarray(values) >= 0, 0.0, -np.inf)


PRIORS = {"poisson": poisson, "bounded-poisson": poisson_on_3_to_9, "flat": None}


class Table:
    """Integer statistics (valid for discrete mechanisms) of records ``0, 1, 2, ...``."""

    def __init__(self, rows=400, seed=11):
        rng = np.random.default_rng(seed)
        self.t = rng.integers(-3, 5, size=(rows, 2)).astype(float)


class Stub:
    """``propose(m)``: the next ``m`` rows; two record variables (the id, and a ``(2,)`` copy of
    the statistic) so that buffers of different widths are checked."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, m):
        start = sum(self.calls)
        self.calls.append(m)
        ids = np.arange(start, start + m)
        return [ids, self.table.t[ids].copy()], self.table.t[ids].copy()


def make_target(
    s_key,
    n_key="discrete-laplace",
    prior_key="poisson",
    released=(9.0, -4.0),
    n_dp=7.0,
    unbounded=True,
    table=None,
):
    table = table or Table()
    s_mech = S_MECHANISMS[s_key]
    return RecordTarget(
        released=np.asarray(released, dtype=float),
        noise=NoiseArrays.of(s_mech, [1, 1]),
        propose=Stub(table),
        n_dp=n_dp if unbounded else None,
        n_noise=NoiseArrays.of([N_MECHANISMS[n_key]], [1]) if unbounded else None,
        log_prior_n=PRIORS[prior_key] if unbounded else None,
    ), table


class Reference:
    """The target's moves in plain Python (DESIGN.md section 2)."""

    def __init__(self, target, table, ids, s_mech, n_mech, log_g):
        self.released = target.released
        self.n_dp = target.n_dp
        self.table = table
        self.ids = list(ids)
        self.s_mech, self.n_mech = s_mech, n_mech
        self.log_g = log_g if log_g is not None else flat
        self.counts = [0, 0, 0, 0]

    def residual(self):
        return self.released - self.table.t[self.ids].sum(axis=0)

    def log_eta(self, r):
        return float(sum(m.logpdf(x) for m, x in zip(self.s_mech, r)))

    def log_eta_n(self, n):
        return float(self.n_mech.logpdf(self.n_dp - n))

    def refresh_ratio(self, i, new_id):
        r = self.residual()
        return self.log_eta(r + self.table.t[self.ids[i]] - self.table.t[new_id]) - self.log_eta(r)

    def birth_ratio(self, new_id):
        r, n = self.residual(), len(self.ids)
        return (
            self.log_eta(r - self.table.t[new_id])
            - self.log_eta(r)
            + self.log_eta_n(n + 1)
            - self.log_eta_n(n)
            + float(self.log_g(n + 1))
            - float(self.log_g(n))
        )

    def death_ratio(self, victim):
        r, n = self.residual(), len(self.ids)
        return (
            self.log_eta(r + self.table.t[self.ids[victim]])
            - self.log_eta(r)
            + self.log_eta_n(n - 1)
            - self.log_eta_n(n)
            + float(self.log_g(n - 1))
            - float(self.log_g(n))
        )

    def birth(self, new_id, slot):
        self.ids.append(self.ids[slot] if slot < len(self.ids) else new_id)
        self.ids[slot] = new_id

    def death(self, victim):
        last = self.ids.pop()
        if victim < len(self.ids):
            self.ids[victim] = last


def ids_of(state):
    return state.active_records()[0].tolist()


def assert_state(state, ref):
    ids, t = state.active_records()
    assert ids.tolist() == ref.ids
    np.testing.assert_array_equal(t, ref.table.t[ref.ids])
    np.testing.assert_array_equal(state.stats[: state.n], ref.table.t[ref.ids])
    np.testing.assert_allclose(state.residual, ref.residual(), atol=1e-12)
    assert state.n == len(ref.ids)


def scripted_moves(ref, rng, k, first_born, p_accept=0.5, pick=None):
    """``k`` moves decided by the reference: ``(is_birth, u_pick, log_u)`` and the reference's
    state after them. Births take ids ``first_born, first_born + 1, ...`` (one per proposed birth,
    accepted or not)."""
    is_birth = rng.random(k) < 0.5
    u_pick = rng.random(k) if pick is None else np.asarray(pick, dtype=float)
    log_u = np.empty(k)
    born = first_born
    for j in range(k):
        accept = rng.random() < p_accept
        n = len(ref.ids)
        if is_birth[j]:
            ratio = ref.birth_ratio(born)
        elif n == 0:
            ratio = -np.inf
        else:
            victim = min(int(u_pick[j] * n), n - 1)
            ratio = ref.death_ratio(victim)
        if np.isfinite(ratio):
            log_u[j] = ratio - HAIR if accept else ratio + HAIR
        else:
            log_u[j] = -700.0 if ratio < 0 else 0.0  # a -inf ratio rejects even the smallest u
        decided = log_u[j] < ratio
        ref.counts[1 if is_birth[j] else 3] += 1
        if decided:
            if is_birth[j]:
                ref.birth(born, min(int(u_pick[j] * (n + 1)), n))
                ref.counts[0] += 1
            else:
                ref.death(victim)
                ref.counts[2] += 1
        born += int(is_birth[j])
    return is_birth, u_pick, log_u, born - first_born


# --------------------------------------------------------------------------------------------------
# birth/death: long scripted sequences against the reference
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prior_key", list(PRIORS))
@pytest.mark.parametrize("n_key", list(N_MECHANISMS))
@pytest.mark.parametrize("s_key", list(S_MECHANISMS))
def test_birth_death_sequences_match_the_reference(s_key, n_key, prior_key):
    """Batches of 12 moves from ``n = 5`` (inside the bounded support ``3..9``), each move
    accepted or rejected by a hair; with a bounded support the chain also hits both bounds."""
    target, table = make_target(s_key, n_key, prior_key)
    rng = np.random.default_rng(zlib.crc32(f"{s_key}/{n_key}/{prior_key}".encode()))
    state = kernels.init(target, 5, np.random.default_rng(0))
    ref = Reference(
        target, table, range(5), S_MECHANISMS[s_key], N_MECHANISMS[n_key], PRIORS[prior_key]
    )
    next_id = 5
    seen_n = set()
    for _ in range(25):
        is_birth, u_pick, log_u, births = scripted_moves(ref, rng, 12, next_id)
        born = Proposals(*target.propose(births))
        next_id += births
        state, counts = kernels.birth_death(target, state, is_birth, born, u_pick, log_u)
        assert counts.dtype == np.int64
        assert counts.tolist() == ref.counts
        ref.counts = [0, 0, 0, 0]
        assert_state(state, ref)
        seen_n.add(state.n)
    if prior_key == "bounded-poisson":
        assert seen_n <= set(range(3, 10))
    assert len(seen_n) >= 3


@pytest.mark.parametrize("prior_key", ["poisson", "bounded-poisson"])
def test_a_birth_into_every_slot_and_a_death_of_every_record(prior_key):
    """From ``n = 6``: a birth into slot ``j`` for every ``j = 0..6`` (then its death, to return to
    ``n = 6``), and the death of record ``i`` for every ``i`` (then a birth into its slot)."""
    target, table = make_target("laplace+gaussian", prior_key=prior_key)
    state = kernels.init(target, 6, np.random.default_rng(0))
    ref = Reference(
        target,
        table,
        range(6),
        S_MECHANISMS["laplace+gaussian"],
        N_MECHANISMS["discrete-laplace"],
        PRIORS[prior_key],
    )
    next_id = 6
    for j in range(7):
        pick = [(j + 0.5) / 7, (j + 0.5) / 7]  # birth into slot j; the death of record j
        for is_birth, u in [(True, pick[0]), (False, pick[1])]:
            n = len(ref.ids)
            ratio = (
                ref.birth_ratio(next_id) if is_birth else ref.death_ratio(min(int(u * n), n - 1))
            )
            born = Proposals(*target.propose(int(is_birth)))
            state, counts = kernels.birth_death(
                target, state, np.array([is_birth]), born, np.array([u]), np.array([ratio - HAIR])
            )
            if is_birth:
                ref.birth(next_id, j)
                next_id += 1
                assert counts.tolist() == [1, 1, 0, 0]
                assert ids_of(state)[j] == next_id - 1
            else:
                ref.death(j)
                assert counts.tolist() == [0, 0, 1, 1]
            assert_state(state, ref)


def test_moves_at_the_bounds_of_the_support_are_rejected():
    """Support ``3..9`` (Poisson inside): at ``n = 3`` a death is rejected whatever ``u`` (and
    counted as proposed), at ``n = 9`` a birth; the moves inward are accepted with their exact
    ratio, ``g(4)/g(3)`` and ``g(8)/g(9)`` included."""
    target, table = make_target("discrete", prior_key="bounded-poisson", n_dp=3.0)
    state = kernels.init(target, 3, np.random.default_rng(0))
    ref = Reference(
        target,
        table,
        range(3),
        S_MECHANISMS["discrete"],
        N_MECHANISMS["discrete-laplace"],
        poisson_on_3_to_9,
    )
    # at the lower bound: two deaths (rejected even at log u = -700), then a birth into slot 1
    birth = ref.birth_ratio(3)
    state, counts = kernels.birth_death(
        target,
        state,
        np.array([False, False, True]),
        Proposals(*target.propose(1)),
        np.array([0.0, 0.99, 0.3]),
        np.array([-700.0, -700.0, birth - HAIR]),
    )
    ref.birth(3, 1)
    assert counts.tolist() == [1, 1, 0, 2]
    assert_state(state, ref)
    # climb to the upper bound 9 with births into slot 0
    for next_id in range(4, 9):
        ratio = ref.birth_ratio(next_id)
        state, counts = kernels.birth_death(
            target,
            state,
            np.array([True]),
            Proposals(*target.propose(1)),
            np.array([0.0]),
            np.array([ratio - HAIR]),
        )
        ref.birth(next_id, 0)
        assert counts.tolist() == [1, 1, 0, 0]
    assert_state(state, ref)
    assert state.n == 9
    # at the upper bound: a birth is rejected whatever u; the death of the last record accepted
    death = ref.death_ratio(8)
    state, counts = kernels.birth_death(
        target,
        state,
        np.array([True, False]),
        Proposals(*target.propose(1)),
        np.array([0.5, 0.999]),
        np.array([-700.0, death - HAIR]),
    )
    ref.death(8)
    assert counts.tolist() == [0, 1, 1, 1]
    assert_state(state, ref)
    # rejected by a hair: nothing changes
    death = ref.death_ratio(0)
    state, counts = kernels.birth_death(
        target,
        state,
        np.array([False]),
        Proposals(*target.propose(0)),
        np.array([0.0]),
        np.array([death + HAIR]),
    )
    assert counts.tolist() == [0, 0, 0, 1]
    assert_state(state, ref)


def test_deaths_at_zero_and_the_first_birth():
    """Flat prior (no ``log_prior_n``): from ``n = 0`` deaths are rejected and counted; a birth
    takes slot 0 whatever ``u_pick``; then the only record dies."""
    target, table = make_target("laplace-only", prior_key="flat", n_dp=0.0)
    state = kernels.init(target, 0, np.random.default_rng(0))
    ref = Reference(
        target, table, [], S_MECHANISMS["laplace-only"], N_MECHANISMS["discrete-laplace"], None
    )
    birth = ref.birth_ratio(0)
    ref.birth(0, 0)
    death = ref.death_ratio(0)
    state, counts = kernels.birth_death(
        target,
        state,
        np.array([False, True, False, False]),
        Proposals(*target.propose(1)),
        np.array([0.9, 0.99, 0.99, 0.0]),
        np.array([-700.0, birth - HAIR, death - HAIR, -700.0]),
    )
    assert counts.tolist() == [1, 1, 1, 3]
    assert state.n == 0 and ids_of(state) == []
    np.testing.assert_allclose(state.residual, target.released, atol=1e-12)


@pytest.mark.parametrize("n0, k", [(0, 3), (2, 5), (6, 2), (30, 40)])
def test_the_prior_window_is_exactly_n_minus_k_to_n_plus_k(n0, k):
    """``log_prior_n`` is called once, at ``max(0, n - K), ..., n + K`` (int64): no value shifted,
    none outside."""
    calls = []

    def log_g(values):
        assert values.dtype == np.int64
        calls.append(values.tolist())
        return poisson(values)

    target, _ = make_target("laplace-only")
    target = target._replace(log_prior_n=log_g)
    state = kernels.init(target, n0, np.random.default_rng(0))
    kernels.birth_death(
        target,
        state,
        np.zeros(k, dtype=bool),
        Proposals(*target.propose(0)),
        np.zeros(k),
        np.full(k, -700.0),
    )
    assert calls == [list(range(max(0, n0 - k), n0 + k + 1))]


@pytest.mark.parametrize("n0", [2, 0])
def test_buffers_grow_past_their_capacity(n0):
    """30 accepted births from ``n = 2`` or from no record (capacity 16): the buffers grow to
    hold ``n + K`` records and keep every record."""
    target, table = make_target("laplace-only", prior_key="flat", n_dp=30.0)
    state = kernels.init(target, n0, np.random.default_rng(0))
    assert state.stats.shape[0] == 16
    born = Proposals(*target.propose(30))
    state, counts = kernels.birth_death(
        target, state, np.ones(30, dtype=bool), born, np.full(30, 0.999), np.full(30, -700.0)
    )
    n = n0 + 30
    assert counts.tolist() == [30, 30, 0, 0] and state.n == n
    assert ids_of(state) == list(range(n))
    np.testing.assert_array_equal(state.active_records()[1], table.t[:n])
    np.testing.assert_allclose(state.residual, target.released - table.t[:n].sum(axis=0))


# --------------------------------------------------------------------------------------------------
# refresh
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start", [0, 3])
@pytest.mark.parametrize("s_key", list(S_MECHANISMS))
def test_refresh_sequences_match_the_reference(s_key, start):
    """Refresh records ``start..start+m-1`` of 9, each decision a hair from the reference ratio
    computed on the residual after the earlier decisions."""
    target, table = make_target(s_key)
    rng = np.random.default_rng(3 + start)
    state = kernels.init(target, 9, np.random.default_rng(0))
    ref = Reference(
        target, table, range(9), S_MECHANISMS[s_key], N_MECHANISMS["discrete-laplace"], poisson
    )
    next_id = 9
    for _ in range(6):
        m = 9 - start
        proposals = Proposals(*target.propose(m))
        log_u = np.empty(m)
        accepted = 0
        for i in range(m):
            ratio = ref.refresh_ratio(start + i, next_id + i)
            accept = rng.random() < 0.5
            if np.isfinite(ratio):
                log_u[i] = ratio - HAIR if accept else ratio + HAIR
            else:
                log_u[i] = -700.0
                accept = False
            if accept:
                ref.ids[start + i] = next_id + i
                accepted += 1
        next_id += m
        state, count = kernels.refresh(target, state, proposals, log_u, start)
        assert count == accepted
        assert_state(state, ref)


# --------------------------------------------------------------------------------------------------
# sweep: every position is refreshed, the counters are exact
# --------------------------------------------------------------------------------------------------
class AcceptAll:
    """A generator whose uniforms are all ~0 (every finite ratio accepted, ``u_pick`` picks slot
    or record 0) except the birth/death coins of its first call, which alternate between a birth
    and a coin of exactly 1/2, a death (a move is a birth iff its uniform is below 1/2)."""

    def __init__(self):
        self.calls = 0

    def random(self, size):
        self.calls += 1
        if self.calls == 1:  # the birth/death coins
            return np.resize([0.25, 0.5], size)
        return np.full(size, 1e-300)


@pytest.mark.parametrize("chunk_rows", [2**14, 4], ids=["one-call", "chunked"])
@pytest.mark.parametrize("unbounded", [True, False], ids=["unbounded", "bounded"])
def test_a_sweep_refreshes_every_position(unbounded, chunk_rows, monkeypatch):
    """With a huge noise scale every proposal is accepted: each of the ``n`` positions (the last
    one included) holds a new record after the refresh, and ``refresh_accepted ==
    refresh_proposed == n``."""
    monkeypatch.setattr(records, "CHUNK_ROWS", chunk_rows)
    wide = [pmdp.Laplace(scale=1e9), pmdp.Laplace(scale=1e9)]
    table = Table()
    target = RecordTarget(
        released=np.zeros(2),
        noise=NoiseArrays.of(wide, [1, 1]),
        propose=Stub(table),
        n_dp=10.0 if unbounded else None,
        n_noise=NoiseArrays.of([pmdp.DiscreteLaplace(scale=1e9)], [1]) if unbounded else None,
    )
    rng = np.random.default_rng(1)
    state = kernels.init(target, 10, rng)
    before = ids_of(state)
    for _ in range(3):
        n = state.n
        positions = ids_of(state)
        calls = len(target.propose.calls)
        state, info = kernels.sweep(target, state, rng, n_moves=0)
        # one propose call per chunk of at most CHUNK_ROWS rows (one call if n fits)
        drawn = target.propose.calls[calls:]
        assert drawn == [min(chunk_rows, n - s) for s in range(0, n, chunk_rows)], drawn
        assert info.refresh_proposed == n and info.refresh_accepted == n
        assert info[2:] == (0, 0, 0, 0)
        after = ids_of(state)
        assert all(a != b for a, b in zip(after, positions)), (positions, after)
        assert sorted(after) == list(range(min(after), min(after) + n))  # the n fresh proposals
    assert set(ids_of(state)).isdisjoint(before)
    np.testing.assert_allclose(state.residual, -table.t[ids_of(state)].sum(axis=0))


@pytest.mark.parametrize(
    "chunk_rows, calls",
    [(2**14, [11]), (11, [11]), (9, [8, 3]), (3, [3, 3, 2, 2, 1])],
    ids=["one-call", "one-call-exactly", "chunked-moves", "chunked"],
)
def test_sweep_counters_with_moves(chunk_rows, calls, monkeypatch):
    """Refresh of all records in position order (proposal ``k`` goes to position ``k``), then the
    moves; every counter of :class:`SweepInfo` exact. ``n + births = 11`` proposals: one
    ``propose`` call if they fit in ``CHUNK_ROWS`` (equality included), else one call per chunk of
    records, then one per chunk of moves (its births)."""
    monkeypatch.setattr(records, "CHUNK_ROWS", chunk_rows)
    wide = [pmdp.Laplace(scale=1e9), pmdp.Laplace(scale=1e9)]
    table = Table()
    target = RecordTarget(
        released=np.zeros(2),
        noise=NoiseArrays.of(wide, [1, 1]),
        propose=Stub(table),
        n_dp=8.0,
        n_noise=NoiseArrays.of([pmdp.DiscreteLaplace(scale=1e9)], [1]),
    )
    state = kernels.init(target, 8, np.random.default_rng(0))  # ids 0..7
    rng = AcceptAll()
    state, info = kernels.sweep(target, state, rng, n_moves=6)
    # coins: birth, death, birth, death, birth, death -> all accepted; n back to 8
    assert info == kernels.SweepInfo(8, 8, 3, 3, 3, 3)
    # the refresh put ids 8..15 in positions 0..7 in order; each birth takes slot 0 (its record
    # moves to the end), each death removes position 0 (the last record fills it)
    expected = list(range(8, 16))
    assert ids_of(state) == expected and state.n == 8
    np.testing.assert_array_equal(state.active_records()[1], table.t[expected])
    assert sum(target.propose.calls) == 8 + 8 + 3  # init, refresh, births
    assert target.propose.calls == [8, *calls]


def test_outside_the_release_support_every_move_within_the_prior_support_is_accepted():
    """``n_dp = 7.5`` with discrete noise on ``n``: ``eta_n(n_dp - n) = 0`` at every ``n`` (the
    state is outside the release's support), so each move inside the prior's support ``3..9`` is
    accepted even with ``log u`` just below 0, and each move out of it rejected even with
    ``log u = -700`` (the support of the prior stays absorbing)."""
    target, table = make_target("laplace+gaussian", prior_key="bounded-poisson", n_dp=7.5)
    state = kernels.init(target, 4, np.random.default_rng(0))
    ref = Reference(
        target,
        table,
        range(4),
        S_MECHANISMS["laplace+gaussian"],
        N_MECHANISMS["discrete-laplace"],
        poisson_on_3_to_9,
    )
    # death (4 -> 3) accepted, death at 3 rejected, six births (3 -> 9) accepted, birth at 9 rejected
    is_birth = np.array([False, False] + [True] * 7)
    u_pick = np.array([0.0, 0.5] + [0.999] * 7)
    log_u = np.array([-1e-12, -700.0] + [-1e-12] * 6 + [-700.0])
    state, counts = kernels.birth_death(
        target, state, is_birth, Proposals(*target.propose(7)), u_pick, log_u
    )
    ref.death(0)
    for new_id in range(4, 10):
        ref.birth(new_id, len(ref.ids))
    assert counts.tolist() == [6, 7, 1, 2]
    assert_state(state, ref)


HALF_LOG_2PI = 0.5 * np.log(2 * np.pi)


def _unit_normal_logp(e):
    return -0.5 * e**2 - HALF_LOG_2PI


@numba.njit
def _unit_normal_numba(e):
    return -0.5 * e * e - HALF_LOG_2PI


def _logistic_logp(e):
    return -e - 2 * np.log1p(np.exp(-e))


@numba.njit
def _logistic_numba(e):
    return -e - 2 * np.log1p(np.exp(-e))


def test_kernel_log_densities_of_every_mechanism_kind_side_by_side():
    """The kernels' per-coordinate log-densities (Laplace, Gaussian, discrete, Tulap and a
    user-defined mechanism side by side in one ``NoiseArrays``) differ between two residuals by
    exactly the mechanisms' own ``logpdf`` differences; the discrete ones are ``-inf`` off the
    lattice."""
    from test_custom_mechanism import truncated

    from pymc_unbounded_dp.kernels import _noise

    # Three distinct user-defined mechanisms, so that each custom coordinate must reach its own
    # density (``shape_code - SHAPE_CUSTOM`` indexes a chain of compiled densities, k = 0, 1, 2).
    # With numba's JIT off (the mutation run) the kernels cannot call a density through its
    # compiled address; they call ``custom(x, k)`` as a plain function, which is then the
    # mechanisms' own Python densities, indexed by k.
    jit = not numba.config.DISABLE_JIT
    custom = [
        truncated(compiled=jit),
        truncated(
            name="unit normal",
            logp=_unit_normal_logp,
            numba_logp=_unit_normal_numba if jit else None,
        ),
        truncated(
            name="logistic", logp=_logistic_logp, numba_logp=_logistic_numba if jit else None
        ),
    ]

    mechanisms = [
        pmdp.Laplace(scale=2.0),
        pmdp.Gaussian(sigma=1.5),
        pmdp.DiscreteLaplace(scale=2.5),
        pmdp.DiscreteGaussian(sigma=3.0),
        pmdp.Tulap(epsilon=0.7),
        *custom,
    ]  # epsilon != 1: scale != 1
    noise = NoiseArrays.of(mechanisms, [1] * len(mechanisms))
    if not jit:
        densities = [m.scalar_log_density.python for m in custom]
        noise = noise._replace(custom=lambda x, k: densities[k](x))
    out_a, out_b = np.empty(len(mechanisms)), np.empty(len(mechanisms))
    a = np.array([1.0, -2.0, 3.0, -1.0, 2.0, 0.5, 1.7, 0.9])[: len(mechanisms)]
    b = np.array([-3.0, 0.5, -2.0, 4.0, -0.7, -1.5, -0.4, 2.6])[: len(mechanisms)]
    _noise.residual_log_density(a, out_a, *noise.per_coordinate)
    _noise.residual_log_density(b, out_b, *noise.per_coordinate)
    expected = [float(m.logpdf(x) - m.logpdf(y)) for m, x, y in zip(mechanisms, a, b)]
    np.testing.assert_allclose(out_a - out_b, expected, rtol=1e-12, atol=1e-12)
    off = np.array([0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0])[: len(mechanisms)]
    _noise.residual_log_density(off, out_a, *noise.per_coordinate)
    assert np.isneginf(out_a[2]) and np.isneginf(out_a[3])
    assert np.isfinite(np.delete(out_a, [2, 3])).all()


def test_the_log_ratio_is_minus_infinity_into_and_plus_infinity_out_of_a_zero_of_the_noise():
    """``_noise.log_ratio`` with a discrete and a continuous coordinate (not Laplace only): a
    move from the lattice of the discrete noise to off it has ratio ``-inf`` (rejected: the
    support is absorbing), a move from off it ``+inf``, and from off it to off it ``+inf`` too
    (every move is accepted until the chain reaches the support)."""
    from pymc_unbounded_dp.kernels import _noise

    noise = NoiseArrays.of([pmdp.DiscreteLaplace(scale=2.5), pmdp.Laplace(scale=2.0)], [1, 1])
    assert not noise.laplace_only
    on, off = np.array([1.0, 0.3]), np.array([1.5, 0.3])

    def ratio(residual, trial):
        current, trial_lp = np.empty(2), np.empty(2)
        _noise.residual_log_density(residual, current, *noise.per_coordinate)
        with np.errstate(invalid="ignore"):
            return _noise.log_ratio(
                residual, trial, current, trial_lp, *noise.per_coordinate[:4],
                noise.laplace_only, noise.custom,
            )  # fmt: skip

    assert ratio(on, off) == -np.inf
    assert ratio(off, on) == np.inf
    assert ratio(off, off + [1.0, 0.0]) == np.inf
    moved = np.array([2.0, -0.7])
    expected = sum(
        float(m.logpdf(x) - m.logpdf(y))
        for m, x, y in zip([pmdp.DiscreteLaplace(scale=2.5), pmdp.Laplace(scale=2.0)], moved, on)
    )
    assert ratio(on, moved) == pytest.approx(expected, rel=1e-12)


def test_a_tie_between_log_u_and_the_log_ratio_rejects():
    """``accept iff log u < log ratio``, strictly: a proposal with the current statistic has log
    ratio exactly 0, rejected at ``log u = 0`` and accepted just below."""
    target, _ = make_target("laplace-only", unbounded=False)
    state = kernels.init(target, 3, np.random.default_rng(0))
    for log_u, expected in ((0.0, 0), (-1e-300, 3)):
        records, _ = target.propose(3)
        same = Proposals(records, state.stats[:3].copy())
        state, accepted = kernels.refresh(target, state, same, np.full(3, log_u))
        assert accepted == expected


def test_sweep_makes_no_birth_death_move_unless_asked():
    """``sweep``'s default is ``n_moves = 0``: an unbounded target is only refreshed."""
    target, _ = make_target("laplace-only")
    state = kernels.init(target, 5, np.random.default_rng(1))
    state, info = kernels.sweep(target, state, np.random.default_rng(2))
    assert info.refresh_proposed == 5 and state.n == 5
    assert (info.births_proposed, info.deaths_proposed) == (0, 0)


def test_default_n_moves_is_one_per_record_and_at_least_ten():
    assert [kernels.default_n_moves(n) for n in (0, 3, 9, 10, 11, 230)] == [10, 10, 10, 10, 11, 230]


def test_default_n_moves_is_twenty_noise_variances_between_ten_and_one_per_record():
    """With the count noise's sd: ``ceil(20 sd**2)`` moves, at least 10, at most ``max(10, n)``."""
    moves = kernels.default_n_moves
    assert moves(10**6, noise_sd=2.0) == 80
    assert moves(10**6, noise_sd=2.8) == 157  # ceil(156.8): DiscreteLaplace(epsilon=0.5)
    assert moves(10**6, noise_sd=0.5) == 10  # the floor
    assert moves(10**7, noise_sd=1000.0) == 10**7  # a very noisy n_dp: one move per record
    assert moves(50, noise_sd=3.0) == 50 and moves(3, noise_sd=3.0) == 10
    # not more than the old default anywhere, and non-decreasing in n and in the noise
    for n in (0, 5, 40, 10**3, 10**6):
        previous = 0
        for sd in (0.0, 0.3, 1.0, 3.0, 30.0, 3000.0):
            assert previous <= moves(n, noise_sd=sd) <= moves(n)
            previous = moves(n, noise_sd=sd)


def test_outside_the_support_of_the_statistics_release_every_move_is_accepted():
    """A released sum off the lattice of its discrete noise (``9.5``): ``eta_s`` is 0 at every
    state, so every refresh proposal and every birth/death within the prior's support is accepted,
    even at ``log u = 0`` (``_noise.log_ratio`` returns ``+inf`` from outside the support; a ratio
    ``-inf - -inf = NaN`` would reject them all)."""
    target, table = make_target("discrete", prior_key="poisson", released=(9.5, -4.0))
    state = kernels.init(target, 5, np.random.default_rng(0))
    ref = Reference(
        target, table, range(5), S_MECHANISMS["discrete"], N_MECHANISMS["discrete-laplace"], poisson
    )
    assert ref.residual()[0] % 1 == 0.5  # off the lattice of the first coordinate's noise
    proposals = Proposals(*target.propose(5))
    # (with numba's JIT off, as in the mutation run, NumPy warns at the -inf - -inf it discards)
    with np.errstate(invalid="ignore"):
        state, accepted = kernels.refresh(target, state, proposals, np.zeros(5))
    assert accepted == 5
    ref.ids = list(range(5, 10))
    assert_state(state, ref)
    # a death (record 0), then two births (slot 0): all accepted at log u = 0
    with np.errstate(invalid="ignore"):
        state, counts = kernels.birth_death(
            target,
            state,
            np.array([False, True, True]),
            Proposals(*target.propose(2)),
            np.array([0.0, 0.0, 0.0]),
            np.zeros(3),
        )
    ref.death(0)
    ref.birth(10, 0)
    ref.birth(11, 0)
    assert counts.tolist() == [2, 2, 1, 1]
    assert_state(state, ref)


class _FakeCustom:
    """A user-defined mechanism as :meth:`NoiseArrays.of` reads it (no PyMC, no numba)."""

    def __init__(self, python):
        self.kernel_parameters = (kernels._noise.SHAPE_CUSTOM, False, 1.0, 0.0)
        self.scalar_log_density = kernels._noise.ScalarLogDensity(None, python)


def _callback(density):
    """The C callback the compiled kernels call, called from Python (works with the JIT off)."""
    from pymc_unbounded_dp.kernels import _noise

    return _noise.PythonLogDensity._CALLBACK(density.__wrapper_address__())


def test_noise_arrays_number_distinct_user_defined_mechanisms_and_flag_laplace_only():
    """Each distinct user-defined mechanism (by identity) gets its own index ``k`` in
    ``SHAPE_CUSTOM + k``, in order of first appearance, and the table's ``custom(x, k)`` reaches
    the ``k``-th one (and no other); ``laplace_only`` only for continuous Laplace coordinates."""
    from pymc_unbounded_dp.kernels import _noise

    a, b = _FakeCustom(lambda x: -abs(x)), _FakeCustom(lambda x: -2.0 * x * x)
    noise = NoiseArrays.of([pmdp.Laplace(scale=1.0), a, b, a], [1, 2, 1, 1])
    custom = _noise.SHAPE_CUSTOM
    assert noise.shape_code.tolist() == [_noise.SHAPE_ABS, custom, custom, custom + 1, custom]
    assert isinstance(noise.custom, _noise.PythonLogDensity)
    call = _callback(noise.custom)
    assert call(1.5, 0) == -1.5 and call(1.5, 1) == -4.5
    noise.raise_errors()  # no error so far
    assert np.isnan(call(1.5, 2))  # two distinct mechanisms only
    with pytest.raises(RuntimeError, match="IndexError"):
        noise.raise_errors()
    assert NoiseArrays.of([pmdp.Laplace(scale=1.0), pmdp.Laplace(scale=3.0)], [1, 2]).laplace_only
    for other in (pmdp.Gaussian(sigma=1.0), pmdp.DiscreteLaplace(scale=1.0), a):
        assert not NoiseArrays.of([pmdp.Laplace(scale=1.0), other], [1, 1]).laplace_only
    assert NoiseArrays.of([], []).custom is None


def test_a_python_log_density_reports_its_first_error_once():
    """An exception inside a user-defined density returns NaN (the move is rejected) and the first
    one is re-raised, once, by ``raise_errors``."""
    from pymc_unbounded_dp.kernels import _noise

    def broken(x):
        raise ValueError(f"broken at {x}")

    density = _noise.PythonLogDensity([lambda x: -abs(x), broken])
    call = _callback(density)
    assert call(-2.0, 0) == -2.0
    density.raise_errors()  # nothing to report
    assert np.isnan(call(2.0, 1)) and np.isnan(call(3.0, 1))
    with pytest.raises(RuntimeError, match="broken at 2.0"):
        density.raise_errors()
    density.raise_errors()  # reported once


@numba.njit
def _laplace_numba(e):
    return -abs(e) - np.log(2.0)


def test_the_chain_of_user_defined_densities_calls_the_kth():
    """``_noise._chain``: ``chained(x, k) = functions[k](x)`` for each ``k`` (the if-chain the
    compiled kernels call for user-defined densities; a plain function with the JIT off)."""
    from pymc_unbounded_dp.kernels import _noise

    functions = (_unit_normal_numba, _logistic_numba, _laplace_numba)
    chained = _noise._chain(functions)
    single = _noise._chain(functions[:1])
    for x in (-1.3, 0.4, 2.0):
        for k, f in enumerate(functions):
            assert chained(x, k) == pytest.approx(f(x), rel=1e-15)
        assert single(x, 0) == pytest.approx(_unit_normal_numba(x), rel=1e-15)


def test_outside_the_statistics_release_a_move_out_of_the_support_of_bounded_n_noise_is_accepted():
    """Truncated Laplace noise (``|e| <= 5``) on ``n_dp = 10`` and a released sum off its noise's
    lattice: from ``n = 5`` (inside ``eta_n``'s support, outside ``eta_s``'s) a death to ``n = 4``
    also leaves ``eta_n``'s support. Outside the release's support every move within the prior's
    support is accepted (the general ratio would be ``inf - inf = NaN``, a rejection)."""
    from test_custom_mechanism import truncated

    jit = not numba.config.DISABLE_JIT
    n_mechanism = truncated(compiled=jit)
    n_noise = NoiseArrays.of([n_mechanism], [1])
    if not jit:  # the kernels call ``custom(x, k)`` as a plain function (see above)
        n_noise = n_noise._replace(custom=lambda x, k: n_mechanism.scalar_log_density.python(x))
    target, _ = make_target("discrete", prior_key="poisson", released=(9.5, -4.0), n_dp=10.0)
    target = target._replace(n_noise=n_noise)
    state = kernels.init(target, 5, np.random.default_rng(0))
    with np.errstate(invalid="ignore"):
        state, counts = kernels.birth_death(
            target,
            state,
            np.array([False]),
            Proposals(*target.propose(0)),
            np.zeros(1),
            np.zeros(1),
        )
    assert counts.tolist() == [0, 0, 1, 1] and state.n == 4


def test_buffers_grow_by_rows_with_many_released_coordinates():
    """40 released coordinates, more than the 16 rows of the initial buffers: 30 accepted births
    from ``n = 2`` grow the buffers by their rows (records), whatever the width."""
    table = Table()
    table.t = np.random.default_rng(5).integers(-3, 5, size=(400, 40)).astype(float)
    target = RecordTarget(
        released=np.zeros(40),
        noise=NoiseArrays.of([pmdp.Laplace(scale=1e9)], [40]),
        propose=Stub(table),
        n_dp=30.0,
        n_noise=NoiseArrays.of([pmdp.DiscreteLaplace(scale=3.0)], [1]),
    )
    state = kernels.init(target, 2, np.random.default_rng(0))
    assert state.stats.shape == (16, 40)
    born = Proposals(*target.propose(30))
    state, counts = kernels.birth_death(
        target, state, np.ones(30, dtype=bool), born, np.full(30, 0.999), np.full(30, -700.0)
    )
    assert counts.tolist() == [30, 30, 0, 0] and ids_of(state) == list(range(32))
    np.testing.assert_array_equal(state.active_records()[1], table.t[:32])
    np.testing.assert_array_equal(state.stats[:32], table.t[:32])


def test_moves_to_where_the_prior_of_n_is_zero_are_rejected_also_from_outside_both_supports():
    """From ``n = 1`` under the prior on ``3..9`` (``g(1) = 0``: a state the sampler never starts
    from) and outside the statistics release's support: a birth to 2 and a death to 0 go where
    ``g = 0`` and are rejected (module docstring), even at ``log u = -700``."""
    target, _ = make_target("discrete", prior_key="bounded-poisson", released=(9.5, -4.0))
    state = kernels.init(target, 1, np.random.default_rng(0))
    with np.errstate(invalid="ignore"):  # -inf - -inf with the JIT off (see above)
        state, counts = kernels.birth_death(
            target,
            state,
            np.array([True, False]),
            Proposals(*target.propose(1)),
            np.zeros(2),
            np.full(2, -700.0),
        )
    assert counts.tolist() == [0, 1, 0, 1] and state.n == 1


# --------------------------------------------------------------------------------------------------
# user-defined noise on n: asymmetric, bounded, or raising
# --------------------------------------------------------------------------------------------------
class _CallableLogDensity(kernels._noise.PythonLogDensity):
    """With numba's JIT off the kernels call ``custom(x, k)`` as a plain function: this routes the
    call through the C callback, so errors are captured and re-raised as with the JIT."""

    def __call__(self, x, k):
        return self._callback(x, k)


def _python_noise(density):
    """One coordinate of a user-defined mechanism with the Python log-density ``density``."""
    noise = NoiseArrays.of([_FakeCustom(density)], [1])
    if numba.config.DISABLE_JIT:
        noise = noise._replace(custom=_CallableLogDensity([density]))
    return noise


def _skewed(e):
    """An asymmetric count noise: ``log eta(e) = -e / 2`` for ``e >= 0``, ``3 e / 2`` below, so
    ``eta(e) != eta(-e)`` (every built-in mechanism is symmetric)."""
    return -0.5 * e if e >= 0 else 1.5 * e


class _Density:
    """``logpdf`` of a scalar Python log-density, for :class:`Reference`."""

    def __init__(self, density):
        self.logpdf = density


def test_birth_death_evaluates_asymmetric_count_noise_at_n_dp_minus_n():
    """With skewed noise on ``n_dp`` the count term is ``eta_n(n_dp - n)``, not ``eta_n(n - n_dp)``,
    before and after each move (``n_dp - n`` takes values -3..4 here, where ``_skewed(e) -
    _skewed(-e)`` is ``e`` or more: far more than the hair)."""
    target, table = make_target("laplace+gaussian", prior_key="poisson")
    target = target._replace(n_noise=_python_noise(_skewed))
    rng = np.random.default_rng(2024)
    state = kernels.init(target, 5, np.random.default_rng(0))
    ref = Reference(
        target, table, range(5), S_MECHANISMS["laplace+gaussian"], _Density(_skewed), poisson
    )
    next_id, seen_n = 5, set()
    for _ in range(6):
        is_birth, u_pick, log_u, births = scripted_moves(ref, rng, 8, next_id)
        born = Proposals(*target.propose(births))
        next_id += births
        state, counts = kernels.birth_death(target, state, is_birth, born, u_pick, log_u)
        assert counts.tolist() == ref.counts
        ref.counts = [0, 0, 0, 0]
        assert_state(state, ref)
        seen_n.add(state.n)
    assert min(seen_n) < 7 < max(seen_n)  # both signs of n_dp - n


def test_release_log_density_evaluates_asymmetric_count_noise_at_n_dp_minus_n():
    target, _ = make_target("laplace+gaussian", n_dp=7.0)
    target = target._replace(n_noise=_python_noise(_skewed))
    state = kernels.init(target, 3, np.random.default_rng(0))
    ref = Reference(
        target, target.propose.table, range(3), S_MECHANISMS["laplace+gaussian"], None, None
    )
    expected = ref.log_eta(ref.residual()) + _skewed(7.0 - 3)  # -2, where _skewed(-4) = -6
    assert kernels.release_log_density(target, state) == pytest.approx(expected, rel=1e-14)


def _bounded(e):
    """Count noise supported on ``-1 <= e <= 2`` (skewed inside)."""
    return _skewed(e) if -1.0 <= e <= 2.0 else -np.inf


def test_moves_out_of_the_support_of_bounded_count_noise_are_rejected():
    """``eta_n`` supported on ``n_dp - n`` in ``-1..2`` with ``n_dp = 7``, i.e. ``n`` in ``5..8``,
    and the statistics release inside its support: from ``n = 5`` a death (to ``n_dp - n = 3``) is
    rejected even at ``log u = -700``, and from ``n = 8`` a birth; the moves inside are accepted by
    their exact ratio. (Only a state already outside, ``eta_n(n_dp - n) = 0``, accepts every move
    within the prior's support.)"""
    target, table = make_target("laplace+gaussian", prior_key="poisson", n_dp=7.0)
    target = target._replace(n_noise=_python_noise(_bounded))
    state = kernels.init(target, 5, np.random.default_rng(0))
    ref = Reference(
        target, table, range(5), S_MECHANISMS["laplace+gaussian"], _Density(_bounded), poisson
    )
    is_birth = [False, True, True, True, True, False]
    u_pick = [0.5, 0.0, 0.0, 0.0, 0.0, 0.99]
    log_u, born = [], 5
    for birth, u in zip(is_birth, u_pick):
        n = len(ref.ids)
        ratio = ref.birth_ratio(born) if birth else ref.death_ratio(min(int(u * n), n - 1))
        if np.isfinite(ratio):
            log_u.append(ratio - HAIR)
            if birth:
                ref.birth(born, 0)
            else:
                ref.death(min(int(u * n), n - 1))
        else:
            log_u.append(-700.0)
        born += birth
    # death at 5 rejected; births 5 -> 8 accepted, birth at 8 rejected; death 8 -> 7 accepted
    assert [np.isfinite(x) and x > -700 for x in log_u] == [False, True, True, True, False, True]
    state, counts = kernels.birth_death(
        target,
        state,
        np.array(is_birth),
        Proposals(*target.propose(4)),
        np.array(u_pick),
        np.array(log_u),
    )
    assert counts.tolist() == [3, 4, 1, 2]
    assert_state(state, ref)


def test_an_exception_in_a_user_defined_count_density_is_raised_after_the_moves():
    """A count density that raises (here for ``n > n_dp``): the move is rejected and
    ``birth_death`` re-raises the error."""

    def raising(e):
        if e < 0:
            raise ValueError(f"no count noise at {e}")
        return -abs(e)

    target, _ = make_target("laplace-only", n_dp=5.0)
    target = target._replace(n_noise=_python_noise(raising))
    state = kernels.init(target, 5, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="no count noise at -1.0"):
        kernels.birth_death(
            target,
            state,
            np.array([True]),
            Proposals(*target.propose(1)),
            np.zeros(1),
            np.full(1, -700.0),
        )
    assert state.n == 5 and ids_of(state) == list(range(5))


def test_an_exception_in_a_user_defined_release_density_is_raised_after_the_refresh():
    def raising(e):
        if e > 100.0:
            raise ValueError(f"no release noise at {e}")
        return -abs(e)

    target = RecordTarget(
        released=np.array([0.0]),
        noise=_python_noise(raising),
        propose=lambda m: ([np.zeros(m)], np.full((m, 1), -200.0)),  # residual 200 after a move
    )
    state = kernels.RecordState(
        records=(np.zeros(2),), stats=np.zeros((2, 1)), residual=np.zeros(1), n=2
    )
    with pytest.raises(RuntimeError, match="no release noise at 200.0"):
        kernels.refresh(target, state, Proposals(*target.propose(2)), np.full(2, -700.0))
    assert state.stats[:2].tolist() == [[0.0], [0.0]]  # rejected
