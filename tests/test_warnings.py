"""Warnings name the user's line, whichever path inside the package (and PyMC) raised them."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.mcem.information import inverse_information


def _function_in(folder: Path, source: str, name: str, namespace: dict):
    """``name`` defined by ``source`` as if it were code of the package in ``folder``."""
    exec(compile(source, str(folder / "_relay_for_tests.py"), "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("relay_package", [pm, pytensor])
def test_a_warning_raised_deep_in_the_package_through_pymc_names_the_callers_line(relay_package):
    """Frames of this package and of PyMC or PyTensor between the user and the warning are
    skipped, however many (here: user -> PyMC or PyTensor -> package -> package)."""
    package = Path(pmdp.__file__).parent
    namespace = {"warn_at_caller": warn_at_caller}
    _function_in(package, "def inner():\n    warn_at_caller('deep')\n", "inner", namespace)
    middle = _function_in(package, "def middle():\n    inner()\n", "middle", namespace)
    relay = _function_in(
        Path(relay_package.__file__).parent, "def relay(f):\n    f()\n", "relay", namespace
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        relay(middle)
        line = _line_above()
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


def _line_above() -> int:
    import inspect

    return inspect.currentframe().f_back.f_lineno - 1


def test_a_sensitivity_warning_names_the_line_that_declared_the_release():
    """The sensitivity check runs two calls deep in the package; the warning names the model's line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pm.Model():
            mu = pm.Normal("mu", 0.0, 1.0)
            x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=10)
            pmdp.PrivatizedSum("s", pt.clip(x, -3, 3), pmdp.Laplace(scale=1.0, sensitivity=1.0), observed=1.0)  # fmt: skip
            line = _line_above()
    hits = [
        (w.filename, w.lineno) for w in caught if issubclass(w.category, pmdp.SensitivityWarning)
    ]
    assert hits == [(__file__, line)]


def test_an_information_that_is_not_positive_definite_gives_nan_and_warns_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        covariance = inverse_information(np.array([[2.0, 0.0], [0.0, -1.0]]))
        line = _line_above()
    assert np.isnan(covariance).all() and covariance.shape == (2, 2)
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]
    np.testing.assert_allclose(inverse_information(np.diag([2.0, 4.0])), np.diag([0.5, 0.25]))
