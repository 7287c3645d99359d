"""The house rules of issue 31, checked on the source: one seam to PyMC's internals, no module
reading the package namespace, modules and functions of a readable size; and the hand audits of
issue 32 still apply to the code they were written for."""

import ast
import json
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "pymc_unbounded_dp"
SOURCES = sorted(PACKAGE.rglob("*.py"))
BRIDGE = PACKAGE / "_pymc_bridge.py"
AUDITS = sorted((PACKAGE.parent / "tools" / "mutation" / "audits").glob("*.json"))
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80  # lines of code: docstring, comments and blank lines not counted


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _code_lines(path: Path, node: ast.FunctionDef) -> int:
    lines = path.read_text().splitlines()
    body = node.body
    docstring = set()
    first = body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
        docstring = set(range(first.lineno, first.end_lineno + 1))
    return sum(
        1
        for number in range(node.lineno, node.end_lineno + 1)
        if number not in docstring
        and lines[number - 1].strip()
        and not lines[number - 1].strip().startswith("#")
    )


def _is_numba_kernel(node: ast.FunctionDef) -> bool:
    return any("njit" in ast.unparse(d) for d in node.decorator_list)


def test_pymc_internals_are_used_in_the_bridge_only():
    """PyMC's step assignment, its list of step methods and the patch of ``model.logp`` appear in
    ``_pymc_bridge.py`` and nowhere else (logger names come from the bridge too)."""
    private = re.compile(
        r"pymc\.sampling\.mcmc|model\.logp\s*=|STEP_METHODS|flatten_steps|"
        r"assign_step_methods|instantiate_steppers"
    )
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in SOURCES
        if path != BRIDGE
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert not found, found
    assert private.search(BRIDGE.read_text())


def test_no_module_reads_the_package_namespace():
    """Only the package ``__init__`` imports from ``pymc_unbounded_dp`` itself; every other
    module imports the module that defines what it uses (``import pymc_unbounded_dp.X as X`` for
    a submodule), so the ``__init__`` can re-export without cycles."""
    upward = []
    for path in SOURCES:
        if path == PACKAGE / "__init__.py":
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "pymc_unbounded_dp":
                upward.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
            if isinstance(node, ast.Import) and any(
                alias.name == "pymc_unbounded_dp" for alias in node.names
            ):
                upward.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert not upward, upward


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_and_functions_stay_readable(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{lines} lines"
    long = [
        f"{node.name} ({_code_lines(path, node)} lines)"
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not _is_numba_kernel(node)
        and _code_lines(path, node) > MAX_FUNCTION_LINES
    ]
    assert not long, long


@pytest.mark.parametrize("audit", AUDITS, ids=lambda path: path.stem)
def test_every_hand_audit_bug_still_applies_to_the_code(audit):
    """Each bug's ``old`` text occurs exactly once in its file, so that ``inject.py`` can run it
    again: a change to an audited line must rewrite the bug for the new code (six had gone
    stale unnoticed before this check)."""
    stale = []
    for bug in json.loads(audit.read_text()):
        count = (PACKAGE.parent / bug["path"]).read_text().count(bug["old"])
        if count != 1:
            stale.append(f"{bug['name']}: `old` occurs {count} times in {bug['path']}")
    assert not stale, stale
