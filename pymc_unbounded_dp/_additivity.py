"""The build-time checks that run the model: record-additive statistics, row-wise records.

A released statistic must be record-additive (row ``i`` depends on record ``i`` only), and a
record distribution that depends on other records may read their row ``i`` only. Both checks
evaluate the graph on records drawn from the model and on variations of them (permuted,
truncated, one record replaced): see :func:`record_statistic_value` and :func:`check_row_wise`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pymc
from pytensor.graph.replace import clone_replace
from pytensor.tensor.variable import TensorVariable

from pymc_unbounded_dp._graph import QUICK_MODE, depends_on, quick_function, with_record_count
from pymc_unbounded_dp._registry import ModelBlocks, RecordsSpec

#: The build-time checks of a statistic (record-additive) and of a record distribution that
#: depends on other records (row-wise) run on ``_CHECK_BATCHES`` batches of ``CHECK_ROWS``
#: records drawn from the model, each batch with its own draw of the parameters from their priors.
CHECK_ROWS = 8
_CHECK_BATCHES = 4


def same_n(a, b) -> bool:
    """Whether two ``n`` of Records are the same: one SampleSize variable, or equal ints."""
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return a is b
    return int(a) == int(b)


def describe_n(n) -> str:
    """``n`` of Records as a message shows it: ``SampleSize 'n'`` or the int."""
    return f"SampleSize {n.name!r}" if isinstance(n, TensorVariable) else str(n)


def statistic_records(statistic, blocks: ModelBlocks, owner: str) -> list[RecordsSpec]:
    """The record variables ``statistic`` uses; they must be of one table (the same ``n``)."""
    found = depends_on(statistic, [r.rv for r in blocks.records])
    used = [r for r in blocks.records if r.rv in found]
    for other in used[1:]:
        if not same_n(used[0].n, other.n):
            raise ValueError(
                f"{owner}: `statistic` combines records {used[0].name!r} (n={describe_n(used[0].n)}) "
                f"and {other.name!r} (n={describe_n(other.n)}) of different tables; a sum over "
                "records is released per table. Release one PrivatizedSum per table."
            )
    return used


def check_statistic(statistic, blocks: ModelBlocks, model: pm.Model, owner: str):
    """``statistic`` checked as an expression of the records only, keeping the record axis."""
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

    ``_CHECK_BATCHES`` batches of ``CHECK_ROWS`` records, each with its own draw of the parameters
    from their priors, stacked; a record variable whose rows all agree even so (a degenerate
    prior draw) is perturbed, so that a check can see rows move.
    """
    rows = pt.constant(CHECK_ROWS, dtype="int64")
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


def record_statistic_value(statistic, blocks: ModelBlocks, owner: str) -> np.ndarray:
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


def check_row_wise(
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
