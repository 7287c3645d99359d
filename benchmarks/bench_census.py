"""Census scale: the sums level (``augment="sums"``) against the records level, n_dp = 1e3 ... 1e8.

Two unbounded-DP models, ``n ~ SampleSize(n_dp, DiscreteLaplace(epsilon=0.5))``:

* **Bernoulli count**: ``theta ~ Beta(1, 1)``, ``x ~ Bernoulli(theta)``, released
  ``sum x + Laplace(epsilon=1)`` = ``0.3 n_dp + 0.4``;
* **Poisson sum**: ``lam ~ Gamma(2, 1)``, ``x ~ Poisson(lam)``, released
  ``sum x + Laplace(epsilon=1, sensitivity=10)`` = ``2 n_dp + 0.4``.

Every fit runs in a fresh Python process (``bench_census.py --child SPEC``), which builds the model,
calls ``pmdp.sample`` once (``random_seed=1``, ``compute_convergence_checks=False``) and reports:

* **sampling seconds**: PyMC's ``sampling_time`` attribute of the posterior (the sampling loop of
  all chains, tuning included; the steps are built and compiled before it starts), and the wall
  time of the whole ``pmdp.sample`` call (compilation, initial point and conversion included);
* **ms per iteration**: ``sampling_time / (chains * (tune + draws))``, so compilation is out;
* **bulk ESS** (ArviZ) of the parameter (``theta`` / ``lam``) and of ``n``, their minimum, and the
  parameter's effective draws per second of ``sampling_time``;
* **peak memory**: the process's peak resident memory (``VmHWM``: interpreter, PyMC and compiled
  code included) and its resident memory just before ``pmdp.sample``; with ``cores > 1`` the
  process tree (the chains' workers) polled every 0.1 s: the peak of its footprint (every
  process's private pages plus the largest shared set of one), of its total resident memory
  (shared pages counted in every process: an upper bound), of its total proportional set size
  (``Pss``, shared pages split between the processes mapping them: a lower bound) and the largest
  peak of a worker;
* the posterior mean and sd of the parameter, compared between the levels where both run.

Table: ``chains=2, cores=1, tune=draws=500`` (``--quick``: 300 + 300), the sums level at every
``n_dp``, the records level up to 1e6 for the Bernoulli count and 1e5 for the Poisson sum
(``--quick``: 1e5 for both; at 1e7 it takes minutes per 1,000
iterations). Acceptance: the Bernoulli count at ``n_dp = 1e8`` with ``chains=4, cores=2,
tune=draws=1000`` (also under ``--quick``: it takes seconds), and the sums level's cost per
iteration at 1e8 over its cost at 1e3, from the table. The thread limits of ``run.py`` (one
BLAS/OpenMP/numba thread) reach the children through their environment.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from _util import Row

HERE = Path(__file__).resolve().parent
SECTION = "Census scale: sums level against records level (unbounded DP)"
MODELS = ("bernoulli", "poisson", "regression", "atus")
LABELS = {
    "bernoulli": "Bernoulli count",
    "poisson": "Poisson sum",
    "regression": "paper's regression",
    "atus": "ATUS Dirichlet (simulated, epsilon_s = 10, epsilon_n = 1)",
}
#: The variables whose least bulk ESS is reported (the first one's mean and sd are compared).
PARAMETERS = {
    "bernoulli": ("theta",),
    "poisson": ("lam",),
    "regression": ("tau", "beta"),
    "atus": ("alpha",),
}
SEED = 1
#: The Poisson release's noise: that of a sum clamped to [0, 10] per record.
POISSON_SENSITIVITY = 10.0


# --------------------------------------------------------------------------------------------------
# the models
# --------------------------------------------------------------------------------------------------
def build_model(kind: str, n_dp: int):
    """The Bernoulli-count, Poisson-sum or regression model of a release with ``n_dp`` records."""
    import pymc as pm

    import pymc_unbounded_dp as pmdp

    if kind == "regression":
        return _regression_model(n_dp)
    if kind == "atus":
        return _atus_model(n_dp)
    with pm.Model() as model:
        size = pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        if kind == "bernoulli":
            theta = pm.Beta("theta", 1.0, 1.0)
            x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=size)
            pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=0.3 * n_dp + 0.4)
        elif kind == "poisson":
            lam = pm.Gamma("lam", 2.0, 1.0)
            x = pmdp.Records("x", pm.Poisson.dist(lam), n=size)
            # The plain sum of Poisson records has no finite sensitivity (a curator would clamp
            # them, e.g. to [0, 10], for the noise below to give epsilon = 1), but the sums
            # level's exact law is that of the plain sum: both levels fit the plain sum here, so
            # the sensitivity check, which would warn, is off.
            pmdp.PrivatizedSum(
                "s",
                x,
                pmdp.Laplace(epsilon=1.0, sensitivity=POISSON_SENSITIVITY),
                observed=2.0 * n_dp + 0.4,
                check_sensitivity=False,
            )
        else:
            raise ValueError(f"unknown model {kind!r}")
    return model


def _regression_model(n: int):
    """The paper's regression (epsilon_s = 1, epsilon_n = 0.5) released from ``n`` simulated
    records, summed a million at a time (the release of 1e8 records takes ~1 minute, in
    memory of 1e6)."""
    from pymc_unbounded_dp.examples import regression as reg

    release = reg.simulate_regression_release(n, epsilon_s=1.0, epsilon_n=0.5, seed=SEED)
    return reg.regression_model(release)


def _atus_model(n: int):
    """ATUS's Dirichlet model of a release of ``n`` records simulated at the paper's MLE
    (epsilon_s = 10: at 1 the records level barely mixes, ESS ~5 of 2,000 at n = 5,000), summed a
    million at a time."""
    from pymc_unbounded_dp.examples import atus

    release = atus.simulate_atus_release(n, epsilon_s=10.0, epsilon_n=1.0, seed=SEED)
    return atus.atus_model(release)


def _records_step(kind: str, model) -> dict:
    """The records level's parameter step for ``kind``: ATUS's recommended Dirichlet step (NUTS
    mixes far worse there), PyMC's default otherwise."""
    if kind != "atus":
        return {}
    from pymc_unbounded_dp.examples import atus

    return {"step": atus.atus_gibbs_step(model)}


# --------------------------------------------------------------------------------------------------
# memory
# --------------------------------------------------------------------------------------------------
def _status_kb(pid, field: str) -> int | None:
    """A ``/proc/<pid>/status`` field in KiB (``VmHWM``, ``VmRSS``), or None."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _rollup_kb(pid) -> dict[str, int]:
    """``/proc/<pid>/smaps_rollup`` in KiB: ``Rss``, ``Pss``, ``Private_*``, ``Shared_*`` ({} if
    unavailable)."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                key, _, rest = line.partition(":")
                if key in ("Rss", "Pss") or key.startswith(("Private_", "Shared_")):
                    out[key] = int(rest.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def _descendants(root: int) -> list[int]:
    """The processes below ``root`` (from the parent ids in ``/proc/*/stat``)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        frontier = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += frontier
    return found


class _TreeMemory:
    """Polls the process tree (this process and its descendants: the chains' workers, any compiler
    PyTensor starts) during ``pmdp.sample``, and keeps the peaks of

    * its footprint: the private pages of every process plus the largest shared set of one (the
      workers are forked: what they share, with this process and each other, is this process's
      memory and the libraries);
    * its total resident memory (shared pages counted in every process: an upper bound) and total
      proportional set size (shared pages split between all the processes that map them,
      ``run.py``'s libraries included: a lower bound);
    * each descendant's ``VmHWM``.
    """

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.peak_kb = {"footprint": 0, "rss": 0, "pss": 0}
        self.worker_hwm_kb: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        me = os.getpid()
        while True:
            workers = _descendants(me)
            tree = [me, *workers]
            rollups = [_rollup_kb(p) for p in tree]
            private = [sum(v for k, v in r.items() if k.startswith("Private_")) for r in rollups]
            shared = [sum(v for k, v in r.items() if k.startswith("Shared_")) for r in rollups]
            now = {
                "footprint": sum(private) + max(shared),
                "rss": sum(r.get("Rss", 0) for r in rollups),
                "pss": sum(r.get("Pss", 0) for r in rollups),
            }
            self.peak_kb = {k: max(v, now[k]) for k, v in self.peak_kb.items()}
            for pid in workers:
                hwm = _status_kb(pid, "VmHWM")
                if hwm is not None:
                    self.worker_hwm_kb[pid] = max(self.worker_hwm_kb.get(pid, 0), hwm)
            if self._stop.wait(self.interval):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


# --------------------------------------------------------------------------------------------------
# one fit, in a fresh process
# --------------------------------------------------------------------------------------------------
def _child(spec: dict) -> None:
    import logging
    import warnings

    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
    import numpy as np
    from _util import ess, sampling_seconds
    from bench_ess import _LoopClock
    from bench_memory import _peak_rss_kb

    import pymc_unbounded_dp as pmdp

    kind, n_dp = spec["model"], spec["n_dp"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")  # as run.py
        start = time.perf_counter()
        model = build_model(kind, n_dp)
        build = time.perf_counter() - start
        rss_before = _status_kb("self", "VmRSS") or 0
        poller = _TreeMemory() if spec["cores"] > 1 else None
        # one process: the CPU time of the sampling loop too (less sensitive to a busy machine)
        clock = _LoopClock() if spec["cores"] == 1 else None
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        start = time.perf_counter()
        if poller:
            poller.__enter__()
        try:
            idata = pmdp.sample(
                model=model,
                draws=spec["draws"],
                tune=spec["tune"],
                chains=spec["chains"],
                cores=spec["cores"],
                random_seed=spec["seed"],
                progressbar=False,
                compute_convergence_checks=False,
                **({"callback": clock} if clock else {}),
                **LEVELS[spec["augment"]],
                **(_records_step(kind, model) if spec["augment"] != "sums" else {}),
            )
        finally:
            if poller:
                poller.__exit__()
        call = time.perf_counter() - start
    posterior = idata.posterior
    sampling = sampling_seconds(idata)
    iterations = spec["chains"] * (spec["tune"] + spec["draws"])
    names = PARAMETERS[kind]
    components = [
        component
        for var in names
        for component in np.asarray(posterior[var].values, dtype=float)
        .reshape(*posterior[var].shape[:2], -1)
        .transpose(2, 0, 1)
    ]
    name, draws = names[0], components[0]
    n = np.asarray(posterior["n"].values, dtype=float)
    ess_param, ess_n = min(ess(c) for c in components), ess(n)
    out = {
        **spec,
        "parameter": name,
        "level": posterior.attrs.get("pmdp_augment"),
        "laws": posterior.attrs.get("pmdp_sum_laws"),
        "build_s": build,
        "call_s": call,
        "sampling_s": sampling,
        "iterations": iterations,
        "ms_per_iteration": 1000 * sampling / iterations,
        "cpu_ms_per_iteration": 1000 * clock.seconds()[1] / iterations if clock else None,
        "load_average_at_start": load,
        "ess": ess_param,
        "ess_n": ess_n,
        "ess_min": min(ess_param, ess_n),
        "ess_per_s": ess_param / sampling,
        "mean": float(draws.mean()),
        "sd": float(draws.std(ddof=1)),
        # every component of the compared variables, for the level-to-level differences
        "components": [
            {"mean": float(c.mean()), "sd": float(c.std(ddof=1)), "ess": ess(c)} for c in components
        ],
        "n_mean": float(n.mean()),
        "n_sd": float(n.std(ddof=1)),
        "rss_before_mb": rss_before / 1024,
        "peak_rss_mb": _peak_rss_kb() / 1024,
        "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
    }
    if poller:
        out.update({f"tree_peak_{k}_mb": v / 1024 for k, v in poller.peak_kb.items()})
        out["worker_peak_rss_mb"] = max(poller.worker_hwm_kb.values(), default=0) / 1024
        out["workers_seen"] = len(poller.worker_hwm_kb)
    print(json.dumps(out))


#: The configurations compared: the sums level, the records level as ``pmdp.sample`` runs it
#: (with the interweaving move), and the paper's plain data augmentation (records, no
#: interweaving), all in the same run.
LEVELS = {
    "sums": {"augment": "sums"},
    "records": {"augment": "records"},
    "plain": {"augment": "records", "interweave": False},
}


def fit(kind: str, n_dp: int, augment: str, chains: int, cores: int, tune: int, draws: int) -> dict:
    """One fit in a fresh process; on failure ``{"error": ...}`` with the spec."""
    spec = {
        "model": kind,
        "n_dp": int(n_dp),
        "augment": augment,
        "chains": chains,
        "cores": cores,
        "tune": tune,
        "draws": draws,
        "seed": SEED,
    }
    process = subprocess.run(
        [sys.executable, str(HERE / "bench_census.py"), "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        check=False,
        cwd=HERE,
    )
    if process.returncode != 0:
        lines = [line for line in process.stderr.strip().splitlines() if line.strip()]
        return {**spec, "error": lines[-1] if lines else f"exit code {process.returncode}"}
    return json.loads(process.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------------
def _n(n: int) -> str:
    return f"1e{round(math.log10(n))}"


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _warned(result: dict) -> str:
    caught = result.get("warnings") or []
    return f"; **{len(caught)} warning(s)**: {caught[0][:120]}" if caught else ""


def _fit_rows(section: str, result: dict) -> list[Row]:
    label = f"n_dp = {_n(result['n_dp'])}, {result['augment']}"
    if "error" in result:
        return [Row(section, f"{label}: failed", float("nan"), "", "", result["error"][:300])]
    name = result["parameter"]
    level = "" if result["level"] == result["augment"] else f"; level run: {result['level']}"
    return [
        Row(
            section,
            f"{label}: ms per iteration",
            result["ms_per_iteration"],
            "ms",
            "",
            f"sampling {_fmt(result['sampling_s'])} s (CPU {_fmt(result['cpu_ms_per_iteration'])} "
            f"ms per iteration); whole pmdp.sample call "
            f"{_fmt(result['call_s'])} s (compilation included); {result['chains']} chains x "
            f"({result['tune']} tune + {result['draws']} draws){level}{_warned(result)}",
        ),
        Row(
            section,
            f"{label}: {name} bulk ESS per second",
            result["ess_per_s"],
            "1/s",
            "",
            f"bulk ESS {name} {result['ess']:.0f}, n {result['ess_n']:.0f}, min "
            f"{result['ess_min']:.0f}; {name} = {result['mean']:.5g} ± {result['sd']:.3g} (sd)",
        ),
        Row(
            section,
            f"{label}: peak memory",
            result["peak_rss_mb"],
            "MB",
            "",
            f"peak RSS of the fresh process; {result['rss_before_mb']:.0f} MB before "
            f"pmdp.sample (model built in {_fmt(result['build_s'])} s)",
        ),
    ]


def _agreement_row(section: str, sums: dict, records: dict) -> Row:
    """The parameter's posterior mean and sd at both levels, and their difference in Monte Carlo
    standard errors."""
    name = sums["parameter"]
    se = math.sqrt(sums["sd"] ** 2 / sums["ess"] + records["sd"] ** 2 / records["ess"])
    z = abs(sums["mean"] - records["mean"]) / se
    return Row(
        section,
        f"n_dp = {_n(sums['n_dp'])}: {name} posterior mean, sums level",
        sums["mean"],
        "",
        "= records level",
        f"sums {sums['mean']:.6g} ± {sums['sd']:.3g} (sd), records {records['mean']:.6g} ± "
        f"{records['sd']:.3g}; difference {z:.2f} Monte Carlo standard errors; n: sums "
        f"{sums['n_mean']:.6g} ± {sums['n_sd']:.3g}, records {records['n_mean']:.6g} ± "
        f"{records['n_sd']:.3g}",
    )


def _acceptance_rows(section: str, result: dict) -> list[Row]:
    setting = (
        f"{LABELS[result['model']]}, n_dp = {_n(result['n_dp'])}, sums, "
        f"chains = {result['chains']}, "
        f"cores = {result['cores']}, tune = draws = {result['draws']}"
    )
    if "error" in result:
        return [Row(section, f"{setting}: failed", float("nan"), "", "", result["error"][:300])]
    name, names = result["parameter"], " and ".join(PARAMETERS[result["model"]])
    return [
        Row(
            section,
            f"{setting}: sampling time (after compilation)",
            result["sampling_s"],
            "s (wall)",
            "",
            f"PyMC's sampling_time; {_fmt(result['ms_per_iteration'])} ms per chain-iteration "
            f"over {result['cores']} cores; {name} = {result['mean']:.6g} ± {result['sd']:.3g}, "
            f"least bulk ESS of {names} {result['ess']:.0f} ({_fmt(result['ess_per_s'])}/s "
            f"of sampling time), n {result['ess_n']:.0f}{_warned(result)}",
        ),
        Row(
            section,
            f"{setting}: whole pmdp.sample call",
            result["call_s"],
            "s (wall)",
            "",
            "compilation, initial points, worker start-up and conversion included (fresh "
            f"process; model built in {_fmt(result['build_s'])} s before)",
        ),
        Row(
            section,
            f"{setting}: peak memory",
            result["tree_peak_footprint_mb"],
            "MB",
            "",
            "peak footprint of the fresh process and its descendants (polled every 0.1 s; "
            f"{result['workers_seen']} seen: the chains' workers, any compiler): private pages of "
            "each plus the largest shared set; total RSS "
            f"{result['tree_peak_rss_mb']:.0f} MB (upper bound), total PSS "
            f"{result['tree_peak_pss_mb']:.0f} MB (lower bound); peak RSS of the main process "
            f"{result['peak_rss_mb']:.0f} MB, of the largest worker "
            f"{result['worker_peak_rss_mb']:.0f} MB",
        ),
    ]


def _ratio_row(section: str, kind: str, fits: list[dict]) -> tuple[Row, dict]:
    """The sums level's cost per iteration at the largest ``n_dp`` over that at the smallest."""
    by_n = {
        f["n_dp"]: f
        for f in fits
        if f["model"] == kind and f["augment"] == "sums" and "error" not in f
    }
    metric = f"{LABELS[kind]}, sums level: cost per iteration, largest over smallest n"
    if len(by_n) < 2:
        note = "the sums level did not run at two sizes"
        return Row(section, metric, float("nan"), "x", "~1 (flat in n)", note), {}
    low, high = by_n[min(by_n)], by_n[max(by_n)]
    wall = high["ms_per_iteration"] / low["ms_per_iteration"]
    cpu = high["cpu_ms_per_iteration"] / low["cpu_ms_per_iteration"]
    row = Row(
        section,
        f"{LABELS[kind]}, sums level: cost per iteration, n = {_n(high['n_dp'])} over "
        f"n = {_n(low['n_dp'])}",
        wall,
        "x (wall)",
        "~1 (flat in n)",
        f"{_fmt(high['ms_per_iteration'])} ms / {_fmt(low['ms_per_iteration'])} ms of "
        f"sampling_time (table above, chains = 2, cores = 1); CPU time of the loop: {_fmt(cpu)}x "
        f"({_fmt(high['cpu_ms_per_iteration'])} ms / {_fmt(low['cpu_ms_per_iteration'])} ms)",
    )
    return row, {"n": [low["n_dp"], high["n_dp"]], "wall": wall, "cpu": cpu}


# --------------------------------------------------------------------------------------------------
# the section
# --------------------------------------------------------------------------------------------------
def run(quick: bool) -> tuple[list[Row], dict]:
    sizes = (10**3, 10**5, 10**8) if quick else tuple(10**k for k in range(3, 9))
    # the records level where it runs in minutes: its iteration costs O(n), the Poisson's 5x the
    # Bernoulli's (about 0.13 s and 0.5 s at 1e6)
    records_max = (
        {kind: 10**5 for kind in MODELS}
        if quick
        else {"bernoulli": 10**6, "poisson": 10**5, "regression": 10**5, "atus": 10**5}
    )
    tune = draws = 300 if quick else 500
    rows: list[Row] = []
    fits: list[dict] = []
    for kind in MODELS:
        section = f"{SECTION}: {LABELS[kind]} (chains = 2, cores = 1, tune = draws = {draws})"
        agreement = []
        for n_dp in sizes:
            by_level = {}
            for level in LEVELS:
                if level != "sums" and n_dp > records_max[kind]:
                    continue
                print(f"  [census] {LABELS[kind]}, n_dp = {_n(n_dp)}, {level} ...", flush=True)
                result = fit(kind, n_dp, level, chains=2, cores=1, tune=tune, draws=draws)
                fits.append(result)
                rows += _fit_rows(section, result)
                by_level[level] = result
            if len(by_level) == 2 and not any("error" in r for r in by_level.values()):
                agreement.append(_agreement_row(section, by_level["sums"], by_level["records"]))
        rows += agreement
    section = f"{SECTION}: acceptance"
    print(
        "  [census] acceptance: Bernoulli count, n_dp = 1e8, chains = 4, cores = 2 ...", flush=True
    )
    acceptance = fit("bernoulli", 10**8, "sums", chains=4, cores=2, tune=1000, draws=1000)
    rows += _acceptance_rows(section, acceptance)
    print("  [census] acceptance: regression, n_dp = 1e8, chains = 2, cores = 2 ...", flush=True)
    regression = fit("regression", 10**8, "sums", chains=2, cores=2, tune=1000, draws=1000)
    rows += _acceptance_rows(section, regression)
    rows.append(
        Row(
            section,
            "paper's regression, n_dp = 1e8, sums: least bulk ESS of tau and beta per wall "
            "second of sampling",
            regression.get("ess_per_s", float("nan")),
            "1/s",
            ">= 100",
            "2 chains on 2 cores; the sampling loop's wall time (PyMC's sampling_time)",
        )
    )
    ratios = {}
    for kind in MODELS:
        row, ratios[kind] = _ratio_row(section, kind, fits)
        rows.append(row)
    return rows, {
        "census": {
            "fits": fits,
            "acceptance": acceptance,
            "regression_acceptance": regression,
            "cost_ratio": ratios,
        }
    }


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--child":
    sys.path[:0] = [str(HERE), str(HERE.parent / "reference")]
    _child(json.loads(sys.argv[2]))
