"""Inference from differentially private releases, bounded and unbounded DP, on top of PyMC.

Modules follow the data flow: ``mechanisms`` -> ``blocks`` (Records, PrivatizedSum, SampleSize)
-> ``_compile`` -> ``kernels`` -> ``steps`` (DataAugmentation, ReversibleJump; ``conjugate`` for
exact parameter steps) -> ``sample`` / ``mcem`` (``predictive``: checks of the releases) ->
``examples``, ``cli``; ``risk`` stands apart.
"""

from pymc_unbounded_dp import conjugate, risk
from pymc_unbounded_dp.blocks import PrivatizedSum, Records, SampleSize
from pymc_unbounded_dp.interweave import Interweave
from pymc_unbounded_dp.mcem import mcem
from pymc_unbounded_dp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
)
from pymc_unbounded_dp.predictive import sample_posterior_predictive, sample_prior_predictive
from pymc_unbounded_dp.sampling import sample
from pymc_unbounded_dp.steps import DataAugmentation, ReversibleJump

__all__ = [
    "DataAugmentation",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "Gaussian",
    "Interweave",
    "Laplace",
    "Mechanism",
    "PrivatizedSum",
    "Records",
    "ReversibleJump",
    "SampleSize",
    "conjugate",
    "mcem",
    "risk",
    "sample",
    "sample_posterior_predictive",
    "sample_prior_predictive",
]
__version__ = "0.1.0"
