"""The study runner: workloads, seeds, the store, Dask (local cluster, 1 vs 2 workers, a separate
scheduler), and interruption (SIGINT and SIGKILL while fits sample) without losing or faking fits."""

import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import ClassVar

import pytest

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples.study import (
    QUICK,
    Fit,
    FitStore,
    MLEStudy,
    RegressionStudy,
    SettingsMismatch,
    TruncatedFit,
    Workload,
    fit_seed,
    make_study,
)

TINY = ["--draws", "20", "--tune", "20", "--chains", "1", "--records", "200", "--no-progress"]


def pmdp_command(*argv):
    return [sys.executable, "-m", "pymc_unbounded_dp.cli", *argv]


def run_pmdp(*argv, timeout=600):
    return subprocess.run(
        pmdp_command(*argv), capture_output=True, text=True, check=False, timeout=timeout
    )


def records(folder: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in sorted((folder / "fits").glob("*.json"))}


def without_timing(record: dict) -> dict:
    return {k: v for k, v in record.items() if k != "seconds"}


# -- configuration and seeds (no fits) -----------------------------------------------------------


def test_grid_keys_are_unique_and_cover_bounded_beside_every_epsilon_n():
    study = make_study("regression", replicates=3)
    keys = [fit.key for fit in study.fits()]
    assert len(keys) == len(set(keys)) == 3 * 2 * (1 + 6)
    assert keys[:2] == ["regression_r000_es1_bounded", "regression_r000_es1_unbounded_en0.0001"]
    # a fit is a value: hashable, equal to its copy, immutable
    fits = study.fits()
    assert len(set(fits)) == len(fits) and dataclasses.replace(fits[0]) == fits[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fits[0].replicate = 5
    table2 = MLEStudy(replicates=2)
    assert [f.variant for f in table2.fits()].count("bounded") == 2 and len(table2.fits()) == 10


@pytest.mark.parametrize(
    "name, options, message",
    [
        ("regression", {"draws": 0}, "draws: must be at least 1"),
        ("regression", {"epsilon_n": (0.5, math.inf)}, "epsilon_n:"),
        ("regression", {"epsilon_s": (0.0, 1.0)}, "epsilon_s: every value must be positive"),
        ("atus", {"prob": 0.0}, "prob: must be in"),
        ("regression", {"sampler": "hmc"}, "sampler:"),
        ("regression", {"data": "x"}, "data: not an option of the regression study"),
        ("mcem", {"draws": 10}, "draws: not an option of the mcem study"),
        ("mcem", {"mcem_options": (("tolerance", 0.1),)}, "has no option 'tolerance'"),
        ("atus", {"data": "/nonexistent/folder"}, "data: "),
        ("survey", {}, "study: choose one of"),
        ("mcem", {"epsilon_s": (0.5, 1.0)}, "epsilon_s: the mcem study has one epsilon_s"),
        ("mcem", {"replicates": 0}, "replicates: at least 1"),
        ("mcem", {"epsilon_n": (0.0, 1.0)}, "epsilon_n: values must be positive"),
        ("mcem", {"epsilon_n": (-1.0,)}, "epsilon_n: values must be positive"),
        ("regression", {"prob": 1.5}, "prob: must be in"),
        ("mcem", {"epsilon_s": ()}, "epsilon_s: the mcem study has one epsilon_s"),
        ("regression", {"epsilon_n": (0.5, -2.0)}, "epsilon_n: every value must be positive"),
    ],
)
def test_bad_options_are_refused_naming_them(name, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        make_study(name, **options)


def test_the_mle_study_takes_one_epsilon_s_as_a_one_element_grid_and_one_replicate():
    study = make_study("mcem", epsilon_s=(0.5,), replicates=1)
    assert study.epsilon_s == 0.5 and len(study.fits()) == len(study.epsilon_n)


def test_coverage_is_the_share_of_covered_replicates_with_its_binomial_se_and_widths_average():
    """Three of four replicates covered: ``0.75 (0.22)``, se ``sqrt(0.75 * 0.25 / 4)``; the width
    table is the mean width, per grid point and parameter."""
    import pandas as pd

    from pymc_unbounded_dp.examples.study.reporting import coverage_table

    rows = [
        {"parameter": "tau", "covered": r < 3, "width": float(r + 1), "epsilon_s": 1.0,
         "epsilon_n": 0.5, "variant": "unbounded", "replicate": r}
        for r in range(4)
    ] + [
        {"parameter": "tau", "covered": True, "width": 10.0, "epsilon_s": 1.0,
         "epsilon_n": None, "variant": "bounded", "replicate": r}
        for r in range(2)
    ]  # fmt: skip
    per_fit = pd.DataFrame(rows)
    coverage = coverage_table(per_fit, ["tau"], "coverage")
    assert sorted(coverage["tau"]) == ["0.75 (0.22)", "1.00 (0.00)"]
    assert sorted(coverage["reps"]) == [2, 4]
    width = coverage_table(per_fit, ["tau"], "width")
    assert sorted(width["tau"]) == [2.5, 10.0]


def test_the_regression_grid_is_table_1s_and_n_moves_follow_the_count():
    """The default grid is the paper's Table 1 (epsilon_s 1 and 0.1; epsilon_n from 1e-4 to 10;
    ATUS's from Section 6.2), and the fits' birth/death moves per iteration are a tenth of n_dp,
    at least 10, more where a tiny epsilon_n makes the count's noise wide."""
    from pymc_unbounded_dp.examples import regression as reg
    from pymc_unbounded_dp.examples.study import AtusStudy
    from pymc_unbounded_dp.examples.study.regression import suggested_n_moves

    study = RegressionStudy()
    assert (study.epsilon_s, study.replicates, study.n) == ((1.0, 0.1), 100, 1000)
    assert study.epsilon_n == (1e-4, 0.01, 0.1, 0.5, 1.0, 10.0)
    atus = AtusStudy()  # the paper's Section 6.2 grid
    assert (atus.epsilon_s, atus.epsilon_n) == ((1.0, 10.0), (0.01, 0.1, 1.0, 10.0))
    data = reg.simulate_regression(500, seed=1)
    release = reg.privatize_regression(data, 1.0, 0.5, seed=2)
    assert suggested_n_moves(release) == round(0.1 * release.n_dp) == 50
    wide = reg.privatize_regression(data, 1.0, 1e-3, seed=2)  # count noise scale 1,000
    assert suggested_n_moves(wide) == round(0.1 * 3 * wide.n_mechanism.scale)
    small = reg.privatize_regression(reg.simulate_regression(40, seed=1), 1.0, 10.0, seed=2)
    assert suggested_n_moves(small) == 10


def test_the_coverage_figure_plots_each_parameter_from_its_own_fits():
    """Two parameters and two epsilon_s, every fit covered or not by a rule that differs between
    parameters, between epsilon_s and between bounded and unbounded fits: each panel's lines are
    their own, each dashed (bounded) level has the colour of its epsilon_s's line, and the grey
    line is the intervals' nominal probability (the study's ``prob``, here 0.9)."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from pymc_unbounded_dp.examples.study.reporting import coverage_figure

    def covered(name, eps_s, variant):
        return (name == "tau") ^ (eps_s == 1.0) ^ (variant == "bounded")

    rows = [
        {"parameter": name, "covered": covered(name, eps_s, "unbounded"), "epsilon_s": eps_s,
         "epsilon_n": eps_n, "variant": "unbounded", "replicate": r}
        for name in ("beta[0]", "tau")
        for eps_s in (1.0, 10.0)
        for eps_n in (0.1, 1.0)
        for r in range(2)
    ] + [
        {"parameter": name, "covered": covered(name, eps_s, "bounded"), "epsilon_s": eps_s,
         "epsilon_n": None, "variant": "bounded", "replicate": 0}
        for name in ("beta[0]", "tau")
        for eps_s in (1.0, 10.0)
    ]  # fmt: skip
    figure = coverage_figure(pd.DataFrame(rows), 0.9)
    panels = {ax.get_title(): ax for ax in figure.axes}
    assert sorted(panels) == ["beta[0]", "tau"]
    assert [ax.get_ylabel() for ax in figure.axes] == ["coverage", ""]  # the shared y axis
    for title, ax in panels.items():
        lines = ax.get_lines()  # per epsilon_s: its line, then its bounded level (dashed)
        for k, eps_s in enumerate((1.0, 10.0)):
            line, dashed = lines[2 * k], lines[2 * k + 1]
            level = float(covered(title, eps_s, "unbounded"))
            assert list(line.get_ydata()) == [level, level], (title, eps_s)
            assert list(dashed.get_ydata()) == [1 - level, 1 - level], (title, eps_s)
            assert dashed.get_color() == line.get_color()
            assert dashed.get_linestyle() == "--" and dashed.get_linewidth() > 0  # visible
        assert list(lines[-1].get_ydata()) == [0.9, 0.9] and lines[-1].get_color() == "grey"
    matplotlib.pyplot.close(figure)


def test_seeds_depend_only_on_the_study_seed_and_the_fit():
    study = RegressionStudy(epsilon_s=(1.0, 0.1), epsilon_n=(1e-4, 0.5), replicates=2)
    states = [study.release_seed(fit).generate_state(2).tolist() for fit in study.fits()]
    # statistics' noise shared within (replicate, epsilon_s), different otherwise
    by_cell = {}
    for fit, state in zip(study.fits(), states, strict=True):
        by_cell.setdefault((fit.replicate, fit.epsilon_s), set()).add(tuple(state))
    assert all(len(s) == 1 for s in by_cell.values()) and len(by_cell) == 4
    assert len({next(iter(s)) for s in by_cell.values()}) == 4
    assert (fit_seed(1, 0.1).generate_state(1) != fit_seed(1, 0.2).generate_state(1)).all()
    assert (fit_seed(1, None).generate_state(1) != fit_seed(1, math.inf).generate_state(1)).all()


def test_mle_table_uses_interior_fits_and_counts_endings():
    from pymc_unbounded_dp.examples.study.mle import PARAMETERS

    study = MLEStudy(epsilon_n=(1.0,), replicates=4)
    endings = [("interior", 1.0), ("interior", 3.0), ("boundary", 100.0), ("budget", -100.0)]
    records = [
        {
            "key": fit.key,
            "fit": dataclasses.asdict(fit),
            "converged": ending,
            "boundary": "tau" if ending == "boundary" else None,
            "method": "simulated",
            "seconds": 10.0 + fit.replicate,
            "estimate": {
                "beta[0]": beta0,
                "beta[1]": 0.0,
                "beta[2]": 0.0,
                "tau": 1.0,
                "mu[0]": 0.0,
                "mu[1]": 0.0,
            },
        }
        for fit, (ending, beta0) in zip(study.fits(), endings, strict=True)
    ]
    (table,) = study.tables(records).values()
    row = table.iloc[0]
    assert row["fits"] == 4 and row["beta[0]"] == "2.000 (1.414)"
    assert (row["interior"], row["boundary"], row["budget"]) == (0.5, 0.25, 0.25)
    assert row["s/fit mean (max)"] == "12 (13)"
    assert list(table.columns) == [
        "epsilon_n", "fits", *PARAMETERS, "interior", "boundary", "budget", "s/fit mean (max)"
    ]  # fmt: skip


def test_the_report_flags_short_chains_and_says_how_to_run_longer(tmp_path):
    """A fit whose n has R-hat 1.24 and a bulk ESS of 35 (2 chains): its cells are marked and a
    note names it; a study whose chains all converged prints no note."""
    study = make_study("regression", quick=True)

    def fake_records(bad_fit, short_fit=None):
        records = []
        for fit in study.fits():
            posterior = {}
            for label in ("beta[0]", "beta[1]", "beta[2]", "tau", "n"):
                bad, short = (label == "n" and fit == f for f in (bad_fit, short_fit))
                diagnostics = {"ess_bulk": 35.0, "r_hat": 1.24} if bad else {"r_hat": 1.001}
                diagnostics = {"ess_bulk": 50.0, "r_hat": None} if short else diagnostics
                posterior[label] = {
                    **{"mean": 0.0, "sd": 1.0, "lower": -1.0, "upper": 1.0, "true": 0.0},
                    **{"ess_bulk": 1500.0, **diagnostics},  # a stored NaN is None
                }
            record = {"fit": dataclasses.asdict(fit), "posterior": posterior, "seconds": 1.0}
            records.append({**record, "key": fit.key, "draws": [2, 2000]})
        return records

    bad_fit, short_fit = (next(f for f in study.fits() if f.epsilon_n == e) for e in (0.01, 10))
    records = fake_records(bad_fit, short_fit)
    text = pmdp.examples.study.write_report(study, records, tmp_path)["summary"].read_text()
    lines = text.splitlines()
    row = next(line for line in lines if "| unbounded | 0.01" in line and "1.24" in line)
    assert "1.24 !" in row and "35 !" in row and "1.001 !" not in text
    row = next(line for line in lines if "| unbounded | 10 " in line and "50" in line)
    assert "50 !" in row and "nan !" not in row
    note = text[text.index("## convergence") :]
    assert "in 2 of 4 fits" in note and "R-hat 1.24, bulk ESS 35" in note
    eps_s = f"{bad_fit.epsilon_s:g}"
    assert f"n of unbounded, epsilon_s {eps_s}, epsilon_n 0.01, replicate 0: R-hat" in note
    bounded = next(fit for fit in study.fits() if fit.bounded)  # no epsilon_n to name
    text = pmdp.examples.study.write_report(study, fake_records(bounded), tmp_path)["summary"]
    assert f"n of bounded, epsilon_s {eps_s}, replicate 0: R-hat 1.24" in text.read_text()
    assert f"--draws {4 * study.draws} --tune {2 * study.tune}" in note
    # one chain's fits: no R-hat (stored as None), only the ESS is flagged
    records = fake_records(None, short_fit)
    text = pmdp.examples.study.write_report(study, records, tmp_path)["summary"].read_text()
    assert "in 1 of 4 fits" in text and "replicate 0: bulk ESS 50)" in text
    paths = pmdp.examples.study.write_report(study, fake_records(None), tmp_path)
    clean = paths["summary"]
    assert paths["figure"] == tmp_path / "figures" / "coverage.png" and paths["figure"].is_file()
    assert "## convergence" not in clean.read_text() and " !" not in clean.read_text()
    assert "Fit time: 0.1 min in total." in clean.read_text()  # 4 fits of 1 s
    import pandas as pd

    fits = pd.read_csv(paths["fits"])  # one row per fit and parameter, no index column
    assert list(fits.columns) == list(study.per_fit(fake_records(None)).columns)
    assert len(fits) == 4 * 5
    timed = pmdp.examples.study.write_report(study, fake_records(None), tmp_path, elapsed=600.0)
    assert "Fit time: 0.1 min in total; this run: 10.0 min wall." in timed["summary"].read_text()


def test_store_writes_whole_files_and_refuses_other_settings(tmp_path):
    store = FitStore(tmp_path)
    store.claim("regression", {"draws": 20})
    store.claim("regression", {"draws": 20})
    with pytest.raises(SettingsMismatch, match="draws=20 there, 21 now"):
        store.claim("regression", {"draws": 21})
    store.write({"key": "a", "value": [1, 2]})
    assert store.done() == {"a"} and store.load("a") == {"key": "a", "value": [1, 2]}
    assert not list((tmp_path / "fits").glob(".*.tmp"))


def test_a_store_names_a_setting_added_since_as_a_difference(tmp_path):
    store = FitStore(tmp_path)
    store.claim("regression", {"draws": 20})
    with pytest.raises(SettingsMismatch, match="tune=None there, 5 now"):
        store.claim("regression", {"draws": 20, "tune": 5})


def test_the_quick_preset_yields_to_given_options_and_none_options_are_not_given():
    """``make_study`` takes the quick preset's values where no option is given; an option given
    wins over the preset, and ``None`` (an option the command line did not get) is no option."""
    quick = make_study("regression", quick=True)
    assert (quick.replicates, quick.draws) == (QUICK["regression"]["replicates"], 2000)
    mixed = make_study("regression", quick=True, replicates=3, draws=None)
    assert (mixed.replicates, mixed.draws) == (3, 2000)
    full = make_study("regression")
    assert make_study("regression", replicates=None, tune=None) == full


@pytest.mark.parametrize("name", sorted(QUICK))
def test_every_quick_preset_is_a_valid_study_of_its_own_values(name):
    """``pmdp reproduce NAME --quick``: each preset builds its study (whose checks refuse, e.g., a
    zero budget) and the study holds the preset's values."""
    study = make_study(name, quick=True)
    for option, value in QUICK[name].items():
        assert getattr(study, option) == value, option


def test_an_interrupted_chain_raises_instead_of_returning_a_short_fit(monkeypatch):
    """PyMC returns the partial trace when interrupted: that must never become a result."""
    original = pmdp.sample

    def interrupted_sample(*args, **kwargs):
        idata = original(*args, **kwargs)
        return idata.isel(draw=slice(0, 7))

    monkeypatch.setattr(pmdp.sampling, "sample", interrupted_sample)
    study = RegressionStudy(
        epsilon_s=(1.0,), epsilon_n=(), replicates=1, n=100, draws=15, tune=5, chains=1
    )
    with pytest.raises(TruncatedFit, match="1 chains x 7 draws, not the 1 x 15"):
        study.run(study.fits()[0])


# -- on Dask ---------------------------------------------------------------------------------------

GRID = ["reproduce", "regression", "--epsilon-s", "1", "--epsilon-n", "0.5", "--replicates", "1"]


def test_results_do_not_depend_on_the_number_of_workers(tmp_path):
    runs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        started = time.perf_counter()
        result = run_pmdp(*GRID, *TINY, "--workers", str(workers), "--out", str(out))
        wall_minutes = (time.perf_counter() - started) / 60
        assert result.returncode == 0, result.stderr
        assert f"local cluster of {workers} workers" in result.stdout
        assert not re.search(r"\d+/\d+ \[\d", result.stderr)  # no progress bar (--no-progress)
        # the progress line counts the fits and the minutes they took (within this call's)
        done, minutes = re.search(r"(\d+) fits in ([\d.]+) min", result.stdout).groups()
        assert int(done) == 2 and float(minutes) <= wall_minutes + 0.05
        runs[workers] = {k: without_timing(r) for k, r in records(out).items()}
    assert len(runs[1]) == 2 and runs[1] == runs[2]
    means = {k: r["posterior"]["beta[1]"]["mean"] for k, r in runs[1].items()}
    assert len(set(means.values())) == 2  # different noise and chains per fit


def _start(argv, out):
    return subprocess.Popen(
        pmdp_command(*argv, "--out", str(out)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_more_fits(process, out: Path, than: int, limit: float = 300.0) -> None:
    start = time.monotonic()
    while time.monotonic() - start < limit:
        if len(list((out / "fits").glob("*.json"))) > than:
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    raise AssertionError("no fit finished in time")


def _interrupt(out: Path, argv: list[str], sig: int) -> dict[str, bytes]:
    """Start the study, signal its process group (as Ctrl-C does) as soon as one more fit is
    stored -- the other worker's fit is then sampling -- and check what was kept."""
    before = len(records(out)) if (out / "fits").is_dir() else 0
    process = _start(argv, out)
    _wait_for_more_fits(process, out, before)
    os.killpg(process.pid, sig)
    try:
        process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    if sig == signal.SIGINT:
        assert process.returncode == 130
    kept = records(out)
    assert before < len(kept) < 6, "the signal came after the study finished: nothing was tested"
    assert all(r["draws"] == [1, 300] for r in kept.values())
    if sig == signal.SIGINT:  # an interrupted write removes its temporary file (a SIGKILL cannot)
        assert not list((out / "fits").glob(".*.tmp"))
    return {k: (out / "fits" / f"{k}.json").read_bytes() for k in kept}


def test_a_killed_study_loses_nothing_fakes_nothing_and_resumes(tmp_path):
    """SIGINT (exit 130), then SIGKILL of the resumed run, then a resume to the end: every
    finished fit is kept byte for byte, none is run twice, none is stored short."""
    out = tmp_path / "study"
    argv = [
        *GRID,
        "--epsilon-n",
        "0.5,10",
        "--replicates",
        "2",
        "--draws",
        "300",
        "--tune",
        "20",
        "--chains",
        "1",
        "--records",
        "200",
        "--workers",
        "2",
        "--no-progress",
    ]
    kept = _interrupt(out, argv, signal.SIGINT)
    kept_after_kill = _interrupt(out, argv, signal.SIGKILL)
    assert all(kept_after_kill[k] == data for k, data in kept.items())

    result = run_pmdp(*argv, "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"{len(kept_after_kill)} already in" in result.stdout
    after = records(out)
    assert len(after) == 6 and all(r["draws"] == [1, 300] for r in after.values())
    assert all(
        (out / "fits" / f"{k}.json").read_bytes() == data for k, data in kept_after_kill.items()
    )
    assert not list((out / "fits").glob(".*.tmp"))  # the resume removed what SIGKILL left


def test_a_resume_removes_the_temporary_files_of_killed_writes(tmp_path):
    store = FitStore(tmp_path)
    store.claim("regression", {"draws": 10})
    store.write({"key": "a", "value": 1})
    leftover = store.fits / ".b.json.0123.tmp"
    leftover.write_text('{"key": "b", "val')  # a write cut short before its rename
    store.claim("regression", {"draws": 10})
    assert not leftover.exists() and store.done() == {"a"} and store.load("a")["value"] == 1


def test_a_write_killed_before_its_rename_leaves_a_hidden_file_the_next_claim_removes(
    tmp_path, monkeypatch
):
    """A kill leaves the temporary file (no clean-up runs): it is a hidden ``.*.tmp`` file, never
    listed as a fit, and the resume's claim removes it."""
    store = FitStore(tmp_path)
    store.claim("regression", {"draws": 10})

    def killed(*args):
        raise SystemExit  # the rename never happens ...

    monkeypatch.setattr(os, "replace", killed)
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)  # ... nor clean-up
    with pytest.raises(SystemExit):
        store.write({"key": "a", "value": 1})
    monkeypatch.undo()
    (leftover,) = store.fits.iterdir()
    assert leftover.name.startswith(".a.json.") and leftover.suffix == ".tmp"
    assert store.done() == set()
    store.claim("regression", {"draws": 10})
    assert not list(store.fits.iterdir())


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    store = FitStore(tmp_path)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write({"key": "a", "value": 1})
    assert not list(store.fits.iterdir())


def test_reproduce_runs_on_a_separately_started_scheduler(tmp_path):
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler = subprocess.Popen(
        [*dask, "--scheduler-file", str(scheduler_file), "--port", "0", "--no-dashboard"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    worker = None
    try:
        for _ in range(600):
            if scheduler_file.is_file() and scheduler_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(scheduler_file.read_text())["address"]
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--nthreads",
                "1",
                "--nworkers",
                "1",
                "--no-dashboard",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        out = tmp_path / "study"
        result = run_pmdp(*GRID, *TINY, "--scheduler", address, "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert f"running on {address}" in result.stdout
        assert len(records(out)) == 2
    finally:
        for process in (worker, scheduler):
            if process is not None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)


# -- replicates, settings and the data behind each record (issue 32) ------------------------------
# The samplers are replaced by fakes that record the model and the seed they are given: what is
# checked here is the study's bookkeeping (which data, which release, which seed), in seconds.
def _fake_idata(chains: int, draws: int, shapes: dict):
    import arviz as az
    import numpy as np

    rng = np.random.default_rng(0)
    posterior = {k: rng.normal(size=(chains, draws, *s)) for k, s in shapes.items()}
    if az.__version__.startswith("0."):
        return az.from_dict(posterior=posterior)
    return az.from_dict({"posterior": posterior})


def _released(model) -> tuple[list[float], int | None, object, object]:
    """The sums the model conditions on, its ``n_dp``, and their mechanisms."""
    import numpy as np

    from pymc_unbounded_dp._registry import model_blocks, observed_value

    blocks = model_blocks(model)
    values = np.concatenate(
        [observed_value(model, s.release_rv).reshape(-1) for s in blocks.sums]
    ).tolist()
    (mechanism,) = {s.mechanism for s in blocks.sums}
    if not blocks.sample_sizes:
        return values, None, mechanism, None
    (size,) = blocks.sample_sizes
    return values, int(observed_value(model, size.release_rv)), mechanism, size.mechanism


def _run_with_fake_sample(study, monkeypatch, shapes):
    import pymc as pm

    calls = {}

    def fake_sample(*args, **kwargs):
        model = pm.modelcontext(kwargs.get("model"))
        names = {**shapes, **({"n": ()} if model_blocks_have_n(model) else {})}
        calls["last"] = (model, kwargs["random_seed"])
        return _fake_idata(kwargs["chains"], kwargs["draws"], names)

    monkeypatch.setattr(pmdp.sampling, "sample", fake_sample)
    out = []
    for fit in study.fits():
        record = study.run(fit)
        out.append((fit, record, *calls.pop("last")))
    return out


def model_blocks_have_n(model) -> bool:
    from pymc_unbounded_dp._registry import model_blocks

    return bool(model_blocks(model).sample_sizes)


#: A budget of the statistics whose noise (scale about 1e-7) leaves the released values equal to
#: the exact statistics of the fit's data to 1e-5: there a record must name its replicate's data.
NOISELESS = 1e8


def _check_the_grid(study, runs, exact_of):
    """Every record carries the release its fit's model conditions on (at ``NOISELESS``: the
    exact statistics of its own replicate's data); replicates differ in the release and in its
    noise; the release's mechanisms are the fit's budgets; every fit has its own sampler seed."""
    import numpy as np

    seeds = set()
    by_replicate = {}
    for fit, record, model, seed in runs:
        values, n_dp, mechanism, n_mechanism = _released(model)
        assert record["released"] == values, fit.key  # the record names the data it fitted
        assert record["n_dp"] == n_dp and record["fit"] == dataclasses.asdict(fit)
        assert mechanism.epsilon == pytest.approx(fit.epsilon_s), fit.key
        if fit.epsilon_s >= NOISELESS:
            np.testing.assert_allclose(values, exact_of(fit.replicate), rtol=0, atol=1e-5)
        if fit.bounded:
            assert n_mechanism is None
        else:
            assert n_mechanism.epsilon == pytest.approx(fit.epsilon_n), fit.key
        seeds.add(seed)
        noise = np.subtract(values, exact_of(fit.replicate))
        by_replicate.setdefault((fit.epsilon_s, fit.variant, fit.epsilon_n), []).append(
            (values, noise)
        )
    assert len(seeds) == len(runs)
    for cell, replicates in by_replicate.items():
        assert len(replicates) == study.replicates > 1
        first_values, first_noise = replicates[0]
        for values, noise in replicates[1:]:
            assert values != first_values, cell  # another release per replicate
            assert not np.allclose(noise, first_noise, rtol=1e-3, atol=0), cell  # fresh noise
    return by_replicate


def test_regression_replicates_differ_and_records_name_the_data_they_fitted(monkeypatch):
    import numpy as np

    from pymc_unbounded_dp.examples import regression

    study = RegressionStudy(
        epsilon_s=(NOISELESS, 0.1), epsilon_n=(0.5,), replicates=2, n=200, draws=6, tune=2,
        chains=1, sampler="nuts",
    )  # fmt: skip
    runs = _run_with_fake_sample(study, monkeypatch, {"beta": (3,), "tau": ()})

    def exact_of(replicate):
        data = study.simulate(replicate)
        return regression.regression_statistics(data.x, data.y).tolist()

    _check_the_grid(study, runs, exact_of)
    data = [study.simulate(r) for r in range(2)]
    assert not np.array_equal(data[0].x, data[1].x)  # each replicate is its own data set
    np.testing.assert_array_equal(study.simulate(1).x, data[1].x)  # and a function of it
    for fit, record, _, _ in runs:
        assert record["n_true"] == data[fit.replicate].n
        # common random numbers by design: bounded and unbounded fits of a (replicate,
        # epsilon_s) see the same noisy statistics; another epsilon_s, other noise
        twins = [
            r for f, r, _, _ in runs if (f.replicate, f.epsilon_s) == (fit.replicate, fit.epsilon_s)
        ]
        assert all(t["released"] == record["released"] for t in twins)
        others = [
            r
            for f, r, _, _ in runs
            if f.replicate == fit.replicate and f.epsilon_s != fit.epsilon_s
        ]
        assert all(o["released"] != record["released"] for o in others)


def test_atus_replicates_are_new_releases_of_the_same_data(monkeypatch):
    from pymc_unbounded_dp.examples import atus
    from pymc_unbounded_dp.examples.study import AtusStudy

    study = AtusStudy(
        epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=2, draws=6, tune=2, chains=1,
        data="simulated",
    )  # fmt: skip
    runs = _run_with_fake_sample(study, monkeypatch, {"alpha": (3,)})
    exact = atus.privatize_atus(study.simulate(0), 1e12, 1e12, seed=0).values.tolist()
    _check_the_grid(study, runs, lambda replicate: exact)
    assert study.simulate(0) is study.simulate(1)  # the survey is fixed; releases vary


def _fake_mcem(calls: dict):
    """A stand-in for ``mcem`` that keeps ``(model, random_seed)`` of its last call in
    ``calls["last"]`` and returns a converged result of the regression's parameters."""
    from types import SimpleNamespace

    from pymc_unbounded_dp.mcem import Convergence

    def fake_mcem(model, random_seed=None, **options):
        calls["last"] = (model, random_seed)
        value = {"beta": [0.0, 0.0, 0.0], "tau": 1.0, "mu": [0.0, 0.0]}
        return SimpleNamespace(
            estimate=value, standard_error=value, mc_error=value,
            converged=Convergence("interior"), boundary=None, method="em",
            missing_information=0.5, reason="fake",
        )  # fmt: skip

    return fake_mcem


def test_mle_replicates_differ_and_records_name_the_data_they_fitted(monkeypatch):
    import copy
    from types import SimpleNamespace

    import numpy as np

    from pymc_unbounded_dp.examples import regression
    from pymc_unbounded_dp.examples.study import mle
    from pymc_unbounded_dp.mechanisms import DiscreteLaplace

    calls = {}
    fake_mcem = _fake_mcem(calls)

    study = MLEStudy(epsilon_s=NOISELESS, epsilon_n=(0.5, math.inf), replicates=2, n=200)
    monkeypatch.setattr(
        sys.modules["pymc_unbounded_dp.mcem"], "mcem", fake_mcem
    )  # as run() reads it
    # the first uniforms of each noise stream: the statistics' and the count's are not one stream
    streams = {}
    privatize, simulate = regression.privatize_regression, DiscreteLaplace.simulate

    def recorded_privatize(data, epsilon_s, epsilon_n, seed):
        streams["statistics"] = np.random.default_rng(seed).random(4).tolist()
        return privatize(data, epsilon_s, epsilon_n, seed)

    def recorded_simulate(self, *args, **kwargs):  # the last call is run()'s, of the count
        streams["count"] = copy.deepcopy(kwargs["random_seed"]).random(4).tolist()
        streams["noise"] = simulate(self, *args, **kwargs)
        return streams["noise"]

    monkeypatch.setattr(regression, "privatize_regression", recorded_privatize)
    monkeypatch.setattr(DiscreteLaplace, "simulate", recorded_simulate)
    clock = iter(10.0 + 2.5 * k for k in range(100))  # a fit's time: 2.5 s on this clock
    monkeypatch.setattr(mle, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    runs = []
    for fit in study.fits():
        record = study.run(fit)
        runs.append((fit, record, *calls.pop("last")))
        if not fit.bounded:
            assert streams.pop("count") != streams.pop("statistics"), fit.key
            assert record["n_dp"] == record["n"] + int(streams.pop("noise"))
        assert record["seconds"] == 2.5
        # the estimates of the model's parameters, one entry per scalar component
        assert sorted(record["estimate"]) == [
            "beta[0]", "beta[1]", "beta[2]", "mu[0]", "mu[1]", "tau"
        ]  # fmt: skip

    def exact_of(replicate):
        data = regression.simulate_regression(study.n, seed=fit_seed(study.seed, 0, replicate))
        return regression.regression_statistics(data.x, data.y).tolist()

    _check_the_grid(study, runs, exact_of)


def test_the_regression_study_uses_the_gibbs_step_only_when_asked():
    """``sampler="gibbs"`` passes the example's conjugate step to the fit; ``"nuts"`` leaves the
    parameters to PyMC's NUTS; unbounded fits also get the n moves their release suggests."""
    from pymc_unbounded_dp.conjugate import ConjugateGibbs
    from pymc_unbounded_dp.examples import regression

    release = regression.privatize_regression(regression.simulate_regression(200, seed=1), 1, 1, 2)
    for sampler in ("gibbs", "nuts"):
        study = RegressionStudy(sampler=sampler, replicates=1)
        for fit in study.fits()[:2]:
            model = study.model(release, fit)
            options = study.sample_options(model, release, fit)
            assert isinstance(options.get("step"), ConjugateGibbs) == (sampler == "gibbs")
            assert ("n_moves" in options) == (not fit.bounded)
    assert {fit.bounded for fit in RegressionStudy(replicates=1).fits()[:2]} == {True, False}


# -- the study's own arithmetic: intervals, coverage, tables, stored values (mutation survivors) --


def test_posterior_table_is_the_equal_tailed_interval_of_the_pooled_draws():
    """Against NumPy on the pooled draws: the default ``prob`` 0.95 and another (0.5). The
    tolerance (0.02, from a slightly different quantile rule) is far below what a wrong tail
    would move the bounds (the 0.05 quantile of N(0, 1) is 0.32 from the 0.025 one)."""
    import numpy as np

    from pymc_unbounded_dp.examples.study.base import posterior_table

    idata = _fake_idata(2, 2000, {"beta": (2,), "tau": ()})
    pooled = {
        "beta[0]": idata["posterior"]["beta"].values[..., 0].reshape(-1),
        "beta[1]": idata["posterior"]["beta"].values[..., 1].reshape(-1),
        "tau": idata["posterior"]["tau"].values.reshape(-1),
    }
    for prob, table in ((0.95, posterior_table(idata, ["beta", "tau"])),
                        (0.5, posterior_table(idata, ["beta", "tau"], prob=0.5))):  # fmt: skip
        assert list(table.columns) == ["mean", "sd", "lower", "upper", "ess_bulk", "r_hat"]
        assert list(table.index) == list(pooled)
        for label, draws in pooled.items():
            lower, upper = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2])
            row = table.loc[label]
            assert row["lower"] == pytest.approx(lower, abs=0.02), (prob, label)
            assert row["upper"] == pytest.approx(upper, abs=0.02), (prob, label)
            assert row["mean"] == pytest.approx(draws.mean(), abs=1e-12)
            assert row["sd"] == pytest.approx(draws.std(ddof=1), rel=1e-9)


def test_a_fit_is_covered_when_its_interval_holds_the_truth_ends_included():
    study = RegressionStudy(epsilon_s=(1.0,), epsilon_n=(), replicates=1)
    (fit,) = study.fits()
    truths = {"below": -2.0, "at lower": -1.0, "inside": 0.5, "at upper": 1.0, "above": 3.0}
    posterior = {
        label: {"mean": 0.0, "sd": 1.0, "lower": -1.0, "upper": 1.0, "true": true,
                "ess_bulk": 500.0, "r_hat": 1.0}
        for label, true in {**truths, "no truth": None}.items()
    }  # fmt: skip
    record = {"fit": dataclasses.asdict(fit), "posterior": posterior, "draws": [2, 100]}
    frame = study.per_fit([{**record, "key": fit.key, "seconds": 1.0}]).set_index("parameter")
    expected = {"below": False, "at lower": True, "inside": True, "at upper": True}
    assert frame["covered"].to_dict() == {**expected, "above": False, "no truth": None}
    assert (frame["width"] == 2.0).all()


def test_settings_are_stored_as_json_with_only_non_finite_floats_as_strings():
    from pymc_unbounded_dp.examples.study.base import jsonable

    value = {"grid": (0.5, math.inf), "nested": [(1, -math.inf)], "prob": 0.95, "n": 3}
    assert jsonable(value) == {"grid": [0.5, "inf"], "nested": [[1, "-inf"]], "prob": 0.95, "n": 3}
    settings = RegressionStudy(replicates=1).settings()
    assert settings["prob"] == 0.95 and settings["draws"] == 1000
    assert json.loads(json.dumps(settings)) == settings


def test_a_store_refuses_another_study_with_the_same_settings_in_either_order(tmp_path):
    for first, second in (("regression", "atus"), ("atus", "regression")):
        store = FitStore(tmp_path / first)
        store.claim(first, {"draws": 20})
        with pytest.raises(SettingsMismatch, match="study"):
            store.claim(second, {"draws": 20})


def test_a_trace_of_another_size_than_asked_is_refused(monkeypatch):
    """More draws than asked (tuning draws kept) are refused as surely as fewer."""
    study = RegressionStudy(
        epsilon_s=(1.0,), epsilon_n=(), replicates=1, n=100, draws=6, tune=2, chains=1,
        sampler="nuts",
    )  # fmt: skip

    def too_long(*args, **kwargs):
        return _fake_idata(kwargs["chains"], kwargs["draws"] + 4, {"beta": (3,), "tau": ()})

    monkeypatch.setattr(pmdp.sampling, "sample", too_long)
    with pytest.raises(TruncatedFit, match="1 chains x 10 draws, not the 1 x 6"):
        study.run(study.fits()[0])


def _tables_from_fake_fits(study, monkeypatch, shapes):
    runs = _run_with_fake_sample(study, monkeypatch, shapes)
    records = [record for _, record, _, _ in runs]
    for record in records:
        if record["n_dp"] is None:
            assert "n" not in record["posterior"]
        else:  # an unbounded fit's truth of n is its data's n
            assert record["posterior"]["n"]["true"] == record["n_true"], record["key"]
    return records, study.tables(records)


def test_regression_tables_have_a_column_per_parameter_and_one_time_per_fit(monkeypatch):
    study = RegressionStudy(
        epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=2, n=200, draws=6, tune=2, chains=1,
        sampler="nuts",
    )  # fmt: skip
    records, tables = _tables_from_fake_fits(study, monkeypatch, {"beta": (3,), "tau": ()})
    means = tables["posterior means (averaged over replicates)"]
    grid = ["epsilon_s", "variant", "epsilon_n"]
    assert list(means.columns) == [*grid, "beta[0]", "beta[1]", "beta[2]", "tau", "n"]
    diagnostics = tables["sampling diagnostics"]
    assert list(diagnostics.columns) == [
        *grid, "ess_bulk beta[1]", "ess_bulk tau", "ess_bulk n",
        "r_hat beta[1]", "r_hat tau", "r_hat n", "s / fit",
    ]  # fmt: skip
    unbounded = [r for r in records if r["n_dp"] is not None]
    row = diagnostics[diagnostics["variant"] == "unbounded"].iloc[0]
    assert row["s / fit"] == pytest.approx(sum(r["seconds"] for r in unbounded) / 2)
    mean_n = sum(r["posterior"]["n"]["mean"] for r in unbounded) / 2
    assert means[means["variant"] == "unbounded"].iloc[0]["n"] == pytest.approx(mean_n)


def test_atus_tables_and_its_data_simulated_or_packaged(monkeypatch):
    from pymc_unbounded_dp.conjugate import ConjugateGibbs
    from pymc_unbounded_dp.examples import atus
    from pymc_unbounded_dp.examples.study import AtusStudy

    study = AtusStudy(
        epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=2, draws=6, tune=2, chains=1,
        data="simulated",
    )  # fmt: skip
    records, tables = _tables_from_fake_fits(study, monkeypatch, {"alpha": (3,)})
    grid = ["epsilon_s", "variant", "epsilon_n"]
    sds = tables["posterior SDs (averaged over replicates)"]
    assert list(sds.columns) == [*grid, "alpha[0]", "alpha[1]", "alpha[2]", "n"]
    assert list(tables["sampling diagnostics"].columns) == [
        *grid, "ess_bulk alpha[0]", "ess_bulk n", "r_hat alpha[0]", "r_hat n", "s / fit",
    ]  # fmt: skip
    for record in records:  # the simulated survey's truth is the MLE it was simulated from
        truths = [record["posterior"][f"alpha[{j}]"]["true"] for j in range(3)]
        assert truths == [float(a) for a in atus.MLE_ALPHA]
    assert study.simulate(0).simulated
    packaged = AtusStudy(replicates=1)
    assert not packaged.simulate(0).simulated  # the packaged ATUS 2019 data
    assert packaged.truth(packaged.simulate(0)) == {}  # no truth to cover
    release = atus.privatize_atus(study.simulate(0), 1.0, 0.5, seed=3)
    for fit in study.fits()[:2]:
        options = study.sample_options(study.model(release, fit), release, fit)
        assert isinstance(options["step"], ConjugateGibbs)
        assert ("n_moves" in options) == (not fit.bounded)


# -- a hand audit (issue 32): seeds per fit, noise per replicate, the data behind a record, what a
# setting changes, and the report's counts (tools/mutation/audits/2026-12-06-study.json) ----------


def _atus_study(**options):
    from pymc_unbounded_dp.examples.study import AtusStudy

    values = {"epsilon_s": (1.0,), "epsilon_n": (), "replicates": 1, "draws": 6, "tune": 2,
              "chains": 1, "data": "simulated", **options}  # fmt: skip
    return AtusStudy(**values)


def _run_atus_with_fake_sample(study, monkeypatch):
    """:func:`_run_with_fake_sample` without building the Gibbs step the fake sampler would not
    use (its compilation is most of a fit's set-up)."""
    from pymc_unbounded_dp.examples import atus

    monkeypatch.setattr(atus, "atus_gibbs_step", lambda model: None)
    return _run_with_fake_sample(study, monkeypatch, {"alpha": (3,)})


def test_every_fit_samples_with_its_own_seed_also_fits_that_differ_only_in_epsilon_n(
    monkeypatch,
):
    """Two unbounded fits of one data set and one release of the statistics, told apart only by
    ``epsilon_n``: their chains must not be the same random numbers."""
    study = _atus_study(epsilon_n=(0.5, 2.0))
    runs = _run_atus_with_fake_sample(study, monkeypatch)
    assert [fit.epsilon_n for fit, *_ in runs] == [None, 0.5, 2.0]
    seeds = [seed for *_, seed in runs]
    assert len(set(seeds)) == 3, seeds


def test_a_trace_with_fewer_chains_than_asked_is_refused(monkeypatch):
    """A chain lost on the way (one of two returned, every draw there) is no result either."""
    from pymc_unbounded_dp.examples import atus

    study = _atus_study(chains=2)
    monkeypatch.setattr(atus, "atus_gibbs_step", lambda model: None)

    def one_chain_short(*args, **kwargs):
        return _fake_idata(kwargs["chains"] - 1, kwargs["draws"], {"alpha": (3,)})

    monkeypatch.setattr(pmdp.sampling, "sample", one_chain_short)
    with pytest.raises(TruncatedFit, match="1 chains x 6 draws, not the 2 x 6"):
        study.run(study.fits()[0])


def test_an_atus_study_of_a_data_folder_fits_that_folders_data(tmp_path, monkeypatch):
    """``data=<folder>``: the fits are of the survey in that folder (female.csv, then male.csv),
    not of the packaged one, and the record's count is that folder's."""
    import numpy as np
    import pandas as pd

    from pymc_unbounded_dp.examples import atus

    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    shares = {
        "female.csv": [[0.5, 0.2, 0.3], [0.4, 0.1, 0.5]],
        "male.csv": [[0.6, 0.1, 0.3], [0.2, 0.2, 0.6], [0.3, 0.3, 0.4]],
    }
    for name, rows in shares.items():
        pd.DataFrame(rows, columns=list(atus.COLUMNS)).to_csv(tmp_path / name)
    study = _atus_study(data=str(tmp_path), epsilon_s=(NOISELESS,), epsilon_n=(0.5,))
    data = study.simulate(0)
    np.testing.assert_array_equal(data.x, shares["female.csv"] + shares["male.csv"])
    assert not data.simulated and study.truth(data) == {}
    exact = atus.atus_statistics(data.x).tolist()
    for fit, record, _, _ in _run_atus_with_fake_sample(study, monkeypatch):
        assert record["n_true"] == 5 and record["settings"]["data"] == str(tmp_path.resolve()), (
            fit.key
        )
        # at a noiseless epsilon_s the released sums are those of these 5 records
        np.testing.assert_allclose(record["released"], exact, rtol=0, atol=1e-5)


def test_an_atus_study_records_the_data_folder_it_took_from_the_environment(tmp_path, monkeypatch):
    """``data=None`` with ``$PMDP_ATUS_DIR`` set fits that folder's survey, so the study's settings
    (stored with every fit, compared on resume) name that folder, not ``None``: a study folder
    made with the variable set is not resumed on the packaged data, or the reverse."""
    import pandas as pd

    from pymc_unbounded_dp.examples import atus

    rows = [[0.5, 0.2, 0.3], [0.4, 0.1, 0.5]]
    for name in atus.ATUS_FILES:
        pd.DataFrame(rows, columns=list(atus.COLUMNS)).to_csv(tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(atus.ATUS_ENV, ".")  # relative: recorded as the absolute folder
    from_environment = _atus_study(data=None, epsilon_s=(1.0,), epsilon_n=(0.5,))
    assert from_environment.settings()["data"] == str(tmp_path.resolve())
    assert from_environment.simulate(0).n == 4
    monkeypatch.delenv(atus.ATUS_ENV)
    packaged = _atus_study(data=None, epsilon_s=(1.0,), epsilon_n=(0.5,))
    assert packaged.settings()["data"] is None and packaged.simulate(0).n == 6656
    assert from_environment.settings() != packaged.settings()


def test_mle_fits_of_a_data_set_share_the_statistics_noise_but_not_the_sampler_seed(monkeypatch):
    """Common random numbers: every ``epsilon_n`` of a data set (``inf`` too) fits the same noisy
    statistics; each fit still has its own MCEM seed, also two unbounded fits."""
    study = MLEStudy(epsilon_s=1.0, epsilon_n=(0.5, 2.0, math.inf), replicates=1, n=200)
    runs = _run_mle_with_fake_mcem(study, monkeypatch)
    released = [record["released"] for _, record, _ in runs]
    assert released[0] == released[1] == released[2]
    seeds = [seed for *_, seed in runs]
    assert len(set(seeds)) == 3, seeds


def test_mle_count_noise_is_fresh_per_replicate_and_scaled_by_epsilon_n(monkeypatch):
    """Every data set has ``n = 200`` records: the released counts differ across replicates only
    by their noise, which must be drawn anew per replicate and have the scale of ``epsilon_n``
    (0.01: about 100), whatever the statistics' budget (here noiseless)."""
    study = MLEStudy(epsilon_s=NOISELESS, epsilon_n=(0.01,), replicates=2, n=200)
    runs = _run_mle_with_fake_mcem(study, monkeypatch)
    noise = [record["n_dp"] - record["n"] for _, record, _ in runs]
    assert all(record["n"] == 200 for _, record, _ in runs)
    assert noise[0] != noise[1], noise
    assert all(n != 0 for n in noise) and max(abs(n) for n in noise) > 10, noise


def _run_mle_with_fake_mcem(study, monkeypatch):
    """``(fit, record, MCEM seed)`` per fit, ``mcem`` replaced by a fake."""

    from pymc_unbounded_dp.examples import regression

    calls = {}
    fake_mcem = _fake_mcem(calls)

    monkeypatch.setattr(sys.modules["pymc_unbounded_dp.mcem"], "mcem", fake_mcem)
    # the model's compilation is most of a fit's set-up; MCEM gets the release it was built from
    monkeypatch.setattr(regression, "regression_model", lambda release, bounded: release)
    runs = []
    for fit in study.fits():
        record = study.run(fit)
        release, seed = calls.pop("last")
        assert record["released"] == release.values.tolist(), fit.key  # the data it fitted
        assert record["n_dp"] == (None if fit.bounded else release.n_dp), fit.key
        assert record["n"] == release.n, fit.key
        runs.append((fit, record, seed))
    return runs


def test_a_store_refuses_a_resume_with_any_option_that_changes_a_fit(tmp_path, monkeypatch):
    """The seed, chain lengths, interval, records, sampler, data, the MLE's budget and options:
    each changes what a fit computes, so a folder made with another value is refused, naming the
    option; the grid's options (replicates, budgets' grids) only choose which fits exist."""
    from pymc_unbounded_dp.examples import atus

    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    cases = [
        (RegressionStudy(replicates=1),
         {"seed": 1, "draws": 7, "tune": 9, "chains": 3, "prob": 0.9, "n": 300,
          "sampler": "nuts"},
         {"replicates": 3, "epsilon_s": (2.0,), "epsilon_n": (0.5,)}),
        (_atus_study(), {"seed": 1, "draws": 7, "data": None}, {"replicates": 2}),
        (MLEStudy(replicates=1),
         {"seed": 1, "n": 300, "epsilon_s": 0.5, "mcem_options": (("replicates", 20),)},
         {"replicates": 3, "epsilon_n": (0.5,)}),
    ]  # fmt: skip
    for study, settings, grid in cases:
        for option, value in {**settings, **grid}.items():
            store = FitStore(tmp_path / f"{study.name}-{option}")
            store.claim(study.name, study.settings())
            other = dataclasses.replace(study, **{option: value})
            if option in grid:
                store.claim(other.name, other.settings())  # a resume, larger or smaller grid
                continue
            with pytest.raises(SettingsMismatch, match=f"{option}="):
                store.claim(other.name, other.settings())


def _posterior_records(study, chains: int, diagnostics: dict) -> list[dict]:
    """Records of every fit of ``study`` (parameters ``beta[0..2], tau`` and ``n``), each with
    ``diagnostics[(fit, label)]`` overriding ``r_hat 1.001, ess_bulk 1500``."""
    records = []
    for fit in study.fits():
        posterior = {
            label: {"mean": 0.0, "sd": 1.0, "lower": -1.0, "upper": 1.0, "true": 0.0,
                    "ess_bulk": 1500.0, "r_hat": 1.001, **diagnostics.get((fit, label), {})}
            for label in ("beta[0]", "beta[1]", "beta[2]", "tau", "n")
        }  # fmt: skip
        records.append(
            {"key": fit.key, "fit": dataclasses.asdict(fit), "posterior": posterior,
             "draws": [chains, 1000], "seconds": 1.0}
        )  # fmt: skip
    return records


def _convergence_note(study, records) -> str:
    """The report's convergence section and its marked diagnostics table (no figure drawn)."""
    from pymc_unbounded_dp.examples.study import reporting

    per_fit = study.per_fit(records)
    flagged = reporting._flagged(per_fit)
    table = reporting._marked(study.tables(records)["sampling diagnostics"], flagged)
    return "\n".join(reporting._convergence_note(study, per_fit, flagged)), reporting.markdown(
        table
    )


def test_the_report_asks_a_bulk_ess_of_100_per_chain_of_the_fits_own_chains():
    """Four chains: a bulk ESS of 300 is short (below 400) and flagged; two chains: it passes."""
    study = make_study("regression", quick=True)
    fit = next(f for f in study.fits() if f.epsilon_n == 0.5)
    flagged = {(fit, "n"): {"ess_bulk": 300.0}}
    note, table = _convergence_note(study, _posterior_records(study, 4, flagged))
    assert "300 !" in table and "in 1 of 4 fits" in note and "bulk ESS 300)" in note, note
    note, table = _convergence_note(study, _posterior_records(study, 2, flagged))
    assert note == "" and " !" not in table


def test_the_convergence_note_counts_fits_not_grid_points_and_names_the_worst():
    """Two replicates, one fit flagged in each at the same grid point: 2 of 8 fits, and the worst
    named is the one with the larger R-hat (replicate 1's 1.3, not replicate 0's 1.05)."""
    study = make_study("regression", quick=True, replicates=2)
    first, second = (f for f in study.fits() if f.epsilon_n == 0.5)
    flagged = {(first, "n"): {"r_hat": 1.05}, (second, "n"): {"r_hat": 1.3}}
    note, table = _convergence_note(study, _posterior_records(study, 2, flagged))
    assert "in 2 of 8 fits" in note, note
    assert "epsilon_n 0.5, replicate 1: R-hat 1.3)" in note, note
    assert "1.175 !" in table  # the grid point's mean R-hat of n, marked


def test_atus_sd_table_averages_the_posterior_sds_over_replicates():
    """The SD table holds the fits' posterior SDs (averaged over replicates), the means table
    their means: two different numbers per fit here."""
    study = _atus_study(epsilon_n=(0.5,), replicates=2)
    records = []
    for fit in study.fits():
        labels = ["alpha[0]", "alpha[1]", "alpha[2]", *([] if fit.bounded else ["n"])]
        posterior = {
            label: {"mean": 10.0 + fit.replicate, "sd": 1.0 + 2 * fit.replicate,
                    "lower": 0.0, "upper": 20.0, "true": None, "ess_bulk": 900.0, "r_hat": 1.0}
            for label in labels
        }  # fmt: skip
        records.append(
            {"key": fit.key, "fit": dataclasses.asdict(fit), "posterior": posterior,
             "draws": [1, 6], "seconds": 1.0}
        )  # fmt: skip
    tables = study.tables(records)
    sds = tables["posterior SDs (averaged over replicates)"]
    means = tables["posterior means (averaged over replicates)"]
    assert (sds[["alpha[0]", "alpha[1]", "alpha[2]"]] == 2.0).all().all()  # (1 + 3) / 2
    assert (means[["alpha[0]", "alpha[1]", "alpha[2]"]] == 10.5).all().all()
    assert list(sds["n"].isna()) == [True, False] and sds["n"].iloc[1] == 2.0


def test_coverage_tables_count_replicates_and_list_the_largest_epsilon_s_first():
    """Two parameters and three replicates per grid point: ``reps`` is 3, not the 6 rows; rows go
    by ``epsilon_s`` from the largest, bounded before unbounded, ``epsilon_n`` upwards."""
    import pandas as pd

    from pymc_unbounded_dp.examples.study.reporting import coverage_table, mean_table

    rows = [
        {"parameter": name, "covered": True, "width": 1.0, "mean": 0.0, "epsilon_s": eps_s,
         "epsilon_n": eps_n, "variant": "bounded" if eps_n is None else "unbounded",
         "replicate": r}
        for eps_s in (1.0, 10.0)
        for eps_n in (0.5, None, 0.1)
        for name in ("beta[0]", "tau")
        for r in range(3)
    ]  # fmt: skip
    per_fit = pd.DataFrame(rows)
    grid = [["10", "bounded", "-"], ["10", "unbounded", "0.1"], ["10", "unbounded", "0.5"],
            ["1", "bounded", "-"], ["1", "unbounded", "0.1"], ["1", "unbounded", "0.5"]]  # fmt: skip
    for stat in ("coverage", "width"):
        table = coverage_table(per_fit, ["beta[0]", "tau"], stat)
        assert list(table["reps"]) == [3] * 6, stat
        assert table[["epsilon_s", "variant", "epsilon_n"]].to_numpy().tolist() == grid, stat
    table = mean_table(per_fit, ["beta[0]", "tau"], "mean")
    assert table[["epsilon_s", "variant", "epsilon_n"]].to_numpy().tolist() == grid


@dataclasses.dataclass(frozen=True)
class _Echo(Workload):
    """A workload whose fits return at once, and replicate ``failing`` raises."""

    name: ClassVar[str] = "echo"
    grid_fields: ClassVar[tuple[str, ...]] = ("replicates",)
    failing: ClassVar[int] = 1
    replicates: int = 3

    def fits(self):
        return [Fit("echo", "bounded", 1.0, None, r) for r in range(self.replicates)]

    def run(self, fit):
        if fit.replicate == self.failing:
            raise ValueError(f"replicate {fit.replicate} failed")
        return {"key": fit.key, "replicate": fit.replicate, "seconds": 0.0}

    def tables(self, records):
        return {}


def test_a_failed_fit_is_reported_by_its_key_not_stored_and_retried_by_a_rerun(
    tmp_path, monkeypatch, caplog
):
    """The other fits are stored and counted; the failure names the fit; a rerun runs only it,
    its progress bar starting at the two fits already stored."""
    import logging

    import tqdm.auto

    caplog.set_level(logging.CRITICAL, logger="distributed.worker")  # the failure, logged
    from distributed import Client, LocalCluster

    from pymc_unbounded_dp.examples.study import StudyFailed, running

    @contextlib.contextmanager
    def in_process(scheduler=None, workers=None):
        with (
            LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0")
            as cluster,
            Client(cluster) as client,
        ):  # fmt: skip
            yield client

    monkeypatch.setattr(running, "study_client", in_process)
    study, store, log = _Echo(), FitStore(tmp_path), []
    keys = [fit.key for fit in study.fits()]
    started = time.perf_counter()
    with pytest.raises(StudyFailed) as failed:
        running.run_study(study, store, progressbar=False, log=log.append)
    wall_minutes = (time.perf_counter() - started) / 60
    assert failed.value.errors == {keys[1]: "ValueError: replicate 1 failed"}
    assert store.done() == {keys[0], keys[2]}
    assert log[0] == f"echo: 3 fits, 0 already in {store.fits}, 3 to run"
    minutes = re.fullmatch(r"2 fits in ([\d.]+) min", log[-1]).group(1)
    assert float(minutes) <= wall_minutes + 0.05, (log[-1], wall_minutes)  # minutes, not seconds
    monkeypatch.setattr(_Echo, "failing", -1)
    log.clear()
    bars = []

    class Bar:  # what the progress bar is told: it starts at the fits already stored
        def __init__(self, **options):
            self.options, self.count = options, options["initial"]
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self):
            self.count += 1

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    done = running.run_study(study, store, progressbar=True, log=log.append)
    assert [(b.options["total"], b.options["initial"], b.count) for b in bars] == [(3, 2, 3)]
    assert [record["key"] for record in done] == keys
    assert log[0] == f"echo: 3 fits, 2 already in {store.fits}, 1 to run"
    assert re.fullmatch(r"1 fits in [\d.]+ min", log[-1]), log


@pytest.mark.parametrize(
    ("workers", "cores", "n_workers"), [(None, 7, 7), (3, 7, 3), (None, None, 1)]
)
def test_a_local_cluster_has_one_single_threaded_process_per_core_unless_told(
    monkeypatch, workers, cores, n_workers
):
    """``study_client`` without a scheduler: ``workers`` processes of one thread each, one per
    core by default, and one where the number of cores is unknown (``os.cpu_count()`` is None);
    a stand-in for Dask's cluster and client records what it is asked for."""
    import os

    import distributed

    from pymc_unbounded_dp.examples.study import running

    asked = {}

    class Recorded(contextlib.nullcontext):
        def __init__(self, *args, **options):
            asked.setdefault(type(self).__name__, options)
            super().__init__(self)

    monkeypatch.setattr(distributed, "LocalCluster", type("LocalCluster", (Recorded,), {}))
    monkeypatch.setattr(distributed, "Client", type("Client", (Recorded,), {}))
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    with running.study_client(None, workers):
        pass
    expected = {"n_workers": n_workers, "threads_per_worker": 1, "processes": True}
    assert {k: asked["LocalCluster"][k] for k in expected} == expected
