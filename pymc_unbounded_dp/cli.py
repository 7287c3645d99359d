"""The ``pmdp`` command line: ``pmdp demo`` and ``pmdp reproduce regression|atus``.

``main(argv)`` returns the exit code: 0 on success, 2 for a usage error (a bad option, a missing
data directory, an output folder that cannot be written, or results from other settings in the
output folder), 130 when interrupted (finished study cells are kept and a rerun resumes).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

__all__ = ["build_parser", "main"]

DEFAULT_OUT = Path("pmdp-out")


class UsageError(Exception):
    """A problem with the command line; reported with exit code 2."""


# -- argument types ------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


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


class _Parser(argparse.ArgumentParser):
    """``ArgumentParser`` whose errors raise (so ``main`` can return the exit code)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    from pymc_unbounded_dp import __version__

    parser = _Parser(
        prog="pmdp",
        description="Bayesian inference from differentially private releases (bounded and "
        "unbounded DP): the paper's workloads end to end.",
    )
    parser.add_argument("--version", action="version", version=f"pmdp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{demo,reproduce}", parser_class=_Parser)

    demo = sub.add_parser(
        "demo",
        help="fit the linear-regression example (unbounded DP) and write posterior and figures",
        description="Simulate the paper's regression data (n = 1000), release 9 noisy sufficient "
        "statistics (Laplace, epsilon_s) and a noisy n (discrete Laplace, epsilon_n), fit the "
        "posterior by reversible-jump data augmentation, print true values beside posterior "
        "means and 94% intervals, and write posterior.nc, summary.csv and figures to --out.",
    )
    demo.add_argument("--out", type=Path, default=DEFAULT_OUT,
                      help="output folder (default: %(default)s)")
    demo.add_argument("--draws", type=_positive_int, default=4000,
                      help="posterior draws per chain (default: %(default)s; with the default "
                      "interweaving move the effective sample size of beta is about a third of "
                      "the draws)")
    demo.add_argument("--tune", type=_non_negative_int, default=None,
                      help="tuning iterations per chain (default: 1000, at most --draws)")
    demo.add_argument("--chains", type=_positive_int, default=2, help="chains (default: 2)")
    demo.add_argument("--seed", type=_non_negative_int, default=1,
                      help="seed of data, noise and sampler (default: 1)")
    demo.add_argument("--epsilon-s", type=_positive_float, default=1.0,
                      help="privacy budget of the statistics (default: 1)")
    demo.add_argument("--epsilon-n", type=_positive_float, default=0.5,
                      help="privacy budget of the sample size (default: 0.5)")
    demo.add_argument("--sampler", choices=["gibbs", "nuts"], default="gibbs",
                      help="parameter update given the imputed records: exact conjugate draws "
                      "(default) or NUTS")
    demo.add_argument("--bounded", action="store_true",
                      help="bounded DP instead: n is known, not released")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(func=_demo)

    rep = sub.add_parser(
        "reproduce",
        help="run the paper's study grids (regression or ATUS), bounded beside unbounded DP",
        description="Run the grid epsilon_s x epsilon_n x replicates of a study, bounded DP beside "
        "unbounded DP, writing one result file per finished fit to OUT/cells (a rerun with the "
        "same --out resumes), tables (CSV, Markdown) and figures (PNG).",
    )
    rep.add_argument("study", choices=["regression", "atus", "mcem"],
                     help="which study (mcem: the paper's Table 2, MLEs of the regression)")
    rep.add_argument("--quick", action="store_true",
                     help="a reduced grid (one epsilon_s, three epsilon_n, one replicate, shorter "
                     "chains, no MCEM) that finishes in a few minutes")
    rep.add_argument("--out", type=Path, default=None,
                     help="output folder (default: pmdp-out/reproduce-STUDY[-quick])")
    rep.add_argument("--replicates", type=_positive_int, default=None,
                     help="replicates per grid point (default: 5 regression, 3 ATUS; quick: 1)")
    rep.add_argument("--draws", type=_positive_int, default=None,
                     help="posterior draws per chain (default: regression 5000, ATUS 10000; "
                     "quick: 10000, 3000)")
    rep.add_argument("--tune", type=_non_negative_int, default=None,
                     help="tuning iterations per chain (default: regression 1000, ATUS 2000; "
                     "quick: 1000)")
    rep.add_argument("--chains", type=_positive_int, default=None, help="chains (default: 2)")
    rep.add_argument("--seed", type=_non_negative_int, default=None, help="study seed")
    rep.add_argument("--epsilon-s", type=_epsilon_list, default=None, metavar="LIST",
                     help="comma-separated epsilon_s values (overrides the grid)")
    rep.add_argument("--epsilon-n", type=_epsilon_list, default=None, metavar="LIST",
                     help="comma-separated epsilon_n values (overrides the grid; 'inf': n "
                     "public, mcem study only)")
    rep.add_argument("--data", type=Path, default=None,
                     help="ATUS data folder with female.csv and male.csv (default: "
                     "$PMDP_ATUS_DIR, else ../shared/data/atus2019 next to the repository, else "
                     "a simulated stand-in)")
    rep.add_argument("--sampler", choices=["gibbs", "nuts"], default=None,
                     help="parameter update given the imputed records: exact conjugate draws "
                     "(default) or NUTS")
    rep.add_argument("--mcem", action=argparse.BooleanOptionalAction, default=None,
                     help="MCEM estimates beside the posteriors (regression; default: on, off "
                     "with --quick)")
    rep.add_argument("--mcem-replicates", type=_non_negative_int, default=None, metavar="K",
                     help="run MCEM on the first K replicates only (default: all)")
    rep.add_argument("--workers", type=_positive_int, default=1,
                     help="mcem study: fits run in this many processes (default: 1)")
    rep.add_argument("--report-only", action="store_true",
                     help="only write tables and figures from the fits already finished in --out")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    rep.set_defaults(func=_reproduce)
    return parser


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


def _quiet_pymc() -> None:
    for name in ("pymc", "pymc.sampling.mcmc", "pymc.stats.convergence"):
        logging.getLogger(name).setLevel(logging.WARNING)


# -- demo ----------------------------------------------------------------------------------------


def _demo(args, out=None) -> int:
    out = out or sys.stdout
    import matplotlib

    matplotlib.use("Agg", force=False)
    import numpy as np

    import pymc_unbounded_dp as pmdp
    from pymc_unbounded_dp.examples import figures
    from pymc_unbounded_dp.examples import regression as reg
    from pymc_unbounded_dp.examples.studies import suggested_n_moves
    from pymc_unbounded_dp.examples.summary import flat_draws, group_dataset, posterior_summary

    folder = _writable_folder(args.out)
    (folder / "figures").mkdir(exist_ok=True)
    tune = min(1000, args.draws) if args.tune is None else args.tune
    seeds = np.random.SeedSequence(args.seed).spawn(3)
    kind = "bounded DP (n known)" if args.bounded else "unbounded DP (n released with noise)"
    print(f"pmdp demo: linear regression, n = 1000, {kind}", file=out)
    print(f"  epsilon_s = {args.epsilon_s:g} (9 statistics, Laplace, sensitivity 9)"
          + ("" if args.bounded else f", epsilon_n = {args.epsilon_n:g} (discrete Laplace)"),
          file=out)
    data = reg.simulate_regression(1000, seed=seeds[0])
    release = reg.privatize_regression(data, args.epsilon_s, args.epsilon_n, seed=seeds[1])
    print("  released: s_dp = " + np.array2string(release.values, precision=2, max_line_width=200)
          + ("" if args.bounded else f", n_dp = {release.n_dp}"), file=out)
    model = reg.regression_model(release, bounded=args.bounded)
    kwargs = {} if args.bounded else {"n_moves": suggested_n_moves(release)}
    if args.sampler == "gibbs":
        kwargs["step"] = reg.regression_gibbs_step(model)
    print(f"  sampling {args.chains} chains x ({tune} tune + {args.draws} draws), parameters by "
          f"{'exact conjugate draws' if args.sampler == 'gibbs' else 'NUTS'} ...", file=out)
    out.flush()
    start = time.perf_counter()
    with model:
        idata = pmdp.sample(
            draws=args.draws, tune=tune, chains=args.chains,
            random_seed=int(seeds[2].generate_state(1)[0]),
            progressbar=not args.no_progress, compute_convergence_checks=False, **kwargs,
        )
    seconds = time.perf_counter() - start
    truth = reg.regression_truth()
    truth["n"] = float(release.n)
    names = ["beta", "tau", "mu"] + ([] if args.bounded else ["n"])
    summary = posterior_summary(idata, names, truth=truth)
    shown = summary[["true", "mean", "sd", "lower_94", "upper_94", "r_hat", "ess_bulk"]]
    print(f"\nPosterior ({seconds:.0f} s of sampling); 94% equal-tailed intervals:", file=out)
    print(shown.to_string(float_format=lambda v: f"{v:.3f}"), file=out)
    covered = int(summary["covered"].sum())
    print(f"{covered} of {len(summary)} true values inside their 94% interval.", file=out)
    stats = group_dataset(idata, "sample_stats")
    if "diverging" in stats:
        print(f"NUTS divergences: {int(stats['diverging'].values.sum())}", file=out)

    paths = _save_posterior(idata, folder / "posterior.nc")
    summary.to_csv(folder / "summary.csv", index_label="parameter")
    (folder / "release.json").write_text(json.dumps({
        "values": [float(v) for v in release.values],
        "statistics": list(reg.STATISTIC_NAMES),
        "n_dp": None if args.bounded else int(release.n_dp),
        "epsilon_s": release.epsilon_s,
        "epsilon_n": None if args.bounded else release.epsilon_n,
        "sensitivity": release.sensitivity,
        "true_n": int(release.n),
        "seed": args.seed,
        "sampling_seconds": seconds,
        "sampler": args.sampler,
    }, indent=1))
    labels = ["beta[0]", "beta[1]", "beta[2]", "tau"] + ([] if args.bounded else ["n"])
    draws = flat_draws(idata, ["beta", "tau"] + ([] if args.bounded else ["n"]))
    fig = figures.plot_posteriors(draws, truth, labels,
                                  title=f"Regression posterior ({kind}); dashed: true values")
    fig.savefig(folder / "figures" / "posteriors.png", dpi=100)
    fig = figures.plot_traces(idata, labels, title="Traces")
    fig.savefig(folder / "figures" / "trace.png", dpi=100)
    written = [*paths, folder / "summary.csv", folder / "release.json",
               folder / "figures" / "posteriors.png", folder / "figures" / "trace.png"]
    print("\nWrote:\n" + "\n".join(f"  {p}" for p in written), file=out)
    return 0


def _save_posterior(idata, path: Path) -> list[Path]:
    """All groups of the sampler output as netCDF4 (``h5netcdf``)."""
    idata.to_netcdf(str(path), engine="h5netcdf")
    return [path]


# -- reproduce -----------------------------------------------------------------------------------


def _reproduce(args, out=None) -> int:
    out = out or sys.stdout
    if args.study == "mcem":
        return _reproduce_mle(args, out)
    import matplotlib

    matplotlib.use("Agg", force=False)
    from pymc_unbounded_dp.examples import atus as atus_example
    from pymc_unbounded_dp.examples import studies

    for name in ("epsilon_s", "epsilon_n"):
        if any(e == float("inf") for e in getattr(args, name) or ()):
            raise UsageError(f"--{name.replace('_', '-')}: 'inf' is for the mcem study only (the "
                             f"{args.study} study fits bounded DP beside every epsilon_n)")
    data = None
    if args.study == "atus":
        data = _atus_source(args.data)
    elif args.data is not None:
        raise UsageError("--data: only the atus study reads data (regression simulates its own)")
    folder = args.out or DEFAULT_OUT / f"reproduce-{args.study}{'-quick' if args.quick else ''}"
    folder = _writable_folder(folder)
    config = studies.default_config(
        args.study, quick=args.quick, replicates=args.replicates, draws=args.draws, tune=args.tune,
        chains=args.chains, seed=args.seed, epsilon_s=args.epsilon_s, epsilon_n=args.epsilon_n,
        data=data, mcem=args.mcem, sampler=args.sampler, mcem_replicates=args.mcem_replicates,
    )
    grid = studies.cells(config)
    print(f"pmdp reproduce {args.study}{' --quick' if args.quick else ''}: {len(grid)} fits "
          f"(epsilon_s {list(config.epsilon_s)}, epsilon_n {list(config.epsilon_n)}, "
          f"{config.replicates} replicate(s), {config.chains} chains x ({config.tune} tune + "
          f"{config.draws} draws), parameter step {config.sampler}"
          f"{', MCEM' if config.mcem else ''}) -> {folder}", file=out)
    if args.study == "atus" and data == "simulated":
        print(f"  no ATUS data found: using the SIMULATED stand-in (Dirichlet"
              f"{tuple(atus_example.MLE_ALPHA.tolist())}, n = {atus_example.ATUS_N}); pass --data "
              f"or set ${atus_example.ATUS_ENV} for the real data", file=out)
    out.flush()
    _quiet_pymc()
    start = time.perf_counter()
    if args.report_only:
        try:
            records = studies.finished_results(config, folder)
        except studies.SettingsMismatch as error:
            raise UsageError(f"--out: {error}") from None
        if not records:
            raise UsageError(f"--out: no finished fits of this grid in {str(folder)!r}")
        studies.write_report(records, config, folder)
        print(f"{len(records)} of {len(grid)} fits finished; report written.\n", file=out)
        print((folder / f"{args.study}_summary.md").read_text(), file=out)
        return 0
    try:
        studies.run_study(config, folder, progressbar=not args.no_progress,
                          log=lambda text: print(text, file=out))
    except studies.SettingsMismatch as error:
        raise UsageError(f"--out: {error}") from None
    except KeyboardInterrupt:
        done = len(list((folder / "cells").glob("*.json")))
        print(f"\ninterrupted: {done} finished fit(s) kept in {folder / 'cells'}; rerun the same "
              "command to resume.", file=sys.stderr)
        return 130
    minutes = (time.perf_counter() - start) / 60
    report = folder / f"{args.study}_summary.md"
    print(f"\nDone in {minutes:.1f} min.\n", file=out)
    print(report.read_text(), file=out)
    print(f"Tables and figures in {folder}", file=out)
    return 0


_MLE_OPTIONS = ("draws", "tune", "chains", "epsilon_s", "data", "sampler", "mcem",
                "mcem_replicates")


def _reproduce_mle(args, out) -> int:
    """``pmdp reproduce mcem``: the Table 2 protocol (:mod:`~pymc_unbounded_dp.examples.mle_study`)."""
    from pymc_unbounded_dp.examples import mle_study

    given = [name for name in _MLE_OPTIONS if getattr(args, name) is not None]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise UsageError(f"{flags}: not options of the mcem study (it has --replicates, "
                         "--epsilon-n, --seed, --workers, --quick, --out, --report-only)")
    folder = _writable_folder(args.out or DEFAULT_OUT / f"reproduce-mcem{'-quick' if args.quick else ''}")
    defaults = mle_study.MLEStudyConfig()
    config = mle_study.MLEStudyConfig(
        epsilon_n=args.epsilon_n or ((1.0, float("inf")) if args.quick else defaults.epsilon_n),
        replicates=args.replicates or (2 if args.quick else defaults.replicates),
        seed=defaults.seed if args.seed is None else args.seed,
    )
    _quiet_pymc()
    if args.report_only:
        records = [r for f in mle_study.fits(config)
                   if (r := mle_study.finished(folder, f, config)) is not None]
        if not records:
            raise UsageError(f"--out: no finished fits of this grid in {str(folder)!r}")
        print(mle_study.markdown_table(records), file=out)
        return 0
    start = time.perf_counter()
    try:
        records = mle_study.run_study(config, folder, workers=args.workers,
                                      log=lambda text: print(text, file=out, flush=True))
    except KeyboardInterrupt:
        done = len(list((folder / "fits").glob("*.json")))
        print(f"\ninterrupted: {done} finished fit(s) kept in {folder / 'fits'}; rerun the same "
              "command to resume.", file=sys.stderr)
        return 130
    except ValueError as error:
        raise UsageError(f"--out: {error}") from None
    print(f"\nDone in {(time.perf_counter() - start) / 60:.1f} min.\n", file=out)
    print(mle_study.markdown_table(records), file=out)
    return 0


def _atus_source(path: Path | None) -> str:
    """The ATUS data directory to use (checked), or ``"simulated"``."""
    from pymc_unbounded_dp.examples import atus as atus_example

    if path is not None:
        option, directory = "--data", path
    elif os.environ.get(atus_example.ATUS_ENV):
        option, directory = f"${atus_example.ATUS_ENV}", Path(os.environ[atus_example.ATUS_ENV])
    else:
        directory = atus_example.default_atus_dir()
        if directory is None:
            return "simulated"
        option = "default data folder"
    if not directory.is_dir():
        raise UsageError(f"{option}: data folder {str(directory)!r} does not exist")
    missing = [f for f in atus_example.ATUS_FILES if not (directory / f).is_file()]
    if missing:
        raise UsageError(f"{option}: data folder {str(directory)!r} lacks {', '.join(missing)}")
    return str(directory.resolve())


# -- entry point ---------------------------------------------------------------------------------


def main(argv=None) -> int:
    """Run the ``pmdp`` command line; returns the exit code."""
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
    except UsageError as error:
        print(f"pmdp {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
