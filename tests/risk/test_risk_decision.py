"""Bayes risk, minimax, rule families and the exhaustive optimal rule."""

import itertools

import numpy as np
import pandas as pd
import pytest

from pymc_unbounded_dp import risk

ONE = risk.constant(1.0)


@pytest.fixture
def records():
    return pd.DataFrame({"age": [30, 40], "zip": ["A", "B"]}, index=["r1", "r2"])


@pytest.fixture
def dictionaries():
    d1 = pd.DataFrame({"age": [30, 30, 30, 40], "zip": ["A", "B", "C", "B"]})
    d2 = pd.DataFrame({"age": [30, 40, 40, 40], "zip": ["A", "A", "B", "C"]})
    return [d1, d2]


def make_rule(records, rows):
    return pd.DataFrame(
        {c: [c in row for row in rows] for c in records.columns}, index=records.index
    )


# Hand risks with Phi = 1 (rows: rule, columns: d1, d2):
#   A: both disclose age        r1 30 -> 1/3 | 1 ; r2 40 -> 1 | 1/3      -> 2/3, 2/3
#   B: both disclose zip        r1 A  -> 1 | 1/2 ; r2 B  -> 1/2 | 1      -> 3/4, 3/4
#   C: r1 age, r2 zip           r1 -> 1/3 | 1   ; r2 -> 1/2 | 1          -> 5/12, 1
#   D: r1 zip, r2 age           r1 -> 1 | 1/2   ; r2 -> 1 | 1/3          -> 1, 5/12
RULES = {
    "A": (("age",), ("age",)),
    "B": (("zip",), ("zip",)),
    "C": (("age",), ("zip",)),
    "D": (("zip",), ("age",)),
}
HAND = {"A": (2 / 3, 2 / 3), "B": (3 / 4, 3 / 4), "C": (5 / 12, 1.0), "D": (1.0, 5 / 12)}


def test_risks_by_hand(records, dictionaries):
    for name, rows in RULES.items():
        rule = make_rule(records, rows)
        got = [risk.risk(records, rule, d, ONE) for d in dictionaries]
        assert got == pytest.approx(HAND[name]), name


def test_minimax_rule_by_hand(records, dictionaries):
    order = ["C", "B", "A", "D"]
    rules = [make_rule(records, RULES[name]) for name in order]
    result = risk.minimax_rule(records, rules, dictionaries, ONE)
    assert result.index == 2
    assert result.worst_risk == pytest.approx(2 / 3)
    assert result.rule.equals(rules[2])
    assert result.risks.to_numpy() == pytest.approx(np.array([HAND[name] for name in order]))
    # the worst case, not an average: three copies of d1 make C's mean risk the smallest
    # (9/16 against A's 2/3) and change nothing
    again = risk.minimax_rule(records, rules, [dictionaries[0]] * 3 + dictionaries[1:], ONE)
    assert (again.index, again.worst_risk) == (2, pytest.approx(2 / 3))


def test_minimax_rule_under_the_independence_model_by_hand(records, dictionaries):
    """Rules that disclose both attributes, where the two models of |rho| differ.

    Independence: |rho| = N prod_j p_j(y_j). d1: p_age(30) = 3/4, p_age(40) = 1/4, p_zip(A) = 1/4,
    p_zip(B) = 1/2; d2: p_age(30) = 1/4, p_age(40) = 3/4, p_zip(A) = 1/2, p_zip(B) = 1/4.
      F: both disclose both   r1 (30, A) -> 4/3 | 2   ; r2 (40, B) -> 2 | 4/3    -> 5/3, 5/3
      E: r1 both, r2 age      r1 -> 4/3 | 2           ; r2 40 -> 1 | 1/3         -> 7/6, 7/6
    Exactly, every full row is unique in both dictionaries: F 1, 1 and E 1, 2/3 (a tie at 1).
    """
    full = make_rule(records, (("age", "zip"), ("age", "zip")))
    either = make_rule(records, (("age", "zip"), ("age",)))
    independent = risk.minimax_rule(records, [full, either], dictionaries, ONE, model="independent")
    assert independent.risks.to_numpy() == pytest.approx(np.array([[5 / 3, 5 / 3], [7 / 6, 7 / 6]]))
    assert (independent.index, independent.worst_risk) == (1, pytest.approx(7 / 6))
    exact = risk.minimax_rule(records, [full, either], dictionaries, ONE)
    assert exact.risks.to_numpy() == pytest.approx(np.array([[1.0, 1.0], [1.0, 2 / 3]]))
    assert (exact.index, exact.worst_risk) == (0, pytest.approx(1.0))


def test_bayes_risk_finite_prior_by_hand(records, dictionaries):
    rule = make_rule(records, RULES["C"])
    # 0.75 * 5/12 + 0.25 * 1 = 9/16: rule C is Bayes-optimal for this prior, not minimax
    result = risk.bayes_risk(records, rule, dictionaries, [0.75, 0.25], ONE)
    assert result.estimate == pytest.approx(9 / 16)
    assert result.std_error == 0.0
    minimax = risk.bayes_risk(
        records, make_rule(records, RULES["A"]), dictionaries, [0.75, 0.25], ONE
    )
    assert minimax.estimate == pytest.approx(2 / 3)
    # a dictionary of prior weight 0 is allowed and counts for nothing
    only_first = risk.bayes_risk(records, rule, dictionaries, [1.0, 0.0], ONE)
    assert only_first.estimate == pytest.approx(5 / 12)
    with pytest.raises(ValueError, match="`prior` must hold numbers"):
        risk.bayes_risk(records, rule, dictionaries, ["a", "b"], ONE)


def test_bayes_risk_sampler(records, dictionaries):
    rule = make_rule(records, RULES["C"])

    def sampler(rng):
        return dictionaries[0] if rng.random() < 0.75 else dictionaries[1]

    result = risk.bayes_risk(records, rule, sampler, None, ONE, n_samples=400, seed=11)
    # the same draws by hand: mean and standard error of the risks
    rng = np.random.default_rng(11)
    draws = np.array([risk.risk(records, rule, sampler(rng), ONE) for _ in range(400)])
    assert result.estimate == pytest.approx(draws.mean())
    assert result.std_error == pytest.approx(draws.std(ddof=1) / 20)
    assert result.std_error > 0
    assert abs(result.estimate - 9 / 16) < 4 * result.std_error
    again = risk.bayes_risk(records, rule, sampler, None, ONE, n_samples=400, seed=11)
    assert again == result


def test_optimal_rule_by_hand(records, dictionaries):
    best = risk.optimal_rule(records, dictionaries[0], ONE, 1, "per_record")
    assert best.risk == pytest.approx(5 / 12)
    assert best.rule.equals(make_rule(records, RULES["C"]))
    assert best.n_rules == 4
    # one cell in total; the undisclosed record matches all 4 entries (loss 1/4):
    # r1 age (1/3 + 1/4) / 2 = 7/24 is best; r2 zip gives 3/8, r1 zip and r2 age 5/8
    best = risk.optimal_rule(records, dictionaries[0], ONE, 1, "total")
    assert best.risk == pytest.approx(7 / 24)
    assert best.rule.equals(make_rule(records, (("age",), ())))
    # every rule ties (each value matches two entries): the first rule is the one returned
    tied = pd.DataFrame({"age": [30, 30, 40, 40], "zip": ["A", "A", "B", "B"]})
    best = risk.optimal_rule(records, tied, ONE, 1, "per_record")
    assert best.risk == pytest.approx(0.5)
    assert best.rule.equals(next(iter(risk.enumerate_rules(records, 1, "per_record"))))


def test_optimal_rule_counts_and_caps_the_family_it_searches(records, dictionaries):
    """``n_rules`` and ``max_rules`` are those of the family searched: 2 cells in total of the
    2 x 2 table are C(4, 2) = 6 rules (per record, 2 attributes each: 1 rule). Of the six, r1's age
    with r2's zip (rule C, 5/12) beats both cells of one record (1 and 1/4: 5/8)."""
    best = risk.optimal_rule(records, dictionaries[0], ONE, 2, "total", max_rules=6)
    assert best.n_rules == 6
    assert best.risk == pytest.approx(5 / 12)
    assert best.rule.equals(make_rule(records, RULES["C"]))
    with pytest.raises(ValueError, match=r"would evaluate 6 rules, more than `max_rules`=5"):
        risk.optimal_rule(records, dictionaries[0], ONE, 2, "total", max_rules=5)
    assert risk.optimal_rule(records, dictionaries[0], ONE, 2, max_rules=1).n_rules == 1


FAMILY_CASES = [
    ("total", 2, lambda mask, k: mask.sum() == k),
    ("per_record", 2, lambda mask, k: (mask.sum(axis=1) == k).all()),
    ("per_attribute", 2, lambda mask, k: (mask.sum(axis=0) == k).all()),
    ("per_record", 0, lambda mask, k: not mask.any()),
]


@pytest.mark.parametrize("family, k, holds", FAMILY_CASES)
def test_enumerate_rules_lists_each_rule_of_the_family_once(family, k, holds):
    records = pd.DataFrame(np.zeros((4, 3)), columns=["a", "b", "c"], index=list("wxyz"))
    rules = list(risk.enumerate_rules(records, k, family))
    masks = {rule.to_numpy().tobytes() for rule in rules}
    assert len(rules) == len(masks) == risk.count_rules(records, k, family)
    assert all(holds(rule.to_numpy(), k) for rule in rules)
    assert all(rule.index.equals(records.index) for rule in rules)
    # the family is complete: every boolean table satisfying the constraint is listed
    everything = itertools.product([False, True], repeat=12)
    members = [m for m in everything if holds(np.array(m).reshape(4, 3), k)]
    assert len(members) == len(rules)


@pytest.mark.parametrize("family, k, holds", FAMILY_CASES)
def test_random_rule_belongs_to_the_family(family, k, holds):
    records = pd.DataFrame(np.zeros((5, 4)), columns=list("abcd"))
    draws = [risk.random_rule(records, k, family, seed=s).to_numpy() for s in range(20)]
    assert all(holds(mask, k) for mask in draws)
    assert np.array_equal(draws[3], risk.random_rule(records, k, family, seed=3).to_numpy())
    if k:
        assert len({mask.tobytes() for mask in draws}) > 10
