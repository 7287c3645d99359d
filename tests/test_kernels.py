"""Record kernels on plain targets: exact log acceptance ratios with stubbed proposals and forced
uniforms (no PyMC model), then the bookkeeping invariants of the kernel API on a real model."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import compile_model, statistic_function
from pymc_unbounded_dp.kernels import NoiseArrays, Proposals, RecordTarget, records

MECHANISMS = [pmdp.Laplace(scale=2.0), pmdp.Gaussian(sigma=1.5)]
LAPLACE = [pmdp.Laplace(scale=2.0), pmdp.Laplace(scale=0.7)]
N_MECHANISM = pmdp.DiscreteLaplace(scale=3.0)
RELEASED = np.array([4.0, -1.0])
N_DP = 5.0
#: Statistics of the stub's records, in the order it proposes them (record ``k`` has id ``k``).
TABLE = np.array(
    [
        [1.0, 0.5],
        [0.0, 2.0],
        [3.0, -1.0],
        [0.5, 0.5],
        [2.0, 3.0],
        [1.0, 0.0],
        [2.5, 1.0],
        [-1.0, 0.5],
        [0.25, -0.5],
        [1.5, 1.5],
        [-0.5, 2.5],
        [0.75, 0.25],
    ]
)
ACCEPT, REJECT = -1e-9, 1e-9  # log u = log ratio + offset


class StubProposals:
    """``propose(m)``: the next ``m`` rows of a table. Record ``k`` is two variables, its id ``k``
    (int, shape ``()``) and ``t_k`` (float, shape ``(D,)``), and its statistic is ``t_k``."""

    def __init__(self, table=TABLE):
        self.table = np.asarray(table, dtype=float)
        self.calls = []

    def __call__(self, m):
        start = sum(self.calls)
        self.calls.append(m)
        ids = np.arange(start, start + m)
        t = self.table[ids]
        assert t.shape[0] == m, "the test's table is too short"
        return [ids, t.copy()], t.copy()


class ScriptedRandom:
    """A stand-in for the generator of :func:`kernels.sweep`: ``random(size)`` returns the next
    scripted uniforms, which must have that size (an empty draw consumes nothing)."""

    def __init__(self, *draws):
        self.draws = [np.asarray(d, dtype=float) for d in draws]

    def random(self, size):
        if size == 0:
            return np.empty(0)
        u = self.draws.pop(0)
        assert u.shape == (size,), f"scripted {u.shape[0]} uniforms, the kernel drew {size}"
        return u.copy()


def make_target(
    mechanisms=MECHANISMS, unbounded=True, log_prior_n=None, table=TABLE, released=RELEASED
):
    return RecordTarget(
        released=np.asarray(released, dtype=float),
        noise=NoiseArrays.of(mechanisms, [1] * len(mechanisms)),
        propose=StubProposals(table),
        n_dp=N_DP if unbounded else None,
        n_noise=NoiseArrays.of([N_MECHANISM], [1]) if unbounded else None,
        log_prior_n=log_prior_n,
    )


def log_eta(residual, mechanisms=MECHANISMS):
    return sum(m.logpdf(r) for m, r in zip(mechanisms, residual))


def birth_ratio(residual, t_born, n, log_g):
    """Log acceptance ratio of a birth at ``n`` (DESIGN.md section 2)."""
    return (
        log_eta(residual - t_born)
        - log_eta(residual)
        + N_MECHANISM.logpdf(N_DP - n - 1)
        - N_MECHANISM.logpdf(N_DP - n)
        + log_g(n + 1)
        - log_g(n)
    )


def death_ratio(residual, t_dead, n, log_g):
    """Log acceptance ratio of a death at ``n``: the mirror of the birth at ``n - 1``."""
    return -birth_ratio(residual + t_dead, t_dead, n - 1, log_g)


def poisson_log_g(values):
    return stats.poisson.logpmf(values, 4.5)


def ids_of(state):
    return state.active_records()[0].tolist()


def assert_consistent(state):
    """Statistics, records and residual agree (``t`` of record ``k`` is ``TABLE[k]``)."""
    ids, t = state.active_records()
    np.testing.assert_array_equal(t, TABLE[ids])
    np.testing.assert_array_equal(state.stats[: state.n], TABLE[ids])
    np.testing.assert_allclose(state.residual, RELEASED - TABLE[ids].sum(axis=0))


# --------------------------------------------------------------------------------------------------
# init
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("unbounded, capacity", [(True, 16), (False, 3)])
def test_init_imputes_from_the_proposal_and_reseeds_it(unbounded, capacity):
    seeds = []
    target = make_target(unbounded=unbounded)._replace(reseed=seeds.append)
    state = kernels.init(target, 3, np.random.default_rng(5))
    assert seeds == [int(np.random.default_rng(5).integers(2**62))]
    assert target.propose.calls == [3]
    assert ids_of(state) == [0, 1, 2] and state.n == 3
    assert state.stats.shape == (capacity, 2) and state.records[0].shape == (capacity,)
    assert_consistent(state)


@pytest.mark.parametrize(
    "n, unbounded, capacity", [(3, True, 16), (8, True, 16), (10, True, 20), (11, False, 11)]
)
def test_init_gives_unbounded_buffers_room_for_twice_the_records(n, unbounded, capacity):
    """``max(2 n, 16)`` rows under unbounded DP (births need room), ``n`` under bounded DP, for
    every record variable and the statistics."""
    state = kernels.init(make_target(unbounded=unbounded), n, np.random.default_rng(0))
    assert state.stats.shape == (capacity, 2)
    assert state.records[0].shape == (capacity,) and state.records[1].shape == (capacity, 2)
    assert_consistent(state)


@pytest.mark.parametrize("reseed", [None, "list"], ids=["no-reseed", "reseed"])
def test_init_draws_one_integer_from_the_generator_with_or_without_a_reseed(reseed):
    """The generator moves on by exactly one ``integers(2**62)`` draw either way, so a chain's
    later draws do not depend on whether the model's proposal has a generator of its own."""
    target = make_target()
    if reseed:
        target = target._replace(reseed=[].append)
    rng = np.random.default_rng(9)
    kernels.init(target, 3, rng)
    expected = np.random.default_rng(9)
    expected.integers(2**62)
    assert rng.random() == expected.random()


# --------------------------------------------------------------------------------------------------
# refresh
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("start", [0, 1])
@pytest.mark.parametrize("pattern", [(True, False, True), (False, True, True), (False,) * 3])
@pytest.mark.parametrize("mechanisms", [MECHANISMS, LAPLACE], ids=["general", "laplace-only"])
def test_refresh_accepts_by_the_exact_noise_density_ratio(mechanisms, pattern, start):
    """Sequential scan: each ratio uses the residual after the earlier decisions; mixed
    mechanisms and the all-Laplace fast path."""
    target = make_target(mechanisms)
    assert target.noise.laplace_only == (mechanisms is LAPLACE)
    state = kernels.init(target, 4, np.random.default_rng(0))
    proposals = Proposals(*target.propose(3))  # ids 4, 5, 6 for records start, ..., start + 2
    residual = state.residual.copy()
    expected_ids = ids_of(state)
    log_u = np.empty(3)
    for i, accept in enumerate(pattern):
        trial = residual + TABLE[expected_ids[start + i]] - TABLE[4 + i]
        log_u[i] = log_eta(trial, mechanisms) - log_eta(residual, mechanisms)
        log_u[i] += ACCEPT if accept else REJECT
        if accept:
            residual = trial
            expected_ids[start + i] = 4 + i
    state, accepted = kernels.refresh(target, state, proposals, log_u, start)
    assert accepted == sum(pattern) and state.n == 4
    assert ids_of(state) == expected_ids
    assert_consistent(state)
    np.testing.assert_allclose(state.residual, residual)


def test_refresh_rejects_off_lattice_residuals_of_discrete_mechanisms():
    target = make_target([pmdp.DiscreteLaplace(scale=1.0)], table=[[1.0], [0.5]], released=[2.0])
    state = kernels.init(target, 1, np.random.default_rng(0))
    state, accepted = kernels.refresh(
        target, state, Proposals(*target.propose(1)), np.array([-50.0])
    )
    assert accepted == 0 and state.residual.tolist() == [1.0] and state.stats[0].tolist() == [1.0]


# --------------------------------------------------------------------------------------------------
# birth/death
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("accept", [True, False], ids=["accepted", "rejected"])
def test_birth_and_death_ratios_with_a_poisson_prior(accept):
    """A birth into slot 2, the death of record 1, a birth into the last slot: exact ratios under
    a prior on ``n`` that is not log-linear; the last move is accepted or rejected."""
    target = make_target(log_prior_n=poisson_log_g)
    state = kernels.init(target, 3, np.random.default_rng(0))  # ids [0, 1, 2]
    born = Proposals(*target.propose(2))  # ids 3, 4
    is_birth = np.array([True, False, True])
    u_pick = np.array(
        [0.6, 0.3, 0.99]
    )  # slot floor(0.6 * 4) = 2; record floor(0.3 * 4) = 1; slot 3
    r0 = state.residual.copy()
    first = birth_ratio(r0, TABLE[3], 3, poisson_log_g)
    r1 = r0 - TABLE[3]  # ids [0, 1, 3, 2]
    second = death_ratio(r1, TABLE[1], 4, poisson_log_g)
    r2 = r1 + TABLE[1]  # ids [0, 2, 3]
    third = birth_ratio(r2, TABLE[4], 3, poisson_log_g)
    log_u = np.array([first + ACCEPT, second + ACCEPT, third + (ACCEPT if accept else REJECT)])
    state, counts = kernels.birth_death(target, state, is_birth, born, u_pick, log_u)
    assert counts.tolist() == [1 + accept, 2, 1, 1]
    assert state.n == 3 + accept
    assert ids_of(state) == ([0, 2, 3, 4] if accept else [0, 2, 3])
    assert_consistent(state)


def test_moves_out_of_a_bounded_prior_support_are_rejected():
    """``g`` is flat on ``{3, 4}``: at ``n = 4`` a birth is rejected whatever ``u``, a death
    accepted with the exact ratio; at ``n = 3`` the mirror."""

    def log_g(values):
        return np.where((values >= 3) & (values <= 4), 0.0, -np.inf)

    target = make_target(log_prior_n=log_g)
    state = kernels.init(target, 4, np.random.default_rng(0))  # ids [0, 1, 2, 3]
    born = Proposals(*target.propose(2))  # ids 4, 5
    is_birth = np.array([True, False, False, True])
    u_pick = np.array([0.0, 0.0, 0.5, 0.0])  # the death takes record 0: the last one fills it
    r = state.residual.copy()
    death = death_ratio(r, TABLE[0], 4, log_g)
    birth = birth_ratio(r + TABLE[0], TABLE[5], 3, log_g)  # the rejected birth used row 4
    log_u = np.array([-700.0, death + ACCEPT, -700.0, birth + ACCEPT])
    state, counts = kernels.birth_death(target, state, is_birth, born, u_pick, log_u)
    assert counts.tolist() == [1, 2, 1, 2]
    assert state.n == 4 and ids_of(state) == [5, 1, 2, 3]
    assert_consistent(state)


def test_deaths_at_zero_are_rejected_under_the_flat_prior():
    """With no prior (flat on ``n >= 0``), no prior term; the prior window is ``-inf`` below 0."""
    target = make_target()
    state = kernels.init(target, 0, np.random.default_rng(0))
    born = Proposals(*target.propose(1))  # id 0
    is_birth = np.array([False, True, False, False])
    u_pick = np.array([0.0, 0.7, 0.7, 0.0])
    flat = np.zeros_like
    birth = birth_ratio(RELEASED, TABLE[0], 0, flat)
    death = death_ratio(RELEASED - TABLE[0], TABLE[0], 1, flat)
    log_u = np.array([-700.0, birth + ACCEPT, death + ACCEPT, -700.0])
    state, counts = kernels.birth_death(target, state, is_birth, born, u_pick, log_u)
    assert counts.tolist() == [1, 1, 1, 3]
    assert state.n == 0 and ids_of(state) == []
    np.testing.assert_allclose(state.residual, RELEASED)


def test_the_prior_of_n_is_only_evaluated_on_its_support():
    calls = []

    def log_g(values):
        calls.append(values.tolist())
        return poisson_log_g(values)

    target = make_target(log_prior_n=log_g)
    state = kernels.init(target, 1, np.random.default_rng(0))
    kernels.birth_death(
        target,
        state,
        np.array([False, False]),
        Proposals(*target.propose(0)),
        np.zeros(2),
        np.full(2, -700.0),
    )
    assert calls == [[0, 1, 2, 3]]  # the window n - K, ..., n + K = -1, ..., 3 cut at 0


# --------------------------------------------------------------------------------------------------
# sweep
# --------------------------------------------------------------------------------------------------
NEAR, FAR = 1e-300, 0.5  # uniforms: accept any finite ratio above -690; reject a far proposal


def test_sweep_draws_once_refreshes_all_then_moves():
    """One proposal call for the refresh and the births; the residual is recomputed first."""
    table = TABLE.copy()
    table[4] = [1e4, -1e4]  # the proposal for record 1: rejected
    target = make_target(table=table)
    state = kernels.init(target, 3, np.random.default_rng(0))  # ids [0, 1, 2]
    state = state._replace(residual=state.residual + 100.0)  # drift the sweep must discard
    rng = ScriptedRandom(
        [0.7, 0.2],  # death, then birth
        [NEAR, FAR, NEAR],  # refresh: records 0 and 2 take ids 3 and 5
        [0.0, 0.5],  # u_pick: record 0 dies (id 5 fills it); the newborn (id 6) takes slot 1
        [NEAR, NEAR],
    )
    state, info = kernels.sweep(target, state, rng, n_moves=2)
    assert rng.draws == [] and target.propose.calls == [3, 4]
    assert info == kernels.SweepInfo(2, 3, 1, 1, 1, 1)
    assert ids_of(state) == [5, 6, 1]
    ids, t = state.active_records()
    np.testing.assert_array_equal(t, table[ids])
    np.testing.assert_allclose(state.residual, RELEASED - table[ids].sum(axis=0))


def test_sweep_in_chunks(monkeypatch):
    """With 2-row chunks: the refresh proposes and draws per chunk, then each chunk of moves
    draws its births, ``u_pick`` and uniforms."""
    monkeypatch.setattr(records, "CHUNK_ROWS", 2)
    target = make_target()
    state = kernels.init(target, 5, np.random.default_rng(0))
    rng = ScriptedRandom(
        [0.1, 0.1, 0.9],  # birth, birth, death
        [NEAR] * 2,
        [NEAR] * 2,
        [NEAR],  # refresh chunks of 2, 2, 1 records
        [0.0, 0.0],
        [NEAR] * 2,  # moves 0-1: births into slot 0
        [0.0],
        [NEAR],  # move 2: the death of record 0
    )
    state, info = kernels.sweep(target, state, rng, n_moves=3)
    assert rng.draws == [] and target.propose.calls == [5, 2, 2, 1, 2, 0]
    assert info == kernels.SweepInfo(5, 5, 2, 2, 1, 1)
    # refreshed: ids [5, ..., 9]; births of 10 then 11 into slot 0: [11, 6, 7, 8, 9, 5, 10];
    # death of record 0, the last record takes its slot: [10, 6, 7, 8, 9, 5]
    assert ids_of(state) == [10, 6, 7, 8, 9, 5]
    assert_consistent(state)


def test_bounded_sweep_refreshes_only():
    target = make_target(unbounded=False)
    state = kernels.init(target, 3, np.random.default_rng(0))
    rng = ScriptedRandom([NEAR, NEAR, NEAR])
    state, info = kernels.sweep(target, state, rng, n_moves=4)
    assert rng.draws == [] and target.propose.calls == [3, 3]
    assert info == kernels.SweepInfo(3, 3, 0, 0, 0, 0)
    assert ids_of(state) == [3, 4, 5]
    assert_consistent(state)


# --------------------------------------------------------------------------------------------------
# on a model
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("unbounded", [True, False], ids=["unbounded", "bounded"])
def test_release_log_density_is_the_noise_density_at_the_residual_and_n(unbounded):
    target = make_target(unbounded=unbounded)
    state = kernels.init(target, 3, np.random.default_rng(0))
    expected = log_eta(RELEASED - TABLE[:3].sum(axis=0))
    if unbounded:
        expected += N_MECHANISM.logpdf(N_DP - 3)
    assert kernels.release_log_density(target, state) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("columns", [1, 2, 9])
def test_totals_are_numpys_sums_bit_for_bit(columns):
    """The residual is recomputed from the statistics as NumPy would: the same chain."""
    rng = np.random.default_rng(columns)
    stats_ = rng.standard_normal((300, columns)) * 10.0 ** rng.uniform(-3, 6, (300, columns))
    for n in (0, 1, 17, 255):
        np.testing.assert_array_equal(records._totals(stats_, n), stats_[:n].sum(axis=0))


@pytest.fixture(scope="module")
def unbounded_two_variable_model():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1)
        n = pmdp.SampleSize(
            "n", n_dp=40, mechanism=pmdp.DiscreteLaplace(epsilon=0.2), prior=pm.Poisson.dist(35.0)
        )
        X = pmdp.Records("X", pm.Normal.dist(0, 1, shape=2), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta * X[:, 0], 1), n=n)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([X[:, 0] * y, pt.clip(y, -2, 2)], axis=1),
            pmdp.Laplace(scale=2.0),
            observed=[3.0, -1.0],
        )
    return model


def test_record_target_of_a_model(unbounded_two_variable_model):
    compiled = compile_model(unbounded_two_variable_model).tables[0]
    target = compiled.record_target(unbounded_two_variable_model.initial_point())
    assert target.unbounded and target.n_dp == 40.0 and target.released.tolist() == [3.0, -1.0]
    assert target.noise.laplace_only and target.n_noise.discrete.tolist() == [True]
    values = np.array([0, 35])
    np.testing.assert_allclose(
        target.log_prior_n(values), pm.logp(pm.Poisson.dist(35.0), values).eval()
    )
    (X, y), t = target.propose(7)
    assert X.shape == (7, 2) and y.shape == (7,) and t.shape == (7, 2)


@pytest.mark.parametrize("chunk_rows", [2**14, 7], ids=["one-call", "chunked"])
def test_sweeps_keep_records_statistics_and_residual_consistent(
    unbounded_two_variable_model, chunk_rows, monkeypatch
):
    monkeypatch.setattr(records, "CHUNK_ROWS", chunk_rows)
    model = unbounded_two_variable_model
    compiled = compile_model(model).tables[0]
    statistics = statistic_function(compiled.spec)
    target = compiled.record_target(model.initial_point())
    rng = np.random.default_rng(3)
    state = kernels.init(target, 40, rng)
    seen_n = set()
    for sweep in range(80):
        moves = 15 if sweep < 60 else 1  # single moves: sweeps without any birth proposal too
        n = state.n
        state, info = kernels.sweep(target, state, rng, n_moves=moves)
        seen_n.add(state.n)
        assert info.refresh_proposed == n and info.births_proposed + info.deaths_proposed == moves
        assert state.n == n + info.births_accepted - info.deaths_accepted
    records_ = state.active_records()
    assert records_[0].shape == (state.n, 2) and records_[1].shape == (state.n,)
    np.testing.assert_allclose(state.stats[: state.n], statistics(*records_))
    np.testing.assert_allclose(state.residual, [3.0, -1.0] - statistics(*records_).sum(axis=0))
    assert len(seen_n) > 5  # n moved
    compiled.set_records(records_)
    np.testing.assert_array_equal(compiled.records[1].data.get_value(), records_[1])


def test_init_is_reproducible_from_the_generator(unbounded_two_variable_model):
    compiled = compile_model(unbounded_two_variable_model).tables[0]
    target = compiled.record_target(unbounded_two_variable_model.initial_point())
    first = kernels.init(target, 10, np.random.default_rng(5))
    second = kernels.init(target, 10, np.random.default_rng(5))
    for a, b in zip(first.active_records(), second.active_records()):
        np.testing.assert_array_equal(a, b)
