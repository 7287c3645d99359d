"""Inject hand-written one-line bugs, one at a time, and run the test files meant to catch each.

    python tools/mutation/inject.py tools/mutation/audits/2026-12-05.json [NAME...]

The JSON file lists bugs as objects with ``name``, ``path`` (in the package), ``old`` (text that
occurs exactly once in the file), ``new`` and ``tests`` (test files). Each bug is applied to a
scratch copy of the checkout (``git worktree``-free: the working tree's files, uncommitted edits
included, copied to a temporary folder),
the tests run with ``-x`` against that copy (``PYTHONPATH``), and the file is restored. Prints
CAUGHT (with the first failing test, or a run past ``TIMEOUT``) or SURVIVED per bug; exits 1 if
any survived.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Seconds after which a bug's tests count as hung, i.e. the bug as caught.
TIMEOUT = 300


def run(bug: dict, scratch: Path) -> tuple[bool, str]:
    target = scratch / bug["path"]
    source = target.read_text()
    if source.count(bug["old"]) != 1:
        raise SystemExit(
            f"{bug['name']}: `old` occurs {source.count(bug['old'])} times in {bug['path']}"
        )
    target.write_text(source.replace(bug["old"], bug["new"]))
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *bug["tests"],
                "-x",
                "-q",
                "-p",
                "no:randomly",
                "-p",
                "no:cacheprovider",
                "-n",
                "0",
            ],
            cwd=scratch,
            env={**os.environ, "PYTHONPATH": str(scratch)},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:  # a bug that makes the tests hang is caught (CI times out)
        return True, f"the tests ran past {TIMEOUT} s"
    finally:
        target.write_text(source)
    failed = [line for line in result.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    return result.returncode != 0, failed[0] if failed else result.stdout.strip().splitlines()[-1]


def main(argv: list[str]) -> int:
    bugs = json.loads(Path(argv[0]).read_text())
    chosen = [b for b in bugs if not argv[1:] or b["name"] in argv[1:]]
    survived = 0
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for part in (
            "pymc_unbounded_dp",
            "tests",
            "reference",
            "docs",
            "README.md",
            "pyproject.toml",
        ):
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(
                    source, scratch / part, ignore=shutil.ignore_patterns("__pycache__")
                )
            elif source.exists():
                shutil.copy(source, scratch / part)
        for bug in chosen:
            caught, detail = run(bug, scratch)
            survived += not caught
            print(f"{'CAUGHT  ' if caught else 'SURVIVED'} {bug['name']}: {detail}", flush=True)
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
