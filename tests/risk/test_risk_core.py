"""Consistency counts, losses and risk on hand-computed examples and against a naive reference."""

import numpy as np
import pandas as pd
import pytest

from pymc_unbounded_dp import risk
from pymc_unbounded_dp.risk import _core

NA = np.nan


@pytest.fixture
def records():
    return pd.DataFrame(
        {
            "age": [30, 30, 40, 50],
            "zip": ["A", "B", NA, "C"],
            "sex": ["f", "m", "m", "f"],
        },
        index=["p1", "p2", "p3", "p4"],
    )


@pytest.fixture
def dictionary():
    return pd.DataFrame(
        {
            "age": [30, 30, NA, 40, 30],
            "zip": ["A", NA, "B", "B", "A"],
            "sex": ["f", "m", "m", NA, "m"],
        },
        index=["d1", "d2", "d3", "d4", "d5"],
    )


def only(records, *columns):
    return pd.DataFrame(
        {c: [c in columns] * len(records) for c in records.columns}, index=records.index
    )


# Hand counts (see the fixtures):
# all disclosed: p1 (30,A,f) matches d1 only; p2 (30,B,m) matches d2 (zip NA) and d3 (age NA);
# p3 (40,NA,m) matches d3 and d4 (sex NA); p4 (50,C,f) matches nothing.
# age only: 30 -> d1, d2, d3, d5; 40 -> d3, d4; 50 -> d3.
# sex only: f -> d1, d4; m -> d2, d3, d4, d5.
@pytest.mark.parametrize(
    "disclosed, expected",
    [
        (("age", "zip", "sex"), [1, 2, 2, 0]),
        (("age",), [4, 4, 2, 1]),
        (("sex",), [2, 4, 4, 2]),
        ((), [5, 5, 5, 5]),
    ],
)
def test_consistent_counts_by_hand(records, dictionary, disclosed, expected):
    released = risk.disclose(records, only(records, *disclosed))
    counts = risk.consistent_counts(released, dictionary)
    assert counts.tolist() == expected
    assert counts.index.equals(records.index)


def test_disclose_suppresses_cells(records):
    released = risk.disclose(records, only(records, "age"))
    assert released["age"].tolist() == [30, 30, 40, 50]
    assert released[["zip", "sex"]].isna().all().all()
    assert released.index.equals(records.index)


def test_losses_and_risk_constant_by_hand(records, dictionary):
    rule = only(records, "age", "zip", "sex")
    loss = risk.losses(records, rule, dictionary, risk.constant(1.0))
    assert loss.tolist() == [1.0, 0.5, 0.5, 0.0]  # p4: empty rho -> loss 0
    assert risk.risk(records, rule, dictionary, risk.constant(1.0)) == pytest.approx(2 / 4)
    assert risk.risk(records, rule, dictionary, risk.constant(3.0)) == pytest.approx(6 / 4)


def test_losses_additive_by_hand(records, dictionary):
    weights = pd.DataFrame(
        {"age": [1.0, 1.0, 3.0, 1.0], "zip": [2.0] * 4, "sex": [0.5] * 4}, index=records.index
    )
    rule = only(records, "age", "zip", "sex")
    # Phi = 3.5, 3.5, 5.5 (the missing zip of p3 is still a disclosed cell), 3.5
    loss = risk.losses(records, rule, dictionary, risk.additive(weights))
    assert loss.tolist() == pytest.approx([3.5 / 1, 3.5 / 2, 5.5 / 2, 0.0])
    assert risk.risk(records, rule, dictionary, risk.additive(weights)) == pytest.approx(8 / 4)


def test_losses_multiplicative_by_hand(records, dictionary):
    weights = pd.DataFrame(
        {"age": [np.log(2)] * 4, "zip": [np.log(3)] * 4, "sex": [-np.log(2)] * 4},
        index=records.index,
    )
    rule = only(records, "age")  # Phi = 2, counts 4, 4, 2, 1
    loss = risk.losses(records, rule, dictionary, risk.multiplicative(weights))
    assert loss.tolist() == pytest.approx([0.5, 0.5, 1.0, 2.0])
    rule = only(records, "zip", "sex")  # Phi = 3 / 2
    # p1 (A,f): d1; p2 (B,m): d2, d3, d4; p3 (NA,m): d2, d3, d4, d5; p4 (C,f): none
    released = risk.disclose(records, rule)
    assert risk.consistent_counts(released, dictionary).tolist() == [1, 3, 4, 0]
    loss = risk.losses(records, rule, dictionary, risk.multiplicative(weights))
    assert loss.tolist() == pytest.approx([1.5, 0.5, 0.375, 0.0])


def test_independent_model_by_hand(records, dictionary):
    # p_age: 30 -> (3 + 1 missing) / 5, 40 -> 2/5, 50 -> 1/5
    # p_zip: A -> 3/5, B -> 3/5, C -> 1/5;  p_sex: f -> 2/5, m -> 4/5
    released = risk.disclose(records, only(records, "age", "zip", "sex"))
    counts = risk.consistent_counts(released, dictionary, model="independent")
    expected = [5 * 0.8 * 0.6 * 0.4, 5 * 0.8 * 0.6 * 0.8, 5 * 0.4 * 0.8, 5 * 0.2 * 0.2 * 0.4]
    assert counts.tolist() == pytest.approx(expected)
    loss = risk.losses(
        records,
        only(records, "age", "zip", "sex"),
        dictionary,
        risk.constant(1.0),
        model="independent",
    )
    assert loss.tolist() == pytest.approx([1 / c for c in expected])


def test_attributes_outside_the_dictionary_do_not_constrain(records, dictionary):
    partial = dictionary[["age"]].assign(name=["ann", "bob", "cy", "di", "ed"])
    released = risk.disclose(records, only(records, "age", "zip", "sex"))
    assert risk.consistent_counts(released, partial).tolist() == [4, 4, 2, 1]


def test_values_match_across_dtypes_and_types_are_refused():
    released = pd.DataFrame({"age": [30, 41]}, index=["a", "b"])
    as_float = pd.DataFrame({"age": [30.0, 30.0, 41.0]})
    as_text = pd.DataFrame({"age": ["30", "41"]})
    assert risk.consistent_counts(released, as_float).tolist() == [2, 1]
    # numbers against strings never match: refused rather than a silent risk of 0
    with pytest.raises(TypeError, match=r"attribute 'age' holds numbers in `released`"):
        risk.consistent_counts(released, as_text)


def test_rule_is_matched_to_records_by_label(records, dictionary):
    rule = pd.DataFrame(
        {"age": [True, True, False, False], "zip": False, "sex": [False, False, True, True]},
        index=records.index,
    )
    # p1, p2: age 30 -> 4 entries; p3: sex m -> 4; p4: sex f -> 2
    expected = [0.25, 0.25, 0.25, 0.5]
    assert risk.losses(records, rule, dictionary, risk.constant(1.0)).tolist() == expected
    shuffled = rule.iloc[[2, 0, 3, 1]][["sex", "age", "zip"]]
    assert risk.losses(records, shuffled, dictionary, risk.constant(1.0)).tolist() == expected
    # and the dictionary's columns in another order than the records'
    reordered = dictionary[list(dictionary.columns)[::-1]]
    assert risk.losses(records, rule, reordered, risk.constant(1.0)).tolist() == expected


def test_empty_dictionary_gives_zero_risk(records, dictionary):
    empty = dictionary.iloc[:0]
    rule = only(records, "age")
    assert risk.consistent_counts(risk.disclose(records, rule), empty).tolist() == [0] * 4
    assert risk.risk(records, rule, empty, risk.constant(1.0)) == 0.0
    assert risk.risk(records, rule, empty, risk.constant(1.0), model="independent") == 0.0


def naive_counts(released, dictionary):
    """Reference: compare every released record with every entry, in plain Python."""
    common = [c for c in released.columns if c in dictionary.columns]
    out = []
    for _, y in released.iterrows():
        n = 0
        for _, entry in dictionary.iterrows():
            n += all(pd.isna(y[c]) or pd.isna(entry[c]) or y[c] == entry[c] for c in common)
        out.append(n)
    return out


def random_table(rng, n, columns, n_values, p_missing):
    data = {}
    for c in columns:
        values = rng.integers(n_values, size=n).astype(object)
        values[rng.random(n) < p_missing] = None
        data[c] = values
    return pd.DataFrame(data)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("chunk_cells", [1, 7, 1 << 22])
def test_counts_match_naive_reference(seed, chunk_cells, monkeypatch):
    monkeypatch.setattr(_core, "CHUNK_CELLS", chunk_cells)
    rng = np.random.default_rng(seed)
    released = random_table(rng, 25, ["a", "b", "c"], 3, 0.3)
    dictionary = random_table(rng, 30, ["b", "c", "d"], 3, 0.3)
    counts = risk.consistent_counts(released, dictionary)
    assert counts.tolist() == naive_counts(released, dictionary)
