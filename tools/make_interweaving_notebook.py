"""Write notebooks/interweaving.ipynb (without outputs; execute it afterwards, e.g.
``jupyter execute --inplace notebooks/interweaving.ipynb`` from the repository root)."""

import subprocess
import sys

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
    md("""# Chains that move: interweaving

What you will learn:

* why plain data augmentation mixes slowly on a noisy release: it alternates *records given the
  parameters* and *parameters given the records*, and its lag-one autocorrelation equals the
  **fraction of missing information** (close to 1 when the noise dominates);
* what the non-centred move (`pmdp.Interweave`, on by default in `pmdp.sample`) does: it holds the
  records fixed in a form that does not depend on the parameters and moves the parameters under the
  release's likelihood directly, so one iteration can cross the posterior;
* how to see the difference with ArviZ (traces, ESS, R-hat, autocorrelation, ESS per second), and
  how to compose the step with PyMC's own steps.

Set `PMDP_NOTEBOOK_QUICK=1` for a fast, rough run (the tests do)."""),
    code("""%matplotlib inline
import logging
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a bare kernel
import pymc as pm

logging.getLogger("pymc").setLevel(logging.ERROR)  # sampling chatter; diagnostics shown below

import os
import time

import arviz as az
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import regression as reg

QUICK = os.environ.get("PMDP_NOTEBOOK_QUICK", "0") == "1"
TUNE, DRAWS = (150, 250) if QUICK else (1000, 2000)
print(f"{'quick' if QUICK else 'full'} mode: 2 chains x ({TUNE} tune + {DRAWS} draws)")"""),
    md("""## The paper's regression, privatized

The simulation of Section 6.1 of Awan, Barrientos & Ju: $n = 1000$ records $(x_{i1}, x_{i2}, y_i)$,
nine clamped sufficient statistics released with $\\mathrm{Laplace}(9/\\varepsilon_s)$ noise,
$\\varepsilon_s = 1$, and the count with discrete Laplace noise, $\\varepsilon_n = 0.5$ (see
`regression.ipynb` for the model). The noise on each statistic (scale 9) is large next to the
sampling variation of the statistics, so most of the information the records would carry about
$\\beta$ and $\\tau$ is missing from the release."""),
    code("""data = reg.simulate_regression(n=1000, seed=2024)
release = reg.privatize_regression(data, epsilon_s=1.0, epsilon_n=0.5, seed=7)
model = reg.regression_model(release)
print(f"n = {data.n}, released n_dp = {release.n_dp}; noise {release.mechanism} on each statistic")"""),
    md("""## Two fits: plain data augmentation, then with interweaving

Both use the exact conjugate parameter update given the records (`regression_gibbs_step`) and the
same seed; the only difference is `interweave`. Wall time is measured around each `pmdp.sample`
call (compilation and tuning included), for ESS per second below. The two chains run one after the
other (`cores=1`), so these are seconds of one core."""),
    code("""def fit(interweave):
    with model:
        step = reg.regression_gibbs_step(model)
        start = time.perf_counter()
        idata = pmdp.sample(draws=DRAWS, tune=TUNE, chains=2, cores=1, random_seed=1,
                            progressbar=False, step=step, interweave=interweave,
                            compute_convergence_checks=False)
        return idata, time.perf_counter() - start


idata_plain, seconds_plain = fit(interweave=False)
idata_iw, seconds_iw = fit(interweave="auto")  # the default
print(f"plain data augmentation: {seconds_plain:.0f} s;  with interweaving: {seconds_iw:.0f} s")"""),
    md("""### Traces

Plain data augmentation wanders: each iteration moves $\\beta$ only by about its spread *given*
the imputed records, a small fraction of its posterior spread, and the two chains disagree for
long stretches. With interweaving the traces look like noise around a common level."""),
    code("""def show(title, size=None):
    \"\"\"Title ArviZ's current figure and show it (the same call for ArviZ 0.x and 1.x).\"\"\"
    fig = plt.gcf()
    if size is not None:
        fig.set_size_inches(*size)
    fig.set_layout_engine("constrained")
    fig.suptitle(title)
    plt.show()


for idata, title in [(idata_plain, "plain data augmentation (interweave=False)"),
                     (idata_iw, "with interweaving (the default)")]:
    az.plot_trace(idata, var_names=["beta", "tau"])
    show(title)"""),
    md("""### Effective sample size, R-hat and ESS per second

`ess_bulk` and `r_hat` from `az.summary`; ESS per second divides the bulk ESS by the wall time of
the whole `pmdp.sample` call. Interweaving makes each iteration more expensive (the random walk
makes up to 20 steps), and pays for it many times over in ESS."""),
    code("""summary_plain = az.summary(idata_plain, var_names=["beta", "tau"], kind="diagnostics",
                           round_to="none")
summary_iw = az.summary(idata_iw, var_names=["beta", "tau"], kind="diagnostics", round_to="none")
table = pd.DataFrame({
    ("plain", "ess_bulk"): summary_plain["ess_bulk"].astype(float),
    ("plain", "r_hat"): summary_plain["r_hat"].astype(float),
    ("plain", "ESS/s"): summary_plain["ess_bulk"].astype(float) / seconds_plain,
    ("interweaving", "ess_bulk"): summary_iw["ess_bulk"].astype(float),
    ("interweaving", "r_hat"): summary_iw["r_hat"].astype(float),
    ("interweaving", "ESS/s"): summary_iw["ess_bulk"].astype(float) / seconds_iw,
})
table[("", "ESS/s gain")] = table[("interweaving", "ESS/s")] / table[("plain", "ESS/s")]
print(f"wall time: plain {seconds_plain:.1f} s, interweaving {seconds_iw:.1f} s "
      f"({2 * (TUNE + DRAWS)} iterations each)")
table.round({c: (0 if c[1] == "ess_bulk" else 2) for c in table.columns})"""),
    md("""### Autocorrelation

The lag-one autocorrelation of plain data augmentation is the fraction of missing information
(Liu, Wong & Kong 1994): about 0.99 for the slowest combination of the parameters on this model,
a little less for each parameter on its own (printed below). The autocorrelation then decays over
hundreds of iterations. With interweaving it drops within a few lags. (Plots: the first chain.)"""),
    code("""for idata, title in [(idata_plain, "plain data augmentation"), (idata_iw, "with interweaving")]:
    az.plot_autocorr(idata["posterior"].sel(chain=[0]), var_names=["beta", "tau"], max_lag=100)
    show(f"{title}, first chain", size=(12, 3))


def lag_one(idata, name, index=()):
    draws = idata["posterior"][name].values[(slice(None), slice(None), *index)]
    return np.mean([np.corrcoef(chain[:-1], chain[1:])[0, 1] for chain in draws])


for label, idata in [("plain", idata_plain), ("interweaving", idata_iw)]:
    values = [lag_one(idata, "beta", (j,)) for j in range(3)] + [lag_one(idata, "tau")]
    print(f"lag-one autocorrelation, {label:12s} beta[0..2], tau:", np.round(values, 3))"""),
    md("""### The move's own statistics

`sample_stats` has the random walk's acceptance rate per iteration (`interweave_accept_rate`,
tuned towards 0.234) and its number of steps per iteration (`interweave_steps`, chosen during
tuning so that one iteration's walk crosses the posterior, at most 20)."""),
    code("""stats = idata_iw["sample_stats"]
print("interweave_accept_rate, mean over draws:",
      round(float(stats["interweave_accept_rate"].values.mean()), 3))
print("interweave_steps per iteration (per chain):",
      [int(np.median(chain)) for chain in stats["interweave_steps"].values])"""),
    md("""## Composing the step with PyMC

`pmdp.sample` is a thin wrapper: the same algorithm is `pm.sample` with the record step (here
`pmdp.ReversibleJump`, which also moves the latent $n$; `pmdp.DataAugmentation` for a known $n$)
built with `interweave=False`, any PyMC step for the parameters given the records
(`parameter_step`), and `pmdp.Interweave()` after it. A small model: 100 normal records whose sum
is released with Laplace noise of scale 30, which swamps the sampling spread of the sum (10):
the fraction of missing information about $\\mu$ is about $1800 / (1800 + 100) \\approx 0.95$."""),
    code("""with pm.Model() as small:
    mu = pm.Normal("mu", 0.0, 5.0)
    n = pmdp.SampleSize("n", n_dp=100, mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
    x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
    pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=30.0), observed=160.0)

kwargs = dict(draws=DRAWS, tune=TUNE, chains=2, cores=1, random_seed=3, progressbar=False,
              compute_convergence_checks=False)
with small:
    plain = pmdp.ReversibleJump(interweave=False, parameter_step=pm.Slice([mu]))
    idata_small_plain = pm.sample(step=plain, **kwargs)
with small:
    steps = [pmdp.ReversibleJump(interweave=False, parameter_step=pm.Slice([mu])),
             pmdp.Interweave()]
    idata_small_iw = pm.sample(step=steps, **kwargs)

pd.concat(
    {"plain": az.summary(idata_small_plain, var_names=["mu", "n"], round_to="none"),
     "with Interweave()": az.summary(idata_small_iw, var_names=["mu", "n"], round_to="none")}
)[["mean", "sd", "ess_bulk", "r_hat"]].astype(float).round(2)"""),
    code("""print("lag-one autocorrelation of mu: plain", round(lag_one(idata_small_plain, "mu"), 3),
      " with Interweave()", round(lag_one(idata_small_iw, "mu"), 3))
print("interweave_accept_rate:",
      round(float(idata_small_iw["sample_stats"]["interweave_accept_rate"].values.mean()), 3))"""),
    md("""## When it helps, and when it does not

* **Much missing information** (a noisy release; large $n$ with a small $\\varepsilon_s$): the
  centred step is slow and the non-centred one is fast. The two are complementary, which is what
  interweaving exploits: its rate is at most the geometric mean of theirs.
* **Little missing information** (a precise release, or few records relative to the noise-free
  information): the non-centred conditional of the parameters is narrow, the random walk's steps
  are short and plain data augmentation already mixes; the move then costs time without changing
  much. `interweave=False` turns it off.
* **Discrete records** (Bernoulli, Poisson, ...): a record changes only when its CDF crosses its
  auxiliary uniform, so the target is a step function of the parameters. The walk still works,
  with a lower acceptance rate.
* **Dirichlet records**: the non-centred form evaluates a Gamma quantile for every entry of every
  record at each step, far more expensive than the affine map of a location-scale family.
* A record variable with no non-centred form (a `CustomDist`, a `Categorical`) gets the exact
  full-refresh fallback, whose acceptance falls quickly with $n$ on an informative release.

The details (the non-centred forms per distribution, the exact target of the move, its tuning) are
in [docs/architecture.md](../docs/architecture.md#interweaving-the-non-centred-move-on-the-parameters)."""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/interweaving.ipynb")
# the code cells formatted as `ruff format` formats the repository (CI checks it)
subprocess.run(
    [sys.executable, "-m", "ruff", "format", "--quiet", "notebooks/interweaving.ipynb"], check=True
)
