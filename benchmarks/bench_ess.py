"""Effective draws per second: ``pmdp.sample`` with the interweaving move (the default) against the
plain data-augmentation chain (``interweave=False``) and, for the regression, the NumPy reference
sampler, on the same release in the same run.

Every workload is sampled with ``chains=2, cores=1`` (one process, one thread). For each sampler:

* **seconds per 1,000 iterations**: wall-clock time of the sampling loop (both chains, tuning
  included) over all iterations, measured by a ``pm.sample`` callback from each chain's first to
  its last draw; the CPU time of this process over the same span is given beside it (the machine
  is shared: CPU time does not count other processes' load). Each model is first sampled once for
  a few iterations, so the process-wide compilation (the model's record pieces, PyTensor's C
  cache, numba) is done; what ``pmdp.sample`` still builds per call (its parameter steps) is the
  *set-up*, reported separately (wall time of the call minus the loop's);
* **bulk ESS per second**: ArviZ's bulk ESS of every scalar component of the free parameters
  (deterministics and ``n`` excluded; ``n`` is given in the notes) over the loop's wall time (and
  over its CPU time); min and median over the components;
* **IAT**: integrated autocorrelation time ``draws * chains / ESS`` per component;
* the interweaving move's acceptance rate and random-walk steps per iteration (``sample_stats``
  ``interweave_accept_rate`` and ``interweave_steps``, mean over the kept draws);
* the largest split R-hat over the components.

The reference sampler (pure NumPy) is timed around the whole call (``time.perf_counter`` and
``time.process_time``); it has no set-up to exclude. The regression workloads run 1,000 tune +
5,000 draws per chain (``--quick``: 200 + 800), enough for the plain chain's IAT of ~200-400; the
others 500 + 1,500 (``--quick``: 200 + 600).
"""

from __future__ import annotations

import hashlib
import inspect
import math
import time

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import r_port as ref
from _util import Row, ess

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import atus as atus_example
from pymc_unbounded_dp.examples import regression as regression_example

SECTION = "Effective draws per second: interweaving (chains = 2, cores = 1)"
CHAINS = 2

DEFAULT = "pmdp.sample (interweave default)"
PLAIN = "pmdp.sample interweave=False"
REFERENCE = "reference (NumPy, exact Gibbs)"


def _has_interweave() -> bool:
    return "interweave" in inspect.signature(pmdp.sample).parameters


# --------------------------------------------------------------------------------------------------
# workloads
# --------------------------------------------------------------------------------------------------
def regression_release(seed: int = 1, n: int = 1000):
    """The §7 release (N = 1000, epsilon_s = 1, epsilon_n = 0.5), in both release formats."""
    release, _ = ref.simulate_reference_release(n=n, epsilon_s=1.0, epsilon_n=0.5, random_seed=seed)
    example = regression_example.RegressionRelease(
        values=np.asarray(release.s_dp, dtype=float),
        n_dp=int(release.n_dp),
        epsilon_s=release.epsilon_s,
        epsilon_n=release.epsilon_n,
        n=-1,
    )
    return release, example


def user_regression_model(release: regression_example.RegressionRelease) -> pm.Model:
    """The regression as a new user writes it: no Bartlett pieces, plain normal records.

    ``x1 ~ N(m1, s1)``, ``x2 | x1 ~ N(a + b x1, s2)``, ``y | x ~ N(beta_0 + beta_1 x1 + beta_2 x2,
    1/sqrt(tau))`` with ``beta | tau ~ N(0, I / tau)``, ``tau ~ Gamma(1, 1)``; the 9 clamped sums
    with ``Laplace(epsilon=1, sensitivity=9)``; ``n`` unknown (flat prior).
    """
    with pm.Model() as model:
        m1 = pm.Normal("m1", 0.0, 1.0)
        s1 = pm.HalfNormal("s1", 2.0)
        a = pm.Normal("a", 0.0, 1.0)
        b = pm.Normal("b", 0.0, 1.0)
        s2 = pm.HalfNormal("s2", 2.0)
        tau = pm.Gamma("tau", alpha=1.0, beta=1.0)
        beta = pm.Normal("beta", 0.0, sigma=1.0 / pt.sqrt(tau), shape=3)
        n = pmdp.SampleSize("n", n_dp=release.n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x1 = pmdp.Records("x1", pm.Normal.dist(m1, s1), n=n)
        x2 = pmdp.Records("x2", pm.Normal.dist(a + b * x1, s2), n=n)
        y = pmdp.Records(
            "y", pm.Normal.dist(beta[0] + beta[1] * x1 + beta[2] * x2, 1.0 / pt.sqrt(tau)), n=n
        )
        pmdp.PrivatizedSum(
            "s",
            regression_example.regression_statistic_tensor(x1, x2, y),
            pmdp.Laplace(epsilon=1.0, sensitivity=9.0),
            observed=release.values,
        )
    return model


TWO_GROUP_CLAMP = 5.0


def two_group_model(
    n: int = 1000, epsilon_s: float = 1.0, epsilon_n: float = 0.5, seed: int = 5
) -> pm.Model:
    """``g ~ Bernoulli(p)``, ``y | g ~ N(mu[g], sigma)``; released sums of ``g``, ``g y``, ``y``,
    ``y^2`` (``y`` clamped to ``[-5, 5]`` and divided by 5; L1 sensitivity 4), ``n`` unknown.
    Truth: ``p = 0.3``, ``mu = (-1, 2)``, ``sigma = 1``."""
    rng = np.random.default_rng(seed)
    g = rng.binomial(1, 0.3, size=n)
    y = np.where(g == 1, 2.0, -1.0) + rng.normal(size=n)
    v = np.clip(y, -TWO_GROUP_CLAMP, TWO_GROUP_CLAMP) / TWO_GROUP_CLAMP
    exact = np.array([g.sum(), (g * v).sum(), v.sum(), (v * v).sum()], dtype=float)
    mechanism = pmdp.Laplace(epsilon=epsilon_s, sensitivity=4.0)
    values = exact + mechanism.simulate(4, random_seed=rng)
    n_dp = n + int(pmdp.DiscreteLaplace(epsilon=epsilon_n).simulate(random_seed=rng))
    with pm.Model() as model:
        p = pm.Beta("p", 1.0, 1.0)
        mu = pm.Normal("mu", 0.0, 3.0, shape=2)
        sigma = pm.HalfNormal("sigma", 2.0)
        size = pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=epsilon_n))
        group = pmdp.Records("g", pm.Bernoulli.dist(p), n=size)
        y_rec = pmdp.Records("y", pm.Normal.dist(mu[group], sigma), n=size)
        v_rec = pt.clip(y_rec, -TWO_GROUP_CLAMP, TWO_GROUP_CLAMP) / TWO_GROUP_CLAMP
        pmdp.PrivatizedSum(
            "s",
            pt.stack([group, group * v_rec, v_rec, v_rec**2], axis=1),
            mechanism,
            observed=values,
        )
    return model


def bernoulli_model(
    n: int = 1000, epsilon_s: float = 1.0, epsilon_n: float = 0.5, seed: int = 6
) -> pm.Model:
    """``theta ~ Beta(1, 1)``, ``x ~ Bernoulli(theta)`` (truth 0.4), ``sum x + Laplace(1)``, ``n``
    unknown."""
    rng = np.random.default_rng(seed)
    mechanism = pmdp.Laplace(epsilon=epsilon_s, sensitivity=1.0)
    s_dp = rng.binomial(n, 0.4) + float(mechanism.simulate(random_seed=rng))
    n_dp = n + int(pmdp.DiscreteLaplace(epsilon=epsilon_n).simulate(random_seed=rng))
    with pm.Model() as model:
        theta = pm.Beta("theta", 1.0, 1.0)
        size = pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=epsilon_n))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=size)
        pmdp.PrivatizedSum("s", x, mechanism, observed=s_dp)
    return model


POISSON_CLAMP = 10


def poisson_model(
    n: int = 1000, epsilon_s: float = 1.0, epsilon_n: float = 0.5, seed: int = 7
) -> pm.Model:
    """``lam ~ Gamma(2, 0.5)``, ``x ~ Poisson(lam)`` (truth 3), ``sum min(x, 10) + Laplace(10)``,
    ``n`` unknown."""
    rng = np.random.default_rng(seed)
    mechanism = pmdp.Laplace(epsilon=epsilon_s, sensitivity=float(POISSON_CLAMP))
    s_dp = np.minimum(rng.poisson(3.0, size=n), POISSON_CLAMP).sum() + float(
        mechanism.simulate(random_seed=rng)
    )
    n_dp = n + int(pmdp.DiscreteLaplace(epsilon=epsilon_n).simulate(random_seed=rng))
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=2.0, beta=0.5)
        size = pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=epsilon_n))
        x = pmdp.Records("x", pm.Poisson.dist(lam), n=size)
        pmdp.PrivatizedSum("s", pt.minimum(x, POISSON_CLAMP), mechanism, observed=s_dp)
    return model


# --------------------------------------------------------------------------------------------------
# measuring one sampler
# --------------------------------------------------------------------------------------------------
def _group(result, name: str):
    if hasattr(result, "children"):  # xarray.DataTree (PyMC 6)
        return result[name].to_dataset() if name in result.children else None
    return getattr(result, name, None)


def _components(posterior, names) -> dict[str, np.ndarray]:
    """``{"beta[0]": (chain, draw) array, ...}`` for the named variables."""
    out = {}
    for name in names:
        values = np.asarray(posterior[name].values, dtype=float)
        flat = values.reshape(values.shape[0], values.shape[1], -1)
        if values.ndim == 2:
            out[name] = flat[..., 0]
        else:
            for k in range(flat.shape[-1]):
                index = np.unravel_index(k, values.shape[2:])
                out[f"{name}[{','.join(str(int(i)) for i in index)}]"] = flat[..., k]
    return out


def _rhat(draws: np.ndarray) -> float:
    import arviz as az

    return float(az.rhat(np.asarray(draws, dtype=float)))


def _summarise(
    components: dict[str, np.ndarray], seconds: float, cpu_seconds: float, iterations: int
) -> dict:
    """ESS, ESS/s (wall and CPU), IAT and R-hat per component, for ``seconds`` of sampling."""
    out = {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "iterations": iterations,
        "per_1000": 1000 * seconds / iterations,
        "cpu_per_1000": 1000 * cpu_seconds / iterations,
        "ess": {},
        "ess_per_s": {},
        "ess_per_cpu_s": {},
        "iat": {},
        "rhat": {},
        "mean": {},
    }
    for name, draws in components.items():
        effective = ess(draws)
        out["ess"][name] = effective
        out["ess_per_s"][name] = effective / seconds
        out["ess_per_cpu_s"][name] = effective / cpu_seconds
        out["iat"][name] = draws.size / effective
        out["rhat"][name] = _rhat(draws)
        out["mean"][name] = float(draws.mean())
    return out


def _parameter_names(model: pm.Model) -> list[str]:
    """Free random variables except ``n`` (deterministics are not free)."""
    return [rv.name for rv in model.free_RVs if rv.name != "n"]


def _mean_stat(stats, name: str) -> float | None:
    if stats is None or name not in stats:
        return None
    return float(np.nanmean(np.asarray(stats[name].values, dtype=float)))


class _LoopClock:
    """A ``pm.sample`` callback that times the sampling loop of each chain (wall and CPU).

    The loop of a chain runs from its first to its last draw; the time before the first draw (one
    iteration) is added pro rata. Set-up (building and compiling the steps, the initial point) and
    the conversion of the trace are outside.
    """

    def __init__(self):
        self.marks: dict[int, list] = {}

    def __call__(self, trace, draw):
        now = (time.perf_counter(), time.process_time())
        marks = self.marks.setdefault(int(draw.chain), [now, now, 0])
        marks[1] = now
        marks[2] += 1

    def seconds(self) -> tuple[float, float]:
        wall = cpu = 0.0
        for first, last, calls in self.marks.values():
            scale = calls / max(calls - 1, 1)
            wall += (last[0] - first[0]) * scale
            cpu += (last[1] - first[1]) * scale
        return wall, cpu


def run_pmdp(
    build, draws: int, tune: int, seed: int, interweave: bool | None, step_factory=None
) -> dict:
    """``pmdp.sample`` on a freshly built model after a short warm-up on the same model."""
    model = build()
    kwargs = {} if interweave is None or not _has_interweave() else {"interweave": interweave}
    common = {
        "chains": CHAINS,
        "cores": 1,
        "progressbar": False,
        "compute_convergence_checks": False,
        **kwargs,
    }
    clock = _LoopClock()
    with model:
        step = step_factory(model) if step_factory else None
        pmdp.sample(draws=5, tune=5, random_seed=seed + 1000, step=step, **common)
        step = step_factory(model) if step_factory else None
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        result = pmdp.sample(
            draws=draws, tune=tune, random_seed=seed, step=step, callback=clock, **common
        )
        wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    posterior = _group(result, "posterior")
    stats = _group(result, "sample_stats")
    loop_wall, loop_cpu = clock.seconds()
    iterations = CHAINS * (draws + tune)
    names = _parameter_names(model)
    components = _components(posterior, names)
    out = _summarise(components, loop_wall, loop_cpu, iterations)
    out["draws_digest"] = hashlib.sha256(
        b"".join(np.ascontiguousarray(v).tobytes() for v in components.values())
    ).hexdigest()
    out.update(
        wall=wall,
        cpu=cpu,
        setup=wall - loop_wall,
        parameters=names,
        pymc_sampling_time=float(posterior.attrs.get("sampling_time", float("nan"))),
        interweave_requested=kwargs.get("interweave"),
        tune=tune,
        draws=draws,
    )
    if "n" in posterior:
        n = np.asarray(posterior["n"].values, dtype=float)
        out["n"] = {"ess": ess(n), "ess_per_s": ess(n) / loop_wall, "mean": float(n.mean())}
    out["interweave_accept_rate"] = _mean_stat(stats, "interweave_accept_rate")
    out["interweave_steps"] = _mean_stat(stats, "interweave_steps")
    out["interweave_compiled"] = _mean_stat(stats, "interweave_compiled")
    out["n_steps"] = _mean_stat(stats, "n_steps")
    out["divergences"] = (
        int(np.asarray(stats["diverging"].values).sum())
        if stats is not None and "diverging" in stats
        else None
    )
    return out


def run_reference(release, draws: int, tune: int, seed: int) -> dict:
    """The NumPy reference sampler, ``CHAINS`` chains one after another, ``tune`` burn-in each."""
    chains, start, start_cpu = [], time.perf_counter(), time.process_time()
    for chain in range(CHAINS):
        chains.append(
            ref.reference_regression_sampler(release, tune + draws, random_seed=seed + chain)
        )
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    beta = np.stack([c["beta"][tune:] for c in chains])
    components = {f"beta[{j}]": beta[..., j] for j in range(3)}
    components["tau"] = np.stack([c["tau"][tune:] for c in chains])
    components.update({f"mu[{j}]": np.stack([c["mu"][tune:, j] for c in chains]) for j in range(2)})
    out = _summarise(components, seconds, cpu, CHAINS * (tune + draws))
    n = np.stack([c["n"][tune:] for c in chains]).astype(float)
    out["n"] = {"ess": ess(n), "ess_per_s": ess(n) / seconds, "mean": float(n.mean())}
    out.update(
        wall=seconds, cpu=cpu, setup=0.0, parameters=["beta", "tau", "mu"], tune=tune, draws=draws
    )
    return out


# --------------------------------------------------------------------------------------------------
# rows
# --------------------------------------------------------------------------------------------------
def _subset(values: dict[str, float], prefixes) -> dict[str, float]:
    if prefixes is None:
        return values
    return {k: v for k, v in values.items() if k.split("[")[0] in prefixes}


def _fmt(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def _met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _sampler_rows(workload: str, label: str, run: dict, focus) -> list[Row]:
    """Rows of one sampler on one workload; ``focus``: the parameters the targets look at."""
    section = f"{SECTION}: {workload}"
    rate = _subset(run["ess_per_s"], focus)
    cpu_rate = _subset(run["ess_per_cpu_s"], focus)
    iat = run["iat"]
    worst = min(rate, key=rate.get)
    median = float(np.median(list(run["ess_per_s"].values())))
    median_cpu = float(np.median(list(run["ess_per_cpu_s"].values())))
    iterations = f"{run['tune']:,} tune + {run['draws']:,} draws per chain"
    rows = [
        Row(
            section,
            f"{label}: seconds per 1,000 iterations",
            run["per_1000"],
            "s (wall)",
            "",
            f"CPU {run['cpu_per_1000']:.3g} s; {iterations}; set-up {run['setup']:.1f} s"
            + (
                f"; {run['n_steps']:.1f} leapfrog steps/it., {run['divergences']} divergences"
                if run.get("n_steps") is not None
                else ""
            ),
        ),
        Row(
            section,
            f"{label}: min bulk ESS/s" + (f" over {', '.join(focus)}" if focus else ""),
            rate[worst],
            "1/s (wall)",
            "",
            f"{worst}, ESS {run['ess'][worst]:.0f}; per CPU second {_fmt(min(cpu_rate.values()))}",
        ),
        Row(
            section,
            f"{label}: median bulk ESS/s (all parameters)",
            median,
            "1/s (wall)",
            "",
            f"per CPU second {_fmt(median_cpu)}; max R-hat {max(run['rhat'].values()):.3f}"
            + (f"; n: ESS/s {_fmt(run['n']['ess_per_s'])}" if "n" in run else ""),
        ),
        Row(
            section,
            f"{label}: IAT, largest",
            max(iat.values()),
            "iterations",
            "",
            "; ".join(f"{k} {_fmt(v)}" for k, v in iat.items()),
        ),
    ]
    if run.get("interweave_accept_rate") is not None:
        rows.append(
            Row(
                section,
                f"{label}: interweave acceptance rate",
                run["interweave_accept_rate"],
                "",
                "",
                f"{_fmt(run['interweave_steps'])} random-walk steps per iteration; in numba in "
                f"{_fmt(100 * (run.get('interweave_compiled') or 0.0))}% of the draws",
            )
        )
    return rows


def _ratio(default: dict, plain: dict, key: str, focus) -> tuple[float, float]:
    d, p = _subset(default[key], focus), _subset(plain[key], focus)
    return (
        min(d.values()) / min(p.values()),
        float(np.median(list(default[key].values())) / np.median(list(plain[key].values()))),
    )


def _comparison_rows(
    workload: str, default: dict, plain: dict, focus, speedup_target=None
) -> tuple[list[Row], dict]:
    section = f"{SECTION}: {workload}"
    speedup_min, speedup_median = _ratio(default, plain, "ess_per_s", focus)
    cpu_min, cpu_median = _ratio(default, plain, "ess_per_cpu_s", focus)
    cost = default["per_1000"] / plain["per_1000"]
    cpu_cost = default["cpu_per_1000"] / plain["cpu_per_1000"]
    what = "min ESS/s" + (f" over {', '.join(focus)}" if focus else "")
    same = default.get("draws_digest") == plain.get("draws_digest")
    met = "the same draws (no interweaving move here); " if same else ""
    if speedup_target:
        met += f"{_met(speedup_min >= speedup_target)} (CPU: {_met(cpu_min >= speedup_target)}); "
    rows = [
        Row(
            section,
            f"speed-up of {what}, default / interweave=False",
            speedup_min,
            "x (wall)",
            f">= {speedup_target:g}x" if speedup_target else "",
            f"{met}per CPU second {_fmt(cpu_min)}x; median over all parameters "
            f"{_fmt(speedup_median)}x",
        ),
        Row(
            section,
            "iteration cost, default / interweave=False",
            cost,
            "x (wall)",
            "<= 2x",
            f"{_met(cost <= 2.0)}; CPU {_fmt(cpu_cost)}x ({_met(cpu_cost <= 2.0)})",
        ),
    ]
    return rows, {
        "speedup_min": speedup_min,
        "speedup_median": speedup_median,
        "speedup_min_cpu": cpu_min,
        "speedup_median_cpu": cpu_median,
        "cost_ratio": cost,
        "cost_ratio_cpu": cpu_cost,
    }


# --------------------------------------------------------------------------------------------------
# the section
# --------------------------------------------------------------------------------------------------
def run(quick: bool) -> tuple[list[Row], dict]:
    """All workloads; returns the rows and the raw numbers."""
    long_run = (200, 800) if quick else (1000, 5000)  # the regression: plain IAT ~200-400
    short_run = (200, 600) if quick else (500, 1500)  # the others: plain IAT <= ~70
    ref_tune, ref_draws = (100, 400) if quick else (300, 1700)
    available = _has_interweave()
    rows: list[Row] = []
    raw: dict = {"chains": CHAINS, "interweave_api": available, "workloads": {}}
    if not available:
        rows.append(
            Row(
                SECTION,
                "interweave API",
                float("nan"),
                "",
                "",
                "pmdp.sample has no `interweave` argument in this tree: both pmdp rows "
                "are the plain data-augmentation sampler",
            )
        )
    release, example = regression_release(seed=1)
    _, example_10k = regression_release(seed=1, n=10_000)
    atus_data = atus_example.load_atus()
    atus_release = atus_example.privatize_atus(atus_data, epsilon_s=1.0, epsilon_n=1.0, seed=3)
    atus_kind = "real data" if not atus_data.simulated else "SIMULATED stand-in"
    atus_name = (
        f"ATUS, unbounded, atus_gibbs_step ({atus_kind}, n = {atus_data.n}, "
        "epsilon_s = 1, epsilon_n = 1)"
    )
    workloads = [
        (
            "regression N = 1000, user-written model, NUTS",
            lambda: user_regression_model(example),
            None,
            ("beta", "tau"),
            {"min_rate": 300.0, "speedup": 20.0},
            long_run,
        ),
        (
            "regression N = 1000, examples.regression model, conjugate step",
            lambda: regression_example.regression_model(example),
            regression_example.regression_gibbs_step,
            None,
            {"max_iat": 3.0, "min_rate": 500.0},
            long_run,
        ),
        (
            atus_name,
            lambda: atus_example.atus_model(atus_release, bounded=False),
            atus_example.atus_gibbs_step,
            ("alpha",),
            {"speedup": 1.0},  # the default never loses (3x if a move pays)
            short_run,
        ),
        (
            "two groups (index variable), N = 1000, unbounded, NUTS",
            two_group_model,
            None,
            None,
            {},
            short_run,
        ),
        ("Bernoulli counts, N = 1000, unbounded, NUTS", bernoulli_model, None, None, {}, short_run),
        ("Poisson counts, N = 1000, unbounded, NUTS", poisson_model, None, None, {}, short_run),
        (
            "regression N = 10000, user-written model, NUTS",
            lambda: user_regression_model(example_10k),
            None,
            ("beta", "tau"),
            {"speedup": 20.0},
            short_run,
        ),
    ]
    for index, (workload, build, step_factory, focus, targets, (tune, draws)) in enumerate(
        workloads
    ):
        seed = 11 + index
        print(f"  [ess] {workload} ...", flush=True)
        runs = {}
        for label, flag in ((DEFAULT, None), (PLAIN, False)):  # None: pmdp.sample's default
            runs[label] = run_pmdp(build, draws, tune, seed, flag, step_factory)
        if index == 1:  # the reference has the example model's algorithm (exact Gibbs)
            runs[REFERENCE] = run_reference(release, ref_draws, ref_tune, seed)
        for label, result in runs.items():
            rows += _sampler_rows(workload, label, result, focus)
        comparison, summary = _comparison_rows(
            workload, runs[DEFAULT], runs[PLAIN], focus, targets.get("speedup")
        )
        rows += comparison
        rows += _target_rows(workload, runs[DEFAULT], focus, targets)
        if REFERENCE in runs:
            ratio, _ = _ratio(runs[DEFAULT], runs[REFERENCE], "ess_per_s", None)
            cpu_ratio, _ = _ratio(runs[DEFAULT], runs[REFERENCE], "ess_per_cpu_s", None)
            rows.append(
                Row(
                    f"{SECTION}: {workload}",
                    "min ESS/s, default / reference",
                    ratio,
                    "x (wall)",
                    "",
                    f"per CPU second {_fmt(cpu_ratio)}x; the reference "
                    "is timed around the whole call (no set-up to exclude)",
                )
            )
            summary["vs_reference"] = ratio
            summary["vs_reference_cpu"] = cpu_ratio
        raw["workloads"][workload] = {"runs": runs, "summary": summary}
    if atus_data.simulated:
        rows.append(Row(SECTION, "ATUS data", float("nan"), "", "", atus_data.source))
    return rows, {"ess": raw}


def _target_rows(workload: str, run: dict, focus, targets: dict) -> list[Row]:
    section = f"{SECTION}: {workload}"
    rows = []
    if "min_rate" in targets:
        value = min(_subset(run["ess_per_s"], focus).values())
        cpu = min(_subset(run["ess_per_cpu_s"], focus).values())
        rows.append(
            Row(
                section,
                "target: default min bulk ESS/s" + (f" over {', '.join(focus)}" if focus else ""),
                value,
                "1/s (wall)",
                f">= {targets['min_rate']:g}",
                f"{_met(value >= targets['min_rate'])}; per CPU second {_fmt(cpu)} "
                f"({_met(cpu >= targets['min_rate'])})",
            )
        )
    if "max_iat" in targets:
        value = max(run["iat"].values())
        rows.append(
            Row(
                section,
                "target: default largest IAT",
                value,
                "iterations",
                f"<= {targets['max_iat']:g}",
                _met(value <= targets["max_iat"]),
            )
        )
    return rows
