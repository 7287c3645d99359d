"""The ``pmdp`` command line: errors, ``pmdp demo``, ``pmdp reproduce`` (tiny grids, resume)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from pymc_unbounded_dp import cli
from pymc_unbounded_dp.examples import atus

TINY = ["--draws", "20", "--tune", "20", "--chains", "1", "--no-progress"]


def run(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- usage errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, option",
    [
        (["demo", "--bogus"], "--bogus"),
        (["demo", "--draws", "0"], "--draws"),
        (["demo", "--draws", "many"], "--draws"),
        (["demo", "--epsilon-s", "-1"], "--epsilon-s"),
        (["demo", "--records", "2e8"], "--records"),
        (["demo", "--records", "0.5"], "--records"),
        (["demo", "--augment", "banana"], "--augment"),
        (["reproduce", "survey"], "study"),
        (["reproduce", "regression", "--replicates", "0"], "--replicates"),
        (["reproduce", "atus", "--epsilon-n", "0.1,x"], "--epsilon-n"),
        (["reproduce", "regression", "--epsilon-n", "1,inf"], "--epsilon-n"),
        (["reproduce", "mcem", "--draws", "100"], "--draws"),
        (["reproduce", "mcem", "--epsilon-s", "1,2"], "--epsilon-s"),
        (["reproduce", "atus", "--records", "10"], "--records"),
        (["reproduce", "regression", "--sampler", "hmc"], "--sampler"),
        (["reproduce", "mcem", "--workers", "0"], "--workers"),
        (["frobnicate"], "frobnicate"),
    ],
)
def test_a_bad_option_is_exit_code_2_naming_it(capsys, argv, option):
    code, _out, err = run(capsys, *argv)
    assert code == 2
    assert option in err and "error" in err


def test_no_command_prints_help_with_exit_code_2(capsys):
    code, _, err = run(capsys)
    assert code == 2 and "demo" in err and "reproduce" in err


def test_help_exits_0(capsys):
    code, out, _ = run(capsys, "reproduce", "--help")
    assert code == 0 and "--quick" in out and "--replicates" in out


def test_missing_data_path_is_exit_code_2(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    code, _, err = run(
        capsys,
        "reproduce",
        "atus",
        "--data",
        str(tmp_path / "nowhere"),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 2 and "--data" in err and "does not exist" in err
    code, _, err = run(
        capsys, "reproduce", "atus", "--data", str(tmp_path), "--out", str(tmp_path / "out")
    )
    assert code == 2 and "--data" in err and "female.csv" in err
    monkeypatch.setenv(atus.ATUS_ENV, str(tmp_path / "gone"))
    code, _, err = run(capsys, "reproduce", "atus", "--out", str(tmp_path / "out"))
    assert code == 2 and atus.ATUS_ENV in err
    code, _, err = run(capsys, "reproduce", "regression", "--data", str(tmp_path))
    assert code == 2 and "--data" in err


def test_unwritable_output_folder_is_exit_code_2(capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for argv in (["demo"], ["reproduce", "regression", "--quick"]):
        code, _, err = run(capsys, *argv, "--out", str(blocker / "out"), *TINY)
        assert code == 2 and "--out" in err and "cannot write" in err


def test_console_script_reports_errors_with_exit_code_2(tmp_path):
    script = Path(sys.executable).with_name("pmdp")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pymc_unbounded_dp.cli"]
    result = subprocess.run(
        [*command, "demo", "--draws", "-3"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 2 and "--draws" in result.stderr


# -- demo -------------------------------------------------------------------------------------------


def test_demo_with_tiny_draws_writes_posterior_summary_and_figures(capsys, tmp_path):
    out_dir = tmp_path / "demo-out"
    code, out, err = run(capsys, "demo", "--out", str(out_dir), "--seed", "3", *TINY)
    assert code == 0, err
    for name in [
        "posterior.nc",
        "summary.csv",
        "release.json",
        "figures/posteriors.png",
        "figures/trace.png",
    ]:
        assert (out_dir / name).is_file() and (out_dir / name).stat().st_size > 0, name
    for label in ["beta[0]", "beta[1]", "beta[2]", "tau", "n", "true", "lower_94"]:
        assert label in out
    summary = pd.read_csv(out_dir / "summary.csv", index_col=0)
    assert {"beta[1]", "tau", "n"} <= set(summary.index)
    assert summary.loc["n", "true"] == 1000 and summary.loc["beta[1]", "true"] == -1
    release = json.loads((out_dir / "release.json").read_text())
    assert len(release["values"]) == 9 and release["epsilon_s"] == 1 and release["epsilon_n"] == 0.5
    with xr.open_datatree(out_dir / "posterior.nc", engine="h5netcdf") as saved:
        assert {"posterior", "sample_stats", "observed_data"} <= set(saved.children)
        posterior = saved["posterior"].to_dataset()
        assert {"beta", "tau", "n"} <= set(posterior.data_vars)
        assert posterior.sizes["draw"] == 20


def test_demo_at_census_scale_fits_the_sums_level_and_says_so(capsys, tmp_path):
    # above cli.SUMS_FROM records the demo's default is the sums level; its n is the argument's
    code, out, err = run(
        capsys, "demo", "--out", str(tmp_path), "--records", "2e5", *TINY, "--draws", "40"
    )
    assert code == 0, err
    assert "n = 200,000" in out and "augment='sums'" in out
    summary = pd.read_csv(tmp_path / "summary.csv", index_col=0)
    assert summary.loc["n", "true"] == 200_000
    # the posterior of n is near n_dp (sd of the count noise: 2.8), the release's scale is n's
    release = json.loads((tmp_path / "release.json").read_text())
    assert abs(summary.loc["n", "mean"] - release["n_dp"]) < 50
    with xr.open_datatree(tmp_path / "posterior.nc", engine="h5netcdf") as saved:
        assert saved["posterior"].attrs["pmdp_augment"] == "sums"


def test_the_command_lines_record_limit_is_the_packages():
    from pymc_unbounded_dp.blocks import MAX_RECORDS

    assert cli.MAX_RECORDS == MAX_RECORDS and cli.SUMS_FROM < MAX_RECORDS


# -- reproduce: tiny grids on a local Dask cluster, resume ----------------------------------------

REGRESSION = [
    "reproduce",
    "regression",
    "--epsilon-s",
    "1",
    "--epsilon-n",
    "0.5,10",
    "--replicates",
    "1",
    "--records",
    "200",
    "--workers",
    "2",
    *TINY,
]


def pmdp(*argv, timeout=600):
    """The console command in a subprocess (the Dask cluster lives and dies with it)."""
    return subprocess.run(
        [sys.executable, "-m", "pymc_unbounded_dp.cli", *argv],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


def test_reproduce_writes_fits_report_and_resumes_without_rerunning(tmp_path):
    out_dir = tmp_path / "rep"
    result = pmdp(*REGRESSION, "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    fits = sorted(p.name for p in (out_dir / "fits").glob("*.json"))
    assert fits == [
        "regression_r000_es1_bounded.json",
        "regression_r000_es1_unbounded_en0.5.json",
        "regression_r000_es1_unbounded_en10.json",
    ]
    for name in [
        "regression_fits.csv",
        "regression_summary.md",
        "figures/coverage.png",
        "study.json",
    ]:
        assert (out_dir / name).is_file(), name
    summary = (out_dir / "regression_summary.md").read_text()
    assert "coverage of 95% intervals" in summary and "| unbounded | 0.5 " in summary
    record = json.loads((out_dir / "fits" / "regression_r000_es1_unbounded_en0.5.json").read_text())
    assert record["n_true"] == 200 and len(record["released"]) == 9 and record["draws"] == [1, 20]
    assert set(record["posterior"]) == {"beta[0]", "beta[1]", "beta[2]", "tau", "n"}
    assert record["posterior"]["tau"]["true"] == 1.0 and record["posterior"]["n"]["true"] == 200
    before = {p.name: p.read_bytes() for p in (out_dir / "fits").glob("*.json")}

    # a finished grid reruns nothing; a larger grid runs only the new fits
    result = pmdp(*REGRESSION, "--out", str(out_dir))
    assert (
        result.returncode == 0 and "3 already in" in result.stdout and "0 to run" in result.stdout
    )
    result = pmdp(*REGRESSION, "--replicates", "2", "--out", str(out_dir))
    assert "3 already in" in result.stdout and "3 to run" in result.stdout, result.stderr
    after = {p.name: p.read_bytes() for p in (out_dir / "fits").glob("*.json")}
    assert len(after) == 6 and all(after[name] == data for name, data in before.items())

    # other settings in the same folder are refused, naming the option
    code_err = pmdp(*REGRESSION, "--draws", "21", "--out", str(out_dir))
    assert code_err.returncode == 2 and "--out" in code_err.stderr and "draws=20" in code_err.stderr
    report = pmdp(*REGRESSION, "--report-only", "--out", str(out_dir))
    assert report.returncode == 0 and "3 of 3 fits finished" in report.stdout


def test_reproduce_atus_reads_the_packaged_data_and_simulates_only_on_request(tmp_path):
    out_dir = tmp_path / "atus"
    common = [
        "reproduce",
        "atus",
        "--epsilon-s",
        "10",
        "--epsilon-n",
        "1",
        "--replicates",
        "1",
        "--workers",
        "1",
        *TINY,
    ]
    result = pmdp(*common, "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    record = json.loads(next((out_dir / "fits").glob("*unbounded*.json")).read_text())
    assert record["settings"]["data"] is None and record["n_true"] == atus.ATUS_N
    assert (
        "alpha[2]" in record["posterior"]
        and "posterior SDs" in (out_dir / "atus_summary.md").read_text()
    )
