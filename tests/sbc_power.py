"""Power of the SBC rank assertion (``mcmc_checks.assert_sbc_ranks_uniform``), by simulating the
rank statistic alone (not a test; ``python tests/sbc_power.py``, about a minute of one core).

A replication draws a truth ``x0 ~ N(0, 1)`` and ``L`` posterior draws ``N(0, c^2)``: a posterior
whose sd is off by the factor ``c`` (the rank of the truth is its PIT under the sampled law, so a
normal location model loses no generality for a pure scale error). The draws are an AR(1) series
with lag-one correlation ``rho`` (``rho = 0``: independent draws; ``rho > 0``: a chain thinned too
little, which widens the rank distribution like a too-narrow posterior). An SBC run of ``R``
replications fails when the assertion fails: chi-square of 10 bins p <= 1e-4, or ``|z| >= 3`` for
the mean rank or the spread of the ranks.
"""

import sys

import numpy as np
from mcmc_checks import P_LIMIT, sbc_rank_z, sbc_ranks_uniform


def failure_rate(replications, kept, c, rho=0.0, runs=2000, seed=0):
    rng = np.random.default_rng(seed)
    fails = 0
    for _ in range(runs):
        truth = rng.standard_normal(replications)
        eps = rng.standard_normal((replications, kept))
        draws = np.empty_like(eps)
        draws[:, 0] = eps[:, 0]
        for j in range(1, kept):
            draws[:, j] = rho * draws[:, j - 1] + np.sqrt(1 - rho**2) * eps[:, j]
        draws *= c
        ranks = (draws < truth[:, None]).sum(axis=1)
        p = sbc_ranks_uniform(ranks, kept + 1)
        z_mean, z_spread = sbc_rank_z(ranks, kept + 1)
        fails += not (p > P_LIMIT and abs(z_mean) < 3 and abs(z_spread) < 3)
    return fails / runs


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    print("R x L | rho | c=1 | c=0.8 | c=1.2")
    for replications, kept, rho in [
        (120, 99, 0.0),
        (500, 39, 0.0),
        (500, 39, 0.05),
        (500, 39, 0.1),
    ]:
        rates = [failure_rate(replications, kept, c, rho, runs) for c in (1.0, 0.8, 1.2)]
        print(
            f"{replications} x {kept} | {rho} | " + " | ".join(f"{r:.3f}" for r in rates),
            flush=True,
        )
