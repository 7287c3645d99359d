"""The framework's theorems, checked on several seeded random tables.

* Theorem 1 (coarser or larger dictionaries). If ``theta'`` is obtained from
  ``theta`` by adding entries and/or replacing values by NA, every entry
  consistent with a released record stays consistent, so for every record
  ``|rho(y, theta')| >= |rho(y, theta)|``. Hence ``l(y, theta') <= l(y, theta)``
  for every record whose ``rho(y, theta)`` is non-empty, and
  ``R(delta, theta') <= R(delta, theta)`` when every ``rho(y, theta)`` is
  non-empty (e.g. when ``theta`` holds the records themselves). The risk itself
  is *not* monotone in general: a record with no consistent entry in ``theta``
  has loss 0 there and may get a positive loss in ``theta'``.
* Disclosing more cells never enlarges ``rho``.
* Theorem 3 (k-anonymity). If the release is k-anonymous on the
  quasi-identifiers and the dictionary is the table itself (restricted to the
  quasi-identifiers), every loss under ``Phi = c`` is at most ``c / k``.
* MinRisk returns a rule of minimal risk among all k-per-record rules under the
  independent-attribute model with multiplicative sensitivity.
"""

import itertools

import numpy as np
import pandas as pd
import pytest

from pymc_unbounded_dp import risk

SEEDS = range(6)


def random_table(rng, n, columns, n_values, p_missing):
    """Mixed-type table: even columns hold strings, odd columns integers (as floats with NaN)."""
    data = {}
    for j, column in enumerate(columns):
        values = rng.integers(n_values, size=n)
        missing = rng.random(n) < p_missing
        if j % 2 == 0:
            data[column] = pd.Series([f"v{v}" for v in values]).mask(missing)
        else:
            data[column] = pd.Series(values, dtype=float).mask(missing)
    return pd.DataFrame(data)


def coarsen(rng, dictionary, p_blank, n_extra, n_values):
    """Blank some cells of ``dictionary`` and append ``n_extra`` random entries."""
    blanked = dictionary.mask(rng.random(dictionary.shape) < p_blank)
    extra = random_table(rng, n_extra, list(dictionary.columns), n_values, 0.2)
    return pd.concat([blanked, extra], ignore_index=True)


def nonnegative_weights(rng, records):
    return pd.DataFrame(
        rng.exponential(size=records.shape), index=records.index, columns=records.columns
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_theorem1_counts_grow_and_losses_shrink_where_rho_is_nonempty(seed):
    rng = np.random.default_rng(seed)
    columns = ["a", "b", "c", "d"]
    records = random_table(rng, 40, columns, 3, 0.1)
    theta = random_table(rng, 30, columns, 3, 0.1)
    theta2 = coarsen(rng, theta, 0.3, 10, 3)
    rule = risk.random_rule(records, int(rng.integers(1, 5)), "per_record", seed=seed)
    released = risk.disclose(records, rule)
    sensitivity = risk.additive(nonnegative_weights(rng, records))

    counts = risk.consistent_counts(released, theta)
    counts2 = risk.consistent_counts(released, theta2)
    assert (counts2 >= counts).all()
    assert (counts2 > counts).any()  # the check is not vacuous

    loss = risk.losses(records, rule, theta, sensitivity)
    loss2 = risk.losses(records, rule, theta2, sensitivity)
    nonempty = counts > 0
    assert nonempty.sum() >= 5
    assert (loss2[nonempty] <= loss[nonempty] * (1 + 1e-12)).all()


@pytest.mark.parametrize("seed", SEEDS)
def test_theorem1_risk_shrinks_when_the_dictionary_holds_the_records(seed):
    rng = np.random.default_rng(seed)
    columns = ["a", "b", "c"]
    records = random_table(rng, 30, columns, 4, 0.15)
    theta = pd.concat([records, random_table(rng, 20, columns, 4, 0.15)], ignore_index=True)
    theta2 = coarsen(rng, theta, 0.25, 15, 4)
    sensitivity = risk.additive(nonnegative_weights(rng, records))
    for k in (1, 2, 3):
        rule = risk.random_rule(records, k, "per_record", seed=seed + 100 * k)
        assert (risk.consistent_counts(risk.disclose(records, rule), theta) > 0).all()
        before = risk.risk(records, rule, theta, sensitivity)
        after = risk.risk(records, rule, theta2, sensitivity)
        assert after <= before * (1 + 1e-12)
        assert after < before


def test_theorem1_risk_can_grow_when_some_rho_is_empty():
    records = pd.DataFrame({"age": [30, 40]}, index=["ann", "bob"])
    rule = pd.DataFrame({"age": [True, True]}, index=records.index)
    theta = pd.DataFrame({"age": [40, 40]})  # nobody is 30: ann's loss is 0
    larger = pd.concat([theta, pd.DataFrame({"age": [30]})], ignore_index=True)
    blanked = pd.DataFrame({"age": [40, np.nan]})
    one = risk.constant(1.0)
    assert risk.risk(records, rule, theta, one) == pytest.approx((0 + 1 / 2) / 2)
    assert risk.risk(records, rule, larger, one) == pytest.approx((1 + 1 / 2) / 2)
    assert risk.risk(records, rule, blanked, one) == pytest.approx((1 + 1 / 2) / 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_disclosing_more_never_enlarges_rho(seed):
    rng = np.random.default_rng(seed)
    columns = ["a", "b", "c", "d"]
    records = random_table(rng, 40, columns, 3, 0.1)
    theta = random_table(rng, 50, columns, 3, 0.2)
    small = risk.random_rule(records, 1, "per_record", seed=seed)
    large = small | risk.random_rule(records, 2, "per_record", seed=seed + 1)
    counts_small = risk.consistent_counts(risk.disclose(records, small), theta)
    counts_large = risk.consistent_counts(risk.disclose(records, large), theta)
    assert (counts_large <= counts_small).all()
    assert (counts_large < counts_small).any()


def k_anonymous_release(rng, k):
    """Records built from prototypes repeated >= k times, with one rule per class."""
    qi = ["age", "zip", "sex"]
    n_classes = 6
    prototypes = random_table(rng, n_classes, qi, 4, 0.1)
    classes = np.repeat(np.arange(n_classes), rng.integers(k, k + 3, size=n_classes))
    records = prototypes.iloc[classes].reset_index(drop=True)
    records["diagnosis"] = rng.choice(["flu", "asthma", "diabetes"], size=len(records))
    records.index = [f"p{i}" for i in range(len(records))]
    disclosed = rng.random((n_classes, len(qi))) < 0.7
    rule = pd.DataFrame(disclosed[classes], index=records.index, columns=qi)
    rule["diagnosis"] = True
    return records, rule, qi


@pytest.mark.parametrize("seed", SEEDS)
def test_theorem3_k_anonymity_bounds_every_loss(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 5))
    c = float(rng.uniform(0.5, 3.0))
    records, rule, qi = k_anonymous_release(rng, k)
    released = risk.disclose(records, rule)
    level = risk.anonymity_level(released, qi)
    assert level >= k
    assert risk.is_k_anonymous(released, level, qi)
    assert not risk.is_k_anonymous(released, level + 1, qi)
    bound = risk.k_anonymity_bound(released, c, qi)
    assert bound == pytest.approx(c / level)
    for dictionary in (
        records[qi],
        released[qi],
        records[qi].mask(rng.random((len(records), len(qi))) < 0.3),
    ):
        loss = risk.losses(records, rule, dictionary, risk.constant(c))
        assert (loss <= bound * (1 + 1e-12)).all()
        assert (loss > 0).all()


def test_theorem3_bound_is_attained_and_needs_a_quasi_identifier_dictionary():
    records = pd.DataFrame(
        {
            "age": [30, 30, 30, 40, 40],
            "sex": ["f", "f", "f", "m", "m"],
            "diagnosis": ["flu", "flu", "asthma", "flu", "asthma"],
        },
        index=list("abcde"),
    )
    qi = ["age", "sex"]
    everything = pd.DataFrame(True, index=records.index, columns=records.columns)
    assert risk.anonymity_level(records, qi) == 2
    assert risk.anonymity_level(records, "age") == risk.anonymity_level(records, ["age"]) == 2
    bound = risk.k_anonymity_bound(records, 1.0, qi)
    loss = risk.losses(records, everything, records[qi], risk.constant(1.0))
    assert loss.tolist() == pytest.approx([1 / 3, 1 / 3, 1 / 3, 1 / 2, 1 / 2])
    assert loss.max() == pytest.approx(bound)
    # an attacker who also knows the diagnosis can single out record c: no bound
    loss = risk.losses(records, everything, records, risk.constant(1.0))
    assert loss["c"] == 1.0 > bound


def all_risks(records, dictionary, sensitivity, k):
    return [
        risk.risk(records, rule, dictionary, sensitivity, model="independent")
        for rule in risk.enumerate_rules(records, k, "per_record")
    ]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "shape, k, absent",
    [
        ((4, 3), 1, False),
        ((4, 3), 2, False),
        ((3, 4), 2, False),
        ((4, 3), 1, "last"),
        ((4, 3), 2, "first"),
    ],
)
def test_min_risk_equals_exhaustive_search(seed, shape, k, absent):
    """Also with an attribute the dictionary lacks (``absent``, its last or its first column):
    disclosing it tells the attacker nothing (share 1), so only its weight counts; the shares of
    the others sit in their own columns, not in the leading ones."""
    rng = np.random.default_rng(seed)
    n, m = shape
    columns = [f"x{j}" for j in range(m)]
    records = random_table(rng, n, columns, 4, 0.1)
    records.index = [f"r{i}" for i in range(n)]
    dictionary = random_table(rng, 12, columns, 4, 0.2)
    if absent:
        dictionary = dictionary.drop(columns=columns[0] if absent == "first" else columns[-1])
    weights = pd.DataFrame(rng.normal(size=shape), index=records.index, columns=columns)
    sensitivity = risk.multiplicative(weights)

    rule = risk.min_risk_rule(records, dictionary, weights, k)
    assert (rule.sum(axis=1) == k).all()
    got = risk.risk(records, rule, dictionary, sensitivity, model="independent")
    best = risk.optimal_rule(records, dictionary, sensitivity, k, model="independent")
    assert got == pytest.approx(best.risk, rel=1e-12, abs=1e-15)
    risks = all_risks(records, dictionary, sensitivity, k)
    assert min(risks) == pytest.approx(best.risk)
    assert max(risks) > 1.01 * min(risks)  # the choice matters


def shares_by_hand(dictionary, column, value):
    if pd.isna(value):
        return 1.0
    entries = dictionary[column]
    return float(((entries == value) | entries.isna()).mean())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_min_risk_choice_is_best_per_record(seed):
    """Per-record brute force over the C(5, 2) choices with shares computed independently."""
    rng = np.random.default_rng(seed)
    columns = list("abcde")
    records = random_table(rng, 150, columns, 6, 0.05)
    # values 0-4 without gaps: a record's value 5 matches no entry (p = 0)
    dictionary = random_table(rng, 80, columns, 5, 0.0)
    weights = pd.DataFrame(rng.normal(size=records.shape), index=records.index, columns=columns)
    rule = risk.min_risk_rule(records, dictionary, weights, 2)
    got = risk.losses(records, rule, dictionary, risk.multiplicative(weights), model="independent")
    n_zero = 0
    for i in range(len(records)):
        best = np.inf
        for chosen in itertools.combinations(columns, 2):
            p = np.prod([shares_by_hand(dictionary, c, records.iloc[i][c]) for c in chosen])
            phi = np.exp(sum(weights.iloc[i][c] for c in chosen))
            best = min(best, phi / (len(dictionary) * p) if p > 0 else 0.0)
        n_zero += best == 0
        assert got.iloc[i] == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert n_zero > 0  # some records hold a value no entry matches


def test_min_risk_discloses_unmatched_values_and_missing_cells_first():
    records = pd.DataFrame(
        {"age": [99, 30], "zip": ["A", None], "sex": ["f", "f"]}, index=["ann", "bob"]
    )
    dictionary = pd.DataFrame(
        {"age": [30, 30, 40, 40], "zip": ["A", "B", "B", "B"], "sex": ["f", "m", "f", "m"]}
    )
    weights = pd.DataFrame(
        {"age": [5.0, 0.0], "zip": [0.0, 0.5], "sex": [0.0, 0.0]}, index=records.index
    )
    rule = risk.min_risk_rule(records, dictionary, weights, 1)
    # ann: age 99 matches nobody -> loss 0 despite its weight (ratios zip 4, sex 2)
    # bob: zip missing -> ratio e^0.5 / 1 = 1.65 beats age 1 / 0.5 = 2 and sex 1 / 0.5 = 2
    assert rule.to_numpy().tolist() == [[True, False, False], [False, True, False]]
    loss = risk.losses(records, rule, dictionary, risk.multiplicative(weights), model="independent")
    assert loss.tolist() == pytest.approx([0.0, np.exp(0.5) / 4])
