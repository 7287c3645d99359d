r"""The moments of floored log-shares of one Dirichlet record, in closed form up to a 1-D rule.

The sums level's normal approximation needs the mean and covariance of one record's statistic
vector (:mod:`pymc_unbounded_dp.moments`). For a Dirichlet record ``x ~ Dirichlet(alpha)`` whose
statistics are affine in the floored logs ``z_j = log(max(x_j, c_j))`` (the ATUS release, with
``c_j = 1/1440``; ``c_j = 0`` is the plain log), they follow from the log-Beta laws:

* without a floor, ``E[log x_j] = psi(alpha_j) - psi(alpha_0)`` and
  ``Cov(log x_i, log x_j) = psi'(alpha_j) [i = j] - psi'(alpha_0)`` (digamma, trigamma);
* the floor adds ``h_j = max(0, log c_j - log x_j)``, which is non-zero only where
  ``x_j < c_j``. With ``x_j ~ Beta(a, b)``, ``b = alpha_0 - a``, the substitution
  ``x_j = c_j exp(-s / a)`` turns every expectation over ``{x_j < c_j}`` into
  ``c^a / (a B(a, b)) int_0^inf e^{-s} g(s) (1 - c e^{-s/a})^{b-1} ds``, a Gauss--Laguerre
  integral of a smooth function (no singularity left at ``x = 0``);
* a product with another coordinate uses ``x_i = (1 - x_j) B``, ``B ~ Beta(alpha_i, alpha_0 -
  alpha_i - alpha_j)`` independent of ``x_j``, so that ``E[log x_i | x_j]`` is closed form and
  ``E[h_i | x_j]`` is the same 1-D integral with the floor ``c_i / (1 - x_j)``.

The error of the Laguerre rule is estimated like the other rules' (a rule of more points,
:func:`pymc_unbounded_dp.moments.integration_error`). The third absolute central moment (only
for the Berry--Esseen figure) is bounded above by ``E|Y|^3 <= (E Y^4)^{3/4}`` (Lyapunov) and
Minkowski's inequality over the statistic's terms, with the fourth moments from the polygamma
cumulants of the log-Beta law; so the reported figure is an upper bound of the true one.

Example
-------
>>> import numpy as np, pymc as pm, pytensor, pytensor.tensor as pt, pymc_unbounded_dp as pmdp
>>> from pymc_unbounded_dp._compile import compile_model
>>> from pymc_unbounded_dp.moments import record_moments
>>> with pm.Model() as model:
...     alpha = pm.Gamma("alpha", 1.0, 0.1, shape=3)
...     x = pmdp.Records("x", pm.Dirichlet.dist(alpha), n=100)
...     _ = pmdp.PrivatizedSum("s", pt.log(pt.clip(x, 1 / 1440, 1)),
...                            pmdp.Laplace(epsilon=1.0, sensitivity=3 * np.log(1440)),
...                            observed=np.zeros(3))
>>> moments = record_moments(compile_model(model).tables[0])
>>> mean = pytensor.function(moments.inputs, moments.mean)(np.array([12.6, 1.59, 17.16]))
>>> np.round(mean, 4)  # unfloored: digamma(alpha_j) - digamma(alpha_0) = -0.9357, -3.3118, -0.6160
array([-0.9357, -3.3108, -0.616 ])
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytensor.scalar as ps
import pytensor.tensor as pt
from pytensor.graph.basic import Constant
from pytensor.graph.replace import clone_replace
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import DirichletRV

try:  # PyTensor >= 2.31
    from pytensor.graph.traversal import io_toposort
except ImportError:  # pragma: no cover
    from pytensor.graph.basic import io_toposort

from pymc_unbounded_dp._graph import ancestors, polynomial_degree, strip_casts

__all__ = ["LogShares", "is_dirichlet", "log_shares", "log_share_moments"]

#: Gauss--Laguerre points per ``nodes`` of the caller's rule (24 at the default 6).
LAGUERRE_PER_NODE = 4


class LogShares(NamedTuple):
    """The statistics as ``offset + z @ weights``, ``z_j = log(max(x_j, floors_j))``.

    ``weights`` is ``(K, D)``, ``offset`` ``(D,)`` (graphs of the model's parameters in general),
    ``floors`` ``(K,)`` (``0``: no floor).
    """

    weights: pt.TensorVariable
    offset: pt.TensorVariable
    floors: np.ndarray


def is_dirichlet(rv) -> bool:
    """Whether ``rv``'s records are Dirichlet (``pm.Dirichlet`` or a subclass of its op)."""
    return isinstance(rv.owner.op, DirichletRV)


def _constant_array(var) -> np.ndarray | None:
    var = strip_casts(var)
    return np.asarray(var.data, dtype=float) if isinstance(var, Constant) else None


def _floor_of(node, record) -> np.ndarray | str | None:
    """The floor of a ``log(...)`` node's argument in ``record`` (``0.0``: ``log(record)``),
    a reason it is not a floor, or ``None`` when the argument is not the record."""
    argument = node.inputs[0]
    if strip_casts(argument) is record:
        return np.array(0.0)
    owner = argument.owner
    if owner is None or not isinstance(owner.op, Elemwise):
        return None
    scalar = owner.op.scalar_op
    if isinstance(scalar, ps.Clip) and strip_casts(owner.inputs[0]) is record:
        low, high = (_constant_array(i) for i in owner.inputs[1:])
        if low is None or high is None:
            return "a clamp of the shares with bounds that are not constants"
        if np.any(high < 1.0):
            return "a clamp of the shares below 1 (only a floor is integrated)"
        return low
    if isinstance(scalar, ps.Maximum):
        first, second = owner.inputs
        if strip_casts(second) is record:
            first, second = second, first
        floor = _constant_array(second)
        if strip_casts(first) is record and floor is not None:
            return floor
    return None


def log_shares(statistics, record, size: int) -> LogShares | str:
    """``statistics`` (``(rows, D)``) as an affine function of the floored logs of the Dirichlet
    ``record`` (``(rows, size)``), or why they are not one (a short phrase)."""
    logs = [
        node
        for node in io_toposort([record], [statistics])
        if isinstance(node.op, Elemwise) and isinstance(node.op.scalar_op, ps.Log)
    ]
    floors = [(node, _floor_of(node, record)) for node in logs]
    floors = [(node, f) for node, f in floors if f is not None]
    reasons = [f for _, f in floors if isinstance(f, str)]
    if reasons:
        return reasons[0]
    outside = "its statistics use the shares other than through their (floored) logs"
    if not floors:
        return outside
    values = {tuple(np.broadcast_to(f, (size,))) for _, f in floors}
    if len(values) != 1:
        return "its statistics are not affine in one floored log of each share"
    floor = np.array(next(iter(values)))
    if np.any(floor < 0.0) or (size > 1 and np.max(floor) + np.sort(floor)[-2] >= 1.0):
        return "its floors on the shares are negative, or two of them add up to 1 or more"
    variable = record.type()
    replaced = clone_replace(statistics, {node.outputs[0]: variable for node, _ in floors})
    if record in ancestors([replaced]):
        return outside
    degree = polynomial_degree(replaced, variable)
    if degree is None or degree > 1:
        return "its statistics are not affine in the logs of the shares"
    basis = np.vstack([np.zeros(size), np.eye(size)])  # row 0: z = 0, row 1 + k: z = e_k
    at = clone_replace(replaced, {variable: pt.constant(basis, dtype=variable.dtype)})
    offset = at[0]
    return LogShares(weights=at[1:] - offset, offset=offset, floors=floor)


def _below_floor(a, b, floor: float, points: int):
    """The Gauss--Laguerre nodes of ``{x < floor}``, ``x ~ Beta(a, b)``: ``(h, x, weight)`` with
    ``h = log floor - log x`` at each node and ``sum(weight * g(h))`` = ``E[g(h) 1{x < floor}]``.
    ``a``, ``b``, ``floor``: graphs broadcastable against each other (a trailing node axis is
    added)."""
    s, w = np.polynomial.laguerre.laggauss(points)
    a, b, floor = (pt.shape_padright(pt.as_tensor(v, dtype="float64")) for v in (a, b, floor))
    h = s / a
    x = floor * pt.exp(-h)
    log_beta = pt.gammaln(a) + pt.gammaln(b) - pt.gammaln(a + b)
    log_scale = a * pt.log(floor) - pt.log(a) - log_beta
    return h, x, w * pt.exp(log_scale + (b - 1.0) * pt.log1p(-x))


def log_share_moments(alpha, shares: LogShares, nodes: int):
    """The mean ``(D,)``, covariance ``(D, D)`` and an upper bound of the third absolute central
    moment ``(D,)`` of one record's statistics (see the module docstring), as graphs of the
    concentration ``alpha`` (``(K,)``)."""
    points = LAGUERRE_PER_NODE * nodes
    alpha = pt.cast(alpha, "float64")
    size = len(shares.floors)
    total = pt.sum(alpha)
    log_mean = pt.psi(alpha) - pt.psi(total)
    log_cov = pt.diag(pt.tri_gamma(alpha)) - pt.tri_gamma(total)
    mean = [log_mean[j] for j in range(size)]
    second = [[log_cov[i, j] + log_mean[i] * log_mean[j] for j in range(size)] for i in range(size)]
    # the floors' terms: h_j = max(0, log c_j - log x_j), E over {x_j < c_j} by Laguerre nodes
    below = {
        j: _below_floor(alpha[j], total - alpha[j], float(c), points)
        for j, c in enumerate(shares.floors)
        if c > 0.0
    }
    for j, (h, x, weight) in below.items():
        log_x = np.log(shares.floors[j]) - h
        mean[j] = mean[j] + pt.sum(weight * h)
        second[j][j] = second[j][j] + pt.sum(weight * (2.0 * log_x * h + h * h))
        for i in range(size):
            if i == j:
                continue
            rest = total - alpha[j]  # x_i = (1 - x_j) B, B ~ Beta(alpha_i, rest - alpha_i)
            log_x_i = pt.log1p(-x) + pt.psi(alpha[i]) - pt.psi(rest)
            cross = pt.sum(weight * h * log_x_i)  # E[log x_i h_j]
            # E[h_i h_j]: h_i's floor is c_i / (1 - x_j) at each node of x_j; with two shares
            # x_i = 1 - x_j > 1 - c_j >= c_i there, so the term is 0
            if i in below and size > 2:
                inner_h, _, inner_w = _below_floor(
                    alpha[i], rest - alpha[i], shares.floors[i] / (1.0 - x), points
                )
                cross = cross + 0.5 * pt.sum(weight * h * pt.sum(inner_w * inner_h, axis=-1))
            second[i][j] = second[i][j] + cross
            second[j][i] = second[j][i] + cross
    z_mean = pt.stack(mean)
    z_second = pt.stack([pt.stack(row) for row in second])
    z_cov = z_second - pt.outer(z_mean, z_mean)
    weights = pt.cast(shares.weights, "float64")
    stat_mean = shares.offset + pt.dot(z_mean, weights)
    stat_cov = pt.dot(weights.T, pt.dot(z_cov, weights))
    fourth = pt.stack(
        [
            _fourth_central(alpha[j], total, z_mean[j], below.get(j), shares.floors[j])
            for j in range(size)
        ]
    )
    third = pt.dot(fourth**0.25, pt.abs(weights)) ** 3  # Minkowski, then Lyapunov
    return stat_mean, stat_cov, third


def _fourth_central(a, total, mean, below, floor: float):
    """``E[(z - mean)^4]``, ``z = log(max(x, floor))``, ``x ~ Beta(a, total - a)``."""
    cumulants = [pt.polygamma(k, a) - pt.polygamma(k, total) for k in (1, 2, 3)]
    shift = pt.psi(a) - pt.psi(total) - mean  # E[log x] - mean
    k2, k3, k4 = cumulants
    log_fourth = (k4 + 3.0 * k2**2) + 4.0 * k3 * shift + 6.0 * k2 * shift**2 + shift**4
    if below is None:
        return log_fourth
    h, _, weight = below
    at_floor = np.log(floor) - mean
    # below the floor, z = log(floor) instead of log x = log(floor) - h
    return log_fourth + pt.sum(weight * (at_floor**4 - (at_floor - h) ** 4))
