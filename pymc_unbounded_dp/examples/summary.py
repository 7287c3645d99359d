"""Posterior summaries that work on PyMC 5 (``arviz.InferenceData``) and PyMC 6 (``xarray.DataTree``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import xarray as xr

__all__ = ["flat_draws", "group_dataset", "posterior_summary", "scalar_names"]


def group_dataset(idata, group: str = "posterior") -> xr.Dataset:
    """``idata[group]`` as an :class:`xarray.Dataset` (InferenceData group or DataTree node)."""
    node = idata[group]
    return node.to_dataset() if hasattr(node, "to_dataset") else node


def scalar_names(dataset: xr.Dataset, var_names=None) -> list[tuple[str, str, tuple]]:
    """``(label, variable, index)`` for every scalar component, e.g. ``("beta[1]", "beta", (1,))``."""
    names = list(dataset.data_vars) if var_names is None else list(var_names)
    out = []
    for name in names:
        shape = dataset[name].shape[2:]
        if not shape:
            out.append((name, name, ()))
        else:
            for index in np.ndindex(shape):
                out.append((f"{name}[{','.join(map(str, index))}]", name, index))
    return out


def flat_draws(idata, var_names=None, group: str = "posterior") -> dict[str, np.ndarray]:
    """Draws of each scalar component, chains concatenated: ``{"beta[0]": array, "tau": ...}``."""
    dataset = group_dataset(idata, group)
    out = {}
    for label, name, index in scalar_names(dataset, var_names):
        values = np.asarray(dataset[name].values)
        out[label] = values[(slice(None), slice(None), *index)].reshape(-1)
    return out


def _split_rhat_and_ess(draws: np.ndarray) -> tuple[float, float]:
    """ArviZ's rank-normalised split R-hat and bulk ESS of one ``(chain, draw)`` array."""
    import warnings

    import arviz as az

    draws = np.asarray(draws, dtype=float)
    if draws.shape[1] < 4 or np.ptp(draws) == 0:  # too short, or constant (n with huge epsilon_n)
        return math.nan, math.nan
    dataset = xr.Dataset({"v": (("chain", "draw"), draws)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            rhat = float(np.asarray(az.rhat(dataset)["v"]))
            ess = float(np.asarray(az.ess(dataset)["v"]))
        except Exception:  # noqa: BLE001 - diagnostics are optional
            return math.nan, math.nan
    return rhat, ess


def posterior_summary(
    idata, var_names=None, truth: dict | None = None, prob: float = 0.94, diagnostics: bool = True
) -> pd.DataFrame:
    """Mean, SD, variance, equal-tailed ``prob`` interval (and R-hat, bulk ESS) per component.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
    var_names : list of str, optional
        Posterior variables (default: all).
    truth : dict, optional
        True values by component label (``"beta[1]"``); adds ``true`` and ``covered`` columns.
    prob : float
        Interval probability; the bounds are the ``(1 - prob)/2`` and ``(1 + prob)/2`` quantiles.
    diagnostics : bool
        Add ``r_hat`` and ``ess_bulk`` (ArviZ).
    """
    dataset = group_dataset(idata, "posterior")
    lo, hi = (1.0 - prob) / 2.0, (1.0 + prob) / 2.0
    tag = f"{round(100 * prob)}"
    rows = {}
    for label, name, index in scalar_names(dataset, var_names):
        values = np.asarray(dataset[name].values, dtype=float)[(slice(None), slice(None), *index)]
        flat = values.reshape(-1)
        row = {
            "mean": float(np.mean(flat)),
            "sd": float(np.std(flat, ddof=1)) if flat.size > 1 else math.nan,
        }
        row["var"] = row["sd"] ** 2
        row[f"lower_{tag}"], row[f"upper_{tag}"] = (float(q) for q in np.quantile(flat, [lo, hi]))
        if diagnostics:
            row["r_hat"], row["ess_bulk"] = _split_rhat_and_ess(values)
        if truth is not None:
            true = truth.get(label, math.nan)
            row["true"] = true
            row["covered"] = bool(row[f"lower_{tag}"] <= true <= row[f"upper_{tag}"]) if not (
                isinstance(true, float) and math.isnan(true)
            ) else None
        rows[label] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    if truth is not None:
        frame = frame[["true", *[c for c in frame.columns if c != "true"]]]
    return frame
