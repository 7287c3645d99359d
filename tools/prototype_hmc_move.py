# ruff: noqa: E402
"""Prototype, not package code: would a short HMC move on the non-centred target beat the random walk?

Issue 30 asked to consider MALA or a short HMC with the compiled gradient for the interweaving move.
This samples the regression (N = 1000, the release of ``benchmarks/bench_ess.py``) for 500 tuning +
300 draws with ``pmdp.sample``'s default, takes the last state and fresh ancillaries ``u``, and at
that fixed ``u`` compares, all in numba with PyTensor's numba backend:

* the package's random walk (the tuner's shape and scale), K = 1 and 5 steps per kept draw;
* HMC with the gradient of the same graph (``pt.grad``), mass matrix from the tuner's posterior
  covariance ("post") or from the conditional's own covariance ("cond", estimated from a first HMC
  run), for several step sizes ``eps`` and leapfrog steps ``L``.

It prints microseconds of compute per effective draw (smallest bulk ESS over the coordinates) of
``theta | u``. Results are in docs/benchmarks.md ("Tried and not adopted: HMC for the move").

Run: ``python tools/prototype_hmc_move.py conj`` (examples.regression with its conjugate step) or
``... user`` (the user-written model, NUTS); about 2 minutes each.
"""

import sys
import time

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "reference")]
import math

import arviz as az
import bench_ess
import numba as nb
import numpy as np
import pytensor.tensor as pt

import pymc_unbounded_dp as pmdp
import pymc_unbounded_dp.interweave as IW
from pymc_unbounded_dp.examples import regression as regression_example
from pymc_unbounded_dp.noncentred import numba_function

inst = []
orig = IW.Interweave.__init__


def init(self, *a, **k):
    orig(self, *a, **k)
    inst.append(self)


IW.Interweave.__init__ = init
release, example = bench_ess.regression_release(seed=1)
which = sys.argv[1] if len(sys.argv) > 1 else "conj"
model = (
    regression_example.regression_model(example)
    if which == "conj"
    else bench_ess.user_regression_model(example)
)
with model:
    step = regression_example.regression_gibbs_step(model) if which == "conj" else None
    tr = pmdp.sample(
        draws=300,
        tune=500,
        chains=1,
        cores=1,
        step=step,
        progressbar=False,
        compute_convergence_checks=False,
        random_seed=3,
        return_inferencedata=False,
    )
iw = inst[-1]
print("names", iw._names, "steps", iw._tuner.final_steps(), "scale", iw._tuner.params.scale)
point = tr.point(-1)
point = {k: point[k] for k in model.initial_point()}
nc = iw.noncentred
rng = np.random.default_rng(0)
u = nc.ancillary(nc.values(point), rng)
ft = iw._flat_target
args = ft.arguments(point, u)
flat0 = np.concatenate([np.ravel(point[n]) for n in iw._names]).astype(float)
d = flat0.size
layout = IW._flat_layout(point, iw._names)
# gradient graph: the move's own flat target graph, differentiated
inputs, graph = nc.flat_log_target_graph(layout)
g = pt.grad(graph, inputs[0])
fn = numba_function(inputs, [graph, g])
vg = fn.vm.jit_fn
lp = ft.fn
print(lp(flat0, *args)[0], vg(flat0, *args)[0])
# time
for f, name in ((lp, "logp"), (vg, "value+grad")):

    @nb.njit
    def loop(f, x, args, m):
        s = 0.0
        for _ in range(m):
            s += f(x, *args)[0].item()
        return s

    loop(f, flat0, args, 2)
    t = time.perf_counter()
    loop(f, flat0, args, 2000)
    print(name, (time.perf_counter() - t) / 2000 * 1e6, "us")
# finite-difference check
e = 1e-6
fd = np.array(
    [
        (lp(flat0 + e * np.eye(d)[i], *args)[0] - lp(flat0 - e * np.eye(d)[i], *args)[0]) / (2 * e)
        for i in range(d)
    ]
)
print("grad err", np.max(np.abs(fd - vg(flat0, *args)[1])), np.abs(fd).max())
# conditional covariance from RW: use tuner's chol
chol = np.ascontiguousarray(iw._tuner.params.chol)
M_inv = chol @ chol.T  # inverse mass = posterior cov estimate


@nb.njit
def hmc(vg, args, x, chol, eps, L, momenta, log_u):
    # mass matrix M = (chol chol^T)^{-1}; p ~ N(0, M): p = solve(chol^T, z)
    Minv = chol @ chol.T
    out = np.empty((momenta.shape[0], x.shape[0]))
    acc = 0.0
    r = vg(x, *args)
    lpx = r[0].item()
    gx = r[1].copy()
    for k in range(momenta.shape[0]):
        p = np.linalg.solve(chol.T, momenta[k])
        h0 = -lpx + 0.5 * p @ (Minv @ p)
        q = x.copy()
        gq = gx.copy()
        p = p + 0.5 * eps * gq
        for leap in range(L):
            q = q + eps * (Minv @ p)
            r = vg(q, *args)
            gq = r[1].copy()
            lpq = r[0].item()
            if leap < L - 1:
                p = p + eps * gq
        p = p + 0.5 * eps * gq
        h1 = -lpq + 0.5 * p @ (Minv @ p)
        a = h0 - h1
        if not math.isnan(a):
            acc += math.exp(min(a, 0.0))
            if log_u[k] < a:
                x = q
                lpx = lpq
                gx = gq
        out[k] = x
    return out, acc / momenta.shape[0]


@nb.njit
def rw(lp, args, x, chol, scale, K, z, log_u):
    out = np.empty((z.shape[0], x.shape[0]))
    lpx = lp(x, *args)[0].item()
    acc = 0
    for k in range(z.shape[0]):
        for j in range(K):
            prop = x + chol @ (scale * z[k, j])
            lprop = lp(prop, *args)[0].item()
            if log_u[k, j] < lprop - lpx:
                x = prop
                lpx = lprop
                acc += 1
        out[k] = x
    return out, acc / (z.shape[0] * K)


def ess_min(draws):
    return min(az.ess(draws[:, i][None, :]) for i in range(draws.shape[1]))


N = 4000
r = np.random.default_rng(1)
for K in (1, 5):
    z = r.standard_normal((N, K, d))
    lu = np.log(r.random((N, K)))
    rw(lp, args, flat0, chol, iw._tuner.params.scale, K, z[:2], lu[:2])
    t = time.perf_counter()
    out, acc = rw(lp, args, flat0, chol, iw._tuner.params.scale, K, z, lu)
    dt = time.perf_counter() - t
    e = ess_min(out)
    print(
        f"RW K={K}: acc {acc:.2f} minESS {e:.0f}/{N} evals per ESS {N * K / e:.1f} us per ESS {dt / e * 1e6:.0f}"
    )
mom = r.standard_normal((N, d))
lu = np.log(r.random(N))
out, acc = hmc(vg, args, flat0, chol, 0.2, 10, mom, lu)
cchol = np.linalg.cholesky(np.cov(out.T))
for label, ch in (("post", chol), ("cond", cchol)):
    for eps, L in (
        (0.1, 20),
        (0.1, 40),
        (0.15, 15),
        (0.15, 25),
        (0.2, 15),
        (0.3, 8),
        (0.3, 15),
        (0.4, 8),
        (0.5, 5),
    ):
        chol = ch
        print(label, end=" ")
        mom = r.standard_normal((N, d))
        lu = np.log(r.random(N))
        hmc(vg, args, flat0, chol, eps, L, mom[:2], lu[:2])
        t = time.perf_counter()
        out, acc = hmc(vg, args, flat0, chol, eps, L, mom, lu)
        dt = time.perf_counter() - t
        e = ess_min(out)
        print(
            f"HMC eps={eps} L={L}: acc {acc:.2f} minESS {e:.0f}/{N} grads per ESS {N * L / e:.1f} us per ESS {dt / e * 1e6:.0f}"
        )
