"""A session that re-tests only the surviving mutants of another session, against the current
tests (after tests were added to kill them). Every other mutant is marked skipped in the copy.

    python tools/mutation/recheck.py /tmp/pmdp-mutation/session-NAME.sqlite \\
        /tmp/pmdp-mutation/session-recheck-NAME.sqlite
    RESUME=1 bash tools/mutation/run.sh tools/mutation/NAME.toml@recheck-NAME
"""

import shutil
import sqlite3
import sys

source, target = sys.argv[1], sys.argv[2]
shutil.copyfile(source, target)
con = sqlite3.connect(target)
survivors = [
    r[0] for r in con.execute("SELECT job_id FROM work_results WHERE test_outcome = 'SURVIVED'")
]
con.execute("DELETE FROM work_results")
con.executemany(
    "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
    "VALUES ('SKIPPED', 'not a survivor of the session rechecked', NULL, NULL, ?)",
    [(j,) for (j,) in con.execute("SELECT job_id FROM work_items") if j not in set(survivors)],
)
con.commit()
print(f"{len(survivors)} surviving mutants to re-test in {target}")
