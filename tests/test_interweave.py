"""Interweaving (the default of ``pmdp.sample``) against exact posteriors, one model per form.

Each family of record distributions reaches the interweaving move by a different non-centred form
(:mod:`pymc_unbounded_dp.noncentred`): location-scale (normal records, a regression ``y | x``),
inverse CDF (Gamma records with unknown shape), randomized PIT (Bernoulli, Poisson), normalised
Gammas (Dirichlet) and, for records with no such form (a two-category ``Categorical``), the
full-refresh move. Every model is sampled by ``pmdp.sample`` with its defaults, under bounded DP
(``n`` known) and unbounded DP (``n`` from a ``SampleSize`` with discrete Laplace noise and a flat
prior), and checked against an exact posterior (enumeration or quadrature; for the Dirichlet,
importance sampling whose own standard error enters the tolerance) for the mean *and* the centred
variance of every parameter and, under unbounded DP, the mean, centred variance and three CDF values
of ``n``. The releases are noisy relative to ``sqrt(n)`` times the records' spread, where plain data
augmentation crawls and interweaving is what mixes.

The oracles are validated first, against the conjugate posterior with (almost) no noise and against
importance sampling from the prior; two models also get simulation-based calibration.
"""

import functools
import logging

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import (
    assert_cdf_matches,
    assert_centred_variance_matches,
    assert_mean_matches,
    draws_of,
    mean_z,
    sbc_rank,
    sbc_ranks_uniform,
)
from oracles import (
    bernoulli_posterior,
    dirichlet_posterior_mc,
    gamma_shape_posterior,
    importance_posterior,
    log_gamma_laplace,
    normal_posterior,
    poisson_posterior,
    regression_posterior,
)
from scipy import integrate, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._step_assembly import interweave_steps
from pymc_unbounded_dp.dirichlet_interweave import DirichletInterweave
from pymc_unbounded_dp.noncentred import describe_forms

SAMPLE = {
    "draws": 600,
    "tune": 300,
    "chains": 2,
    "cores": 1,
    "progressbar": False,
    "compute_convergence_checks": False,
}
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)


# --------------------------------------------------------------------------------------------------
# the models: (builder, oracle, record form); `bounded` picks n known or latent
# --------------------------------------------------------------------------------------------------
def sample_size(bounded: bool, n: int):
    return n if bounded else pmdp.SampleSize("n", n_dp=n, mechanism=N_MECHANISM)


def unbounded_kwargs(bounded: bool, n: int, n_max: int) -> dict:
    return {"n": n} if bounded else {"n_dp": n, "n_mechanism": N_MECHANISM, "n_max": n_max}


# normal records, unknown mean: Laplace scale 25 against sqrt(25) * 1 = 5 for the sum
NORMAL = {"n": 25, "scale": 25.0, "s_dp": 40.0, "prior": (0.5, 2.0)}


def normal_model(bounded):
    with pm.Model() as model:
        mu = pm.Normal("mu", *NORMAL["prior"])
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=sample_size(bounded, NORMAL["n"]))
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=NORMAL["scale"]), observed=NORMAL["s_dp"])
    return model


def normal_oracle(bounded):
    # normal_posterior sums n over 1..n_max: n = 0 has relative weight < 1e-5 here.
    exact = normal_posterior(
        NORMAL["s_dp"],
        NORMAL["scale"],
        1.0,
        *NORMAL["prior"],
        **unbounded_kwargs(bounded, NORMAL["n"], 150),
    )
    return exact, {"mu": "mu"}


# regression y | x: x_i ~ N(mu, 1), y_i ~ N(beta x_i, 1), sums of x and y, Laplace(8) each
REGRESSION = {"n": 20, "scales": (8.0, 8.0), "s_dp": (22.0, 7.0)}


def regression_model(bounded):
    s_dp = REGRESSION["s_dp"]
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        beta = pm.Normal("beta", 0.0, 1.0)
        n = sample_size(bounded, REGRESSION["n"])
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta * x, 1.0), n=n)
        pmdp.PrivatizedSum("sx", x, pmdp.Laplace(scale=REGRESSION["scales"][0]), observed=s_dp[0])
        pmdp.PrivatizedSum("sy", y, pmdp.Laplace(scale=REGRESSION["scales"][1]), observed=s_dp[1])
    return model


def regression_oracle(bounded):
    exact = regression_posterior(
        REGRESSION["s_dp"], REGRESSION["scales"], **unbounded_kwargs(bounded, REGRESSION["n"], 75)
    )
    return exact, {"mu": "mu", "beta": "beta"}


# Bernoulli records (randomized PIT) and the same records as a two-category Categorical (no
# non-centred form: full refresh); Laplace scale 10 against sqrt(30 * 0.24) = 2.7
BERNOULLI = {"n": 30, "scale": 10.0, "s_dp": 12.3, "prior": (2.0, 3.0)}


def bernoulli_model(bounded, categorical=False):
    with pm.Model() as model:
        theta = pm.Beta("theta", *BERNOULLI["prior"])
        dist = (
            pm.Categorical.dist(p=pt.stack([1 - theta, theta]))
            if categorical
            else pm.Bernoulli.dist(theta)
        )
        x = pmdp.Records("x", dist, n=sample_size(bounded, BERNOULLI["n"]))
        pmdp.PrivatizedSum(
            "s", x, pmdp.Laplace(scale=BERNOULLI["scale"]), observed=BERNOULLI["s_dp"]
        )
    return model


def bernoulli_oracle(bounded):
    exact = bernoulli_posterior(
        BERNOULLI["s_dp"],
        pmdp.Laplace(scale=BERNOULLI["scale"]),
        *BERNOULLI["prior"],
        **unbounded_kwargs(bounded, BERNOULLI["n"], 90),
    )
    return exact, {"theta": "theta"}


# Binomial(3, theta) records (randomized PIT over a bounded support: the quantile search must
# not step past the top, where SciPy's CDF is NaN); Laplace scale 8 against sqrt(36 * 0.24) = 2.9
BINOMIAL = {"n": 12, "trials": 3, "scale": 8.0, "s_dp": 14.0, "prior": (2.0, 3.0)}


def binomial_model(bounded):
    with pm.Model() as model:
        theta = pm.Beta("theta", *BINOMIAL["prior"])
        x = pmdp.Records(
            "x", pm.Binomial.dist(BINOMIAL["trials"], theta), n=sample_size(bounded, BINOMIAL["n"])
        )
        pmdp.PrivatizedSum(
            "s", x, pmdp.Laplace(scale=BINOMIAL["scale"], sensitivity=3), observed=BINOMIAL["s_dp"]
        )
    return model


def binomial_oracle(bounded):
    exact = bernoulli_posterior(
        BINOMIAL["s_dp"],
        pmdp.Laplace(scale=BINOMIAL["scale"], sensitivity=3),
        *BINOMIAL["prior"],
        **unbounded_kwargs(bounded, BINOMIAL["n"], 60),
        trials=BINOMIAL["trials"],
    )
    return exact, {"theta": "theta"}


# Poisson records, lam ~ Gamma(3, 1); Laplace scale 15 against sqrt(20 * 2.5) = 7
POISSON = {"n": 20, "scale": 15.0, "s_dp": 50.0, "prior": (3.0, 1.0)}


def poisson_model(bounded):
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=POISSON["prior"][0], beta=POISSON["prior"][1])
        x = pmdp.Records("x", pm.Poisson.dist(lam), n=sample_size(bounded, POISSON["n"]))
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=POISSON["scale"]), observed=POISSON["s_dp"])
    return model


def poisson_oracle(bounded):
    exact = poisson_posterior(
        POISSON["s_dp"],
        pmdp.Laplace(scale=POISSON["scale"]),
        *POISSON["prior"],
        **unbounded_kwargs(bounded, POISSON["n"], 80),
    )
    return exact, {"lam": "lam"}


# Gamma records with unknown shape (inverse CDF), theta ~ Gamma(2, 1); Laplace 10 against ~3.8
GAMMA = {"n": 10, "scale": 10.0, "s_dp": 12.0, "prior": (2.0, 1.0)}


def gamma_model(bounded):
    with pm.Model() as model:
        theta = pm.Gamma("theta", alpha=GAMMA["prior"][0], beta=GAMMA["prior"][1])
        x = pmdp.Records(
            "x", pm.Gamma.dist(alpha=theta, beta=1.0), n=sample_size(bounded, GAMMA["n"])
        )
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=GAMMA["scale"]), observed=GAMMA["s_dp"])
    return model


def gamma_oracle(bounded):
    exact = gamma_shape_posterior(
        GAMMA["s_dp"], GAMMA["scale"], *GAMMA["prior"], **unbounded_kwargs(bounded, GAMMA["n"], 70)
    )
    return exact, {"theta": "theta"}


# Dirichlet(c (1, 1, 1)) records, c ~ Gamma(2, 1), release of sum log(max(x, 0.02)) + Laplace(3)
# per coordinate (the ATUS statistic); one record's log-shares have sd ~0.8 at c ~ 1.3
DIRICHLET = {
    "n": 15,
    "scale": 3.0,
    "clamp": 0.02,
    "s_dp": (-20.0, -23.0, -26.0),
    "prior": (2.0, 1.0),
}


def dirichlet_model(bounded):
    with pm.Model() as model:
        c = pm.Gamma("c", alpha=DIRICHLET["prior"][0], beta=DIRICHLET["prior"][1])
        x = pmdp.Records(
            "x", pm.Dirichlet.dist(c * pt.ones(3)), n=sample_size(bounded, DIRICHLET["n"])
        )
        # Each log-share is in [log(clamp), 0]: L1 sensitivity -3 log(clamp) (add/remove).
        pmdp.PrivatizedSum(
            "s",
            pt.log(pt.maximum(x, DIRICHLET["clamp"])),
            pmdp.Laplace(scale=DIRICHLET["scale"], sensitivity=-3 * np.log(DIRICHLET["clamp"])),
            observed=np.array(DIRICHLET["s_dp"]),
        )
    return model


def dirichlet_oracle(bounded):
    """Importance sampling (300,000 prior draws): standard errors ~0.002 on the mean of c, ~10x
    below the sampler's; they are added to the tolerances."""
    mc = dirichlet_posterior_mc(
        DIRICHLET["s_dp"],
        DIRICHLET["scale"],
        DIRICHLET["clamp"],
        *DIRICHLET["prior"],
        np.random.default_rng(7),
        draws=300_000,
        **unbounded_kwargs(bounded, DIRICHLET["n"], 70),
    )
    exact = {
        "c_mean": mc["theta"][0],
        "c_mean_se": mc["theta"][1],
        "c_var": mc["theta_var"][0],
        "c_var_se": mc["theta_var"][1],
    }
    if not bounded:
        exact.update(
            n_mean=mc["n"][0],
            n_mean_se=mc["n"][1],
            n_var=mc["n_var"][0],
            n_var_se=mc["n_var"][1],
            n_values=mc["n_values"],
            n_pmf=mc["n_pmf"],
            n_cdf_se=mc["n_cdf_se"],
        )
    return exact, {"c": "c"}


CASES = {
    "normal": (normal_model, normal_oracle, {"x": "location-scale"}),
    "regression": (
        regression_model,
        regression_oracle,
        {"x": "location-scale", "y": "location-scale"},
    ),
    "bernoulli": (bernoulli_model, bernoulli_oracle, {"x": "randomized-pit"}),
    "poisson": (poisson_model, poisson_oracle, {"x": "randomized-pit"}),
    "gamma-shape": (gamma_model, gamma_oracle, {"x": "inverse-cdf"}),
    "dirichlet": (dirichlet_model, dirichlet_oracle, {"x": "gammas"}),
    "categorical-full-refresh": (
        functools.partial(bernoulli_model, categorical=True),
        bernoulli_oracle,
        {"x": None},
    ),
    "binomial": (binomial_model, binomial_oracle, {"x": "randomized-pit"}),
}


@functools.cache
def vector_regression_model() -> pm.Model:
    """The regression model with its two parameters as one vector ``coef = (mu, beta)``."""
    s_dp = REGRESSION["s_dp"]
    with pm.Model() as model:
        coef = pm.Normal("coef", 0.0, 1.0, shape=2)
        x = pmdp.Records("x", pm.Normal.dist(coef[0], 1.0), n=REGRESSION["n"])
        y = pmdp.Records("y", pm.Normal.dist(coef[1] * x, 1.0), n=REGRESSION["n"])
        pmdp.PrivatizedSum("sx", x, pmdp.Laplace(scale=REGRESSION["scales"][0]), observed=s_dp[0])
        pmdp.PrivatizedSum("sy", y, pmdp.Laplace(scale=REGRESSION["scales"][1]), observed=s_dp[1])
    return model


@functools.cache
def model_of(family: str, bounded: bool) -> pm.Model:
    """One model per case and worker process, shared by the tests that sample it."""
    return CASES[family][0](bounded)


@functools.cache
def oracle_of(family: str, bounded: bool):
    return CASES[family][1](bounded)


def check_against(idata, exact, names, label):
    """Mean and centred variance of each parameter (and of ``n``, with three CDF values).

    The z-scores are printed first (``pytest -s``), then each is asserted.
    """
    report = []
    for name, key in names.items():
        draws = draws_of(idata, name)
        mean, var = exact[f"{key}_mean"], exact[f"{key}_var"]
        report.append(f"{name} mean z={mean_z(draws, mean, exact.get(f'{key}_mean_se', 0.0)):+.2f}")
        report.append(
            f"{name} var z={mean_z((draws - mean) ** 2, var, exact.get(f'{key}_var_se', 0.0)):+.2f}"
        )
    if "n" in idata["posterior"]:
        n = draws_of(idata, "n")
        report.append(f"n mean z={mean_z(n, exact['n_mean'], exact.get('n_mean_se', 0.0)):+.2f}")
        report.append(f"n var z={mean_z((n - exact['n_mean']) ** 2, exact['n_var']):+.2f}")
    print(f"{label}: " + ", ".join(report))
    for name, key in names.items():
        draws = draws_of(idata, name)
        mean, var = exact[f"{key}_mean"], exact[f"{key}_var"]
        assert_mean_matches(draws, mean, f"{label} {name} mean", exact.get(f"{key}_mean_se", 0.0))
        assert_centred_variance_matches(
            draws, mean, var, f"{label} {name}", exact.get(f"{key}_var_se", 0.0)
        )
    if "n" in idata["posterior"]:
        n = draws_of(idata, "n")
        assert_mean_matches(n, exact["n_mean"], f"{label} n mean", exact.get("n_mean_se", 0.0))
        assert_centred_variance_matches(
            n, exact["n_mean"], exact["n_var"], f"{label} n", exact.get("n_var_se", 0.0)
        )
        assert_cdf_matches(
            n, exact["n_values"], exact["n_pmf"], f"{label} n", cdf_se=exact.get("n_cdf_se")
        )


# --------------------------------------------------------------------------------------------------
# the oracles themselves
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "s, shape, scale",
    [(12.0, 10.0, 10.0), (-3.0, 2.0, 3.0), (50.0, 8.0, 1.5), (0.5, 0.3, 2.0), (200.0, 150.0, 20.0)],
)
def test_gamma_laplace_convolution_matches_quadrature(s, shape, scale):
    def integrand(total):
        return stats.gamma.pdf(total, shape) * stats.laplace.pdf(s - total, scale=scale)

    cut = max(s, 0.0) + 1e-9
    value = (
        integrate.quad(integrand, 0, cut, limit=200)[0]
        + integrate.quad(integrand, cut, np.inf, limit=200)[0]
    )
    np.testing.assert_allclose(np.exp(log_gamma_laplace(s, shape, scale)), value, rtol=1e-7)


def test_oracles_reduce_to_conjugate_posteriors_without_noise():
    n, sx, sy = 20, 22.0, 7.0
    exact = regression_posterior((sx, sy), (0.02, 0.02), n=n, sx_points=400)
    precision = 1 + sx**2 / n  # beta | Sx, Sy: N(0, 1) prior, Sy ~ N(beta Sx, n)
    np.testing.assert_allclose(
        [exact["mu_mean"], exact["mu_var"], exact["beta_mean"], exact["beta_var"]],
        [sx / (1 + n), 1 / (1 + n), sx * sy / n / precision, 1 / precision],
        rtol=2e-4,
    )
    exact = poisson_posterior(50.0, pmdp.Laplace(scale=1e-6), 3.0, 1.0, n=20)
    np.testing.assert_allclose([exact["lam_mean"], exact["lam_var"]], [53 / 21, 53 / 21**2])


def importance_check(exact, estimate, key, label):
    for stat, oracle_value in (("theta", exact[f"{key}_mean"]), ("theta_var", exact[f"{key}_var"])):
        value, se = estimate[stat]
        z = (value - oracle_value) / se
        assert abs(z) < 4, (
            f"{label} {key} {stat}: oracle {oracle_value:.5f} vs IS {value:.5f} z={z:.1f}"
        )
    if "n" in estimate:
        value, se = estimate["n"]
        z = (value - exact["n_mean"]) / se
        assert abs(z) < 4, f"{label} n: oracle {exact['n_mean']:.4f} vs IS {value:.4f} z={z:.1f}"


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "unbounded"])
def test_oracles_match_importance_sampling(bounded):
    """Each quadrature / enumeration oracle against self-normalised importance sampling from the
    prior (the Dirichlet oracle's method), 200,000 draws: this validates both."""
    rng = np.random.default_rng(11 + bounded)
    draws = 200_000

    def run(simulate, log_eta, n):
        if bounded:
            return importance_posterior(
                lambda r, size, _: simulate(r, size, n), log_eta, draws, rng
            )
        values = np.arange(0, 3 * n + 40)
        return importance_posterior(
            simulate,
            log_eta,
            draws,
            rng,
            n_values=values,
            n_log_weights=N_MECHANISM.logpdf(n - values),
        )

    def laplace(s_dp, scale):
        return lambda T: -np.abs(s_dp - T) / scale

    def normal_sim(r, size, n):
        mu = r.normal(*NORMAL["prior"], size)
        return mu, r.normal(n * mu, np.sqrt(n)) if n > 0 else np.zeros(size)

    exact, _ = oracle_of("normal", bounded)
    importance_check(
        exact,
        run(normal_sim, laplace(NORMAL["s_dp"], NORMAL["scale"]), NORMAL["n"]),
        "mu",
        "normal",
    )

    scales, s_dp = REGRESSION["scales"], REGRESSION["s_dp"]

    def regression_eta(T):
        return -np.abs(s_dp[0] - T[:, 0]) / scales[0] - np.abs(s_dp[1] - T[:, 1]) / scales[1]

    exact, _ = oracle_of("regression", bounded)
    for key in ("mu", "beta"):

        def regression_sim(r, size, n, key=key):
            mu, beta = r.normal(0, 1, size), r.normal(0, 1, size)
            sx = r.normal(n * mu, np.sqrt(n)) if n > 0 else np.zeros(size)
            sy = r.normal(beta * sx, np.sqrt(n)) if n > 0 else np.zeros(size)
            return (mu if key == "mu" else beta), np.stack([sx, sy], axis=1)

        importance_check(
            exact, run(regression_sim, regression_eta, REGRESSION["n"]), key, "regression"
        )

    def bernoulli_sim(r, size, n):
        theta = r.beta(*BERNOULLI["prior"], size)
        return theta, r.binomial(n, theta)

    exact, _ = oracle_of("bernoulli", bounded)
    importance_check(
        exact,
        run(bernoulli_sim, laplace(BERNOULLI["s_dp"], BERNOULLI["scale"]), BERNOULLI["n"]),
        "theta",
        "bernoulli",
    )

    def poisson_sim(r, size, n):
        lam = r.gamma(POISSON["prior"][0], 1 / POISSON["prior"][1], size)
        return lam, r.poisson(n * lam)

    exact, _ = oracle_of("poisson", bounded)
    importance_check(
        exact,
        run(poisson_sim, laplace(POISSON["s_dp"], POISSON["scale"]), POISSON["n"]),
        "lam",
        "poisson",
    )

    def gamma_sim(r, size, n):
        theta = r.gamma(GAMMA["prior"][0], 1 / GAMMA["prior"][1], size)
        return theta, r.gamma(n * theta) if n > 0 else np.zeros(size)

    exact, _ = oracle_of("gamma-shape", bounded)
    importance_check(
        exact, run(gamma_sim, laplace(GAMMA["s_dp"], GAMMA["scale"]), GAMMA["n"]), "theta", "gamma"
    )


# --------------------------------------------------------------------------------------------------
# the default sampler against the oracles
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "unbounded"])
@pytest.mark.parametrize("family", list(CASES))
def test_default_sampler_matches_exact_posterior(family, bounded):
    model = model_of(family, bounded)
    assert describe_forms(model, compile_model(model).blocks) == CASES[family][2]
    seed = 1000 + 2 * list(CASES).index(family) + bounded
    idata = pmdp.sample(augment="records", model=model, random_seed=seed, **SAMPLE)
    exact, names = oracle_of(family, bounded)
    check_against(idata, exact, names, f"{family} {'bounded' if bounded else 'unbounded'}")
    # The default ("auto") chooses its number of steps per iteration during tuning (0 where the
    # move does not pay for its cost, e.g. little missing information); it is there exactly where
    # every record variable has a non-centred form.
    has_form = None not in CASES[family][2].values()
    assert ("interweave_steps" in idata["sample_stats"]) == has_form
    if family == "dirichlet":  # Dirichlet records get the cheaper DirichletInterweave instead
        (step,) = interweave_steps(model, compile_model(model), "auto")
        assert isinstance(step, DirichletInterweave)


#: Families whose non-centred target has a numba implementation of every op (location-scale,
#: inverse CDF, normalised Gammas); the randomized PIT of a Poisson searches in Python.
NUMBA_FAMILIES = ("regression", "gamma-shape", "dirichlet")


@pytest.mark.parametrize(
    "family, backend",
    [(family, "auto") for family in CASES] + [(family, "numba") for family in NUMBA_FAMILIES],
)
def test_forced_move_matches_exact_posterior(family, backend):
    """The move itself, made every iteration (``n_steps=4``), for every non-centred form, and
    through the numba-compiled loop where the target has one (these models have fewer records
    than ``NUMBA_MIN_RECORDS``: ``"auto"`` runs them in Python)."""
    model = model_of(family, True)
    seed = 2000 + list(CASES).index(family)
    options = {"n_steps": 4, "backend": backend}
    idata = pmdp.sample(
        augment="records", model=model, random_seed=seed, interweave=options, **SAMPLE
    )
    exact, names = oracle_of(family, True)
    check_against(idata, exact, names, f"{family} bounded, forced move, {backend}")
    stats_ = idata["sample_stats"]
    rate = float(np.nanmean(stats_["interweave_accept_rate"].values))
    assert 0.05 < rate <= 1.0, rate
    assert np.all(stats_["interweave_steps"].values == 4)
    assert np.all(stats_["interweave_compiled"].values == (backend == "numba"))


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "latent-n"])
def test_the_numba_and_python_paths_give_the_same_chain(bounded):
    """Same seed, same random numbers: the draws agree up to floating-point order (the two
    compiled targets sum in different orders; NUTS then amplifies 1e-16 differences slowly).
    Under unbounded DP the latent n is an input of the compiled target that the move holds.
    The bounded case's parameters are a vector ``(mu, beta)`` of length 2 (the numba target reads
    it from the flat vector by a slice), the unbounded case's two scalars."""
    model = vector_regression_model() if bounded else model_of("regression", False)
    draws = {}
    for backend in ("python", "numba"):
        idata = pmdp.sample(
            augment="records",
            model=model,
            random_seed=7,
            interweave={"n_steps": 10, "backend": backend},
            **{**SAMPLE, "draws": 20, "tune": 0, "chains": 1},
        )
        names = ("mu", "beta") if not bounded else ("coef",)
        draws[backend] = np.concatenate(
            [idata["posterior"][k].values.reshape(20, -1) for k in names], axis=1
        )
        accepted = idata["sample_stats"]["interweave_accept_rate"].values
        compiled = idata["sample_stats"]["interweave_compiled"].values
        assert np.all(compiled == (backend == "numba"))  # each path is the one asked for
    assert 0.05 < accepted.mean() < 0.95  # the move moved: the comparison is not vacuous
    np.testing.assert_allclose(draws["numba"], draws["python"], rtol=1e-6)


def test_auto_falls_back_to_python_where_a_large_model_has_no_numba_implementation():
    """Above NUMBA_MIN_RECORDS, backend='auto' tries numba; a target without a numba
    implementation (the Poisson's randomized PIT) then runs in Python, not refused."""
    from pymc_unbounded_dp.interweave import MAX_STEPS_PYTHON, NUMBA_MIN_RECORDS

    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=2.0, beta=1.0)
        x = pmdp.Records("x", pm.Poisson.dist(lam), n=NUMBA_MIN_RECORDS)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=5.0), observed=2.0 * NUMBA_MIN_RECORDS)
    move = pmdp.Interweave(model=model, backend="auto")
    assert move.method == "noncentred" and move.max_steps == MAX_STEPS_PYTHON


def test_a_numba_backend_without_a_numba_implementation_is_refused_at_build_time():
    with pytest.raises(ValueError, match=r"backend='numba'.*no numba implementation"):
        pmdp.Interweave(model=model_of("poisson", True), backend="numba")
    with pytest.raises(ValueError, match=r"backend='numba' needs the non-centred move"):
        pmdp.Interweave(model=model_of("categorical-full-refresh", True), backend="numba")
    # the other backends build the full-refresh move, which runs in Python
    for backend in ("python", "auto"):
        move = pmdp.Interweave(model=model_of("categorical-full-refresh", True), backend=backend)
        assert move.method == "full-refresh" and move._flat_target is None


@pytest.mark.parametrize("option", ["n_steps", "max_steps"])
@pytest.mark.parametrize("value", [2.5, "3", 0, -1])
def test_step_counts_must_be_positive_integers(option, value):
    with pytest.raises((ValueError, TypeError), match=f"`{option}`"):
        pmdp.Interweave(model=model_of("regression", True), **{option: value})
    with pytest.raises(ValueError, match="`backend` must be one of"):
        pmdp.Interweave(model=model_of("poisson", True), backend="jax")


def test_the_tuning_may_choose_more_steps_where_a_step_is_compiled():
    """At most 100 steps per iteration with the numba target, 20 with the Python one (a step
    there costs several times more), unless ``max_steps`` says otherwise."""
    from pymc_unbounded_dp.interweave import MAX_STEPS_COMPILED, MAX_STEPS_PYTHON

    model = model_of("regression", True)
    assert (MAX_STEPS_COMPILED, MAX_STEPS_PYTHON) == (100, 20)
    for backend, most in (("numba", 100), ("python", 20)):
        assert pmdp.Interweave(model=model, backend=backend).max_steps == most
        assert pmdp.Interweave(model=model, backend=backend, max_steps=7).max_steps == 7


@pytest.mark.parametrize(("family", "first"), [("normal", 10), ("gamma-shape", 1)])
def test_costly_forms_start_with_fewer_steps(family, first):
    """The first tuning window's steps per iteration: 10 for a form costing 0.05 of an iteration
    (location-scale), 1 for one costing 0.5 (inverse CDF)."""
    idata = pmdp.sample(
        augment="records",
        model=model_of(family, True),
        random_seed=3,
        interweave={"backend": "python"},
        **{**SAMPLE, "tune": 2, "draws": 1, "chains": 1, "discard_tuned_samples": False},
    )
    assert idata["warmup_sample_stats"]["interweave_steps"].values[0, 0] == first


def test_the_full_refresh_move_of_many_records_runs_from_python():
    """From ``NUMBA_MIN_RECORDS`` records ``backend="auto"`` compiles the non-centred target in
    numba; the full-refresh move has none and stays in Python."""
    from pymc_unbounded_dp.interweave import MAX_STEPS_PYTHON, NUMBA_MIN_RECORDS

    with pm.Model() as model:
        p = pm.Dirichlet("p", np.ones(3))
        x = pmdp.Records("x", pm.Categorical.dist(p), n=NUMBA_MIN_RECORDS + 100)
        pmdp.PrivatizedSum(
            "s", pt.eq(x[:, None], np.arange(3)), pmdp.Laplace(scale=2.0, sensitivity=3.0),
            observed=[200.0, 200.0, 200.0],
        )  # fmt: skip
    move = pmdp.Interweave(model=model, method="full-refresh")
    assert move.method == "full-refresh" and move.max_steps == MAX_STEPS_PYTHON
    # its automatic number of steps starts at 1 and is at most FULL_REFRESH_MAX_STEPS (5): each
    # step redraws every record
    with model:
        step = pmdp.DataAugmentation(augment="records", interweave={"method": "full-refresh"})
        pm.sample(step=step, **{**SAMPLE, "tune": 1, "draws": 1, "chains": 1})
    (move,) = [m for m in step.methods if isinstance(m, pmdp.Interweave)]
    assert (move._tuner.n_steps, move._tuner.max_steps) == (1, 5)


@pytest.mark.parametrize(
    ("sizes", "compiled"),
    [((499,), False), ((500,), True), ((1000,), True), ((300, 300), True)],
    ids=["below", "at", "above", "two-tables"],
)
def test_auto_compiles_the_move_from_numba_min_records_over_all_tables(sizes, compiled, caplog):
    """``backend="auto"`` runs the non-centred move in numba from ``NUMBA_MIN_RECORDS`` (500)
    records, counted over every table at the start: below from Python, at and above it (one
    table or two of 300) in numba; the log says which."""
    from pymc_unbounded_dp.interweave import NUMBA_MIN_RECORDS

    assert NUMBA_MIN_RECORDS == 500
    with pm.Model() as model:
        mu = pm.Normal("mu")
        for k, size in enumerate(sizes):
            x = pmdp.Records(f"x{k}", pm.Normal.dist(mu, 1.0), n=size)
            pmdp.PrivatizedSum(
                f"s{k}", pt.clip(x, -3, 3), pmdp.Laplace(scale=6.0, sensitivity=3.0), observed=0.0
            )
    with caplog.at_level(logging.INFO, logger="pymc_unbounded_dp.interweave"):
        move = pmdp.Interweave(model=model)
    assert move.method == "noncentred"
    assert (move._flat_target is not None) == compiled
    assert move._stats(1, 2)["interweave_compiled"] == compiled
    said = "runs in numba" if compiled else "runs in Python (C-compiled target)"
    assert said in caplog.text


def test_an_iteration_without_steps_is_not_reported_as_compiled():
    """``interweave_compiled`` says a step ran in numba: not so in an iteration of no steps (the
    move switched off, or before the records step's first write). ``interweave_on`` says the
    move ran, from one step on."""
    move = pmdp.Interweave(model=model_of("regression", True), backend="numba")
    assert not move._stats(0, 0)["interweave_compiled"]
    assert move._stats(3, 4)["interweave_compiled"] and move._stats(0, 1)["interweave_compiled"]
    assert [move._stats(0, steps)["interweave_on"] for steps in (0, 1, 2)] == [False, True, True]


def test_a_compiled_step_is_tuned_as_the_cheaper_one():
    """The tuning weighs steps by their cost: in numba a step costs ``COMPILED_COST_FACTOR`` of
    the same step from Python (the regression's location-scale form: 0.05 of an iteration)."""
    from pymc_unbounded_dp.interweave import COMPILED_COST_FACTOR

    model = model_of("regression", True)
    costs = {}
    for backend in ("python", "numba"):
        with model:
            step = pmdp.DataAugmentation(augment="records", interweave={"backend": backend})
            pm.sample(step=step, **{**SAMPLE, "tune": 1, "draws": 1, "chains": 1})
        (move,) = [m for m in step.methods if isinstance(m, pmdp.Interweave)]
        costs[backend] = move._tuner.relative_cost
    assert costs["python"] == 0.05
    assert costs["numba"] == pytest.approx(0.05 * COMPILED_COST_FACTOR, rel=1e-12)
    # the measured ratio of a step's cost at 1,000 records (6.3 and 0.9 us in numba on PyTensor 2
    # and 3 against 21-29 us for the target from Python), rounded up, as documented
    assert COMPILED_COST_FACTOR == 0.1


@pytest.mark.parametrize("method", ["auto", "noncentred"])
def test_the_non_centred_move_is_built_when_asked_for_or_chosen(method):
    move = pmdp.Interweave(model=model_of("normal", True), method=method)
    assert move.method == "noncentred" and move.noncentred is not None


def test_interweave_true_forces_the_full_refresh_move_where_auto_has_none():
    model = model_of("categorical-full-refresh", True)
    idata = pmdp.sample(
        augment="records", model=model, random_seed=5, interweave=True, **{**SAMPLE, "draws": 50}
    )
    assert np.all(idata["sample_stats"]["interweave_steps"].values >= 1)


def test_plain_data_augmentation_still_matches():
    """``interweave=False``: the paper's data augmentation alone (NUTS on lam given the records,
    record refresh); slower mixing (more draws), same target."""
    model = model_of("poisson", True)
    idata = pmdp.sample(
        augment="records",
        model=model,
        random_seed=1100,
        interweave=False,
        **{**SAMPLE, "draws": 3000},
    )
    assert "interweave_accept_rate" not in idata["sample_stats"]
    exact, names = oracle_of("poisson", True)
    check_against(idata, exact, names, "poisson, interweave=False")


# --------------------------------------------------------------------------------------------------
# simulation-based calibration
# --------------------------------------------------------------------------------------------------
SBC_REPLICATIONS = 100
SBC_KEPT = 49  # ranks 0..49
SBC_THIN = 2


def assert_ranks_uniform(ranks, label):
    """Chi-square over 10 bins, and the two rank moments that catch the usual failures with more
    power: the mean normalised rank (bias) and its mean distance from 1/2 (too narrow or too wide a
    posterior); each p-value must exceed 1e-3."""
    ranks = np.asarray(ranks)
    u = (ranks + 0.5) / (SBC_KEPT + 1)
    count = len(ranks)
    p_chi2 = sbc_ranks_uniform(ranks, SBC_KEPT + 1)
    # under uniformity u is uniform on the L levels (r + 1/2) / L: moments from the levels
    levels = (np.arange(SBC_KEPT + 1) + 0.5) / (SBC_KEPT + 1)
    z_mean = (u.mean() - 0.5) / np.sqrt(levels.var() / count)
    spread = np.abs(levels - 0.5)
    z_spread = (np.abs(u - 0.5).mean() - spread.mean()) / np.sqrt(spread.var() / count)
    p_mean, p_spread = (2 * stats.norm.sf(abs(z)) for z in (z_mean, z_spread))
    message = f"{label}: chi2 p={p_chi2:.2g}, mean-rank z={z_mean:.2f}, spread z={z_spread:.2f}"
    print(f"SBC {message}")
    assert min(p_chi2, p_mean, p_spread) > 1e-3, message


def run_sbc(step, seed, names):
    """Kept (thinned) draws of ``names`` from one chain."""
    idata = pm.sample(
        draws=SBC_KEPT * SBC_THIN,
        tune=100,
        chains=1,
        step=step,
        random_seed=seed,
        progressbar=False,
        compute_convergence_checks=False,
    )
    return {name: idata["posterior"][name].values[0, ::SBC_THIN] for name in names}


@pytest.mark.slow
def test_sbc_poisson_unbounded():
    """lam ~ Gamma(3, 1), n ~ Poisson(20), noisy sum (Laplace 15) and noisy n: ranks of lam and n."""
    rng = np.random.default_rng(300)
    with pm.Model():
        s_observed = pm.Data("s_observed", 0.0)
        n_observed = pm.Data("n_observed", 20)
        lam = pm.Gamma("lam", alpha=3.0, beta=1.0)
        n = pmdp.SampleSize("n", n_dp=n_observed, mechanism=N_MECHANISM, prior=pm.Poisson.dist(20))
        x = pmdp.Records("x", pm.Poisson.dist(lam), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=15.0), observed=s_observed)
        step = pmdp.ReversibleJump(
            augment="records"
        )  # what pmdp.sample builds: with the interweaving move
        assert step.interweave_step is not None
        lam_ranks, n_ranks = [], []
        for rep in range(SBC_REPLICATIONS):
            lam_true, n_true = rng.gamma(3.0, 1.0), rng.poisson(20)
            s_dp = rng.poisson(n_true * lam_true) + rng.laplace(0.0, 15.0)
            pm.set_data(
                {"s_observed": s_dp, "n_observed": n_true + N_MECHANISM.simulate(random_seed=rng)}
            )
            posterior = run_sbc(step, rep, ["lam", "n"])
            lam_ranks.append(sbc_rank(lam_true, posterior["lam"], rng))
            n_ranks.append(sbc_rank(n_true, posterior["n"], rng))
    assert_ranks_uniform(lam_ranks, "lam")
    assert_ranks_uniform(n_ranks, "n")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["auto", "numba"])
def test_sbc_regression_bounded(backend):
    """mu, beta ~ N(0, 1), n = 20, sums of x and y with Laplace(8): ranks of mu and beta; with
    the move's steps from Python (``"auto"`` at 20 records) and in numba."""
    rng = np.random.default_rng(400)
    n = REGRESSION["n"]
    with pm.Model():
        sx_observed = pm.Data("sx_observed", 0.0)
        sy_observed = pm.Data("sy_observed", 0.0)
        mu = pm.Normal("mu", 0.0, 1.0)
        beta = pm.Normal("beta", 0.0, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta * x, 1.0), n=n)
        pmdp.PrivatizedSum("sx", x, pmdp.Laplace(scale=8.0), observed=sx_observed)
        pmdp.PrivatizedSum("sy", y, pmdp.Laplace(scale=8.0), observed=sy_observed)
        step = pmdp.DataAugmentation(augment="records", interweave={"backend": backend})
        assert step.interweave_step is not None
        ranks = {"mu": [], "beta": []}
        for rep in range(SBC_REPLICATIONS):
            truth = {"mu": rng.normal(), "beta": rng.normal()}
            x_true = rng.normal(truth["mu"], 1.0, n)
            y_true = rng.normal(truth["beta"] * x_true, 1.0)
            pm.set_data(
                {
                    "sx_observed": x_true.sum() + rng.laplace(0.0, 8.0),
                    "sy_observed": y_true.sum() + rng.laplace(0.0, 8.0),
                }
            )
            posterior = run_sbc(step, rep, list(ranks))
            for name, kept in ranks.items():
                kept.append(sbc_rank(truth[name], posterior[name], rng))
    for name, values in ranks.items():
        assert_ranks_uniform(values, name)


# --------------------------------------------------------------------------------------------------
# interweave="auto": no move without a form, and off from the first tuning window that shows it
# does not pay
# --------------------------------------------------------------------------------------------------
def test_auto_without_a_form_gives_exactly_the_plain_chain():
    model = model_of("categorical-full-refresh", False)
    runs = [
        pmdp.sample(
            augment="records",
            model=model,
            random_seed=9,
            interweave=flag,
            **{**SAMPLE, "draws": 40, "tune": 20, "chains": 1},
        )
        for flag in ("auto", False)
    ]
    assert "interweave_steps" not in runs[0]["sample_stats"]
    for name in ("theta", "n"):
        np.testing.assert_array_equal(
            runs[0]["posterior"][name].values, runs[1]["posterior"][name].values
        )


def test_a_move_that_does_not_pay_is_off_after_two_tuning_windows():
    """Bernoulli counts with a precise release (Laplace scale 1 against sqrt(300 p (1 - p)) = 8):
    little missing information, so theta given the ancillaries is pinned to ~1/n and the centred
    step alone mixes. The move is off after its first two windows (25 + 50 tuning iterations),
    and forced on (`interweave=True`) it keeps a step in every iteration."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1.0, 1.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=300)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=1.0), observed=91.0)
    options = {**SAMPLE, "tune": 100, "draws": 20, "chains": 1, "discard_tuned_samples": False}
    steps, calls = {}, []
    original = pmdp.Interweave._target
    for flag in ({"backend": "python"}, True):
        calls.append(0)

        def counted(self, *args):
            calls[-1] += 1
            return original(self, *args)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pmdp.Interweave, "_target", counted)
            idata = pmdp.sample(
                augment="records", model=model, random_seed=4, interweave=flag, **options
            )
        steps[flag is True] = np.concatenate(
            [
                idata[group]["interweave_steps"].values.ravel()
                for group in ("warmup_sample_stats", "sample_stats")
            ]
        )
    auto, forced = steps[False], steps[True]
    assert np.all(auto[:75] > 0) and np.all(auto[75:] == 0), auto
    assert np.all(forced >= 1)
    assert calls == [75, 120]  # switched off, the move does no work (its target is not built)


def test_vars_that_are_not_continuous_parameters_are_refused_naming_them():
    """``vars`` may name only the continuous parameters the move can move; anything else (here a
    record variable) is refused with the choices."""
    with pm.Model() as model:
        mu = pm.Normal("mu")
        x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=20)
        pmdp.PrivatizedSum("s", pm.math.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), observed=3.0)
    with pytest.raises(
        ValueError, match=r"Interweave: 'x' is not a continuous parameter .*\['mu'\]"
    ):
        pmdp.Interweave(vars=[x], model=model)
    assert [v.name for v in pmdp.Interweave(vars=[mu], model=model).vars] == ["mu"]


def test_the_move_waits_for_records_of_the_chains_n():
    """Where the record containers do not hold the point's ``n`` records (the move placed before
    the records step, in a chain's first iteration), the move leaves the point as it is and
    reports no step: 0 steps, off, rate 0.0."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        n = pmdp.SampleSize("n", n_dp=40, mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -5, 5), pmdp.Laplace(scale=10.0, sensitivity=5.0), observed=60.0
        )
    move = pmdp.Interweave(model=model)
    point = model.initial_point()
    held = compile_model(model).tables[0].current_records()[0].shape[0]
    point["n"] = np.asarray(held + 3, dtype=point["n"].dtype)
    new_point, (stats,) = move.step(point)
    assert new_point is point
    assert stats["interweave_steps"] == 0 and not stats["interweave_on"]
    assert stats["interweave_accept_rate"] == 0.0 and not stats["interweave_compiled"]


def test_the_move_moves_the_continuous_parameters_only():
    """The default ``vars``: every continuous parameter; not ``n``, and not a discrete parameter
    of the model (here ``k``, which only shifts the records' location)."""
    from pymc_unbounded_dp.interweave import moving_parameters

    with pm.Model() as model:
        mu = pm.Normal("mu")
        k = pm.Poisson("k", 2.0)
        n = pmdp.SampleSize("n", n_dp=30, mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Normal.dist(mu + k, 1), n=n)
        pmdp.PrivatizedSum(
            "s", pm.math.clip(x, -9, 9), pmdp.Laplace(scale=20.0, sensitivity=9.0), observed=30.0
        )
    names = [v.name for v in moving_parameters(model, compile_model(model))]
    assert names == ["mu"]


def test_the_tuner_sees_the_rest_of_the_iterations_jump():
    """The cost rule compares the move's jumps with those of the rest of the iteration: the
    tuner gets, at each tuning iteration after the first, the move's entry point minus its exit
    point of the previous iteration."""
    from pymc_unbounded_dp.kernels import interweave as rw

    model = model_of("regression", True)
    entries, updates = [], []
    step_fn, update_fn = pmdp.Interweave.step, rw.Tuner.update

    def spy_step(self, point):
        entries.append(np.concatenate([np.ravel(point[k]) for k in self._names]).copy())
        return step_fn(self, point)

    def spy_update(self, position, info, centred_jump=None):
        updates.append((position.copy(), None if centred_jump is None else centred_jump.copy()))
        return update_fn(self, position, info, centred_jump)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pmdp.Interweave, "step", spy_step)
        patch.setattr(rw.Tuner, "update", spy_update)
        pmdp.sample(
            augment="records",
            model=model,
            random_seed=2,
            interweave={"n_steps": 3, "backend": "python"},
            **{**SAMPLE, "tune": 5, "draws": 1, "chains": 1},
        )
    # one update per tuning call that made steps; the last call (the draw) makes none
    entries = entries[-len(updates) - 1 : -1]
    assert len(updates) >= 4 and updates[0][1] is None
    for k in range(1, len(updates)):
        np.testing.assert_allclose(updates[k][1], entries[k] - updates[k - 1][0], rtol=1e-12)


# --------------------------------------------------------------------------------------------------
# the move driven directly (no pm.sample): its pieces on small bounded models, whose record
# containers hold n records from the start
# --------------------------------------------------------------------------------------------------
def test_vars_may_name_a_transformed_parameter_by_its_model_variable():
    """``theta ~ Beta`` moves as its value variable ``theta_logodds__``, whether ``vars`` names
    the model variable or the value variable."""
    model = model_of("bernoulli", True)
    theta = model["theta"]
    for given in (theta, model.rvs_to_values[theta]):
        assert [v.name for v in pmdp.Interweave(vars=[given], model=model).vars] == [
            "theta_logodds__"
        ]


@functools.cache
def vector_model() -> pm.Model:
    """A vector parameter ``w`` (2) before a scalar ``mu``: a flat vector of 3 coordinates."""
    with pm.Model() as model:
        w = pm.Normal("w", 0.0, 1.0, shape=2)
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(w[0] - w[1] + mu, 1.0), n=20)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -3, 3), pmdp.Laplace(scale=6.0, sensitivity=3.0), observed=4.0
        )
    return model


def test_a_vector_parameter_moves_as_its_own_coordinates():
    """``w`` takes coordinates 0-1 of the flat vector and ``mu`` coordinate 2; the random walk
    is in 3 dimensions (a jump moves ``w``'s two coordinates by different amounts)."""
    model = vector_model()
    move = pmdp.Interweave(model=model, n_steps=5, backend="python")
    point = model.initial_point()
    placed = move._with_position(point, np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(placed["w"], [1.0, 2.0])
    assert float(placed["mu"]) == 3.0
    move.start_chain(np.random.default_rng(1))
    jumps = []
    for _ in range(4):
        new_point, (stats,) = move.step(point)
        jumps.append(new_point["w"] - point["w"])
        point = new_point
    assert move._tuner.dimension == 3 and move._tuner.params.chol.shape == (3, 3)
    assert any(abs(j[0] - j[1]) > 1e-6 for j in jumps)  # the move moved, not along (1, 1)


#: Laplace noise of scale 2 shifted by +1: asymmetric, so that ``s_dp - T(x)`` and ``T(x) - s_dp``
#: have different log-densities (the built-in mechanisms are all symmetric).
SHIFTED = pmdp.CustomMechanism(
    logp=lambda e: -pt.abs(e - 1.0) / 2.0 - np.log(4.0),
    simulate=lambda size, rng: 1.0 + rng.laplace(0.0, 2.0, size),
    privacy={"epsilon": 1.0},
    name="shifted Laplace",
)
#: The released counts of the three categories (of 6 records).
CATEGORY_COUNTS_DP = np.array([3.5, 2.0, 4.0])


@functools.cache
def full_refresh_model() -> pm.Model:
    """Categorical records (no non-centred form) with ``theta ~ Beta(2, 3)`` on the log-odds
    scale, three released counts with the shifted Laplace noise."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        p = pt.stack([(1 - theta) / 2, (1 - theta) / 2, theta])
        x = pmdp.Records("x", pm.Categorical.dist(p=p), n=6)
        pmdp.PrivatizedSum(
            "s", pt.eq(x[:, None], np.arange(3)), SHIFTED, observed=CATEGORY_COUNTS_DP
        )
    return model


def full_refresh_log_target(logodds: float, records: np.ndarray) -> float:
    """``log pi(theta)`` on the log-odds scale (with the Jacobian ``theta (1 - theta)``) plus
    the shifted Laplace density of every released count given ``records``."""
    theta = 1.0 / (1.0 + np.exp(-logodds))
    log_prior = stats.beta.logpdf(theta, 2.0, 3.0) + np.log(theta) + np.log1p(-theta)
    noise = CATEGORY_COUNTS_DP - np.bincount(records, minlength=3)
    return float(log_prior + np.sum(-np.abs(noise - 1.0) / 2.0 - np.log(4.0)))


def test_the_full_refresh_target_is_the_prior_and_every_released_count():
    """The full-refresh move's log density, at the current records and at a proposal with the
    records it draws, written out: the prior with its Jacobian, and the noise density of each
    of the three counts at ``s_dp - T(x)``."""
    model = full_refresh_model()
    move = pmdp.Interweave(model=model)
    assert move.method == "full-refresh"
    table = compile_model(model).tables[0]
    table.set_records([np.array([0, 0, 0, 1, 2, 2])])  # counts (3, 1, 2)
    point = model.initial_point()
    point["theta_logodds__"] = np.asarray(0.3)
    records = [t.current_records() for t in compile_model(model).tables]
    log_density, state, _ = move._target(point, records, np.array([0.3]))
    # PyMC's Beta log-density is within ~3e-8 of SciPy's; the slips this guards against (a
    # Jacobian, a count or the noise's sign) each move the value by more than 0.1
    expected = full_refresh_log_target(0.3, np.array([0, 0, 0, 1, 2, 2]))
    assert state.log_density == pytest.approx(expected, abs=1e-6)
    # a proposal: fresh records drawn at theta', scored the same way
    log_p, (drawn,) = log_density(np.array([-0.8]))
    assert drawn.shape == (6,)
    assert log_p == pytest.approx(full_refresh_log_target(-0.8, drawn), abs=1e-6)


def test_the_full_refresh_move_redraws_every_record_of_vector_valued_records():
    """Records with a coordinate axis, ``(n, k) = (7, 2)``: each proposal redraws all ``n``
    records (a count read from the wrong axis would draw ``k`` of them), and the step takes the
    containers' records for the chain's (a count read from the wrong axis would skip the move)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        x = pmdp.Records("x", pm.MvNormal.dist(mu, np.eye(2)), n=7)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -1.0, 1.0), pmdp.Laplace(scale=1.0, sensitivity=2.0),
            observed=[0.5, -0.5],
        )  # fmt: skip
    move = pmdp.Interweave(model=model, method="full-refresh")
    records = [t.current_records() for t in compile_model(model).tables]
    assert records[0][0].shape == (7, 2)
    log_density, _, _ = move._target(model.initial_point(), records, np.zeros(2))
    _, (drawn,) = log_density(np.array([0.3, -0.2]))
    assert drawn.shape == (7, 2)
    # the step sees that the containers hold the chain's 7 records (their first axis) and moves
    move.start_chain(np.random.default_rng(0))
    _, (stats_,) = move.step(model.initial_point())
    assert stats_["interweave_steps"] == 1


def test_the_full_refresh_move_takes_a_smaller_max_steps():
    """The full-refresh move's automatic steps start at 1 and stay at most ``max_steps`` where
    that is below FULL_REFRESH_MAX_STEPS (5)."""
    model = full_refresh_model()
    move = pmdp.Interweave(model=model, max_steps=3)
    move.start_chain(np.random.default_rng(0))
    _, (stats_,) = move.step(model.initial_point())
    assert stats_["interweave_steps"] == 1
    assert (move._tuner.n_steps, move._tuner.max_steps) == (1, 3)


def test_a_full_refresh_step_pays_when_it_moves_twice_as_far_as_the_rest_of_the_iteration():
    """A full-refresh step redraws every record: it costs about half an iteration, so a step whose
    whitened squared jump is twice the rest of the iteration's buys more than it costs and the
    move stays on (PAY_MARGIN x 0.5 = 1 < 2); at three times the cost it would be switched off.
    Kills the relative cost 0.5 -> 1.5 (interweave.py, twelfth session's mutation run)."""
    from pymc_unbounded_dp.kernels import interweave as rw

    model = full_refresh_model()
    move = pmdp.Interweave(model=model)
    move.start_chain(np.random.default_rng(0))
    move.step(model.initial_point())
    tuner = move._tuner
    assert rw.steps_for(tuner.dimension, 2.0, tuner.max_steps, 1.0, tuner.relative_cost) >= 1
    assert rw.steps_for(tuner.dimension, 0.9, tuner.max_steps, 1.0, tuner.relative_cost) == 0


def test_a_new_chain_measures_no_jump_before_its_first_exit():
    """The tuner's 'rest of the iteration' jump needs the move's exit point of the iteration
    before in the same chain: a new chain's first update has none (not the last chain's)."""
    from pymc_unbounded_dp.kernels import interweave as rw

    model = model_of("regression", True)
    move = pmdp.Interweave(model=model, n_steps=2, backend="python")
    jumps, update = [], rw.Tuner.update

    def spy(self, position, info, centred_jump=None):
        jumps.append(centred_jump)
        return update(self, position, info, centred_jump)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rw.Tuner, "update", spy)
        for chain in range(2):
            move.start_chain(np.random.default_rng(chain))
            point = model.initial_point()
            for _ in range(3):
                point, _ = move.step(point)
    assert [j is None for j in jumps] == [True, False, False] * 2


def test_the_move_waits_while_any_table_holds_records_of_another_n():
    """A table of known size beside one of latent size: the move waits (no step) while the
    latent table's containers hold another number of records than the point's ``n``, though the
    known-size table's are right."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=10)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -5, 5), pmdp.Laplace(scale=10.0, sensitivity=5.0), observed=6.0
        )
        n = pmdp.SampleSize("n", n_dp=40, mechanism=N_MECHANISM)
        y = pmdp.Records("y", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum(
            "t", pt.clip(y, -5, 5), pmdp.Laplace(scale=10.0, sensitivity=5.0), observed=60.0
        )
    move = pmdp.Interweave(model=model, backend="python")
    move.start_chain(np.random.default_rng(0))
    point = model.initial_point()
    known, latent = compile_model(model).tables
    assert known.current_records()[0].shape[0] == 10
    point["n"] = np.asarray(latent.current_records()[0].shape[0] + 3, dtype=point["n"].dtype)
    new_point, (stats_,) = move.step(point)
    assert new_point is point
    assert stats_["interweave_steps"] == 0 and not stats_["interweave_on"]


def test_the_costliest_form_sets_the_cost_of_a_step():
    """Normal records (location-scale, 0.05 of an iteration) beside Poisson records (randomized
    PIT, 1.0): a step costs what its costliest form does, so the first window makes
    ``max(1, round(0.5 / 1.0))`` = 1 step, not the 10 of the normal records alone."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=20)
        y = pmdp.Records("y", pm.Poisson.dist(pm.math.exp(mu)), n=20)
        pmdp.PrivatizedSum(
            "s", pt.clip(x, -3, 3), pmdp.Laplace(scale=6.0, sensitivity=3.0), observed=4.0
        )
        pmdp.PrivatizedSum(
            "t", pt.clip(y, 0, 5), pmdp.Laplace(scale=10.0, sensitivity=5.0), observed=25.0
        )
    move = pmdp.Interweave(model=model, backend="python")
    assert sorted(f.relative_cost for f in move.noncentred.forms) == [0.05, 1.0]
    move.start_chain(np.random.default_rng(0))
    _, (stats_,) = move.step(model.initial_point())
    assert stats_["interweave_steps"] == 1
    assert move._tuner.relative_cost == 1.0
