"""MCEM's pieces that need no model: the simulated-likelihood stage's rule for more replicates,
the option checks, the optimiser, the choice of profiles and Louis' identity (``pmdp.mcem``'s
modules ``simulated``, ``options``, ``optimise``, ``boundary``, ``em``)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_unbounded_dp.mcem.boundary import (
    PROFILE_FRACTIONS,
    PROFILE_TOLERANCE,
    Profile,
    candidates,
    profile,
)
from pymc_unbounded_dp.mcem.em import Information, information, stopping_statistics
from pymc_unbounded_dp.mcem.information import (
    integrated_autocorrelation_time,
    mean_variance,
    missing_information,
)
from pymc_unbounded_dp.mcem.objective import ScaleFunctions, Sets
from pymc_unbounded_dp.mcem.optimise import (
    BOUNDARY,
    Maximum,
    hessian,
    jacobian,
    maximise,
    observed_information,
)
from pymc_unbounded_dp.mcem.options import validated_options
from pymc_unbounded_dp.mcem.result import Convergence
from pymc_unbounded_dp.mcem.simulated import SimulatedState, advance

DEFAULTS = dict(
    initial_samples=10,
    growth=1.25,
    min_samples=100,
    max_samples=5000,
    max_iterations=60,
    tol=0.05,
    patience=3,
    thin=1,
    tune=100,
    n_moves=None,
    switch_rate=0.9,
    replicates=100,
    batches=4,
    max_replicates=3200,
)


@pytest.fixture
def options():
    return validated_options(**DEFAULTS)


def test_advance_stops_below_tol(options):
    state = SimulatedState(np.zeros(2), 100)
    status, after = advance(state, 0.049, np.ones(2), options)
    assert status is Convergence.INTERIOR and after is state


def test_advance_grows_the_replicates_by_the_squared_ratio_from_the_maximiser(options):
    status, after = advance(SimulatedState(np.zeros(2), 100), 0.12, np.ones(2), options)
    assert status is None
    assert after.replicates == 600  # ceil((0.12 / 0.05)^2) = 6
    np.testing.assert_array_equal(after.start, np.ones(2))
    _, doubled = advance(SimulatedState(np.zeros(2), 100), 0.051, np.ones(2), options)
    assert doubled.replicates == 200  # at least twice


def test_advance_caps_the_replicates_then_spends_the_budget(options):
    _, capped = advance(SimulatedState(np.zeros(1), 1000), 1.0, np.ones(1), options)
    assert capped.replicates == options.max_replicates
    status, _ = advance(capped, 1.0, np.ones(1), options)
    assert status is Convergence.BUDGET


def test_advance_retries_an_indefinite_information_once(options):
    status, once = advance(SimulatedState(np.zeros(1), 100), np.nan, np.ones(1), options)
    assert status is None and once.replicates == 400 and once.flat_retries == 1
    status, _ = advance(once, np.inf, np.ones(1), options)
    assert status is Convergence.BUDGET


def test_validated_options_keeps_values_and_names_the_bad_one():
    assert validated_options(**DEFAULTS).batches == 4
    with pytest.raises(ValueError, match="mcem: `batches` must be an integer >= 2"):
        validated_options(**{**DEFAULTS, "batches": 1})
    with pytest.raises(ValueError, match="`max_replicates`=50 is below `replicates`=100"):
        validated_options(**{**DEFAULTS, "max_replicates": 50})


def test_maximise_holds_a_fixed_coordinate_and_caps_transformed_ones():
    def loglik(x):  # increasing in x[0] without bound, maximum at x[1] = 2
        return x[0] - (x[1] - 2.0) ** 2, np.array([1.0, -2.0 * (x[1] - 2.0)])

    best = maximise(loglik, np.zeros(2), np.array([True, False]))
    np.testing.assert_allclose(best.x, [BOUNDARY, 2.0], atol=1e-5)
    held = maximise(loglik, np.array([1.5, 0.0]), np.array([True, False]), fixed=0)
    assert held.x[0] == 1.5
    np.testing.assert_allclose(held.x[1], 2.0, atol=1e-5)


def test_jacobian_of_exp():
    x = np.array([0.0, 1.0])
    np.testing.assert_allclose(jacobian(np.exp, x), np.diag(np.exp(x)), rtol=1e-8)


def test_jacobian_of_a_map_that_mixes_coordinates_is_rows_by_outputs():
    """``J[i, j] = d f_i / d x_j``: a diagonal Jacobian (log, logit) cannot tell its transpose."""
    mixing = np.array([[1.0, 2.0], [0.0, 3.0], [-1.0, 0.5]])
    np.testing.assert_allclose(jacobian(lambda x: mixing @ x, np.array([0.4, -2.0])), mixing)


def test_the_hessian_is_symmetrised():
    """A simulated log-likelihood's gradient differences need not be symmetric (its kinks): the
    Hessian is their symmetric part, here of the (non-gradient) field ``A x``."""
    field = np.array([[-2.0, 1.0], [0.0, -1.0]])
    out = hessian(lambda x: (0.0, field @ x), np.array([0.3, -0.7]), np.array([0.1, 0.2]))
    np.testing.assert_allclose(out, 0.5 * (field + field.T), atol=1e-12)


def test_the_observed_informations_steps_follow_the_standard_error_on_any_scale():
    """A log-likelihood quadratic within one standard error ``sd`` of its maximum and linear
    beyond (as a Laplace term's tails): steps wider than ``sd`` see the slope, not the curvature.
    The steps are taken again until they are half a standard error of the last pass (within
    1.5x), which makes the curvature exact; two passes, the first with steps of 0.1, gave 2x the
    standard error at ``sd = 0.0016``. Steps stay at most 1; a curvature that never settles is
    said."""

    def huber(sd):
        def loglik(x):
            z = x / sd
            inside = np.abs(z) <= 1.0
            value = np.where(inside, -0.5 * z**2, 0.5 - np.abs(z)).sum()
            return float(value), np.where(inside, -z, -np.sign(z)) / sd

        return loglik

    for sd in (0.0016, 0.02, 0.3):
        information = observed_information(huber(sd), np.zeros(1))
        assert float(np.sqrt(1.0 / information[0, 0])) == pytest.approx(sd, rel=1e-9), sd
    flat = observed_information(lambda x: (0.0, np.zeros(1)), np.zeros(1))
    assert flat[0, 0] == 0.0  # steps of 1, no warning (a flat direction)

    def quartic(x):  # curvature h^2 at steps h: the steps swing between 1 and 1/2
        return float(-(x**4).sum() / 4), -(x**3)

    with pytest.warns(UserWarning, match="did not settle within 8 passes"):
        observed_information(quartic, np.zeros(1))


def test_candidates_are_capped_or_weakly_identified_transformed_parameters():
    estimate = np.array([-BOUNDARY, 0.3, 5.0])
    information = np.diag([4.0, 0.5, 4.0])  # the second's standard error is above 1
    found = candidates(estimate, np.zeros(3), information, np.array([True, True, False]))
    assert found == [(0, -1.0), (1, 1.0)]
    # the direction is where the estimate moved: down from 2 to 0.3, though 0.3 is positive
    found = candidates(
        estimate, np.array([0.0, 2.0, 0.0]), information, np.array([True] * 2 + [False])
    )
    assert found == [(0, -1.0), (1, -1.0)]
    # a weakly identified parameter on the real line has no bound to run to
    weak = np.diag([4.0, 4.0, 0.25])
    assert candidates(estimate, np.zeros(3), weak, np.array([True, True, False])) == [(0, -1.0)]


def test_a_profile_increases_only_if_no_step_drops_beyond_the_tolerance():
    points = np.arange(4.0)

    def increasing(values):
        return Profile(0, 1.0, points, np.array(values), []).increasing

    assert increasing([0.0, 0.5, 0.6, 0.6]) and increasing([0.0, -0.5 * PROFILE_TOLERANCE, 1, 2])
    assert not increasing([0.0, 0.5, 0.2, 0.9])  # a rise, then a fall: interior
    assert not increasing([0.0, -2 * PROFILE_TOLERANCE, 1, 2])


def test_a_profile_that_drops_at_the_bound_stops_there_and_one_that_rises_is_traced():
    """The bound is evaluated first: below the estimate, the profile is the estimate and the
    bound (interior); otherwise the profile's points are the fractions of the way there."""
    transformed = np.array([True, False])

    def loglik_with(h, dh):  # h(x[0]) beside a maximum at x[1] = 1
        return lambda x: (h(x[0]) - (x[1] - 1.0) ** 2, np.array([dh(x[0]), -2 * (x[1] - 1.0)]))

    interior = loglik_with(lambda a: -(a**2), lambda a: -2 * a)
    estimate = Maximum(np.array([0.0, 1.0]), 0.0, True, "")
    found = profile(interior, estimate, 0, 1.0, transformed, origin=0.0)
    assert found.points.tolist() == [0.0, BOUNDARY] and not found.increasing
    rising = loglik_with(lambda a: np.tanh(a), lambda a: 1 - np.tanh(a) ** 2)
    found = profile(rising, estimate, 0, 1.0, transformed, origin=-2.0)
    expected = -2.0 + (BOUNDARY + 2.0) * np.array(PROFILE_FRACTIONS)
    np.testing.assert_allclose(found.points, expected)
    np.testing.assert_allclose(found.values, np.tanh(expected), atol=1e-6)
    assert found.increasing


class _NormalMean:
    """The complete-data log-likelihood of records N(mu, 1), averaged over imputed sets."""

    @staticmethod
    def scale(name):
        def value_and_grad(flat, n_values, x):
            residual = x - flat[0]
            return [-0.5 * np.sum(residual**2) / n_values.size, np.array([residual.sum()])]

        def hessian(flat, n_values, x):
            return [np.array([[-x.size / n_values.size]])]

        return ScaleFunctions(value_and_grad, hessian)


def test_the_autocorrelation_time_of_an_ar1_sequence_and_of_white_noise():
    """Geyer's estimate from exact autocovariances: ``(1 + phi) / (1 - phi) = 3`` for an AR(1)
    sequence with ``phi = 1/2``, and 1 for white noise."""
    np.testing.assert_allclose(integrated_autocorrelation_time(0.5 ** np.arange(200)), 3.0)
    assert integrated_autocorrelation_time(np.r_[1.0, np.zeros(99)]) == 1.0


def test_the_missing_fraction_is_the_largest_eigenvalue_of_ic_inverse_times_imiss():
    """With a complete information that is not diagonal (a whitening that is not symmetric)."""
    complete, missing = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([[1.0, 0.2], [0.2, 0.1]])
    expected = np.max(np.linalg.eigvals(np.linalg.solve(complete, missing)).real)
    assert missing_information(complete, missing) == pytest.approx(expected, rel=1e-12)


def test_louis_identity_subtracts_the_variance_of_the_scores_not_their_second_moment():
    """Away from the maximiser the average score is not 0: ``I_obs = I_c - Var[s]``; with
    ``E[s s']`` (the form at the MLE) the observed information here would be 20 - 111.5."""
    n, sets = 20, np.array([[0.3] * 20, [0.35] * 20, [0.25] * 20, [0.4] * 20])
    stacked = Sets([sets.ravel()], np.full(4, n))
    info = information(_NormalMean(), "natural", np.array([-0.2]), stacked)
    scores = (sets + 0.2).sum(axis=1)  # 10, 11, 9, 12
    np.testing.assert_allclose(info.complete, [[n]])
    np.testing.assert_allclose(info.scores[:, 0], scores)
    np.testing.assert_allclose(info.observed, [[n - scores.var()]])  # 20 - 1.25


def test_the_stopping_distance_and_monte_carlo_error_are_in_observed_standard_errors():
    """With half the information missing twice over (I_c = 4, I_obs = 1): the step 0.1
    extrapolates to 0.4 observed standard errors; the maximiser's Monte Carlo error is
    ``sqrt(V) / I_c`` (the M-step solves ``I_c delta = mean score``), not ``sqrt(V) / I_obs``."""
    scores = np.array([[0.5], [-0.2], [0.9], [0.1], [-0.4], [0.3], [0.0], [0.6]])
    info = Information(complete=np.array([[4.0]]), observed=np.array([[1.0]]), scores=scores)
    distance, error = stopping_statistics(info, np.array([0.1]))
    assert distance == pytest.approx(0.4, rel=1e-12)
    assert error == pytest.approx(np.sqrt(mean_variance(scores)[0, 0]) / 4.0, rel=1e-12)


def _direct_mean_variance(rows):
    """``mean_variance`` written out: lag sums, Geyer's pairs up to the first non-positive one,
    made monotone, and ``V_jk = C_jk sqrt(tau_j tau_k) / M``."""
    count = rows.shape[0]
    centred = rows - rows.mean(axis=0)
    taus = []
    for column in centred.T:
        gamma = np.array([column[: count - t] @ column[t:] / count for t in range(count)])
        rho, total, smallest = gamma / gamma[0], 0.0, np.inf
        for m in range(count // 2):
            pair = rho[2 * m] + rho[2 * m + 1]
            if pair <= 0:
                break
            smallest = min(smallest, pair)
            total += smallest
        taus.append(max(1.0, -1.0 + 2.0 * total))
    taus = np.array(taus)
    return (centred.T @ centred / count) * np.sqrt(np.outer(taus, taus)) / count, taus


def test_mean_variance_scales_each_columns_covariance_by_its_own_autocorrelation_time():
    """Two correlated AR(1) columns (phi 0.8 and 0.3) with means 5 and -3, 256 rows (a power of
    two: a transform of length M would wrap the lags around): the Monte Carlo covariance of the
    mean against lag sums written out."""
    rng = np.random.default_rng(11)
    noise = rng.normal(size=(256, 2)) @ np.array([[1.0, 0.6], [0.0, 0.8]])
    rows = np.empty_like(noise)
    rows[0] = noise[0]
    for i in range(1, 256):
        rows[i] = np.array([0.8, 0.3]) * rows[i - 1] + noise[i]
    rows += np.array([5.0, -3.0])
    expected, taus = _direct_mean_variance(rows)
    assert taus[0] > 4.0 and 1.0 < taus[1] < 2.5  # the two columns mix differently
    np.testing.assert_allclose(mean_variance(rows), expected, rtol=1e-10)


def test_the_autocorrelation_time_stops_at_the_first_non_positive_pair_and_never_rises():
    """Geyer's initial monotone sequence by hand. Pairs 1.5, -0.4, 0.6: only the first counts,
    tau = -1 + 2 * 1.5 = 2. Pairs 1.0, 0.5, 0.9, -0.5: the rise to 0.9 is cut to 0.5,
    tau = -1 + 2 * (1.0 + 0.5 + 0.5) = 3."""
    cut = np.array([1.0, 0.5, 0.2, -0.6, 0.3, 0.3])
    assert integrated_autocorrelation_time(4.0 * cut) == pytest.approx(2.0, rel=1e-12)
    rising = np.array([1.0, 0.0, 0.2, 0.3, 0.4, 0.5, -0.6, 0.1])
    assert integrated_autocorrelation_time(rising) == pytest.approx(3.0, rel=1e-12)


def test_inverse_information_is_nan_if_not_positive_definite_and_warns_only_if_asked():
    import warnings

    from pymc_unbounded_dp.mcem.information import inverse_information

    lopsided = np.array([[4.0, 2.0], [0.0, 2.0]])  # symmetrised: [[4, 1], [1, 2]]
    np.testing.assert_allclose(
        inverse_information(lopsided), np.linalg.inv([[4.0, 1.0], [1.0, 2.0]]), rtol=1e-12
    )
    indefinite = np.diag([1.0, -1.0])
    with pytest.warns(UserWarning, match="not positive definite"):
        assert np.all(np.isnan(inverse_information(indefinite)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.all(np.isnan(inverse_information(indefinite, warn=False)))
        inverse_information(np.eye(2), warn=True)  # positive definite: no warning


def test_tune_zero_is_accepted_and_a_negative_tune_is_not():
    assert validated_options(**{**DEFAULTS, "tune": 0}).tune == 0
    with pytest.raises(ValueError, match="`tune`"):
        validated_options(**{**DEFAULTS, "tune": -1})


def test_hessian_steps_are_half_a_standard_error_at_most_one_and_one_in_a_flat_direction():
    from pymc_unbounded_dp.mcem.optimise import hessian_steps

    steps = hessian_steps(np.diag([16.0, 1.0, 0.01, 0.0, -3.0]))
    np.testing.assert_allclose(steps, [0.125, 0.5, 1.0, 1.0, 1.0], rtol=1e-12)


def test_find_profiles_a_weak_parameter_from_where_the_run_started():
    """The estimate moved from -2 to 0 in a transformed coordinate with standard error sqrt(2): it
    is profiled upwards, at the fractions of the way from the start (-2) to the cap."""
    from pymc_unbounded_dp.mcem.boundary import find

    def loglik(x):
        return np.tanh(x[0]) - (x[1] - 1.0) ** 2, np.array(
            [1 - np.tanh(x[0]) ** 2, -2 * (x[1] - 1.0)]
        )

    estimate = Maximum(np.array([0.0, 1.0]), 0.0, True, "")
    found = find(
        loglik, estimate, np.array([-2.0, 1.0]), np.diag([0.5, 2.0]), np.array([True, False])
    )
    assert found is not None and (found.index, found.direction) == (0, 1.0)
    expected = -2.0 + (BOUNDARY + 2.0) * np.array(PROFILE_FRACTIONS)
    np.testing.assert_allclose(found.points, expected, rtol=1e-12)
    np.testing.assert_allclose(found.values, np.tanh(expected), atol=1e-6)


def test_a_boundary_is_named_by_the_natural_element_that_moves():
    """A simplex ``p`` (3 natural elements from 2 unconstrained ones) before ``sigma`` (log): the
    profile of unconstrained coordinate 2 moves natural element 3, ``sigma``, towards 0."""
    from types import SimpleNamespace

    from pymc_unbounded_dp.mcem.boundary import named
    from pymc_unbounded_dp.mcem.objective import Layout

    def to_natural(u):
        e = np.exp([u[0], u[1], 0.0])
        return np.r_[e / e.sum(), np.exp(u[2])]

    objective = SimpleNamespace(
        natural=Layout.of(["p", "sigma"], [(3,), ()]), to_natural=to_natural
    )
    points = np.array([0.0, -10.0, -20.0, -BOUNDARY])
    found = Profile(
        2, -1.0, points, np.array([-5.0, -4.0, -3.5, -3.4]), [np.r_[0.2, -0.1, p] for p in points]
    )
    boundary = named(objective, found, [0.01, 0.02, 0.03, 0.04])
    assert (boundary.parameter, boundary.direction, boundary.limit) == ("sigma", "lower", 0.0)
    np.testing.assert_allclose(boundary.values, np.exp(points), rtol=1e-12)
    np.testing.assert_array_equal(boundary.profile_loglik, found.values)
    np.testing.assert_array_equal(boundary.profile_mc_error, [0.01, 0.02, 0.03, 0.04])
