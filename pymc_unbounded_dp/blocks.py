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
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.distributions.shape_utils import change_dist_size
from pymc.model import modelcontext
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import clone_replace
from pytensor.tensor.random.op import RandomVariable
from pytensor.tensor.variable import TensorVariable

from pymc_unbounded_dp._graph import (
    depends_on,
    frozen_records_guard,
    quick_draw,
    quick_function,
    with_record_count,
)
from pymc_unbounded_dp.mechanisms import Mechanism

__all__ = ["PrivatizedSum", "Records", "SampleSize"]

#: Rows drawn to check a statistic at model-build time.
_CHECK_ROWS = 5


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
                TableSpec(records, sums, self.sample_size_of(n) if isinstance(n, TensorVariable) else None)
            )
        return tuple(tables)


_BLOCKS: weakref.WeakKeyDictionary[pm.Model, ModelBlocks] = weakref.WeakKeyDictionary()


def model_blocks(model: pm.Model) -> ModelBlocks:
    """The privacy blocks registered in ``model`` (empty if none)."""
    return _BLOCKS.setdefault(model, ModelBlocks())


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
    return any(
        blocks.records and rv in model.free_RVs for model, blocks in list(_BLOCKS.items())
    )


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
        raise ValueError(f"{owner}: the model already has a variable named {name!r}.")
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


def _check_observed(observed, owner: str) -> np.ndarray:
    value = observed.get_value() if isinstance(observed, SharedVariable) else observed
    try:
        value = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{owner}: `observed` must be numeric, got {observed!r}.") from None
    if not np.all(np.isfinite(value)):
        raise ValueError(f"{owner}: `observed` contains NaN or infinite values: {value}.")
    return value


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
        "Sample with pmdp.sample(...) or pm.sample() (which assigns the package's step), or "
        "put your parameter steps inside the package's step: "
        "pm.sample(step=pmdp.DataAugmentation(parameter_step=...)) (ReversibleJump for a latent n). "
        "For a maximum likelihood or MAP estimate use pmdp.mcem(map=...); for log-likelihoods "
        "pmdp.sample(idata_kwargs={'log_likelihood': True})."
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
        :func:`SampleSize` (unbounded DP).
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
    _check_unregistered_dist(dist, model, "Records", "dist")
    blocks = model_blocks(model)
    sample_size = _check_n(n, blocks)
    n_rows = sample_size.initial if sample_size is not None else int(n)

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
    else:
        rows = pt.constant(n_rows, dtype="int64")
        (initial,) = quick_draw(
            [change_dist_size(dist, new_size=(rows,), expand=True)], seed=_stable_seed(name)
        )
    data = pytensor.shared(np.ascontiguousarray(initial), name=f"{name}_records")
    # The record axis has the latent n as its length under unbounded DP, so that PyMC's forward
    # samplers (prior and posterior predictive) draw n records for each draw of n.
    size = sample_size.rv if sample_size is not None else data.shape[0]
    rv = dist if parents else change_dist_size(dist, new_size=(size,), expand=True)
    rv = model.register_rv(rv, name, observed=data)
    dims = _check_dims(dims, initial.shape[1:], f"Records({name!r})", "one record")
    blocks.records.append(RecordsSpec(name=name, rv=rv, data=data, n=n, dims=dims))
    blocks.links.extend((parent.name, name) for parent in parents)
    return rv


def _stable_seed(name: str) -> int:
    return sum((i + 1) * ord(c) for i, c in enumerate(name)) % (2**31)


def _check_n(n, blocks: ModelBlocks) -> SampleSizeSpec | None:
    sample_size = blocks.sample_size_of(n) if isinstance(n, TensorVariable) else None
    if isinstance(n, TensorVariable) and sample_size is None:
        raise TypeError(
            "Records: `n` must be a non-negative integer or the variable returned by "
            "pmdp.SampleSize(...) in this model; got another tensor."
        )
    if sample_size is None:
        if isinstance(n, bool) or not isinstance(n, numbers.Integral | float):
            raise TypeError(f"Records: `n` must be a non-negative integer, got {n!r}.")
        if isinstance(n, float) and n != int(n) or n < 0:
            raise ValueError(f"Records: `n` must be a non-negative integer, got {n!r}.")
    return sample_size


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
    mechanism : Mechanism
        The noise added to each coordinate of the sum, e.g. ``pmdp.Laplace(epsilon=1.0)``.
    observed : array_like or pm.Data
        The released value, shaped like ``statistic[0]``.
    dims : str or tuple of str, optional
        Names of the release's axes, as for any PyMC variable (declare their ``coords`` in the
        model); they label the release in ``observed_data``, predictive draws and the
        log-likelihood.
    model : pm.Model, optional

    Returns
    -------
    TensorVariable
        The observed release variable.

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
    """
    owner = f"PrivatizedSum({name!r})"
    model = modelcontext(model)
    name = _check_name(name, model, "PrivatizedSum")
    if not isinstance(mechanism, Mechanism):
        raise TypeError(
            f"{owner}: `mechanism` must be a pmdp mechanism such as pmdp.Laplace(epsilon=1.0), "
            f"got {mechanism!r}."
        )
    blocks = model_blocks(model)
    statistic = _check_statistic(statistic, blocks, model, owner)
    used = _statistic_records(statistic, blocks, owner)
    observed_array = _check_observed(observed, owner)
    shape = tuple(_record_statistic_value(statistic, blocks, owner).shape[1:])
    if observed_array.shape != shape:
        raise ValueError(
            f"{owner}: `observed` has shape {observed_array.shape} but one record's statistic has "
            f"shape {shape}; they must match (the statistic is summed over the record axis)."
        )
    if mechanism.discrete:
        if not (statistic.dtype.startswith(("int", "uint")) or statistic.dtype == "bool"):
            raise ValueError(
                f"{owner}: `mechanism` {type(mechanism).__name__} works on the integers but the "
                f"statistic has dtype {statistic.dtype}; use an integer statistic or a continuous "
                "mechanism (Laplace, Gaussian)."
            )
        if np.any(observed_array != np.round(observed_array)):
            raise ValueError(
                f"{owner}: `observed` must be integer-valued for {type(mechanism).__name__}."
            )
    if statistic.dtype == "bool":
        statistic = statistic.astype("int64")
    release = _register_release(
        model, name, statistic.sum(axis=0), mechanism, observed, dims=_check_dims(dims, shape, owner)
    )
    blocks.sums.append(
        SumSpec(
            name=name, statistic=statistic, mechanism=mechanism, release_rv=release, shape=shape,
            record_names=tuple(r.name for r in used),
        )
    )
    blocks.links.extend((used[0].name, other.name) for other in used[1:])
    return release


def _check_dims(dims, shape: tuple[int, ...], owner: str, what: str = "the release"):
    if dims is None:
        return None
    dims = (dims,) if isinstance(dims, str) else tuple(dims)
    if len(dims) != len(shape) or not all(isinstance(d, str) for d in dims):
        raise ValueError(
            f"{owner}: `dims`={dims} must name each of the {len(shape)} axes of {what} (shape "
            f"{shape}) with a string."
        )
    return dims


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
        try:
            statistic = pt.as_tensor_variable(statistic)
        except (TypeError, ValueError):
            raise TypeError(f"{owner}: `statistic` must be a tensor expression of Records.") from None
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


def _record_statistic_value(statistic, blocks: ModelBlocks, owner: str) -> np.ndarray:
    """Draw a few records from the model and check that ``statistic`` is record-additive on them.

    Record-additive means row ``i`` of the statistic depends on record ``i`` only: evaluated on
    permuted or truncated records, the rows permute or truncate the same way.
    """
    record_rvs = [r.rv for r in blocks.records]
    rows = pt.constant(_CHECK_ROWS, dtype="int64")
    drawn = quick_draw(
        with_record_count(
            record_rvs, [r.data for r in blocks.records], rows, [s.rv for s in blocks.sample_sizes]
        ),
        seed=1,
    )
    inputs = [rv.type() for rv in record_rvs]
    fn = quick_function(inputs, [clone_replace(statistic, dict(zip(record_rvs, inputs)))])
    (full,) = fn(*drawn)
    full = np.asarray(full)
    if full.ndim == 0 or full.shape[0] != _CHECK_ROWS:
        raise ValueError(
            f"{owner}: `statistic` must keep the leading record axis (one row per record); on "
            f"{_CHECK_ROWS} records it has shape {full.shape}."
        )
    order = np.array([3, 0, 4, 1, 2])
    permuted = np.asarray(fn(*[d[order] for d in drawn])[0])
    truncated = np.asarray(fn(*[d[:2] for d in drawn])[0])
    if not (
        np.allclose(permuted, full[order], equal_nan=True)
        and np.allclose(truncated, full[:2], equal_nan=True)
    ):
        raise ValueError(
            f"{owner}: `statistic` is not record-additive: row i must depend on record i only "
            "(no sums, means, sorting or centring across records inside the statistic)."
        )
    return full


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
    n_dp : int or float
        The released noisy count (may be negative).
    mechanism : Mechanism
        Noise on the count. Use :class:`DiscreteLaplace` or :class:`DiscreteGaussian` (exact
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
    if not isinstance(mechanism, Mechanism):
        raise TypeError(
            f"{owner}: `mechanism` must be a pmdp mechanism such as "
            f"pmdp.DiscreteLaplace(epsilon=0.5), got {mechanism!r}."
        )
    n_dp_value = float(_check_observed(n_dp, owner.replace("observed", "n_dp")))
    if mechanism.discrete and n_dp_value != round(n_dp_value):
        raise ValueError(
            f"{owner}: `n_dp`={n_dp} must be an integer for {type(mechanism).__name__}; use the "
            "count as released, or a continuous mechanism if it was released with one."
        )
    flat_prior = prior is None
    if flat_prior:

        def no_draws(rng=None, size=None):
            raise ValueError(
                f"{owner} has the improper flat prior on n >= 0, which has no random draws (a "
                "forward draw of n was asked for, e.g. by prior predictive sampling). Give it a "
                "proper prior, e.g. "
                f"pmdp.SampleSize({name!r}, n_dp=..., mechanism=..., prior=pm.Poisson.dist(1000))."
            )

        prior = pm.CustomDist.dist(
            logp=lambda value: pt.switch(pt.ge(value, 0), 0.0, -np.inf), random=no_draws,
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
    rv = model.register_rv(prior, name, initval=initial)
    release = _register_release(model, f"{name}_dp", rv, mechanism, n_dp)
    spec = SampleSizeSpec(
        name=name, rv=rv, mechanism=mechanism, release_rv=release, initial=initial,
        flat_prior=flat_prior,
    )
    model_blocks(model).sample_sizes.append(spec)
    return rv


def _initial_n(prior: TensorVariable, n_dp: float, owner: str) -> int:
    """Check the prior's support and pick the supported ``n`` closest to ``n_dp``."""
    top = int(max(2 * max(n_dp, 0.0), 1000.0)) + 1
    candidates = np.concatenate([np.arange(-3, 0), np.arange(top)]).astype("int64")
    (logp,) = quick_draw([pm.logp(prior, pt.as_tensor(candidates))])
    logp = np.broadcast_to(logp, candidates.shape)
    if np.any(np.isfinite(logp[:3])):
        raise ValueError(
            f"{owner}: `prior` gives positive probability to n < 0; use a distribution on "
            "n >= 0 (Poisson, NegativeBinomial, DiscreteUniform(lower >= 0), ...)."
        )
    supported = candidates[3:][np.isfinite(logp[3:])]
    if supported.size == 0:
        raise ValueError(f"{owner}: `prior` has no support in 0..{top - 1}.")
    return int(supported[np.argmin(np.abs(supported - math.floor(n_dp + 0.5)))])
