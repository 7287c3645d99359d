"""The random-walk kernel of the interweaving move, with no PyMC: stubbed log densities and forced
normals and uniforms, exact acceptance decisions, the full-refresh semantics (the current value is
kept, only proposals are evaluated), and the step-count rule."""

import math

import numpy as np
import pytest

from pymc_unbounded_dp.kernels import interweave as rw


class ScriptedRng:
    """Returns the given normals and uniforms, in the order ``step`` asks for them."""

    def __init__(self, normals, uniforms):
        self.normals = np.asarray(normals, dtype=float)
        self.uniforms = np.asarray(uniforms, dtype=float)

    def standard_normal(self, shape):
        assert shape == self.normals.shape
        return self.normals

    def random(self, size):
        assert size == self.uniforms.shape[0]
        return self.uniforms


def quadratic(x):
    return -0.5 * float(x @ x), None


@pytest.mark.parametrize("offset, accepted", [(-1e-9, True), (1e-9, False)])
def test_each_step_accepts_exactly_when_log_u_is_below_the_log_ratio(offset, accepted):
    chol = np.array([[2.0, 0.0], [0.5, 1.0]])
    params = rw.RWParams(chol=chol, scale=0.3)
    normals = np.array([[1.0, -0.5], [0.2, 0.7], [-1.5, 0.1]])
    start = np.array([0.4, -0.2])
    # Uniforms that sit just below (accept) or above (reject) each step's exact ratio, computed
    # along the path the kernel must take.
    position, uniforms = start.copy(), []
    for z in normals:
        proposal = position + chol @ (0.3 * z)
        log_ratio = quadratic(proposal)[0] - quadratic(position)[0]
        uniforms.append(math.exp(log_ratio + offset))
        if accepted:
            position = proposal
    state = rw.init(start, quadratic)
    state, info = rw.step(ScriptedRng(normals, uniforms), state, quadratic, params, n_steps=3)
    np.testing.assert_allclose(state.position, position)
    assert info.proposed == 3
    assert info.accepted == (3 if accepted else 0)
    assert state.log_density == pytest.approx(quadratic(state.position)[0])


def test_counts_jumps_and_acceptance_probability():
    params = rw.RWParams(chol=np.eye(1), scale=1.0)
    # Step 1: 0 -> 1 (ratio e^-0.5, u = 0.5 < 0.607: accept); step 2: 1 -> 3 (ratio e^-4, reject).
    rng = ScriptedRng([[1.0], [2.0]], [0.5, 0.5])
    state, info = rw.step(rng, rw.init(np.zeros(1), quadratic), quadratic, params, n_steps=2)
    assert state.position.tolist() == [1.0]
    assert (info.accepted, info.proposed) == (1, 2)
    assert info.squared_jump == pytest.approx(1.0)
    assert info.accept_probability == pytest.approx(math.exp(-0.5) + math.exp(-4.0))
    np.testing.assert_allclose(info.jump_outer, [[1.0]])


def test_nan_and_minus_inf_proposals_are_rejected():
    def log_density(x):
        return (float("nan") if x[0] > 0 else -math.inf), None

    state = rw.RWState(np.zeros(1), 0.0)
    rng = ScriptedRng([[1.0], [-1.0]], [1e-300, 1e-300])
    state, info = rw.step(rng, state, log_density, rw.RWParams(np.eye(1), 1.0), n_steps=2)
    assert info.accepted == 0 and state.position.tolist() == [0.0]


def test_full_refresh_keeps_the_current_value_and_carries_the_accepted_extra():
    """A random log density (the full-refresh move) is only evaluated at proposals; the state keeps
    the value it was accepted with, and the extra (fresh records) that came with it."""
    calls = []

    def noisy(x):
        calls.append(x.copy())
        return -0.5 * float(x @ x) + 0.25, f"records at {x[0]:.1f}"

    state = rw.RWState(np.zeros(1), -0.1, "current records")
    rng = ScriptedRng([[1.0], [1.0]], [0.0, 0.999999])
    state, info = rw.step(rng, state, noisy, rw.RWParams(np.eye(1), 1.0), n_steps=2)
    # Step 1: -0.5 + 0.25 - (-0.1) = -0.15 > log 0 = -inf: accepted. Step 2: 1 -> 2,
    # -2 + 0.25 - (-0.25) = -1.5 < log 0.999999: rejected.
    assert len(calls) == 2
    assert info.accepted == 1
    assert state.extra == "records at 1.0" and state.log_density == pytest.approx(-0.25)


def test_steps_for_crosses_the_posterior_when_the_move_pays():
    assert rw.steps_for(9, 1.5, 20) == 20  # ceil(45 / 1.5) = 30, capped
    assert rw.steps_for(1, 1.0, 20) == 5
    assert rw.steps_for(2, 0.5, 50, centred_squared_jump=0.1, relative_cost=0.05) == 20
    # A step moves theta less than its cost buys from the centred step: no move.
    assert rw.steps_for(1, 0.01, 20, centred_squared_jump=1.0, relative_cost=0.05) == 0


def test_tuner_learns_the_covariance_and_turns_a_useless_move_off():
    rng = np.random.default_rng(0)
    tuner = rw.Tuner(2, n_steps=10, max_steps=20, relative_cost=1.0)
    covariance = np.array([[4.0, 1.0], [1.0, 1.0]])
    chol = np.linalg.cholesky(covariance)
    previous = np.zeros(2)
    for _ in range(175):  # windows end at 25, 75, 175
        position = chol @ rng.standard_normal(2)
        info = rw.RWInfo(1, 10, 1e-4, 2.34, np.eye(2) * 1e-6)  # tiny accepted jumps
        tuner.update(position, info, position - previous)
        previous = position
    estimate = tuner.params.chol @ tuner.params.chol.T
    np.testing.assert_allclose(estimate, covariance, rtol=0.35, atol=0.35)
    assert tuner.final_steps() == 0 and tuner.n_steps == 1  # keeps measuring while tuning
