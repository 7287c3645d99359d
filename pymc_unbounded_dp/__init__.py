"""Inference from differentially private releases, bounded and unbounded DP, on top of PyMC."""

from pymc_unbounded_dp.blocks import PrivatizedSum, Records, SampleSize
from pymc_unbounded_dp.sampling import sample
from pymc_unbounded_dp.mcem import mcem
from pymc_unbounded_dp.steps import DataAugmentation, ReversibleJump
from pymc_unbounded_dp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
)

__all__ = [
    "DataAugmentation",
    "ReversibleJump",
    "sample",
    "mcem",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Gaussian",
    "Laplace",
    "Mechanism",
    "PrivatizedSum",
    "Records",
    "SampleSize",
]
__version__ = "0.1.0"
