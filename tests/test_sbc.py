"""Simulation-based calibration (Talts et al. 2018) of both plain data-augmentation samplers.

(The default samplers, with the interweaving move, have their own SBC in ``test_interweave.py``.)

Truths are drawn from the prior, data from the model and the mechanisms; the rank of each truth
among (thinned) posterior draws must be uniform. One compiled model and step serve all
replications (observed values change through ``pm.set_data``).
"""

import numpy as np
import pymc as pm
import pytest
from mcmc_checks import sbc_rank, sbc_ranks_uniform

import pymc_unbounded_dp as pmdp

REPLICATIONS = 120
KEPT = 99  # posterior draws per replication -> ranks 0..99
THIN = 3
S_MECHANISM = pmdp.Laplace(scale=1.5)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)


def run(step, seed):
    idata = pm.sample(draws=KEPT * THIN, tune=200, chains=1, step=step, random_seed=seed,
                      progressbar=False, compute_convergence_checks=False)
    return idata["posterior"]


@pytest.mark.slow
def test_sbc_bounded():
    rng = np.random.default_rng(100)
    with pm.Model():
        s_observed = pm.Data("s_observed", 0.0)
        theta = pm.Beta("theta", 2, 2)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=15)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=s_observed)
        step = pmdp.DataAugmentation(interweave=False)
        ranks = []
        for rep in range(REPLICATIONS):
            theta_true = rng.beta(2, 2)
            s_dp = rng.binomial(15, theta_true) + S_MECHANISM.simulate(random_seed=rng)
            pm.set_data({"s_observed": s_dp})
            draws = run(step, rep)["theta"].values[0, ::THIN]
            ranks.append(sbc_rank(theta_true, draws, rng))
    assert sbc_ranks_uniform(np.array(ranks), KEPT + 1) > 1e-3


@pytest.mark.slow
def test_sbc_unbounded_theta_and_n():
    rng = np.random.default_rng(200)
    with pm.Model():
        s_observed = pm.Data("s_observed", 0.0)
        n_observed = pm.Data("n_observed", 15)
        theta = pm.Beta("theta", 2, 2)
        n = pmdp.SampleSize("n", n_dp=n_observed, mechanism=N_MECHANISM, prior=pm.Poisson.dist(15))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=s_observed)
        step = pmdp.ReversibleJump(n_moves=8, interweave=False)
        theta_ranks, n_ranks = [], []
        for rep in range(REPLICATIONS):
            theta_true, n_true = rng.beta(2, 2), rng.poisson(15)
            s_dp = rng.binomial(n_true, theta_true) + S_MECHANISM.simulate(random_seed=rng)
            n_dp = n_true + N_MECHANISM.simulate(random_seed=rng)
            pm.set_data({"s_observed": s_dp, "n_observed": n_dp})
            posterior = run(step, rep)
            theta_ranks.append(sbc_rank(theta_true, posterior["theta"].values[0, ::THIN], rng))
            n_ranks.append(sbc_rank(n_true, posterior["n"].values[0, ::THIN], rng))
    assert sbc_ranks_uniform(np.array(theta_ranks), KEPT + 1) > 1e-3
    assert sbc_ranks_uniform(np.array(n_ranks), KEPT + 1) > 1e-3
