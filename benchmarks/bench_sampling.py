"""End-to-end samplers: the §7 regression (``pmdp.sample`` vs the NumPy reference) and ATUS.

Times are CPU seconds of this process (one thread) for ``pm.sample`` with an already-built
augmentation step (so the step's compilation is excluded; PyMC's own set-up and the conversion to
InferenceData are included); PyMC's wall-clock ``sampling_time`` is given alongside. Effective
samples per second are ArviZ's bulk ESS of the kept draws over the CPU time of all iterations
(warm-up included), for both samplers.

The regression and its profile run the paper's algorithm, plain data augmentation
(``interweave=False``), as the reference samplers do; the speed against the paper's R sampler
is taken against its documented cost per iteration (:data:`R_SECONDS_PER_ITERATION`: R and the
paper's scripts are not on the benchmark machine), beside the NumPy reference measured in the
same run.
"""

from __future__ import annotations

import cProfile
import pstats
import time

import numpy as np
import r_port as ref
from _models import atus_model, regression_model, regression_release
from _util import Row, best_time, ess, sampling_seconds, timed
from bench_kernels import sweeper

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import CompiledTable, compile_model
from pymc_unbounded_dp.conjugate import ConjugateGibbs
from pymc_unbounded_dp.steps import DataAugmentation, RecordsStep

REGRESSION = "Regression, N = 1000, unbounded, epsilon_s = 1, epsilon_n = 0.5"
PROFILE = "Where the time goes: pmdp.sample on the regression (cProfile)"
ATUS = "ATUS, n = 6656, Dirichlet records, 3-dim log statistic"
SAMPLE = {"chains": 1, "progressbar": False, "compute_convergence_checks": False}
#: The paper's R sampler on the regression (N = 1000): 0.15-0.16 s per iteration, about 25 minutes
#: per 10,000 (docs/benchmarks.md). A documented constant, not measured here.
R_SECONDS_PER_ITERATION = 0.16
#: Issue 30: ``interweave=False`` with NUTS at least this many times the R sampler's speed.
R_SPEEDUP_TARGET = 100.0


def _draws(idata, name: str) -> np.ndarray:
    return np.asarray(idata["posterior"][name].values, dtype=float)


def run_sampler(
    model,
    draws: int,
    tune: int,
    seed: int,
    parameter_step=None,
    n_moves=None,
    interweave: bool = True,
    step_kwargs: dict | None = None,
):
    """``pm.sample`` with the model's augmentation step, built (and compiled) beforehand.

    Returns ``(idata, CPU seconds, wall seconds of PyMC's sampling loop, birth/death moves)``;
    the wall seconds of building the step and its warm-up run go to ``idata``'s posterior
    attribute ``bench_setup_s``.
    """
    import pymc as pm

    from pymc_unbounded_dp._compile import compile_model

    unbounded = compile_model(model).unbounded
    with model:
        kwargs = {"interweave": interweave, "step_kwargs": step_kwargs}
        start = time.perf_counter()
        if unbounded:
            step = pmdp.ReversibleJump(parameter_step, n_moves=n_moves, **kwargs)
        else:
            step = pmdp.DataAugmentation(parameter_step, **kwargs)
        _warm_up(step)
        setup = time.perf_counter() - start
        idata, _, cpu = timed(
            lambda: pm.sample(draws=draws, tune=tune, step=step, random_seed=seed, **SAMPLE)
        )
    idata["posterior"].attrs["bench_setup_s"] = setup
    return idata, cpu, sampling_seconds(idata), step.records_step.n_moves[0]


def _warm_up(step) -> None:
    """A two-iteration run first, so that lazily compiled code (PyMC 6's numba functions) is
    compiled before the timed run."""
    import pymc as pm

    pm.sample(draws=2, tune=2, step=step, random_seed=0, **SAMPLE)


QUANTITIES = ("beta[0]", "beta[1]", "beta[2]", "tau", "n")


def _posterior(idata) -> dict[str, np.ndarray]:
    beta = _draws(idata, "beta")
    out = {f"beta[{j}]": beta[..., j] for j in range(3)}
    out.update(tau=_draws(idata, "tau"), n=_draws(idata, "n"))
    return out


def _reference_posterior(draws: dict, burn: int) -> dict[str, np.ndarray]:
    out = {f"beta[{j}]": draws["beta"][burn:, j] for j in range(3)}
    out.update(tau=draws["tau"][burn:], n=draws["n"][burn:].astype(float))
    return out


NUTS_RUN = "pmdp.sample interweave=False, NUTS"
C_RUN = "pmdp.sample interweave=False, NUTS, nuts={'mode': 'FAST_RUN'} (PyMC 5's C backend)"
REFERENCE_RUN = "reference (NumPy, exact Gibbs)"


def regression(quick: bool) -> tuple[list[Row], dict]:
    """pmdp.sample (``interweave=False``) with NUTS and with the exact conjugate Gibbs step, and
    the NumPy reference; the speed against the R sampler's documented cost per iteration."""
    from _models import regression_conjugate_step

    release, _ = regression_release(n=1000, epsilon_s=1.0, epsilon_n=0.5, seed=1)
    tune, draws = (200, 800) if quick else (1000, 9000)
    ref_iter = 1000 if quick else 3000
    ref_burn = ref_iter // 10

    model = regression_model(release)
    runs = {}
    idata, cpu, wall, n_moves = run_sampler(model, draws, tune, seed=1, interweave=False)
    stats = idata["sample_stats"]
    runs[NUTS_RUN] = {
        "cpu": cpu,
        "wall": wall,
        "iterations": tune + draws,
        "draws": _posterior(idata),
        "note": f"{tune} tune + {draws} draws; {float(stats['n_steps'].values.mean()):.1f} "
        f"leapfrog steps/iteration, {int(stats['diverging'].values.sum())} divergences; set-up "
        f"{idata['posterior'].attrs['bench_setup_s']:.1f} s wall",
    }
    if _pymc_major() == 5:
        # From 500 records the package compiles NUTS's gradient with numba on PyMC 5 too (PyMC 6
        # does by default); the option shows what PyMC 5's C backend costs per leapfrog step
        idata, cpu, wall, _ = run_sampler(
            model, draws, tune, seed=1, interweave=False, step_kwargs={"nuts": {"mode": "FAST_RUN"}}
        )
        stats = idata["sample_stats"]
        runs[C_RUN] = {
            "cpu": cpu,
            "wall": wall,
            "iterations": tune + draws,
            "draws": _posterior(idata),
            "note": f"{float(stats['n_steps'].values.mean()):.1f} leapfrog steps/iteration, "
            f"{int(stats['diverging'].values.sum())} divergences; set-up "
            f"{idata['posterior'].attrs['bench_setup_s']:.1f} s wall",
        }
    gibbs = regression_conjugate_step(model)
    idata, cpu, wall, _ = run_sampler(
        model, draws, tune, seed=1, parameter_step=gibbs, interweave=False
    )
    runs["pmdp.sample interweave=False, ConjugateGibbs"] = {
        "cpu": cpu,
        "wall": wall,
        "iterations": tune + draws,
        "draws": _posterior(idata),
        "note": f"{tune} + {draws} iterations; exact conjugate updates (pymc_unbounded_dp.conjugate)",
    }
    reference, wall, cpu = timed(
        lambda: ref.reference_regression_sampler(release, ref_iter, n_moves, random_seed=1)
    )
    runs[REFERENCE_RUN] = {
        "cpu": cpu,
        "wall": wall,
        "iterations": ref_iter,
        "draws": _reference_posterior(reference, ref_burn),
        "note": f"{ref_burn} + {ref_iter - ref_burn} iterations",
    }

    rows, raw = [], {"n_moves": n_moves, "runs": {}}
    reference_per_1000 = 1000 * runs[REFERENCE_RUN]["cpu"] / ref_iter
    for label, run in runs.items():
        per_1000 = 1000 * run["cpu"] / run["iterations"]
        speedup = reference_per_1000 / per_1000
        rows.append(
            Row(
                REGRESSION,
                f"{label}: seconds per 1,000 iterations",
                per_1000,
                "s",
                "<= 1.5 (15 s / 10,000)" if label.startswith("pmdp") else "",
                f"{run['note']}; {speedup:.2g}x the reference's speed; wall clock "
                f"{1000 * run['wall'] / run['iterations']:.2f} s",
            )
        )
        raw["runs"][label] = {
            "cpu_s": run["cpu"],
            "wall_s": run["wall"],
            "iterations": run["iterations"],
            "ess": {},
            "mean": {},
        }
        for name in QUANTITIES:
            values = run["draws"][name]
            effective = ess(values)
            raw["runs"][label]["ess"][name] = effective
            raw["runs"][label]["mean"][name] = float(values.mean())
            rows.append(
                Row(
                    REGRESSION,
                    f"{label}: ESS/s {name}",
                    effective / run["cpu"],
                    "1/s",
                    "",
                    f"ESS {effective:.0f} of {values.size}; mean {values.mean():.3f}",
                )
            )
    rows.append(
        Row(
            REGRESSION,
            "birth/death moves per iteration (all samplers)",
            n_moves,
            "",
            "",
            "ReversibleJump's default",
        )
    )
    raw["r_seconds_per_iteration"] = R_SECONDS_PER_ITERATION
    raw["speedup_against_r"] = {}
    for label in (NUTS_RUN, C_RUN):
        if label in runs:
            rows.append(_speed_against_r(label, runs[label], reference_per_1000 / 1000))
            raw["speedup_against_r"][label] = rows[-1].value
    return rows, {"regression": raw}


def _pymc_major() -> int:
    import pymc as pm

    return int(pm.__version__.split(".")[0])


def _speed_against_r(label: str, run: dict, reference_per_iteration: float) -> Row:
    """The R sampler's documented seconds per iteration over pmdp's (CPU) in this run, with the
    NumPy reference of the same run beside it."""
    per_iteration = run["cpu"] / run["iterations"]
    speedup = R_SECONDS_PER_ITERATION / per_iteration
    met = "met" if speedup >= R_SPEEDUP_TARGET else "**not met**"
    return Row(
        REGRESSION,
        f"per iteration, R reference (documented {R_SECONDS_PER_ITERATION:g} s) / {label}",
        speedup,
        "x",
        f">= {R_SPEEDUP_TARGET:g}x",
        f"{met}; pmdp {1e3 * per_iteration:.3g} ms per iteration (CPU); R's cost is the "
        "documented constant (R is not run here); NumPy reference of this run "
        f"{1e3 * reference_per_iteration:.3g} ms per iteration, "
        f"{reference_per_iteration / per_iteration:.3g}x",
    )


# --------------------------------------------------------------------------------------------------
# profile
# --------------------------------------------------------------------------------------------------
def _cumulative(stats: pstats.Stats, path_end: str, function: str) -> float:
    total = 0.0
    for (filename, _, name), (_, _, _, cumulative, _) in stats.stats.items():
        if name == function and filename.replace("\\", "/").endswith(path_end):
            total += cumulative
    return total


def _cumulative_of(stats: pstats.Stats, function) -> float:
    """Cumulative time of one function, found by its code object (a module may have several
    functions of the same name)."""
    code = function.__code__
    entry = stats.stats.get((code.co_filename, code.co_firstlineno, code.co_name))
    return 0.0 if entry is None else entry[3]


def _profiled_run(model, tune: int, draws: int, parameter_step=None) -> pstats.Stats:
    import pymc as pm

    with model:
        step = pmdp.ReversibleJump(parameter_step, interweave=False)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        pm.sample(draws=draws, tune=tune, step=step, random_seed=2, **SAMPLE)
        profiler.disable()
    return pstats.Stats(profiler)


def _calls(stats: pstats.Stats, path_end: str, function: str) -> int:
    return int(
        sum(
            v[1]
            for k, v in stats.stats.items()
            if k[2] == function and k[0].replace("\\", "/").endswith(path_end)
        )
    )


def profile(quick: bool) -> tuple[list[Row], dict]:
    """Split the sampling loop (``interweave=False``) into the parameter step (NUTS: gradients and
    tree building; or the conjugate Gibbs step), the record kernels, the augmentation step's own
    work and PyMC's per-iteration work (CPU time)."""
    from _models import regression_conjugate_step

    release, _ = regression_release(n=1000, epsilon_s=1.0, epsilon_n=0.5, seed=1)
    model = regression_model(release)
    tune, draws = (150, 150) if quick else (500, 500)
    iterations = tune + draws
    rows, raw = [], {}
    for label, parameter_step in (("NUTS", None), ("ConjugateGibbs", "gibbs")):
        rows += _step_times(model, tune, draws, label, parameter_step)
        step = regression_conjugate_step(model) if parameter_step else None
        stats = _profiled_run(model, tune, draws, step)
        loop = _cumulative(stats, "pymc/sampling/mcmc.py", "_iter_sample")
        augmentation = _cumulative_of(stats, DataAugmentation.step)
        nuts = _cumulative(stats, "step_methods/arraystep.py", "step")
        gradients = _cumulative(stats, "hmc/integration.py", "func")
        gibbs = _cumulative_of(stats, ConjugateGibbs.step)
        records = _cumulative_of(stats, RecordsStep.step)
        propose = _cumulative_of(stats, CompiledTable._propose_at)
        set_records = _cumulative_of(stats, CompiledTable.set_records)
        log_prior_n = _cumulative_of(stats, CompiledTable._log_prior_at)
        n_grad = _calls(stats, "hmc/integration.py", "func")
        parts = {
            "NUTS: logp + gradient evaluations": gradients,
            "NUTS: tree building, adaptation, point mapping (PyMC, Python)": nuts - gradients,
            "ConjugateGibbs: sufficient statistics, draws, transforms": gibbs,
            "records: proposals (PyTensor propose)": propose,
            "records: log prior of n": log_prior_n,
            "records: numba loops, uniforms, bookkeeping": records
            - propose
            - set_records
            - log_prior_n,
            "records: set_records (write PyMC containers)": set_records,
            "augmentation step itself: lp, release guard, compound step": augmentation
            - records
            - nuts
            - gibbs,
            "PyMC: point/trace handling": loop - augmentation,
        }
        section = f"{PROFILE}, {label}"
        note = f"{iterations} iterations under cProfile (which adds overhead)"
        if n_grad:
            note += (
                f"; {n_grad / iterations:.1f} gradient evaluations per iteration, "
                f"{1e6 * gradients / n_grad:.0f} us each"
            )
        rows.append(
            Row(section, "sampling loop per iteration", 1e3 * loop / iterations, "ms", "", note)
        )
        for part, seconds in parts.items():
            if seconds > 0:
                rows.append(
                    Row(
                        section,
                        part,
                        1e3 * seconds / iterations,
                        "ms/iteration",
                        "",
                        f"{100 * seconds / loop:.0f}%",
                    )
                )
        raw[label] = {part: seconds / iterations for part, seconds in parts.items()}
        raw[label]["loop"] = loop / iterations
        raw[label]["gradient_evaluations_per_iteration"] = n_grad / iterations
    components = _components(model)
    rows += components
    raw["components"] = {r.metric: r.value for r in components}
    return rows, {"profile": raw}


def _step_times(model, tune: int, draws: int, label: str, parameter_step) -> list[Row]:
    """CPU time of each sub-step of the compound step, measured around its ``step`` calls."""
    import pymc as pm
    from _models import regression_conjugate_step

    section = f"{PROFILE}: CPU time per sub-step, {label}"
    totals: dict[str, float] = {}
    with model:
        inner = regression_conjugate_step(model) if parameter_step else None
        step = pmdp.ReversibleJump(inner, interweave=False)
        _warm_up(step)
        for method in step.methods:
            method.step = _timing_wrapper(method.step, type(method).__name__, totals)
        step.step = _timing_wrapper(step.step, WRAPPER, totals)
        start = time.process_time()
        idata = pm.sample(draws=draws, tune=tune, step=step, random_seed=2, **SAMPLE)
        total = time.process_time() - start
    iterations = tune + draws
    rows = [
        Row(
            section,
            "pm.sample total per iteration",
            1e3 * total / iterations,
            "ms",
            "",
            "CPU time, no profiler",
        )
    ]
    # the augmentation step's own work: its whole step less the sub-steps it runs
    totals[WRAPPER] -= sum(seconds for name, seconds in totals.items() if name != WRAPPER)
    for name, seconds in totals.items():
        note = f"{100 * seconds / total:.0f}%"
        if name == "NUTS":
            steps = float(idata["sample_stats"]["n_steps"].values.mean())
            note += f"; {steps:.1f} leapfrog steps per iteration"
        metric = WRAPPER if name == WRAPPER else f"{name}.step"
        rows.append(Row(section, metric, 1e3 * seconds / iterations, "ms/iteration", "", note))
    rest = total - sum(totals.values())
    rows.append(
        Row(
            section,
            "PyMC: everything else (trace, points, set-up, InferenceData)",
            1e3 * rest / iterations,
            "ms/iteration",
            "",
            f"{100 * rest / total:.0f}%",
        )
    )
    return rows


WRAPPER = "ReversibleJump.step itself (lp, release guard, compound step)"


def _timing_wrapper(function, name: str, totals: dict):
    def timed_step(point):
        start = time.process_time()
        out = function(point)
        totals[name] = totals.get(name, 0.0) + time.process_time() - start
        return out

    return timed_step


def _components(model) -> list[Row]:
    """The same pieces timed one by one without a profiler (cProfile inflates Python calls)."""
    from _models import regression_conjugate_step

    section = f"{PROFILE}: components without the profiler"
    compiled = compile_model(model).tables[0]
    n0 = compiled.sample_size.initial
    with model:
        n_moves = pmdp.ReversibleJump().records_step.n_moves[0]
    sweep_s = best_time(sweeper(model, n0, n_moves), 5, 0.2)
    gibbs = regression_conjugate_step(model)
    point = model.initial_point()
    gibbs_s = best_time(lambda: gibbs.step(point), 5, 0.2)
    # the gradient NUTS evaluates inside the augmentation step: the model without the release
    # terms, compiled as the step compiles it
    with model:
        nuts = pmdp.ReversibleJump(interweave=False).methods[1]
    logp_dlogp = nuts._logp_dlogp_func
    logp_dlogp.set_extra_values({compiled.n_value_name: point[compiled.n_value_name]})
    q = np.concatenate([np.ravel(point[v.name]) for v in nuts.vars])
    gradient_s = best_time(lambda: logp_dlogp(q), 5, 0.2)
    move_row = []
    with model:
        move = pmdp.ReversibleJump().interweave_step
    if move is not None and move._flat_target is not None:  # the move's target, in numba
        move.start_chain(np.random.default_rng(1))
        at = {**point, compiled.n_value_name: np.asarray(len(compiled.current_records()[0]))}
        args, _ = move._compiled_arguments(at)
        flat = np.concatenate([np.ravel(at[name]) for name in move._names]).astype(np.float64)
        move_s = best_time(lambda: move._flat_target.fn(flat, *args), 5, 0.2)
        move_row.append(
            Row(
                section,
                "one evaluation of the interweaving move's target (numba)",
                1e6 * move_s,
                "us",
                "",
                "one random-walk step; up to 100 per iteration",
            )
        )
    return [
        *move_row,
        Row(
            section,
            "record sweep: refresh + birth/death",
            1e3 * sweep_s,
            "ms",
            "",
            f"{n0} records + {n_moves} moves",
        ),
        Row(
            section,
            "ConjugateGibbs step (all parameters)",
            1e3 * gibbs_s,
            "ms",
            "",
            "sufficient statistics, 3 conditional draws, transforms",
        ),
        Row(
            section,
            "one logp + gradient evaluation (NUTS leapfrog)",
            1e3 * gradient_s,
            "ms",
            "",
            "x leapfrog steps per iteration",
        ),
    ]


# --------------------------------------------------------------------------------------------------
# ATUS
# --------------------------------------------------------------------------------------------------
def atus(quick: bool) -> tuple[list[Row], dict]:
    from _models import atus_conjugate_step

    tune, draws = (200, 300) if quick else (500, 1500)
    rows, raw = [], {}
    for bounded in (False, True):
        kind = "bounded" if bounded else "unbounded"
        model, source = atus_model(bounded=bounded, epsilon_s=1.0, epsilon_n=1.0)
        idata, seconds, _, n_moves = run_sampler(model, draws, tune, seed=4)
        per_iteration = seconds / (tune + draws)
        steps = float(idata["sample_stats"]["n_steps"].values.mean())
        alpha_nuts = _draws(idata, "alpha").reshape(-1, 3)
        idata, gibbs_seconds, _, _ = run_sampler(
            model, draws, tune, seed=4, parameter_step=atus_conjugate_step(model)
        )
        gibbs_per_iteration = gibbs_seconds / (tune + draws)
        alpha_gibbs = _draws(idata, "alpha").reshape(-1, 3)
        # the record sweep alone (refresh, + birth/death under unbounded DP) at the same settings
        compiled = compile_model(model).tables[0]
        n0 = compiled.fixed_n if bounded else compiled.sample_size.initial
        sweep_s = best_time(sweeper(model, n0, n_moves), 3, 0.2)
        target = "<= 2" if not bounded else ""
        rows.append(
            Row(
                ATUS,
                f"{kind}: pmdp.sample (NUTS) per iteration",
                1e3 * per_iteration,
                "ms",
                target,
                f"{steps:.1f} leapfrog steps/iteration; alpha mean "
                f"{np.round(alpha_nuts.mean(axis=0), 2).tolist()}",
            )
        )
        rows.append(
            Row(
                ATUS,
                f"{kind}: pmdp.sample (ConjugateGibbs, Dirichlet MH) per iteration",
                1e3 * gibbs_per_iteration,
                "ms",
                target,
                f"alpha mean {np.round(alpha_gibbs.mean(axis=0), 2).tolist()}",
            )
        )
        rows.append(
            Row(
                ATUS,
                f"{kind}: record sweep alone",
                1e3 * sweep_s,
                "ms",
                "",
                f"refresh of {n0} records" + ("" if bounded else f" + {n_moves} birth/death"),
            )
        )
        if not bounded:  # the birth/death moves' share: a tenth of the default number
            few = max(10, n_moves // 10)
            _, few_seconds, _, _ = run_sampler(
                model, draws, tune, seed=4, parameter_step=atus_conjugate_step(model), n_moves=few
            )
            rows.append(
                Row(
                    ATUS,
                    f"{kind}: pmdp.sample (ConjugateGibbs), n_moves = {few}",
                    1e3 * few_seconds / (tune + draws),
                    "ms",
                    target,
                    "a tenth of the default birth/death moves per iteration",
                )
            )
        raw[kind] = {
            "nuts_per_iteration_s": per_iteration,
            "gibbs_per_iteration_s": gibbs_per_iteration,
            "sweep_s": sweep_s,
            "n_steps": steps,
            "n_moves": n_moves,
            "source": source,
            "alpha_mean_nuts": alpha_nuts.mean(axis=0).tolist(),
            "alpha_mean_gibbs": alpha_gibbs.mean(axis=0).tolist(),
        }
    rows.append(Row(ATUS, "data", float("nan"), "", "", raw["bounded"]["source"]))
    return rows, {"atus": raw}
