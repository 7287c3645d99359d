"""Write notebooks/unbounded_sample_size.ipynb (without outputs; execute it afterwards, e.g.
``jupyter execute --inplace notebooks/unbounded_sample_size.ipynb`` from the repository root)."""

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
md("""# The latent sample size under unbounded DP

Under *unbounded* differential privacy the number of records is itself private: the curator releases
a noisy count `n_dp = n + e_n` next to the noisy statistics. This notebook fits a small Bernoulli model
from such a release, shows the posterior of `n` next to `n_dp`, compares with the common shortcut
of plugging `n_dp` in as if it were the true `n`, and checks the fit against the releases."""),
code("""%matplotlib inline
import logging
import os
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a bare kernel
# ArviZ 0.x plotting on Matplotlib >= 3.11 (not ours to fix)
warnings.filterwarnings("ignore", message="Passing a dict or None as alias_mapping")

import matplotlib.pyplot as plt
from IPython.display import display
import numpy as np
import pymc as pm

logging.getLogger("pymc").setLevel(logging.ERROR)  # sampling chatter; diagnostics shown below

import pymc_unbounded_dp as pmdp

QUICK = os.environ.get("PMDP_NOTEBOOK_QUICK") == "1"
DRAWS = 400 if QUICK else 2000
if QUICK:
    print("quick mode: fewer draws, for CI")
rng = np.random.default_rng(2026)"""),
md("""## A confidential data set and its release

200 people answer a yes/no question (true share 0.3). The curator releases the number of *yes*
answers with Laplace noise (epsilon = 1) and the number of respondents with discrete Laplace noise
(epsilon = 0.05: the count is well protected). Seeded `simulate` is for studies like this one; a real
release would use `mechanism.release(...)`, the exact, cryptographically secure sampler."""),
code("""n_true, theta_true = 200, 0.3
x = rng.random(n_true) < theta_true
s_mechanism = pmdp.Laplace(epsilon=1.0)
n_mechanism = pmdp.DiscreteLaplace(epsilon=0.05)
s_dp = x.sum() + s_mechanism.simulate(random_seed=rng)
n_dp = int(n_true + n_mechanism.simulate(random_seed=rng))
print(f"true count {x.sum()}, released {s_dp:.1f};  true n {n_true}, released n_dp {n_dp}")"""),
md("""## The model: `n` is a parameter

`SampleSize` makes `n` latent (flat prior on n >= 0 here) and `Records(..., n=n)` lets the number of
records follow it. `pmdp.sample` then assigns the reversible-jump step to `n` and NUTS to `theta`."""),
code("""with pm.Model() as unbounded:
    theta = pm.Beta("theta", 1, 1)
    n = pmdp.SampleSize("n", n_dp=n_dp, mechanism=n_mechanism)
    records = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
    pmdp.PrivatizedSum("s", records, s_mechanism, observed=s_dp)
    idata = pmdp.sample(draws=DRAWS, tune=DRAWS, chains=4, random_seed=1, progressbar=False,
                        compute_convergence_checks=False)  # R-hat and ESS: see Diagnostics

with pm.Model() as plug_in:  # the shortcut: pretend n_dp is the true n
    theta = pm.Beta("theta", 1, 1)
    records = pmdp.Records("x", pm.Bernoulli.dist(theta), n=max(n_dp, 0))
    pmdp.PrivatizedSum("s", records, s_mechanism, observed=s_dp)
    idata_plug_in = pmdp.sample(draws=DRAWS, tune=DRAWS, chains=4, random_seed=1,
                                progressbar=False, compute_convergence_checks=False)"""),
md("""## Posterior of `n` next to `n_dp`

The posterior of `n` combines the noisy count with what the noisy sum says about `n` through
`theta`; its spread reflects the privacy noise of both releases."""),
code("""n_draws = idata["posterior"]["n"].values.ravel()
values, counts = np.unique(n_draws, return_counts=True)
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.bar(values, counts / counts.sum(), width=1.0, color="C0", alpha=0.7, label="posterior of n")
ax.axvline(n_dp, color="C3", lw=2, label=f"released n_dp = {n_dp}")
ax.axvline(n_true, color="k", ls="--", label=f"true n = {n_true}")
ax.set_xlabel("n")
ax.set_ylabel("posterior probability")
ax.legend()
display(fig)
plt.close(fig)
print("posterior mean of n:", n_draws.mean().round(1), " 94% interval:",
      np.percentile(n_draws, [3, 97]))"""),
md("""## What plugging in `n_dp` does to `theta`

Treating `n_dp` as exact ignores the uncertainty in the denominator of the share, so its posterior
for `theta` is too narrow (and shifted when `n_dp` is off)."""),
code("""fig, ax = plt.subplots(figsize=(7, 3.5))
for data, label in [(idata, "unbounded DP (n latent)"), (idata_plug_in, "plug-in n = n_dp")]:
    ax.hist(data["posterior"]["theta"].values.ravel(), bins=60, density=True, histtype="step",
            lw=2, label=label)
ax.axvline(theta_true, color="k", ls="--", label="true theta")
ax.set_xlabel("theta")
ax.legend()
display(fig)
plt.close(fig)
for data, label in [(idata, "unbounded"), (idata_plug_in, "plug-in")]:
    draws = data["posterior"]["theta"].values.ravel()
    print(f"{label:10s} mean {draws.mean():.3f}  sd {draws.std():.3f}")"""),
md("""## Diagnostics

`n` is an ordinary posterior variable: ArviZ summaries work on it (R-hat and effective sample
sizes below), and `sample_stats` carries the acceptance rates of the record refresh and of the birth
and death moves."""),
code("""import arviz as az

print(az.summary(idata, var_names=["theta", "n"]))
stats = idata["sample_stats"]
for name in ("refresh_accept_rate", "birth_accept_rate", "death_accept_rate"):
    print(name, float(np.nanmean(stats[name].values)).__round__(3))"""),
md("""## Posterior predictive check of the releases

Would the model, as fitted, produce releases like the ones we saw? For each posterior draw of
`(theta, n)`, `pmdp.sample_posterior_predictive` draws *that draw's* `n` records, sums them, adds
the Laplace noise, and draws `n_dp = n + noise`: the predictive distribution of the two released
numbers. (The records themselves are not drawn: their number changes from draw to draw; see
`docs/predictive.md`.) `extend_inferencedata=True` adds the `posterior_predictive` group to
`idata`, next to `observed_data`, which holds the released values."""),
code("""idata = pmdp.sample_posterior_predictive(idata, model=unbounded, extend_inferencedata=True,
                                         random_seed=3)
if hasattr(az, "plot_ppc"):  # ArviZ 0.x (PyMC 5); a scalar release needs kind="scatter"
    az.plot_ppc(idata, var_names=["s", "n_dp"], kind="scatter", num_pp_samples=100,
                figsize=(9, 3.5), random_seed=4)
else:  # ArviZ 1.x (PyMC 6): the same check for a scalar release
    az.plot_ppc_tstat(idata, var_names=["s", "n_dp"])
fig = plt.gcf()
display(fig)
plt.close(fig)
predictive, observed = idata["posterior_predictive"], idata["observed_data"]
for name in ("s", "n_dp"):
    draws = predictive[name].values.ravel()
    value = observed[name].values.item()
    print(f"{name}: released {value:.1f}, predictive 94% interval "
          f"{np.percentile(draws, [3, 97]).round(1)}, P(replicate >= released) = "
          f"{(draws >= value).mean():.2f}")"""),
md("""Read it as a calibration check: the black dot (the released value) should sit well inside the
predictive distribution (the dashed curve, which ArviZ labels the predictive mean: for a single
released number it is the density of all the replicates; the blue dots are single replicates). A tail
probability `P(replicate >= released)` near 0 or 1 would say that the model, the prior or the stated
noise does not fit the release."""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/unbounded_sample_size.ipynb")
