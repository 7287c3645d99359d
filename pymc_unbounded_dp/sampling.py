"""``pmdp.sample``: ``pm.sample`` with the right augmentation step for a DP model."""

from __future__ import annotations

import inspect
import logging
import time

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext
from threadpoolctl import threadpool_limits

from pymc_unbounded_dp._checks import check_integer
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._keywords import check_keywords
from pymc_unbounded_dp._pymc_bridge import LEGACY_SAMPLE_KEYWORDS, step_method_names
from pymc_unbounded_dp._warnings import warn_at_caller
from pymc_unbounded_dp.steps import augmentation_step
from pymc_unbounded_dp.sums import (
    LATENT_SUM_ROLE,
    Accuracy,
    approximation_accuracy,
    total_name,
)

__all__ = ["sample", "stack_log_likelihood"]


def _named_parameters(function) -> frozenset[str]:
    parameters = inspect.signature(function).parameters.items()
    return frozenset(k for k, p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD)


#: The keywords ``pm.sample`` takes besides step options by step name: its own parameters (read
#: from PyMC's ``pm.sample`` at import), ``target_accept`` (NUTS's, through its ``**kwargs``)
#: and, on PyMC 5, ``start`` (the old name of ``initvals``).
_PM_SAMPLE_KEYWORDS = _named_parameters(pm.sample) | {"target_accept"} | LEGACY_SAMPLE_KEYWORDS


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
    interweave: bool | dict | str = "auto",
    keep_records: int | None = None,
    nuts_sampler: str = "pymc",
    blas_threads: int | None = 1,
    augment: str = "auto",
    **kwargs,
):
    """Sample the posterior of a model with privatized data.

    Builds :class:`~pymc_unbounded_dp.DataAugmentation` (known ``n``) or
    :class:`~pymc_unbounded_dp.ReversibleJump` (``n`` from :func:`~pymc_unbounded_dp.SampleSize`)
    around the parameter steps and runs ``pm.sample``. At the records level the latent records
    are imputed every iteration but not stored, unless ``keep_records`` asks for them; at the sums
    level (``augment``) each table's true sums are the latent state instead.

    Parameters
    ----------
    draws, tune, chains, cores, random_seed, model
        As in :func:`pymc.sample`. The same ``random_seed`` gives the same draws whatever ``cores``.
    step : step or list of steps, optional
        Steps for (some of) the *parameters*; the others are assigned as ``pm.sample`` does (NUTS
        for continuous ones). The record and ``n`` moves are always added.
    n_moves : int, optional
        Birth/death moves per iteration (unbounded DP); see :class:`ReversibleJump`.
    interweave : {"auto", True, False} or dict, default "auto"
        Also move the continuous parameters with the records held fixed in their non-centred form
        (:class:`~pymc_unbounded_dp.Interweave`). On noisy releases this is what makes the chain
        mix: plain data augmentation moves ``theta`` by a fraction of its posterior per iteration.
        ``"auto"``: the move where every record variable has a non-centred form, its number of
        steps per iteration chosen during tuning, and switched off (0 steps, from the tuning
        window where this shows) where it does not pay for its cost; no move where a form is
        missing. ``True`` forces the move on (at least one step per iteration; the full-refresh
        move where a form is missing). ``False``: the paper's plain data augmentation. A dict
        passes options to the step, e.g. ``interweave={"n_steps": 5}`` or
        ``{"backend": "python"}``.
    keep_records : int, optional
        Also return the imputed records of every ``keep_records``-th post-tuning draw, in a group
        ``imputed_records`` (dims ``chain, kept_draw, record, ...``; under unbounded DP the record
        axis is padded with NaN up to the largest ``n`` and ``n`` is given per draw). Useful as
        synthetic data.
    nuts_sampler : {"pymc"}
        Only PyMC's own sampler can interleave the record moves.
    augment : {"auto", "records", "sums"}, default "auto"
        The augmentation level (see :class:`~pymc_unbounded_dp.DataAugmentation`): ``"sums"``
        moves each table's true sums and ``n`` by their exact law, at a cost per iteration that
        does not depend on ``n`` (census scale: up to ``10**9`` records); ``"records"`` imputes
        every record; ``"auto"`` is ``"sums"`` exactly when every table's sums have an exact law
        (Bernoulli, Categorical, Binomial, DiscreteUniform records with any statistic; the plain
        sum of Poisson, NegativeBinomial, Normal, Gamma, Exponential records) and no record is
        asked for. Both levels target the same posterior of the parameters and ``n``.
    blas_threads : int or None, default 1
        Threads of the BLAS/OpenMP libraries while sampling (``threadpoolctl``; inherited by the
        chains' processes). The linear algebra of one iteration is on tiny matrices, where extra
        threads only add hand-offs: with two OpenBLAS threads on a busy 2-core machine a model
        with ``MvNormal`` records sampled 30x slower. ``None`` leaves the libraries' setting.
    **kwargs
        Passed on to :func:`pymc.sample` (``progressbar``, ``idata_kwargs``,
        ``compute_convergence_checks``, ...), including step arguments by step name such as
        ``nuts={"target_accept": 0.9}``, and ``target_accept`` as ``pm.sample`` takes it. Any
        other keyword is refused with a ``TypeError`` naming it and the closest valid one.
        ``idata_kwargs={"log_likelihood": True}`` adds a ``log_likelihood`` group, recorded while
        sampling: per draw, the log-density of every released number given that draw's latent
        data (the imputed records' sums, or the sums level's latent sums) and ``n``; one
        variable per release. :func:`stack_log_likelihood` makes every released number one
        point, for ``az.loo`` and ``az.compare`` (``docs/samplers.md`` says what that LOO
        estimates, and when it is not informative).

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        What ``pm.sample`` returns (DataTree on PyMC 6). The posterior has the parameters and, under
        unbounded DP, ``n``; ``sample_stats`` has ``lp``, the model's log density at the draw
        with the release terms and the latent records (or, at the sums level, the latent true
        totals), Jacobians included as NUTS reports it (see the samplers page),
        ``refresh_accept_rate`` and, under unbounded DP,
        ``birth_accept_rate``, ``death_accept_rate`` and ``n_moves`` (birth/death moves per
        iteration); with the interweaving move, ``interweave_on``, ``interweave_accept_rate`` and
        ``interweave_steps``. No acceptance rate is NaN: one is 0.0 in a draw that proposed
        nothing of its kind (a move switched off, or by chance no birth or no death). The imputed records are removed
        from ``observed_data``. At the sums level the posterior also has the true total of each
        release, ``f"{name}_total"`` (the sum before noise), ``sample_stats`` has
        ``sums_accept_rate`` (and the proposal scales) in place of ``refresh_accept_rate``, and
        the posterior's attributes ``pmdp_augment`` (the level used), ``pmdp_sum_laws`` (each
        table's law, and whether it is exact) and ``pmdp_sum_accuracy`` (each table's
        Berry--Esseen bound and moment-rule error at the posterior mean, "exact" for an exact
        law) say how it was sampled; a poor approximation also warns.

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
    _check_sample_keywords(kwargs)
    model = modelcontext(model)
    if nuts_sampler != "pymc":
        raise ValueError(
            f"`nuts_sampler`={nuts_sampler!r} cannot interleave the record moves; only 'pymc' "
            "is supported."
        )
    check_integer(blas_threads, "blas_threads", allow_none=True)
    _check_draws(draws, tune, chains, cores)
    step_names = step_method_names()
    step_kwargs = {name: kwargs.pop(name) for name in list(kwargs) if name in step_names}
    if "target_accept" in kwargs:  # as pm.sample: an option of NUTS, given once
        nuts = dict(step_kwargs.get("nuts") or {})
        if "target_accept" in nuts:
            raise ValueError(
                "`target_accept` was given twice, as a keyword and in `nuts`: give it once, "
                "either `target_accept=...` or `nuts={'target_accept': ...}`."
            )
        step_kwargs["nuts"] = {**nuts, "target_accept": kwargs.pop("target_accept")}
    idata_kwargs = dict(kwargs.pop("idata_kwargs", None) or {})
    log_likelihood = bool(idata_kwargs.pop("log_likelihood", False))
    if log_likelihood and not kwargs.get("return_inferencedata", True):
        raise ValueError(
            "`idata_kwargs={'log_likelihood': True}` needs `return_inferencedata=True`: the "
            "log-likelihood of the releases is assembled into the returned InferenceData."
        )
    start = time.perf_counter()
    compiled = compile_model(model)
    step = augmentation_step(
        model,
        step,
        n_moves=n_moves,
        interweave=interweave,
        keep_records=keep_records,
        step_kwargs=step_kwargs,
        log_likelihood=log_likelihood,
        augment=augment,
    )
    _log_compilation(time.perf_counter() - start)
    kwargs = _starting_n_at_current_releases(compiled, kwargs)
    with threadpool_limits(limits=blas_threads):
        result = pm.sample(
            draws,
            tune=tune,
            chains=chains,
            cores=cores,
            random_seed=random_seed,
            step=step,
            model=model,
            idata_kwargs=idata_kwargs or None,
            **kwargs,
        )
    if not kwargs.get("return_inferencedata", True):
        return result
    result = _tidy(result, compiled, keep_records)
    _record_level(result, compiled, step)
    return result


def _starting_n_at_current_releases(compiled, kwargs: dict) -> dict:
    """``kwargs`` with initial values of each latent ``n`` whose ``n_dp`` changed since the model
    was built (``pm.set_data``): the model's initial point keeps the old start, and a chain
    started there has to walk to the new release (a refit must equal a freshly built model's).
    Initial values the caller gave win."""
    starts = {}
    for table in compiled.tables:
        spec = table.spec.sample_size
        if spec is not None and (start := spec.chain_start(compiled.model)) != spec.initial:
            starts[spec.name] = np.asarray(start, dtype=np.int64)
    if not starts:
        return kwargs
    key = "start" if "start" in kwargs else "initvals"  # PyMC 5's old name, if used
    given = kwargs.get(key)
    if given is None or isinstance(given, dict):
        merged = {**starts, **(given or {})}
    else:  # one dict per chain
        merged = [{**starts, **(per_chain or {})} for per_chain in given]
    return {**kwargs, key: merged}


def stack_log_likelihood(idata, *, var_name: str = "releases", dim: str = "release"):
    """The releases' log-likelihood as one pointwise array: each released number one point.

    :func:`sample` with ``idata_kwargs={"log_likelihood": True}`` gives one variable per release
    in the ``log_likelihood`` group (``s``, ``n_dp``, ...), where ArviZ's ``loo`` and ``compare``
    want one (or ``var_name=``, which leaves out all but one release). This stacks them: every
    released number (each coordinate of each ``PrivatizedSum``, each ``n_dp``) becomes one
    point along ``dim``, labelled ``"s[north]"`` (the release's coordinates) or ``"n_dp"``, in
    the order of the releases' names, so that ``az.loo(stacked)`` and ``az.compare`` work
    without ``var_name``.

    The values are those of the group: per draw, ``log eta(s_dp - T)`` of each released number
    given that draw's latent totals ``T`` (the imputed records' sums, or the sums level's latent
    sums) and ``log eta_n(n_dp - n)`` given its ``n``. Given the latent data the releases are
    independent (the noise is drawn independently per number), which is what PSIS-LOO needs:
    the point of ``s[north]`` estimates ``log p(s_dp[north] | every other released number)``,
    the density of that release predicted from the others, with the records (not only the
    parameters) re-inferred without it. See ``docs/samplers.md`` for when this is informative.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
        A result of :func:`sample` with a ``log_likelihood`` group.
    var_name : str, default "releases"
        Name of the stacked variable.
    dim : str, default "release"
        Name of its pointwise dimension.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        A copy of ``idata`` whose ``log_likelihood`` group holds only ``var_name``, with dims
        ``(chain, draw, dim)``; ``idata`` itself is unchanged.

    Examples
    --------
    >>> import arviz as az
    >>> import pymc as pm, pytensor.tensor as pt
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model(coords={"stat": ["sum", "sum_sq"]}):
    ...     mu = pm.Normal("mu", 0, 2)
    ...     n = pmdp.SampleSize("n", n_dp=40, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=n)
    ...     clamped = pt.clip(x, -3, 3)
    ...     _ = pmdp.PrivatizedSum("s", pt.stack([clamped, clamped**2], axis=1),
    ...                            pmdp.Laplace(epsilon=1.0, sensitivity=12.0),
    ...                            observed=[21.0, 75.0], dims="stat")
    ...     idata = pmdp.sample(draws=100, tune=100, chains=2, random_seed=1, progressbar=False,
    ...                         compute_convergence_checks=False,
    ...                         idata_kwargs={"log_likelihood": True})
    >>> stacked = pmdp.stack_log_likelihood(idata)
    >>> [str(label) for label in stacked["log_likelihood"]["release"].values]
    ['n_dp', 's[sum]', 's[sum_sq]']
    >>> loo = az.loo(stacked)  # three points: one per released number
    """
    log_likelihood = _group(idata, "log_likelihood")
    if log_likelihood is None or not log_likelihood.data_vars:
        raise ValueError(
            "stack_log_likelihood: `idata` has no log_likelihood group; sample with "
            "pmdp.sample(..., idata_kwargs={'log_likelihood': True})."
        )
    arrays, labels = [], []
    for name in sorted(log_likelihood.data_vars):
        array = log_likelihood[name]
        points = [d for d in array.dims if d not in ("chain", "draw")]
        values = array.transpose("chain", "draw", *points).values
        arrays.append(values.reshape(*values.shape[:2], -1))
        if arrays[-1].shape[-1] == 1:
            labels.append(name)
            continue
        axes = [array[d].values if d in array.coords else range(array.sizes[d]) for d in points]
        for index in np.ndindex(*(len(axis) for axis in axes)):
            labels.append(f"{name}[{', '.join(str(a[i]) for a, i in zip(axes, index))}]")
    stacked = xr.DataArray(
        np.concatenate(arrays, axis=-1),
        dims=("chain", "draw", dim),
        coords={"chain": log_likelihood["chain"], "draw": log_likelihood["draw"], dim: labels},
    )
    result = idata.copy()
    _set_group(result, "log_likelihood", xr.Dataset({var_name: stacked}))
    return result


def _check_sample_keywords(kwargs: dict) -> None:
    """Refuse a keyword that neither :func:`sample` nor ``pm.sample`` takes, naming it (PyMC
    would take it for a step's options and answer about ``step_kwargs`` and ``nuts``)."""
    check_keywords(
        "pmdp.sample()",
        kwargs,
        [*_named_parameters(sample), *_PM_SAMPLE_KEYWORDS, *step_method_names()],
        "It takes its own arguments, pm.sample's, and a step's options by the step's name "
        "(e.g. nuts={'target_accept': 0.9}).",
    )


#: Building the samplers longer than this (seconds) is reported in one line.
SLOW_COMPILATION = 5.0
# A child of PyMC's logger: shown (and silenced) with PyMC's own messages.
_log = logging.getLogger("pymc.pymc_unbounded_dp")


def _log_compilation(seconds: float) -> None:
    """Say, in one line, when building the samplers took a while: PyMC's "took N seconds"
    counts the sampling loop only, and the first fit of a new model pays 10-20 s of
    compilation."""
    if seconds >= SLOW_COMPILATION:
        _log.info(
            "pmdp: compiled the model's samplers in %.0f s (PyTensor caches the compiled code on "
            "disk: later fits of this model compile in a few seconds).",
            seconds,
        )


def _accuracy(law, posterior):
    """``law``'s accuracy figure at the posterior mean of the parameters and of ``n``."""
    if law.family.exact:
        return Accuracy(exact=True)
    values = []
    for rv in law.table.model.free_RVs:
        mean = posterior[rv.name].mean(("chain", "draw")).values
        if rv.dtype.startswith("int"):
            mean = np.round(mean)
        values.append(np.asarray(mean, dtype=rv.dtype))
    size = law.table.spec.sample_size
    n = law.table.fixed_n if size is None else int(round(float(posterior[size.name].mean())))
    return approximation_accuracy(law, values, n)


def _record_level(result, compiled, step) -> None:
    """Move the sums level's true totals into the posterior; say in its attributes which level
    and which laws were used."""
    posterior, stats = _group(result, "posterior"), _group(result, "sample_stats")
    if posterior is None:
        return
    posterior.attrs["pmdp_augment"] = step.augment
    if step.augment == "sums":
        laws = step.records_step.laws
        posterior.attrs["pmdp_sum_laws"] = "; ".join(
            f"{law.table.spec.label}: {law.description}" for law in laws
        )
        accuracies = [_accuracy(law, posterior) for law in laws]
        posterior.attrs["pmdp_sum_accuracy"] = "; ".join(
            f"{law.table.spec.label}: {a.describe()}" for law, a in zip(laws, accuracies)
        )
        for law, accuracy in zip(laws, accuracies):
            if accuracy.poor:
                warn_at_caller(
                    f"pmdp.sample: table {law.table.spec.label!r}: {accuracy.describe()}.",
                    UserWarning,
                )
        moved = {}
        for spec in compiled.blocks.sums:
            name = total_name(spec)
            if stats is not None and name in stats:
                values = _per_draw(stats[name].values, spec.shape)
                dims = ["chain", "draw", *(f"{name}_dim_{i}" for i in range(len(spec.shape)))]
                moved[name] = xr.DataArray(
                    values, dims=dims, attrs={LATENT_SUM_ROLE: f"the true total of {spec.name!r}"}
                )
        posterior = posterior.assign(
            {
                k: v.assign_coords(chain=posterior["chain"], draw=posterior["draw"])
                for k, v in moved.items()
            }
        )
        if stats is not None:
            _set_group(result, "sample_stats", _without(stats, list(moved)))
    _set_group(result, "posterior", posterior)


def _check_draws(draws, tune, chains, cores) -> None:
    """Refuse counts that ``pm.sample`` would take silently (``tune=-5`` runs 5 draws) or fail on
    deep inside (``chains=0``)."""
    counts = (("draws", draws, 0), ("tune", tune, 0), ("chains", chains, 1), ("cores", cores, 1))
    for name, value, minimum in counts:
        check_integer(value, name, minimum=minimum, allow_none=minimum == 1)


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


def _tidy(result, compiled, keep_records):
    """Drop imputed records from ``observed_data``; turn kept records into their own group."""
    observed = _group(result, "observed_data")
    if observed is not None:
        _set_group(result, "observed_data", _without(observed, compiled.record_names))
    stats = _group(result, "sample_stats")
    if keep_records and stats is not None and "records" in stats:
        _set_group(result, "imputed_records", _records_dataset(stats["records"], compiled.tables))
        stats = _without(stats, ["records"])
        _set_group(result, "sample_stats", stats)
    if stats is not None and any(name.startswith(_LOG_LIKELIHOOD) for name in stats.data_vars):
        _set_group(result, "log_likelihood", _log_likelihood_dataset(stats, observed))
        _set_group(
            result,
            "sample_stats",
            _without(stats, [n for n in stats.data_vars if n.startswith(_LOG_LIKELIHOOD)]),
        )
    return result


_LOG_LIKELIHOOD = "log_likelihood_"


def _per_draw(values: np.ndarray, shape: tuple) -> np.ndarray:
    """A stat's values as one ``(chain, draw, *shape)`` array, whether the trace stored them as
    numbers or as objects (one array per draw, as some trace backends store an array stat).

    >>> import numpy as np
    >>> stored = np.empty((1, 2), dtype=object)
    >>> stored[0, 0], stored[0, 1] = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    >>> _per_draw(stored, (2,)).tolist()
    [[[1.0, 2.0], [3.0, 4.0]]]
    """
    if values.dtype == object:
        values = np.stack(values.ravel()).reshape(*values.shape, -1)
    return values.reshape(*values.shape[:2], *shape)


def _log_likelihood_dataset(stats: xr.Dataset, observed: xr.Dataset | None) -> xr.Dataset:
    """The releases' log-densities per draw (stats of ``ReleaseLogLikelihood``), named and shaped
    like the released values in ``observed_data`` (as ArviZ's LOO and WAIC expect)."""
    data = {}
    for stat in [n for n in stats.data_vars if n.startswith(_LOG_LIKELIHOOD)]:
        name = stat[len(_LOG_LIKELIHOOD) :]
        values = _per_draw(stats[stat].values, observed[name].shape)
        dims = ["chain", "draw", *observed[name].dims]
        coords = {d: observed[name][d] for d in observed[name].dims if d in observed[name].coords}
        data[name] = xr.DataArray(values, dims=dims, coords=coords)
    return xr.Dataset(data, coords={"chain": stats["chain"], "draw": stats["draw"]})


def _without(dataset: xr.Dataset, names) -> xr.Dataset:
    """``dataset`` without the variables ``names`` and the dimensions only they used."""
    kept = dataset.drop_vars([n for n in names if n in dataset])
    used = {dim for var in kept.data_vars.values() for dim in var.dims}
    return kept.drop_dims([d for d in kept.dims if d not in used])


def _records_dataset(kept: xr.DataArray, tables) -> xr.Dataset:
    """Stack the kept record sets (an object stat) into arrays padded to each table's largest
    ``n``: one record axis and one count per table (``record`` and ``n`` for a single table)."""
    cells = kept.values.reshape(kept.sizes["chain"], kept.sizes["draw"])
    kept_draws = np.flatnonzero([c is not None for c in cells[0]])
    sets = cells[:, kept_draws]
    model_coords = tables[0].model.coords
    data, coords = {}, {"chain": kept["chain"].values, "kept_draw": kept["draw"].values[kept_draws]}
    for table in tables:
        single = len(tables) == 1
        record_dim = "record" if single else f"{table.spec.label}_record"
        count_name = (
            "n"
            if single
            else table.sample_size.name
            if table.sample_size is not None
            else f"n_{table.spec.label}"
        )
        first_name = table.record_names[0]
        counts = np.vectorize(lambda s, key=first_name: len(s[key]), otypes=[np.int64])(sets)
        ragged = counts.min() != counts.max()
        for spec in table.records:
            name = spec.name
            first = sets[0, 0][name]
            dtype = np.float64 if ragged else first.dtype
            fill = np.nan if ragged else 0
            array = np.full((*sets.shape, counts.max(), *first.shape[1:]), fill, dtype=dtype)
            for index in np.ndindex(sets.shape):
                array[index][: counts[index]] = sets[index][name]
            dims = ["chain", "kept_draw", record_dim]
            dims += list(spec.dims or (f"{name}_dim_{i}" for i in range(first.ndim - 1)))
            data[name] = (dims, array)
            coords.update(
                {d: list(model_coords[d]) for d in spec.dims or () if model_coords.get(d)}
            )
        data[count_name] = (["chain", "kept_draw"], counts)
    return xr.Dataset(data, coords=coords)
