"""Keep a mutation run's results in the repository, so that a run can span machines and sessions.

A cosmic-ray session lives in the scratch copy (``/tmp``) and is lost with the machine. The
ledger (``tools/mutation/ledger/NAME.jsonl``, one line per mutant that ran) keeps each result with
the source text it was mutated in, and seeds a new session of the same config: a mutant whose
module, operator and mutated source text (the lines it spans, its column inside them, and which
of several identical spans it is) are unchanged gets its recorded result and is not run again.
A mutant on a changed line runs again, and so does a survivor whose config's test command has
changed since (a kill stands). Timeouts and worker failures are not recorded (they are re-run).
Survivors keep their diff, so ``retest.py`` works on a seeded session as on the original.

    python tools/mutation/ledger.py export SESSION CONFIG LEDGER  # SESSION's results -> LEDGER
    python tools/mutation/ledger.py seed SESSION CONFIG LEDGER    # LEDGER -> SESSION's pending

Both run in the scratch copy ``run.sh`` works in and read the mutated modules' text from its
``.ledger-source/`` (a copy made before any mutant is applied: during a run, cosmic-ray has one
mutant in the module itself), or from the module where there is no such copy. ``export``
merges: an entry of LEDGER that SESSION did not run is kept. ``run.sh`` seeds a new
session from ``tools/mutation/ledger/NAME.jsonl`` and exports to it every few minutes and at the end.
"""

import json
import re
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path

from cosmic_ray.config import load_config

FROM_LEDGER = "from the ledger: "
SOURCE = Path(".ledger-source")  # the modules as the session was created from them


def _mutants(con: sqlite3.Connection) -> list[tuple[str, tuple]]:
    """``(job_id, key)`` of every mutant of the session, where ``key`` names it by its text."""
    rows = con.execute(
        "SELECT job_id, module_path, operator_name, occurrence, start_pos_row, start_pos_col, "
        "end_pos_row, end_pos_col FROM mutation_specs ORDER BY module_path, operator_name, "
        "occurrence"
    ).fetchall()
    lines: dict[str, list[str]] = {}
    seen: dict[tuple, int] = defaultdict(int)
    out = []
    for job, module, operator, _, row, col, end_row, end_col in rows:
        if module not in lines:
            pristine = SOURCE / module
            source = pristine if pristine.exists() else Path(module)
            lines[module] = source.read_text().splitlines()
        text = lines[module]
        span = text[row - 1 : end_row]
        indent, end_indent = (len(s) - len(s.lstrip()) for s in (span[0], span[-1]))
        base = (
            module,
            operator,
            "\n".join(s.strip() for s in span),
            col - indent,
            end_col - end_indent,
        )
        out.append((job, (*base, seen[base])))
        seen[base] += 1
    return out


def _test_command(config: Path) -> str:
    """The config's test command, with the run's own socket (``$MUTATION_DIR.sock``, which
    ``run.sh`` writes into its copy of the config) read as the default one: the same selection
    run from another folder is the same command."""
    return _normalised(load_config(str(config))["test-command"])


def _normalised(command: str) -> str:
    return re.sub(r"\S+\.sock\b", "/tmp/pmdp-mutation.sock", command, count=1)


def _read(ledger: Path) -> dict[tuple, dict]:
    """The ledger's entries by key (none if there is no ledger yet)."""
    if not ledger.exists():
        return {}
    entries = (json.loads(line) for line in ledger.read_text().splitlines())
    return {tuple(entry["key"]): entry for entry in entries}


def export(session: Path, config: Path, ledger: Path) -> None:
    tests = _test_command(config)
    entries = _read(ledger)
    with sqlite3.connect(session) as con:
        keys = dict(_mutants(con))
        results = con.execute(
            "SELECT job_id, test_outcome, output, diff FROM work_results "
            "WHERE worker_outcome = 'NORMAL' AND test_outcome IS NOT NULL"
        ).fetchall()
    for job, outcome, output, diff in results:
        if "timeout" in (output or "").lower():
            continue
        entries[keys[job]] = {
            "key": list(keys[job]),
            "outcome": outcome,
            "diff": diff,
            "tests": tests,
        }
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_text(
        "".join(json.dumps(e, sort_keys=True) + "\n" for _, e in sorted(entries.items()))
    )
    print(f"{ledger}: {len(entries)} results")


def seed(session: Path, config: Path, ledger: Path) -> None:
    if not ledger.exists():
        print(f"{ledger}: no ledger, nothing seeded")
        return
    tests = _test_command(config)
    entries = {
        key: entry
        for key, entry in _read(ledger).items()
        if entry["outcome"] == "KILLED" or _normalised(entry["tests"]) == tests
    }
    with sqlite3.connect(session) as con:
        done = {j for (j,) in con.execute("SELECT job_id FROM work_results")}
        rows = [
            (
                "NORMAL",
                f"{FROM_LEDGER}{ledger.name}",
                entries[key]["outcome"],
                entries[key]["diff"],
                job,
            )
            for job, key in _mutants(con)
            if job not in done and key in entries
        ]
        con.executemany(
            "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
            "VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        pending = con.execute(
            "SELECT COUNT(*) FROM work_items WHERE job_id NOT IN (SELECT job_id FROM work_results)"
        ).fetchone()[0]
    print(f"{session}: {len(rows)} results seeded from {ledger}, {pending} mutants pending")


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] not in ("export", "seed"):
        sys.exit(__doc__)
    {"export": export, "seed": seed}[sys.argv[1]](*(Path(a) for a in sys.argv[2:]))
