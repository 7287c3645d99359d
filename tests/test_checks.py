"""The shared argument checks (``pymc_unbounded_dp._checks``)."""

import numpy as np
import pytest

from pymc_unbounded_dp._checks import check_integer, integer_wording


@pytest.mark.parametrize("value", [1, 7, np.int64(3), np.uint8(2)])
def test_integers_from_the_minimum_are_returned_unchanged(value):
    assert check_integer(value, "draws") is value


@pytest.mark.parametrize(
    ("value", "minimum", "allow_none", "message"),
    [
        (0, 1, False, "`k` must be a positive integer, got 0."),
        (-1, 0, False, "`k` must be a non-negative integer, got -1."),
        (1, 2, False, "`k` must be an integer >= 2, got 1."),
        (2.0, 1, False, "`k` must be a positive integer, got 2.0."),
        (True, 0, False, "`k` must be a non-negative integer, got True."),
        ("3", 1, True, "`k` must be a positive integer or None, got '3'."),
        (None, 1, False, "`k` must be a positive integer, got None."),
    ],
)
def test_anything_else_is_refused_naming_the_argument(value, minimum, allow_none, message):
    with pytest.raises(ValueError) as error:
        check_integer(value, "k", minimum=minimum, allow_none=allow_none)
    assert str(error.value) == message


def test_the_owner_prefixes_the_message_and_none_may_be_allowed():
    with pytest.raises(ValueError, match=r"^mcem: `thin` must be a positive integer"):
        check_integer(0, "thin", "mcem")
    assert check_integer(None, "chains", allow_none=True) is None
    with pytest.raises(ValueError, match=r"^`chains` must be a positive integer, got None\.$"):
        check_integer(None, "chains")  # None is refused unless allowed
    assert integer_wording(0, allow_none=True) == "a non-negative integer or None"
