"""PyMC building blocks for privatized data: latent records, noisy sums and a latent sample size.

Each block registers ordinary PyMC variables in the model on the context stack and records what it
is in a per-model registry, which :mod:`pymc_unbounded_dp._compile` reads:

* :func:`Records` registers an *observed* variable whose data is a resizable container. The
  augmentation step imputes that container; PyMC's point holds only the parameters (and ``n``).
* :func:`PrivatizedSum` registers the noisy release ``s_dp = sum_i t(x_i) + e`` as an observed
  variable whose density is the mechanism's, centred on the sum of the statistic.
* :func:`SampleSize` registers the latent ``n`` (a free discrete variable with its prior) and its
  noisy release ``n_dp``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.shape_utils import change_dist_size
from pymc.model import modelcontext
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import clone_replace
from pytensor.tensor.variable import TensorVariable

from pymc_unbounded_dp._additivity import (
    CHECK_ROWS,
    check_row_wise,
    check_statistic,
    describe_n,
    record_statistic_value,
    same_n,
    statistic_records,
)
from pymc_unbounded_dp._graph import (
    ancestors,
    depends_on,
    frozen_records_guard,
    quick_draw,
    starting_at,
)
from pymc_unbounded_dp._inputs import argument_label as _label
from pymc_unbounded_dp._inputs import (
    check_dims,
    check_name,
    check_release_value,
    check_unregistered_dist,
    initial_n,
    release_coords,
)
from pymc_unbounded_dp._inputs import check_observed as _check_observed
from pymc_unbounded_dp._opendp import as_mechanism, is_measurement
from pymc_unbounded_dp._ranges import Range, statistic_range
from pymc_unbounded_dp._registry import (
    ModelBlocks,
    RecordsSpec,
    SampleSizeSpec,
    SumSpec,
    model_blocks,
)
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.errors import ImproperPriorError
from pymc_unbounded_dp.mechanisms import Mechanism
from pymc_unbounded_dp.sensitivity import SensitivityWarning, check_neighbouring, sum_sensitivity

__all__ = ["PrivatizedSum", "Records", "SampleSize"]

#: The most records the records level (``augment="records"``) takes in one table. It keeps every
#: record in memory: in the model's container, and in the kernels' buffers of records and
#: per-record statistics (with spare rows under unbounded DP), several GB at this size. The sums
#: level (``augment="sums"``) keeps no record and takes up to :data:`MAX_SUMS_RECORDS`.
MAX_RECORDS = 10**8

#: The most records a table may have at all (the sums level's limit: its death moves draw from
#: NumPy's hypergeometric distributions, which take populations below ``10**9``).
MAX_SUMS_RECORDS = 10**9 - 1

#: Tables with more records than this get their record containers filled when the records level
#: starts, not when the model is built: building the model then costs no memory in ``n``, and the
#: sums level never materialises a record.
EAGER_RECORDS = 10**6

#: Largest ``|n_dp|`` accepted: beyond ``2**53`` a float no longer holds every integer.
_MAX_N_DP = 2**53


def check_releases(model: pm.Model) -> None:
    """Check the released values of ``model`` as they are now.

    Released values held in ``pm.Data`` containers were checked when the model was built, but
    ``pm.set_data`` may have changed them since. The package calls this before it uses them
    (``compile_model``: ``pmdp.sample``, the steps' construction, ``pmdp.mcem``) and at the start
    of every chain (for ``pm.sample(step=...)`` after ``pm.set_data``).

    Raises
    ------
    ValueError, TypeError
        Naming the release (``PrivatizedSum('s')``, ``SampleSize('n')``), its argument and
        container, if a value is missing, not numeric, not finite, of the wrong shape, or not an
        integer for a mechanism on the integers.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp.blocks import check_releases
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=10)
    ...     s = pm.Data("s_dp", 4.2)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=s)
    ...     pm.set_data({"s_dp": float("nan")})
    >>> check_releases(model)
    Traceback (most recent call last):
    ...
    ValueError: PrivatizedSum('s'): `observed` (pm.Data 's_dp') contains NaN or infinite values: nan.
    """
    blocks = model_blocks(model)
    for spec in blocks.sums:
        container = _release_container(model, spec.release_rv)
        if container is not None:
            check_release_value(
                container, spec.shape, spec.mechanism, f"PrivatizedSum({spec.name!r})", "observed"
            )
    for spec in blocks.sample_sizes:
        container = _release_container(model, spec.release_rv)
        if container is not None:
            _check_n_dp(container, spec.mechanism, f"SampleSize({spec.name!r})")


def _release_container(model: pm.Model, rv) -> SharedVariable | None:
    """The ``pm.Data`` container behind a release's observed value (``None`` for a constant).

    PyMC casts a container whose dtype differs from the release's (a float ``pm.Data`` of a
    count), so the container is the value's shared ancestor: the values checked are the ones the
    user set, before any cast.
    """
    shared = [v for v in ancestors([model.rvs_to_values[rv]]) if isinstance(v, SharedVariable)]
    return shared[0] if len(shared) == 1 else None


def _register_release(
    model, name, total, mechanism: Mechanism, observed, dims=None
) -> TensorVariable:
    """Register ``observed ~ total + noise`` as an observed variable with the mechanism's density."""

    def logp(value, total):
        return frozen_records_guard(
            mechanism.logp(value - total), _frozen_message(name), model_blocks(model).imputing
        )

    def random(total, rng=None, size=None):
        total = np.asarray(total)
        return total + mechanism._simulate(rng, size if size is not None else total.shape)

    with model:
        return pm.CustomDist(
            name,
            total,
            logp=logp,
            random=random,
            observed=observed,
            dtype="int64" if mechanism.discrete else "float64",
            dims=dims,
        )


def _frozen_message(name: str) -> str:
    return (
        f"PyMC evaluated the density of the private release {name!r} outside pymc_unbounded_dp's "
        "steps, with the latent records frozen at stale values: the answer would be wrong. "
        "Sample with pmdp.sample(...) or pm.sample(), or put parameter steps inside the "
        "package's step: pm.sample(step=pmdp.DataAugmentation(parameter_step=...)) "
        "(ReversibleJump for a latent n). For an MLE or MAP use pmdp.mcem(map=...); for "
        "log-likelihoods pmdp.sample(idata_kwargs={'log_likelihood': True})."
    )


def Records(
    name: str, dist: TensorVariable, n, *, dims=None, model: pm.Model | None = None
) -> TensorVariable:
    """Latent confidential records ``x_1, ..., x_n ~ dist`` (independent given the parameters).

    Parameters
    ----------
    name : str
        Name of the record variable.
    dist : TensorVariable
        An unregistered PyMC distribution of **one record** (e.g. ``pm.Normal.dist(mu, 1)``); its
        shape is the record's shape. Its parameters may be model parameters, or other ``Records``
        used row-wise (e.g. ``pm.Normal.dist(X @ beta, sigma)`` for ``y | X``), in which case the
        leading axis of ``dist`` is the record axis.
    n : int or TensorVariable
        The number of records: a known non-negative integer (bounded DP) or the variable returned by
        :func:`SampleSize` (unbounded DP). At most :data:`MAX_RECORDS` (``10**8``) to start with
        at the records level, which keeps every record in memory, and :data:`MAX_SUMS_RECORDS`
        at the sums level (``pmdp.sample(augment="sums")``), which keeps none.
    dims : str or tuple of str, optional
        Names of **one record's** axes (e.g. ``"component"`` for a Dirichlet record), used for
        the kept records (``pmdp.sample(keep_records=...)``) with the model's ``coords`` where
        declared. The record axis itself has no name in the model: its length is ``n``, which
        changes under unbounded DP (PyMC's coordinates have fixed lengths).
    model : pm.Model, optional
        Defaults to the model on the context stack.

    Returns
    -------
    TensorVariable
        The records, with a leading record axis of length ``n``.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=50)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    """
    model = modelcontext(model)
    name = check_name(name, model, "Records")
    owner = f"Records({name!r})"
    check_unregistered_dist(dist, model, owner, "dist")
    blocks = model_blocks(model)
    sample_size, n_rows = _check_n(n, blocks, owner)
    private = {*(r.rv for r in blocks.records), *(s.release_rv for s in blocks.sums)}
    private.update(s.release_rv for s in blocks.sample_sizes)
    observed = depends_on(dist, [rv for rv in model.observed_RVs if rv not in private])
    if observed:
        raise ValueError(
            f"{owner}: `dist` depends on {observed[0].name!r}, an observed variable; records are "
            "drawn from the values of the model's parameters. Make it a free parameter, or pass "
            "its value (a number or pm.Data)."
        )

    parent_rvs = depends_on(dist, [r.rv for r in blocks.records])
    parents = [r for r in blocks.records if r.rv in parent_rvs]
    for parent in parents:
        if not same_n(parent.n, n):
            raise ValueError(
                f"Records({name!r}): `dist` depends on records {parent.name!r}, whose n "
                f"({describe_n(parent.n)}) differs from `n`={describe_n(n)}. A record variable "
                "can depend row-wise on records of its own table only (pass the same int or the "
                "same SampleSize as `n`, or make the dependence go through a model parameter)."
            )
    if parents:
        # Row-wise dependence on other records: the record axis is already there.
        parent_rows = parents[0].data.get_value().shape[0]
        conditional = clone_replace(dist, {r.rv: r.data for r in blocks.records})
        (initial,) = quick_draw([conditional], seed=_stable_seed(name))
        if initial.ndim == 0 or initial.shape[0] != parent_rows:
            raise ValueError(
                f"Records({name!r}): `dist` depends on other records, so its leading axis must be "
                f"the record axis of length {parent_rows}; got shape {initial.shape}. Build its "
                "parameters row-wise from the parent records (e.g. `X @ beta`)."
            )
        check_row_wise(dist, parents, blocks, model, owner)
    else:
        # A large table's container starts with a few rows (see EAGER_RECORDS); the records
        # level fills it at the start of each chain, as it does for every table.
        rows = pt.constant(CHECK_ROWS if n_rows > EAGER_RECORDS else n_rows, dtype="int64")
        (initial,) = quick_draw(
            [change_dist_size(dist, new_size=(rows,), expand=True)], seed=_stable_seed(name)
        )
    data = pytensor.shared(np.ascontiguousarray(initial), name=f"{name}_records")
    # The record axis has the latent n as its length under unbounded DP, so that PyMC's forward
    # samplers (prior and posterior predictive) draw n records for each draw of n; a known n is
    # the container's length (a constant for a large table, whose container is filled later).
    if sample_size is not None:
        size = sample_size.rv
    elif n_rows > EAGER_RECORDS and not parents:
        size = pytensor.shared(np.int64(n_rows), name=f"{name}_record_count")
        data.tag.record_count = size  # what with_record_count replaces to draw m records
    else:
        size = data.shape[0]
    rv = dist if parents else change_dist_size(dist, new_size=(size,), expand=True)
    rv = model.register_rv(rv, name, observed=data)
    dims = check_dims(dims, initial.shape[1:], f"Records({name!r})", "one record")
    blocks.records.append(RecordsSpec(name=name, rv=rv, data=data, n=n, dims=dims))
    blocks.links.extend((parent.name, name) for parent in parents)
    return rv


def _stable_seed(name: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(name)) % (2**31)


def _check_n(n, blocks: ModelBlocks, owner: str) -> tuple[SampleSizeSpec | None, int]:
    """The sample size behind ``n`` (``None`` for a known ``n``) and the initial number of rows."""
    if isinstance(n, TensorVariable):
        sample_size = blocks.sample_size_of(n)
        if sample_size is None:
            raise TypeError(
                f"{owner}: `n` must be a non-negative integer or the variable returned by "
                "pmdp.SampleSize(...) in this model; got another tensor."
            )
        rows = sample_size.initial
        if rows > MAX_SUMS_RECORDS:
            raise ValueError(
                f"{owner}: `n` is SampleSize {sample_size.name!r}, which starts at {rows} records "
                f"(the supported n closest to its `n_dp`), more than MAX_SUMS_RECORDS = "
                f"{MAX_SUMS_RECORDS} (and MAX_RECORDS = {MAX_RECORDS} for the records level). "
                "Check `n_dp`, or give the SampleSize a `prior` whose support is below the limit."
            )
        return sample_size, rows
    if isinstance(n, bool) or not isinstance(n, numbers.Integral | float):
        raise TypeError(f"{owner}: `n` must be a non-negative integer, got {n!r}.")
    if not math.isfinite(n) or n != int(n) or n < 0:
        raise ValueError(f"{owner}: `n` must be a non-negative integer, got {n!r}.")
    if n > MAX_SUMS_RECORDS:
        raise ValueError(
            f"{owner}: `n`={n} is more than MAX_SUMS_RECORDS = {MAX_SUMS_RECORDS}, the most "
            f"records of a table (MAX_RECORDS = {MAX_RECORDS} for the records level)."
        )
    return None, int(n)


def PrivatizedSum(
    name: str,
    statistic: TensorVariable,
    mechanism: Mechanism,
    observed,
    *,
    dims=None,
    neighbouring: str = "add/remove",
    check_sensitivity: bool = True,
    model: pm.Model | None = None,
) -> TensorVariable:
    """The noisy release ``observed = sum_i statistic[i] + noise`` of a record-additive statistic.

    Parameters
    ----------
    name : str
        Name of the released variable.
    statistic : TensorVariable
        An expression of :func:`Records` variables that keeps the leading record axis, one row per
        record (clamping with ``pt.clip``, products of record variables and ``pt.stack`` of several
        statistics along a trailing axis are all fine). It is summed over records here.
    mechanism : Mechanism or opendp.mod.Measurement
        The noise added to each coordinate of the sum, e.g. ``pmdp.Laplace(epsilon=1.0)``, or
        the OpenDP noise measurement that released it (converted by
        :func:`pymc_unbounded_dp.release.from_opendp`; a measurement states no sensitivity, so
        the sensitivity check is skipped: pass ``from_opendp(measurement, sensitivity=...)`` to
        have it checked).
    observed : array_like, pandas.Series, pandas.DataFrame, xarray.DataArray or pm.Data
        The released value, shaped like ``statistic[0]`` up to axes of length 1 (a length-1
        Series for a scalar release, a one-column DataFrame for a vector one, as PyMC takes an
        observed value). A ``pm.Data`` container must have the release's shape.
    dims : str or tuple of str, optional
        Names of the release's axes, as for any PyMC variable; they label the release in
        ``observed_data``, predictive draws and the log-likelihood. A dim the model does not
        declare takes its coordinates from the labels of a pandas or xarray ``observed`` (the
        index, then a DataFrame's columns, as ``pm.Data(..., infer_dims_and_coords=True)``);
        a dim declared with other labels is refused. Without ``dims`` the labels are dropped,
        as PyMC drops them from an observed value.
    neighbouring : {"add/remove", "replace-one"}, default "add/remove"
        The neighbouring relation of the release's guarantee: add/remove (data sets that differ by
        one person's record; the paper's convention, for bounded and unbounded DP alike) or
        replace-one (same ``n``, one record's values changed). Used by the sensitivity check.
    check_sensitivity : bool, default True
        Compare the mechanism's declared sensitivity with the one derived from the statistic
        (see Notes). ``False`` skips the comparison, e.g. for a statistic bounded for a reason its
        graph does not show; a ``pt.clip`` with reversed bounds is refused either way.
    model : pm.Model, optional

    Returns
    -------
    TensorVariable
        The observed release variable.

    Warns
    -----
    SensitivityWarning
        If the declared sensitivity does not match the statistic's bounds (see Notes).

    Notes
    -----
    **Sensitivity check.** The range of one record's statistic is derived from its graph: clip
    bounds, indicators and comparisons, the support of the record distributions, constants, and
    interval arithmetic through the usual operations (``docs/sensitivity.md`` lists them; anything
    else counts as unbounded). The sensitivity of the released sum follows under
    ``neighbouring``, in the mechanism's norm
    (:func:`~pymc_unbounded_dp.sensitivity.sum_sensitivity`), and is compared with
    ``mechanism.sensitivity``:

    * derived > declared: the stated guarantee does not hold;
    * derived < declared: the guarantee holds and is stronger than stated (the noise is larger
      than the bounds need);
    * no finite bound while the mechanism was calibrated from a budget (``epsilon``/``rho``): the
      release has no guarantee at all; clamp the statistic with ``pt.clip``.

    Each gives a :class:`~pymc_unbounded_dp.SensitivityWarning` naming both numbers. It is a
    warning, not an error: the posterior is right whatever the sensitivity, since it uses the
    noise scale as released; what is wrong is the privacy claim, which is the curator's, and an
    analyst must still be able to fit the release they were given (and the derived bounds may be
    looser than the truth, e.g. ``x - x``). Mechanisms that state no norm (custom ones) are not
    checked.

    Examples
    --------
    >>> import pymc as pm, pytensor.tensor as pt
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     mu = pm.Normal("mu", 0, 1)
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=100)
    ...     clamped = pt.clip(x, -3, 3)
    ...     _ = pmdp.PrivatizedSum("s", pt.stack([clamped, clamped**2], axis=1),
    ...                            pmdp.Laplace(epsilon=1.0, sensitivity=12.0),
    ...                            observed=[4.1, 98.0])

    A pandas Series labels the release through ``dims``:

    >>> import pandas as pd
    >>> released = pd.Series([12.3, 30.1], index=pd.Index(["sum", "sum_sq"], name="stat"))
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0, 1)
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=20)
    ...     clamped = pt.clip(x, -3, 3)
    ...     _ = pmdp.PrivatizedSum("s", pt.stack([clamped, clamped**2], axis=1),
    ...                            pmdp.Laplace(epsilon=1.0, sensitivity=12.0),
    ...                            observed=released, dims="stat")
    >>> model.coords["stat"]
    ('sum', 'sum_sq')
    """
    owner = f"PrivatizedSum({name!r})"
    model = modelcontext(model)
    name = check_name(name, model, "PrivatizedSum")
    # An OpenDP measurement states no sensitivity (its guarantee is a map of the input distance):
    # there is no declared sensitivity to check the statistic's bounds against.
    states_sensitivity = not is_measurement(mechanism)
    mechanism = as_mechanism(mechanism, owner, "pmdp.Laplace(epsilon=1.0)")
    blocks = model_blocks(model)
    statistic = check_statistic(statistic, blocks, model, owner)
    used = statistic_records(statistic, blocks, owner)
    _check_observed(observed, owner)
    shape = tuple(record_statistic_value(statistic, blocks, owner).shape[1:])
    if mechanism.domain == "integers":  # discrete mechanisms and Tulap
        if not (statistic.dtype.startswith(("int", "uint")) or statistic.dtype == "bool"):
            raise ValueError(
                f"{owner}: `mechanism` {type(mechanism).__name__} works on the integers but the "
                f"statistic has dtype {statistic.dtype}; use an integer statistic or a continuous "
                "mechanism (Laplace, Gaussian)."
            )
    observed_array = check_release_value(observed, shape, mechanism, owner, "observed")
    dims = check_dims(dims, shape, owner, model=model)
    coords = release_coords(observed, dims, shape, model, owner)
    if not isinstance(observed, SharedVariable):  # a pm.Data container stays one (pm.set_data)
        observed = observed_array.astype(np.int64) if mechanism.discrete else observed_array
    # Last, once every argument is valid: a warning turned into an error leaves no half-built model.
    neighbouring = _check_sensitivity(
        statistic,
        mechanism,
        blocks,
        shape,
        neighbouring,
        check_sensitivity if states_sensitivity else False,
        owner,
    )
    if statistic.dtype == "bool":
        statistic = statistic.astype("int64")
    for dim, values in coords.items():
        model.add_coord(dim, values)
    release = _register_release(model, name, statistic.sum(axis=0), mechanism, observed, dims=dims)
    blocks.sums.append(
        SumSpec(
            name=name,
            statistic=statistic,
            mechanism=mechanism,
            release_rv=release,
            shape=shape,
            record_names=tuple(r.name for r in used),
            neighbouring=neighbouring,
        )
    )
    blocks.links.extend((used[0].name, other.name) for other in used[1:])
    return release


#: Relative difference between a declared and a derived sensitivity that counts as rounding.
_SENSITIVITY_RTOL = 1e-9


def _check_sensitivity(
    statistic,
    mechanism: Mechanism,
    blocks: ModelBlocks,
    shape: tuple[int, ...],
    neighbouring,
    check: bool,
    owner: str,
) -> str:
    """Compare ``mechanism``'s sensitivity with the statistic's bounds (see PrivatizedSum).

    Returns the checked ``neighbouring``. The bounds are always derived: a reversed clip is an
    error whether or not the comparison runs.
    """
    neighbouring = check_neighbouring(neighbouring, owner)
    if not isinstance(check, bool | np.bool_):
        raise TypeError(f"{owner}: `check_sensitivity` must be True or False, got {check!r}.")
    bounds = statistic_range(statistic, [r.rv for r in blocks.records], owner)
    norm = getattr(mechanism, "norm", None)  # a custom mechanism may state none
    if not check or norm is None:
        return neighbouring
    kind = type(mechanism).__name__
    if not bounds.finite:
        if _calibrated_from_budget(mechanism):
            warn_at_caller(
                _unbounded_message(bounds, blocks, kind, mechanism, owner), SensitivityWarning
            )
        return neighbouring
    lower = np.broadcast_to(bounds.lower, shape)
    upper = np.broadcast_to(bounds.upper, shape)
    derived = sum_sensitivity(lower, upper, norm=norm, neighbouring=neighbouring)
    declared = float(mechanism.sensitivity)
    where = (
        f"the statistic's bounds {_describe_bounds(lower, upper)} give an {norm.upper()} "
        f"sensitivity of {derived:g} under {neighbouring} neighbours"
    )
    if derived > declared * (1 + _SENSITIVITY_RTOL):
        other = "replace-one" if neighbouring == "add/remove" else "add/remove"
        other_value = sum_sensitivity(lower, upper, norm=norm, neighbouring=other)
        hint = (
            f" Under {other} neighbours they give {other_value:g}: pass neighbouring={other!r} if "
            "that is the release's relation."
            if other_value <= declared * (1 + _SENSITIVITY_RTOL)
            else ""
        )
        warn_at_caller(
            f"{owner}: {where}, more than the sensitivity {declared:g} declared by `mechanism` "
            f"{kind}: its stated guarantee ({_guarantee(mechanism)}) does not hold"
            f"{_actual_guarantee(mechanism, derived)}. "
            f"Declare sensitivity={derived:g} (calibrating from a budget then adds more noise), "
            "clamp the statistic more tightly, or pass check_sensitivity=False if the records are "
            f"known to be tighter than these bounds.{hint}",
            SensitivityWarning,
        )
    elif declared > derived * (1 + _SENSITIVITY_RTOL):
        warn_at_caller(
            f"{owner}: {where}, less than the sensitivity {declared:g} declared by `mechanism` "
            f"{kind}: the guarantee holds and is stronger than stated"
            f"{_actual_guarantee(mechanism, derived)}, so the noise is larger than the "
            f"bounds need. Calibrate with sensitivity={derived:g} for less noise at the same "
            "budget, or pass check_sensitivity=False.",
            SensitivityWarning,
        )
    return neighbouring


def _calibrated_from_budget(mechanism: Mechanism) -> bool:
    """Whether the mechanism's scale was calibrated from a privacy budget (``epsilon``/``rho``).

    Read from ``mechanism.from_budget``; a mechanism that does not record it (e.g. a custom one)
    counts as given by its noise scale.
    """
    return bool(getattr(mechanism, "from_budget", False))


def _guarantee(mechanism: Mechanism) -> str:
    return ", ".join(f"{key}={value:g}" for key, value in mechanism.privacy.items())


def _actual_guarantee(mechanism: Mechanism, sensitivity: float) -> str:
    """The guarantee at the derived sensitivity, from the mechanism's privacy map; nothing when
    the map knows none other than the stated one."""
    actual = mechanism.privacy_map(sensitivity)
    if actual is None or actual == mechanism.guarantee:
        return ""
    return f"; with this noise it is {actual:g}"


def _describe_bounds(lower: np.ndarray, upper: np.ndarray) -> str:
    """``[l, u]`` per coordinate (the first few of a long statistic)."""
    if lower.size == 1:
        return f"[{lower.item():g}, {upper.item():g}]"
    pairs = [f"[{lo:g}, {hi:g}]" for lo, hi in zip(lower.reshape(-1), upper.reshape(-1))]
    shown = ", ".join(pairs[:6]) + (f", ... ({len(pairs)} coordinates)" if len(pairs) > 6 else "")
    return f"({shown})"


def _unbounded_message(bounds: Range, blocks: ModelBlocks, kind: str, mechanism, owner) -> str:
    causes = ", ".join(bounds.unbounded) or "its operations"
    names = [
        r.name
        for r in blocks.records
        if any(cause.startswith(f"records {r.name!r}") for cause in bounds.unbounded)
    ]
    example = names[0] if names else "x"
    return (
        f"{owner}: the statistic has no finite sensitivity: its range is unbounded because of "
        f"{causes}. `mechanism` {kind} was calibrated from a privacy budget "
        f"({_guarantee(mechanism)}) for sensitivity {float(mechanism.sensitivity):g}, which no "
        f"unbounded statistic has: the release has no privacy guarantee. Clamp the statistic, "
        f"e.g. pt.clip({example}, lower, upper) with the curator's bounds, and declare the "
        "sensitivity they give; or pass check_sensitivity=False if it is bounded for a reason "
        "the check cannot see (e.g. records from a custom distribution)."
    )


def SampleSize(
    name: str,
    n_dp,
    mechanism: Mechanism,
    prior: TensorVariable | None = None,
    *,
    model: pm.Model | None = None,
) -> TensorVariable:
    """The latent number of records ``n`` under unbounded DP, released as ``n_dp = n + noise``.

    Parameters
    ----------
    name : str
        Name of ``n`` in the model and the posterior. The release is registered as
        ``f"{name}_dp"``.
    n_dp : int, float or pm.Data
        The released noisy count (may be negative; ``|n_dp| <= 2**53``). ``n`` starts at the
        supported value closest to it (at most :data:`MAX_SUMS_RECORDS`; :data:`MAX_RECORDS`
        for the records level).
    mechanism : Mechanism or opendp.mod.Measurement
        Noise on the count (an OpenDP noise measurement is converted by
        :func:`pymc_unbounded_dp.release.from_opendp`). Use :class:`DiscreteLaplace` or :class:`DiscreteGaussian` (exact
        mechanisms for counts); :class:`Laplace` is accepted for compatibility with the reference
        code, which released ``n`` with continuous Laplace noise.
    prior : TensorVariable, optional
        An unregistered discrete PyMC distribution for ``n`` (``pm.Poisson.dist(1000)``,
        ``pm.NegativeBinomial.dist(...)``, ``pm.DiscreteUniform.dist(0, 5000)``, ...) whose support
        lies in ``n >= 0``. ``None`` means the improper flat prior on ``n >= 0``.
    model : pm.Model, optional

    Returns
    -------
    TensorVariable
        The latent ``n``; pass it as ``Records(..., n=...)``.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 1, 1)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    """
    owner = f"SampleSize({name!r})"
    model = modelcontext(model)
    name = check_name(name, model, "SampleSize")
    mechanism = as_mechanism(mechanism, owner, "pmdp.DiscreteLaplace(epsilon=0.5)")
    n_dp_value = _check_n_dp(n_dp, mechanism, owner)
    if not isinstance(n_dp, SharedVariable):  # a pm.Data container stays one (pm.set_data)
        n_dp = np.asarray(n_dp_value, dtype=np.int64 if mechanism.discrete else np.float64)
    flat_prior = prior is None
    if flat_prior:

        def no_draws(rng=None, size=None):
            raise ImproperPriorError(
                f"{owner} has the improper flat prior on n >= 0, which has no random draws (a "
                "forward draw of n was asked for, e.g. by prior predictive sampling). Give it a "
                "proper prior, e.g. "
                f"pmdp.SampleSize({name!r}, n_dp=..., mechanism=..., prior=pm.Poisson.dist(1000))."
            )

        prior = pm.CustomDist.dist(
            logp=lambda value: pt.switch(pt.ge(value, 0), 0.0, -np.inf),
            random=no_draws,
            dtype="int64",
        )
    else:
        check_unregistered_dist(prior, model, owner, "prior")
        if not prior.dtype.startswith(("int", "uint")) or prior.ndim != 0:
            raise TypeError(
                f"{owner}: `prior` must be a scalar discrete distribution such as "
                f"pm.Poisson.dist(1000); got dtype {prior.dtype}, ndim {prior.ndim}."
            )
    initial = initial_n(prior, n_dp_value, owner)
    rv = model.register_rv(starting_at(prior, initial), name)
    release = _register_release(model, f"{name}_dp", rv, mechanism, n_dp)
    spec = SampleSizeSpec(
        name=name,
        rv=rv,
        mechanism=mechanism,
        release_rv=release,
        initial=initial,
        flat_prior=flat_prior,
        built_n_dp=float(n_dp_value),
    )
    model_blocks(model).sample_sizes.append(spec)
    return rv


def _check_n_dp(n_dp, mechanism: Mechanism, owner: str) -> float:
    """The released count ``n_dp`` as a float, checked."""
    value = _check_observed(n_dp, owner, "n_dp")
    label = _label(n_dp, "n_dp")
    if value.size == 1 and not isinstance(n_dp, SharedVariable):  # [57], a length-1 Series
        value = value.reshape(())
    if value.shape != ():
        hint = (
            " A pm.Data container keeps its shape: make it from the number itself."
            if value.size == 1
            else ""
        )
        raise ValueError(
            f"{owner}: {label} must be one number (the released count), got shape "
            f"{value.shape}.{hint}"
        )
    value = float(value)
    if abs(value) > _MAX_N_DP:
        raise ValueError(f"{owner}: {label}={value} is beyond +-2**53; check the released count.")
    if mechanism.discrete and value != round(value):
        raise ValueError(
            f"{owner}: {label} must be an integer for {type(mechanism).__name__}, got {value}; "
            "use the count as released, or a continuous mechanism if it was released with one."
        )
    return value
