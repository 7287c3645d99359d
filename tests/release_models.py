"""Small models of a release that several test files build."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

import pymc_unbounded_dp as pmdp


def histogram_model(observed, dims=None, coords=None, n=10, build=None) -> pm.Model:
    """Counts of three categories of ``Categorical(p)`` records released as ``s`` (with ``dims``).

    ``n``: the number of records, or ``("latent", n_dp)`` for a latent ``n`` released as ``n_dp``
    by ``DiscreteLaplace(0.5)``; ``build(model)`` runs first (e.g. to declare the dims).
    """
    with pm.Model(coords=coords) as model:
        if build is not None:
            build(model)
        p = pm.Dirichlet("p", np.ones(3))
        if isinstance(n, tuple):
            n = pmdp.SampleSize("n", n_dp=n[1], mechanism=pmdp.DiscreteLaplace(epsilon=0.5))
        x = pmdp.Records("x", pm.Categorical.dist(p), n=n)
        pmdp.PrivatizedSum(
            "s",
            pt.stack([pt.eq(x, k) for k in range(3)], axis=1),
            pmdp.Laplace(epsilon=1.0, sensitivity=3.0),
            observed=observed,
            dims=dims,
        )
    return model
