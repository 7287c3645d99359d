"""The paper's workloads (pymc_unbounded_dp.examples): data, privatization, models, short fits."""

import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from pytensor.compile.mode import Mode

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import records_in_containers
from pymc_unbounded_dp.examples import atus, regression
from pymc_unbounded_dp.examples.study import posterior_table, suggested_n_moves

# The source CSVs of the packaged ATUS data (sha256 of each uncompressed file, as in the packaged
# README.md), and the folder they were taken from where this checkout has it beside it.
ATUS_SHA256 = {
    "female": "fdc8210cb3e02dc37ad334278a883f0de29ce60fe7cfbdf53775e10ea080d112",
    "male": "c65e9927c8dae0cbd525f341a21c965e3ae4a19974a9a968aa65fa3150c138e8",
}
ATUS_SOURCE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "atus2019"


def _clamped_statistics(x, y):
    """The 9 released numbers computed directly: [X'Y (3), Y'Y, X'X lower triangle w/o [0,0]]."""
    xc = np.clip(x, -5, 5) / 5
    yc = np.clip(y, -5, 5) / 5
    design = np.column_stack([np.ones(len(yc)), xc])
    xtx = design.T @ design
    return np.concatenate(
        [design.T @ yc, [yc @ yc], [xtx[1, 0], xtx[2, 0], xtx[1, 1], xtx[2, 1], xtx[2, 2]]]
    )


# -- regression: data and release -----------------------------------------------------------------


def test_simulated_regression_data_follow_the_paper():
    data = regression.simulate_regression(n=20000, seed=3)
    assert data.x.shape == (20000, 2) and data.y.shape == (20000,) and data.n == 20000
    np.testing.assert_allclose(data.x.mean(axis=0), [1, -1], atol=0.03)
    np.testing.assert_allclose(np.cov(data.x.T), np.eye(2), atol=0.05)
    coef, *_ = np.linalg.lstsq(np.column_stack([np.ones(20000), data.x]), data.y, rcond=None)
    np.testing.assert_allclose(coef, [0, -1, 1], atol=0.03)
    assert np.var(data.y - data.x @ [-1, 1]) == pytest.approx(1.0, abs=0.05)


def test_regression_release_is_the_clamped_statistics_plus_laplace_noise():
    data = regression.simulate_regression(n=500, seed=1)
    data = regression.RegressionData(x=data.x * 3, y=data.y * 3)  # many values beyond the clamp
    release = regression.privatize_regression(data, epsilon_s=0.5, epsilon_n=0.1, seed=7)
    exact = _clamped_statistics(data.x, data.y)
    np.testing.assert_allclose(regression.regression_statistics(data.x, data.y), exact)
    assert release.values.shape == (9,) and len(regression.STATISTIC_NAMES) == 9
    assert release.sensitivity == 9
    assert release.mechanism == pmdp.Laplace(epsilon=0.5, sensitivity=9)
    assert release.mechanism.scale == pytest.approx(18.0)
    assert release.n_mechanism == pmdp.DiscreteLaplace(epsilon=0.1)
    # the noise is the mechanism's seeded simulation, reproducible from the seed
    again = regression.privatize_regression(data, epsilon_s=0.5, epsilon_n=0.1, seed=7)
    np.testing.assert_array_equal(release.values, again.values)
    assert release.n_dp == again.n_dp and release.n == 500
    s_seed, n_seed = np.random.SeedSequence(7).spawn(2)
    noise = pmdp.Laplace(epsilon=0.5, sensitivity=9).simulate(9, rng=np.random.default_rng(s_seed))
    np.testing.assert_allclose(release.values, exact + noise)
    n_noise = pmdp.DiscreteLaplace(epsilon=0.1).simulate(random_seed=np.random.default_rng(n_seed))
    assert release.n_dp == 500 + int(n_noise)
    # the statistics noise does not depend on epsilon_n (common random numbers across cells)
    other = regression.privatize_regression(data, epsilon_s=0.5, epsilon_n=10.0, seed=7)
    np.testing.assert_array_equal(other.values, release.values)


def test_regression_sensitivity_bounds_one_record():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 10, size=(2000, 2))
    y = rng.normal(0, 10, size=2000)
    rows = np.stack([_clamped_statistics(x[i : i + 1], y[i : i + 1]) for i in range(2000)])
    assert np.abs(rows).sum(axis=1).max() <= regression.SENSITIVITY
    corner = _clamped_statistics(np.array([[9.0, -9.0]]), np.array([-9.0]))
    assert np.abs(corner).sum() == pytest.approx(9.0)  # attained: the bound is tight


# -- regression: model ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release():
    data = regression.simulate_regression(n=1000, seed=11)
    return data, regression.privatize_regression(data, epsilon_s=1.0, epsilon_n=1.0, seed=12)


def test_regression_models_build(release):
    _, rel = release
    unbounded = regression.regression_model(rel)
    bounded = regression.regression_model(rel, bounded=True)
    free = {v.name for v in unbounded.free_RVs}
    assert free == {"mu", "Phi_c1", "Phi_c2", "Phi_z", "tau", "beta", "n"}
    assert {v.name for v in bounded.free_RVs} == free - {"n"}
    assert {v.name for v in unbounded.observed_RVs} == {"x1", "x2", "y", "s", "n_dp"}
    assert "n_dp" not in bounded.named_vars
    assert "Phi" in unbounded.named_vars
    assert int(unbounded.initial_point()["n"]) == max(rel.n_dp, 0)
    # bounded DP reads the public n; the unbounded model never sees it
    assert bounded.rvs_to_values[bounded["x1"]].get_value().shape == (rel.n,)


def test_regression_priors_and_budget_split_are_the_papers(release):
    """``beta | tau ~ N(0, 1 / tau)`` (precision tau: ``beta sqrt(tau)`` is standard normal,
    60,000 prior draws; with ``1 / tau`` as its sd the variance would be ``E[1 / tau]``, infinite
    under Gamma(1, 1)); ``fraction_n`` of the budget goes to the count."""
    _, rel = release
    model = regression.regression_model(rel)
    tau, beta = pm.draw([model["tau"], model["beta"]], draws=20_000, random_seed=1)
    z = (beta * np.sqrt(tau)[:, None]).ravel()
    assert abs(z.mean()) < 0.03 and abs(z.var() - 1.0) < 0.04
    plan = regression.regression_plan(epsilon=2.0, fraction_n=0.25)
    assert plan.mechanisms["n"].epsilon == pytest.approx(0.5)
    assert plan.mechanisms["s"].epsilon == pytest.approx(1.5)


@pytest.fixture(scope="module")
def gibbs_step(release):
    """The conjugate step of the unbounded model (built once: constructing it compiles)."""
    return regression.regression_gibbs_step(regression.regression_model(release[1]))


def test_the_regression_gibbs_step_draws_mu_given_phi_written_as_a_a_transpose(gibbs_step):
    """``mu | x, Phi ~ N(P^-1 Phi sum x, P^-1)``, ``P = I + n Phi``, with ``Phi = A A'`` from the
    Bartlett pieces (``A = [[sqrt(c1), 0], [z, sqrt(c2)]]``): 4,000 updates at fixed records and
    pieces, each coordinate's mean and variance and their sum's variance. ``A' A`` instead
    (another matrix when ``z != 0``) moves the variances by a factor of 2 or more."""
    from mcmc_checks import assert_mean_and_spread_match

    step = gibbs_step
    rng = np.random.default_rng(4)
    x = rng.normal([0.5, -1.0], 1.0, size=(5, 2))
    records = {"x1": x[:, 0], "x2": x[:, 1], "y": rng.normal(size=5)}
    values = {"Phi_c1": 1.0, "Phi_c2": 0.5, "Phi_z": 1.5}
    a = np.array([[1.0, 0.0], [1.5, np.sqrt(0.5)]])
    precision = np.eye(2) + 5 * a @ a.T
    covariance = np.linalg.inv(precision)
    mean = covariance @ (a @ a.T @ x.sum(axis=0))
    draws = np.array([step.update(rng, records, values)["mu"] for _ in range(4000)])
    for j in range(2):
        assert_mean_and_spread_match(draws[None, :, j], mean[j], covariance[j, j], f"mu[{j}]")
    total = draws.sum(axis=1)[None, :]
    assert_mean_and_spread_match(total, mean.sum(), covariance.sum(), "mu[0] + mu[1]")


def test_regression_model_of_a_published_release_is_the_same_model(release):
    """``regression_plan`` releases what ``privatize_regression`` does (same mechanisms), and
    ``regression_model`` of the published ``Release`` has the same density."""
    data, rel = release
    plan = regression.regression_plan(epsilon=2.0, fraction_n=0.5)
    assert plan.mechanisms["s"] == rel.mechanism and plan.mechanisms["n"] == rel.n_mechanism
    rows = regression.regression_rows(data.x, data.y)
    np.testing.assert_allclose(rows.sum(axis=0), regression.regression_statistics(data.x, data.y))
    published = pmdp.epsilon.simulate_release(plan, {"s": rows.sum(axis=0)}, data.n, 1)
    same = regression.RegressionRelease(
        values=published["s"].value, n_dp=published["n"].value, epsilon_s=1.0, epsilon_n=1.0, n=0
    )
    models = [regression.regression_model(published), regression.regression_model(same)]
    point = {**models[1].initial_point(), "n": np.asarray(data.n)}
    records = {"x1": data.x[:, 0], "x2": data.x[:, 1], "y": data.y}
    logps = []
    for model in models:
        for name, values in records.items():
            model.rvs_to_values[model[name]].set_value(values)
        with records_in_containers(model):
            logps.append(model.compile_logp()(point))
    assert {v.name for v in models[0].free_RVs} == {v.name for v in models[1].free_RVs}
    assert np.isfinite(logps[0]) and logps[0] == pytest.approx(logps[1], rel=1e-12)


def test_release_density_in_the_model_is_that_of_the_curators_statistic(release):
    data, rel = release
    model = regression.regression_model(rel, bounded=True)
    for name, values in {"x1": data.x[:, 0], "x2": data.x[:, 1], "y": data.y}.items():
        model.rvs_to_values[model[name]].set_value(values)
    with records_in_containers(model):  # the test put the records there itself
        logp = model.compile_logp(vars=[model["s"]])(model.initial_point())
    expected = rel.mechanism.logpdf(rel.values - _clamped_statistics(data.x, data.y)).sum()
    assert logp == pytest.approx(expected)


def test_bartlett_prior_is_wishart_and_records_are_bivariate_normal():
    rel = regression.RegressionRelease(
        values=np.zeros(9), n_dp=0, epsilon_s=1.0, epsilon_n=1.0, n=4000
    )
    model = regression.regression_model(rel, bounded=True)
    phis = pm.draw(model["Phi"], draws=20000, random_seed=1)
    np.testing.assert_allclose(phis.mean(axis=0), 2 * np.eye(2), atol=0.07)  # E = nu V
    np.testing.assert_allclose(phis[:, 0, 1].var(), 2.0, rtol=0.08)  # nu (v12^2 + v11 v22)
    np.testing.assert_allclose(phis[:, 0, 0].var(), 4.0, rtol=0.08)  # 2 nu v11^2
    phi, mu, x1, x2 = pm.draw([model["Phi"], model["mu"], model["x1"], model["x2"]], random_seed=2)
    x = np.column_stack([x1, x2])
    np.testing.assert_allclose(
        x.mean(axis=0), mu, atol=5 * np.sqrt(np.diag(np.linalg.inv(phi)) / 4000).max()
    )
    np.testing.assert_allclose(
        np.cov(x.T), np.linalg.inv(phi), atol=0.1 * np.abs(np.linalg.inv(phi)).max()
    )


def _check_regression_fit(idata, truth, n_true=None):
    summary = posterior_table(idata, ["beta", "tau", "mu"] + (["n"] if n_true else []))
    for label in ["beta[0]", "beta[1]", "beta[2]"]:
        assert abs(summary.loc[label, "mean"] - truth[label]) < 1.5, summary
    assert 0.2 < summary.loc["tau", "mean"] < 5
    np.testing.assert_allclose(summary.loc[["mu[0]", "mu[1]"], "mean"], [1, -1], atol=0.4)
    if n_true:
        assert abs(summary.loc["n", "mean"] - n_true) < 40


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "unbounded"])
def test_short_regression_fit_is_sensible(release, bounded):
    _, rel = release
    model = regression.regression_model(rel, bounded=bounded)
    # The augmentation chain moves beta slowly (autocorrelation time ~150 iterations here): one
    # 150-draw chain could sit in an excursion 2 units from the posterior mean (-0.25 for beta[0]
    # from 6,000 exact-Gibbs draws), so two chains of 300 draws are pooled.
    with model:
        idata = pmdp.sample(
            draws=300,
            tune=200,
            chains=2,
            cores=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    _check_regression_fit(idata, regression.regression_truth(), None if bounded else rel.n)


def test_short_regression_fit_with_conjugate_updates(release):
    _, rel = release
    model = regression.regression_model(rel)
    with model:
        idata = pmdp.sample(
            draws=300,
            tune=100,
            chains=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
            step=regression.regression_gibbs_step(model),
        )
    _check_regression_fit(idata, regression.regression_truth(), rel.n)


# -- ATUS ------------------------------------------------------------------------------------------


def test_atus_loads_the_packaged_data(monkeypatch):
    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    data = atus.load_atus()
    assert data.n == atus.ATUS_N == 6656 and data.x.shape == (6656, 3) and not data.simulated
    assert "packaged" in data.source
    np.testing.assert_allclose(data.x.sum(axis=1), 1.0, atol=1e-9)
    assert data.x.min() >= atus.MIN_SHARE * (1 - 1e-9)
    np.testing.assert_allclose(atus.dirichlet_mle(data.x), atus.MLE_ALPHA, rtol=0.01)
    by_sex = atus.load_atus_by_sex()
    assert {sex: d.n for sex, d in by_sex.items()} == atus.ATUS_N_BY_SEX
    np.testing.assert_array_equal(np.concatenate([by_sex["female"].x, by_sex["male"].x]), data.x)


def test_packaged_atus_data_are_the_source_csvs_bit_for_bit(tmp_path, monkeypatch):
    """The packaged files decompress to the source CSVs (their sha256), and reading them from a
    folder gives exactly the packaged shares."""
    import gzip
    import hashlib

    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    for sex, resource in atus.packaged_atus_files().items():
        raw = gzip.decompress(resource.read_bytes())
        assert hashlib.sha256(raw).hexdigest() == ATUS_SHA256[sex], sex
        (tmp_path / f"{sex}.csv").write_bytes(raw)
    packaged, from_folder = atus.load_atus(), atus.load_atus(tmp_path)
    assert from_folder.source == str(tmp_path) and not from_folder.simulated
    np.testing.assert_array_equal(from_folder.x, packaged.x)
    monkeypatch.setenv(atus.ATUS_ENV, str(tmp_path))
    np.testing.assert_array_equal(atus.load_atus().x, packaged.x)
    if ATUS_SOURCE_DIR.is_dir():  # the source folder itself, where this checkout has it
        np.testing.assert_array_equal(atus.load_atus(ATUS_SOURCE_DIR).x, packaged.x)


def test_atus_path_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    assert atus.resolve_atus_dir() is None  # the packaged data
    # a folder given that lacks the files: a clear error naming the folder and the files
    (tmp_path / "female.csv").write_text("")
    with pytest.raises(FileNotFoundError, match="male.csv") as error:
        atus.load_atus(tmp_path)
    assert str(tmp_path) in str(error.value) and "female.csv and male.csv" in str(error.value)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atus.load_atus(tmp_path / "nowhere")
    # the environment variable is read when no path is given, and checked the same way
    monkeypatch.setenv(atus.ATUS_ENV, str(tmp_path / "nowhere"))
    (tmp_path / "male.csv").write_text("")
    assert atus.resolve_atus_dir(tmp_path) == tmp_path  # a path given wins over the variable
    with pytest.raises(FileNotFoundError, match=atus.ATUS_ENV) as error:
        atus.load_atus()
    assert str(tmp_path / "nowhere") in str(error.value)
    with pytest.raises(FileNotFoundError, match=atus.ATUS_ENV):
        atus.load_atus_by_sex()
    # no silent fallback: the simulated stand-in only when asked for
    stand_in = atus.simulate_atus(seed=2019)
    assert stand_in.simulated and stand_in.n == 6656 and "simulated" in stand_in.source
    np.testing.assert_allclose(stand_in.x.sum(axis=1), 1.0)
    np.testing.assert_allclose(atus.dirichlet_mle(stand_in.x), atus.MLE_ALPHA, rtol=0.08)


def test_atus_release_sum_and_its_bounded_mean_form():
    data = atus.simulate_atus(n=800, seed=4)
    release = atus.privatize_atus(data, epsilon_s=1.0, epsilon_n=0.1, seed=9)
    exact = np.log(np.maximum(data.x, 1 / 1440)).sum(axis=0)
    assert (
        release.sensitivity == pytest.approx(-3 * math.log(1 / 1440)) == pytest.approx(21.82, 1e-3)
    )
    assert release.mechanism.scale == pytest.approx(3 * math.log(1440))
    s_seed, _n_seed = np.random.SeedSequence(9).spawn(2)
    noise = release.mechanism.simulate(3, rng=np.random.default_rng(s_seed))
    np.testing.assert_allclose(release.values, exact + noise)
    # bounded DP: the released mean is the sum / n, with Laplace(Delta / (n epsilon_s)) noise
    np.testing.assert_allclose(release.mean, exact / 800 + noise / 800)
    assert release.mechanism.scale / release.n == pytest.approx(release.sensitivity / (800 * 1.0))
    assert np.all(exact <= 0) and np.all(exact >= -800 * math.log(1440))


def test_dirichlet_records_distribution_is_pymcs_dirichlet():
    alpha = np.array([12.6, 1.59, 17.16])
    dist = atus.dirichlet_dist(alpha)
    # (PyTensor's numba backend, PyMC 6's default for pm.draw, would run the Python sampler in
    # object mode with a warning; pmdp's own compiled proposals do not use numba)
    draws = pm.draw(dist, draws=4000, random_seed=1, mode=Mode(linker="cvm"))
    assert draws.shape == (4000, 3)
    np.testing.assert_allclose(draws.mean(axis=0), alpha / alpha.sum(), atol=0.005)
    np.testing.assert_allclose(
        pm.logp(dist, draws[:5]).eval(), pm.logp(pm.Dirichlet.dist(alpha), draws[:5]).eval()
    )


def test_atus_models_build_and_a_short_fit_is_sensible():
    data = atus.simulate_atus(n=1000, seed=2)
    release = atus.privatize_atus(data, epsilon_s=10.0, epsilon_n=1.0, seed=3)
    unbounded = atus.atus_model(release)
    bounded = atus.atus_model(release, bounded=True)
    assert {v.name for v in unbounded.free_RVs} == {"alpha", "n"}
    assert {v.name for v in bounded.free_RVs} == {"alpha"}
    with unbounded:
        idata = pmdp.sample(
            draws=300,
            tune=100,
            chains=1,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
            step=atus.atus_gibbs_step(unbounded),
        )
    alpha = np.asarray(idata["posterior"]["alpha"].values).reshape(-1, 3)
    for j, true in enumerate(atus.MLE_ALPHA):
        lo, hi = np.quantile(alpha[:, j], [0.001, 0.999])
        assert lo / 2 < true < hi * 2
    assert abs(np.mean(idata["posterior"]["n"].values) - 1000) < 10


def test_a_chunked_atus_release_simulates_each_chunk_from_its_own_stream():
    """2,500 records in chunks of 1,000: the release is that of the three chunks' sums, each
    chunk simulated from its own child of the data seed (not one stream reused: repeated
    records), plus the release seed's noise."""
    from pymc_unbounded_dp.examples._release import noisy_release

    data_seed, release_seed = np.random.SeedSequence(1).spawn(2)
    exact = sum(
        atus.atus_statistics(atus.simulate_atus(size, seed=child).x)
        for size, child in zip((1000, 1000, 500), data_seed.spawn(3))
    )
    expected = noisy_release(atus.AtusRelease, exact, 2500, 1.0, 0.5, release_seed)
    released = atus.simulate_atus_release(2500, 1.0, 0.5, seed=1, chunk=1000)
    np.testing.assert_allclose(released.values, expected.values, rtol=1e-12)
    assert released.n_dp == expected.n_dp


def test_a_release_seed_keeps_its_place_in_the_seed_tree_and_zero_records_sum_to_zero():
    """A child ``SeedSequence`` is used as it is: its noise comes from its own children, by hand
    here (a sequence rebuilt from the entropy alone would be the root, whose children are the
    data's and the release's own seeds). ``n = 0`` records sum to zeros of the statistic's
    shape."""
    from pymc_unbounded_dp.examples._release import chunked_sums, noisy_release, seed_sequence

    data_seed, release_seed = np.random.SeedSequence(1).spawn(2)
    assert seed_sequence(release_seed) is release_seed
    exact = np.array([10.0, 20.0, 30.0])
    released = noisy_release(atus.AtusRelease, exact, 50, 1.0, 0.5, release_seed)
    same = np.random.SeedSequence(release_seed.entropy, spawn_key=release_seed.spawn_key)
    s_seed, n_seed = same.spawn(2)  # (spawn is stateful: release_seed's next children differ)
    mechanism = pmdp.Laplace(epsilon=1.0, sensitivity=atus.AtusRelease.sensitivity)
    noise = mechanism.simulate(3, random_seed=np.random.default_rng(s_seed))
    np.testing.assert_allclose(released.values, exact + noise, rtol=1e-12)
    count_noise = pmdp.DiscreteLaplace(epsilon=0.5).simulate(
        random_seed=np.random.default_rng(n_seed)
    )
    assert released.n_dp == 50 + int(count_noise)

    def statistics(size, seed):
        return np.full(3, float(size))

    zero = chunked_sums("test", 0, 10, data_seed, statistics)
    assert zero.shape == (3,) and not zero.any()  # (a scalar 0 would broadcast)
    np.testing.assert_array_equal(
        chunked_sums("test", 25, 10, data_seed, statistics), np.full(3, 25.0)
    )


def test_the_atus_gibbs_step_targets_alpha_given_the_records_under_the_models_prior():
    """The step's update as a chain on alpha with two records fixed, where the Gamma(1, rate 0.1)
    prior matters: each alpha's mean and centred variance against importance sampling from the
    prior (400,000 draws). Swapping the prior's shape and rate (Gamma(0.1, rate 1)), or reading
    the records' log-shares floored at a minute a day as the release does (the first record
    has a share of 1e-6), moves the posterior by many standard errors."""
    from mcmc_checks import assert_mean_and_spread_match
    from scipy import special

    release = atus.privatize_atus(atus.simulate_atus(n=50, seed=2), 10.0, 1.0, seed=3)
    step = atus.atus_gibbs_step(atus.atus_model(release, bounded=True))
    rng = np.random.default_rng(1)
    x = np.array([[1e-6, 0.4, 0.6 - 1e-6], [0.2, 0.3, 0.5]])  # a share below a minute a day
    alpha, draws = np.ones(3), []
    for _ in range(8000):
        alpha = step.update(rng, {"x": x}, {"alpha": alpha})["alpha"]
        draws.append(alpha)
    draws = np.array(draws)[500:]
    prior = rng.gamma(1.0, 10.0, size=(400_000, 3))
    log_w = 2 * (special.gammaln(prior.sum(1)) - special.gammaln(prior).sum(1))
    log_w += ((prior - 1) * np.log(x).sum(0)).sum(1)
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mean = w @ prior
    variance = w @ (prior - mean) ** 2
    for j in range(3):
        assert_mean_and_spread_match(draws[None, :, j], mean[j], variance[j], f"alpha[{j}]")


# -- studies ---------------------------------------------------------------------------------------


def test_suggested_n_moves_covers_the_plausible_range_of_n():
    rel = regression.RegressionRelease(
        values=np.zeros(9), n_dp=-5000, epsilon_s=1.0, epsilon_n=1e-4, n=1000
    )
    assert suggested_n_moves(rel) == 3000  # not 10 moves from n = 0
    rel = regression.RegressionRelease(
        values=np.zeros(9), n_dp=1003, epsilon_s=1.0, epsilon_n=1.0, n=1000
    )
    assert suggested_n_moves(rel) == 100


# -- settings off the defaults: priors of n, public n, conditionals, the demo's bookkeeping ----------


#: Python-linked, lightly rewritten graphs: a one-off log-density in well under a second.
FAST = Mode(linker="py", optimizer="fast_compile")


def _regression_release(n, n_dp):
    return regression.RegressionRelease(
        values=np.zeros(9), n_dp=n_dp, epsilon_s=1.0, epsilon_n=1.0, n=n
    )


def test_regression_n_prior_does_weight_the_latent_n():
    """An ``n_prior`` given to the unbounded model is ``n``'s prior: the log-density of ``n``
    changes between 30 and 31 by the Poisson(40) log-ratio (the flat default would give 0)."""
    from scipy import stats

    model = regression.regression_model(_regression_release(50, 57), n_prior=pm.Poisson.dist(40))
    logp = model.compile_logp(vars=[model["n"]], mode=FAST)
    point = model.initial_point()
    ratio = logp({**point, "n": np.asarray(31)}) - logp({**point, "n": np.asarray(30)})
    assert ratio == pytest.approx(np.diff(stats.poisson.logpmf([30, 31], 40))[0], abs=1e-6)


def test_regression_records_are_bivariate_normal_with_precision_phi():
    """The records' log-density (``x1`` then ``x2 | x1``) is that of ``N(mu, Phi^-1)`` at a point
    with a strong correlation (``Phi_z = 1.5``), for three hand-picked records."""
    from scipy import stats

    model = regression.regression_model(_regression_release(3, 3), bounded=True)
    x = np.array([[0.5, -2.0], [2.0, 1.0], [-1.0, 0.3]])
    for j, name in enumerate(("x1", "x2")):
        model.rvs_to_values[model[name]].set_value(x[:, j])
    c1, c2, z, mu = 1.3, 0.4, 1.5, np.array([0.7, -0.4])
    point = {
        **model.initial_point(),
        "mu": mu,
        "Phi_c1_log__": np.log(c1),
        "Phi_c2_log__": np.log(c2),
        "Phi_z": np.asarray(z),
    }
    with records_in_containers(model):
        logp = model.compile_logp(vars=[model["x1"], model["x2"]], mode=FAST)(point)
    a = np.array([[np.sqrt(c1), 0.0], [z, np.sqrt(c2)]])
    expected = stats.multivariate_normal(mu, np.linalg.inv(a @ a.T)).logpdf(x).sum()
    assert logp == pytest.approx(expected, rel=1e-9)


def test_regression_gibbs_step_draws_phi_given_mu_from_the_wishart_2_posterior(
    gibbs_step, monkeypatch
):
    """With ``mu`` held at a fixed value, the step's ``Phi`` (rebuilt from the Bartlett pieces
    it returns as ``A A'``) is ``Wishart(2 + n, (I + S)^-1)``, ``S = sum (x_i - mu)(x_i - mu)'``:
    the mean and variance of each entry over 2,500 updates (5 records; a Wishart(3) prior moves
    the means by 1/7, over 10 standard errors)."""
    from mcmc_checks import assert_mean_and_spread_match

    import pymc_unbounded_dp.conjugate as conjugate

    step = gibbs_step
    mu = np.array([0.3, -0.2])
    monkeypatch.setattr(conjugate, "normal_mean", lambda rng, x, phi: mu)
    rng = np.random.default_rng(8)
    x = np.array([[0.5, -1.0], [1.5, 0.2], [-0.7, -0.9], [1.1, 1.4], [0.0, -2.0]])
    records = {"x1": x[:, 0], "x2": x[:, 1], "y": rng.normal(size=5)}
    values = {"Phi_c1": 1.0, "Phi_c2": 1.0, "Phi_z": 0.0}
    draws = []
    for _ in range(2500):
        new = step.update(rng, records, values)
        a = np.array([[np.sqrt(new["Phi_c1"]), 0.0], [new["Phi_z"], np.sqrt(new["Phi_c2"])]])
        draws.append((a @ a.T)[[0, 1, 1], [0, 0, 1]])
    draws = np.array(draws)
    scale = np.linalg.inv(np.eye(2) + (x - mu).T @ (x - mu))
    df = 2 + 5
    for k, (i, j) in enumerate([(0, 0), (1, 0), (1, 1)]):
        variance = df * (scale[i, j] ** 2 + scale[i, i] * scale[j, j])
        assert_mean_and_spread_match(draws[None, :, k], df * scale[i, j], variance, f"Phi[{i},{j}]")


def test_bounded_atus_model_does_read_the_public_n_not_n_dp():
    release = atus.AtusRelease(values=-np.ones(3), n_dp=57, epsilon_s=1.0, epsilon_n=1.0, n=50)
    model = atus.atus_model(release, bounded=True)
    assert model.rvs_to_values[model["x"]].get_value().shape == (50, 3)
    assert "n" not in model.named_vars and "n_dp" not in model.named_vars


def _demo_result(bounded, n=40, n_dp=47):
    from pymc_unbounded_dp.examples import demo

    rng = np.random.default_rng(0)
    release = regression.RegressionRelease(
        values=rng.normal(size=9), n_dp=n_dp, epsilon_s=1.0, epsilon_n=0.5, n=n
    )
    return demo, demo.DemoResult(release, None, bounded, 1, "gibbs", 0.0)


def test_demo_summary_does_compare_n_with_the_true_count():
    """The summary's true ``n`` is the number of records, not the released ``n_dp``; an
    interval ``[44, 50]`` of ``n`` around ``n_dp = 47`` does not cover the true ``n = 40``."""
    from dataclasses import replace

    from mcmc_checks import trace_of

    demo, result = _demo_result(bounded=False)
    rng = np.random.default_rng(1)
    posterior = {
        "beta": rng.normal(size=(1, 50, 3)),
        "tau": rng.gamma(1.0, size=(1, 50)),
        "mu": rng.normal(size=(1, 50, 2)),
        "n": rng.integers(44, 51, size=(1, 50)),
    }
    table = demo.demo_summary(replace(result, idata=trace_of({"posterior": posterior})))
    assert table.loc["n", "true"] == 40 and not table.loc["n", "covered"]
    assert table.loc["beta[1]", "true"] == -1 and table.loc["tau", "true"] == 1


def test_bounded_demo_release_does_publish_the_true_n():
    demo, result = _demo_result(bounded=True)
    released = demo.demo_release(result)
    assert released["n"].value == 40 and released["n"].mechanism is None
    unbounded = demo.demo_release(_demo_result(bounded=False)[1])
    assert unbounded["n"].value == 47


def test_census_scale_demo_does_release_with_the_budgets_given(monkeypatch):
    """``fit_demo(augment="sums")``: the release is ``simulate_regression_release`` of ``n``
    records with ``epsilon_s`` on the sums and ``epsilon_n`` on the count, from the data child
    of ``seed`` (sampling stubbed out: the model it would fit is all that is checked)."""
    import pymc_unbounded_dp.sampling as sampling
    from pymc_unbounded_dp.examples import demo

    fitted = []

    def sample(**options):
        fitted.append((pm.modelcontext(None), options))
        return "idata"

    monkeypatch.setattr(sampling, "sample", sample)
    result = demo.fit_demo(augment="sums", n=3000, epsilon_s=2.0, epsilon_n=0.25, seed=4)
    data_seed, chain_seed = np.random.SeedSequence(4).spawn(2)
    expected = regression.simulate_regression_release(3000, 2.0, 0.25, seed=data_seed)
    release = result.release
    assert (release.epsilon_s, release.epsilon_n, release.n) == (2.0, 0.25, 3000)
    np.testing.assert_array_equal(release.values, expected.values)
    assert release.n_dp == expected.n_dp and release.mechanism.scale == pytest.approx(4.5)
    model, options = fitted[0]
    assert options["augment"] == "sums" and "n" in model.named_vars
    assert options["random_seed"] == int(chain_seed.generate_state(1)[0])
