"""The Examples sections of the risk module's docstrings run and print what they show."""

import doctest
import importlib

import pytest

MODULES = ["_core", "_decision", "_kanon", "_membership", "_minrisk", "_rules", "_sensitivity"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"pymc_unbounded_dp.risk.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
