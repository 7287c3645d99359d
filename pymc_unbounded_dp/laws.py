"""Exact laws of a table's true sums given the parameters and ``n``: the sums level's model.

At the sums level (``pmdp.sample(augment="sums")``, DESIGN move 6) a record table is summarised by
its latent ``(n, L)``: ``L`` is the table's *latent sum*, from which the true released totals
follow linearly, ``T = L @ matrix``. A :class:`SumLaw` is the closed-form law ``p_n(L | theta)``
of ``L`` for ``n`` independent records, with what the moves over ``L`` and ``n`` need:

* :data:`COUNTS` -- records with a finite support ``{v_1, ..., v_K}`` (Bernoulli, Categorical,
  Binomial with a known number of trials, DiscreteUniform): ``L`` is the vector of counts of each
  support point, ``L ~ Multinomial(n, p(theta))``, and ``matrix[k] = t(v_k)`` is the statistic at
  each support point, so *any* statistic of such records (one-hot counts, indicators, clamps) has
  an exact law;
* :data:`POISSON`, :data:`NEGATIVE_BINOMIAL`, :data:`NORMAL`, :data:`GAMMA` -- families closed under
  sums, released through the identity statistic ``t(x) = x`` (each released coordinate is
  ``L``): Poisson(``n mu``), NegativeBinomial(``n r``, ``p``), Normal(``n mu``, ``n sigma^2``),
  Gamma(``n alpha``, scale) (the Exponential is the Gamma of shape 1);
* :data:`NORMAL_APPROXIMATION` -- not exact: the central-limit law ``N(n m, n C)`` of the vector of
  true totals, with ``m`` and ``C`` one record's statistic mean and covariance
  (:mod:`pymc_unbounded_dp.moments`), for tables without an exact law, only when asked
  (``augment="sums"``); its moves over ``n`` use the normal bridge, exact for this law.

Each family's log-density is written once over an :class:`Ops` namespace, so that the same formula
is evaluated with NumPy by the kernels (:mod:`pymc_unbounded_dp.kernels.sums`) and with PyTensor in
the parameter steps' target (where NUTS differentiates it in ``theta``).

For the moves over ``n`` (a birth or death of ``d`` records), each family draws the sum of ``d``
fresh records (``draw_new``) and the sum of ``d`` of the ``n`` records given their total
(``draw_removed``: the multivariate hypergeometric, binomial thinning, beta splitting of the
total, or the normal bridge), which makes the birth/death acceptance ratio the record level's
(see :mod:`pymc_unbounded_dp.kernels.sums`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytensor.tensor as pt
from scipy import linalg, special

__all__ = [
    "COUNTS",
    "GAMMA",
    "NEGATIVE_BINOMIAL",
    "NORMAL",
    "NORMAL_APPROXIMATION",
    "NUMPY",
    "POISSON",
    "PYTENSOR",
    "collapsed_log_likelihood",
    "gaussian_log_density",
    "Family",
    "Ops",
]


class Ops(NamedTuple):
    """The few array operations a law's log-density uses, in one backend."""

    gammaln: Callable
    log: Callable
    where: Callable
    sum: Callable
    maximum: Callable
    eq: Callable
    cholesky: Callable
    solve_lower: Callable  # (L, b) -> L^-1 b, L lower triangular
    diagonal: Callable
    eye: Callable


NUMPY = Ops(
    special.gammaln,
    np.log,
    np.where,
    np.sum,
    np.maximum,
    np.equal,
    np.linalg.cholesky,
    lambda lower, b: linalg.solve_triangular(lower, b, lower=True),
    np.diagonal,
    np.eye,
)
PYTENSOR = Ops(
    pt.gammaln,
    pt.log,
    pt.switch,
    pt.sum,
    pt.maximum,
    pt.eq,
    pt.linalg.cholesky,
    lambda lower, b: pt.linalg.solve_triangular(lower, b, lower=True),
    pt.diagonal,
    pt.eye,
)


@dataclass(frozen=True)
class Family:
    """One family of exact sum laws.

    Attributes
    ----------
    name : str
        The law's name, as reported in the results (``"Multinomial"``, ``"Poisson"``, ...).
    integer : bool
        Whether the latent sum is integer-valued.
    lower : float
        The lower bound of each coordinate of the latent sum (``0`` or ``-inf``).
    log_density : callable
        ``log_density(latent, n, params, ops) -> log p_n(latent | params)``; ``latent`` holds the
        latent sum in its last axis, ``n >= 0``, ``params`` the family's parameters.
    draw_new : callable
        ``draw_new(rng, d, params) -> latent sum of d fresh records``.
    draw_removed : callable
        ``draw_removed(rng, latent, n, d, params) -> latent sum of d of the n records`` given
        that the n records sum to ``latent`` (``1 <= d <= n``).
    counts : bool
        Whether the latent sum is a vector of counts of support points (adding up to ``n``).
    vector : bool
        Whether the latent sum is the vector of released totals itself (``matrix`` the
        identity); otherwise (and not ``counts``) it has one coordinate.
    exact : bool
        Whether the law is the exact law of the sums (``False``: an approximation).
    """

    name: str
    integer: bool
    lower: float
    log_density: Callable
    draw_new: Callable
    draw_removed: Callable
    counts: bool = False
    vector: bool = False
    exact: bool = True

    def log_p(self, latent: np.ndarray, n: int, params: tuple) -> float:
        """The log-density at ``latent`` evaluated with NumPy (what the kernels call)."""
        return float(self.log_density(latent, float(n), params, NUMPY))


def _safe(n, ops: Ops):
    """``max(n, 1)``: formulas evaluated at ``n = 0`` (then replaced) stay finite, and so do their
    gradients."""
    return ops.maximum(n, 1.0)


def _at_zero(n, latent, ops: Ops):
    """The log-density of ``n = 0`` records: the point mass at a zero sum."""
    return ops.where(ops.eq(ops.sum(latent * latent), 0.0), 0.0, -np.inf)


# -- counts of the support points of a finite-support record: Multinomial(n, p) -------------------
def _counts_log_density(latent, n, params, ops: Ops):
    (log_p,) = params
    # c_k log p_k with 0 log 0 = 0 (a support point of probability 0 is never counted).
    terms = latent * ops.where(latent > 0, log_p, 0.0)
    return ops.gammaln(n + 1.0) - ops.sum(ops.gammaln(latent + 1.0)) + ops.sum(terms)


def _probabilities(log_p: np.ndarray) -> np.ndarray:
    p = np.exp(log_p - np.max(log_p))
    return p / p.sum()


COUNTS = Family(
    name="Multinomial",
    integer=True,
    lower=0.0,
    log_density=_counts_log_density,
    draw_new=lambda rng, d, params: rng.multinomial(d, _probabilities(params[0])).astype(float),
    draw_removed=lambda rng, latent, n, d, params: rng.multivariate_hypergeometric(
        latent.astype(np.int64), d, method="marginals"
    ).astype(float),
    counts=True,
)


# -- Poisson(mu): the sum of n is Poisson(n mu) ---------------------------------------------------
def _poisson_log_density(latent, n, params, ops: Ops):
    (mu,) = params
    t = latent[..., 0]
    rate = _safe(n, ops) * mu
    value = t * ops.log(rate) - rate - ops.gammaln(t + 1.0)
    return ops.where(n > 0, value, _at_zero(n, latent, ops))


POISSON = Family(
    name="Poisson",
    integer=True,
    lower=0.0,
    log_density=_poisson_log_density,
    draw_new=lambda rng, d, params: np.array([float(rng.poisson(d * params[0]))]),
    # given the total, each of the n records is equally likely to hold each unit
    draw_removed=lambda rng, latent, n, d, params: np.array(
        [float(rng.binomial(int(latent[0]), d / n))]
    ),
)


# -- NegativeBinomial(r, p) (failures before the r-th success): the sum of n is NB(n r, p) --------
def _negative_binomial_log_density(latent, n, params, ops: Ops):
    r, p = params
    t = latent[..., 0]
    shape = _safe(n, ops) * r
    value = (
        ops.gammaln(t + shape)
        - ops.gammaln(shape)
        - ops.gammaln(t + 1.0)
        + shape * ops.log(p)
        + t * ops.log(1.0 - p)
    )
    return ops.where(n > 0, value, _at_zero(n, latent, ops))


def _negative_binomial_removed(rng, latent, n, d, params):
    # Given their total, n NB(r, p) records are Dirichlet-multinomial(total; r, ..., r): the sum
    # of d of them is beta-binomial(total; d r, (n - d) r).
    r, _ = params
    share = 1.0 if d == n else rng.beta(d * r, (n - d) * r)
    return np.array([float(rng.binomial(int(latent[0]), share))])


NEGATIVE_BINOMIAL = Family(
    name="NegativeBinomial",
    integer=True,
    lower=0.0,
    log_density=_negative_binomial_log_density,
    draw_new=lambda rng, d, params: np.array(
        [float(rng.negative_binomial(d * params[0], params[1]))]
    ),
    draw_removed=_negative_binomial_removed,
)


# -- Normal(mu, sigma): the sum of n is Normal(n mu, n sigma^2) -----------------------------------
def _normal_log_density(latent, n, params, ops: Ops):
    mu, sigma = params
    t = latent[..., 0]
    m = _safe(n, ops)
    z = (t - m * mu) / sigma
    value = -0.5 * z * z / m - ops.log(sigma) - 0.5 * ops.log(2.0 * np.pi * m)
    return ops.where(n > 0, value, _at_zero(n, latent, ops))


def _normal_removed(rng, latent, n, d, params):
    # the Brownian bridge: the sum of d of n normals given their total
    _, sigma = params
    if d == n:
        return latent.copy()
    mean = latent[0] * d / n
    return np.array([rng.normal(mean, sigma * np.sqrt(d * (n - d) / n))])


NORMAL = Family(
    name="Normal",
    integer=False,
    lower=-np.inf,
    log_density=_normal_log_density,
    draw_new=lambda rng, d, params: np.array([rng.normal(d * params[0], params[1] * np.sqrt(d))]),
    draw_removed=_normal_removed,
)


# -- Gamma(alpha, scale) (and Exponential(scale) = Gamma(1, scale)): the sum is Gamma(n alpha) ---
def _gamma_log_density(latent, n, params, ops: Ops):
    alpha, scale = params
    t = latent[..., 0]
    shape = _safe(n, ops) * alpha
    positive = ops.maximum(t, 1e-300)
    value = (
        (shape - 1.0) * ops.log(positive) - t / scale - ops.gammaln(shape) - shape * ops.log(scale)
    )
    value = ops.where(t > 0, value, -np.inf)
    return ops.where(n > 0, value, _at_zero(n, latent, ops))


def _gamma_removed(rng, latent, n, d, params):
    # Given their total, n Gamma(alpha) records split it as Dirichlet(alpha, ..., alpha): d of
    # them hold a Beta(d alpha, (n - d) alpha) share.
    alpha, _ = params
    if d == n:
        return latent.copy()
    return latent * rng.beta(d * alpha, (n - d) * alpha)


GAMMA = Family(
    name="Gamma",
    integer=False,
    lower=0.0,
    log_density=_gamma_log_density,
    draw_new=lambda rng, d, params: np.array([rng.gamma(d * params[0], params[1])]),
    draw_removed=_gamma_removed,
)


# -- the normal approximation N(n m, n C) of the vector of true totals (not exact) ----------------
def gaussian_log_density(x, mean, covariance, ops: Ops):
    """``log N(x; mean, covariance)`` of a vector ``x``."""
    factor = ops.cholesky(covariance)
    z = ops.solve_lower(factor, x - mean)
    return (
        -0.5 * ops.sum(z * z)
        - ops.sum(ops.log(ops.diagonal(factor)))
        - 0.5 * mean.shape[-1] * np.log(2.0 * np.pi)
    )


def collapsed_log_likelihood(released, n, params, variances, ops: Ops):
    """``log N(s_dp; n m, n C + diag(V))``: the release's density under the normal approximation
    with the true totals integrated out, given the noise's mixing variances ``V`` (Laplace noise
    is the normal scale mixture ``N(0, v)``, ``v ~ Exponential(mean 2 b^2)``; Gaussian noise has
    ``v = sigma^2``)."""
    mean, covariance = params
    mixing = ops.eye(variances.shape[0]) * variances
    return gaussian_log_density(released, n * mean, n * covariance + mixing, ops)


def _normal_approximation_log_density(latent, n, params, ops: Ops):
    mean, covariance = params
    m = _safe(n, ops)
    factor = ops.cholesky(covariance)
    z = ops.solve_lower(factor, latent - m * mean)
    dimension = mean.shape[-1]
    value = (
        -0.5 * ops.sum(z * z) / m
        - ops.sum(ops.log(ops.diagonal(factor)))
        - 0.5 * dimension * ops.log(2.0 * np.pi * m)
    )
    return ops.where(n > 0, value, _at_zero(n, latent, ops))


def _normal_approximation_new(rng, d, params):
    mean, covariance = params
    z = rng.standard_normal(mean.shape[0])
    return d * mean + np.sqrt(d) * (np.linalg.cholesky(covariance) @ z)


def _normal_approximation_removed(rng, latent, n, d, params):
    # the Gaussian bridge: the sum of d of n records given their total, under N(m, C) records
    _, covariance = params
    if d == n:
        return latent.copy()
    z = rng.standard_normal(latent.shape[0])
    return latent * d / n + np.sqrt(d * (n - d) / n) * (np.linalg.cholesky(covariance) @ z)


NORMAL_APPROXIMATION = Family(
    name="Normal approximation",
    integer=False,
    lower=-np.inf,
    log_density=_normal_approximation_log_density,
    draw_new=_normal_approximation_new,
    draw_removed=_normal_approximation_removed,
    vector=True,
    exact=False,
)
