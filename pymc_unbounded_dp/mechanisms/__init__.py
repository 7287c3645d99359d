r"""Additive noise mechanisms: the privacy model of a release.

A mechanism releases ``s_dp = s + e`` where ``s`` is a statistic of the confidential data and ``e``
independent noise, one draw per coordinate. Each class states

* its **input domain** (reals or integers),
* the **sensitivity** it was calibrated for (L1 for the Laplace family, L2 for the Gaussian family),
* its **privacy guarantee**, computed from scale and sensitivity (never stored),
* its **log-density** as a NumPy function and as a PyTensor expression (for inference), and
* two ways to draw noise: :meth:`Mechanism.simulate` (seeded NumPy, for simulation studies only,
  **not** for releasing private data) and :meth:`Mechanism.release` (exact arithmetic and a
  cryptographically secure generator, for publishing).

============================  ===============================================  ===================
mechanism                     density of one noise coordinate ``e``             guarantee
============================  ===============================================  ===================
:class:`Laplace`              :math:`\frac{1}{2b} e^{-|e|/b}` on the reals        :math:`\varepsilon = \Delta_1 / b`
:class:`Gaussian`             :math:`\mathcal N(0, \sigma^2)` on the reals        :math:`\rho = \Delta_2^2 / (2\sigma^2)`
:class:`DiscreteLaplace`      :math:`\tanh(\tfrac{1}{2t}) e^{-|e|/t}` on the integers  :math:`\varepsilon = \Delta_1 / t`
:class:`DiscreteGaussian`     :math:`e^{-e^2/(2\sigma^2)} / Z_\sigma` on the integers  :math:`\rho = \Delta_2^2/(2\sigma^2)`
:class:`Tulap`                :math:`\tanh(\tfrac{1}{2t}) e^{-|\mathrm{rint}(e)|/t}` on the reals  :math:`\varepsilon = \Delta_1 / t`
:class:`CustomMechanism`      user-defined (a PyTensor log-density)             stated by the user
============================  ===============================================  ===================

(epsilon-DP, or rho-zCDP as in Bun & Steinke 2016; the discrete ones follow Canonne, Kamath &
Steinke 2020; Tulap is Awan & Slavkovic 2018.) The Tulap mechanism takes an integer statistic and
releases a real number. ``docs/mechanisms.md`` has every formula, domain, guarantee and sampler.

The arguments are keyword-only (``Laplace(epsilon=1.0, sensitivity=2.0)``, ``Gaussian(rho=0.5)``):
a positional call still works but is deprecated (``FutureWarning``), since the first argument
used to be epsilon for the Laplace family and sigma for the Gaussian family. The repr shows the
guarantee, the sensitivity and the scale: ``Laplace(epsilon=1.0, sensitivity=1.0, scale=1.0)``.
Every mechanism, built-in or :class:`CustomMechanism`, simulates with one signature,
``simulate(size=None, *, rng=None)`` (``random_seed=`` is accepted as PyMC's name for ``rng``).

Releasing (:meth:`Mechanism.release`) refuses what the exact samplers cannot represent: non-finite
values, and for a statistic on the integers, values or results outside the int64 range
``[-2**63, 2**63 - 1]`` (a ``ValueError`` naming ``value``; never a wrapped integer).

Each mechanism carries its own privacy accounting, as OpenDP's measurements carry their privacy
maps: :meth:`Mechanism.privacy_map` (the :class:`~pymc_unbounded_dp.privacy.Guarantee` at a given
sensitivity), :meth:`Mechanism.calibrate` (the scale for a budget), :meth:`Mechanism.tail_width`
and :meth:`Mechanism.budget_for_mean_abs`; the release side, the model's sensitivity check and the
plug-in diagnostic call them. The modules: ``base`` (:class:`Mechanism` and the argument checks),
``laplace`` (:class:`Laplace`, :class:`DiscreteLaplace`, :class:`Tulap`), ``gaussian``
(:class:`Gaussian`, :class:`DiscreteGaussian`) and ``custom`` (:class:`CustomMechanism`).
"""

from __future__ import annotations

from pymc_unbounded_dp.mechanisms.base import Mechanism
from pymc_unbounded_dp.mechanisms.custom import CustomMechanism
from pymc_unbounded_dp.mechanisms.gaussian import (
    DiscreteGaussian,
    Gaussian,
    discrete_gaussian_log_normalizer,
)
from pymc_unbounded_dp.mechanisms.laplace import DiscreteLaplace, Laplace, Tulap

__all__ = [
    "CustomMechanism",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "Tulap",
    "discrete_gaussian_log_normalizer",
    "for_budget",
]

#: The built-in mechanism a budget is spent with: ``{measure: (on the reals, on the integers)}``.
_FOR_BUDGET = {"epsilon": (Laplace, DiscreteLaplace), "rho": (Gaussian, DiscreteGaussian)}


def for_budget(measure: str, *, integer: bool) -> type[Mechanism]:
    """The built-in mechanism that spends a budget of ``measure`` on a statistic.

    ``"epsilon"`` (pure epsilon-DP): :class:`Laplace`, or :class:`DiscreteLaplace` for an integer
    statistic; ``"rho"`` (zCDP): :class:`Gaussian` or :class:`DiscreteGaussian`.

    Examples
    --------
    >>> from pymc_unbounded_dp.mechanisms import for_budget
    >>> for_budget("rho", integer=True).__name__
    'DiscreteGaussian'
    """
    if measure not in _FOR_BUDGET:
        raise ValueError(f"for_budget: `measure` must be 'epsilon' or 'rho', got {measure!r}.")
    return _FOR_BUDGET[measure][bool(integer)]
