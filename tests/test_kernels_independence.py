"""The independence Metropolis kernel (the sums level's parameter move under the normal
approximation) against exact moments, with a proposal that is deliberately off the target."""

from __future__ import annotations

import numpy as np
import pytest
from mcmc_checks import assert_mean_and_spread_match, assert_mean_matches
from scipy import stats

from pymc_unbounded_dp.kernels import independence as kernel

#: A skewed two-dimensional target: x0 ~ Gamma(3, 1) (log scale), x1 | x0 ~ N(x0 / 2, 1).
SHAPE = 3.0


def _log_density(x):
    # x0 is log g with g ~ Gamma(SHAPE, 1): density g^SHAPE e^-g (the Jacobian included)
    return SHAPE * x[0] - np.exp(x[0]) - 0.5 * (x[1] - 0.5 * np.exp(x[0])) ** 2


def _run(proposal, steps=20_000, seed=4, step=kernel.step):
    rng = np.random.default_rng(seed)
    state = kernel.init(np.zeros(2), _log_density)
    draws = []
    for _ in range(steps):
        state, _ = step(rng, state, _log_density, proposal)
        draws.append(state.position.copy())
    return np.array(draws)[None, 1000:]


def _exact():
    g = stats.gamma(SHAPE)
    log_mean, log_var = g.expect(np.log), g.expect(lambda v: np.log(v) ** 2)
    return {
        "x0": (log_mean, log_var - log_mean**2),
        "x1": (g.mean() / 2, 1.0 + g.var() / 4),
    }


def test_the_chain_has_the_target_law_under_an_off_target_proposal():
    """The proposal is off the target's centre and scale: the chain must still have the target's
    mean and variance of each coordinate (checks at 4 Monte Carlo standard errors; measured at
    this seed: mean within 0.01 sd, variance within 1%). Dropping the proposal's density from
    the ratio halves the variances (ratio 0.51 and 0.58, mean shifts 0.14 and 0.10 sd), which
    the test below shows is caught."""
    exact = _exact()
    proposal = kernel.Proposal(np.array([1.3, 0.8]), np.diag([0.9, 1.8]))
    draws = _run(proposal)
    for k, name in enumerate(("x0", "x1")):
        assert_mean_and_spread_match(draws[..., k], *exact[name], f"independence {name}")


def test_dropping_the_proposal_density_is_caught():
    def without_proposal_density(rng, state, log_density, proposal):
        candidate = kernel._draw(rng, proposal)
        log_ratio = log_density(candidate) - state.log_density
        if np.log(rng.random()) < log_ratio:
            return kernel.IndependenceState(candidate, log_density(candidate)), None
        return state, None

    exact = _exact()
    proposal = kernel.Proposal(np.array([1.3, 0.8]), np.diag([0.9, 1.8]))
    draws = _run(proposal, step=without_proposal_density)
    with pytest.raises(AssertionError):
        for k, name in enumerate(("x0", "x1")):
            assert_mean_and_spread_match(draws[..., k], *exact[name], f"wrong {name}")


def test_the_laplace_fit_finds_the_mode_and_curvature_of_a_normal():
    mean, covariance = np.array([0.5, -2.0]), np.array([[2.0, 0.3], [0.3, 0.5]])
    precision = np.linalg.inv(covariance)

    def log_density(x):
        return -0.5 * (x - mean) @ precision @ (x - mean)

    proposal = kernel.laplace_fit(np.zeros(2), log_density)
    np.testing.assert_allclose(proposal.mean, mean, atol=1e-5)
    fitted = proposal.chol @ proposal.chol.T / kernel.INFLATION
    np.testing.assert_allclose(fitted, covariance, rtol=1e-4)


def test_a_target_without_a_mode_is_refused():
    with pytest.raises(ValueError, match="no mode"):
        kernel.laplace_fit(np.zeros(1), lambda x: float(x[0]) ** 2)
    with pytest.raises(ValueError, match="no mode"):  # flat: zero curvature everywhere
        kernel.laplace_fit(np.zeros(2), lambda x: 0.0)


def test_the_acceptance_stat_is_the_acceptance_probability():
    """``info.acceptance`` is ``min(1, ratio)``: within [0, 1], and its mean is the fraction of
    moves accepted (both estimate the same probability; 19,000 moves, 4 standard errors)."""
    rng = np.random.default_rng(7)
    proposal = kernel.Proposal(np.array([1.3, 0.8]), np.diag([0.9, 1.8]))
    state = kernel.init(np.zeros(2), _log_density)
    infos = []
    for _ in range(20_000):
        state, info = kernel.step(rng, state, _log_density, proposal)
        infos.append(info)
    probability = np.array([i.acceptance for i in infos[1000:]])
    accepted = np.array([i.accepted for i in infos[1000:]], dtype=float)
    assert probability.min() >= 0.0 and probability.max() <= 1.0
    assert 0.2 < probability.mean() < 0.9  # an off-target proposal: the ratio matters
    assert_mean_matches(accepted[None, :], probability.mean(), "acceptance stat vs accepted")


def test_a_flat_direction_is_fitted_wide_not_refused():
    """A mode in one direction and none in the other (a weakly identified parameter): the fit
    keeps the curved direction's scale and makes the flat one wide (curvature floored at 1e-8
    of the largest), instead of refusing the target."""
    proposal = kernel.laplace_fit(np.array([0.5, 0.0]), lambda x: -0.5 * float(x[0]) ** 2)
    covariance = proposal.chol @ proposal.chol.T
    assert proposal.mean[0] == pytest.approx(0.0, abs=1e-4)
    assert covariance[1, 1] > 1e7 * covariance[0, 0] and abs(covariance[0, 1]) < 1e-6


def test_the_step_leaves_a_start_deep_in_the_proposals_tail():
    """A Student-t target (3 degrees of freedom) started at x = 100: the Laplace fit at the mode
    is a t12 of scale ~1, under which the start is e^-28 less likely, relative to the target, than
    the mode, so independence moves alone accept ~1e-12 per move there. The step's random-walk
    moves leave it, and its refits use draws that moved. Checked against the exact CDF at the
    quartiles of the target (indicators: finite variance, unlike the t3's squared draws).

    Power: shown on a branch without the random-walk moves and the refit guard (the step before
    this test): the chain stays at 100, every indicator is 0 or 1, and the check fails.
    """
    import pymc as pm

    import pymc_unbounded_dp as pmdp

    with pm.Model():
        pm.StudentT("x", nu=3.0, mu=0.0, sigma=1.0, initval=100.0)
        step = pmdp.IndependenceMetropolis()
        idata = pm.sample(
            2000,
            tune=500,
            step=step,
            chains=2,
            cores=1,
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    draws = np.asarray(idata.posterior["x"])  # (chain, draw)
    for q in (0.25, 0.5, 0.75):
        at = stats.t.ppf(q, 3.0)
        assert_mean_matches(draws <= at, q, f"t3 P(x <= {at:.2f})")  # its spread is q (1 - q)


@pytest.mark.parametrize("df", [4.0, kernel.DEGREES_OF_FREEDOM])
def test_proposal_draws_have_the_density_of_the_ratio(df):
    """The draws and the density the ratio uses are one multivariate t: for ``d = 3`` the squared
    Mahalanobis distance over ``d`` is F(d, df) (Kolmogorov-Smirnov, 20,000 draws), and
    ``log_proposal`` is the log of that t's density up to a constant (against SciPy's, at
    points in the bulk and in the tails)."""
    rng = np.random.default_rng(11)
    chol = np.array([[1.5, 0.0, 0.0], [0.4, 0.7, 0.0], [-0.3, 0.2, 2.0]])
    proposal = kernel.Proposal(np.array([1.0, -2.0, 0.5]), chol, df)
    draws = np.array([kernel._draw(rng, proposal) for _ in range(20_000)])
    z = np.linalg.solve(chol, (draws - proposal.mean).T)
    assert stats.kstest((z * z).sum(axis=0) / 3, stats.f(3, df).cdf).pvalue > 1e-3
    t = stats.multivariate_t(proposal.mean, chol @ chol.T, df=df)
    points = proposal.mean + np.array([[0.0, 0.0, 0.0], [3.0, -1.0, 2.0], [-20.0, 15.0, 40.0]])
    logs = np.array([kernel.log_proposal(proposal, x) for x in points])
    np.testing.assert_allclose(logs - logs[0], t.logpdf(points) - t.logpdf(points[0]), rtol=1e-10)


def test_a_refit_uses_the_tuning_draws_only_if_enough_distinct_points_were_visited():
    """Two parameters: a stuck chain of 3 distinct points (6 distinct numbers) is not enough for
    moments (2 d + 2 = 6 distinct *points* are), so the step refits at the mode (a Laplace fit of
    the N(0, I) target: location 0); a chain that moved gives the moments of its draws."""
    import pymc as pm

    import pymc_unbounded_dp as pmdp

    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=2)
        step = pmdp.IndependenceMetropolis(refit_interval=6, df=5.0)
    step._dtype = np.float64  # set by the first step
    stuck = [np.array([0.1, 0.2]), np.array([0.3, 0.4]), np.array([0.5, 0.6])] * 20
    step._tuning_draws = list(stuck)
    at_mode = step._fit(np.full(2, 0.3))
    np.testing.assert_allclose(at_mode.mean, [0.0, 0.0], atol=1e-4)
    moved = np.random.default_rng(0).normal([2.0, -1.0], 0.5, (60, 2))
    step._tuning_draws = list(moved)
    from_moments = step._fit(np.zeros(2))
    np.testing.assert_allclose(from_moments.mean, moved[30:].mean(axis=0))
    assert at_mode.df == from_moments.df == 5.0  # the user's df in both fits (default: 12)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"moves": 0}, "moves"),
        ({"random_walk_moves": -1}, "random_walk_moves"),
        ({"refit_interval": 1}, "refit_interval"),
        ({"df": 2.0}, "df"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, name):
    import pymc as pm

    import pymc_unbounded_dp as pmdp

    with pm.Model():
        pm.Normal("x", 0.0, 1.0)
        with pytest.raises(ValueError, match=f"`{name}`"):
            pmdp.IndependenceMetropolis(**kwargs)


def test_moves_per_iteration_by_acceptance_rate():
    """The most effective draws per cost ``p / (2 - p) / (k + 5)``, ``p = 1 - (1 - rate)^k``:
    4 moves at a rate of 0.5 (the docstring's number), 1 at a rate of 1; at low rates the
    optimum is beyond the cap and the cap, 10, is taken (9 would be an off-by-one)."""
    from pymc_unbounded_dp.independence import IndependenceMetropolis

    choose = IndependenceMetropolis._moves_for
    assert choose([0.5]) == 4 and choose([0.4, 0.6]) == 4
    assert choose([1.0]) == 1
    assert choose([0.02]) == 10 and choose([]) == 10 and choose([0.0]) == 10


def test_the_draws_take_their_moves_from_the_last_half_of_tuning_and_the_walk_starts_at_the_optimal_scale():
    """After tuning the moves come from the acceptance of the last half of the tuning
    iterations (0.5 there: 4 moves; 0.02 in the first half would give 10). The random walk
    starts at the optimal scale ``2.38 / sqrt(d)`` for ``d = 4`` parameters."""
    import pymc as pm

    import pymc_unbounded_dp as pmdp

    with pm.Model():
        pm.Normal("x", 0.0, 1.0, shape=4)
        step = pmdp.IndependenceMetropolis()
    assert np.exp(step._walk_log_scale) == pytest.approx(2.38 / 2.0, rel=1e-12)
    step._dtype = np.float64
    step._proposal = kernel.Proposal(np.zeros(4), np.eye(4))
    step._tuning_acceptance = [0.02] * 50 + [0.5] * 50
    step.tune = False
    point = step.astep(pm.blocking.RaveledVars(np.zeros(4), None))
    assert step.moves == 4 and point[1][0]["independence_moves"] == 4
    assert step.walk_moves == 0  # 0.5 >= RANDOM_WALK_OFF: no random-walk moves in the draws
