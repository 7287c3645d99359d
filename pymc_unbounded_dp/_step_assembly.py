"""How the augmentation step assembles the steps inside it.

:class:`~pymc_unbounded_dp.DataAugmentation` and :class:`~pymc_unbounded_dp.ReversibleJump` hold
the records step, the parameter steps and the interweaving move. This module chooses the last two:
the parameter steps PyMC would assign (:func:`parameter_steps`), built on the model's log density
without the release terms (:func:`without_release_terms`) with compile options that suit them
(:func:`~pymc_unbounded_dp._pymc_bridge.gradient_step_options`; a refit of the model reuses
their compiled targets, :func:`~pymc_unbounded_dp._pymc_bridge.instantiate_steps`), and the
interweaving move the ``interweave`` option asks for (:func:`interweave_steps`).
"""

from __future__ import annotations

import logging

import pymc as pm
from pymc.step_methods import NUTS
from pymc.step_methods.compound import BlockedStep

from pymc_unbounded_dp._compile import CompiledModel
from pymc_unbounded_dp._numba_backend import gradient_mode, records_at_start
from pymc_unbounded_dp._pymc_bridge import (
    assign_steps,
    flat_steps,
    instantiate_steps,
    logp_restricted_to,
    step_methods,
)
from pymc_unbounded_dp.conjugate import ConjugateGibbs
from pymc_unbounded_dp.dirichlet_interweave import DirichletInterweave, dirichlet_concentrations
from pymc_unbounded_dp.independence import IndependenceMetropolis
from pymc_unbounded_dp.interweave import Interweave, moving_parameters
from pymc_unbounded_dp.noncentred import describe_forms
from pymc_unbounded_dp.sums import TableLaw, parameter_terms

__all__ = [
    "check_interweave",
    "interweave_steps",
    "parameter_steps",
    "without_release_terms",
]

_log = logging.getLogger(__name__)


def check_interweave(interweave) -> None:
    if not (isinstance(interweave, bool | dict) or interweave == "auto"):
        raise TypeError(
            "`interweave` must be 'auto', True, False or a dict of Interweave options, got "
            f"{interweave!r}."
        )


def interweave_steps(
    model: pm.Model, compiled: CompiledModel, interweave: bool | dict | str
) -> list:
    """The interweaving move, if asked for and the model has continuous parameters to move.

    ``"auto"``: the non-centred move, which tuning may switch off where it does not pay, and no
    move where a record variable has no non-centred form (the full-refresh move rarely pays for
    its cost of redrawing every record). ``True``: the move forced on (the full-refresh move
    where there is no form). A dict holds keyword arguments of :class:`Interweave`.
    """
    check_interweave(interweave)
    if interweave is False or not moving_parameters(model, compiled):
        return []
    if interweave == "auto":
        dirichlet = _dirichlet_move(model, compiled)
        if dirichlet is not None:
            return [dirichlet]
        missing = [k for k, form in describe_forms(model, compiled.blocks).items() if form is None]
        if missing:
            _log.info(
                "interweave='auto': no interweaving move (record variable(s) %s have no "
                "non-centred form; interweave=True forces the full-refresh move)",
                missing,
            )
            return []
        return [Interweave(model=model)]
    if interweave is True:
        return [Interweave(model=model, switch_off=False)]
    return [Interweave(model=model, **interweave)]


def _dirichlet_move(model: pm.Model, compiled: CompiledModel) -> DirichletInterweave | None:
    """:class:`DirichletInterweave` where every record variable is a Dirichlet whose concentration
    is shared by all records (on ATUS 12x the effective draws per second of the plain chain,
    cheaper than the Gammas form and than the full-refresh move), else ``None``."""
    if dirichlet_concentrations(model, compiled) is None:
        return None
    step = DirichletInterweave(model=model)
    try:  # the concentration must be one vector for all records: checked at the start point
        step.check_shared_concentration(model.initial_point())
    except ValueError as error:
        _log.info("interweave='auto': no Dirichlet interweaving move (%s)", error)
        return None
    return step


def parameter_steps(
    model: pm.Model,
    compiled: CompiledModel,
    given,
    step_kwargs: dict | None,
    only=None,
    table_laws: list[TableLaw] | None = None,
    exclude: tuple[type, ...] = (),
) -> list[BlockedStep]:
    """The given parameter steps plus PyMC's own choice for parameters they leave out (of those
    in ``only``, value variables, if given); ``table_laws``: their target at the sums level;
    ``exclude``: step classes PyMC must not choose (the package's own registered step)."""
    given = flat_steps(given)
    n_names = set(compiled.n_value_names)
    for step in given:
        claimed = n_names & {v.name for v in step.vars}
        if claimed:
            raise ValueError(
                f"`parameter_step` {type(step).__name__} claims the sample size "
                f"{min(claimed)!r}; only the reversible-jump moves may change n."
            )
        if table_laws is not None and isinstance(step, ConjugateGibbs):
            raise ValueError(
                "`parameter_step` ConjugateGibbs updates the parameters from the imputed records, "
                "which the sums level (augment='sums') never imputes; leave the parameters to "
                "PyMC's steps (NUTS) there, or sample with augment='records'."
            )
    provided, selected = assign_steps(model, given, step_methods(excluding=exclude))
    allowed = None if only is None else {v.name for v in only}
    selected = {
        cls: [
            v for v in variables if v.name not in n_names and (allowed is None or v.name in allowed)
        ]
        for cls, variables in selected.items()
    }
    selected = {cls: variables for cls, variables in selected.items() if variables}
    # Under the collapsed normal approximation a gradient through a quadrature rule costs 15-30
    # log-densities: the continuous parameters PyMC would give to NUTS get the independence
    # sampler, unless every such table's moments are in closed form (one Normal record).
    collapsed = table_laws is not None and any(
        law.variances is not None and not law.cheap_gradient for law in table_laws
    )
    independent = selected.pop(NUTS, []) if collapsed else []
    if not provided and not selected and not independent:
        return []
    with without_release_terms(model, compiled, table_laws):
        steps = []
        if provided or selected:
            # at the sums level the target reads this fit's latent sums: compiled afresh
            if table_laws is None:
                reuse = compiled.memoised("gradient steps", dict)
                mode = gradient_mode(records_at_start(model, compiled))
            else:  # the sums level's target has no records
                reuse = mode = None
            steps = instantiate_steps(model, provided, selected, step_kwargs, reuse, mode)
        if independent:
            options = (step_kwargs or {}).get(IndependenceMetropolis.name, {})
            steps.append(IndependenceMetropolis(vars=independent, model=model, **options))
    return steps


def without_release_terms(
    model: pm.Model, compiled: CompiledModel, table_laws: list[TableLaw] | None = None
):
    """A context in which the steps built compile ``model.logp()`` without the release terms
    (:func:`~pymc_unbounded_dp._pymc_bridge.logp_restricted_to`).

    ``log eta_s(s_dp - sum_i t(x_i))`` and ``log eta_n(n_dp - n)`` depend only on the records and
    ``n`` (``PrivatizedSum`` refuses statistics of the parameters; mechanisms have fixed scales),
    which a parameter step never changes: they are constants of its target, but PyMC would evaluate
    them (a sum over all records) in every logp and gradient call, about a third of a NUTS gradient
    on the paper's regression. The steps' ``lp`` statistics then leave them out too.

    At the sums level (``table_laws``) the records' log-density is replaced by the tables' sum
    laws ``log p_n(L | theta)`` at the current latent sums (:func:`~pymc_unbounded_dp.sums.
    parameter_terms`): the parameters' full conditional given ``(n, L)``.
    """
    dropped = {s.release_rv for s in compiled.blocks.sums}
    dropped |= {n.release_rv for n in compiled.blocks.sample_sizes}
    extra = []
    if table_laws is not None:
        dropped |= {r.rv for r in compiled.blocks.records}
        extra = parameter_terms(table_laws)
    kept = [
        rv for rv in model.free_RVs + model.observed_RVs + model.potentials if rv not in dropped
    ]
    return logp_restricted_to(model, kept, extra)
