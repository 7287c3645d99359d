"""Several record tables in one model, each with its own n, against exact posteriors.

The model: ``theta ~ Beta(2, 3)`` shared by two tables of Bernoulli(theta) records, each released
with its own noisy count and its own noisy sum; the oracle enumerates both tables' successes and
failures (``oracles.bernoulli_tables_posterior``, which reduces to the one-table oracle when the
second table is empty).
"""

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from mcmc_checks import (
    assert_cdf_matches,
    assert_centred_variance_matches,
    assert_effective_draws,
    assert_mean_matches,
    assert_pmf_matches,
    draws_of,
)
from oracles import (
    bernoulli_posterior,
    bernoulli_tables_posterior,
    exgaussian_sum_posterior,
    normal_posterior,
)
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._registry import model_blocks
from pymc_unbounded_dp.noncentred import describe_forms

SAMPLE = dict(
    draws=2000, tune=500, chains=4, cores=1, progressbar=False, compute_convergence_checks=False
)
A = dict(
    s_dp=7.4,
    mechanism=pmdp.Laplace(epsilon=1.0),
    n_dp=20,
    n_mechanism=pmdp.DiscreteLaplace(epsilon=0.5),
)
B = dict(
    s_dp=8.0,
    mechanism=pmdp.Laplace(epsilon=0.5),
    n_dp=12,
    n_mechanism=pmdp.DiscreteLaplace(epsilon=0.3),
    prior=(pm.Poisson, 15.0),
    log_prior_n=lambda n: stats.poisson.logpmf(n, 15.0),
)
B_KNOWN = dict(s_dp=8.0, mechanism=pmdp.Laplace(epsilon=0.5), n=15)


def two_tables(a: dict, b: dict) -> pm.Model:
    """``theta`` shared by the tables ``a`` (records ``x_a``) and ``b`` (records ``x_b``)."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        for label, table in (("a", a), ("b", b)):
            if "n" in table:
                n = table["n"]
            else:
                prior = table.get("prior")
                n = pmdp.SampleSize(
                    f"n_{label}",
                    n_dp=table["n_dp"],
                    mechanism=table["n_mechanism"],
                    prior=None if prior is None else prior[0].dist(prior[1]),
                )
            x = pmdp.Records(f"x_{label}", pm.Bernoulli.dist(theta), n=n)
            pmdp.PrivatizedSum(f"s_{label}", x, table["mechanism"], observed=table["s_dp"])
    return model


@pytest.fixture(scope="module")
def unbounded_tables():
    return two_tables(A, B)


def check(idata, exact, sizes):
    theta = draws_of(idata, "theta")
    assert_mean_matches(theta, exact["theta_mean"], "theta mean")
    assert_centred_variance_matches(theta, exact["theta_mean"], exact["theta_var"], "theta")
    for t, name in sizes:
        n = draws_of(idata, name)
        assert_mean_matches(n, exact[f"n{t}_mean"], f"{name} mean")
        assert_centred_variance_matches(n, exact[f"n{t}_mean"], exact[f"n{t}_var"], name)
        assert_cdf_matches(n, exact[f"n{t}_values"], exact[f"n{t}_pmf"], name)


def test_tables_are_formed_per_sample_size(unbounded_tables):
    tables = compile_model(unbounded_tables).tables
    assert [t.spec.label for t in tables] == ["n_a", "n_b"]
    assert [t.record_names for t in tables] == [("x_a",), ("x_b",)]
    assert [[s.name for s in t.spec.sums] for t in tables] == [["s_a"], ["s_b"]]


def test_two_latent_sample_sizes_match_enumeration(unbounded_tables):
    """pmdp.sample with plain data augmentation: every table's n moves on its own."""
    idata = pmdp.sample(
        augment="records", model=unbounded_tables, random_seed=31, interweave=False, **SAMPLE
    )
    check(idata, bernoulli_tables_posterior([A, B], 2.0, 3.0), [(1, "n_a"), (2, "n_b")])
    assert set(idata["observed_data"].data_vars) == {"s_a", "s_b", "n_a_dp", "n_b_dp"}


def test_plain_pm_sample_assigns_the_package_step_and_matches_enumeration(unbounded_tables):
    """``pm.sample()``, the first thing a PyMC user types, assigns the package's step at its
    default level (here the sums level: two Bernoulli tables, each with its own latent n) and is
    exact; ``dp_augmentation={"augment": "records"}`` imputes the records instead (with the
    interweaving move, the default there)."""
    with unbounded_tables:
        idata = pm.sample(random_seed=32, **SAMPLE)
        records = pm.sample(random_seed=34, dp_augmentation={"augment": "records"}, **SAMPLE)
    exact = bernoulli_tables_posterior([A, B], 2.0, 3.0)
    check(idata, exact, [(1, "n_a"), (2, "n_b")])
    assert "sums_accept_rate" in idata["sample_stats"]
    check(records, exact, [(1, "n_a"), (2, "n_b")])
    assert "interweave_steps" in records["sample_stats"]


def test_known_and_latent_sample_sizes_in_one_model():
    """A bounded-DP table (n = 15) next to an unbounded one; the interweaving move conditions on
    both tables' records."""
    model = two_tables(A, B_KNOWN)
    idata = pmdp.sample(augment="records", model=model, random_seed=33, **SAMPLE)
    check(idata, bernoulli_tables_posterior([A, B_KNOWN], 2.0, 3.0), [(1, "n_a")])
    assert "n_b" not in idata["posterior"]


def test_kept_records_have_one_record_axis_per_table(unbounded_tables):
    idata = pmdp.sample(
        augment="records",
        model=unbounded_tables,
        random_seed=34,
        keep_records=50,
        **{**SAMPLE, "draws": 200, "tune": 100, "chains": 2},
    )
    kept = idata["imputed_records"]
    n_a, n_b = kept["n_a"].values, kept["n_b"].values
    assert kept["x_a"].dims[2] != kept["x_b"].dims[2]
    assert kept["x_a"].shape[2] == n_a.max() and kept["x_b"].shape[2] == n_b.max()
    counts_a = np.isfinite(kept["x_a"].values).sum(axis=2)
    np.testing.assert_array_equal(counts_a, n_a)
    posterior_n_a = draws_of(idata, "n_a")[:, ::50]
    np.testing.assert_array_equal(n_a, posterior_n_a)


def test_mcem_refuses_several_tables_with_a_clear_error(unbounded_tables):
    with pytest.raises(NotImplementedError, match=r"one record table.*'n_a', 'n_b'"):
        pmdp.mcem(model=unbounded_tables, random_seed=1)


# --------------------------------------------------------------------------------------------------
# every kind of record in its own table: with and without a non-centred form, discrete and
# continuous, known and latent n (issue 32)
# --------------------------------------------------------------------------------------------------
# Each table has its own parameter, so the exact posterior is the product of one-table oracles.
# A move that mixes the tables up (one table's noise, records, n or form read for another) moves
# some parameter by a posterior sd or more; every checked variable has at least 200 effective
# draws (asserted; 270-1,300 measured), so a mean 0.45 sd off fails |z| < 4 with probability
# > 0.97 (the mutation that scores every table against the first table's release gave z = 7.0).
KINDS = {
    # table: (record kind, its form, latent n?)
    "x1": "Bernoulli(theta), theta ~ Beta(2, 3): discrete, randomized PIT; n_dp = 20",
    "x2": "Normal(mu, 1), mu ~ N(0, 2): continuous, location-scale; n = 12",
    "x3": "Categorical([1 - phi, phi]), phi ~ Beta(1, 2): discrete, no form; n_dp = 10",
    "x4": "ExGaussian(lam, 1, 1), lam ~ N(0, 2): continuous, no form; n = 8",
}
T1 = dict(n_dp=20, n_mechanism=pmdp.DiscreteLaplace(epsilon=0.5), s_dp=7.4, scale=1.5)
T2 = dict(n=12, s_dp=9.0, scale=3.0)
T3 = dict(n_dp=10, n_mechanism=pmdp.DiscreteLaplace(epsilon=0.3), s_dp=3.3, scale=1.0)
T4 = dict(n=8, s_dp=12.0, scale=3.0)
KIND_SAMPLE = {**SAMPLE, "draws": 1000, "tune": 300, "chains": 2}


def kinds_model(tables=("x1", "x2", "x3", "x4")) -> pm.Model:
    with pm.Model() as model:
        if "x1" in tables:
            theta = pm.Beta("theta", 2.0, 3.0)
            n1 = pmdp.SampleSize("n1", n_dp=T1["n_dp"], mechanism=T1["n_mechanism"])
            x1 = pmdp.Records("x1", pm.Bernoulli.dist(theta), n=n1)
            pmdp.PrivatizedSum("s1", x1, pmdp.Laplace(scale=T1["scale"]), observed=T1["s_dp"])
        if "x2" in tables:
            mu = pm.Normal("mu", 0.0, 2.0)
            x2 = pmdp.Records("x2", pm.Normal.dist(mu, 1.0), n=T2["n"])
            pmdp.PrivatizedSum("s2", x2, pmdp.Laplace(scale=T2["scale"]), observed=T2["s_dp"])
        if "x3" in tables:
            phi = pm.Beta("phi", 1.0, 2.0)
            n3 = pmdp.SampleSize("n3", n_dp=T3["n_dp"], mechanism=T3["n_mechanism"])
            x3 = pmdp.Records("x3", pm.Categorical.dist(p=pt.stack([1 - phi, phi])), n=n3)
            pmdp.PrivatizedSum("s3", x3, pmdp.Laplace(scale=T3["scale"]), observed=T3["s_dp"])
        if "x4" in tables:
            lam = pm.Normal("lam", 0.0, 2.0)
            x4 = pmdp.Records("x4", pm.ExGaussian.dist(mu=lam, sigma=1.0, nu=1.0), n=T4["n"])
            pmdp.PrivatizedSum("s4", x4, pmdp.Laplace(scale=T4["scale"]), observed=T4["s_dp"])
    return model


@pytest.fixture(scope="module")
def kinds_exact():
    """Each table's exact posterior: enumeration (x1, x3: the two-category Categorical is a
    Bernoulli), the normal-Laplace closed form (x2), two numerical convolutions (x4)."""
    one = bernoulli_posterior(
        T1["s_dp"], pmdp.Laplace(scale=T1["scale"]), 2.0, 3.0, n_dp=T1["n_dp"],
        n_mechanism=T1["n_mechanism"], n_max=T1["n_dp"] + 80,
    )  # fmt: skip
    two = normal_posterior(T2["s_dp"], T2["scale"], 1.0, 0.0, 2.0, n=T2["n"])
    three = bernoulli_posterior(
        T3["s_dp"], pmdp.Laplace(scale=T3["scale"]), 1.0, 2.0, n_dp=T3["n_dp"],
        n_mechanism=T3["n_mechanism"], n_max=T3["n_dp"] + 140,
    )  # fmt: skip
    four = exgaussian_sum_posterior(T4["s_dp"], T4["scale"], T4["n"], 1.0, 0.0, 2.0)
    return {
        "theta": (one["theta_mean"], one["theta_var"]),
        "n1": (one["n_mean"], one["n_var"], one["n_values"], one["n_pmf"]),
        "mu": (two["mu_mean"], two["mu_var"]),
        "phi": (three["theta_mean"], three["theta_var"]),
        "n3": (three["n_mean"], three["n_var"], three["n_values"], three["n_pmf"]),
        "lam": (four["lam_mean"], four["lam_var"]),
    }


def check_kinds(idata, exact, names, label):
    for name in names:
        mean, var = exact[name][:2]
        draws = draws_of(idata, name)
        assert_mean_matches(draws, mean, f"{label}: {name} mean")
        assert_centred_variance_matches(draws, mean, var, f"{label}: {name}")
        assert_effective_draws(draws, 200, f"{label}: {name}")
        if name.startswith("n"):
            assert_pmf_matches(draws.astype(int), *exact[name][2:], f"{label}: {name}")


KIND_PATHS = [
    # (tables, path, pmdp.sample options)
    (("x1", "x2", "x3", "x4"), "full-refresh", dict(augment="records", interweave={"n_steps": 2})),
    (("x1", "x2"), "noncentred", dict(augment="records", interweave={"n_steps": 3})),
    (("x1", "x2", "x3"), "sums", dict(augment="sums")),
]


@pytest.mark.parametrize(
    "tables, path, options", KIND_PATHS, ids=[f"{p}-{len(t)}-tables" for t, p, _ in KIND_PATHS]
)
def test_every_kind_of_record_in_its_own_table(kinds_exact, tables, path, options):
    """Four tables, one per kind of record (``KINDS``), through the default records-level sampler:
    NUTS, every table's refresh and birth/death moves and the interweaving move, which falls back
    to full refresh for all tables when one has no form (plain data augmentation is the same run
    without that move: left out to save 20 s); the two tables with a form through the non-centred
    move; the three with an exact sums law at the sums level."""
    model = kinds_model(tables)
    forms = describe_forms(model, model_blocks(model))
    assert {k: v is not None for k, v in forms.items()} == {k: k in ("x1", "x2") for k in tables}
    idata = pmdp.sample(model=model, random_seed=35, **options, **KIND_SAMPLE)
    if path in ("full-refresh", "noncentred"):
        rate = float(idata["sample_stats"]["interweave_accept_rate"].values.mean())
        assert bool(np.all(idata["sample_stats"]["interweave_on"].values)) and rate > 0.02, rate
    names = {"x1": ["theta", "n1"], "x2": ["mu"], "x3": ["phi", "n3"], "x4": ["lam"]}
    check_kinds(idata, kinds_exact, [v for t in tables for v in names[t]], path)


def test_parents_released_only_through_their_child_match_quadrature():
    """``c | a, b ~ N(a + b, 1)``, ``a ~ N(mu, 1)``, ``b ~ N(0, 1)``, and only ``c`` released (a
    clamp at +-40, inert): ``c ~ N(mu, 3)``, so mu's posterior is the one-variable quadrature.
    With the interweaving move on (the default) and off; the move reads the statistics of a
    table whose parents no statistic reads (it once failed there on an unused input)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 2.0)
        a = pmdp.Records("a", pm.Normal.dist(mu, 1), n=20)
        b = pmdp.Records("b", pm.Normal.dist(0, 1), n=20)
        c = pmdp.Records("c", pm.Normal.dist(a + b, 1), n=20)
        pmdp.PrivatizedSum("s", pt.clip(c, -40, 40), pmdp.Laplace(scale=3.0, sensitivity=40), 31.0)
    exact = normal_posterior(31.0, 3.0, np.sqrt(3.0), 0.5, 2.0, n=20)
    for interweave, seed in ((True, 41), (False, 42)):
        idata = pmdp.sample(model=model, interweave=interweave, random_seed=seed, **SAMPLE)
        draws = draws_of(idata, "mu")
        assert_mean_matches(draws, exact["mu_mean"], f"mu (interweave={interweave})")
        assert_centred_variance_matches(
            draws, exact["mu_mean"], exact["mu_var"], f"mu (interweave={interweave})"
        )


def test_records_sharing_a_sample_size_or_a_parent_are_one_table_in_a_derived_model_too():
    """``x`` and ``z`` share a latent n and ``y | x`` has a known n; each is released on its own
    (no release links them). Their tables hold them together, and so do a clone's."""
    from pymc.model.fgraph import clone_model

    clip = pmdp.Laplace(epsilon=1.0)  # of a clamp to [-1, 1]
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        n = pmdp.SampleSize("n", n_dp=20, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        z = pmdp.Records("z", pm.Normal.dist(0, 1), n=n)
        pmdp.PrivatizedSum("sx", x, pmdp.Laplace(epsilon=1.0), observed=7.0)
        pmdp.PrivatizedSum("sz", pt.clip(z, -1, 1), clip, observed=0.5)
        u = pmdp.Records("u", pm.Normal.dist(0, 1), n=15)
        y = pmdp.Records("y", pm.Bernoulli.dist(pm.math.sigmoid(u)), n=15)
        pmdp.PrivatizedSum("su", pt.clip(u, -1, 1), clip, observed=0.2)
        pmdp.PrivatizedSum("sy", y, pmdp.Laplace(epsilon=1.0), observed=8.0)
    for built in (model, clone_model(model)):
        assert [t.record_names for t in model_blocks(built).tables()] == [("x", "z"), ("u", "y")]


def test_a_record_with_two_parents_joins_them_in_one_table():
    """``c | a, b`` with ``a`` and ``b`` independent (known n): one table of three record
    variables, whatever order the links are met in (each link joins the two tables' roots)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0, 1)
        a = pmdp.Records("a", pm.Normal.dist(mu, 1), n=10)
        b = pmdp.Records("b", pm.Normal.dist(0, 1), n=10)
        c = pmdp.Records("c", pm.Normal.dist(a + b, 1), n=10)
        pmdp.PrivatizedSum(
            "s", pt.clip(c, -3, 3), pmdp.Laplace(epsilon=1.0, sensitivity=3.0), observed=1.0
        )
    (table,) = model_blocks(model).tables()
    assert table.record_names == ("a", "b", "c")
