"""Run one cosmic-ray session on several cores: split its pending mutants into parts, run each part
in its own scratch copy, then merge the parts back into one session for the report.

    python tools/mutation/parts.py split SESSION K
        # writes SESSION-part0.sqlite ... SESSION-part{K-1}.sqlite next to SESSION; part i keeps
        # every K-th pending mutant (from the i-th) pending, the others are marked as run in
        # their part; results already in SESSION stay in part 0 only
    python tools/mutation/parts.py merge SESSION PART...
        # SESSION gets, for every mutant marked as run in another part, that part's result

Each part then runs as ``MUTATION_DIR=DIR RESUME=1 bash tools/mutation/run.sh CONFIG@NAME``, with
``DIR`` a copy of the scratch folder (clean package: cosmic-ray restores each mutated file).
"""

import shutil
import sqlite3
import sys
from pathlib import Path

ELSEWHERE = "run in part "


def split(session: Path, parts: int) -> None:
    with sqlite3.connect(session) as con:
        done = {j for (j,) in con.execute("SELECT job_id FROM work_results")}
        pending = sorted(
            j for (j,) in con.execute("SELECT job_id FROM work_items") if j not in done
        )
    for part in range(parts):
        target = session.with_name(f"{session.stem}-part{part}.sqlite")
        shutil.copyfile(session, target)
        with sqlite3.connect(target) as con:
            if part > 0:  # finished results are counted once, in part 0
                con.execute(
                    "UPDATE work_results SET worker_outcome = 'SKIPPED', test_outcome = NULL, "
                    "output = 'counted in part 0'"
                )
            con.executemany(
                "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
                "VALUES ('SKIPPED', ?, NULL, NULL, ?)",
                [
                    (f"{ELSEWHERE}{i % parts}", j)
                    for i, j in enumerate(pending)
                    if i % parts != part
                ],
            )
        print(f"{target}: {len(pending[part::parts])} pending mutants")


def merge(session: Path, part_paths: list[Path]) -> None:
    with sqlite3.connect(session) as con:
        for path in part_paths:
            part = path.stem.rsplit("-part", 1)[1]
            con.execute("ATTACH DATABASE ? AS part", (str(path),))
            con.execute(
                "UPDATE work_results SET (worker_outcome, output, test_outcome, diff) = "
                "(SELECT worker_outcome, output, test_outcome, diff FROM part.work_results p "
                " WHERE p.job_id = work_results.job_id) WHERE output = ? AND job_id IN "
                "(SELECT job_id FROM part.work_results)",
                (f"{ELSEWHERE}{part}",),
            )
            con.commit()
            con.execute("DETACH DATABASE part")
        left = con.execute(
            "SELECT COUNT(*) FROM work_results WHERE output LIKE ?", (f"{ELSEWHERE}%",)
        ).fetchone()[0]
    print(f"{session}: merged {len(part_paths)} parts, {left} mutants still marked elsewhere")


if __name__ == "__main__":
    command, session = sys.argv[1], Path(sys.argv[2])
    if command == "split":
        split(session, int(sys.argv[3]))
    elif command == "merge":
        merge(session, [Path(p) for p in sys.argv[3:]])
    else:
        sys.exit(f"unknown command {command!r}: split or merge")
