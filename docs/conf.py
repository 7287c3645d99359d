"""Sphinx configuration of the pymc-unbounded-dp documentation site.

Build (from the repository root, with the ``docs`` extra installed)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Three kinds of pages are made when the build starts (``config-inited``), into git-ignored folders:

* ``docs/api/``: one page per public module, listing the names of its ``__all__`` (classes,
  functions, exceptions, data, submodules); autosummary then writes a page per name. A name added
  to or removed from an ``__all__`` needs no edit here.
* ``docs/notebooks/``: copies of ``notebooks/*.ipynb``, rendered from their stored outputs (they
  are not executed here; ``tests/test_notebooks.py`` runs them in CI).
* ``docs/_generated/bad_input.md``: the catalogue of refused inputs of ``tests/test_bad_input.py``,
  each run to record the message it gives today.
"""

import importlib
import inspect
import re
import shutil
import sys
import types
import warnings
from pathlib import Path

from sphinx.pycode import ModuleAnalyzer

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))

import pymc_unbounded_dp  # noqa: E402  (after the path: the package of this checkout)

project = "pymc-unbounded-dp"
author = "the pymc-unbounded-dp developers"
copyright = "the pymc-unbounded-dp developers"
release = version = pymc_unbounded_dp.__version__

extensions = [
    "myst_nb",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx_copybutton",
    "sphinx_design",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "data"]
templates_path = ["_templates"]

# -- MyST and notebooks -----------------------------------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 4  # the pages link to each other's sections by their GitHub anchors
nb_execution_mode = "off"  # stored outputs; CI re-executes every notebook (tests/test_notebooks.py)
nb_merge_streams = True

# -- API reference --------------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # numpydoc's Parameters sections carry the types
numpydoc_show_class_members = False  # the class template lists members itself
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- HTML -----------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "pymc-unbounded-dp"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 7,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version", "theme-version"],
}
html_sidebars = {"index": [], "combinations": []}


# -- pages made at build time ---------------------------------------------------------------------
#: The public namespaces; their ``__all__`` (and their public submodules') make the API reference.
API_ROOTS = ["pymc_unbounded_dp", "pymc_unbounded_dp.risk", "pymc_unbounded_dp.examples"]
API = DOCS / "api"
NOTEBOOKS = DOCS / "notebooks"
GENERATED = DOCS / "_generated"


def _write(path: Path, text: str) -> None:
    """Write ``text`` unless the file already holds it (Sphinx then keeps its cached page)."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def _public_names(module: types.ModuleType) -> list[str]:
    """``__all__``, or the public names a module defines itself."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    ]


def _documented_modules() -> list[str]:
    """The API roots and every public submodule their ``__all__`` lists, depth first."""
    found: list[str] = []

    def visit(name: str) -> None:
        if name in found:
            return
        found.append(name)
        module = importlib.import_module(name)
        for attribute in _public_names(module):
            value = getattr(module, attribute)
            if isinstance(value, types.ModuleType) and value.__name__.startswith(name + "."):
                visit(value.__name__)

    for root in API_ROOTS:
        visit(root)
    return found


def _kind(value) -> str:
    if isinstance(value, types.ModuleType):
        return "Modules"
    if inspect.isclass(value) and issubclass(value, BaseException):
        return "Exceptions and warnings"
    if inspect.isclass(value):
        return "Classes"
    if callable(value):
        return "Functions"
    return "Data"


def _data_entries(module: types.ModuleType, names: list[str]) -> list[str]:
    """``py:data`` entries with the value and the ``#:`` comment above the assignment (autodoc
    would show the docstring of the value's type, e.g. NumPy's ndarray, instead)."""
    try:
        comments = ModuleAnalyzer.for_module(module.__name__).find_attr_docs()
    except Exception:  # noqa: BLE001  (no source: no comments)
        comments = {}
    lines = []
    for name in names:
        value = repr(getattr(module, name)).replace("\n", " ")
        if len(value) > 80:
            value = value[:77] + "..."
        lines += [f".. py:data:: {name}", f"   :value: {value}", ""]
        lines += [f"   {line}" for line in comments.get(("", name), [])] + [""]
    return lines


def write_api_pages(app, config) -> None:
    """One page per documented module, with an autosummary table per kind of name."""
    API.mkdir(exist_ok=True)
    # autosummary writes the per-name pages into api/generated/ but never removes one whose name
    # left an __all__
    shutil.rmtree(API / "generated", ignore_errors=True)
    modules = _documented_modules()
    pages = {f"{name}.rst" for name in modules} | {"index.rst"}
    for stale in API.glob("*.rst"):
        if stale.name not in pages:
            stale.unlink()
    for name in modules:
        module = importlib.import_module(name)
        groups: dict[str, list[str]] = {}
        children = []
        for attribute in _public_names(module):
            value = getattr(module, attribute)
            kind = _kind(value)
            if kind == "Modules":
                children.append(value.__name__)
                groups.setdefault(kind, []).append(value.__name__[len(name) + 1 :])
                continue
            home = getattr(value, "__module__", None)
            # a name re-exported from a documented submodule is listed under its home's name, so
            # that it has one page (names relative to the page's module, as autosummary wants)
            if home != name and home in modules and home.startswith(name + "."):
                groups.setdefault(kind, []).append(f"~{home[len(name) + 1 :]}.{attribute}")
            else:
                groups.setdefault(kind, []).append(attribute)
        lines = [
            name,
            "=" * len(name),
            "",
            f".. automodule:: {name}",
            "",
            f".. currentmodule:: {name}",
            "",
        ]
        for kind in ["Classes", "Functions", "Exceptions and warnings", "Modules"]:
            if kind not in groups:
                continue
            lines += [kind, "-" * len(kind), "", ".. autosummary::", "   :nosignatures:"]
            if kind != "Modules":
                lines += ["   :toctree: generated/"]
            if kind == "Classes" or kind == "Exceptions and warnings":
                lines += ["   :template: class.rst"]
            lines += [""] + [f"   {entry}" for entry in groups[kind]] + [""]
        if "Data" in groups:
            lines += ["Data", "----", ""] + _data_entries(module, groups["Data"])
        if children:
            lines += [".. toctree::", "   :hidden:", ""] + [f"   {child}" for child in children]
        _write(API / f"{name}.rst", "\n".join(lines) + "\n")
    index = [
        "API reference",
        "=============",
        "",
        "Generated from the docstrings of every name in the ``__all__`` of",
        ", ".join(f":mod:`{root}`" for root in API_ROOTS) + " and of their public submodules.",
        "``import pymc_unbounded_dp as pmdp`` gives the names of the first; the others are imported",
        "by their module path.",
        "",
        ".. toctree::",
        "   :maxdepth: 2",
        "",
    ] + [f"   {root}" for root in API_ROOTS]
    _write(API / "index.rst", "\n".join(index) + "\n")


def copy_notebooks(app, config) -> None:
    """Copy the notebooks next to the pages, their links to ``../docs/x.md`` made relative."""
    NOTEBOOKS.mkdir(exist_ok=True)
    sources = sorted((ROOT / "notebooks").glob("*.ipynb"))
    for stale in NOTEBOOKS.glob("*.ipynb"):
        if stale.name not in {source.name for source in sources}:
            stale.unlink()
    for source in sources:
        text = source.read_text(encoding="utf-8")
        _write(NOTEBOOKS / source.name, text.replace("](../docs/", "](../"))


def link_pages_to_notebook_copies(app, docname, source) -> None:
    """The Markdown pages link to ``../notebooks/x.ipynb`` (right on GitHub); on the site the
    notebooks are pages under ``notebooks/``."""
    if not docname.startswith(("notebooks/", "api/")):
        source[0] = source[0].replace("](../notebooks/", "](notebooks/")


def _catalogue_sections(path: Path) -> dict[str, str]:
    """The comment heading each case of ``CATALOGUE`` in the test file."""
    sections, current = {}, ""
    inside = False
    for line in path.read_text().splitlines():
        if line.startswith("CATALOGUE = ["):
            inside = True
            continue
        if inside and line.startswith("]"):
            break
        if not inside:
            continue
        comment = re.match(r"\s+# (.+)", line)
        case = re.match(r'\s+\("([^"]+)",', line)
        if comment:
            current = comment.group(1)
        elif case:
            sections[case.group(1)] = current
    return sections


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write_bad_input_catalogue(app, config) -> None:
    """Run every case of the test catalogue and tabulate the exception and message it gives."""
    GENERATED.mkdir(exist_ok=True)
    target = GENERATED / "bad_input.md"
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            catalogue = importlib.import_module("test_bad_input")
    finally:
        sys.path.remove(str(ROOT / "tests"))
    sections = _catalogue_sections(Path(catalogue.__file__))
    rows: dict[str, list[str]] = {}
    for case_id, build, error, _fragments in catalogue.CATALOGUE:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                build()
        except Exception as caught:  # noqa: BLE001  (the message is what the page shows)
            got = f"`{type(caught).__name__}`"
            if type(caught) is not error:
                got += f" (the test expects `{error.__name__}`)"
            message = _cell(str(caught))
        else:
            got, message = "**accepted**", f"(the test expects `{error.__name__}`)"
        rows.setdefault(sections.get(case_id, ""), []).append(
            f"| `{case_id}` | {got} | {message} |"
        )
    lines = []
    for section, section_rows in rows.items():
        lines += [f"# {section[0].upper() + section[1:]}" if section else "# Other", ""]
        lines += ["| case | exception | message |", "|---|---|---|", *section_rows, ""]
    _write(target, "\n".join(lines))


def setup(app):
    # before Sphinx lists the source files and autosummary reads the API pages for the names to
    # write a page for (both after the configuration is read)
    app.connect("config-inited", write_api_pages)
    app.connect("config-inited", copy_notebooks)
    app.connect("config-inited", write_bad_input_catalogue)
    app.connect("source-read", link_pages_to_notebook_copies)
    return {"parallel_read_safe": True}
