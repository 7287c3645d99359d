r"""Privacy guarantees as values: composition and conversion in one place.

A :class:`Guarantee` is what a release promises about neighbouring data sets, in one of the
privacy measures OpenDP names (https://opendp.org):

================================  ===============================  ================================
OpenDP measure                    ``Guarantee``                    ``Mechanism.privacy`` form
================================  ===============================  ================================
``MaxDivergence``                 pure epsilon-DP                  ``{"epsilon": e}``
``Approximate(MaxDivergence)``    (epsilon, delta)-DP              ``{"epsilon": e, "delta": d}``
``ZeroConcentratedDivergence``    rho-zCDP (Bun & Steinke 2016)    ``{"rho": r}``
(Gaussian DP)                     mu-GDP (Dong, Roth & Su 2019)    ``{"mu": m}``
================================  ===============================  ================================

Each mechanism computes its own guarantee from its scale and a sensitivity
(:meth:`Mechanism.privacy_map <pymc_unbounded_dp.Mechanism.privacy_map>`); this module only does
the arithmetic on guarantees:

* **sequential composition** (:func:`compose`, ``a + b``): epsilons add, deltas add, rhos add,
  mus add in squares; mixed measures are first converted to a common one (pure epsilon-DP and
  mu-GDP to zCDP, or zCDP to (epsilon, delta)-DP at a given ``delta``);
* **conversion**: :meth:`Guarantee.to_zcdp` (epsilon-DP implies :math:`(\varepsilon^2/2)`-zCDP,
  Bun & Steinke 2016, Prop. 1.4), :meth:`Guarantee.to_approx` (rho-zCDP implies
  (epsilon, delta)-DP by OpenDP's accountant, ``make_zCDP_to_approxDP``: Canonne, Kamath &
  Steinke 2020, tighter than Bun & Steinke's :math:`\rho + 2\sqrt{\rho\log(1/\delta)}`) and
  :meth:`Guarantee.zero_delta` (the total-variation bound, used by the plug-in diagnostic).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scipy import special

from pymc_unbounded_dp._checks import is_real

__all__ = ["APPROXIMATE", "GAUSSIAN_DP", "PURE", "ZCDP", "Guarantee", "compose", "zero_delta"]

#: The measures, in OpenDP's names (mu-GDP has none in OpenDP).
PURE = "MaxDivergence"
APPROXIMATE = "Approximate(MaxDivergence)"
ZCDP = "ZeroConcentratedDivergence"
GAUSSIAN_DP = "GaussianDP"
#: The parameters of each measure, in the order they are shown.
_PARAMETERS = {
    PURE: ("epsilon",),
    APPROXIMATE: ("epsilon", "delta"),
    ZCDP: ("rho",),
    GAUSSIAN_DP: ("mu",),
}
_MEASURES = {frozenset(keys): measure for measure, keys in _PARAMETERS.items()}


def _opendp_prelude():
    """OpenDP's prelude with the ``"contrib"`` feature flag on (OpenDP gates its noise
    constructors behind it); imported on first use, as OpenDP loads a native library."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@dataclass(frozen=True, init=False)
class Guarantee:
    r"""A privacy guarantee: pure epsilon-DP, (epsilon, delta)-DP, rho-zCDP or mu-GDP.

    Built from the parameters of its measure, by keyword: ``Guarantee(epsilon=1.0)``,
    ``Guarantee(epsilon=1.0, delta=1e-6)``, ``Guarantee(rho=0.5)``, ``Guarantee(mu=1.0)``
    (``delta=0`` gives pure epsilon-DP). The parameters of other measures are ``None``.

    Parameters
    ----------
    epsilon, delta, rho, mu : float, optional
        Finite or infinite, ``>= 0``; ``delta <= 1``.

    Examples
    --------
    >>> from pymc_unbounded_dp.privacy import Guarantee
    >>> Guarantee(epsilon=0.5) + Guarantee(epsilon=0.25)
    Guarantee(epsilon=0.75)
    >>> Guarantee(epsilon=1.0).to_zcdp()
    Guarantee(rho=0.5)
    >>> f"{Guarantee(epsilon=1.0, delta=1e-6):g}"
    'epsilon=1, delta=1e-06'
    """

    measure: str
    epsilon: float | None
    delta: float | None
    rho: float | None
    mu: float | None

    def __init__(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        rho: float | None = None,
        mu: float | None = None,
    ):
        given = {
            k: v
            for k, v in (("epsilon", epsilon), ("delta", delta), ("rho", rho), ("mu", mu))
            if v is not None
        }
        measure = _MEASURES.get(frozenset(given))
        if measure is None:
            raise ValueError(
                "Guarantee: give `epsilon`, `epsilon` and `delta`, `rho` or `mu`; got "
                f"{sorted(given) or 'none'}."
            )
        for key, value in given.items():
            if not is_real(value):
                raise TypeError(f"Guarantee: `{key}` must be a number, got {value!r}.")
            if math.isnan(value) or value < 0 or (key == "delta" and value > 1):
                raise ValueError(f"Guarantee: `{key}` must be >= 0 (delta <= 1), got {value}.")
        if measure == APPROXIMATE and delta == 0:
            measure, given = PURE, {"epsilon": epsilon}
        object.__setattr__(self, "measure", measure)
        for key in ("epsilon", "delta", "rho", "mu"):
            object.__setattr__(self, key, float(given[key]) if key in given else None)

    @classmethod
    def from_dict(cls, guarantee: Mapping[str, float], argument: str = "guarantee") -> Guarantee:
        """The guarantee in the ``Mechanism.privacy`` form, e.g. ``{"rho": 0.5}``.

        Raises
        ------
        TypeError, ValueError
            If ``guarantee`` is not such a mapping of numbers; the message names ``argument``.
        """
        if not isinstance(guarantee, Mapping):
            raise TypeError(
                f"`{argument}` must be a dict such as {{'epsilon': 1.0}} or {{'rho': 0.5}}, got "
                f"{guarantee!r}."
            )
        if frozenset(guarantee) not in _MEASURES:
            raise ValueError(
                f"`{argument}` must have the keys 'epsilon', 'epsilon' and 'delta', 'rho' or "
                f"'mu'; got {sorted(guarantee)}."
            )
        values = {}
        for key, value in guarantee.items():
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise TypeError(f"`{argument}`: {key!r} must be a number, got {value!r}.") from None
            if math.isnan(value) or value < 0 or (key == "delta" and value > 1):
                raise ValueError(f"`{argument}`: {key!r} must be >= 0 (delta <= 1), got {value}.")
            values[key] = value
        return cls(**values)

    def as_dict(self) -> dict[str, float]:
        """The parameters of the measure, e.g. ``{"epsilon": 1.0, "delta": 1e-06}``."""
        return {key: getattr(self, key) for key in _PARAMETERS[self.measure]}

    def __format__(self, spec: str) -> str:
        """``f"{g:.4g}"`` is ``"epsilon=1.5, delta=1e-06"``, each number formatted by ``spec``."""
        return ", ".join(f"{key}={value:{spec}}" for key, value in self.as_dict().items())

    def __repr__(self) -> str:
        return f"Guarantee({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"

    def __add__(self, other: Guarantee) -> Guarantee:
        """Sequential composition of the two (:func:`compose`)."""
        if not isinstance(other, Guarantee):
            return NotImplemented
        return compose([self, other])

    # -- conversions ----------------------------------------------------------------------------
    def to_zcdp(self) -> Guarantee:
        r"""The rho-zCDP guarantee this one implies.

        epsilon-DP implies :math:`(\varepsilon^2/2)`-zCDP (Bun & Steinke 2016, Prop. 1.4); mu-GDP
        implies :math:`(\mu^2/2)`-zCDP (the Renyi divergences of the Gaussian pair).

        Raises
        ------
        ValueError
            For (epsilon, delta)-DP, which implies no zCDP bound.
        """
        if self.measure == ZCDP:
            return self
        if self.measure == PURE:
            return Guarantee(rho=self.epsilon**2 / 2.0)
        if self.measure == GAUSSIAN_DP:
            return Guarantee(rho=self.mu**2 / 2.0)
        raise ValueError(f"{self!r}: (epsilon, delta)-DP implies no rho-zCDP guarantee.")

    def to_approx(self, delta: float) -> Guarantee:
        r"""The (epsilon, delta)-DP guarantee this one implies at ``delta``.

        rho-zCDP: the epsilon of OpenDP's accountant (``make_zCDP_to_approxDP`` at ``delta``,
        Canonne, Kamath & Steinke 2020), which is below Bun & Steinke's
        :math:`\rho + 2\sqrt{\rho\log(1/\delta)}`; mu-GDP through its zCDP guarantee. Pure
        epsilon-DP is returned as it is (it holds with delta = 0).

        Examples
        --------
        >>> from pymc_unbounded_dp.privacy import Guarantee
        >>> round(Guarantee(rho=0.5).to_approx(1e-6).epsilon, 3)
        5.222

        Raises
        ------
        ValueError
            If ``delta`` is not in (0, 1), or is below an (epsilon, delta)-DP guarantee's delta.
        """
        if not is_real(delta) or not 0 < delta < 1:
            raise ValueError(f"Guarantee.to_approx: `delta` must be in (0, 1), got {delta!r}.")
        if self.measure == PURE:
            return self
        if self.measure == APPROXIMATE:
            if delta < self.delta:
                raise ValueError(
                    f"Guarantee.to_approx: {self!r} holds for delta >= {self.delta}, not {delta}."
                )
            return self
        rho = self.to_zcdp().rho
        if rho == 0:
            return Guarantee(epsilon=0.0)
        dp = _opendp_prelude()
        space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)
        # A Gaussian measurement whose map at distance 1 is rho (rounded up by OpenDP: conservative).
        gaussian = dp.m.make_gaussian(*space, scale=1.0 / math.sqrt(2.0 * rho))
        epsilon, _ = dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gaussian), delta).map(1.0)
        return Guarantee(epsilon=float(epsilon), delta=float(delta))

    def zero_delta(self) -> float:
        r"""The :math:`\delta` of the :math:`(0, \delta)`-DP guarantee this one implies.

        :math:`(0, \delta)`-DP bounds the total-variation distance between the release
        distributions of neighbouring data sets by :math:`\delta` (Awan, Barrientos & Ju,
        arXiv 2406.06231):

        =========================  ==========================================================
        guarantee                  :math:`\delta`
        =========================  ==========================================================
        epsilon-DP                 :math:`(e^\varepsilon - 1) / (e^\varepsilon + 1)`
        (epsilon, delta')-DP       :math:`(2\delta' + e^\varepsilon - 1) / (e^\varepsilon + 1)`
        rho-zCDP                   :math:`\min(\sqrt{\rho/2}, \sqrt{1 - e^{-\rho}})` (Pinsker;
                                   Bretagnolle-Huber)
        mu-GDP                     :math:`2\Phi(\mu/2) - 1`
        =========================  ==========================================================
        """
        if self.measure == ZCDP:
            return min(math.sqrt(self.rho / 2.0), math.sqrt(-math.expm1(-self.rho)))  # <= 1
        if self.measure == GAUSSIAN_DP:
            return math.erf(self.mu / (2.0 * math.sqrt(2.0)))  # 2 Phi(mu / 2) - 1
        delta = math.tanh(self.epsilon / 2.0)  # 1 at epsilon = inf
        if self.measure == APPROXIMATE:  # + 2 delta' / (e^eps + 1)
            delta += 2.0 * self.delta * float(special.expit(-self.epsilon))
        return min(1.0, delta)


def compose(guarantees: Iterable[Guarantee], *, delta: float | None = None) -> Guarantee:
    r"""Sequential (basic) composition: the guarantee of releasing all of them.

    * pure epsilon-DP: the epsilons add; with (epsilon, delta)-DP: epsilons and deltas add;
    * rho-zCDP: the rhos add (Bun & Steinke 2016); mu-GDP: :math:`\sqrt{\sum \mu^2}`
      (Dong, Roth & Su 2019);
    * mixed pure epsilon-DP, zCDP and GDP: each converted to zCDP (:meth:`Guarantee.to_zcdp`),
      then the rhos add;
    * (epsilon, delta)-DP with zCDP or GDP: the latter composed in zCDP and converted at
      ``delta`` (:meth:`Guarantee.to_approx`), then epsilons and deltas add.

    Sums are exactly rounded (:func:`math.fsum`), so the order of the guarantees does not matter.

    Parameters
    ----------
    guarantees : iterable of Guarantee
        At least one.
    delta : float, optional
        Needed only to convert zCDP to (epsilon, delta)-DP when both kinds are composed.

    Examples
    --------
    >>> from pymc_unbounded_dp.privacy import Guarantee, compose
    >>> compose([Guarantee(rho=0.25), Guarantee(epsilon=1.0)])
    Guarantee(rho=0.75)
    """
    guarantees = list(guarantees)
    if not guarantees or not all(isinstance(g, Guarantee) for g in guarantees):
        raise TypeError(
            f"compose: `guarantees` must be Guarantees (one or more), got {guarantees}."
        )
    measures = {g.measure for g in guarantees}
    if measures == {GAUSSIAN_DP}:
        return Guarantee(mu=math.sqrt(math.fsum(g.mu**2 for g in guarantees)))
    if measures <= {PURE, ZCDP, GAUSSIAN_DP} and measures != {PURE}:
        return Guarantee(rho=math.fsum(g.to_zcdp().rho for g in guarantees))
    if measures & {ZCDP, GAUSSIAN_DP}:
        if delta is None:
            raise ValueError(
                "compose: (epsilon, delta)-DP and zCDP guarantees compose in (epsilon, delta)-DP; "
                "give the `delta` at which to convert the zCDP ones."
            )
        concentrated = [g for g in guarantees if g.measure in (ZCDP, GAUSSIAN_DP)]
        rest = [g for g in guarantees if g.measure not in (ZCDP, GAUSSIAN_DP)]
        return compose([*rest, compose(concentrated).to_approx(delta)])
    return Guarantee(
        epsilon=math.fsum(g.epsilon for g in guarantees),
        delta=math.fsum(g.delta or 0.0 for g in guarantees),
    )


def zero_delta(guarantee: Mapping[str, float]) -> float:
    r"""The :math:`\delta` of the :math:`(0, \delta)`-DP guarantee implied by ``guarantee``.

    :math:`(0, \delta)`-DP bounds the total-variation distance between the release distributions
    of neighbouring data sets by :math:`\delta` (Awan, Barrientos & Ju, arXiv 2406.06231); the
    table of conversions is :meth:`Guarantee.zero_delta`'s.

    Parameters
    ----------
    guarantee : dict
        ``{"epsilon": e}``, ``{"epsilon": e, "delta": d}``, ``{"rho": r}`` or ``{"mu": m}`` (the
        form of :attr:`Mechanism.privacy <pymc_unbounded_dp.Mechanism.privacy>`).

    Returns
    -------
    float
        :math:`\delta \in [0, 1]`.

    Examples
    --------
    >>> from pymc_unbounded_dp.diagnostics import zero_delta
    >>> round(zero_delta({"epsilon": 1.0}), 4)
    0.4621
    >>> round(zero_delta({"rho": 0.5}), 4)
    0.5
    """
    return Guarantee.from_dict(guarantee, "guarantee").zero_delta()
