"""The Table 2 study's bookkeeping: the grid, resuming, the summary table (no fits are run)."""

import json
import math

import numpy as np
import pytest

from pymc_unbounded_dp.examples import mle_study


def fake_record(fit: mle_study.Fit, config, converged: str, beta0: float) -> dict:
    estimate = {p: 0.0 for p in mle_study.PARAMETERS}
    estimate["beta[0]"] = beta0
    return {"fit": {"replicate": fit.replicate, "epsilon_n": fit.epsilon_n}, "key": fit.key,
            "settings": config.settings(), "estimate": estimate, "converged": converged,
            "seconds": 10.0 + fit.replicate}


def test_grid_covers_each_data_set_and_epsilon_n():
    config = mle_study.MLEStudyConfig(replicates=3)
    grid = mle_study.fits(config)
    assert len(grid) == 3 * len(mle_study.EPSILON_N)
    assert len({f.key for f in grid}) == len(grid)
    assert mle_study.Fit(0, math.inf).key == "mle_r000_eninf"


def test_summary_uses_interior_fits_and_counts_endings():
    config = mle_study.MLEStudyConfig(epsilon_n=(1.0,), replicates=4)
    grid = mle_study.fits(config)
    records = [fake_record(grid[0], config, "interior", 1.0),
               fake_record(grid[1], config, "interior", 3.0),
               fake_record(grid[2], config, "boundary", 100.0),
               fake_record(grid[3], config, "budget", -100.0)]
    summary = mle_study.summarise(records)
    row = summary.loc[1.0]
    assert row["fits"] == 4 and row["interior"] == 2
    assert row["beta[0] mean"] == 2.0 and np.isclose(row["beta[0] sd"], np.sqrt(2.0))
    assert row["share boundary"] == 0.25 and row["share budget"] == 0.25
    assert "| 1 | 4 | 2.000 (1.414)" in mle_study.markdown_table(records)


def test_finished_fits_are_found_and_other_settings_refused(tmp_path):
    config = mle_study.MLEStudyConfig(replicates=1)
    fit = mle_study.fits(config)[0]
    path = tmp_path / "fits" / f"{fit.key}.json"
    path.parent.mkdir()
    path.write_text(json.dumps(fake_record(fit, config, "interior", 0.5)))
    assert mle_study.finished(tmp_path, fit, config)["estimate"]["beta[0]"] == 0.5
    assert mle_study.finished(tmp_path, mle_study.fits(config)[1], config) is None
    other = mle_study.MLEStudyConfig(replicates=1, seed=7)
    with pytest.raises(ValueError, match="other settings"):
        mle_study.finished(tmp_path, fit, other)
