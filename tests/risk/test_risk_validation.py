"""Bad input: every error names the argument and says what to change."""

import numpy as np
import pandas as pd
import pytest

from pymc_unbounded_dp import risk

INDEX = ["ann", "bob", "cy"]


@pytest.fixture
def records():
    return pd.DataFrame(
        {"age": [30, 40, 50], "zip": ["a", "b", "c"], "sex": ["f", "m", "f"]}, index=INDEX
    )


@pytest.fixture
def rule(records):
    return pd.DataFrame(True, index=records.index, columns=records.columns)


@pytest.fixture
def weights(records):
    return pd.DataFrame(0.5, index=records.index, columns=records.columns)


ONE = risk.constant(1.0)


def test_rule_of_another_shape(records, rule):
    with pytest.raises(ValueError, match=r"`rule` has shape \(2, 3\) but `records` has shape"):
        risk.losses(records, rule.iloc[:2], records, ONE)
    with pytest.raises(ValueError, match=r"`rule` has shape \(3, 2\)"):
        risk.disclose(records, rule[["age", "zip"]])


def test_rule_with_other_labels(records, rule):
    with pytest.raises(ValueError, match=r"index of `rule`.*missing: 'cy'"):
        risk.risk(records, rule.rename(index={"cy": "dan"}), records, ONE)
    with pytest.raises(ValueError, match=r"columns of `rule`.*missing: 'sex'"):
        risk.disclose(records, rule.rename(columns={"sex": "gender"}))


def test_rule_must_be_boolean(records, rule):
    with pytest.raises(TypeError, match=r"`rule` must be a boolean table.*'age' has dtype int"):
        risk.losses(records, rule.astype({"age": int}), records, ONE)
    with pytest.raises(TypeError, match="`rule` must be a pandas DataFrame"):
        risk.disclose(records, rule.to_numpy())


def test_records_must_be_a_table_with_unique_identifiers(records, rule):
    with pytest.raises(TypeError, match="`records` must be a pandas DataFrame"):
        risk.disclose(records.to_numpy(), rule)
    twice = records.rename(index={"bob": "ann"})
    with pytest.raises(ValueError, match=r"index of `records`.*unique.*'ann'"):
        risk.disclose(twice, rule)
    with pytest.raises(ValueError, match="at least one row"):
        risk.disclose(records.iloc[:0], rule.iloc[:0])
    with pytest.raises(ValueError, match=r"at least one row and one column, got shape \(3, 0\)"):
        risk.disclose(records[[]], rule[[]])
    with pytest.raises(ValueError, match="`released` must have at least one row"):
        risk.consistent_counts(records.iloc[:0], records)


def test_dictionary_without_common_attribute(records, rule, weights):
    other = pd.DataFrame({"name": ["x", "y"], "income": [1, 2]})
    with pytest.raises(ValueError, match="`dictionary` has no attribute in common"):
        risk.consistent_counts(records, other)
    with pytest.raises(ValueError, match="no attribute in common"):
        risk.risk(records, rule, other, ONE)
    with pytest.raises(ValueError, match="no attribute in common"):
        risk.min_risk_rule(records, other, weights, 1)
    with pytest.raises(TypeError, match="`dictionary` must be a pandas DataFrame"):
        risk.consistent_counts(records, [["x"]])


def test_weights_with_missing_entries_for_min_risk(records, weights):
    weights.loc["cy", "sex"] = np.nan
    with pytest.raises(ValueError, match=r"`weights` has 1 missing entries"):
        risk.min_risk_rule(records, records, weights, 1)


def test_weights_with_other_labels_for_min_risk(records, weights):
    with pytest.raises(ValueError, match=r"columns of `weights`"):
        risk.min_risk_rule(records, records, weights.rename(columns={"sex": "s"}), 1)


def test_empty_dictionary_for_min_risk(records, weights):
    with pytest.raises(ValueError, match="`dictionary` is empty"):
        risk.min_risk_rule(records, records.iloc[:0], weights, 1)


def test_k_larger_than_number_of_attributes(records, weights):
    message = r"`k`=4 is larger than the number of attributes of `records` \(3\)"
    with pytest.raises(ValueError, match=message):
        risk.min_risk_rule(records, records, weights, 4)
    with pytest.raises(ValueError, match=message):
        risk.enumerate_rules(records, 4, "per_record")
    with pytest.raises(ValueError, match=message):
        risk.random_rule(records, 4, "per_record", seed=0)
    with pytest.raises(ValueError, match=message):
        risk.optimal_rule(records, records, ONE, 4)
    with pytest.raises(ValueError, match=r"larger than the number of records of `records` \(3\)"):
        risk.count_rules(records, 4, "per_attribute")
    # two records of three attributes: k = 3 attributes per record is fine, 4 is not
    assert len(list(risk.enumerate_rules(records.iloc[:2], 3, "per_record"))) == 1
    assert risk.min_risk_rule(records.iloc[:2], records, weights.iloc[:2], 3).all().all()
    with pytest.raises(ValueError, match=message):
        risk.min_risk_rule(records.iloc[:2], records, weights.iloc[:2], 4)
    with pytest.raises(ValueError, match=r"larger than the number of cells of `records` \(9\)"):
        risk.count_rules(records, 10, "total")


def test_k_of_the_per_attribute_family_is_bounded_by_the_records_not_the_attributes(records):
    """Per attribute, ``k`` counts records: 4 records of 2 attributes take k = 3 (C(4, 3)^2 = 16
    rules, 3 records disclosed in each attribute), while 2 records of 3 attributes take no k
    above 2 (one rule, everything disclosed, at k = 2)."""
    tall = pd.DataFrame({"age": [30, 40, 50, 60], "zip": list("abcd")})
    assert risk.count_rules(tall, 3, "per_attribute") == 16
    assert len(list(risk.enumerate_rules(tall, 3, "per_attribute"))) == 16
    assert risk.random_rule(tall, 3, "per_attribute", seed=0).sum(axis=0).tolist() == [3, 3]
    wide = records.iloc[:2]
    assert [rule.all().all() for rule in risk.enumerate_rules(wide, 2, "per_attribute")] == [True]
    with pytest.raises(
        ValueError, match=r"`k`=3 is larger than the number of records of `records` \(2\)"
    ):
        risk.count_rules(wide, 3, "per_attribute")


@pytest.mark.parametrize("family", ["total", "per_record", "per_attribute"])
def test_negative_k(records, weights, family):
    with pytest.raises(ValueError, match="`k` must be >= 0, got -1"):
        risk.enumerate_rules(records, -1, family)
    with pytest.raises(ValueError, match="`k` must be >= 0, got -1"):
        risk.min_risk_rule(records, records, weights, -1)


@pytest.mark.parametrize("k", [1.5, True, "2"])
def test_k_must_be_an_integer(records, weights, k):
    with pytest.raises(TypeError, match="`k` must be an integer"):
        risk.min_risk_rule(records, records, weights, k)


def test_unknown_family_and_model(records, rule):
    with pytest.raises(ValueError, match="`family` must be one of"):
        risk.count_rules(records, 1, "per_row")
    with pytest.raises(ValueError, match="`model` must be one of"):
        risk.risk(records, rule, records, ONE, model="poisson")


def test_optimal_rule_refuses_large_searches(records):
    big = pd.concat([records.add_suffix(f"_{i}") for i in range(3)], axis=1)  # 3 x 9
    with pytest.raises(
        ValueError,
        match=r"would evaluate 2,000,376 rules, more than `max_rules`=10,000; raise `max_rules`",
    ):
        risk.optimal_rule(big, big, ONE, 4)
    with pytest.raises(ValueError, match=r"`max_rules` must be >= 1"):
        risk.optimal_rule(records, records, ONE, 1, max_rules=0)
    result = risk.optimal_rule(records, records, ONE, 1, max_rules=27)
    assert result.n_rules == 27


def test_bayes_risk_bad_prior(records, rule):
    d = [records, records.iloc[:2]]
    with pytest.raises(ValueError, match=r"`prior` must have one weight per dictionary \(2\)"):
        risk.bayes_risk(records, rule, d, [1.0], ONE)
    with pytest.raises(ValueError, match="`prior` must sum to 1, sums to 0.9"):
        risk.bayes_risk(records, rule, d, [0.5, 0.4], ONE)
    with pytest.raises(ValueError, match="non-negative"):
        risk.bayes_risk(records, rule, d, [1.5, -0.5], ONE)
    with pytest.raises(ValueError, match="`prior` is required"):
        risk.bayes_risk(records, rule, d, None, ONE)
    with pytest.raises(ValueError, match="`dictionaries` is empty"):
        risk.bayes_risk(records, rule, [], [], ONE)
    with pytest.raises(TypeError, match="`dictionaries` must be a list"):
        risk.bayes_risk(records, rule, records, [1.0], ONE)


def test_bayes_risk_bad_sampler_arguments(records, rule):
    def sampler(rng):
        return records

    with pytest.raises(ValueError, match="`prior` must be None"):
        risk.bayes_risk(records, rule, sampler, [1.0], ONE, n_samples=10)
    with pytest.raises(ValueError, match="`n_samples` must be >= 2"):
        risk.bayes_risk(records, rule, sampler, None, ONE, n_samples=1)
    with pytest.raises(TypeError, match="`dictionary` must be a pandas DataFrame"):
        risk.bayes_risk(records, rule, lambda rng: None, None, ONE, n_samples=2, seed=0)


def test_minimax_bad_candidates(records, rule):
    with pytest.raises(ValueError, match="`rules` is empty"):
        risk.minimax_rule(records, [], [records], ONE)
    with pytest.raises(TypeError, match="`rules` must be a list"):
        risk.minimax_rule(records, rule, [records], ONE)
    with pytest.raises(ValueError, match=r"`rules\[1\]` has shape"):
        risk.minimax_rule(records, [rule, rule.iloc[:1]], [records], ONE)
    with pytest.raises(ValueError, match="`dictionaries` is empty"):
        risk.minimax_rule(records, [rule], [], ONE)


def test_a_dictionary_may_repeat_identities_but_not_attributes(records, rule):
    dictionary = pd.concat([records, records.iloc[:1]])  # a label twice: two entries
    assert risk.consistent_counts(records, dictionary).tolist() == [2, 1, 1]
    twice = pd.concat([records, records["age"]], axis=1)
    with pytest.raises(ValueError, match="columns"):
        risk.consistent_counts(records, twice)


def test_categorical_attributes_count_like_plain_ones(records, rule):
    dictionary = pd.concat([records, records.iloc[[0, 0, 2]]])
    plain = risk.risk(records, rule, dictionary, ONE)
    as_categories = records.astype({c: "category" for c in records.columns})
    dictionary_categories = dictionary.astype({c: "category" for c in records.columns})
    assert risk.risk(as_categories, rule, dictionary_categories, ONE) == pytest.approx(plain)
    assert risk.risk(as_categories, rule, dictionary, ONE) == pytest.approx(plain)


def test_k_anonymity_takes_c_zero_and_a_single_label_of_any_type(records):
    assert risk.k_anonymity_bound(records, 0.0, ["sex"]) == 0.0
    numbered = records.set_axis([0, 1, 2], axis=1)  # integer column labels: sex is column 2
    assert risk.anonymity_level(numbered, 2) == risk.anonymity_level(numbered, [2]) == 1
    assert risk.anonymity_level(records, "sex") == 1
    assert risk.k_anonymity_bound(numbered, 3.0, 2) == pytest.approx(3.0)


def test_k_anonymity_bad_input(records):
    with pytest.raises(ValueError, match="`k` must be >= 1"):
        risk.is_k_anonymous(records, 0)
    with pytest.raises(ValueError, match=r"`quasi_identifiers`.*not columns: \['height'\]"):
        risk.is_k_anonymous(records, 2, ["age", "height"])
    with pytest.raises(ValueError, match="`quasi_identifiers` must be a non-empty list"):
        risk.anonymity_level(records, [])
    with pytest.raises(ValueError, match="`c`"):
        risk.k_anonymity_bound(records, -1.0)
