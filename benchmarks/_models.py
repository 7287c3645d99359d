"""The benchmark workloads, built with the public API.

The paper's models come from :mod:`pymc_unbounded_dp.examples` when it is importable; otherwise an
equivalent model is built here, so the benchmarks run on any checkout.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import _reference as ref

try:  # the examples module (written concurrently); fall back to the builders below
    from pymc_unbounded_dp.examples import regression as _regression
except ImportError:  # pragma: no cover - depends on the checkout
    _regression = None
try:
    from pymc_unbounded_dp.examples import atus as _atus
except ImportError:  # pragma: no cover
    _atus = None

ATUS_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "atus2019"
ATUS_MIN_SHARE = 1.0 / 1440.0
ATUS_MLE = np.array([12.60, 1.59, 17.16])


# --------------------------------------------------------------------------------------------------
# linear regression (DESIGN §7)
# --------------------------------------------------------------------------------------------------
def regression_release(n: int = 1000, epsilon_s: float = 1.0, epsilon_n: float = 0.5, seed: int = 1):
    """A simulated release of the §7 data, as the reference sampler's ``RegressionRelease``."""
    release, truth = ref.simulate_regression_release(
        n=n, epsilon_s=epsilon_s, epsilon_n=epsilon_n, random_seed=seed
    )
    return release, truth


def regression_model(release: ref.RegressionRelease, bounded_n: int | None = None) -> pm.Model:
    """The §7 model of ``release`` (unbounded DP unless ``bounded_n`` is given)."""
    if _regression is not None:
        example = _regression.RegressionRelease(
            values=np.asarray(release.s_dp, dtype=float), n_dp=int(release.n_dp),
            epsilon_s=release.epsilon_s, epsilon_n=release.epsilon_n,
            n=-1 if bounded_n is None else int(bounded_n),
        )
        return _regression.regression_model(example, bounded=bounded_n is not None)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        c1 = pm.ChiSquared("Phi_c1", nu=2)
        c2 = pm.ChiSquared("Phi_c2", nu=1)
        z = pm.Normal("Phi_z", 0.0, 1.0)
        tau = pm.Gamma("tau", alpha=1.0, beta=1.0)
        beta = pm.Normal("beta", 0.0, sigma=1.0 / pt.sqrt(tau), shape=3)
        if bounded_n is None:
            n = pmdp.SampleSize(
                "n", n_dp=int(release.n_dp), mechanism=pmdp.DiscreteLaplace(epsilon=release.epsilon_n)
            )
        else:
            n = int(bounded_n)
        # x ~ N(mu, Phi^-1) with Phi = A A', A = [[sqrt(c1), 0], [z, sqrt(c2)]], as x1 then x2 | x1
        p11, p12, p22 = c1, pt.sqrt(c1) * z, z**2 + c2
        var1 = p22 / (p11 * p22 - p12**2)
        x1 = pmdp.Records("x1", pm.Normal.dist(mu[0], pt.sqrt(var1)), n=n)
        x2 = pmdp.Records("x2", pm.Normal.dist(mu[1] - p12 / p22 * (x1 - mu[0]), 1 / pt.sqrt(p22)), n=n)
        y = pmdp.Records("y", pm.Normal.dist(beta[0] + beta[1] * x1 + beta[2] * x2, 1 / pt.sqrt(tau)), n=n)
        v1, v2, v = (pt.clip(r, -5, 5) / 5 for r in (x1, x2, y))
        statistic = pt.stack([v, v1 * v, v2 * v, v * v, v1, v2, v1 * v1, v1 * v2, v2 * v2], axis=1)
        pmdp.PrivatizedSum(
            "s", statistic, pmdp.Laplace(epsilon=release.epsilon_s, sensitivity=9.0),
            observed=release.s_dp,
        )
    return model


# --------------------------------------------------------------------------------------------------
# scalar statistic: Bernoulli records
# --------------------------------------------------------------------------------------------------
def bernoulli_model(n: int, unbounded: bool = False, epsilon: float = 1.0, seed: int = 0) -> pm.Model:
    """``theta ~ Beta(2, 3)``, ``x_i ~ Bernoulli(theta)``, ``s = sum x + Laplace(1/epsilon)``."""
    rng = np.random.default_rng(seed)
    s_dp = rng.binomial(n, 0.4) + rng.laplace(0.0, 1.0 / epsilon)
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        size = (
            pmdp.SampleSize("n", n_dp=n, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
            if unbounded
            else n
        )
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=size)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=epsilon), observed=s_dp)
    return model


# --------------------------------------------------------------------------------------------------
# ATUS (DESIGN §7): Dirichlet records, 3-dim log statistic
# --------------------------------------------------------------------------------------------------
def atus_model(bounded: bool, epsilon_s: float = 1.0, epsilon_n: float = 1.0, seed: int = 3):
    """The ATUS model on the real shares (or a simulated stand-in); returns ``(model, source)``."""
    if _atus is not None:
        data = _atus.load_atus()
        release = _atus.privatize_atus(data, epsilon_s=epsilon_s, epsilon_n=epsilon_n, seed=seed)
        return _atus.atus_model(release, bounded=bounded), data.source
    x, source = _load_atus_shares()
    rng = np.random.default_rng(seed)
    sensitivity = -3.0 * math.log(ATUS_MIN_SHARE)
    mechanism = pmdp.Laplace(epsilon=epsilon_s, sensitivity=sensitivity)
    values = np.log(np.maximum(x, ATUS_MIN_SHARE)).sum(axis=0) + mechanism.simulate(3, rng)
    n_mechanism = pmdp.DiscreteLaplace(epsilon=epsilon_n)
    n_dp = len(x) + int(n_mechanism.simulate(random_seed=rng))
    with pm.Model() as model:
        alpha = pm.Gamma("alpha", alpha=1.0, beta=0.1, shape=3)
        n = len(x) if bounded else pmdp.SampleSize("n", n_dp=n_dp, mechanism=n_mechanism)
        records = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=n)
        pmdp.PrivatizedSum(
            "s", pt.log(pt.maximum(records, ATUS_MIN_SHARE)), mechanism, observed=values
        )
    return model, source


def _load_atus_shares() -> tuple[np.ndarray, str]:
    files = [ATUS_DIR / "female.csv", ATUS_DIR / "male.csv"]
    if all(f.is_file() for f in files):
        import pandas as pd

        frames = [pd.read_csv(f, index_col=0) for f in files]
        return pd.concat(frames).to_numpy(dtype=float), str(ATUS_DIR)
    rng = np.random.default_rng(2019)
    x = np.maximum(rng.dirichlet(ATUS_MLE, size=6656), ATUS_MIN_SHARE)
    return x / x.sum(axis=1, keepdims=True), "simulated Dirichlet(12.60, 1.59, 17.16)"


def regression_conjugate_step(model: pm.Model):
    """An exact Gibbs step for all parameters of the §7 model (:mod:`pymc_unbounded_dp.conjugate`).

    ``(beta, tau) | x, y`` normal-gamma, ``mu | x, Phi`` normal, ``Phi | x, mu`` Wishart written
    back as the model's Bartlett pieces ``Phi_c1, Phi_c2, Phi_z``.
    """
    from pymc_unbounded_dp import conjugate

    def update(rng, records, values):
        if "X" in records:
            x = np.asarray(records["X"], dtype=float)
        else:
            x = np.column_stack([records["x1"], records["x2"]])
        y = np.asarray(records["y"], dtype=float)
        beta, tau = conjugate.normal_gamma(rng, np.column_stack([np.ones(len(y)), x]), y)
        a = np.array([[math.sqrt(values["Phi_c1"]), 0.0],
                      [float(values["Phi_z"]), math.sqrt(values["Phi_c2"])]])
        mu = conjugate.normal_mean(rng, x, a @ a.T)
        phi = conjugate.wishart_precision(rng, x, mu, nu=2.0)
        c, z = conjugate.bartlett_factors(phi)
        return {"beta": beta, "tau": tau, "mu": mu, "Phi_c1": c[0], "Phi_c2": c[1], "Phi_z": z[0]}

    names = ["beta", "tau", "mu", "Phi_c1", "Phi_c2", "Phi_z"]
    return conjugate.ConjugateGibbs([model[name] for name in names], update, model=model)


def atus_conjugate_step(model: pm.Model):
    """``alpha | records`` by :func:`pymc_unbounded_dp.conjugate.dirichlet_concentration`."""
    from pymc_unbounded_dp import conjugate

    def update(rng, records, values):
        x = np.asarray(records["x"], dtype=float)
        log_sum = np.log(x).sum(axis=0)
        alpha = conjugate.dirichlet_concentration(rng, values["alpha"], log_sum, len(x), 1.0, 0.1)
        return {"alpha": alpha}

    return conjugate.ConjugateGibbs([model["alpha"]], update, model=model)
