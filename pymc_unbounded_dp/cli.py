"""The ``pmdp`` command line: ``pmdp demo``, ``pmdp epsilon`` and ``pmdp reproduce
regression|atus|mcem``.

``main(argv)`` returns the exit code: 0 on success, 2 for a usage error (a bad option, a missing
data directory, an output folder that cannot be written, or results from other settings in the
output folder), 130 when interrupted (finished fits are kept and a rerun resumes).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from pymc_unbounded_dp._checks import check_integer, integer_wording

__all__ = ["build_parser", "main"]

DEFAULT_OUT = Path("pmdp-out")
#: The studies of ``pmdp reproduce`` (:data:`pymc_unbounded_dp.examples.study.STUDIES`).
STUDY_NAMES = ("regression", "atus", "mcem")


class UsageError(Exception):
    """A problem with the command line; reported with exit code 2."""


# -- argument types ------------------------------------------------------------------------------


#: ``pymc_unbounded_dp.blocks.MAX_RECORDS`` (not imported: PyMC loads only when a command runs;
#: a test pins the two together).
MAX_RECORDS = 10**8
#: Above this many records ``pmdp demo`` fits the sums level by default.
SUMS_FROM = 100_000


def _integer_from(text: str, minimum: int) -> int:
    """``text`` as an integer ``>= minimum``, or the usage error naming what it must be."""
    try:
        return check_integer(int(text), "value", minimum=minimum)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be {integer_wording(minimum)}, got {text!r}"
        ) from None


def _positive_int(text: str) -> int:
    return _integer_from(text, minimum=1)


def _non_negative_int(text: str) -> int:
    return _integer_from(text, minimum=0)


def _record_count(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (1 <= value <= MAX_RECORDS and value == int(value)):
        raise argparse.ArgumentTypeError(
            f"must be a whole number of records from 1 to {MAX_RECORDS:.0e}, got {text!r}"
        )
    return int(value)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}") from None
    if not (value > 0 and value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _epsilon_list(text: str) -> tuple[float, ...]:
    parts = [p for p in text.replace(" ", "").split(",") if p]
    if not parts:
        raise argparse.ArgumentTypeError("must be a comma-separated list of positive numbers")
    return tuple(float("inf") if p == "inf" else _positive_float(p) for p in parts)


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return value


def _open_probability(text: str) -> float:
    value = _probability(text)
    if value in (0.0, 1.0):
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {text!r}")
    return value


class _Parser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors raise (so ``main`` can return the exit code)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    from pymc_unbounded_dp._version import __version__

    parser = _Parser(
        prog="pmdp",
        description="Bayesian inference from differentially private releases (bounded and "
        "unbounded DP): the paper's workloads end to end.",
    )
    parser.add_argument("--version", action="version", version=f"pmdp {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="{demo,epsilon,reproduce}", parser_class=_Parser
    )
    _add_demo(sub)
    _add_epsilon(sub)
    _add_reproduce(sub)
    return parser


def _add_demo(sub) -> None:
    """``pmdp demo``'s arguments."""
    demo = sub.add_parser(
        "demo",
        help="fit the linear-regression example (unbounded DP) and write posterior and figures",
        description="Simulate the paper's regression data (n = 1000), release 9 noisy sufficient "
        "statistics (Laplace, epsilon_s) and a noisy n (discrete Laplace, epsilon_n), fit the "
        "posterior by reversible-jump data augmentation, print true values beside posterior "
        "means and 94% intervals, and write posterior.nc, summary.csv and figures to --out.",
    )
    demo.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)"
    )
    demo.add_argument(
        "--draws",
        type=_positive_int,
        default=4000,
        help="posterior draws per chain (default: %(default)s; with the default "
        "interweaving move the bulk ESS of beta and tau is about a quarter of chains x draws: "
        "1,500 to 2,400 of 8,000 at the defaults)",
    )
    demo.add_argument(
        "--tune",
        type=_non_negative_int,
        default=None,
        help="tuning iterations per chain, run before the draws (default: 1000, or --draws "
        "if that is smaller; a value given here is used as it is)",
    )
    demo.add_argument("--chains", type=_positive_int, default=2, help="chains (default: 2)")
    demo.add_argument(
        "--seed",
        type=_non_negative_int,
        default=1,
        help="seed of data, noise and sampler (default: 1)",
    )
    for flag, default, what in (
        ("--epsilon-s", 1.0, "the statistics (default: 1)"),
        ("--epsilon-n", 0.5, "the sample size (default: 0.5)"),
    ):
        demo.add_argument(
            flag, type=_positive_float, default=default, help=f"privacy budget of {what}"
        )
    demo.add_argument(
        "--sampler",
        choices=["gibbs", "nuts"],
        default="gibbs",
        help="parameter update given the imputed records: exact conjugate draws (default) or NUTS",
    )
    demo.add_argument(
        "--bounded", action="store_true", help="bounded DP instead: n is known, not released"
    )
    demo.add_argument(
        "--records",
        type=_record_count,
        default=1000,
        help="records in the simulated data, up to 1e8 (default: %(default)s)",
    )
    demo.add_argument(
        "--augment",
        choices=["records", "sums"],
        default=None,
        help="latent state: every record (exact) or the 9 true sums under their normal "
        f"approximation (census scale; default: records up to {SUMS_FROM:,} records, sums above)",
    )
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(func=_demo)


def _add_epsilon(sub) -> None:
    """``pmdp epsilon``'s arguments."""
    eps = sub.add_parser(
        "epsilon",
        help="choose epsilon for the regression example: membership risk beside the analyst's "
        "posterior, per budget, as an HTML page",
        description="Simulate the paper's regression data, then for each total epsilon of a grid "
        "(split 2:1 between the 9 statistics and n, as in pmdp demo) compute the exact "
        "membership risk of a worst-case record and fit simulated releases (seeded noise: a "
        "simulation study) with the unbounded-DP model; write epsilon.html (figure, table, one "
        "paragraph per epsilon), epsilon.csv and fits.csv to --out.",
    )
    eps.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: pmdp-out/epsilon[-quick])",
    )
    eps.add_argument(
        "--quick",
        action="store_true",
        help=f"a reduced run that finishes in about a minute ({EPSILON_QUICK['records']} "
        f"records, epsilon {','.join(map(str, EPSILON_QUICK['epsilons']))}, "
        f"{EPSILON_QUICK['replicates']} replicates, {EPSILON_QUICK['draws']} draws)",
    )
    eps.add_argument(
        "--epsilons",
        type=_epsilon_list,
        default=None,
        metavar="LIST",
        help="comma-separated total epsilons, increasing (default: "
        f"{','.join(map(str, EPSILON_DEFAULTS['epsilons']))})",
    )
    for flag, kind, what in (
        ("--replicates", _positive_int, "simulated releases per epsilon"),
        ("--records", _positive_int, "records in the simulated data"),
        ("--draws", _positive_int, "posterior draws per fit"),
        ("--tune", _non_negative_int, "tuning iterations per fit"),
    ):
        key = flag[2:]
        eps.add_argument(
            flag, type=kind, default=None, help=f"{what} (default: {EPSILON_DEFAULTS[key]})"
        )
    eps.add_argument(
        "--seed",
        type=_non_negative_int,
        default=1,
        help="seed of data, noise and chains (default: 1)",
    )
    eps.add_argument(
        "--target-width",
        type=_positive_float,
        default=None,
        help="recommend the smallest epsilon whose expected 95%% intervals of beta and tau are "
        "at most this wide",
    )
    eps.add_argument(
        "--max-advantage",
        type=_probability,
        default=None,
        help="recommend the largest epsilon whose membership advantage is at most this",
    )
    eps.add_argument(
        "--prior",
        type=_open_probability,
        default=0.5,
        help="the attacker's prior that the target is in the data (default: %(default)s)",
    )
    _add_dask(
        eps,
        "worker processes of a local Dask cluster (default: one per core; 1 runs the fits "
        "in this process)",
        "run the fits on a running Dask scheduler instead",
    )
    eps.set_defaults(func=_epsilon)


def _add_reproduce(sub) -> None:
    """``pmdp reproduce``'s arguments."""
    rep = sub.add_parser(
        "reproduce",
        help="run one of the paper's studies (regression, atus, mcem) on Dask",
        description="Run a study's grid (epsilon_s x epsilon_n x replicates; bounded beside "
        "unbounded DP) as Dask tasks on a local cluster (one worker per core) or on a running "
        "scheduler (--scheduler). Each finished fit is written at once to OUT/fits (a rerun with "
        "the same --out resumes); then tables (Markdown, CSV) and a coverage figure.",
    )
    rep.add_argument(
        "study",
        choices=list(STUDY_NAMES),
        help="regression (Table 1: coverage of intervals), atus (Section 6.2) or "
        "mcem (Table 2: MLEs across data sets)",
    )
    rep.add_argument(
        "--quick",
        action="store_true",
        help="a reduced grid that finishes in minutes (one epsilon_s, three "
        "epsilon_n, one replicate)",
    )
    rep.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: pmdp-out/reproduce-STUDY[-quick])",
    )
    for flag, kind, what in (
        (
            "--replicates",
            _positive_int,
            "data sets (regression, mcem) or releases (atus) per grid point "
            "(default: the paper's 100 regression and atus, 20 mcem; quick: 1 or 2)",
        ),
        ("--draws", _positive_int, "posterior draws per chain (regression, atus)"),
        ("--tune", _non_negative_int, "tuning iterations per chain (regression, atus)"),
        ("--chains", _positive_int, "chains per fit (regression, atus; default 2)"),
        ("--seed", _non_negative_int, "study seed"),
    ):
        rep.add_argument(flag, type=kind, default=None, help=what)
    for flag, what in (
        ("--epsilon-s", "comma-separated epsilon_s values (overrides the grid)"),
        (
            "--epsilon-n",
            "comma-separated epsilon_n values (overrides the grid; 'inf': n "
            "public, mcem study only)",
        ),
    ):
        rep.add_argument(flag, type=_epsilon_list, default=None, metavar="LIST", help=what)
    _add_study_data(rep)
    _add_dask(
        rep,
        "worker processes of the local Dask cluster (default: one per core)",
        "run on a running Dask scheduler (e.g. tcp://host:8786) instead of a "
        "local cluster; its workers need this package installed",
    )
    rep.add_argument(
        "--report-only",
        action="store_true",
        help="only write tables and figures from the fits already finished in --out",
    )
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    rep.set_defaults(func=_reproduce)


def _add_study_data(rep) -> None:
    """``pmdp reproduce``'s arguments about the data and the model of a study."""
    rep.add_argument(
        "--records",
        type=_positive_int,
        default=None,
        metavar="N",
        help="records per simulated data set (regression, mcem; default 1000)",
    )
    rep.add_argument(
        "--data",
        type=Path,
        default=None,
        help="atus: a folder holding female.csv and male.csv (default: "
        "$PMDP_ATUS_DIR if set, else the ATUS 2019 data packaged with the library), or "
        "'simulated' for the simulated stand-in",
    )
    rep.add_argument(
        "--sampler",
        choices=["gibbs", "nuts"],
        default=None,
        help="regression: parameter update given the records, exact conjugate "
        "draws (default) or NUTS",
    )


def _add_dask(parser, workers: str, scheduler: str) -> None:
    """``--workers`` and ``--scheduler``, with their help texts."""
    parser.add_argument("--workers", type=_positive_int, default=None, help=workers)
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS", help=scheduler)


# -- shared checks -------------------------------------------------------------------------------


def _writable_folder(path: Path, option: str = "--out") -> Path:
    """Create ``path`` if needed and check that files can be written into it."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".pmdp-write-test-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or str(error)
        raise UsageError(f"{option}: cannot write to {str(path)!r}: {reason}") from None
    return path


# -- demo ----------------------------------------------------------------------------------------


def _demo(args, out=None) -> int:
    out = out or sys.stdout
    import matplotlib

    matplotlib.use("Agg", force=False)
    import numpy as np

    from pymc_unbounded_dp.examples.demo import demo_release, fit_demo, save_demo

    folder = _writable_folder(args.out)
    tune = min(1000, args.draws) if args.tune is None else args.tune
    augment = args.augment or ("records" if args.records <= SUMS_FROM else "sums")
    _print_demo_plan(args, tune, augment, out)
    result = fit_demo(
        draws=args.draws,
        tune=tune,
        chains=args.chains,
        seed=args.seed,
        epsilon_s=args.epsilon_s,
        epsilon_n=args.epsilon_n,
        sampler=args.sampler,
        bounded=args.bounded,
        n=args.records,
        augment=augment,
        progressbar=not args.no_progress,
    )
    release = result.release
    print(
        "  released: s_dp = "
        + np.array2string(release.values, precision=2, max_line_width=200)
        + ("" if args.bounded else f", n_dp = {release.n_dp}"),
        file=out,
    )
    published = demo_release(result)
    print(
        f"  guarantee: epsilon = {published.guarantee['epsilon']:.4g} under "
        f"{published.neighbouring} neighbours (release.json)",
        file=out,
    )
    _print_demo_posterior(result, args, augment, out)
    stats = result.idata["sample_stats"]
    if "diverging" in stats:
        print(f"NUTS divergences: {int(stats['diverging'].values.sum())}", file=out)
    written = save_demo(result, folder)
    print("\nWrote:\n" + "\n".join(f"  {p}" for p in written), file=out)
    return 0


def _print_demo_plan(args, tune: int, augment: str, out) -> None:
    """What ``pmdp demo`` is about to fit, and how."""
    kind = "bounded DP (n known)" if args.bounded else "unbounded DP (n released with noise)"
    print(f"pmdp demo: linear regression, n = {args.records:,}, {kind}", file=out)
    print(
        f"  epsilon_s = {args.epsilon_s:g} (9 statistics, Laplace, sensitivity 9)"
        + ("" if args.bounded else f", epsilon_n = {args.epsilon_n:g} (discrete Laplace)"),
        file=out,
    )
    how = (
        "the sums level's normal approximation (augment='sums': the records are not carried; "
        "see docs/census_scale.md)"
        if augment == "sums"
        else f"{'exact conjugate draws' if args.sampler == 'gibbs' else 'NUTS'}, every record"
    )
    print(
        f"  sampling {args.chains} chains x ({tune} tune + {args.draws} draws), parameters by "
        f"{how} ...",
        file=out,
    )
    out.flush()


def _print_demo_posterior(result, args, augment: str, out) -> None:
    """The demo's posterior beside the true values, with advice when the chains are short."""
    import numpy as np

    from pymc_unbounded_dp.examples.demo import demo_summary
    from pymc_unbounded_dp.examples.study.reporting import (
        ESS_PER_CHAIN,
        FLAG,
        R_HAT_MAX,
        convergence_flags,
        flag_labels,
    )

    summary = demo_summary(result)
    shown = summary[["true", "mean", "sd", "lower", "upper", "r_hat", "ess_bulk"]].rename(
        columns={"lower": "lower_94", "upper": "upper_94"}
    )
    flags = convergence_flags(summary, args.chains)
    shown["flag"] = flag_labels(flags, FLAG)
    print(
        f"\nPosterior ({result.seconds:.0f} s of sampling); 94% equal-tailed intervals:", file=out
    )
    # at census scale the posterior sds are ~1e-4: six significant digits instead of 3 decimals
    digits = (lambda v: f"{v:.6g}" if abs(v) < 1e6 else f"{v:.1f}") if augment == "sums" else None
    print(shown.to_string(float_format=digits or (lambda v: f"{v:.3f}")), file=out)
    print(
        f"{int(summary['covered'].sum())} of {len(summary)} true values inside their 94% interval.",
        file=out,
    )
    flagged = flags.any(axis=1)
    if flagged.any():
        needed = ESS_PER_CHAIN * args.chains
        ratios = needed / summary.loc[flags["ess_bulk"], "ess_bulk"]
        factor = max(4 if flags["r_hat"].any() else 2, *np.ceil(ratios))
        print(
            f"{FLAG} r_hat > {R_HAT_MAX} or bulk ESS < {needed} ({ESS_PER_CHAIN} per chain) for "
            f"{', '.join(summary.index[flagged])}: the chains are too short for reliable means "
            f"and intervals. Run longer, e.g. --draws {math.ceil(args.draws * factor / 100) * 100}"
            + (
                " with --chains 2 or more (r_hat needs several chains)." if args.chains < 2 else "."
            ),
            file=out,
        )


# -- epsilon -------------------------------------------------------------------------------------

#: ``pmdp epsilon``'s settings, and those of ``--quick``.
EPSILON_DEFAULTS = {
    "epsilons": (0.5, 1.0, 2.0, 4.0, 8.0),
    "replicates": 4,
    "records": 1000,
    "draws": 500,
    "tune": 500,
}
EPSILON_QUICK = {"epsilons": (0.5, 4.0), "replicates": 2, "records": 300, "draws": 150, "tune": 150}


def _epsilon(args, out=None) -> int:
    out = out or sys.stdout
    import contextlib

    import matplotlib

    matplotlib.use("Agg", force=False)
    import numpy as np

    from pymc_unbounded_dp.epsilon import choose_epsilon
    from pymc_unbounded_dp.examples import regression
    from pymc_unbounded_dp.examples.study.running import study_client

    settings = dict(EPSILON_QUICK if args.quick else EPSILON_DEFAULTS)
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    grid = list(settings["epsilons"])
    if any(math.isinf(e) for e in grid) or sorted(set(grid)) != grid:
        raise UsageError(f"--epsilons: must be finite and increasing, got {args.epsilons}")
    folder = _writable_folder(args.out or DEFAULT_OUT / f"epsilon{'-quick' if args.quick else ''}")
    data_seed, study_seed = np.random.SeedSequence(args.seed).spawn(2)
    data = regression.simulate_regression(settings["records"], seed=data_seed)
    plan = regression.regression_plan()
    fits = len(grid) * settings["replicates"] + 1
    print(
        f"pmdp epsilon: regression, n = {settings['records']:,}, unbounded DP; epsilon in "
        f"{grid} (1/3 to n), {settings['replicates']} simulated releases each: {fits} fits "
        "(one is the reference fit) -> " + str(folder),
        file=out,
        flush=True,
    )
    local = args.scheduler is None and args.workers == 1
    start = time.perf_counter()
    with (
        contextlib.nullcontext() if local else study_client(args.scheduler, args.workers) as client
    ):
        report = choose_epsilon(
            {"s": regression.regression_rows(data.x, data.y)},
            plan,
            regression.regression_model,
            grid,
            params=["beta", "tau"],
            replicates=settings["replicates"],
            target_width=args.target_width,
            max_membership_advantage=args.max_advantage,
            prior=args.prior,
            random_seed=int(study_seed.generate_state(1)[0]),
            client=client,
            draws=settings["draws"],
            tune=settings["tune"],
        )
    seconds = time.perf_counter() - start
    html = report.to_html(folder / "epsilon.html")
    table = folder / "epsilon.csv"
    report.table.to_csv(table)
    fits_csv = folder / "fits.csv"
    report.fits.to_csv(fits_csv, index=False)
    shown = report.table[
        ["membership_risk", "advantage", *(f"width({label})" for label in report.labels)]
    ]
    print(f"\nDone in {seconds / 60:.1f} min.\n", file=out)
    print(shown.to_string(float_format=lambda v: f"{v:.3g}"), file=out)
    advice = (
        report.recommend().reason
        if args.target_width is not None or args.max_advantage is not None
        else "For a recommendation, give --target-width W (the widest acceptable 95% interval "
        "of beta and tau) or --max-advantage A (the largest acceptable membership advantage)."
    )
    print(f"\n{advice}", file=out)
    print("\nWrote:\n" + "\n".join(f"  {p}" for p in (html, table, fits_csv)), file=out)
    return 0


# -- reproduce -----------------------------------------------------------------------------------

#: Command-line flags and the study options they set.
_STUDY_FLAGS = {
    "replicates": "replicates",
    "draws": "draws",
    "tune": "tune",
    "chains": "chains",
    "seed": "seed",
    "epsilon_s": "epsilon_s",
    "epsilon_n": "epsilon_n",
    "records": "n",
    "data": "data",
    "sampler": "sampler",
}


def _study_from_args(args):
    from pymc_unbounded_dp.examples.study import make_study
    from pymc_unbounded_dp.examples.study.config import options as study_options

    flags = {option: flag for flag, option in _STUDY_FLAGS.items()}
    overrides = {option: getattr(args, flag) for flag, option in _STUDY_FLAGS.items()}
    if overrides["data"] is not None:
        overrides["data"] = str(overrides["data"])
    given = {option: value for option, value in overrides.items() if value is not None}
    known = study_options(args.study)
    unknown = [flags[option] for option in given if option not in known]
    if unknown:
        accepted = [flag for flag, option in _STUDY_FLAGS.items() if option in known]
        raise UsageError(
            f"{', '.join(_flag(f) for f in unknown)}: not an option of the {args.study} study "
            f"(its options: {', '.join(_flag(f) for f in accepted)})"
        )
    try:
        return make_study(args.study, quick=args.quick, **given)
    except (ValueError, FileNotFoundError) as error:
        option, _, rest = str(error).partition(": ")
        flag = flags.get(option)
        raise UsageError(f"{_flag(flag)}: {rest}" if flag else str(error)) from None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _reproduce(args, out=None) -> int:
    out = out or sys.stdout
    import matplotlib

    matplotlib.use("Agg", force=False)
    from pymc_unbounded_dp.examples.study import (
        FitStore,
        SettingsMismatch,
        StudyFailed,
        run_study,
        write_report,
    )

    study = _study_from_args(args)
    folder = _writable_folder(
        args.out or DEFAULT_OUT / f"reproduce-{args.study}{'-quick' if args.quick else ''}"
    )
    store = FitStore(folder)
    grid = study.fits()
    print(
        f"pmdp reproduce {args.study}{' --quick' if args.quick else ''}: {len(grid)} fits "
        f"({json.dumps(study.settings())}) -> {folder}",
        file=out,
        flush=True,
    )
    if args.report_only:
        done = store.done()
        records = [store.load(f.key) for f in grid if f.key in done]
        if not records:
            raise UsageError(f"--out: no finished fits of this grid in {str(folder)!r}")
        paths = write_report(study, records, folder)
        print(f"{len(records)} of {len(grid)} fits finished; report written.\n", file=out)
        print(paths["summary"].read_text(), file=out)
        return 0
    start = time.perf_counter()
    try:
        records = run_study(
            study,
            store,
            scheduler=args.scheduler,
            workers=args.workers,
            progressbar=not args.no_progress,
            log=lambda text: print(text, file=out, flush=True),
        )
    except SettingsMismatch as error:
        raise UsageError(f"--out: {error}") from None
    except StudyFailed as error:
        print(f"pmdp reproduce: {error}\nRerun the same command to retry them.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: {len(store.done())} finished fit(s) kept in {store.fits}; rerun "
            "the same command to resume.",
            file=sys.stderr,
        )
        return 130
    paths = write_report(study, records, folder, time.perf_counter() - start)
    print(f"\nDone in {(time.perf_counter() - start) / 60:.1f} min.\n", file=out)
    print(paths["summary"].read_text(), file=out)
    print(f"Tables and figures in {folder}", file=out)
    return 0


# -- entry point ---------------------------------------------------------------------------------


#: Packages of the ``examples`` extra (the core library does not need them).
_EXAMPLES_EXTRA = ("dask", "distributed", "matplotlib", "h5netcdf", "h5py", "tabulate")


def main(argv=None) -> int:
    """Run the ``pmdp`` command line; returns the exit code.

    When the output is piped into a command that stops reading (``pmdp demo | head -3``) the run
    ends quietly with exit code 141 (128 + SIGPIPE, what a shell reports for a process a broken
    pipe ended).
    """
    try:
        code = _run(argv)
        sys.stdout.flush()  # a broken pipe shows here, not at interpreter exit
    except BrokenPipeError:
        # Python's recipe (the `signal` module's note on SIGPIPE): later writes, and the flush at
        # exit, go to devnull instead of raising again
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # stdout is not a file (e.g. captured by a test)
            pass
        finally:
            os.close(devnull)
        return 141
    return code


def _run(argv) -> int:
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C must reach us as KeyboardInterrupt (exit code 130, finished fits kept) even when
        # started from a shell that ignores SIGINT in background jobs
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help, --version
        return int(exit_.code or 0)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except ModuleNotFoundError as error:
        if error.name not in _EXAMPLES_EXTRA:
            raise
        print(
            f"pmdp {args.command}: error: {error.name} is not installed; the command line "
            "needs the examples extra: pip install 'pymc-unbounded-dp[examples]'",
            file=sys.stderr,
        )
        return 2
    except UsageError as error:
        print(f"pmdp {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
