"""The ATUS study (Section 6.2): posteriors of the Dirichlet concentration ``alpha`` of 2019
time-use shares from a noisy sum of clamped log-shares, bounded beside unbounded DP.

The data are fixed (the survey packaged with the library, a folder of your own, or the simulated
stand-in when asked for), so replicates differ only in the privacy noise: each replicate is one
release of the paper's grid and one chain set, and the spread across replicates is what the
paper's many chains show.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import AtusStudy
>>> study = AtusStudy(epsilon_s=(1.0,), epsilon_n=(0.1, 1.0), replicates=1)
>>> [fit.variant for fit in study.fits()]
['bounded', 'unbounded', 'unbounded']
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import pandas as pd

from pymc_unbounded_dp.examples import atus
from pymc_unbounded_dp.examples.study.base import Fit, PosteriorWorkload
from pymc_unbounded_dp.examples.study.regression import suggested_n_moves
from pymc_unbounded_dp.examples.study.reporting import mean_table

__all__ = ["AtusStudy"]


@dataclass(frozen=True)
class AtusStudy(PosteriorWorkload):
    """Dirichlet model of the ATUS 2019 shares, the paper's grid.

    Parameters
    ----------
    epsilon_s, epsilon_n, replicates, draws, tune, chains, seed, prob
        As in :class:`~pymc_unbounded_dp.examples.study.RegressionStudy`; replicates are
        releases of the same data.
    data : str, optional
        A folder holding ``female.csv`` and ``male.csv``; ``None``: ``$PMDP_ATUS_DIR`` if set,
        else the packaged survey data; ``"simulated"``: the simulated stand-in (its ``alpha`` is
        then the truth the intervals are checked against). A folder, given or from the
        environment, is kept as its absolute path, which the study's settings (and so every
        stored fit) record: a study resumed on other data is refused.
    """

    name: ClassVar[str] = "atus"
    parameters: ClassVar[tuple[str, ...]] = ("alpha",)

    epsilon_s: tuple[float, ...] = (1.0, 10.0)
    epsilon_n: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0)
    replicates: int = 100
    draws: int = 10000
    tune: int = 2000
    data: str | None = None

    def __post_init__(self):
        super().__post_init__()
        if self.data != "simulated":  # a folder given, or $PMDP_ATUS_DIR: checked now, read later
            try:
                folder = atus.resolve_atus_dir(self.data)
            except FileNotFoundError as error:
                raise ValueError(f"data: {error}") from None
            if folder is not None:  # recorded, so that a fit's settings name the data it fitted
                object.__setattr__(self, "data", str(folder.resolve()))

    @cached_property
    def _data(self) -> atus.AtusData:
        if self.data == "simulated":
            return atus.simulate_atus(seed=2019)
        return atus.load_atus(self.data)

    def simulate(self, replicate: int) -> atus.AtusData:
        return self._data

    def privatize(self, data, fit: Fit) -> atus.AtusRelease:
        return atus.privatize_atus(
            data, fit.epsilon_s, fit.epsilon_n or 1.0, seed=self.release_seed(fit)
        )

    def model(self, release, fit: Fit):
        return atus.atus_model(release, bounded=fit.bounded)

    def sample_options(self, model, release, fit: Fit) -> dict:
        options = {"step": atus.atus_gibbs_step(model)}
        if not fit.bounded:
            options["n_moves"] = suggested_n_moves(release)
        return options

    def truth(self, data) -> dict[str, float]:
        if not data.simulated:
            return {}
        return {f"alpha[{j}]": float(a) for j, a in enumerate(atus.MLE_ALPHA)}

    def tables(self, records: list[dict]) -> dict[str, pd.DataFrame]:
        per_fit = self.per_fit(records)
        labels = ["alpha[0]", "alpha[1]", "alpha[2]", "n"]
        return {
            "posterior means (averaged over replicates)": mean_table(per_fit, labels, "mean"),
            "posterior SDs (averaged over replicates)": mean_table(per_fit, labels, "sd"),
            "sampling diagnostics": mean_table(
                per_fit, labels[:1] + ["n"], ("ess_bulk", "r_hat", "seconds")
            ),
        }
