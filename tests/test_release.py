"""The curator's release workflow: sensitivity from bounds, budget split, release files, OpenDP."""

import dataclasses
import json
import math

import numpy as np
import opendp.prelude as dp
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import assert_mean_matches, draws_of
from noise_laws import Law, assert_draws_follow
from oracles import bernoulli_posterior
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import release as rl
from pymc_unbounded_dp._registry import model_blocks

dp.enable_features("contrib")

#: The paper's regression (Section 6.1): records (x1, x2, y) clamped to [-5, 5] and rescaled to
#: [-1, 1]; per record t = (y, x1 y, x2 y, y^2, x1, x2, x1^2, x1 x2, x2^2).
REG_LOWER = np.array([-1, -1, -1, 0, -1, -1, 0, -1, 0], dtype=float)
REG_UPPER = np.ones(9)


def regression_rows(n, rng):
    x = rng.normal([1.0, -1.0], 1.0, size=(n, 2))
    y = -x[:, 0] + x[:, 1] + rng.normal(size=n)
    x1, x2, y = (np.clip(v, -5, 5) / 5 for v in (x[:, 0], x[:, 1], y))
    return np.stack([y, x1 * y, x2 * y, y * y, x1, x2, x1 * x1, x1 * x2, x2 * x2], axis=1)


# -- sensitivity and calibration ----------------------------------------------------------------
@pytest.mark.parametrize(
    "neighbouring, budget, s_sensitivity, s_family, s_scale, n_mechanism",
    [
        # add/remove: max(|l|, |u|) = 1 per coordinate -> L1 9, L2 3.
        (
            "add/remove",
            {"epsilon": {"s": 1.0, "n": 0.1}},
            9.0,
            pmdp.Laplace,
            9.0,
            pmdp.DiscreteLaplace(scale=10.0, sensitivity=1),
        ),
        (
            "add/remove",
            {"rho": {"s": 0.5, "n": 0.125}},
            3.0,
            pmdp.Gaussian,
            3.0,
            pmdp.DiscreteGaussian(sigma=2.0, sensitivity=1),
        ),
        # replace-one: u - l = 2, 2, 2, 1, 2, 2, 1, 2, 1 -> L1 15, L2 sqrt(27); n is public.
        ("replace-one", {"epsilon": 0.5}, 15.0, pmdp.Laplace, 30.0, None),
        ("replace-one", {"rho": 0.5}, math.sqrt(27), pmdp.Gaussian, math.sqrt(27), None),
    ],
)
def test_regression_sensitivity_and_calibration(
    neighbouring, budget, s_sensitivity, s_family, s_scale, n_mechanism
):
    plan = rl.Plan(
        [rl.Statistic("s", REG_LOWER, REG_UPPER), rl.Count("n")],
        neighbouring=neighbouring,
        **budget,
    )
    s = plan.mechanisms["s"]
    assert type(s) is s_family
    assert s.sensitivity == pytest.approx(s_sensitivity, rel=1e-15)
    assert s.scale == pytest.approx(s_scale, rel=1e-15)
    assert plan.mechanisms["n"] == n_mechanism
    assert plan.sensitivities["n"] == (1.0 if neighbouring == "add/remove" else 0.0)
    ((measure, total),) = budget.items()
    expected = math.fsum(total.values()) if isinstance(total, dict) else total
    assert plan.guarantee[measure] == pytest.approx(expected, rel=1e-12)


def test_integer_statistics_get_discrete_mechanisms_and_l2_needs_an_integer_sensitivity():
    plan = rl.Plan([rl.Statistic("k", [0, -2], [3, 1], integer=True)], epsilon=2.0)
    assert plan.mechanisms["k"] == pmdp.DiscreteLaplace(scale=2.5, sensitivity=5)  # 3 + 2
    plan = rl.Plan([rl.Statistic("k", 0, 4, integer=True)], rho=2.0)
    assert plan.mechanisms["k"] == pmdp.DiscreteGaussian(sigma=2.0, sensitivity=4)
    with pytest.raises(ValueError, match=r"`statistics`.*L2 sensitivity 1.41421"):
        rl.Plan([rl.Statistic("k", [0, 0], [1, 1], integer=True)], rho=1.0)
    with pytest.raises(ValueError, match=r"`statistics`.*L2 sensitivity 1.73205"):
        rl.Plan([rl.Statistic("k", [0, 0, 0], [1, 1, 1], integer=True)], rho=1.0)


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"epsilon": 1.2}, {"a": 0.4, "b": 0.4, "n": 0.4}),
        (
            {"epsilon": 1.2, "weights": {"a": 0.5, "b": 0.25, "n": 0.25}},
            {"a": 0.6, "b": 0.3, "n": 0.3},
        ),
        ({"rho": {"a": 0.01, "b": 0.02, "n": 0.3}}, {"a": 0.01, "b": 0.02, "n": 0.3}),
        (
            {"rho": 0.7, "weights": {"a": 0.1, "b": 0.2, "n": 0.7}},
            {"a": 0.07, "b": 0.14, "n": 0.49},
        ),
    ],
)
def test_budget_split_sums_to_the_total(kwargs, expected):
    plan = rl.Plan([rl.Statistic("a", -1, 1), rl.Statistic("b", 0, [2, 3]), rl.Count()], **kwargs)
    assert plan.shares == pytest.approx(expected, rel=1e-12)
    (measure,) = {"epsilon", "rho"} & set(kwargs)
    total = kwargs[measure] if not isinstance(kwargs[measure], dict) else sum(expected.values())
    assert math.fsum(plan.shares.values()) == pytest.approx(total, rel=1e-14)
    # The stated guarantee is the composition of the mechanisms, computed from scale/sensitivity.
    assert plan.guarantee[measure] == pytest.approx(total, rel=1e-12)
    assert f"guarantee: {measure} = {total:.6g}" in plan.describe()


# -- releasing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["opendp", "pmdp"])
def test_records_are_clamped_and_summed(sampler):
    rows = np.array([[-3.0, 0.5], [0.25, 7.0], [1.0, -0.5]])  # clamped to [-1, 1] x [0, 1]
    plan = rl.Plan([rl.Statistic("s", [-1, 0], [1, 1]), rl.Count("n")], epsilon=1e9)
    rel = plan.release({"s": rows}, sampler=sampler)
    np.testing.assert_allclose(rel["s"].value, [0.25, 1.5], atol=1e-6)  # noise scale ~ 4e-9
    assert rel["n"].value == 3 and isinstance(rel["n"].value, int)
    assert rel["s"].sampler.startswith("opendp" if sampler == "opendp" else "pymc_unbounded_dp")


def test_the_default_sampler_is_opendps_and_says_so():
    rel = rl.Plan([rl.Statistic("s", 0.0, 1.0)], epsilon=1.0).release(sums={"s": 0.5}, n=3)
    assert rel["s"].sampler.startswith("opendp ")


def test_a_statistic_and_a_released_value_are_immutable():
    with pytest.raises(dataclasses.FrozenInstanceError):
        rl.Statistic("s", 0.0, 1.0).name = "t"
    rel = rl.Plan([rl.Statistic("s", 0.0, 1.0)], epsilon=1.0).release(sums={"s": 0.5}, n=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rel["s"].value = 0.5


@pytest.mark.parametrize("sampler", ["opendp", "pmdp"])
def test_the_noise_comes_from_the_sampler_asked_for(sampler, monkeypatch):
    """``sampler="pmdp"`` draws with the mechanism's own exact sampler and never calls OpenDP;
    ``"opendp"`` draws with OpenDP's and never calls the package's."""
    calls = []
    own = pmdp.Laplace.release

    def refuse_opendp(*args, **kwargs):
        raise AssertionError("OpenDP was called")

    def record_own(self, value):
        calls.append("pmdp")
        return own(self, value)

    if sampler == "pmdp":
        monkeypatch.setattr(rl, "to_opendp", refuse_opendp)
    monkeypatch.setattr(pmdp.Laplace, "release", record_own)
    rel = rl.Plan([rl.Statistic("s", 0.0, 1.0)], epsilon=1.0).release(
        sums={"s": 0.5}, n=3, sampler=sampler
    )
    assert calls == (["pmdp"] if sampler == "pmdp" else [])
    assert rel["s"].sampler.startswith("opendp" if sampler == "opendp" else "pymc_unbounded_dp")


def test_records_of_the_wrong_width_are_refused():
    plan = rl.Plan([rl.Statistic("s", REG_LOWER, REG_UPPER)], epsilon=1.0)
    for rows in (np.zeros((5, 8)), np.zeros((5, 10)), np.zeros((5, 9, 1))):
        with pytest.raises(
            ValueError, match=r"`records\['s'\]` has shape .*; expected \(n, \*\(9,\)\)"
        ):
            plan.release({"s": rows})


def test_rows_sums_and_scales_at_the_edges_of_what_is_accepted():
    """Integer-valued float rows of an integer statistic; statistics of several shapes with the
    same rows; an empty table (``n = 0``); a real sum a rounding error (1e-9 relative) beyond its
    bounds, but not more; an integer scale of exactly 2**52, but not more."""
    plan = rl.Plan([rl.Statistic("k", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    assert plan.release({"k": np.array([0.0, 1.0, 1.0])})["n"].mechanism is not None
    vector = rl.Plan([rl.Statistic("k", np.zeros(3, dtype=int), 2, integer=True)], epsilon=1e9)
    rel = vector.release({"k": np.array([[0, 1, 2], [2, 2, 5]])})  # clamped to 2: (2, 3, 4)
    assert np.asarray(rel["k"].value).tolist() == [2, 3, 4]
    plan = rl.Plan([rl.Statistic("s", 0.0, 1.0), rl.Statistic("v", np.zeros(3), 1.0)], epsilon=1e9)
    rel = plan.release({"s": np.full(4, 0.5), "v": np.full((4, 3), 0.25)})
    np.testing.assert_allclose(rel["s"].value, 2.0, atol=1e-6)
    np.testing.assert_allclose(rel["v"].value, [1.0, 1.0, 1.0], atol=1e-6)
    rel = plan.release(sums={"s": 0.0, "v": np.zeros(3)}, n=0)
    np.testing.assert_allclose(rel["s"].value, 0.0, atol=1e-6)
    big = rl.Plan([rl.Statistic("x", 0.0, 1e6)], epsilon=1.0)
    big.release(sums={"x": 1e7 * (1 + 5e-10)}, n=10)  # within 1e-9 of the bound 1e7
    with pytest.raises(ValueError, match=r"outside the declared bounds"):
        big.release(sums={"x": 1e7 * (1 + 2e-9)}, n=10)
    counts = rl.Plan([rl.Statistic("k", 0, 1, integer=True)], epsilon=1.0)
    with pytest.raises(ValueError, match=r"outside the declared bounds"):  # no slack for integers
        counts.release(sums={"k": 11}, n=10)
    tiny = rl.Plan([rl.Statistic("x", 0.0, 0.01)], epsilon=1.0)  # sums up to 0.1: slack 1e-9
    tiny.release(sums={"x": 0.1 + 5e-10}, n=10)
    with pytest.raises(ValueError, match=r"outside the declared bounds"):
        tiny.release(sums={"x": 0.1 + 1.5e-9}, n=10)
    small = rl.Plan([rl.Statistic("x", 0.0, 1.0)], epsilon=1.0)
    small.release(sums={"x": 10 + 5e-9}, n=10)  # 1e-9 of max(1, |bound|) = 1e-8 here
    with pytest.raises(ValueError, match=r"outside the declared bounds"):
        small.release(sums={"x": 10 + 2e-8}, n=10)
    huge = rl.Plan([rl.Statistic("x", -1e15, 1e15)], epsilon=1.0)  # noise scale 1e15
    huge.release(sums={"x": 1e15 * 2**40}, n=2**41)  # 2**40 scales from 0: still exact
    k = rl.Statistic("k", 0, 1, integer=True)
    assert rl.Plan([k], epsilon=2.0**-52).mechanisms["k"].scale == 2.0**52
    with pytest.raises(ValueError, match=r"\(scale <= 2\*\*52\)"):
        rl.Plan([k], epsilon=2.0**-52 * (1 - 1e-9))


def test_a_release_with_a_public_count_round_trips_through_its_file():
    plan = rl.Plan(
        [rl.Statistic("s", [-2.0], [2.0]), rl.Count("n")], neighbouring="replace-one", rho=0.5
    )
    rel = plan.release(sums={"s": [1.0]}, n=30)
    loaded = rl.Release.from_json(rel.to_json())
    assert loaded["n"].mechanism is None and loaded["n"].value == 30
    # a file of public values only (written by hand: a Plan refuses it) spends nothing
    document = json.loads(rel.to_json())
    del document["values"]["s"]
    document["guarantee"] = {"rho": 0.0}
    assert rl.Release.from_json(json.dumps(document)).guarantee == {"rho": 0.0}
    # a rho release names the norm of each family: Laplace is not an L2 mechanism, nor a
    # Gaussian an L1 one
    for family, norm in (("Laplace", "l2"), ("Gaussian", "l1")):
        document = json.loads(rel.to_json())
        document["values"]["s"]["mechanism"].update(family=family, norm=norm)
        with pytest.raises(ValueError, match=rf"value 's' has mechanism family '{family}'"):
            rl.Release.from_json(json.dumps(document))


def test_integer_records_may_reach_exactly_2_to_the_62():
    """The bound of the integer samplers' exact range is inclusive: n * max|bound| = 2**62."""
    plan = rl.Plan([rl.Statistic("k", 0, 2**40, integer=True)], epsilon=1.0)
    rel = plan.release({"k": np.zeros(2**22, dtype=np.int8)})  # reach 2**22 * 2**40 = 2**62
    assert isinstance(rel["k"].value, int)
    rel = plan.release(sums={"k": 2**62}, n=2**22)  # and a sum of 2**62 itself
    assert isinstance(rel["k"].value, int)


def test_a_public_value_before_a_noisy_one_leaves_the_noisy_one_its_mechanism():
    plan = rl.Plan(
        [rl.Count("n"), rl.Statistic("s", 0.0, 1.0)], neighbouring="replace-one", epsilon=1.0
    )
    assert plan.mechanisms["n"] is None and plan.mechanisms["s"] == pmdp.Laplace(epsilon=1.0)


def test_integer_release_never_leaves_the_exact_range():
    plan = rl.Plan([rl.Statistic("k", 0, 2**40, integer=True)], epsilon=1.0)
    with pytest.raises(ValueError, match=r"`sums` \(value 'k'\) is outside the exact range"):
        plan.release(sums={"k": 2**63 - 1}, n=2**23)
    with pytest.raises(ValueError, match=r"`records\['k'\]` can reach .* exact range"):
        plan.release({"k": np.zeros(2**23, dtype=np.int8)})
    with pytest.raises(ValueError, match=r"`epsilon` share .*\(scale <= 2\*\*52\)"):
        rl.Plan([rl.Statistic("k", 0, 1, integer=True)], epsilon=1e-17)
    plan = rl.Plan([rl.Statistic("x", -1e15, 1e15)], epsilon=1.0)  # scale 1e15
    with pytest.raises(ValueError, match=r"`sums` \(value 'x'\) is beyond 2\*\*40 noise scales"):
        plan.release(sums={"x": 2e27}, n=2**41)
    # Inside the range both samplers return exact 64-bit integers.
    plan = rl.Plan([rl.Statistic("k", 0, 2**30, integer=True)], epsilon=1e6)
    for sampler in ("opendp", "pmdp"):
        big = plan.release(sums={"k": 2**61}, n=2**31, sampler=sampler)["k"].value
        assert isinstance(big, int) and abs(big - 2**61) < 10**9


def test_a_release_file_round_trips_exactly(tmp_path):
    rng = np.random.default_rng(3)
    plan = rl.Plan(
        [rl.Statistic("s", REG_LOWER, REG_UPPER), rl.Count("n")],
        epsilon=0.3,
        weights={"s": 0.7, "n": 0.3},
    )
    rel = plan.release({"s": regression_rows(200, rng)})
    loaded = rl.load(rel.save(tmp_path / "release.json"))
    assert list(loaded) == ["s", "n"]
    for name in rel:
        a, b = rel[name], loaded[name]
        assert type(a.mechanism) is type(b.mechanism)
        assert a.mechanism.scale.hex() == b.mechanism.scale.hex()  # bit for bit
        assert a.mechanism.sensitivity == b.mechanism.sensitivity
        assert np.array_equal(a.value, b.value) and type(a.value) is type(b.value)
        assert np.array_equal(a.lower, b.lower) and np.array_equal(a.upper, b.upper)
        assert (a.share, a.sampler, a.kind, a.integer) == (b.share, b.sampler, b.kind, b.integer)
    # a release describes itself as its plan does (Released.shape; it used to raise), one line
    # per value under a header, then the guarantee
    assert loaded.describe() == rel.describe() == plan.describe()
    lines = plan.describe().splitlines()
    assert [line.split()[0] for line in lines[1:-1]] == ["s", "n"]
    assert "9" in lines[1].split() and "Laplace(" in lines[1] and "DiscreteLaplace(" in lines[2]
    assert loaded.guarantee == rel.guarantee and loaded.budget == rel.budget
    document = json.loads((tmp_path / "release.json").read_text())
    s = plan.mechanisms["s"]
    assert s.scale == 9 / (0.3 * 0.7)
    assert document["values"]["s"]["mechanism"] == {
        "family": "Laplace",
        "scale": s.scale,
        "sensitivity": 9.0,
        "norm": "l1",
        "privacy": s.privacy,
    }
    assert (document["format"], document["version"], document["neighbouring"]) == (
        "pymc-unbounded-dp release",
        1,
        "add/remove",
    )


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d.update(version=2), r"`text` has format version 2"),
        (lambda d: d.update(format="other"), r"`text` is not a pymc-unbounded-dp release file"),
        (
            lambda d: d["values"]["s"]["mechanism"].update(sensitivity=4.0),
            r"`text`: value 's' is calibrated to sensitivity 4.0 but its bounds give 9.0",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(family="Gaussian", norm="l2"),
            r"`text`: value 's' has mechanism family 'Gaussian'",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(family="DiscreteLaplace"),
            r"`text`: value 's' is integer=False but its mechanism DiscreteLaplace is for the "
            r"integers",
        ),
        (lambda d: d["values"]["s"].update(value="abc"), r"value 's' is not a finite number array"),
        (lambda d: d["values"]["s"].update(value=["1"] * 9), r"value 's' is not a finite number"),
        (lambda d: d["values"]["s"].update(value=[True] * 9), r"value 's' is not a finite number"),
        (lambda d: d["values"]["s"].update(value=[0.0] * 8 + [math.nan]), r"not a finite number"),
        (lambda d: d["values"]["s"].update(value=[[0.0], [1.0, 2.0]]), r"not a finite number"),
        (lambda d: d["values"]["n"].update(value=1.5), r"value 'n' is not an integer array: 1.5"),
        (lambda d: d["values"]["s"].update(value=[0.0] * 8), r"value 's' has shape \(8,\)"),
        (
            lambda d: d["values"]["s"].update(value=[0.0] * 10),
            r"`text`: value 's' has shape \(10,\), its bounds \(9,\)",
        ),
        (
            lambda d: d["values"]["n"]["mechanism"].update(family="Laplace"),
            r"`text`: value 'n' is integer=True but its mechanism Laplace is for the reals",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(scale=1.0),
            r"`text` states guarantee .* mechanisms compose to epsilon=",
        ),
        (lambda d: d["values"]["s"].pop("lower"), r"`text` is not a valid release file"),
        (lambda d: d.update(neighbouring="swap"), r"`neighbouring` must be one of"),
        # found by the mutation run of the release side (issue 32)
        (lambda d: d.update(version=0), r"`text` has format version 0"),
        (
            lambda d: d.pop("budget"),
            r"`text` is not a valid release file: it has no 'budget' entry\.",
        ),
        (
            lambda d: d.update(guarantee={"rho": 1.0}),
            r"has budget \{'epsilon': 1.0\} and guarantee \{'rho': 1.0\}; expected one measure",
        ),
        (  # the guarantee its mechanisms compose to, but above the stated budget
            lambda d: d["budget"].update(epsilon=0.6),
            r"states guarantee \{'epsilon': 1.0\} and budget \{'epsilon': 0.6\}",
        ),
        (  # a stated guarantee below what the mechanisms compose to (still within the budget)
            lambda d: d["guarantee"].update(epsilon=0.5),
            r"states guarantee \{'epsilon': 0.5\} and budget \{'epsilon': 1.0\}, but its "
            r"mechanisms compose to epsilon=1.0",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(sensitivity=8.5),
            r"`text`: value 's' is calibrated to sensitivity 8.5 but its bounds give 9.0",
        ),
        (lambda d: d.update(budget={}), r"has budget \{\} and guarantee .*expected one measure"),
        (lambda d: d["budget"].update(rho=0.5), r"expected one measure"),
        (lambda d: d["guarantee"].update(rho=0.5), r"expected one measure"),
        (  # a Gaussian said to be an L1 mechanism
            lambda d: d["values"]["s"]["mechanism"].update(family="Gaussian"),
            r"value 's' has mechanism family 'Gaussian' \(norm 'l1'\); a epsilon budget uses l1",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(family="Staircase"),
            r"value 's' has mechanism family 'Staircase' \(norm 'l1'\); a epsilon budget uses l1",
        ),
        (
            lambda d: d["values"]["s"]["mechanism"].update(norm="l2"),
            r"value 's' has mechanism family 'Laplace' \(norm 'l2'\); a epsilon budget uses l1",
        ),
        (
            lambda d: d["values"]["s"].update(mechanism=None),
            r"value 's' has no mechanism but sensitivity 9.0\.",
        ),
        (  # a count under add/remove has sensitivity 1: it needs its noise
            lambda d: d["values"]["n"].update(mechanism=None),
            r"value 'n' has no mechanism but sensitivity 1\.",
        ),
        (
            lambda d: d.pop("format"),
            r"it has no 'format' entry \(its entries: version, neighbouring, budget, guarantee, "
            r"composition, values\)\.",
        ),
        (  # eleven entries: the first ten are listed
            lambda d: (d.pop("format"), d.update({f"extra{i}": i for i in range(5)})),
            r"\(its entries: version, .*, extra3, \.\.\.\)\.",
        ),
        (  # ten entries: all are listed
            lambda d: (d.pop("format"), d.update({f"extra{i}": i for i in range(4)})),
            r"\(its entries: version, .*, extra3\)\.",
        ),
        # found by the audit of the release file and the command line (2026-12-07): a file that
        # does not say its neighbouring relation is refused, not read as add/remove
        (
            lambda d: d.pop("neighbouring"),
            r"`text` is not a valid release file: it has no 'neighbouring' entry\.",
        ),
        # a budget or guarantee that is not a number: refused naming the file (they raised a
        # bare TypeError or "could not convert string to float"), and JSON's true is no version
        (
            lambda d: d["guarantee"].update(epsilon="1.0"),
            r"`text` is not a valid release file: its guarantee is '1\.0', not a number\.",
        ),
        (
            lambda d: d["guarantee"].update(epsilon=None),
            r"`text` is not a valid release file: its guarantee is None, not a number\.",
        ),
        (
            lambda d: d["budget"].update(epsilon="abc"),
            r"`text` is not a valid release file: its budget is 'abc', not a number\.",
        ),
        (
            lambda d: d["budget"].update(epsilon=True),
            r"`text` is not a valid release file: its budget is True, not a number\.",
        ),
        (lambda d: d.update(version=True), r"`text` has format version True, this package reads"),
    ],
)
def test_a_tampered_release_file_is_refused(edit, message):
    rel = rl.Plan([rl.Statistic("s", REG_LOWER, REG_UPPER), rl.Count("n")], epsilon=1.0).release(
        sums={"s": np.zeros(9)}, n=10
    )
    document = json.loads(rel.to_json())
    edit(document)
    with pytest.raises(ValueError, match=message):
        rl.Release.from_json(json.dumps(document))


def test_release_with_opendp_save_load_and_fit_the_model(tmp_path):
    """Curator: Bernoulli records, released with OpenDP (discrete Laplace on the sum and on n);
    analyst: the model built from the file has the release's mechanisms, and its posterior is the
    exact one."""
    x = np.random.default_rng(7).binomial(1, 0.3, size=40)
    plan = rl.Plan(
        [rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon={"s": 1.0, "n": 0.5}
    )
    path = plan.release({"s": x}, sampler="opendp").save(tmp_path / "bernoulli.json")

    rel = rl.load(path)
    assert rel["s"].sampler.startswith("opendp ") and rel.guarantee == {"epsilon": 1.5}
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        n = rel.sample_size("n")
        records = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        rel.privatized_sum("s", pt.clip(records, rel["s"].lower, rel["s"].upper))
    blocks = model_blocks(model)
    used = {"s": blocks.sums[0].mechanism, "n": blocks.sample_sizes[0].mechanism}
    for name, scale in (("s", 1.0), ("n", 2.0)):
        released = rel[name].mechanism
        assert type(used[name]) is type(released) is pmdp.DiscreteLaplace
        assert (used[name].scale, used[name].sensitivity) == (released.scale, released.sensitivity)
        assert (released.scale, released.sensitivity) == (scale, 1.0)

    idata = pmdp.sample(
        model=model,
        draws=600,
        tune=300,
        chains=2,
        cores=1,
        random_seed=11,
        progressbar=False,
        compute_convergence_checks=False,
    )
    exact = bernoulli_posterior(
        rel["s"].value,
        rel["s"].mechanism,
        2.0,
        3.0,
        n_dp=rel["n"].value,
        n_mechanism=rel["n"].mechanism,
        n_max=300,
    )
    assert_mean_matches(draws_of(idata, "theta"), exact["theta_mean"], "theta")
    assert_mean_matches(draws_of(idata, "n"), exact["n_mean"], "n")


def test_replace_one_release_gives_a_public_n_and_a_bounded_model():
    rows = np.random.default_rng(2).normal(0.5, 1.0, size=(30, 1))
    plan = rl.Plan(
        [rl.Statistic("s", [-2.0], [2.0]), rl.Count("n")], neighbouring="replace-one", rho=0.5
    )
    rel = plan.release({"s": rows})
    assert rel["n"].mechanism is None and rel["n"].sampler == "exact (public)"
    assert rel.guarantee == {"rho": 0.5} and "n" not in plan.shares
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0, shape=(1,)), n=rel.sample_size("n"))
        rel.privatized_sum("s", pt.clip(x, -2.0, 2.0))
    assert model_blocks(model).records[0].n == 30
    assert model_blocks(model).sums[0].mechanism == pmdp.Gaussian(sigma=4.0, sensitivity=4.0)


# -- OpenDP measurements as mechanisms ----------------------------------------------------------
FLOAT = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
FLOATS = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
INTS = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
INTS_L2 = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T=float)
INT = dp.atom_domain(T="i32"), dp.absolute_distance(T="i32")
UINT = dp.atom_domain(T="u32"), dp.absolute_distance(T="u32")  # unsigned: integers too


@pytest.mark.parametrize(
    "build, expected",
    [
        (lambda: dp.m.make_laplace(*FLOAT, scale=0.37), pmdp.Laplace(scale=0.37)),
        (lambda: FLOATS >> dp.m.then_laplace(scale=1.5), pmdp.Laplace(scale=1.5)),
        (lambda: dp.m.make_laplace(*INTS, scale=2.5), pmdp.DiscreteLaplace(scale=2.5)),
        (lambda: dp.m.make_geometric(*INT, scale=3.0), pmdp.DiscreteLaplace(scale=3.0)),
        (lambda: dp.m.make_geometric(*UINT, scale=2.0), pmdp.DiscreteLaplace(scale=2.0)),
        (lambda: dp.m.make_gaussian(*FLOAT, scale=1e-3), pmdp.Gaussian(sigma=1e-3)),
        (lambda: dp.m.make_gaussian(*INTS_L2, scale=4.0), pmdp.DiscreteGaussian(sigma=4.0)),
        (lambda: dp.m.make_noise(*FLOAT, dp.max_divergence(), scale=0.1), pmdp.Laplace(scale=0.1)),
    ],
)
def test_from_opendp_reads_family_and_scale(build, expected):
    assert rl.from_opendp(build()) == expected


@pytest.mark.parametrize(
    "mechanism, shape",
    [
        (pmdp.Laplace(scale=0.3), ()),
        (pmdp.Gaussian(sigma=2.5), (2, 3)),
        (pmdp.DiscreteLaplace(scale=7 / 3), (4,)),
        (pmdp.DiscreteGaussian(sigma=1.7), ()),
    ],
)
def test_to_opendp_and_back_is_the_same_mechanism(mechanism, shape):
    measurement = rl.to_opendp(mechanism, shape)
    assert rl.from_opendp(measurement) == mechanism
    size = int(np.prod(shape))  # an array is released as its flattened values
    if shape:
        assert measurement.input_domain.size == size  # OpenDP checks what it composes with
    zeros = [0 if mechanism.discrete else 0.0] * size
    assert np.asarray(measurement(zeros if shape else zeros[0])).size == size
    # OpenDP's own privacy map agrees with the mechanism's guarantee at its sensitivity.
    (value,) = mechanism.privacy.values()
    d_in = 1 if mechanism.discrete and mechanism.norm == "l1" else 1.0
    assert measurement.map(d_in) == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize(
    "build, error, message",
    [
        (
            lambda: dp.m.make_randomized_response_bool(0.7),
            TypeError,
            "make_randomized_response_bool",
        ),
        (
            lambda: (
                (dp.vector_domain(dp.atom_domain(bounds=(0.0, 1.0))), dp.symmetric_distance())
                >> dp.t.then_sum()
                >> dp.m.then_laplace(scale=1.0)
            ),
            TypeError,
            "make_chain_mt",
        ),
        (lambda: dp.m.make_laplace(*FLOAT, scale=0.37, k=-2), ValueError, "lattice 2\\*\\*-2"),
        # a lattice 16 times finer than the scale is still coarse: 10 binary digits are asked
        (lambda: dp.m.make_laplace(*FLOAT, scale=1.0, k=-4), ValueError, "lattice 2\\*\\*-4"),
        (lambda: dp.m.make_geometric(*INT, scale=3.0, bounds=(0, 10)), TypeError, "`bounds`"),
        (lambda: 1.0, TypeError, "must be an OpenDP Measurement"),
    ],
)
def test_from_opendp_refuses_other_measurements(build, error, message):
    with pytest.raises(error, match=rf"from_opendp: `measurement`.*{message}"):
        rl.from_opendp(build())


def test_privatized_sum_and_sample_size_accept_opendp_measurements():
    s_measurement = dp.m.make_laplace(*FLOATS, scale=2.0)
    n_measurement = dp.m.make_laplace(*INT, scale=4.0)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        n = pmdp.SampleSize("n", n_dp=n_measurement(25), mechanism=n_measurement)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        clamped = pt.clip(x, -1, 1)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([clamped, clamped**2], axis=1),
            s_measurement,
            observed=s_measurement([3.0, 10.0]),
        )
        with pytest.raises(TypeError, match=r"PrivatizedSum\('t'\): `mechanism`.*make_randomized"):
            pmdp.PrivatizedSum("t", clamped, dp.m.make_randomized_response_bool(0.7), observed=1.0)
        with pytest.raises(
            TypeError,
            match=r"PrivatizedSum\('t'\): `mechanism` must be a pmdp "
            r"mechanism such as pmdp.Laplace\(epsilon=1.0\) or an OpenDP",
        ):
            pmdp.PrivatizedSum("t", clamped, "laplace", observed=1.0)
    blocks = model_blocks(model)
    assert blocks.sums[0].mechanism == pmdp.Laplace(scale=2.0)
    assert blocks.sample_sizes[0].mechanism == pmdp.DiscreteLaplace(scale=4.0)


def test_approx_dp_is_between_the_gaussian_curve_and_bun_steinke():
    """rho-zCDP -> (epsilon, delta): no conversion can beat the Gaussian mechanism's exact curve
    (Balle & Wang 2018), and Bun & Steinke's rho + 2 sqrt(rho log(1/delta)) is valid but loose."""
    from scipy.optimize import brentq

    for rho, delta in ((0.5, 1e-6), (0.01, 1e-9), (2.0, 1e-5)):
        mu = math.sqrt(2 * rho)

        def gaussian_delta(epsilon, mu=mu):
            return stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(
                -epsilon / mu - mu / 2
            )

        lower = brentq(lambda e, delta=delta: gaussian_delta(e) - delta, 0.0, 100.0)
        upper = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        assert lower < rl.approx_dp(rho, delta) < upper


# -- the noise: goodness of fit of OpenDP's samplers --------------------------------------------
def _chi_square_p(draws, mechanism, support):
    """Chi-square p-value of integer draws against a symmetric pmf: cells ``k <= -support``, each
    ``|k| < support``, ``k >= support``."""
    inner = np.arange(-support + 1, support)
    p_inner = np.exp(mechanism.logpdf(inner))
    tail = (1.0 - p_inner.sum()) / 2
    observed = np.concatenate(
        [
            [np.sum(draws <= -support)],
            (draws[:, None] == inner).sum(axis=0),
            [np.sum(draws >= support)],
        ]
    )
    expected = len(draws) * np.concatenate([[tail], p_inner, [tail]])
    return stats.chisquare(observed, expected).pvalue


def test_opendp_noise_follows_the_stated_distributions():
    """20,000 OpenDP draws per mechanism (OpenDP's generator cannot be seeded: each check fails a
    correct sampler with probability 1e-4); the Laplace check rejects a scale 15% off."""
    size = 20_000
    draws = np.asarray(rl.to_opendp(pmdp.Laplace(scale=2.0), (size,))([0.0] * size))
    assert stats.kstest(draws, stats.laplace(scale=2.0).cdf).pvalue > 1e-4
    assert stats.kstest(draws, stats.laplace(scale=2.3).cdf).pvalue < 1e-4  # the test has power
    draws = np.asarray(rl.to_opendp(pmdp.Gaussian(sigma=1.5), (size,))([0.0] * size))
    assert stats.kstest(draws, stats.norm(scale=1.5).cdf).pvalue > 1e-4
    for mechanism, support in (
        (pmdp.DiscreteLaplace(scale=3.0), 8),
        (pmdp.DiscreteGaussian(sigma=2.5), 6),
    ):
        draws = np.asarray(rl.to_opendp(mechanism, (size,))([0] * size))
        assert _chi_square_p(draws, mechanism, support) > 1e-4


# -- bad input ----------------------------------------------------------------------------------
S = rl.Statistic("s", -1, 1)


def _sum_and_count() -> rl.Release:
    return rl.Plan([S, rl.Count("n")], epsilon=1.0).release(sums={"s": 0.5}, n=3)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: rl.Plan([S], epsilon=-1.0), ValueError, r"Plan: `epsilon` must be finite and > 0"),
        (lambda: rl.Plan([S], rho=0.0), ValueError, r"Plan: `rho` must be finite and > 0"),
        (lambda: rl.Plan([S], epsilon=math.inf), ValueError, r"`epsilon` must be finite"),
        (lambda: rl.Plan([S], epsilon="1"), TypeError, r"`epsilon` must be a number"),
        (
            lambda: rl.Plan([S], epsilon=1.0, rho=1.0),
            ValueError,
            r"exactly one of `epsilon` or `rho`",
        ),
        (lambda: rl.Plan([S]), ValueError, r"exactly one of `epsilon` or `rho`"),
        (
            lambda: rl.Plan([S, rl.Count()], epsilon=1.0, weights={"s": 0.5, "n": 0.4}),
            ValueError,
            r"`weights` must sum to 1, got 0.9",
        ),
        (
            lambda: rl.Plan([S, rl.Count()], epsilon=1.0, weights={"s": 1.0}),
            ValueError,
            r"`weights` must have one entry per noisy value \['n', 's'\]",
        ),
        (
            lambda: rl.Plan([S, rl.Count()], epsilon=1.0, weights={"s": 1.5, "n": -0.5}),
            ValueError,
            r"`weights\['n'\]` must be finite and > 0",
        ),
        (lambda: rl.Plan([S], epsilon=1.0, weights=[1.0]), TypeError, r"`weights` must be a dict"),
        (
            lambda: rl.Plan([S, rl.Count()], epsilon={"s": 1.0, "n": 0.1}, weights={"s": 1.0}),
            ValueError,
            r"give `weights` with a total `epsilon`",
        ),
        (
            lambda: rl.Plan([S, rl.Count()], epsilon={"s": 1.0}),
            ValueError,
            r"`epsilon` must have one entry per noisy value",
        ),
        (
            lambda: rl.Plan(
                [S, rl.Count()], neighbouring="replace-one", epsilon={"s": 1.0, "n": 1.0}
            ),
            ValueError,
            r"`epsilon` must have one entry per noisy value \['s'\]",
        ),
        (
            lambda: rl.Plan([S], neighbouring="bounded", epsilon=1.0),
            ValueError,
            r"Plan: `neighbouring` must be one of \('add/remove', 'replace-one'\), got 'bounded'",
        ),
        (
            lambda: rl.Plan([rl.Count()], neighbouring="replace-one", epsilon=1.0),
            ValueError,
            r"every value in `statistics` has sensitivity 0",
        ),
        (
            lambda: rl.Plan([S, S], epsilon=1.0),
            ValueError,
            r"`statistics` must be non-empty with distinct",
        ),
        (lambda: rl.Plan([], epsilon=1.0), ValueError, r"`statistics` must be non-empty"),
        (lambda: rl.Plan(S, epsilon=1.0), TypeError, r"`statistics` must be a list"),
        (
            lambda: rl.Plan([rl.Count("n"), rl.Count("m")], epsilon=1.0),
            ValueError,
            r"`statistics` may hold one Count",
        ),
        (
            lambda: rl.Statistic("s", 1, -1),
            ValueError,
            r"Statistic\('s'\): `lower` must be <= `upper`",
        ),
        (lambda: rl.Statistic("s", [0, 2], [1, 1]), ValueError, r"`lower` must be <= `upper`"),
        (
            lambda: rl.Statistic("s", -np.inf, 1),
            ValueError,
            r"Statistic\('s'\): `lower` must be finite",
        ),
        (lambda: rl.Statistic("s", 0, np.nan), ValueError, r"`upper` must be finite"),
        (lambda: rl.Statistic("s", 0, "a"), TypeError, r"`upper` must be numeric"),
        (lambda: rl.Statistic("s", 0, 1.5, integer=True), ValueError, r"`upper` must be integers"),
        (lambda: rl.Statistic("s", 0, 2.5, integer=True), ValueError, r"`upper` must be integers"),
        (
            lambda: rl.Statistic("s", [0, 0], [1, 1, 1]),
            ValueError,
            r"`lower` \(2,\) and `upper` \(3,\)",
        ),
        (
            lambda: rl.Statistic("", 0, 1),
            TypeError,
            r"Statistic: `name` must be a non-empty string",
        ),
        (lambda: rl.Statistic("s", 0, 1, integer=1), TypeError, r"`integer` must be True or False"),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": 5.0}, n=3),
            ValueError,
            r"Plan.release: `sums\['s'\]`=5.0 is outside the declared bounds",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": 1.0}),
            ValueError,
            r"`n` \(the number of records\) must be an integer >= 0",
        ),
        (lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": 1.0}, n=-2), ValueError, r"`n`"),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"t": 1.0}, n=2),
            ValueError,
            r"`sums` must have one entry per statistic \['s'\]",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": [1.0, 2.0]}, n=2),
            ValueError,
            r"`sums\['s'\]` has shape \(2,\)",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": [0.5, np.nan]}),
            ValueError,
            r"`records\['s'\]` contains NaN",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": [[0.5, 0.1]]}),
            ValueError,
            r"`records\['s'\]` has shape \(1, 2\)",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": ["a"]}),
            TypeError,
            r"`records\['s'\]` must be numeric",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"t": [1.0]}),
            ValueError,
            r"`records` must have the rows of each statistic \['s'\]",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release([[1.0]]),
            TypeError,
            r"`records` must be a dict",
        ),
        (
            lambda: rl.Plan([S, rl.Statistic("t", 0, 1)], epsilon=1.0).release(
                {"s": [0.1, 0.2], "t": [0.3]}
            ),
            ValueError,
            r"`records\['t'\]` has 1 rows, others 2",
        ),
        (
            lambda: rl.Plan([rl.Statistic("k", 0, 1, integer=True)], epsilon=1.0).release(
                {"k": [0.5, 1.0]}
            ),
            ValueError,
            r"`records\['k'\]` must be integer-valued",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": [0.1]}, sums={"s": 0.1}, n=1),
            ValueError,
            r"exactly one of `records` or `sums`",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": [0.1]}, sampler="numpy"),
            ValueError,
            r"`sampler` must be one of",
        ),
        (
            lambda: rl.Plan([rl.Count()], epsilon=1.0).release({}),
            ValueError,
            r"`records` must have the rows.*use `sums=\{\}, n=`",
        ),
        (lambda: rl.Plan(["s"], epsilon=1.0), TypeError, r"`statistics` must be a list of"),
        (lambda: rl.Plan({S}, epsilon=1.0), TypeError, r"`statistics` must be a list of"),
        (lambda: rl.Statistic("k", 0, 1, True), TypeError, r"positional argument"),
        # keywords only after the first argument
        (lambda: rl.Plan([S], "add/remove", 1.0), TypeError, r"positional argument"),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(None, {"s": 0.5}, 3),
            TypeError,
            r"positional argument",
        ),
        (
            lambda: _sum_and_count().sample_size("n", None),
            TypeError,
            r"positional argument",
        ),
        (  # 1.5 rounds up where 0.5 (above) rounds down: a check by `<` or `>` misses one
            lambda: rl.Plan([rl.Statistic("k", 0, 2, integer=True)], epsilon=1.0).release(
                {"k": [1.5, 1.0]}
            ),
            ValueError,
            r"`records\['k'\]` must be integer-valued",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release({"s": 0.5}),  # one value, not rows
            ValueError,
            r"`records\['s'\]` has shape \(\); expected \(n, \*\(\)\)",
        ),
        (
            lambda: rl.Plan([S, rl.Statistic("t", 0, 1)], epsilon=1.0).release(
                {"s": [0.1], "t": [0.3, 0.4]}
            ),
            ValueError,
            r"`records\['t'\]` has 2 rows, others 1",
        ),
        (
            lambda: rl.Plan([rl.Statistic("v", np.zeros(3), 1.0), S], epsilon=1.0).release(
                {"v": np.zeros((4, 3)), "s": np.zeros(2)}
            ),
            ValueError,
            r"`records\['s'\]` has 2 rows, others 4",
        ),
        (
            lambda: rl.Plan([S, rl.Statistic("v", np.zeros(3), 1.0)], epsilon=1.0).release(
                {"s": np.zeros(2), "v": np.zeros((4, 3))}
            ),
            ValueError,
            r"`records\['v'\]` has 4 rows, others 2",
        ),
        (
            lambda: rl.Release({}, "add/remove", "epsilon", 1.0),
            TypeError,
            r"positional argument",
        ),
        (
            lambda: rl.Plan([rl.Statistic("v", np.zeros(3), 1.0)], epsilon=1.0).release(
                sums={"v": np.zeros(2)}, n=3
            ),
            ValueError,
            r"`sums\['v'\]` has shape \(2,\); the statistic's is \(3,\)",
        ),
        (  # a count beyond the exact range is named by the argument it came from
            lambda: rl.Plan([S, rl.Count("n")], epsilon=1.0).release(sums={"s": 0.0}, n=2**62 + 1),
            ValueError,
            r"Plan.release: `n` \(value 'n'\) is outside the exact range",
        ),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": 0.0}, n=-1),
            ValueError,
            r"`n` \(the number of records\) must be an integer >= 0",
        ),
        (lambda: rl.approx_dp(0.5, 1.5), ValueError, r"approx_dp: `delta` must be < 1"),
        (lambda: rl.approx_dp(0.5, 1.0), ValueError, r"approx_dp: `delta` must be < 1"),
        (lambda: rl.approx_dp(-0.5, 1e-6), ValueError, r"approx_dp: `rho` must be finite and > 0"),
        (lambda: rl.to_opendp("laplace"), TypeError, r"to_opendp: `mechanism` must be"),
        (
            lambda: rl.Plan([S], epsilon=1.0).release(sums={"s": 0.1}, n=1).sample_size("s"),
            ValueError,
            r"Release.sample_size: `name` 's' is a sum, not a count",
        ),
        (
            lambda: _sum_and_count().privatized_sum("n", None),
            ValueError,
            r"Release.privatized_sum: `name` 'n' is a count, not a sum",
        ),
        (
            lambda: (
                rl.Plan([S], epsilon=1.0).release(sums={"s": 0.1}, n=1).privatized_sum("t", None)
            ),
            ValueError,
            r"Release.privatized_sum: `name` 't' is not released",
        ),
        (lambda: rl.Release.from_json("[1, 2]"), ValueError, r"Release.from_json: `text` is not a"),
        (lambda: rl.Release.from_json("{"), ValueError, r"`text` is not a valid release file"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


# -- the noise of a plan's release at sensitivities other than 1 (issue 32) ---------------------
#: 2,500 coordinates per statistic, so that one release is 2,500 draws of its noise. Integer
#: counts in [0, 3] (L1 sensitivity 7,500, L2 150) and reals in [-1, 2] (L1 5,000, L2 100).
_WIDE = 2_500
_WIDE_PLAN = {
    "epsilon": ({"k": 0.6, "x": 0.9, "n": 0.5}, {"k": 7_500 / 0.6, "x": 5_000 / 0.9}),
    "rho": ({"k": 0.3, "x": 0.2, "n": 0.5}, {"k": 150 / math.sqrt(0.6), "x": 100 / math.sqrt(0.4)}),
}


@pytest.mark.parametrize("sampler", ["pmdp", "opendp", "simulated"])
@pytest.mark.parametrize("measure", ["epsilon", "rho"])
def test_a_plans_release_carries_noise_at_the_scale_of_its_bounds(measure, sampler):
    """The sensitivity a plan derives from its bounds (not 1) sets the scale of the noise each
    sampler adds: the package's exact samplers, OpenDP's (through ``to_opendp``), and the
    simulated release of ``choose_epsilon``. 2,500 draws per statistic: a scale 13% off fails
    (``noise_laws.assert_draws_follow``); a sensitivity of 1 would make it 7,500 or 100 times too
    small."""
    from pymc_unbounded_dp.epsilon import simulate_release

    shares, scales = _WIDE_PLAN[measure]
    statistics = [
        rl.Statistic("k", np.zeros(_WIDE, dtype=int), 3, integer=True),
        rl.Statistic("x", -np.ones(_WIDE), 2.0),
        rl.Count("n"),
    ]
    plan = rl.Plan(statistics, **{measure: shares})
    sums = {"k": np.arange(_WIDE) % 3 * 4, "x": np.linspace(-4.0, 8.0, _WIDE)}
    if sampler == "simulated":
        rel = simulate_release(plan, sums, 4, random_seed=5)
    else:
        rel = plan.release(sums=sums, n=4, sampler=sampler)
    families = {"epsilon": ("dlaplace", "laplace"), "rho": ("dgauss", "normal")}[measure]
    for name, family in zip(("k", "x"), families):
        mechanism = rel[name].mechanism
        assert mechanism.scale == pytest.approx(scales[name], rel=1e-12)
        assert mechanism.privacy[measure] == pytest.approx(shares[name], rel=1e-12)
        assert_draws_follow(
            np.asarray(rel[name].value) - sums[name], Law(family, scales[name]), f"{name}"
        )


@pytest.mark.parametrize(
    "build, sensitivity, expected",
    [
        (lambda: dp.m.make_laplace(*FLOAT, scale=2.5), 3.0, pmdp.Laplace(scale=2.5, sensitivity=3)),
        (
            lambda: dp.m.make_laplace(*INTS, scale=2.5),
            4,
            pmdp.DiscreteLaplace(scale=2.5, sensitivity=4),
        ),
        (
            lambda: dp.m.make_gaussian(*FLOAT, scale=1.5),
            3.0,
            pmdp.Gaussian(sigma=1.5, sensitivity=3),
        ),
        (
            lambda: dp.m.make_gaussian(*INTS_L2, scale=4.0),
            2,
            pmdp.DiscreteGaussian(sigma=4.0, sensitivity=2),
        ),
    ],
)
def test_from_opendp_at_a_sensitivity_other_than_one(build, sensitivity, expected):
    """The scale is the measurement's, the guarantee OpenDP's map at that sensitivity."""
    measurement = build()
    mechanism = rl.from_opendp(measurement, sensitivity=sensitivity)
    assert mechanism == expected  # same family, scale and sensitivity
    (value,) = mechanism.privacy.values()
    d_in = (
        sensitivity
        if isinstance(sensitivity, int) and expected.norm == "l1"
        else float(sensitivity)
    )
    assert measurement.map(d_in) == pytest.approx(value, rel=1e-6)


def test_a_release_passes_the_prior_of_n_and_the_options_of_a_sum_on():
    """``Release.sample_size(prior=...)`` is the model's prior of n (not the flat one), and
    ``privatized_sum``'s options reach ``PrivatizedSum`` (here ``check_sensitivity=False`` lets a
    statistic whose range the budget does not cover through, as documented)."""
    from scipy import stats

    from pymc_unbounded_dp.epsilon import simulate_release

    plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    rel = simulate_release(plan, {"s": 5}, 20, random_seed=1)
    with pm.Model() as model:
        n = rel.sample_size("n", prior=pm.Poisson.dist(20.0))
        x = pmdp.Records("x", pm.Bernoulli.dist(0.3), n=n)
        rel.privatized_sum("s", 2 * x, check_sensitivity=False)
    log_prior = model.compile_logp(vars=[model["n"]], jacobian=False)({"n": np.int64(3)})
    assert float(log_prior) == pytest.approx(stats.poisson.logpmf(3, 20.0), rel=1e-6)


# -- found by the hand audit of release.py and privacy.py (2026-12-05) -------------------------
def _noise_free(monkeypatch):
    """Make :meth:`Plan.release` add no noise, so that the exact (clamped) sums it computes can
    be read back bit for bit."""
    monkeypatch.setattr(rl, "_add_noise", lambda value, mechanism, sampler, where: value)


def test_real_records_are_summed_exactly_rounded(monkeypatch):
    """``1 + 2**-53 + 2**-53`` is ``1 + 2**-52`` exactly; summed left to right (numpy) each tiny
    term rounds away and the sum is 1."""
    _noise_free(monkeypatch)
    plan = rl.Plan([rl.Statistic("x", 0.0, 1.0), rl.Statistic("v", [0.0, 0.0], 1.0)], epsilon=1.0)
    tiny = 2.0**-53
    rows = np.array([1.0, tiny, tiny])
    rel = plan.release({"x": rows, "v": np.stack([rows, rows[::-1]], axis=1)})
    assert rel["x"].value == 1.0 + 2.0**-52
    assert np.asarray(rel["v"].value).tolist() == [1.0 + 2.0**-52] * 2


def test_integer_rows_are_clamped_before_they_are_cast(monkeypatch):
    """An integer-valued float row beyond the int64 range (1e20) is clamped to the upper bound
    1, not cast first (where it would wrap to -2**63 and clamp to 0)."""
    _noise_free(monkeypatch)
    plan = rl.Plan([rl.Statistic("k", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    rel = plan.release({"k": np.array([1e20, 0.0, 1.0, -1e20])})
    assert (rel["k"].value, rel["n"].value) == (2, 4)


def test_the_reach_of_integer_records_is_the_larger_bound_in_magnitude():
    """Bounds [-2**60, 0]: four records reach -2**62 (accepted), five beyond it (refused), though
    the upper bound is 0 (epsilon 1024: the noise scale 2**50 is within the samplers' range)."""
    plan = rl.Plan([rl.Statistic("k", -(2**60), 0, integer=True)], epsilon=1024.0)
    assert isinstance(plan.release({"k": np.zeros(4, dtype=int)})["k"].value, int)
    with pytest.raises(ValueError, match=r"`records\['k'\]` can reach 5\.76.*exact range"):
        plan.release({"k": np.zeros(5, dtype=int)})


def test_a_sum_below_its_bounds_is_refused_with_a_slack_scaled_by_the_lower_bound():
    """A sum below ``n * lower`` is refused as one above ``n * upper`` is; for a real sum the
    rounding slack is 1e-9 of the larger of ``|n * lower|`` and ``|n * upper|``, here the lower."""
    with pytest.raises(ValueError, match=r"`sums\['s'\]`=-3.5 is outside the declared bounds"):
        rl.Plan([S], epsilon=1.0).release(sums={"s": -3.5}, n=3)
    counts = rl.Plan([rl.Statistic("k", 0, 1, integer=True)], epsilon=1.0)
    with pytest.raises(ValueError, match=r"`sums\['k'\]`=-1 is outside the declared bounds"):
        counts.release(sums={"k": -1}, n=10)
    negative = rl.Plan([rl.Statistic("x", -1e6, 0.0)], epsilon=1.0)
    negative.release(sums={"x": -1e7 * (1 + 5e-10)}, n=10)  # within 1e-9 of the bound -1e7
    with pytest.raises(ValueError, match=r"outside the declared bounds"):
        negative.release(sums={"x": -1e7 * (1 + 2e-9)}, n=10)


def test_the_exact_range_of_a_real_value_is_counted_in_noise_scales_not_sensitivities():
    """Bounds [-1e15, 1e15] (sensitivity 1e15) at epsilon 0.5 (scale 2e15) and 2 (scale 5e14): a
    sum of 1.5e15 * 2**40 is within 2**40 scales of the first, 1e15 * 2**40 beyond those of the
    second."""
    statistic = rl.Statistic("x", -1e15, 1e15)
    wide = rl.Plan([statistic], epsilon=0.5)
    assert wide.mechanisms["x"].scale == 2e15 and wide.mechanisms["x"].sensitivity == 1e15
    wide.release(sums={"x": 1.5e15 * 2**40}, n=2**41, sampler="pmdp")
    narrow = rl.Plan([statistic], epsilon=2.0)
    with pytest.raises(ValueError, match=r"beyond 2\*\*40 noise scales \(5e\+14\)"):
        narrow.release(sums={"x": 1e15 * 2**40}, n=2**41)


def test_a_real_statistic_may_have_noise_wider_than_the_integer_samplers_range():
    """The 2**52 cap on the scale is the integer samplers'; real noise may be wider."""
    plan = rl.Plan([rl.Statistic("x", 0.0, 1.0)], epsilon=2.0**-60)
    assert plan.mechanisms["x"] == pmdp.Laplace(scale=2.0**60)
    plan = rl.Plan([rl.Statistic("x", 0.0, 1.0)], rho=2.0**-121)  # sigma 2**60
    assert plan.mechanisms["x"] == pmdp.Gaussian(sigma=2.0**60)


def test_without_opendp_the_default_sampler_is_the_packages_own(monkeypatch):
    def no_opendp():
        raise ImportError("No module named 'opendp'")

    def refuse_opendp(*args, **kwargs):
        raise AssertionError("OpenDP was called")

    monkeypatch.setattr(rl, "_opendp_prelude", no_opendp)
    monkeypatch.setattr(rl, "to_opendp", refuse_opendp)
    plan = rl.Plan([rl.Statistic("s", 0.0, 1.0), rl.Count("n")], epsilon=1.0)
    rel = plan.release(sums={"s": 0.5}, n=3)
    assert {rel[k].sampler for k in rel} == {f"pymc_unbounded_dp {pmdp.__version__}"}


def test_a_bool_is_neither_a_budget_nor_a_number_of_records():
    with pytest.raises(TypeError, match=r"Plan: `epsilon` must be a number, got True"):
        rl.Plan([S], epsilon=True)
    with pytest.raises(TypeError, match=r"Plan: `rho\['s'\]` must be a number, got True"):
        rl.Plan([S], rho={"s": True})
    with pytest.raises(ValueError, match=r"`n` \(the number of records\) must be an integer"):
        rl.Plan([S], epsilon=1.0).release(sums={"s": 0.5}, n=True)


def test_weights_must_sum_to_1_within_rounding_only():
    """A sum of weights 1e-6 off is refused; one a rounding error off (1e-12) is accepted."""
    with pytest.raises(ValueError, match=r"`weights` must sum to 1, got 1\.000001"):
        rl.Plan([S, rl.Count()], epsilon=1.0, weights={"s": 0.5, "n": 0.500001})
    plan = rl.Plan([S, rl.Count()], epsilon=1.0, weights={"s": 0.5, "n": 0.5 + 1e-12})
    assert plan.shares == {"s": 0.5, "n": 0.5 + 1e-12}


def test_a_value_released_exactly_has_no_share_of_the_budget():
    plan = rl.Plan(
        [rl.Statistic("s", [-2.0], [2.0]), rl.Count("n")], neighbouring="replace-one", rho=0.5
    )
    rel = plan.release(sums={"s": [1.0]}, n=30)
    loaded = rl.Release.from_json(rel.to_json())
    assert rel["n"].share is None and loaded["n"].share is None
    assert rel["s"].share == loaded["s"].share == 0.5
    assert json.loads(rel.to_json())["values"]["n"]["share"] is None


# -- found by the audit of the release file and the command line (2026-12-07) --------------------
def test_a_file_calibrated_above_its_bounds_and_under_its_budget_loads_and_saves_as_it_is():
    """A hand-written file whose Laplace noise is calibrated to sensitivity 18 (twice the bounds'
    9, scale doubled: the same epsilon) and whose budget, 2, is above the guarantee, 1, is valid:
    it loads with the mechanism it states (not the bounds' sensitivity) and the budget it states
    (not the guarantee), and saved again it says the same."""
    rel = rl.Plan([rl.Statistic("s", REG_LOWER, REG_UPPER), rl.Count("n")], epsilon=1.0).release(
        sums={"s": np.zeros(9)}, n=10
    )
    document = json.loads(rel.to_json())
    scale = rel["s"].mechanism.scale
    document["values"]["s"]["mechanism"].update(sensitivity=18.0, scale=2 * scale)
    document["budget"] = {"epsilon": 2.0}
    loaded = rl.Release.from_json(json.dumps(document))
    assert loaded["s"].mechanism == pmdp.Laplace(scale=2 * scale, sensitivity=18.0)
    assert loaded["s"].sensitivity == 9.0  # what the bounds give
    assert loaded.budget == {"epsilon": 2.0} and loaded.guarantee == rel.guarantee
    again = json.loads(loaded.to_json())
    assert again["values"]["s"]["mechanism"]["sensitivity"] == 18.0
    assert again["values"]["s"]["mechanism"]["scale"] == 2 * scale
    assert again["budget"] == {"epsilon": 2.0}
    assert rl.Release.from_json(loaded.to_json())["s"].mechanism == loaded["s"].mechanism


def test_a_rho_release_describes_its_l2_sensitivities():
    """The table of a rho plan heads its sensitivity column L2, the norm of its values (sqrt 2
    for two coordinates in [-1, 1], 1 for the count), and states the zCDP composition."""
    plan = rl.Plan([rl.Statistic("s", [-1.0, -1.0], 1.0), rl.Count("n")], rho=0.5)
    lines = plan.describe().splitlines()
    assert "sensitivity (l2)" in lines[0] and "l1" not in lines[0]
    assert lines[1].split()[:4] == ["s", "sum", "(2,)", "1.41421"]
    assert lines[2].split()[:4] == ["n", "count", "()", "1"]
    assert lines[-1].startswith("guarantee: rho = 0.5 under add/remove neighbours (zCDP")
    assert rl.Release.from_json(plan.release(sums={"s": [0.0, 0.0]}, n=3).to_json()).describe() == (
        plan.describe()
    )
