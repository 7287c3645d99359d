"""The one seam between the package's steps and PyMC's internals.

Everything the step methods need from PyMC or PyTensor beyond their public API is here, each
item with the reason the public API does not serve; ``tests/test_pymc_bridge.py`` pins the
behaviour of each, so that a PyMC upgrade that changes one fails there first:

* the step assignment PyMC runs inside ``pm.sample`` (:func:`assign_steps`,
  :func:`instantiate_steps`) and the flattening of compound steps (:func:`flat_steps`);
* PyMC's list of step methods (:func:`register_step_method`, :func:`step_methods`,
  :func:`step_method_names`);
* the model's log density without some of its terms for the steps built inside the augmentation
  step (:func:`logp_restricted_to`), the compile options of the gradient steps built there
  (:func:`gradient_step_options`), and their compiled targets, which a refit reuses (PyMC keeps
  them in ``_logp_dlogp_func``; :func:`instantiate_steps`);
* what differs between PyMC 5 and 6: the per-chain hook (``set_rng`` against ``setup_chain``,
  handled by :class:`PackageStep`) and ``pm.sample``'s old keyword ``start``
  (:data:`LEGACY_SAMPLE_KEYWORDS`);
* the names of PyMC's loggers the package quiets (:data:`PYMC_LOGGERS`).

:class:`PackageStep` is the plumbing the package's step methods share: the stats they declare,
the per-chain reset, the tuning flag and a competence that claims no variable.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

import numpy as np
import pymc as pm
import pytensor

# Not in pymc.sampling.mcmc.__all__: see assign_steps.
from pymc.sampling.mcmc import assign_step_methods, instantiate_steppers
from pymc.step_methods import STEP_METHODS
from pymc.step_methods.arraystep import GradientSharedStep
from pymc.step_methods.compound import BlockedStep, Competence, CompoundStep, flatten_steps
from pytensor.compile.mode import Mode, get_default_mode
from pytensor.link.vm import VMLinker

from pymc_unbounded_dp._numba_backend import object_mode_messages

__all__ = [
    "LEGACY_SAMPLE_KEYWORDS",
    "PYMC_LOGGERS",
    "PackageStep",
    "assign_steps",
    "flat_steps",
    "gradient_step_options",
    "instantiate_steps",
    "logp_restricted_to",
    "register_step_method",
    "step_method_names",
    "step_methods",
]

_log = logging.getLogger(__name__)

#: The loggers of PyMC that report on sampling (the start banner, the timing line, the
#: convergence warnings), by their module names: what a caller quiets for many short runs.
PYMC_LOGGERS: tuple[str, ...] = (
    "pymc",
    "pymc.sampling.mcmc",
    "pymc.stats",
    "pymc.stats.convergence",
)

#: Keywords ``pm.sample`` takes through its ``**kwargs`` on this PyMC and not as named parameters:
#: PyMC 5 still accepts ``start`` (the old name of ``initvals``); PyMC 6 does not.
LEGACY_SAMPLE_KEYWORDS: frozenset[str] = frozenset(
    {"start"} if pm.__version__.startswith("5.") else ()
)


# -- step assignment -----------------------------------------------------------------------------
# The augmentation step builds its parameter steps the way pm.sample would (NUTS for continuous
# parameters, PyMC's Metropolis variants for discrete ones, the user's steps for the parameters
# they claim). PyMC exposes that choice only inside pm.sample: the two functions below are
# importable from pymc.sampling.mcmc but not in its __all__. Reimplementing the choice would drift
# from PyMC's (competences, step options such as nuts={...} and their error messages).
def assign_steps(
    model: pm.Model, given: Sequence[BlockedStep], methods: Sequence[type]
) -> tuple[list, dict]:
    """PyMC's choice of step class for each value variable that ``given`` leaves out.

    Parameters
    ----------
    model : pm.Model
    given : sequence of steps
        Steps already built (their ``vars`` must be value variables of ``model``).
    methods : sequence of step classes
        The classes to choose from (by their ``competence``).

    Returns
    -------
    provided : list
        The given steps.
    selected : dict
        Step class -> the value variables assigned to it.
    """
    return assign_step_methods(model, list(given) or None, methods=list(methods))


def instantiate_steps(
    model: pm.Model,
    provided: list,
    selected: dict,
    step_kwargs: dict | None,
    reuse: dict | None = None,
    gradient_mode: Mode | None = None,
) -> list[BlockedStep]:
    """Build the steps of :func:`assign_steps`'s choice, as a flat list of single steps.

    PyMC returns one step, or a list of them when there are several (each possibly compound).
    ``step_kwargs`` maps a step class's ``name`` to its keyword arguments, as ``pm.sample``'s;
    the gradient steps get :func:`gradient_step_options` besides, with ``gradient_mode`` (see
    :func:`~pymc_unbounded_dp._numba_backend.gradient_mode`) where the user gave no mode. Where
    that mode is numba's and the gradient has an op without a numba implementation, the steps
    are built again with PyMC's default mode (said in the log).

    ``reuse`` (a dict kept with the model between fits) holds the compiled targets of the
    gradient steps built here: a later call for the same variables, with the same options that
    reach PyTensor, hands the step the function compiled before (``logp_dlogp_func``, a keyword
    of PyMC's gradient steps) instead of building and compiling the model's gradient again
    (1-3 s per fit). The function reads the model's shared variables (data, record containers)
    at each call and is given the other value variables at each step, so it is the same function
    a new compile would give. Steps given options that may change what is compiled (``dtype``,
    ``mode``, ``compile_kwargs``, ...) are always compiled afresh.
    """
    given = dict(step_kwargs or {})
    gradient = [cls for cls in selected if issubclass(cls, GradientSharedStep)]
    if all("mode" in given.get(cls.name, {}) for cls in gradient):
        gradient_mode = None  # no gradient step, or the user chose each one's mode
    kwargs = gradient_step_options(selected, given, gradient_mode)
    keys = {}
    if reuse is not None:
        for cls, variables in selected.items():
            key = _reuse_key(cls, variables, given.get(cls.name, {}))
            if key is None:
                continue
            keys[cls, frozenset(v.name for v in variables)] = key
            if key in reuse:
                kwargs[cls.name] = {**kwargs.get(cls.name, {}), "logp_dlogp_func": reuse[key]}
    # PyMC appends the steps it builds to the list it is given: a copy, for the fallback below
    if gradient_mode is None:
        built = flat_steps(instantiate_steppers(model, [*provided], selected, step_kwargs=kwargs))
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            built = flat_steps(
                instantiate_steppers(model, [*provided], selected, step_kwargs=kwargs)
            )
        object_mode = object_mode_messages(caught)
        if object_mode:
            _log.info("The gradient steps use PyMC's default backend: %s", object_mode[0])
            return instantiate_steps(model, provided, selected, step_kwargs, reuse)
        for w in caught:  # the other warnings, as they were
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
        _log.info("The gradient steps are compiled with numba")
    for step in built:
        key = keys.get((type(step), frozenset(v.name for v in step.vars)))
        if key is not None:
            # PyMC keeps the compiled target in this attribute (PyMC 5.28 and 6.4); pinned by
            # tests/test_pymc_bridge.py
            reuse.setdefault(key, step._logp_dlogp_func)
    return built


#: Options of PyMC's gradient steps that set the sampler, not the function it compiles: a step
#: given only these (besides :func:`gradient_step_options`'s own) may reuse a compiled target.
SAMPLER_SETTINGS: frozenset[str] = frozenset(
    {
        "adapt_step_size",
        "early_max_treedepth",
        "Emax",
        "gamma",
        "is_cov",
        "k",
        "max_steps",
        "max_treedepth",
        "path_length",
        "potential",
        "scaling",
        "step_rand",
        "step_scale",
        "t0",
        "target_accept",
    }
)


def _reuse_key(cls: type, variables: list, given: dict) -> tuple | None:
    """The key of a gradient step's compiled target in :func:`instantiate_steps`'s ``reuse``, or
    ``None`` if it must be compiled afresh (not a gradient step, or given compile options)."""
    if not issubclass(cls, GradientSharedStep) or not set(given) <= SAMPLER_SETTINGS:
        return None
    settings = (pytensor.config.mode, pytensor.config.linker, pytensor.config.floatX)
    return ("gradient", cls.name, tuple(v.name for v in variables), settings)


def flat_steps(steps) -> list[BlockedStep]:
    """``steps`` (``None``, a step, a compound step or a list of them) as a flat list.

    PyMC's ``flatten_steps`` (pymc.step_methods.compound, not re-exported by
    pymc.step_methods) takes one step or compound step, not a list.
    """
    if steps is None:
        return []
    if isinstance(steps, BlockedStep | CompoundStep):
        steps = [steps]
    return [single for step in steps for single in flatten_steps(step)]


# -- PyMC's list of step methods -----------------------------------------------------------------
# pm.sample() assigns steps from pymc.step_methods.STEP_METHODS, a module-level list with no
# registration API: appending to it is how a package makes plain pm.sample() choose its step.
def register_step_method(cls: type) -> None:
    """Add ``cls`` to the step classes ``pm.sample()`` chooses from (once)."""
    if cls not in STEP_METHODS:
        STEP_METHODS.append(cls)


def step_methods(excluding: tuple[type, ...] = ()) -> list[type]:
    """The step classes ``pm.sample()`` chooses from, without ``excluding``."""
    return [cls for cls in STEP_METHODS if cls not in excluding]


def step_method_names() -> frozenset[str]:
    """The ``name`` of every step class ``pm.sample()`` chooses from: the keys its step options
    go under (``nuts={...}``)."""
    return frozenset(cls.name for cls in STEP_METHODS)


# -- the log density the steps built inside the augmentation step see ----------------------------
@contextmanager
def logp_restricted_to(model: pm.Model, kept: list, extra: list | None = None) -> Iterator[None]:
    """While open, ``model.logp()`` is the log density of ``kept`` (plus the ``extra`` terms).

    PyMC's steps compile their target from ``model.logp()`` with no ``vars`` (NUTS through
    ``model.logp_dlogp_function``, Metropolis and Slice directly), and take no target of their
    own. The release terms are constants of a parameter step's target but cost a pass over every
    record per evaluation, so the steps built inside the augmentation step must see the model
    without them. A clone of the model without the releases (``pymc.model.fgraph``) does read the
    live record containers (a cloned shared variable keeps its container), but its value
    variables are new objects: a step built on it claims variables ``pm.sample`` does not know
    (``assign_step_methods`` refuses them), and the sums level's extra terms are not model
    variables at all. So the model's ``logp`` is shadowed by an instance attribute for the time
    the steps are built, and the attribute is removed again on exit. A call with ``vars`` (a
    caller asking for specific terms) goes to PyMC's own ``Model.logp``.

    Parameters
    ----------
    model : pm.Model
    kept : list
        The model's variables (free, observed, potentials) whose terms stay.
    extra : list of tensors, optional
        Further scalar terms, added to the sum (or appended with ``sum=False``).
    """
    extra = list(extra or [])

    def logp(vars=None, **kwargs):
        if vars is not None:
            return type(model).logp(model, vars=vars, **kwargs)
        terms = type(model).logp(model, vars=kept, **kwargs)
        if not extra:
            return terms
        if kwargs.get("sum", True):
            return terms + sum(extra[1:], extra[0])
        return [*terms, *extra]

    model.logp = logp  # an instance attribute: shadows Model.logp until removed below
    try:
        yield
    finally:
        del model.logp


def gradient_step_options(
    selected: dict, step_kwargs: dict | None, mode: Mode | None = None
) -> dict:
    """``step_kwargs`` with the compile options of the gradient-based steps PyMC will build
    (NUTS, HamiltonianMC), unless given otherwise.

    * ``mode``, where given (the package's numba mode on PyMC 5 for many records:
      :func:`~pymc_unbounded_dp._numba_backend.gradient_mode`).

    * ``trust_input=True``. PyMC sets ``trust_input`` on their ``ValueGradFunction``, an
      attribute the compiled PyTensor function never reads (PyMC 5.28 and 6.4): every leapfrog
      step then re-checks its input, 2-3 us of a 6-60 us gradient. The input is always PyMC's own
      raveled float vector of the step's dtype (``DictToArrayBijection`` and the integrator's
      copies of it), which the checks would accept unchanged.
    * On PyTensor's virtual machines (PyMC 5's default C backend), PyTensor's default mode with
      ``allow_gc=False``: the intermediate arrays of a gradient are kept between calls and
      reused instead of allocated again at every leapfrog step (one gradient of the paper's
      regression: 60 -> 49 us; the same arithmetic). The price is memory: the intermediates stay
      allocated, a few arrays of the records' length. PyMC 6 compiles with numba, which has no
      such intermediates. Not with ``mode``.

    Both are keywords of the step that reach ``pytensor.function``; both reach into how PyMC
    compiles its steps' target and which linker PyTensor uses, hence here.
    """
    options: dict = {"trust_input": True}
    default = get_default_mode()
    if mode is not None:
        options["mode"] = mode
    elif isinstance(default.linker, VMLinker):
        options["mode"] = default.clone(link_kwargs={"allow_gc": False})
    kwargs = dict(step_kwargs or {})
    for cls in selected:
        if issubclass(cls, GradientSharedStep):
            kwargs[cls.name] = {**options, **kwargs.get(cls.name, {})}
    return kwargs


# -- the plumbing of the package's step methods ----------------------------------------------------
class PackageStep(BlockedStep):
    """What the package's step methods share.

    * ``stats_dtypes_shapes`` on the class: the stats every instance writes. PyMC writes every
      declared stat for every draw (a declared stat a step leaves out is filled with zeros), so
      stats that exist only for some models (those of a latent ``n``, one per release) cannot be
      declared as a superset; a step adds them once, at construction, with :meth:`_add_stats`.
    * The per-chain reset: PyMC 5 calls ``set_rng(rng)``, PyMC 6 ``setup_chain(rng, tune,
      draws)``, at the start of every chain (also of each chain ``cores=1`` runs through the same
      step object); both call :meth:`start_chain`, which a step extends to reset its chain state.
    * ``reset_tuning`` / ``stop_tuning``: the ``tune`` flag.
    * ``competence``: incompatible with every variable; the package's steps are built by the
      augmentation step or by the user, never assigned by PyMC.

    All randomness comes from ``self.rng``, the generator PyMC hands the chain.
    """

    stats_dtypes_shapes: ClassVar[dict] = {}
    rng: np.random.Generator
    tune: bool

    def start_chain(self, rng) -> None:
        """Start a chain with generator ``rng`` (extend to reset more per-chain state)."""
        self.rng = np.random.default_rng(rng)

    def set_rng(self, rng) -> None:
        """PyMC 5's per-chain hook: :meth:`start_chain`."""
        self.start_chain(rng)

    def setup_chain(self, rng, tune: int, draws: int) -> None:
        """PyMC 6's per-chain hook: :meth:`start_chain`."""
        self.start_chain(rng)

    def reset_tuning(self) -> None:
        """Called by PyMC at the start of each chain: the chain tunes again."""
        self.tune = True

    def stop_tuning(self) -> None:
        """Called by PyMC at the end of tuning."""
        self.tune = False

    @staticmethod
    def competence(var, has_grad):
        """Never assigned by PyMC."""
        return Competence.INCOMPATIBLE

    def _add_stats(self, extra: dict) -> None:
        """Declare this step's model-dependent stats besides the class's (at construction).

        PyMC's ``BlockedStep.__new__`` copies the class's declaration onto the instance, and a
        compound step reads the instance's; this extends it there.
        """
        stats = {**type(self).stats_dtypes_shapes, **extra}
        self.stats_dtypes_shapes = stats
        self.stats_dtypes = [{name: dtype for name, (dtype, _) in stats.items()}]
