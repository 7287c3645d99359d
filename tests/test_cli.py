"""The ``pmdp`` command line: errors, ``pmdp demo``, ``pmdp reproduce`` (tiny grids, resume)."""

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pymc as pm
import pytest
import xarray as xr

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import cli
from pymc_unbounded_dp import release as rl
from pymc_unbounded_dp.examples import atus, demo, regression

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


@pytest.fixture(scope="module")
def tiny_demo(tmp_path_factory):
    """``pmdp demo`` run once with tiny draws: its output folder and what it printed."""
    out_dir = tmp_path_factory.mktemp("demo") / "demo-out"
    printed, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(errors):
        code = cli.main(["demo", "--out", str(out_dir), "--seed", "3", *TINY])
    assert code == 0, errors.getvalue()
    return out_dir, printed.getvalue()


def test_demo_with_tiny_draws_writes_posterior_summary_and_figures(tiny_demo):
    out_dir, out = tiny_demo
    for name in [
        "posterior.nc",
        "summary.csv",
        "release.json",
        "demo.json",
        "figures/posteriors.png",
        "figures/trace.png",
    ]:
        assert (out_dir / name).is_file() and (out_dir / name).stat().st_size > 0, name
    for label in ["beta[0]", "beta[1]", "beta[2]", "tau", "n", "true", "lower_94"]:
        assert label in out
    summary = pd.read_csv(out_dir / "summary.csv", index_col=0)
    assert {"beta[1]", "tau", "n"} <= set(summary.index)
    assert summary.loc["n", "true"] == 1000 and summary.loc["beta[1]", "true"] == -1
    facts = json.loads((out_dir / "demo.json").read_text())
    assert facts["statistics"] == list(regression.STATISTIC_NAMES) and facts["true_n"] == 1000
    assert (facts["epsilon_s"], facts["epsilon_n"], facts["seed"]) == (1, 0.5, 3)
    with xr.open_datatree(out_dir / "posterior.nc", engine="h5netcdf") as saved:
        assert {"posterior", "sample_stats", "observed_data"} <= set(saved.children)
        posterior = saved["posterior"].to_dataset()
        assert {"beta", "tau", "n"} <= set(posterior.data_vars)
        assert posterior.sizes["draw"] == 20


def test_the_demos_release_file_loads_as_the_release_it_fitted(tiny_demo):
    out_dir, out = tiny_demo
    loaded = rl.load(out_dir / "release.json")
    assert loaded.neighbouring == "add/remove" and loaded.guarantee == {"epsilon": 1.5}
    assert "guarantee: epsilon = 1.5 under add/remove neighbours" in out
    # what the model was fitted to (its observed data) is what loads, mechanisms included
    with xr.open_datatree(out_dir / "posterior.nc", engine="h5netcdf") as saved:
        observed = saved["observed_data"].to_dataset()
        assert np.array_equal(loaded["s"].value, observed["s"].values)
    n_dp = int(re.search(r"n_dp = (\d+)", out).group(1))
    assert loaded["n"].value == n_dp and loaded["n"].kind == "count"
    assert loaded["s"].mechanism == pmdp.Laplace(epsilon=1.0, sensitivity=9)
    assert loaded["n"].mechanism == pmdp.DiscreteLaplace(epsilon=0.5)
    assert loaded["s"].sampler.startswith("simulated")


@pytest.mark.parametrize("bounded", [False, True])
def test_the_demos_release_builds_the_demos_model(tmp_path, bounded):
    """Bounded DP: replace-one neighbours, n public; the sums' noise is the demo's, and the file
    states its guarantee under replace-one (sensitivity 15 of the bounds, not 9)."""
    data = regression.simulate_regression(100, seed=1)
    release = regression.privatize_regression(data, 1.0, 0.5, seed=2)
    result = demo.DemoResult(release, None, bounded, 1, "gibbs", 0.0)
    loaded = rl.load(demo.demo_release(result).save(tmp_path / "release.json"))
    assert loaded["s"].mechanism.scale == release.mechanism.scale
    assert np.array_equal(loaded["s"].value, release.values)
    if bounded:
        assert loaded.neighbouring == "replace-one" and loaded["n"].mechanism is None
        assert loaded.guarantee["epsilon"] == pytest.approx(15 / 9)
    expected = regression.regression_model(release, bounded=bounded)
    with pm.Model() as model:
        n = loaded.sample_size("n")
        x1, x2, y = (pmdp.Records(name, pm.Normal.dist(), n=n) for name in ("x1", "x2", "y"))
        loaded.privatized_sum("s", regression.regression_statistic_tensor(x1, x2, y))
    assert ("n" in model.named_vars) is (not bounded)
    for name in ("s", *([] if bounded else ["n_dp"])):
        assert np.array_equal(
            model.rvs_to_values[model[name]].eval(), expected.rvs_to_values[expected[name]].eval()
        ), name


def test_a_refused_release_file_is_named_with_what_is_wrong(tmp_path):
    old_demo_file = tmp_path / "release.json"
    old_demo_file.write_text(json.dumps({"values": [1.0] * 9, "n_dp": 1003, "epsilon_s": 1.0}))
    with pytest.raises(ValueError) as error:
        rl.load(old_demo_file)
    message = str(error.value)
    assert str(old_demo_file) in message and "`text`" not in message
    assert "no 'format' entry" in message and "values, n_dp, epsilon_s" in message
    old_demo_file.write_text("{")
    with pytest.raises(ValueError, match=r"release.json' is not a valid release file: not JSON"):
        rl.load(old_demo_file)


def test_short_chains_are_flagged_with_how_to_run_longer(tiny_demo):
    _, out = tiny_demo
    table = out[out.index("94% equal-tailed intervals:") : out.index("true values inside")]
    assert "flag" in table.splitlines()[1]
    # 20 draws of one chain: every bulk ESS is below 100 per chain
    assert all(line.rstrip().endswith("! ess_bulk") for line in table.splitlines()[2:-1])
    assert "too short" in out and re.search(r"Run longer, e\.g\. --draws \d+", out)


def test_the_tune_option_does_what_its_help_says(capsys, monkeypatch, tmp_path):
    asked = []

    def fit_demo(**options):
        asked.append(options["tune"])
        raise KeyboardInterrupt  # stop before sampling

    monkeypatch.setattr(demo, "fit_demo", fit_demo)
    for extra in (["--draws", "50"], ["--draws", "5000"], ["--draws", "50", "--tune", "300"]):
        assert cli.main(["demo", "--out", str(tmp_path), "--no-progress", *extra]) == 130
    assert asked == [50, 1000, 300]
    _, out, _ = run(capsys, "demo", "--help")
    assert "at most" not in out and "or --draws if that is smaller" in " ".join(out.split())


def test_the_draws_help_and_the_docs_state_the_same_measured_ess(capsys):
    _, out, _ = run(capsys, "demo", "--help")
    docs = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    measured = "1,500 to 2,400 of 8,000"
    assert measured in " ".join(out.split()) and measured in " ".join(docs.split())
    assert "about a quarter of chains x draws" in " ".join(docs.split())


class _ClosedPipe(io.TextIOBase):
    """A stdout whose reader is gone: writes raise, or (``buffered``) the flush does."""

    def __init__(self, buffered: bool):
        self.buffered = buffered

    def write(self, text):
        if self.buffered:
            return len(text)
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_ends_quietly_with_exit_code_141(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(demo, "fit_demo", lambda **options: pytest.fail("not reached"))
    for buffered, argv in ((True, ["--version"]), (False, ["demo", "--out", str(tmp_path)])):
        monkeypatch.setattr(sys, "stdout", _ClosedPipe(buffered))
        assert cli.main(argv) == 141
        assert capsys.readouterr().err == ""
    # the console command: the reader is gone before pmdp writes its header (it stops there)
    process = subprocess.Popen(
        [sys.executable, "-m", "pymc_unbounded_dp.cli", "demo", "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()
    _, err = process.communicate(timeout=120)
    assert process.returncode == 141 and "Traceback" not in err and "Exception" not in err, err


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
    assert abs(summary.loc["n", "mean"] - rl.load(tmp_path / "release.json")["n"].value) < 50
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


def run_pmdp(*argv, timeout=600):
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
    result = run_pmdp(*REGRESSION, "--out", str(out_dir))
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
    result = run_pmdp(*REGRESSION, "--out", str(out_dir))
    assert (
        result.returncode == 0 and "3 already in" in result.stdout and "0 to run" in result.stdout
    )
    result = run_pmdp(*REGRESSION, "--replicates", "2", "--out", str(out_dir))
    assert "3 already in" in result.stdout and "3 to run" in result.stdout, result.stderr
    after = {p.name: p.read_bytes() for p in (out_dir / "fits").glob("*.json")}
    assert len(after) == 6 and all(after[name] == data for name, data in before.items())

    # other settings in the same folder are refused, naming the option
    code_err = run_pmdp(*REGRESSION, "--draws", "21", "--out", str(out_dir))
    assert code_err.returncode == 2 and "--out" in code_err.stderr and "draws=20" in code_err.stderr
    report = run_pmdp(*REGRESSION, "--report-only", "--out", str(out_dir))
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
    result = run_pmdp(*common, "--out", str(out_dir))
    assert result.returncode == 0, result.stderr
    record = json.loads(next((out_dir / "fits").glob("*unbounded*.json")).read_text())
    assert record["settings"]["data"] is None and record["n_true"] == atus.ATUS_N
    assert (
        "alpha[2]" in record["posterior"]
        and "posterior SDs" in (out_dir / "atus_summary.md").read_text()
    )


def test_only_rows_that_fail_a_convergence_check_are_flagged():
    from pymc_unbounded_dp.examples.study.reporting import convergence_flags, flag_labels

    table = pd.DataFrame(
        {"r_hat": [1.0, 1.05, 1.0, np.nan, 1.01, 1.0101],
         "ess_bulk": [2000.0, 900.0, 150.0, np.nan, 400.0, 399.9]},
        index=["ok", "r_hat", "ess", "one chain", "at the limits", "just past them"],
    )  # fmt: skip
    labels = flag_labels(convergence_flags(table, chains=4))
    # the limits: R-hat 1.01 and a bulk ESS of 100 per chain (Vehtari et al. 2021)
    assert labels == ["", "! r_hat", "! ess_bulk", "", "", "! r_hat, ess_bulk"]


# -- the demo's settings, streams and summary, the sampler faked (a hand audit, issue 32) --------
class _Called(Exception):
    pass


def _fake_posterior(chains, draws, values: dict):
    """Draws constant at ``values`` (name -> scalar or vector)."""
    import arviz as az

    posterior = {
        k: np.broadcast_to(np.asarray(v, dtype=float), (chains, draws, *np.shape(v))).copy()
        for k, v in values.items()
    }
    if az.__version__.startswith("0."):
        return az.from_dict(posterior=posterior)
    return az.from_dict({"posterior": posterior})


def test_the_demo_command_passes_its_settings_to_the_fit(monkeypatch, tmp_path):
    """``--tune 0`` is 0 tuning draws; up to SUMS_FROM records the records level, beyond it the
    sums level; ``--bounded`` fits the bounded model."""
    calls = []

    def stopped(**options):
        calls.append(options)
        raise _Called

    monkeypatch.setattr(demo, "fit_demo", stopped)
    runs = [
        (["--tune", "0"], {"tune": 0, "augment": "records", "bounded": False}),
        (["--records", str(cli.SUMS_FROM)], {"augment": "records", "n": cli.SUMS_FROM}),
        (["--records", str(cli.SUMS_FROM + 1)], {"augment": "sums"}),
        (["--bounded"], {"bounded": True}),
    ]
    for flags, expected in runs:
        with pytest.raises(_Called):
            cli.main(["demo", *flags, "--out", str(tmp_path)])
        assert {k: calls[-1][k] for k in expected} == expected, flags


def test_the_demo_draws_its_data_and_its_noise_from_two_streams_and_fits_the_bounded_model(
    monkeypatch,
):
    from pymc_unbounded_dp import sampling
    from pymc_unbounded_dp._registry import model_blocks

    streams, models = {}, []
    simulate, privatize = regression.simulate_regression, regression.privatize_regression

    def recorded_simulate(n, seed):
        streams["data"] = np.random.default_rng(seed).random(3).tolist()
        return simulate(n, seed=seed)

    def recorded_privatize(data, epsilon_s, epsilon_n, seed):
        streams["noise"] = np.random.default_rng(seed).random(3).tolist()
        return privatize(data, epsilon_s, epsilon_n, seed=seed)

    def fake_sample(draws, chains, **options):
        models.append(pm.modelcontext(None))
        return _fake_posterior(chains, draws, {"beta": [0.0] * 3, "tau": 1.0})

    monkeypatch.setattr(regression, "simulate_regression", recorded_simulate)
    monkeypatch.setattr(regression, "privatize_regression", recorded_privatize)
    monkeypatch.setattr(sampling, "sample", fake_sample)
    demo.fit_demo(draws=2, tune=1, chains=1, n=200, sampler="nuts", progressbar=False)
    assert streams["data"] != streams["noise"]
    for augment in ("records", "sums"):  # --bounded reaches the model at either level
        demo.fit_demo(draws=2, tune=1, chains=1, n=300, bounded=True, augment=augment)
        assert not model_blocks(models[-1]).sample_sizes, augment


def test_the_demo_summary_counts_a_truth_on_an_interval_end_as_covered():
    """Draws constant at the truth: every interval is the point itself, and it covers it."""
    release = regression.privatize_regression(regression.simulate_regression(100, 1), 1, 1, 2)
    truth = regression.regression_truth()
    values = {
        "beta": [truth[f"beta[{j}]"] for j in range(3)],
        "tau": truth["tau"],
        "mu": [truth[f"mu[{j}]"] for j in range(2)],
        "n": float(release.n),
    }
    result = demo.DemoResult(release, _fake_posterior(2, 50, values), False, 1, "gibbs", 1.0)
    table = demo.demo_summary(result)
    assert table["covered"].all(), table


# -- found by the audit of the release file and the command line (2026-12-07) --------------------
def test_demo_takes_up_to_max_records_records():
    """``--records`` accepts the package's limit itself, 1e8 (the help says "up to 1e8")."""
    args = cli.build_parser().parse_args(["demo", "--records", "1e8"])
    assert args.records == cli.MAX_RECORDS == 10**8


def test_the_advice_to_run_longer_counts_the_ess_over_all_chains(monkeypatch):
    """Four chains of 1,000 draws with a bulk ESS of 100: the target is 100 per chain, 400, so
    the chains must be 400 / 100 = 4 times longer: --draws 4000."""
    from types import SimpleNamespace

    table = pd.DataFrame(
        {"true": [1.0], "mean": [1.0], "sd": [0.1], "lower": [0.8], "upper": [1.2],
         "r_hat": [1.0], "ess_bulk": [100.0], "covered": [True]},
        index=["tau"],
    )  # fmt: skip
    monkeypatch.setattr(demo, "demo_summary", lambda result: table)
    out = io.StringIO()
    args = SimpleNamespace(chains=4, draws=1000)
    cli._print_demo_posterior(SimpleNamespace(seconds=1.0), args, "records", out)
    text = " ".join(out.getvalue().split())
    assert "bulk ESS < 400 (100 per chain) for tau" in text
    assert "Run longer, e.g. --draws 4000." in text


def test_a_quick_reproduction_has_a_default_folder_of_its_own(capsys, monkeypatch, tmp_path):
    """Without ``--out`` a quick run goes to ``pmdp-out/reproduce-STUDY-quick``, a full one to
    ``pmdp-out/reproduce-STUDY`` (with ``--report-only`` and no fits, the error names it)."""
    monkeypatch.chdir(tmp_path)
    for flags, folder in (["--quick"], "reproduce-regression-quick"), ([], "reproduce-regression"):
        code, _, err = run(capsys, "reproduce", "regression", *flags, "--report-only")
        assert code == 2 and f"no finished fits of this grid in '{Path('pmdp-out', folder)}'" in err
    assert sorted(p.name for p in (tmp_path / "pmdp-out").iterdir()) == [
        "reproduce-regression",
        "reproduce-regression-quick",
    ]
