"""The sums level's moves over a table's latent sum and ``n`` (DESIGN move 6), PyMC-free.

The target of one table at fixed parameters ``theta`` is

    pi(n, L) ∝ g(n) p_n(L | theta) eta_s(s_dp - L @ matrix) eta_n(n_dp - n)

with ``L`` the latent sum (see :mod:`pymc_unbounded_dp.laws`). One :func:`step` makes

* ``sums_moves`` Metropolis moves of ``L`` at fixed ``n``: a symmetric proposal (a normal step of
  a continuous sum; ``+-(1 + floor(scale |z|))`` for an integer one; for counts, that many units
  moved from one support point to another, the pair drawn uniformly), accepted with
  ``p_n(L') eta_s(s_dp - L' @ matrix) / (p_n(L) eta_s(s_dp - L @ matrix))``;
* ``n_moves`` birth/death moves of ``d`` records, ``d = 1 + floor(n_scale |z|)``, a birth or a
  death with probability 1/2 each: a birth adds the sum of ``d`` fresh records, a death removes
  the sum of ``d`` of the ``n`` records drawn from its law given ``L`` (a death of more records
  than there are is rejected). These are the record level's moves with the records summed out:
  the proposal laws cancel ``p_n`` and the acceptance ratio is, as there,

      eta_s(s_dp - L' @ matrix) / eta_s(s_dp - L @ matrix) * eta_n(n_dp - n') / eta_n(n_dp - n)
      * g(n') / g(n).

The cost of a step does not depend on ``n``. Every random number comes from the ``rng`` passed in.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from scipy.optimize import nnls

from pymc_unbounded_dp.kernels._noise import (
    SHAPE_ABS,
    SHAPE_CUSTOM,
    SHAPE_SQUARE,
    SHAPE_TULAP,
    NoiseArrays,
    residual_log_density,
)
from pymc_unbounded_dp.laws import NUMPY, collapsed_log_likelihood

__all__ = [
    "SumsInfo",
    "SumsParams",
    "SumsState",
    "SumsTarget",
    "collapsed_step",
    "collapsible_noise",
    "init",
    "noise_variances",
    "step",
]

#: The most records of a table at the sums level (NumPy's hypergeometric draws take populations
#: below ``10**9``); equal to ``pymc_unbounded_dp.blocks.MAX_SUMS_RECORDS``.
MAX_N = 10**9 - 1

#: ``log_prior_n(values) -> log g(values)`` (vectorised); ``None`` is the flat prior on n >= 0.
LogPriorFn = Callable[[np.ndarray], np.ndarray]


class SumsTarget(NamedTuple):
    """The target of one table at fixed parameters, as plain data.

    Attributes
    ----------
    released : numpy.ndarray
        The released sums ``s_dp``, shape ``(D,)``.
    noise : NoiseArrays
        Their mechanisms.
    matrix : numpy.ndarray
        ``(K, D)``: the released totals are ``latent @ matrix``.
    family : pymc_unbounded_dp.laws.Family
        The law of the latent sum.
    params : tuple
        The family's parameters at ``theta`` (NumPy values).
    n_dp, n_noise, log_prior_n
        As in :class:`~pymc_unbounded_dp.kernels.RecordTarget` (``n_dp`` is ``None`` when ``n``
        is known).
    """

    released: np.ndarray
    noise: NoiseArrays
    matrix: np.ndarray
    family: object
    params: tuple
    n_dp: float | None = None
    n_noise: NoiseArrays | None = None
    log_prior_n: LogPriorFn | None = None

    @property
    def unbounded(self) -> bool:
        return self.n_dp is not None


class SumsState(NamedTuple):
    """The latent sum ``latent`` (``(K,)`` floats) of ``n`` records and ``log eta_s`` at it;
    for a collapsed target (:func:`collapsed_step`) also the noise's mixing variances."""

    latent: np.ndarray
    n: int
    log_noise: float
    variances: np.ndarray | None = None


class SumsParams(NamedTuple):
    """Proposal scales (in units of the latent sum and of records) and moves per step."""

    sums_scale: float
    n_scale: float
    sums_moves: int
    n_moves: int


class SumsInfo(NamedTuple):
    """Accepted and proposed moves of one step."""

    sums_accepted: int
    sums_proposed: int
    births_accepted: int
    births_proposed: int
    deaths_accepted: int
    deaths_proposed: int


def noise_function(noise: NoiseArrays) -> Callable[[np.ndarray], float]:
    """``residual -> sum_j log eta_j(residual_j)``: the kernels' noise log-density
    (:func:`~pymc_unbounded_dp.kernels._noise.log_density`) specialised to ``noise``.

    Built-in shapes are evaluated in Python and NumPy: a call into the numba kernels with a
    first-class function argument costs tens of microseconds of type dispatch, the whole budget
    of a move here. User-defined log-densities still go through numba.
    """
    code, discrete, scale, log_normalizer = (
        noise.shape_code,
        noise.discrete,
        noise.scale,
        noise.log_normalizer,
    )
    if np.any(code >= SHAPE_CUSTOM):

        def through_numba(residual: np.ndarray) -> float:
            out = np.empty_like(residual)
            residual_log_density(residual, out, *noise.per_coordinate)
            return float(out.sum())

        return through_numba
    if code.shape[0] == 1:  # one coordinate (the count n_dp): plain floats
        c, d, b, z = int(code[0]), bool(discrete[0]), float(scale[0]), float(log_normalizer[0])

        def scalar(residual: np.ndarray) -> float:
            x = float(residual[0])
            if d and x != math.floor(x):
                return -math.inf
            if c == SHAPE_SQUARE:
                return z - 0.5 * (x / b) ** 2
            return z - abs(round(x) if c == SHAPE_TULAP else x) / b

        return scalar
    if noise.laplace_only:
        total, inverse = float(np.sum(log_normalizer)), 1.0 / scale
        return lambda residual: total - float(np.abs(residual) @ inverse)
    square, tulap = code == SHAPE_SQUARE, code == SHAPE_TULAP

    def vector(residual: np.ndarray) -> float:
        magnitude = np.where(tulap, np.abs(np.rint(residual)), np.abs(residual))
        shape = np.where(square, 0.5 * (residual / scale) ** 2, magnitude / scale)
        values = np.where(
            discrete & (residual != np.floor(residual)), -np.inf, log_normalizer - shape
        )
        return float(np.sum(values))

    return vector


def log_noise(target: SumsTarget, latent: np.ndarray) -> float:
    """``log eta_s(s_dp - latent @ matrix)``, summed over the released coordinates."""
    return noise_function(target.noise)(target.released - latent @ target.matrix)


def _log_prior(target: SumsTarget, n: int) -> float:
    if n < 0:
        return -math.inf
    if target.log_prior_n is None:
        return 0.0
    return float(np.asarray(target.log_prior_n(np.array([n], dtype=np.int64))).reshape(-1)[0])


def init(target: SumsTarget, n: int, latent: np.ndarray) -> SumsState:
    """The state at ``n`` records with latent sum ``latent`` (see :func:`starting_latent`)."""
    latent = np.array(latent, dtype=np.float64)
    return SumsState(latent, int(n), log_noise(target, latent))


def starting_latent(target: SumsTarget, n: int, rng: np.random.Generator) -> np.ndarray:
    """A latent sum of ``n`` records close to the release: a chain's first state.

    Continuous or integer sums: the mean of the released coordinates (each releases the latent
    sum), moved into the support (and rounded); counts: the non-negative least-squares fit of
    the released totals, rounded to counts that add up to ``n`` (a fresh draw from the law when
    the release says nothing about the counts). Any start is valid; a close one saves burn-in.
    """
    family, k = target.family, target.matrix.shape[0]
    if n == 0:
        return np.zeros(k)
    if family.vector:  # the latent is the released totals themselves
        return np.array(target.released, dtype=np.float64)
    if not _is_counts(target):  # every released coordinate is the latent sum itself
        value = float(np.mean(target.released))
        if family.integer:
            value = float(max(round(value), 0))
        elif family.lower == 0.0:
            value = max(value, 1e-6 * max(abs(value), 1.0), 1e-12)
        return np.array([value])
    # counts: fit released ~ counts @ matrix and sum(counts) = n, counts >= 0
    scale = np.maximum(target.noise.scale, 1e-12)
    design = np.vstack([(target.matrix / scale).T, np.ones((1, k)) * 10.0 / max(n, 1) ** 0.5])
    goal = np.concatenate([target.released / scale, [10.0 * n / max(n, 1) ** 0.5]])
    fitted, _ = nnls(design, goal)
    if not np.isfinite(fitted).all() or fitted.sum() <= 0:
        return family.draw_new(rng, n, target.params)
    shares = fitted / fitted.sum() * n
    counts = np.floor(shares)
    remainder = int(n - counts.sum())
    counts[np.argsort(counts - shares)[:remainder]] += 1  # largest remainders first
    return counts


def _is_counts(target: SumsTarget) -> bool:
    return target.family.counts


def _jump(rng: np.random.Generator, scale: float) -> int:
    """A positive integer jump ``1 + floor(scale |z|)``."""
    return 1 + int(math.floor(scale * abs(rng.standard_normal())))


def _propose_latent(rng, target: SumsTarget, latent: np.ndarray, scale: float):
    """A symmetric proposal of the latent sum, or ``None`` if it leaves the support."""
    family = target.family
    proposal = latent.copy()
    if family.counts:  # move units between two support points (an ordered pair, uniformly)
        source = int(rng.integers(latent.shape[0]))
        sink = (source + 1 + int(rng.integers(latent.shape[0] - 1))) % latent.shape[0]
        units = _jump(rng, scale)
        if latent[source] < units:
            return None
        proposal[source] -= units
        proposal[sink] += units
        return proposal
    if family.integer:
        proposal[0] += _jump(rng, scale) * (1 if rng.random() < 0.5 else -1)
    else:  # each coordinate in proportion to its noise scale (one coordinate but for vectors)
        proposal += scale * _units(target) * rng.standard_normal(latent.shape)
    return proposal if np.all(proposal >= family.lower) else None


def _units(target: SumsTarget) -> np.ndarray | float:
    """The relative proposal scale of each coordinate of a vector latent: its noise scale."""
    if not target.family.vector:
        return 1.0
    return target.noise.scale / np.max(target.noise.scale)


def collapsible_noise(noise: NoiseArrays) -> bool:
    """Continuous Laplace or Gaussian noise on every coordinate."""
    return bool(
        not np.any(noise.discrete)
        and np.all((noise.shape_code == SHAPE_ABS) | (noise.shape_code == SHAPE_SQUARE))
    )


def step(
    rng: np.random.Generator, state: SumsState, target: SumsTarget, params: SumsParams
) -> tuple[SumsState, SumsInfo]:
    """``params.sums_moves`` moves of the latent sum, then ``params.n_moves`` birth/death moves
    (none when ``n`` is known); see the module docstring."""
    family, theta = target.family, target.params
    latent, n, noise_lp = state.latent, state.n, state.log_noise
    noise_at, released, matrix = noise_function(target.noise), target.released, target.matrix
    n_noise_at = noise_function(target.n_noise) if target.unbounded else None
    sums_accepted = births = births_accepted = deaths = deaths_accepted = 0
    sums_proposed = params.sums_moves if n > 0 else 0
    current_lp = family.log_p(latent, n, theta) if n > 0 else 0.0
    for _ in range(sums_proposed):
        proposal = _propose_latent(rng, target, latent, params.sums_scale)
        log_u = math.log(rng.random())
        if proposal is None:
            continue
        proposal_lp = family.log_p(proposal, n, theta)
        proposal_noise = noise_at(released - proposal @ matrix)
        if log_u < proposal_lp + proposal_noise - current_lp - noise_lp:
            latent, current_lp, noise_lp = proposal, proposal_lp, proposal_noise
            sums_accepted += 1
    if target.unbounded:
        n_lp = n_noise_at(np.array([target.n_dp - n])) + _log_prior(target, n)
        for _ in range(params.n_moves):
            d = _jump(rng, params.n_scale)
            birth = rng.random() < 0.5
            log_u = math.log(rng.random())
            if birth:
                births += 1
                proposal, n_new = latent + family.draw_new(rng, d, theta), n + d
                if n_new > MAX_N:
                    raise RuntimeError(
                        f"The sums level reached n = {n_new} records, more than it supports "
                        f"({MAX_N}: its death moves draw from NumPy's hypergeometric laws); "
                        "check n_dp and the prior of n."
                    )
            else:
                deaths += 1
                if d > n:
                    continue
                proposal = latent - family.draw_removed(rng, latent, n, d, theta)
                n_new = n - d
                if n_new == 0:
                    proposal = np.zeros_like(latent)
            n_lp_new = n_noise_at(np.array([target.n_dp - n_new])) + _log_prior(target, n_new)
            proposal_noise = noise_at(released - proposal @ matrix)
            if log_u < proposal_noise - noise_lp + n_lp_new - n_lp:
                latent, n, noise_lp, n_lp = proposal, n_new, proposal_noise, n_lp_new
                births_accepted += birth
                deaths_accepted += not birth
    info = SumsInfo(
        sums_accepted,
        sums_proposed,
        births_accepted,
        births,
        deaths_accepted,
        deaths,
    )
    return SumsState(latent, n, noise_lp), info


# -- the collapsed moves of the normal approximation under Laplace or Gaussian noise -------------
def noise_variances(noise: NoiseArrays) -> np.ndarray:
    """The variance of each coordinate's noise: a collapsed chain's starting mixing variances."""
    return np.where(noise.shape_code == SHAPE_SQUARE, 1.0, 2.0) * noise.scale**2


def _draw_totals(rng, target: SumsTarget, n: int, variances: np.ndarray) -> np.ndarray:
    """``L | theta, n, V, s_dp`` under ``L ~ N(n m, n C)``, ``s_dp - L ~ N(0, diag V)``."""
    mean, covariance = target.params
    if n == 0:
        return np.zeros_like(mean)
    prior = n * covariance
    gain = np.linalg.solve(prior + np.diag(variances), prior).T  # prior (prior + V)^-1
    centre = n * mean + gain @ (target.released - n * mean)
    spread = prior - gain @ prior
    spread = 0.5 * (spread + spread.T)
    values, vectors = np.linalg.eigh(spread)
    root = vectors * np.sqrt(np.maximum(values, 0.0))
    return centre + root @ rng.standard_normal(mean.shape[0])


def _draw_variances(rng, noise: NoiseArrays, residual: np.ndarray) -> np.ndarray:
    """``V | L``: for Laplace(b) noise, ``1 / v ~ InverseGaussian(1 / (b |e|), 1 / b^2)``, the
    mixing law's conditional given the noise ``e = s_dp - L``; Gaussian noise keeps ``sigma^2``."""
    scale = noise.scale
    magnitude = np.maximum(np.abs(residual), 1e-300)
    precision = rng.wald(1.0 / (scale * magnitude), 1.0 / scale**2)
    return np.where(noise.shape_code == SHAPE_SQUARE, scale**2, 1.0 / precision)


def _collapsed_log_likelihood(target: SumsTarget, n: int, variances: np.ndarray) -> float:
    return float(
        collapsed_log_likelihood(target.released, float(n), target.params, variances, NUMPY)
    )


def collapsed_step(
    rng: np.random.Generator, state: SumsState, target: SumsTarget, params: SumsParams
) -> tuple[SumsState, SumsInfo]:
    """One sweep of the partially collapsed Gibbs sampler of a vector latent (the normal
    approximation) whose noise is :func:`collapsible_noise`.

    Laplace noise is the scale mixture ``e ~ N(0, v)``, ``v ~ Exponential(mean 2 b^2)``, which
    makes the totals Gaussian given the mixing variances ``V``. The sweep draws ``L | theta, n,
    V`` and ``V | L`` exactly, moves ``n`` by ``params.n_moves`` symmetric random-walk moves on
    ``pi(n | theta, V) ∝ g(n) eta_n(n_dp - n) N(s_dp; n m, n C + diag V)`` (the totals integrated
    out), and draws ``L | theta, n, V`` again. The parameters then move on the same collapsed
    density (:func:`~pymc_unbounded_dp.laws.collapsed_log_likelihood`), so ``theta`` is never
    held back by the totals.
    """
    n, variances = state.n, state.variances
    latent = _draw_totals(rng, target, n, variances)
    variances = _draw_variances(rng, target.noise, target.released - latent @ target.matrix)
    ups = ups_accepted = downs = downs_accepted = 0
    if target.unbounded:
        n_noise_at = noise_function(target.n_noise)

        def log_target(count: int) -> float:
            return (
                n_noise_at(np.array([target.n_dp - count]))
                + _log_prior(target, count)
                + _collapsed_log_likelihood(target, count, variances)
            )

        current = log_target(n)
        for _ in range(params.n_moves):
            up = rng.random() < 0.5
            proposal = n + _jump(rng, params.n_scale) * (1 if up else -1)
            log_u = math.log(rng.random())
            ups, downs = ups + up, downs + (not up)
            if proposal < 0 or proposal > MAX_N:
                continue
            proposal_lp = log_target(proposal)
            if log_u < proposal_lp - current:
                n, current = proposal, proposal_lp
                ups_accepted, downs_accepted = ups_accepted + up, downs_accepted + (not up)
        latent = _draw_totals(rng, target, n, variances)
    # steps up and down in n count as births and deaths (the stats' birth/death rates)
    info = SumsInfo(0, 0, ups_accepted, ups, downs_accepted, downs)
    return SumsState(latent, n, log_noise(target, latent), variances), info
