"""``IndependenceMetropolis``: the sums level's parameter step under the normal approximation.

The PyMC adapter of :mod:`pymc_unbounded_dp.kernels.independence`. Where a table's true totals
follow the normal approximation ``N(n m(theta), n C(theta))`` (``augment="sums"``), the
parameters' target given the totals is smooth and near-normal at census sizes, and one
log-density costs ~1 ms on the paper's regression while its gradient through the moment rule
costs 20-40 ms: NUTS there made 0.0055 effective draws per second at n = 1e4. This step fits a
multivariate-t proposal to the target during tuning (a Laplace fit at the mode, then the
tuning draws' mean and covariance) and makes independence Metropolis moves with it, fixed once
draws are kept. :func:`pmdp.sample <pymc_unbounded_dp.sample>` assigns it to the continuous
parameters at the sums level when a table uses the normal approximation; exact sum laws keep
NUTS.

An independence proposal alone can stick: a chain that starts (or sits) where the target is
much heavier than the proposal (a ridge of weakly identified parameters, a skewed posterior at
small ``n``) rejects almost every move, and a refit to draws that did not move collapses the
proposal onto them. So the step also makes random-walk Metropolis moves
(:func:`pymc_unbounded_dp.kernels.interweave.step`) with the proposal's shape, their scale tuned
to an acceptance of 0.234: always in the first tuning window, then in every window (and, after
tuning, in every iteration) where the independence moves accept less than
:data:`RANDOM_WALK_OFF`. A refit uses the tuning draws only when they moved.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
from pymc.blocking import RaveledVars
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
from pymc.step_methods.arraystep import ArrayStepShared
from pymc.step_methods.compound import Competence
from pymc.util import get_value_vars_from_user_vars

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp._graph import KERNEL_MODE
from pymc_unbounded_dp.kernels import independence as kernel
from pymc_unbounded_dp.kernels import interweave as rw

__all__ = ["IndependenceMetropolis"]

#: The most independence moves per iteration (and the number while tuning).
MAX_MOVES = 10
#: The rest of an iteration (the latent sums' collapsed sweep and PyMC's bookkeeping), in
#: log-densities of this step: ~4 ms against 0.8 ms on the regression at 1e8 (measured).
OTHER_COST = 5.0
#: Random-walk moves per iteration where they are made.
RANDOM_WALK_MOVES = 3
#: Independence acceptance (mean over a tuning window) from which no random-walk moves are made.
RANDOM_WALK_OFF = 0.3


class IndependenceMetropolis(ArrayStepShared):
    """Independence Metropolis on continuous parameters with a proposal fitted in tuning.

    Parameters
    ----------
    vars : list, optional
        Continuous value variables to move (default: all of the model's).
    model : pm.Model, optional
    moves : int, optional
        Independence moves per iteration (each costs one log-density). Default: the number that
        makes the most effective draws per unit of cost at the recent acceptance rate (four at a
        rate of 0.5, at most ten), set at each refit during tuning and, for the draws, from the
        last half of tuning. The rule reads acceptance rates, not timings, so seeds reproduce.
    random_walk_moves : int, optional
        Random-walk moves per iteration, after the independence moves. Default:
        ``RANDOM_WALK_MOVES`` in the first tuning window and wherever the independence moves
        accept less than ``RANDOM_WALK_OFF``, else 0 (set per tuning window, and for the draws
        from the last half of tuning; rates, not timings). ``0`` turns them off.
    refit_interval : int, default 100
        During tuning, refit the proposal to the last half of the tuning draws every this many
        iterations (the first proposal is a Laplace fit at the mode; a refit whose draws barely
        moved fits at the mode again). After tuning it is fixed.
    df : float, default 12
        Degrees of freedom of the multivariate-t proposal.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     _ = pm.Normal("y", mu, 1.0, observed=[0.3, -0.2, 0.5])
    ...     step = pmdp.IndependenceMetropolis()
    ...     idata = pm.sample(200, tune=200, step=step, chains=1, random_seed=1, progressbar=False,
    ...                       compute_convergence_checks=False)
    >>> bool(idata.sample_stats["independence_accept"].mean() > 0.5)
    True
    """

    name = "independence_metropolis"
    default_blocked = True
    stats_dtypes_shapes = {
        "independence_accept": (np.float64, []),
        "independence_accepted": (bool, []),
        "independence_moves": (np.int64, []),
        "random_walk_accept": (np.float64, []),
        "random_walk_moves": (np.int64, []),
        "tune": (bool, []),
    }

    def __init__(
        self,
        vars=None,
        model: pm.Model | None = None,
        moves: int | None = None,
        random_walk_moves: int | None = None,
        refit_interval: int = 100,
        df: float = kernel.DEGREES_OF_FREEDOM,
        blocked: bool = True,
        rng=None,
        initial_point: dict | None = None,
        compile_kwargs: dict | None = None,
    ):
        model = modelcontext(model)
        checked = [("refit_interval", refit_interval, 2)]
        if moves is not None:
            checked.append(("moves", moves, 1))
        if random_walk_moves is not None:
            checked.append(("random_walk_moves", random_walk_moves, 0))
        for name, value, least in checked:
            check_integer(value, name, minimum=least)
        if not df > 2:
            raise ValueError(f"`df` must be above 2 (a proposal with a covariance), got {df!r}.")
        if initial_point is None:
            initial_point = model.initial_point()
        vars = (
            model.continuous_value_vars
            if vars is None
            else get_value_vars_from_user_vars(vars, model)
        )
        discrete = [v.name for v in vars if not v.dtype.startswith("float")]
        if discrete:
            raise ValueError(
                f"IndependenceMetropolis moves continuous variables only; got {discrete}."
            )
        shared = make_shared_replacements(initial_point, vars, model)
        [logp], inarray = join_nonshared_inputs(initial_point, [model.logp()], vars, shared)
        options = {"mode": KERNEL_MODE, **(compile_kwargs or {})}
        self._log_density = compile_pymc([inarray], logp, **options)
        self._log_density.trust_input = True
        self._fixed_moves = None if moves is None else int(moves)
        self._fixed_walk = None if random_walk_moves is None else int(random_walk_moves)
        self.refit_interval = int(refit_interval)
        self.df = float(df)
        self._walk_dimension = sum(int(np.prod(initial_point[v.name].shape)) for v in vars)
        self.reset_tuning()
        super().__init__(vars, shared, blocked=blocked, rng=rng)

    def reset_tuning(self) -> None:
        """The tuning state of a new chain (PyMC also reuses the step across the chains it runs
        in one process)."""
        self.tune = True
        self._proposal: kernel.Proposal | None = None
        self._tuning_draws: list[np.ndarray] = []
        self._tuning_acceptance: list[float] = []
        self.moves = MAX_MOVES if self._fixed_moves is None else self._fixed_moves
        self.walk_moves = RANDOM_WALK_MOVES if self._fixed_walk is None else self._fixed_walk
        self._walk_log_scale = np.log(2.38 / np.sqrt(max(self._walk_dimension, 1)))
        self._walk_updates = 0

    @staticmethod
    def _moves_for(rates: list[float]) -> int:
        """The moves per iteration that make the most effective draws per unit of cost at the
        mean per-move acceptance ``rates``: with ``k`` moves the chain moves with probability
        ``p = 1 - (1 - rate)^k`` to a near-independent draw, so it makes about ``p / (2 - p)``
        effective draws per iteration (lag-1 autocorrelation ``1 - p``), at the cost of ``k``
        log-densities plus :data:`OTHER_COST` for the rest of the iteration."""
        rate = float(np.mean(rates)) if rates else 0.0
        if rate <= 0.0:
            return MAX_MOVES
        moves = np.arange(1, MAX_MOVES + 1)
        moved = 1.0 - (1.0 - min(rate, 1.0)) ** moves
        return int(moves[np.argmax(moved / (2.0 - moved) / (moves + OTHER_COST))])

    @staticmethod
    def _walk_moves_for(rates: list[float]) -> int:
        """Random-walk moves where the independence moves accept too rarely."""
        rate = float(np.mean(rates)) if rates else 0.0
        return 0 if rate >= RANDOM_WALK_OFF else RANDOM_WALK_MOVES

    @staticmethod
    def competence(var, has_grad):
        return Competence.INCOMPATIBLE  # assigned by the sums level, never by PyMC

    def _density(self, x: np.ndarray) -> float:
        return float(self._log_density(np.asarray(x, dtype=self._dtype)))

    def _fit(self, position: np.ndarray) -> kernel.Proposal:
        least = max(self.refit_interval, 2 * position.shape[0] + 2)
        if len(self._tuning_draws) >= least:
            draws = np.array(self._tuning_draws[len(self._tuning_draws) // 2 :])
            if len(np.unique(draws, axis=0)) >= 2 * position.shape[0] + 2:  # they moved
                return kernel.moment_fit(draws, self.df)
        try:
            return kernel.laplace_fit(position, self._density, self.df)
        except ValueError as error:
            raise ValueError(
                f"IndependenceMetropolis: {error} (the parameters' target given the latent sums "
                "must have a mode); pass a parameter step such as pm.Slice() instead."
            ) from None

    def astep(self, q0: RaveledVars):
        self._dtype = q0.data.dtype
        position = q0.data.astype(np.float64)
        refit = self._proposal is None or (
            self.tune and self._tuning_draws and len(self._tuning_draws) % self.refit_interval == 0
        )
        if refit:
            self._proposal = self._fit(position)
            window = self._tuning_acceptance[-self.refit_interval :]
            if self._fixed_moves is None and window:
                self.moves = self._moves_for(window)
            if self._fixed_walk is None and window:
                self.walk_moves = self._walk_moves_for(window)
        if not self.tune and self._tuning_acceptance:
            half = self._tuning_acceptance[len(self._tuning_acceptance) // 2 :]
            if self._fixed_moves is None:
                self.moves = self._moves_for(half)
            if self._fixed_walk is None:
                self.walk_moves = self._walk_moves_for(half)
            self._tuning_acceptance = []
        state = kernel.IndependenceState(position, self._density(position))
        acceptance, accepted = 0.0, False
        for _ in range(self.moves):
            state, info = kernel.step(self.rng, state, self._density, self._proposal)
            acceptance, accepted = acceptance + info.acceptance, accepted or info.accepted
        state, walk_accept = self._random_walk(state)
        if self.tune:
            self._tuning_draws.append(state.position.copy())
            self._tuning_acceptance.append(acceptance / self.moves)
        stats = {
            "independence_accept": acceptance / self.moves,
            "independence_accepted": accepted,
            "independence_moves": self.moves,
            "random_walk_accept": walk_accept,
            "random_walk_moves": self.walk_moves,
            "tune": self.tune,
        }
        return RaveledVars(state.position.astype(self._dtype), q0.point_map_info), [stats]

    def _random_walk(self, state: kernel.IndependenceState):
        """The random-walk moves (proposal's shape, tuned scale): the new state and their mean
        acceptance probability (0.0 when none are made, as every acceptance stat)."""
        if self.walk_moves == 0:
            return state, 0.0
        params = rw.RWParams(chol=self._proposal.chol, scale=float(np.exp(self._walk_log_scale)))
        walk = rw.RWState(state.position, state.log_density)
        walk, info = rw.step(
            self.rng, walk, lambda x: (self._density(x), None), params, self.walk_moves
        )
        rate = info.accept_probability / info.proposed
        if self.tune:  # Robbins-Monro on the log scale, towards rw.TARGET_ACCEPT
            self._walk_updates += 1
            self._walk_log_scale += (rate - rw.TARGET_ACCEPT) / self._walk_updates**0.6
        return kernel.IndependenceState(walk.position, walk.log_density), rate
