"""The plain NumPy reference sampler: its exact updates, and agreement with ``pmdp.sample``.

The reference (``reference/r_port.py``, outside the package) shares no code with the package's
samplers: its parameter updates are exact conjugate draws, its record moves a Python loop. Its
conditional updates are checked here against closed forms (the log posterior minus log prior minus
log likelihood must be constant in the parameters), its birth/death moves against the exact
posterior of ``n`` when the sums carry no information, and then it serves as an independent oracle
for ``pmdp.sample`` on the regression workload.
"""

import math

import arviz as az
import numpy as np
import pytest
import r_port as ref
from scipy import stats

# A tiny fixed data set: five records (x1, x2, y).
X = np.array([[0.5, -1.2], [1.7, 0.3], [-0.4, -0.8], [2.2, -2.5], [0.9, 0.1]])
Y = np.array([-1.1, 0.4, -0.2, -4.0, 0.3])


def _spd(rng):
    a = rng.normal(size=(2, 2))
    return a @ a.T + 0.3 * np.eye(2)


def _assert_constant(values, label):
    values = np.asarray(values)
    assert np.ptp(values) < 1e-8 * max(1.0, np.abs(values).max()), f"{label}: {values}"


def test_statistics_order_and_clamping():
    x = np.array([[6.0, -1.0], [2.5, 10.0]])
    y = np.array([-7.5, 1.0])
    t = ref.r_record_statistics(x, y)
    # clamped to [-5, 5] and divided by 5
    x1, x2, v = np.array([1.0, 0.5]), np.array([-0.2, 1.0]), np.array([-1.0, 0.2])
    expected = np.stack([v, x1 * v, x2 * v, v * v, x1, x2, x1 * x1, x1 * x2, x2 * x2], axis=1)
    np.testing.assert_allclose(t, expected)
    assert np.all(np.abs(t) <= 1.0)
    assert len(ref.R_STATISTIC_NAMES) == t.shape[1] == 9


def test_statistics_match_the_examples_module():
    from pymc_unbounded_dp.examples import regression  # the dev extra installs examples: no skip

    np.testing.assert_allclose(
        ref.r_record_statistics(X, Y).sum(axis=0), regression.regression_statistics(X, Y)
    )


def test_normal_gamma_update_is_prior_times_likelihood():
    """``log p(beta, tau | data) - log p(beta, tau) - log p(y | x, beta, tau)`` is constant."""
    mean, precision, shape, rate = ref.normal_gamma_posterior(X, Y)
    z = np.column_stack([np.ones(len(Y)), X])
    rng = np.random.default_rng(0)
    differences = []
    for _ in range(6):
        beta, tau = rng.normal(size=3), rng.gamma(2.0, 0.7)
        log_post = stats.gamma.logpdf(
            tau, shape, scale=1.0 / rate
        ) + stats.multivariate_normal.logpdf(beta, mean, np.linalg.inv(precision) / tau)
        log_prior = stats.gamma.logpdf(tau, 1.0, scale=1.0) + stats.multivariate_normal.logpdf(
            beta, np.zeros(3), np.eye(3) / tau
        )
        log_lik = stats.norm.logpdf(Y, z @ beta, 1.0 / math.sqrt(tau)).sum()
        differences.append(log_post - log_prior - log_lik)
    _assert_constant(differences, "normal-gamma")


def test_mu_update_is_prior_times_likelihood():
    phi = np.array([[1.3, 0.4], [0.4, 0.8]])
    mean, precision = ref.mu_posterior(X, phi)
    cov = np.linalg.inv(phi)
    rng = np.random.default_rng(1)
    differences = []
    for _ in range(6):
        mu = rng.normal(size=2)
        log_post = stats.multivariate_normal.logpdf(mu, mean, np.linalg.inv(precision))
        log_prior = stats.multivariate_normal.logpdf(mu, np.zeros(2), np.eye(2))
        log_lik = stats.multivariate_normal.logpdf(X, mu, cov).sum()
        differences.append(log_post - log_prior - log_lik)
    _assert_constant(differences, "mu")


def test_wishart_update_is_prior_times_likelihood():
    mu = np.array([0.7, -0.6])
    nu, scale = ref.phi_posterior(X, mu)
    assert nu == 2 + len(X)
    rng = np.random.default_rng(2)
    differences = []
    for _ in range(6):
        phi = _spd(rng)
        log_post = stats.wishart.logpdf(phi, df=nu, scale=scale)
        log_prior = stats.wishart.logpdf(phi, df=2, scale=np.eye(2))
        log_lik = stats.multivariate_normal.logpdf(X, mu, np.linalg.inv(phi)).sum()
        differences.append(log_post - log_prior - log_lik)
    _assert_constant(differences, "Phi")


def test_wishart_draws_have_the_right_moments():
    rng = np.random.default_rng(3)
    scale = np.array([[0.6, -0.2], [-0.2, 0.3]])
    nu = 4.0
    draws = np.array([ref.sample_wishart(rng, nu, scale) for _ in range(20000)])
    mean = nu * scale
    var = nu * (scale**2 + np.outer(np.diag(scale), np.diag(scale)))
    z = (draws.mean(axis=0) - mean) / np.sqrt(var / len(draws))
    assert np.all(np.abs(z) < 4.0), z
    assert np.all(np.linalg.eigvalsh(draws) > 0)


def test_birth_death_matches_exact_posterior_of_n_without_information():
    """With (practically) no information in the sums, ``n | n_dp`` is discrete Laplace on n >= 0."""
    release = ref.ReferenceRelease(s_dp=np.zeros(9), n_dp=6, epsilon_s=1e-9, epsilon_n=0.4)
    draws = ref.reference_regression_sampler(release, n_iter=6000, n_moves=5, random_seed=4)
    n = draws["n"][500:]
    support = np.arange(0, 400)
    pmf = np.exp(-np.abs(release.n_dp - support) / release.scale_n)
    pmf /= pmf.sum()
    exact_mean = float(support @ pmf)
    exact_var = float(support**2 @ pmf) - exact_mean**2
    se = math.sqrt(exact_var / float(az.ess(n[None, :].astype(float))))
    assert abs(n.mean() - exact_mean) < 4 * se, (n.mean(), exact_mean, se)
    assert np.all(n >= 0)
    assert np.nanmean(draws["refresh_accept_rate"]) > 0.99


def test_reference_is_reproducible():
    release, _ = ref.simulate_reference_release(n=30, random_seed=5)
    a = ref.reference_regression_sampler(release, n_iter=30, random_seed=6)
    b = ref.reference_regression_sampler(release, n_iter=30, random_seed=6)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


# --------------------------------------------------------------------------------------------------
# the reference as an oracle for pmdp.sample
# --------------------------------------------------------------------------------------------------
N_RECORDS, EPSILON_S, EPSILON_N = 200, 5.0, 0.5


def _regression_model(values, n_dp, epsilon_s, epsilon_n):
    """The §6.1 model with the public API (the examples module's model when it is there)."""
    try:
        from pymc_unbounded_dp.examples import regression
    except ImportError:
        regression = None
    if regression is not None:
        release = regression.RegressionRelease(
            values=np.asarray(values),
            n_dp=int(n_dp),
            epsilon_s=epsilon_s,
            epsilon_n=epsilon_n,
            n=-1,
        )
        return regression.regression_model(release)

    import pymc as pm
    import pytensor.tensor as pt

    import pymc_unbounded_dp as pmdp

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        c1 = pm.ChiSquared("Phi_c1", nu=2)
        c2 = pm.ChiSquared("Phi_c2", nu=1)
        z = pm.Normal("Phi_z", 0.0, 1.0)
        a = pt.stack([pt.stack([pt.sqrt(c1), pt.zeros(())]), pt.stack([z, pt.sqrt(c2)])])
        tau = pm.Gamma("tau", alpha=1.0, beta=1.0)
        beta = pm.Normal("beta", 0.0, sigma=1.0 / pt.sqrt(tau), shape=3)
        n = pmdp.SampleSize("n", n_dp=int(n_dp), mechanism=pmdp.DiscreteLaplace(epsilon=epsilon_n))
        x = pmdp.Records("X", pm.MvNormal.dist(mu, tau=a @ a.T), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta[0] + x @ beta[1:], 1.0 / pt.sqrt(tau)), n=n)
        xc, yc = pt.clip(x, -5, 5) / 5, pt.clip(y, -5, 5) / 5
        x1, x2 = xc[:, 0], xc[:, 1]
        statistic = pt.stack(
            [yc, x1 * yc, x2 * yc, yc * yc, x1, x2, x1 * x1, x1 * x2, x2 * x2], axis=1
        )
        pmdp.PrivatizedSum(
            "s", statistic, pmdp.Laplace(epsilon=epsilon_s, sensitivity=9.0), observed=values
        )
    return model


def _mean_and_mcse(draws):
    """Posterior mean and its Monte Carlo standard error (ArviZ's ESS) of ``(chain, draw)``."""
    draws = np.asarray(draws, dtype=float)
    ess = float(az.ess(draws, method="mean"))
    return float(draws.mean()), float(draws.std()) / math.sqrt(ess)


@pytest.mark.slow
def test_pmdp_sample_agrees_with_the_reference_sampler():
    import pymc_unbounded_dp as pmdp

    release, _ = ref.simulate_reference_release(
        n=N_RECORDS, epsilon_s=EPSILON_S, epsilon_n=EPSILON_N, random_seed=2024
    )
    reference = ref.reference_regression_sampler(release, n_iter=3500, random_seed=7)
    burn = 500
    model = _regression_model(release.s_dp, release.n_dp, EPSILON_S, EPSILON_N)
    # The default sampler (with the interweaving move): an independent check of the move on the
    # paper's workload. It mixes far faster than the reference, so fewer draws suffice.
    idata = pmdp.sample(
        model=model,
        draws=1500,
        tune=500,
        chains=1,
        random_seed=8,
        progressbar=False,
        compute_convergence_checks=False,
    )
    posterior = idata["posterior"]
    pairs = {
        f"beta[{j}]": (reference["beta"][burn:, j], posterior["beta"].values[..., j])
        for j in range(3)
    }
    pairs["tau"] = (reference["tau"][burn:], posterior["tau"].values)
    pairs["n"] = (reference["n"][burn:], posterior["n"].values)
    for label, (ours, theirs) in pairs.items():
        m_ref, se_ref = _mean_and_mcse(ours[None, :])
        m_pmdp, se_pmdp = _mean_and_mcse(theirs)
        z = (m_pmdp - m_ref) / math.hypot(se_ref, se_pmdp)
        assert abs(z) < 4.0, f"{label}: pmdp {m_pmdp:.4f} vs reference {m_ref:.4f} (z = {z:.2f})"
