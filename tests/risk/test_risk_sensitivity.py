"""Sensitivities: built-in ones by hand, custom callables and their checks."""

import numpy as np
import pandas as pd
import pytest

from pymc_unbounded_dp import risk

INDEX = ["ann", "bob", "cy"]


@pytest.fixture
def records():
    return pd.DataFrame({"age": [30, 40, 50], "zip": ["a", "b", "c"]}, index=INDEX)


@pytest.fixture
def rule():
    return pd.DataFrame({"age": [True, False, True], "zip": [True, True, False]}, index=INDEX)


@pytest.fixture
def weights():
    return pd.DataFrame({"age": [1.0, 2.0, 3.0], "zip": [0.25, 0.5, 0.75]}, index=INDEX)


def test_constant(records, rule):
    assert risk.constant(2.5)(records, rule).tolist() == [2.5, 2.5, 2.5]
    assert risk.constant(0.0)(records, rule).tolist() == [0.0, 0.0, 0.0]  # c = 0 is allowed


def test_additive_sums_disclosed_weights(records, rule, weights):
    assert risk.additive(weights)(records, rule).tolist() == [1.25, 0.5, 3.0]
    assert risk.additive(0.0 * weights)(records, rule).tolist() == [0.0, 0.0, 0.0]  # zero weights


def test_multiplicative_multiplies_exp_weights(records, rule, weights):
    values = risk.multiplicative(weights)(records, rule)
    assert values == pytest.approx([np.exp(1) * np.exp(0.25), np.exp(0.5), np.exp(3)])
    nothing = rule & False
    assert risk.multiplicative(weights)(records, nothing).tolist() == [1.0, 1.0, 1.0]
    assert risk.additive(weights)(records, nothing).tolist() == [0.0, 0.0, 0.0]


def test_weights_are_matched_by_label(records, rule, weights):
    shuffled = weights.iloc[[2, 0, 1]][["zip", "age"]]
    assert risk.additive(shuffled)(records, rule).tolist() == [1.25, 0.5, 3.0]
    # the rule too, rows and columns in another order
    shuffled_rule = rule.iloc[[1, 2, 0]][["zip", "age"]]
    assert risk.additive(weights)(records, shuffled_rule).tolist() == [1.25, 0.5, 3.0]
    assert risk.multiplicative(weights)(records, shuffled_rule) == pytest.approx(
        [np.exp(1.25), np.exp(0.5), np.exp(3.0)]
    )


def test_custom_sensitivity_by_identifier(records, rule):
    def vip(records, rule):
        # Bob is sensitive whatever is disclosed; others count their disclosed cells
        return pd.Series(
            np.where(records.index == "bob", 10.0, rule.sum(axis=1)), index=records.index
        ).iloc[::-1]

    dictionary = pd.DataFrame({"age": [30, 40, 40, 50], "zip": ["a", "b", "b", "c"]})
    # counts: ann (30,a) -> 1; bob (b) -> 2; cy (50) -> 1
    loss = risk.losses(records, rule, dictionary, vip)
    assert loss.tolist() == [2.0, 5.0, 1.0]
    # records whose index is not sorted: the Series is matched by label, not sorted
    unsorted = [2, 0, 1]  # cy, ann, bob
    loss = risk.losses(records.iloc[unsorted], rule.iloc[unsorted], dictionary, vip)
    assert loss.tolist() == [1.0, 2.0, 5.0]


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda r, d: np.ones(2), "one value per record"),
        (lambda r, d: -np.ones(3), "non-negative"),
        (lambda r, d: np.array([1.0, -0.5, 1.0]), "non-negative"),
        (lambda r, d: np.ones((3, 1)), "one value per record"),
        (lambda r, d: np.array([1.0, np.nan, 1.0]), "finite"),
        (lambda r, d: pd.Series(1.0, index=["x", "y", "z"]), "index"),
    ],
)
def test_custom_sensitivity_output_is_checked(records, rule, bad, message):
    dictionary = records.copy()
    with pytest.raises(ValueError, match=message):
        risk.losses(records, rule, dictionary, bad)


def test_sensitivity_must_be_callable(records, rule):
    with pytest.raises(TypeError, match="sensitivity"):
        risk.losses(records, rule, records, 1.0)


@pytest.mark.parametrize("c", [-1.0, np.inf, np.nan])
def test_constant_rejects_bad_c(c):
    with pytest.raises(ValueError, match="`c`"):
        risk.constant(c)


@pytest.mark.parametrize("factory", [risk.additive, risk.multiplicative])
def test_weights_with_missing_entries_are_refused(weights, factory):
    holes = weights.copy()
    holes.loc["bob", "zip"] = np.nan
    with pytest.raises(ValueError, match=r"`weights` has 1 missing entries.*'bob'.*'zip'"):
        factory(holes)
    holes = weights.copy()
    holes.loc["cy", "age"] = np.nan  # off the diagonal: row and column told apart
    with pytest.raises(ValueError, match=r"`weights` has 1 missing entries.*'cy'.*'age'"):
        factory(holes)


@pytest.mark.parametrize("factory", [risk.additive, risk.multiplicative])
def test_weights_must_be_a_numeric_table(weights, factory):
    with pytest.raises(TypeError, match="`weights` must be a pandas DataFrame"):
        factory(weights.to_numpy())
    with pytest.raises(TypeError, match="`weights` must hold numbers"):
        factory(weights.assign(zip="x"))
    with pytest.raises(TypeError, match="`weights` must hold numbers"):
        factory(weights > 1.0)  # booleans are not weights
    with pytest.raises(ValueError, match="`weights` must be finite"):
        factory(weights.assign(zip=np.inf))


def test_additive_refuses_negative_weights(weights):
    with pytest.raises(ValueError, match="non-negative"):
        risk.additive(weights - 1)
    risk.multiplicative(weights - 1)  # negative weights are fine in the exponent


def test_weights_shaped_unlike_records_are_refused(records, rule, weights):
    with pytest.raises(ValueError, match="`weights` has shape"):
        risk.additive(weights.iloc[:2])(records, rule)
    with pytest.raises(ValueError, match="index of `weights`"):
        risk.additive(weights.rename(index={"cy": "dan"}))(records, rule)
    with pytest.raises(ValueError, match="columns of `weights`"):
        risk.multiplicative(weights.rename(columns={"zip": "sex"}))(records, rule)
