"""Record kernels: exact acceptance ratios with stubbed proposals and forced uniforms, and the
bookkeeping invariants of the kernel API on a real model."""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import NoiseArrays, compile_model, statistic_function

MECHANISMS = [pmdp.Laplace(scale=2.0), pmdp.Gaussian(sigma=1.5)]
LAPLACE = [pmdp.Laplace(scale=2.0), pmdp.Laplace(scale=0.7)]
NOISE = NoiseArrays.of(MECHANISMS, [1, 1])
N_MECHANISM = pmdp.DiscreteLaplace(scale=3.0)
N_NOISE = NoiseArrays.of([N_MECHANISM], [1])


def log_eta(residual, mechanisms=MECHANISMS):
    return sum(m.logpdf(r) for m, r in zip(mechanisms, residual))


@pytest.mark.parametrize("offset, accepted", [(-1e-9, True), (1e-9, False)])
@pytest.mark.parametrize("mechanisms", [MECHANISMS, LAPLACE], ids=["general", "laplace-only"])
def test_refresh_acceptance_is_the_noise_density_ratio(offset, accepted, mechanisms):
    """Exact log ratios for mixed mechanisms and for the all-Laplace fast path."""
    noise_args = NoiseArrays.of(mechanisms, [1, 1])
    assert noise_args.laplace_only == (mechanisms is LAPLACE)

    stats = np.array([[1.0, 0.5], [0.0, 2.0], [3.0, -1.0]])
    proposed = np.array([[0.0, 1.5], [2.0, 3.0], [1.0, 0.0]])
    residual = np.array([0.7, -0.4])
    log_u = np.empty(3)
    expected_residual = residual.copy()
    for i in range(3):  # sequential: each ratio uses the residual after earlier accepts
        trial = expected_residual + stats[i] - proposed[i]
        log_u[i] = log_eta(trial, mechanisms) - log_eta(expected_residual, mechanisms) + offset
        if accepted:
            expected_residual = trial
    before = stats.copy()
    result = kernels._refresh_kernel(stats, proposed, residual, log_u, *noise_args)
    assert result.tolist() == [accepted] * 3
    np.testing.assert_allclose(residual, expected_residual)
    np.testing.assert_array_equal(stats, proposed if accepted else before)


def test_refresh_rejects_off_lattice_residuals_of_discrete_mechanisms():
    noise = NoiseArrays.of([pmdp.DiscreteLaplace(scale=1.0)], [1])
    stats, proposed = np.array([[1.0]]), np.array([[0.5]])
    accepted = kernels._refresh_kernel(
        stats, proposed, np.array([2.0]), np.array([-50.0]), *noise
    )
    assert not accepted[0]


def run_birth_death(stats, n, residual, born, is_birth, u_pick, log_u, log_prior, n_dp):
    return kernels._birth_death_kernel(
        stats, n, residual, born, np.asarray(is_birth), u_pick, log_u, log_prior,
        n - len(is_birth), n_dp, *kernels._n_noise_args(N_NOISE), *NOISE,
    )


def test_birth_then_death_acceptance_ratios():
    capacity_stats = np.zeros((6, 2))
    capacity_stats[:3] = [[1.0, 0.0], [0.5, 2.0], [2.0, 1.0]]
    residual = np.array([1.0, -0.5])
    born = np.array([[2.5, 1.0]])
    n, n_dp = 3, 5.0
    window = np.arange(n - 2, n + 3)
    log_prior = -0.1 * window  # a proper-looking, non-flat prior on the window
    lg = dict(zip(window, log_prior))
    birth = (log_eta(residual - born[0]) - log_eta(residual)
             + N_MECHANISM.logpdf(n_dp - 4) - N_MECHANISM.logpdf(n_dp - 3) + lg[4] - lg[3])
    after_birth = residual - born[0]
    # second move: death of record index 1 (u_pick * n = 0.3 * 4 -> 1)
    death = (log_eta(after_birth + capacity_stats[1]) - log_eta(after_birth)
             + N_MECHANISM.logpdf(n_dp - 3) - N_MECHANISM.logpdf(n_dp - 4) + lg[3] - lg[4])
    stats = capacity_stats.copy()
    new_n, moves, counts = run_birth_death(
        stats, n, residual, born, [True, False], np.array([0.0, 0.3]),
        np.array([birth - 1e-9, death - 1e-9]), log_prior, n_dp,
    )
    assert new_n == 3
    assert moves.tolist() == [kernels.BIRTH, 1]
    assert counts.tolist() == [1, 1, 1, 1]
    np.testing.assert_allclose(residual, after_birth + capacity_stats[1])
    # the newborn took slot 0 (u_pick = 0), record 0 moved to the end; then record 1 died and
    # the last record (the old record 0) took its slot
    np.testing.assert_allclose(stats[:3], [[2.5, 1.0], [1.0, 0.0], [2.0, 1.0]])

    stats = capacity_stats.copy()
    residual = np.array([1.0, -0.5])
    new_n, moves, counts = run_birth_death(
        stats, n, residual, born, [True, False], np.array([0.0, 0.3]),
        np.array([birth + 1e-9, 0.0]), log_prior, n_dp,
    )
    assert moves[0] == kernels.REJECTED and counts[:2].tolist() == [0, 1]


def test_death_at_zero_and_outside_prior_support_is_rejected():
    stats = np.zeros((4, 2))
    residual = np.zeros(2)
    log_prior = np.array([-np.inf, 0.0, 0.0])  # g(n - 1) = 0 for n = 1
    new_n, moves, counts = run_birth_death(
        stats, 1, residual, np.zeros((0, 2)), [False], np.array([0.0]),
        np.array([-700.0]), log_prior, 1.0,
    )
    assert new_n == 1 and moves[0] == kernels.REJECTED and counts.tolist() == [0, 0, 0, 1]
    new_n, moves, counts = run_birth_death(
        stats, 0, residual, np.zeros((0, 2)), [False], np.array([0.0]),
        np.array([-700.0]), np.zeros(3), 1.0,
    )
    assert new_n == 0 and moves[0] == kernels.REJECTED


def test_apply_moves_replays_births_and_deaths():
    buffer = np.zeros((6, 2))
    buffer[:3] = [[1, 1], [2, 2], [3, 3]]
    born = np.array([[7, 7], [8, 8], [6, 6]], dtype=float)
    moves = np.array([kernels.BIRTH - 1, 0, kernels.REJECTED, kernels.BIRTH - 3])
    is_birth = np.array([True, False, True, True])  # the rejected move was a birth of [8, 8]
    n = kernels._apply_moves(buffer, born, is_birth, moves, 3)
    # birth into slot 1: [1, 7, 3, 2]; death of 0: [2, 7, 3]; birth into slot 3 (the end)
    assert n == 4
    np.testing.assert_array_equal(buffer[:4], [[2, 2], [7, 7], [3, 3], [6, 6]])


@pytest.fixture(scope="module")
def unbounded_two_variable_model():
    with pm.Model() as model:
        beta = pm.Normal("beta", 0, 1)
        n = pmdp.SampleSize("n", n_dp=40, mechanism=pmdp.DiscreteLaplace(epsilon=0.2))
        X = pmdp.Records("X", pm.Normal.dist(0, 1, shape=2), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta * X[:, 0], 1), n=n)
        pmdp.PrivatizedSum("s", pt.stack([X[:, 0] * y, pt.clip(y, -2, 2)], axis=1),
                           pmdp.Laplace(scale=2.0), observed=[3.0, -1.0])
    return model


@pytest.mark.parametrize("chunk_rows", [2**14, 7], ids=["one-call", "chunked"])
def test_sweeps_keep_records_statistics_and_residual_consistent(
    unbounded_two_variable_model, chunk_rows, monkeypatch
):
    monkeypatch.setattr(kernels, "CHUNK_ROWS", chunk_rows)
    model = unbounded_two_variable_model
    compiled = compile_model(model)
    statistics = statistic_function(compiled)
    point = model.initial_point()
    rng = np.random.default_rng(3)
    state = kernels.init(compiled, point, 40, rng)
    seen_n = set()
    for sweep in range(80):
        moves = 15 if sweep < 60 else 1  # single moves: sweeps without any birth proposal too
        state, info = kernels.sweep(compiled, state, point, rng, n_moves=moves)
        seen_n.add(state.n)
        assert info.refresh_proposed > 0 and info.births_proposed + info.deaths_proposed == moves
    records = state.active_records()
    assert records[0].shape == (state.n, 2) and records[1].shape == (state.n,)
    np.testing.assert_allclose(state.stats[: state.n], statistics(*records))
    np.testing.assert_allclose(state.residual, [3.0, -1.0] - statistics(*records).sum(axis=0))
    assert len(seen_n) > 5  # n moved
    compiled.set_records(records)
    np.testing.assert_array_equal(compiled.blocks.records[1].data.get_value(), records[1])


def test_init_is_reproducible_from_the_generator(unbounded_two_variable_model):
    compiled = compile_model(unbounded_two_variable_model)
    point = unbounded_two_variable_model.initial_point()
    first = kernels.init(compiled, point, 10, np.random.default_rng(5))
    second = kernels.init(compiled, point, 10, np.random.default_rng(5))
    for a, b in zip(first.active_records(), second.active_records()):
        np.testing.assert_array_equal(a, b)
