"""The benchmark workloads, built with the public API and the paper's examples."""

from __future__ import annotations

import numpy as np
import pymc as pm
import r_port as ref

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import atus as _atus
from pymc_unbounded_dp.examples import regression as _regression
from pymc_unbounded_dp.examples.atus import atus_gibbs_step as atus_conjugate_step
from pymc_unbounded_dp.examples.regression import (
    regression_gibbs_step as regression_conjugate_step,
)

__all__ = [
    "atus_conjugate_step",
    "atus_model",
    "bernoulli_model",
    "regression_conjugate_step",
    "regression_model",
    "regression_release",
]


# --------------------------------------------------------------------------------------------------
# linear regression (DESIGN §7)
# --------------------------------------------------------------------------------------------------
def regression_release(
    n: int = 1000, epsilon_s: float = 1.0, epsilon_n: float = 0.5, seed: int = 1
):
    """A simulated release of the §7 data, as the reference sampler's ``ReferenceRelease``."""
    release, truth = ref.simulate_reference_release(
        n=n, epsilon_s=epsilon_s, epsilon_n=epsilon_n, random_seed=seed
    )
    return release, truth


def regression_model(release: ref.ReferenceRelease, bounded_n: int | None = None) -> pm.Model:
    """The §7 model of ``release`` (unbounded DP unless ``bounded_n`` is given)."""
    example = _regression.RegressionRelease(
        values=np.asarray(release.s_dp, dtype=float),
        n_dp=int(release.n_dp),
        epsilon_s=release.epsilon_s,
        epsilon_n=release.epsilon_n,
        n=-1 if bounded_n is None else int(bounded_n),
    )
    return _regression.regression_model(example, bounded=bounded_n is not None)


# --------------------------------------------------------------------------------------------------
# scalar statistic: Bernoulli records
# --------------------------------------------------------------------------------------------------
def bernoulli_model(
    n: int, unbounded: bool = False, epsilon: float = 1.0, seed: int = 0
) -> pm.Model:
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
    """The ATUS model on the real shares (or the simulated stand-in); returns ``(model, source)``."""
    data = _atus.load_atus()
    release = _atus.privatize_atus(data, epsilon_s=epsilon_s, epsilon_n=epsilon_n, seed=seed)
    return _atus.atus_model(release, bounded=bounded), data.source
