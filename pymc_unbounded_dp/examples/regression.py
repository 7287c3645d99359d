"""Linear regression from privatized sufficient statistics (Section 6.1 of Awan, Barrientos & Ju).

The curator holds ``n`` records ``(x_i1, x_i2, y_i)``. It clamps each coordinate to ``[-5, 5]``,
rescales it to ``[-1, 1]`` (divide by 5) and, with the design row ``d_i = (1, x_i1, x_i2)``, releases
the upper-left-free parts of ``[X Y]'[X Y]``:

====  ==================  =================================
 #     statistic           entry
====  ==================  =================================
 0     ``sum y``           ``X'Y[0]`` (intercept column)
 1     ``sum x1 y``        ``X'Y[1]``
 2     ``sum x2 y``        ``X'Y[2]``
 3     ``sum y^2``         ``Y'Y``
 4     ``sum x1``          ``X'X[1, 0]``
 5     ``sum x2``          ``X'X[2, 0]``
 6     ``sum x1^2``        ``X'X[1, 1]``
 7     ``sum x1 x2``       ``X'X[2, 1]``
 8     ``sum x2^2``        ``X'X[2, 2]``
====  ==================  =================================

(``X'X[0, 0] = n`` is not in the sum: under unbounded DP it is released separately as ``n_dp``.)
Each per-record coordinate lies in ``[-1, 1]``, so adding or removing one record changes the
9-vector by at most 9 in L1: every number gets ``Laplace(9 / epsilon_s)`` noise
(:class:`pmdp.Laplace(epsilon=epsilon_s, sensitivity=9) <pymc_unbounded_dp.Laplace>`), and
``n_dp = n + DiscreteLaplace(1 / epsilon_n)``.

The analyst's model (all on the original, unclamped scale)::

    mu ~ N(0, I_2),  Phi ~ Wishart(2, I_2),  tau ~ Gamma(1, 1),  beta | tau ~ N(0, I_3 / tau)
    x_i ~ N(mu, Phi^-1),  y_i | x_i ~ N(beta_0 + x_i' beta_{1:2}, 1 / tau)

and the release is modelled with the *same* clamp-and-rescale inside :func:`pmdp.PrivatizedSum
<pymc_unbounded_dp.PrivatizedSum>`. ``Phi`` is written through its Bartlett decomposition
(``Phi = A A'``, ``A = [[sqrt(c1), 0], [z, sqrt(c2)]]``, ``c1 ~ chi2(2)``, ``c2 ~ chi2(1)``,
``z ~ N(0, 1)``), which is exactly ``Wishart(2, I)`` and has unconstrained NUTS-friendly pieces.
The bivariate record ``x_i`` is declared as two :func:`pmdp.Records <pymc_unbounded_dp.Records>`,
``x1 ~ N(mu_1, Sigma_11)`` and ``x2 | x1 ~ N(mu_2 - Phi_12 / Phi_22 (x1 - mu_1), 1 / Phi_22)``:
the same joint law as ``N(mu, Phi^-1)``, with scalar log-densities (a 2x2 ``MvNormal`` per record
costs about a hundred times more per gradient with PyTensor's Python-level triangular solves).

Examples
--------
>>> from pymc_unbounded_dp.examples import regression as reg
>>> data = reg.simulate_regression(n=200, seed=1)
>>> release = reg.privatize_regression(data, epsilon_s=1.0, epsilon_n=0.5, seed=2)
>>> release.values.shape, release.sensitivity
((9,), 9.0)
>>> model = reg.regression_model(release)          # unbounded DP: n is latent
>>> sorted(model.named_vars)[:4]
['Phi', 'Phi_c1', 'Phi_c2', 'Phi_z']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_unbounded_dp.release as rl
from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp.blocks import PrivatizedSum, Records, SampleSize
from pymc_unbounded_dp.examples._release import (
    Release,
    chunked_sums,
    noisy_release,
    seed_sequence,
)

__all__ = [
    "CLAMP",
    "N_STATISTICS",
    "SENSITIVITY",
    "STATISTIC_LOWER",
    "STATISTIC_NAMES",
    "STATISTIC_UPPER",
    "TRUE_BETA",
    "TRUE_MU",
    "TRUE_TAU",
    "RegressionData",
    "RegressionRelease",
    "clamp_rescale",
    "privatize_regression",
    "regression_gibbs_step",
    "regression_model",
    "regression_plan",
    "regression_rows",
    "regression_statistic_tensor",
    "regression_statistics",
    "regression_truth",
    "simulate_regression",
    "simulate_regression_release",
]

#: Clamping bound of every coordinate (x1, x2, y); clamped values are divided by it.
CLAMP = 5.0
#: Number of released numbers.
N_STATISTICS = 9
#: Add/remove-one L1 sensitivity of the 9 released numbers (each per-record entry is in [-1, 1]).
SENSITIVITY = 9.0
STATISTIC_NAMES = (
    "sum_y",
    "sum_x1y",
    "sum_x2y",
    "sum_yy",
    "sum_x1",
    "sum_x2",
    "sum_x1x1",
    "sum_x1x2",
    "sum_x2x2",
)

#: Bounds of one record's 9 statistics (rescaled coordinates in [-1, 1]; squares in [0, 1]), in the
#: order of :data:`STATISTIC_NAMES`: the ``lower``/``upper`` of the release file
#: (:class:`pymc_unbounded_dp.release.Statistic`).
STATISTIC_LOWER = np.array([-1.0, -1.0, -1.0, 0.0, -1.0, -1.0, 0.0, -1.0, 0.0])
STATISTIC_UPPER = np.ones(N_STATISTICS)

TRUE_MU = np.array([1.0, -1.0])
TRUE_BETA = np.array([0.0, -1.0, 1.0])
TRUE_TAU = 1.0


@dataclass(frozen=True)
class RegressionData:
    """Confidential regression data: covariates ``x`` (``n x 2``) and responses ``y`` (``n``)."""

    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


class RegressionRelease(Release):
    """What the curator publishes, plus (hidden from the unbounded model) the true ``n``.

    Attributes
    ----------
    values : ndarray, shape (9,)
        The noisy statistics, ordered as :data:`STATISTIC_NAMES`.
    n_dp : int
        The noisy sample size (unbounded DP).
    epsilon_s, epsilon_n : float
        Budgets of the statistics and of the count.
    n : int
        The true number of records. Public under bounded DP (``regression_model(...,
        bounded=True)`` uses it); the unbounded model never reads it. Kept for comparisons.
    """

    sensitivity: ClassVar[float] = SENSITIVITY


def regression_truth() -> dict[str, float]:
    """The data-generating values, by the names used in the posterior (``beta[j]``, ...)."""
    truth = {f"beta[{j}]": float(b) for j, b in enumerate(TRUE_BETA)}
    truth["tau"] = TRUE_TAU
    truth.update({f"mu[{j}]": float(m) for j, m in enumerate(TRUE_MU)})
    return truth


def simulate_regression(n: int = 1000, seed=None) -> RegressionData:
    """``x ~ N((1, -1), I)``, ``y = 0 - x1 + x2 + N(0, 1)``: the paper's simulated data."""
    check_integer(n, "n", "simulate_regression", minimum=0)
    rng = np.random.default_rng(seed)
    x = rng.normal(TRUE_MU, 1.0, size=(int(n), 2))
    y = TRUE_BETA[0] + x @ TRUE_BETA[1:] + rng.normal(0.0, 1.0 / np.sqrt(TRUE_TAU), size=int(n))
    return RegressionData(x=x, y=y)


def clamp_rescale(values):
    """Clamp to ``[-5, 5]`` and rescale to ``[-1, 1]`` (NumPy arrays or PyTensor tensors)."""
    if isinstance(values, pt.TensorVariable):
        return pt.clip(values, -CLAMP, CLAMP) / CLAMP
    return np.clip(values, -CLAMP, CLAMP) / CLAMP


def _per_record(x1, x2, y, stack):
    return stack([y, x1 * y, x2 * y, y * y, x1, x2, x1 * x1, x1 * x2, x2 * x2])


def regression_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each record's 9 statistics (``n x 9``, clamped and rescaled): the rows
    :meth:`Plan.release <pymc_unbounded_dp.release.Plan.release>` takes as ``records={"s": ...}``
    under :func:`regression_plan`."""
    x = clamp_rescale(np.asarray(x, dtype=float))
    y = clamp_rescale(np.asarray(y, dtype=float))
    return _per_record(x[:, 0], x[:, 1], y, lambda cols: np.stack(cols, axis=1))


def regression_statistics(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The curator's exact 9 statistics (summed over records), before noise."""
    return regression_rows(x, y).sum(axis=0)


def regression_plan(epsilon: float = 1.5, fraction_n: float = 1 / 3):
    """The regression's release as a :class:`pymc_unbounded_dp.release.Plan`: the 9 statistics
    ``"s"`` (bounds :data:`STATISTIC_LOWER`, :data:`STATISTIC_UPPER`) and the count ``"n"``
    under add/remove neighbours, a total ``epsilon`` of which ``n`` takes ``fraction_n`` (the
    default is the demo's split, ``epsilon_s = 1``, ``epsilon_n = 0.5``).

    Examples
    --------
    >>> plan = regression_plan(1.5)
    >>> plan.mechanisms["s"].scale, round(plan.shares["n"], 6)
    (9.0, 0.5)
    """
    return rl.Plan(
        [rl.Statistic("s", STATISTIC_LOWER, STATISTIC_UPPER), rl.Count("n")],
        epsilon=epsilon,
        weights={"s": 1 - fraction_n, "n": fraction_n},
    )


def regression_statistic_tensor(x1, x2, y):
    """The per-record statistic (``n x 9``) as a PyTensor expression of the record variables."""
    x1, x2, y = (clamp_rescale(v) for v in (x1, x2, y))
    return _per_record(x1, x2, y, lambda cols: pt.stack(cols, axis=1))


def privatize_regression(
    data: RegressionData, epsilon_s: float, epsilon_n: float, seed=None
) -> RegressionRelease:
    """Release the 9 statistics with Laplace noise and ``n`` with discrete Laplace noise.

    The noise is simulated with a seeded generator (:meth:`Mechanism.simulate
    <pymc_unbounded_dp.Mechanism.simulate>`): this is for simulation studies. A real release would
    use ``mechanism.release(...)``.
    """
    return noisy_release(
        RegressionRelease, regression_statistics(data.x, data.y), data.n, epsilon_s, epsilon_n, seed
    )


def simulate_regression_release(
    n: int, epsilon_s: float, epsilon_n: float, seed=None, chunk: int = 10**6
) -> RegressionRelease:
    """The release of ``n`` records of :func:`simulate_regression`'s law, simulated ``chunk``
    records at a time: memory ``O(chunk)``, so that census sizes (``n = 1e8``) can be released.

    The records differ from ``simulate_regression(n, seed)``'s (the stream is split by chunks);
    the noise is simulated, as in :func:`privatize_regression`.

    Examples
    --------
    >>> release = simulate_regression_release(2_500, 1.0, 0.5, seed=1, chunk=1_000)
    >>> release.values.shape, release.n
    ((9,), 2500)
    """
    data_seed, release_seed = seed_sequence(seed).spawn(2)

    def statistics(size: int, child: np.random.SeedSequence) -> np.ndarray:
        part = simulate_regression(size, child)
        return regression_statistics(part.x, part.y)

    exact = chunked_sums("simulate_regression_release", n, chunk, data_seed, statistics)
    return noisy_release(RegressionRelease, exact, int(n), epsilon_s, epsilon_n, release_seed)


def regression_model(release, bounded: bool = False, n_prior=None) -> pm.Model:
    """The Bayesian model of the release (see the module docstring).

    Parameters
    ----------
    release : RegressionRelease or pymc_unbounded_dp.release.Release
        The examples' release, or a release of :func:`regression_plan` (values ``"s"`` and
        ``"n"``, modelled with ``release.privatized_sum`` and ``release.sample_size``; bounded or
        unbounded as its neighbouring relation says, ``bounded`` is then ignored).
    bounded : bool, default False
        ``True``: bounded DP, ``n = release.n`` is known and ``n_dp`` is ignored. ``False``:
        unbounded DP, ``n`` is latent with the release ``n_dp``.
    n_prior : TensorVariable, optional
        Prior of ``n`` (unbounded DP), an unregistered discrete distribution; ``None`` is flat on
        ``n >= 0``.

    Returns
    -------
    pm.Model
        Free parameters ``mu`` (2), ``Phi_c1``, ``Phi_c2``, ``Phi_z`` (``Phi`` as a
        deterministic), ``tau``, ``beta`` (3: intercept, x1, x2) and, unbounded, ``n``; records
        ``x1``, ``x2``, ``y``; the release ``s`` (and ``n_dp``).
    """
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0, shape=2)
        c1 = pm.ChiSquared("Phi_c1", nu=2)
        c2 = pm.ChiSquared("Phi_c2", nu=1)
        z = pm.Normal("Phi_z", 0.0, 1.0)
        # Phi = A A' with A = [[sqrt(c1), 0], [z, sqrt(c2)]] (Bartlett): exactly Wishart(2, I).
        p11, p12, p22 = c1, pt.sqrt(c1) * z, z**2 + c2
        pm.Deterministic("Phi", pt.stack([pt.stack([p11, p12]), pt.stack([p12, p22])]))
        tau = pm.Gamma("tau", alpha=1.0, beta=1.0)
        beta = pm.Normal("beta", 0.0, sigma=1.0 / pt.sqrt(tau), shape=3)
        published = isinstance(release, rl.Release)
        if published:
            n = release.sample_size("n", prior=n_prior)
        elif bounded:
            n = int(release.n)
        else:
            n = SampleSize("n", n_dp=release.n_dp, mechanism=release.n_mechanism, prior=n_prior)
        # x ~ N(mu, Phi^-1) written as x1 ~ N(mu1, Sigma11), x2 | x1 ~ N(mu2 - p12/p22 (x1 - mu1),
        # 1/p22): the same bivariate normal, with scalar (cheap) log-densities.
        sigma11 = pt.sqrt(p22 / (c1 * c2))  # Sigma11 = p22 / det(Phi), det(Phi) = c1 c2
        x1 = Records("x1", pm.Normal.dist(mu[0], sigma11), n=n)
        x2 = Records(
            "x2", pm.Normal.dist(mu[1] - p12 / p22 * (x1 - mu[0]), 1.0 / pt.sqrt(p22)), n=n
        )
        y = Records(
            "y", pm.Normal.dist(beta[0] + beta[1] * x1 + beta[2] * x2, 1.0 / pt.sqrt(tau)), n=n
        )
        statistic = regression_statistic_tensor(x1, x2, y)
        if published:
            release.privatized_sum("s", statistic)
        else:
            PrivatizedSum("s", statistic, release.mechanism, observed=release.values)
    return model


def regression_gibbs_step(model: pm.Model):
    """A parameter step for :func:`regression_model` drawing every parameter exactly from its
    conditional given the records (:mod:`pymc_unbounded_dp.conjugate`), in place of NUTS:
    ``(beta, tau)`` normal-gamma, ``mu | x, Phi`` normal, ``Phi | x, mu`` Wishart written back as
    the Bartlett pieces ``Phi_c1, Phi_c2, Phi_z``. Pass it as ``pmdp.sample(step=...)``.
    """
    import math

    import pymc_unbounded_dp.conjugate as conjugate

    def update(rng, records, values):
        x = np.column_stack([records["x1"], records["x2"]]).astype(float)
        y = np.asarray(records["y"], dtype=float)
        beta, tau = conjugate.normal_gamma(rng, np.column_stack([np.ones(len(y)), x]), y)
        a = np.array(
            [
                [math.sqrt(values["Phi_c1"]), 0.0],
                [float(values["Phi_z"]), math.sqrt(values["Phi_c2"])],
            ]
        )
        mu = conjugate.normal_mean(rng, x, a @ a.T)
        phi = conjugate.wishart_precision(rng, x, mu, nu=2.0)
        c, z = conjugate.bartlett_factors(phi)
        return {"beta": beta, "tau": tau, "mu": mu, "Phi_c1": c[0], "Phi_c2": c[1], "Phi_z": z[0]}

    names = ["beta", "tau", "mu", "Phi_c1", "Phi_c2", "Phi_z"]
    return conjugate.ConjugateGibbs([model[name] for name in names], update, model=model)
