"""Inference from differentially private releases, bounded and unbounded DP, on top of PyMC.

Modules follow the data flow: ``privacy`` (guarantees) -> ``mechanisms`` -> ``blocks`` (Records,
PrivatizedSum, SampleSize) -> ``_compile`` -> ``kernels`` -> ``steps`` (DataAugmentation,
ReversibleJump; ``conjugate`` for exact parameter steps) -> ``sample`` / ``mcem`` (``predictive``:
checks of the releases) -> ``examples``, ``cli``; ``risk`` stands apart; ``epsilon`` (choosing a
budget) puts the two side by side.
"""

import logging as _logging
import warnings as _warnings

# PyTensor looks for a system BLAS (MKL, libblas, libopenblas) the first time it compiles a
# function and, on a pip install without one, warns in five lines on every run. The BLAS that NumPy
# and SciPy wheels bundle cannot be linked (its symbols are renamed: ``scipy_dgemm_64_``), so a
# pip-only machine has no BLAS for PyTensor to use; its C code then calls NumPy's own BLAS through
# the C API, which is what this package's models need (small dense products). Only these two
# specific messages are silenced; a user who installs a BLAS or sets ``blas__ldflags`` never sees
# them anyway.
_warnings.filterwarnings(
    "ignore", message="PyTensor could not link to a BLAS installation", category=UserWarning
)
_logging.getLogger("pytensor.tensor.blas").addFilter(
    lambda record: "Using NumPy C-API based implementation for BLAS" not in record.getMessage()
)
# The search runs once, on first reading the flag: read it here, where the silencing holds, and
# not inside a user's (or pytest's) ``warnings.catch_warnings`` at the first compiled product.
with _warnings.catch_warnings():
    _warnings.simplefilter("ignore", UserWarning)
    import pytensor as _pytensor

    _ = _pytensor.config.blas__ldflags
del _

from pymc_unbounded_dp import conjugate, epsilon, privacy, release, risk
from pymc_unbounded_dp._version import __version__ as __version__
from pymc_unbounded_dp.blocks import PrivatizedSum, Records, SampleSize
from pymc_unbounded_dp.diagnostics import PluginCheck, plugin_check
from pymc_unbounded_dp.epsilon import EpsilonReport, choose_epsilon
from pymc_unbounded_dp.errors import FrozenRecordsError, ImproperPriorError, PrivateDataError
from pymc_unbounded_dp.independence import IndependenceMetropolis
from pymc_unbounded_dp.interweave import Interweave
from pymc_unbounded_dp.mcem import mcem
from pymc_unbounded_dp.mechanisms import (
    CustomMechanism,
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    Tulap,
)
from pymc_unbounded_dp.predictive import sample_posterior_predictive, sample_prior_predictive
from pymc_unbounded_dp.sampling import sample, stack_log_likelihood
from pymc_unbounded_dp.sensitivity import SensitivityWarning
from pymc_unbounded_dp.steps import DataAugmentation, ReversibleJump

__all__ = [
    "CustomMechanism",
    "DataAugmentation",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "EpsilonReport",
    "FrozenRecordsError",
    "Gaussian",
    "ImproperPriorError",
    "IndependenceMetropolis",
    "Interweave",
    "Laplace",
    "Mechanism",
    "PluginCheck",
    "PrivateDataError",
    "PrivatizedSum",
    "Records",
    "ReversibleJump",
    "SampleSize",
    "SensitivityWarning",
    "Tulap",
    "choose_epsilon",
    "conjugate",
    "epsilon",
    "mcem",
    "privacy",
    "release",
    "plugin_check",
    "risk",
    "sample",
    "sample_posterior_predictive",
    "sample_prior_predictive",
    "stack_log_likelihood",
]
