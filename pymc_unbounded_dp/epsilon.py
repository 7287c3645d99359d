r"""Choosing epsilon before a release: the attacker's risk and the analyst's posterior, per budget.

:func:`choose_epsilon` takes the curator's confidential records, a :class:`~pymc_unbounded_dp.
release.Plan` used as a template, the analyst's model and a grid of total budgets. For each budget
it

* builds the plan at that budget (the same statistics, neighbouring relation and split: the
  template's shares, normalised) and computes the **membership risk** of one target record exactly
  (:func:`pymc_unbounded_dp.risk.membership_risk`: the Bayes risk of the best attacker who knows
  every other record, the trivial attacker's risk, the advantage, the posterior odds bound and the
  ``e^epsilon`` bound of the guarantee);
* simulates ``replicates`` releases of the records under that plan (**seeded NumPy noise**,
  :meth:`Mechanism.simulate <pymc_unbounded_dp.Mechanism.simulate>`: a simulation study, not
  releases to publish), fits each with the analyst's model (:func:`pymc_unbounded_dp.sample`, on
  the sums level where the model has an exact law of its sums) and averages the **utility**: each
  parameter's posterior sd, 95% interval width, the coverage of the value the confidential data
  give, and the posterior of ``n`` when it is latent, each with its Monte Carlo standard error.

The result is an :class:`EpsilonReport`: a table (one row per budget), the risk-utility frontier,
a recommendation and a self-contained HTML page. See ``docs/choosing_epsilon.md``.

Examples
--------
>>> import numpy as np, pymc as pm
>>> import pymc_unbounded_dp as pmdp
>>> from pymc_unbounded_dp import release as rl
>>> plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
>>> def model(release):
...     with pm.Model() as m:
...         theta = pm.Beta("theta", 1, 1)
...         x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=release.sample_size("n"))
...         release.privatized_sum("s", x)
...     return m
>>> records = {"s": np.random.default_rng(1).binomial(1, 0.3, size=300)}
>>> report = pmdp.choose_epsilon(records, plan, model, [0.5, 2.0], params=["theta"],
...                              replicates=2, random_seed=1)  # doctest: +SKIP
>>> report.recommend(target_width=0.15)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import replace as replace_fields

import numpy as np
import pandas as pd

import pymc_unbounded_dp.release as rl
from pymc_unbounded_dp._checks import check_integer, is_real
from pymc_unbounded_dp._epsilon_report import EpsilonReport, Recommendation, check_widths
from pymc_unbounded_dp._pymc_bridge import PYMC_LOGGERS

# Users import these from here (pickles and the API pages name this module as their home).
EpsilonReport.__module__ = Recommendation.__module__ = __name__

__all__ = [
    "REFERENCE_FACTOR",
    "EpsilonReport",
    "Recommendation",
    "choose_epsilon",
    "simulate_release",
]

#: The reference fit (the value "the confidential data give") uses noise scales this many times
#: smaller than at the largest budget of the grid: ``epsilon * 10`` or ``rho * 10**2``. Not
#: smaller: with the released sums pinned by tiny noise, the records level's moves barely mix
#: (the regression example at ``epsilon = 1000`` gave a posterior of ``tau`` 0.60 +- 0.03
#: instead of 1.06 +- 0.05).
REFERENCE_FACTOR = 10.0
#: Probability of the reported intervals.
PROB = 0.95
#: What the simulated releases say in their ``sampler`` field.
SIMULATED = "simulated: seeded NumPy draws (pmdp.choose_epsilon), not for publishing"
#: The risk figures of :func:`pymc_unbounded_dp.risk.membership_risk`, in the table's order.
RISK_FIELDS = (
    "risk",
    "trivial_risk",
    "advantage",
    "posterior_odds_bound",
    "epsilon_bound",
    "lower",
    "upper",
)
#: Their columns in :attr:`EpsilonReport.table`.
RISK_COLUMNS = (
    "membership_risk",
    "trivial_risk",
    "advantage",
    "posterior_odds_bound",
    "epsilon_bound",
    "membership_risk_lower",
    "membership_risk_upper",
)


# -- simulated releases --------------------------------------------------------------------------
def simulate_release(plan: rl.Plan, sums: Mapping, n: int, random_seed=None) -> rl.Release:
    """A release of the exact ``sums`` of ``n`` clamped records under ``plan``, with **simulated**
    noise (seeded NumPy, :meth:`Mechanism.simulate <pymc_unbounded_dp.Mechanism.simulate>`).

    For simulation studies only: :meth:`Plan.release <pymc_unbounded_dp.release.Plan.release>`
    draws the exact, secure noise a publication needs. Each noisy value's ``sampler`` field says
    the noise was simulated. The values take independent streams of ``random_seed``, in the
    plan's order of statistics.

    Examples
    --------
    >>> from pymc_unbounded_dp import release as rl
    >>> from pymc_unbounded_dp.epsilon import simulate_release
    >>> plan = rl.Plan([rl.Statistic("s", 0, 1, integer=True), rl.Count("n")], epsilon=1.0)
    >>> rel = simulate_release(plan, {"s": 30}, 100, random_seed=1)
    >>> sorted(rel), rel["s"].sampler.startswith("simulated")
    (['n', 's'], True)
    """
    streams = np.random.SeedSequence(_entropy(random_seed)).spawn(len(plan.statistics))
    noisy = {}
    for (name, stat), stream in zip(plan.statistics.items(), streams, strict=True):
        exact = np.asarray(n if stat.kind == "count" else sums[name])
        mechanism = plan.mechanisms[name]
        if mechanism is None:
            noisy[name] = exact, "exact (public)"
        else:
            noise = mechanism.simulate(exact.shape or None, rng=np.random.default_rng(stream))
            noisy[name] = exact + np.asarray(noise).reshape(exact.shape), SIMULATED
    return plan._release_of(noisy)


def _entropy(seed) -> int | None:
    """``seed`` (an int, None, a ``SeedSequence`` or a ``Generator``) as ``SeedSequence``'s
    entropy."""
    if isinstance(seed, np.random.SeedSequence):
        return int(seed.generate_state(1, np.uint64)[0])
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ValueError(
            f"`random_seed` must be an integer, None, a SeedSequence or a Generator, got {seed!r}."
        )
    return seed


def _plan_at(template: rl.Plan, budget: float) -> rl.Plan:
    """``template`` with total budget ``budget``, split in the template's proportions."""
    total = math.fsum(template.shares.values())
    return rl.Plan(
        list(template.statistics.values()),
        neighbouring=template.neighbouring,
        **{template.measure: budget},
        weights={k: v / total for k, v in template.shares.items()},
    )


# -- one fit (runs in-process or on a Dask worker) ----------------------------------------------
@dataclass(frozen=True)
class _Task:
    model: Callable
    plan: rl.Plan
    sums: dict
    n: int
    params: tuple[str, ...]
    count: str | None
    noise_seed: int
    chain_seed: int
    draws: int
    tune: int
    chains: int
    augment: str


def _labels(name: str, shape: tuple[int, ...]) -> list[tuple[str, tuple]]:
    """ArviZ's labels of a variable's elements: ``theta``, ``beta[0]``, ``Phi[0, 1]``."""
    if not shape:
        return [(name, ())]
    return [(f"{name}[{', '.join(map(str, i))}]", i) for i in np.ndindex(*shape)]


def _run(task: _Task) -> dict:
    """Simulate one release, fit it, and summarise the posterior (a small, picklable dict)."""
    from pymc_unbounded_dp.sampling import _group, sample

    release = simulate_release(task.plan, task.sums, task.n, task.noise_seed)
    model = task.model(release)
    start = time.perf_counter()
    quiet = [logging.getLogger(name) for name in PYMC_LOGGERS]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.WARNING)
    try:
        with model:
            idata = sample(
                draws=task.draws,
                tune=task.tune,
                chains=task.chains,
                cores=1,
                random_seed=task.chain_seed,
                augment=task.augment,
                progressbar=False,
                compute_convergence_checks=False,
            )
    finally:
        for logger, level in zip(quiet, levels, strict=True):
            logger.setLevel(level)
    posterior = _group(idata, "posterior")
    summary = {}
    tail = (1 - PROB) / 2
    for name in task.params:
        draws = posterior[name].values
        draws = draws.reshape(-1, *draws.shape[2:])
        for label, index in _labels(name, draws.shape[1:]):
            values = draws[(slice(None), *index)].astype(float)
            lower, upper = np.quantile(values, [tail, 1 - tail])
            summary[label] = (values.mean(), values.std(ddof=1), lower, upper)
    n_posterior = None
    if task.count is not None and task.count in posterior:
        values = posterior[task.count].values.astype(float).ravel()
        n_posterior = (values.mean(), values.std(ddof=1))
    return {
        "summary": summary,
        "n": n_posterior,
        "augment": posterior.attrs.get("pmdp_augment", task.augment),
        "seconds": time.perf_counter() - start,
    }


# -- the driver ----------------------------------------------------------------------------------
def choose_epsilon(
    records: Mapping,
    plan: rl.Plan,
    model: Callable,
    epsilons: Sequence[float],
    *,
    params: str | Sequence[str],
    replicates: int = 10,
    record: Mapping | None = None,
    replacement: Mapping | None = None,
    target_width: float | Mapping[str, float] | None = None,
    max_membership_advantage: float | None = None,
    prior: float = 0.5,
    truth: Mapping | None = None,
    random_seed=None,
    client=None,
    draws: int = 500,
    tune: int = 500,
    chains: int = 1,
    augment: str = "auto",
) -> EpsilonReport:
    """The membership risk and the analyst's expected posterior at each budget of a grid.

    Parameters
    ----------
    records : dict
        The confidential records, ``{name: rows}`` as :meth:`Plan.release
        <pymc_unbounded_dp.release.Plan.release>` takes them (a pilot or synthetic stand-in works
        the same way). They are clamped and summed once; only the sums enter the simulations.
    plan : pymc_unbounded_dp.release.Plan
        The template: its statistics, neighbouring relation and split (its ``shares``,
        normalised) are kept and its total budget is replaced by each grid value. A ``rho`` plan
        takes a grid of ``rho`` values.
    model : callable
        ``model(release) -> pm.Model``, the analyst's model of a
        :class:`~pymc_unbounded_dp.release.Release` (built with ``release.privatized_sum`` and
        ``release.sample_size``).
    epsilons : sequence of float
        The grid of total budgets (``epsilon``, or ``rho`` for a rho plan): positive, strictly
        increasing, non-empty.
    params : str or sequence of str
        Model variables whose posterior is summarised (free or deterministic); a vector gives one
        row of figures per element (``beta[0]``, ...).
    replicates : int, default 10
        Simulated releases (each fitted once) per budget.
    record : dict, optional
        The target of the membership risk, ``{statistic: one record's value}`` for each summed
        statistic, within the declared bounds. Default: the worst case, each coordinate at the
        bound of largest magnitude.
    replacement : dict, optional
        A replace-one plan only: the record that replaces the target when it is not in the data
        (like ``record``). Default: each coordinate at the bound farther from the target's.
    target_width, max_membership_advantage : optional
        Defaults of :meth:`EpsilonReport.recommend`: the widest acceptable expected 95% interval
        (one number, or ``{label: width}``), and the largest acceptable membership advantage.
    prior : float, default 0.5
        The attacker's prior probability that the target is in the data, in ``(0, 1)``.
    truth : dict, optional
        The values the coverage is of, ``{param or label: value}``. Default: the value the
        confidential data give, approximated by the posterior mean of one fit to a release of
        the same records with noise scales :data:`REFERENCE_FACTOR` (10) times smaller than at
        the largest budget: its own noise is small beside the intervals of every budget of the
        grid, and the sampler still mixes (with much less noise the released sums pin the
        records and the records level's moves barely move).
    random_seed : int, optional
        Seeds every release and chain: fit ``r`` at budget ``b`` uses the streams of
        ``SeedSequence(random_seed, spawn_key=(round(b * 1e6), r))`` (noise, then chain), so the
        table is the same whichever process runs which fit, and a budget's fits do not change
        when the grid grows. ``report.fits`` lists each fit's seeds.
    client : distributed.Client, optional
        Run the fits as Dask tasks on this client (e.g. ``examples.study.running.study_client``);
        default: one after the other in this process.
    draws, tune, chains : int
        Per fit, as in :func:`pymc_unbounded_dp.sample`.
    augment : {"auto", "records", "sums"}
        The augmentation level of the fits (:func:`pymc_unbounded_dp.sample`): ``"auto"`` is the
        sums level where every table's sums have an exact law.

    Returns
    -------
    EpsilonReport
        ``.table``, one row per budget (index ``epsilon`` or ``rho``):

        * ``epsilon[name]`` (``rho[name]``): each noisy value's share of the budget;
        * ``membership_risk``, ``trivial_risk``, ``advantage``, ``posterior_odds_bound``,
          ``epsilon_bound``: :func:`pymc_unbounded_dp.risk.membership_risk` of ``record``
          (exact, no Monte Carlo);
        * for each label, ``sd(label)``, ``width(label)`` (95% equal-tailed interval),
          ``coverage(label)`` (fraction of the replicates whose interval holds the reference
          value), each with its Monte Carlo standard error ``sd_se(label)``, ... (over the
          replicates; it includes each fit's MCMC error);
        * ``mean(n)``, ``sd(n)`` and their ``_se``: the posterior of a latent ``n``.

    Raises
    ------
    ValueError
        For an empty, unsorted or non-positive ``epsilons``; a ``record`` outside the plan's
        bounds; a ``prior`` outside ``(0, 1)``; a name in ``params`` that the model lacks; and
        other bad arguments (the message names the argument).
    """
    owner = "choose_epsilon"
    if not isinstance(plan, rl.Plan):
        raise TypeError(f"{owner}: `plan` must be a pymc_unbounded_dp.release.Plan, got {plan!r}.")
    if not callable(model):
        raise TypeError(f"{owner}: `model` must be a callable model(release) -> pm.Model.")
    grid = _grid(epsilons, plan.measure, owner)
    params = _names(params, owner)
    _check_options(replicates, draws, tune, chains, prior, augment, max_membership_advantage)
    target, other = _targets(plan, record, replacement, owner)
    summed = {k: s for k, s in plan.statistics.items() if s.kind == "sum"}
    sums, n = rl._sum_records(records, summed, owner)
    count = next(
        (k for k, s in plan.statistics.items() if s.kind == "count" and plan.mechanisms[k]), None
    )
    root = np.random.SeedSequence(_entropy(random_seed))
    template = _Task(model, plan, sums, n, params, count, 0, 0, draws, tune, chains, augment)

    def task(budget_plan, key) -> _Task:
        noise, chain = np.random.SeedSequence(root.entropy, spawn_key=key).spawn(2)
        return replace_fields(
            template, plan=budget_plan, noise_seed=_int(noise), chain_seed=_int(chain)
        )

    plans = {b: _plan_at(plan, b) for b in grid}
    reference = task(_plan_at(plan, _reference_budget(plan, grid[-1])), (2**63 - 1,))
    built = model(simulate_release(reference.plan, sums, n, reference.noise_seed))
    shapes = _check_params(built, params, owner)
    labels = [label for name in params for label, _ in _labels(name, shapes[name])]
    if target_width is not None:
        check_widths(target_width, labels, owner)
    reference_values = None if truth is None else _truth(truth, params, shapes, owner)
    risks = {b: _membership(plans[b], target, other, prior) for b in grid}
    notes = _notes(plan, risks, other is not None, prior, replicates, chains, draws, tune)
    runs = [reference] if truth is None else []
    keys = [(b, r) for b in grid for r in range(replicates)]
    runs += [task(plans[b], (_code(b), r)) for b, r in keys]
    results = _execute(runs, client)
    if truth is None:
        summary = results.pop(0)["summary"]
        reference_values = {label: summary[label][0] for label in labels}
    notes.append(_coverage_note(reference_values if truth is None else None, plan, grid[-1]))
    risks = {b: figures for b, (figures, _) in risks.items()}
    fits = _fits_frame(keys, runs[-len(keys) :], results, labels, reference_values, plan.measure)
    table = _table(grid, plans, risks, fits, results, keys, labels, count, plan.measure)
    return EpsilonReport(
        table,
        labels,
        measure=plan.measure,
        target_width=target_width,
        max_membership_advantage=max_membership_advantage,
        fits=fits,
        notes=notes,
    )


def _reference_budget(plan: rl.Plan, largest: float) -> float:
    """The budget whose noise scales are :data:`REFERENCE_FACTOR` times smaller than at
    ``largest`` (scales go as ``1 / epsilon`` and as ``1 / sqrt(rho)``)."""
    return largest * REFERENCE_FACTOR ** (2 if plan.measure == "rho" else 1)


def _coverage_note(reference: dict | None, plan: rl.Plan, largest: float) -> str:
    """What the coverage is of: the ``reference`` fit's means, or (``None``) the given truth."""
    if reference is None:
        return "Coverage is of the values given as `truth`."
    return (
        "Coverage is of the value the confidential data give: the posterior mean of a fit "
        f"to a release of the same records with noise scales {REFERENCE_FACTOR:g} times "
        f"smaller than at {plan.measure} = {largest:g}: "
        + ", ".join(f"{k} = {v:.4g}" for k, v in reference.items())
        + "."
    )


def _notes(
    plan: rl.Plan, risks: dict, replace: bool, prior, replicates, chains, draws, tune
) -> list[str]:
    """The sentences of the report's page on how its figures were made (the coverage's is
    added once the reference is known)."""
    alternative = (
        "whether the data hold the target's record or the replacement record"
        if replace
        else "whether the target is in the data"
    )
    first = next(iter(risks.values()))[1]
    methods = " and ".join(sorted({figures["risk_method"] for figures, _ in risks.values()}))
    return [
        f"Each row is one total {plan.measure} of the plan, split as the template "
        f"({', '.join(f'{k}: {v:.3g}' for k, v in _fractions(plan).items())}) under "
        f"{plan.neighbouring} neighbours.",
        "Risk: the Bayes risk (0-1 loss) of the best attacker who knows every other record and "
        f"the target's value and sees the whole release, deciding {alternative} (prior "
        f"{prior:g}; {first}), computed by pmdp.risk.membership_risk without "
        f"simulation, by {methods} "
        "('exact': closed forms and exact sums; 'quadrature': a lattice or grid, with rigorous "
        "bounds in the columns membership_risk_lower and membership_risk_upper); the advantage "
        "is its gain over the trivial attacker, who only guesses from the prior.",
        f"Utility: {replicates} simulated releases per row (seeded NumPy noise: a simulation "
        "study, not releases to publish), each fitted with the analyst's model "
        f"({chains} chain(s) x {draws} draws after {tune} tuning); each figure is a mean over "
        "the replicates with its Monte Carlo standard error.",
    ]


def _execute(tasks: list[_Task], client) -> list[dict]:
    if client is None:
        return [_run(t) for t in tasks]
    futures = client.map(_run, tasks, pure=False)
    return client.gather(futures)


def _membership(plan: rl.Plan, record: dict, replacement, prior: float) -> tuple[dict, str]:
    """The risk figures of ``record`` under ``plan`` (:func:`pymc_unbounded_dp.risk.
    membership_risk`, imported here) and how they were computed."""
    import pymc_unbounded_dp.risk as risk

    options = {} if replacement is None else {"replacement": replacement}
    result = risk.membership_risk(plan, record, prior, **options)
    figures = {
        column: float(getattr(result, field))
        for column, field in zip(RISK_COLUMNS, RISK_FIELDS, strict=True)
    }
    figures["risk_method"] = str(result.method)
    return figures, f"{result.neighbouring} neighbours"


def _fits_frame(keys, tasks, results, labels, reference, measure) -> pd.DataFrame:
    rows = []
    for (budget, replicate), task, result in zip(keys, tasks, results, strict=True):
        for label in labels:
            mean, sd, lower, upper = result["summary"][label]
            rows.append(
                {
                    measure: budget,
                    "replicate": replicate,
                    "label": label,
                    "mean": mean,
                    "sd": sd,
                    "lower": lower,
                    "upper": upper,
                    "width": upper - lower,
                    "covered": bool(lower <= reference[label] <= upper),
                    "noise_seed": task.noise_seed,
                    "chain_seed": task.chain_seed,
                    "augment": result["augment"],
                    "seconds": result["seconds"],
                }
            )
    return pd.DataFrame(rows)


def _table(grid, plans, risks, fits, results, keys, labels, count, measure) -> pd.DataFrame:
    rows = []
    n_results = results[-len(keys) :]
    for budget in grid:
        row = {f"{measure}[{k}]": v for k, v in plans[budget].shares.items()}
        row.update(risks[budget])
        for label in labels:
            row.update(_utility(fits[(fits[measure] == budget) & (fits["label"] == label)], label))
        posteriors = [r["n"] for k, r in zip(keys, n_results, strict=True) if k[0] == budget]
        if count is not None and all(p is not None for p in posteriors):
            for i, figure in enumerate(("mean", "sd")):
                values = pd.Series([p[i] for p in posteriors])
                row[f"{figure}({count})"], row[f"{figure}_se({count})"] = _mean_se(values)
        rows.append(row)
    return pd.DataFrame(rows, index=pd.Index(grid, name=measure))


def _utility(part: pd.DataFrame, label: str) -> dict[str, float]:
    """One parameter's utility over the replicate fits ``part`` of one budget: the mean posterior
    sd and interval width with their standard errors, and the coverage with its binomial
    standard error."""
    row = {}
    for figure in ("sd", "width"):
        row[f"{figure}({label})"], row[f"{figure}_se({label})"] = _mean_se(part[figure])
    p = float(part["covered"].mean())
    row[f"coverage({label})"] = p
    row[f"coverage_se({label})"] = math.sqrt(p * (1 - p) / len(part))
    return row


def _mean_se(values: pd.Series) -> tuple[float, float]:
    values = values.to_numpy(dtype=float)
    se = values.std(ddof=1) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return float(values.mean()), float(se)


# -- argument checks -----------------------------------------------------------------------------
def _grid(epsilons, measure: str, owner: str) -> list[float]:
    label = f"`epsilons` (a grid of {measure} values)"
    if isinstance(epsilons, str | bytes) or not isinstance(epsilons, Sequence | np.ndarray):
        raise ValueError(f"{owner}: {label} must be a sorted list of numbers, got {epsilons!r}.")
    grid = list(epsilons)
    if not grid:
        raise ValueError(f"{owner}: {label} is empty; give at least one budget.")
    for value in grid:
        if not is_real(value) or not (0 < value < math.inf):
            raise ValueError(f"{owner}: {label} must hold finite numbers > 0, got {value!r}.")
    grid = [float(v) for v in grid]
    if any(b <= a for a, b in zip(grid, grid[1:])):
        raise ValueError(
            f"{owner}: {label} must be strictly increasing (sorted, no repeats), got {grid}; "
            f"pass sorted({grid})."
        )
    return grid


def _check_options(replicates, draws, tune, chains, prior, augment, cap) -> None:
    """The counts, the attacker's ``prior``, ``augment`` and ``max_membership_advantage``."""
    owner = "choose_epsilon"
    for label, value in (("replicates", replicates), ("draws", draws), ("chains", chains)):
        check_integer(value, label, owner)
    check_integer(tune, "tune", owner, minimum=0)
    if not is_real(prior) or not 0 < prior < 1:
        raise ValueError(
            f"{owner}: `prior` (the attacker's probability that the target is in the data) must "
            f"be in (0, 1), got {prior!r}."
        )
    if augment not in ("auto", "records", "sums"):
        raise ValueError(
            f"{owner}: `augment` must be 'auto', 'records' or 'sums', got {augment!r}."
        )
    if cap is not None and (not is_real(cap) or not 0 <= cap <= 1):
        raise ValueError(
            f"{owner}: `max_membership_advantage` must be a number in [0, 1], got {cap!r}."
        )


def _targets(plan: rl.Plan, record, replacement, owner: str) -> tuple[dict, dict | None]:
    """The target record of the membership risk and, under replace-one, its replacement."""
    target = _record(record, plan, owner, "record")
    if plan.neighbouring == "replace-one":
        return target, _record(replacement, plan, owner, "replacement", opposite=target)
    if replacement is not None:
        raise ValueError(
            f"{owner}: `replacement` is for a replace-one plan; under add/remove the alternative "
            "is the target's absence."
        )
    return target, None


def _names(params, owner: str) -> tuple[str, ...]:
    names = (params,) if isinstance(params, str) else params
    if (
        not isinstance(names, Sequence)
        or not names
        or not all(isinstance(p, str) and p for p in names)
    ):
        raise ValueError(
            f"{owner}: `params` must be a parameter name or a non-empty list of names, got "
            f"{params!r}."
        )
    return tuple(names)


def _record(record, plan: rl.Plan, owner: str, label: str, opposite=None) -> dict:
    """A record checked against the declared bounds. Default: the worst case, each coordinate at
    the bound of largest magnitude, or (``opposite``, a replacement) at the bound farther from
    ``opposite``'s value."""
    summed = {k: s for k, s in plan.statistics.items() if s.kind == "sum"}
    if record is None and opposite is None:
        return {
            k: np.where(np.abs(s.upper) >= np.abs(s.lower), s.upper, s.lower)
            for k, s in summed.items()
        }
    if record is None:
        return {
            k: np.where(opposite[k] - s.lower >= s.upper - opposite[k], s.lower, s.upper)
            for k, s in summed.items()
        }
    from pymc_unbounded_dp.risk._membership import checked_record

    checked = checked_record(plan, record, owner, label)
    return {
        k: v.astype(summed[k].lower.dtype) if summed[k].integer else v for k, v in checked.items()
    }


def _check_params(model, params, owner: str) -> dict[str, tuple[int, ...]]:
    """Each parameter's shape in ``model``; a missing name is a ValueError naming ``params``."""
    names = [v.name for v in (*model.free_RVs, *model.deterministics)]
    missing = [p for p in params if p not in names]
    if missing:
        raise ValueError(
            f"{owner}: `params` names {missing}, not a parameter of the model; its parameters "
            f"are {names}."
        )
    return {name: tuple(int(d) for d in model[name].shape.eval()) for name in params}


def _truth(truth, params, shapes, owner: str) -> dict[str, float]:
    if not isinstance(truth, Mapping):
        raise ValueError(f"{owner}: `truth` must be a dict {{param: value}}, got {truth!r}.")
    out = {}
    for name in params:
        labels = _labels(name, shapes[name])
        if name in truth:
            value = np.asarray(truth[name], dtype=float)
            if value.shape != shapes[name]:
                raise ValueError(
                    f"{owner}: `truth[{name!r}]` has shape {value.shape}, the parameter's is "
                    f"{shapes[name]}."
                )
            out.update({label: float(value[index]) for label, index in labels})
        elif all(label in truth for label, _ in labels):
            out.update({label: float(truth[label]) for label, _ in labels})
        else:
            raise ValueError(f"{owner}: `truth` has no value of {name!r}.")
    return out


def _fractions(plan: rl.Plan) -> dict[str, float]:
    total = math.fsum(plan.shares.values())
    return {k: v / total for k, v in plan.shares.items()}


def _code(budget: float) -> int:
    return round(budget * 1_000_000)


def _int(sequence: np.random.SeedSequence) -> int:
    return int(sequence.generate_state(1)[0])
