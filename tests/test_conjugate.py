"""Exact conjugate Gibbs parameter steps: building blocks, the PyMC step, exact posteriors."""

import math

import arviz as az
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
import r_port as ref
from mcmc_checks import assert_moments_match, draws_of
from oracles import bernoulli_posterior
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import conjugate
from pymc_unbounded_dp.examples.regression import regression_gibbs_step

SAMPLE = {
    "draws": 2000,
    "tune": 200,
    "chains": 2,
    "cores": 1,
    "progressbar": False,
    "compute_convergence_checks": False,
}


def _assert_constant(values, label):
    values = np.asarray(values)
    assert np.ptp(values) < 1e-8 * max(1.0, np.abs(values).max()), f"{label}: {values}"


class _Recorder:
    """A generator stand-in that records the parameters of the draws asked of it."""

    def __init__(self):
        self.calls = []
        self._rng = np.random.default_rng(0)

    def __getattr__(self, name):
        def draw(*args, **kwargs):
            self.calls.append((name, args))
            return getattr(self._rng, name)(*args, **kwargs)

        return draw


# --------------------------------------------------------------------------------------------------
# building blocks against closed forms
# --------------------------------------------------------------------------------------------------
def test_beta_binomial_and_gamma_poisson_parameters():
    rec = _Recorder()
    conjugate.beta_binomial(rec, 7, 20, 2.0, 3.0)
    conjugate.gamma_poisson(rec, 41, 10, 1.5, 0.5)
    assert rec.calls[0] == ("beta", (9.0, 16.0))
    name, (shape, scale) = rec.calls[1]
    assert name == "gamma" and shape == 42.5 and scale == pytest.approx(1 / 10.5)


def test_normal_gamma_is_prior_times_likelihood():
    """The draw's density, reconstructed from its parameters, is prior x likelihood (normalised)."""
    rng = np.random.default_rng(1)
    z = np.column_stack([np.ones(6), rng.normal(size=(6, 2))])
    y = rng.normal(size=6)
    m, p, a, b = np.array([0.3, -0.2, 0.1]), np.diag([2.0, 0.5, 1.0]), 2.0, 1.5
    # Recover the conditional's parameters from the draws' generator calls.
    rec = _Recorder()
    conjugate.normal_gamma(rec, z, y, m, p, a, b)
    (_, (shape, scale)) = rec.calls[0]
    p_n = p + z.T @ z
    m_n = np.linalg.solve(p_n, p @ m + z.T @ y)
    differences = []
    for _ in range(6):
        beta, tau = rng.normal(size=3), rng.gamma(2.0, 0.7)
        log_post = stats.gamma.logpdf(tau, shape, scale=scale) + stats.multivariate_normal.logpdf(
            beta, m_n, np.linalg.inv(p_n) / tau
        )
        log_prior = stats.gamma.logpdf(tau, a, scale=1 / b) + stats.multivariate_normal.logpdf(
            beta, m, np.linalg.inv(p) / tau
        )
        log_lik = stats.norm.logpdf(y, z @ beta, 1 / math.sqrt(tau)).sum()
        differences.append(log_post - log_prior - log_lik)
    _assert_constant(differences, "normal-gamma")


def test_normal_mean_and_wishart_moments():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(8, 2)) + [1.0, -1.0]
    phi = np.array([[1.5, 0.3], [0.3, 0.7]])
    m, p = np.array([0.5, 0.2]), np.diag([2.0, 3.0])
    draws = np.array([conjugate.normal_mean(rng, x, phi, m, p) for _ in range(20000)])
    p_n = p + len(x) * phi
    mean = np.linalg.solve(p_n, p @ m + phi @ x.sum(axis=0))
    cov = np.linalg.inv(p_n)
    z = (draws.mean(axis=0) - mean) / np.sqrt(np.diag(cov) / len(draws))
    assert np.all(np.abs(z) < 4), z
    np.testing.assert_allclose(np.cov(draws.T), cov, rtol=0.05)

    mu, v = np.array([0.9, -1.1]), np.array([[0.5, 0.1], [0.1, 2.0]])
    wishart = np.array([conjugate.wishart_precision(rng, x, mu, 3.0, v) for _ in range(20000)])
    scale = np.linalg.inv(np.linalg.inv(v) + (x - mu).T @ (x - mu))
    df = 3.0 + len(x)
    expected = stats.wishart(df=df, scale=scale)
    var = df * (scale**2 + np.outer(np.diag(scale), np.diag(scale)))
    z = (wishart.mean(axis=0) - expected.mean()) / np.sqrt(var / len(wishart))
    assert np.all(np.abs(z) < 4), z


def test_bartlett_factors_round_trip():
    for scale in (None, np.array([[2.0, 0.4], [0.4, 0.5]])):
        c, z = np.array([2.3, 0.4, 1.1]), np.array([0.3, -1.2, 0.8])
        a = np.diag(np.sqrt(c))
        a[np.tril_indices(3, k=-1)] = z
        chol = (
            np.eye(3)
            if scale is None
            else np.linalg.cholesky(np.pad(scale, ((0, 1), (0, 1))) + np.diag([0, 0, 1.0]))
        )
        phi = chol @ a @ a.T @ chol.T
        c2, z2 = conjugate.bartlett_factors(phi, None if scale is None else chol @ chol.T)
        np.testing.assert_allclose(c2, c)
        np.testing.assert_allclose(z2, z, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# the step
# --------------------------------------------------------------------------------------------------
def bernoulli_model(n, unbounded=False):
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        size = (
            pmdp.SampleSize("n", n_dp=n, mechanism=pmdp.DiscreteLaplace(epsilon=0.3))
            if (unbounded)
            else n
        )
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=size)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=8.4)
    return model


def beta_update(rng, records, values):
    x = records["x"]
    return {"theta": conjugate.beta_binomial(rng, x.sum(), x.shape[0], 2.0, 3.0)}


def test_bounded_bernoulli_matches_enumeration():
    model = bernoulli_model(30)
    step = conjugate.ConjugateGibbs([model["theta"]], beta_update, model=model)
    idata = pmdp.sample(augment="records", model=model, step=step, random_seed=31, **SAMPLE)
    exact = bernoulli_posterior(8.4, pmdp.Laplace(epsilon=1.0), 2.0, 3.0, n=30)
    assert_moments_match(draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta")


def test_unbounded_bernoulli_matches_enumeration():
    model = bernoulli_model(25, unbounded=True)
    step = conjugate.ConjugateGibbs(["theta"], beta_update, model=model)
    idata = pmdp.sample(augment="records", model=model, step=step, random_seed=32, **SAMPLE)
    exact = bernoulli_posterior(
        8.4,
        pmdp.Laplace(epsilon=1.0),
        2.0,
        3.0,
        n_dp=25,
        n_mechanism=pmdp.DiscreteLaplace(epsilon=0.3),
        n_max=400,
    )
    assert_moments_match(draws_of(idata, "theta"), exact["theta_mean"], exact["theta_var"], "theta")
    assert_moments_match(draws_of(idata, "n"), exact["n_mean"], exact["n_var"], "n")


def test_values_are_written_on_the_transformed_scale():
    with pm.Model() as model:
        tau = pm.Gamma("tau", 2.0, 1.0)
        lower = pm.Normal("lower", 0.0, 1.0)
        scale = pm.Uniform("scale", lower=lower, upper=lower + 3.0)
        x = pmdp.Records("x", pm.Normal.dist(0.0, scale / pt.sqrt(tau)), n=5)
        pmdp.PrivatizedSum("s", pt.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), observed=0.2)
    step = conjugate.ConjugateGibbs(
        [tau, lower, scale],
        lambda rng, records, values: {"tau": 2.5, "lower": -1.0, "scale": 0.5},
        model=model,
    )
    point, _ = step.step(model.initial_point())
    assert point["tau_log__"] == pytest.approx(math.log(2.5))
    assert point["lower"] == pytest.approx(-1.0)
    # interval transform with the *new* lower bound: (-1, 2), value 0.5 is the midpoint
    assert point["scale_interval__"] == pytest.approx(0.0, abs=1e-12)


def test_a_bound_from_an_unclaimed_transformed_variable_is_read_on_its_own_scale():
    """``scale``'s upper bound is ``width``, which the step does not claim and which PyMC keeps
    on a log scale: the interval transform takes width itself (here e^1), not its log."""
    with pm.Model() as model:
        width = pm.HalfNormal("width", 2.0)
        scale = pm.Uniform("scale", lower=0.0, upper=width)
        x = pmdp.Records("x", pm.Normal.dist(0.0, scale), n=5)
        pmdp.PrivatizedSum("s", pt.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), observed=0.2)
    step = conjugate.ConjugateGibbs(
        [scale], lambda rng, records, values: {"scale": 0.5}, model=model
    )
    start = {**model.initial_point(), "width_log__": np.asarray(1.0)}
    point, _ = step.step(start)
    upper = math.e
    assert point["scale_interval__"] == pytest.approx(math.log(0.5 / (upper - 0.5)), rel=1e-12)


def test_a_bound_read_through_an_unclaimed_variable_from_a_claimed_one_uses_its_new_value():
    """``tau ~ Uniform(0, scale + 5)`` with ``scale ~ Uniform(lower, lower + 3)``; the step claims
    ``lower`` and ``tau``, not ``scale``. After the step ``scale`` is read at its value variable
    under the *new* lower (-1, the midpoint: 0.5), so tau's upper bound is 5.5."""
    with pm.Model() as model:
        lower = pm.Normal("lower", 0.0, 1.0)
        scale = pm.Uniform("scale", lower=lower, upper=lower + 3.0)
        tau = pm.Uniform("tau", lower=0.0, upper=scale + 5.0)
        x = pmdp.Records("x", pm.Normal.dist(0.0, tau), n=5)
        pmdp.PrivatizedSum("s", pt.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), observed=0.2)
    step = conjugate.ConjugateGibbs(
        [lower, tau], lambda rng, records, values: {"lower": -1.0, "tau": 2.0}, model=model
    )
    start = {**model.initial_point(), "lower": np.asarray(0.5), "scale_interval__": np.asarray(0.0)}
    for _ in range(2):  # the same point each time: nothing random is read
        point, _ = step.step(dict(start))
        assert point["tau_interval__"] == pytest.approx(math.log(2.0 / 3.5), rel=1e-12)


def test_the_tune_stat_follows_each_chains_tuning():
    """PyMC calls ``reset_tuning`` at the start of every chain and ``stop_tuning`` after its tuning
    draws; with ``cores=1`` the chains run one after another through the same step object."""
    model = bernoulli_model(30)
    step = conjugate.ConjugateGibbs(["theta"], beta_update, model=model)
    point = model.initial_point()
    assert step.step(point)[1] == [{"tune": True}]  # a new step tunes
    for _chain in range(2):
        step.reset_tuning()
        assert step.step(point)[1] == [{"tune": True}]
        step.stop_tuning()
        assert step.step(point)[1] == [{"tune": False}]


def test_bad_input():
    model = bernoulli_model(10, unbounded=True)
    with pytest.raises(ValueError, match="reversible-jump"):
        conjugate.ConjugateGibbs([model["n"]], beta_update, model=model)
    with pytest.raises(ValueError, match="not a free random variable"):
        conjugate.ConjugateGibbs(["nope"], beta_update, model=model)
    with pytest.raises(TypeError, match="callable"):
        conjugate.ConjugateGibbs(["theta"], 3, model=model)
    point = model.initial_point()
    wrong_key = conjugate.ConjugateGibbs(["theta"], lambda *a: {"p": 0.5}, model=model)
    with pytest.raises(ValueError, match=r"exactly \['theta'\]; got \['p'\]"):
        wrong_key.step(point)
    not_a_dict = conjugate.ConjugateGibbs(["theta"], lambda *a: [0.5], model=model)
    with pytest.raises(ValueError, match=r"exactly \['theta'\]; got list"):
        not_a_dict.step(point)
    wrong_shape = conjugate.ConjugateGibbs(["theta"], lambda *a: {"theta": [0.5, 0.5]}, model=model)
    with pytest.raises(ValueError, match="shape"):
        wrong_shape.step(point)
    # a vector variable: a shorter vector and a scalar are refused as well as a longer vector
    with pm.Model() as vector_model:
        m = pm.Normal("m", 0.0, 1.0, shape=3)
        x = pmdp.Records("x", pm.Normal.dist(m.sum(), 1.0), n=4)
        pmdp.PrivatizedSum("s", pt.clip(x, -1, 1), pmdp.Laplace(epsilon=1.0), observed=0.2)
    for returned, shape in (([0.1, 0.2], r"\(2,\)"), (0.1, r"\(\)"), ([0.1] * 4, r"\(4,\)")):
        step = conjugate.ConjugateGibbs(["m"], lambda *a, r=returned: {"m": r}, model=vector_model)
        with pytest.raises(ValueError, match=rf"shape {shape} for 'm', the model's variable has"):
            step.step(vector_model.initial_point())


# --------------------------------------------------------------------------------------------------
# the regression workload: Gibbs inside pmdp.sample against the NumPy reference sampler
# --------------------------------------------------------------------------------------------------
def regression_model(release):
    """§7 model with scalar records ``x1``, ``x2 | x1``, ``y | x`` (joint ``x ~ N(mu, Phi^-1)``)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        c1 = pm.ChiSquared("Phi_c1", nu=2)
        c2 = pm.ChiSquared("Phi_c2", nu=1)
        z = pm.Normal("Phi_z", 0.0, 1.0)
        tau = pm.Gamma("tau", alpha=1.0, beta=1.0)
        beta = pm.Normal("beta", 0.0, sigma=1.0 / pt.sqrt(tau), shape=3)
        n = pmdp.SampleSize(
            "n", n_dp=int(release.n_dp), mechanism=pmdp.DiscreteLaplace(epsilon=release.epsilon_n)
        )
        p11, p12, p22 = c1, pt.sqrt(c1) * z, z**2 + c2
        x1 = pmdp.Records("x1", pm.Normal.dist(mu[0], pt.sqrt(p22 / (p11 * p22 - p12**2))), n=n)
        x2 = pmdp.Records(
            "x2", pm.Normal.dist(mu[1] - p12 / p22 * (x1 - mu[0]), 1 / pt.sqrt(p22)), n=n
        )
        y = pmdp.Records(
            "y", pm.Normal.dist(beta[0] + beta[1] * x1 + beta[2] * x2, 1 / pt.sqrt(tau)), n=n
        )
        v1, v2, v = (pt.clip(r, -5, 5) / 5 for r in (x1, x2, y))
        statistic = pt.stack([v, v1 * v, v2 * v, v * v, v1, v2, v1 * v1, v1 * v2, v2 * v2], axis=1)
        pmdp.PrivatizedSum(
            "s",
            statistic,
            pmdp.Laplace(epsilon=release.epsilon_s, sensitivity=9.0),
            observed=release.s_dp,
        )
    return model


@pytest.mark.slow
def test_regression_gibbs_agrees_with_the_reference_sampler():
    release, _ = ref.simulate_reference_release(
        n=200, epsilon_s=5.0, epsilon_n=0.5, random_seed=2024
    )
    model = regression_model(release)
    step = regression_gibbs_step(model)  # the example's step, on the reference's model
    # The plain algorithm on both sides: this checks the conjugate update itself.
    idata = pmdp.sample(
        augment="records",
        model=model,
        step=step,
        draws=6000,
        tune=500,
        chains=1,
        random_seed=9,
        interweave=False,
        progressbar=False,
        compute_convergence_checks=False,
    )
    assert set(idata["posterior"].data_vars) >= {"beta", "tau", "mu", "n"}
    reference = ref.reference_regression_sampler(release, n_iter=6500, random_seed=10)
    posterior = idata["posterior"]
    pairs = {
        f"beta[{j}]": (reference["beta"][500:, j], posterior["beta"].values[..., j])
        for j in range(3)
    }
    pairs.update(
        {f"mu[{j}]": (reference["mu"][500:, j], posterior["mu"].values[..., j]) for j in range(2)}
    )
    pairs["tau"] = (reference["tau"][500:], posterior["tau"].values)
    pairs["n"] = (reference["n"][500:], posterior["n"].values)
    for label, (theirs, ours) in pairs.items():
        theirs, ours = np.asarray(theirs, float)[None, :], np.asarray(ours, float)
        se = math.hypot(
            theirs.std() / math.sqrt(float(az.ess(theirs, method="mean"))),
            ours.std() / math.sqrt(float(az.ess(ours, method="mean"))),
        )
        z = (ours.mean() - theirs.mean()) / se
        assert abs(z) < 4.0, f"{label}: Gibbs {ours.mean():.4f} vs reference {theirs.mean():.4f}"


# --------------------------------------------------------------------------------------------------
# Dirichlet concentrations: independence MH on the sufficient statistic
# --------------------------------------------------------------------------------------------------
def test_dirichlet_gradient_and_hessian_match_finite_differences():
    from pymc_unbounded_dp.conjugate import _dirichlet_gradient_hessian, _dirichlet_log_target

    log_sum, n, a, b = np.array([-40.0, -95.0, -30.0]), 30.0, 1.0, 0.1
    u = np.log([3.0, 0.8, 5.0])
    gradient, hessian = _dirichlet_gradient_hessian(u, log_sum, n, a, b)
    h = 1e-5
    for j in range(3):
        e = np.eye(3)[j] * h
        numeric = (
            _dirichlet_log_target(u + e, log_sum, n, a, b)
            - _dirichlet_log_target(u - e, log_sum, n, a, b)
        ) / (2 * h)
        assert numeric == pytest.approx(gradient[j], rel=1e-6)
        row = (
            _dirichlet_gradient_hessian(u + e, log_sum, n, a, b)[0]
            - _dirichlet_gradient_hessian(u - e, log_sum, n, a, b)[0]
        ) / (2 * h)
        np.testing.assert_allclose(row, hessian[j], rtol=1e-5)


def test_dirichlet_concentration_matches_nuts_on_observed_data():
    """A small data set (n = 25): skewed posterior, where a poor proposal would show."""
    rng = np.random.default_rng(12)
    x = rng.dirichlet([4.0, 1.2, 6.0], size=25)
    with pm.Model():
        alpha = pm.Gamma("alpha", alpha=1.0, beta=0.1, shape=3)
        pm.Dirichlet("x", alpha, observed=x)
        nuts = pm.sample(
            draws=3000,
            tune=1000,
            chains=2,
            cores=1,
            random_seed=13,
            progressbar=False,
            compute_convergence_checks=False,
        )
    reference = np.asarray(nuts["posterior"]["alpha"].values).reshape(-1, 3)
    log_sum, current, draws = np.log(x).sum(axis=0), np.ones(3), []
    for _ in range(6000):
        current = conjugate.dirichlet_concentration(rng, current, log_sum, 25, 1.0, 0.1)
        draws.append(current)
    draws = np.array(draws[500:])
    for j in range(3):
        ours, theirs = draws[None, :, j], reference[None, :, j]
        se = math.hypot(
            ours.std() / math.sqrt(float(az.ess(ours, method="mean"))),
            theirs.std() / math.sqrt(float(az.ess(theirs, method="mean"))),
        )
        assert abs(ours.mean() - theirs.mean()) < 4 * se, (j, ours.mean(), theirs.mean())
        assert ours.std() == pytest.approx(theirs.std(), rel=0.1)


# --------------------------------------------------------------------------------------------------
# exact maps from the generator's draws (fast; the moment tests above need 20,000 draws)
# --------------------------------------------------------------------------------------------------
class _Scripted:
    """A generator stand-in: fixed ``gamma`` / ``chisquare`` draws (recorded), scripted normals
    and uniforms."""

    def __init__(self, gamma=1.0, chisquare=(), normals=(), uniforms=()):
        self._gamma = gamma
        self._chisquare = list(chisquare)
        self._normals = [np.asarray(z, dtype=float) for z in normals]
        self._uniforms = list(uniforms)
        self.calls = []

    def gamma(self, shape, scale=1.0):
        self.calls.append(("gamma", shape, scale))
        return self._gamma

    def chisquare(self, df):
        self.calls.append(("chisquare", df))
        return self._chisquare.pop(0)

    def standard_normal(self, size):
        if size == 0:
            return np.empty(0)
        z = self._normals.pop(0)
        assert z.shape == (size,)
        return z.copy()

    def random(self):
        return self._uniforms.pop(0)


def _affine_map(draw, p):
    """``(centre, A)`` of a draw ``centre + A z`` that is affine in its normals ``z``."""
    centre = draw(np.zeros(p))
    return centre, np.column_stack([draw(e) - centre for e in np.eye(p)])


def test_normal_gamma_and_normal_mean_draw_exactly_from_their_conditionals():
    """``beta | tau`` and ``mu`` as affine maps of the generator's normals: the centre is the
    conditional mean and ``A A'`` the conditional covariance (to 1e-10)."""
    rng = np.random.default_rng(3)
    z = np.column_stack([np.ones(7), rng.normal(size=(7, 2))])
    y = rng.normal(size=7)
    m, p = np.array([0.3, -0.2, 0.1]), np.array([[2.0, 0.3, 0.0], [0.3, 0.5, 0.1], [0.0, 0.1, 1.0]])
    tau = 1.7

    def beta_at(normals):
        scripted = _Scripted(gamma=tau, normals=[normals])
        beta, drawn_tau = conjugate.normal_gamma(scripted, z, y, m, p, 2.0, 1.5)
        assert drawn_tau == tau and scripted.calls[0][0] == "gamma"
        return beta

    p_n = p + z.T @ z
    centre, a = _affine_map(beta_at, 3)
    np.testing.assert_allclose(centre, np.linalg.solve(p_n, p @ m + z.T @ y), rtol=1e-10)
    np.testing.assert_allclose(a @ a.T, np.linalg.inv(tau * p_n), rtol=1e-10, atol=1e-14)

    x = rng.normal(size=(8, 2)) + [1.0, -1.0]
    phi = np.array([[1.5, 0.3], [0.3, 0.7]])
    prior_mean, prior_precision = np.array([0.5, 0.2]), np.array([[2.0, 0.4], [0.4, 3.0]])
    centre, a = _affine_map(
        lambda normals: conjugate.normal_mean(
            _Scripted(normals=[normals]), x, phi, prior_mean, prior_precision
        ),
        2,
    )
    p_n = prior_precision + len(x) * phi
    np.testing.assert_allclose(
        centre, np.linalg.solve(p_n, prior_precision @ prior_mean + phi @ x.sum(axis=0)), rtol=1e-10
    )
    np.testing.assert_allclose(a @ a.T, np.linalg.inv(p_n), rtol=1e-10, atol=1e-14)


def test_wishart_precision_is_the_bartlett_construction():
    """``Phi = L A A' L'`` with ``L = chol((V^-1 + S)^-1)``, ``A_ii^2 ~ chi2(nu + n - i)`` and
    ``A_ij ~ N(0, 1)`` below the diagonal: the degrees of freedom asked of the generator and the
    result, exactly."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 3))
    mean, nu, v = (
        np.array([0.2, -0.1, 0.4]),
        4.0,
        np.array([[0.5, 0.1, 0.0], [0.1, 2.0, 0.3], [0.0, 0.3, 1.0]]),
    )
    c, below = [2.5, 1.5, 0.8], [[0.7], [-0.4, 1.1]]
    scripted = _Scripted(chisquare=c, normals=below)
    phi = conjugate.wishart_precision(scripted, x, mean, nu, v)
    assert scripted.calls == [("chisquare", nu + 6 - i) for i in range(3)]
    a = np.diag(np.sqrt(c))
    a[1, 0], a[2, 0], a[2, 1] = 0.7, -0.4, 1.1
    centred = x - mean
    chol = np.linalg.cholesky(np.linalg.inv(np.linalg.inv(v) + centred.T @ centred))
    np.testing.assert_allclose(phi, chol @ a @ a.T @ chol.T, rtol=1e-10)


DIRICHLET_X = np.random.default_rng(12).dirichlet([4.0, 1.2, 6.0], size=25)


def _dirichlet_log_target(u, a=1.0, b=0.1):
    """``log p(log alpha | x)`` up to a constant, written independently: the records' Dirichlet
    densities, Gamma(a, rate b) priors, the Jacobian of ``u = log alpha``."""
    alpha = np.exp(u)
    return float(
        stats.dirichlet.logpdf(DIRICHLET_X.T, alpha).sum()
        + stats.gamma.logpdf(alpha, a, scale=1 / b).sum()
        + u.sum()
    )


def test_dirichlet_mode_is_the_mode():
    """Newton's method from a far start ends at the mode (scipy's optimum), with the Hessian there."""
    from scipy import optimize

    from pymc_unbounded_dp.conjugate import _dirichlet_gradient_hessian, _dirichlet_mode

    log_sum, n = np.log(DIRICHLET_X).sum(axis=0), 25.0
    mode, hessian = _dirichlet_mode(np.zeros(3), log_sum, n, 1.0, 0.1)
    optimum = optimize.minimize(
        lambda u: -_dirichlet_log_target(u),
        np.log([4.0, 1.2, 6.0]),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000},
    ).x
    np.testing.assert_allclose(mode, optimum, atol=1e-5)
    gradient, expected = _dirichlet_gradient_hessian(mode, log_sum, n, 1.0, 0.1)
    assert np.abs(gradient).max() < 1e-8
    np.testing.assert_allclose(hessian, expected, rtol=1e-12)


@pytest.mark.parametrize("start", [[3.0, -4.0, 2.0], [-8.0, 0.0, 3.0]])
def test_dirichlet_mode_from_where_newtons_step_descends(start):
    """Where the Hessian of the log target is not negative definite Newton's step can point
    downhill; the search takes a gradient step there instead and still ends at the mode."""
    from pymc_unbounded_dp.conjugate import _dirichlet_gradient_hessian, _dirichlet_mode

    log_sum, n = np.log(DIRICHLET_X).sum(axis=0), 25.0
    gradient, hessian = _dirichlet_gradient_hessian(np.array(start), log_sum, n, 1.0, 0.1)
    assert np.linalg.eigvalsh(hessian).max() > 0
    assert gradient @ np.linalg.solve(hessian, gradient) > 0  # u - step would descend
    expected, _ = _dirichlet_mode(np.zeros(3), log_sum, n, 1.0, 0.1)
    mode, _ = _dirichlet_mode(np.array(start), log_sum, n, 1.0, 0.1)
    np.testing.assert_allclose(mode, expected, atol=1e-9)
    assert np.abs(_dirichlet_gradient_hessian(mode, log_sum, n, 1.0, 0.1)[0]).max() < 1e-8


def test_the_mode_search_steps_by_newton_where_it_ascends_else_by_the_scaled_gradient():
    """``u -> u - step``: Newton's ``H^-1 g`` where ``g . H^-1 g <= 0``; else (Hessian not negative
    definite, or singular) ``-g / max(1, max_j |g_j|)``, a gradient step of at most 1."""
    from pymc_unbounded_dp.conjugate import _ascent_step

    g = np.array([0.5, -2.0, 4.0])
    hessian = -np.diag([2.0, 4.0, 8.0])
    np.testing.assert_allclose(_ascent_step(g, hessian), np.linalg.solve(hessian, g), rtol=1e-15)
    for not_negative_definite in (np.diag([2.0, 4.0, 8.0]), np.zeros((3, 3))):
        np.testing.assert_allclose(_ascent_step(g, not_negative_definite), -g / 4.0, rtol=1e-15)
    small = g / 10.0
    np.testing.assert_allclose(_ascent_step(small, np.zeros((3, 3))), -small, rtol=1e-15)
    # Newton's step descends, if only slightly (g . H^-1 g = 0.5): not taken
    e1 = np.array([1.0, 0.0, 0.0])
    np.testing.assert_allclose(_ascent_step(e1, np.diag([2.0, 4.0, 8.0])), -e1, rtol=1e-15)


@pytest.mark.parametrize("chisquare, normals", [(2.0, [1.5, -1.0, 0.8]), (5.0, [-2.0, 0.5, 1.2])])
def test_dirichlet_concentration_is_one_exact_independence_metropolis_hastings_step(
    chisquare, normals
):
    """The proposal ``mode + sqrt(df / chi2) L'^-1 z`` (a multivariate t) and the acceptance by the
    independence MH ratio, computed independently (scipy's Dirichlet, Gamma and multivariate t
    densities): accepted with ``log u`` a hair below the ratio, rejected a hair above. Prior
    shape 1.5: with shape 1 the prior's term ``(a - 1) log alpha`` vanishes."""
    from pymc_unbounded_dp.conjugate import _dirichlet_mode

    log_sum, n, df = np.log(DIRICHLET_X).sum(axis=0), 25, 8.0
    current = np.array([3.0, 1.5, 5.0])
    u = np.log(current)
    mode, hessian = _dirichlet_mode(u.copy(), log_sum, float(n), 1.5, 0.1)
    chol = np.linalg.cholesky(-hessian)
    proposal = mode + math.sqrt(df / chisquare) * np.linalg.solve(chol.T, normals)
    t = stats.multivariate_t(loc=mode, shape=np.linalg.inv(-hessian), df=df)
    ratio = (
        _dirichlet_log_target(proposal, a=1.5)
        - _dirichlet_log_target(u, a=1.5)
        + t.logpdf(u)
        - t.logpdf(proposal)
    )
    assert ratio < -1e-3  # both decisions are possible
    for offset, accepted in ((-1e-6, True), (1e-6, False)):
        scripted = _Scripted(
            chisquare=[chisquare], normals=[normals], uniforms=[math.exp(ratio + offset)]
        )
        new = conjugate.dirichlet_concentration(scripted, current, log_sum, n, 1.5, 0.1, df)
        np.testing.assert_allclose(new, np.exp(proposal) if accepted else current, rtol=1e-10)


def test_building_blocks_defaults_are_the_documented_priors():
    """Each default (``m = 0``, ``P = I``, ``a = b = 1``, ``V = I``, Dirichlet ``Gamma(1, 1)``
    priors and ``df = 8``) gives the draw of the explicit call, from the same scripted draws."""
    rng = np.random.default_rng(6)
    z, y = np.column_stack([np.ones(5), rng.normal(size=5)]), rng.normal(size=5)
    x = rng.normal(size=(6, 2))

    def same(call, explicit, **draws):
        np.testing.assert_array_equal(call(_Scripted(**draws)), explicit(_Scripted(**draws)))

    normals = {"normals": [[0.4, -1.1]], "gamma": 1.3}
    same(
        lambda r: conjugate.normal_gamma(r, z, y)[0],
        lambda r: conjugate.normal_gamma(r, z, y, np.zeros(2), np.eye(2), 1.0, 1.0)[0],
        **normals,
    )
    same(  # each default on its own: a precision given without a mean keeps that precision
        lambda r: conjugate.normal_gamma(r, z, y, prior_precision=4 * np.eye(2))[0],
        lambda r: conjugate.normal_gamma(r, z, y, np.zeros(2), 4 * np.eye(2), 1.0, 1.0)[0],
        **normals,
    )
    rec = _Scripted(**normals)
    conjugate.normal_gamma(rec, z, y)
    explicit = _Scripted(**normals)
    conjugate.normal_gamma(explicit, z, y, np.zeros(2), np.eye(2), 1.0, 1.0)
    assert rec.calls == explicit.calls
    same(
        lambda r: conjugate.normal_mean(r, x, np.eye(2)),
        lambda r: conjugate.normal_mean(r, x, np.eye(2), np.zeros(2), np.eye(2)),
        normals=[[0.4, -1.1]],
    )
    same(
        lambda r: conjugate.wishart_precision(r, x, np.zeros(2), 3.0),
        lambda r: conjugate.wishart_precision(r, x, np.zeros(2), 3.0, np.eye(2)),
        chisquare=[2.0, 1.0],
        normals=[[0.3]],
    )
    log_sum, current = np.log(DIRICHLET_X).sum(axis=0), np.array([3.0, 1.5, 5.0])
    same(
        lambda r: conjugate.dirichlet_concentration(r, current, log_sum, 25),
        lambda r: conjugate.dirichlet_concentration(r, current, log_sum, 25, 1.0, 1.0, 8.0),
        chisquare=[6.0],
        normals=[[0.2, -0.3, 0.1]],
        uniforms=[1e-12],
    )


def test_a_claimed_variable_may_be_given_as_its_value_variable():
    """``vars`` may name a parameter by its (transformed) value variable, as PyMC's steps do: the
    step claims the parameter itself and writes its new value on the transformed scale."""
    model = bernoulli_model(30)
    value = model.rvs_to_values[model["theta"]]
    step = conjugate.ConjugateGibbs(
        [value], lambda rng, records, values: {"theta": 0.25}, model=model
    )
    assert step.vars == [value]
    point, _ = step.step(model.initial_point())
    assert point["theta_logodds__"] == pytest.approx(math.log(0.25 / 0.75), rel=1e-12)
