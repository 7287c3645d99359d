"""The package's numba backend (``pymc_unbounded_dp._numba_backend``, ``_fused_sums``).

* The fused sums (PyTensor 2 only: PyTensor 3 fuses reductions itself) equal the sums PyTensor
  computes without them, to rounding, on graphs that take every branch of the generated loop:
  one and several outputs, inputs read at 0 (broadcast) and along the vector, ``-inf`` and NaN
  terms, mismatched lengths; and graphs the rewrite must leave alone are left alone.
* NUTS gets the numba mode from ``NUMBA_MIN_RECORDS`` records on PyMC 5 (the C backend below,
  the user's mode always), falls back to the C backend where the gradient has an op without a
  numba implementation, and samples an exact posterior through the fused gradient.
"""

from __future__ import annotations

import logging

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.compile.mode import Mode
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from pytensor.link.basic import PerformLinker
from pytensor.link.vm import VMLinker

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp import _fused_sums, _numba_backend
from pymc_unbounded_dp._fused_sums import FusedSums
from tests.mcmc_checks import EXACT_POSTERIOR_SAMPLING, assert_mean_and_spread_match, draws_of
from tests.oracles import normal_posterior

pytestmark = pytest.mark.filterwarnings("ignore:PyTensor could not link to a BLAS:UserWarning")

PYTENSOR_2 = _fused_sums.APPLIES
C_BACKEND = isinstance(pytensor.compile.mode.get_default_mode().linker, VMLinker)


def fused_nodes(function) -> list:
    return [n for n in function.maker.fgraph.apply_nodes if isinstance(n.op, FusedSums)]


def compare(inputs, outputs, values, fused: int):
    """``outputs`` from the numba mode against PyTensor's default mode, and the number of
    :class:`FusedSums` nodes (on PyTensor 2; none on PyTensor 3)."""
    numba = pytensor.function(inputs, outputs, mode=_numba_backend.numba_mode())
    reference = pytensor.function(inputs, outputs, mode="FAST_COMPILE")
    got, want = numba(*values), reference(*values)
    for g, w in zip(got, want, strict=True) if isinstance(got, list) else [(got, want)]:
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert len(fused_nodes(numba)) == (fused if PYTENSOR_2 else 0)
    return got


@pytest.fixture
def vectors():
    rng = np.random.default_rng(3)
    return rng.normal(size=1001), rng.normal(size=1001), np.array([0.7])


def test_several_sums_of_one_loop_are_one_fused_node(vectors):
    """Nine sums of one elementwise loop (the regression's statistic), with inputs along the
    vector and read at 0: one node with nine outputs, every output its own sum."""
    x, z, a = pt.dvector("x"), pt.dvector("z"), pt.dvector("a", shape=(1,))
    c1, c2 = pt.clip(a + 2.0 * x, -1.0, 1.0), pt.clip(x * z - a, -1.0, 1.0)
    c3 = pt.clip(z + a * x, -0.5, 0.5)
    columns = [c1, c2, c3, c1 * c1, c1 * c2, c1 * c3, c2 * c2, c2 * c3, c3 * c3]
    got = compare([x, z, a], [c.sum() for c in columns], vectors, fused=1)
    assert len({float(v) for v in got}) == 9  # nine different sums, none copied from another


def test_one_sum_of_a_loop_with_one_output(vectors):
    x, z, a = pt.dvector("x"), pt.dvector("z"), pt.dvector("a", shape=(1,))
    compare([x, z, a], pt.sum(pt.exp(-a * x**2) * z), vectors, fused=1)


def test_minus_infinity_and_nan_terms_reach_the_sum():
    """A term outside the support gives ``-inf`` (PyMC's ``switch(..., -inf)``), a NaN term NaN."""
    x = pt.dvector("x")
    log_terms = pt.switch(x > 0, pt.log(x), -np.inf).sum()
    numba = pytensor.function([x], log_terms, mode=_numba_backend.numba_mode())
    assert numba(np.array([1.0, 2.0])) == pytest.approx(np.log(2.0), rel=1e-15)
    assert numba(np.array([1.0, -2.0, 3.0])) == -np.inf
    roots = pytensor.function([x], pt.sqrt(x).sum(), mode=_numba_backend.numba_mode())
    assert roots(np.array([4.0, 9.0])) == 5.0
    assert np.isnan(roots(np.array([4.0, -1.0, 9.0])))


def test_vectors_of_different_lengths_are_an_error():
    x, z = pt.dvector("x"), pt.dvector("z")
    numba = pytensor.function([x, z], (x * z).sum(), mode=_numba_backend.numba_mode())
    with pytest.raises(ValueError):
        numba(np.ones(3), np.ones(4))


def test_graphs_the_rewrite_leaves_alone(vectors):
    """An output used besides its sum, a sum over one axis of a matrix, a sum of a 2-d loop and
    an integer sum are computed as PyTensor computes them (no fused node)."""
    x, z, a = pt.dvector("x"), pt.dvector("z"), pt.dvector("a", shape=(1,))
    term = pt.exp(a * x) + z
    compare([x, z, a], [term.sum(), term], vectors, fused=0)
    m = pt.dmatrix("m")
    matrix = np.arange(12.0).reshape(4, 3) / 7
    compare([m], [pt.exp(m).sum(axis=0)], [matrix], fused=0)
    compare([m], [pt.exp(m).sum()], [matrix], fused=0)
    k = pt.lvector("k")
    compare([k], [(2 * k + 1).sum()], [np.arange(5)], fused=0)


def test_the_op_computes_the_same_sums_outside_numba(vectors):
    """``FusedSums.perform``: the op's Python implementation, for any mode that is not numba."""
    x, a = pt.dvector("x"), pt.dvector("a", shape=(1,))
    sx, sa = pytensor.scalar.float64(), pytensor.scalar.float64()
    composite = pytensor.scalar.Composite([sx, sa], [sx * sa, sx + sa])
    outputs = FusedSums(composite, (False, True))(x, a, return_list=True)
    function = pytensor.function([x, a], outputs, mode="FAST_COMPILE")
    value, shift = vectors[0], vectors[2]
    np.testing.assert_allclose(
        function(value, shift), [(value * shift).sum(), (value + shift).sum()]
    )
    single = pytensor.scalar.Composite([sx, sa], [pytensor.scalar.exp(sx - sa)])
    (output,) = FusedSums(single, (False, True))(x, a, return_list=True)
    function = pytensor.function([x, a], output, mode="FAST_COMPILE")
    np.testing.assert_allclose(function(value, shift), np.exp(value - shift).sum())


# -- the NUTS step's backend --------------------------------------------------------------------------
def nuts_of(step):
    return next(m for m in step.methods if isinstance(m, pm.NUTS))


def linker_of(step):
    return nuts_of(step)._logp_dlogp_func._pytensor_function.maker.linker


def normal_model(n: int, mu_prior=(0.5, 2.0), scale: float = 60.0, s_dp: float = 350.0):
    with pm.Model() as model:
        mu = pm.Normal("mu", *mu_prior)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=scale), observed=s_dp)
    return model


@pytest.mark.parametrize(
    "n", [_numba_backend.NUMBA_MIN_RECORDS - 1, _numba_backend.NUMBA_MIN_RECORDS]
)
def test_nuts_compiles_with_numba_from_numba_min_records_on_the_c_backend(n):
    """On PyMC 5 (C backend) NUTS's target is compiled with numba from ``NUMBA_MIN_RECORDS``
    records (with the fused sums); below, and always on PyMC 6, PyMC's default backend."""
    assert _numba_backend.NUMBA_MIN_RECORDS == 500
    with normal_model(n):
        step = pmdp.DataAugmentation(interweave=False, augment="records")
    numba = "Numba" in type(linker_of(step)).__name__
    assert numba == (n >= 500) if C_BACKEND else numba
    if C_BACKEND and n >= 500 and PYTENSOR_2:
        assert fused_nodes(nuts_of(step)._logp_dlogp_func._pytensor_function)


def test_the_users_mode_for_nuts_wins():
    with normal_model(600):
        step = pmdp.DataAugmentation(
            interweave=False, augment="records", step_kwargs={"nuts": {"mode": Mode(linker="py")}}
        )
    assert type(linker_of(step)) is PerformLinker


class _Square(Op):
    """``x**2`` with a gradient, and no numba implementation."""

    def make_node(self, x):
        x = pt.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = np.asarray(inputs[0] ** 2)

    def pullback(self, inputs, outputs, cotangents):  # PyTensor 3
        return [2.0 * inputs[0] * cotangents[0]]

    if PYTENSOR_2:  # PyTensor 3 deprecates `grad` (a FutureWarning)

        def grad(self, inputs, output_gradients):
            return self.pullback(inputs, None, output_gradients)


@pytest.mark.skipif(
    not C_BACKEND, reason="PyMC's own default backend is numba: nothing to fall back to"
)
def test_nuts_falls_back_to_the_c_backend_where_an_op_has_no_numba_implementation(caplog):
    model = normal_model(600)
    with model:
        pm.Potential("pull", -0.01 * _Square()(model["mu"]))
        with caplog.at_level(logging.INFO, logger="pymc_unbounded_dp"):
            step = pmdp.DataAugmentation(interweave=False, augment="records")
    assert isinstance(linker_of(step), VMLinker)
    assert "default backend" in caplog.text


def test_nuts_through_the_fused_gradient_matches_the_exact_posterior():
    """600 records, NUTS on the numba (fused) gradient, the records refreshed and the move on:
    the posterior of ``mu`` against quadrature, mean and centred variance."""
    model = normal_model(600)
    with model:
        idata = pmdp.sample(augment="records", random_seed=11, **EXACT_POSTERIOR_SAMPLING)
    exact = normal_posterior(350.0, 60.0, 1.0, 0.5, 2.0, n=600)
    assert_mean_and_spread_match(
        draws_of(idata, "mu"), exact["mu_mean"], exact["mu_var"], "mu, numba NUTS"
    )
