"""Bookkeeping a wrong-but-plausible sampler would get wrong while its summaries still look fine.

* every record position is refreshed: the kept records of every position have the exact
  posterior marginal (a frozen position keeps its start value in every draw);
* ``pmdp.mcem`` leaves the user's record containers exactly as it found them (values, not shape);
* a different seed gives different draws (and the same seed the same draws).
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytest
from mcmc_checks import Z_LIMIT, draws_of, mcse_of_mean
from oracles import bernoulli_posterior

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import model_blocks
from pymc_unbounded_dp.mcem import mcem

MECHANISM = pmdp.Laplace(epsilon=1.0)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)
N, S_DP = 20, 7.4
FAST = dict(chains=2, cores=1, progressbar=False, compute_convergence_checks=False)

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")


def bernoulli_model(n_dp=None):
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        n = N if n_dp is None else pmdp.SampleSize("n", n_dp=n_dp, mechanism=N_MECHANISM)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, MECHANISM, observed=S_DP)
    return model


@pytest.fixture(scope="module")
def bounded():
    return bernoulli_model()


# --------------------------------------------------------------------------------------------------
# every position is refreshed
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("interweave", [False, True], ids=["plain", "interweave"])
def test_every_kept_position_has_the_exact_marginal(bounded, interweave):
    """Records are exchangeable a posteriori: ``P(x_i = 1) = E[k] / n`` at every position ``i``.
    Each position's kept draws are checked against it (batch-means z), and each must change during
    the run. A position the sweep never refreshes keeps its start value in every draw (with the
    plain sampler), which fails both checks."""
    idata = pmdp.sample(
        model=bounded,
        random_seed=5,
        draws=1000,
        tune=200,
        keep_records=1,
        interweave=interweave,
        **FAST,
    )
    exact = bernoulli_posterior(S_DP, MECHANISM, 2.0, 3.0, n=N)
    # P(x_i = 1 | s) = E[theta | s] for Bernoulli records (and = E[k | s] / n)
    expected = float(exact["theta_mean"])
    x = np.asarray(idata["imputed_records"]["x"].values, dtype=float)  # (chain, draw, record)
    assert x.shape == (2, 1000, N)
    for i in range(N):
        xi = x[:, :, i]
        changes = int(np.sum(xi[:, 1:] != xi[:, :-1]))
        assert changes > 50, f"record {i} changed {changes} times in 2 x 1000 draws"
        se = mcse_of_mean(xi)
        z = (xi.mean() - expected) / se if se > 0 else np.inf
        assert abs(z) < Z_LIMIT, f"record {i}: P(x = 1) {xi.mean():.3f} vs exact {expected:.3f}"
    # and the kept records are the draw's records: their sum is what the release was compared to
    theta = draws_of(idata, "theta")
    assert theta.shape == (2, 1000)


def test_unbounded_kept_positions_are_exchangeable():
    """Under unbounded DP: every position ``i < n`` of the kept records, over the draws where it
    exists, has ``P(x_i = 1) = E[k / n]`` restricted the same way; in particular the last record
    (and the newborns' slots) are refreshed like the others."""
    model = bernoulli_model(n_dp=20)
    idata = pmdp.sample(
        model=model, random_seed=6, draws=1000, tune=200, keep_records=1, interweave=False, **FAST
    )
    x = np.asarray(idata["imputed_records"]["x"].values, dtype=float)
    n = draws_of(idata, "n").astype(int)
    assert np.array_equal(np.sum(~np.isnan(x), axis=2), n)  # NaN padding beyond n exactly
    pooled = np.nansum(x, axis=2) / np.maximum(n, 1)  # per-draw fraction of ones
    low = int(np.quantile(n, 0.05))
    for i in range(low):  # positions that exist in at least 95% of the draws
        present = n > i
        xi = np.where(present, x[:, :, i], np.nan)
        # compare each position with the pooled fraction in the same draws: same law if exchangeable
        diff = np.where(present, xi - pooled, 0.0)
        se = mcse_of_mean(diff)
        z = diff.mean() / se if se > 0 else np.inf
        assert abs(z) < Z_LIMIT, f"record {i}: mean difference from the pooled fraction z = {z:.1f}"


# --------------------------------------------------------------------------------------------------
# MCEM leaves the containers alone
# --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n_dp", [None, 25], ids=["bounded", "unbounded"])
def test_mcem_restores_the_record_containers_by_value(n_dp):
    """Fill the record container with a pattern MCEM would never impute, fit, and compare values,
    dtype and shape (a shape check passes whether or not the containers are restored)."""
    model = bernoulli_model(n_dp)
    container = model_blocks(model).records[0].data
    shape = container.get_value().shape
    pattern = (np.arange(int(np.prod(shape))) % 3 == 0).astype(container.dtype).reshape(shape)
    container.set_value(pattern.copy())
    before = container.get_value().copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "mcem did not converge", UserWarning)
        fit = mcem(model, random_seed=3, tol=0.05, max_iterations=8, progressbar=False)
    after = container.get_value()
    assert after.dtype == before.dtype and after.shape == before.shape
    np.testing.assert_array_equal(after, before)
    assert 0.0 < fit.estimate["theta"] < 1.0


# --------------------------------------------------------------------------------------------------
# seeds
# --------------------------------------------------------------------------------------------------
def test_a_different_seed_gives_different_draws_and_the_same_seed_the_same():
    model = bernoulli_model(n_dp=20)
    settings = dict(draws=60, tune=20, keep_records=10, **FAST)
    one = pmdp.sample(model=model, random_seed=11, **settings)
    same = pmdp.sample(model=model, random_seed=11, **settings)
    other = pmdp.sample(model=model, random_seed=12, **settings)
    for name in ("theta", "n"):
        np.testing.assert_array_equal(draws_of(one, name), draws_of(same, name))
        assert not np.array_equal(draws_of(one, name), draws_of(other, name)), name
    x_one = np.asarray(one["imputed_records"]["x"].values)
    x_same = np.asarray(same["imputed_records"]["x"].values)
    x_other = np.asarray(other["imputed_records"]["x"].values)
    np.testing.assert_array_equal(x_one, x_same)
    assert x_one.shape != x_other.shape or not np.array_equal(x_one, x_other, equal_nan=True)
    # the two chains of one run differ too (each chain has its own stream)
    theta = draws_of(one, "theta")
    assert not np.array_equal(theta[0], theta[1])


def test_mcem_seed_reproducible_and_seed_dependent(bounded):
    kwargs = dict(tol=0.05, max_iterations=8, progressbar=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "mcem did not converge", UserWarning)
        a = mcem(bounded, random_seed=1, **kwargs)
        b = mcem(bounded, random_seed=1, **kwargs)
        c = mcem(bounded, random_seed=2, **kwargs)
    assert a.estimate["theta"] == b.estimate["theta"]
    assert a.estimate["theta"] != c.estimate["theta"]
