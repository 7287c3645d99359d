r"""Exact Gibbs updates of parameters given the imputed records (an optional parameter step).

Given the records, the parameters of many record models have a closed-form conditional
(exponential-family records with conjugate priors). Drawing from it exactly is much cheaper than a
NUTS trajectory over all records (one pass for the sufficient statistics, then a few small draws),
and it is what the reference algorithms of Ju et al. (2022) and Awan, Barrientos & Ju (2024) do.

:class:`ConjugateGibbs` is a PyMC step for some of the model's parameters; the update itself is a
small function you write from the building blocks here, mapping the current records and parameter
values to new values *on the model's scale*. The step converts them to PyMC's (transformed) value
variables. Use it as a parameter step::

    step = pmdp.conjugate.ConjugateGibbs([theta], update)
    idata = pmdp.sample(step=step, ...)          # the other parameters still get NUTS

Exactness is the writer's responsibility: ``update`` must draw from the full conditional of the
claimed variables given the records and the other parameters, under the model's priors (the tests
check the regression update below against NUTS and the NumPy reference sampler).

Building blocks (NumPy, seeded by the step's generator)
-------------------------------------------------------
* :func:`beta_binomial` — ``theta ~ Beta(a, b)``, Bernoulli / binomial records;
* :func:`gamma_poisson` — ``lambda ~ Gamma(a, rate b)``, Poisson records;
* :func:`normal_gamma` — linear regression ``y ~ N(Z beta, 1/tau)``, ``beta | tau ~ N(m, P^-1/tau)``,
  ``tau ~ Gamma(a, rate b)``;
* :func:`normal_mean` — ``mu ~ N(m, P^-1)``, records ``x_i ~ N(mu, Phi^-1)`` with known ``Phi``;
* :func:`wishart_precision` — ``Phi ~ Wishart(nu, V)``, records ``x_i ~ N(mu, Phi^-1)``;
* :func:`bartlett_factors` — a 2x2 or larger precision written back as the Bartlett pieces
  ``(c, z)`` of a model that parametrises ``Phi = A A'``;
* :func:`dirichlet_concentration` — ``alpha_j ~ Gamma(a, rate b)``, Dirichlet records: not
  conjugate, so one independence Metropolis-Hastings step from a Laplace approximation built on the
  sufficient statistic ``sum_i log x_i`` (exact: it leaves the conditional invariant, and costs
  O(1) instead of O(n) per evaluation).

``update`` may use any such kernel that leaves the conditional of the claimed variables invariant
(Metropolis-within-Gibbs); an exact draw is the special case.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import ClassVar

import numpy as np
import pymc as pm
from pymc.logprob.utils import replace_rvs_by_values
from pymc.model import modelcontext
from pymc.pytensorf import compile as compile_pymc
from scipy import special

import pymc_unbounded_dp.kernels.conjugate as _kernels
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp._graph import KERNEL_MODE
from pymc_unbounded_dp._pymc_bridge import PackageStep

__all__ = [
    "ConjugateGibbs",
    "bartlett_factors",
    "beta_binomial",
    "dirichlet_concentration",
    "gamma_poisson",
    "normal_gamma",
    "normal_mean",
    "wishart_precision",
]

Update = Callable[[np.random.Generator, Mapping[str, np.ndarray], Mapping[str, np.ndarray]], dict]


class ConjugateGibbs(PackageStep):
    """A PyMC step drawing some parameters exactly from their conditional given the records.

    Parameters
    ----------
    vars : list of model variables
        The free random variables (e.g. ``beta``, ``tau``) that ``update`` draws. Not ``n``: only
        the reversible-jump moves change the sample size.
    update : callable
        ``update(rng, records, values) -> dict``: ``records`` maps each ``Records`` name to its
        current ``(n, ...)`` array, ``values`` maps every free variable and deterministic of the
        model to its current value on the model's scale (e.g. ``tau > 0``, not ``log tau``). It
        returns new model-scale values for exactly the names in ``vars``, drawn with ``rng``.
    model : pm.Model, optional

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp import conjugate
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 2, 3)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=40)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=15.2)
    ...     def update(rng, records, values):
    ...         k = records["x"].sum()
    ...         return {"theta": conjugate.beta_binomial(rng, k, len(records["x"]), 2, 3)}
    ...     step = conjugate.ConjugateGibbs([theta], update)
    ...     idata = pmdp.sample(step=step, draws=50, tune=10, chains=1, random_seed=1,
    ...                         progressbar=False, compute_convergence_checks=False)
    """

    name = "conjugate_gibbs"
    stats_dtypes_shapes: ClassVar[dict] = {"tune": (bool, [])}

    def __init__(self, vars, update: Update, model=None, blocked: bool = True, rng=None):
        model = modelcontext(model)
        if not callable(update):
            raise TypeError(f"ConjugateGibbs: `update` must be callable, got {update!r}.")
        rvs = [self._as_free_rv(model, v) for v in vars]
        compiled = compile_model(model)
        for size in compiled.blocks.sample_sizes:
            if any(rv is size.rv for rv in rvs):
                raise ValueError(
                    "ConjugateGibbs: the sample size is moved by the reversible-jump step; leave "
                    f"{size.name!r} out of `vars`."
                )
        self.vars = [model.rvs_to_values[rv] for rv in rvs]
        self.update = update
        self.tune = True
        self.rng = np.random.default_rng(rng)
        self._compiled = compiled
        self._names = [rv.name for rv in rvs]
        self._value_names = [v.name for v in self.vars]
        self._all_values = [v.name for v in model.value_vars]
        self._all_dtypes = [np.dtype(v.dtype) for v in model.value_vars]
        self._read = self._reader(model)
        self._write = self._writer(model, rvs)

    @staticmethod
    def _as_free_rv(model: pm.Model, var):
        if isinstance(var, str):
            var = model.named_vars.get(var, var)
        if var in model.free_RVs:
            return var
        values_to_rvs = {v: rv for rv, v in model.rvs_to_values.items()}
        if var in values_to_rvs and values_to_rvs[var] in model.free_RVs:
            return values_to_rvs[var]
        raise ValueError(
            f"ConjugateGibbs: {getattr(var, 'name', var)!r} is not a free random variable of the "
            "model; pass the parameters the update draws (e.g. `[beta, tau]` or their names)."
        )

    def _reader(self, model: pm.Model):
        """Model-scale values of every free variable and deterministic, from a point."""
        outputs = [*model.free_RVs, *model.deterministics]
        outputs = replace_rvs_by_values(
            outputs,
            rvs_to_values={rv: model.rvs_to_values[rv] for rv in model.free_RVs},
            rvs_to_transforms=model.rvs_to_transforms,
        )
        names = [v.name for v in [*model.free_RVs, *model.deterministics]]
        fn = compile_pymc(
            list(model.value_vars), outputs, on_unused_input="ignore", mode=KERNEL_MODE
        )
        fn.trust_input = True  # the arguments are converted by `_value_arguments`

        def read(point):
            return dict(zip(names, fn(*self._value_arguments(point))))

        return read

    def _writer(self, model: pm.Model, rvs: list):
        """Value-variable (transformed) values of the claimed variables from new model values."""
        placeholders = [rv.type() for rv in rvs]
        forward = []
        for rv, new in zip(rvs, placeholders):
            transform = model.rvs_to_transforms.get(rv)
            forward.append(new if transform is None else transform.forward(new, *rv.owner.inputs))
        # A transform's parameters may involve the claimed variables (their new values) and the
        # others (their value variables, read on their own scale through transforms that may
        # involve the claimed ones): one replacement of every free variable at once.
        others = [rv for rv in model.free_RVs if rv not in rvs]
        forward = replace_rvs_by_values(
            forward,
            rvs_to_values={
                **{rv: model.rvs_to_values[rv] for rv in others},
                **dict(zip(rvs, placeholders)),
            },
            rvs_to_transforms={rv: t for rv, t in model.rvs_to_transforms.items() if rv not in rvs},
        )
        fn = compile_pymc(
            [*model.value_vars, *placeholders], forward, on_unused_input="ignore", mode=KERNEL_MODE
        )
        fn.trust_input = True  # the arguments are converted to the inputs' dtypes
        dtypes = [np.dtype(rv.dtype) for rv in rvs]

        def write(point, new_values):
            args = self._value_arguments(point)
            args += [np.asarray(v, dtype=d) for v, d in zip(new_values, dtypes)]
            return fn(*args)

        return write

    def _value_arguments(self, point: dict) -> list[np.ndarray]:
        """Every value variable's value at ``point``, in the model's order and dtype (the compiled
        reader and writer trust their inputs)."""
        return [np.asarray(point[k], dtype=t) for k, t in zip(self._all_values, self._all_dtypes)]

    def step(self, point):
        records = {
            spec.name: spec.data.get_value(borrow=True) for spec in self._compiled.blocks.records
        }
        values = self._read(point)
        new = self.update(self.rng, records, values)
        if not isinstance(new, Mapping) or set(new) != set(self._names):
            got = sorted(new) if isinstance(new, Mapping) else type(new).__name__
            raise ValueError(
                f"ConjugateGibbs: `update` must return a dict with exactly {sorted(self._names)}; "
                f"got {got}."
            )
        ordered = []
        for name in self._names:
            value = np.asarray(new[name])
            expected = np.shape(values[name])
            if value.shape != expected:
                raise ValueError(
                    f"ConjugateGibbs: `update` returned shape {value.shape} for {name!r}, the "
                    f"model's variable has shape {expected}."
                )
            ordered.append(value)
        point = dict(point)
        for value_name, transformed in zip(self._value_names, self._write(point, ordered)):
            point[value_name] = np.asarray(transformed, dtype=point[value_name].dtype)
        return point, [{"tune": self.tune}]


# --------------------------------------------------------------------------------------------------
# building blocks: exact conditional draws
# --------------------------------------------------------------------------------------------------
def beta_binomial(rng: np.random.Generator, successes, trials, a: float, b: float) -> float:
    """``theta | data ~ Beta(a + successes, b + trials - successes)`` (Bernoulli or binomial)."""
    successes, trials = float(successes), float(trials)
    return float(rng.beta(a + successes, b + trials - successes))


def gamma_poisson(rng: np.random.Generator, total, count, a: float, b: float) -> float:
    """``lambda | data ~ Gamma(a + sum x, rate b + n)`` for ``count`` Poisson records."""
    return float(rng.gamma(a + float(total), 1.0 / (b + float(count))))


def _float_array(values) -> np.ndarray:
    """``values`` as the contiguous ``float64`` array the compiled kernels take."""
    return np.ascontiguousarray(values, dtype=np.float64)


def _mvnormal_precision(rng: np.random.Generator, mean: np.ndarray, precision: np.ndarray):
    normals = _float_array(rng.standard_normal(mean.shape[0]))
    return _kernels.mvnormal_from_precision(mean, _float_array(precision), normals)


def normal_gamma(
    rng: np.random.Generator,
    design: np.ndarray,
    response: np.ndarray,
    prior_mean=None,
    prior_precision=None,
    a: float = 1.0,
    b: float = 1.0,
) -> tuple[np.ndarray, float]:
    """``(beta, tau)`` from their conditional in the normal-gamma linear regression.

    Model: ``y_i ~ N(z_i' beta, 1/tau)``, ``beta | tau ~ N(m, P^{-1} / tau)``,
    ``tau ~ Gamma(a, rate b)``. With ``P_n = P + Z'Z`` and ``m_n = P_n^{-1} (P m + Z'y)``::

        tau | data ~ Gamma(a + n/2, rate b + (y'y + m'Pm - m_n' P_n m_n) / 2)
        beta | tau, data ~ N(m_n, P_n^{-1} / tau)

    Defaults: ``m = 0``, ``P = I``.
    """
    z = _float_array(design)
    y = _float_array(response)
    p = z.shape[1]
    m = np.zeros(p) if prior_mean is None else _float_array(prior_mean)
    precision = np.eye(p) if prior_precision is None else _float_array(prior_precision)
    posterior_precision, mean, rate = _kernels.normal_gamma_posterior(z, y, m, precision, float(b))
    tau = rng.gamma(a + 0.5 * y.shape[0], 1.0 / rate)
    beta = _mvnormal_precision(rng, mean, tau * posterior_precision)
    return beta, float(tau)


def normal_mean(
    rng: np.random.Generator,
    x: np.ndarray,
    precision: np.ndarray,
    prior_mean=None,
    prior_precision=None,
) -> np.ndarray:
    """``mu`` from its conditional: ``x_i ~ N(mu, Phi^{-1})`` (``Phi`` known), ``mu ~ N(m, P^{-1})``.

    ``mu | x ~ N(P_n^{-1} (P m + Phi sum x_i), P_n^{-1})`` with ``P_n = P + n Phi``. ``x`` is
    ``(n, p)``; defaults ``m = 0``, ``P = I``.
    """
    x = _float_array(x)
    phi = np.atleast_2d(_float_array(precision))
    p = phi.shape[0]
    m = np.zeros(p) if prior_mean is None else _float_array(prior_mean)
    prior = np.eye(p) if prior_precision is None else _float_array(prior_precision)
    posterior_precision, mean = _kernels.normal_mean_posterior(x, phi, m, prior)
    return _mvnormal_precision(rng, mean, posterior_precision)


def wishart_precision(
    rng: np.random.Generator, x: np.ndarray, mean: np.ndarray, nu: float, scale=None
) -> np.ndarray:
    """``Phi`` from its conditional: ``x_i ~ N(mu, Phi^{-1})``, ``Phi ~ Wishart(nu, V)``.

    ``Phi | x, mu ~ Wishart(nu + n, (V^{-1} + S)^{-1})`` with ``S = sum_i (x_i - mu)(x_i - mu)'``
    (Bartlett decomposition). Default ``V = I``.
    """
    x = _float_array(x)
    p = x.shape[1]
    v_inv = np.eye(p) if scale is None else np.linalg.inv(_float_array(scale))
    mean = _float_array(np.broadcast_to(mean, (p,)))
    chol = _kernels.wishart_scale_factor(x, mean, v_inv)
    df = nu + x.shape[0]
    a = np.zeros((p, p))
    for i in range(p):
        a[i, i] = math.sqrt(rng.chisquare(df - i))
        a[i, :i] = rng.standard_normal(i)
    return _kernels.lower_outer(chol, a)


def bartlett_factors(phi: np.ndarray, scale=None) -> tuple[np.ndarray, np.ndarray]:
    """The Bartlett pieces of ``Phi = L A A' L'`` (``L = chol(V)``, default ``V = I``).

    Returns ``(c, z)``: ``c`` the squared diagonal of ``A`` (``c_i ~ chi2(nu - i)``) and ``z`` its
    strictly lower triangle, row by row (``N(0, 1)``), i.e. what a model writing ``Phi`` through
    its Bartlett decomposition samples.
    """
    phi = _float_array(phi)
    if scale is not None:
        l_inv = np.linalg.inv(np.linalg.cholesky(_float_array(scale)))
        phi = _float_array(l_inv @ phi @ l_inv.T)
    return _kernels.bartlett_pieces(phi)


def _dirichlet_log_target(u, log_sum, n, a, b) -> float:
    """Log conditional density of ``u = log alpha`` (Jacobian included), up to a constant."""
    alpha = np.exp(u)
    return float(
        n * (special.gammaln(alpha.sum()) - special.gammaln(alpha).sum())
        + (alpha - 1.0) @ log_sum
        + a * u.sum()
        - b * alpha.sum()
    )


def _dirichlet_gradient_hessian(u, log_sum, n, a, b):
    alpha = np.exp(u)
    total = alpha.sum()
    inner = n * (special.digamma(total) - special.digamma(alpha)) + log_sum - b
    gradient = alpha * inner + a
    # trigamma(x) = zeta(2, x); the ufunc is several times cheaper than special.polygamma
    hessian = n * special.zeta(2.0, total) * np.outer(alpha, alpha) + np.diag(
        alpha * inner - n * alpha**2 * special.zeta(2.0, alpha)
    )
    return gradient, hessian


def _ascent_step(gradient, hessian) -> np.ndarray:
    """Newton's step ``u -> u - step`` where it ascends, else a gradient step of at most 1 per
    coordinate (where the Hessian is singular or not negative definite)."""
    try:
        step = np.linalg.solve(hessian, gradient)
        if gradient @ step <= 0:
            return step
    except np.linalg.LinAlgError:
        pass
    return -gradient / max(1.0, float(np.abs(gradient).max()))


def _dirichlet_mode(u, log_sum, n, a, b, tolerance=1e-10, max_iterations=200):
    """Mode of the log-alpha conditional by damped Newton, and the Hessian there."""
    value = _dirichlet_log_target(u, log_sum, n, a, b)
    for _ in range(max_iterations):
        step = _ascent_step(*_dirichlet_gradient_hessian(u, log_sum, n, a, b))
        while True:
            candidate = u - step
            # a long step can overflow exp(u): the value is then not finite and the step is halved
            with np.errstate(over="ignore", invalid="ignore"):
                new_value = _dirichlet_log_target(candidate, log_sum, n, a, b)
            if new_value >= value - 1e-12 or np.abs(step).max() < 1e-14:
                break
            step = step / 2.0
        u, value = candidate, new_value
        if np.abs(step).max() < tolerance:
            break
    return u, _dirichlet_gradient_hessian(u, log_sum, n, a, b)[1]


def dirichlet_concentration(
    rng: np.random.Generator,
    alpha,
    log_sum,
    n: int,
    prior_shape: float = 1.0,
    prior_rate: float = 1.0,
    df: float = 8.0,
) -> np.ndarray:
    r"""One exact MCMC update of Dirichlet concentrations given records (not a closed form).

    Conditional: ``p(alpha | x) ∝ prod_j Gamma(alpha_j; a, rate b) * prod_i Dir(x_i; alpha)``,
    which depends on the records only through ``n`` and ``log_sum = sum_i log x_i``. In
    ``u = log alpha`` it is close to normal for large ``n``: the step proposes from a multivariate
    t (``df`` degrees of freedom) centred at the mode with the inverse negative Hessian as scale
    (both functions of ``(log_sum, n)`` only, found by Newton's method) and accepts with the
    independence Metropolis-Hastings ratio. Returns the new ``alpha`` (the current one if
    rejected).
    """
    alpha = np.asarray(alpha, dtype=float)
    log_sum = np.asarray(log_sum, dtype=float)
    u = np.log(alpha)
    mode, hessian = _dirichlet_mode(u.copy(), log_sum, float(n), prior_shape, prior_rate)
    chol = np.linalg.cholesky(-hessian)
    d = mode.shape[0]

    def log_proposal(v):
        z = chol.T @ (v - mode)
        return -0.5 * (df + d) * math.log1p(float(z @ z) / df)

    scale = math.sqrt(df / rng.chisquare(df))
    proposal = mode + scale * np.linalg.solve(chol.T, rng.standard_normal(d))
    log_ratio = (
        _dirichlet_log_target(proposal, log_sum, n, prior_shape, prior_rate)
        - _dirichlet_log_target(u, log_sum, n, prior_shape, prior_rate)
        + log_proposal(u)
        - log_proposal(proposal)
    )
    return np.exp(proposal) if math.log(rng.random()) < log_ratio else alpha
