"""Exact samplers for *releasing* private data.

Everything here uses exact rational arithmetic (:class:`fractions.Fraction`) and the operating
system's cryptographically secure generator (:mod:`secrets`), following Canonne, Kamath & Steinke,
"The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), Algorithms 1-3. No floating-point
operation touches the noise, so the output distribution is exactly the one the privacy proof is
about (floating-point samplers leak, see Mironov, CCS 2012).

These functions are slow (pure Python, one integer at a time); they are meant for publishing a
handful of statistics, not for simulation studies.
"""

from __future__ import annotations

import secrets
from fractions import Fraction


def _bernoulli(p: Fraction) -> bool:
    """Exact Bernoulli(p) for a rational ``0 <= p <= 1``."""
    return secrets.randbelow(p.denominator) < p.numerator


def _bernoulli_exp_le1(gamma: Fraction) -> bool:
    """Exact Bernoulli(exp(-gamma)) for rational ``0 <= gamma <= 1`` (CKS Algorithm 1)."""
    k = 1
    while _bernoulli(gamma / k):
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma: Fraction) -> bool:
    """Exact Bernoulli(exp(-gamma)) for any rational ``gamma >= 0``."""
    whole = gamma.numerator // gamma.denominator
    for _ in range(whole):
        if not _bernoulli_exp_le1(Fraction(1)):
            return False
    return _bernoulli_exp_le1(gamma - whole)


def discrete_laplace(scale: Fraction) -> int:
    """One exact draw with pmf proportional to ``exp(-|k| / scale)`` on the integers.

    CKS Algorithm 2 with ``scale = t / s``.
    """
    t, s = scale.numerator, scale.denominator
    while True:
        u = secrets.randbelow(t)
        if not bernoulli_exp(Fraction(u, t)):
            continue
        v = 0
        while bernoulli_exp(Fraction(1)):
            v += 1
        y = (u + t * v) // s
        negative = secrets.randbelow(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian(sigma: Fraction) -> int:
    """One exact draw with pmf proportional to ``exp(-k**2 / (2 sigma**2))`` (CKS Algorithm 3)."""
    sigma2 = sigma * sigma
    t = sigma.numerator // sigma.denominator + 1
    while True:
        y = discrete_laplace(Fraction(t))
        excess = abs(y) - sigma2 / t
        if bernoulli_exp(excess * excess / (2 * sigma2)):
            return y
