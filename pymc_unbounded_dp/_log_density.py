r"""The model's log density at a draw: the ``lp`` sample stat of the augmentation steps.

PyMC's NUTS reports ``lp``, the log density of the model at its draw (on the transformed scale,
Jacobians included). Inside the package's steps NUTS sees a target without the release terms
(constants of its update, see
:func:`~pymc_unbounded_dp._step_assembly.without_release_terms`), and the steps after it (the
records step at the sums level, :class:`~pymc_unbounded_dp.Interweave`) move the state again; so the augmentation step evaluates the log density itself at the end of each
iteration, of the latent state the chain actually holds:

* **records level**: PyMC's ``model.logp()`` with the iteration's records in the containers,

  .. math::

      \log \pi(\theta) + \log g(n) + \sum_{i \le n} \log f(x_i \mid \theta)
      + \log \eta_s(s_{dp} - T(x)) + \log \eta_n(n_{dp} - n);

* **sums level**: the same with the records summed out, the latent state being the true totals
  ``T`` (the law of the sums in place of the records' density),

  .. math::

      \log \pi(\theta) + \log g(n) + \log p_n(T \mid \theta)
      + \log \eta_s(s_{dp} - T) + \log \eta_n(n_{dp} - n),

  where ``p_n`` is the normal approximation for a table without an exact law.

The two levels hold different latent states, so their ``lp`` values are not comparable.

Where NUTS built by the package ends the iteration at the records level (no interweaving move
after it), its own ``lp`` is the first line without the release terms, at the same state: the
augmentation step adds them from the record kernels' residuals
(:meth:`~pymc_unbounded_dp.steps.RecordsStep.release_log_density`) and builds no
:class:`ModelLogDensity`, whose pass over every record cost ~50 us per iteration on the paper's
regression.
"""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
from pymc.pytensorf import compile as compile_pymc

from pymc_unbounded_dp._compile import CompiledModel
from pymc_unbounded_dp._graph import KERNEL_MODE, without_guards
from pymc_unbounded_dp._registry import observed_value

__all__ = ["ModelLogDensity"]


class ModelLogDensity:
    """``point -> lp``: the model's log density at the chain's current latent state.

    Parameters
    ----------
    compiled : CompiledModel
    sums_step : SumsStep, optional
        At the sums level, the step holding the latent totals (its laws' ``latent`` containers
        and :meth:`~pymc_unbounded_dp.sums.SumsStep.release_totals`); ``None`` at the records
        level, where the records are read from the model's containers.

    Examples
    --------
    >>> import pymc as pm
    >>> import pymc_unbounded_dp as pmdp
    >>> from pymc_unbounded_dp._compile import compile_model
    >>> with pm.Model() as model:
    ...     theta = pm.Beta("theta", 1, 1)
    ...     x = pmdp.Records("x", pm.Bernoulli.dist(theta), n=5)
    ...     _ = pmdp.PrivatizedSum("s", x, pmdp.Laplace(epsilon=1.0), observed=2.0)
    >>> lp = ModelLogDensity(compile_model(model))
    >>> value = lp(model.initial_point())
    """

    def __init__(self, compiled: CompiledModel, sums_step=None):
        model = compiled.model
        self.compiled = compiled
        self.sums_step = sums_step
        if sums_step is None:
            graph = model.logp()
        else:
            dropped = {r.rv for r in compiled.blocks.records}
            dropped |= {s.release_rv for s in compiled.blocks.sums}
            kept = [
                rv
                for rv in model.free_RVs + model.observed_RVs + model.potentials
                if rv not in dropped
            ]
            terms = [law.latent_log_density() for law in sums_step.laws]
            graph = model.logp(vars=kept) + pt.sum(pt.stack(terms))
        (graph,) = without_guards([graph])
        self._names = [v.name for v in model.value_vars]
        self._fn = compile_pymc(
            list(model.value_vars), graph, on_unused_input="ignore", mode=KERNEL_MODE
        )

    def __call__(self, point: dict) -> float:
        """The log density at ``point`` and the latent state now in the model (records or
        totals)."""
        value = float(self._fn(*(point[name] for name in self._names)))
        if self.sums_step is not None:
            value += self._release_terms(self.sums_step.release_totals())
        return value

    def _release_terms(self, totals: list[np.ndarray]) -> float:
        """``sum log eta_s(s_dp - T)`` over every released sum, at each table's totals."""
        model, out = self.compiled.model, 0.0
        for table, table_totals in zip(self.compiled.tables, totals):
            start = 0
            for spec in table.spec.sums:
                size = int(np.prod(spec.shape, dtype=int))
                released = observed_value(model, spec.release_rv).reshape(-1)
                noise = released - table_totals[start : start + size]
                out += float(np.sum(spec.mechanism.logpdf(noise)))
                start += size
        return out
