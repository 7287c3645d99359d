"""The moments of floored log-shares of a Dirichlet record (:mod:`pymc_unbounded_dp.dirichlet_moments`),
the sums level's normal approximation for ATUS-like releases, against exact integrals.

The oracle integrates by Gauss--Jacobi rules in the records' own scale (each Beta density's
endpoint singularity in the rule's weight, the floor's kink at a piece boundary), with no
digamma, trigamma or Laguerre rule: accurate to ~1e-12. Resolution: the checks hold at 1e-7 of
the covariance's scale. Plausible slips, each run once against this file: dropping ``E[h_i h_j]``
(both shares below their floors) moves a covariance by 2.5 at the first setting (caught); using
``psi(alpha_0)`` for ``psi(alpha_0 - alpha_j)`` in ``E[log x_i | x_j]`` moves one by 0.7 there and
by 5e-5 at the ATUS setting (both caught).
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from scipy import special

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.moments import integration_error, moment_function, record_moments

#: The statistics' extra coordinate: an affine combination of the floored logs.
COMBINATION = (2.0, 0.0, -1.0)


def _model(alpha: np.ndarray, floor: float, extra: bool = True, statistic=None) -> pm.Model:
    k = len(alpha)
    with pm.Model() as model:
        concentration = pm.Gamma("alpha", 1.0, 0.1, shape=k)
        x = pmdp.Records("x", pm.Dirichlet.dist(concentration), n=100)
        z = pt.log(pt.clip(x, floor, 1.0)) if statistic is None else statistic(x)
        columns = [z]
        if extra:
            columns.append((pt.dot(z[:, :3], np.array(COMBINATION)) + 1.0)[:, None])
        t = pt.concatenate(columns, axis=1)
        sensitivity = -2.0 * k * np.log(floor) + 1.0
        pmdp.PrivatizedSum(
            "s",
            t,
            pmdp.Laplace(epsilon=1.0, sensitivity=sensitivity),
            observed=np.zeros(k + extra),
            check_sensitivity=False,
        )
    return model


def _rule(low, high, power_low, power_high, points=80):
    """Gauss--Jacobi nodes and weights of ``int_low^high g(x) (x - low)^power_low (high -
    x)^power_high dx`` (``low``, ``high``: arrays of one shape; a trailing node axis is added),
    exact for polynomial ``g`` whatever the endpoint singularities."""
    t, w = special.roots_jacobi(points, power_high, power_low)
    low, high = np.asarray(low, dtype=float)[..., None], np.asarray(high, dtype=float)[..., None]
    half = 0.5 * (high - low)
    return low + half * (1.0 + t), w * half ** (1.0 + power_low + power_high)


def _beta_nodes(a, b, floor, tops=None):
    """Nodes and probability weights of ``Beta(a, b)`` on ``[0, c]``, pieces of ``[c, 1 - c]``
    and ``[1 - c, 1]``, ``c`` the floor: the density's endpoint singularities in the Jacobi
    weights, and a kink at each end of the middle (the floor of ``x_j``, and that of the other
    shares, all below it past ``1 - c``). ``tops``: the points ``1 - c_i`` of the other shares'
    floors, where they differ (default ``1 - c``), each a piece boundary."""
    log_norm = special.betaln(a, b)
    tops = sorted({1.0 - floor} if tops is None else set(tops))
    # geometric pieces in between: x^(a-1) varies on the scale of x itself near the floor
    edges = [*np.geomspace(floor, 0.5, 16), *tops]
    pieces = [
        _rule(0.0, floor, a - 1.0, 0.0),
        *(_rule(lo, hi, 0.0, 0.0) for lo, hi in zip(edges[:-1], edges[1:])),
        _rule(tops[-1], 1.0, 0.0, b - 1.0),
    ]
    x = np.concatenate([p[0] for p in pieces])
    w = np.concatenate([p[1] for p in pieces])
    log_density = np.stack(
        [(b - 1.0) * np.log1p(-x), (a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x)]
    )
    head = len(pieces[0][0])
    tail = len(x) - len(pieces[-1][0])
    exponent = log_density[1].copy()
    exponent[:head] = log_density[0][:head]  # x^(a-1) is in the first piece's weight
    exponent[tail:] = (a - 1.0) * np.log(x[tail:])  # (1-x)^(b-1) in the last piece's
    return x, w * np.exp(exponent - log_norm)


def _oracle(alpha: np.ndarray, floor):
    """Exact mean, covariance and third absolute central moments of ``z_j = log(max(x_j,
    floor))``, ``x ~ Dirichlet(alpha)``, by Gauss--Jacobi rules in the records' own scale:
    ``x_j`` on its Beta marginal, and ``x_i = (1 - x_j) B`` with ``B ~ Beta(alpha_i, alpha_0 -
    alpha_i - alpha_j)`` independent of ``x_j`` (``x_i = 1 - x_j`` with two shares)."""
    return _oracle_moments(alpha, floor)[:3]


def _oracle_moments(alpha: np.ndarray, floor):
    """:func:`_oracle`'s moments and the fourth central ones, for a floor (``floor``) or one
    floor per share (an array)."""
    total, k = alpha.sum(), len(alpha)
    floors = np.broadcast_to(np.asarray(floor, dtype=float), (k,))
    nodes = [
        _beta_nodes(
            alpha[j], total - alpha[j], floors[j], [1.0 - floors[i] for i in range(k) if i != j]
        )
        for j in range(k)
    ]
    mean = np.array([np.sum(w * np.log(np.maximum(x, c))) for (x, w), c in zip(nodes, floors)])
    cov, third, fourth = np.zeros((k, k)), np.zeros(k), np.zeros(k)
    for j, (x, w) in enumerate(nodes):
        z_j = np.log(np.maximum(x, floors[j])) - mean[j]
        cov[j, j] = np.sum(w * z_j**2)
        third[j] = np.sum(w * np.abs(z_j) ** 3)
        fourth[j] = np.sum(w * z_j**4)
        for i in range(j):
            rest = total - alpha[j] - alpha[i]
            if k == 2:
                inner = np.log(np.maximum(1.0 - x, floors[i])) - mean[i]
            else:  # E[z_i - m_i | x_j]: B below c_i / (1 - x_j) gives the floor
                cut = np.minimum(floors[i] / (1.0 - x), 1.0)  # 1: every B gives the floor
                below = special.betainc(alpha[i], rest, cut) * (np.log(floors[i]) - mean[i])
                b, wb = _rule(cut, 1.0, 0.0, rest - 1.0)
                wb = wb * np.exp((alpha[i] - 1.0) * np.log(b) - special.betaln(alpha[i], rest))
                above = np.sum(wb * (np.log((1.0 - x)[..., None] * b) - mean[i]), axis=-1)
                inner = below + above
            cov[i, j] = cov[j, i] = np.sum(w * z_j * inner)
    return mean, cov, third, fourth


SETTINGS = [
    # three shares, two of them often below a wide floor (E[h_i h_j] is not negligible)
    (np.array([0.5, 0.3, 2.0]), 0.05),
    # the ATUS scale: the paper's MLE and a one-minute floor
    (np.array([12.6, 1.59, 17.16]), 1.0 / 1440.0),
]


@pytest.mark.parametrize(("alpha", "floor"), SETTINGS)
def test_floored_log_share_moments_match_exact_integrals(alpha, floor):
    """Mean and covariance of the three floored logs and of an affine combination of them."""
    model = _model(alpha, floor)
    moments = record_moments(compile_model(model).tables[0])
    mean, cov, third = moment_function(moments)(alpha)
    z_mean, z_cov, z_third = _oracle(alpha, floor)
    weights = np.vstack([np.eye(3), np.array(COMBINATION)]).T  # (K, D)
    expected_mean = z_mean @ weights + np.array([0.0, 0.0, 0.0, 1.0])
    expected_cov = weights.T @ z_cov @ weights
    scale = np.max(np.abs(expected_cov))
    np.testing.assert_allclose(mean, expected_mean, rtol=0, atol=1e-7 * np.sqrt(scale))
    np.testing.assert_allclose(cov, expected_cov, rtol=0, atol=1e-7 * scale)
    # the third absolute moment is an upper bound (Lyapunov): above the truth, not far above
    assert np.all(third[:3] >= z_third) and np.all(third[:3] <= 2.5 * z_third)
    # and the combination's is Minkowski's over the coordinates' fourth moments, whatever the
    # signs of the weights: (sum_j |w_j| E[(z_j - m_j)^4]^(1/4))^3
    np.testing.assert_allclose(third[3], (np.abs(COMBINATION) @ np.cbrt(third[:3])) ** 3)
    assert "digamma" in moments.method and "Gauss-Laguerre" in moments.method


@pytest.mark.parametrize(
    "floored",
    [lambda x, c: pt.log(pt.maximum(x, c)), lambda x, c: pt.log(pt.maximum(c, x))],
    ids=["maximum(x, c)", "maximum(c, x)"],
)
def test_a_floor_written_as_a_maximum_is_the_clip_s_floor(floored):
    alpha, floor = SETTINGS[0]
    clipped = moment_function(record_moments(compile_model(_model(alpha, floor)).tables[0]))
    model = _model(alpha, floor, statistic=lambda x: floored(x, floor))
    moments = record_moments(compile_model(model).tables[0])
    assert not isinstance(moments, str), moments
    for got, expected in zip(moment_function(moments)(alpha), clipped(alpha), strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_two_shares_have_no_joint_floor_term():
    """With two shares ``x_1 = 1 - x_2``, both are never below a floor under 1/2 at once."""
    alpha, floor = np.array([0.7, 1.3]), 0.2
    mean, cov, _ = moment_function(
        record_moments(compile_model(_model(alpha, floor, False)).tables[0])
    )(alpha)
    z_mean, z_cov, _ = _oracle(alpha, floor)
    np.testing.assert_allclose(mean, z_mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(cov, z_cov, rtol=0, atol=1e-8)


def test_the_laguerre_rule_error_is_estimated_and_tiny():
    alpha, floor = SETTINGS[0]
    table = compile_model(_model(alpha, floor)).tables[0]
    mean_error, covariance_error = integration_error(table, [alpha])
    assert mean_error < 1e-6 and covariance_error < 1e-6


@pytest.mark.parametrize(
    ("statistic", "phrase"),
    [
        (lambda x: x, "other than through their (floored) logs"),
        (lambda x: pt.log(pt.clip(x, 0.01, 0.9)), "a clamp of the shares below 1"),
        (lambda x: pt.log(pt.clip(x, 0.01, 1.0)) ** 2, "not affine in the logs"),
        (lambda x: pt.log(pt.clip(x, 0.6, 1.0)), "two of them add up to 1 or more"),
    ],
)
def test_statistics_without_a_closed_form_are_named(statistic, phrase):
    model = _model(np.ones(3), 0.01, extra=False, statistic=statistic)
    reason = record_moments(compile_model(model).tables[0])
    assert isinstance(reason, str)
    assert "'x'" in reason and phrase in reason


def test_floors_that_differ_by_share_each_enter_their_own_terms():
    """One floor per share (``clip(x, c, 1)`` with a vector ``c``): each share's floor in its own
    mean and variance terms and in the joint term ``E[h_i h_j]`` (whose inner floor is
    ``c_i / (1 - x_j)``), against the exact integrals; with equal floors any of them would do.
    The third absolute moment's bound is ``E[(z_j - m_j)^4]^(3/4)`` (Lyapunov), whose fourth
    central moment, shifted by the floor's mean, is exact here. A floor as high as 0.12 under
    ``alpha_j = 0.3`` is the Laguerre rule's hardest case: good to ~1e-7 there."""
    alpha, floors = np.array([0.5, 0.3, 2.0]), np.array([0.05, 0.12, 0.02])
    model = _model(alpha, 0.02, statistic=lambda x: pt.log(pt.clip(x, floors, 1.0)))
    moments = record_moments(compile_model(model).tables[0])
    mean, cov, third = moment_function(moments)(alpha)
    z_mean, z_cov, _, z_fourth = _oracle_moments(alpha, floors)
    weights = np.vstack([np.eye(3), np.array(COMBINATION)]).T
    scale = np.max(np.abs(z_cov))
    np.testing.assert_allclose(mean, z_mean @ weights + [0, 0, 0, 1], rtol=0, atol=1e-6)
    np.testing.assert_allclose(cov, weights.T @ z_cov @ weights, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(third[:3], z_fourth**0.75, rtol=1e-5)


@pytest.mark.parametrize(("alpha", "floor"), SETTINGS)
def test_the_third_moment_bound_is_the_exact_fourth_moment_to_the_three_quarters(alpha, floor):
    """Each floored log's bound ``E[(z - m)^4]^(3/4)``: the fourth central moment of the
    floored log (the log-Beta cumulants about the floored mean, plus the floor's correction)
    against the exact integral."""
    moments = record_moments(compile_model(_model(alpha, floor)).tables[0])
    third = moment_function(moments)(alpha)[2]
    np.testing.assert_allclose(third[:3], _oracle_moments(alpha, floor)[3] ** 0.75, rtol=1e-6)


def test_unfloored_log_shares_have_the_log_beta_moments():
    """``log x`` itself (no floor): ``E[log x_j] = psi(alpha_j) - psi(alpha_0)``,
    ``Cov = psi'(alpha_j) [i = j] - psi'(alpha_0)`` and the fourth central moment
    ``k_4 + 3 k_2^2`` from the polygamma cumulants, with no Laguerre rule."""
    alpha = np.array([1.5, 0.7, 3.0])
    model = _model(alpha, 1.0 / 1440.0, statistic=pt.log)
    moments = record_moments(compile_model(model).tables[0])
    assert "Gauss-Laguerre" not in moments.method
    mean, cov, third = moment_function(moments)(alpha)
    total = alpha.sum()
    z_mean = special.digamma(alpha) - special.digamma(total)
    z_cov = np.diag(special.polygamma(1, alpha)) - special.polygamma(1, total)
    k2, k4 = (special.polygamma(k, alpha) - special.polygamma(k, total) for k in (1, 3))
    weights = np.vstack([np.eye(3), np.array(COMBINATION)]).T
    # PyTensor's digamma and trigamma are good to ~1e-9
    np.testing.assert_allclose(mean, z_mean @ weights + [0, 0, 0, 1], rtol=0, atol=1e-8)
    np.testing.assert_allclose(cov, weights.T @ z_cov @ weights, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(third[:3], (k4 + 3.0 * k2**2) ** 0.75, rtol=1e-8)


@pytest.mark.parametrize(
    ("statistic", "phrase"),
    [
        (
            lambda x: pt.log(pt.clip(x, 0.01, np.array([1.0, 1.0, 0.9]))),
            "a clamp of the shares below 1",
        ),
        (
            lambda x: pt.log(pt.clip(x, np.array([0.6, 0.45, 0.01]), 1.0)),
            "two of them add up to 1 or more",
        ),
    ],
    ids=["one-upper-bound-below-1", "two-largest-floors-above-1"],
)
def test_per_share_bounds_are_refused_when_any_share_breaks_the_rule(statistic, phrase):
    """A clamp below 1 on one share only, or two floors adding to 1 or more beside a small
    third (the smallest and largest add to less than 1): refused, naming why."""
    model = _model(np.ones(3), 0.01, extra=False, statistic=statistic)
    reason = record_moments(compile_model(model).tables[0])
    assert isinstance(reason, str)
    assert "'x'" in reason and phrase in reason
