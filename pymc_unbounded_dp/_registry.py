"""The per-model registry of the privacy blocks, and the record tables it groups them into.

:func:`~pymc_unbounded_dp.blocks.Records`, :func:`~pymc_unbounded_dp.blocks.PrivatizedSum` and
:func:`~pymc_unbounded_dp.blocks.SampleSize` note what they registered in :class:`ModelBlocks`
(``model_blocks(model)``), which :mod:`pymc_unbounded_dp._compile`, the steps, the predictive
samplers and the diagnostics read. A model PyMC derived from a pmdp model (``pm.do``,
``pm.observe``, ``clone_model``) gets its source's blocks remapped onto its own variables.
"""

from __future__ import annotations

import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace as replace_fields

import numpy as np
import pymc as pm
import pytensor
from pytensor.compile.sharedvalue import SharedVariable
from pytensor.graph.replace import graph_replace
from pytensor.tensor.variable import TensorVariable

from pymc_unbounded_dp._graph import ancestors, depends_on
from pymc_unbounded_dp._inputs import initial_n
from pymc_unbounded_dp.mechanisms import Mechanism


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
    #: The ``n_dp`` that ``initial`` was chosen for, when the model was built.
    built_n_dp: float
    #: Starts found for other values of ``n_dp`` (each search compiles the prior's density).
    _other_starts: dict[float, int] = field(default_factory=dict, repr=False, compare=False)

    def chain_start(self, model: pm.Model) -> int:
        """Where a chain starts ``n``: the supported value closest to the *current* ``n_dp``.

        The model's own initial point keeps ``initial``, chosen for the ``n_dp`` of the model's
        build; ``pm.set_data`` may have changed it since (a refit of another release)."""
        n_dp = float(observed_value(model, self.release_rv))
        if n_dp == self.built_n_dp:
            return self.initial
        if n_dp not in self._other_starts:
            self._other_starts[n_dp] = initial_n(self.rv, n_dp, f"SampleSize({self.name!r})")
        return self._other_starts[n_dp]


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


def _reachable(graph, replace: dict) -> dict:
    """The entries of ``replace`` whose keys ``graph`` reaches without passing another key.

    ``graph_replace`` fails ("not a part of graph") on a key below another key (a record
    container below its record variable), even with ``strict=False``.
    """
    blockers = list(replace)
    return {v: replace[v] for v in ancestors([graph], blockers=blockers) if v in replace}


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
            built_n_dp=spec.built_n_dp,
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
            else graph_replace(spec.statistic, _reachable(spec.statistic, replace), strict=False),
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
    >>> from pymc_unbounded_dp._registry import records_in_containers
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
