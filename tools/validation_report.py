"""Print sampler-vs-exact numbers for the validation page (docs/validation.md).

Run: ``python tools/validation_report.py``. For each oracle model: exact posterior mean, estimate,
z-score (batch-means MCSE), acceptance rates, wall time and effective samples per second.
"""

import sys
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mcmc_checks import mcse_of_mean
from oracles import bernoulli_posterior, normal_posterior

import pymc_unbounded_dp as pmdp

S = pmdp.Laplace(epsilon=1.0)


def sample_size(n_dp, epsilon):
    return pmdp.SampleSize("n", n_dp=n_dp, mechanism=pmdp.DiscreteLaplace(epsilon=epsilon))


def bernoulli(n, n_dp=None):
    with pm.Model() as model:
        theta = pm.Beta("theta", 2, 3)
        n = n if n_dp is None else sample_size(n_dp, 0.3)
        x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=n)
        pmdp.PrivatizedSum("s", x, S, observed=8.4)
    return model


def normal(n, n_dp=None):
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.5, 2.0)
        n = n if n_dp is None else sample_size(n_dp, 0.5)
        x = pmdp.Records("x", pm.Normal.dist(mu, 1.0), n=n)
        pmdp.PrivatizedSum("s", x, pmdp.Laplace(scale=3.0), observed=31.0)
    return model


def main():
    n_mech = pmdp.DiscreteLaplace(epsilon=0.3)
    cases = [
        (
            "Bernoulli, bounded n=30",
            bernoulli(30),
            {"theta": bernoulli_posterior(8.4, S, 2, 3, n=30)["theta_mean"]},
        ),
        (
            "Bernoulli, unbounded n_dp=25",
            bernoulli(None, n_dp=25),
            bernoulli_posterior(8.4, S, 2, 3, n_dp=25, n_mechanism=n_mech, n_max=400),
        ),
        (
            "Normal, bounded n=20",
            normal(20),
            {"mu": normal_posterior(31.0, 3.0, 1.0, 0.5, 2.0, n=20)["mu_mean"]},
        ),
        (
            "Normal, unbounded n_dp=18",
            normal(None, n_dp=18),
            normal_posterior(
                31.0,
                3.0,
                1.0,
                0.5,
                2.0,
                n_dp=18,
                n_mechanism=pmdp.DiscreteLaplace(epsilon=0.5),
                n_max=120,
            ),
        ),
    ]
    print(
        "| model | variable | exact | estimate | z | ESS | ESS/s | refresh acc. | birth acc. | death acc. | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, model, exact in cases:
        start = time.perf_counter()
        idata = pmdp.sample(
            model=model,
            draws=4000,
            tune=1000,
            chains=4,
            cores=2,
            random_seed=1,
            progressbar=False,
            compute_convergence_checks=False,
        )
        seconds = time.perf_counter() - start
        stats = idata["sample_stats"]
        rates = [
            float(np.nanmean(stats[k].values)) if k in stats else float("nan")
            for k in ("refresh_accept_rate", "birth_accept_rate", "death_accept_rate")
        ]
        for name, value in exact.items():
            if name.endswith("_mean"):
                name = name[:-5]
            elif name not in ("theta", "mu", "n"):
                continue
            draws = np.asarray(idata["posterior"][name].values, dtype=float)
            ess = float(az.ess(draws))
            z = (draws.mean() - value) / mcse_of_mean(draws)
            print(
                f"| {label} | {name} | {value:.4f} | {draws.mean():.4f} | {z:+.1f} | {ess:.0f} "
                f"| {ess / seconds:.0f} | {rates[0]:.2f} | {rates[1]:.2f} | {rates[2]:.2f} | {seconds:.1f} |"
            )


if __name__ == "__main__":
    main()
