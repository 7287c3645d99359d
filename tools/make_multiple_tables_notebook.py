"""Write notebooks/multiple_tables.ipynb and execute it in place (stored outputs).

Run from the repository root: ``python tools/make_multiple_tables_notebook.py`` (full mode) or
``PMDP_NOTEBOOK_QUICK=1 python tools/make_multiple_tables_notebook.py`` (quick mode, well under a
minute). ``--no-execute`` writes the notebook without outputs.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat as nbf

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "notebooks" / "multiple_tables.ipynb"

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
    md("""# Several record tables in one model

What you will learn:

* how to put **several tables of records** in one model, each with its own (noisy) number of
  records: one `pmdp.Records` per table, one `pmdp.SampleSize` per table under unbounded DP, and one
  or more `pmdp.PrivatizedSum` releases per table;
* how to share **parameters** across the tables: a treatment effect `delta` between two arms of a
  study, and a hierarchical prior that ties the women's and men's time-use tables of the ATUS;
* how to read the fits with ArviZ: `az.summary`, `az.plot_posterior` against the true value, and a
  comparison of two groups' posteriors.

The rules (what makes one table, what is refused and why) are in
[docs/multiple_tables.md](../docs/multiple_tables.md). Set `PMDP_NOTEBOOK_QUICK=1` for a fast,
rough run (the tests do)."""),
    code("""%matplotlib inline
import logging
import warnings

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a bare kernel
# az.plot_posterior asks for a "semibold" font that minimal installs lack; matplotlib then logs
# that it falls back to bold, which changes nothing in the figure
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)

import os

import arviz as az
import matplotlib.pyplot as plt
import numpy as np

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import atus, two_sample

# after the imports: PyMC sets its logger's level when it is imported
logging.getLogger("pymc").setLevel(logging.ERROR)  # sampling chatter; diagnostics shown below

QUICK = os.environ.get("PMDP_NOTEBOOK_QUICK", "0") == "1"
TUNE, DRAWS = (200, 250) if QUICK else (1000, 2000)
ATUS_TUNE, ATUS_DRAWS = (150, 150) if QUICK else (1000, 1000)
ATUS_ROWS = 100 if QUICK else None  # quick mode: a random subset of each sex's table
print(f"{'quick' if QUICK else 'full'} mode: 2 chains x ({TUNE} tune + {DRAWS} draws); "
      f"ATUS: 2 chains x ({ATUS_TUNE} tune + {ATUS_DRAWS} draws)")


def show(title, size=None):
    \"\"\"Title ArviZ's current figure and show it (the same call for ArviZ 0.x and 1.x).\"\"\"
    fig = plt.gcf()
    if size is not None:
        fig.set_size_inches(*size)
    fig.set_layout_engine("constrained")
    fig.suptitle(title)
    plt.show()


ARVIZ_1 = not hasattr(az, "plot_posterior")  # ArviZ 1.x (with PyMC 6) renamed the plots


def plot_posterior(data, var_names, ref_val=None, hdi_prob=0.95):
    \"\"\"``az.plot_posterior`` (ArviZ 0.x) or ``az.plot_dist`` (ArviZ 1.x); ``ref_val``: a
    number, or one number per variable name, drawn as a vertical line.\"\"\"
    if not ARVIZ_1:
        refs = ref_val if not isinstance(ref_val, dict) else {
            name: [{"ref_val": value}] for name, value in ref_val.items()}
        az.plot_posterior(data, var_names=var_names, ref_val=refs, hdi_prob=hdi_prob)
        return
    az.plot_dist(data, var_names=var_names, ci_prob=hdi_prob)
    if ref_val is not None:
        values = [ref_val[name] for name in var_names] if isinstance(ref_val, dict) else [ref_val]
        for ax, value in zip(plt.gcf().axes, values * len(plt.gcf().axes)):
            ax.axvline(value, color="C3")


def plot_forest(data, var_names, hdi_prob=0.95):
    \"\"\"``az.plot_forest`` with combined chains on ArviZ 0.x and 1.x.\"\"\"
    if ARVIZ_1:
        az.plot_forest(data, var_names=var_names, combined=True, ci_probs=[0.5, hdi_prob])
    else:
        az.plot_forest(data, var_names=var_names, combined=True, hdi_prob=hdi_prob)


def summary_stats(data, hdi_prob=0.95):
    \"\"\"``az.summary(kind="stats")`` with a ``hdi_prob`` interval on ArviZ 0.x and 1.x.\"\"\"
    if ARVIZ_1:
        return az.summary(data, kind="stats", ci_prob=hdi_prob)
    return az.summary(data, kind="stats", hdi_prob=hdi_prob)"""),
    md("""## Part 1: a two-sample comparison

A study has a control arm and a treatment arm, with different people in each. For each arm the
curator releases, under unbounded DP,

* the number of people, $n_{dp} = n + $ discrete Laplace noise ($\\varepsilon_n$);
* the sums of the outcome clamped to $[-4, 4]$ and of its square, $\\sum_i (c_i, c_i^2)$, with
  Laplace noise of scale $\\Delta/\\varepsilon_s$, $\\Delta = 4 + 16 = 20$ (one person changes the
  2-vector by at most that much in $L_1$).

The arms are disjoint, so each person's guarantee is $\\varepsilon_s + \\varepsilon_n$ for the whole
release. Here the true control mean is 0, the treatment effect $\\delta = 0.6$ and $\\sigma = 1$.
(`simulate_two_sample` and `privatize_two_sample` use seeded NumPy noise: for simulation studies
only, never for publishing.)"""),
    code("""N_CONTROL, N_TREATMENT = (150, 120) if QUICK else (400, 350)
data = two_sample.simulate_two_sample(n_control=N_CONTROL, n_treatment=N_TREATMENT,
                                      mu_control=0.0, delta=0.6, sigma=1.0, seed=2024)
release = two_sample.privatize_two_sample(data, epsilon_s=2.0, epsilon_n=0.5,
                                          lower=-4.0, upper=4.0, seed=7)
for arm in two_sample.ARMS:
    r = release.arm(arm)
    print(f"{arm:9s}: true n = {r.n}, released n_dp = {r.n_dp}, "
          f"released sums = {np.round(r.values, 1)}")
print(f"noise on each sum: {release.mechanism}; on each count: {release.n_mechanism}")"""),
    md("""### The model: one table per arm

Each arm has its own `SampleSize` and its own `Records` and `PrivatizedSum`; `mu_control`, `delta`
and `sigma` are shared. This is what `two_sample_model(release)` builds:

```python
with pm.Model() as model:
    mu_control = pm.Normal("mu_control", 0.0, 5.0)
    delta = pm.Normal("delta", 0.0, 2.0)
    sigma = pm.HalfNormal("sigma", 2.0)
    means = {"control": mu_control,
             "treatment": pm.Deterministic("mu_treatment", mu_control + delta)}
    for arm in ("control", "treatment"):
        n = pmdp.SampleSize(f"n_{arm}", n_dp=release.arm(arm).n_dp,
                            mechanism=release.n_mechanism)
        y = pmdp.Records(f"y_{arm}", pm.Normal.dist(means[arm], sigma), n=n)
        c = pt.clip(y, -4.0, 4.0)
        pmdp.PrivatizedSum(f"s_{arm}", pt.stack([c, c**2], axis=1), release.mechanism,
                           observed=release.arm(arm).values)
```

`pmdp.sample` refreshes each arm's records and runs the birth/death moves over each arm's own
$n$; the interweaving move on the parameters sees both arms at once."""),
    code("""model = two_sample.two_sample_model(release)
with model:
    idata = pmdp.sample(draws=DRAWS, tune=TUNE, chains=2, cores=2, random_seed=1,
                        progressbar=False, compute_convergence_checks=False)
az.summary(idata, var_names=["mu_control", "delta", "mu_treatment", "sigma",
                             "n_control", "n_treatment"])"""),
    md("""### The treatment effect

The posterior of $\\delta$ with the value the data were simulated from. Its spread combines the
sampling variation of two groups of this size and the privacy noise on each arm's sums."""),
    code("""plot_posterior(idata, var_names=["delta"], ref_val=data.delta)
show("treatment effect delta (reference line: the true value)", size=(6, 3.5))
delta = idata["posterior"]["delta"].values.ravel()
print(f"P(delta > 0 | release) = {np.mean(delta > 0):.3f}")"""),
    md("""### Each arm's number of people

Each arm's $n$ is latent with its own noisy count; the posteriors sit around the released
$n_{dp}$ (reference lines: the true counts, which the model never sees)."""),
    code("""plot_posterior(idata, var_names=["n_control", "n_treatment"],
               ref_val={"n_control": release.control.n, "n_treatment": release.treatment.n})
show("latent number of people per arm (reference lines: true n)", size=(10, 3.5))
for arm in two_sample.ARMS:
    print(f"n_{arm}: released n_dp = {release.arm(arm).n_dp}, true n = {release.arm(arm).n}")"""),
    md("""## Part 2: ATUS, women and men with a shared hyperprior

The 2019 American Time Use Survey (U.S. Bureau of Labor Statistics, public-use microdata) reduced
to three daily time shares per respondent, as in Section 6.2 of Awan, Barrientos & Ju:
personal care, eating and drinking, and everything else. Here the women's and men's tables are
released separately, each with its own noisy count and its own noisy sum of clamped log-shares
$\\sum_i \\log\\max(x_{ij}, 1/1440)$ (see `atus.ipynb` for the single-table model), and modelled
jointly:

$$x_{\\text{sex},i} \\sim \\mathrm{Dirichlet}(\\alpha_\\text{sex}), \\qquad
\\log \\alpha_{\\text{sex},j} = m_j + \\tau z_{\\text{sex},j}, \\qquad
m_j \\sim N(2, 1.5),\\ \\tau \\sim \\mathrm{HalfNormal}(0.5),\\ z_{\\text{sex},j} \\sim N(0, 1).$$

The sexes share $m$ and $\\tau$: where the releases do not tell them apart, the model pools them.
The data are read from `$PMDP_ATUS_DIR` or `../shared/data/atus2019` next to the repository; if
neither exists a simulated stand-in is used, and the next cell says so."""),
    code("""by_sex = atus.load_atus_by_sex()
if any(d.simulated for d in by_sex.values()):
    print("NOTE: the ATUS files were not found; using SIMULATED stand-ins (the paper's MLE)")
else:
    print("real ATUS 2019 data: " + ", ".join(f"{sex} n = {d.n}" for sex, d in by_sex.items()))
rng = np.random.default_rng(2019)
if ATUS_ROWS is not None:
    by_sex = {sex: atus.AtusData(d.x[rng.choice(d.n, ATUS_ROWS, replace=False)],
                                 d.source, d.simulated)
              for sex, d in by_sex.items()}
    print(f"quick mode: a random subset of {ATUS_ROWS} respondents per sex")
EPSILON_S = 5.0 if QUICK else 1.0
releases = {sex: atus.privatize_atus(d, epsilon_s=EPSILON_S, epsilon_n=0.5, seed=10 + i)
            for i, (sex, d) in enumerate(by_sex.items())}
for sex, r in releases.items():
    print(f"{sex:6s}: n = {r.n}, released n_dp = {r.n_dp}, epsilon_s = {r.epsilon_s}")
    print(f"        non-private mean shares: {np.round(by_sex[sex].x.mean(axis=0), 3)}")"""),
    md("""`atus_joint_model` builds the two tables (`x_female` with `n_female`, `x_male` with `n_male`)
and the shared hyperprior; the deterministic `mean_share_<sex>` $= \\alpha/\\sum_j\\alpha_j$ is each
sex's expected share of the day per activity. Plain data augmentation here (`interweave=False`:
the non-centred move of Dirichlet records evaluates a Gamma quantile per entry and step, slow for
a notebook). Its weak spot is the overall concentration $\\sum_j \\alpha_j$ (the common level of
$m$): the release of log-shares says little about it beyond what the imputed records say, so the
chain moves it slowly, and with it every share. Check `ess_bulk` and `r_hat` below: the quick
mode's few draws are for a smoke run only; the full mode runs longer on the whole tables."""),
    code("""joint = atus.atus_joint_model(releases["female"], releases["male"])
with joint:
    idata_atus = pmdp.sample(draws=ATUS_DRAWS, tune=ATUS_TUNE, chains=2, cores=2, random_seed=3,
                             progressbar=False, interweave=False,
                             compute_convergence_checks=False)
az.summary(idata_atus, var_names=["m", "tau", "mean_share_female", "mean_share_male",
                                  "n_female", "n_male"])"""),
    md("""### Comparing the sexes' mean shares

`az.plot_forest` puts both sexes' posteriors of the mean shares side by side; the difference
women minus men is computed on the draws (same chain and draw), so its interval accounts for the
posterior correlation."""),
    code("""plot_forest(idata_atus, var_names=["mean_share_female", "mean_share_male"])
show("posterior mean shares of the day, by sex (95% HDI)", size=(8, 4))
posterior = idata_atus["posterior"]
difference = (posterior["mean_share_female"] - posterior["mean_share_male"]).rename("female - male")
plot_posterior(difference.to_dataset(), var_names=["female - male"], ref_val=0.0)
show("difference of mean shares, women minus men", size=(12, 3.5))
summary_stats(difference.to_dataset())"""),
    md("""## Where to go next

* [docs/multiple_tables.md](../docs/multiple_tables.md): how tables are formed, a stratified
  design, what the model builder refuses, and that `pmdp.mcem` handles one table only for now.
* `atus.ipynb` and `regression.ipynb`: the paper's single-table workloads.

Data: U.S. Bureau of Labor Statistics, American Time Use Survey 2019 (public-use microdata),
reduced as in Awan, Barrientos & Ju, *Statistical Inference for Privatized Data with Unknown
Sample Size* (arXiv 2406.06231)."""),
]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}


def main(argv) -> None:
    if "--no-execute" not in argv:
        from nbclient import NotebookClient

        os.environ.setdefault("MPLBACKEND", "Agg")
        start = time.perf_counter()
        NotebookClient(
            nb,
            kernel_name="python3",
            timeout=1800,
            resources={"metadata": {"path": str(TARGET.parent)}},
        ).execute()
        print(f"executed in {time.perf_counter() - start:.0f} s")
    nbf.write(nb, TARGET)
    # the code cells formatted as `ruff format` formats the repository (CI checks it)
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", str(TARGET)], check=True)
    print(f"wrote {TARGET.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
