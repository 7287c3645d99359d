"""Tables and figures of a study from its finished records (pandas and matplotlib through pandas).

The grid point of a posterior fit is ``(epsilon_s, variant, epsilon_n)``; bounded fits have no
``epsilon_n`` and are shown as ``-``. Coverage is the share of replicates whose interval holds the
true value, with its binomial standard error ``sqrt(p (1 - p) / R)``.

Examples
--------
>>> import pandas as pd
>>> per_fit = pd.DataFrame({"variant": ["bounded"] * 2, "epsilon_s": [1.0] * 2,
...                         "epsilon_n": [None] * 2, "parameter": ["tau"] * 2,
...                         "covered": [True, False], "width": [1.0, 2.0]})
>>> coverage_table(per_fit, ["tau"], "coverage").iloc[0]["tau"]
'0.50 (0.35)'
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from pymc_unbounded_dp.examples.study.base import jsonable

__all__ = [
    "ESS_PER_CHAIN",
    "R_HAT_MAX",
    "convergence_flags",
    "flag_labels",
    "coverage_table",
    "markdown",
    "mean_table",
    "write_report",
]

_GRID = ["epsilon_s", "variant", "epsilon_n"]
#: The printed tables flag an R-hat above this (rank-normalised split R-hat; ArviZ's convention,
#: Vehtari et al. 2021) ...
R_HAT_MAX = 1.01
#: ... or a bulk ESS below this many per chain (Vehtari et al. 2021: 100 per chain).
ESS_PER_CHAIN = 100
#: The mark of a flagged value in a printed table.
FLAG = "!"


def convergence_flags(table: pd.DataFrame, chains) -> pd.DataFrame:
    """Which rows of ``table`` (columns ``r_hat``, ``ess_bulk``) fail the convergence thresholds:
    ``r_hat > R_HAT_MAX`` or ``ess_bulk < ESS_PER_CHAIN * chains`` (``chains`` a number or a
    column). NaN (one chain, or a parameter that never moves) is not flagged.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"r_hat": [1.0, 1.24], "ess_bulk": [900.0, 150.0]}, index=["a", "n"])
    >>> convergence_flags(table, chains=2)
       r_hat  ess_bulk
    a  False     False
    n   True      True
    """
    r_hat, ess = (pd.to_numeric(table[column]).astype(float) for column in ("r_hat", "ess_bulk"))
    return pd.DataFrame(
        {"r_hat": r_hat > R_HAT_MAX, "ess_bulk": ess < ESS_PER_CHAIN * chains}, index=table.index
    )


def flag_labels(flags: pd.DataFrame, mark: str = FLAG) -> list[str]:
    """One label per row of :func:`convergence_flags`: ``"! r_hat, ess_bulk"`` naming what
    failed, or ``""`` for a row that passes.

    Examples
    --------
    >>> import pandas as pd
    >>> flags = pd.DataFrame({"r_hat": [False, True], "ess_bulk": [False, True]})
    >>> flag_labels(flags)
    ['', '! r_hat, ess_bulk']
    """
    return [
        f"{mark} " + ", ".join(stat for stat, failed in row.items() if failed)
        if any(row.values())
        else ""
        for row in flags.to_dict(orient="records")
    ]


def _grid(per_fit: pd.DataFrame) -> pd.DataFrame:
    frame = per_fit.copy()
    frame["epsilon_n"] = frame["epsilon_n"].astype(float).fillna(-1.0)
    return frame


def _labelled(table: pd.DataFrame) -> pd.DataFrame:
    table = table.reset_index()
    table["epsilon_n"] = ["-" if e < 0 else f"{e:g}" for e in table["epsilon_n"]]
    table["epsilon_s"] = [f"{e:g}" for e in table["epsilon_s"]]
    return table


def _order(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values(["epsilon_s", "variant", "epsilon_n"], ascending=[False, True, True])


def coverage_table(per_fit: pd.DataFrame, labels: list[str], stat: str) -> pd.DataFrame:
    """Per grid point and parameter: ``"coverage"`` as ``"p (se)"``, or the mean ``"width"``.

    Adds the number of replicates per grid point (``reps``).
    """
    frame = _grid(per_fit[per_fit["parameter"].isin(labels)])
    groups = frame.groupby([*_GRID, "parameter"], sort=False)
    if stat == "coverage":
        p = groups["covered"].mean()
        count = groups["covered"].count()
        se = np.sqrt(p * (1 - p) / count)
        values = pd.Series(
            [f"{a:.2f} ({b:.2f})" for a, b in zip(p, se, strict=True)], index=p.index
        )
    else:
        values = groups[stat].mean()
    table = values.unstack("parameter")[labels]
    table.insert(
        0,
        "reps",
        frame.groupby(_GRID, sort=False)["replicate"].nunique()
        if "replicate" in frame
        else groups.size().groupby(level=_GRID).max(),
    )
    return _labelled(_order(table.reset_index()).set_index(_GRID))


def mean_table(per_fit: pd.DataFrame, labels: list[str], stats) -> pd.DataFrame:
    """Per grid point: the mean over replicates of ``stats`` (one name or several) per parameter."""
    stats = [stats] if isinstance(stats, str) else list(stats)
    frame = _grid(per_fit[per_fit["parameter"].isin(labels)])
    columns = {}
    for stat in stats:
        means = frame.groupby([*_GRID, "parameter"], sort=False)[stat].mean().unstack("parameter")
        if stat == "seconds":
            columns["s / fit"] = means.iloc[:, 0]
            continue
        for label in labels:
            if label in means:
                columns[label if len(stats) == 1 else f"{stat} {label}"] = means[label]
    table = pd.DataFrame(columns)
    return _labelled(_order(table.reset_index()).set_index(_GRID))


def markdown(table: pd.DataFrame, digits: int = 4) -> str:
    """A GitHub Markdown table (:meth:`pandas.DataFrame.to_markdown`)."""
    return table.to_markdown(index=False, floatfmt=f".{digits}g")


def write_report(
    study, records: list[dict], folder, elapsed: float | None = None
) -> dict[str, Path]:
    """``<name>_summary.md`` (every table of ``study.tables``), ``<name>_fits.csv`` and, for
    posterior studies, ``figures/coverage.png``, written into ``folder``."""
    folder = Path(folder)
    name = study.name
    paths = {"summary": folder / f"{name}_summary.md", "fits": folder / f"{name}_fits.csv"}
    per_fit = study.per_fit(records)
    per_fit.to_csv(paths["fits"], index=False)
    fit_seconds = sum(r["seconds"] for r in records)  # every workload times its fits
    lines = [
        f"# {name}: {len(records)} fits",
        "",
        f"Settings: {json.dumps(study.settings())}; grid: "
        f"{json.dumps({k: jsonable(getattr(study, k)) for k in study.grid_fields})}.",
        "",
        f"Fit time: {fit_seconds / 60:.1f} min in total"
        + (f"; this run: {elapsed / 60:.1f} min wall." if elapsed is not None else "."),
        "",
    ]
    flagged = _flagged(per_fit)
    for title, table in study.tables(records).items():
        lines += [f"## {title}", "", markdown(_marked(table, flagged)), ""]
    lines += _convergence_note(study, per_fit, flagged)
    paths["summary"].write_text("\n".join(lines))
    figure = coverage_figure(per_fit, study.prob) if "covered" in per_fit else None
    if figure is not None:
        paths["figure"] = folder / "figures" / "coverage.png"
        paths["figure"].parent.mkdir(exist_ok=True)
        figure.savefig(paths["figure"], dpi=90)
    return paths


def _flagged(per_fit: pd.DataFrame) -> pd.DataFrame:
    """The fits' rows (grid labelled as in the tables) whose r_hat or ESS is flagged, with the
    flags; empty for studies without these diagnostics (mcem)."""
    if not {"r_hat", "ess_bulk", "chains"} <= set(per_fit):
        return pd.DataFrame()
    per_fit = per_fit.astype({"r_hat": float, "ess_bulk": float})  # stored NaN is None
    flags = convergence_flags(per_fit, per_fit["chains"])
    frame = _labelled(_grid(per_fit).set_index(_GRID)).assign(
        flag_r_hat=flags["r_hat"].to_numpy(), flag_ess_bulk=flags["ess_bulk"].to_numpy()
    )
    return frame[frame["flag_r_hat"] | frame["flag_ess_bulk"]]


def _marked(table: pd.DataFrame, flagged: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each flagged ``"r_hat <parameter>"``/``"ess_bulk <parameter>"`` mean marked
    ``!`` (the column then printed as text, 4 significant digits)."""
    if flagged.empty:
        return table
    table = table.copy()
    for column in table.columns:
        stat, _, label = str(column).partition(" ")
        if stat not in ("r_hat", "ess_bulk"):
            continue
        bad = flagged[flagged["parameter"] == label]
        bad = set(map(tuple, bad.loc[bad[f"flag_{stat}"], _GRID].to_numpy().tolist()))
        if not bad:
            continue
        keys = map(tuple, table[_GRID].to_numpy().tolist())
        table[column] = [
            f"{value:.4g}" + (f" {FLAG}" if key in bad else "")
            for key, value in zip(keys, table[column], strict=True)
        ]
    return table


def _convergence_note(study, per_fit: pd.DataFrame, flagged: pd.DataFrame) -> list[str]:
    """A short section naming the fits whose chains are too short, and how to run longer."""
    if flagged.empty:
        return []
    fit_keys = [*_GRID, "replicate"]
    fits, total = (len(frame[fit_keys].drop_duplicates()) for frame in (flagged, per_fit))
    worst = flagged.sort_values(["r_hat", "ess_bulk"], ascending=[False, True]).iloc[0]
    eps_n = "" if worst["epsilon_n"] == "-" else f", epsilon_n {worst['epsilon_n']}"
    values = ", ".join(
        ([f"R-hat {worst['r_hat']:.3g}"] if worst["flag_r_hat"] else [])
        + ([f"bulk ESS {worst['ess_bulk']:.0f}"] if worst["flag_ess_bulk"] else [])
    )
    longer = (
        f"--draws {4 * study.draws} --tune {2 * study.tune}"
        if hasattr(study, "draws") and hasattr(study, "tune")
        else "more --draws and --tune"
    )
    return [
        "## convergence",
        "",
        f"{FLAG} R-hat above {R_HAT_MAX} or bulk ESS below {ESS_PER_CHAIN} per chain in {fits} of "
        f"{total} fits (marked {FLAG} where a table shows it; worst: {worst['parameter']} "
        f"of {worst['variant']}, epsilon_s {worst['epsilon_s']}{eps_n}, replicate "
        f"{worst['replicate']}: {values}). "
        "These chains are too short for reliable intervals: run longer, e.g. with "
        f"`{longer}` and a new `--out`.",
        "",
    ]


def coverage_figure(per_fit: pd.DataFrame, nominal: float = 0.95):
    """Coverage against ``epsilon_n`` per parameter (unbounded lines, bounded dashed levels, the
    intervals' ``nominal`` probability in grey); ``None`` when no parameter but ``n`` has a known
    true value (real data)."""
    import matplotlib.pyplot as plt

    frame = _grid(per_fit[per_fit["covered"].notna() & (per_fit["parameter"] != "n")])
    frame["covered"] = frame["covered"].astype(float)
    labels = list(frame["parameter"].unique())
    if not labels:
        return None
    fig, axes = plt.subplots(
        1, len(labels), figsize=(3.2 * len(labels), 3), sharey=True, squeeze=False
    )
    for ax, label in zip(axes[0], labels, strict=True):
        rows = frame[frame["parameter"] == label]
        for eps_s, group in rows.groupby("epsilon_s"):
            unbounded = group[group["variant"] == "unbounded"]
            line = (
                unbounded.groupby("epsilon_n")["covered"]
                .mean()
                .plot(ax=ax, marker="o", logx=True, label=f"eps_s={eps_s:g}")
            )
            bounded = group[group["variant"] == "bounded"]["covered"].mean()
            ax.axhline(bounded, ls="--", color=line.get_lines()[-1].get_color(), lw=1)
        ax.axhline(nominal, color="grey", lw=0.5)
        ax.set_title(label)
        ax.set_xlabel("epsilon_n (dashed: bounded DP)")
    axes[0][0].set_ylabel("coverage")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return fig
