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
