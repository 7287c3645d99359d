"""Write notebooks/choosing_epsilon.ipynb (without outputs; execute it afterwards, e.g.
``jupyter execute --inplace notebooks/choosing_epsilon.ipynb`` from the repository root)."""

import subprocess
import sys

import nbformat as nbf

nb = nbf.v4.new_notebook()
md = nbf.v4.new_markdown_cell
code = nbf.v4.new_code_cell
nb.cells = [
    md("""# Choosing epsilon before a release

A curator holds the paper's regression data (Section 6.1 of Awan, Barrientos & Ju). The curator
will release the nine clamped sufficient statistics and the count under unbounded DP, and has to
decide how much privacy budget to spend. A smaller epsilon protects each person better and leaves
the analyst a wider posterior. This notebook puts the two side by side before anything is
published.

What you will learn:

* how to declare the release once as a `pmdp.release.Plan` and walk a grid of total budgets with
  `pmdp.choose_epsilon`, which returns the exact membership risk of a worst-case record and the
  analyst's expected posterior (sd, 95% interval width, coverage, the posterior of `n`) from
  simulated releases of the curator's own records;
* how to read the risk-utility frontier and let `report.recommend()` pick a budget from a utility
  target or a risk cap;
* how to release with the chosen budget (`Plan.release`, exact noise) and fit the published
  release as the analyst would.

Set `PMDP_NOTEBOOK_QUICK=1` for a fast, rough run (the tests do)."""),
    code("""%matplotlib inline
import logging
import os
import tempfile
import warnings
from pathlib import Path

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a bare kernel
logging.getLogger("matplotlib.font_manager").setLevel(logging.ERROR)

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import pymc_unbounded_dp as pmdp
from pymc_unbounded_dp.examples import regression as reg

logging.getLogger("pymc").setLevel(logging.ERROR)  # sampling chatter

QUICK = os.environ.get("PMDP_NOTEBOOK_QUICK", "0") == "1"
GRID = [0.5, 2.0, 8.0] if QUICK else [0.5, 1.0, 2.0, 4.0, 8.0]
REPLICATES, DRAWS, TUNE = (2, 150, 150) if QUICK else (8, 500, 500)
print(
    f"{'quick' if QUICK else 'full'} mode: epsilon in {GRID}, {REPLICATES} simulated releases "
    f"each, one chain of {TUNE} tune + {DRAWS} draws per fit"
)"""),
    md("""## The curator's data and the plan

The records are $(x_{i1}, x_{i2}, y_i)$, $n = 1000$. Each record's statistic is the nine clamped
and rescaled products $t_i = (y, x_1 y, x_2 y, y^2, x_1, x_2, x_1^2, x_1 x_2, x_2^2)$, which lie in
$[-1, 1]$ (the squares in $[0, 1]$). `regression_plan` declares them with their bounds and the
count `n`, under add/remove neighbours. The sensitivity is derived from the bounds, and each
total epsilon is split 2:1 between the statistics and `n`. Only the split matters here. The
budget of the plan is a placeholder, and `choose_epsilon` replaces it with each value of the
grid."""),
    code("""data = reg.simulate_regression(n=1000, seed=2024)
records = {"s": reg.regression_rows(data.x, data.y)}  # one row of 9 statistics per record
plan = reg.regression_plan(epsilon=1.5)
print(plan.describe())"""),
    md("""## The analyst's model

`regression_model(release)` builds the unbounded-DP model of a published
`pmdp.release.Release`. It uses `release.sample_size("n")` for the latent `n` and
`release.privatized_sum("s", ...)` for the nine noisy sums, applying the same clamp and rescale to
the latent records. `choose_epsilon` calls it on every simulated release."""),
    md("""## Walking the grid

For every epsilon of the grid, `choose_epsilon`

* computes the **membership risk** exactly. This is the Bayes risk of the best attacker, who knows
  every other record and the target's value, sees all nine sums and `n_dp`, and decides whether
  the target is in the data. The target is the worst-case record, every coordinate at its bound;
* simulates `REPLICATES` releases of these records under the plan at that epsilon. The noise is
  seeded NumPy noise: a simulation study, not releases to publish. It fits each release with the
  analyst's model and averages the posterior sd, the 95% interval width and the coverage of the
  value the confidential data give. Each figure comes with its Monte Carlo error.

The fits run here one after the other. With `client=` a `distributed.Client` they run as Dask
tasks, and the same `random_seed` gives the same table."""),
    code("""report = pmdp.choose_epsilon(
    records,
    plan,
    reg.regression_model,
    GRID,
    params=["beta", "tau"],
    replicates=REPLICATES,
    draws=DRAWS,
    tune=TUNE,
    random_seed=1,
)
report"""),
    code("""columns = ["epsilon[s]", "epsilon[n]", "membership_risk", "trivial_risk", "advantage"]
columns += [f"{figure}({p})" for p in ["beta[1]", "tau"] for figure in ("width", "width_se")]
columns += ["coverage(beta[1])", "mean(n)", "sd(n)"]
report.table[columns].round(3)"""),
    md("""Reading up the table, the epsilon shrinks. The attacker's error rises toward the trivial
attacker's 0.5, who only guesses, and the advantage falls. At the same time the intervals widen
and the posterior of `n` spreads out. Where a posterior is already close to its prior (`tau` at
the smallest budgets), its width moves by less than its Monte Carlo error. All the risk columns
are exact. All the utility columns are Monte Carlo averages over the replicates, with their
standard errors in the `_se` columns. The paragraphs of `report.paragraphs()` say the same in
words, and they flag a change that is within the Monte Carlo error:"""),
    code("""for text in report.paragraphs()[:2]:
    print(text, end="\\n\\n")"""),
    md("""## The frontier

Each line is one parameter. Its width (utility, lower is better) is plotted against the
attacker's advantage (risk, right is riskier), and each point is one epsilon. Moving left buys
protection with precision."""),
    code("""report.plot()
plt.show()"""),
    md("""## A recommendation

The curator states what the analyst needs, for example 95% intervals of $\\beta$ and $\\tau$ no
wider than 1.5. `recommend` returns the smallest epsilon of the grid that meets it. A curator who
starts from the risk instead, say an advantage of at most 0.3, gets the largest epsilon within
that cap. Both answers come with their reason."""),
    code("""utility_first = report.recommend(target_width=1.5)
risk_first = report.recommend(max_membership_advantage=0.3)
print(utility_first, risk_first, sep="\\n\\n")
chosen = utility_first.value or risk_first.value or GRID[-1]"""),
    md("""`report.to_html(path)` writes all of this (the figure, the table and the paragraphs) as one
self-contained page to share with the people who decide."""),
    code("""page = report.to_html(Path(tempfile.mkdtemp()) / "choosing_epsilon.html")
print(f"{page.name}: {page.stat().st_size // 1024} kB, opens in any browser")"""),
    md("""## Releasing with the chosen epsilon

The release itself uses the plan at the chosen budget and `Plan.release`. This clamps and sums the
confidential rows and adds **exact** noise from a secure sampler (OpenDP's). It is not the
simulation noise of the study above. The file written by `release.save(path)` is all the analyst
receives."""),
    code("""final_plan = reg.regression_plan(epsilon=chosen)
published = final_plan.release(records)
print(published.describe())
print("n_dp =", published["n"].value)"""),
    md("""## The analyst's fit

The analyst builds the same model from the published release and samples it. The parameter step
is `regression_gibbs_step`, which draws exactly from the conditional given the records. The result
should look like one of the replicates of the chosen row."""),
    code("""model = reg.regression_model(published)
with model:
    idata = pmdp.sample(
        draws=DRAWS * 2,
        tune=TUNE,
        chains=2,
        random_seed=3,
        progressbar=False,
        compute_convergence_checks=False,
        step=reg.regression_gibbs_step(model),
    )
rows = {}
for name, index in [("beta", 0), ("beta", 1), ("beta", 2), ("tau", None), ("n", None)]:
    values = idata["posterior"][name].values
    values = (values[..., index] if index is not None else values).ravel()
    label = name if index is None else f"{name}[{index}]"
    lower, upper = np.quantile(values, [0.025, 0.975])
    expected = report.table[f"width({label})"].get(chosen, np.nan) if label != "n" else np.nan
    rows[label] = {"mean": values.mean(), "sd": values.std(), "width": upper - lower,
                   "expected width": expected}
summary = pd.DataFrame(rows).T
summary.round(3)"""),
    code("""posterior = idata["posterior"]
fig, axes = plt.subplots(1, 4, figsize=(12, 2.8))
for ax, (name, index) in zip(axes, [("beta", 1), ("beta", 2), ("tau", None), ("n", None)]):
    values = posterior[name].values
    values = (values[..., index] if index is not None else values).ravel()
    integers = np.arange(values.min() - 0.5, values.max() + 1.5)  # one bar per value of n
    ax.hist(values, bins=integers if name == "n" else 40, color="C0", alpha=0.8)
    ax.locator_params(axis="x", nbins=5)
    ax.set_title(name if index is None else f"{name}[{index}]")
fig.suptitle(f"The analyst's posterior from the release at epsilon = {chosen:g}")
fig.tight_layout()
plt.show()"""),
    md("""Where to go next: [docs/choosing_epsilon.md](../docs/choosing_epsilon.md) explains every
column of the report, and [docs/release.md](../docs/release.md) covers the release file. `pmdp
epsilon` on the command line runs this study and writes the page."""),
]
nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
nbf.write(nb, "notebooks/choosing_epsilon.ipynb")
# the code cells formatted as `ruff format` formats the repository (CI checks it)
subprocess.run(
    [sys.executable, "-m", "ruff", "format", "--quiet", "notebooks/choosing_epsilon.ipynb"],
    check=True,
)
