"""The random-walk kernel of the interweaving move, with no PyMC: stubbed log densities and forced
normals and uniforms, exact acceptance decisions, the full-refresh semantics (the current value is
kept, only proposals are evaluated), and the step-count rule."""

import math

import numba as nb
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
    assert info.accept_probability == 0.0  # a NaN ratio counts as probability 0, like -inf


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
    # 5 d / e = 20 steps cross the posterior; sqrt(4 d / (e r)) = sqrt(320) = 17.9 maximise the
    # effective draws per cost
    assert rw.steps_for(2, 0.5, 50, centred_squared_jump=0.1, relative_cost=0.05) == 18
    assert rw.steps_for(2, 0.5, 50, centred_squared_jump=0.1, relative_cost=0.01) == 20
    # A step moves theta less than its cost buys from the centred step: no move.
    assert rw.steps_for(1, 0.01, 20, centred_squared_jump=1.0, relative_cost=0.05) == 0


def _tune_useless_move(tuner: rw.Tuner, accept_probability: float, iterations: int = 175):
    """Feed ``tuner`` iterations whose move makes tiny jumps while the rest of the iteration
    moves across the posterior (covariance [[4, 1], [1, 1]]); the steps after each window."""
    rng = np.random.default_rng(0)
    chol = np.linalg.cholesky(np.array([[4.0, 1.0], [1.0, 1.0]]))
    previous, steps = np.zeros(2), []
    for t in range(1, iterations + 1):  # windows end at 25, 75, 175
        position = chol @ rng.standard_normal(2)
        info = rw.RWInfo(1, 10, 1e-4, 10 * accept_probability, np.eye(2) * 1e-6)
        tuner.update(position, info, position - previous)
        previous = position
        if t in (25, 75, 175):
            steps.append(tuner.n_steps)
    return steps


def test_tuner_learns_the_covariance_and_turns_a_useless_move_off():
    tuner = rw.Tuner(2, n_steps=10, max_steps=20, relative_cost=1.0)
    # acceptance 0.234: the scale has settled; two such windows in a row turn it off, tuning too
    assert _tune_useless_move(tuner, 0.234) == [10, 0, 0]
    assert tuner.last_window_pays is False
    estimate = tuner.params.chol @ tuner.params.chol.T
    np.testing.assert_allclose(estimate, [[4.0, 1.0], [1.0, 1.0]], rtol=0.35, atol=0.35)
    assert tuner.final_steps() == 0


def test_tuner_keeps_measuring_while_the_scale_is_unsettled_or_the_move_forced():
    # acceptance 0.95 (> SETTLED_ACCEPT): the small starting scale, not the move, may be the reason
    tuner = rw.Tuner(2, n_steps=10, max_steps=20, relative_cost=1.0)
    assert _tune_useless_move(tuner, 0.95) == [10, 10, 10]
    assert tuner.final_steps() == 10 and tuner.last_window_pays is False
    forced = rw.Tuner(2, n_steps=10, max_steps=20, relative_cost=1.0, may_switch_off=False)
    assert _tune_useless_move(forced, 0.234) == [10, 10, 10]
    assert forced.final_steps() == 10


def test_accept_is_strict_and_the_default_is_one_step():
    assert not rw.accept(0.0, 0.0) and not rw.accept(-1.5, -1.5)  # log u < log ratio, strictly
    assert rw.accept(-1.5, -1.5 - 1e-12) and not rw.accept(float("nan"), -50.0)
    state = rw.init(np.zeros(1), quadratic)
    _, info = rw.step(np.random.default_rng(3), state, quadratic, rw.RWParams(np.eye(1), 0.5))
    assert info.proposed == 1
    args = (np.zeros(1), np.ones(1))
    compiled = rw.init_compiled(np.zeros(1), _shifted_quadratic, args)
    _, info = rw.step_compiled(
        np.random.default_rng(3), compiled, _shifted_quadratic, args, rw.RWParams(np.eye(1), 0.5)
    )
    assert info.proposed == 1


def test_accept_probability_is_capped_at_one_for_uphill_proposals():
    # from x = 2 to x = 0 (log ratio +2) then from 0 to 0.5 (log ratio -0.125)
    state = rw.init(np.array([2.0]), quadratic)
    rng = ScriptedRng([[-2.0], [0.5]], [0.999, 0.0])
    state, info = rw.step(rng, state, quadratic, rw.RWParams(np.eye(1), 1.0), n_steps=2)
    assert info.accepted == 2
    assert info.accept_probability == pytest.approx(1.0 + math.exp(-0.125), abs=1e-15)


def test_steps_for_defaults_and_the_cost_rule():
    # defaults: no centred jump, no cost -> always worth it
    assert rw.steps_for(1, 0.5, 20) == 10
    assert rw.steps_for(1, 0.5, 20, centred_squared_jump=1.0) == 10  # relative_cost 0 by default
    # e = 0.5 > PAY_MARGIN * relative_cost * c = 0.2 (but < relative_cost + c): the move pays
    assert rw.PAY_MARGIN == 2.0
    assert rw.steps_for(1, 0.5, 20, centred_squared_jump=1.0, relative_cost=0.1) == 9  # sqrt(80)
    # e = 0.15 > relative_cost * c = 0.1 but < 2 relative_cost * c: not by the margin
    assert rw.steps_for(1, 0.15, 20, centred_squared_jump=1.0, relative_cost=0.1) == 0
    assert rw.steps_for(1, 0.21, 20, centred_squared_jump=1.0, relative_cost=0.1) > 0
    assert rw.steps_for(3, 2.0, 20) == 8  # ceil(15 / 2)
    assert rw.steps_for(3, 0.0, 20) == 0 and rw.steps_for(3, 1e-9, 20) == 20
    # a cost but no centred jump given: c = 0 by default, so any positive jump pays
    assert rw.steps_for(1, 0.05, 20, relative_cost=0.1) == 20
    assert rw.steps_for(1, 0.0, 20, relative_cost=0.1) == 0
    assert rw.steps_for(1, 0.0, 20, centred_squared_jump=1.0) == 0  # no jump: never pays
    # clipped below at one step: a jump of 5 d or more per step, or an infinite one
    assert rw.steps_for(2, 10.0, 20) == 1 and rw.steps_for(2, 20.0, 20) == 1
    assert rw.steps_for(2, math.inf, 20) == 1


class ReferenceTuner:
    """The documented adaptation rule of ``rw.Tuner``, written out independently."""

    def __init__(self, d, n_steps, max_steps, adapt_steps=True, relative_cost=0.0):
        self.d, self.max_steps, self.adapt, self.cost = d, max_steps, adapt_steps, relative_cost
        self.n_steps, self.chosen, self.unpaid, self.off = n_steps, n_steps, 0, False
        self.chol, self.scale = np.eye(d), 0.1 / math.sqrt(d)
        self.window = 25
        self.reset()

    def reset(self):
        self.points, self.steps, self.jumps, self.centred = [], 0, np.zeros((self.d, self.d)), []
        self.probability = 0.0

    def update(self, position, info, centred_jump):
        self.points.append(np.array(position))
        self.steps += info.proposed
        self.jumps += info.jump_outer
        if centred_jump is not None:
            self.centred.append(np.outer(centred_jump, centred_jump))
        self.probability += info.accept_probability
        if info.proposed:  # an iteration without steps leaves the scale alone
            gain = 1.0 / math.sqrt(1.0 + self.steps / info.proposed)
            self.scale *= math.exp(gain * (info.accept_probability / info.proposed - 0.234))
        if len(self.points) == self.window:
            m = len(self.points)
            c = np.cov(np.array(self.points).T, ddof=1).reshape(self.d, self.d)
            c = m / (m + 5) * c + 1e-3 * 5 / (m + 5) * np.eye(self.d)
            chol = np.linalg.cholesky(c)
            self.scale *= math.sqrt(np.sum(self.chol**2) / np.sum(chol**2))
            self.chol = chol
            if self.adapt:
                precision = np.linalg.inv(c)
                e = np.sum(precision * self.jumps) / self.steps
                centred = np.sum(precision * sum(self.centred)) / len(self.centred)
                # a window that pays sets the steps; off for good after two settled windows in a
                # row (acceptance <= 0.6) that do not
                settled = self.probability <= 0.6 * max(self.steps, 1)
                chosen = rw.steps_for(self.d, e, self.max_steps, centred, self.cost)
                if chosen:
                    self.chosen, self.unpaid = chosen, 0
                elif settled:
                    self.unpaid += 1
                self.off = self.unpaid >= 2
                self.n_steps = 0 if self.off else max(self.chosen, 1)
            self.window *= 2
            self.reset()


@pytest.mark.parametrize("adapt_steps", [True, False])
def test_tuner_follows_the_documented_rule_exactly(adapt_steps):
    rng = np.random.default_rng(1)
    d = 2
    tuner = rw.Tuner(d, n_steps=4, max_steps=30, adapt_steps=adapt_steps, relative_cost=0.2)
    reference = ReferenceTuner(d, 4, 30, adapt_steps, 0.2)
    assert tuner.params.scale == pytest.approx(reference.scale, rel=1e-14)
    mix = np.array([[1.5, 0.0], [0.7, 0.4]])
    for it in range(180):  # windows end after 25, 75 and 175 updates
        position = mix @ rng.standard_normal(d) + 3.0
        proposed = int(rng.integers(1, 6)) if it % 7 else 0  # some iterations without steps
        jump = rng.standard_normal(d) * 0.3 * (proposed > 0)
        info = rw.RWInfo(1, proposed, 0.0, float(rng.uniform(0, proposed)), np.outer(jump, jump))
        centred = None if it == 0 else rng.standard_normal(d) * 0.2  # none at the first iteration
        tuner.update(position, info, centred)
        reference.update(position, info, centred)
        np.testing.assert_allclose(
            tuner.params.chol, reference.chol, rtol=1e-10, atol=1e-12, err_msg=f"update {it}"
        )
        assert tuner.params.scale == pytest.approx(reference.scale, rel=1e-10), it
        assert tuner.n_steps == reference.n_steps, it
    assert tuner.final_steps() == ((0 if reference.off else reference.chosen) if adapt_steps else 4)
    assert reference.window == 200  # three windows ended


@pytest.mark.parametrize("spread", [1.0, 10.0])
@pytest.mark.parametrize("margin, pays", [(1.02, True), (0.98, False)])
def test_the_cost_rule_averages_the_centred_jumps_of_the_window(margin, pays, spread):
    # One window of 25 updates, one step each; no centred jump at the first update (as in the
    # sampler), so the centred mean squared jump averages 24 values. The move pays iff
    # e = q > PAY_MARGIN * relative_cost * c = 2 r: q sits 2% above or below it. Both are whitened
    # by the window's precision (about 1 / spread^2), which cancels in the comparison.
    r = 0.3
    for relative_cost in (1.0, None):
        kwargs = {} if relative_cost is None else {"relative_cost": relative_cost}
        tuner = rw.Tuner(1, n_steps=1, max_steps=10**6, **kwargs)
        q = margin * rw.PAY_MARGIN * r
        for it in range(rw.Tuner.first_window):
            info = rw.RWInfo(1, 1, 0.0, 0.234, np.array([[q]]))
            centred = None if it == 0 else np.array([r**0.5])
            tuner.update(np.array([spread * (-1.0) ** it]), info, centred)
        # the default relative cost is 0: every move with a positive jump pays
        assert tuner.last_window_pays == (pays or relative_cost is None), relative_cost


def _window_precision(positions):
    """The precision the tuner whitens with at the end of a one-dimensional window."""
    m = len(positions)
    covariance = m / (m + 5.0) * np.var(positions, ddof=1) + 1e-3 * 5.0 / (m + 5.0)
    return 1.0 / covariance


@pytest.mark.parametrize(
    "steps_at, jump, cost, centred_at, expected",
    [
        ({7}, 0.5, 1.0, set(), "ceil"),  # no centred jump: c = 0, a positive jump pays
        ({7}, 0.5, None, set(), "ceil"),  # ... and without a cost, 5 d / e steps (e over 1 step)
        ({7}, 0.0, None, set(), 0),  # no accepted jump: never pays
        ({7}, 0.0, None, set(range(1, 25)), 0),  # ... also under the default cost 0
        (set(), 0.0, None, set(), 0),  # no step at all in the window
        ({7}, 0.5, 1.0, {3}, 0),  # one centred jump, c = 1.5 e: does not pay
        ({7}, 0.5, 0.4, {3}, 0),  # e = c / 1.5 > 0.4 c, but not by the margin of 2
    ],
    ids=[
        "no-centred-jump",
        "no-centred-jump-no-cost",
        "no-jump",
        "no-jump-default-cost",
        "no-step",
        "one-centred-jump",
        "within-the-margin",
    ],
)
def test_the_tuner_with_few_steps_or_centred_jumps(steps_at, jump, cost, centred_at, expected):
    """``Tuner.update``'s ``centred_jump`` is optional and an iteration may make no step: the
    window's mean squared jumps are over the steps made and the centred jumps given (here at most
    one of each; none counts as 0)."""
    positions = [1.0 + 0.5 * (-1.0) ** it + 0.01 * it for it in range(rw.Tuner.first_window)]
    tuner = rw.Tuner(
        1, n_steps=1, max_steps=10**6, **({} if cost is None else {"relative_cost": cost})
    )
    centred = math.sqrt(0.75)  # squared: 1.5 times the jump 0.5
    for it, position in enumerate(positions):
        proposed = int(it in steps_at)
        info = rw.RWInfo(proposed, proposed, 0.0, 0.234 * proposed, np.array([[jump * proposed]]))
        tuner.update(np.array([position]), info, np.array([centred]) if it in centred_at else None)
    e = _window_precision(positions) * jump  # over one step
    if expected == "ceil":  # the fewer of the crossing steps 5 d / e and sqrt(4 d / (e cost))
        expected = math.ceil(5.0 / e)
        if cost is not None:
            expected = min(expected, math.ceil(math.sqrt(4.0 / (e * cost))))
    # one window that does not pay keeps the starting step (off takes two in a row)
    assert tuner.last_window_pays == (expected != 0)
    assert tuner.final_steps() == (expected or 1)


def test_steps_for_a_nan_jump_is_the_most_steps():
    assert rw.steps_for(2, math.nan, 20) == 20


# --------------------------------------------------------------------------------------------------
# the compiled kernel: all steps of a call in one numba loop, the same chain as `step`
# --------------------------------------------------------------------------------------------------
@nb.njit
def _shifted_quadratic(x, shift, weights):
    """A numba log density in the form PyTensor's ``fn.vm.jit_fn`` has: a tuple of 0-d arrays."""
    return (np.asarray(-0.5 * np.sum(weights * (x - shift) ** 2)),)


def test_compiled_steps_make_the_same_decisions_as_the_python_steps():
    args = (np.array([1.0, -2.0, 0.5]), np.array([1.0, 4.0, 0.25]))
    params = rw.RWParams(np.linalg.cholesky(np.diag([1.0, 0.25, 4.0])), 0.9)

    def python_density(x):
        return float(_shifted_quadratic(x, *args)[0]), None

    compiled_state = rw.init_compiled(np.zeros(3), _shifted_quadratic, args)
    python_state = rw.init(np.zeros(3), python_density)
    for seed in range(3):  # successive calls, each from the state the last one left
        compiled_state, compiled = rw.step_compiled(
            np.random.default_rng(seed), compiled_state, _shifted_quadratic, args, params, 200
        )
        python_state, python = rw.step(
            np.random.default_rng(seed), python_state, python_density, params, 200
        )
        assert 0 < compiled.accepted < 200 and compiled.accepted == python.accepted
        np.testing.assert_allclose(compiled_state.position, python_state.position, rtol=1e-12)
        assert compiled_state.log_density == pytest.approx(python_state.log_density, rel=1e-12)
        for name in ("squared_jump", "accept_probability", "jump_outer"):
            np.testing.assert_allclose(getattr(compiled, name), getattr(python, name), rtol=1e-12)


def test_compiled_steps_reject_nan_and_accept_from_minus_infinity_uniforms():
    @nb.njit
    def nan_beyond_one(x):
        return (np.asarray(np.nan if x[0] > 1.0 else -0.5 * x[0] ** 2),)

    state = rw.init_compiled(np.zeros(1), nan_beyond_one, ())
    # proposals 0 -> 2 (NaN: rejected even with log u = -inf) -> 0.5 (log ratio -0.125 > log 0.5)
    rng = ScriptedRng([[2.0], [0.5]], [0.0, 0.5])
    state, info = rw.step_compiled(rng, state, nan_beyond_one, (), rw.RWParams(np.eye(1), 1.0), 2)
    assert info.accepted == 1 and state.position[0] == 0.5
    assert info.accept_probability == pytest.approx(math.exp(-0.125))


def test_compiled_steps_move_along_the_columns_of_a_triangular_chol():
    """Each compiled step jumps by ``chol @ (scale z)`` with a dense lower-triangular ``chol``
    (``z @ chol``, i.e. ``chol.T z``, differs in both coordinates); every step is accepted at
    ``log u = -inf``."""
    chol = np.array([[2.0, 0.0], [0.5, 1.0]])
    params = rw.RWParams(chol=chol, scale=0.3)
    normals = np.array([[1.0, -0.5], [0.2, 0.7], [-1.5, 0.1]])
    args = (np.zeros(2), np.ones(2))
    state = rw.init_compiled(np.array([0.4, -0.2]), _shifted_quadratic, args)
    rng = ScriptedRng(normals, np.zeros(3))
    state, info = rw.step_compiled(rng, state, _shifted_quadratic, args, params, n_steps=3)
    jumps = (chol @ (0.3 * normals).T).T
    assert info.accepted == 3
    np.testing.assert_allclose(state.position, [0.4, -0.2] + jumps.sum(axis=0), rtol=1e-14)
    np.testing.assert_allclose(info.jump_outer, jumps.T @ jumps, rtol=1e-14)
    assert info.squared_jump == pytest.approx(0.09 * float(np.sum(normals**2)), rel=1e-14)


def test_compiled_steps_leave_the_state_they_start_from_as_it_was():
    """The loop moves its own copy of the position: a caller keeping the old state (to compare,
    or to restart from it) still has it after accepted steps."""
    args = (np.zeros(2), np.ones(2))
    start = rw.init_compiled(np.array([0.4, -0.2]), _shifted_quadratic, args)
    rng = ScriptedRng(np.array([[1.0, -0.5], [0.2, 0.7]]), np.zeros(2))
    state, info = rw.step_compiled(
        rng, start, _shifted_quadratic, args, rw.RWParams(np.eye(2), 0.3), n_steps=2
    )
    assert info.accepted == 2
    assert start.position.tolist() == [0.4, -0.2]
    np.testing.assert_allclose(state.position, [0.76, -0.14], rtol=1e-14)


def test_a_tie_between_log_u_and_the_log_ratio_rejects_in_the_compiled_steps():
    """``log u < log ratio`` strictly, as in :func:`rw.step`: from -1 to 1 under a centred
    quadratic the log ratio is exactly 0, rejected at ``u = 1`` (``log u = 0``) and accepted at
    ``u = 0.5``."""
    args = (np.zeros(1), np.ones(1))
    params = rw.RWParams(np.eye(1), 1.0)
    state = rw.init_compiled(np.array([-1.0]), _shifted_quadratic, args)
    rng = ScriptedRng([[2.0], [2.0]], [1.0, 0.5])
    state, info = rw.step_compiled(rng, state, _shifted_quadratic, args, params, n_steps=2)
    assert info.accepted == 1 and state.position.tolist() == [1.0]
    assert info.accept_probability == 2.0


def test_a_window_at_exactly_the_settled_acceptance_counts_as_settled():
    """Mean acceptance probability exactly ``SETTLED_ACCEPT`` (0.6: 6.0 per 10 steps, sums exact in
    floating point) is "at most" it: two such windows of a useless move switch it off."""
    assert 0.6 * 250 == 25 * 6.0 and 0.6 * 500 == 50 * 6.0  # the sums compared, exactly equal
    tuner = rw.Tuner(2, n_steps=10, max_steps=20, relative_cost=1.0)
    assert _tune_useless_move(tuner, rw.SETTLED_ACCEPT, iterations=75) == [10, 0]
    assert tuner.final_steps() == 0


def test_a_paying_window_resets_the_count_of_unpaid_windows():
    """Windows that do not pay, pay, do not pay (all settled): the unpaid ones are not consecutive,
    so the move stays on with the paying window's steps (``UNPAID_WINDOWS = 2`` in a row switch
    it off)."""
    rng = np.random.default_rng(4)
    covariance = np.array([[4.0, 1.0], [1.0, 1.0]])
    chol = np.linalg.cholesky(covariance)
    tuner = rw.Tuner(2, n_steps=3, max_steps=50, relative_cost=0.05)
    previous, steps, verdicts = np.zeros(2), [], []
    for t in range(1, 176):  # windows end at 25, 75, 175
        position = chol @ rng.standard_normal(2)
        # whitened squared jump per step ~1 in the second window (it pays: > 2 * 0.05 * ~4, the
        # centred jump), ~1e-6 in the others
        jump_outer = 5.0 * covariance if 25 < t <= 75 else np.eye(2) * 1e-6
        tuner.update(position, rw.RWInfo(1, 10, 0.0, 10 * 0.234, jump_outer), position - previous)
        previous = position
        if t in (25, 75, 175):
            steps.append(tuner.n_steps)
            verdicts.append(tuner.last_window_pays)
    assert verdicts == [False, True, False]
    assert steps[0] == 3 and steps[1] > 0 and steps[2] == steps[1]
    assert tuner.final_steps() == steps[1]


def test_a_tuner_before_its_first_window_keeps_its_starting_steps():
    """Tuning shorter than the first window (25 iterations): the draws use the starting steps."""
    tuner = rw.Tuner(2, n_steps=7, max_steps=20, relative_cost=1.0)
    assert tuner.final_steps() == 7
    for _ in range(rw.Tuner.first_window - 1):
        tuner.update(np.zeros(2), rw.RWInfo(0, 7, 0.0, 7 * 0.234, np.zeros((2, 2))))
    assert tuner.final_steps() == 7 and tuner.n_steps == 7 and tuner.last_window_pays is None


def _one_step_windows(accept_probability: float, windows: int = 2) -> rw.Tuner:
    """A tuner fed windows in which the move makes a single step (iteration 3 of each window),
    with a negligible jump (it never pays) and the given acceptance probability."""
    tuner = rw.Tuner(1, n_steps=4, max_steps=20, relative_cost=1.0)
    t, length = 0, rw.Tuner.first_window
    for _ in range(windows):
        for it in range(length):
            proposed = int(it == 3)
            info = rw.RWInfo(0, proposed, 0.0, accept_probability * proposed, np.eye(1) * 1e-12)
            tuner.update(np.array([(-1.0) ** t]), info, np.array([1.0]))
            t += 1
        length *= 2
    return tuner


@pytest.mark.parametrize("accept_probability, off", [(0.5, True), (0.9, False)])
def test_a_window_with_a_single_step_is_settled_by_that_steps_acceptance(accept_probability, off):
    """Settled means a mean acceptance probability of at most ``SETTLED_ACCEPT`` (0.6) over the
    window's steps, here one: 0.5 is settled (two such unpaid windows switch the move off), 0.9 is
    not (the move keeps its steps). The window's sum starts from 0."""
    tuner = _one_step_windows(accept_probability)
    assert tuner.last_window_pays is False
    assert tuner.final_steps() == (0 if off else 4)


def test_a_window_that_pays_with_a_single_step_sets_one_step():
    """A whitened jump of 5 d or more per step crosses the posterior in one step: the window pays
    and the move makes exactly one step per iteration from then on."""
    tuner = rw.Tuner(1, n_steps=4, max_steps=20)
    for it in range(rw.Tuner.first_window):
        info = rw.RWInfo(1, 1, 0.0, 0.234, np.eye(1) * 100.0)
        tuner.update(np.array([(-1.0) ** it]), info, None)
    assert rw.steps_for(1, 100.0 * 0.96, 20) == 1  # the window's precision is about 0.96
    assert tuner.last_window_pays is True
    assert tuner.n_steps == 1 and tuner.final_steps() == 1


def test_two_unpaid_windows_after_a_paying_one_switch_the_move_off():
    """Pays, then does not pay twice (settled): the count of unpaid windows restarts at 0 after
    the paying window, so the second unpaid one switches the move off."""
    tuner = rw.Tuner(1, n_steps=4, max_steps=20, relative_cost=1.0)
    t, length, verdicts = 0, rw.Tuner.first_window, []
    for window in range(3):
        for _ in range(length):
            jump = 100.0 if window == 0 else 1e-12
            info = rw.RWInfo(1, 1, 0.0, 0.234, np.eye(1) * jump)
            tuner.update(np.array([(-1.0) ** t]), info, np.array([0.1]))
            t += 1
        length *= 2
        verdicts.append((tuner.last_window_pays, tuner.n_steps))
    assert verdicts[0][0] is True and verdicts[0][1] > 0
    assert verdicts[1] == (False, verdicts[0][1])
    assert verdicts[2] == (False, 0) and tuner.final_steps() == 0
