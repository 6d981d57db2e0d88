"""Sphinx configuration for efd's documentation.

Built strictly: ``sphinx-build -W -n`` (warnings are errors, every
cross-reference must resolve).  The API pages are autodoc'd from efd
itself, so build with efd importable: after ``pip install .`` (the
installed package is documented) or ``pip install -e .`` (the source tree,
whose compiled extension then sits beside it).
"""
import builtins
import importlib.machinery
import inspect
import os
import re
import sys

from sphinx.ext.napoleon import Config as _NapoleonConfig
from sphinx.ext.napoleon.docstring import GoogleDocstring

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _source_tree_is_built():
    """True if the source tree's efd has a compiled extension for this
    interpreter (an editable install or an in-place build)."""
    pkg = os.path.join(ROOT, "efd")
    return any(os.path.exists(os.path.join(pkg, "_efd" + suffix))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def _same_dir(entry, path):
    try:
        return os.path.samefile(entry or os.getcwd(), path)
    except OSError:
        return False


# The source tree's efd is importable as such only once it is built; else
# (``pip install .``) it must not shadow the installed package, which it
# would whenever the build runs from the checkout (``python -m sphinx``
# puts the current directory first on sys.path).
if _source_tree_is_built():
    sys.path.insert(0, ROOT)
else:
    sys.path[:] = [p for p in sys.path if not _same_dir(p, ROOT)]
    # The doctests start child interpreters (``python -c``) in the current
    # directory, which such a child puts first on its path: keep it off
    # (Python 3.11+; on older ones build from outside the checkout).
    os.environ["PYTHONSAFEPATH"] = "1"

import efd  # noqa: E402  (after the path is set)

project = "efd"
author = "The efd developers"
copyright = "the efd developers"
release = efd.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.doctest",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "requirements.txt"]
myst_heading_anchors = 3

html_theme = "alabaster"
html_static_path = []
html_title = "efd %s" % release

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"undoc-members": False}

# Every code sample on these pages runs: `sphinx-build -b doctest` runs the
# testcode/testoutput blocks, and so does tests/test_docs.py (without Sphinx).
doctest_global_setup = "import efd"
doctest_test_doctest_blocks = ""

# -n (nitpicky) must still be able to pass with no network: there is no
# intersphinx, so references to the standard library cannot resolve.  Keep
# those quiet, and only those: every efd name must resolve.
_STDLIB_MODULES = (
    "asyncio", "collections", "concurrent", "multiprocessing", "os",
    "select", "selectors", "signal", "socket", "subprocess", "threading",
    "types", "typing", "typing_extensions",
)
nitpick_ignore = [
    (role, name)
    for name in dir(builtins) if not name.startswith("_")
    for role in ("py:class", "py:exc", "py:func", "py:obj", "py:data")
]
# The drop-ins' constructors return the class they are called on.
nitpick_ignore.append(("py:class", "efd._sync._Sem"))
nitpick_ignore_regex = [
    (r"py:.*", r"(%s)(\..*)?" % "|".join(_STDLIB_MODULES)),
]


def _optional_pages(app, docname, source):
    """Pages written by other parts of the project are linked when present.

    ``reliability.md`` (the reliability report) and the benchmark results
    (``benchmarks/results/results.md`` and ``results.png``) are produced
    separately; the index lists the report when it exists and the benchmark
    page includes the results when they exist, so the docs build either way
    and say so when something is missing.
    """
    text = source[0]
    if docname == "index":
        present = os.path.exists(os.path.join(HERE, "reliability.md"))
        text = text.replace("   .. reliability\n",
                            "   reliability\n" if present else "")
    elif docname == "benchmarks":
        results = os.path.join(ROOT, "benchmarks", "results")
        table = os.path.join(results, "results.md")
        plot = os.path.join(results, "results.png")
        if os.path.exists(table):
            with open(table, encoding="utf-8") as f:
                body = _demote_headings(f.read())
        else:
            body = ("*No results yet: run the benchmark (see above) to "
                    "produce* `benchmarks/results/results.md`.\n")
        if os.path.exists(plot):
            body += "\n![Benchmark results](../benchmarks/results/results.png)\n"
        text = text.replace("<!-- RESULTS -->\n", body)
    source[0] = text


def _demote_headings(markdown):
    """Shift a results file's Markdown headings so that its top level sits
    just under this page's ``##`` section (``###``), keeping the steps."""
    lines = markdown.splitlines()
    fence = False
    heads = []
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            if line[level:level + 1] in (" ", ""):
                heads.append((i, level))
    if heads:
        shift = 3 - min(level for _, level in heads)
        for i, level in heads:
            lines[i] = "#" * min(level + shift, 6) + lines[i][level:]
    return "\n".join(lines) + "\n"


# The Python modules write Google-style sections (Args:, Returns:, Raises:);
# the C methods' docstrings are plain prose.  Convert only docstrings that
# have such a section, so that napoleon never reads a prose sentence with a
# colon in it ("The name of the backend in use: ...") as "type: text".
_GOOGLE_SECTION = re.compile(
    r"^\s*(Args|Arguments|Returns|Raises|Yields|Attributes|Note|Notes):\s*$")
_NAPOLEON = _NapoleonConfig(napoleon_use_rtype=False, napoleon_use_param=True,
                            napoleon_use_ivar=True)


def _google_sections(app, what, name, obj, options, lines):
    if any(_GOOGLE_SECTION.match(line) for line in lines):
        lines[:] = GoogleDocstring(lines, _NAPOLEON, app, what, name, obj,
                                   options).lines()


def _c_method_signature(app, what, name, obj, options, signature,
                        return_annotation):
    """Keep the first parameter of C methods whose text signature has no
    ``$self``: autodoc drops a method's first parameter as ``self``, which
    for ``acquire(blocking=True, timeout=None)`` would drop ``blocking``."""
    text = getattr(obj, "__text_signature__", None)
    if what == "method" and text and not text.startswith("($"):
        try:
            return str(inspect.signature(obj)), return_annotation
        except (TypeError, ValueError):
            return None
    return None


def setup(app):
    app.connect("source-read", _optional_pages)
    app.connect("autodoc-process-docstring", _google_sections)
    app.connect("autodoc-process-signature", _c_method_signature)
