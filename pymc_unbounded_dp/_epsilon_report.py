"""The report of :func:`pymc_unbounded_dp.choose_epsilon`: a table of risk and utility per
budget, its recommendation, the risk-utility frontier and a self-contained HTML page.

:class:`EpsilonReport` and :class:`Recommendation` are public as ``pymc_unbounded_dp.epsilon.
EpsilonReport`` and ``pymc_unbounded_dp.EpsilonReport``.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pymc_unbounded_dp._checks import is_real

__all__ = ["EpsilonReport", "Recommendation"]


@dataclass(frozen=True)
class Recommendation:
    """What :meth:`EpsilonReport.recommend` advises: a budget (``None`` if no budget of the grid
    does) and the reason, in words."""

    value: float | None
    reason: str

    def __str__(self) -> str:
        return self.reason


class EpsilonReport:
    """The risk and utility of each budget of a grid: what :func:`choose_epsilon` returns.

    Parameters
    ----------
    table : pandas.DataFrame
        One row per budget, indexed by it (see :func:`choose_epsilon` for the columns).
    labels : sequence of str
        The parameters' elements the utility columns describe (``theta``, ``beta[0]``, ...).
    measure : {"epsilon", "rho"}
        The kind of budget.
    target_width, max_membership_advantage : optional
        The defaults of :meth:`recommend`.
    fits : pandas.DataFrame, optional
        One row per fit and label: budget, replicate, seeds, posterior mean, sd and interval.
    notes : sequence of str
        Sentences the HTML page shows above the table (how the figures were made).

    Examples
    --------
    >>> import pandas as pd
    >>> from pymc_unbounded_dp.epsilon import EpsilonReport
    >>> table = pd.DataFrame({"advantage": [0.1, 0.4], "width(theta)": [0.3, 0.1]},
    ...                      index=pd.Index([0.5, 2.0], name="epsilon"))
    >>> EpsilonReport(table, ["theta"]).recommend(target_width=0.2).value
    2.0
    """

    def __init__(
        self,
        table: pd.DataFrame,
        labels: Sequence[str],
        *,
        measure: str = "epsilon",
        target_width: float | Mapping[str, float] | None = None,
        max_membership_advantage: float | None = None,
        fits: pd.DataFrame | None = None,
        notes: Sequence[str] = (),
    ):
        self.table = table
        self.labels = list(labels)
        self.measure = measure
        self.target_width = target_width
        self.max_membership_advantage = max_membership_advantage
        self.fits = fits
        self.notes = list(notes)

    def __repr__(self) -> str:
        grid = ", ".join(f"{v:g}" for v in self.table.index)
        return (
            f"EpsilonReport({self.measure} in [{grid}], parameters {self.labels}; "
            ".table, .plot(), .recommend(), .to_html(path))"
        )

    # -- the recommendation ----------------------------------------------------------------------
    def recommend(
        self,
        target_width: float | Mapping[str, float] | None = None,
        max_membership_advantage: float | None = None,
    ) -> Recommendation:
        """The smallest budget whose expected 95% interval width meets ``target_width`` for every
        parameter, or the largest whose membership advantage stays at most
        ``max_membership_advantage``; with both, the smallest budget meeting the width target,
        provided its advantage is under the cap.

        ``target_width`` is one width for every parameter or ``{label: width}``; both default to
        the values given to :func:`choose_epsilon`. The widths compared are the Monte Carlo
        estimates (their standard errors are in the reason).
        """
        target = self.target_width if target_width is None else target_width
        cap = (
            self.max_membership_advantage
            if max_membership_advantage is None
            else (max_membership_advantage)
        )
        m = self.measure
        if target is None and cap is None:
            return Recommendation(
                None,
                "No target given: pass `target_width` (the widest acceptable 95% interval) or "
                "`max_membership_advantage` (the largest acceptable gain of the attacker over "
                "guessing) to get a recommendation.",
            )
        grid = list(self.table.index)
        widths = (
            [] if target is None else check_widths(target, self.labels, "EpsilonReport.recommend")
        )
        meets = [all(row[c] <= w for c, w in widths) for _, row in self.table.iterrows()]
        under = (
            [True] * len(grid)
            if cap is None
            else [bool(a <= cap) for a in self.table["advantage"].to_numpy()]
        )
        wanted = " and ".join(f"{c} <= {w:g}" for c, w in widths)
        if target is not None:
            fits = [v for v, ok in zip(grid, meets, strict=True) if ok]
            if not fits:
                return Recommendation(
                    None,
                    f"No {m} of the grid meets the utility target ({wanted}); the largest, "
                    f"{grid[-1]:g}, gives {self._width_text(grid[-1], widths)}. Extend the grid "
                    "upwards, or accept wider intervals.",
                )
            best = fits[0]
            index = grid.index(best)
            text = (
                f"{m} = {best:g} is the smallest budget of the grid whose expected 95% intervals "
                f"meet the target ({wanted}): {self._width_text(best, widths)}."
            )
            if cap is not None and not under[index]:
                return Recommendation(
                    None,
                    text[:-1] + f"; but its membership advantage "
                    f"{self.table['advantage'].iloc[index]:.3g} exceeds the cap {cap:g}: the "
                    "utility target and the risk cap conflict on this grid.",
                )
            if cap is not None:
                text += (
                    f" Its membership advantage {self.table['advantage'].iloc[index]:.3g} is "
                    f"within the cap {cap:g}."
                )
            return Recommendation(best, text)
        allowed = [v for v, ok in zip(grid, under, strict=True) if ok]
        if not allowed:
            return Recommendation(
                None,
                f"No {m} of the grid keeps the membership advantage within {cap:g}; the smallest, "
                f"{grid[0]:g}, has advantage {self.table['advantage'].iloc[0]:.3g}. Extend the "
                "grid downwards.",
            )
        best = allowed[-1]
        return Recommendation(
            best,
            f"{m} = {best:g} is the largest budget of the grid whose membership advantage "
            f"({self.table.loc[best, 'advantage']:.3g}) stays within the cap {cap:g}: the most "
            "utility this risk allows.",
        )

    def _width_text(self, value, widths) -> str:
        row = self.table.loc[value]
        parts = []
        for column, _ in widths:
            se = row.get(column.replace("width(", "width_se("), np.nan)
            parts.append(f"{column} = {row[column]:.3g}" + (f" ± {se:.2g}" if se == se else ""))
        return ", ".join(parts)

    # -- the figure ------------------------------------------------------------------------------
    def plot(self, ax=None):
        """The risk-utility frontier: for each parameter, the expected 95% interval width (with
        its Monte Carlo error) against the attacker's membership advantage (the budget itself
        where the table has no risk), each budget annotated once. Returns the matplotlib
        ``Figure``.
        """
        import matplotlib.pyplot as plt

        if ax is None:
            fig, ax = plt.subplots(figsize=(6.4, 4.4))
        else:
            fig = ax.figure
        table = self.table
        has_risk = "advantage" in table and table["advantage"].notna().any()
        x = table["advantage"].to_numpy() if has_risk else table.index.to_numpy(dtype=float)
        symbol = "ε" if self.measure == "epsilon" else "ρ"
        widths = table[[f"width({label})" for label in self.labels]].to_numpy()
        for label, width in zip(self.labels, widths.T, strict=True):
            se = table.get(f"width_se({label})", pd.Series(np.nan, index=table.index))
            ax.errorbar(
                x, width, yerr=np.nan_to_num(se.to_numpy()), marker="o", capsize=3, label=label
            )
        for xi, top, value in zip(x, np.nanmax(widths, axis=1), table.index, strict=True):
            # one label per budget, above its highest point
            ax.annotate(
                f"{symbol}={value:g}",
                (xi, top),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=8,
            )
        ax.set_xlabel(
            "membership advantage of the attacker (risk: right is riskier)"
            if has_risk
            else self.measure
        )
        ax.set_ylabel("expected 95% interval width (utility: lower is better)")
        ax.set_title(f"Risk and utility across {self.measure}")
        ax.legend(fontsize=8)
        fig.tight_layout()
        return fig

    # -- the page --------------------------------------------------------------------------------
    def paragraphs(self) -> list[str]:
        """One plain-language paragraph per budget: its risk and utility, and which way they move
        from the next larger budget (as the budget shrinks)."""
        m, rows, out = self.measure, list(self.table.iterrows()), []
        for i, (value, row) in enumerate(rows):
            parts = [f"At {m} = {value:g}"]
            shares = [c for c in self.table.columns if c.startswith(f"{m}[")]
            if shares:
                parts[0] += " (" + ", ".join(f"{c[len(m) + 1 : -1]}: {row[c]:.3g}" for c in shares)
                parts[0] += ")"
            sentences = []
            if _known(row, "membership_risk"):
                sentences.append(
                    f"an attacker who knows every other record guesses whether the target is in "
                    f"the data with probability of error {row['membership_risk']:.3g} (a guess "
                    f"without the "
                    f"release errs with probability {row['trivial_risk']:.3g}; advantage "
                    f"{row['advantage']:.3g})"
                )
            utility = [
                f"{label}: "
                + ", ".join(
                    f"{words} {row[f'{figure}({label})']:{form}}"
                    for figure, words, form in (
                        ("sd", "sd", ".3g"),
                        ("width", "95% interval width", ".3g"),
                        ("coverage", "coverage", ".2f"),
                    )
                    if _known(row, f"{figure}({label})")
                )
                for label in self.labels
            ]
            sentences.append("the analyst's posterior has " + "; ".join(utility))
            text = parts[0] + ", " + "; and ".join(sentences) + "."
            if i + 1 < len(rows):
                larger, above = rows[i + 1]
                moves = []
                if _known(row, "membership_risk"):
                    new, old = row["membership_risk"], above["membership_risk"]
                    moves.append(
                        f"the attacker's error {_verb(new, old, 'rises', 'falls')} from {old:.3g} "
                        f"to {new:.3g} ({'closer to' if new >= old else 'further from'} the "
                        f"trivial {row['trivial_risk']:.3g}: {'more' if new >= old else 'less'} "
                        "protection)"
                    )
                for label in self.labels:
                    a, b = above[f"width({label})"], row[f"width({label})"]
                    noise = math.hypot(
                        above.get(f"width_se({label})", 0.0), row.get(f"width_se({label})", 0.0)
                    )
                    if abs(b - a) <= 2 * noise:  # NaN se (one replicate): never "within"
                        moves.append(
                            f"the interval of {label} goes from {a:.3g} to {b:.3g}, within twice "
                            "its Monte Carlo error (no clear change)"
                        )
                        continue
                    moves.append(
                        f"the interval of {label} {_verb(b, a, 'widens', 'narrows')} from "
                        f"{a:.3g} to {b:.3g} ({'less' if b >= a else 'more'} utility)"
                    )
                text += f" Shrinking {m} from {larger:g} to {value:g}: " + "; ".join(moves) + "."
            out.append(text)
        return out

    def to_html(self, path) -> Path:
        """Write one self-contained HTML page: the frontier (an embedded PNG), the table and a
        paragraph per budget. Returns the path."""
        import matplotlib.pyplot as plt

        fig = self.plot()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        image = base64.b64encode(buffer.getvalue()).decode("ascii")
        recommendation = self.recommend()
        body = [
            f"<h1>Choosing {self.measure}: disclosure risk and inferential utility</h1>",
            *(f"<p>{html.escape(note)}</p>" for note in self.notes),
            f"<p><b>Recommendation.</b> {html.escape(recommendation.reason)}</p>",
            f'<img alt="risk-utility frontier" src="data:image/png;base64,{image}">',
            "<h2>Table</h2>",
            self.table.to_html(float_format=lambda v: f"{v:.4g}", na_rep="–"),
            "<h2>Each budget in words</h2>",
            *(f"<p>{html.escape(text)}</p>" for text in self.paragraphs()),
        ]
        page = (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>Choosing {self.measure}</title><style>body{{font-family:sans-serif;"
            "max-width:70em;margin:2em auto}table{border-collapse:collapse;font-size:80%}"
            "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}</style></head><body>\n"
            + "\n".join(body)
            + "\n</body></html>\n"
        )
        path = Path(path)
        path.write_text(page, encoding="utf-8")
        return path


def check_widths(target, labels: list[str], owner: str) -> list[tuple[str, float]]:
    """``target_width`` (one width, or ``{label: width}``) as ``[(column, width)]``."""
    if isinstance(target, Mapping):
        unknown = sorted(set(target) - set(labels))
        if unknown:
            raise ValueError(
                f"{owner}: `target_width` names {unknown}, not among the parameters {labels}."
            )
        pairs = list(target.items())
    else:
        pairs = [(label, target) for label in labels]
    out = []
    for label, width in pairs:
        if not is_real(width) or not width > 0:
            raise ValueError(
                f"{owner}: `target_width` must be a positive number (or {{parameter: width}}), "
                f"got {width!r} for {label!r}."
            )
        out.append((f"width({label})", float(width)))
    return out


def _known(row: pd.Series, column: str) -> bool:
    return column in row and bool(np.isfinite(row[column]))


def _verb(new, old, up: str, down: str) -> str:
    return up if new >= old else down
