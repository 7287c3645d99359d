"""``DirichletInterweave`` and its kernel (:mod:`pymc_unbounded_dp.kernels.dirichlet`).

The kernel's coordinates are checked exactly where they can be (round trip, normalised density,
the law of the coordinates of Dirichlet records, the records pushed forward from coordinates drawn
from their law), and the step's target against a direct computation. The move itself is checked
against an exact posterior: a small Dirichlet model (three concentrations, six records, clamped
log-shares released with Laplace noise; ``n`` known, and ``n`` latent with a discrete Laplace
release), whose posterior is computed by importance sampling from the prior (its own standard
errors enter the tolerances). The chain there is the record moves and ``DirichletInterweave``
alone, with no centred step on ``alpha``: any error of the move shows, undiluted.

Power: the natural mistake, treating ``z`` as exactly ancillary (leaving its density out of the
target), is caught with no boosts (``boosts=0``, shapes near 1, where the Wilson-Hilferty
coordinates depend on ``alpha`` most): measured with this test's settings (``n`` known, 2 x 2,000
draws) and chain seeds 5, 6 and 7, the largest ``|z|`` of the means is 5.5-7.3 for that move,
against at most 2.5 for the correct one over eight runs (``Z_LIMIT`` is 4). With two boosts the
density is nearly flat in ``alpha`` at six records and leaving it out is not detectable here (nor
does it matter); it matters at thousands of records.
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import Z_LIMIT, draws_of, mean_z
from scipy import integrate, special, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._step_assembly import interweave_steps
from pymc_unbounded_dp.dirichlet_interweave import DirichletInterweave
from pymc_unbounded_dp.kernels import dirichlet as kd

ALPHA = np.array([3.0, 0.8, 6.0])


# --------------------------------------------------------------------------------------------------
# the kernel
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("boosts", [0, 2])
def test_coordinates_round_trip(boosts):
    rng = np.random.default_rng(1)
    x = rng.dirichlet(ALPHA, size=50)
    coords = kd.coordinates(rng, x, ALPHA, boosts)
    assert coords.z.shape == (50, 3) and coords.log_u.shape == (boosts, 50, 3)
    back, log_p = kd.records(ALPHA, coords)
    np.testing.assert_allclose(back, x, rtol=1e-12)
    assert np.isfinite(log_p)


@pytest.mark.parametrize("shape", [0.3, 1.0, 4.0, 30.0])
def test_coordinate_density_is_normalised(shape):
    def density(z):
        coords = kd.GammaCoordinates(np.array([[z]]), np.zeros((0, 1, 1)))
        return np.exp(kd.log_density([shape], coords))

    lower = -3.0 * np.sqrt(shape) * (1.0 - 1.0 / (9.0 * shape))  # w = 0
    total, error = integrate.quad(density, lower, 40.0, limit=200)
    assert abs(total - 1.0) < 1e-8, (total, error)


def test_coordinates_of_dirichlet_records_have_their_law():
    """``z`` of exact Dirichlet draws has the density of the kernel (Kolmogorov-Smirnov against its
    CDF by quadrature) and every ``L`` is the log of a uniform."""
    rng = np.random.default_rng(2)
    coords = kd.coordinates(rng, rng.dirichlet(ALPHA, size=4000), ALPHA, boosts=2)
    for j, a in enumerate(ALPHA):
        b = a + 2

        def cdf(values, b=b):
            lower = -3.0 * np.sqrt(b) * (1.0 - 1.0 / (9.0 * b))
            w = 1.0 - 1.0 / (9.0 * b) + np.asarray(values) / (3.0 * np.sqrt(b))
            # z <= v  <=>  G^(m) <= b w^3: the Gamma(b) CDF there
            return np.where(values <= lower, 0.0, special.gammainc(b, b * np.maximum(w, 0) ** 3))

        assert stats.kstest(coords.z[:, j], cdf).pvalue > 1e-4
        for k in range(2):
            assert stats.kstest(np.exp(coords.log_u[k, :, j]), "uniform").pvalue > 1e-4


def test_records_from_coordinates_of_their_law_are_dirichlet():
    """The inverse map pushes ``z ~ p(z | alpha + m)``, ``U ~ Uniform`` forward to
    ``Dirichlet(alpha)``: each share against its Beta marginal."""
    rng = np.random.default_rng(3)
    size, boosts = 4000, 2
    b = ALPHA + boosts
    gammas = rng.gamma(b, size=(size, 3))
    z = 3.0 * np.sqrt(b) * ((gammas / b) ** (1 / 3) - 1.0 + 1.0 / (9.0 * b))
    coords = kd.GammaCoordinates(z, np.log(rng.random((boosts, size, 3))))
    x, _ = kd.records(ALPHA, coords)
    for j, a in enumerate(ALPHA):
        assert stats.kstest(x[:, j], stats.beta(a, ALPHA.sum() - a).cdf).pvalue > 1e-4


def test_records_off_the_support():
    coords = kd.GammaCoordinates(np.array([[-5.0, 0.0]]), np.zeros((0, 1, 2)))
    # w = 1 - 1/(9b) + z / (3 sqrt b) <= 0 at b = 1, z = -5
    assert kd.records([1.0, 1.0], coords) == (None, -np.inf)
    assert kd.records([-1.0, 1.0], coords) == (None, -np.inf)
    with pytest.raises(ValueError, match="alpha"):
        kd.records([1.0, 1.0, 1.0], coords)
    with pytest.raises(ValueError, match="boosts"):
        kd.coordinates(np.random.default_rng(0), np.full((2, 2), 0.5), [1.0, 1.0], boosts=-1)


# --------------------------------------------------------------------------------------------------
# the exact posterior of a small model
# --------------------------------------------------------------------------------------------------
SMALL = {
    "n": 6,
    "clamp": 0.01,
    "scale": 1.5,
    "s_dp": (-9.0, -16.0, -5.0),
    "prior": (2.0, 2.0),  # alpha_j ~ Gamma(2, rate 2): shapes near 1, where z depends on alpha
}
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)


#: A ``pm.Potential`` term ``TILT * log alpha_0`` for the target test (0: none).
TILT = 0.7


def small_model(bounded: bool, tilt: float = 0.0) -> pm.Model:
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", alpha=SMALL["prior"][0], beta=SMALL["prior"][1], shape=3)
        if tilt:
            pm.Potential("tilt", tilt * pt.log(alpha[0]))
        n = SMALL["n"] if bounded else pmdp.SampleSize("n", n_dp=SMALL["n"], mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=n)
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.clip(x, SMALL["clamp"], 1.0)),
            pmdp.Laplace(scale=SMALL["scale"], sensitivity=-3 * np.log(SMALL["clamp"])),
            observed=np.array(SMALL["s_dp"]),
        )
    return model


def small_posterior(bounded: bool, draws: int = 400_000, seed: int = 17) -> dict:
    """Self-normalised importance sampling from the prior (``n`` from ``q(n) ∝ eta_n(n_dp - n)``
    on ``0..40`` when latent): mean and centred variance of each ``alpha_j`` (and of ``n``) with
    delta-method standard errors."""
    rng = np.random.default_rng(seed)
    a, rate = SMALL["prior"]
    alpha = rng.gamma(a, 1.0 / rate, size=(draws, 3))
    if bounded:
        n = np.full(draws, SMALL["n"])
    else:  # P(|n - n_dp| > 20) < 1e-4 under the flat prior
        values = np.arange(SMALL["n"] + 21)
        weights = np.exp(N_MECHANISM.logpdf(SMALL["n"] - values))
        n = rng.choice(values, size=draws, p=weights / weights.sum())
    T = np.zeros((draws, 3))
    for size in np.unique(n):
        rows = np.flatnonzero(n == size)
        gammas = rng.gamma(alpha[rows, None, :], size=(rows.size, size, 3))
        x = gammas / gammas.sum(axis=2, keepdims=True)
        T[rows] = np.log(np.maximum(x, SMALL["clamp"])).sum(axis=1)
    log_w = -np.abs(np.asarray(SMALL["s_dp"]) - T).sum(axis=1) / SMALL["scale"]
    w = np.exp(log_w - log_w.max())
    w /= w.sum()

    def estimate(h):
        mean = float(np.sum(w * h))
        return mean, float(np.sqrt(np.sum(w**2 * (h - mean) ** 2)))

    out = {"ess": float(1.0 / np.sum(w**2))}
    columns = {f"alpha[{j}]": alpha[:, j] for j in range(3)}
    if not bounded:
        columns["n"] = n.astype(float)
    for name, h in columns.items():
        mean = estimate(h)
        out[name] = {"mean": mean, "var": estimate((h - mean[0]) ** 2)}
    return out


def run_small(bounded: bool, seed: int, draws: int = 2000, **options):
    model = small_model(bounded)
    with model:
        step = DirichletInterweave(model=model, n_steps=5, **options)
        return pmdp.sample(
            draws=draws,
            tune=300,
            chains=2,
            cores=1,
            random_seed=seed,
            step=[step],
            interweave=False,
            progressbar=False,
            compute_convergence_checks=False,
        )


def z_scores(idata, exact: dict) -> dict:
    alpha = draws_of(idata, "alpha")
    columns = {f"alpha[{j}]": alpha[..., j] for j in range(3)}
    if "n" in exact:
        columns["n"] = draws_of(idata, "n")
    out = {}
    for name, draws in columns.items():
        (mean, mean_se), (var, var_se) = exact[name]["mean"], exact[name]["var"]
        out[f"{name} mean"] = mean_z(draws, mean, mean_se)
        out[f"{name} var"] = mean_z((draws - mean) ** 2, var, var_se)
    return out


@pytest.mark.parametrize(
    ("bounded", "boosts"), [(True, 0), (False, kd.BOOSTS)], ids=["bounded-0", "unbounded-2"]
)
def test_move_is_exact(bounded, boosts):
    """Mean and centred variance of each ``alpha_j`` (and of ``n``) within ``Z_LIMIT`` Monte
    Carlo standard errors of the importance-sampling posterior, with only the record moves and
    ``DirichletInterweave`` moving the chain (about 1,000 effective draws of each ``alpha_j``:
    a bias of 0.13 posterior sd in a mean is a 4-sigma miss)."""
    exact = small_posterior(bounded)
    assert exact["ess"] > 5_000
    idata = run_small(bounded, seed=5, boosts=boosts)
    scores = z_scores(idata, exact)
    print({k: round(v, 2) for k, v in scores.items()})
    assert all(abs(z) < Z_LIMIT for z in scores.values()), scores


# --------------------------------------------------------------------------------------------------
# the step's target
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tilt", [0.0, TILT], ids=["plain", "potential"])
def test_target_is_prior_plus_coordinates_plus_release(tilt):
    """The move's log target at a moved ``alpha``, against a direct computation; with a
    ``pm.Potential`` in the model, its term is in the target (the settings matrix's "Potential
    through every sampler path": here its value, 0.7 log alpha_0, is about 0.84 at the moved
    point, far above the 1e-6 tolerance)."""
    model = small_model(bounded=True, tilt=tilt)
    step = DirichletInterweave(model=model)
    rng = np.random.default_rng(4)
    x = rng.dirichlet(ALPHA, size=SMALL["n"])
    point = {"alpha_log__": np.log(ALPHA)}
    values = step._values(point)
    coords = [kd.coordinates(rng, x, ALPHA, 2)]
    log_density = step._log_density_fn(point, values, coords)
    moved = np.log(ALPHA) + np.array([0.1, -0.2, 0.05])
    got, (records,) = log_density(moved)
    alpha = np.exp(moved)
    prior = stats.gamma(SMALL["prior"][0], scale=1 / SMALL["prior"][1]).logpdf(alpha) + moved
    new_records, log_coords = kd.records(alpha, coords[0])
    T = np.log(np.clip(new_records, SMALL["clamp"], 1.0)).sum(axis=0)
    release = stats.laplace(scale=SMALL["scale"]).logpdf(np.asarray(SMALL["s_dp"]) - T)
    np.testing.assert_allclose(records, new_records)
    # PyMC's Gamma log-density differs from SciPy's by ~1e-8
    potential = tilt * np.log(alpha[0])
    assert tilt == 0 or abs(potential) > 0.1  # the term is not negligible
    np.testing.assert_allclose(got, prior.sum() + potential + log_coords + release.sum(), atol=1e-6)


def test_refuses_records_that_are_not_dirichlet():
    with pm.Model() as model:
        mu = pm.Normal("mu")
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=5)
        pmdp.PrivatizedSum("s", pt.clip(x, -1, 1), pmdp.Laplace(scale=2.0), observed=1.0)
    with pytest.raises(ValueError, match="Dirichlet"):
        DirichletInterweave(model=model)
    with pytest.raises(ValueError, match="n_steps"):
        DirichletInterweave(model=small_model(True), n_steps=0)


def test_runs_after_another_step_on_the_same_parameters():
    """``pmdp.sample(step=[a step on alpha, DirichletInterweave])``: two given steps on the same
    parameter (the way it follows ``atus_gibbs_step``); both run every iteration and the records
    the move writes are the ones the records step continues from."""
    model = small_model(bounded=False)
    with model:
        steps = [pm.Metropolis([model["alpha"]]), DirichletInterweave(n_steps=2)]
        idata = pmdp.sample(
            draws=20,
            tune=10,
            chains=1,
            random_seed=3,
            step=steps,
            interweave=False,
            progressbar=False,
            compute_convergence_checks=False,
        )
    stats = idata["sample_stats"]
    assert np.all(stats["interweave_steps"].values == 2)
    assert "accepted" in stats or "accept" in stats
    assert np.all(np.isfinite(draws_of(idata, "alpha")))


def test_records_whose_shares_underflow_are_outside_the_move():
    """At a tiny concentration a record's share can fall below ~1e-300 and be computed as 0, where
    the model's Dirichlet density is 0 (or infinite): the move must treat that point as outside
    its target, or NUTS starts from an infinite log density (seen on PyMC 6 at step 792 of a
    default-sampler test). Moderate concentrations keep every share positive."""
    rng = np.random.default_rng(5)
    x = rng.dirichlet([1.0, 1.0, 1.0], size=50)
    coords = kd.coordinates(rng, x, [1.0, 1.0, 1.0])
    assert kd.records([0.002, 0.002, 0.002], coords) == (None, -np.inf)
    back, log_p = kd.records([0.5, 0.5, 0.5], coords)
    assert np.all(back > 0.0) and np.isfinite(log_p)


@pytest.mark.parametrize("tiny", [False, True], ids=["w-near-1", "w-near-1e-10"])
def test_the_records_log_density_sums_the_logs_of_w_without_underflow(tiny):
    """``_records_core``'s value, ``sum_ij (b_j - 1) log(b_j w_ij^3) + 2 log w_ij - b_j w_ij^3``,
    against the sum of NumPy's logs. It keeps ``sum log w`` as running products renormalised by
    ``frexp``; with ``w`` near 1e-10 (a concentration of 0.01 and no boosts) the products pass
    below 1e-250 within a block and are renormalised there, whose exponent must be kept."""
    rng = np.random.default_rng(3)
    alpha, n = np.array([0.01, 0.02, 0.05]), 70
    b = alpha  # no boosts
    shift, slope = 1.0 - 1.0 / (9.0 * b), 1.0 / (3.0 * np.sqrt(b))
    w = rng.uniform(1e-10, 2e-10, (n, 3)) if tiny else rng.uniform(0.8, 1.2, (n, 3))
    z = (w - shift) / slope
    w = shift + slope * z  # as the kernel computes it
    x = np.empty((n, 3))
    got = kd._records_core(alpha, z, np.empty((0, n, 3)), x)
    log_w = np.log(w)
    expected = np.sum((b - 1.0) * (np.log(b) + 3.0 * log_w) + 2.0 * log_w - b * w**3)
    assert got == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(x, b * w**3 / np.sum(b * w**3, axis=1, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("laplace_only", [True, False], ids=["laplace", "laplace-and-gaussian"])
def test_the_move_reads_the_releases_density_summed_over_coordinates(laplace_only):
    """The move's release term, ``sum_j log eta_j(s_j - T_j)``, against each mechanism's own
    ``logpdf``: Laplace noise in NumPy, other noise through the kernels' density."""
    from pymc_unbounded_dp.dirichlet_interweave import _release_log_density
    from pymc_unbounded_dp.kernels import NoiseArrays

    laplace = pmdp.Laplace(epsilon=0.5, sensitivity=2.0)
    other = laplace if laplace_only else pmdp.Gaussian(sigma=1.5)
    residual = np.array([0.3, -2.0, 1.1, 4.0])
    expected = laplace.logpdf(residual[:2]).sum() + other.logpdf(residual[2:]).sum()
    noise = NoiseArrays.of([laplace, other], [2, 2])
    assert _release_log_density(residual, noise) == pytest.approx(expected, rel=1e-12)


# --------------------------------------------------------------------------------------------------
# what the move depends on: its parameters, the tables, tuning, the boosts
# --------------------------------------------------------------------------------------------------
def four_records_released(alpha) -> None:
    """Table "x": 4 records of ``Dirichlet(alpha)`` (3 shares), their clamped log-shares released
    with Laplace noise (in the model of the ``with`` block)."""
    x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=4)
    pmdp.PrivatizedSum(
        "s",
        pt.log(pt.clip(x, 0.01, 1.0)),
        pmdp.Laplace(scale=1.5),
        observed=[-6.0, -10.0, -4.0],
        check_sensitivity=False,
    )


def two_table_model() -> pm.Model:
    """Table "x" (4 records of ``Dirichlet(alpha)``, Laplace noise) and table "y, z" (5 records of
    two record variables, ``Dirichlet(beta)`` and ``Dirichlet(alpha[:2] + beta)``, Gaussian
    noise): two tables of different sizes, the second with two record variables."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0, shape=3)
        beta = pm.Gamma("beta", 2.0, 2.0, shape=2)
        four_records_released(alpha)
        y = pmdp.Records("y", pm.Dirichlet.dist(beta), n=5)
        z = pmdp.Records("z", pm.Dirichlet.dist(alpha[:2] + beta), n=5)
        pmdp.PrivatizedSum(
            "t",
            pt.log(pt.clip(pt.concatenate([y, z], axis=1), 0.01, 1.0)),
            pmdp.Gaussian(sigma=2.0),
            observed=[-4.0, -3.0, -5.0, -2.0],
            check_sensitivity=False,
        )
    return model


TWO_TABLES = {"alpha": np.array([3.0, 0.8, 6.0]), "beta": np.array([1.5, 2.5])}


def two_table_records(rng):
    alpha, beta = TWO_TABLES["alpha"], TWO_TABLES["beta"]
    return {
        "x": rng.dirichlet(alpha, size=4),
        "y": rng.dirichlet(beta, size=5),
        "z": rng.dirichlet(alpha[:2] + beta, size=5),
    }


def test_target_with_two_tables_reads_each_tables_records_release_and_noise():
    """The move's log target on the two-table model at a moved ``(alpha, beta)``, against a direct
    computation: each table's statistics from its own record variables (two in the second), its
    own released sums and its own noise (Laplace and Gaussian)."""
    model = two_table_model()
    step = DirichletInterweave(model=model)
    assert [v.name for v in step.vars] == ["alpha_log__", "beta_log__"]
    rng = np.random.default_rng(8)
    records = two_table_records(rng)
    alpha, beta = TWO_TABLES["alpha"], TWO_TABLES["beta"]
    point = {"alpha_log__": np.log(alpha), "beta_log__": np.log(beta)}
    concentrations = {"x": alpha, "y": beta, "z": alpha[:2] + beta}
    names = [spec.name for spec in step.compiled.blocks.records]
    coords = [kd.coordinates(rng, records[k], concentrations[k], 2) for k in names]
    log_density = step._log_density_fn(point, step._values(point), coords)
    shift = np.array([0.1, -0.2, 0.05, 0.15, -0.1])
    got, new_records = log_density(np.log(np.concatenate([alpha, beta])) + shift)
    alpha, beta = alpha * np.exp(shift[:3]), beta * np.exp(shift[3:])
    moved = {"x": alpha, "y": beta, "z": alpha[:2] + beta}
    theta = np.concatenate([alpha, beta])
    prior = stats.gamma(2.0, scale=0.5).logpdf(theta) + np.log(theta)  # with the log Jacobian
    expected = prior.sum()
    x_new = {}
    for k, coord in zip(names, coords):
        x_new[k], log_coords = kd.records(moved[k], coord)
        expected += log_coords
    for k, got_x in zip(names, new_records):
        np.testing.assert_allclose(got_x, x_new[k])
    T_x = np.log(np.clip(x_new["x"], 0.01, 1.0)).sum(axis=0)
    T_yz = np.log(np.clip(np.hstack([x_new["y"], x_new["z"]]), 0.01, 1.0)).sum(axis=0)
    expected += stats.laplace(scale=1.5).logpdf(np.array([-6.0, -10.0, -4.0]) - T_x).sum()
    expected += stats.norm(scale=2.0).logpdf(np.array([-4.0, -3.0, -5.0, -2.0]) - T_yz).sum()
    np.testing.assert_allclose(got, expected, atol=1e-6)


def set_two_table_records(step, rng):
    records = two_table_records(rng)
    step.compiled.set_records([records[spec.name] for spec in step.compiled.blocks.records])


def test_the_move_runs_with_two_tables_of_different_sizes():
    """Each record variable's container is checked against its own table's ``n`` (4 and 5): the
    move runs its steps instead of waiting for records that are already there."""
    model = two_table_model()
    step = DirichletInterweave(model=model, n_steps=3, rng=1)
    set_two_table_records(step, np.random.default_rng(9))
    point = {"alpha_log__": np.log(TWO_TABLES["alpha"]), "beta_log__": np.log(TWO_TABLES["beta"])}
    _, (info,) = step.step(point)
    assert info["interweave_steps"] == 3 and info["interweave_on"]


def test_by_default_the_move_changes_only_the_parameters_of_the_concentrations():
    """A parameter of public data only (``sigma``) is not moved unless asked for."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0, shape=3)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("public", 0.0, sigma, observed=[0.3, -0.2])
        four_records_released(alpha)
    assert [v.name for v in DirichletInterweave(model=model).vars] == ["alpha_log__"]
    both = DirichletInterweave(vars=[alpha, sigma], model=model).vars
    assert [v.name for v in both] == ["alpha_log__", "sigma_log__"]


def test_refuses_a_concentration_that_reads_other_records():
    """``z ~ Dirichlet(alpha * (1 + x_0))`` with ``x`` another record variable: the
    concentration is not a function of the parameters only."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0, shape=3)
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=4)
        z = pmdp.Records("z", pm.Dirichlet.dist(alpha * (1.0 + x[:, :1])), n=4)
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.clip(pt.concatenate([x, z], axis=1), 0.01, 1.0)),
            pmdp.Laplace(scale=1.5),
            observed=np.full(6, -5.0),
            check_sensitivity=False,
        )
    with pytest.raises(ValueError, match="concentration depends on the parameters only"):
        DirichletInterweave(model=model)


def test_records_with_a_batch_axis_are_left_to_another_move():
    """Records of shape ``(1, K)`` (a concentration ``alpha[None, :]``) are not the move's
    ``(n, K)`` rows: the move refuses them when built, and ``interweave='auto'`` takes another
    move instead of one that fails at its first step."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0, shape=3)
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha[None, :]), n=4)
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.clip(x[:, 0, :], 0.01, 1.0)),
            pmdp.Laplace(scale=1.5),
            observed=np.full(3, -5.0),
            check_sensitivity=False,
        )
    with pytest.raises(ValueError, match="one vector per record"):
        DirichletInterweave(model=model)
    steps = interweave_steps(model, compile_model(model), "auto")
    assert steps and not any(isinstance(step, DirichletInterweave) for step in steps)


@pytest.fixture(scope="module")
def bounded_small():
    return small_model(bounded=True)


def test_the_concentration_must_be_one_vector_for_all_records(bounded_small):
    """Two compositions per record (a ``(2, K)`` concentration) are refused when the move is
    built (the records are not ``(n, K)`` rows); one vector passes the check
    ``interweave='auto'`` runs at the start point."""
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", 2.0, 2.0, shape=(2, 3))
        x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=4)
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.clip(x, 0.01, 1.0)),
            pmdp.Laplace(scale=1.5),
            observed=np.full((2, 3), -6.0),
            check_sensitivity=False,
        )
    with pytest.raises(ValueError, match="one vector per record"):
        DirichletInterweave(model=model)
    DirichletInterweave(model=bounded_small).check_shared_concentration(
        bounded_small.initial_point()
    )


def test_the_proposal_adapts_during_tuning_only(bounded_small):
    """The random walk's scale moves after a tuning iteration and stays fixed after tuning (the
    draws use a fixed kernel)."""
    step = DirichletInterweave(model=bounded_small, n_steps=3, rng=2)
    step.compiled.set_records([np.random.default_rng(3).dirichlet(ALPHA, size=SMALL["n"])])
    point = {"alpha_log__": np.log(ALPHA)}
    point, _ = step.step(point)
    start = 0.1 / np.sqrt(3)  # the tuner's first scale
    assert step._tuner.params.scale != pytest.approx(start, rel=1e-9)
    step.tune = False
    frozen = step._tuner.params
    for _ in range(2):
        point, _ = step.step(point)
    assert step._tuner.params.scale == frozen.scale
    np.testing.assert_array_equal(step._tuner.params.chol, frozen.chol)


@pytest.mark.parametrize("boosts", [0, 1])
def test_the_move_draws_coordinates_with_its_boosts(bounded_small, boosts, monkeypatch):
    """``boosts`` reaches the coordinates the move holds fixed (not the default 2)."""
    seen = []
    coordinates = kd.coordinates

    def spy(*args, **kwargs):
        coords = coordinates(*args, **kwargs)
        seen.append(coords.boosts)
        return coords

    monkeypatch.setattr(kd, "coordinates", spy)
    step = DirichletInterweave(model=bounded_small, n_steps=2, boosts=boosts, rng=3)
    step.compiled.set_records([np.random.default_rng(4).dirichlet(ALPHA, size=SMALL["n"])])
    step.step({"alpha_log__": np.log(ALPHA)})
    assert seen == [boosts]


def test_records_of_small_concentrations_keep_moderate_shares():
    """At concentrations near 0.001 the exponents ``sum_k L_k / (a + k)`` are near -1000 (``exp``
    underflows), but their differences, hence the shares, are moderate: each row is scaled by
    its largest exponent. Here ``z = 0`` and ``a`` are the same for every share, so the shares
    are ``softmax(L / a)`` exactly."""
    alpha = np.full(3, 0.001)
    log_u = np.array([[[-1.0, -1.001, -1.002], [-0.5, -0.5005, -0.5]]])  # one boost, two records
    coords = kd.GammaCoordinates(np.zeros((2, 3)), log_u)
    x, log_p = kd.records(alpha, coords)
    assert x is not None and np.isfinite(log_p)
    e = log_u[0] / alpha
    expected = np.exp(e - e.max(axis=1, keepdims=True))
    np.testing.assert_allclose(x, expected / expected.sum(axis=1, keepdims=True), rtol=1e-9)
