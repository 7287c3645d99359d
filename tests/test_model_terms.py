"""Model terms besides the records and releases, through every sampler path (issue 32).

Every other exact-posterior test has models whose only terms are the parameters' priors, the
records and the releases: a ``pm.Potential`` term is empty there, and no record is drawn through a
``pm.Deterministic``. A step that leaves the Potential out of its target, or reads a parameter
before its transform, passes them all. The model here has all three, and two tables (a known and a
latent ``n``) so that one run covers the bounded and the unbounded moves:

    theta ~ Beta(2, 2)                      (PyMC moves it on the logit scale: a transform)
    eta ~ N(0, 1.5),  p = Deterministic(invlogit(eta))
    Potential("tilt", (3 + 2 p) log theta)  (couples theta and eta; conjugate given p)
    table A: x_i ~ Bernoulli(theta), n_A = 12,           s_A = sum x + Laplace(1)
    table B: y_i ~ Bernoulli(p),  n_B latent (flat prior), n_dp = 15 + DiscreteLaplace(eps 0.5),
             s_B = sum y + Laplace(1.5)

Its exact posterior is a quadrature on ``(logit theta, eta)`` summed over ``n_B``
(``oracles.tilted_tables_posterior``). Each path is run once (2 chains x 1,000 draws after 300
tuning): records with plain data augmentation (NUTS + the refresh and birth/death moves), the
interweaving move in its non-centred form and in the full-refresh fallback (forced every
iteration), ``ConjugateGibbs`` for both parameters (an exact draw of ``theta``, Metropolis steps
for ``eta``, reading the Deterministic ``p`` as the step passes it), and the sums level. ``pmdp.mcem``'s MLE and MAP are checked on a one-table model with the same terms.

Power: every checked variable has at least ``MIN_ESS`` = 200 effective draws (asserted; 380-920
measured), so a mean 0.45 posterior sd off fails |z| < 4 with probability > 0.97 (0.3 sd at the
typical 400). Without the Potential theta's exact mean moves by 1.4 sd (0.544 -> 0.353) and eta's
by 0.2 sd (0.788 -> 0.974): a step that ignores the Potential fails on theta (the mutation that
drops it from the non-centred target gave z = -14.3).
"""

import math

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import (
    assert_effective_draws,
    assert_mean_and_spread_match,
    assert_pmf_matches,
    draws_of,
)
from oracles import bernoulli_release_log_likelihood, log_normal_laplace, tilted_tables_posterior
from scipy import optimize, special, stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import conjugate

A_TABLE = dict(n=12, s_dp=3.4, mechanism=pmdp.Laplace(scale=1.0))
B_TABLE = dict(
    n_dp=15,
    s_dp=11.2,
    mechanism=pmdp.Laplace(scale=1.5),
    n_mechanism=pmdp.DiscreteLaplace(epsilon=0.5),
)
TILT = (3.0, 2.0)
MIN_ESS = 200
SAMPLE = dict(
    draws=1000, tune=300, chains=2, cores=1, progressbar=False, compute_convergence_checks=False
)


def tilted_model() -> pm.Model:
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 2.0)
        eta = pm.Normal("eta", 0.0, 1.5)
        p = pm.Deterministic("p", pm.math.invlogit(eta))
        pm.Potential("tilt", (TILT[0] + TILT[1] * p) * pt.log(theta))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=A_TABLE["n"])
        pmdp.PrivatizedSum("s_A", x, A_TABLE["mechanism"], observed=A_TABLE["s_dp"])
        n_b = pmdp.SampleSize("n_B", n_dp=B_TABLE["n_dp"], mechanism=B_TABLE["n_mechanism"])
        y = pmdp.Records("y", pm.Bernoulli.dist(p), n=n_b)
        pmdp.PrivatizedSum("s_B", y, B_TABLE["mechanism"], observed=B_TABLE["s_dp"])
    return model


@pytest.fixture(scope="module")
def model():
    return tilted_model()


@pytest.fixture(scope="module")
def exact():
    return tilted_tables_posterior(A_TABLE, B_TABLE, TILT)


def _conjugate_update(rng, records, values):
    """Both parameters by ``ConjugateGibbs``: ``eta | y, n_B, theta`` by 5 random-walk Metropolis
    steps (exact: ``update`` may be any kernel that leaves the conditional invariant), its current
    target evaluated with the Deterministic ``p`` as the step reads it; then ``theta | x, p ~
    Beta(2 + 3 + 2 p + k, 2 + n_A - k)``."""
    y, theta = records["y"], float(values["theta"])
    k_y, n_y = float(y.sum()), y.shape[0]

    def log_target(e, p):
        return (
            stats.norm.logpdf(e, 0.0, 1.5)
            + TILT[1] * p * math.log(theta)
            + k_y * math.log(p)
            + (n_y - k_y) * math.log1p(-p)
        )

    eta, p = float(values["eta"]), float(values["p"])
    current = log_target(eta, p)
    for _ in range(5):
        proposal = eta + 0.7 * rng.standard_normal()
        trial = log_target(proposal, float(special.expit(proposal)))
        if math.log(rng.random()) < trial - current:
            eta, current = proposal, trial
    k_x, n_x = float(records["x"].sum()), records["x"].shape[0]
    a = 2.0 + TILT[0] + TILT[1] * float(special.expit(eta))
    return {"theta": conjugate.beta_binomial(rng, k_x, n_x, a, 2.0), "eta": eta}


def _conjugate_theta_update(rng, records, values):
    k, n = float(records["x"].sum()), records["x"].shape[0]
    a = 2.0 + TILT[0] + TILT[1] * float(values["p"])
    return {"theta": conjugate.beta_binomial(rng, k, n, a, 2.0)}


PATHS = {
    "data-augmentation": dict(augment="records", interweave=False),
    "noncentred": dict(augment="records", interweave={"method": "noncentred", "n_steps": 3}),
    "full-refresh": dict(augment="records", interweave={"method": "full-refresh", "n_steps": 2}),
    "conjugate": dict(augment="records", interweave=False),
    "sums": dict(augment="sums"),
}


def test_the_potential_and_its_coupling_matter_here(exact):
    """The power claimed in the module docstring: without the Potential the posterior moves."""
    dropped = tilted_tables_posterior(A_TABLE, B_TABLE, TILT, potential=False)
    for name, shift in (("theta", 1.4), ("eta", 0.2)):
        mean, var = exact[name]
        assert abs(dropped[name][0] - mean) / math.sqrt(var) > shift
    coarse = tilted_tables_posterior(A_TABLE, B_TABLE, TILT, grid=301)
    for name in ("theta", "eta", "p", "n_B"):
        assert coarse[name] == pytest.approx(exact[name], rel=1e-6)  # the rule has converged


@pytest.mark.parametrize("path", list(PATHS))
def test_every_sampler_path_sees_the_potential_the_deterministic_and_the_transform(
    model, exact, path
):
    step = None
    if path == "conjugate":
        step = conjugate.ConjugateGibbs(["theta", "eta"], _conjugate_update, model=model)
    idata = pmdp.sample(model=model, step=step, random_seed=32, **PATHS[path], **SAMPLE)
    if path in ("noncentred", "full-refresh"):
        stats_ = idata["sample_stats"]
        assert bool(np.all(stats_["interweave_on"].values)), "the move was not made every draw"
        assert 0.05 < float(stats_["interweave_accept_rate"].values.mean()) < 0.99
    for name in ("theta", "eta", "p", "n_B"):
        mean, var = exact[name]
        assert_mean_and_spread_match(draws_of(idata, name), mean, var, f"{path}: {name}")
        assert_effective_draws(draws_of(idata, name), MIN_ESS, f"{path}: {name}")
    # the Deterministic is recorded as its function of the draws of eta
    np.testing.assert_allclose(
        draws_of(idata, "p"), special.expit(draws_of(idata, "eta")), rtol=1e-10
    )
    assert_pmf_matches(
        draws_of(idata, "n_B").astype(int), exact["n_B_values"], exact["n_B_pmf"], f"{path}: n_B"
    )


def test_a_conjugate_step_next_to_nuts(model, exact):
    """``theta`` by its exact conjugate draw (reading the Deterministic ``p``), ``eta`` by NUTS."""
    step = conjugate.ConjugateGibbs(["theta"], _conjugate_theta_update, model=model)
    idata = pmdp.sample(
        model=model, step=step, random_seed=33, **PATHS["data-augmentation"], **SAMPLE
    )
    for name in ("theta", "eta"):
        mean, var = exact[name]
        assert_mean_and_spread_match(draws_of(idata, name), mean, var, f"conjugate + NUTS: {name}")


# --------------------------------------------------------------------------------------------------
# public data: an observed variable of the parameters alone, beside the private release
# --------------------------------------------------------------------------------------------------
PUBLIC = np.array([0.2, 0.9, -0.4, 1.3, 0.6])
NORMAL = dict(n=20, s_dp=40.0, scale=2.0, prior_sd=10.0)


@pytest.fixture(scope="module")
def public_model():
    """``x_i ~ N(mu, 1)``, ``n = 20``, ``s = sum x + Laplace(2)`` at 40, and five public
    observations ``N(mu, 1)`` at ``PUBLIC``: ``mu ~ N(0, 10)``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, NORMAL["prior_sd"])
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=NORMAL["n"])
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=NORMAL["scale"]), observed=NORMAL["s_dp"])
        pm.Normal("public", mu, 1.0, observed=PUBLIC)
    return model


def _public_log_likelihood(mu, public=True):
    mu = np.asarray(mu, dtype=float)
    n, scale = NORMAL["n"], NORMAL["scale"]
    value = log_normal_laplace(NORMAL["s_dp"], n * mu, n, scale)
    if public:
        value = value + stats.norm.logpdf(PUBLIC[:, None], mu[None], 1.0).sum(axis=0)
    return value


@pytest.fixture(scope="module")
def public_exact():
    """Posterior mean and variance of ``mu`` by quadrature (and without the public data: the
    effect of a step that leaves it out)."""
    grid = np.linspace(-4.0, 8.0, 24_001)
    out = {}
    for public in (True, False):
        log_w = _public_log_likelihood(grid, public) + stats.norm.logpdf(
            grid, 0, NORMAL["prior_sd"]
        )
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        mean = float(np.sum(w * grid))
        out[public] = (mean, float(np.sum(w * (grid - mean) ** 2)))
    return out


@pytest.mark.parametrize(
    "path",
    [
        "data-augmentation",
        "noncentred",
        "full-refresh",
        "sums",
    ],
)
def test_public_data_enters_every_sampler_path(public_model, public_exact, path):
    """Exact mean 1.601 (sd 0.247); leaving the public data out moves it to 1.92 (1.3 sd); with
    at least ``MIN_ESS`` effective draws (asserted) a mean 0.45 sd off fails."""
    mean, var = public_exact[True]
    assert abs(public_exact[False][0] - mean) > 1.2 * math.sqrt(var)
    sample = dict(SAMPLE, draws=600, tune=200)
    idata = pmdp.sample(model=public_model, random_seed=34, **PATHS[path], **sample)
    assert_mean_and_spread_match(draws_of(idata, "mu"), mean, var, f"{path}: mu")
    assert_effective_draws(draws_of(idata, "mu"), MIN_ESS, f"{path}: mu")


# --------------------------------------------------------------------------------------------------
# pmdp.mcem: public data in the likelihood; MAP adds the priors and the Potential
# --------------------------------------------------------------------------------------------------
MCEM_PUBLIC = np.array([-3.0])  # one public N(eta, 2) observation
MCEM_TILT = 6.0  # Potential MCEM_TILT log p


def _mcem_model():
    """Table B alone, ``eta`` drawn through the Deterministic ``p``, a Potential on ``p`` and a
    public observation of ``eta``."""
    with pm.Model() as model:
        eta = pm.Normal("eta", 0.0, 1.5)
        p = pm.Deterministic("p", pm.math.invlogit(eta))
        pm.Potential("tilt", MCEM_TILT * pt.log(p))
        pm.Normal("public", eta, 2.0, observed=MCEM_PUBLIC)
        n_b = pmdp.SampleSize("n_B", n_dp=B_TABLE["n_dp"], mechanism=B_TABLE["n_mechanism"])
        y = pmdp.Records("y", pm.Bernoulli.dist(p), n=n_b)
        pmdp.PrivatizedSum("s_B", y, B_TABLE["mechanism"], observed=B_TABLE["s_dp"])
    return model


def _release_log_likelihood(eta):
    ns = np.arange(0, int(B_TABLE["n_dp"] + 40 * B_TABLE["n_mechanism"].scale) + 1)
    log_w_n = B_TABLE["n_mechanism"].logpdf(B_TABLE["n_dp"] - ns)
    value, _ = bernoulli_release_log_likelihood(
        np.atleast_1d(special.expit(eta)), B_TABLE["s_dp"], B_TABLE["mechanism"], ns, log_w_n
    )
    return float(value[0])


def _log_likelihood(eta):
    return _release_log_likelihood(eta) + float(stats.norm.logpdf(MCEM_PUBLIC, eta, 2.0).sum())


def _log_posterior(eta, potential=True):
    prior = stats.norm.logpdf(eta, 0.0, 1.5)
    return _log_likelihood(eta) + prior + (MCEM_TILT * math.log(special.expit(eta)) * potential)


def _maximise(function):
    result = optimize.minimize_scalar(
        lambda e: -function(e), bounds=(-6, 6), method="bounded", options={"xatol": 1e-10}
    )
    t, h = result.x, 1e-4
    curvature = (function(t + h) - 2 * function(t) + function(t - h)) / h**2
    return t, 1 / math.sqrt(-curvature)


def _missing_information_at(eta):
    """The exact fraction of missing information ``1 - I_obs / I_c`` at ``eta``: ``I_obs`` by
    second differences, ``I_c = E[n_B | release] p (1 - p) + 1/4`` (each Bernoulli record carries
    ``p (1 - p)`` about ``eta``; the public observation ``1 / 2^2``)."""
    h = 1e-4
    observed = -(_log_likelihood(eta + h) - 2 * _log_likelihood(eta) + _log_likelihood(eta - h))
    observed /= h**2
    ns = np.arange(0, int(B_TABLE["n_dp"] + 40 * B_TABLE["n_mechanism"].scale) + 1)
    log_w_n = B_TABLE["n_mechanism"].logpdf(B_TABLE["n_dp"] - ns)
    _, per_n = bernoulli_release_log_likelihood(
        np.atleast_1d(special.expit(eta)), B_TABLE["s_dp"], B_TABLE["mechanism"], ns, log_w_n
    )
    w = np.exp(per_n[:, 0] - per_n[:, 0].max())
    p = float(special.expit(eta))
    complete = float(np.sum(w * ns) / np.sum(w)) * p * (1 - p) + 1 / 2.0**2
    return 1 - observed / complete


def test_mcem_mle_has_the_public_data_and_louis_standard_error():
    """MLE of ``eta`` = 0.443 (SE 0.734): the release's likelihood of ``p = invlogit(eta)`` times
    the public observation's (without it 1.082, 0.87 SE away; the priors and the Potential stay
    out). Estimate within 4 Monte Carlo errors + 0.02 SE.

    The standard error (Louis' observed information ``I_c - I_miss``) within 10%. The exact
    fraction of missing information here is 0.537 (asserted >= 0.5; the fit's estimate of it
    within 0.1): the complete-data SE ``1 / sqrt(I_c) = SE sqrt(1 - f)`` that a fit without the
    missing-information correction would report is 0.68 SE, 32% below, more than three times the
    tolerance. (Seeds 1-4 gave SEs within -1.7% to +2.2% of the exact one.)"""
    fit = pmdp.mcem(model=_mcem_model(), random_seed=2, progressbar=False)
    mle, se = _maximise(_log_likelihood)
    assert abs(_maximise(_release_log_likelihood)[0] - mle) > 0.8 * se  # the public data matter
    estimate, mc_error = float(fit.estimate["eta"]), float(fit.mc_error["eta"])
    tolerance = 4 * mc_error + 0.02 * se
    assert abs(estimate - mle) < tolerance, f"MLE {estimate:.4f} vs exact {mle:.4f}"
    missing = _missing_information_at(mle)
    assert missing >= 0.5 and math.sqrt(1 - missing) < 0.7  # the correction is worth > 30%
    assert abs(fit.missing_information - missing) < 0.1
    assert float(fit.standard_error["eta"]) == pytest.approx(se, rel=0.1)
    assert set(fit.estimate) == {"eta"}


def test_mcem_map_adds_the_priors_and_the_potential():
    """The posterior mode with the prior, the Potential and the public data: 1.088 (SE 0.596);
    without the Potential 0.358 (1.2 SE below), without the public data 1.568, without both 0.786
    (0.5 SE below). Within 4 Monte Carlo errors + 0.02 SE."""
    fit = pmdp.mcem(model=_mcem_model(), map=True, random_seed=2, progressbar=False)
    mode, se = _maximise(_log_posterior)
    without = _maximise(lambda e: _log_posterior(e, potential=False))[0]
    assert mode - without > 1.0 * se
    neither = _maximise(lambda e: _release_log_likelihood(e) + stats.norm.logpdf(e, 0.0, 1.5))[0]
    assert mode - neither > 0.4 * se
    estimate, mc_error = float(fit.estimate["eta"]), float(fit.mc_error["eta"])
    tolerance = 4 * mc_error + 0.02 * se
    assert abs(estimate - mode) < tolerance, f"MAP {estimate:.4f} vs exact {mode:.4f}"


def test_the_simulated_likelihood_has_the_public_data(public_model):
    """``method="simulated"`` on the normal model with public data: MLE 1.627 (without the public
    data 2.000, 1.4 SE away), within 4 Monte Carlo errors + 0.02 SE."""
    mle, se = _maximise(lambda m: float(_public_log_likelihood(np.atleast_1d(m))[0]))
    without = _maximise(lambda m: float(_public_log_likelihood(np.atleast_1d(m), False)[0]))[0]
    assert abs(without - mle) > 1.2 * se
    fit = pmdp.mcem(model=public_model, method="simulated", random_seed=6, progressbar=False)
    estimate, mc_error = float(fit.estimate["mu"]), float(fit.mc_error["mu"])
    assert fit.method == "simulated"
    assert abs(estimate - mle) < 4 * mc_error + 0.02 * se, f"MLE {estimate:.4f} vs {mle:.4f}"
