"""``pmdp demo``: the paper's regression released under unbounded DP, fitted end to end.

:func:`fit_demo` simulates the data, privatizes it and samples the posterior (with the regression
study's recommended steps); :func:`demo_summary` is its :func:`arviz.summary` with the true
values; :func:`demo_release` is the release as a :class:`pymc_unbounded_dp.release.Release`;
:func:`save_demo` writes the posterior (netCDF), the summary, the release file (which
:func:`pymc_unbounded_dp.release.load` reads) and ArviZ figures. The command line (:mod:`pymc_unbounded_dp.cli`) only prints.

Examples
--------
>>> from pymc_unbounded_dp.examples.demo import fit_demo, demo_summary
>>> result = fit_demo(draws=200, tune=100, chains=1, n=200, progressbar=False)  # doctest: +SKIP
>>> demo_summary(result).loc["tau", "true"]  # doctest: +SKIP
1.0
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pymc_unbounded_dp.examples import regression
from pymc_unbounded_dp.examples.study.base import Fit, posterior_table
from pymc_unbounded_dp.examples.study.regression import RegressionStudy

__all__ = ["DemoResult", "demo_release", "demo_summary", "fit_demo", "save_demo"]

#: Probability of the demo's equal-tailed intervals.
PROB = 0.94


@dataclass(frozen=True)
class DemoResult:
    """What :func:`fit_demo` made: the release, the sampler output and how it was run."""

    release: regression.RegressionRelease
    idata: object
    bounded: bool
    seed: int
    sampler: str
    seconds: float

    @property
    def names(self) -> list[str]:
        """The summarised parameters."""
        return ["beta", "tau", "mu", *([] if self.bounded else ["n"])]


def fit_demo(
    *,
    draws: int = 4000,
    tune: int = 1000,
    chains: int = 2,
    seed: int = 1,
    epsilon_s: float = 1.0,
    epsilon_n: float = 0.5,
    sampler: str = "gibbs",
    bounded: bool = False,
    n: int = 1000,
    augment: str = "records",
    progressbar: bool = True,
) -> DemoResult:
    """Simulate ``n`` records, release them, and sample the posterior (bounded or unbounded DP).

    The data, the noise and the chains take independent streams of ``seed``. With
    ``augment="records"`` the steps are the regression study's
    (:class:`~pymc_unbounded_dp.examples.study.RegressionStudy`): exact conjugate parameter draws
    (``sampler="gibbs"``) or NUTS, plus record, birth/death and interweaving moves. With
    ``augment="sums"`` (census scale: ``n`` up to 1e8, simulated a million records at a time) the
    release is fitted on the sums level's normal approximation (``pmdp.sample(augment="sums")``,
    see the Census scale page); ``sampler`` does not apply there.
    """
    from pymc_unbounded_dp.sampling import sample

    if augment not in ("records", "sums"):
        raise ValueError(f"fit_demo: `augment` must be 'records' or 'sums', got {augment!r}.")
    if augment == "sums":
        return _fit_sums(draws, tune, chains, seed, epsilon_s, epsilon_n, bounded, n, progressbar)
    study = RegressionStudy(sampler=sampler, n=n)
    fit = Fit(
        "demo", "bounded" if bounded else "unbounded", epsilon_s, None if bounded else epsilon_n, 0
    )
    data_seed, noise_seed, chain_seed = np.random.SeedSequence(seed).spawn(3)
    data = regression.simulate_regression(n, seed=data_seed)
    release = regression.privatize_regression(data, epsilon_s, epsilon_n, seed=noise_seed)
    model = study.model(release, fit)
    start = time.perf_counter()
    with model:
        idata = sample(
            draws=draws,
            tune=tune,
            chains=chains,
            random_seed=int(chain_seed.generate_state(1)[0]),
            progressbar=progressbar,
            compute_convergence_checks=False,
            **study.sample_options(model, release, fit),
        )
    return DemoResult(release, idata, bounded, seed, sampler, time.perf_counter() - start)


def _fit_sums(draws, tune, chains, seed, epsilon_s, epsilon_n, bounded, n, progressbar):
    from pymc_unbounded_dp.sampling import sample

    data_seed, chain_seed = np.random.SeedSequence(seed).spawn(2)
    release = regression.simulate_regression_release(n, epsilon_s, epsilon_n, seed=data_seed)
    model = regression.regression_model(release, bounded=bounded)
    start = time.perf_counter()
    with model:
        idata = sample(
            draws=draws,
            tune=tune,
            chains=chains,
            augment="sums",
            random_seed=int(chain_seed.generate_state(1)[0]),
            progressbar=progressbar,
            compute_convergence_checks=False,
        )
    return DemoResult(release, idata, bounded, seed, "sums", time.perf_counter() - start)


def demo_summary(result: DemoResult) -> pd.DataFrame:
    """:func:`arviz.summary` of the parameters with a 94% equal-tailed interval, the true values
    and whether each interval covers its true value."""
    truth = {**regression.regression_truth(), "n": float(result.release.n)}
    table = posterior_table(result.idata, result.names, PROB)
    table.insert(0, "true", [truth.get(label, np.nan) for label in table.index])
    table["covered"] = (table["lower"] <= table["true"]) & (table["true"] <= table["upper"])
    return table


def demo_release(result: DemoResult):
    """The demo's release as a :class:`pymc_unbounded_dp.release.Release`, the ``release.json``
    that :func:`pymc_unbounded_dp.release.load` reads.

    Unbounded DP: add/remove neighbours; ``s``, the 9 sums with the demo's ``Laplace(9 /
    epsilon_s)`` noise (sensitivity 9, share ``epsilon_s``), and ``n``, ``n_dp`` with its discrete
    Laplace noise (share ``epsilon_n``). Bounded DP: replace-one neighbours and ``n`` public (the
    true ``n``); the sums carry the same noise, but their sensitivity under replace-one is 15 (the
    widths of :data:`~pymc_unbounded_dp.examples.regression.STATISTIC_LOWER` to ``UPPER``), so
    the release states ``epsilon = 15 / scale = 5 epsilon_s / 3``. Each noisy value's ``sampler``
    says the noise was simulated (seeded NumPy draws), not drawn for publishing.

    Examples
    --------
    >>> from pymc_unbounded_dp.examples.demo import fit_demo, demo_release
    >>> result = fit_demo(draws=20, tune=20, chains=1, n=200, progressbar=False)  # doctest: +SKIP
    >>> demo_release(result).guarantee  # doctest: +SKIP
    {'epsilon': 1.5}
    """
    import pymc_unbounded_dp.release as rl
    from pymc_unbounded_dp.mechanisms import Laplace

    release = result.release
    neighbouring = "replace-one" if result.bounded else "add/remove"
    sums = rl.Statistic("s", regression.STATISTIC_LOWER, regression.STATISTIC_UPPER)
    count = rl.Count("n")
    sensitivity = sums.sensitivity("l1", neighbouring)
    mechanism = Laplace(scale=release.mechanism.scale, sensitivity=sensitivity)
    simulated = (
        f"simulated: seeded NumPy draws (pmdp demo --seed {result.seed}), not for publishing"
    )
    entries = {
        "s": rl.Released(
            name="s",
            kind="sum",
            value=np.asarray(release.values, dtype=float),
            lower=sums.lower,
            upper=sums.upper,
            integer=False,
            sensitivity=sensitivity,
            mechanism=mechanism,
            share=mechanism.privacy["epsilon"] if result.bounded else release.epsilon_s,
            sampler=simulated,
        )
    }
    common = {"name": "n", "kind": "count", "lower": count.lower, "upper": count.upper}
    if result.bounded:
        entries["n"] = rl.Released(
            **common,
            value=int(release.n),
            integer=True,
            sensitivity=0.0,
            mechanism=None,
            share=None,
            sampler="exact (public)",
        )
    else:
        entries["n"] = rl.Released(
            **common,
            value=int(release.n_dp),
            integer=True,
            sensitivity=count.sensitivity("l1", neighbouring),
            mechanism=release.n_mechanism,
            share=release.epsilon_n,
            sampler=simulated,
        )
    budget = sum(e.share for e in entries.values() if e.share is not None)
    return rl.Release(entries, neighbouring=neighbouring, measure="epsilon", budget=budget)


def save_demo(result: DemoResult, folder) -> list[Path]:
    """Write ``posterior.nc``, ``summary.csv``, ``release.json`` (:func:`demo_release`, saved
    with :meth:`~pymc_unbounded_dp.release.Release.save`), ``demo.json`` (how the release was
    simulated and fitted: the statistics' names, the true ``n``, seed, sampler, time) and
    ``figures/`` (ArviZ :func:`~arviz.plot_posterior` with the true values,
    :func:`~arviz.plot_trace`) to ``folder``."""
    import logging

    import arviz as az
    import matplotlib.pyplot as plt

    # ArviZ 0.x titles ask for a "semibold" DejaVu Sans, which matplotlib lacks and logs about
    logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)

    folder = Path(folder)
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    release = result.release
    paths = {
        name: folder / name
        for name in (
            "posterior.nc",
            "summary.csv",
            "release.json",
            "demo.json",
            "figures/posteriors.png",
            "figures/trace.png",
        )
    }
    result.idata.to_netcdf(str(paths["posterior.nc"]), engine="h5netcdf")
    demo_summary(result).to_csv(paths["summary.csv"], index_label="parameter")
    demo_release(result).save(paths["release.json"])
    paths["demo.json"].write_text(
        json.dumps(
            {
                "statistics": list(regression.STATISTIC_NAMES),
                "bounded": result.bounded,
                "epsilon_s": release.epsilon_s,
                "epsilon_n": None if result.bounded else release.epsilon_n,
                "true_n": int(release.n),
                "seed": result.seed,
                "sampler": result.sampler,
                "sampling_seconds": result.seconds,
            },
            indent=1,
        )
        + "\n"
    )
    shown = ["beta", "tau", *([] if result.bounded else ["n"])]
    truth = regression.regression_truth()
    references = {
        "beta": [{"beta_dim_0": j, "ref_val": truth[f"beta[{j}]"]} for j in range(3)],
        "tau": [{"ref_val": truth["tau"]}],
    }
    if not result.bounded:
        references["n"] = [{"ref_val": float(release.n)}]
    for name, plot in (
        ("figures/posteriors.png", lambda *a: _plot_posterior(*a, references)),
        ("figures/trace.png", _plot_trace),
    ):
        with warnings.catch_warnings():
            # ArviZ 0.x calls a Matplotlib helper that Matplotlib 3.11 deprecates; not ours to fix
            warnings.filterwarnings("ignore", message=".*alias_mapping to normalize_kwargs")
            figure = plot(az, result.idata, shown)
        figure.savefig(paths[name], dpi=100)
        plt.close(figure)
    return list(paths.values())


def _figure(plotted):
    """The matplotlib figure of an ArviZ 0.x axes array or an ArviZ 1.x plot collection."""
    if hasattr(plotted, "viz"):
        return plotted.viz["figure"].item()
    return np.asarray(plotted).reshape(-1)[0].get_figure()


def _plot_posterior(az, idata, names, references):
    """Posterior densities with their 94% interval (ArviZ 0.x: and the true values)."""
    if az.__version__.startswith("0."):
        return _figure(az.plot_posterior(idata, var_names=names, ref_val=references, hdi_prob=PROB))
    return _figure(az.plot_dist(idata, var_names=names, ci_prob=PROB))


def _plot_trace(az, idata, names):
    """Traces, one line per chain."""
    if az.__version__.startswith("0."):
        return _figure(az.plot_trace(idata, var_names=names))
    return _figure(az.plot_trace_dist(idata, var_names=names))
