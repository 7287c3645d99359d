"""Warnings that point at the user's line, however deep in the package they are raised.

A fixed ``stacklevel`` is right only for one call path: a warning raised in a helper that two
public functions reach at different depths (or through a keyword-checking wrapper) then names a
line of the package. :func:`warn_at_caller` counts the frames instead.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

__all__ = ["warn_at_caller"]

#: Packages whose frames are skipped: this one, and the PyMC and PyTensor code that calls its
#: steps (so that a warning raised inside ``pm.sample`` names the line that called it).
_SKIPPED_PACKAGES = ("pymc_unbounded_dp", "pymc", "pytensor")


def _skipped_folders() -> tuple[str, ...]:
    folders = []
    for name in _SKIPPED_PACKAGES:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            folders.append(str(Path(module.__file__).parent) + "/")
    return tuple(folders)


def warn_at_caller(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn with ``message``, attributed to the first frame outside this package, PyMC and
    PyTensor: the line of the user's code that led to it.

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_at_caller("check this")
    >>> caught[0].filename == __file__ or caught[0].filename.startswith("<doctest")
    True
    """
    skipped = _skipped_folders()
    frame, level = sys._getframe(1), 2  # stacklevel 2: the caller of this function
    while frame is not None and frame.f_code.co_filename.startswith(skipped):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
