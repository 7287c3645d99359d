"""Checks of arguments that many functions of the package share.

Kept free of PyMC and NumPy imports: the command line uses them to parse its options.
"""

from __future__ import annotations

import numbers

__all__ = ["check_integer", "integer_wording", "is_real"]


def is_real(value) -> bool:
    """Whether ``value`` is a real number (Python's or NumPy's, any precision), not a bool.

    Examples
    --------
    >>> import numpy as np
    >>> is_real(0.5), is_real(np.float32(0.5)), is_real(np.int64(2)), is_real(True), is_real("1")
    (True, True, True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer_wording(minimum: int, allow_none: bool = False) -> str:
    """How a message names the integers from ``minimum`` on.

    Examples
    --------
    >>> integer_wording(1), integer_wording(0, allow_none=True), integer_wording(2)
    ('a positive integer', 'a non-negative integer or None', 'an integer >= 2')
    """
    words = {1: "a positive integer", 0: "a non-negative integer"}
    kind = words.get(minimum, f"an integer >= {minimum}")
    return f"{kind} or None" if allow_none else kind


def check_integer(
    value,
    name: str,
    owner: str | None = None,
    minimum: int = 1,
    allow_none: bool = False,
):
    """Check that ``value`` is an integer ``>= minimum`` (or ``None``, if allowed).

    Parameters
    ----------
    value : object
        The argument. Python and NumPy integers are accepted; ``bool``, floats (even ``2.0``)
        and anything else are refused.
    name : str
        The argument's name, shown in backticks in the message.
    owner : str, optional
        The function or class the argument belongs to, prefixed to the message
        (``"mcem: `tune` must be ..."``).
    minimum : int, default 1
        The smallest value accepted.
    allow_none : bool, default False
        Whether ``None`` is accepted (returned as is).

    Returns
    -------
    object
        ``value``, unchanged.

    Raises
    ------
    ValueError
        Naming the argument and what it must be, for a value of the wrong type as well as one
        below ``minimum`` (the package's checks of counts have always raised ``ValueError``).

    Examples
    --------
    >>> check_integer(3, "draws")
    3
    >>> check_integer(None, "chains", allow_none=True) is None
    True
    >>> check_integer(0, "n_steps", owner="Interweave")
    Traceback (most recent call last):
    ...
    ValueError: Interweave: `n_steps` must be a positive integer, got 0.
    >>> check_integer(2.5, "tune", minimum=0)
    Traceback (most recent call last):
    ...
    ValueError: `tune` must be a non-negative integer, got 2.5.
    """
    if value is None and allow_none:
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        prefix = f"{owner}: " if owner else ""
        raise ValueError(
            f"{prefix}`{name}` must be {integer_wording(minimum, allow_none)}, got {value!r}."
        )
    return value
