"""What a curator publishes in the examples: noisy sums, a noisy count, the budgets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp.mechanisms import DiscreteLaplace, Laplace


class LaplaceBudgets:
    """The examples' mechanisms from a release's budgets ``epsilon_s``, ``epsilon_n`` and the L1
    ``sensitivity`` of its sums (attributes of the class using it)."""

    epsilon_s: float
    epsilon_n: float
    sensitivity: float

    @property
    def mechanism(self) -> Laplace:
        """Noise on each released sum: ``Laplace(sensitivity / epsilon_s)``."""
        return Laplace(epsilon=self.epsilon_s, sensitivity=self.sensitivity)

    @property
    def n_mechanism(self) -> DiscreteLaplace:
        """Noise on a released count: ``DiscreteLaplace(1 / epsilon_n)``."""
        return DiscreteLaplace(epsilon=self.epsilon_n)


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


def chunked_sums(
    owner: str,
    n: int,
    chunk: int,
    seed: np.random.SeedSequence,
    statistics: Callable[[int, np.random.SeedSequence], np.ndarray],
) -> np.ndarray:
    """The exact sums of ``n`` simulated records, ``chunk`` at a time (memory ``O(chunk)``):
    ``statistics(size, seed)`` simulates ``size`` records from its own stream of ``seed`` and
    returns their summed statistics. ``owner`` names the caller in the error for a bad ``n``."""
    check_integer(n, "n", owner, minimum=0)
    sizes = [chunk] * (int(n) // chunk) + ([int(n) % chunk] if int(n) % chunk or not n else [])
    parts = [statistics(size, child) for size, child in zip(sizes, seed.spawn(len(sizes)))]
    return np.sum(parts, axis=0)


def seed_sequence(seed) -> np.random.SeedSequence:
    """``seed`` (an int, ``None``, a ``SeedSequence`` or a ``Generator``) as a ``SeedSequence``."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.SeedSequence(int(seed.integers(2**63)))
    return np.random.SeedSequence(seed)


def noisy_release(kind: type[Release], exact: np.ndarray, n: int, epsilon_s, epsilon_n, seed):
    """A ``kind`` release of the exact sums ``exact`` of ``n`` records: Laplace noise of
    ``kind.sensitivity / epsilon_s`` on each sum and discrete Laplace noise on ``n``, simulated
    (seeded numpy draws: for simulation studies, not for publishing)."""
    mechanism = Laplace(epsilon=epsilon_s, sensitivity=kind.sensitivity)
    count_mechanism = DiscreteLaplace(epsilon=epsilon_n)
    s_seed, n_seed = seed_sequence(seed).spawn(2)
    exact = np.asarray(exact, dtype=float)
    values = exact + mechanism.simulate(exact.shape[0], random_seed=np.random.default_rng(s_seed))
    n_dp = int(n) + int(count_mechanism.simulate(random_seed=np.random.default_rng(n_seed)))
    return kind(
        values=np.asarray(values, dtype=float),
        n_dp=int(n_dp),
        epsilon_s=float(epsilon_s),
        epsilon_n=float(epsilon_n),
        n=int(n),
    )
