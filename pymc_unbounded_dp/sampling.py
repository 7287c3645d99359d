"""``pmdp.sample``: ``pm.sample`` with the right augmentation step for a DP model."""

from __future__ import annotations

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from threadpoolctl import threadpool_limits

from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.steps import augmentation_step

__all__ = ["sample"]

_STEP_NAMES = {cls.name for cls in pm.step_methods.STEP_METHODS}


def sample(
    draws: int = 1000,
    *,
    tune: int = 1000,
    chains: int | None = None,
    cores: int | None = None,
    random_seed=None,
    step=None,
    model: pm.Model | None = None,
    n_moves: int | None = None,
    interweave: bool | dict = True,
    keep_records: int | None = None,
    nuts_sampler: str = "pymc",
    blas_threads: int | None = 1,
    **kwargs,
):
    """Sample the posterior of a model with privatized data.

    Builds :class:`~pymc_unbounded_dp.DataAugmentation` (known ``n``) or
    :class:`~pymc_unbounded_dp.ReversibleJump` (``n`` from :func:`~pymc_unbounded_dp.SampleSize`)
    around the parameter steps and runs ``pm.sample``. The latent records are imputed every
    iteration but not stored, unless ``keep_records`` asks for them.

    Parameters
    ----------
    draws, tune, chains, cores, random_seed, model
        As in :func:`pymc.sample`. The same ``random_seed`` gives the same draws whatever ``cores``.
    step : step or list of steps, optional
        Steps for (some of) the *parameters*; the others are assigned as ``pm.sample`` does (NUTS
        for continuous ones). The record and ``n`` moves are always added.
    n_moves : int, optional
        Birth/death moves per iteration (unbounded DP); see :class:`ReversibleJump`.
    interweave : bool or dict, default True
        Also move the continuous parameters with the records held fixed in their non-centred form
        (:class:`~pymc_unbounded_dp.Interweave`; the full-refresh move where a record variable has
        no such form). On noisy releases this is what makes the chain mix: plain data
        augmentation moves ``theta`` by a fraction of its posterior per iteration. ``False``: the
        paper's plain data augmentation. A dict passes options to the step, e.g.
        ``interweave={"n_steps": 5}`` (by default the number of steps per iteration is chosen
        during tuning, and is 0, no move, where the move does not pay for its cost).
    keep_records : int, optional
        Also return the imputed records of every ``keep_records``-th post-tuning draw, in a group
        ``imputed_records`` (dims ``chain, kept_draw, record, ...``; under unbounded DP the record
        axis is padded with NaN up to the largest ``n`` and ``n`` is given per draw). Useful as
        synthetic data.
    nuts_sampler : {"pymc"}
        Only PyMC's own sampler can interleave the record moves.
    blas_threads : int or None, default 1
        Threads of the BLAS/OpenMP libraries while sampling (``threadpoolctl``; inherited by the
        chains' processes). The linear algebra of one iteration is on tiny matrices, where extra
        threads only add hand-offs: with two OpenBLAS threads on a busy 2-core machine a model
        with ``MvNormal`` records sampled 30x slower. ``None`` leaves the libraries' setting.
    **kwargs
        Passed on to :func:`pymc.sample` (``progressbar``, ``idata_kwargs``, ...), including step
        arguments by step name such as ``nuts={"target_accept": 0.9}``.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        What ``pm.sample`` returns (DataTree on PyMC 6). The posterior has the parameters and, under
        unbounded DP, ``n``; ``sample_stats`` has ``refresh_accept_rate`` and, under unbounded DP,
        ``birth_accept_rate``, ``death_accept_rate`` (NaN in a draw with no proposal of that
        kind) and ``n_moves`` (birth/death moves per iteration). The imputed records are removed
        from ``observed_data``.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 1, 1)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    ...     idata = pmdp.sample(draws=100, tune=100, chains=2, random_seed=1, progressbar=False)
    """
    model = modelcontext(model)
    if nuts_sampler != "pymc":
        raise ValueError(
            f"`nuts_sampler`={nuts_sampler!r} cannot interleave the record moves; only 'pymc' "
            "is supported."
        )
    if blas_threads is not None and (
        isinstance(blas_threads, bool) or not isinstance(blas_threads, int) or blas_threads < 1
    ):
        raise ValueError(f"`blas_threads` must be a positive integer or None, got {blas_threads!r}.")
    step_kwargs = {name: kwargs.pop(name) for name in list(kwargs) if name in _STEP_NAMES}
    compiled = compile_model(model)
    step = augmentation_step(
        model, step, n_moves=n_moves, interweave=interweave, keep_records=keep_records,
        step_kwargs=step_kwargs,
    )
    with threadpool_limits(limits=blas_threads):
        result = pm.sample(
            draws,
            tune=tune,
            chains=chains,
            cores=cores,
            random_seed=random_seed,
            step=step,
            model=model,
            **kwargs,
        )
    if not kwargs.get("return_inferencedata", True):
        return result
    return _tidy(result, compiled.record_names, keep_records)


def _group(result, name: str) -> xr.Dataset | None:
    if hasattr(result, "children"):  # xarray.DataTree (PyMC 6)
        return result[name].to_dataset() if name in result.children else None
    return getattr(result, name, None)


def _set_group(result, name: str, dataset: xr.Dataset) -> None:
    if hasattr(result, "children"):
        result[name] = xr.DataTree(dataset)
    elif name in result.groups():
        setattr(result, name, dataset)
    else:
        result.add_groups({name: dataset})


def _tidy(result, record_names, keep_records):
    """Drop imputed records from ``observed_data``; turn kept records into their own group."""
    observed = _group(result, "observed_data")
    if observed is not None:
        _set_group(result, "observed_data", _without(observed, record_names))
    stats = _group(result, "sample_stats")
    if keep_records and stats is not None and "records" in stats:
        _set_group(result, "imputed_records", _records_dataset(stats["records"], record_names))
        _set_group(result, "sample_stats", _without(stats, ["records"]))
    return result


def _without(dataset: xr.Dataset, names) -> xr.Dataset:
    """``dataset`` without the variables ``names`` and the dimensions only they used."""
    kept = dataset.drop_vars([n for n in names if n in dataset])
    used = {dim for var in kept.data_vars.values() for dim in var.dims}
    return kept.drop_dims([d for d in kept.dims if d not in used])


def _records_dataset(kept: xr.DataArray, record_names) -> xr.Dataset:
    """Stack the kept record sets (an object stat) into arrays padded to the largest ``n``."""
    cells = kept.values.reshape(kept.sizes["chain"], kept.sizes["draw"])
    kept_draws = np.flatnonzero([c is not None for c in cells[0]])
    sets = cells[:, kept_draws]
    counts = np.vectorize(lambda s: len(s[record_names[0]]), otypes=[np.int64])(sets)
    ragged = counts.min() != counts.max()
    data = {}
    for name in record_names:
        first = sets[0, 0][name]
        dtype = np.float64 if ragged else first.dtype
        fill = np.nan if ragged else 0
        array = np.full((*sets.shape, counts.max(), *first.shape[1:]), fill, dtype=dtype)
        for index in np.ndindex(sets.shape):
            array[index][: counts[index]] = sets[index][name]
        dims = ["chain", "kept_draw", "record"] + [f"{name}_dim_{i}" for i in range(first.ndim - 1)]
        data[name] = (dims, array)
    data["n"] = (["chain", "kept_draw"], counts)
    coords = {"chain": kept["chain"].values, "kept_draw": kept["draw"].values[kept_draws]}
    return xr.Dataset(data, coords=coords)
