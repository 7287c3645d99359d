"""The ``pmdp`` command line: errors, ``pmdp demo``, ``pmdp reproduce`` (tiny grids, resume)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from pymc_unbounded_dp import cli
from pymc_unbounded_dp.examples import atus, studies

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
        (["reproduce", "survey"], "study"),
        (["reproduce", "regression", "--replicates", "0"], "--replicates"),
        (["reproduce", "atus", "--epsilon-n", "0.1,x"], "--epsilon-n"),
        (["reproduce", "regression", "--epsilon-n", "1,inf"], "--epsilon-n"),
        (["reproduce", "mcem", "--draws", "100"], "--draws"),
        (["reproduce", "mcem", "--epsilon-s", "1"], "--epsilon-s"),
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
    code, _, err = run(capsys, "reproduce", "atus", "--data", str(tmp_path / "nowhere"),
                       "--out", str(tmp_path / "out"))
    assert code == 2 and "--data" in err and "does not exist" in err
    code, _, err = run(capsys, "reproduce", "atus", "--data", str(tmp_path),
                       "--out", str(tmp_path / "out"))
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
    result = subprocess.run([*command, "demo", "--draws", "-3"], capture_output=True, text=True, check=False,
                            cwd=tmp_path, timeout=120)
    assert result.returncode == 2 and "--draws" in result.stderr


# -- demo -------------------------------------------------------------------------------------------


def test_demo_with_tiny_draws_writes_posterior_summary_and_figures(capsys, tmp_path):
    out_dir = tmp_path / "demo-out"
    code, out, err = run(capsys, "demo", "--out", str(out_dir), "--seed", "3", *TINY)
    assert code == 0, err
    for name in ["posterior.nc", "summary.csv", "release.json", "figures/posteriors.png",
                 "figures/trace.png"]:
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


# -- reproduce: tiny grids, resume ----------------------------------------------------------------


REGRESSION = ["reproduce", "regression", "--epsilon-s", "1", "--epsilon-n", "0.5,10",
              "--replicates", "1", "--no-mcem", *TINY]


def test_reproduce_resumes_after_an_interruption(capsys, tmp_path, monkeypatch):
    out_dir = tmp_path / "rep"
    calls = []
    original = studies.run_cell

    def interrupted(cell, config, data=None, progressbar=False):
        calls.append(cell.key)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(cell, config, data, progressbar)

    monkeypatch.setattr(studies, "run_cell", interrupted)
    code, _, err = run(capsys, *REGRESSION, "--out", str(out_dir))
    assert code == 130 and "resume" in err
    finished = sorted(p.name for p in (out_dir / "cells").glob("*.json"))
    assert finished == ["regression_r000_es1_bounded.json"]

    calls.clear()
    monkeypatch.setattr(studies, "run_cell", lambda *a, **k: calls.append(a[0].key) or original(*a, **k))
    code, out, err = run(capsys, *REGRESSION, "--out", str(out_dir))
    assert code == 0, err
    assert calls == ["regression_r000_es1_unbounded_en0.5", "regression_r000_es1_unbounded_en10"]
    assert "resuming: 1 of 3" in out
    assert len(list((out_dir / "cells").glob("*.json"))) == 3
    for name in ["regression_cells.csv", "regression_summary.csv", "regression_summary.md",
                 "figures/regression_study.png"]:
        assert (out_dir / name).is_file(), name
    table = pd.read_csv(out_dir / "regression_summary.csv")
    assert list(table["variant"]) == ["bounded", "unbounded", "unbounded"]
    assert "| 1 | unbounded | 0.5 | 1 |" in (out_dir / "regression_summary.md").read_text()
    record = json.loads((out_dir / "cells" / "regression_r000_es1_unbounded_en0.5.json").read_text())
    assert record["n_true"] == 1000 and len(record["released"]) == 9
    assert {"beta[1]", "tau", "n"} <= set(record["posterior"]) and len(record["draws"]["n"]) == 20

    # a finished grid reruns nothing; other settings in the same folder are refused
    calls.clear()
    assert run(capsys, *REGRESSION, "--out", str(out_dir))[0] == 0 and calls == []
    code, _, err = run(capsys, *REGRESSION[:-8], "--draws", "21", *TINY[2:], "--out", str(out_dir))
    assert code == 2 and "--out" in err and "draws=20" in err


def test_reproduce_atus_falls_back_to_the_simulated_stand_in(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv(atus.ATUS_ENV, raising=False)
    monkeypatch.setattr(atus, "default_atus_dir", lambda: None)
    out_dir = tmp_path / "atus"
    code, out, err = run(capsys, "reproduce", "atus", "--epsilon-s", "10", "--epsilon-n", "1",
                         "--replicates", "1", *TINY, "--out", str(out_dir))
    assert code == 0, err
    assert "SIMULATED" in out
    for name in ["atus_summary.md", "atus_summary.csv", "figures/atus_alpha1_density.png",
                 "figures/atus_n_boxplots.png", "figures/atus_alpha_sd.png"]:
        assert (out_dir / name).is_file(), name
    record = json.loads(next((out_dir / "cells").glob("*unbounded*.json")).read_text())
    assert record["settings"]["data"] == "simulated" and record["n_true"] == 6656
