"""The PyMC glue of the augmentation steps (``pymc_unbounded_dp.steps``), iteration by iteration.

``RecordsStep.step`` is replayed from the public kernels (``kernels.init`` / ``kernels.sweep`` with
a generator seeded alike): the moves per iteration (about one per record of the current ``n``
during tuning, then fixed at the last tuning value), the ``n`` written into the point, the records
written into the model's containers, the acceptance-rate statistics, the kept records (every
``keep_records``-th draw after tuning, as copies), records written by another step being taken over.
``ReleaseLogLikelihood`` is checked against the noise densities written out here. Fast: the steps
are driven directly, without ``pm.sample``.
"""

from __future__ import annotations

import math

import numpy as np
import pymc as pm
import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.steps import RecordsStep, ReleaseLogLikelihood, augmentation_step
from pymc_unbounded_dp.sums import SumsStep, resolve_augment

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")

EPS_N, EPS_S, N_DP, S_DP = 0.5, 1.0, 30, 12.3


@pytest.fixture(scope="module")
def unbounded():
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=N_DP, mechanism=pmdp.DiscreteLaplace(epsilon=EPS_N))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=EPS_S), observed=S_DP)
    return model


@pytest.fixture(scope="module")
def bounded():
    """A known ``n`` and a two-coordinate release (array-valued log-likelihood)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=12)
        statistic = pm.math.stack([pm.math.clip(x, -2, 2), pm.math.clip(x, -2, 2) ** 2], axis=1)
        pmdp.PrivatizedSum(
            "s", statistic, pmdp.Laplace(scale=2.0, sensitivity=6.0), observed=[3.0, 10.0]
        )
    return model


def rate(accepted, proposed):
    return accepted / proposed if proposed else 0.0


def assert_same(actual, expected):
    assert actual == expected or (math.isnan(actual) and math.isnan(expected)), (actual, expected)


def drive(step, point, tune: int, draws: int, seed: int):
    """Run a records step as PyMC does: a chain's rng, ``tune`` tuning iterations, then draws."""
    step.set_rng(seed)
    step.reset_tuning()
    outputs = []
    for i in range(tune + draws):
        if i == tune:
            step.stop_tuning()
        point, (stats,) = step.step(point)
        outputs.append(
            (point, stats, [r.copy() for r in step.compiled.tables[0].current_records()])
        )
    return outputs


@pytest.mark.parametrize("n_moves", [None, 4], ids=["adapted", "fixed"])
def test_the_records_step_is_the_kernel_sweep_with_the_documented_schedule(unbounded, n_moves):
    with unbounded:
        step = pmdp.ReversibleJump(
            augment="records", n_moves=n_moves, interweave=False, keep_records=3
        )
    records_step = step.records_step
    point = unbounded.initial_point()
    point["theta_logodds__"] = np.asarray(0.4)
    tune, draws, seed = 5, 8, 123
    outputs = drive(records_step, dict(point), tune, draws, seed)

    table = compile_model(unbounded).tables[0]
    target = table.record_target(point)
    rng = np.random.default_rng(seed)
    state = kernels.init(target, table.n_at(point), rng)
    moves = kernels.default_n_moves(state.n) if n_moves is None else n_moves
    kept = 0
    for i, (new_point, stats, container) in enumerate(outputs):
        tuning = i < tune
        if n_moves is None and tuning:
            moves = kernels.default_n_moves(state.n)
        state, info = kernels.sweep(target, state, rng, moves)
        assert int(new_point["n"]) == state.n
        assert float(new_point["theta_logodds__"]) == 0.4
        np.testing.assert_array_equal(container[0], state.active_records()[0])
        assert stats["tune"] is tuning
        assert stats["n_moves"] == moves
        assert_same(
            stats["refresh_accept_rate"], rate(info.refresh_accepted, info.refresh_proposed)
        )
        assert_same(stats["birth_accept_rate"], rate(info.births_accepted, info.births_proposed))
        assert_same(stats["death_accept_rate"], rate(info.deaths_accepted, info.deaths_proposed))
        if not tuning and (i - tune) % 3 == 0:  # a copy: later sweeps must not change it
            np.testing.assert_array_equal(stats["records"]["x"], state.active_records()[0])
            kept += 1
        else:
            assert stats["records"] is None
    assert kept == 3  # draws 0, 3 and 6 of 8
    if n_moves is None:  # the schedule really adapted: n moved during tuning
        assert len({s["n_moves"] for _, s, _ in outputs[:tune]}) > 1 or outputs[0][0]["n"] != N_DP


def test_a_new_chain_starts_afresh(unbounded):
    """``set_rng`` (every chain) resets the state, the moves and the keep counter: the same seed
    gives the same chain, another seed another."""
    with unbounded:
        step = pmdp.ReversibleJump(augment="records", interweave=False, keep_records=2)
    point = unbounded.initial_point()
    first = drive(step.records_step, dict(point), 3, 4, 9)
    again = drive(step.records_step, dict(point), 3, 4, 9)
    other = drive(step.records_step, dict(point), 3, 4, 10)
    for (p1, s1, c1), (p2, s2, c2) in zip(first, again):
        assert int(p1["n"]) == int(p2["n"]) and s1["n_moves"] == s2["n_moves"]
        np.testing.assert_array_equal(c1[0], c2[0])
        assert (s1["records"] is None) == (s2["records"] is None)
    assert any(
        int(p1["n"]) != int(p3["n"]) or not np.array_equal(c1[0], c3[0])
        for (p1, _, c1), (p3, _, c3) in zip(first, other)
    )


def test_records_written_by_another_step_are_taken_over(bounded):
    """Another step (the interweaving move) may write records of the same ``n`` into the
    containers between iterations; the next sweep starts from them."""
    with bounded:
        step = pmdp.DataAugmentation(augment="records", interweave=False)
    records_step = step.records_step
    table = compile_model(bounded).tables[0]
    point = bounded.initial_point()
    records_step.set_rng(3)
    point, _ = records_step.step(point)
    written = np.linspace(-3.0, 3.0, 12)
    table.set_records([written])
    point, (stats,) = records_step.step(point)
    swept = table.current_records()[0].copy()

    rng = np.random.default_rng(3)  # the replay (after the step: they share the proposal's rng)
    target = table.record_target(point)
    state = kernels.init(target, 12, rng)
    state, _ = kernels.sweep(target, state, rng, 0)
    state.records[0][:12] = written
    state.stats[:12] = table.statistics([written])
    state, info = kernels.sweep(target, state, rng, 0)
    np.testing.assert_array_equal(swept, state.active_records()[0])
    assert stats["refresh_accept_rate"] == info.refresh_accepted / 12
    assert 0 < info.refresh_accepted < 12
    assert "n_moves" not in stats and "birth_accept_rate" not in stats
    for resized in (11, 13):
        table.set_records([np.zeros(resized)])
        with pytest.raises(RuntimeError, match="resized by another step"):
            records_step.step(point)


def test_vector_records_written_by_another_step_are_taken_over():
    """The same for records of several coordinates (an ``n`` by 3 table): the number of records
    is the length of the first axis."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 1.0, shape=3)
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=5)
        pmdp.PrivatizedSum(
            "s", x, pmdp.Laplace(epsilon=1.0, sensitivity=3.0), observed=[1.0, 2.0, 2.0]
        )
        step = pmdp.DataAugmentation(augment="records", interweave=False)
    records_step, table = step.records_step, compile_model(model).tables[0]
    records_step.set_rng(3)
    point, _ = records_step.step(model.initial_point())
    written = np.full((5, 3), 1.0 / 3.0)
    table.set_records([written])
    records_step.step(point)
    assert not np.array_equal(table.current_records()[0], written)  # swept from them


def test_every_write_of_the_records_goes_through_set_records(bounded):
    """One write path: the records step and the interweaving move write the containers through
    ``CompiledTable.set_records``, whose ``version`` counts the writes (the records step's one
    per iteration, and the move's when it accepts)."""
    with bounded:
        step = pmdp.DataAugmentation(augment="records", interweave=True)
    interweave = step.interweave_step
    table = step.records_step.compiled.tables[0]
    for k, method in enumerate(step.methods):
        if hasattr(method, "start_chain"):
            method.start_chain(np.random.default_rng(k))
    point, moved = bounded.initial_point(), 0
    slot = step.methods.index(interweave)
    for _ in range(15):
        before = table.version
        point, stats = step.step(point)
        accepted = stats[slot]["interweave_accept_rate"] > 0
        assert table.version - before == 1 + accepted
        moved += accepted
    assert moved > 0


def log_discrete_laplace(k, epsilon):
    return math.log(math.tanh(epsilon / 2)) - epsilon * abs(k)


def test_release_log_likelihood_is_the_noise_density_of_each_release(unbounded, bounded):
    with unbounded:
        step = pmdp.ReversibleJump(augment="records", interweave=False, log_likelihood=True)
    records_step, loglik = step.records_step, step.methods[-1]
    records_step.set_rng(4)
    point, _ = records_step.step(unbounded.initial_point())
    _, (stats,) = loglik.step(point)
    x = compile_model(unbounded).tables[0].current_records()[0]
    n = int(point["n"])
    assert x.shape == (n,)
    assert set(stats) == {"log_likelihood_s", "log_likelihood_n_dp"}
    # a scalar release's log-density is a number in PyMC's trace; an array goes as an object
    assert loglik.stats_dtypes_shapes["log_likelihood_s"] == (np.float64, [])
    expected_s = -math.log(2.0 / EPS_S) - EPS_S * abs(S_DP - x.sum())
    assert stats["log_likelihood_s"] == pytest.approx(expected_s, rel=1e-12)
    assert stats["log_likelihood_n_dp"] == pytest.approx(
        log_discrete_laplace(N_DP - n, EPS_N), rel=1e-12
    )

    with bounded:
        step = pmdp.DataAugmentation(augment="records", interweave=False, log_likelihood=True)
    step.records_step.set_rng(4)
    point, _ = step.records_step.step(bounded.initial_point())
    _, (stats,) = step.methods[-1].step(point)
    x = compile_model(bounded).tables[0].current_records()[0]
    v = np.clip(x, -2, 2)
    totals = np.array([v.sum(), (v**2).sum()])
    expected = -math.log(4.0) - np.abs(np.array([3.0, 10.0]) - totals) / 2.0
    assert set(stats) == {"log_likelihood_s"}
    assert step.methods[-1].stats_dtypes_shapes["log_likelihood_s"] == (object, None)
    np.testing.assert_allclose(stats["log_likelihood_s"], expected, rtol=1e-12)


@pytest.fixture(scope="module")
def mixed():
    """Two tables sharing ``theta``: one of known size, one of latent size."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=EPS_S), observed=4.2)
        n = pmdp.SampleSize("n", n_dp=N_DP, mechanism=pmdp.DiscreteLaplace(epsilon=EPS_N))
        y = pmdp.Records("y", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("t", y, pmdp.Laplace(epsilon=EPS_S), observed=S_DP)
    return model


@pytest.mark.parametrize("n_moves", [None, 4], ids=["adapted", "fixed"])
def test_a_table_of_known_size_gets_no_birth_death_moves(mixed, n_moves):
    """The ``n_moves`` stat counts the latent table's moves only: the known-size table's are 0."""
    with mixed:
        step = pmdp.ReversibleJump(augment="records", n_moves=n_moves, interweave=False)
    records_step = step.records_step
    assert records_step.n_moves[0] == 0
    outputs = drive(records_step, mixed.initial_point(), tune=2, draws=2, seed=5)
    assert records_step.n_moves[0] == 0
    for _, stats, _ in outputs[2:]:  # after tuning the moves are fixed
        assert stats["n_moves"] == records_step.n_moves[1] > 0


def test_the_release_log_likelihood_is_opt_in(unbounded, bounded):
    """Without ``log_likelihood=True`` the steps carry no per-draw release log-densities, nor
    does the step plain ``pm.sample()`` builds."""
    from pymc_unbounded_dp.steps import PrivateDataStep, ReleaseLogLikelihood

    for model, cls in ((unbounded, pmdp.ReversibleJump), (bounded, pmdp.DataAugmentation)):
        with model:
            plain, with_ll = cls(interweave=False), cls(interweave=False, log_likelihood=True)
        assigned = PrivateDataStep(model=model, interweave=False)
        for step in (plain, assigned):
            assert not any(isinstance(m, ReleaseLogLikelihood) for m in step.methods)
        assert any(isinstance(m, ReleaseLogLikelihood) for m in with_ll.methods)


@pytest.mark.parametrize("cls", [pmdp.ReversibleJump, pmdp.DataAugmentation])
def test_the_steps_options_are_keyword_only(unbounded, bounded, cls):
    """Only the parameter step may be given by position (``ReversibleJump(None, 4)`` would read
    as ``n_moves=4`` for one class and as something else for the other)."""
    with unbounded if cls is pmdp.ReversibleJump else bounded:
        with pytest.raises(TypeError, match="positional"):
            cls(None, 4)


def test_plain_pm_sample_hands_a_discrete_parameter_to_the_package_step():
    """PyMC's Gibbs steps claim a Bernoulli parameter as ``IDEAL``; the package step claims it
    above that, so plain ``pm.sample()`` still assigns the whole model to one augmentation step
    (a PyMC step beside it would be refused)."""
    from pymc.sampling.mcmc import assign_step_methods

    from pymc_unbounded_dp.steps import PrivateDataStep

    with pm.Model() as model:
        z = pm.Bernoulli("z", 0.5)
        theta = pm.Beta("theta", 1.0 + z, 1.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=8)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=EPS_S), observed=3.1)
    _, selected = assign_step_methods(model)
    assert {cls: {v.name for v in vs} for cls, vs in selected.items()} == {
        PrivateDataStep: {"z", "theta_logodds__"}
    }


def test_data_augmentation_refuses_latent_sample_sizes_naming_each(mixed):
    with pm.Model():
        theta = pm.Beta("theta", 1, 1)
        for name in ("a", "b"):
            n = pmdp.SampleSize(f"n_{name}", n_dp=N_DP, mechanism=pmdp.DiscreteLaplace(epsilon=1))
            x = pmdp.Records(f"x_{name}", pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{name}", x, pmdp.Laplace(epsilon=EPS_S), observed=S_DP)
        with pytest.raises(ValueError, match=r"\('n_a', 'n_b': pmdp.SampleSize\).*ReversibleJump"):
            pmdp.DataAugmentation()
    with mixed, pytest.raises(ValueError, match=r"\('n': pmdp.SampleSize\)"):
        pmdp.DataAugmentation()


def test_records_written_into_the_second_of_two_tables_are_taken_over():
    """Each table is checked on its own: an unchanged first table does not hide a write into the
    second."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        for name, n, observed in (("x", 10, 4.2), ("y", 8, 3.3)):
            x = pmdp.Records(name, pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{name}", x, pmdp.Laplace(epsilon=EPS_S), observed=observed)
        step = pmdp.DataAugmentation(augment="records", interweave=False)
    records_step, tables = step.records_step, compile_model(model).tables
    records_step.set_rng(1)
    records_step.step(model.initial_point())
    first = records_step._states[0].records[0][:10].copy()
    written = np.ones(8, dtype=tables[1].current_records()[0].dtype)
    tables[1].set_records([written])
    records_step._adopt_changed_records()
    np.testing.assert_array_equal(records_step._states[1].records[0][:8], written)
    np.testing.assert_array_equal(records_step._states[0].records[0][:10], first)


def records_step(model, **options) -> RecordsStep:
    """The records step alone (what the augmentation steps build, without their NUTS)."""
    compiled = compile_model(model)
    claimed = [model.rvs_to_values[s.rv] for s in compiled.blocks.sample_sizes]
    return RecordsStep(claimed or model.value_vars, compiled, model=model, **options)


def test_the_n_moves_stat_adds_the_moves_of_every_latent_table():
    """``n_moves`` is the iteration's birth/death moves over all tables: 4 + 4 with ``n_moves=4``,
    and with the adapted default one per record of each table's starting ``n`` (30 + 20) in the
    first tuning iteration."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        for name, n_dp, observed in (("a", N_DP, S_DP), ("b", 20, 7.6)):
            n = pmdp.SampleSize(
                f"n_{name}", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=EPS_N)
            )
            x = pmdp.Records(f"x_{name}", pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{name}", x, pmdp.Laplace(epsilon=EPS_S), observed=observed)
    point = model.initial_point()
    fixed = records_step(model, model_logp=False, n_moves=4)
    for _, stats, _ in drive(fixed, dict(point), tune=1, draws=1, seed=2):
        assert stats["n_moves"] == 8
    (_, stats, _), *_ = drive(records_step(model, model_logp=False), dict(point), 1, 0, seed=2)
    assert stats["n_moves"] == N_DP + 20


#: Laplace noise of scale 2 shifted by +1: an asymmetric density, so that ``s_dp - T(x)`` and
#: ``T(x) - s_dp`` have different log-densities (the built-in mechanisms are all symmetric).
SHIFT_SCALE = 2.0


def shifted_laplace() -> pmdp.CustomMechanism:
    return pmdp.CustomMechanism(
        logp=lambda e: -pm.math.abs(e - 1.0) / SHIFT_SCALE - math.log(2 * SHIFT_SCALE),
        simulate=lambda size, rng: 1.0 + rng.laplace(0.0, SHIFT_SCALE, size),
        privacy={"epsilon": 1.0},
        name="shifted Laplace",
    )


def test_the_release_log_likelihood_of_each_sum_reads_its_own_totals():
    """A table with two sums, a two-coordinate one first: the second sum's log-likelihood is
    its noise density at its own total (after the first sum's two coordinates), at
    ``s_dp - T(x)`` (an asymmetric noise: ``T(x) - s_dp`` would differ)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=12)
        clipped = pm.math.clip(x, -2, 2)
        pmdp.PrivatizedSum(
            "s",
            pm.math.stack([clipped, clipped**2], axis=1),
            pmdp.Laplace(scale=2.0, sensitivity=6.0),
            observed=[3.0, 10.0],
        )
        pmdp.PrivatizedSum("r", pm.math.clip(x, -1, 1), shifted_laplace(), observed=1.5)
    compiled = compile_model(model)
    imputation = records_step(model, model_logp=False)
    imputation.set_rng(4)
    point, _ = imputation.step(model.initial_point())
    _, (stats,) = ReleaseLogLikelihood(model.value_vars, compiled, model=model).step(point)
    x = compiled.tables[0].current_records()[0]
    v = np.clip(x, -2, 2)
    expected_s = -math.log(4.0) - np.abs(np.array([3.0, 10.0]) - [v.sum(), (v**2).sum()]) / 2.0
    np.testing.assert_allclose(stats["log_likelihood_s"], expected_s, rtol=1e-12)
    noise = 1.5 - np.clip(x, -1, 1).sum()
    assert abs(noise) > 0.1  # the sign matters here: |noise - 1| != |-noise - 1|
    expected_r = -abs(noise - 1.0) / SHIFT_SCALE - math.log(2 * SHIFT_SCALE)
    assert stats["log_likelihood_r"] == pytest.approx(expected_r, rel=1e-12)


def test_the_release_log_likelihood_at_the_sums_level_reads_each_tables_totals():
    """At the sums level the true totals are the latent state, one per table: each table's
    release log-likelihood is at its own table's totals."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        for name, n, observed in (("x", 10, 4.2), ("y", 30, 20.3)):
            x = pmdp.Records(name, pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{name}", x, pmdp.Laplace(epsilon=EPS_S), observed=observed)
    compiled = compile_model(model)
    _, laws = resolve_augment(compiled, "sums")
    sums_step = SumsStep(model.value_vars, compiled, laws, model_logp=False, model=model)
    loglik = ReleaseLogLikelihood(model.value_vars, compiled, sums_step, model=model)
    sums_step.set_rng(6)
    point, _ = sums_step.step(model.initial_point())
    _, (stats,) = loglik.step(point)
    totals = [float(t[0]) for t in sums_step.release_totals()]
    assert totals[0] != totals[1]
    for name, observed, total in (("x", 4.2, totals[0]), ("y", 20.3, totals[1])):
        expected = -math.log(2.0 / EPS_S) - EPS_S * abs(observed - total)
        assert stats[f"log_likelihood_s_{name}"] == pytest.approx(expected, rel=1e-12)


def test_the_kept_records_are_the_records_the_draw_ends_with(bounded):
    """With the interweaving move after the records step, a kept draw's records are those in
    the containers at the end of the iteration (the move's, when it accepted), not those the
    records step wrote."""
    with bounded:
        step = pmdp.DataAugmentation(
            augment="records",
            keep_records=1,
            interweave={"n_steps": 3, "switch_off": False, "backend": "python"},
        )
    table, imputation = step.records_step.compiled.tables[0], step.records_step
    for k, method in enumerate(step.methods):
        if hasattr(method, "start_chain"):
            method.start_chain(np.random.default_rng(k))
    step.stop_tuning()
    point, moved = bounded.initial_point(), 0
    for _ in range(8):
        point, stats = step.step(point)
        final = table.current_records()[0]
        np.testing.assert_array_equal(stats[0]["records"]["x"], final)
        moved += not np.array_equal(final, imputation._states[0].active_records()[0])
    assert moved > 0  # the move changed the records after the records step in some draws


def test_a_new_chain_restarts_the_keep_schedule_and_the_moves(unbounded):
    """A chain after another (``cores=1`` reuses the step) keeps its draws 0, 2, 4, ... and,
    without tuning, makes the default moves at its starting ``n`` (one per record: 30), not the
    last tuning value of the chain before (24 here)."""
    step = records_step(unbounded, model_logp=False, keep_records=2)
    point = unbounded.initial_point()
    first = drive(step, dict(point), tune=3, draws=3, seed=4)
    assert first[2][1]["n_moves"] != N_DP  # n moved during the first chain's tuning
    second = drive(step, dict(point), tune=0, draws=3, seed=4)
    assert [s["records"] is not None for _, s, _ in second] == [True, False, True]
    assert [s["n_moves"] for _, s, _ in second] == [N_DP] * 3


def test_n_moves_is_refused_on_a_bounded_model_even_when_zero(bounded):
    with pytest.raises(ValueError, match="`n_moves` applies to unbounded DP only"):
        augmentation_step(bounded, n_moves=0)
