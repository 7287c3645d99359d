"""Timing of the disclosure-risk module: MinRisk and exact consistency counts.

Run from the repository root::

    python benchmarks/bench_risk.py

Prints one line per (step, records n, dictionary entries N, attributes m) with
the wall-clock seconds of a single run.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout

from pymc_unbounded_dp import risk

CARDINALITIES = [2, 3, 5, 8, 10, 20, 30, 50, 80, 100]  # values per attribute
K = 3


def table(rng: np.random.Generator, n: int, m: int, p_missing: float) -> pd.DataFrame:
    columns = {}
    for j in range(m):
        values = rng.integers(CARDINALITIES[j % len(CARDINALITIES)], size=n).astype(float)
        values[rng.random(n) < p_missing] = np.nan
        columns[f"x{j}"] = values
    return pd.DataFrame(columns, index=pd.RangeIndex(n, name="id"))


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    rng = np.random.default_rng(2006)
    rows = []
    for n, size, m in [(10**3, 10**2, 10), (10**4, 10**3, 10), (10**5, 10**4, 10)]:
        records = table(rng, n, m, 0.02)
        dictionary = table(rng, size, m, 0.10)
        weights = pd.DataFrame(
            rng.normal(size=(n, m)), index=records.index, columns=records.columns
        )
        rule, seconds = timed(risk.min_risk_rule, records, dictionary, weights, K)
        rows.append(("min_risk_rule (k=3)", n, size, m, seconds))
        _, seconds = timed(
            risk.risk, records, rule, dictionary, risk.multiplicative(weights), model="independent"
        )
        rows.append(("risk, independent model", n, size, m, seconds))
        released = risk.disclose(records, rule)
        _, seconds = timed(risk.consistent_counts, released, dictionary)
        rows.append(("consistent_counts, exact", n, size, m, seconds))
    print(f"{'step':<26} {'n':>8} {'N':>8} {'m':>3} {'seconds':>9}")
    for step, n, size, m, seconds in rows:
        print(f"{step:<26} {n:>8} {size:>8} {m:>3} {seconds:>9.3f}")


if __name__ == "__main__":
    main()
