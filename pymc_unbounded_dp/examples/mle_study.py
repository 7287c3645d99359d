"""The paper's Table 2 protocol: maximum-likelihood estimates of the regression across data sets.

For ``N = 1000`` records, ``epsilon_s = 1`` and each ``epsilon_n`` in ``{0.01, 0.1, 1, 10, inf}``
(``inf``: ``n`` public, bounded DP), ``replicates`` data sets are simulated
(:func:`~pymc_unbounded_dp.examples.regression.simulate_regression`), released
(:func:`~pymc_unbounded_dp.examples.regression.privatize_regression`: the statistics' noise is
shared by all ``epsilon_n`` of a data set, common random numbers) and fitted by
:func:`pymc_unbounded_dp.mcem` with its defaults. Each fit is one JSON file written atomically
under ``out/fits``, so an interrupted study resumes where it stopped and never keeps half a fit.

Per ``epsilon_n`` the report gives, over the fits with an interior optimum, the mean and the
standard deviation across data sets of each estimate (``beta``, ``tau``, ``mu``), and over all
fits the shares that ended ``interior``, on the ``boundary`` (with the parameter) or with the
budget spent, and the run time per fit.

>>> from pymc_unbounded_dp.examples import mle_study
>>> config = mle_study.MLEStudyConfig(replicates=2)
>>> [f.key for f in mle_study.fits(config)][:2]
['mle_r000_en0.01', 'mle_r000_en0.1']
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
import warnings
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import regression

__all__ = ["EPSILON_N", "Fit", "MLEStudyConfig", "finished", "fits", "markdown_table", "run_fit", "run_study",
           "summarise"]

EPSILON_N = (0.01, 0.1, 1.0, 10.0, math.inf)
PARAMETERS = ("beta[0]", "beta[1]", "beta[2]", "tau", "mu[0]", "mu[1]")


@dataclass(frozen=True)
class MLEStudyConfig:
    """The study grid and seeds. ``mcem_options`` go to :func:`pymc_unbounded_dp.mcem`.

    The default options halve the simulated likelihood's replicates (4 x 50) and accept a Monte
    Carlo error of 0.1 standard errors (``pmdp.mcem``'s defaults: 4 x 100 and 0.05): across data
    sets the estimates spread by about one standard error, so a Monte Carlo error of 0.1 of it
    adds 1% to their variance, and each fit takes about half the time.
    """

    epsilon_s: float = 1.0
    epsilon_n: tuple[float, ...] = EPSILON_N
    replicates: int = 20
    n: int = 1000
    seed: int = 20240610
    mcem_options: tuple[tuple[str, object], ...] = (("replicates", 50), ("tol", 0.1))

    def settings(self) -> dict:
        """What makes a fit's result: a fit file made with other settings is not reused."""
        values = dataclasses.asdict(self)
        del values["replicates"], values["epsilon_n"]
        return json.loads(json.dumps(values))


@dataclass(frozen=True)
class Fit:
    """One fit of the grid: a data set (``replicate``) and the budget of ``n``."""

    replicate: int
    epsilon_n: float

    @property
    def key(self) -> str:
        return f"mle_r{self.replicate:03d}_en{self.epsilon_n:g}"


def fits(config: MLEStudyConfig) -> list[Fit]:
    """The grid, data set by data set."""
    return [Fit(r, float(e)) for r in range(config.replicates) for e in config.epsilon_n]


def _seed(config: MLEStudyConfig, *parts: int) -> np.random.SeedSequence:
    return np.random.SeedSequence([config.seed, *parts])


def run_fit(fit: Fit, config: MLEStudyConfig) -> dict:
    """Simulate, release and fit one cell; the JSON-ready record."""
    data = regression.simulate_regression(config.n, seed=_seed(config, 0, fit.replicate))
    bounded = not math.isfinite(fit.epsilon_n)
    release = regression.privatize_regression(
        data, config.epsilon_s, 1.0 if bounded else fit.epsilon_n,
        seed=_seed(config, 1, fit.replicate),
    )
    if not bounded:  # the count's noise depends on epsilon_n; the statistics' noise does not
        count = pmdp.DiscreteLaplace(epsilon=fit.epsilon_n)
        noise = count.simulate(random_seed=np.random.default_rng(_seed(config, 2, fit.replicate)))
        release = dataclasses.replace(release, n_dp=int(data.n + noise), epsilon_n=fit.epsilon_n)
    model = regression.regression_model(release, bounded=bounded)
    seed = int(_seed(config, 3, fit.replicate, round(1e6 * min(fit.epsilon_n, 1e9)))
               .generate_state(1)[0])
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = pmdp.mcem(model, random_seed=seed, progressbar=False,
                           **dict(config.mcem_options))
    seconds = time.perf_counter() - start
    return {
        "fit": dataclasses.asdict(fit),
        "key": fit.key,
        "settings": config.settings(),
        "n": data.n,
        "n_dp": None if bounded else int(release.n_dp),
        "estimate": _flat(result.estimate),
        "standard_error": _flat(result.standard_error),
        "mc_error": _flat(result.mc_error),
        "converged": result.converged.value,
        "boundary": None if result.boundary is None else result.boundary.parameter,
        "method": result.method,
        "missing_information": _number(result.missing_information),
        "reason": result.reason,
        "seconds": seconds,
    }


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _flat(values: dict) -> dict:
    out = {}
    for name, value in values.items():
        value = np.asarray(value, dtype=float)
        for index in np.ndindex(value.shape):
            label = name if not value.shape else f"{name}[{','.join(map(str, index))}]"
            out[label] = _number(value[index])
    return {k: v for k, v in out.items() if k.split("[")[0] in ("beta", "tau", "mu")}


def _path(out: Path, fit: Fit) -> Path:
    return out / "fits" / f"{fit.key}.json"


def finished(out, fit: Fit, config: MLEStudyConfig) -> dict | None:
    """The record of ``fit`` in ``out`` if it finished with ``config``'s settings, else None.

    Raises
    ------
    ValueError
        If the file was made with other settings.
    """
    path = _path(Path(out), fit)
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if record.get("settings") != config.settings():
        raise ValueError(f"{path} was made with other settings ({record.get('settings')}); use "
                         "another output folder or the same settings to resume.")
    return record


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)  # atomic: an interrupted run never leaves half a file


def run_study(config: MLEStudyConfig, out, workers: int = 1, log=print) -> list[dict]:
    """Run (or resume) every fit into ``out/fits`` and write ``out/table2.md``.

    Finished fits with the same settings are skipped; each new fit is written as soon as it ends.
    ``workers > 1`` runs fits in that many processes (results do not depend on it: every fit has
    its own seeds).
    """
    out = Path(out)
    grid = fits(config)
    records = {f.key: r for f in grid if (r := finished(out, f, config)) is not None}
    todo = [f for f in grid if f.key not in records]
    log(f"MLE study: {len(grid)} fits, {len(records)} already in {out / 'fits'}, {len(todo)} to run")
    if workers > 1 and len(todo) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(run_fit, f, config): f for f in todo}
            for future in as_completed(futures):
                _done(out, futures[future], future.result(), records, log)
    else:
        for fit in todo:
            _done(out, fit, run_fit(fit, config), records, log)
    ordered = [records[f.key] for f in grid]
    (out / "table2.md").write_text(markdown_table(ordered) + "\n")
    return ordered


def _done(out: Path, fit: Fit, record: dict, records: dict, log) -> None:
    _write(_path(out, fit), record)
    records[fit.key] = record
    log(f"{fit.key}: {record['converged']} ({record['method']}) in {record['seconds']:.0f} s")


def summarise(records: list[dict]) -> pd.DataFrame:
    """Per ``epsilon_n``: mean and standard deviation across data sets of each estimate (fits
    with an interior optimum), shares of interior / boundary / budget endings, run time."""
    rows = []
    for record in records:
        row = {"epsilon_n": record["fit"]["epsilon_n"], "converged": record["converged"],
               "seconds": record["seconds"]}
        row.update({p: record["estimate"].get(p) for p in PARAMETERS})
        rows.append(row)
    frame = pd.DataFrame(rows)
    out = []
    for eps_n, group in frame.groupby("epsilon_n", sort=False):
        interior = group[group["converged"] == "interior"]
        summary = {"epsilon_n": eps_n, "fits": len(group), "interior": len(interior)}
        for p in PARAMETERS:
            values = interior[p].astype(float)
            summary[f"{p} mean"] = values.mean()
            summary[f"{p} sd"] = values.std(ddof=1)
        for status in ("interior", "boundary", "budget", "diverged"):
            summary[f"share {status}"] = float((group["converged"] == status).mean())
        summary["seconds mean"] = group["seconds"].mean()
        summary["seconds max"] = group["seconds"].max()
        out.append(summary)
    return pd.DataFrame(out).set_index("epsilon_n")


def markdown_table(records: list[dict]) -> str:
    """The report as Markdown: estimates ``mean (sd)`` per ``epsilon_n``, then the endings."""
    summary = summarise(records)
    lines = ["| epsilon_n | fits | " + " | ".join(PARAMETERS)
             + " | interior | boundary | budget | s/fit (max) |",
             "|---" * (len(PARAMETERS) + 6) + "|"]
    for eps_n, row in summary.iterrows():
        cells = [f"{row[f'{p} mean']:.3f} ({row[f'{p} sd']:.3f})" for p in PARAMETERS]
        lines.append(
            f"| {eps_n:g} | {row['fits']:.0f} | " + " | ".join(cells)
            + f" | {row['share interior']:.2f} | {row['share boundary']:.2f} | "
            f"{row['share budget']:.2f} | {row['seconds mean']:.0f} ({row['seconds max']:.0f}) |"
        )
    return "\n".join(lines)
