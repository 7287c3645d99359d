"""Where the package compiles with PyTensor's numba backend, and how.

Two targets are evaluated many times per iteration over all records: the interweaving move's
non-centred target (up to 100 steps) and NUTS's log density and gradient given the records (10-20
leapfrog steps). From :data:`NUMBA_MIN_RECORDS` records both are compiled with numba
(:func:`numba_mode`) on PyMC 5 too, whose default backend is C (PyMC 6's is numba already):

* :func:`numba_function`: the move's target, or ``None`` where an op has no numba implementation;
* :func:`gradient_mode`: the mode of the gradient steps PyMC builds for the package
  (``nuts={"mode": ...}`` given by the user wins); the steps fall back to PyMC's default where
  the model's gradient has an op without one (:func:`object_mode_messages`).

On PyMC 5 (PyTensor 2) :func:`numba_mode` adds the package's rewrite that sums inside the
elementwise loop (:mod:`pymc_unbounded_dp._fused_sums`). On the paper's regression at 1,000
records one NUTS gradient then costs about 10 us instead of 49 us in C.
"""

from __future__ import annotations

import logging
import warnings

import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pymc
from pytensor.compile.mode import Mode, get_default_mode, get_mode
from pytensor.link.vm import VMLinker

import pymc_unbounded_dp._fused_sums as _fused_sums

__all__ = [
    "NUMBA_MIN_RECORDS",
    "gradient_mode",
    "numba_function",
    "numba_mode",
    "object_mode_messages",
    "records_at_start",
]

_log = logging.getLogger(__name__)

#: From this many records (all tables, at the start of ``n``) the package compiles its hot targets
#: with numba: numba's compilation costs 2-5 s per model built (PyTensor caches it on disk), and
#: saves 20-50 us per evaluation at 1,000 records (the paper's regression: the move's step 4.2 us
#: on PyTensor 2 and 0.9 us on PyTensor 3, against 21-29 us for the target alone from Python; a
#: NUTS gradient 10 us against 49 us in C): it pays for runs of a few thousand iterations from
#: several hundred records, not for short fits of small models.
NUMBA_MIN_RECORDS = 500


def numba_mode() -> Mode:
    """PyTensor's numba mode, with the fused sums of :mod:`~pymc_unbounded_dp._fused_sums` on
    PyTensor 2."""
    mode = get_mode("NUMBA")
    return mode.including(_fused_sums.TAG) if _fused_sums.APPLIES else mode


def records_at_start(model: pm.Model, compiled) -> int:
    """The records of all tables of ``compiled`` at the model's initial point."""
    point = model.initial_point()
    return sum(table.n_at(point) for table in compiled.tables)


def object_mode_messages(caught: list[warnings.WarningMessage]) -> list[str]:
    """The warnings by which PyTensor's numba backend says it runs an op's Python ``perform`` in
    numba's object mode (no numba implementation: slower than the C path)."""
    return [str(w.message) for w in caught if "object mode" in str(w.message)]


def numba_function(inputs: list, output: pt.TensorVariable):
    """``output`` compiled with :func:`numba_mode` (the whole-graph numba function is
    ``.vm.jit_fn``, whose arguments are ``inputs`` then the shared variables of
    ``.maker.fgraph.inputs``), or ``None`` where an op has no numba implementation."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            function = compile_pymc(inputs, output, on_unused_input="ignore", mode=numba_mode())
        except NotImplementedError as error:
            _log.info("numba backend unavailable for this graph (%s)", error)
            return None
    object_mode = object_mode_messages(caught)
    if object_mode:
        _log.info("numba backend unavailable for this graph: %s", object_mode[0])
        return None
    return function


def gradient_mode(n_records: int) -> Mode | None:
    """The mode for the gradient steps (NUTS) the package builds: :func:`numba_mode` from
    :data:`NUMBA_MIN_RECORDS` records where PyTensor's default is a C virtual machine (PyMC 5),
    else ``None`` (PyMC's default)."""
    if n_records < NUMBA_MIN_RECORDS or not isinstance(get_default_mode().linker, VMLinker):
        return None
    return numba_mode()
