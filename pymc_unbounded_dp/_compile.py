"""Model compilation: find the privacy blocks in a ``pm.Model`` and build the compiled pieces.

Built once per model (and cached), shared by the step methods, MCEM and the benchmarks. A model
has one or more *record tables* (:class:`~pymc_unbounded_dp._registry.TableSpec`: record variables
with one ``n`` and the sums released from them); each gets a :class:`CompiledTable` with

* ``propose(point, m)``: ``m`` fresh records drawn ancestrally from the record model at the
  parameters in ``point``, together with their per-record statistics ``t`` (``m x D``, all
  privatized sums side by side);
* ``statistics(records)``: ``t`` of given records;
* ``noise``: the coordinate-wise mechanism parameters of the ``D`` released numbers (and of
  ``n_dp``) in the array form the compiled kernels read;
* ``record_target(point)``: the released values, the noise, the proposal and the log prior of the
  latent ``n`` at the parameters in ``point``, as the plain
  :class:`~pymc_unbounded_dp.kernels.RecordTarget` the record kernels take;
* ``set_records(records)``: the one way the steps write records into the model's containers
  (what PyMC's logp reads), counted by ``version`` so that a step can tell whether another step
  wrote since it last did.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import find_rng_nodes, reseed_rngs
from pytensor.graph.replace import clone_replace

from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on, with_record_count
from pymc_unbounded_dp._registry import (
    ModelBlocks,
    RecordsSpec,
    SampleSizeSpec,
    TableSpec,
    model_blocks,
    observed_value,
)
from pymc_unbounded_dp.blocks import check_releases
from pymc_unbounded_dp.kernels import NoiseArrays, RecordTarget, default_n_moves


@dataclass(eq=False)
class CompiledTable:
    """The compiled pieces of one record table (see the module docstring).

    All functions take PyMC's point (the value variables, transformed scale); the records of the
    table depend on the parameters only (never on another table), so each table is imputed on its
    own.
    """

    model: pm.Model
    spec: TableSpec
    input_names: tuple[str, ...]
    input_dtypes: tuple[np.dtype, ...]
    noise: NoiseArrays
    n_noise: NoiseArrays | None
    _propose: object
    _log_prior_n: object | None  # None: flat prior on n >= 0
    _statistics: object | None = None  # compiled on first use by `statistics`
    #: How many times :meth:`set_records` has written the containers.
    version: int = field(default=0, repr=False)

    @property
    def sample_size(self) -> SampleSizeSpec | None:
        """The table's latent sample size (unbounded DP), or ``None`` (bounded DP)."""
        return self.spec.sample_size

    @property
    def fixed_n(self) -> int | None:
        """The known number of records under bounded DP."""
        return self.spec.fixed_n

    @property
    def records(self) -> tuple[RecordsSpec, ...]:
        return self.spec.records

    @property
    def record_names(self) -> tuple[str, ...]:
        return self.spec.record_names

    @property
    def n_value_name(self) -> str | None:
        n = self.sample_size
        return None if n is None else self.model.rvs_to_values[n.rv].name

    @cached_property
    def n_noise_sd(self) -> float | None:
        """The sd of the noise on ``n_dp`` (:func:`noise_sd`); ``None`` under bounded DP."""
        size = self.sample_size
        return None if size is None else noise_sd(size.mechanism)

    def default_n_moves(self, n: int) -> int:
        """:func:`~pymc_unbounded_dp.kernels.default_n_moves` at ``n`` records, for the noise on
        this table's ``n_dp`` (0 under bounded DP: no moves over ``n``)."""
        if self.sample_size is None:
            return 0
        return default_n_moves(n, noise_sd=self.n_noise_sd)

    def chain_start_n(self) -> int:
        """The ``n`` a chain starts at: the known ``n``, or the supported value closest to the
        current ``n_dp`` (:meth:`~pymc_unbounded_dp._registry.SampleSizeSpec.chain_start`)."""
        size = self.sample_size
        return self.fixed_n if size is None else size.chain_start(self.model)

    def n_at(self, point: dict) -> int:
        """The number of records at ``point`` (its ``n`` under unbounded DP)."""
        name = self.n_value_name
        return self.fixed_n if name is None else int(point[name])

    def released_sums(self) -> np.ndarray:
        """The released ``s_dp`` of the table's sums, flattened side by side (follows
        ``pm.set_data``)."""
        values = [observed_value(self.model, s.release_rv).reshape(-1) for s in self.spec.sums]
        return np.concatenate(values, dtype=np.float64)

    def released_n(self) -> float:
        """The released ``n_dp`` (unbounded DP only)."""
        return float(observed_value(self.model, self.sample_size.release_rv))

    def propose(self, point: dict, m: int) -> tuple[list[np.ndarray], np.ndarray]:
        """``m`` fresh records from the model at ``point`` and their statistics ``(m, D)``."""
        return self._propose_at(self._inputs(point), m)

    def record_target(self, point: dict) -> RecordTarget:
        """The target of the record kernels at the parameters in ``point``, as plain data.

        Its ``propose`` and ``log_prior_n`` are bound to ``point``; ``released`` and ``n_dp`` are
        read now (they follow ``pm.set_data``); ``reseed`` is :meth:`reseed`.
        """
        inputs = self._inputs(point)
        unbounded = self.sample_size is not None
        return RecordTarget(
            released=self.released_sums(),
            noise=self.noise,
            propose=partial(self._propose_at, inputs),
            n_dp=self.released_n() if unbounded else None,
            n_noise=self.n_noise,
            log_prior_n=None if self._log_prior_n is None else partial(self._log_prior_at, inputs),
            reseed=self.reseed,
        )

    def _inputs(self, point: dict) -> list[np.ndarray]:
        # The compiled functions trust their inputs (PyTensor's input checks cost ~15 us per
        # call): the point's values are converted to the value variables' dtypes here.
        return [np.asarray(point[k], dtype=t) for k, t in zip(self.input_names, self.input_dtypes)]

    def _propose_at(self, inputs: list[np.ndarray], m: int) -> tuple[list[np.ndarray], np.ndarray]:
        *records, stats = self._propose(*inputs, np.asarray(m, dtype=np.int64))
        return [np.ascontiguousarray(r) for r in records], stats

    def _log_prior_at(self, inputs: list[np.ndarray], values: np.ndarray) -> np.ndarray:
        return np.broadcast_to(self._log_prior_n(*inputs, values), values.shape)

    def statistics(self, records: list[np.ndarray]) -> np.ndarray:
        """The per-record statistics ``t`` (``(m, D)``) of given records of this table."""
        if self._statistics is None:
            self._statistics = statistic_function(self.spec)
        return np.asarray(self._statistics(*records))

    def reseed(self, seed: int) -> None:
        """Seed the random generators behind :meth:`propose` (called at the start of a chain)."""
        reseed_rngs(find_rng_nodes(self._propose.maker.fgraph.inputs), seed)

    def current_records(self) -> list[np.ndarray]:
        """The records in the model's containers (read-only views)."""
        return [spec.data.get_value(borrow=True) for spec in self.spec.records]

    def set_records(self, records: list[np.ndarray]) -> None:
        """Put records of this table (in the order of :attr:`record_names`) into the model's
        record containers (what PyMC's logp reads), and count the write in :attr:`version`.

        Every write of the containers goes through here: the records step, the interweaving
        moves and the tests."""
        for spec, values in zip(self.spec.records, records):
            spec.data.set_value(np.asarray(values, dtype=spec.data.dtype), borrow=True)
        self.version += 1


@dataclass(eq=False)
class CompiledModel:
    """The compiled pieces of a differentially private model: one :class:`CompiledTable` per
    record table."""

    model: pm.Model
    blocks: ModelBlocks
    tables: tuple[CompiledTable, ...]
    #: Functions the steps derive from this compilation (the interweaving move's non-centred
    #: target, in C and in numba; the parameter steps' gradients; the model log density), keyed
    #: by what they depend on: later steps on the same model reuse them instead of compiling
    #: again (numba: 1-4 s; a NUTS gradient: 1-3 s). Read and filled through :meth:`memoised`.
    memo: dict = field(default_factory=dict, repr=False)

    def memoised(self, key, build: Callable[[], Any]) -> Any:
        """``memo[key]``, built by ``build()`` on the first call (``None`` is kept too: a build
        that found nothing to compile is not tried again)."""
        if key not in self.memo:
            self.memo[key] = build()
        return self.memo[key]

    @property
    def unbounded(self) -> bool:
        """Whether some table has a latent sample size."""
        return bool(self.blocks.sample_sizes)

    @property
    def record_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.blocks.records)

    @property
    def n_value_names(self) -> tuple[str, ...]:
        """Value-variable names of the latent sample sizes."""
        return tuple(self.model.rvs_to_values[s.rv].name for s in self.blocks.sample_sizes)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Value-variable names of the model's parameters (everything free except the ``n``)."""
        excluded = set(self.n_value_names)
        return tuple(v.name for v in self.model.value_vars if v.name not in excluded)

    def single_table(self, owner: str) -> CompiledTable:
        """The only table of the model; ``owner`` explains a refusal of several tables."""
        if len(self.tables) > 1:
            labels = ", ".join(repr(t.spec.label) for t in self.tables)
            raise NotImplementedError(
                f"{owner} supports models with one record table; this model has "
                f"{len(self.tables)} ({labels}). Use pmdp.sample for models with several tables."
            )
        return self.tables[0]

    def set_records(self, records: list[np.ndarray]) -> None:
        """Put records of every record variable (in the order of :attr:`record_names`) into the
        model's containers, table by table (:meth:`CompiledTable.set_records`)."""
        by_name = dict(zip(self.record_names, records))
        for table in self.tables:
            table.set_records([by_name[name] for name in table.record_names])

    def reseed(self, seed: int) -> None:
        """Seed every table's proposal generators (distinct streams derived from ``seed``)."""
        for table, child in zip(self.tables, np.random.SeedSequence(seed).spawn(len(self.tables))):
            table.reseed(int(child.generate_state(1)[0]))


#: Half-width of the grid on which :func:`noise_sd` sums, in nats below the density's peak.
_SD_TAIL_NATS = 50.0
#: Most points of that grid.
_SD_GRID = 200_001


def noise_sd(mechanism) -> float:
    """The standard deviation of one coordinate of ``mechanism``'s noise, from its log-density.

    Summed on a grid out to where the density is ``exp(-50)`` of its peak (every integer for a
    discrete mechanism when there are few enough, else evenly spaced points), so that it holds
    for every mechanism, user-defined ones included.

    Examples
    --------
    >>> import pymc_unbounded_dp as pmdp
    >>> round(noise_sd(pmdp.Laplace(scale=2.0)), 3)  # sqrt(2) * 2
    2.828
    """
    width = float(mechanism.tail_width(_SD_TAIL_NATS))
    grid = np.linspace(-width, width, _SD_GRID)
    if mechanism.discrete:
        grid = np.unique(np.round(grid))
    log_density = np.asarray(mechanism.logpdf(grid), dtype=np.float64)
    weights = np.exp(log_density - np.max(log_density))
    weights /= weights.sum()
    mean = float(np.sum(weights * grid))
    return math.sqrt(float(np.sum(weights * (grid - mean) ** 2)))


_CACHE: weakref.WeakKeyDictionary[pm.Model, tuple[tuple, CompiledModel]] = (
    weakref.WeakKeyDictionary()
)


def compile_model(model: pm.Model | None = None) -> CompiledModel:
    """Validate the privacy blocks of ``model`` and compile its pieces (cached per model).

    The released values are checked again on every call (:func:`~pymc_unbounded_dp.blocks.
    check_releases`): ``pm.set_data`` may have changed them since the model was built.

    Raises
    ------
    ValueError
        If the model has no ``Records``, a record table without any ``PrivatizedSum``, a
        ``SampleSize`` that no ``Records`` use (it would be sampled as a free-standing ``n``), a
        released value that is not valid any more, or a Potential, observed variable or parameter
        that reads the records or a latent ``n`` (the moves would leave it out of their targets).
    """
    model = modelcontext(model)
    blocks = model_blocks(model)
    if not blocks.records:
        raise ValueError(
            "The model has no pmdp.Records: there is nothing to impute. Declare the confidential "
            "records with pmdp.Records(...) and their release with pmdp.PrivatizedSum(...)."
        )
    for table in blocks.tables():
        if not table.sums:
            names = ", ".join(repr(n) for n in table.record_names)
            raise ValueError(
                f"The model has pmdp.Records {names} but no pmdp.PrivatizedSum of them: without a "
                "release the records carry no information. Add pmdp.PrivatizedSum(name, "
                "statistic, mechanism, observed)."
            )
    for size in blocks.sample_sizes:
        if not any(r.n is size.rv for r in blocks.records):
            raise ValueError(
                f"The model has pmdp.SampleSize {size.name!r} but no pmdp.Records use it: it would "
                f"be sampled as a free-standing n. Pass n=<the SampleSize> to its Records, e.g. "
                f"pmdp.Records(name, dist, n={size.name})."
            )
    check_releases(model)
    _refuse_terms_the_moves_cannot_see(model, blocks)
    signature = (
        len(blocks.records),
        len(blocks.sums),
        len(blocks.sample_sizes),
        len(model.named_vars),
    )
    cached = _CACHE.get(model)
    if cached is not None and cached[0] == signature:
        return cached[1]
    compiled = CompiledModel(
        model=model, blocks=blocks, tables=tuple(_build(model, t) for t in blocks.tables())
    )
    _CACHE[model] = (signature, compiled)
    return compiled


def _refuse_terms_the_moves_cannot_see(model: pm.Model, blocks) -> None:
    """Refuse a density term that reads the records or a latent ``n`` outside the releases.

    The record refresh, the birth/death moves and the sums level target the parameters' priors,
    the records' law, the prior of ``n`` and the releases: a ``pm.Potential``, an observed
    variable or a parameter's prior that reads the records or ``n`` would be left out of their
    targets, a silently wrong posterior. (Deterministics add no density and may read anything.)
    """
    records = [r.rv for r in blocks.records]
    sizes = [s.rv for s in blocks.sample_sizes]
    releases = {s.release_rv for s in blocks.sums} | {s.release_rv for s in blocks.sample_sizes}
    terms = [("pm.Potential", v) for v in model.potentials]
    terms += [("parameter", v) for v in model.free_RVs if v not in sizes]
    terms += [
        ("observed variable", v)
        for v in model.observed_RVs
        if v not in releases and v not in records
    ]
    for kind, term in terms:
        read = depends_on(term, [*records, *sizes])
        if read:
            names = ", ".join(repr(v.name) for v in read)
            raise ValueError(
                f"The {kind} {term.name!r} reads {names}, which the record and sample-size moves "
                "change without evaluating it: it would be left out of their targets (a wrong "
                "posterior). Give a prior of n as pmdp.SampleSize(..., prior=...), and release "
                "statistics of the records with pmdp.PrivatizedSum."
            )


def _build(model: pm.Model, table: TableSpec) -> CompiledTable:
    value_vars = list(model.value_vars)
    free_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}

    def at_values(graphs):
        return replace_rvs_by_values(
            graphs, rvs_to_values=free_values, rvs_to_transforms=model.rvs_to_transforms
        )

    m = pt.scalar("m", dtype="int64")
    record_rvs = [r.rv for r in table.records]
    stats = flat_statistics(table.sums)
    # Parameters become their (untransformed) values first: cloning for the record count must not
    # copy the parameters' own random variables.
    n_value = [model.rvs_to_values[table.sample_size.rv]] if table.sample_size is not None else []
    outputs = with_record_count(
        at_values([*record_rvs, stats]), [r.data for r in table.records], m, n_value
    )
    propose = compile_pymc(
        [*value_vars, m], outputs, on_unused_input="ignore", random_seed=0, mode=KERNEL_MODE
    )
    propose.trust_input = True

    n_spec = table.sample_size
    n_noise = NoiseArrays.of([n_spec.mechanism], [1]) if n_spec is not None else None
    log_prior_n = None
    if n_spec is not None and not n_spec.flat_prior:
        values = pt.vector("n_values", dtype="int64")
        log_prior = pm.logp(n_spec.rv, values, warn_rvs=False)
        log_prior_n = compile_pymc(
            [*value_vars, values],
            at_values([log_prior])[0],
            on_unused_input="ignore",
            mode=KERNEL_MODE,
        )

    return CompiledTable(
        model=model,
        spec=table,
        input_names=tuple(v.name for v in value_vars),
        input_dtypes=tuple(np.dtype(v.dtype) for v in value_vars),
        noise=NoiseArrays.of([s.mechanism for s in table.sums], _sizes(table.sums)),
        n_noise=n_noise,
        _propose=propose,
        _log_prior_n=log_prior_n,
    )


def _sizes(sums) -> list[int]:
    return [int(np.prod(s.shape, dtype=int)) for s in sums]


def flat_statistics(sums) -> pt.TensorVariable:
    """The per-record statistics of ``sums`` side by side as one float ``(rows, D)`` matrix."""
    flat = [
        pt.cast(pt.reshape(s.statistic, (s.statistic.shape[0], k)), "float64")
        for s, k in zip(sums, _sizes(sums))
    ]
    return pt.concatenate(flat, axis=1) if len(flat) > 1 else flat[0]


def statistic_function(table: TableSpec):
    """A function ``records -> t`` (``(m, D)``) of a table's record arrays; used by tests and MCEM."""
    record_rvs = [r.rv for r in table.records]
    inputs = [rv.type() for rv in record_rvs]
    out = clone_replace(flat_statistics(table.sums), dict(zip(record_rvs, inputs)))
    # a parent record variable that enters the table only through a child's law is an input the
    # statistics need not read
    return compile_pymc(inputs, out, mode=KERNEL_MODE, on_unused_input="ignore")
