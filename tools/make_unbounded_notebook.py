import nbformat as nbf
nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
md("""# The latent sample size under unbounded DP

Under *unbounded* differential privacy the number of records is itself private: the curator releases
a noisy count `n_dp = n + e_n` next to the noisy statistics. This notebook fits a small Bernoulli model
from such a release, shows the posterior of `n` next to `n_dp`, and compares with the common shortcut
of plugging `n_dp` in as if it were the true `n`."""),
code("""%matplotlib inline
import os

import matplotlib.pyplot as plt
from IPython.display import display
import numpy as np
import pymc as pm

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
    idata = pmdp.sample(draws=DRAWS, tune=DRAWS, chains=4, random_seed=1, progressbar=False)

with pm.Model() as plug_in:  # the shortcut: pretend n_dp is the true n
    theta = pm.Beta("theta", 1, 1)
    records = pmdp.Records("x", pm.Bernoulli.dist(theta), n=max(n_dp, 0))
    pmdp.PrivatizedSum("s", records, s_mechanism, observed=s_dp)
    idata_plug_in = pmdp.sample(draws=DRAWS, tune=DRAWS, chains=4, random_seed=1,
                                progressbar=False)"""),
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

`n` is an ordinary posterior variable: ArviZ summaries work on it, and `sample_stats` carries the
acceptance rates of the record refresh and of the birth and death moves."""),
code("""import arviz as az

print(az.summary(idata, var_names=["theta", "n"]))
stats = idata["sample_stats"]
for name in ("refresh_accept_rate", "birth_accept_rate", "death_accept_rate"):
    print(name, float(np.nanmean(stats[name].values)).__round__(3))"""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbf.write(nb, "notebooks/unbounded_sample_size.ipynb")
