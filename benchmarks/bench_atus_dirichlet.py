"""ATUS: ``DirichletInterweave`` against plain data augmentation, same release, same run.

The ATUS workload of ``bench_ess.py`` (real data, n = 6,656, unbounded, epsilon_s = epsilon_n = 1,
release seed 3, ``atus_gibbs_step``), sampled ``chains=2, cores=1`` with ``interweave=False``
(the paper's plain data augmentation) and with ``DirichletInterweave`` after the Gibbs step, for
a few numbers of random-walk steps. Measured as ``bench_ess.run_pmdp`` measures (loop time by a
``pm.sample`` callback, wall and this process's CPU time; ArviZ bulk ESS of the kept draws; IAT =
draws x chains / ESS), with the integrated autocorrelation time of ``n`` and of ``sum(alpha)`` (the
total concentration, the slow direction of the plain chain) beside those of ``alpha``.

Run: ``python benchmarks/bench_atus_dirichlet.py [--quick] [--out PATH]`` (~5 min CPU; ``--quick``
~1.5 min). Writes ``PATH.json`` and ``PATH.md`` (default ``benchmarks/results-atus-dirichlet``).
``--diagnose`` prints the plain chain's diagnosis instead (docs/benchmarks.md, "ATUS: a move that
pays").
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "reference")]  # bench_ess imports r_port from there

import bench_ess as be  # noqa: E402
from _util import ess, machine  # noqa: E402

import pymc_unbounded_dp as pmdp  # noqa: E402
from pymc_unbounded_dp.dirichlet_interweave import DirichletInterweave  # noqa: E402
from pymc_unbounded_dp.examples import atus  # noqa: E402

CHAINS = 2


def run(build, step_factory, draws: int, tune: int, seed: int) -> dict:
    """``pmdp.sample(..., interweave=False)`` with ``step_factory(model)``, after a warm-up."""
    model = build()
    common = {
        "chains": CHAINS,
        "cores": 1,
        "progressbar": False,
        "compute_convergence_checks": False,
        "interweave": False,
    }
    clock = be._LoopClock()
    with model:
        pmdp.sample(draws=5, tune=5, random_seed=seed + 1000, step=step_factory(model), **common)
        step = step_factory(model)
        result = pmdp.sample(
            draws=draws, tune=tune, random_seed=seed, step=step, callback=clock, **common
        )
    posterior = be._group(result, "posterior")
    stats = be._group(result, "sample_stats")
    wall, cpu = clock.seconds()
    alpha = np.asarray(posterior["alpha"].values, dtype=float)
    components = be._components(posterior, ["alpha"])
    components["sum(alpha)"] = alpha.sum(axis=-1)
    out = be._summarise(components, wall, cpu, CHAINS * (draws + tune))
    n = np.asarray(posterior["n"].values, dtype=float)
    n_ess = ess(n)
    out["n"] = {
        "ess": n_ess,
        "iat": n.size / n_ess,
        "ess_per_s": n_ess / wall,
        "ess_per_cpu_s": n_ess / cpu,
        "mean": float(n.mean()),
        "sd": float(n.std()),
    }
    out["sd"] = {k: float(v.std()) for k, v in components.items()}
    name = "interweave_accept_rate"
    out["accept_rate"] = (
        float(np.mean(stats[name].values)) if stats is not None and name in stats else None
    )
    out.update(draws=draws, tune=tune)
    return out


def diagnose(release, data, draws: int = 1500, tune: int = 500, seed: int = 11) -> str:
    """Where the plain chain is slow: lag-one autocorrelation and IAT of ``alpha``, ``sum(alpha)``,
    the mean shares, ``n`` and the released residual ``s_dp - T(x)`` (the records' sums read
    after every iteration), and the sd of ``sum(alpha)`` given the true (floored) records."""
    from pymc_unbounded_dp import conjugate
    from pymc_unbounded_dp._compile import compile_model

    model = atus.atus_model(release, bounded=False)
    table = compile_model(model).tables[0]
    sums: dict[int, list] = {}

    def callback(trace, draw):
        sums.setdefault(int(draw.chain), []).append(
            atus.atus_statistics(table.current_records()[0])
        )

    with model:
        result = pmdp.sample(
            draws=draws,
            tune=tune,
            chains=CHAINS,
            cores=1,
            random_seed=seed,
            step=atus.atus_gibbs_step(model),
            interweave=False,
            progressbar=False,
            compute_convergence_checks=False,
            callback=callback,
        )
    posterior = be._group(result, "posterior")
    alpha = np.asarray(posterior["alpha"].values, dtype=float)
    total = alpha.sum(axis=-1)
    series = {f"alpha[{j}]": alpha[..., j] for j in range(3)}
    series["sum(alpha)"] = total
    series.update({f"mean share[{j}]": alpha[..., j] / total for j in range(3)})
    series["n"] = np.asarray(posterior["n"].values, dtype=float)
    T = np.stack([np.asarray(sums[c])[tune:] for c in range(CHAINS)])
    series.update({f"s_dp - T [{j}]": release.values[j] - T[..., j] for j in range(3)})

    def lag_one(x):
        x = x - x.mean(axis=-1, keepdims=True)
        return float(np.mean([np.sum(c[1:] * c[:-1]) / np.sum(c * c) for c in x]))

    lines = ["| quantity | lag-1 autocorrelation | IAT | posterior mean | posterior sd |"]
    lines.append("|---|---:|---:|---:|---:|")
    for name, x in series.items():
        lines.append(
            f"| {name} | {lag_one(x):.3f} | {x.size / ess(x):.1f} | {x.mean():.4g} | "
            f"{x.std():.3g} |"
        )
    shares = np.maximum(data.x, atus.MIN_SHARE)
    shares /= shares.sum(axis=1, keepdims=True)
    log_sum, rng, kept = np.log(shares).sum(axis=0), np.random.default_rng(0), []
    a = atus.MLE_ALPHA.copy()
    for _ in range(6000):
        a = conjugate.dirichlet_concentration(rng, a, log_sum, data.n, 1.0, 0.1)
        kept.append(a.sum())
    given = np.asarray(kept[500:])
    lines.append(
        f"\nGiven the true (floored) records: sum(alpha) mean {given.mean():.4g}, sd "
        f"{given.std():.3g} (the same Gibbs update, 5,500 draws)."
    )
    return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def table(runs: dict, plain: str) -> str:
    lines = [
        "| sampler | s / 1,000 it. (wall; CPU) | min ESS/s of alpha (wall; CPU) | speed-up vs plain"
        " (wall; CPU) | IAT alpha[0], [1], [2] | IAT sum(alpha) | IAT n | ESS/s of n (CPU) "
        "| max R-hat | accept |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    base = runs[plain]

    def rate(r, key):
        return min(v for k, v in r[key].items() if k.startswith("alpha["))

    for label, r in runs.items():
        speed = (
            f"{rate(r, 'ess_per_s') / rate(base, 'ess_per_s'):.1f}x; "
            f"{rate(r, 'ess_per_cpu_s') / rate(base, 'ess_per_cpu_s'):.1f}x"
        )
        iat = ", ".join(_fmt(r["iat"][f"alpha[{j}]"]) for j in range(3))
        accept = "" if r["accept_rate"] is None else f"{r['accept_rate']:.2f}"
        lines.append(
            f"| {label} ({r['tune']:,} + {r['draws']:,} per chain) | {_fmt(r['per_1000'])}; "
            f"{_fmt(r['cpu_per_1000'])} | {_fmt(rate(r, 'ess_per_s'))}; "
            f"{_fmt(rate(r, 'ess_per_cpu_s'))} | {speed} | {iat} | "
            f"{_fmt(r['iat']['sum(alpha)'])} | {_fmt(r['n']['iat'])} | "
            f"{_fmt(r['n']['ess_per_cpu_s'])} | {max(r['rhat'].values()):.3f} | {accept} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", default="10,15,20", help="comma-separated n_steps values")
    parser.add_argument("--out", default=str(HERE / "results-atus-dirichlet"))
    parser.add_argument(
        "--diagnose", action="store_true", help="only the plain chain's diagnosis (~1 min)"
    )
    args = parser.parse_args(argv)
    data = atus.load_atus()
    release = atus.privatize_atus(data, epsilon_s=1.0, epsilon_n=1.0, seed=3)
    if args.diagnose:
        print(diagnose(release, data))
        return 0

    def build():
        return atus.atus_model(release, bounded=False)

    plain_run = (200, 2000) if args.quick else (500, 10000)  # the plain IAT is ~160
    move_run = (200, 800) if args.quick else (500, 3000)
    plain = "plain (interweave=False)"
    samplers = {plain: (atus.atus_gibbs_step, plain_run)}
    for k in (int(s) for s in args.steps.split(",")):
        samplers[f"+ DirichletInterweave, {k} steps"] = (
            lambda model, k=k: [atus.atus_gibbs_step(model), DirichletInterweave(n_steps=k)],
            move_run,
        )
    runs = {}
    start = time.process_time()
    for label, (factory, (tune, draws)) in samplers.items():
        print(f"  [atus-dirichlet] {label} ...", flush=True)
        runs[label] = run(build, factory, draws, tune, seed=13)
    info = machine()
    header = (
        f"ATUS ({'real data' if not data.simulated else 'SIMULATED'}, n = {data.n}, "
        f"n_dp = {release.n_dp}), unbounded, epsilon_s = epsilon_n = 1, chains = 2, cores = 1; "
        f"Python {info['python']}, PyMC {info['pymc']}, commit {info['commit']}, load average at "
        f"start {[round(x, 1) for x in info['load_average_at_start'] or []]}; "
        f"{time.process_time() - start:.0f} s CPU in all."
    )
    text = f"{header}\n\n{table(runs, plain)}\n"
    print(text)
    Path(args.out + ".md").write_text(text)
    Path(args.out + ".json").write_text(
        json.dumps({"machine": info, "runs": runs}, indent=1, default=float)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
