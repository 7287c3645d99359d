"""OpenDP interop: an OpenDP noise measurement as a pmdp mechanism, and back.

OpenDP (https://opendp.org) is the package's preferred source of vetted release samplers. Its
measurements record the arguments they were built with (``measurement.__opendp_dict__``, the
same record :func:`opendp.prelude.serialize` writes); the scale is read from there, exactly, and
cross-checked against the measurement's privacy map.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from pymc_unbounded_dp.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
)
from pymc_unbounded_dp.privacy import _opendp_prelude

__all__ = ["as_mechanism", "from_opendp", "is_measurement", "to_opendp"]

#: OpenDP constructors of additive noise measurements, and the privacy measure each family uses.
_CONSTRUCTORS = ("make_laplace", "make_gaussian", "make_geometric", "make_noise")
_FAMILIES = {
    ("MaxDivergence", False): Laplace,
    ("MaxDivergence", True): DiscreteLaplace,
    ("ZeroConcentratedDivergence", False): Gaussian,
    ("ZeroConcentratedDivergence", True): DiscreteGaussian,
}
_INPUT_METRICS = {
    "l1": ("AbsoluteDistance", "L1Distance"),
    "l2": ("AbsoluteDistance", "L2Distance"),
}
#: A float measurement's output lattice ``2**k`` must be this many binary digits below its scale
#: for the continuous density to describe its output.
_LATTICE_MARGIN_BITS = 10


def is_measurement(obj) -> bool:
    """Whether ``obj`` is an OpenDP measurement (without importing OpenDP if nobody has)."""
    mod = sys.modules.get("opendp.mod")
    return mod is not None and isinstance(obj, mod.Measurement)


def opendp_version() -> str:
    """The installed OpenDP version, e.g. ``"0.16.0"``."""
    from importlib.metadata import version

    return version("opendp")


def _from_opendp(measurement, sensitivity, owner: str, argument: str) -> Mechanism:
    where = f"{owner}: `{argument}`"
    record = getattr(measurement, "__opendp_dict__", None)
    function = record.get("__function__") if isinstance(record, dict) else None
    if function not in _CONSTRUCTORS:
        raise TypeError(
            f"{where} is an OpenDP measurement built by {function or 'an unknown constructor'}; "
            f"only bare noise measurements ({', '.join(_CONSTRUCTORS)}) are supported (the model "
            "computes the sum itself: pass the noise measurement, not a chain ending in it)."
        )
    kwargs = record["__kwargs__"]
    measure = str(measurement.output_measure)
    carrier = str(measurement.input_carrier_type)
    element = carrier[4:-1] if carrier.startswith("Vec<") else carrier
    if element[:1] not in ("f", "i", "u") or measure not in (
        "MaxDivergence",
        "ZeroConcentratedDivergence",
    ):
        raise TypeError(
            f"{where}: unsupported OpenDP measurement (input {carrier}, measure {measure}); "
            "supported: Laplace or Gaussian noise on a number or a vector of numbers."
        )
    if function == "make_geometric" and kwargs.get("bounds") is not None:
        raise TypeError(
            f"{where}: make_geometric with `bounds` is not supported; build it without."
        )
    family = _FAMILIES[measure, element[0] != "f"]
    metric = str(measurement.input_metric).split("(")[0]
    if metric not in _INPUT_METRICS[family.norm]:
        raise TypeError(
            f"{where}: the measurement's input metric is {measurement.input_metric}; a "
            f"{family.__name__} mechanism needs {' or '.join(_INPUT_METRICS[family.norm])}."
        )
    scale = float(kwargs["scale"])
    k = kwargs.get("k")
    if family.discrete is False and k is not None and 2.0**k > scale * 2.0**-_LATTICE_MARGIN_BITS:
        raise ValueError(
            f"{where}: its output lattice 2**{k} is coarse next to its scale {scale}; the "
            f"continuous {family.__name__} density would misdescribe it. Build it with k=None."
        )
    sensitivity = 1 if sensitivity is None else sensitivity
    mechanism = family(**{family.scale_name: scale}, sensitivity=sensitivity)
    # Cross-check the recorded scale against OpenDP's own privacy map at distance 1 (the map
    # rounds up, so allow a relative slack).
    d_in = 1.0 if str(measurement.input_distance_type).startswith("f") else 1
    stated = float(measurement.map(d_in))
    (expected,) = mechanism.privacy_map(1.0).as_dict().values()
    if not math.isclose(stated, expected, rel_tol=1e-6):
        raise TypeError(
            f"{where}: its privacy map gives {stated} at distance 1 but its recorded scale "
            f"{scale} implies {expected}; not a plain {family.__name__} mechanism."
        )
    return mechanism


def from_opendp(measurement, sensitivity: float | None = None) -> Mechanism:
    """The pmdp mechanism an OpenDP noise measurement implements (same family, same scale).

    Supported: measurements built by OpenDP's ``make_laplace``, ``make_gaussian``,
    ``make_geometric`` (without ``bounds``) or ``make_noise`` (also through ``then_...`` on an
    input space), on a scalar (``atom_domain``) or a vector (``vector_domain``) of floats or
    integers:

    ==================  ===================  ============================
    OpenDP measure      float input          integer input
    ==================  ===================  ============================
    ``MaxDivergence``   :class:`Laplace`     :class:`DiscreteLaplace`
    zCDP                :class:`Gaussian`    :class:`DiscreteGaussian`
    ==================  ===================  ============================

    The scale is the one the measurement was built with (exact); it is checked against the
    measurement's privacy map. A chain (e.g. ``make_sum >> then_laplace``), randomized response
    and other measurements raise ``TypeError``; so does a float measurement whose output lattice
    ``2**k`` is not fine next to its scale (``ValueError``).

    Parameters
    ----------
    measurement : opendp.mod.Measurement
        The noise measurement.
    sensitivity : float, optional
        The input distance ``d_in`` at which to state the guarantee (the statistic's L1
        sensitivity for the Laplace family, L2 for the Gaussian family). ``None`` means 1, OpenDP's
        unit distance; the guarantee OpenDP states is ``measurement.map(sensitivity)``, which
        also covers its floating-point discretisation.

    Returns
    -------
    Mechanism

    Examples
    --------
    >>> import opendp.prelude as dp
    >>> from pymc_unbounded_dp.release import from_opendp
    >>> dp.enable_features("contrib")
    >>> space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
    >>> from_opendp(space >> dp.m.then_laplace(scale=2.0), sensitivity=1.0)
    Laplace(epsilon=0.5, sensitivity=1.0, scale=2.0)
    """
    if not is_measurement(measurement):
        raise TypeError(
            f"from_opendp: `measurement` must be an OpenDP Measurement, got {measurement!r}."
        )
    return _from_opendp(measurement, sensitivity, "from_opendp", "measurement")


def as_mechanism(mechanism, owner: str, example: str) -> Mechanism:
    """``mechanism`` as a pmdp mechanism: itself, or the one an OpenDP measurement implements.

    ``owner`` prefixes error messages; ``example`` is a mechanism expression suggested in them.
    """
    if isinstance(mechanism, Mechanism):
        return mechanism
    if is_measurement(mechanism):
        return _from_opendp(mechanism, None, owner, "mechanism")
    raise TypeError(
        f"{owner}: `mechanism` must be a pmdp mechanism such as {example} or an OpenDP noise "
        f"measurement, got {mechanism!r}."
    )


def to_opendp(mechanism: Mechanism, shape: tuple[int, ...] = ()):
    """The OpenDP measurement that releases a statistic of ``shape`` with ``mechanism``'s noise.

    Scalars use OpenDP's ``atom_domain``, arrays a ``vector_domain`` of their flattened size
    (64-bit floats, or 64-bit integers for discrete mechanisms); the input metric is the one the
    mechanism's sensitivity is measured in. Enables OpenDP's ``"contrib"`` feature flag.

    Parameters
    ----------
    mechanism : Mechanism
        One of :class:`Laplace`, :class:`Gaussian`, :class:`DiscreteLaplace`,
        :class:`DiscreteGaussian`.
    shape : tuple of int
        Shape of the released statistic.

    Returns
    -------
    opendp.mod.Measurement

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp.release import to_opendp
    >>> measurement = to_opendp(pmdp.Laplace(scale=2.0), shape=(3,))
    >>> len(measurement([1.0, 2.0, 3.0]))
    3
    """
    family = type(mechanism)
    if family not in _FAMILIES.values():
        raise TypeError(
            f"to_opendp: `mechanism` must be a Laplace, Gaussian, DiscreteLaplace or "
            f"DiscreteGaussian mechanism, got {mechanism!r}."
        )
    dp = _opendp_prelude()
    atom = dp.atom_domain(T="i64") if mechanism.discrete else dp.atom_domain(T=float, nan=False)
    distance = "i64" if mechanism.discrete and family.norm == "l1" else float
    if shape == ():
        domain, metric = atom, dp.absolute_distance(T=distance)
    else:
        domain = dp.vector_domain(atom, size=int(np.prod(shape)))
        metric = (dp.l1_distance if family.norm == "l1" else dp.l2_distance)(T=distance)
    make = dp.m.make_laplace if family.norm == "l1" else dp.m.make_gaussian
    return make(domain, metric, scale=float(mechanism.scale))
