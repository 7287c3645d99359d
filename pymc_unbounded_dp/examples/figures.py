"""Figures of the examples and studies (matplotlib, no pyplot state: safe on any backend).

Every function returns a :class:`matplotlib.figure.Figure`; save it with ``fig.savefig(path)`` or
show it in a notebook with ``display(fig)``.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

__all__ = [
    "density",
    "plot_atus_alpha_densities",
    "plot_atus_alpha_sd",
    "plot_atus_n_boxplots",
    "plot_posteriors",
    "plot_regression_study",
    "plot_traces",
]

_TRUE = {"color": "black", "linestyle": "--", "linewidth": 1.2}
_COLORS = {"bounded": "tab:blue", "unbounded": "tab:orange"}


def density(ax, values, *, discrete: bool = False, label=None, color=None, **kwargs):
    """Draw a posterior density of ``values`` on ``ax``: a Gaussian KDE, or a bar-like histogram
    for integer ``values`` (``discrete=True``) or degenerate samples."""
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return
    spread = np.ptp(values)
    if discrete or spread == 0 or values.size < 5:
        bins = _integer_bins(values) if discrete else 30
        ax.hist(values, bins=bins, density=True, histtype="stepfilled", alpha=0.35,
                color=color, label=label, **kwargs)
        return
    from scipy.stats import gaussian_kde

    grid = np.linspace(values.min() - 0.1 * spread, values.max() + 0.1 * spread, 256)
    try:
        curve = gaussian_kde(values)(grid)
    except np.linalg.LinAlgError:
        ax.hist(values, bins=30, density=True, alpha=0.35, color=color, label=label)
        return
    line = ax.plot(grid, curve, label=label, color=color, **kwargs)[0]
    ax.fill_between(grid, curve, alpha=0.15, color=line.get_color())


def _integer_bins(values):
    lo, hi = math.floor(values.min()), math.ceil(values.max())
    step = max(1, math.ceil((hi - lo + 1) / 60))
    return np.arange(lo - 0.5, hi + step + 0.5, step)


def plot_posteriors(draws: dict, truth: dict | None = None, labels=None, discrete=("n",),
                    title: str | None = None, ncols: int = 3, reference: dict | None = None) -> Figure:
    """One density panel per component of ``draws`` (``{"beta[0]": array, ...}``), true values
    dashed, optional extra draws to overlay (``reference``: name -> draws dict, e.g. the bounded
    posterior)."""
    labels = list(draws) if labels is None else list(labels)
    nrows = math.ceil(len(labels) / ncols)
    fig = Figure(figsize=(3.4 * ncols, 2.6 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for ax, label in zip(axes, labels):
        is_discrete = label in discrete
        density(ax, draws[label], discrete=is_discrete, label="posterior" if reference else None,
                color=_COLORS["unbounded"] if reference else "tab:blue")
        for name, other in (reference or {}).items():
            if label in other:
                density(ax, other[label], discrete=is_discrete, label=name, color=_COLORS["bounded"])
        if truth is not None and label in truth and np.isfinite(truth[label]):
            ax.axvline(truth[label], **_TRUE, label="true value")
        ax.set_title(label)
        ax.set_yticks([])
    for ax in axes[len(labels):]:
        ax.set_visible(False)
    axes[0].legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def plot_traces(idata, labels, title: str | None = None) -> Figure:
    """Trace plots (one line per chain) of the scalar components ``labels``."""
    from pymc_unbounded_dp.examples.summary import group_dataset, scalar_names

    dataset = group_dataset(idata, "posterior")
    names = {lab: (name, index) for lab, name, index in scalar_names(dataset)}
    fig = Figure(figsize=(8, 1.5 * len(labels)), layout="constrained")
    axes = fig.subplots(len(labels), 1, squeeze=False, sharex=True).ravel()
    for ax, label in zip(axes, labels):
        name, index = names[label]
        values = np.asarray(dataset[name].values)[(slice(None), slice(None), *index)]
        for chain, trace in enumerate(values):
            ax.plot(trace, linewidth=0.6, alpha=0.8, label=f"chain {chain}")
        ax.set_ylabel(label)
    axes[-1].set_xlabel("draw")
    axes[0].legend(fontsize="x-small", ncols=values.shape[0], loc="upper right")
    if title:
        fig.suptitle(title)
    return fig


def _eps_ticks(ax, values):
    ax.set_xscale("log")
    ax.set_xticks(values)
    crowded = len(values) > 1 and min(np.diff(np.log10(sorted(values)))) < 0.5
    ax.set_xticklabels([f"{v:g}" for v in values], rotation=45 if crowded else 0)
    ax.minorticks_off()


def plot_regression_study(table, truth: dict, n_true: int) -> Figure:
    """Averaged posterior means (top) and variances (bottom) of beta, tau and n against epsilon_n,
    one line per epsilon_s, bounded DP as a horizontal reference, MCEM estimates as crosses.

    ``table`` is the aggregated study table (:func:`pymc_unbounded_dp.examples.studies.aggregate`).
    """
    params = ["beta[0]", "beta[1]", "beta[2]", "tau", "n"]
    fig = Figure(figsize=(15, 6.2), layout="constrained")
    axes = fig.subplots(2, len(params), squeeze=False)
    unbounded = table[table["variant"] == "unbounded"]
    bounded = table[table["variant"] == "bounded"]
    eps_n = sorted(unbounded["epsilon_n"].unique())
    colors = dict(zip(sorted(table["epsilon_s"].unique(), reverse=True),
                      ["tab:blue", "tab:red", "tab:green", "tab:purple"]))
    for j, param in enumerate(params):
        for eps_s, color in colors.items():
            rows = unbounded[unbounded["epsilon_s"] == eps_s].sort_values("epsilon_n")
            ref = bounded[bounded["epsilon_s"] == eps_s]
            for i, stat in enumerate(["mean", "var"]):
                column = f"{stat}:{param}"
                ax = axes[i, j]
                if column in rows:
                    ax.plot(rows["epsilon_n"], rows[column], "o-", color=color,
                            label=f"unbounded, eps_s={eps_s:g}")
                if column in ref and len(ref):
                    ax.axhline(float(ref[column].iloc[0]), color=color, linestyle=":",
                               label=f"bounded, eps_s={eps_s:g}")
                mcem = f"mcem:{param}"
                if i == 0 and mcem in rows and rows[mcem].notna().any():
                    ax.plot(rows["epsilon_n"], rows[mcem], "x", color=color, markersize=8,
                            label=f"MCEM, eps_s={eps_s:g}")
        true = n_true if param == "n" else truth.get(param, math.nan)
        axes[0, j].axhline(true, **_TRUE, label="true value")
        axes[0, j].set_title(f"posterior mean of {param}")
        axes[1, j].set_title(f"posterior variance of {param}")
        if param == "n":
            axes[1, j].set_yscale("symlog", linthresh=1.0)
            axes[1, j].set_ylim(bottom=0)
        for i in range(2):
            _eps_ticks(axes[i, j], eps_n)
            axes[1, j].set_xlabel("epsilon_n")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 7),
               fontsize="small")
    fig.suptitle("Linear regression: averages over replicates")
    return fig


def plot_atus_alpha_densities(records, component: int = 0, replicate: int = 0) -> Figure:
    """Posterior of ``alpha[component]``, bounded vs unbounded, one panel per epsilon_n (columns)
    and epsilon_s (rows), from one replicate's kept draws."""
    label = f"alpha[{component}]"
    chosen = [r for r in records if r["cell"]["replicate"] == replicate]
    eps_s = sorted({r["cell"]["epsilon_s"] for r in chosen}, reverse=True)
    eps_n = sorted({r["cell"]["epsilon_n"] for r in chosen if r["cell"]["variant"] == "unbounded"})
    fig = Figure(figsize=(3.2 * max(len(eps_n), 1), 2.6 * len(eps_s)), layout="constrained")
    axes = fig.subplots(len(eps_s), max(len(eps_n), 1), squeeze=False)
    for i, es in enumerate(eps_s):
        bounded = next((r for r in chosen if r["cell"]["variant"] == "bounded"
                        and r["cell"]["epsilon_s"] == es), None)
        for j, en in enumerate(eps_n):
            ax = axes[i, j]
            rec = next((r for r in chosen if r["cell"]["variant"] == "unbounded"
                        and r["cell"]["epsilon_s"] == es and r["cell"]["epsilon_n"] == en), None)
            if bounded is not None:
                density(ax, bounded["draws"][label], color=_COLORS["bounded"], label="bounded")
            if rec is not None:
                density(ax, rec["draws"][label], color=_COLORS["unbounded"], label="unbounded")
            ax.set_title(f"eps_s={es:g}, eps_n={en:g}", fontsize="small")
            ax.set_yticks([])
            ax.set_xlabel(label)
    axes[0, 0].legend(fontsize="x-small")
    fig.suptitle(f"ATUS: posterior of {label}, bounded vs unbounded DP (replicate {replicate})")
    return fig


def plot_atus_n_boxplots(records, n_true: int | None = None) -> Figure:
    """Boxplots of the posterior draws of ``n`` per epsilon_n (pooled over replicates), one panel
    per epsilon_s."""
    unbounded = [r for r in records if r["cell"]["variant"] == "unbounded"]
    eps_s = sorted({r["cell"]["epsilon_s"] for r in unbounded}, reverse=True)
    eps_n = sorted({r["cell"]["epsilon_n"] for r in unbounded})
    fig = Figure(figsize=(4.2 * max(len(eps_s), 1), 3.4), layout="constrained")
    axes = fig.subplots(1, max(len(eps_s), 1), squeeze=False).ravel()
    for ax, es in zip(axes, eps_s):
        data = [
            np.concatenate([np.asarray(r["draws"]["n"], dtype=float) for r in unbounded
                            if r["cell"]["epsilon_s"] == es and r["cell"]["epsilon_n"] == en]
                           or [np.array([np.nan])])
            for en in eps_n
        ]
        ax.boxplot(data, showfliers=False)
        ax.set_xticks(range(1, len(eps_n) + 1), [f"{v:g}" for v in eps_n])
        if n_true is not None:
            ax.axhline(n_true, **_TRUE, label="true n")
            ax.legend(fontsize="x-small")
        ax.set_xlabel("epsilon_n")
        ax.set_ylabel("posterior draws of n")
        ax.set_title(f"eps_s={es:g}")
    fig.suptitle("ATUS: posterior of n")
    return fig


def plot_atus_alpha_sd(table) -> Figure:
    """Posterior SD of each ``alpha_j`` against epsilon_n (averaged over replicates), bounded DP
    dotted, one line per epsilon_s."""
    fig = Figure(figsize=(12, 3.4), layout="constrained")
    axes = fig.subplots(1, 3, squeeze=False).ravel()
    unbounded = table[table["variant"] == "unbounded"]
    bounded = table[table["variant"] == "bounded"]
    eps_n = sorted(unbounded["epsilon_n"].unique())
    colors = dict(zip(sorted(table["epsilon_s"].unique(), reverse=True),
                      ["tab:blue", "tab:red", "tab:green"]))
    for j, ax in enumerate(axes):
        column = f"sd:alpha[{j}]"
        for es, color in colors.items():
            rows = unbounded[unbounded["epsilon_s"] == es].sort_values("epsilon_n")
            ax.plot(rows["epsilon_n"], rows[column], "o-", color=color,
                    label=f"unbounded, eps_s={es:g}")
            ref = bounded[bounded["epsilon_s"] == es]
            if len(ref):
                ax.axhline(float(ref[column].iloc[0]), color=color, linestyle=":",
                           label=f"bounded, eps_s={es:g}")
        _eps_ticks(ax, eps_n)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("epsilon_n")
        ax.set_title(f"posterior SD of alpha[{j}]")
    axes[0].legend(fontsize="x-small")
    fig.suptitle("ATUS: posterior SD of alpha_j")
    return fig
