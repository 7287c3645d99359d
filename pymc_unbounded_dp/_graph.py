"""Small PyTensor graph utilities shared by the model blocks and the model compiler."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.compile.mode import Mode

try:  # PyTensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover
    from pytensor.graph.basic import ancestors
from pytensor.graph.replace import clone_replace

#: Mode for one-off evaluations at model-build time: no C compilation, no heavy rewrites.
QUICK_MODE = Mode(linker="py", optimizer="fast_compile")

#: Mode for the functions called every iteration (proposals, prior of n): the C virtual machine,
#: whose per-call overhead is a few microseconds (PyTensor 3 defaults to numba, whose argument
#: typing costs ~0.1 ms per call).
KERNEL_MODE = Mode(linker="cvm", optimizer="fast_run")


def depends_on(graph: pt.TensorVariable, targets: Sequence, blockers: Sequence = ()) -> list:
    """The members of ``targets`` that ``graph`` depends on, not looking past ``blockers``."""
    found = set(ancestors([graph], blockers=list(blockers)))
    return [t for t in targets if t in found]


def with_record_count(outputs: Sequence, containers: Sequence, m: pt.TensorVariable) -> list:
    """Rewrite ``outputs`` so that record variables have ``m`` rows instead of their data's length.

    Non-row-wise record variables take their size from their data container's length; replacing
    each container by an ``m``-row placeholder makes them (and everything downstream, such as
    row-wise children and statistics) draw ``m`` fresh records.
    """
    replacements = {
        data: pt.zeros((m, *data.get_value().shape[1:]), dtype=data.dtype) for data in containers
    }
    return list(clone_replace(list(outputs), replacements))


def quick_draw(outputs: Sequence, seed: int = 0) -> list[np.ndarray]:
    """Evaluate random ``outputs`` once, seeded, without compiling C code."""
    from pymc.pytensorf import compile as compile_pymc

    fn = compile_pymc([], list(outputs), random_seed=seed, mode=QUICK_MODE)
    return [np.asarray(v) for v in fn()]


def quick_function(inputs: Sequence, outputs: Sequence):
    """Compile a function for build-time checks without C compilation."""
    return pytensor.function(list(inputs), list(outputs), mode=QUICK_MODE, on_unused_input="ignore")
