"""What a curator publishes in the examples: noisy sums, a noisy count, the budgets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

import pymc_unbounded_dp as pmdp


class LaplaceBudgets:
    """The examples' mechanisms from a release's budgets ``epsilon_s``, ``epsilon_n`` and the L1
    ``sensitivity`` of its sums (attributes of the class using it)."""

    epsilon_s: float
    epsilon_n: float
    sensitivity: float

    @property
    def mechanism(self) -> pmdp.Laplace:
        """Noise on each released sum: ``Laplace(sensitivity / epsilon_s)``."""
        return pmdp.Laplace(epsilon=self.epsilon_s, sensitivity=self.sensitivity)

    @property
    def n_mechanism(self) -> pmdp.DiscreteLaplace:
        """Noise on a released count: ``DiscreteLaplace(1 / epsilon_n)``."""
        return pmdp.DiscreteLaplace(epsilon=self.epsilon_n)


@dataclass(frozen=True)
class Release(LaplaceBudgets):
    """Noisy sums (Laplace, L1 ``sensitivity`` of the workload), ``n_dp`` and the true ``n``.

    ``n`` is public only under bounded DP; unbounded models never read it.
    """

    values: np.ndarray
    n_dp: int
    epsilon_s: float
    epsilon_n: float
    n: int = field(repr=False)

    sensitivity: ClassVar[float]
