r"""Random-walk Metropolis on the parameters, for the interweaving (non-centred) move.

The move of :class:`pymc_unbounded_dp.Interweave` holds the ancillary variables ``u`` of the records
fixed and moves the flat parameter vector ``theta`` (PyMC's unconstrained value variables) under

.. math::

    \pi_u(\theta) \propto \pi(\theta)\, g(n \mid \theta)\, \eta_s\bigl(s_{dp} - \textstyle\sum_i t(g(\theta, u_i))\bigr)

(Yu & Meng 2011; see :mod:`pymc_unbounded_dp.noncentred`). That target is continuous but only
piecewise smooth (Laplace kinks, clamp boundaries), so the kernel is a Gaussian random walk, whose
acceptance needs no gradient. The same kernel serves the *full-refresh* fallback, whose "log
density" at a proposal is a random draw (fresh records from the model at ``theta'``): the state keeps
the value at the current point and only proposals are evaluated, which is what makes that move
exact too.

Everything here is plain NumPy or numba: a log-density callable in, a state and an info out
(BlackJAX style), so the kernel runs and is tested without PyMC.

* :func:`init` / :func:`step` — the kernel, calling a Python log-density once per step;
* :func:`init_compiled` / :func:`step_compiled` — the same kernel with the log density a numba
  function, all steps of one call in one compiled loop (no Python between steps). It draws the same
  random numbers in the same order as :func:`step`, so both give the same chain up to
  floating-point order;
* :class:`Tuner` — adaptation during tuning: proposal covariance from windows of the chain's
  draws (doubling windows, regularised as Stan does), proposal scale by Robbins-Monro towards an
  acceptance of 0.234, and the number of steps per iteration from the measured squared jump
  distance (see :func:`steps_for`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numba as nb
import numpy as np

__all__ = [
    "PAY_MARGIN",
    "SETTLED_ACCEPT",
    "TARGET_ACCEPT",
    "UNPAID_WINDOWS",
    "RWInfo",
    "RWParams",
    "RWState",
    "Tuner",
    "accept",
    "init",
    "init_compiled",
    "step",
    "step_compiled",
    "steps_for",
]

#: Acceptance rate the scale is tuned to (Roberts, Gelman & Gilks 1997).
TARGET_ACCEPT = 0.234
#: A step pays when its squared jump exceeds this many times its cost's worth of the rest of the
#: iteration's (see :func:`steps_for`).
PAY_MARGIN = 2.0
#: A tuning window whose mean acceptance probability is at most this has a scale near its tuned
#: value (it starts small, accepting nearly everything): its jumps measure what the move buys.
SETTLED_ACCEPT = 0.6
#: The move is switched off after this many consecutive settled tuning windows that show it does
#: not pay (one window's verdict is noisy while the chain's covariance is still being learned: on
#: the regression at n = 10,000 the second of three windows alone said "off", the others "60
#: steps", and the move is worth 90x there).
UNPAID_WINDOWS = 2

#: ``log_density_fn(position) -> (log density, extra)``; ``extra`` is carried in the state when the
#: proposal is accepted (e.g. the freshly drawn records of the full-refresh move).
LogDensityFn = Callable[[np.ndarray], tuple[float, Any]]


class RWState(NamedTuple):
    """The current point: flat parameters, the log density there, and what came with it."""

    position: np.ndarray
    log_density: float
    extra: Any = None


class RWParams(NamedTuple):
    """Proposal ``position + scale * chol @ z``, ``z ~ N(0, I)``."""

    chol: np.ndarray
    scale: float


class RWInfo(NamedTuple):
    """Counts of one call of :func:`step`.

    ``squared_jump``: sum over the steps of the accepted jumps' squared length in the proposal's
    whitened coordinates (``|scale * z|^2`` when accepted, else 0).
    ``accept_probability``: sum over the steps of ``min(1, exp(log ratio))``.
    ``jump_outer``: sum over the accepted steps of the outer product of the jump (parameter scale).
    """

    accepted: int
    proposed: int
    squared_jump: float
    accept_probability: float
    jump_outer: np.ndarray | None = None


def accept(log_ratio: float, log_u: float) -> bool:
    """The Metropolis decision ``log u < log ratio`` (a NaN ratio rejects)."""
    return bool(log_u < log_ratio)


def init(position: np.ndarray, log_density_fn: LogDensityFn) -> RWState:
    """The state at ``position`` (one evaluation of ``log_density_fn``)."""
    position = np.array(position, dtype=np.float64)
    log_density, extra = log_density_fn(position)
    return RWState(position, float(log_density), extra)


def step(
    rng: np.random.Generator,
    state: RWState,
    log_density_fn: LogDensityFn,
    params: RWParams,
    n_steps: int = 1,
) -> tuple[RWState, RWInfo]:
    """``n_steps`` random-walk Metropolis steps from ``state``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Draws ``z`` (``n_steps x d`` standard normals) and the uniforms, in that order.
    state : RWState
    log_density_fn : callable
        ``position -> (log density, extra)``; ``-inf`` or NaN rejects.
    params : RWParams
    n_steps : int

    Returns
    -------
    (RWState, RWInfo)

    Examples
    --------
    >>> import numpy as np
    >>> from pymc_unbounded_dp.kernels import interweave as rw
    >>> def log_density(x):
    ...     return -0.5 * float(x @ x), None
    >>> state = rw.init(np.zeros(2), log_density)
    >>> params = rw.RWParams(chol=np.eye(2), scale=1.5)
    >>> state, info = rw.step(np.random.default_rng(0), state, log_density, params, n_steps=100)
    >>> info.proposed
    100
    """
    d = state.position.shape[0]
    jumps, log_u = _proposal_draws(rng, d, params, n_steps)
    accepted, squared_jump, probability = 0, 0.0, 0.0
    jump_outer = np.zeros((d, d))
    for k in range(n_steps):
        jump = params.chol @ jumps[k]
        proposal = state.position + jump
        log_density, extra = log_density_fn(proposal)
        log_ratio = log_density - state.log_density
        probability += 0.0 if math.isnan(log_ratio) else math.exp(min(log_ratio, 0.0))
        if accept(log_ratio, log_u[k]):
            state = RWState(proposal, float(log_density), extra)
            accepted += 1
            squared_jump += float(jumps[k] @ jumps[k])
            jump_outer += np.outer(jump, jump)
    return state, RWInfo(accepted, n_steps, squared_jump, probability, jump_outer)


def _proposal_draws(rng: np.random.Generator, d: int, params: RWParams, n_steps: int):
    """The whitened jumps ``scale * z`` (``n_steps x d``) and the ``log u`` of ``n_steps`` steps."""
    jumps = rng.standard_normal((n_steps, d)) * params.scale
    with np.errstate(divide="ignore"):  # u = 0 (probability 2^-53) is log u = -inf: accept
        log_u = np.log(rng.random(n_steps))
    return jumps, log_u


#: ``log_density_fn(position, *args) -> (log density as a 0-d array, ...)``: a numba function, such
#: as the whole-graph function PyTensor compiles with ``mode="NUMBA"`` (``fn.vm.jit_fn``).
CompiledLogDensityFn = Callable[..., tuple]


def init_compiled(
    position: np.ndarray, log_density_fn: CompiledLogDensityFn, args: tuple
) -> RWState:
    """The state at ``position`` for :func:`step_compiled` (one evaluation of the numba function)."""
    position = np.array(position, dtype=np.float64)
    return RWState(position, float(log_density_fn(position, *args)[0]))


def step_compiled(
    rng: np.random.Generator,
    state: RWState,
    log_density_fn: CompiledLogDensityFn,
    args: tuple,
    params: RWParams,
    n_steps: int = 1,
) -> tuple[RWState, RWInfo]:
    """:func:`step` with a numba log density ``log_density_fn(position, *args)``: the ``n_steps``
    steps run in one compiled loop.

    The random numbers are drawn here, in :func:`step`'s order, and passed in, so a seed gives the
    same chain as :func:`step` with ``lambda x: (log_density_fn(x, *args)[0], None)``, up to
    floating-point order. The state carries no ``extra``.

    Examples
    --------
    >>> import numba as nb
    >>> import numpy as np
    >>> from pymc_unbounded_dp.kernels import interweave as rw
    >>> @nb.njit
    ... def log_density(x, shift):
    ...     return (np.asarray(-0.5 * np.sum((x - shift) ** 2)),)
    >>> args = (np.ones(2),)
    >>> state = rw.init_compiled(np.zeros(2), log_density, args)
    >>> params = rw.RWParams(chol=np.eye(2), scale=1.5)
    >>> state, info = rw.step_compiled(
    ...     np.random.default_rng(0), state, log_density, args, params, n_steps=100
    ... )
    >>> info.proposed
    100
    """
    jumps, log_u = _proposal_draws(rng, state.position.shape[0], params, n_steps)
    position, log_density, accepted, squared_jump, probability, jump_outer = _walk(
        log_density_fn,
        args,
        state.position,
        state.log_density,
        np.ascontiguousarray(params.chol),
        jumps,
        log_u,
    )
    return RWState(position, float(log_density)), RWInfo(
        int(accepted), n_steps, float(squared_jump), float(probability), jump_outer
    )


@nb.njit
def _walk(log_density_fn, args, position, log_density, chol, jumps, log_u):
    """The loop of :func:`step_compiled` (the same arithmetic as :func:`step`, written out in
    loops over two buffers: a step allocates nothing)."""
    d = position.shape[0]
    accepted, squared_jump, probability = 0, 0.0, 0.0
    jump_outer = np.zeros((d, d))
    position = position.copy()
    proposal = np.empty(d)
    jump = np.empty(d)
    for k in range(jumps.shape[0]):
        for i in range(d):
            total = 0.0
            for j in range(d):
                total += chol[i, j] * jumps[k, j]
            jump[i] = total
            proposal[i] = position[i] + total
        proposed = log_density_fn(proposal, *args)[0].item()
        log_ratio = proposed - log_density
        if not math.isnan(log_ratio):
            probability += math.exp(min(log_ratio, 0.0))
        if log_u[k] < log_ratio:
            log_density = proposed
            accepted += 1
            for i in range(d):
                position[i] = proposal[i]
                squared_jump += jumps[k, i] * jumps[k, i]
                for j in range(d):
                    jump_outer[i, j] += jump[i] * jump[j]
    return position, log_density, accepted, squared_jump, probability, jump_outer


def steps_for(
    dimension: int,
    squared_jump_per_step: float,
    max_steps: int,
    centred_squared_jump: float = 0.0,
    relative_cost: float = 0.0,
) -> int:
    """Steps per iteration: the most effective draws per unit of cost, at most enough for one
    iteration's random walk to cross the posterior, if the steps pay for themselves.

    In coordinates whitened by the posterior covariance, a random walk with mean squared jump
    ``e`` per step has, after ``K`` steps, a lag-one autocorrelation of about
    ``rho = exp(-K e / (2 d))`` in each direction. ``K = 5 d / e`` puts it near
    ``exp(-2.5) = 0.08``: the non-centred move then nearly decorrelates ``theta`` every iteration.
    Fewer steps leave an integrated autocorrelation time of about ``(1 + rho) / (1 - rho)
    ~ 1 + a / K`` with ``a = 4 d / e`` (the paper's regression measured ``a`` of 60 to 100 with
    ``d = 9``), at a cost ``1 + K relative_cost`` per iteration: effective draws per unit of cost
    are largest at ``K = sqrt(a / relative_cost)``. The smaller of the two, clipped to
    ``1 .. max_steps``.

    A step is worth its cost only if it moves ``theta`` more than the rest of the iteration does per
    unit of cost: with ``c`` the squared jump of the rest of the iteration (the centred steps, same
    coordinates) and ``relative_cost`` the cost of one step as a fraction of the rest of the
    iteration, the gain per cost ``(c + K e) / (1 + K relative_cost)`` grows with ``K`` only if
    ``e > relative_cost * c``; this asks for ``e > PAY_MARGIN * relative_cost * c``, because both
    jumps are measured in coordinates whitened by a covariance learned from a few dozen draws
    (Poisson counts at n = 1,000: ``e / (relative_cost c) = 2.0`` in the first window, yet the
    move made the chain 0.65x as fast). Otherwise (little missing information: the centred step
    already mixes, and ``theta`` given the ancillaries is narrow) this returns 0.
    """
    if squared_jump_per_step <= PAY_MARGIN * relative_cost * centred_squared_jump:
        return 0
    if not squared_jump_per_step > 0:
        return max_steps
    steps = math.ceil(5.0 * dimension / squared_jump_per_step)
    if relative_cost > 0:
        best = math.sqrt(4.0 * dimension / (squared_jump_per_step * relative_cost))
        steps = min(steps, math.ceil(best))
    return int(min(max(steps, 1), max_steps))


class Tuner:
    """Adapts :class:`RWParams` and the number of steps per iteration during tuning.

    * Covariance: the draws of each window (windows double: 25, 50, 100, ... iterations) give the
      next proposal covariance, ``(m / (m + 5)) C + 1e-3 (5 / (m + 5)) I`` as in Stan, with its
      Cholesky factor as ``chol``.
    * Scale: after every iteration, ``log scale += gain * (alpha - 0.234)`` with ``alpha`` the
      iteration's mean acceptance probability and a gain that decays within each window.
    * Steps: at the end of each window, :func:`steps_for` of the window's mean squared jump per
      step, and of the squared jump of the rest of the iteration (``theta`` at entry minus
      ``theta`` at the previous exit), both whitened by the new covariance. A window that pays
      sets the steps; one that does not (0: the move does not pay for its cost) keeps the last
      paying window's steps, unless it is the ``UNPAID_WINDOWS``-th in a row of such windows
      whose mean acceptance probability was at most ``SETTLED_ACCEPT`` (the scale has grown out
      of its small start, so the measured jumps are representative): then, if
      ``may_switch_off``, the move is off from then on, tuning included (:attr:`n_steps` and
      :meth:`final_steps` are 0). :attr:`last_window_pays` is the last window's verdict.

    Call :meth:`update` once per tuning iteration; nothing changes after tuning, so the draws use a
    fixed kernel.

    Parameters
    ----------
    dimension : int
    n_steps : int
        Steps per iteration before the first window ends.
    max_steps : int
        Upper bound for the automatically chosen number of steps.
    adapt_steps : bool
        ``False`` keeps ``n_steps`` (a user's choice) for the whole run.
    relative_cost : float
        Cost of one step as a fraction of the rest of an iteration (see :func:`steps_for`).
    may_switch_off : bool
        ``False`` keeps at least one step per iteration whatever the measurements (the move
        forced on).
    """

    first_window = 25

    def __init__(
        self,
        dimension: int,
        n_steps: int,
        max_steps: int,
        adapt_steps: bool = True,
        relative_cost: float = 0.0,
        may_switch_off: bool = True,
    ):
        self.dimension = dimension
        self.max_steps = max_steps
        self.adapt_steps = adapt_steps
        self.relative_cost = relative_cost
        self.may_switch_off = may_switch_off
        self.n_steps = n_steps
        self.params = RWParams(chol=np.eye(dimension), scale=0.1 / math.sqrt(dimension))
        self._chosen = n_steps  # the steps of the last window that paid (the start before one)
        self._unpaid = 0  # consecutive settled windows that did not pay
        self._off = False
        self.last_window_pays: bool | None = None
        self._window = self.first_window
        self._start_window()

    def _start_window(self) -> None:
        self._seen = 0
        self._steps_seen = 0
        self._probability = 0.0  # sum of the window's acceptance probabilities
        self._mean = np.zeros(self.dimension)
        self._m2 = np.zeros((self.dimension, self.dimension))
        self._jumps = np.zeros(
            (self.dimension, self.dimension)
        )  # sum of accepted jump outer products
        self._centred = np.zeros((self.dimension, self.dimension))  # same, rest of the iteration
        self._centred_seen = 0

    def final_steps(self) -> int:
        """Steps per iteration after tuning (0: the move does not pay for itself here)."""
        if not self.adapt_steps:
            return self.n_steps
        return 0 if self._off else self._chosen

    def update(
        self,
        position: np.ndarray,
        info: RWInfo,
        centred_jump: np.ndarray | None = None,
    ) -> None:
        """Record one tuning iteration: its end point, the move's counts and accepted jumps
        (``info``), and the displacement of the rest of the iteration."""
        self._seen += 1
        delta = position - self._mean
        self._mean += delta / self._seen
        self._m2 += np.outer(delta, position - self._mean)
        self._steps_seen += info.proposed
        self._probability += info.accept_probability
        if info.jump_outer is not None:
            self._jumps += info.jump_outer
        if centred_jump is not None:
            self._centred += np.outer(centred_jump, centred_jump)
            self._centred_seen += 1
        if info.proposed:
            gain = 1.0 / math.sqrt(1.0 + self._steps_seen / info.proposed)
            mean_probability = info.accept_probability / info.proposed
            scale = self.params.scale * math.exp(gain * (mean_probability - TARGET_ACCEPT))
            self.params = self.params._replace(scale=scale)
        if self._seen >= self._window:
            self._end_window()

    def _end_window(self) -> None:
        m = self._seen
        covariance = self._m2 / max(m - 1, 1)
        covariance = (m / (m + 5.0)) * covariance + 1e-3 * (5.0 / (m + 5.0)) * np.eye(
            self.dimension
        )
        old_chol = self.params.chol
        try:
            chol = np.linalg.cholesky(covariance)
        except np.linalg.LinAlgError:
            chol = old_chol
        # Keep the proposal's size: the new shape gets the scale that matches the old one's trace.
        ratio = math.sqrt(np.trace(old_chol @ old_chol.T) / np.trace(chol @ chol.T))
        self.params = RWParams(chol=chol, scale=self.params.scale * ratio)
        if self.adapt_steps:
            precision = np.linalg.inv(chol @ chol.T)
            jump = float(np.sum(precision * self._jumps)) / max(self._steps_seen, 1)
            centred = float(np.sum(precision * self._centred)) / max(self._centred_seen, 1)
            chosen = steps_for(self.dimension, jump, self.max_steps, centred, self.relative_cost)
            settled = self._probability <= SETTLED_ACCEPT * max(self._steps_seen, 1)
            self.last_window_pays = chosen > 0
            if chosen > 0:
                self._chosen, self._unpaid = chosen, 0
            elif settled:
                self._unpaid += 1
            self._off = self.may_switch_off and self._unpaid >= UNPAID_WINDOWS
            self.n_steps = 0 if self._off else max(self._chosen, 1)
        self._window *= 2
        self._start_window()
