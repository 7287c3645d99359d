"""Prior and posterior predictive draws of the releases, with the records' length following ``n``.

Under unbounded DP the record axis has the latent ``n`` as its length, so PyMC's forward samplers
draw ``n_d`` records for each draw ``d`` of ``n``, sum their statistic and add the mechanism's
noise: the predictive draws of the releases (each :func:`~pymc_unbounded_dp.PrivatizedSum` and each
``n_dp``) are exact. What PyMC cannot do is stack the records themselves, whose length changes from
draw to draw. These wrappers pick the releases by default, refuse such record variables with a
message before anything is drawn, explain a flat prior on ``n`` (which has no draws) up front, and
keep the imputed records out of ``observed_data``.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence

import numpy as np
import pymc as pm
import xarray as xr
from pymc.model import modelcontext

from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._graph import depends_on
from pymc_unbounded_dp._registry import ModelBlocks, TableSpec, model_blocks, observed_value
from pymc_unbounded_dp.sampling import _group, _set_group, _without
from pymc_unbounded_dp.sums import AUGMENT_LEVELS, table_law

__all__ = ["sample_posterior_predictive", "sample_prior_predictive"]


def sample_posterior_predictive(
    trace,
    model: pm.Model | None = None,
    *,
    var_names: str | Sequence[str] | None = None,
    random_seed=None,
    extend_inferencedata: bool = False,
    progressbar: bool = False,
    augment: str = "auto",
    **kwargs,
):
    """Posterior predictive draws of the releases: fresh records and fresh noise per posterior draw.

    For each posterior draw ``d`` of the parameters (and of ``n`` under unbounded DP) this draws
    ``n_d`` records from the model, the released sums of their statistics plus the mechanisms'
    noise, and ``n_dp = n_d + noise``: the distribution the releases would have if the model and
    that draw were true. It is :func:`pymc.sample_posterior_predictive` with the defaults and the
    checks a model with privatized data needs.

    Parameters
    ----------
    trace : arviz.InferenceData or xarray.DataTree
        The posterior, e.g. from :func:`~pymc_unbounded_dp.sample` (anything
        :func:`pymc.sample_posterior_predictive` takes).
    model : pm.Model, optional
        Defaults to the model on the context stack.
    var_names : str or list of str, optional
        The variables to draw. By default every observed variable except the records: the releases
        (each ``PrivatizedSum`` and each ``f"{name}_dp"`` of a ``SampleSize``) and any ordinary
        observed data. Record variables are allowed for tables of known ``n`` only.
    random_seed : int or numpy.random.Generator, optional
    extend_inferencedata : bool, default False
        Add the ``posterior_predictive`` group to ``trace`` (in place) and return ``trace``.
    progressbar : bool, default False
    augment : {"auto", "records", "sums"}, default "auto"
        ``"records"``: PyMC's forward draws of ``n_d`` records per draw (O(n) per draw).
        ``"sums"``: the true sums of ``n_d`` fresh records drawn at once from their exact law
        (:mod:`pymc_unbounded_dp.sums`; the same distribution, O(1) per draw), for the releases
        only; refused for a table without an exact law. ``"auto"``: ``"sums"`` when every table
        has an exact law, only releases are drawn and no other option is passed, else
        ``"records"``.
    **kwargs
        Passed on to :func:`pymc.sample_posterior_predictive` (``idata_kwargs``,
        ``compile_kwargs``, ``return_inferencedata``, ...) at the records level.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        What PyMC returns (DataTree on PyMC 6): a ``posterior_predictive`` group with dims
        ``(chain, draw, ...)`` and an ``observed_data`` group with the released values (the
        imputed records are removed from it, also from ``trace``'s when extending it).

    Raises
    ------
    ValueError
        Before any draw, if ``var_names`` names a variable the model does not have, or a record
        variable of a table whose ``n`` is latent (its length differs from draw to draw; use
        ``pmdp.sample(..., keep_records=...)`` for synthetic record sets), or if a variable to draw
        needs a latent ``n`` that ``trace`` has no draws of.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 2, 3)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    ...     idata = pmdp.sample(draws=100, tune=100, chains=2, random_seed=1, progressbar=False)
    ...     idata = pmdp.sample_posterior_predictive(idata, extend_inferencedata=True,
    ...                                              random_seed=2)
    >>> sorted(idata["posterior_predictive"].data_vars)
    ['n_dp', 's']
    """
    owner = "sample_posterior_predictive"
    model = modelcontext(model)
    blocks = model_blocks(model)
    names = _var_names(model, blocks, var_names, _default_observed(model, blocks), owner)
    if names is not None:
        _check_trace_has_n(trace, model, blocks, names, owner)
    table_laws = _sums_level(model, blocks, names, trace, augment, kwargs, owner)
    if table_laws is not None:
        result = _sums_predictive(
            trace, model, table_laws, names, random_seed, extend_inferencedata
        )
        return _without_records(_drawn_at(result, "sums"), blocks)
    with _release_draws_in_object_mode(blocks):
        result = pm.sample_posterior_predictive(
            trace,
            model=model,
            var_names=names,
            random_seed=random_seed,
            extend_inferencedata=extend_inferencedata,
            progressbar=progressbar,
            **kwargs,
        )
    return _without_records(_drawn_at(result, "records"), blocks)


def sample_prior_predictive(
    draws: int = 500,
    model: pm.Model | None = None,
    *,
    var_names: str | Sequence[str] | None = None,
    random_seed=None,
    **kwargs,
):
    """Prior predictive draws of the parameters, each latent ``n`` and the releases.

    Each draw takes the parameters and ``n`` from their priors, then ``n`` records, the released
    sums of their statistics plus the mechanisms' noise, and ``n_dp = n + noise``. It is
    :func:`pymc.sample_prior_predictive` with the defaults and the checks a model with privatized
    data needs.

    Parameters
    ----------
    draws : int, default 500
    model : pm.Model, optional
        Defaults to the model on the context stack.
    var_names : str or list of str, optional
        The variables to draw. By default the parameters (every free variable, including each
        latent ``n``), the deterministics that do not use the records, and every observed variable
        except the records (the releases). Record variables are allowed for tables of known ``n``
        only.
    random_seed : int or numpy.random.Generator, optional
    **kwargs
        Passed on to :func:`pymc.sample_prior_predictive` (``idata_kwargs``, ``compile_kwargs``,
        ``return_inferencedata``, ...).

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        What PyMC returns (DataTree on PyMC 6): groups ``prior`` (the free variables and
        deterministics), ``prior_predictive`` (the observed ones) and ``observed_data`` (the
        released values, without the imputed records).

    Raises
    ------
    ValueError
        Before any draw, if a variable to draw needs a latent ``n`` with the flat prior
        (``SampleSize(..., prior=None)``), which has no draws: pass a proper ``prior=``. Also for
        the ``var_names`` refused by :func:`sample_posterior_predictive`.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> with pm.Model():
    ...     theta = pm.Beta("theta", 2, 3)
    ...     n = pmdp.SampleSize("n", n_dp=57, mechanism=pmdp.DiscreteLaplace(epsilon=0.5),
    ...                         prior=pm.Poisson.dist(60))
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=20.4)
    ...     prior = pmdp.sample_prior_predictive(200, random_seed=1)
    >>> sorted(prior["prior"].data_vars), sorted(prior["prior_predictive"].data_vars)
    (['n', 'theta'], ['n_dp', 's'])
    """
    owner = "sample_prior_predictive"
    model = modelcontext(model)
    blocks = model_blocks(model)
    records = [r.rv for r in blocks.records]
    default = [
        *(rv.name for rv in model.free_RVs),
        *(d.name for d in model.deterministics if not depends_on(d, records)),
        *_default_observed(model, blocks),
    ]
    names = _var_names(model, blocks, var_names, default, owner)
    wanted = model.basic_RVs + model.deterministics if names is None else [model[n] for n in names]
    for spec in blocks.sample_sizes:
        if spec.flat_prior and any(depends_on(v, [spec.rv]) for v in wanted):
            raise ValueError(
                f"{owner}: SampleSize({spec.name!r}) has the improper flat prior on n >= 0 "
                f"(prior=None), which has no random draws, and the variables to draw need "
                f"{spec.name!r}. Give it a proper prior, e.g. pmdp.SampleSize({spec.name!r}, "
                "n_dp=..., mechanism=..., prior=pm.Poisson.dist(1000)), or leave the variables "
                f"that depend on {spec.name!r} out of `var_names`."
            )
    with _release_draws_in_object_mode(blocks):
        result = pm.sample_prior_predictive(
            draws, model=model, var_names=names, random_seed=random_seed, **kwargs
        )
    return _without_records(result, blocks)


# --------------------------------------------------------------------------------------------------
# the sums level
# --------------------------------------------------------------------------------------------------
def _sums_level(model, blocks, names, trace, augment, kwargs, owner):
    """The tables' laws if the draws are made at the sums level, else ``None``."""
    if augment not in AUGMENT_LEVELS:
        choices = ", ".join(repr(a) for a in AUGMENT_LEVELS)
        raise ValueError(f"{owner}: `augment` must be one of {choices}; got {augment!r}.")
    if augment == "records" or names is None:
        return None
    releases = set(_release_names(blocks))
    compiled = compile_model(model)
    laws = [table_law(t) for t in compiled.tables]
    problems = [
        f"table {t.spec.label!r}: {law}"
        for t, law in zip(compiled.tables, laws)
        if isinstance(law, str)
    ]
    others = [n for n in names if n not in releases]
    if others:
        problems.append(f"{_listing(others)} are not releases")
    if kwargs:
        problems.append(f"the options {_listing(kwargs)} are PyMC's")
    if _group(trace, "posterior") is None:
        problems.append("`trace` has no posterior group")
    if augment == "sums" and problems:
        raise ValueError(
            f"{owner}: `augment`='sums' draws the releases from the exact laws of the tables' "
            "sums, but " + "; ".join(problems) + ". Use augment='records'."
        )
    return None if problems else laws


def _release_names(blocks: ModelBlocks) -> list[str]:
    return [s.name for s in blocks.sums] + [s.release_rv.name for s in blocks.sample_sizes]


def _sums_predictive(trace, model, table_laws, names, random_seed, extend_inferencedata):
    """Posterior predictive draws of the releases at the sums level, shaped as PyMC's."""
    posterior = _group(trace, "posterior")
    chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
    flat = {
        name: posterior[name].values.reshape(chains * draws, *posterior[name].shape[2:])
        for name in posterior.data_vars
    }
    rng = np.random.default_rng(random_seed)
    drawn = {}
    for law in table_laws:
        drawn.update(law.draw_releases(flat, rng))
    observed = {}
    data = {}
    for name in names:
        values = np.asarray(drawn[name])
        values = values.reshape(chains, draws, *values.shape[1:])
        dims = list(model.named_vars_to_dims.get(name, ()) or ())
        dims = dims or [f"{name}_dim_{i}" for i in range(values.ndim - 2)]
        data[name] = (["chain", "draw", *dims], values)
        observed[name] = (dims, observed_value(model, model[name]))
    coords = {"chain": posterior["chain"].values, "draw": posterior["draw"].values}
    coords.update({d: list(c) for d, c in model.coords.items() if c is not None})
    predictive = xr.Dataset(data, coords=coords)
    used = {d for v in predictive.data_vars.values() for d in v.dims}  # not other variables' dims
    predictive = predictive.drop_vars([c for c in predictive.coords if c not in used])
    observed_data = xr.Dataset(observed)
    observed_data = observed_data.assign_coords(
        {d: predictive[d] for d in observed_data.dims if d in predictive.coords}
    )
    result = trace if extend_inferencedata else type(trace)()
    _set_group(result, "posterior_predictive", predictive)
    if _group(result, "observed_data") is None:
        _set_group(result, "observed_data", observed_data)
    return result


# --------------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------------
def _default_observed(model: pm.Model, blocks: ModelBlocks) -> list[str]:
    """Every observed variable but the records: the releases and any ordinary observed data."""
    records = {r.name for r in blocks.records}
    return [rv.name for rv in model.observed_RVs if rv.name not in records]


def _var_names(
    model: pm.Model,
    blocks: ModelBlocks,
    var_names: str | Iterable[str] | None,
    default: list[str],
    owner: str,
) -> list[str] | None:
    """Check ``var_names`` (or give the default); ``None`` for a model without privacy blocks."""
    if var_names is None:
        return default if blocks.records else None
    if isinstance(var_names, str):
        var_names = [var_names]
    try:
        names = list(var_names)
    except TypeError:
        raise TypeError(
            f"{owner}: `var_names` must be a list of names, got {var_names!r}."
        ) from None
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{owner}: `var_names` must hold names (str), got {name!r}.")
        if name not in model.named_vars:
            raise ValueError(
                f"{owner}: `var_names` has {name!r}, which is not a variable of the model. "
                f"Its releases are {_listing(_default_observed(model, blocks))}; its other "
                f"variables {_listing(v for v in model.named_vars if v not in default)}."
            )
    for table in blocks.tables():
        latent = [n for n in names if n in table.record_names] if table.sample_size else []
        if latent:
            raise ValueError(_latent_records_message(owner, latent[0], table))
    return names


def _latent_records_message(owner: str, name: str, table: TableSpec) -> str:
    releases = [s.name for s in table.sums] + [table.sample_size.release_rv.name]
    return (
        f"{owner}: `var_names` has the record variable {name!r}, whose number of records is the "
        f"latent SampleSize {table.sample_size.name!r}: its length differs from draw to draw, so "
        f"its draws cannot be stacked into one array. Draw the releases computed from it "
        f"({_listing(releases)}) instead; for synthetic record sets use "
        "pmdp.sample(..., keep_records=...) (group 'imputed_records')."
    )


def _listing(names: Iterable[str]) -> str:
    names = [repr(n) for n in names]
    return ", ".join(names) if names else "none"


def _check_trace_has_n(trace, model: pm.Model, blocks: ModelBlocks, names, owner: str) -> None:
    """A variable to draw that needs a latent ``n`` needs the draws of ``n`` from ``trace``."""
    # (a MultiTrace or a list of points has no group: PyMC checks those)
    posterior = trace if isinstance(trace, xr.Dataset) else _group(trace, "posterior")
    if posterior is None:
        return
    wanted = [model[n] for n in names]
    for spec in blocks.sample_sizes:
        if spec.name not in posterior and any(depends_on(v, [spec.rv]) for v in wanted):
            users = _listing(n for n in names if depends_on(model[n], [spec.rv]))
            raise ValueError(
                f"{owner}: `trace` has no draws of the latent SampleSize {spec.name!r}, which the "
                f"variables to draw need ({users}). Pass the posterior of this model, e.g. from "
                "pmdp.sample(...)."
            )


class _release_draws_in_object_mode(warnings.catch_warnings):
    """Silence PyTensor's note that numba runs a release's Python noise sampler in object mode.

    A release's random draw is ``sum + mechanism noise`` in NumPy (a ``pm.CustomDist``), so on
    PyTensor's numba backend (PyMC 6's default) it runs in object mode, as designed: one call per
    draw. Only that note, for the releases of this model, is silenced.
    """

    def __init__(self, blocks: ModelBlocks):
        super().__init__()
        releases = [s.name for s in blocks.sums] + [s.release_rv.name for s in blocks.sample_sizes]
        self._pattern = "|".join(re.escape(name) for name in releases)

    def __enter__(self):
        entered = super().__enter__()
        if self._pattern:
            warnings.filterwarnings(
                "ignore",
                message=rf"Numba will use object mode to run CustomDist_({self._pattern})_rv\b",
                category=UserWarning,
            )
        return entered


def _drawn_at(result, augment: str):
    """Record in the ``posterior_predictive`` group's ``pmdp_augment`` the level that drew it."""
    predictive = None if isinstance(result, dict) else _group(result, "posterior_predictive")
    if predictive is not None:
        predictive.attrs["pmdp_augment"] = augment
        _set_group(result, "posterior_predictive", predictive)
    return result


def _without_records(result, blocks: ModelBlocks):
    """Drop the imputed records from ``observed_data`` (they are not data)."""
    if not blocks.records or isinstance(result, dict):
        return result
    observed = _group(result, "observed_data")
    if observed is not None:
        _set_group(result, "observed_data", _without(observed, [r.name for r in blocks.records]))
    return result
