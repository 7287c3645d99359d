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
import warnings
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace as replace_fields

import numpy as np
import pandas as pd
import pymc as pm
import pytensor
import pytensor.tensor as pt
import xarray as xr
from pymc.distributions.shape_utils import change_dist_size
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.basic import Variable
from pytensor.graph.replace import clone_replace, graph_replace
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorConstant, TensorVariable

from pymc_unbounded_dp._graph import (
    QUICK_MODE,
    ancestors,
    depends_on,
    frozen_records_guard,
    quick_draw,
    quick_function,
    starting_at,
    with_record_count,
)
from pymc_unbounded_dp._opendp import as_mechanism, is_measurement
from pymc_unbounded_dp._ranges import Range, statistic_range
from pymc_unbounded_dp.errors import ImproperPriorError
from pymc_unbounded_dp.mechanisms import Mechanism
from pymc_unbounded_dp.sensitivity import SensitivityWarning, check_neighbouring, sum_sensitivity

__all__ = ["PrivatizedSum", "Records", "SampleSize"]

#: The build-time checks of a statistic (record-additive) and of a record distribution that
#: depends on other records (row-wise) run on ``_CHECK_BATCHES`` batches of ``_CHECK_ROWS``
#: records drawn from the model, each batch with its own draw of the parameters from their priors.
_CHECK_ROWS = 8
_CHECK_BATCHES = 4

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


@dataclass(frozen=True)
class RecordsSpec:
    """A registered record variable."""

    name: str
    rv: TensorVariable
    data: SharedVariable
    n: int | TensorVariable
    #: Names of one record's own axes (the record axis is not named: its length changes with n).
    dims: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SumSpec:
    """A registered privatized sum: per-record statistic (leading record axis) and its release."""

    name: str
    statistic: TensorVariable
    mechanism: Mechanism
    release_rv: TensorVariable
    shape: tuple[int, ...]
    #: The record variables the statistic is computed from (one table).
    record_names: tuple[str, ...]
    #: The neighbouring relation of the release's guarantee (its sensitivity was checked under it).
    neighbouring: str = "add/remove"


@dataclass(frozen=True)
class SampleSizeSpec:
    """A registered latent sample size and its noisy release."""

    name: str
    rv: TensorVariable
    mechanism: Mechanism
    release_rv: TensorVariable
    initial: int
    flat_prior: bool


@dataclass(frozen=True)
class TableSpec:
    """One table of records: record variables sharing one ``n``, and the sums released from them.

    Records are in one table when they share a :func:`SampleSize`, when one depends on another
    row-wise, or when one statistic uses both. Tables are independent given the parameters.
    """

    records: tuple[RecordsSpec, ...]
    sums: tuple[SumSpec, ...]
    sample_size: SampleSizeSpec | None

    @property
    def fixed_n(self) -> int | None:
        """The known number of records (bounded DP), or ``None``."""
        return None if self.sample_size is not None else int(self.records[0].n)

    @property
    def initial_n(self) -> int:
        """The number of records in the containers when the model was built."""
        return self.sample_size.initial if self.sample_size is not None else self.fixed_n

    @property
    def record_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.records)

    @property
    def label(self) -> str:
        """A short name: the sample size's name, or the first record variable's."""
        return self.sample_size.name if self.sample_size is not None else self.records[0].name


@dataclass
class ModelBlocks:
    """The privacy blocks of one model, in creation order."""

    records: list[RecordsSpec] = field(default_factory=list)
    sums: list[SumSpec] = field(default_factory=list)
    sample_sizes: list[SampleSizeSpec] = field(default_factory=list)
    #: Pairs of record names that must be in one table (row-wise dependence, a shared statistic).
    links: list[tuple[str, str]] = field(default_factory=list)
    #: On while the package's steps run an iteration: the releases' densities may be evaluated
    #: (see :class:`~pymc_unbounded_dp._graph.FrozenRecordsGuard`).
    imputing: SharedVariable = field(
        default_factory=lambda: pytensor.shared(np.array(False), name="dp_records_imputed")
    )

    def sample_size_of(self, rv) -> SampleSizeSpec | None:
        return next((s for s in self.sample_sizes if s.rv is rv), None)

    def tables(self) -> tuple[TableSpec, ...]:
        """The record tables, in the order of their first record variable."""
        table_of = {r.name: r.name for r in self.records}

        def root(name: str) -> str:
            while table_of[name] != name:
                name = table_of[name]
            return name

        by_n = {}
        for r in self.records:
            if isinstance(r.n, TensorVariable):
                first = by_n.setdefault(id(r.n), r.name)
                table_of[root(r.name)] = root(first)
        for a, b in self.links:
            table_of[root(b)] = root(a)
        tables = []
        for head in dict.fromkeys(root(r.name) for r in self.records):
            records = tuple(r for r in self.records if root(r.name) == head)
            names = {r.name for r in records}
            sums = tuple(s for s in self.sums if s.record_names[0] in names)
            n = records[0].n
            tables.append(
                TableSpec(
                    records, sums, self.sample_size_of(n) if isinstance(n, TensorVariable) else None
                )
            )
        return tuple(tables)


_BLOCKS: weakref.WeakKeyDictionary[pm.Model, ModelBlocks] = weakref.WeakKeyDictionary()


def model_blocks(model: pm.Model) -> ModelBlocks:
    """The privacy blocks registered in ``model`` (empty if none).

    A model that PyMC derived from a pmdp model (``pm.do``, ``pm.observe``,
    ``pymc.model.fgraph.clone_model``, ``freeze_dims_and_data``) gets the blocks of the model it
    came from, remapped onto its own variables (see :func:`_derived_blocks`).
    """
    blocks = _BLOCKS.get(model)
    if blocks is None:
        blocks = _BLOCKS[model] = _derived_blocks(model) or ModelBlocks()
    return blocks


def _derived_blocks(model: pm.Model) -> ModelBlocks | None:
    """The blocks of the pmdp model ``model`` was derived from by a PyMC model transform.

    PyMC's transforms rebuild a model from a copy of its graph: the variables are new and the
    package's registry does not know them. The copy of a record container shares its storage
    with the original (PyTensor clones a shared variable onto the same container), and a
    release's copy has the original's op: either identifies the source model; its blocks are then remapped by name. A transform that took a
    latent ``n``, a record variable or a release out of the model (``pm.do``/``pm.observe`` on
    them) is refused with what to do instead.
    """
    for source, blocks in list(_BLOCKS.items()):
        if blocks.records and source is not model and _derives_from(model, blocks):
            return _remapped(blocks, source, model)
    return None


def _derives_from(model: pm.Model, blocks: ModelBlocks) -> bool:
    """Whether ``model`` holds a copy of a record container or a release of ``blocks``."""
    containers = {id(v.container) for v in _shared_ancestors(model.observed_RVs, model)}
    ops = {id(rv.owner.op) for rv in model.basic_RVs}
    releases = [*blocks.sums, *blocks.sample_sizes]
    return any(id(r.data.container) in containers for r in blocks.records) or any(
        id(spec.release_rv.owner.op) in ops for spec in releases
    )


def _shared_ancestors(rvs, model: pm.Model) -> list[SharedVariable]:
    """The shared variables behind the observed values of ``rvs`` (under casts)."""
    values = [model.rvs_to_values[rv] for rv in rvs]
    return [v for v in ancestors(values) if isinstance(v, SharedVariable)]


def _remapped(blocks: ModelBlocks, source: pm.Model, model: pm.Model) -> ModelBlocks:
    """``blocks`` of ``source`` with every variable replaced by ``model``'s of the same name."""

    def variable(name: str, kind: str, free: bool):
        var = model.named_vars.get(name)
        if var is None or var not in (model.free_RVs if free else model.observed_RVs):
            raise ValueError(
                f"This model was derived from a pmdp model (pm.do, pm.observe, clone_model), "
                f"and the transform changed the {kind} {name!r}, which the package's steps "
                f"impute or condition on. Intervene on model parameters only; for a known n, "
                f"build the model with pmdp.Records(..., n=<int>) instead of a SampleSize."
            )
        return var

    sizes = {
        spec.name: SampleSizeSpec(
            name=spec.name,
            rv=variable(spec.name, "latent sample size", free=True),
            mechanism=spec.mechanism,
            release_rv=variable(f"{spec.name}_dp", "release", free=False),
            initial=spec.initial,
            flat_prior=spec.flat_prior,
        )
        for spec in blocks.sample_sizes
    }
    records = []
    for spec in blocks.records:
        rv = variable(spec.name, "record variable", free=False)
        n = sizes[spec.n.name].rv if isinstance(spec.n, TensorVariable) else spec.n
        (data,) = [v for v in _shared_ancestors([rv], model) if v.container is spec.data.container]
        records.append(RecordsSpec(spec.name, rv, data, n, spec.dims))
    # A statistic is a graph of the records (and possibly parameters): rebuild it on this model's
    # variables, by name.
    replace = {
        var: model.named_vars[name]
        for name, var in source.named_vars.items()
        if name in model.named_vars
    }
    replace.update({old.data: new.data for old, new in zip(blocks.records, records)})
    sums = [
        replace_fields(
            spec,
            statistic=replace[spec.statistic]
            if spec.statistic in replace  # the records themselves
            else graph_replace(spec.statistic, replace, strict=False),
            release_rv=variable(spec.name, "release", free=False),
        )
        for spec in blocks.sums
    ]
    private = {*(r.rv for r in records), *(s.release_rv for s in sums)}
    private.update(s.release_rv for s in sizes.values())
    observed = [rv for rv in model.observed_RVs if rv not in private]
    graphs = [*(r.rv for r in records), *(s.statistic for s in sums)]
    fixed = [rv for rv in observed if any(depends_on(graph, [rv]) for graph in graphs)]
    if fixed:
        name = fixed[0].name
        raise ValueError(
            f"This model was derived from a pmdp model by pm.observe on {name!r}, a parameter of "
            f"the records: the package's steps draw records from the parameters' values, not "
            f"from observed data. Fix it with pm.do(model, {{{name!r}: value}}) instead."
        )
    return ModelBlocks(
        records=records,
        sums=sums,
        sample_sizes=list(sizes.values()),
        links=list(blocks.links),
        imputing=blocks.imputing,  # the releases' densities guard on the source's flag
    )


@contextmanager
def records_in_containers(model: pm.Model):
    """Allow the release densities to be evaluated on the records now in the model's containers.

    For code that puts records in the containers itself (tests, diagnostics) and so vouches that
    they are the ones to condition on; see :class:`~pymc_unbounded_dp._graph.FrozenRecordsGuard`.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp.blocks import records_in_containers
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=5)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=2.0)
    >>> logp = model.compile_logp()
    >>> with records_in_containers(model):
    ...     value = float(logp(model.initial_point()))
    """
    imputing = model_blocks(model).imputing
    previous = imputing.get_value()
    imputing.set_value(np.array(True))
    try:
        yield
    finally:
        imputing.set_value(previous)


def is_private_model_variable(rv) -> bool:
    """Whether ``rv`` is a free variable of a model with privacy blocks."""
    return any(blocks.records and rv in model.free_RVs for model, blocks in list(_BLOCKS.items()))


def observed_value(model: pm.Model, rv: TensorVariable) -> np.ndarray:
    """Current value of an observed variable's data (follows ``pm.set_data``); read-only."""
    value = model.rvs_to_values[rv]
    if isinstance(value, SharedVariable):
        return np.asarray(value.get_value(borrow=True))
    return np.asarray(value.data if hasattr(value, "data") else value.eval())


def _check_name(name, model: pm.Model, owner: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{owner}: `name` must be a non-empty string, got {name!r}.")
    if name in model.named_vars:
        raise ValueError(
            f"{owner}({name!r}): `name` is taken: the model already has a variable named {name!r}."
        )
    return name


def _check_unregistered_dist(dist, model: pm.Model, owner: str, argument: str) -> None:
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


def _check_observed(observed, owner: str, argument: str = "observed") -> np.ndarray:
    """The released value(s) ``observed`` (a number, an array, a pandas Series or DataFrame, an
    xarray DataArray or a ``pm.Data`` container) as a float array; refused, naming ``argument``,
    if missing, masked, not numeric or not finite."""
    label = _label(observed, argument)
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
    if array.dtype == object and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) for v in array.flat
    ):
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


def _label(observed, argument: str) -> str:
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


def _check_release_value(
    observed, shape: tuple[int, ...], mechanism: Mechanism, owner: str, argument: str
) -> np.ndarray:
    """``observed`` checked as the release of a value of ``shape`` by ``mechanism``."""
    array = _check_observed(observed, owner, argument)
    label = _label(observed, argument)
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
            _check_release_value(
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
    name = _check_name(name, model, "Records")
    owner = f"Records({name!r})"
    _check_unregistered_dist(dist, model, owner, "dist")
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
        if not _same_n(parent.n, n):
            raise ValueError(
                f"Records({name!r}): `dist` depends on records {parent.name!r}, whose n "
                f"({_describe_n(parent.n)}) differs from `n`={_describe_n(n)}. A record variable "
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
        _check_row_wise(dist, parents, blocks, model, owner)
    else:
        # A large table's container starts with a few rows (see EAGER_RECORDS); the records
        # level fills it at the start of each chain, as it does for every table.
        rows = pt.constant(_CHECK_ROWS if n_rows > EAGER_RECORDS else n_rows, dtype="int64")
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
    dims = _check_dims(dims, initial.shape[1:], f"Records({name!r})", "one record")
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


def _same_n(a, b) -> bool:
    """Whether two ``n`` of Records are the same: one SampleSize variable, or equal ints."""
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return a is b
    return int(a) == int(b)


def _describe_n(n) -> str:
    return f"SampleSize {n.name!r}" if isinstance(n, TensorVariable) else str(n)


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
    name = _check_name(name, model, "PrivatizedSum")
    # An OpenDP measurement states no sensitivity (its guarantee is a map of the input distance):
    # there is no declared sensitivity to check the statistic's bounds against.
    states_sensitivity = not is_measurement(mechanism)
    mechanism = as_mechanism(mechanism, owner, "pmdp.Laplace(epsilon=1.0)")
    blocks = model_blocks(model)
    statistic = _check_statistic(statistic, blocks, model, owner)
    used = _statistic_records(statistic, blocks, owner)
    _check_observed(observed, owner)
    shape = tuple(_record_statistic_value(statistic, blocks, owner).shape[1:])
    if mechanism.domain == "integers":  # discrete mechanisms and Tulap
        if not (statistic.dtype.startswith(("int", "uint")) or statistic.dtype == "bool"):
            raise ValueError(
                f"{owner}: `mechanism` {type(mechanism).__name__} works on the integers but the "
                f"statistic has dtype {statistic.dtype}; use an integer statistic or a continuous "
                "mechanism (Laplace, Gaussian)."
            )
    observed_array = _check_release_value(observed, shape, mechanism, owner, "observed")
    dims = _check_dims(dims, shape, owner, model=model)
    coords = _release_coords(observed, dims, shape, model, owner)
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
            warnings.warn(
                _unbounded_message(bounds, blocks, kind, mechanism, owner),
                SensitivityWarning,
                stacklevel=3,
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
        warnings.warn(
            f"{owner}: {where}, more than the sensitivity {declared:g} declared by `mechanism` "
            f"{kind}: its stated guarantee ({_guarantee(mechanism)}) does not hold"
            f"{_actual_guarantee(mechanism, derived)}. "
            f"Declare sensitivity={derived:g} (calibrating from a budget then adds more noise), "
            "clamp the statistic more tightly, or pass check_sensitivity=False if the records are "
            f"known to be tighter than these bounds.{hint}",
            SensitivityWarning,
            stacklevel=3,
        )
    elif declared > derived * (1 + _SENSITIVITY_RTOL):
        warnings.warn(
            f"{owner}: {where}, less than the sensitivity {declared:g} declared by `mechanism` "
            f"{kind}: the guarantee holds and is stronger than stated"
            f"{_actual_guarantee(mechanism, derived)}, so the noise is larger than the "
            f"bounds need. Calibrate with sensitivity={derived:g} for less noise at the same "
            "budget, or pass check_sensitivity=False.",
            SensitivityWarning,
            stacklevel=3,
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


def _check_dims(
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


def _release_coords(observed, dims, shape: tuple[int, ...], model: pm.Model, owner: str) -> dict:
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
                f"{owner}: the labels of {_label(observed, 'observed')} along {dim!r} ({shown}) "
                f"are not the model's coords[{dim!r}]; the released numbers would be matched to "
                f"the wrong labels. Reorder them, e.g. observed.reindex(model.coords[{dim!r}]), "
                "or pass the values without labels (observed.to_numpy())."
            )
    return coords


def _statistic_records(statistic, blocks: ModelBlocks, owner: str) -> list[RecordsSpec]:
    """The record variables ``statistic`` uses; they must be of one table (the same ``n``)."""
    found = depends_on(statistic, [r.rv for r in blocks.records])
    used = [r for r in blocks.records if r.rv in found]
    for other in used[1:]:
        if not _same_n(used[0].n, other.n):
            raise ValueError(
                f"{owner}: `statistic` combines records {used[0].name!r} (n={_describe_n(used[0].n)}) "
                f"and {other.name!r} (n={_describe_n(other.n)}) of different tables; a sum over "
                "records is released per table. Release one PrivatizedSum per table."
            )
    return used


def _check_statistic(statistic, blocks: ModelBlocks, model: pm.Model, owner: str):
    if not isinstance(statistic, TensorVariable):
        hint = (
            " (stack several statistics along a trailing axis: `pt.stack([a, b], axis=1)`)"
            if isinstance(statistic, list | tuple)
            else ""
        )
        raise TypeError(
            f"{owner}: `statistic` must be a PyTensor expression of pmdp.Records variables "
            f"(one row per record, e.g. `pt.clip(x, 0, 1)`), got {type(statistic).__name__}"
            f"{hint}."
        )
    record_rvs = [r.rv for r in blocks.records]
    if not depends_on(statistic, record_rvs):
        raise ValueError(
            f"{owner}: `statistic` does not depend on any pmdp.Records variable of this model; "
            "build it from the records, e.g. `pt.clip(x, 0, 1)`."
        )
    parameters = depends_on(statistic, model.free_RVs, blockers=record_rvs)
    if parameters:
        names = ", ".join(repr(p.name) for p in parameters)
        raise ValueError(
            f"{owner}: `statistic` depends on model parameter(s) {names}; a released statistic "
            "must be a function of the records only."
        )
    if statistic.ndim == 0:
        raise ValueError(
            f"{owner}: `statistic` must keep the leading record axis (one row per record); got a "
            "scalar. Pass the per-record statistic, PrivatizedSum sums it for you."
        )
    return statistic


def _check_records(blocks: ModelBlocks) -> list[np.ndarray]:
    """Records of every record variable drawn from the model for the build-time checks.

    ``_CHECK_BATCHES`` batches of ``_CHECK_ROWS`` records, each with its own draw of the parameters
    from their priors, stacked; a record variable whose rows all agree even so (a degenerate
    prior draw) is perturbed, so that a check can see rows move.
    """
    rows = pt.constant(_CHECK_ROWS, dtype="int64")
    outputs = with_record_count(
        [r.rv for r in blocks.records],
        [r.data for r in blocks.records],
        rows,
        [s.rv for s in blocks.sample_sizes],
    )
    draw = compile_pymc([], outputs, random_seed=1, mode=QUICK_MODE)
    batches = [[np.asarray(v) for v in draw()] for _ in range(_CHECK_BATCHES)]
    rng = np.random.default_rng(2)
    return [_varied(np.concatenate(parts), rng) for parts in zip(*batches)]


def _varied(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``values`` if its rows are not all equal, else a perturbed copy whose rows differ."""
    if values.shape[0] < 2 or np.any(values != values[:1]):
        return values
    if values.dtype == bool:
        flips = rng.random(values.shape) < 0.5
        flips[0] = ~flips[1]
        return values ^ flips
    steps = rng.integers(0, 3, size=values.shape)
    steps[0], steps[1] = 0, 1
    if values.dtype.kind == "f":
        return values + steps * (1.0 + np.abs(values)) * rng.random(values.shape)
    return values + steps.astype(values.dtype)


def _row_changes(records: list[np.ndarray]) -> list[tuple[str, list[np.ndarray], object]]:
    """Variations of ``records`` and where each row of a row-wise function of them comes from.

    Each entry is ``(description, modified records, rows)``: a record-additive function ``f``
    must give ``f(modified) == f(records)[rows]``. A permutation, truncations to one record and
    to half of them, and single records replaced by a different record.
    """
    m = records[0].shape[0]
    order = np.random.default_rng(3).permutation(m)
    variations = [
        ("the records were permuted", order),
        ("only the first record was kept", np.arange(1)),
        (f"only the first {m // 2} records were kept", np.arange(m // 2)),
    ]
    for position in (0, m - 1):
        other = next(
            (k for k in range(m) if any(np.any(r[k] != r[position]) for r in records)), None
        )
        if other is not None:
            rows = np.arange(m)
            rows[position] = other
            variations.append((f"record {position} was replaced by another record", rows))
    return [(what, [r[rows] for r in records], rows) for what, rows in variations]


def _same_rows(a: np.ndarray, b: np.ndarray) -> bool:
    scale = max(1.0, float(np.max(np.abs(b[np.isfinite(b)]), initial=0.0)))
    return a.shape == b.shape and bool(
        np.allclose(a, b, rtol=1e-9, atol=1e-12 * scale, equal_nan=True)
    )


def _record_statistic_value(statistic, blocks: ModelBlocks, owner: str) -> np.ndarray:
    """The statistic on records drawn from the model, after checking that it is record-additive.

    Record-additive means row ``i`` of the statistic depends on record ``i`` only: evaluated on
    permuted or truncated records, or with one record replaced, the rows permute, truncate or
    change the same way (see :func:`_row_changes`).
    """
    record_rvs = [r.rv for r in blocks.records]
    records = _check_records(blocks)
    rows = records[0].shape[0]
    inputs = [rv.type() for rv in record_rvs]
    fn = quick_function(inputs, [clone_replace(statistic, dict(zip(record_rvs, inputs)))])
    full = np.asarray(fn(*records)[0])
    if full.ndim == 0 or full.shape[0] != rows:
        raise ValueError(
            f"{owner}: `statistic` must keep the leading record axis (one row per record); on "
            f"{rows} records it has shape {full.shape}."
        )
    advice = (
        "row i must depend on record i only (no sums, means, sorting, indexing or centring across "
        "records inside the statistic; PrivatizedSum sums the rows itself)"
    )
    for what, changed, rows_from in _row_changes(records):
        try:
            value = np.asarray(fn(*changed)[0])
        except Exception as error:  # noqa: BLE001 - any failure on fewer records is the finding
            raise ValueError(
                f"{owner}: `statistic` is not record-additive: {advice}. On records drawn from "
                f"the model it fails when {what}: {str(error).splitlines()[0]}"
            ) from None
        if not _same_rows(value, full[rows_from]):
            raise ValueError(
                f"{owner}: `statistic` is not record-additive: {advice}. On {rows} records drawn "
                f"from the model its rows did not follow the records when {what}."
            )
    return full


def _check_row_wise(
    dist: TensorVariable,
    parents: list[RecordsSpec],
    blocks: ModelBlocks,
    model: pm.Model,
    owner: str,
) -> None:
    """Refuse a record distribution in which a record's row depends on other rows of its parents.

    With the parameters drawn from their priors and the parent records drawn from the model, the
    log-density of each row of the new records is compared before and after one parent record
    is replaced: only that record's row may change (``y | X`` may use row ``i`` of ``X`` for
    ``y_i``, not a mean or a sort over the records of ``X``).
    """
    parent_rvs = [p.rv for p in parents]
    record_rvs = [r.rv for r in blocks.records]
    parameters = depends_on(dist, model.basic_RVs, blockers=record_rvs)
    parameters = [p for p in parameters if p not in record_rvs]
    parent_inputs = [rv.type() for rv in parent_rvs]
    parameter_inputs = [rv.type() for rv in parameters]
    conditional = clone_replace(
        dist, {**dict(zip(parent_rvs, parent_inputs)), **dict(zip(parameters, parameter_inputs))}
    )
    value = conditional.type()
    log_density = pm.logp(conditional, value, warn_rvs=False)
    density = quick_function([*parent_inputs, *parameter_inputs, value], [log_density])
    sampler = compile_pymc(
        [*parent_inputs, *parameter_inputs],
        [conditional],
        random_seed=4,
        mode=QUICK_MODE,
        on_unused_input="ignore",
    )
    # Parameters from their priors (a latent n at its starting value: it may have no draws).
    fixed_n = {s.rv: pt.constant(s.initial, dtype=s.rv.dtype) for s in blocks.sample_sizes}
    draw_parameters = (
        compile_pymc([], clone_replace(parameters, fixed_n), random_seed=5, mode=QUICK_MODE)
        if parameters
        else list
    )
    pool = _check_records(blocks)
    parent_records = [pool[record_rvs.index(rv)] for rv in parent_rvs]
    for _ in range(_CHECK_BATCHES):
        theta = [np.asarray(v) for v in draw_parameters()]
        values = np.asarray(sampler(*parent_records, *theta)[0])
        base = np.asarray(density(*parent_records, *theta, values)[0])
        for what, changed, rows_from in _row_changes(parent_records):
            if "replaced" not in what:
                continue
            position = int(np.flatnonzero(rows_from != np.arange(rows_from.size))[0])
            after = np.asarray(density(*changed, *theta, values)[0])
            keep = np.arange(base.shape[0]) != position
            if not _same_rows(after[keep], base[keep]):
                moved = np.flatnonzero(
                    ~np.isclose(after, base, rtol=1e-9, equal_nan=True)
                    .reshape(base.shape[0], -1)
                    .all(axis=1)
                )
                moved = [int(i) for i in moved if i != position]
                names = ", ".join(repr(p.name) for p in parents)
                raise ValueError(
                    f"{owner}: `dist` mixes rows of the records {names}: when {what} of {names}, "
                    f"the distribution of other records changed too (rows {moved[:5]}). Record i "
                    "may depend on row i of its parent records only: no means, sums, sorting or "
                    "centring over the record axis (e.g. `X - X.mean()`); centre with a model "
                    "parameter or a known constant instead."
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
    name = _check_name(name, model, "SampleSize")
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
        _check_unregistered_dist(prior, model, owner, "prior")
        if not prior.dtype.startswith(("int", "uint")) or prior.ndim != 0:
            raise TypeError(
                f"{owner}: `prior` must be a scalar discrete distribution such as "
                f"pm.Poisson.dist(1000); got dtype {prior.dtype}, ndim {prior.ndim}."
            )
    initial = _initial_n(prior, n_dp_value, owner)
    rv = model.register_rv(starting_at(prior, initial), name)
    release = _register_release(model, f"{name}_dp", rv, mechanism, n_dp)
    spec = SampleSizeSpec(
        name=name,
        rv=rv,
        mechanism=mechanism,
        release_rv=release,
        initial=initial,
        flat_prior=flat_prior,
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


#: Values of ``n`` around ``n_dp`` at which the prior's support is probed, on each side.
_PROBE_WINDOW = 1000
#: Draws from the prior added to the probes (they find a support far from ``n_dp``).
_PROBE_DRAWS = 256


def _initial_n(prior: TensorVariable, n_dp: float, owner: str) -> int:
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
