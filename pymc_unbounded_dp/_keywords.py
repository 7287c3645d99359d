"""Unknown keyword arguments refused by name, with the closest valid keyword."""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable

__all__ = ["check_keywords", "named_keywords"]


def check_keywords(owner: str, given: Iterable[str], valid: Iterable[str], more: str = "") -> None:
    """Raise a ``TypeError`` naming each keyword of ``given`` not in ``valid``.

    Each unknown keyword is named with the closest valid one (:func:`difflib.get_close_matches`);
    ``more`` is added to the message (what else the function takes).

    Examples
    --------
    >>> check_keywords("pmdp.sample()", ["draw"], ["draws", "tune"])
    Traceback (most recent call last):
    ...
    TypeError: pmdp.sample() got an unexpected keyword argument 'draw' (did you mean 'draws'?).
    """
    valid = sorted(set(valid))
    unknown = [key for key in given if key not in valid]
    if not unknown:
        return
    named = []
    for key in unknown:
        close = difflib.get_close_matches(key, valid, n=1)
        named.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(unknown) > 1 else ""
    message = f"{owner} got an unexpected keyword argument{plural} {', '.join(named)}."
    raise TypeError(f"{message} {more}".strip())


def named_keywords(owner: str) -> Callable:
    """Decorate a function (or ``__init__``) without ``**kwargs`` so that an unknown keyword is
    refused by :func:`check_keywords`, with the closest of its parameters."""

    def decorate(function: Callable) -> Callable:
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        valid = [
            name
            for name, parameter in inspect.signature(function).parameters.items()
            if parameter.kind in kinds and name != "self"
        ]

        @functools.wraps(function)
        def checked(*args, **kwargs):
            check_keywords(owner, kwargs, valid)
            return function(*args, **kwargs)

        return checked

    return decorate
