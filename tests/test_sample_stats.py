"""The package's sampler stats are never NaN: a move that is off (the interweaving move switched
off by tuning), or that proposed nothing of a kind in an iteration, reports an acceptance rate of
0.0, and ``interweave_on`` / ``interweave_steps`` / ``n_moves`` say which iterations those are."""

import numpy as np
import pymc as pm

import pymc_unbounded_dp as pmdp

SAMPLE = {"chains": 1, "cores": 1, "progressbar": False, "compute_convergence_checks": False}
OURS = ("accept_rate", "interweave_", "n_moves")


def group(idata, name: str):
    value = idata[name]
    return value.to_dataset() if hasattr(value, "to_dataset") else value


def package_stats(idata) -> dict:
    stats = group(idata, "sample_stats")
    return {k: stats[k].values for k in stats.data_vars if any(p in k for p in OURS)}


def test_interweaving_move_switched_off_reports_off_and_no_nan():
    """A small binary model with a precise release: tuning finds the move not worth its cost and
    switches it off (as on the issue's models); every draw says so, with no NaN."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1.0, 1.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=3.0), observed=12.0)
    idata = pmdp.sample(model=model, augment="records", draws=40, tune=300, random_seed=1, **SAMPLE)
    stats = package_stats(idata)
    assert not np.any(stats["interweave_on"]) and np.all(stats["interweave_steps"] == 0)
    assert stats["interweave_on"].dtype == bool
    for name, values in stats.items():
        assert not np.any(np.isnan(values.astype(float))), name
    assert np.all(stats["interweave_accept_rate"] == 0.0)
    # the move forced on: on in every draw, a defined rate
    idata = pmdp.sample(
        model=model,
        augment="records",
        interweave={"n_steps": 3},
        draws=20,
        tune=20,
        random_seed=2,
        **SAMPLE,
    )
    stats = package_stats(idata)
    assert np.all(stats["interweave_on"]) and np.all(stats["interweave_steps"] == 3)
    assert np.all((stats["interweave_accept_rate"] >= 0) & (stats["interweave_accept_rate"] <= 1))


def test_a_draw_whose_steps_were_all_rejected_reports_a_rate_of_zero(monkeypatch):
    """The move's kernel stubbed to reject every step (it still proposes them): each draw has
    the move on with its 3 steps and an acceptance rate of 0.0, not 1 / 3."""
    from pymc_unbounded_dp.kernels import interweave as rw

    real_step = rw.step

    def rejecting(rng, state, log_density, params, steps):
        _, info = real_step(rng, state, log_density, params, steps)
        return state, info._replace(accepted=0, squared_jump=0.0)

    monkeypatch.setattr(rw, "step", rejecting)
    with pm.Model() as model:
        theta = pm.Beta("theta", 1.0, 1.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=12.0)
    idata = pmdp.sample(
        model=model,
        augment="records",
        interweave={"n_steps": 3, "backend": "python"},
        draws=10,
        tune=0,
        random_seed=3,
        **SAMPLE,
    )
    stats = package_stats(idata)
    assert np.all(stats["interweave_on"]) and np.all(stats["interweave_steps"] == 3)
    assert np.all(stats["interweave_accept_rate"] == 0.0)


def test_no_nan_when_an_iteration_proposes_no_birth_or_no_death():
    """With one birth/death move per iteration every iteration proposes only one kind; the
    other's rate is 0.0, not NaN."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        n = pmdp.SampleSize("n", n_dp=30, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=11.3)
    for augment in ("records", "sums"):
        idata = pmdp.sample(
            model=model, augment=augment, n_moves=1, draws=30, tune=10, random_seed=3, **SAMPLE
        )
        stats = package_stats(idata)
        assert "birth_accept_rate" in stats and np.all(stats["n_moves"] == 1)
        for name, values in stats.items():
            assert not np.any(np.isnan(values.astype(float))), (augment, name)
        # a birth and a death are never both proposed in one iteration: one rate is 0
        assert np.all((stats["birth_accept_rate"] == 0) | (stats["death_accept_rate"] == 0))
