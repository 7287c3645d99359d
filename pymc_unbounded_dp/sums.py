"""The sums level (``augment="sums"``): a table's latent state is its true sums and ``n``, not its
records (DESIGN move 6, the census-scale augmentation).

* :func:`table_law` finds the exact law of a table's sums in the model graph (see
  :mod:`pymc_unbounded_dp.laws`) or says why there is none;
* :func:`resolve_augment` turns ``augment="records" | "sums" | "auto"`` into the level a model is
  sampled at, with a clear refusal where a level cannot be used;
* :class:`SumsStep` is the PyMC adapter of :mod:`pymc_unbounded_dp.kernels.sums`: it owns the
  latent ``n`` (unbounded DP), keeps each table's latent sum in a shared container that the
  parameter steps' target reads (``log p_n(L | theta)`` in place of the records' log-density,
  :func:`parameter_terms`), and reports the true totals as draws.

Nothing here materialises a record: memory and cost per iteration do not depend on ``n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.scalar as ps
import pytensor.tensor as pt
from pymc.distributions.discrete import DiscreteUniformRV
from pymc.logprob.utils import replace_rvs_by_values
from pymc.pytensorf import compile as compile_pymc
from pytensor.graph.replace import clone_replace, graph_replace
from pytensor.tensor.elemwise import Elemwise
from pytensor.tensor.random.basic import (
    BernoulliRV,
    BinomialRV,
    CategoricalRV,
    ExponentialRV,
    GammaRV,
    NegBinomialRV,
    NormalRV,
    PoissonRV,
)

import pymc_unbounded_dp.laws as laws
from pymc_unbounded_dp._compile import CompiledModel, CompiledTable, statistic_function
from pymc_unbounded_dp._graph import KERNEL_MODE, depends_on
from pymc_unbounded_dp._pymc_bridge import PackageStep
from pymc_unbounded_dp._registry import SumSpec, TableSpec
from pymc_unbounded_dp.blocks import MAX_RECORDS, check_releases
from pymc_unbounded_dp.kernels import sums as sums_kernel
from pymc_unbounded_dp.moments import (
    integration_error,
    moment_function,
    record_moments,
    varying_coordinates,
)

__all__ = [
    "AUGMENT_LEVELS",
    "Accuracy",
    "SumsStep",
    "TableLaw",
    "approximation_accuracy",
    "resolve_augment",
    "table_law",
]

#: The attribute that marks a posterior variable as a release's true total at the sums level.
LATENT_SUM_ROLE = "pmdp_latent_sum"

#: The values of ``augment``.
AUGMENT_LEVELS = ("records", "sums", "auto")

#: The most support points of a finite-support record whose counts are the latent sum.
MAX_SUPPORT = 1024

#: Moves of each table's latent sum per iteration, and birth/death moves when ``n_moves`` is not
#: given.
SUMS_MOVES = 10
N_MOVES = 10

#: PyMC's stat of the model's log density (``lp`` in ``sample_stats``); the records or sums step
#: declares it when no parameter step does, and the augmentation step fills it.
MODEL_LOGP_STAT = (np.float64, [])

#: The sampler stats of the moves over ``n``, at both levels (the records step declares them too).
N_MOVE_STATS = {
    "birth_accept_rate": (np.float64, []),
    "death_accept_rate": (np.float64, []),
    "n_moves": (np.int64, []),
}

#: Gauss--Legendre points per piece of the normal approximation's moment rule (the mean is good
#: to ~1e-8 of a statistic's sd on the paper's regression: a shift of ~1e-4 posterior sd at
#: n = 1e8, see :func:`pymc_unbounded_dp.moments.integration_error`).
APPROXIMATION_NODES = 8
#: The normal approximation's floor under one record's covariance, relative to its scale.
COVARIANCE_FLOOR = 1e-10

#: The Berry--Esseen constant for sums of i.i.d. variables (Shevtsova 2011):
#: ``sup_t |P(T <= t) - Phi(t)| <= BERRY_ESSEEN * rho / (sigma^3 sqrt(n))`` for each standardised
#: total ``T``, with ``rho`` one record's third absolute central moment.
BERRY_ESSEEN = 0.4748
#: A Berry--Esseen bound above this is reported as a poor approximation (with a warning).
POOR_ACCURACY = 0.05

#: The acceptance rate the proposal scales are tuned to.
_TARGET_ACCEPT = 0.3


@dataclass(eq=False)
class TableLaw:
    """The exact law of one table's sums, compiled.

    Attributes
    ----------
    table : CompiledTable
    family : laws.Family
    matrix : numpy.ndarray
        ``(K, D)``: the table's released totals are ``latent @ matrix``.
    parameters : list
        The family's parameters as graphs of the model's value variables.
    latent : SharedVariable
        The current latent sum (``(K,)`` floats), read by :func:`parameter_terms`.
    description : str
        E.g. ``"Multinomial counts of x's 2 values (exact)"``.
    """

    table: CompiledTable
    family: laws.Family
    matrix: np.ndarray
    parameters: list
    latent: pytensor.compile.SharedVariable
    description: str
    #: The family's parameters as graphs of the model's free random variables (natural scale).
    natural_parameters: list | None = None
    #: The normal approximation under Laplace or Gaussian noise: the noise's current mixing
    #: variances, given which the parameters' target has the totals integrated out
    #: (:func:`~pymc_unbounded_dp.kernels.sums.collapsed_step`); ``None`` otherwise.
    variances: pytensor.compile.SharedVariable | None = None
    #: The moment rule's gradient costs about as much as its value (closed-form moments of one
    #: Normal record): NUTS suits the parameters. Otherwise a gradient costs tens of values.
    cheap_gradient: bool = True
    _parameter_fn: object = None
    _natural_fn: object = None

    def compile(self) -> None:
        """Compile :meth:`parameters_at`'s function (the steps call it when they are built, so
        that compilation, seconds for a moment rule, is not spent inside the sampling loop)."""
        if self._parameter_fn is None:
            model = self.table.model
            self._parameter_fn = compile_pymc(
                list(model.value_vars), self.parameters, on_unused_input="ignore", mode=KERNEL_MODE
            )
            self._parameter_fn.trust_input = True

    def parameters_at(self, point: dict) -> tuple:
        """The family's parameters at PyMC's ``point``, as NumPy values."""
        self.compile()
        values = self._parameter_fn(*self.table._inputs(point))
        return tuple(np.asarray(v, dtype=np.float64) for v in values)

    def draw_releases(self, draws: dict[str, np.ndarray], rng: np.random.Generator) -> dict:
        """Predictive draws of the table's releases at each posterior draw: the true sums of
        ``n`` fresh records drawn from their exact law, plus fresh noise.

        ``draws`` maps the model's free variables (natural scale) and the table's ``n`` to
        ``(S, ...)`` arrays of ``S`` posterior draws; returns release name -> ``(S, ...)``.
        """
        model, spec = self.table.model, self.table.spec
        if self._natural_fn is None:
            inputs = [rv.type() for rv in model.free_RVs]
            graphs = clone_replace(self.natural_parameters, dict(zip(model.free_RVs, inputs)))
            self._natural_fn = pytensor.function(inputs, graphs, on_unused_input="ignore")
            self._natural_fn.trust_input = False
        size = next(iter(draws.values())).shape[0]
        counts = (
            np.full(size, self.table.fixed_n)
            if spec.sample_size is None
            else np.asarray(draws[spec.sample_size.name]).astype(np.int64)
        )
        totals = []
        for s in range(size):
            values = [np.asarray(draws[rv.name][s], dtype=rv.dtype) for rv in model.free_RVs]
            params = tuple(np.asarray(p, dtype=np.float64) for p in self._natural_fn(*values))
            latent = (
                self.family.draw_new(rng, int(counts[s]), params)
                if counts[s] > 0
                else np.zeros(self.matrix.shape[0])
            )
            totals.append(latent @ self.matrix)
        out = {
            sum_spec.name: block + sum_spec.mechanism.simulate(block.shape, rng=rng)
            for sum_spec, block in zip(spec.sums, self._by_release(np.array(totals)).values())
        }
        if spec.sample_size is not None:
            mechanism = spec.sample_size.mechanism
            out[spec.sample_size.release_rv.name] = counts + mechanism.simulate(
                counts.shape, rng=rng
            )
        return out

    def _count(self) -> pt.TensorVariable:
        n = self.table.sample_size
        return (
            pt.cast(self.table.model.rvs_to_values[n.rv], "float64")
            if n is not None
            else pt.constant(float(self.table.fixed_n), dtype="float64")
        )

    def latent_log_density(self) -> pt.TensorVariable:
        """``log p_n(latent | theta)`` at the current latent totals, as a graph of the value
        variables (the records' term of the model's log density at the sums level)."""
        return self.family.log_density(self.latent, self._count(), self.parameters, laws.PYTENSOR)

    def log_density(self) -> pt.TensorVariable:
        """The parameter steps' term: ``log p_n(latent | theta)``, or under the collapsed normal
        approximation the releases' density with the totals integrated out given the noise's
        mixing variances."""
        if self.variances is None:
            return self.latent_log_density()
        count, model = self._count(), self.table.model
        released = pt.concatenate(
            [
                pt.cast(model.rvs_to_values[spec.release_rv], "float64").flatten()
                for spec in self.table.spec.sums
            ]
        )
        return laws.collapsed_log_likelihood(
            released, count, self.parameters, self.variances, laws.PYTENSOR
        )

    def target(self, point: dict) -> sums_kernel.SumsTarget:
        """The kernel's target at ``point``."""
        records = self.table.record_target(point)
        return sums_kernel.SumsTarget(
            released=records.released,
            noise=records.noise,
            matrix=self.matrix,
            family=self.family,
            params=self.parameters_at(point),
            n_dp=records.n_dp,
            n_noise=records.n_noise,
            log_prior_n=records.log_prior_n,
        )

    def totals(self, latent: np.ndarray) -> dict[str, np.ndarray]:
        """The true total of each released sum of the table at ``latent``, by release name."""
        return self._by_release(latent @ self.matrix)

    def _by_release(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """``(..., D)`` totals of the table's releases, concatenated in declaration order, split
        into release name -> ``(..., *shape)``."""
        out, start = {}, 0
        for spec in self.table.spec.sums:
            size = int(np.prod(spec.shape, dtype=int))
            out[spec.name] = flat[..., start : start + size].reshape(
                flat.shape[:-1] + tuple(spec.shape)
            )
            start += size
        return out


@dataclass(frozen=True)
class Accuracy:
    """How far a table's law of its sums may be from the exact one, at one point.

    Attributes
    ----------
    exact : bool
        The table's law is the exact law of its sums (the figures below are then 0).
    berry_esseen : float
        The Berry--Esseen bound on the distance between the CDF of each standardised true total
        and the normal CDF, the largest over the table's statistics.
    integration_error : float
        The moment rule's error in the mean of a true total, in its standard deviations
        (``sqrt(n)`` times the error per record of :func:`~pymc_unbounded_dp.moments
        .integration_error`).
    n : int
        The number of records at which the figures are computed.
    """

    exact: bool
    berry_esseen: float = 0.0
    integration_error: float = 0.0
    n: int = 0

    @property
    def poor(self) -> bool:
        """The bound exceeds :data:`POOR_ACCURACY`: the approximation may shift the posterior."""
        return self.berry_esseen > POOR_ACCURACY

    def describe(self) -> str:
        """One phrase, for the posterior's ``pmdp_sum_accuracy`` attribute."""
        if self.exact:
            return "exact"
        text = (
            f"normal approximation at n = {self.n}: Berry-Esseen bound {self.berry_esseen:.2g} "
            f"on each total's CDF, moment-rule error {self.integration_error:.2g} sd of a total"
        )
        if self.poor:
            text += (
                f" (poor: above {POOR_ACCURACY}; a small n, a rare category or mass piled at "
                "a clamp bound; prefer augment='records')"
            )
        return text


def approximation_accuracy(law: TableLaw, values: list, n: int) -> Accuracy:
    """The accuracy of ``law`` at the free variables' ``values`` (natural scale, one array per
    free random variable of the model) and ``n`` records.

    Examples
    --------
    >>> import pymc as pm, pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp._compile import compile_model
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=10_000)
    ...     _ = pmdp.PrivatizedSum("s", pm.math.clip(x, 0, 2),
    ...                            pmdp.Laplace(epsilon=1.0, sensitivity=2.0), observed=5000.0)
    >>> law = table_law(compile_model(model).tables[0], approximate=True)
    >>> accuracy = approximation_accuracy(law, [np.array(0.5)], 10_000)
    >>> accuracy.exact, bool(accuracy.berry_esseen < 0.01)
    (False, True)
    """
    if law.family.exact:
        return Accuracy(exact=True, n=int(n))
    compiled = law.table
    moments = record_moments(compiled, nodes=APPROXIMATION_NODES, closed_form=False)
    if isinstance(moments, str):  # pragma: no cover - the law was built from the same graph
        raise ValueError(f"table {compiled.spec.label!r}: {moments}")
    _, covariance, third = moment_function(moments)(*values)
    sd = np.sqrt(np.maximum(np.diag(covariance), 0.0))
    varying = varying_coordinates(sd)  # a constant statistic (a count of records) is exact
    ratio = third[varying] / sd[varying] ** 3
    bound = BERRY_ESSEEN * float(np.max(ratio, initial=0.0)) / math.sqrt(max(int(n), 1))
    mean_error, _ = integration_error(compiled, values, nodes=APPROXIMATION_NODES)
    return Accuracy(
        exact=False,
        berry_esseen=bound,
        integration_error=mean_error * math.sqrt(max(int(n), 1)),
        n=int(n),
    )


def _strip_casts(var):
    while (
        var.owner is not None
        and isinstance(var.owner.op, Elemwise)
        and isinstance(var.owner.op.scalar_op, ps.Cast | ps.Identity)
    ):
        var = var.owner.inputs[0]
    return var


def _at_values(model: pm.Model, graphs: list) -> list:
    free_values = {rv: model.rvs_to_values[rv] for rv in model.free_RVs}
    return replace_rvs_by_values(
        graphs, rvs_to_values=free_values, rvs_to_transforms=model.rvs_to_transforms
    )


def _constant(graph, model: pm.Model, what: str) -> float | str:
    """The value of a graph that must not depend on the model's parameters, or a reason."""
    if depends_on(graph, model.free_RVs):
        return f"its {what} depends on the model's parameters"
    return float(np.asarray(pytensor.function([], graph, mode="FAST_COMPILE")()))


def table_law(compiled: CompiledTable, approximate: bool = False) -> TableLaw | str:
    """The exact law of ``compiled``'s sums, or why it has none (a short phrase).

    With ``approximate``, a table without an exact law gets the normal approximation
    (:data:`~pymc_unbounded_dp.laws.NORMAL_APPROXIMATION`) where its record moments can be
    computed (:mod:`pymc_unbounded_dp.moments`); the reason then names both failures.
    """
    exact = _exact_law(compiled)
    if not approximate or not isinstance(exact, str):
        return exact
    approximation = _normal_approximation(compiled)
    if isinstance(approximation, str):
        return f"{exact}, and {approximation.removeprefix('its ')}"
    return approximation


def _normal_approximation(compiled: CompiledTable) -> TableLaw | str:
    """The normal approximation of ``compiled``'s sums, or why its moments cannot be computed."""
    moments = record_moments(compiled, nodes=APPROXIMATION_NODES)
    if isinstance(moments, str):
        return f"no moments of its records for the normal approximation ({moments})"
    model, spec = compiled.model, compiled.spec
    dimension = int(compiled.noise.scale.shape[0])
    covariance = moments.covariance
    # a floor under C: where the record law piles all its mass on a clamp bound (far from the
    # posterior) C is singular; the floor keeps the law proper there, adding variance
    # n * floor (~1e-10 of a statistic's variance per record) to each true total
    floor = COVARIANCE_FLOOR * (1.0 + pt.sum(pt.diagonal(covariance)) / dimension)
    covariance = covariance + floor * np.eye(dimension)
    # graph_replace, not clone_replace: the latter would clone the free variables themselves
    natural = graph_replace(
        [moments.mean, covariance], dict(zip(moments.inputs, model.free_RVs)), strict=False
    )
    names = ", ".join(repr(name) for name in spec.record_names)
    if moments.method is not None:
        how = moments.method
    elif moments.closed_form and len(spec.records) == 1:
        how = "m and C in closed form"
    else:
        inner = " and the last record in closed form" if moments.closed_form else ""
        how = f"m and C by quadrature on {moments.nodes} points{inner}"
    variances = None
    if sums_kernel.collapsible_noise(compiled.noise):
        how += "; the totals integrated out given the noise's mixing variances"
        variances = pytensor.shared(
            sums_kernel.noise_variances(compiled.noise), name=f"{spec.label}_mixing_variances"
        )
    return TableLaw(
        table=compiled,
        family=laws.NORMAL_APPROXIMATION,
        matrix=np.eye(dimension),
        parameters=_at_values(model, natural),
        latent=pytensor.shared(np.zeros(dimension), name=f"{spec.label}_latent_totals"),
        description=(
            f"normal approximation N(n m, n C) of the {dimension} totals of the records {names} "
            f"(approximate; {how})"
        ),
        natural_parameters=natural,
        variances=variances,
        cheap_gradient=moments.closed_form and len(spec.records) == 1,
    )


def _exact_law(compiled: CompiledTable) -> TableLaw | str:
    spec: TableSpec = compiled.spec
    model = compiled.model
    if len(spec.records) > 1:
        names = ", ".join(repr(r) for r in spec.record_names)
        return f"it has several record variables ({names}), whose sums have no closed-form law"
    record = spec.records[0]
    rv = record.rv
    if rv.ndim != 1:
        return f"its records {record.name!r} are not scalars"
    op = rv.owner.op
    params = _record_parameters(rv)
    if params is None:
        return f"the parameters of {record.name!r} vary across records"
    support = _finite_support(op, params, model)
    if isinstance(support, str):
        return support
    if support is not None:
        return _counts_law(compiled, rv, support)
    identity = all(_strip_casts(s.statistic) is rv for s in spec.sums)
    family_of = {
        PoissonRV: laws.POISSON,
        NegBinomialRV: laws.NEGATIVE_BINOMIAL,
        NormalRV: laws.NORMAL,
        GammaRV: laws.GAMMA,
        ExponentialRV: laws.GAMMA,
    }
    family = next((f for cls, f in family_of.items() if isinstance(op, cls)), None)
    kind = type(op).__name__.removesuffix("RV")
    if family is None:
        return f"its records {record.name!r} ({kind}) have no closed-form sum law"
    if not identity:
        return (
            f"a released statistic of its {kind} records {record.name!r} is not the record "
            "itself (a clamp, a power, ...): only the plain sum of such records has an exact law"
        )
    if isinstance(op, ExponentialRV):
        params = [pt.constant(1.0, dtype="float64"), params[0]]
    parameters = [pt.cast(p, "float64") for p in _at_values(model, params)]
    natural = [pt.cast(p, "float64") for p in params]
    dimension = int(compiled.noise.scale.shape[0])
    return TableLaw(
        table=compiled,
        family=family,
        matrix=np.ones((1, dimension)),
        parameters=parameters,
        latent=pytensor.shared(np.zeros(1), name=f"{spec.label}_latent_sum"),
        description=f"{family.name} sum of {record.name!r} (exact)",
        natural_parameters=natural,
    )


def _record_parameters(rv) -> list | None:
    """The parameters of one record of ``rv`` (its batch axes are broadcast ones: every record
    has the same law), or ``None`` if they vary across records."""
    op = rv.owner.op
    core = 1 if isinstance(op, CategoricalRV) else 0
    params = []
    for p in op.dist_params(rv.owner):
        batch = p.ndim - core
        if not all(p.type.broadcastable[:batch]):
            return None
        params.append(pt.squeeze(p, axis=tuple(range(batch))) if batch else p)
    return params


def _finite_support(op, params, model: pm.Model) -> np.ndarray | None | str:
    """The support points of a finite-support record (``None`` for other records, a string for
    a finite support that cannot be used)."""
    if isinstance(op, BernoulliRV):
        return np.arange(2)
    if isinstance(op, CategoricalRV):
        size = params[0].type.shape[-1]
        if size is None:
            return "its number of categories is not known when the model is built"
        return np.arange(int(size))
    if isinstance(op, BinomialRV | DiscreteUniformRV):
        low, high = (0.0, _constant(params[0], model, "number of trials"))
        if isinstance(op, DiscreteUniformRV):
            low, high = (_constant(p, model, "bounds") for p in params)
        for value in (low, high):
            if isinstance(value, str):
                return value
        if high - low + 1 > MAX_SUPPORT:
            return f"its support has {int(high - low + 1)} points, more than {MAX_SUPPORT}"
        return np.arange(int(low), int(high) + 1)
    return None


def _counts_law(compiled: CompiledTable, rv, support: np.ndarray) -> TableLaw:
    model, spec = compiled.model, compiled.spec
    points = pt.constant(support.astype(rv.dtype))
    single = pm.logp(
        pm.distributions.shape_utils.change_dist_size(rv, new_size=(len(support),)),
        points,
        warn_rvs=False,
    )
    # PyMC computes some log-pmfs in float32 (DiscreteUniform's, of integer bounds): normalised
    # in float64, the probabilities sum to 1 to double precision (the counts' density multiplies
    # their error by n, up to 10^8).
    single = pt.cast(single, "float64")
    single = single - pt.logsumexp(single)
    (log_p,) = _at_values(model, [single])
    matrix = np.asarray(statistic_function(spec)(support.astype(rv.dtype)), dtype=np.float64)
    name = spec.records[0].name
    return TableLaw(
        table=compiled,
        family=laws.COUNTS,
        matrix=matrix.reshape(len(support), -1),
        parameters=[log_p],
        natural_parameters=[single],
        latent=pytensor.shared(np.zeros(len(support)), name=f"{spec.label}_latent_counts"),
        description=f"Multinomial counts of the {len(support)} values of {name!r} (exact)",
    )


def _records_outside_sums(compiled: CompiledModel) -> list[str]:
    """The deterministics that read the records: the sums level, which draws no records,
    refuses them. (A density term that reads the records, a Potential, a parameter's prior or
    another observed variable, is refused at every level when the model is compiled.)"""
    records = [r.rv for r in compiled.blocks.records]
    return [v.name for v in compiled.model.deterministics if depends_on(v, records)]


def resolve_augment(
    compiled: CompiledModel, augment: str, owner: str = "pmdp.sample", keep_records=None
) -> tuple[str, list[TableLaw] | None]:
    """The level to sample ``compiled`` at, and its tables' laws at the sums level.

    ``"auto"`` is the sums level exactly when every table's sums have an exact law and no
    record is asked for (``keep_records``); otherwise the records level. ``"sums"`` uses the
    exact law where there is one and the normal approximation elsewhere (asked for, so never
    silent: each table's law is reported).

    Raises
    ------
    ValueError
        For an unknown ``augment``; for ``"sums"`` on a table without an exact law, with records
        used outside a sum, or with ``keep_records``; for the records level on a table of more
        than :data:`~pymc_unbounded_dp.blocks.MAX_RECORDS` records.
    """
    if augment not in AUGMENT_LEVELS:
        choices = ", ".join(repr(a) for a in AUGMENT_LEVELS)
        raise ValueError(f"{owner}: `augment` must be one of {choices}; got {augment!r}.")
    found = [table_law(t, approximate=augment == "sums") for t in compiled.tables]
    reasons = [
        f"table {t.spec.label!r}: {law}"
        for t, law in zip(compiled.tables, found)
        if isinstance(law, str)
    ]
    outside = _records_outside_sums(compiled)
    if augment == "sums":
        problems = list(reasons)
        if outside:
            problems.append(
                "the records are used outside a PrivatizedSum, by " + ", ".join(map(repr, outside))
            )
        if keep_records:
            problems.append("`keep_records` asks for records, which the sums level never imputes")
        if problems:
            raise ValueError(
                f"{owner}: `augment`='sums' needs a law of every table's released sums, but "
                + "; ".join(problems)
                + ". Exact laws exist for Bernoulli, Categorical, Binomial and DiscreteUniform "
                "records (any statistic) and for the plain sum of Poisson, NegativeBinomial, "
                "Normal, Gamma and Exponential records; the normal approximation covers Normal "
                "and Uniform records (location and scale varying) under any statistic, and "
                "Dirichlet records under statistics affine in their floored log-shares. Use "
                "augment='records' otherwise."
            )
    if augment == "sums" or (
        augment == "auto" and not reasons and not outside and not keep_records
    ):
        return "sums", found
    too_large = [t for t in compiled.tables if t.spec.initial_n > MAX_RECORDS]
    if too_large:
        table = too_large[0]
        why = f" ({reasons[0]})" if reasons else ""
        raise ValueError(
            f"{owner}: table {table.spec.label!r} starts with {table.spec.initial_n} records, "
            f"more than the records level holds (MAX_RECORDS = {MAX_RECORDS}), and the sums "
            f"level has no exact law for this model{why}. Sample with augment='sums', which "
            "models such a table's true sums by the normal approximation N(n m, n C) (not "
            "exact: its error shrinks like 1/sqrt(n); the posterior's attribute "
            "'pmdp_sum_laws' names each table's law), or release fewer records per table."
        )
    return "records", None


def parameter_terms(table_laws: list[TableLaw]) -> list[pt.TensorVariable]:
    """The log-densities of the tables' latent sums, which replace the records' log-density in
    the parameter steps' target at the sums level."""
    return [law.log_density() for law in table_laws]


def total_name(spec: SumSpec) -> str:
    """The name of a release's true total (the sum before noise): a stat of :class:`SumsStep`
    and, after :func:`~pymc_unbounded_dp.sample`, a posterior variable."""
    return f"{spec.name}_total"


class SumsStep(PackageStep):
    """Move every table's latent sum and ``n``: the kernel half of the sums level.

    Built by :class:`~pymc_unbounded_dp.DataAugmentation` and
    :class:`~pymc_unbounded_dp.ReversibleJump` with ``augment="sums"``.

    Parameters
    ----------
    vars : list
        The latent sample sizes' value variables (unbounded DP); any list under bounded DP (the
        step then claims none, as :class:`~pymc_unbounded_dp.steps.RecordsStep`).
    compiled : CompiledModel
    table_laws : list of TableLaw
    n_moves : int, optional
        Birth/death moves per iteration of each latent ``n`` (default :data:`N_MOVES`).
    sums_moves : int
        Moves of each latent sum per iteration.
    model_logp : bool
        Declare the ``model_logp`` stat (see :class:`~pymc_unbounded_dp.steps.RecordsStep`).
    """

    name = "dp_sums"
    stats_dtypes_shapes = {
        "tune": (bool, []),
        "sums_accept_rate": (np.float64, []),
        "sums_scale": (np.float64, []),
    }
    _unbounded_stats = {**N_MOVE_STATS, "n_scale": (np.float64, [])}

    def __init__(
        self,
        vars,
        compiled: CompiledModel,
        table_laws: list[TableLaw],
        *,
        model_logp: bool,
        n_moves: int | None = None,
        sums_moves: int = SUMS_MOVES,
        model=None,
        blocked: bool = True,
        rng=None,
    ):
        self.vars = list(vars) if compiled.unbounded else []
        self.compiled = compiled
        self.laws = list(table_laws)
        for law in self.laws:
            law.compile()
        self.n_moves = N_MOVES if n_moves is None else int(n_moves)
        self.sums_moves = int(sums_moves)
        self.tune = True
        self.rng = np.random.default_rng(rng)
        stats = {}
        if compiled.unbounded:
            stats.update(self._unbounded_stats)
        for spec in compiled.blocks.sums:
            stats[total_name(spec)] = (np.float64, []) if spec.shape == () else (object, None)
        if model_logp:
            stats["model_logp"] = MODEL_LOGP_STAT
        self._add_stats(stats)
        self._states: list[sums_kernel.SumsState] | None = None
        self._scales: list[list[float]] = []
        self._tuned = 0

    def start_chain(self, rng) -> None:
        """A new chain: its generator, and latent sums drawn afresh at its first step."""
        check_releases(self.compiled.model)
        super().start_chain(rng)
        self._states = None
        self._tuned = 0
        for law in self.laws:  # a new chain starts from the noise's own variances
            if law.variances is not None:
                law.variances.set_value(sums_kernel.noise_variances(law.table.noise))

    def _start(self, targets, point) -> None:
        self._states, self._scales = [], []
        for law, target in zip(self.laws, targets):
            n = law.table.n_at(point)
            latent = sums_kernel.starting_latent(target, n, self.rng)
            state = sums_kernel.init(target, n, latent)
            if law.variances is not None:
                state = state._replace(variances=law.variances.get_value())
            self._states.append(state)
            n_scale = 1.0 if target.n_noise is None else float(target.n_noise.scale[0])
            self._scales.append([float(np.max(target.noise.scale)), max(n_scale, 1.0)])

    def step(self, point):
        targets = [law.target(point) for law in self.laws]
        if self._states is None:
            self._start(targets, point)
        point = dict(point)
        totals = np.zeros(len(sums_kernel.SumsInfo._fields), dtype=np.int64)
        stats = {"tune": self.tune}
        for k, (law, target) in enumerate(zip(self.laws, targets)):
            sums_scale, n_scale = self._scales[k]
            params = sums_kernel.SumsParams(
                sums_scale=sums_scale,
                n_scale=n_scale,
                sums_moves=self.sums_moves,
                n_moves=self.n_moves if target.unbounded else 0,
            )
            move = sums_kernel.step if law.variances is None else sums_kernel.collapsed_step
            self._states[k], info = move(self.rng, self._states[k], target, params)
            totals += info
            if self.tune:
                self._adapt(k, info)
            state = self._states[k]
            law.latent.set_value(state.latent.copy())
            if law.variances is not None:
                law.variances.set_value(state.variances.copy())
            if law.table.n_value_name is not None:
                name = law.table.n_value_name
                point[name] = np.asarray(state.n, dtype=point[name].dtype)
            totals_by_release = law.totals(state.latent)
            for spec in law.table.spec.sums:
                total = totals_by_release[spec.name]
                stats[total_name(spec)] = float(total) if total.shape == () else total
        self._tuned += self.tune
        stats["sums_accept_rate"] = acceptance_rate(totals[0], totals[1])
        stats["sums_scale"] = self._scales[0][0]
        if self.compiled.unbounded:
            stats["birth_accept_rate"] = acceptance_rate(totals[2], totals[3])
            stats["death_accept_rate"] = acceptance_rate(totals[4], totals[5])
            stats["n_moves"] = self.n_moves * sum(t.unbounded for t in targets)
            stats["n_scale"] = self._scales[0][1]
        return point, [stats]

    def _adapt(self, k: int, info: sums_kernel.SumsInfo) -> None:
        """Tune the proposal scales towards an acceptance rate of :data:`_TARGET_ACCEPT` (during
        tuning only: the draws use a fixed kernel)."""
        gain = 1.0 / (1.0 + self._tuned) ** 0.6
        pairs = ((0, info.sums_accepted, info.sums_proposed),)
        pairs += (
            (
                1,
                info.births_accepted + info.deaths_accepted,
                info.births_proposed + info.deaths_proposed,
            ),
        )
        for index, accepted, proposed in pairs:
            if proposed:
                log_scale = (
                    math.log(self._scales[k][index])
                    + gain * (accepted / proposed - _TARGET_ACCEPT) * 2.0
                )
                self._scales[k][index] = float(np.clip(math.exp(log_scale), 1e-3, 1e12))

    def release_totals(self) -> list[np.ndarray]:
        """Each table's current true totals, flattened (for the releases' log-likelihood)."""
        return [state.latent @ law.matrix for state, law in zip(self._states, self.laws)]


def acceptance_rate(accepted: int, proposed: int) -> float:
    """``accepted / proposed``, and 0.0 when nothing was proposed (the steps' acceptance stats).

    Never NaN, so that a stat's mean over the draws is defined: an iteration that proposed
    nothing accepted nothing. The count stats (``n_moves``, ``interweave_steps``) and
    ``interweave_on`` tell such iterations apart.

    Examples
    --------
    >>> acceptance_rate(3, 4), acceptance_rate(0, 0)
    (0.75, 0.0)
    """
    return accepted / proposed if proposed else 0.0
