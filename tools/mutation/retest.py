"""Re-test the surviving mutants of a session against the current code and tests.

A session's mutants are positions in the text it was created from; after a run the code may have
changed (defects fixed) as well as the tests. This applies each survivor's recorded diff to a
fresh copy of HEAD (``git archive``) plus the working tree's ``tests/``, ``tools/`` and
``reference/``, and runs the config's test selection there (plain pytest in a subprocess, no fork
server). A diff that no longer applies (its lines changed) is reported as such, to be re-run.

    python tools/mutation/retest.py SESSION CONFIG [--jit] [--only FILE]

``--only FILE`` re-tests only the mutants an earlier output lists (e.g. its SURVIVED lines, after
more tests). ``--jit`` keeps numba's JIT on (configs that say they need it). Prints one line per survivor:
``killed``, ``SURVIVED``, ``does not apply`` or ``error`` (pytest could not run the tests, or
PyTensor's compile lock was held elsewhere: re-test those), with the mutant's place, and a count
at the end.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cosmic_ray.config import load_config

ROOT = Path(__file__).resolve().parents[2]


def survivors(session: str) -> list[tuple[str, str]]:
    """``(place, diff)`` of each surviving mutant of ``session``."""
    dump = subprocess.run(
        [str(Path(sys.executable).with_name("cosmic-ray")), "dump", session],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    out = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result and result.get("test_outcome") == "survived":
            (m,) = item["mutations"]
            place = (
                f"{m['module_path']}:{m['start_pos'][0]} {m['operator_name']} #{m['occurrence']}"
            )
            out.append((place, result["diff"].split("--- mutation diff ---\n", 1)[-1]))
    return out


def pytest_arguments(config: str) -> list[str]:
    """The pytest arguments of the config's test command (after the client's socket)."""
    words = shlex.split(load_config(config)["test-command"])
    return words[words.index("tools/mutation/client.py") + 2 :]


def fresh_copy(folder: Path) -> None:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD"], capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    for name in ("tests", "tools", "reference"):
        if (ROOT / name).exists():
            shutil.rmtree(folder / name, ignore_errors=True)
            shutil.copytree(ROOT / name, folder / name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("session")
    parser.add_argument("config")
    parser.add_argument("--jit", action="store_true")
    parser.add_argument(
        "--only",
        metavar="FILE",
        help="re-test only the mutants this file lists (an earlier output)",
    )
    args = parser.parse_args()
    wanted = None
    if args.only:
        wanted = {
            line.split(None, 1)[1].strip() for line in Path(args.only).read_text().splitlines()
        }
    environment = {**os.environ, "PYTHONPATH": ""}
    if not args.jit:
        environment["NUMBA_DISABLE_JIT"] = "1"
    arguments = pytest_arguments(args.config)
    counts = {"killed": 0, "SURVIVED": 0, "does not apply": 0, "error": 0}
    with tempfile.TemporaryDirectory(prefix="pmdp-retest-") as scratch:
        folder = Path(scratch)
        fresh_copy(folder)

        def outcome_of_tests() -> str:
            """``passed``, ``failed`` (pytest's code 1), or ``error``: anything else, and a
            failure that is PyTensor's compile-cache lock (another process holds it), never a
            kill."""
            run = subprocess.run(
                [sys.executable, "-m", "pytest", *arguments],
                cwd=folder,
                env={**environment, "PYTHONPATH": str(folder)},
                capture_output=True,
                text=True,
            )
            if run.returncode == 0:
                return "passed"
            if run.returncode == 1 and "could not be acquired" not in run.stdout:
                return "failed"
            return "error"

        if outcome_of_tests() != "passed":
            sys.exit("retest.py: the tests do not pass on the unmutated copy; nothing re-tested")
        for place, diff in survivors(args.session):
            if wanted is not None and place not in wanted:
                continue
            path = folder / place.split(":")[0]
            original = path.read_text()
            patch = subprocess.run(
                ["patch", "-p1", "--forward", "--silent", "--no-backup-if-mismatch"],
                input=diff,
                text=True,
                cwd=folder,
                capture_output=True,
            )
            if patch.returncode != 0:
                outcome = "does not apply"
            else:
                tests = outcome_of_tests()
                outcome = {"passed": "SURVIVED", "failed": "killed"}.get(tests, "error")
            path.write_text(original)
            for leftover in folder.rglob("*.rej"):
                leftover.unlink()
            counts[outcome] += 1
            print(f"{outcome:<15} {place}", flush=True)
    print(", ".join(f"{n} {k}" for k, n in counts.items()))


if __name__ == "__main__":
    main()
