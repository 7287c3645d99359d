"""The package's own exceptions: refusals that reach the user through PyMC and PyTensor.

PyTensor re-raises an exception from inside a compiled function as ``type(error)(message +
dump)``, where the dump describes the graph node that raised it (15 lines or more). The
package's refusals say what to do instead in a few lines; the dump only hides that. Their class
keeps the message and drops the dump.
"""

from __future__ import annotations

__all__ = ["FrozenRecordsError", "ImproperPriorError", "PrivateDataError"]

#: Where PyTensor's description of the failing graph node starts in a re-raised message.
_PYTENSOR_DUMP = "\nApply node that caused the error"


class PrivateDataError(Exception):
    """Base class of the package's refusals (a message that names what to do instead)."""

    def __init__(self, message: str = ""):
        super().__init__(message.split(_PYTENSOR_DUMP, 1)[0])


class FrozenRecordsError(PrivateDataError, RuntimeError):
    """A release's density was evaluated outside the package's steps, on frozen records.

    Raised by ``pm.find_MAP``, ``model.compile_logp()``, ``pm.sample(step=pm.NUTS(...))`` and other
    evaluations of the model's density that do not impute the records first: the answer would
    condition on whatever records the containers hold. The message says what to use instead.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=5)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=2.0)
    >>> try:
    ...     model.compile_logp()(model.initial_point())
    ... except pmdp.FrozenRecordsError as error:
    ...     print(str(error)[:60])
    PyMC evaluated the density of the private release 's' outsid
    """


class ImproperPriorError(PrivateDataError, ValueError):
    """A forward draw was asked of a variable with an improper prior (the flat prior on ``n``)."""
