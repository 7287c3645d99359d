"""Simulation-based calibration (Talts et al. 2018) of the record moves: the refresh and the
birth/death moves over ``n`` of the public kernels (``kernels.init`` / ``kernels.sweep``).

**The sampler under SBC is a kernel-level Gibbs loop**, not ``pm.sample``: each iteration is one
``kernels.sweep`` (refresh of every record, then birth/death moves under unbounded DP) on a plain
``RecordTarget`` bound to the current ``theta``, followed by an exact conjugate draw
``theta | x ~ Beta(2 + sum x, 2 + n - sum x)``. These are the kernels ``pmdp.DataAugmentation``
and ``pmdp.ReversibleJump`` call every iteration (the step's glue around them, and the PyMC
parameter steps, are checked against exact posteriors in ``test_sampling.py`` /
``test_unbounded.py``; the default samplers with interweaving have their own SBC in
``test_interweave.py``). Driving the kernels directly costs microseconds per iteration, which
buys the replications that give the rank test its power: 500 replications x 39 kept draws, where
one ``pm.sample`` per replication took minutes per 100 replications.

Truths are drawn from the prior, data from the model and the mechanisms; the chain starts from an
independent prior draw (never from the truth), and the rank of each truth among the thinned draws
must be uniform (``mcmc_checks.assert_sbc_ranks_uniform``: chi-square of 10 bins, and ``|z| < 3``
for the mean rank and for the spread of the ranks). Measured power of that assertion at 500 x 39
(docs/validation.md): a posterior sd 20% too small is caught with probability 0.98, 20% too large
with probability 0.90.
"""

import numpy as np
from mcmc_checks import assert_sbc_ranks_uniform, sbc_rank
from scipy import special

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import kernels

REPLICATIONS = 500
KEPT = 39  # posterior draws per replication -> ranks 0..39
THIN = 5
BURN_IN = 60
A, B = 2.0, 2.0  # theta ~ Beta(A, B)
N_BOUNDED = 15
N_PRIOR_MEAN = 15.0  # n ~ Poisson(15) under unbounded DP
N_MOVES = 8
S_MECHANISM = pmdp.Laplace(scale=1.5)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)


class BernoulliProposal:
    """``propose(m)``: ``m`` Bernoulli(``theta``) records and their statistic (the record)."""

    def __init__(self, rng):
        self.rng = rng
        self.theta = 0.5

    def __call__(self, m):
        x = (self.rng.random(m) < self.theta).astype(np.int64)
        return [x], x.astype(float)[:, None]

    def reseed(self, seed):
        self.rng = np.random.default_rng(seed)


def log_poisson(values):
    return values * np.log(N_PRIOR_MEAN) - N_PRIOR_MEAN - special.gammaln(values + 1.0)


def gibbs(s_dp, n_dp, rng):
    """Kept ``(theta, n)`` draws of the kernel-level Gibbs loop for one data set."""
    proposal = BernoulliProposal(rng)
    target = kernels.RecordTarget(
        released=np.array([s_dp]),
        noise=kernels.NoiseArrays.of([S_MECHANISM], [1]),
        propose=proposal,
        n_dp=n_dp,
        n_noise=None if n_dp is None else kernels.NoiseArrays.of([N_MECHANISM], [1]),
        log_prior_n=None if n_dp is None else log_poisson,
        reseed=proposal.reseed,
    )
    proposal.theta = rng.beta(A, B)  # start from the prior, independently of the truth
    n0 = N_BOUNDED if n_dp is None else max(int(round(n_dp)), 0)
    state = kernels.init(target, n0, rng)
    theta_draws, n_draws = [], []
    for it in range(BURN_IN + KEPT * THIN):
        state, info = kernels.sweep(target, state, rng, N_MOVES)
        assert info.refresh_proposed == state.n - info.births_accepted + info.deaths_accepted
        ones = int(state.records[0][: state.n].sum())
        proposal.theta = rng.beta(A + ones, B + state.n - ones)
        if it >= BURN_IN and (it - BURN_IN) % THIN == THIN - 1:
            theta_draws.append(proposal.theta)
            n_draws.append(state.n)
    return np.array(theta_draws), np.array(n_draws)


def test_sbc_bounded():
    rng = np.random.default_rng(100)
    ranks = []
    for _ in range(REPLICATIONS):
        theta_true = rng.beta(A, B)
        s_dp = rng.binomial(N_BOUNDED, theta_true) + S_MECHANISM.simulate(random_seed=rng)
        theta, n = gibbs(float(s_dp), None, rng)
        assert theta.shape == (KEPT,) and np.all(n == N_BOUNDED)
        ranks.append(sbc_rank(theta_true, theta, rng))
    assert_sbc_ranks_uniform(np.array(ranks), KEPT + 1, "theta (bounded)")


def test_sbc_unbounded_theta_and_n():
    rng = np.random.default_rng(200)
    theta_ranks, n_ranks = [], []
    for _ in range(REPLICATIONS):
        theta_true, n_true = rng.beta(A, B), rng.poisson(N_PRIOR_MEAN)
        s_dp = rng.binomial(n_true, theta_true) + S_MECHANISM.simulate(random_seed=rng)
        n_dp = n_true + N_MECHANISM.simulate(random_seed=rng)
        theta, n = gibbs(float(s_dp), float(n_dp), rng)
        theta_ranks.append(sbc_rank(theta_true, theta, rng))
        n_ranks.append(sbc_rank(n_true, n, rng))
    assert_sbc_ranks_uniform(np.array(theta_ranks), KEPT + 1, "theta (unbounded)")
    assert_sbc_ranks_uniform(np.array(n_ranks), KEPT + 1, "n")
