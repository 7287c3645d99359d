"""The paper's simulation studies: grids of ``epsilon_s x epsilon_n x replicates``, bounded beside
unbounded DP, with one result file per finished cell (so an interrupted study resumes).

A *cell* is one fit: a variant (``bounded`` or ``unbounded``), ``epsilon_s``, ``epsilon_n``
(unbounded only: the bounded fit does not depend on it) and a replicate. Within a replicate all
cells share the confidential data; all cells with the same ``epsilon_s`` share the noise of the
released statistics (common random numbers), so bounded and unbounded fits differ only in what is
known about ``n``.

* regression: simulated data (``n = 1000``) per replicate; posterior of ``beta``, ``tau``, ``mu``
  and ``n`` by :func:`pymc_unbounded_dp.sample`, and the MCEM estimate by ``pmdp.mcem``;
* ATUS: the real shares (or the simulated stand-in) in every replicate, which then differ only in
  the privacy noise; posterior of ``alpha`` and ``n``.

>>> from pymc_unbounded_dp.examples import studies
>>> config = studies.default_config("regression", quick=True)
>>> [c.key for c in studies.cells(config)][:2]
['regression_r000_es1_bounded', 'regression_r000_es1_unbounded_en0.01']
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import atus as atus_example
from pymc_unbounded_dp.examples import regression as regression_example
from pymc_unbounded_dp.examples.summary import flat_draws, group_dataset, posterior_summary

__all__ = [
    "ATUS_EPSILON_N",
    "ATUS_EPSILON_S",
    "REGRESSION_EPSILON_N",
    "REGRESSION_EPSILON_S",
    "Cell",
    "SettingsMismatch",
    "StudyConfig",
    "aggregate",
    "cells",
    "default_config",
    "finished_results",
    "load_results",
    "markdown_table",
    "run_cell",
    "run_study",
    "suggested_n_moves",
    "write_report",
]

REGRESSION_EPSILON_S = (1.0, 0.1)
REGRESSION_EPSILON_N = (1e-4, 0.01, 0.1, 0.5, 1.0, 10.0)
ATUS_EPSILON_S = (1.0, 10.0)
ATUS_EPSILON_N = (0.01, 0.1, 1.0, 10.0)

#: Settings that change a cell's result: a cell file made with others is not reused.
_RESULT_SETTINGS = ("draws", "tune", "chains", "seed", "mcem", "mcem_replicates", "sampler", "n",
                    "data")


class SettingsMismatch(ValueError):
    """A result file in the output folder was made with other settings."""

    def __init__(self, path: Path, differences: dict):
        self.path = path
        self.differences = differences
        text = ", ".join(f"{k}={old!r} there, {new!r} now" for k, (old, new) in differences.items())
        super().__init__(
            f"{path} was made with other settings ({text}); use another output folder or the "
            "same settings to resume."
        )


@dataclass(frozen=True)
class StudyConfig:
    """Everything that defines a study run.

    ``data`` is the ATUS data source (a directory, or ``"simulated"``); ``n`` the regression
    sample size. ``keep_draws`` posterior draws per variable are stored in each cell file.
    """

    study: str
    epsilon_s: tuple[float, ...]
    epsilon_n: tuple[float, ...]
    replicates: int = 1
    draws: int = 1000
    tune: int = 1000
    chains: int = 2
    cores: int | None = None
    seed: int = 20240610
    mcem: bool = True
    mcem_replicates: int | None = None
    sampler: str = "gibbs"
    n: int = 1000
    data: str | None = None
    keep_draws: int = 1000
    mcem_options: dict = field(default_factory=dict)

    def settings(self) -> dict:
        values = dataclasses.asdict(self)
        return {key: values[key] for key in _RESULT_SETTINGS}


def default_config(study: str, quick: bool = False, **overrides) -> StudyConfig:
    """The paper's grid for ``study`` (``"regression"`` or ``"atus"``), or its ``quick`` version.

    Full: regression ``epsilon_s in {1, 0.1}``, ``epsilon_n in {1e-4, 0.01, 0.1, 0.5, 1, 10}``,
    5 replicates, 2 chains of 1000 tuning + 5000 kept iterations (the paper: 10,000 iterations,
    5,000 burn-in; the data-augmentation chain mixes slowly in ``beta``), MCEM with a budget of 30
    iterations of at most 500 imputed sets, warm-started at the posterior mean (on the first
    ``mcem_replicates`` replicates; all by default); ATUS ``epsilon_s in {1, 10}``,
    ``epsilon_n in {0.01, 0.1, 1, 10}``, 3 replicates, 2 x (2000 + 10000) iterations. Quick: one
    ``epsilon_s``, three ``epsilon_n``, one replicate, shorter chains, no MCEM.

    The parameters are updated given the imputed records by exact conjugate draws
    (``sampler="gibbs"``: :func:`~pymc_unbounded_dp.examples.regression.regression_gibbs_step`,
    :func:`~pymc_unbounded_dp.examples.atus.atus_gibbs_step`), or by NUTS (``sampler="nuts"``).
    """
    if study == "regression":
        base = {"epsilon_s": REGRESSION_EPSILON_S, "epsilon_n": REGRESSION_EPSILON_N,
                "replicates": 5, "draws": 5000, "tune": 1000,
                "mcem_options": {"max_iterations": 30, "max_samples": 500}}
        quick_grid = {"epsilon_s": (1.0,), "epsilon_n": (0.01, 0.5, 10.0), "replicates": 1,
                      "draws": 10000, "tune": 1000, "mcem": False}
    elif study == "atus":
        base = {"epsilon_s": ATUS_EPSILON_S, "epsilon_n": ATUS_EPSILON_N, "replicates": 3,
                "draws": 10000, "tune": 2000, "mcem": False}
        quick_grid = {"epsilon_s": (1.0,), "epsilon_n": (0.01, 1.0, 10.0), "replicates": 1,
                      "draws": 3000, "tune": 1000}
    else:
        raise ValueError(f"unknown study {study!r}; choose 'regression' or 'atus'.")
    if quick:
        base.update(quick_grid)
    base.update({k: v for k, v in overrides.items() if v is not None})
    base["epsilon_s"] = tuple(float(e) for e in base["epsilon_s"])
    base["epsilon_n"] = tuple(float(e) for e in base["epsilon_n"])
    return StudyConfig(study=study, **base)


def _eps_code(value: float) -> str:
    return f"{value:g}"


@dataclass(frozen=True)
class Cell:
    """One fit of a study grid."""

    study: str
    variant: str
    epsilon_s: float
    epsilon_n: float | None
    replicate: int

    @property
    def key(self) -> str:
        key = f"{self.study}_r{self.replicate:03d}_es{_eps_code(self.epsilon_s)}_{self.variant}"
        return key if self.epsilon_n is None else f"{key}_en{_eps_code(self.epsilon_n)}"

    @property
    def bounded(self) -> bool:
        return self.variant == "bounded"


def cells(config: StudyConfig) -> list[Cell]:
    """The grid, replicate by replicate (an interrupted run leaves whole replicates done first)."""
    out = []
    for replicate in range(config.replicates):
        for eps_s in config.epsilon_s:
            out.append(Cell(config.study, "bounded", eps_s, None, replicate))
            for eps_n in config.epsilon_n:
                out.append(Cell(config.study, "unbounded", eps_s, eps_n, replicate))
    return out


def _seed(config: StudyConfig, *parts) -> np.random.SeedSequence:
    """Seed from the study seed and integer-coded parts (stable across runs and platforms)."""
    ints = [config.seed]
    for part in parts:
        if isinstance(part, float):
            part = round(part * 1_000_000)
        ints.append(int(part) if part is not None else 0)
    return np.random.SeedSequence([abs(i) for i in ints])


def _int_seed(sequence: np.random.SeedSequence) -> int:
    return int(sequence.generate_state(1)[0])


def suggested_n_moves(release) -> int:
    """Birth/death moves per iteration: a tenth of the plausible range of ``n``.

    ``max(10, 0.1 * max(n_dp, 3 * scale of the n noise))``: a tenth of the sampler's default (one
    move per record, following ``n`` during tuning) keeps the studies' iterations cheap, and the
    noise term lets chains travel when a tiny ``epsilon_n`` starts them far from the bulk of ``n``
    (``n_dp`` can even be negative, giving ``n = 0``).
    """
    spread = 3.0 * release.n_mechanism.scale
    return int(max(10, round(0.1 * max(release.n_dp, spread))))


def _thin(values: np.ndarray, keep: int) -> list:
    values = np.asarray(values)
    if values.size > keep:
        values = values[np.linspace(0, values.size - 1, keep).round().astype(int)]
    if np.issubdtype(values.dtype, np.integer):
        return [int(v) for v in values]
    return [float(v) for v in values]


class _Data:
    """Per-study cache of the confidential data (one data set per replicate, or the ATUS file)."""

    def __init__(self, config: StudyConfig):
        self.config = config
        self._cache: dict = {}

    def get(self, replicate: int):
        config = self.config
        if config.study == "regression":
            if replicate not in self._cache:
                self._cache = {replicate: regression_example.simulate_regression(
                    config.n, seed=_seed(config, 0, replicate))}
            return self._cache[replicate]
        if "atus" not in self._cache:
            if config.data == "simulated":
                self._cache["atus"] = atus_example.simulate_atus(seed=2019)
            else:
                self._cache["atus"] = atus_example.load_atus(config.data)
        return self._cache["atus"]


def run_cell(cell: Cell, config: StudyConfig, data=None, progressbar: bool = False) -> dict:
    """Fit one cell; returns the JSON-ready result record."""
    data = _Data(config).get(cell.replicate) if data is None else data
    example = regression_example if cell.study == "regression" else atus_example
    privatize = (example.privatize_regression if cell.study == "regression"
                 else example.privatize_atus)
    build = example.regression_model if cell.study == "regression" else example.atus_model
    # the same statistics noise for every cell of (replicate, epsilon_s); n noise by epsilon_n
    release = privatize(data, cell.epsilon_s, cell.epsilon_n or 1.0,
                        seed=_seed(config, 1, cell.replicate, cell.epsilon_s))
    model = build(release, bounded=cell.bounded)
    names = (["beta", "tau", "mu"] if cell.study == "regression" else ["alpha"])
    kept = (["beta", "tau"] if cell.study == "regression" else ["alpha"])
    if not cell.bounded:
        names.append("n")
        kept.append("n")
    sample_seed = _int_seed(_seed(config, 2, cell.replicate, cell.epsilon_s, cell.epsilon_n,
                                  int(cell.bounded)))
    kwargs = {} if cell.bounded else {"n_moves": suggested_n_moves(release)}
    if config.sampler == "gibbs":
        kwargs["step"] = (example.regression_gibbs_step(model) if cell.study == "regression"
                          else example.atus_gibbs_step(model))
    elif config.sampler != "nuts":
        raise ValueError(f"unknown sampler {config.sampler!r}; choose 'nuts' or 'gibbs'.")
    start = time.perf_counter()
    with model:
        idata = pmdp.sample(
            draws=config.draws, tune=config.tune, chains=config.chains, cores=config.cores,
            random_seed=sample_seed, progressbar=progressbar, compute_convergence_checks=False,
            **kwargs,
        )
    seconds = time.perf_counter() - start
    summary = posterior_summary(idata, names)
    stats = group_dataset(idata, "sample_stats")
    divergences = int(np.asarray(stats["diverging"].values).sum()) if "diverging" in stats else 0
    draws = flat_draws(idata, kept)
    record = {
        "cell": dataclasses.asdict(cell),
        "key": cell.key,
        "settings": config.settings(),
        "n_true": int(release.n),
        "n_dp": None if cell.bounded else int(release.n_dp),
        "released": [float(v) for v in release.values],
        "posterior": {label: {k: _json_number(v) for k, v in row.items()}
                      for label, row in summary.to_dict(orient="index").items()},
        "divergences": divergences,
        "sample_seconds": seconds,
        "n_moves": kwargs.get("n_moves"),
        "draws": {label: _thin(values, config.keep_draws) for label, values in draws.items()},
    }
    if config.mcem and (config.mcem_replicates is None or cell.replicate < config.mcem_replicates):
        start_values = {}
        for name in model.free_RVs:
            if name.name != "n" and name.name in group_dataset(idata).data_vars:
                start_values[name.name] = np.asarray(
                    group_dataset(idata)[name.name].mean(("chain", "draw")).values)
        record["mcem"] = _run_mcem(model, config, cell, start_values)
    return record


def _json_number(value):
    if isinstance(value, bool | np.bool_) or value is None:
        return None if value is None else bool(value)
    value = float(value)
    return value if math.isfinite(value) else None


def _run_mcem(model, config: StudyConfig, cell: Cell, start_values: dict | None = None) -> dict:
    """MCEM estimate of the cell's model (``pmdp.mcem``, imported lazily), started at
    ``start_values`` (natural scale; the posterior means) where ``mcem`` takes ``init``."""
    try:
        from pymc_unbounded_dp.mcem import mcem
    except ImportError as error:
        return {"error": f"pmdp.mcem is not available: {error}"}
    import inspect

    accepted = inspect.signature(mcem).parameters
    options = {k: v for k, v in config.mcem_options.items() if k in accepted}
    if start_values and "init" in accepted:
        options["init"] = start_values
    seed = _int_seed(_seed(config, 3, cell.replicate, cell.epsilon_s, cell.epsilon_n,
                           int(cell.bounded)))
    start = time.perf_counter()
    try:
        fit = mcem(model=model, random_seed=seed, progressbar=False, **options)
    except Exception as error:  # noqa: BLE001 - a study keeps going; the error is recorded
        return {"error": f"{type(error).__name__}: {error}"}
    estimate, errors = {}, {}
    for name, value in fit.estimate.items():
        value = np.asarray(value, dtype=float)
        se = np.asarray(fit.standard_error.get(name, np.full(value.shape, np.nan)), dtype=float)
        for index in np.ndindex(value.shape):
            label = name if not value.shape else f"{name}[{','.join(map(str, index))}]"
            estimate[label] = _json_number(value[index])
            errors[label] = _json_number(np.broadcast_to(se, value.shape)[index])
    history = getattr(fit, "history", None)
    iterations = None
    if history is not None and "iteration" in getattr(history, "sizes", {}):
        iterations = int(history.sizes["iteration"])
    return {
        "estimate": estimate,
        "standard_error": errors,
        "converged": bool(fit.converged),
        "iterations": iterations,
        "seconds": time.perf_counter() - start,
    }


# -- files ---------------------------------------------------------------------------------------


def _cell_path(out: Path, cell: Cell) -> Path:
    return out / "cells" / f"{cell.key}.json"


def _write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)  # atomic: a killed run never leaves half a file


def _finished(out: Path, cell: Cell, config: StudyConfig) -> dict | None:
    path = _cell_path(out, cell)
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    settings = config.settings()
    differences = {k: (record.get("settings", {}).get(k), v) for k, v in settings.items()
                   if record.get("settings", {}).get(k) != v}
    if differences:
        raise SettingsMismatch(path, differences)
    return record


def load_results(out, study: str | None = None) -> list[dict]:
    """All finished cell records in ``out/cells`` (of one study, if given)."""
    folder = Path(out) / "cells"
    records = []
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        if study is None or record["cell"]["study"] == study:
            records.append(record)
    return records


def finished_results(config: StudyConfig, out) -> list[dict]:
    """The finished cells of ``config``'s grid in ``out`` (grid order), checking their settings."""
    out = Path(out)
    found = (_finished(out, cell, config) for cell in cells(config))
    return [record for record in found if record is not None]


def run_study(config: StudyConfig, out, progressbar: bool = True, log=print) -> list[dict]:
    """Run (or resume) every cell of ``config`` into ``out`` and write the report.

    Finished cells (``out/cells/<key>.json`` with the same settings) are skipped; each newly
    finished cell is written at once. Returns the records of the whole grid.

    Raises
    ------
    SettingsMismatch
        If ``out`` holds a cell made with other settings.
    """
    from tqdm.auto import tqdm

    out = Path(out)
    grid = cells(config)
    records, todo = {}, []
    for cell in grid:
        record = _finished(out, cell, config)
        if record is None:
            todo.append(cell)
        else:
            records[cell.key] = record
    if records:
        log(f"resuming: {len(records)} of {len(grid)} cells already in {out / 'cells'}")
    data = _Data(config)
    if config.study == "atus" and todo:
        source = data.get(0)
        log(f"ATUS data: {source.source}" + (
            " (SIMULATED stand-in: the data directory was not found; pass --data or set "
            f"${atus_example.ATUS_ENV})" if source.simulated else ""))
    start = time.perf_counter()
    with tqdm(total=len(grid), initial=len(records), desc=f"{config.study} cells",
              disable=not progressbar, unit="cell") as bar:
        for cell in todo:
            bar.set_postfix_str(cell.key.removeprefix(f"{config.study}_"))
            record = run_cell(cell, config, data.get(cell.replicate))
            _write_json(_cell_path(out, cell), record)
            records[cell.key] = record
            bar.update()
    elapsed = time.perf_counter() - start
    ordered = [records[c.key] for c in grid]
    write_report(ordered, config, out, elapsed)
    return ordered


# -- tables --------------------------------------------------------------------------------------


def _flatten(record: dict) -> dict:
    cell = record["cell"]
    row = {
        "variant": cell["variant"],
        "epsilon_s": cell["epsilon_s"],
        "epsilon_n": cell["epsilon_n"] if cell["epsilon_n"] is not None else math.nan,
        "replicate": cell["replicate"],
        "n_true": record["n_true"],
        "n_dp": record["n_dp"] if record["n_dp"] is not None else math.nan,
        "divergences": record["divergences"],
        "seconds": record["sample_seconds"],
    }
    for label, stats in record["posterior"].items():
        for stat in ("mean", "sd", "var", "lower_94", "upper_94", "r_hat", "ess_bulk"):
            value = stats.get(stat)
            row[f"{stat}:{label}"] = math.nan if value is None else value
    mcem = record.get("mcem") or {}
    for label, value in (mcem.get("estimate") or {}).items():
        row[f"mcem:{label}"] = math.nan if value is None else value
    row["mcem_fits"] = int(bool(mcem.get("estimate")))
    if mcem:
        row["mcem_converged"] = float(bool(mcem.get("converged", False)))
        row["mcem_seconds"] = mcem.get("seconds", math.nan)
    return row


def aggregate(records: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_cell, averaged)``: one row per cell, and averages over replicates per grid point."""
    per_cell = pd.DataFrame([_flatten(r) for r in records])
    keys = ["variant", "epsilon_s", "epsilon_n"]
    numeric = [c for c in per_cell.columns if c not in keys and c != "replicate"]
    grouped = per_cell.assign(epsilon_n=per_cell["epsilon_n"].fillna(-1.0)).groupby(keys, sort=False)
    averaged = grouped[numeric].mean(numeric_only=True)
    averaged["mcem_fits"] = grouped["mcem_fits"].sum()
    averaged.insert(0, "replicates", grouped.size())
    averaged = averaged.reset_index()
    averaged["epsilon_n"] = averaged["epsilon_n"].where(averaged["epsilon_n"] >= 0)
    averaged = averaged.sort_values(["epsilon_s", "variant", "epsilon_n"],
                                    ascending=[False, True, True], na_position="first")
    return per_cell, averaged.reset_index(drop=True)


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, int | np.integer):
        return str(int(value))
    value = float(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.{digits}g}"
    return f"{value:.{digits}f}"


def markdown_table(frame: pd.DataFrame, columns: dict, digits: int = 3) -> str:
    """A GitHub Markdown table of ``frame[columns]`` with headers ``columns.values()``."""
    present = {k: v for k, v in columns.items() if k in frame.columns}
    lines = ["| " + " | ".join(present.values()) + " |",
             "|" + "|".join("---" for _ in present) + "|"]
    for _, row in frame.iterrows():
        lines.append("| " + " | ".join(_fmt(row[k], digits) for k in present) + " |")
    return "\n".join(lines)


def _grid_columns(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    frame["epsilon_n"] = [("–" if np.isnan(e) else f"{e:g}") for e in frame["epsilon_n"]]
    frame["epsilon_s"] = [f"{e:g}" for e in frame["epsilon_s"]]
    return frame


def _tables(study: str, averaged: pd.DataFrame) -> dict[str, str]:
    shown = _grid_columns(averaged)
    head = {"epsilon_s": "eps_s", "variant": "DP", "epsilon_n": "eps_n", "replicates": "reps"}
    if study == "regression":
        params = ["beta[0]", "beta[1]", "beta[2]", "tau", "n"]
        mcem = ["beta[0]", "beta[1]", "beta[2]", "tau", "mu[0]", "mu[1]"]
        tables = {
            "posterior means (averaged over replicates)": markdown_table(
                shown, {**head, **{f"mean:{p}": p for p in params}}),
            "posterior variances (averaged over replicates)": markdown_table(
                shown, {**head, **{f"var:{p}": p for p in params}}, digits=3),
            "MCEM estimates (averaged over replicates)": markdown_table(
                shown, {**head, "mcem_fits": "MCEM fits", **{f"mcem:{p}": p for p in mcem},
                        "mcem_converged": "converged (share)"}),
            "sampling diagnostics": markdown_table(
                shown, {**head, **{f"r_hat:{p}": f"R-hat {p}" for p in ["beta[1]", "tau", "n"]},
                        **{f"ess_bulk:{p}": f"ESS {p}" for p in ["beta[1]", "tau", "n"]},
                        "seconds": "s / fit"}, digits=2),
        }
        if not any(c.startswith("mcem:") for c in averaged.columns):
            del tables["MCEM estimates (averaged over replicates)"]
        return tables
    params = ["alpha[0]", "alpha[1]", "alpha[2]", "n"]
    return {
        "posterior means (averaged over replicates)": markdown_table(
            shown, {**head, **{f"mean:{p}": p for p in params}}),
        "posterior SDs (averaged over replicates)": markdown_table(
            shown, {**head, **{f"sd:{p}": p for p in params}}),
        "sampling diagnostics": markdown_table(
            shown, {**head, **{f"r_hat:{p}": f"R-hat {p}" for p in params},
                    **{f"ess_bulk:{p}": f"ESS {p}" for p in params}, "seconds": "s / fit"},
            digits=2),
    }


def write_report(records: list[dict], config: StudyConfig, out, elapsed: float | None = None
                 ) -> dict[str, Path]:
    """Tables (CSV, Markdown) and figures (PNG) of the finished ``records`` into ``out``."""
    from pymc_unbounded_dp.examples import figures

    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    per_cell, averaged = aggregate(records)
    study = config.study
    paths = {
        "cells_csv": out / f"{study}_cells.csv",
        "summary_csv": out / f"{study}_summary.csv",
        "summary_md": out / f"{study}_summary.md",
    }
    per_cell.to_csv(paths["cells_csv"], index=False)
    averaged.to_csv(paths["summary_csv"], index=False)
    total = sum(r["sample_seconds"] + ((r.get("mcem") or {}).get("seconds") or 0.0) for r in records)
    lines = [f"# {study}: {len(records)} fits", "",
             (f"Settings: {json.dumps(config.settings())}; epsilon_s = {list(config.epsilon_s)}, "
             f"epsilon_n = {list(config.epsilon_n)}, replicates = {config.replicates}."), "",
             f"Compute time of the fits: {total / 60:.1f} min"
             + (f" (this run: {elapsed / 60:.1f} min wall)" if elapsed is not None else "") + ".",
             ""]
    for title, table in _tables(study, averaged).items():
        lines += [f"## {title}", "", table, ""]
    paths["summary_md"].write_text("\n".join(lines))
    if study == "regression":
        fig = figures.plot_regression_study(averaged, regression_example.regression_truth(),
                                            n_true=config.n)
        paths["figure"] = out / "figures" / "regression_study.png"
        fig.savefig(paths["figure"], dpi=90)
    else:
        n_true = records[0]["n_true"] if records else None
        for name, fig in {
            "atus_alpha1_density": figures.plot_atus_alpha_densities(records, component=0),
            "atus_n_boxplots": figures.plot_atus_n_boxplots(records, n_true=n_true),
            "atus_alpha_sd": figures.plot_atus_alpha_sd(averaged),
        }.items():
            paths[name] = out / "figures" / f"{name}.png"
            fig.savefig(paths[name], dpi=90)
    return paths
