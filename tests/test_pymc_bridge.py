"""What the package relies on in PyMC's internals (``pymc_unbounded_dp._pymc_bridge``), pinned.

One test per item of the bridge: a PyMC upgrade that changes one of them should fail here first,
with the item named, rather than somewhere in the samplers. Fast: plain PyMC models where the item
does not involve the package's blocks, and never more than a few draws.
"""

from __future__ import annotations

import importlib
import inspect
import logging

import numpy as np
import pymc as pm
import pytest
from pymc.model.fgraph import fgraph_from_model, model_from_fgraph
from pymc.step_methods.compound import BlockedStep, Competence, CompoundStep, flatten_steps
from pytensor.link.vm import VMLinker

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import _pymc_bridge as bridge
from pymc_unbounded_dp._compile import compile_model
from pymc_unbounded_dp.steps import PrivateDataStep, RecordsStep

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")


@pytest.fixture
def plain():
    """A PyMC model with a continuous and a discrete parameter, data and a potential."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Bernoulli("k", 0.3)
        pm.Normal("y", mu, 1.0, observed=[0.2, -0.1, 0.4])
        pm.Potential("pull", -0.5 * (mu - 3.0) ** 2)
    return model


@pytest.fixture
def private():
    """The smallest model with privacy blocks (bounded DP)."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 1, 1)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=6)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=2.4)
    return model


# -- step assignment -----------------------------------------------------------------------------
def test_step_assignment_is_pymcs_choice_with_its_options(plain):
    """``assign_steps``/``instantiate_steps``: NUTS for the continuous parameter, a Metropolis
    variant for the discrete one, ``step_kwargs`` by step name, unknown names refused."""
    methods = bridge.step_methods(excluding=(PrivateDataStep,))
    provided, selected = bridge.assign_steps(plain, [], methods)
    assert provided == []
    by_name = {v.name: cls for cls, variables in selected.items() for v in variables}
    assert by_name["mu"] is pm.NUTS
    assert by_name["k"] is not pm.NUTS and issubclass(by_name["k"], BlockedStep)
    with plain:
        steps = bridge.instantiate_steps(plain, [], selected, {"nuts": {"target_accept": 0.93}})
    assert all(isinstance(s, BlockedStep) for s in steps)  # flat, even for two steps
    assert {v.name for s in steps for v in s.vars} == {"mu", "k"}
    assert next(s for s in steps if isinstance(s, pm.NUTS)).target_accept == 0.93
    with plain, pytest.raises(ValueError, match="step_kwargs"):
        bridge.instantiate_steps(plain, [], selected, {"no_such_step": {}})


def test_a_given_step_keeps_its_variables(plain):
    with plain:
        slice_step = pm.Slice([plain["mu"]])
    provided, selected = bridge.assign_steps(plain, [slice_step], bridge.step_methods())
    assert provided == [slice_step]
    assert [v.name for variables in selected.values() for v in variables] == ["k"]


def test_flat_steps_takes_what_flatten_steps_refuses(plain):
    """PyMC's ``flatten_steps`` takes one step, not a list (the reason for ``flat_steps``)."""
    with plain:
        a, b = pm.Slice([plain["mu"]]), pm.BinaryMetropolis([plain["k"]])
    with pytest.raises(ValueError):
        flatten_steps([a, b])
    assert bridge.flat_steps(None) == []
    assert bridge.flat_steps(a) == [a]
    assert bridge.flat_steps(CompoundStep([a, b])) == [a, b]
    assert bridge.flat_steps([CompoundStep([a]), b]) == [a, b]


# -- PyMC's list of step methods -----------------------------------------------------------------
def test_pm_sample_assigns_the_registered_step_and_uses_what_it_returns(private):
    """The registration: once in PyMC's list, chosen for every variable of a model with privacy
    blocks, and PyMC uses what instantiating it returns (the augmentation step)."""
    bridge.register_step_method(PrivateDataStep)  # again: still once
    assert bridge.step_methods().count(PrivateDataStep) == 1
    assert {"dp_augmentation", "nuts"} <= bridge.step_method_names()
    provided, selected = bridge.assign_steps(private, [], bridge.step_methods())
    assert list(selected) == [PrivateDataStep]
    from pymc.sampling.mcmc import instantiate_steppers  # PyMC's own call, as pm.sample makes it

    with private:
        built = instantiate_steppers(
            private, provided, selected, step_kwargs={"dp_augmentation": {"augment": "records"}}
        )
    assert isinstance(built, pmdp.DataAugmentation)
    assert isinstance(built.methods[0], RecordsStep) and isinstance(built.methods[1], pm.NUTS)


# -- the log density of the steps built inside the augmentation step -----------------------------
def test_restricted_logp_is_what_pymcs_steps_compile(plain):
    """Inside ``logp_restricted_to`` PyMC's steps compile the kept terms (plus the extra ones):
    NUTS's ``lp`` is that density; calls with ``vars`` and the model after exit are PyMC's."""
    mu, k, y = plain["mu"], plain["k"], plain["y"]
    extra = -0.25 * plain.rvs_to_values[mu] ** 2
    restricted = plain.compile_fn(plain.logp(vars=[mu, k, y]) + extra)
    full = plain.compile_logp()
    point = plain.initial_point()
    point["mu"] = np.asarray(0.7)
    with plain, bridge.logp_restricted_to(plain, [mu, k, y], [extra]):
        assert "logp" in vars(plain)
        np.testing.assert_allclose(plain.compile_fn(plain.logp())(point), restricted(point))
        assert len(plain.logp(sum=False)) == 4  # three variables and the extra term
        np.testing.assert_allclose(plain.compile_logp(vars=[mu])(point), point_logp(mu, point))
        nuts = pm.NUTS([plain.rvs_to_values[mu]])
    assert "logp" not in vars(plain)
    assert full(point) != pytest.approx(restricted(point))
    new_point, (stats,) = nuts.step(point)
    np.testing.assert_allclose(stats["model_logp"], restricted(new_point))


def test_gradient_step_options_reach_the_compiled_gradient(plain):
    """``trust_input`` (which PyMC sets where the compiled function never reads it) and, on
    PyTensor's virtual machines, ``allow_gc=False`` reach the function NUTS compiles; other steps
    get none, and the user's options win."""
    options = bridge.gradient_step_options(
        {pm.NUTS: [], pm.BinaryGibbsMetropolis: []}, {"nuts": {"trust_input": False}}
    )
    assert "binary_gibbs_metropolis" not in options
    assert options["nuts"]["trust_input"] is False
    options = bridge.gradient_step_options({pm.NUTS: []}, None)
    with plain:
        nuts = pm.NUTS([plain.rvs_to_values[plain["mu"]]], **options["nuts"])
    gradient = nuts._logp_dlogp_func._pytensor_function
    assert gradient.trust_input
    if isinstance(gradient.maker.linker, VMLinker):  # PyMC 5's C backend
        assert not gradient.maker.linker.allow_gc


def point_logp(rv, point):
    return float(pm.logp(rv, point[rv.name]).eval())


def test_the_model_logp_is_restored_after_an_error(plain):
    with pytest.raises(RuntimeError), bridge.logp_restricted_to(plain, [plain["mu"]]):
        raise RuntimeError("building a step failed")
    assert "logp" not in vars(plain)


def test_a_clone_without_the_releases_reads_the_live_records_but_has_other_variables(private):
    """Why the steps are not built on a clone of the model without the releases: the clone reads
    the live record containers (a write by the records step would be seen), but its value
    variables are new objects, which step assignment refuses on the user's model."""
    table = compile_model(private).tables[0]
    clone = model_from_fgraph(fgraph_from_model(private)[0], mutate_fgraph=True)
    records_logp = clone.compile_logp(vars=[clone["x"]])
    point = {"theta_logodds__": np.asarray(1.0)}  # theta != 1/2: 0s and 1s differ
    table.set_records([np.ones(6)])
    all_ones = records_logp(point)
    table.set_records([np.zeros(6)])
    assert records_logp(point) != pytest.approx(all_ones)  # the clone sees the writes
    np.testing.assert_allclose(
        records_logp(point), private.compile_logp(vars=[private["x"]])(point)
    )
    assert clone.value_vars[0] is not private.value_vars[0]
    with clone:
        step = pm.Slice(clone.value_vars)
    with pytest.raises(ValueError, match="not a value variable"):
        bridge.assign_steps(private, [step], bridge.step_methods())


# -- the step plumbing and what differs between PyMC 5 and 6 -------------------------------------
class Counting(bridge.PackageStep):
    """Claims one variable and leaves it alone; counts the chains and writes a model-dependent
    stat ``extra`` besides the class's ``tune``; declares ``never`` and never writes it."""

    name = "counting"
    stats_dtypes_shapes = {"tune": (bool, []), "never": (np.float64, [])}

    def __init__(self, vars, model=None, blocked=True, rng=None):
        self.vars = list(vars)
        self.tune = True
        self.rng = np.random.default_rng(rng)
        self.chains: list[np.random.Generator] = []
        self._add_stats({"extra": (np.int64, [])})

    def start_chain(self, rng) -> None:
        super().start_chain(rng)
        self.chains.append(self.rng)

    def step(self, point):
        return point, [{"tune": self.tune, "extra": 7}]


def test_each_chain_starts_through_start_chain_on_this_pymc(plain):
    """PyMC 5 calls ``set_rng``, PyMC 6 ``setup_chain``, once per chain (``cores=1`` reuses the
    step object); both reach ``start_chain``. ``tune`` follows PyMC's tuning calls."""
    assert hasattr(CompoundStep, "set_rng") or hasattr(CompoundStep, "setup_chain")
    with plain:
        step = Counting([plain.rvs_to_values[plain["mu"]]])
        idata = pm.sample(
            draws=2,
            tune=2,
            chains=2,
            cores=1,
            step=[step, pm.BinaryMetropolis([plain["k"]])],
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert len(step.chains) == 2 and step.chains[0] is not step.chains[1]
    assert not step.tune  # stopped after tuning
    step.reset_tuning()
    assert step.tune
    assert "extra" not in Counting.stats_dtypes_shapes  # the class declaration is untouched
    assert (idata.sample_stats["extra"].values == 7).all()


def test_pymc_writes_every_declared_stat(plain):
    """A declared stat a step leaves out still gets a value in every draw (zeros): the reason
    stats that exist only for some models are added per instance, not declared as a superset.
    Should this fail (PyMC drops them), the superset becomes possible."""
    with plain:
        step = Counting([plain.rvs_to_values[plain["mu"]]])
        idata = pm.sample(
            draws=2,
            tune=1,
            chains=1,
            step=[step, pm.BinaryMetropolis([plain["k"]])],
            random_seed=5,
            progressbar=False,
            compute_convergence_checks=False,
        )
    assert "never" in idata.sample_stats
    assert (idata.sample_stats["never"].values == 0).all()


def test_the_package_steps_are_never_assigned_by_pymc(plain):
    for var in plain.value_vars:
        assert bridge.PackageStep.competence(var, True) == Competence.INCOMPATIBLE
    provided, selected = bridge.assign_steps(plain, [], [Counting, *bridge.step_methods()])
    assert Counting not in selected


def test_legacy_sample_keywords_are_what_pm_sample_still_reads():
    """``start``: a keyword PyMC 5's ``pm.sample`` reads from ``**kwargs``; gone in PyMC 6."""
    named = set(inspect.signature(pm.sample).parameters)
    assert not bridge.LEGACY_SAMPLE_KEYWORDS & named
    source = inspect.getsource(pm.sample)
    for keyword in bridge.LEGACY_SAMPLE_KEYWORDS:
        assert f'"{keyword}" in kwargs' in source
    assert bool(bridge.LEGACY_SAMPLE_KEYWORDS) == pm.__version__.startswith("5.")


def test_pymc_loggers_are_pymcs_modules():
    """The loggers are named after PyMC's modules (``logging.getLogger(__name__)``)."""
    for name in bridge.PYMC_LOGGERS:
        module = importlib.import_module(name)
        assert module.__name__ == name
        assert logging.getLogger(name).name == name


# -- a refit reuses the gradient steps' compiled target ------------------------------------------
def _clamped_normal_records(centre: float) -> pm.Model:
    """Records with no sum law (clamped normals: the records level), a prior read from data."""
    with pm.Model() as model:
        prior_centre = pm.Data("centre", centre)
        mu = pm.Normal("mu", prior_centre, 1.0)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=8)
        pmdp.PrivatizedSum(
            "s",
            pm.math.clip(x, -3.0, 3.0),
            pmdp.Laplace(epsilon=1.0, sensitivity=3.0),
            observed=4.0,
        )
    return model


def test_a_refit_reuses_the_compiled_gradient_and_reads_the_data_set_since(monkeypatch):
    """A second ``pmdp.sample`` of a model hands NUTS the target compiled by the first (the
    sampler's settings, such as ``target_accept``, do not reach PyTensor); it reads data set
    since, so its draws are a fresh model's, bit for bit; an option that reaches PyTensor
    (``dtype``) compiles afresh."""
    fit = {"draws": 15, "tune": 15, "chains": 1, "random_seed": 7, "progressbar": False}
    fit["compute_convergence_checks"] = False
    model = _clamped_normal_records(0.0)
    with model:
        pmdp.sample(**fit)
    assert len(compile_model(model).memo["gradient steps"]) == 1
    built = []
    original = pm.Model.logp_dlogp_function

    def counted(self, *args, **kwargs):
        built.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pm.Model, "logp_dlogp_function", counted)
    with model:
        pm.set_data({"centre": 2.0})
        refit = pmdp.sample(**fit, nuts={"target_accept": 0.9})
    assert built == []
    with _clamped_normal_records(2.0):
        fresh = pmdp.sample(**fit, nuts={"target_accept": 0.9})
    np.testing.assert_array_equal(refit.posterior["mu"], fresh.posterior["mu"])
    built.clear()
    with model:
        pmdp.sample(**fit, nuts={"dtype": "float64"})
    assert built == [model]


def test_a_reused_gradient_serves_only_the_same_variables_and_keeps_the_step_options():
    """``instantiate_steps``'s ``reuse``: NUTS over ``mu`` alone (another step took ``tau``)
    does not get the target compiled for ``(mu, tau)``: its density is the model's at ``mu``
    with ``tau`` held; and a step handed a reused target still gets its own options."""
    from pymc.blocking import DictToArrayBijection

    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        pm.Normal("y", mu, tau, observed=[0.3, -0.2, 1.1])
    value = {rv.name: model.rvs_to_values[rv] for rv in (mu, tau)}
    reuse: dict = {}
    with model:
        (both,) = bridge.instantiate_steps(
            model, [], {pm.NUTS: [value["mu"], value["tau"]]}, None, reuse
        )
        (alone,) = bridge.instantiate_steps(model, [], {pm.NUTS: [value["mu"]]}, None, reuse)
        (again,) = bridge.instantiate_steps(
            model, [], {pm.NUTS: [value["mu"]]}, {"nuts": {"target_accept": 0.93}}, reuse
        )
    assert [v.name for v in alone.vars] == ["mu"]
    assert again._logp_dlogp_func is alone._logp_dlogp_func  # a refit reuses the target...
    assert again.target_accept == 0.93  # ...and keeps its own options
    point = {"mu": np.asarray(0.4), "tau_log__": np.asarray(-0.3)}
    function = alone._logp_dlogp_func
    function.set_extra_values({"tau_log__": point["tau_log__"]})
    logp = function(DictToArrayBijection.map({"mu": point["mu"]}))[0]
    from scipy import stats

    t = np.exp(point["tau_log__"])  # the log transform's Jacobian adds log(tau)
    expected = (
        stats.norm.logpdf(0.4)
        + stats.halfnorm.logpdf(t)
        + np.log(t)
        + stats.norm.logpdf([0.3, -0.2, 1.1], 0.4, t).sum()
    )
    np.testing.assert_allclose(logp, expected, rtol=1e-12)


def test_each_chain_hook_seeds_the_steps_generator_with_the_chains_seed(plain):
    """PyMC 5's ``set_rng`` and PyMC 6's ``setup_chain`` (called on either PyMC here) both start
    the chain on the generator PyMC hands it: the same seed, the same stream."""
    with plain:
        step = Counting([plain.rvs_to_values[plain["mu"]]])
    expected = np.random.default_rng(123).random(3)
    step.set_rng(123)
    np.testing.assert_array_equal(step.rng.random(3), expected)
    step.setup_chain(123, tune=5, draws=5)
    np.testing.assert_array_equal(step.rng.random(3), expected)
    assert len(step.chains) == 2
