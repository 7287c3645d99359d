"""``pmdp.choose_epsilon`` and ``pmdp.EpsilonReport``: risk beside utility over a budget grid.

The risk columns come from ``pmdp.risk.membership_risk``; most tests replace it with a fake whose
numbers are known (the report only has to carry them), and one closed-form check runs against the
real function. The utility side is tested on a tiny Bernoulli model on the sums level.
"""

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pymc as pm
import pytest
from mcmc_checks import trace_of

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import release as rl
from pymc_unbounded_dp.epsilon import EpsilonReport, simulate_release

matplotlib.use("Agg")

N = 300
GRID = [0.5, 4.0]
FIT = {"draws": 150, "tune": 150}
SEED = 7


def fake_membership_risk(plan, record, prior=0.5, *, replacement=None):
    """Stands in for ``pmdp.risk.membership_risk``: numbers that identify the plan's budget."""
    epsilon = plan.guarantee["epsilon"]
    risk = 1 / (1 + math.exp(epsilon))
    fake_membership_risk.calls.append((plan, record, prior, replacement))
    return SimpleNamespace(
        risk=risk,
        trivial_risk=0.5,
        advantage=0.5 - risk,
        posterior_odds_bound=math.exp(epsilon),
        epsilon_bound=math.exp(epsilon),
        lower=0.9 * risk,  # a bracket around the risk, as an engine that bounds it reports
        upper=1.1 * risk,
        method="fake",
        neighbouring=plan.neighbouring,
    )


fake_membership_risk.calls = []


def bernoulli_model(release):
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=release.sample_size("n"))
        release.privatized_sum("s", x)
    return model


@pytest.fixture
def fake_risk(monkeypatch):
    monkeypatch.setattr(pmdp.risk, "membership_risk", fake_membership_risk, raising=False)
    fake_membership_risk.calls.clear()
    return fake_membership_risk


@pytest.fixture(scope="module")
def plan():
    return rl.Plan(
        [rl.Statistic("s", 0, 1, integer=True), rl.Count("n")],
        epsilon=1.0,
        weights={"s": 0.75, "n": 0.25},
    )


@pytest.fixture(scope="module")
def records():
    return {"s": np.random.default_rng(3).binomial(1, 0.3, size=N)}


@pytest.fixture(scope="module")
def report(plan, records):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pmdp.risk, "membership_risk", fake_membership_risk, raising=False)
        fake_membership_risk.calls.clear()
        made = pmdp.choose_epsilon(
            records,
            plan,
            bernoulli_model,
            GRID,
            params="theta",
            replicates=3,
            random_seed=SEED,
            **FIT,
        )
        made.risk_calls = list(fake_membership_risk.calls)
    return made


def test_the_table_has_one_row_per_epsilon_with_split_risk_and_utility(report):
    table = report.table
    assert list(table.index) == GRID and table.index.name == "epsilon"
    assert np.allclose(table["epsilon[s]"] + table["epsilon[n]"], GRID)
    assert np.allclose(table["epsilon[s]"], 3 * table["epsilon[n]"])  # the template's split
    for column in ["sd", "sd_se", "width", "width_se", "coverage", "coverage_se"]:
        assert table[f"{column}(theta)"].notna().all(), column
    for column in ["mean(n)", "mean_se(n)", "sd(n)", "sd_se(n)"]:
        assert table[column].notna().all(), column
    # the risk figures are the risk engine's, for the plan at each budget, the worst-case record
    risks = [1 / (1 + math.exp(e)) for e in GRID]
    assert np.allclose(table["membership_risk"], risks, rtol=0, atol=1e-15)
    assert np.allclose(table["advantage"], [0.5 - r for r in risks])
    assert np.allclose(table["epsilon_bound"], np.exp(GRID))
    assert np.allclose(table["membership_risk_lower"], 0.9 * np.array(risks))
    assert np.allclose(table["membership_risk_upper"], 1.1 * np.array(risks))
    assert list(table["risk_method"]) == ["fake", "fake"]
    plans = [call[0] for call in report.risk_calls]
    assert [p.guarantee["epsilon"] for p in plans] == pytest.approx(GRID)
    assert all(call[1:] == ({"s": 1}, 0.5, None) for call in report.risk_calls)
    assert len(report.fits) == len(GRID) * 3
    assert "EpsilonReport(epsilon in [0.5, 4]" in repr(report)


def test_the_utility_figures_are_means_over_replicates_with_their_standard_errors():
    """Per budget and parameter: the mean of the replicates' posterior sds and widths with the
    standard error ``s / sqrt(k)`` (``s`` with ``k - 1`` degrees of freedom), and the coverage
    ``p`` with ``sqrt(p (1 - p) / k)``. Numbers by hand for four replicates."""
    from pymc_unbounded_dp.epsilon import _utility

    part = pd.DataFrame(
        {
            "sd": [1.0, 2.0, 4.0, 5.0],
            "width": [3.0, 3.0, 5.0, 5.0],
            "covered": [True, False, True, True],
        }
    )
    row = _utility(part, "theta")
    assert row["sd(theta)"] == 3.0
    assert row["sd_se(theta)"] == pytest.approx(math.sqrt(10.0 / 3.0) / 2.0, rel=1e-12)
    assert row["width(theta)"] == 4.0
    assert row["width_se(theta)"] == pytest.approx(math.sqrt(4.0 / 3.0) / 2.0, rel=1e-12)
    assert row["coverage(theta)"] == 0.75
    assert row["coverage_se(theta)"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4.0), rel=1e-12)


def test_the_report_table_is_the_utility_of_its_fits(report):
    from pymc_unbounded_dp.epsilon import _utility

    for budget in GRID:
        part = report.fits[(report.fits["epsilon"] == budget) & (report.fits["label"] == "theta")]
        assert len(part) == 3
        for column, value in _utility(part, "theta").items():
            assert report.table.loc[budget, column] == pytest.approx(value, nan_ok=True), column


def test_utility_grows_with_epsilon(report):
    table = report.table
    assert table.loc[0.5, "sd(theta)"] > table.loc[4.0, "sd(theta)"]
    assert table.loc[0.5, "width(theta)"] > table.loc[4.0, "width(theta)"]
    assert table.loc[0.5, "sd(n)"] > 2 * table.loc[4.0, "sd(n)"]
    # the reference value is the posterior mean at a tiny noise: close to the data's proportion
    assert report.table["coverage(theta)"].between(0, 1).all()


def test_a_fit_of_the_report_is_a_fit_by_hand(report, plan, records):
    """The report's fit is reproduced exactly from its seeds, and a fresh release fitted by hand
    agrees with the report's expected posterior sd within its Monte Carlo error."""
    row = report.fits.query("epsilon == 0.5 and replicate == 0").iloc[0]
    by_hand = rl.Plan(list(plan.statistics.values()), epsilon=0.5, weights={"s": 0.75, "n": 0.25})
    sums = {"s": int(records["s"].sum())}

    def posterior_draws(noise_seed, chain_seed):
        release = simulate_release(by_hand, sums, N, int(noise_seed))
        with bernoulli_model(release):
            idata = pmdp.sample(
                chains=1,
                random_seed=int(chain_seed),
                progressbar=False,
                **FIT,
                compute_convergence_checks=False,
            )
        return idata["posterior"]["theta"].values.ravel()

    draws = posterior_draws(row["noise_seed"], row["chain_seed"])
    assert draws.std(ddof=1) == pytest.approx(row["sd"], 1e-12)
    # the central 95% interval: 2.5% in each tail
    interval = np.quantile(draws, [0.025, 0.975])
    assert [row["lower"], row["upper"]] == pytest.approx(interval, 1e-12)
    fresh = posterior_draws(12345, 678).std(ddof=1)
    expected, se = report.table.loc[0.5, ["sd(theta)", "sd_se(theta)"]]
    # the report's se is of the mean over 3 fits; one fit spreads sqrt(3) times as much
    assert abs(fresh - expected) < 4 * se * math.sqrt(3 + 1)


def test_the_same_seed_gives_the_same_table(report, plan, records, fake_risk):
    again = pmdp.choose_epsilon(
        records,
        plan,
        bernoulli_model,
        [4.0],
        params=["theta"],
        replicates=3,
        random_seed=SEED,
        **FIT,
    )
    columns = [c for c in again.table.columns if "(theta)" in c or c.endswith("(n)")]
    # a budget's fits do not depend on the rest of the grid
    pd.testing.assert_frame_equal(again.table.loc[[4.0], columns], report.table.loc[[4.0], columns])


def test_dask_workers_give_the_same_table(report, plan, records, fake_risk):
    distributed = pytest.importorskip("distributed")
    truth = {"theta": 0.3}
    local = pmdp.choose_epsilon(
        records,
        plan,
        bernoulli_model,
        [4.0],
        params="theta",
        replicates=2,
        truth=truth,
        random_seed=SEED,
        **FIT,
    )
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        remote = pmdp.choose_epsilon(
            records,
            plan,
            bernoulli_model,
            [4.0],
            params="theta",
            replicates=2,
            truth=truth,
            random_seed=SEED,
            client=client,
            **FIT,
        )
    pd.testing.assert_frame_equal(local.table, remote.table)


# -- the recommendation, the figure, the page ----------------------------------------------------


def hand_made(**options):
    table = pd.DataFrame(
        {
            "membership_risk": [0.45, 0.35, 0.2, 0.05],
            "trivial_risk": [0.5] * 4,
            "advantage": [0.05, 0.15, 0.3, 0.45],
            "width(a)": [0.9, 0.5, 0.3, 0.2],
            "width_se(a)": [0.01] * 4,
            "width(b)": [0.6, 0.4, 0.35, 0.1],
            # from 1 to 0.5, b's width moves by 0.05: within twice the error only with both
            # rows' errors, sqrt(0.01^2 + 0.03^2) (twice the larger budget's would be 0.028)
            "width_se(b)": [0.03, 0.03, 0.01, 0.03],
        },
        index=pd.Index([0.25, 0.5, 1.0, 2.0], name="epsilon"),
    )
    return EpsilonReport(table, ["a", "b"], **options)


@pytest.mark.parametrize(
    "options, expected, words",
    [
        ({"target_width": 0.4}, 1.0, "smallest"),  # b needs 1.0 although a would take 0.5
        ({"target_width": {"a": 0.5}}, 0.5, "smallest"),
        ({"max_membership_advantage": 0.2}, 0.5, "largest"),
        ({"target_width": 0.4, "max_membership_advantage": 0.3}, 1.0, "within the cap"),
        ({"target_width": 0.4, "max_membership_advantage": 0.2}, None, "conflict"),
        ({"target_width": 0.05}, None, "No epsilon of the grid meets"),
        ({"max_membership_advantage": 0.01}, None, "No epsilon of the grid keeps"),
        ({}, None, "No target given"),
    ],
)
def test_recommend(options, expected, words):
    advice = hand_made(**options).recommend()
    assert advice.value == expected
    assert words in advice.reason and str(advice) == advice.reason


def test_recommend_arguments_override_the_report_defaults():
    report = hand_made(target_width=0.05)
    assert report.recommend(max_membership_advantage=0.2).value is None  # the width target stays
    assert report.recommend(target_width=0.4).value == 1.0
    with pytest.raises(ValueError, match="target_width"):
        report.recommend(target_width={"c": 1.0})


def test_plot_and_html_page(tmp_path):
    report = hand_made(target_width=0.4)
    figure = report.plot()
    assert isinstance(figure, matplotlib.figure.Figure)
    assert figure.axes[0].get_xlabel().startswith("membership advantage")
    path = report.to_html(tmp_path / "page.html")
    page = path.read_text()
    assert '<img alt="risk-utility frontier" src="data:image/png;base64,' in page
    assert "<table" in page and page.count("<tr>") >= 5
    assert "epsilon = 1 is the smallest budget" in page
    # a paragraph per row, saying which way risk and utility move as epsilon shrinks
    assert page.count("Shrinking epsilon from") == 3
    assert "the attacker&#x27;s error rises from 0.35 to 0.45" in page
    assert "the interval of a widens from 0.5 to 0.9 (less utility)" in page
    assert "the interval of b goes from 0.35 to 0.4, within twice its Monte Carlo error" in page


# -- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change, argument",
    [
        ({"epsilons": []}, "epsilons"),
        ({"epsilons": [2.0, 1.0]}, "epsilons"),
        ({"epsilons": [1.0, 1.0]}, "epsilons"),
        ({"epsilons": [0.0, 1.0]}, "epsilons"),
        ({"record": {"s": 2}}, "record"),
        ({"record": {"s": -1}}, "record"),
        ({"record": {"t": 1}}, "record"),
        ({"record": {"s": 0.5}}, "record"),  # not an integer: once silently truncated to 0
        ({"record": {"s": np.nan}}, "record"),
        ({"prior": 0.0}, "prior"),
        ({"prior": 1.0}, "prior"),
        ({"prior": 1.5}, "prior"),
        ({"params": ["theta", "nope"]}, "params"),
        ({"params": []}, "params"),
        ({"replicates": 0}, "replicates"),
        ({"truth": {"other": 1.0}}, "truth"),
    ],
)
def test_bad_input_names_the_argument(plan, records, change, argument, fake_risk):
    arguments = {"epsilons": [1.0], "params": "theta", "replicates": 1, **change}
    with pytest.raises(ValueError, match=f"`{argument}"):
        pmdp.choose_epsilon(records, plan, bernoulli_model, **arguments, draws=5, tune=5)


def test_a_replace_one_plan_compares_the_target_with_its_replacement(records, fake_risk):
    bounded = rl.Plan(
        [rl.Statistic("s", 0, 1, integer=True), rl.Count("n")],
        neighbouring="replace-one",
        epsilon=1.0,
    )
    arguments = {"params": "theta", "replicates": 1, "truth": {"theta": 0.3}, "draws": 20}
    report = pmdp.choose_epsilon(records, bounded, bernoulli_model, [1.0], tune=20, **arguments)
    assert fake_risk.calls[-1][1:] == ({"s": 1}, 0.5, {"s": 0})  # the opposite bound
    pmdp.choose_epsilon(
        records, bounded, bernoulli_model, [1.0], record={"s": 0}, tune=20, **arguments
    )
    assert fake_risk.calls[-1][1:] == ({"s": 0}, 0.5, {"s": 1})  # the bound farther from 0
    assert "epsilon[n]" not in report.table  # n is public: no share
    assert "mean(n)" not in report.table
    with pytest.raises(ValueError, match="`replacement"):
        pmdp.choose_epsilon(
            records, bounded, bernoulli_model, [1.0], replacement={"s": 3}, **arguments
        )
    with pytest.raises(ValueError, match="`replacement"):
        pmdp.choose_epsilon(
            records,
            bounded.__class__(list(bounded.statistics.values()), epsilon=1.0),
            bernoulli_model,
            [1.0],
            replacement={"s": 0},
            **arguments,
        )


@pytest.mark.parametrize("measure", ["epsilon", "rho"])
def test_the_reference_fit_has_noise_ten_times_smaller_than_the_largest_budget(measure):
    """Scales go as 1 / epsilon and as 1 / sqrt(rho): the reference budget is 10 epsilon or
    100 rho."""
    from pymc_unbounded_dp.epsilon import REFERENCE_FACTOR, _plan_at, _reference_budget

    template = rl.Plan([rl.Statistic("s", 0, 1), rl.Count("n")], **{measure: 1.0})
    largest = _plan_at(template, 4.0).mechanisms["s"].scale
    reference = _plan_at(template, _reference_budget(template, 4.0)).mechanisms["s"].scale
    assert reference == pytest.approx(largest / REFERENCE_FACTOR, rel=1e-12)


def test_the_reference_is_beyond_the_largest_budget_and_a_fit_pools_its_chains(
    plan, records, fake_risk, monkeypatch
):
    """With the sampler faked (two chains, the second 1 above the first): the first release
    simulated, the reference's, has noise ten times smaller than at the largest budget (not the
    smallest), and each fit's mean and sd are of both chains' draws."""

    from pymc_unbounded_dp import epsilon, sampling
    from pymc_unbounded_dp.epsilon import REFERENCE_FACTOR, _plan_at

    simulated = []
    real = epsilon.simulate_release

    def recorded(budget_plan, sums, n, seed):
        simulated.append(budget_plan)
        return real(budget_plan, sums, n, seed)

    def fake_sample(draws, chains, **options):
        theta = np.linspace(0.1, 0.2, draws)[None, :] + np.arange(chains)[:, None] * 0.5
        return trace_of({"posterior": {"theta": theta}})

    monkeypatch.setattr(epsilon, "simulate_release", recorded)
    monkeypatch.setattr(sampling, "sample", fake_sample)
    made = pmdp.choose_epsilon(
        records, plan, bernoulli_model, GRID, params="theta", replicates=2, random_seed=1,
        draws=5, tune=1, chains=2,
    )  # fmt: skip
    largest = _plan_at(plan, GRID[-1]).mechanisms["s"].scale
    assert simulated[0].mechanisms["s"].scale == pytest.approx(largest / REFERENCE_FACTOR)
    pooled = np.concatenate([np.linspace(0.1, 0.2, 5), np.linspace(0.6, 0.7, 5)])
    np.testing.assert_allclose(made.fits["mean"], pooled.mean())
    np.testing.assert_allclose(made.fits["sd"], pooled.std(ddof=1))


def test_each_value_of_a_simulated_release_has_its_own_noise():
    """Two statistics with one mechanism: their noises differ (independent streams), at every
    seed tried."""
    twins = rl.Plan([rl.Statistic("a", 0, 1), rl.Statistic("b", 0, 1), rl.Count("n")], epsilon=1.0)
    assert twins.mechanisms["a"] == twins.mechanisms["b"]
    for seed in range(5):
        release = simulate_release(twins, {"a": 3.0, "b": 3.0}, 10, random_seed=seed)
        assert release["a"].value != release["b"].value, seed


def test_risk_of_a_count_is_the_closed_form(plan, records):
    """Against the real risk engine: a target record whose statistic is 0 changes only the count,
    released alone with a discrete Laplace at its share epsilon / 4: risk 1 / (1 + e^(eps/4))."""
    from pymc_unbounded_dp import risk

    if not hasattr(risk, "membership_risk"):
        pytest.skip("pmdp.risk.membership_risk is not in this checkout yet (issue 29, item 1)")
    report = pmdp.choose_epsilon(
        records,
        plan,
        bernoulli_model,
        GRID,
        params="theta",
        replicates=1,
        record={"s": 0},
        truth={"theta": 0.3},
        random_seed=1,
        draws=20,
        tune=20,
    )
    expected = [1 / (1 + math.exp(e / 4)) for e in GRID]
    assert np.allclose(report.table["membership_risk"], expected, rtol=0, atol=1e-12)
    assert np.allclose(report.table["trivial_risk"], 0.5, rtol=0, atol=1e-12)
    # risk rises toward the trivial attacker's as epsilon shrinks
    assert report.table["membership_risk"].is_monotonic_decreasing


# -- the command ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, option",
    [
        (["--epsilons", "4,1"], "--epsilons"),
        (["--epsilons", "1,inf"], "--epsilons"),
        (["--prior", "1"], "--prior"),
        (["--prior", "0"], "--prior"),
        (["--epsilons", "1,1,2"], "--epsilons"),  # a budget twice
        (["--max-advantage", "2"], "--max-advantage"),
        (["--replicates", "0"], "--replicates"),
    ],
)
def test_the_command_names_a_bad_option(capsys, tmp_path, argv, option):
    from pymc_unbounded_dp import cli

    code = cli.main(["epsilon", *argv, "--out", str(tmp_path)])
    assert code == 2 and option in capsys.readouterr().err


def test_the_command_takes_the_quick_or_the_full_settings_and_passes_each_on(monkeypatch, tmp_path):
    """With choose_epsilon stopped at its call: ``--quick`` takes the quick settings, no flag
    the full ones, and each option given replaces its setting (draws and tune apart)."""
    from pymc_unbounded_dp import cli, epsilon
    from pymc_unbounded_dp.cli import EPSILON_DEFAULTS, EPSILON_QUICK

    class Called(Exception):
        pass

    calls = []

    def stopped(records, plan, model, grid, **options):
        calls.append({"records": len(records["s"]), "epsilons": tuple(grid), **options})
        raise Called

    monkeypatch.setattr(epsilon, "choose_epsilon", stopped)
    runs = [(["--quick"], EPSILON_QUICK), ([], EPSILON_DEFAULTS)]
    runs += [(["--quick", "--draws", "9", "--tune", "7"], {**EPSILON_QUICK, "draws": 9, "tune": 7})]
    for flags, expected in runs:
        with pytest.raises(Called):
            cli.main(["epsilon", *flags, "--out", str(tmp_path)])
        assert {k: calls[-1][k] for k in expected} == expected, flags


def test_the_command_writes_the_page(capsys, tmp_path, fake_risk):
    from pymc_unbounded_dp import cli

    argv = ["epsilon", "--quick", "--workers", "1", "--epsilons", "4", "--replicates", "1"]
    argv += ["--records", "200", "--draws", "30", "--tune", "30", "--target-width", "100"]
    code = cli.main([*argv, "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "epsilon = 4 is the smallest budget" in out
    page = (tmp_path / "epsilon.html").read_text()
    assert "<img" in page and "<table" in page and "width(beta[1])" in page
    table = pd.read_csv(tmp_path / "epsilon.csv", index_col=0)
    assert list(table.index) == [4.0]
    assert {"membership_risk", "width(tau)", "mean(n)"} <= set(table.columns)
    assert len(pd.read_csv(tmp_path / "fits.csv")) == 4  # one fit: beta[0..2], tau


# -- what each setting reaches (a hand audit, issue 32) -------------------------------------------


def fake_fits(monkeypatch, posterior):
    """Make each fit of ``choose_epsilon`` return ``posterior(chains, draws)`` (a dict of draws)
    as a sums-level fit, without sampling; returns the seeds of the releases simulated and of
    the fits, in order."""

    from pymc_unbounded_dp import epsilon, sampling

    seen = {"noise": [], "chain": [], "tune": []}
    real = epsilon.simulate_release

    def recorded(budget_plan, sums, n, seed):
        seen["noise"].append(seed)
        return real(budget_plan, sums, n, seed)

    def fake_sample(draws, tune, chains, random_seed, **options):
        seen["chain"].append(random_seed)
        seen["tune"].append(tune)
        values = posterior(chains, draws)
        idata = trace_of({"posterior": values})
        idata["posterior"].attrs["pmdp_augment"] = "sums"
        return idata

    monkeypatch.setattr(epsilon, "simulate_release", recorded)
    monkeypatch.setattr(sampling, "sample", fake_sample)
    return seen


def theta_draws(chains, draws):
    return {"theta": np.linspace(0.2, 0.4, chains * draws).reshape(chains, draws)}


def test_a_seed_sequence_child_seeds_its_own_simulated_release():
    """``random_seed`` may be a SeedSequence: two children of one parent (which share its
    entropy and differ in their spawn keys) give different noise, and one child the same noise
    each time."""
    plan = rl.Plan([rl.Statistic("s", 0, 1), rl.Count("n")], epsilon=1.0)

    def values(seed):
        release = simulate_release(plan, {"s": 30.0}, 100, random_seed=seed)
        return float(release["s"].value), int(release["n"].value)

    first, second = np.random.SeedSequence(5).spawn(2)
    assert values(first) == values(np.random.SeedSequence(5).spawn(2)[0])
    assert values(first)[0] != values(second)[0]  # continuous Laplace noise: never equal


def test_each_fit_uses_the_noise_then_the_chain_stream_of_its_budget_and_replicate(
    plan, records, fake_risk, monkeypatch
):
    """The documented seeds: fit ``r`` at budget ``b`` simulates its release from the first
    stream of ``SeedSequence(random_seed, spawn_key=(round(b * 1e6), r))`` and samples its chain
    from the second; ``report.fits`` lists the same seeds."""
    seen = fake_fits(monkeypatch, theta_draws)
    made = pmdp.choose_epsilon(
        records, plan, bernoulli_model, GRID, params="theta", replicates=2, random_seed=SEED,
        truth={"theta": 0.3}, draws=5, tune=1,
    )  # fmt: skip
    expected = []
    for budget in GRID:
        for replicate in range(2):
            key = (round(budget * 1e6), replicate)
            noise, chain = np.random.SeedSequence(SEED, spawn_key=key).spawn(2)
            expected.append((int(noise.generate_state(1)[0]), int(chain.generate_state(1)[0])))
    # (the first release simulated is the reference's, which builds the model once)
    assert list(zip(seen["noise"][1:], seen["chain"], strict=True)) == expected
    assert list(zip(made.fits["noise_seed"], made.fits["chain_seed"])) == expected


def test_the_attackers_prior_reaches_the_risk_engine(plan, records, fake_risk, monkeypatch):
    """``prior`` is the attacker's prior of membership at every budget (not the default 0.5),
    and the page's notes say so."""
    fake_fits(monkeypatch, theta_draws)
    made = pmdp.choose_epsilon(
        records, plan, bernoulli_model, GRID, params="theta", replicates=1, prior=0.2,
        truth={"theta": 0.3}, draws=5, tune=1,
    )  # fmt: skip
    assert [call[2] for call in fake_risk.calls] == [0.2, 0.2]
    assert any("prior 0.2;" in note for note in made.notes)


def test_the_default_target_is_the_bound_of_largest_magnitude_with_its_sign(
    records, fake_risk, monkeypatch
):
    """Bounds ``[-4, 1]``: the worst-case record is -4 (a value a record can take), and under
    replace-one its default replacement is the bound farther from it, 1."""
    import pytensor.tensor as pt

    def model(release):
        with pm.Model() as m:
            mu = pm.Normal("mu")
            x = pmdp.Records("x", pm.Normal.dist(mu, 1), n=release.sample_size("n"))
            release.privatized_sum("s", pt.clip(x, -4, 1))
        return m

    fake_fits(monkeypatch, lambda chains, draws: {"mu": np.zeros((chains, draws))})
    rows = {"s": np.linspace(-4.0, 1.0, 50)}
    for neighbouring, expected in (("add/remove", None), ("replace-one", 1.0)):
        signed = rl.Plan([rl.Statistic("s", -4, 1), rl.Count("n")], epsilon=1.0,
                         neighbouring=neighbouring)  # fmt: skip
        pmdp.choose_epsilon(
            rows, signed, model, [1.0], params="mu", replicates=1, truth={"mu": 0.0},
            draws=5, tune=1,
        )  # fmt: skip
        _, record, _, replacement = fake_risk.calls[-1]
        assert float(record["s"]) == -4.0
        assert (replacement if expected is None else float(replacement["s"])) == expected


def test_a_deterministic_parameter_is_summarised(plan, records, fake_risk, monkeypatch):
    """``params`` may name a deterministic of the model: its posterior is summarised as a free
    parameter's."""

    def model(release):
        with bernoulli_model(release) as m:
            pm.Deterministic("odds", m["theta"] / (1 - m["theta"]))
        return m

    def draws_of(chains, draws):
        theta = theta_draws(chains, draws)["theta"]
        return {"theta": theta, "odds": theta / (1 - theta)}

    fake_fits(monkeypatch, draws_of)
    made = pmdp.choose_epsilon(
        records, plan, model, [1.0], params=["odds"], replicates=1, truth={"odds": 0.4},
        draws=5, tune=1,
    )  # fmt: skip
    odds = draws_of(1, 5)["odds"].ravel()
    assert made.labels == ["odds"]
    assert made.table.loc[1.0, "sd(odds)"] == pytest.approx(odds.std(ddof=1), rel=1e-12)


def test_a_matrix_parameters_labels_are_arviz_labels(plan, records, fake_risk, monkeypatch):
    """A 2 x 2 parameter gives one row of figures per element, labelled as ArviZ labels them
    (``Phi[0, 1]``), and ``truth`` may give the elements by those labels."""
    import arviz as az

    def model(release):
        with bernoulli_model(release) as m:
            pm.Normal("Phi", shape=(2, 2))
        return m

    def draws_of(chains, draws):
        base = np.arange(chains * draws, dtype=float).reshape(chains, draws, 1, 1)
        return {"Phi": base + np.arange(4.0).reshape(1, 1, 2, 2) * 100}

    fake_fits(monkeypatch, draws_of)
    labels = list(az.summary(trace_of({"posterior": draws_of(1, 5)}), kind="stats").index)
    truth = {label: 100.0 * i + 2.0 for i, label in enumerate(labels)}
    made = pmdp.choose_epsilon(
        records, plan, model, [1.0], params="Phi", replicates=1, truth=truth, draws=5, tune=1,
    )  # fmt: skip
    assert made.labels == labels == ["Phi[0, 0]", "Phi[0, 1]", "Phi[1, 0]", "Phi[1, 1]"]
    for i, label in enumerate(labels):  # element i is 100 i + (0, 1, 2, 3, 4)
        assert made.table.loc[1.0, f"sd({label})"] == pytest.approx(np.std(range(5), ddof=1))
        assert made.fits.set_index("label").loc[label, "mean"] == pytest.approx(100 * i + 2)


def test_the_posterior_of_n_and_the_level_of_each_fit_are_reported(
    plan, records, fake_risk, monkeypatch
):
    """With every fit's draws of ``n`` known: ``mean(n)`` and ``sd(n)`` are their mean and
    sample sd (``ddof=1``), and each fit's ``augment`` is the level it ran at (``"sums"``), not
    the one asked for (``"auto"``)."""
    n = np.array([[290, 300, 310, 305], [295, 299, 301, 330]])
    fake_fits(monkeypatch, lambda chains, draws: {**theta_draws(chains, draws), "n": n})
    made = pmdp.choose_epsilon(
        records, plan, bernoulli_model, [1.0], params="theta", replicates=2,
        truth={"theta": 0.3}, draws=4, tune=1, chains=2,
    )  # fmt: skip
    assert made.table.loc[1.0, "mean(n)"] == pytest.approx(n.mean(), rel=1e-12)
    assert made.table.loc[1.0, "sd(n)"] == pytest.approx(n.std(ddof=1), rel=1e-12)
    assert made.table.loc[1.0, "sd_se(n)"] == 0.0  # the same draws in both replicates
    assert list(made.fits["augment"]) == ["sums", "sums"]


def test_each_paragraph_names_the_shares_of_its_budget():
    """The paragraph of a budget opens with each noisy value's share, named as in the plan."""
    for measure in ("epsilon", "rho"):
        table = pd.DataFrame(
            {f"{measure}[s]": [0.375, 3.0], f"{measure}[n]": [0.125, 1.0], "width(a)": [0.5, 0.2]},
            index=pd.Index([0.5, 4.0], name=measure),
        )
        first, last = EpsilonReport(table, ["a"], measure=measure).paragraphs()
        assert first.startswith(f"At {measure} = 0.5 (s: 0.375, n: 0.125), the analyst's")
        assert last.startswith(f"At {measure} = 4 (s: 3, n: 1), ")


# -- found by the audit of the release file and the command line (2026-12-07) --------------------
class ReachedChooseEpsilon(Exception):
    """Raised by :func:`stop_at_choose_epsilon`'s stand-in: the command got that far."""


def stop_at_choose_epsilon(monkeypatch) -> list[dict]:
    """Replace ``choose_epsilon`` by a stand-in that records its keyword options and stops."""
    from pymc_unbounded_dp import epsilon

    calls = []

    def stopped(*args, **options):
        calls.append(options)
        raise ReachedChooseEpsilon

    monkeypatch.setattr(epsilon, "choose_epsilon", stopped)
    return calls


def test_the_frontier_plots_each_width_against_the_advantage():
    """The x of each parameter's points is the attacker's advantage (not the risk column)."""
    report = hand_made()
    axes = report.plot().axes[0]
    lines = [container.lines[0] for container in axes.containers]  # the errorbars' data lines
    for line, label in zip(lines, ["a", "b"], strict=True):
        assert list(line.get_xdata()) == [0.05, 0.15, 0.3, 0.45]
        assert list(line.get_ydata()) == list(report.table[f"width({label})"])


def test_the_reasons_and_paragraphs_name_the_right_budgets_and_errors():
    """With no budget meeting the target the reason quotes the largest budget's widths with
    their own standard errors (``width_se``), and each paragraph says it shrinks from the next
    larger budget to its own."""
    report = hand_made()
    reason = report.recommend(target_width=0.05).reason
    assert reason == (
        "No epsilon of the grid meets the utility target (width(a) <= 0.05 and width(b) <= 0.05); "
        "the largest, 2, gives width(a) = 0.2 ± 0.01, width(b) = 0.1 ± 0.03. Extend the grid "
        "upwards, or accept wider intervals."
    )
    paragraphs = report.paragraphs()
    for text, (smaller, larger) in zip(
        paragraphs[:-1], [(0.25, 0.5), (0.5, 1), (1, 2)], strict=True
    ):
        assert f" Shrinking epsilon from {larger:g} to {smaller:g}: " in text, text
    assert "Shrinking" not in paragraphs[-1]


def test_the_command_passes_every_option_on_even_zero_tuning(monkeypatch, tmp_path):
    """``--tune 0`` is no tuning (not the default), and the recommendation's targets and the
    attacker's prior reach choose_epsilon as given."""
    from pymc_unbounded_dp import cli

    calls = stop_at_choose_epsilon(monkeypatch)
    argv = ["epsilon", "--quick", "--tune", "0", "--target-width", "0.1"]
    argv += ["--max-advantage", "0.2", "--prior", "0.3", "--out", str(tmp_path)]
    with pytest.raises(ReachedChooseEpsilon):
        cli.main(argv)
    expected = {"tune": 0, "target_width": 0.1, "max_membership_advantage": 0.2, "prior": 0.3}
    assert {k: calls[-1][k] for k in expected} == expected


@pytest.mark.parametrize("option", ["--max-advantage", "--prior", "--target-width"])
def test_the_command_refuses_nan(capsys, monkeypatch, tmp_path, option):
    """``nan`` is not a probability nor a width: a usage error before any fit is started."""
    from pymc_unbounded_dp import cli, epsilon

    def started(*args, **options):
        raise AssertionError(f"{option} nan reached choose_epsilon")

    monkeypatch.setattr(epsilon, "choose_epsilon", started)
    code = cli.main(["epsilon", "--quick", "--workers", "1", option, "nan", "--out", str(tmp_path)])
    assert code == 2 and option in capsys.readouterr().err


def test_the_quick_and_the_full_run_write_to_folders_of_their_own(monkeypatch, tmp_path):
    """Without ``--out``: ``pmdp-out/epsilon`` for the full run, ``pmdp-out/epsilon-quick`` for
    ``--quick`` (a quick run never overwrites a full run's page)."""
    from pymc_unbounded_dp import cli

    stop_at_choose_epsilon(monkeypatch)
    monkeypatch.chdir(tmp_path)
    for flags, folder in (["--quick"], "epsilon-quick"), ([], "epsilon"):
        with pytest.raises(ReachedChooseEpsilon):
            cli.main(["epsilon", *flags])
        assert (tmp_path / "pmdp-out" / folder).is_dir(), flags
    assert sorted(p.name for p in (tmp_path / "pmdp-out").iterdir()) == ["epsilon", "epsilon-quick"]
