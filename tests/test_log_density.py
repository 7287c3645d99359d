"""``sample_stats.lp``: the model's log density at each draw, release terms included.

At the records level it is PyMC's own ``model.logp()`` (Jacobians included, as NUTS reports it)
recomputed with the draw's kept records in the containers; at the sums level the same joint with
the records summed out, recomputed here with SciPy. With the interweaving move on and off.
"""

import numpy as np
import pymc as pm
import pytest
import scipy.stats as st
from pytensor.compile import SharedVariable
from pytensor.graph.traversal import ancestors
from scipy.special import logit

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp._registry import records_in_containers

S_MECHANISM = pmdp.Laplace(epsilon=1.0)
N_MECHANISM = pmdp.DiscreteLaplace(epsilon=0.5)
SAMPLE = {"draws": 12, "tune": 25, "chains": 1, "cores": 1, "progressbar": False}
SAMPLE["compute_convergence_checks"] = False


def bernoulli_model(unbounded: bool) -> pm.Model:
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        n = pmdp.SampleSize("n", n_dp=30, mechanism=N_MECHANISM) if unbounded else 30
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=11.3)
    return model


@pytest.fixture(scope="module", params=[False, True], ids=["bounded", "flat_n"])
def model(request):
    return bernoulli_model(request.param)


def group(idata, name: str):
    """A group as an xarray Dataset (InferenceData on PyMC 5, DataTree on PyMC 6)."""
    value = idata[name]
    return value.to_dataset() if hasattr(value, "to_dataset") else value


def _draws(idata):
    return group(idata, "posterior"), group(idata, "sample_stats")


@pytest.mark.parametrize("interweave", [True, False], ids=["interweave", "plain"])
def test_lp_is_the_model_log_density_with_the_kept_records(model, interweave):
    idata = pmdp.sample(model=model, keep_records=1, interweave=interweave, random_seed=3, **SAMPLE)
    posterior, stats = _draws(idata)
    kept = group(idata, "imputed_records")
    unbounded = "n" in posterior
    assert posterior.attrs["pmdp_augment"] == "records"
    logp = model.compile_logp()  # PyMC's, with Jacobians: what NUTS reports as lp
    # the container of the records (PyMC's observed value of x is a cast of it)
    (records,) = [
        v for v in ancestors([model.rvs_to_values[model["x"]]]) if isinstance(v, SharedVariable)
    ]
    lp = stats["lp"].values[0]
    assert lp.shape == (SAMPLE["draws"],) and np.all(np.isfinite(lp))
    for d in range(SAMPLE["draws"]):
        theta = float(posterior["theta"].values[0, d])
        point = {"theta_logodds__": np.asarray(logit(theta))}
        n = int(kept["n"].values[0, d]) if unbounded else 30
        if unbounded:
            assert n == int(posterior["n"].values[0, d])
            point["n"] = np.asarray(n, dtype=np.int64)
        x = kept["x"].values[0, d, :n].astype(records.dtype)
        records.set_value(x)
        with records_in_containers(model):
            expected = float(logp(point))
        assert lp[d] == pytest.approx(expected, rel=1e-9, abs=1e-9), (d, lp[d], expected)


def test_lp_at_the_sums_level_is_the_joint_with_the_records_summed_out(model):
    idata = pmdp.sample(model=model, augment="sums", random_seed=4, **SAMPLE)
    posterior, stats = _draws(idata)
    theta = posterior["theta"].values[0]
    total = posterior["s_total"].values[0]
    n = posterior["n"].values[0] if "n" in posterior else np.full(theta.shape, 30)
    expected = (
        st.beta(2.0, 3.0).logpdf(theta)
        + np.log(theta * (1.0 - theta))  # the log-odds transform's Jacobian
        + st.binom(n, theta).logpmf(total)
        + S_MECHANISM.logpdf(11.3 - total)
    )
    if "n" in posterior:
        expected += N_MECHANISM.logpdf(30 - n)  # flat prior on n >= 0: log g(n) = 0
    np.testing.assert_allclose(stats["lp"].values[0], expected, rtol=1e-7)


def test_lp_at_the_sums_level_reads_each_release_of_a_table_at_its_own_totals():
    """A table released twice, first as a vector (the counts of ones and zeros), then as a
    scalar (the ones): each release's noise is taken at its own totals."""
    import pytensor.tensor as pt

    both = pmdp.Laplace(epsilon=1.0, sensitivity=2)
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("both", pt.stack([x, 1 - x], axis=1), both, observed=[12.4, 17.1])
        pmdp.PrivatizedSum("ones", x, S_MECHANISM, observed=11.3)
    idata = pmdp.sample(model=model, augment="sums", random_seed=4, **SAMPLE)
    posterior, stats = _draws(idata)
    theta = posterior["theta"].values[0]
    totals, ones = posterior["both_total"].values[0], posterior["ones_total"].values[0]
    np.testing.assert_array_equal(totals[:, 0], ones)
    expected = (
        st.beta(2.0, 3.0).logpdf(theta)
        + np.log(theta * (1.0 - theta))
        + st.binom(30, theta).logpmf(ones)
        + both.logpdf(np.array([12.4, 17.1]) - totals).sum(axis=1)
        + S_MECHANISM.logpdf(11.3 - ones)
    )
    np.testing.assert_allclose(stats["lp"].values[0], expected, rtol=1e-7)


def test_lp_after_the_package_nuts_takes_its_lp_and_adds_the_release_terms(model):
    """NUTS built by the package, last: its lp plus the kernels' release terms (checked against
    the model's density above, ``plain``); the model's whole density is not compiled."""
    from pymc_unbounded_dp.steps import augmentation_step

    step = augmentation_step(model, interweave=False, augment="records")
    with model:
        pm.sample(step=step, random_seed=5, **SAMPLE)
    assert step._log_density is None and step._parameter_lp_slot is not None
    with_interweave = augmentation_step(model, interweave=True, augment="records")
    assert with_interweave._parameter_lp_slot is None  # the move after NUTS changes the state
    assert with_interweave._log_density is not None


def test_lp_at_the_sums_level_keeps_the_model_s_potentials():
    """A ``pm.Potential`` on the parameters (here ``-1.5 theta``) is a term of the model's log
    density at either level: at the sums level, where the records are summed out, it is kept
    beside the prior and the law of the totals."""
    with pm.Model() as model:
        theta = pm.Beta("theta", 2.0, 3.0)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=30)
        pmdp.PrivatizedSum("s", x, S_MECHANISM, observed=11.3)
        pm.Potential("tilt", -1.5 * theta)
    idata = pmdp.sample(model=model, augment="sums", random_seed=4, **SAMPLE)
    posterior, stats = _draws(idata)
    theta = posterior["theta"].values[0]
    total = posterior["s_total"].values[0]
    expected = (
        st.beta(2.0, 3.0).logpdf(theta)
        + np.log(theta * (1.0 - theta))
        + st.binom(30, theta).logpmf(total)
        + S_MECHANISM.logpdf(11.3 - total)
        - 1.5 * theta
    )
    np.testing.assert_allclose(stats["lp"].values[0], expected, rtol=1e-7)
