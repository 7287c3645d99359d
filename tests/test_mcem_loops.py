"""MCEM's pieces that need no model: the simulated-likelihood stage's rule for more replicates,
the option checks, the optimiser and the choice of profiles (``pmdp.mcem``'s modules
``simulated``, ``options``, ``optimise``, ``boundary``)."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_unbounded_dp.mcem.boundary import candidates
from pymc_unbounded_dp.mcem.optimise import BOUNDARY, jacobian, maximise
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


def test_candidates_are_capped_or_weakly_identified_transformed_parameters():
    estimate = np.array([-BOUNDARY, 0.3, 5.0])
    information = np.diag([4.0, 0.5, 4.0])  # the second's standard error is above 1
    found = candidates(estimate, np.zeros(3), information, np.array([True, True, False]))
    assert found == [(0, -1.0), (1, 1.0)]
