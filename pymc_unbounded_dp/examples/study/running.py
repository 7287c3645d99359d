"""Run a study on Dask: every fit is a task, every finished fit is stored at once.

:func:`run_study` submits the unfinished fits of a :class:`~pymc_unbounded_dp.examples.study.
Workload` to a :class:`distributed.Client` -- a :class:`distributed.LocalCluster` of one
single-threaded worker process per core by default, or an existing scheduler
(``scheduler="tcp://host:8786"``) -- and writes each result to the
:class:`~pymc_unbounded_dp.examples.study.FitStore` as it completes. A fit's record depends only on
the study and the fit (its seeds derive from both), never on the worker, the number of workers or
the order of completion. A fit that fails is reported and not stored (a rerun retries it); an
interrupt (Ctrl-C) cancels the running fits, keeps the finished ones and propagates.

Examples
--------
>>> from pymc_unbounded_dp.examples.study import FitStore, RegressionStudy, run_study
>>> study = RegressionStudy(epsilon_s=(1.0,), epsilon_n=(0.5,), replicates=1, n=100,
...                         draws=50, tune=50)
>>> records = run_study(study, FitStore("pmdp-out/doctest"), workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

from pymc_unbounded_dp.examples.study.base import Fit, Workload
from pymc_unbounded_dp.examples.study.store import FitStore

__all__ = ["StudyFailed", "run_fit", "run_study"]


class StudyFailed(RuntimeError):
    """Some fits raised; the others are stored. ``errors`` maps fit keys to messages."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        lines = "\n".join(f"  {key}: {message}" for key, message in errors.items())
        super().__init__(f"{len(errors)} fit(s) failed and were not stored:\n{lines}")


def run_fit(study: Workload, fit: Fit) -> dict:
    """One task: ``study.run(fit)`` with PyMC's logging quiet (runs on a Dask worker)."""
    import logging

    from pymc_unbounded_dp._pymc_bridge import PYMC_LOGGERS

    for name in PYMC_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    return study.run(fit)


@contextlib.contextmanager
def study_client(scheduler: str | None = None, workers: int | None = None):
    """A :class:`distributed.Client`: connected to ``scheduler``, or on a new
    :class:`distributed.LocalCluster` of ``workers`` single-threaded processes (default: one per
    core). The local cluster is shut down on exit."""
    import logging

    from distributed import Client, LocalCluster

    # a worker that takes over 4 s to exit (compiled-code caches) is killed with a warning: expected
    logging.getLogger("distributed.nanny").setLevel(logging.ERROR)
    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _has_bokeh() -> bool:
    """Whether Dask can serve its dashboard (it needs Bokeh)."""
    try:
        import bokeh  # noqa: F401
    except ImportError:
        return False
    return True


def run_study(
    study: Workload,
    store: FitStore,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    progressbar: bool = True,
    log: Callable[[str], None] = print,
) -> list[dict]:
    """Run (or resume) every fit of ``study`` into ``store``; the records of the whole grid.

    Parameters
    ----------
    study : Workload
        What to run.
    store : FitStore
        Where finished fits are (skipped) and go (each written as soon as it completes).
    scheduler : str, optional
        Address of a running Dask scheduler; default: a local cluster.
    workers : int, optional
        Worker processes of the local cluster (default: one per core).
    progressbar : bool
        A progress bar over fits (and the dashboard link, when there is one).
    log : callable
        Where progress messages go.

    Raises
    ------
    SettingsMismatch
        If ``store`` holds the study with other settings.
    StudyFailed
        If some fits raised (the others are stored; a rerun retries the failed ones).
    KeyboardInterrupt
        Propagated after cancelling the running fits; finished fits stay stored.
    """
    from distributed import as_completed
    from tqdm.auto import tqdm

    store.claim(study.name, study.settings())
    grid = study.fits()
    done = store.done()
    todo = [fit for fit in grid if fit.key not in done]
    log(
        f"{study.name}: {len(grid)} fits, {len(grid) - len(todo)} already in {store.fits}, "
        f"{len(todo)} to run"
    )
    errors: dict[str, str] = {}
    if todo:
        start = time.perf_counter()
        with study_client(scheduler, workers) as client:
            where = (
                scheduler or f"a local cluster of {len(client.scheduler_info()['workers'])} workers"
            )
            log(
                f"running on {where}"
                + (f"; dashboard {client.dashboard_link}" if _has_dashboard(client) else "")
            )
            futures = [
                client.submit(run_fit, study, fit, key=f"{fit.key}-{client.id}", pure=False)
                for fit in todo
            ]
            keys = {future.key: fit.key for future, fit in zip(futures, todo, strict=True)}
            try:
                with tqdm(
                    total=len(grid),
                    initial=len(grid) - len(todo),
                    unit="fit",
                    desc=study.name,
                    disable=not progressbar,
                ) as bar:
                    for future in as_completed(futures):
                        key = keys[future.key]
                        if future.status == "error":
                            errors[key] = (
                                f"{type(future.exception()).__name__}: {future.exception()}"
                            )
                        else:
                            store.write(future.result())
                        future.release()
                        bar.update()
            except BaseException:
                client.cancel(futures)
                raise
        log(f"{len(todo) - len(errors)} fits in {(time.perf_counter() - start) / 60:.1f} min")
    if errors:
        raise StudyFailed(errors)
    return [store.load(fit.key) for fit in grid]


def _has_dashboard(client) -> bool:
    try:
        return bool(client.dashboard_link) and _has_bokeh()
    except (KeyError, AttributeError):
        return False
