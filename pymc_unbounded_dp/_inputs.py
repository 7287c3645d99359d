"""Checks of the model blocks' arguments: names, distributions, released values, dims.

A released value may be a number, an array, a pandas Series or DataFrame, an xarray DataArray or
a ``pm.Data`` container; it is checked and turned into a float array here, and the labels of a
pandas or xarray value become the coordinates of the release's ``dims``. The prior of a latent
``n`` is probed for its support, and ``n`` starts at the supported value closest to ``n_dp``
(:func:`initial_n`). Every message names the block and the argument (``tests/test_bad_input.py``
is the catalogue).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pymc as pm
import pytensor.tensor as pt
import xarray as xr
from pymc.distributions.shape_utils import change_dist_size
from pymc.pytensorf import compile as compile_pymc
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorConstant, TensorVariable

from pymc_unbounded_dp._checks import is_real
from pymc_unbounded_dp._graph import QUICK_MODE, quick_draw
from pymc_unbounded_dp.mechanisms import Mechanism


def check_name(name, model: pm.Model, owner: str) -> str:
    """``name`` checked as the name of a new variable of ``model``."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"{owner}: `name` must be a non-empty string, got {name!r}.")
    if name in model.named_vars:
        raise ValueError(
            f"{owner}({name!r}): `name` is taken: the model already has a variable named {name!r}."
        )
    return name


def check_unregistered_dist(dist, model: pm.Model, owner: str, argument: str) -> None:
    """Refuse ``dist`` unless it is an unregistered PyMC distribution (``pm.Normal.dist(...)``)."""
    if not isinstance(dist, TensorVariable) or dist.owner is None:
        raise TypeError(
            f"{owner}: `{argument}` must be an unregistered PyMC distribution such as "
            f"pm.Normal.dist(mu, sigma), got {dist!r}."
        )
    if not isinstance(dist.owner.op, RandomVariable | pm.distributions.SymbolicRandomVariable):
        raise TypeError(
            f"{owner}: `{argument}` must be a random variable made with `.dist(...)`, "
            f"got an expression built by {dist.owner.op}."
        )
    if dist in model.basic_RVs:
        raise ValueError(
            f"{owner}: `{argument}` is already a model variable ({dist.name!r}); pass an "
            "unregistered distribution made with `.dist(...)` instead."
        )


def check_observed(observed, owner: str, argument: str = "observed") -> np.ndarray:
    """The released value(s) ``observed`` (a number, an array, a pandas Series or DataFrame, an
    xarray DataArray or a ``pm.Data`` container) as a float array; refused, naming ``argument``,
    if missing, masked, not numeric or not finite."""
    label = argument_label(observed, argument)
    value = _plain_values(observed)
    if isinstance(observed, SharedVariable):
        value = observed.get_value()
    elif isinstance(observed, TensorConstant):
        value = observed.data
    if value is None:
        raise TypeError(f"{owner}: {label} is required: pass the released value.")
    if isinstance(value, Variable):
        raise TypeError(
            f"{owner}: {label} must be the released number(s) or a pm.Data container, got the "
            f"PyTensor expression {value}."
        )
    if np.ma.isMaskedArray(value):
        if np.ma.is_masked(value):  # also how pm.Data stores NaN
            raise ValueError(
                f"{owner}: {label} has missing values (NaN or masked entries): "
                f"{np.ma.filled(value.astype(float), np.nan)}. A release has none: pass every "
                "released number."
            )
        value = np.ma.getdata(value)
    try:
        array = np.asarray(value)
    except ValueError:  # ragged nested sequences
        raise TypeError(
            f"{owner}: {label} must be a number or a rectangular array, got {value!r}."
        ) from None
    if array.dtype == object and all(is_real(v) for v in array.flat):
        array = array.astype(float)
    if array.dtype.kind not in "iuf":
        raise TypeError(
            f"{owner}: {label} must be numeric (the released number(s)), got {value!r} of dtype "
            f"{array.dtype}."
        )
    array = array.astype(float)
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{owner}: {label} contains NaN or infinite values: {array}.")
    return array


def argument_label(observed, argument: str) -> str:
    """How a message names the argument: ```observed```, ```observed`` (pm.Data 's_dp')` or
    ```observed`` (pandas Series 's_dp')`."""
    if isinstance(observed, SharedVariable):
        return f"`{argument}` (pm.Data {observed.name!r})"
    if isinstance(observed, pd.Series | pd.DataFrame | xr.DataArray):
        kind = "xarray" if isinstance(observed, xr.DataArray) else "pandas"
        name = getattr(observed, "name", None)
        named = "" if name is None else f" {name!r}"
        return f"`{argument}` ({kind} {type(observed).__name__}{named})"
    return f"`{argument}`"


def _plain_values(observed):
    """``observed`` without its pandas or xarray wrapper (a missing value becomes NaN)."""
    if isinstance(observed, xr.DataArray):
        return observed.to_numpy()
    if isinstance(observed, pd.Series | pd.DataFrame):
        dtypes = [observed.dtype] if isinstance(observed, pd.Series) else list(observed.dtypes)
        if dtypes and all(
            pd.api.types.is_numeric_dtype(d) and not pd.api.types.is_bool_dtype(d) for d in dtypes
        ):
            return observed.to_numpy(dtype=float, na_value=np.nan)
        return observed.to_numpy()
    return observed


def _observed_labels(observed) -> tuple[tuple | None, ...] | None:
    """The labels along each axis of a pandas or xarray ``observed`` (``None`` for an axis with
    none: a default ``RangeIndex``, an xarray dimension without coordinate), or ``None`` for an
    input that has no axes to label (a number, an array, a ``pm.Data`` container)."""
    if isinstance(observed, xr.DataArray):
        return tuple(
            tuple(observed[d].to_index().tolist()) if d in observed.coords else None
            for d in observed.dims
        )
    if isinstance(observed, pd.Series | pd.DataFrame):
        axes = [observed.index] + ([observed.columns] if isinstance(observed, pd.DataFrame) else [])
        return tuple(
            None
            if isinstance(axis, pd.RangeIndex) and axis.start == 0 and axis.step == 1
            else tuple(axis.tolist())
            for axis in axes
        )
    return None


def _same_values_reshaped(array: np.ndarray, shape: tuple[int, ...]) -> bool:
    """Whether ``array`` holds one number per coordinate of ``shape`` in the same order, up to
    axes of length 1 (a length-1 Series for a scalar, a one-column DataFrame for a vector)."""
    return array.size == math.prod(shape) and [d for d in array.shape if d != 1] == [
        d for d in shape if d != 1
    ]


def check_release_value(
    observed, shape: tuple[int, ...], mechanism: Mechanism, owner: str, argument: str
) -> np.ndarray:
    """``observed`` checked as the release of a value of ``shape`` by ``mechanism``."""
    array = check_observed(observed, owner, argument)
    label = argument_label(observed, argument)
    # Axes of length 1 are dropped or added, as PyMC broadcasts an observed value; a pm.Data
    # container keeps its shape (pm.set_data), so it must have the release's own.
    if not isinstance(observed, SharedVariable) and _same_values_reshaped(array, shape):
        array = array.reshape(shape)
    if array.shape != shape:
        what = "a scalar" if shape == () else f"shape {shape}"
        hint = (
            " A pm.Data container keeps its shape: make it from an array of the release's shape."
            if isinstance(observed, SharedVariable) and _same_values_reshaped(array, shape)
            else ""
        )
        raise ValueError(
            f"{owner}: {label} has shape {array.shape} but the released value is {what}: "
            "one number per coordinate of one record's statistic (the statistic is summed over "
            f"the record axis).{hint}"
        )
    if mechanism.discrete and np.any(array != np.round(array)):
        raise ValueError(
            f"{owner}: {label} must be integer-valued for {type(mechanism).__name__} (its "
            f"noise is on the integers), got {array}; use the value as released, or a "
            "continuous mechanism if it was released with one."
        )
    return array


def check_dims(
    dims, shape: tuple[int, ...], owner: str, what: str = "the release", model=None
) -> tuple[str, ...] | None:
    """``dims`` as a tuple naming each axis of ``shape``; with ``model``, the lengths of the
    dims it declares must match."""
    if dims is None:
        return None
    dims = (dims,) if isinstance(dims, str) else tuple(dims)
    if len(dims) != len(shape) or not all(isinstance(d, str) for d in dims):
        raise ValueError(
            f"{owner}: `dims`={dims} must name each of the {len(shape)} axes of {what} (shape "
            f"{shape}) with a string."
        )
    for dim, length in zip(dims, shape):
        declared = _declared_length(model, dim) if model is not None else None
        if declared is not None and declared != length:
            raise ValueError(
                f"{owner}: `dims` names axis {dims.index(dim)} of {what} {dim!r}, which the "
                f"model declares with {declared} coordinates, but that axis has length {length}."
            )
    return dims


def _declared_length(model: pm.Model, dim: str) -> int | None:
    """The length of ``dim`` in ``model`` (``None`` if it is not declared, or not known now)."""
    if model.coords.get(dim) is not None:
        return len(model.coords[dim])
    length = model.dim_lengths.get(dim)
    return int(length.get_value()) if isinstance(length, SharedVariable) else None


def release_coords(observed, dims, shape: tuple[int, ...], model: pm.Model, owner: str) -> dict:
    """The coordinates the labels of a pandas or xarray ``observed`` give to ``dims``.

    As ``pm.Data(..., dims=..., infer_dims_and_coords=True)`` does: the index (then a DataFrame's
    columns; an xarray DataArray's coordinates) labels the release's axes in order. A dim the
    model does not declare yet gets those labels as its coordinates (returned, for the caller to
    add once the release is valid; ``0, 1, ...`` for a default index). A dim the model declares
    with other labels is refused: the released numbers would be matched to the wrong labels.
    """
    labels = _observed_labels(observed)
    if dims is None or labels is None:
        return {}
    source = np.shape(_plain_values(observed))
    if source != shape:  # axes of length 1 dropped or added: the others keep their labels
        kept = iter([axis for axis, length in zip(labels, source) if length != 1])
        labels = tuple(next(kept) if length != 1 else None for length in shape)
    coords = {}
    for dim, axis, length in zip(dims, labels, shape):
        if dim not in model.dim_lengths:
            coords[dim] = axis if axis is not None else tuple(range(length))
            continue
        declared = model.coords.get(dim)
        if axis is not None and declared is not None and list(axis) != list(declared):
            shown = ", ".join(repr(v) for v in axis[:4]) + (", ..." if len(axis) > 4 else "")
            raise ValueError(
                f"{owner}: the labels of {argument_label(observed, 'observed')} along {dim!r} ({shown}) "
                f"are not the model's coords[{dim!r}]; the released numbers would be matched to "
                f"the wrong labels. Reorder them, e.g. observed.reindex(model.coords[{dim!r}]), "
                "or pass the values without labels (observed.to_numpy())."
            )
    return coords


#: Values of ``n`` around ``n_dp`` at which the prior's support is probed, on each side.
_PROBE_WINDOW = 1000
#: Draws from the prior added to the probes (they find a support far from ``n_dp``).
_PROBE_DRAWS = 256


def initial_n(prior: TensorVariable, n_dp: float, owner: str) -> int:
    """Check the prior's support and pick the supported ``n`` closest to ``n_dp``.

    The prior's log-density is evaluated at a few thousand values only (``n < 0``; a window
    around ``n_dp`` and around 0; powers of two out to ``2**62`` on both sides of ``n_dp``; draws
    from the prior where it has them), so a huge ``n_dp`` costs nothing. When the closest
    supported probe is not next to ``n_dp``, the edge of the support between them is found by
    bisection (the support is taken to be an interval, as for every discrete distribution in
    PyMC; a gap in it could make the start further from ``n_dp`` than needed, which only costs
    burn-in).
    """
    values = pt.vector("n", dtype="int64")
    log_prior = compile_pymc([values], pm.logp(prior, values), random_seed=0, mode=QUICK_MODE)
    try:
        (drawn,) = quick_draw([change_dist_size(prior, new_size=(_PROBE_DRAWS,), expand=True)])
    except (NotImplementedError, ValueError, TypeError):  # priors without random draws (flat)
        drawn = np.zeros(0, dtype=np.int64)

    def supported(points) -> np.ndarray:
        points = np.asarray(points, dtype=np.int64)
        return np.isfinite(np.broadcast_to(log_prior(points), points.shape))

    if np.any(supported([-3, -2, -1])):
        raise ValueError(
            f"{owner}: `prior` gives positive probability to n < 0; use a distribution on "
            "n >= 0 (Poisson, NegativeBinomial, DiscreteUniform(lower >= 0), ...)."
        )
    target = math.floor(n_dp + 0.5)
    centre = max(target, 0)
    powers = 2 ** np.arange(63, dtype=np.uint64)
    far = np.concatenate([centre + powers, centre - powers.astype(np.float64)])
    far = far[(far >= 0) & (far < 2**62)].astype(np.int64)
    probes = np.unique(
        np.concatenate(
            [
                np.arange(max(centre - _PROBE_WINDOW, 0), centre + _PROBE_WINDOW + 1),
                np.arange(_PROBE_WINDOW + 1),
                far,
                np.asarray(drawn, dtype=np.int64).reshape(-1),
            ]
        )
    )
    ok = supported(probes)
    if not ok.any():
        raise ValueError(
            f"{owner}: `prior` gives no probability to any n probed from 0 to 2**62; use a "
            "discrete distribution on n >= 0."
        )
    best = int(probes[ok][np.argmin(np.abs(probes[ok] - target))])
    if best != centre:
        # Bisect between ``best`` and the probe next to it on the side of ``n_dp`` (unsupported).
        step = 1 if centre > best else -1
        position = int(np.searchsorted(probes, best)) + step
        inside, outside = best, int(probes[position])
        while abs(outside - inside) > 1:
            middle = (inside + outside) // 2
            inside, outside = (middle, outside) if supported([middle])[0] else (inside, middle)
        best = inside
    return best
