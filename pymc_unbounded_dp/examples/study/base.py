"""The shape every study workload has: a grid of independent fits, each a pure function of the
study's settings and the fit's coordinates.

A :class:`Workload` is a frozen dataclass whose fields are the study's options (grid, replicates,
chain lengths, seed). :meth:`Workload.fits` lists the grid as :class:`Fit` objects and
:meth:`Workload.run` turns one into a JSON-ready record; the runner
(:mod:`~pymc_unbounded_dp.examples.study.running`) never looks inside either. Every random number of
a fit comes from :func:`fit_seed` of the study seed and the fit's coordinates, so a record does not
depend on which worker ran it, in what order, or how many workers there were.

:class:`PosteriorWorkload` is the part the posterior studies share (regression, ATUS): simulate,
privatize, model, the recommended parameter step, sample with :func:`pymc_unbounded_dp.sample`,
summarise with :func:`arviz.summary`. A chain that stopped early (an interrupted
:func:`pymc.sample` returns what it has) raises :class:`TruncatedFit` instead of being recorded.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import RegressionStudy
>>> study = RegressionStudy(epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=1)
>>> [fit.key for fit in study.fits()]
['regression_r000_es1_bounded', 'regression_r000_es1_unbounded_en0.5']
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

__all__ = [
    "Fit",
    "PosteriorWorkload",
    "TruncatedFit",
    "Workload",
    "fit_seed",
    "posterior_table",
]


class TruncatedFit(RuntimeError):
    """A fit returned another number of chains or draws than asked for (its sampling was
    interrupted, say): not a result."""


@dataclass(frozen=True)
class Fit:
    """One fit of a study grid: a variant, its privacy budgets and a replicate (data set).

    ``epsilon_n`` is ``None`` for a bounded-DP fit (``n`` public), and ``math.inf`` in the MLE
    study's bounded column.
    """

    study: str
    variant: str
    epsilon_s: float
    epsilon_n: float | None
    replicate: int

    @property
    def key(self) -> str:
        """A file-name-safe identifier, unique within the study."""
        key = f"{self.study}_r{self.replicate:03d}_es{self.epsilon_s:g}_{self.variant}"
        return key if self.epsilon_n is None else f"{key}_en{self.epsilon_n:g}"

    @property
    def bounded(self) -> bool:
        """Whether ``n`` is public (bounded DP)."""
        return self.variant == "bounded"


def fit_seed(seed: int, *parts: float | int | None) -> np.random.SeedSequence:
    """The seed of one random stream: the study ``seed`` and integer-coded ``parts``.

    Floats are coded in millionths (``1e-4 -> 100``), ``inf`` and ``None`` as fixed integers, so the
    same coordinates give the same stream on every machine and worker.

    >>> fit_seed(1, 0, 3).generate_state(1)[0] == fit_seed(1, 0, 3).generate_state(1)[0]
    True
    """
    ints = [int(seed)]
    for part in parts:
        if part is None:
            ints.append(0)
        elif isinstance(part, float) and math.isinf(part):
            ints.append(2**62)
        elif isinstance(part, float):
            ints.append(round(part * 1_000_000))
        else:
            ints.append(int(part))
    return np.random.SeedSequence([abs(i) for i in ints])


def int_seed(sequence: np.random.SeedSequence) -> int:
    """One integer seed (``random_seed=`` of PyMC) from a seed sequence."""
    return int(sequence.generate_state(1)[0])


@dataclass(frozen=True)
class Workload(ABC):
    """A study: its options are the dataclass fields; :meth:`fits` and :meth:`run` do the work.

    Subclasses set ``name`` and ``grid_fields`` (fields that only choose *which* fits exist, such
    as ``replicates``: a stored fit stays valid when they change) and implement :meth:`fits`,
    :meth:`run` and :meth:`tables`.
    """

    name: ClassVar[str]
    grid_fields: ClassVar[tuple[str, ...]] = ("replicates", "epsilon_s", "epsilon_n")

    @abstractmethod
    def fits(self) -> list[Fit]:
        """The grid, replicate by replicate (an interrupted run leaves whole replicates done)."""

    @abstractmethod
    def run(self, fit: Fit) -> dict:
        """Simulate, release and fit one grid point: the JSON-ready record (with ``"key"``)."""

    @abstractmethod
    def tables(self, records: list[dict]) -> dict[str, pd.DataFrame]:
        """The report's tables from finished records, by title."""

    def settings(self) -> dict:
        """The options that change a fit's result: a stored fit made with others is not reused."""
        values = dataclasses.asdict(self)
        return {k: jsonable(v) for k, v in values.items() if k not in self.grid_fields}


def jsonable(value):
    """``value`` with tuples as lists and non-finite floats as strings (for JSON)."""
    if isinstance(value, tuple | list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def number(value) -> float | None:
    """A JSON number: ``None`` for NaN and infinities."""
    value = float(value)
    return value if math.isfinite(value) else None


def posterior_table(idata, var_names: list[str], prob: float = 0.95) -> pd.DataFrame:
    """:func:`arviz.summary` with an equal-tailed ``prob`` interval, unrounded, in fixed columns.

    Columns ``mean, sd, lower, upper, ess_bulk, r_hat``, one row per scalar component
    (``beta[0]``, ``tau``, ...). Works with ArviZ 0.x (``InferenceData``) and 1.x (``DataTree``).
    """
    import arviz as az

    with warnings.catch_warnings():
        # a parameter that never moves (n under a huge epsilon_n) has R-hat 0/0: NaN, expected
        warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
        table, lower, upper = _summary(az, idata, var_names, prob)
    table = table.rename(columns={lower: "lower", upper: "upper"})
    return table[["mean", "sd", "lower", "upper", "ess_bulk", "r_hat"]].astype(float)


def _summary(az, idata, var_names: list[str], prob: float):
    """``arviz.summary`` unrounded, with the columns of the equal-tailed interval."""
    if az.__version__.startswith("0."):
        table = az.summary(idata, var_names=var_names, round_to="none")
        # ArviZ 0.x's summary() reports an HDI; the equal-tailed interval comes from its quantiles
        draws = az.extract(idata, var_names=var_names, combined=True, keep_dataset=True)
        lower, upper = "lower", "upper"
        table[lower] = [_quantile(draws, label, (1 - prob) / 2) for label in table.index]
        table[upper] = [_quantile(draws, label, (1 + prob) / 2) for label in table.index]
    else:
        table = az.summary(idata, var_names=var_names, ci_prob=prob, ci_kind="eti", round_to="none")
        tag = f"eti{round(100 * prob)}"
        lower, upper = f"{tag}_lb", f"{tag}_ub"
    return table, lower, upper


def _component(draws, label: str) -> np.ndarray:
    name, _, index = label.partition("[")
    values = np.asarray(draws[name].values)
    if index:
        values = values[tuple(int(i) for i in index.rstrip("]").split(","))]
    return values.reshape(-1)


def _quantile(draws, label: str, q: float) -> float:
    return float(np.quantile(_component(draws, label), q))


@dataclass(frozen=True)
class PosteriorWorkload(Workload):
    """A study of posteriors under bounded and unbounded DP (regression, ATUS).

    Within a replicate every fit shares the confidential data; fits with the same ``epsilon_s``
    share the statistics' noise (common random numbers), so bounded and unbounded fits differ only
    in what is known about ``n``.
    """

    epsilon_s: tuple[float, ...] = ()
    epsilon_n: tuple[float, ...] = ()
    replicates: int = 1
    draws: int = 1000
    tune: int = 500
    chains: int = 2
    seed: int = 20240610
    prob: float = 0.95

    #: Posterior variables summarised in every fit (``n`` is added for unbounded fits).
    parameters: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        for grid in ("epsilon_s", "epsilon_n"):
            for value in getattr(self, grid):
                if not (0 < value < math.inf):
                    raise ValueError(
                        f"{grid}: every value must be positive and finite, got "
                        f"{value!r} (bounded DP is fitted beside every epsilon_n; "
                        "'inf' is for the mcem study)"
                    )
        for count in ("replicates", "draws", "chains"):
            if getattr(self, count) < 1:
                raise ValueError(f"{count}: must be at least 1, got {getattr(self, count)!r}")
        if not 0 < self.prob < 1:
            raise ValueError(f"prob: must be in (0, 1), got {self.prob!r}")

    # -- the example's pieces -------------------------------------------------------------------

    @abstractmethod
    def simulate(self, replicate: int):
        """The confidential data of ``replicate``."""

    @abstractmethod
    def privatize(self, data, fit: Fit):
        """The release of ``data`` for ``fit`` (seeded simulation noise)."""

    @abstractmethod
    def model(self, release, fit: Fit):
        """The PyMC model of ``release`` (bounded or unbounded DP as ``fit`` says)."""

    @abstractmethod
    def sample_options(self, model, release, fit: Fit) -> dict:
        """Keyword arguments of :func:`pymc_unbounded_dp.sample`: the recommended steps."""

    @abstractmethod
    def truth(self, data) -> dict[str, float]:
        """The values the intervals should cover, by component label."""

    # -- the shared driver ----------------------------------------------------------------------

    def fits(self) -> list[Fit]:
        out = []
        for replicate in range(self.replicates):
            for eps_s in self.epsilon_s:
                out.append(Fit(self.name, "bounded", float(eps_s), None, replicate))
                for eps_n in self.epsilon_n:
                    out.append(Fit(self.name, "unbounded", float(eps_s), float(eps_n), replicate))
        return out

    def release_seed(self, fit: Fit) -> np.random.SeedSequence:
        """Noise seed: shared by every fit of ``(replicate, epsilon_s)``."""
        return fit_seed(self.seed, 1, fit.replicate, fit.epsilon_s)

    def run(self, fit: Fit) -> dict:
        from pymc_unbounded_dp.sampling import sample

        data = self.simulate(fit.replicate)
        release = self.privatize(data, fit)
        model = self.model(release, fit)
        names = [*self.parameters, *([] if fit.bounded else ["n"])]
        seed = int_seed(
            fit_seed(self.seed, 2, fit.replicate, fit.epsilon_s, fit.epsilon_n, int(fit.bounded))
        )
        start = time.perf_counter()
        with model:
            idata = sample(
                draws=self.draws,
                tune=self.tune,
                chains=self.chains,
                cores=1,
                random_seed=seed,
                progressbar=False,
                compute_convergence_checks=False,
                **self.sample_options(model, release, fit),
            )
        seconds = time.perf_counter() - start
        sizes = dict(idata["posterior"].sizes)
        if (sizes.get("chain"), sizes.get("draw")) != (self.chains, self.draws):
            raise TruncatedFit(
                f"{fit.key}: the trace holds {sizes.get('chain')} chains x {sizes.get('draw')} "
                f"draws, not the {self.chains} x {self.draws} asked (an interrupted run?)"
            )
        truth = self.truth(data)
        if not fit.bounded:
            truth["n"] = float(getattr(data, "n", release.n))
        table = posterior_table(idata, names, self.prob)
        table["true"] = [truth.get(label, math.nan) for label in table.index]
        return {
            "key": fit.key,
            "fit": dataclasses.asdict(fit),
            "settings": self.settings(),
            "n_true": int(release.n),
            "n_dp": None if fit.bounded else int(release.n_dp),
            "released": [float(v) for v in release.values],
            "posterior": {
                label: {k: number(v) for k, v in row.items()}
                for label, row in table.to_dict(orient="index").items()
            },
            "draws": [sizes["chain"], sizes["draw"]],
            "seconds": seconds,
        }

    def per_fit(self, records: list[dict]) -> pd.DataFrame:
        """One row per fit and component: interval, truth, coverage, width, diagnostics."""
        rows = []
        for record in records:
            fit = record["fit"]
            for label, row in record["posterior"].items():
                true = row.get("true")
                lower, upper = row["lower"], row["upper"]
                rows.append(
                    {
                        "variant": fit["variant"],
                        "epsilon_s": fit["epsilon_s"],
                        "epsilon_n": fit["epsilon_n"],
                        "replicate": fit["replicate"],
                        "parameter": label,
                        "mean": row["mean"],
                        "sd": row["sd"],
                        "lower": lower,
                        "upper": upper,
                        "true": true,
                        "covered": None if true is None else bool(lower <= true <= upper),
                        "width": upper - lower,
                        "ess_bulk": row["ess_bulk"],
                        "r_hat": row["r_hat"],
                        "chains": record["draws"][0],
                        "seconds": record["seconds"],
                    }
                )
        return pd.DataFrame(rows)
