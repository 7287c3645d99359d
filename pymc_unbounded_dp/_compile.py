"""Model compilation: find the privacy blocks in a ``pm.Model`` and build the compiled pieces.

Built once per model (and cached), shared by the step methods, MCEM and the benchmarks:

* ``propose(point, m)``: ``m`` fresh records drawn ancestrally from the record model at the
  parameters in ``point``, together with their per-record statistics ``t`` (``m x D``, all
  privatized sums side by side);
* ``statistics(records)``: ``t`` of given records;
* ``noise``: the coordinate-wise mechanism parameters of the ``D`` released numbers (and of
  ``n_dp``) in the array form the compiled kernels read;
* ``record_target(point)``: the released values, the noise, the proposal and the log prior of the
  latent ``n`` at the parameters in ``point``, as the plain
  :class:`~pymc_unbounded_dp.kernels.RecordTarget` the record kernels take.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from functools import partial

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from pymc.pytensorf import find_rng_nodes, reseed_rngs
from pytensor.graph.replace import clone_replace

from pymc_unbounded_dp._graph import KERNEL_MODE, with_record_count
from pymc_unbounded_dp.blocks import ModelBlocks, SampleSizeSpec, model_blocks, observed_value
from pymc_unbounded_dp.kernels import NoiseArrays, RecordTarget


@dataclass(eq=False)
class CompiledModel:
    """The compiled pieces of a differentially private model (see the module docstring)."""

    model: pm.Model
    blocks: ModelBlocks
    input_names: tuple[str, ...]
    input_dtypes: tuple[np.dtype, ...]
    noise: NoiseArrays
    n_noise: NoiseArrays | None
    _propose: object
    _log_prior_n: object | None  # None: flat prior on n >= 0
    _statistics: object | None = None  # compiled on first use by `statistics`

    @property
    def sample_size(self) -> SampleSizeSpec | None:
        """The latent sample size (unbounded DP), or ``None`` (bounded DP)."""
        return self.blocks.sample_sizes[0] if self.blocks.sample_sizes else None

    @property
    def fixed_n(self) -> int | None:
        """The known number of records under bounded DP."""
        return None if self.sample_size is not None else int(self.blocks.records[0].n)

    @property
    def record_names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.blocks.records)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """Value-variable names of the model's parameters (everything free except ``n``)."""
        n = self.sample_size
        excluded = {self.model.rvs_to_values[n.rv].name} if n is not None else set()
        return tuple(v.name for v in self.model.value_vars if v.name not in excluded)

    @property
    def n_value_name(self) -> str | None:
        n = self.sample_size
        return None if n is None else self.model.rvs_to_values[n.rv].name

    def released_sums(self) -> np.ndarray:
        """The released ``s_dp`` of all sums, flattened side by side (follows ``pm.set_data``)."""
        values = [observed_value(self.model, s.release_rv).reshape(-1) for s in self.blocks.sums]
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
        """The per-record statistics ``t`` (``(m, D)``) of given records."""
        if self._statistics is None:
            self._statistics = statistic_function(self)
        return np.asarray(self._statistics(*records))

    def reseed(self, seed: int) -> None:
        """Seed the random generators behind :meth:`propose` (called at the start of a chain)."""
        reseed_rngs(find_rng_nodes(self._propose.maker.fgraph.inputs), seed)

    def set_records(self, records: list[np.ndarray]) -> None:
        """Put imputed records into the model's record containers (what PyMC's logp reads)."""
        for spec, values in zip(self.blocks.records, records):
            spec.data.set_value(np.asarray(values, dtype=spec.data.dtype), borrow=True)


_CACHE: weakref.WeakKeyDictionary[pm.Model, tuple[tuple, CompiledModel]] = (
    weakref.WeakKeyDictionary()
)


def compile_model(model: pm.Model | None = None) -> CompiledModel:
    """Validate the privacy blocks of ``model`` and compile its pieces (cached per model).

    Raises
    ------
    ValueError
        If the model has no ``Records`` or ``Records`` without any ``PrivatizedSum``.
    """
    model = modelcontext(model)
    blocks = model_blocks(model)
    if not blocks.records:
        raise ValueError(
            "The model has no pmdp.Records: there is nothing to impute. Declare the confidential "
            "records with pmdp.Records(...) and their release with pmdp.PrivatizedSum(...)."
        )
    if not blocks.sums:
        raise ValueError(
            "The model has pmdp.Records but no pmdp.PrivatizedSum: without a release the records "
            "carry no information. Add pmdp.PrivatizedSum(name, statistic, mechanism, observed)."
        )
    signature = (len(blocks.records), len(blocks.sums), len(blocks.sample_sizes), len(model.named_vars))
    cached = _CACHE.get(model)
    if cached is not None and cached[0] == signature:
        return cached[1]
    compiled = _build(model, blocks)
    _CACHE[model] = (signature, compiled)
    return compiled


def _build(model: pm.Model, blocks: ModelBlocks) -> CompiledModel:
    value_vars = list(model.value_vars)
    free_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}

    def at_values(graphs):
        return replace_rvs_by_values(
            graphs, rvs_to_values=free_values, rvs_to_transforms=model.rvs_to_transforms
        )

    m = pt.scalar("m", dtype="int64")
    record_rvs = [r.rv for r in blocks.records]
    stats = _flat_statistics(blocks)
    # Parameters become their (untransformed) values first: cloning for the record count must not
    # copy the parameters' own random variables.
    outputs = with_record_count(
        at_values([*record_rvs, stats]), [r.data for r in blocks.records], m
    )
    propose = compile_pymc(
        [*value_vars, m], outputs, on_unused_input="ignore", random_seed=0, mode=KERNEL_MODE
    )
    propose.trust_input = True

    n_spec = blocks.sample_sizes[0] if blocks.sample_sizes else None
    n_noise = NoiseArrays.of([n_spec.mechanism], [1]) if n_spec is not None else None
    log_prior_n = None
    if n_spec is not None and not n_spec.flat_prior:
        values = pt.vector("n_values", dtype="int64")
        log_prior = pm.logp(n_spec.rv, values, warn_rvs=False)
        log_prior_n = compile_pymc(
            [*value_vars, values], at_values([log_prior])[0], on_unused_input="ignore",
            mode=KERNEL_MODE,
        )

    return CompiledModel(
        model=model,
        blocks=blocks,
        input_names=tuple(v.name for v in value_vars),
        input_dtypes=tuple(np.dtype(v.dtype) for v in value_vars),
        noise=NoiseArrays.of([s.mechanism for s in blocks.sums], _sizes(blocks)),
        n_noise=n_noise,
        _propose=propose,
        _log_prior_n=log_prior_n,
    )


def _sizes(blocks: ModelBlocks) -> list[int]:
    return [int(np.prod(s.shape, dtype=int)) for s in blocks.sums]


def _flat_statistics(blocks: ModelBlocks) -> pt.TensorVariable:
    """All per-record statistics side by side as one float ``(rows, D)`` matrix."""
    flat = [
        pt.cast(pt.reshape(s.statistic, (s.statistic.shape[0], k)), "float64")
        for s, k in zip(blocks.sums, _sizes(blocks))
    ]
    return pt.concatenate(flat, axis=1) if len(flat) > 1 else flat[0]


def statistic_function(compiled: CompiledModel):
    """A function ``records -> t`` (``(m, D)``) for given record arrays; used by tests and MCEM."""
    record_rvs = [r.rv for r in compiled.blocks.records]
    inputs = [rv.type() for rv in record_rvs]
    out = clone_replace(_flat_statistics(compiled.blocks), dict(zip(record_rvs, inputs)))
    return compile_pymc(inputs, out, mode=KERNEL_MODE)
