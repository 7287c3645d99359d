"""Decision-theoretic disclosure risk.

An implementation of the framework of Lebanon, Scannapieco, Fouad and Bertino,
"Beyond k-Anonymity: a decision theoretic framework for assessing privacy
risk" (Privacy in Statistical Databases, 2006): the loss ``Phi(y) / |rho(y,
theta)|`` of a released record against an attacker's dictionary, the risk and
Bayes risk of a disclosure rule, the minimax rule, rule families with an
exhaustive optimal search, the MinRisk algorithm, and k-anonymity as a special
case. See ``docs/risk.md``.

The curator's side of a differentially private release: :func:`membership_risk` and
:func:`attribute_risk`, the exact Bayes risk of the best attacker against a planned release.
"""

from ._core import consistent_counts, disclose, losses, risk
from ._decision import BayesRisk, MinimaxResult, bayes_risk, minimax_rule
from ._kanon import anonymity_level, is_k_anonymous, k_anonymity_bound
from ._membership import AttributeRisk, MembershipRisk, attribute_risk, membership_risk
from ._minrisk import min_risk_rule
from ._rules import OptimalRule, count_rules, enumerate_rules, optimal_rule, random_rule
from ._sensitivity import Sensitivity, additive, constant, multiplicative

__all__ = [
    "AttributeRisk",
    "BayesRisk",
    "MembershipRisk",
    "MinimaxResult",
    "OptimalRule",
    "Sensitivity",
    "additive",
    "anonymity_level",
    "attribute_risk",
    "bayes_risk",
    "consistent_counts",
    "constant",
    "count_rules",
    "disclose",
    "enumerate_rules",
    "is_k_anonymous",
    "k_anonymity_bound",
    "losses",
    "membership_risk",
    "min_risk_rule",
    "minimax_rule",
    "multiplicative",
    "optimal_rule",
    "random_rule",
    "risk",
]
