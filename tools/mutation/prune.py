"""Restrict a cosmic-ray session's pending mutants to the lines changed since a commit.

    python tools/mutation/prune.py SESSION BASE

For a config whose module ran before the ledgers existed (``ledger/NAME.jsonl`` missing): start
``run.sh`` once so that it creates the session, stop it, prune the session to the mutants on lines
that ``git diff -U0 BASE HEAD`` shows as new or changed (BASE: the commit that recorded the
module's last full run), then continue with ``RESUME=1 ... run.sh CONFIG``. Results already in the
session are kept; the mutants dropped are those on lines unchanged since that run.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def changed_lines(base: str, module: str) -> set[int]:
    """The line numbers, in HEAD's text of ``module``, that differ from ``base``'s."""
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "-U0", base, "HEAD", "--", module],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines: set[int] = set()
    for start, count in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", diff, re.M):
        lines |= set(range(int(start), int(start) + (int(count) if count else 1)))
    return lines


def main() -> None:
    session, base = sys.argv[1], sys.argv[2]
    connection = sqlite3.connect(session)
    modules = {m for (m,) in connection.execute("select distinct module_path from mutation_specs")}
    changed = {module: changed_lines(base, module) for module in modules}
    pending = connection.execute(
        "select s.job_id, s.module_path, s.start_pos_row from mutation_specs s "
        "left join work_results r on s.job_id = r.job_id where r.job_id is null"
    ).fetchall()
    dropped = [job for job, module, row in pending if row not in changed[module]]
    for job in dropped:
        connection.execute("delete from mutation_specs where job_id = ?", (job,))
        connection.execute("delete from work_items where job_id = ?", (job,))
    connection.commit()
    kept = len(pending) - len(dropped)
    print(
        f"{session}: {len(pending)} pending, {kept} on changed lines kept, {len(dropped)} dropped"
    )


if __name__ == "__main__":
    main()
