"""Several record tables in one model, each with its own n, against exact posteriors.

The model: ``theta ~ Beta(2, 3)`` shared by two tables of Bernoulli(theta) records, each released
with its own noisy count and its own noisy sum; the oracle enumerates both tables' successes and
failures (``oracles.bernoulli_tables_posterior``, which reduces to the one-table oracle when the
second table is empty).
"""

import numpy as np
import pymc as pm
import pytest
from mcmc_checks import (
    assert_cdf_matches,
    assert_centred_variance_matches,
    assert_mean_matches,
    draws_of,
)
from oracles import bernoulli_tables_posterior
from scipy import stats

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._compile import compile_model

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
