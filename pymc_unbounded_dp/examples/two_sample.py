"""Two-sample comparison from privatized releases: a treatment arm and a control arm.

Each arm is its own table of records with its own noisy count and its own noisy sums. The curator
holds a continuous outcome ``y`` per person, clamps it to ``[lower, upper]`` and releases, for each
arm separately,

* ``s = (sum_i c_i, sum_i c_i^2) + Laplace(Delta / epsilon_s)`` per coordinate, with
  ``c_i = clip(y_i, lower, upper)`` and ``Delta = max(|lower|, |upper|) + max(lower^2, upper^2)``,
  the L1 change of the 2-vector when one person is added or removed (unbounded DP);
* ``n_dp = n + DiscreteLaplace(1 / epsilon_n)``.

The arms hold different people, so by parallel composition each person's guarantee is
``epsilon_s + epsilon_n`` for the whole release.

The analyst's model::

    mu_control ~ N(0, mu_sd),  delta ~ N(0, delta_sd),  sigma ~ HalfNormal(sigma_sd)
    n_control, n_treatment: latent, flat on n >= 0 (one pmdp.SampleSize per arm)
    y_control,i ~ N(mu_control, sigma),  y_treatment,i ~ N(mu_control + delta, sigma)

and the release is modelled with the same clamping inside :func:`pmdp.PrivatizedSum
<pymc_unbounded_dp.PrivatizedSum>`, one per arm. ``delta``, the difference of the arms' means, is
the quantity of interest; ``sigma`` is shared by the arms.

Examples
--------
>>> from pymc_unbounded_dp.examples import two_sample
>>> data = two_sample.simulate_two_sample(n_control=150, n_treatment=120, delta=0.8, seed=1)
>>> release = two_sample.privatize_two_sample(data, epsilon_s=1.0, epsilon_n=0.5, seed=2)
>>> release.sensitivity
20.0
>>> model = two_sample.two_sample_model(release)
>>> sorted(v.name for v in model.free_RVs)
['delta', 'mu_control', 'n_control', 'n_treatment', 'sigma']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp.blocks import PrivatizedSum, Records, SampleSize
from pymc_unbounded_dp.examples._release import LaplaceBudgets
from pymc_unbounded_dp.mechanisms import DiscreteLaplace, Laplace

__all__ = [
    "ARMS",
    "ArmRelease",
    "TwoSampleData",
    "TwoSampleRelease",
    "clamped_sensitivity",
    "privatize_two_sample",
    "simulate_two_sample",
    "two_sample_model",
    "two_sample_statistics",
]

#: The arms, in the order of the model's tables.
ARMS = ("control", "treatment")


@dataclass(frozen=True)
class TwoSampleData:
    """Confidential outcomes of the two arms and the values they were simulated from.

    Attributes
    ----------
    control, treatment : numpy.ndarray
        One outcome per person (1-d).
    mu_control, delta, sigma : float
        The true control mean, treatment-minus-control difference and common standard deviation.
    """

    control: np.ndarray
    treatment: np.ndarray
    mu_control: float
    delta: float
    sigma: float

    @property
    def n(self) -> dict[str, int]:
        """The true number of people per arm."""
        return {arm: int(np.shape(getattr(self, arm))[0]) for arm in ARMS}


@dataclass(frozen=True)
class ArmRelease:
    """What is published for one arm: the noisy sums ``(sum c, sum c^2)`` and ``n_dp``.

    ``n`` is the true count, kept for simulation studies; the unbounded model never reads it.
    """

    values: np.ndarray
    n_dp: int
    n: int = field(repr=False)


@dataclass(frozen=True)
class TwoSampleRelease(LaplaceBudgets):
    """The releases of both arms, the clamping bounds and the budgets.

    Attributes
    ----------
    control, treatment : ArmRelease
    lower, upper : float
        The clamping bounds of the outcome.
    epsilon_s : float
        Budget of each arm's sums (Laplace, L1 sensitivity :attr:`sensitivity`).
    epsilon_n : float
        Budget of each arm's count (discrete Laplace, sensitivity 1).
    """

    control: ArmRelease
    treatment: ArmRelease
    lower: float
    upper: float
    epsilon_s: float
    epsilon_n: float

    @property
    def sensitivity(self) -> float:
        """L1 sensitivity of ``(c, c^2)``, see :func:`clamped_sensitivity`."""
        return clamped_sensitivity(self.lower, self.upper)

    def arm(self, name: str) -> ArmRelease:
        """The release of arm ``name`` (``"control"`` or ``"treatment"``)."""
        if name not in ARMS:
            raise ValueError(f"TwoSampleRelease.arm: `name` must be one of {ARMS}, got {name!r}.")
        return getattr(self, name)


def clamped_sensitivity(lower: float, upper: float) -> float:
    """L1 sensitivity of one person's ``(c, c^2)``, ``c`` in ``[lower, upper]``.

    Adding or removing a person changes the sums by their own ``(c, c^2)``, at most
    ``max(|lower|, |upper|) + max(lower^2, upper^2)`` in L1.

    Examples
    --------
    >>> clamped_sensitivity(-4.0, 4.0)
    20.0
    """
    bound = max(abs(float(lower)), abs(float(upper)))
    return bound + bound**2


def simulate_two_sample(
    n_control: int = 200,
    n_treatment: int = 200,
    mu_control: float = 0.0,
    delta: float = 0.5,
    sigma: float = 1.0,
    seed=None,
) -> TwoSampleData:
    """Confidential stand-in data: ``N(mu_control, sigma)`` and ``N(mu_control + delta, sigma)``.

    Parameters
    ----------
    n_control, n_treatment : int
        People per arm.
    mu_control, delta, sigma : float
        Control mean, treatment-minus-control difference, common standard deviation (> 0).
    seed : int or numpy.random.Generator, optional

    Examples
    --------
    >>> data = simulate_two_sample(n_control=10, n_treatment=12, seed=0)
    >>> data.n
    {'control': 10, 'treatment': 12}
    """
    for arg, value in (("n_control", n_control), ("n_treatment", n_treatment)):
        check_integer(value, arg, "simulate_two_sample", minimum=0)
    if not sigma > 0:
        raise ValueError(f"simulate_two_sample: `sigma` must be positive, got {sigma!r}.")
    rng = np.random.default_rng(seed)
    control = rng.normal(mu_control, sigma, size=int(n_control))
    treatment = rng.normal(mu_control + delta, sigma, size=int(n_treatment))
    return TwoSampleData(control, treatment, float(mu_control), float(delta), float(sigma))


def two_sample_statistics(y: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """The curator's exact sums of one arm, ``(sum c_i, sum c_i^2)`` with ``c = clip(y, lower, upper)``.

    Examples
    --------
    >>> two_sample_statistics(np.array([-5.0, 1.0, 2.0]), -4.0, 4.0)
    array([-1., 21.])
    """
    c = np.clip(np.asarray(y, dtype=float), lower, upper)
    return np.array([c.sum(), (c**2).sum()])


def privatize_two_sample(
    data: TwoSampleData,
    epsilon_s: float = 1.0,
    epsilon_n: float = 0.5,
    lower: float = -4.0,
    upper: float = 4.0,
    seed=None,
) -> TwoSampleRelease:
    """Release each arm's clamped sums (Laplace) and count (discrete Laplace), seeded.

    The noise comes from :meth:`Mechanism.simulate <pymc_unbounded_dp.Mechanism.simulate>`: seeded
    NumPy noise **for simulation studies only**. A real release would use
    ``mechanism.release(...)`` (exact arithmetic, a cryptographically secure generator).

    Parameters
    ----------
    data : TwoSampleData
    epsilon_s, epsilon_n : float
        Budgets of each arm's sums and count (> 0).
    lower, upper : float
        Clamping bounds of the outcome, ``lower < upper``.
    seed : int, numpy.random.SeedSequence or numpy.random.Generator, optional

    Examples
    --------
    >>> data = simulate_two_sample(n_control=50, n_treatment=50, seed=0)
    >>> release = privatize_two_sample(data, epsilon_s=2.0, epsilon_n=1.0, seed=1)
    >>> release.control.values.shape, release.mechanism.scale
    ((2,), 10.0)
    """
    if not lower < upper:
        raise ValueError(f"privatize_two_sample: need `lower` < `upper`, got {lower!r}, {upper!r}.")
    mechanism = Laplace(epsilon=epsilon_s, sensitivity=clamped_sensitivity(lower, upper))
    count_mechanism = DiscreteLaplace(epsilon=epsilon_n)
    if isinstance(seed, np.random.Generator):
        seed = int(seed.integers(2**63))
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    arms = {}
    for arm, child in zip(ARMS, root.spawn(len(ARMS)), strict=True):
        s_seed, n_seed = child.spawn(2)
        y = getattr(data, arm)
        noise = mechanism.simulate(2, random_seed=np.random.default_rng(s_seed))
        n_noise = count_mechanism.simulate(random_seed=np.random.default_rng(n_seed))
        arms[arm] = ArmRelease(
            values=two_sample_statistics(y, lower, upper) + noise,
            n_dp=int(len(y) + int(n_noise)),
            n=len(y),
        )
    return TwoSampleRelease(
        control=arms["control"],
        treatment=arms["treatment"],
        lower=float(lower),
        upper=float(upper),
        epsilon_s=float(epsilon_s),
        epsilon_n=float(epsilon_n),
    )


def two_sample_model(
    release: TwoSampleRelease,
    *,
    mu_sd: float = 5.0,
    delta_sd: float = 2.0,
    sigma_sd: float = 2.0,
    n_prior=None,
) -> pm.Model:
    """The two-arm model of :mod:`this example <pymc_unbounded_dp.examples.two_sample>`.

    Two tables: ``y_control`` with its count ``n_control`` (``SampleSize``; count release
    ``n_control_dp``) and sums ``s_control``; ``y_treatment`` with ``n_treatment`` and
    ``s_treatment``. The parameters ``mu_control``, ``delta`` and ``sigma`` are shared;
    ``mu_treatment = mu_control + delta`` is a deterministic.

    Parameters
    ----------
    release : TwoSampleRelease
    mu_sd, delta_sd, sigma_sd : float
        Prior scales: ``mu_control ~ N(0, mu_sd)``, ``delta ~ N(0, delta_sd)``,
        ``sigma ~ HalfNormal(sigma_sd)``.
    n_prior : callable, optional
        ``n_prior(arm)`` returns an unregistered PyMC discrete distribution, the prior of that
        arm's ``n`` (``None``: flat on ``n >= 0`` for both arms).

    Returns
    -------
    pymc.Model

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> data = simulate_two_sample(n_control=60, n_treatment=60, delta=1.0, seed=3)
    >>> release = privatize_two_sample(data, epsilon_s=2.0, epsilon_n=1.0, seed=4)
    >>> with two_sample_model(release):
    ...     idata = pmdp.sample(draws=50, tune=50, chains=1, random_seed=5,
    ...                         progressbar=False, compute_convergence_checks=False)
    >>> sorted(idata["posterior"].data_vars)
    ['delta', 'mu_control', 'mu_treatment', 'n_control', 'n_treatment', 'sigma']
    """
    with pm.Model() as model:
        mu_control = pm.Normal("mu_control", 0.0, mu_sd)
        delta = pm.Normal("delta", 0.0, delta_sd)
        sigma = pm.HalfNormal("sigma", sigma_sd)
        means = {
            "control": mu_control,
            "treatment": pm.Deterministic("mu_treatment", mu_control + delta),
        }
        for arm in ARMS:
            arm_release = release.arm(arm)
            n = SampleSize(
                f"n_{arm}",
                n_dp=arm_release.n_dp,
                mechanism=release.n_mechanism,
                prior=None if n_prior is None else n_prior(arm),
            )
            y = Records(f"y_{arm}", pm.Normal.dist(means[arm], sigma), n=n)
            c = pt.clip(y, release.lower, release.upper)
            PrivatizedSum(
                f"s_{arm}",
                pt.stack([c, c**2], axis=1),
                release.mechanism,
                observed=arm_release.values,
            )
    return model
