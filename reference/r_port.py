r"""A plain NumPy reference sampler for the unbounded-DP linear regression of the paper (§6.1).

This is the readable oracle that the benchmarks compare against and that ``tests/test_reference.py``
uses to check :func:`pymc_unbounded_dp.sample` independently: no PyMC, no PyTensor, no numba, one
Python loop over the records. It mirrors the reference R algorithm of Awan, Barrientos & Ju
(arXiv 2406.06231), without its known pitfalls (see ``DESIGN.md`` §5): the privacy density uses the
right entries of ``X'X``, the chain is seeded, ``n`` is released with discrete Laplace noise.

It is not part of the installed package: it lives in ``reference/`` at the repository root, and
the tests (``tests/conftest.py``) and benchmarks (``benchmarks/run.py``) put that folder on
``sys.path`` and ``import r_port``. Its names differ on purpose from the package's regression
example (:mod:`pymc_unbounded_dp.examples.regression`), which releases the same nine sums:

* ``R_STATISTIC_NAMES`` (there ``STATISTIC_NAMES``: same order, other spellings);
* ``R_CLAMP``, ``R_SENSITIVITY`` (there ``CLAMP``, ``SENSITIVITY``);
* ``ReferenceRelease`` with ``s_dp`` (there ``RegressionRelease`` with ``values``);
* ``r_record_statistics``: per record, shape ``(m, 9)`` (there ``regression_statistics``: the
  sum, shape ``(9,)``);
* ``simulate_reference_release`` (there ``simulate_regression`` then ``privatize_regression``).

Model
-----
Records ``(x_1, x_2, y)``, ``i = 1..n``::

    x_i ~ N(mu, Phi^{-1})                      (2-dimensional)
    y_i | x_i ~ N(beta_0 + x_i' beta_{1:2}, 1 / tau)
    beta | tau ~ N(0, I_3 / tau),  tau ~ Gamma(1, rate 1)
    mu ~ N(0, I_2),  Phi ~ Wishart(2, I_2)     (density ∝ |Phi|^{(nu-3)/2} exp(-tr(Phi)/2))
    n: flat prior on {0, 1, 2, ...}

Release. Each record is clamped to ``[-5, 5]`` and divided by 5 (so every coordinate lies in
``[-1, 1]``); with ``z = (1, x_1, x_2)`` and ``v = y`` the clamped-and-rescaled values, the nine
per-record statistics are, in this order (:data:`R_STATISTIC_NAMES`)::

    X'Y:  v, x_1 v, x_2 v
    Y'Y:  v^2
    X'X:  x_1, x_2, x_1^2, x_1 x_2, x_2^2   (lower triangle and diagonal of z z' without [1, 1],
                                              column by column as R's ``lower.tri``)

released as ``s_dp = sum_i t(x_i, y_i) + Laplace(9 / epsilon_s)`` per coordinate (add/remove L1
sensitivity 9), and ``n_dp = n + DiscreteLaplace(1 / epsilon_n)``.

One iteration of :func:`reference_regression_sampler`
-----------------------------------------------------
1. ``(beta, tau) | records``: exact normal-gamma update (:func:`normal_gamma_posterior`);
2. ``mu | X, Phi``: exact normal update (:func:`mu_posterior`);
3. ``Phi | X, mu``: exact Wishart update (:func:`phi_posterior`);
4. record refresh: for each record in turn, propose a new record from the model at the current
   parameters and accept with ``exp((|r|_1 - |r + t_i - t_i*|_1) / b_s)``, ``r = s_dp - T``;
5. ``n_moves`` birth/death moves: with probability 1/2 a birth ``x* ~ f(.|theta)`` accepted with
   ``eta_s(r - t*) / eta_s(r) * eta_n(n_dp - n - 1) / eta_n(n_dp - n)``, otherwise the death of a
   uniformly chosen record with the mirror ratio (a death at ``n = 0`` is rejected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "R_CLAMP",
    "R_SENSITIVITY",
    "R_STATISTIC_NAMES",
    "ReferenceRelease",
    "mu_posterior",
    "normal_gamma_posterior",
    "phi_posterior",
    "r_record_statistics",
    "reference_regression_sampler",
    "sample_wishart",
    "simulate_reference_release",
]

#: The nine released sums, in release order.
R_STATISTIC_NAMES = (
    "sum_y",
    "sum_x1_y",
    "sum_x2_y",
    "sum_y2",
    "sum_x1",
    "sum_x2",
    "sum_x1_2",
    "sum_x1_x2",
    "sum_x2_2",
)
#: Records are clamped to ``[-R_CLAMP, R_CLAMP]`` and divided by ``R_CLAMP``.
R_CLAMP = 5.0
#: Add/remove L1 sensitivity of the nine statistics (each lies in ``[-1, 1]``).
R_SENSITIVITY = 9.0

_PRIOR_NU = 2.0  # Wishart degrees of freedom of the prior on Phi (scale matrix I)


@dataclass(frozen=True)
class ReferenceRelease:
    """A differentially private release of the regression data.

    Attributes
    ----------
    s_dp : ndarray, shape (9,)
        The noisy sums, in the order of :data:`R_STATISTIC_NAMES`.
    n_dp : int
        The noisy record count.
    epsilon_s, epsilon_n : float
        Privacy budgets of the sums (Laplace, scale ``9 / epsilon_s``) and of the count
        (discrete Laplace, scale ``1 / epsilon_n``).
    """

    s_dp: np.ndarray
    n_dp: int
    epsilon_s: float
    epsilon_n: float

    @property
    def scale_s(self) -> float:
        return R_SENSITIVITY / self.epsilon_s

    @property
    def scale_n(self) -> float:
        return 1.0 / self.epsilon_n


def r_record_statistics(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The nine per-record statistics of records ``x`` (``(m, 2)``) and ``y`` (``(m,)``): ``(m, 9)``."""
    x = np.clip(np.asarray(x, dtype=float), -R_CLAMP, R_CLAMP) / R_CLAMP
    v = np.clip(np.asarray(y, dtype=float), -R_CLAMP, R_CLAMP) / R_CLAMP
    x1, x2 = x[:, 0], x[:, 1]
    return np.stack([v, x1 * v, x2 * v, v * v, x1, x2, x1 * x1, x1 * x2, x2 * x2], axis=1)


def _discrete_laplace(rng: np.random.Generator, scale: float) -> int:
    """One draw of the two-sided geometric distribution ``P(k) ∝ exp(-|k| / scale)``."""
    p = -math.expm1(-1.0 / scale)
    return int(rng.geometric(p) - rng.geometric(p))


def simulate_reference_release(
    n: int = 1000,
    epsilon_s: float = 1.0,
    epsilon_n: float = 0.5,
    random_seed=None,
    mu=(1.0, -1.0),
    beta=(0.0, -1.0, 1.0),
    tau: float = 1.0,
) -> tuple[ReferenceRelease, dict]:
    """Simulate the data of the paper's §6.1 and release it (seeded; for studies, not for publishing).

    Data: ``x ~ N(mu, I)``, ``y = beta_0 + x' beta_{1:2} + N(0, 1/tau)``. Returns the release and a
    dict with the confidential data and their exact statistics (``x``, ``y``, ``T``, ``n``).
    """
    rng = np.random.default_rng(random_seed)
    beta = np.asarray(beta, dtype=float)
    x = np.asarray(mu, dtype=float) + rng.standard_normal((n, 2))
    y = beta[0] + x @ beta[1:] + rng.standard_normal(n) / math.sqrt(tau)
    total = r_record_statistics(x, y).sum(axis=0)
    s_dp = total + rng.laplace(0.0, R_SENSITIVITY / epsilon_s, size=9)
    n_dp = n + _discrete_laplace(rng, 1.0 / epsilon_n)
    release = ReferenceRelease(s_dp=s_dp, n_dp=n_dp, epsilon_s=epsilon_s, epsilon_n=epsilon_n)
    return release, {"x": x, "y": y, "T": total, "n": n}


# --------------------------------------------------------------------------------------------------
# exact conditional updates of the parameters given complete records
# --------------------------------------------------------------------------------------------------
def normal_gamma_posterior(
    x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Posterior of ``(beta, tau)`` given records, under ``beta | tau ~ N(0, I/tau)``, ``tau ~ Gamma(1, 1)``.

    Returns ``(mean, precision, shape, rate)``: ``tau ~ Gamma(shape, rate)`` and
    ``beta | tau ~ N(mean, precision^{-1} / tau)``, with ``Z = [1, x]``::

        precision = I + Z'Z,   mean = precision^{-1} Z'y,
        shape = 1 + n/2,       rate = 1 + (y'y - mean' precision mean) / 2
    """
    z = np.column_stack([np.ones(len(y)), x])
    precision = np.eye(3) + z.T @ z
    mean = np.linalg.solve(precision, z.T @ y)
    shape = 1.0 + 0.5 * len(y)
    rate = 1.0 + 0.5 * (y @ y - mean @ precision @ mean)
    return mean, precision, shape, rate


def mu_posterior(x: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Posterior of ``mu`` given ``x`` and ``Phi`` under ``mu ~ N(0, I)``: ``(mean, precision)``.

    ``precision = I + n Phi``, ``mean = precision^{-1} Phi sum_i x_i``.
    """
    precision = np.eye(2) + len(x) * phi
    mean = np.linalg.solve(precision, phi @ x.sum(axis=0))
    return mean, precision


def phi_posterior(x: np.ndarray, mu: np.ndarray) -> tuple[float, np.ndarray]:
    """Posterior of ``Phi`` given ``x`` and ``mu`` under ``Phi ~ Wishart(2, I)``: ``(nu, scale)``.

    ``Phi | x, mu ~ Wishart(2 + n, (I + S)^{-1})`` with ``S = sum_i (x_i - mu)(x_i - mu)'``.
    """
    centred = x - mu
    return _PRIOR_NU + len(x), np.linalg.inv(np.eye(2) + centred.T @ centred)


def sample_wishart(rng: np.random.Generator, nu: float, scale: np.ndarray) -> np.ndarray:
    """One draw of ``Wishart(nu, scale)`` by the Bartlett decomposition (``nu > p - 1``)."""
    p = scale.shape[0]
    chol = np.linalg.cholesky(scale)
    a = np.zeros((p, p))
    for i in range(p):
        a[i, i] = math.sqrt(rng.chisquare(nu - i))
        a[i, :i] = rng.standard_normal(i)
    la = chol @ a
    return la @ la.T


def _sample_mvnormal_precision(rng, mean: np.ndarray, precision: np.ndarray) -> np.ndarray:
    """One draw of ``N(mean, precision^{-1})``."""
    chol = np.linalg.cholesky(precision)  # precision = L L'  =>  L'^{-1} z ~ N(0, precision^{-1})
    return mean + np.linalg.solve(chol.T, rng.standard_normal(len(mean)))


# --------------------------------------------------------------------------------------------------
# the sampler
# --------------------------------------------------------------------------------------------------
@dataclass
class _Parameters:
    beta: np.ndarray
    tau: float
    mu: np.ndarray
    phi: np.ndarray

    def draw_records(self, rng: np.random.Generator, m: int) -> tuple[np.ndarray, np.ndarray]:
        """``m`` fresh records from the model: ``x ~ N(mu, Phi^{-1})``, ``y | x``."""
        chol = np.linalg.cholesky(self.phi)
        x = self.mu + np.linalg.solve(chol.T, rng.standard_normal((2, m))).T
        y = self.beta[0] + x @ self.beta[1:] + rng.standard_normal(m) / math.sqrt(self.tau)
        return x, y


def _with_room(x, y, t, rows: int):
    """Copies of the record arrays with at least ``rows`` rows (the extra rows unused)."""
    rows = max(rows, len(y), 16)
    bx, by, bt = np.empty((rows, 2)), np.empty(rows), np.empty((rows, 9))
    bx[: len(y)], by[: len(y)], bt[: len(y)] = x, y, t
    return bx, by, bt


def _gibbs_parameters(rng: np.random.Generator, x: np.ndarray, y: np.ndarray, theta: _Parameters):
    """Steps 1-3: exact conditional draws of (beta, tau), mu and Phi given the records."""
    mean, precision, shape, rate = normal_gamma_posterior(x, y)
    tau = rng.gamma(shape, 1.0 / rate)
    beta = _sample_mvnormal_precision(rng, mean, tau * precision)
    mu_mean, mu_precision = mu_posterior(x, theta.phi)
    mu = _sample_mvnormal_precision(rng, mu_mean, mu_precision)
    nu, scale = phi_posterior(x, mu)
    phi = sample_wishart(rng, nu, scale)
    return _Parameters(beta=beta, tau=float(tau), mu=mu, phi=phi)


def reference_regression_sampler(
    release: ReferenceRelease,
    n_iter: int,
    n_moves: int | None = None,
    random_seed=None,
    initial: dict | None = None,
) -> dict[str, np.ndarray]:
    """Run the reference data-augmentation / birth-death sampler for ``n_iter`` iterations.

    Parameters
    ----------
    release : ReferenceRelease
    n_iter : int
        Iterations (every one is returned; discard a burn-in yourself).
    n_moves : int, optional
        Birth/death moves per iteration; default ``max(10, n0)`` (``n0`` the starting ``n``), as
        in :class:`pymc_unbounded_dp.ReversibleJump`.
    random_seed : int or numpy.random.Generator, optional
    initial : dict, optional
        Starting values ``beta``, ``tau``, ``mu``, ``Phi``, ``n``; defaults ``beta = 0``,
        ``tau = 1``, ``mu = 0``, ``Phi = I``, ``n = max(n_dp, 0)``. The starting records are drawn
        from the model at the starting parameters.

    Returns
    -------
    dict
        ``beta`` ``(n_iter, 3)``, ``tau``, ``mu`` ``(n_iter, 2)``, ``Phi`` ``(n_iter, 2, 2)``,
        ``n`` and the per-iteration acceptance rates ``refresh_accept_rate``,
        ``birth_accept_rate`` and ``death_accept_rate`` (NaN without such proposals).

    Examples
    --------
    >>> from r_port import *
    >>> release, _ = simulate_reference_release(n=50, random_seed=1)
    >>> draws = reference_regression_sampler(release, n_iter=20, random_seed=2)
    >>> draws["beta"].shape, draws["n"].shape
    ((20, 3), (20,))
    """
    rng = np.random.default_rng(random_seed)
    initial = dict(initial or {})
    theta = _Parameters(
        beta=np.asarray(initial.get("beta", np.zeros(3)), dtype=float),
        tau=float(initial.get("tau", 1.0)),
        mu=np.asarray(initial.get("mu", np.zeros(2)), dtype=float),
        phi=np.asarray(initial.get("Phi", np.eye(2)), dtype=float),
    )
    n = int(initial.get("n", max(release.n_dp, 0)))
    if n_moves is None:
        n_moves = max(10, n)
    s_dp = np.asarray(release.s_dp, dtype=float)
    b_s, b_n, n_dp = release.scale_s, release.scale_n, release.n_dp

    def log_eta_s(residual):  # Laplace log-density of the sums' noise, up to a constant
        return -np.abs(residual).sum() / b_s

    def log_eta_n(count):  # discrete Laplace log-pmf of the count's noise, up to a constant
        return -abs(n_dp - count) / b_n

    # The records: buffers with spare rows, the first n rows are the current records.
    x, y = theta.draw_records(rng, n)
    x, y, t = _with_room(x, y, r_record_statistics(x, y), 2 * n + n_moves)

    out = {
        "beta": np.empty((n_iter, 3)),
        "tau": np.empty(n_iter),
        "mu": np.empty((n_iter, 2)),
        "Phi": np.empty((n_iter, 2, 2)),
        "n": np.empty(n_iter, dtype=np.int64),
        "refresh_accept_rate": np.empty(n_iter),
        "birth_accept_rate": np.empty(n_iter),
        "death_accept_rate": np.empty(n_iter),
    }
    for it in range(n_iter):
        # 1-3. parameters given the records
        theta = _gibbs_parameters(rng, x[:n], y[:n], theta)

        # 4. record refresh, systematic scan, proposals from the model
        new_x, new_y = theta.draw_records(rng, n)
        new_t = r_record_statistics(new_x, new_y)
        residual = s_dp - t[:n].sum(axis=0)
        current = log_eta_s(residual)
        accepted = 0
        for i in range(n):
            trial = residual + t[i] - new_t[i]
            trial_lp = log_eta_s(trial)
            if math.log(rng.random()) < trial_lp - current:
                x[i], y[i], t[i] = new_x[i], new_y[i], new_t[i]
                residual, current = trial, trial_lp
                accepted += 1

        # 5. birth/death moves over n (flat prior on n >= 0: no prior ratio); move k may give
        # birth to candidate k, drawn from the model
        born_x, born_y = theta.draw_records(rng, n_moves)
        born_t = r_record_statistics(born_x, born_y)
        if len(y) < n + n_moves:
            x, y, t = _with_room(x[:n], y[:n], t[:n], 2 * (n + n_moves))
        births = [0, 0]  # accepted, proposed
        deaths = [0, 0]
        for k in range(n_moves):
            if rng.random() < 0.5:
                births[1] += 1
                trial = residual - born_t[k]
                log_ratio = log_eta_s(trial) - current + log_eta_n(n + 1) - log_eta_n(n)
                if math.log(rng.random()) < log_ratio:
                    # the newborn takes a uniformly random slot, whose record moves to the end:
                    # the order stays exchangeable, as the positional refresh scan requires
                    j = int(rng.integers(n + 1))
                    x[n], y[n], t[n] = x[j], y[j], t[j]
                    x[j], y[j], t[j] = born_x[k], born_y[k], born_t[k]
                    residual, current = trial, log_eta_s(trial)
                    n += 1
                    births[0] += 1
            else:
                deaths[1] += 1
                if n == 0:
                    continue
                i = int(rng.integers(n))
                trial = residual + t[i]
                log_ratio = log_eta_s(trial) - current + log_eta_n(n - 1) - log_eta_n(n)
                if math.log(rng.random()) < log_ratio:
                    # the last record takes the place of the removed one (records are exchangeable)
                    x[i], y[i], t[i] = x[n - 1], y[n - 1], t[n - 1]
                    residual, current = trial, log_eta_s(trial)
                    n -= 1
                    deaths[0] += 1

        out["beta"][it], out["tau"][it], out["mu"][it], out["Phi"][it] = (
            theta.beta,
            theta.tau,
            theta.mu,
            theta.phi,
        )
        out["n"][it] = n
        out["refresh_accept_rate"][it] = accepted / len(new_t) if len(new_t) else np.nan
        out["birth_accept_rate"][it] = births[0] / births[1] if births[1] else np.nan
        out["death_accept_rate"][it] = deaths[0] / deaths[1] if deaths[1] else np.nan
    return out
