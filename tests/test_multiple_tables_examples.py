"""Examples with several record tables: the two-sample comparison and the joint ATUS model."""

import numpy as np
import pymc as pm
import pytest
from pytensor.compile.mode import Mode

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.examples import atus, two_sample


def _draws(idata, name):
    return np.asarray(idata["posterior"][name].values)


@pytest.fixture(scope="module")
def two_sample_release():
    data = two_sample.simulate_two_sample(n_control=120, n_treatment=100, delta=1.0, seed=11)
    return data, two_sample.privatize_two_sample(data, epsilon_s=4.0, epsilon_n=1.0, seed=12)


def test_two_sample_release_and_tables(two_sample_release):
    data, release = two_sample_release
    assert release.sensitivity == 20.0
    assert release.mechanism.scale == pytest.approx(5.0)
    assert (release.control.n, release.treatment.n) == (120, 100)
    noise = release.control.values - two_sample.two_sample_statistics(data.control, -4.0, 4.0)
    assert noise.shape == (2,) and np.all(np.abs(noise) < 5.0 * 15)  # Laplace(5): |e| < 75
    model = two_sample.two_sample_model(release)
    tables = compile_model(model).tables
    assert [t.spec.label for t in tables] == ["n_control", "n_treatment"]
    assert [t.spec.record_names for t in tables] == [("y_control",), ("y_treatment",)]
    assert [[s.name for s in t.spec.sums] for t in tables] == [["s_control"], ["s_treatment"]]
    assert "n_control_dp" in model.named_vars and "n_treatment_dp" in model.named_vars


def test_two_sample_privatize_is_seeded():
    data = two_sample.simulate_two_sample(n_control=30, n_treatment=40, seed=1)
    a = two_sample.privatize_two_sample(data, seed=5)
    b = two_sample.privatize_two_sample(data, seed=5)
    np.testing.assert_array_equal(a.treatment.values, b.treatment.values)
    assert a.control.n_dp == b.control.n_dp
    with pytest.raises(ValueError, match="lower"):
        two_sample.privatize_two_sample(data, lower=1.0, upper=-1.0)
    with pytest.raises(ValueError, match="name"):
        a.arm("placebo")


def test_two_sample_recovers_delta(two_sample_release):
    data, release = two_sample_release
    with two_sample.two_sample_model(release):
        idata = pmdp.sample(
            draws=300,
            tune=300,
            chains=2,
            cores=1,
            random_seed=3,
            progressbar=False,
            compute_convergence_checks=False,
        )
    delta = _draws(idata, "delta").ravel()
    low, high = np.quantile(delta, [0.005, 0.995])
    assert low < data.delta < high
    assert high - low < 2.5  # the releases are informative: far narrower than the prior
    for arm in two_sample.ARMS:
        n = _draws(idata, f"n_{arm}")
        assert n.dtype.kind == "i"
        # each arm's n moves on its own, near its own count
        assert abs(np.median(n) - release.arm(arm).n_dp) < 10
        assert np.unique(n).size > 3
    assert abs(np.median(_draws(idata, "n_control")) - np.median(_draws(idata, "n_treatment"))) > 8


def _atus_releases(n, seed=0):
    by_sex = {
        sex: atus.simulate_atus(n=n, seed=seed + i) for i, sex in enumerate(("female", "male"))
    }
    return {
        sex: atus.privatize_atus(d, epsilon_s=5.0, epsilon_n=1.0, seed=seed + 10 + i)
        for i, (sex, d) in enumerate(by_sex.items())
    }


def test_atus_joint_model_tables():
    releases = _atus_releases(60)
    model = atus.atus_joint_model(releases["female"], releases["male"])
    tables = compile_model(model).tables
    assert len(tables) == 2
    assert [t.spec.label for t in tables] == ["n_female", "n_male"]
    assert [t.spec.record_names for t in tables] == [("x_female",), ("x_male",)]
    assert [t.spec.sample_size.name for t in tables] == ["n_female", "n_male"]
    for sex in ("female", "male"):
        assert f"n_{sex}_dp" in model.named_vars
        assert f"mean_share_{sex}" in model.named_vars

    bounded = atus.atus_joint_model(releases["female"], releases["male"], bounded=True)
    tables = compile_model(bounded).tables
    assert [t.spec.fixed_n for t in tables] == [60, 60]
    assert [t.spec.label for t in tables] == ["x_female", "x_male"]
    # the prior scales reach their own parameters
    scaled = atus.atus_joint_model(
        releases["female"], releases["male"], location_sd=3.0, tau_sd=0.25
    )
    for name, scale in (("m", 3.0), ("tau", 0.25)):
        rv = scaled[name]
        assert np.all(rv.owner.op.dist_params(rv.owner)[-1].eval() == scale), name


def test_atus_joint_model_samples():
    releases = _atus_releases(40, seed=4)
    with atus.atus_joint_model(releases["female"], releases["male"]):
        idata = pmdp.sample(
            draws=40,
            tune=40,
            chains=2,
            cores=1,
            random_seed=5,
            progressbar=False,
            interweave=False,
            compute_convergence_checks=False,
        )
    posterior = idata["posterior"]
    for sex in ("female", "male"):
        shares = posterior[f"mean_share_{sex}"].values
        assert shares.shape == (2, 40, 3)
        np.testing.assert_allclose(shares.sum(axis=-1), 1.0)
        n = posterior[f"n_{sex}"].values
        assert abs(np.median(n) - releases[sex].n_dp) < 15
    assert np.all(posterior["tau"].values > 0)


def test_load_atus_by_sex_matches_load_atus(tmp_path):
    rng = np.random.default_rng(0)
    import pandas as pd

    for name, rows in (("female.csv", 4), ("male.csv", 3)):
        x = rng.dirichlet([2.0, 1.0, 3.0], size=rows)
        pd.DataFrame(x, columns=list(atus.COLUMNS)).to_csv(tmp_path / name)
    by_sex = atus.load_atus_by_sex(tmp_path)
    pooled = atus.load_atus(tmp_path)
    assert [by_sex[s].n for s in ("female", "male")] == [4, 3]
    np.testing.assert_array_equal(np.concatenate([by_sex["female"].x, by_sex["male"].x]), pooled.x)
    assert not by_sex["male"].simulated
    with pytest.raises(FileNotFoundError, match="lacks"):
        atus.load_atus_by_sex(tmp_path / "nowhere")


def test_simulate_atus_by_sex():
    by_sex = atus.simulate_atus_by_sex(seed=3)
    assert {s: d.n for s, d in by_sex.items()} == atus.ATUS_N_BY_SEX
    assert all(d.simulated for d in by_sex.values())
    assert not np.array_equal(by_sex["female"].x[:5], by_sex["male"].x[:5])


def test_two_sample_settings_reach_the_data_the_noise_and_the_priors():
    """Each setting where it belongs: asymmetric clamps give the larger magnitude's sensitivity
    (10 + 10^2, not 2 + 2^2); the arms are centred at ``mu_control`` and ``mu_control + delta``
    (4,000 people: standard error 0.016); each arm's count noise comes from its own stream, not
    the sums'; the model's priors take the scales given."""
    assert two_sample.clamped_sensitivity(-10.0, 2.0) == 110.0
    data = two_sample.simulate_two_sample(
        n_control=4000, n_treatment=4000, mu_control=5.0, delta=1.0, seed=2
    )
    assert abs(data.control.mean() - 5.0) < 0.07 and abs(data.treatment.mean() - 6.0) < 0.07
    release = two_sample.privatize_two_sample(data, epsilon_s=1.0, epsilon_n=0.5, seed=9)
    count = pmdp.DiscreteLaplace(epsilon=0.5)
    for arm, child in zip(two_sample.ARMS, np.random.SeedSequence(9).spawn(2), strict=True):
        _, n_seed = child.spawn(2)
        noise = count.simulate(random_seed=np.random.default_rng(n_seed))
        assert release.arm(arm).n_dp == 4000 + int(noise)
    model = two_sample.two_sample_model(release, mu_sd=3.0, delta_sd=0.5, sigma_sd=1.5)
    for name, scale in (("mu_control", 3.0), ("delta", 0.5), ("sigma", 1.5)):
        rv = model[name]
        assert float(rv.owner.op.dist_params(rv.owner)[-1].eval()) == scale, name


# -- settings off the defaults: asymmetric clamps, each table's own release, the hierarchy -------------

#: Python-linked, lightly rewritten graphs: a one-off log-density in well under a second.
FAST = Mode(linker="py", optimizer="fast_compile")


@pytest.fixture(scope="module")
def asymmetric_release():
    """Clamped to ``[-1, 6]``: many outcomes below ``-1`` (and a few above 6 in the treatment arm
    centred at 4), where a symmetric ``[-6, 6]`` clamp would differ."""
    data = two_sample.simulate_two_sample(
        n_control=30, n_treatment=25, mu_control=0.0, delta=4.0, sigma=2.0, seed=5
    )
    return data, two_sample.privatize_two_sample(data, 1.0, 0.5, lower=-1.0, upper=6.0, seed=6)


def test_two_sample_release_does_clamp_to_the_bounds_given(asymmetric_release):
    """Each arm's sums are ``(sum c, sum c^2)`` of the outcomes clamped to ``[lower, upper]``
    plus the arm's own seeded Laplace noise (sensitivity ``6 + 36``)."""
    data, release = asymmetric_release
    assert release.sensitivity == 42.0 and (release.lower, release.upper) == (-1.0, 6.0)
    for arm, child in zip(two_sample.ARMS, np.random.SeedSequence(6).spawn(2), strict=True):
        s_seed, _ = child.spawn(2)
        noise = release.mechanism.simulate(2, random_seed=np.random.default_rng(s_seed))
        y = np.clip(getattr(data, arm), -1.0, 6.0)
        np.testing.assert_allclose(
            release.arm(arm).values, [y.sum() + noise[0], (y**2).sum() + noise[1]], rtol=1e-12
        )


def test_two_sample_model_does_model_the_curators_clamped_sums(asymmetric_release):
    """The model's density of both arms' sums, at the true records and counts, is the Laplace
    density of the release minus the curator's clamped sums (outcomes beyond both bounds)."""
    from pymc_unbounded_dp._registry import records_in_containers

    data, release = asymmetric_release
    model = two_sample.two_sample_model(release)
    point = dict(model.initial_point())
    expected = 0.0
    for arm in two_sample.ARMS:
        y = getattr(data, arm)
        model.rvs_to_values[model[f"y_{arm}"]].set_value(y)
        point[f"n_{arm}"] = np.asarray(len(y))
        exact = two_sample.two_sample_statistics(y, -1.0, 6.0)
        expected += release.mechanism.logpdf(release.arm(arm).values - exact).sum()
    assert data.control.min() < -1.0 and data.treatment.max() > 6.0
    with records_in_containers(model):
        logp = model.compile_logp(vars=[model["s_control"], model["s_treatment"]], mode=FAST)
        assert logp(point) == pytest.approx(expected, rel=1e-10)


def test_joint_atus_concentrations_are_exp_of_m_plus_tau_z():
    """``log alpha_{sex} = m + tau z_{sex}``, in prior draws of the joint model (``tau`` away from
    1), and each mean share is ``alpha / sum alpha``."""
    releases = _atus_releases(20)
    model = atus.atus_joint_model(releases["female"], releases["male"], tau_sd=3.0)
    names = ["m", "tau", "z_female", "alpha_female", "mean_share_female", "z_male", "alpha_male"]
    draws = dict(zip(names, pm.draw([model[v] for v in names], draws=50, random_seed=2, mode=FAST)))
    assert np.abs(draws["tau"] - 1.0).min() > 1e-3
    for sex in ("female", "male"):
        expected = np.exp(draws["m"] + draws["tau"][:, None] * draws[f"z_{sex}"])
        np.testing.assert_allclose(draws[f"alpha_{sex}"], expected, rtol=1e-10)
    alpha = draws["alpha_female"]
    np.testing.assert_allclose(
        draws["mean_share_female"], alpha / alpha.sum(axis=1, keepdims=True), rtol=1e-10
    )


def test_joint_atus_model_does_observe_each_sexs_own_release():
    """Each sex's table reads its own noisy count and sums (unbounded) or true count (bounded)."""
    releases = {
        sex: atus.AtusRelease(values=-np.full(3, k), n_dp=n_dp, epsilon_s=1.0, epsilon_n=1.0, n=n)
        for sex, k, n_dp, n in (("female", 10.0, 57, 50), ("male", 20.0, 73, 70))
    }
    model = atus.atus_joint_model(releases["female"], releases["male"])
    for sex, release in releases.items():
        assert int(model.rvs_to_values[model[f"n_{sex}_dp"]].eval(mode=FAST)) == release.n_dp
        observed = model.rvs_to_values[model[f"s_{sex}"]].eval(mode=FAST)
        np.testing.assert_array_equal(observed, release.values)
    bounded = atus.atus_joint_model(releases["female"], releases["male"], bounded=True)
    for sex, n in (("female", 50), ("male", 70)):
        assert bounded.rvs_to_values[bounded[f"x_{sex}"]].get_value().shape == (n, 3)
