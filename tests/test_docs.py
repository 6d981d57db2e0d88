"""The documentation's code runs, and says what the code does.

* Every ``.. testcode::`` block in docs/*.rst runs, page by page, in a
  fresh interpreter with a time limit, and its output must match the
  ``.. testoutput::`` block after it -- the same blocks that
  ``sphinx-build -b doctest`` runs, but without needing Sphinx, so the
  plain test run (``pip install -e '.[test]' && pytest``) checks them.
* Every ```` ```python ```` block of README.md runs as its own program and
  must print the ```` ```text ```` block that follows it.
* No page hides an unchecked Python example: a plain ``code-block::
  python`` is allowed only where the list below says why.
* Where Sphinx is installed (``pip install -r docs/requirements.txt``), the
  HTML build must pass with ``-W -n`` (warnings are errors, every reference
  resolves), and the doctest builder must agree.
"""
import doctest
import glob
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import (REPO, child_env, kernel_eventfd_available,
                      outside_the_tree)

DOCS = os.path.join(REPO, "docs")
README = os.path.join(REPO, "README.md")
LIMIT = 300

# Plain (unchecked) Python code blocks, and why they cannot run here.
UNCHECKED_PYTHON_BLOCKS = {
    "migration.rst": 1,     # posix_ipc: a PyPI package the tests do not need
}

_DIRECTIVE = re.compile(r"^(\s*)\.\. (testsetup|testcode|testoutput|testcleanup|"
                        r"code-block|code|sourcecode)::\s*(.*)$")
_OPTION = re.compile(r"^\s*:([\w-]+):\s*(.*)$")


def parse_rst_blocks(path):
    """The doctest-extension blocks of one .rst page, in order:
    dicts with kind, group, options, code, line."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, kind, arg = len(m.group(1)), m.group(2), m.group(3).strip()
        start = i + 1
        i += 1
        options = {}
        while i < len(lines) and _OPTION.match(lines[i]) and lines[i].strip():
            om = _OPTION.match(lines[i])
            options[om.group(1)] = om.group(2).strip()
            i += 1
        body = []
        while i < len(lines):
            line = lines[i]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            body.append(line)
            i += 1
        code = textwrap.dedent("\n".join(body)).strip("\n") + "\n"
        blocks.append({"kind": kind, "arg": arg, "options": options,
                       "code": code, "line": start})
    return blocks


# Runs in a child interpreter: reads the blocks of one page as JSON on stdin,
# runs each group's setup, code and cleanup in one namespace (as Sphinx's
# doctest builder does), and prints one JSON line per mismatch or error.
RUNNER = r'''
import contextlib, doctest, io, json, sys, traceback
page, steps = json.load(sys.stdin)
FLAGS = {"+ELLIPSIS": doctest.ELLIPSIS,
         "+NORMALIZE_WHITESPACE": doctest.NORMALIZE_WHITESPACE}
checker = doctest.OutputChecker()
namespaces = {}
problems = []
ran = 0
for step in steps:
    ns = namespaces.get(step["group"])
    if ns is None:
        ns = namespaces[step["group"]] = {"__name__": "__main__"}
        exec("import efd", ns)          # Sphinx's doctest_global_setup
    skipif = step["options"].get("skipif")
    if skipif and eval(skipif, ns):
        continue
    where = "%s:%d" % (page, step["line"])
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(step["code"], where, "exec"), ns)
    except BaseException:
        problems.append({"where": where, "error": traceback.format_exc()})
        continue
    ran += 1
    want = step.get("want")
    if want is None:
        continue
    flags = doctest.ELLIPSIS            # Sphinx's default flags include it
    for opt in step.get("want_options", "").split():
        flags |= FLAGS.get(opt, 0)
    if "+SKIP" in step.get("want_options", ""):
        continue
    if not checker.check_output(want, out.getvalue(), flags):
        problems.append({"where": where, "want": want,
                         "got": out.getvalue()})
print(json.dumps({"ran": ran, "problems": problems}))
'''


def page_steps(path):
    """The page's runnable steps, each testcode paired with its output."""
    steps = []
    for b in parse_rst_blocks(path):
        if b["kind"] in ("testsetup", "testcode", "testcleanup"):
            steps.append({"group": b["arg"] or "default", "code": b["code"],
                          "options": b["options"], "line": b["line"]})
        elif b["kind"] == "testoutput":
            assert steps and "want" not in steps[-1], (
                "%s:%d: testoutput without a testcode before it"
                % (path, b["line"]))
            steps[-1]["want"] = b["code"]
            steps[-1]["want_options"] = b["options"].get("options", "")
    return steps


def rst_pages():
    return sorted(glob.glob(os.path.join(DOCS, "*.rst")))


def run_child(args, stdin=None):
    # EFD_BACKEND passes through: the pages' claims hold on every backend.
    env = child_env(os.environ.get("EFD_BACKEND") or None)
    return subprocess.run(
        [sys.executable, "-X", "faulthandler"] + args, input=stdin,
        env=env, cwd=outside_the_tree(), timeout=LIMIT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True)


def test_parser_finds_blocks_and_their_output():
    # The parser is what stands between the pages and this test: check it
    # on a page with known content, so a parser that finds nothing fails.
    steps = page_steps(os.path.join(DOCS, "quickstart.rst"))
    assert len(steps) >= 6
    assert all("want" in s for s in steps)
    assert steps[0]["code"].startswith("import efd\n")
    assert steps[0]["want"] == "True True\nFalse\nFalse\nTrue\n"


# What in an example needs a kernel eventfd (absent in an EFD_NO_EVENTFD
# build, or under a sandbox that refuses eventfd2).
NEEDS_KERNEL = ("eventfd-readback", "backend=\"eventfd\"", "backend='eventfd'",
                "from_fd", "eventfd_read", "eventfd_write", "efd.eventfd(",
                "os.eventfd")


@pytest.mark.parametrize(
    "page", [os.path.basename(p) for p in rst_pages()
             if any(b["kind"] == "testcode" for b in parse_rst_blocks(p))])
def test_page_examples_run(page):
    steps = page_steps(os.path.join(DOCS, page))
    if not kernel_eventfd_available() and any(
            tok in step["code"] for step in steps for tok in NEEDS_KERNEL):
        pytest.skip("%s shows what a kernel eventfd does (the eventfd "
                    "backends, from_fd or the os.eventfd functions), and "
                    "there is none here" % page)
    proc = run_child(["-c", RUNNER], stdin=json.dumps([page, steps]))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    report = []
    for p in result["problems"]:
        if "error" in p:
            report.append("%s raised:\n%s" % (p["where"], p["error"]))
        else:
            report.append("%s printed:\n%s\nexpected:\n%s"
                          % (p["where"], p["got"], p["want"]))
    assert not report, "\n\n".join(report)
    assert result["ran"] > 0


def test_no_unchecked_python_examples():
    for path in rst_pages():
        plain = [b for b in parse_rst_blocks(path)
                 if b["kind"] in ("code-block", "code", "sourcecode")
                 and b["arg"] in ("python", "python3", "py", "pycon")]
        allowed = UNCHECKED_PYTHON_BLOCKS.get(os.path.basename(path), 0)
        assert len(plain) <= allowed, (
            "%s: python blocks that no test runs, at lines %s: make them "
            "testcode blocks" % (path, [b["line"] for b in plain]))
    for path in glob.glob(os.path.join(DOCS, "*.md")):
        with open(path, encoding="utf-8") as f:
            assert "```python" not in f.read(), path


def readme_examples():
    """(line, code, expected output) for each README python block; the
    expected output is the ```text block right after it."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    found = []
    for m in re.finditer(r"```python\n(.*?)```\n\s*```text\n(.*?)```", text,
                         re.S):
        found.append((text.count("\n", 0, m.start()) + 1, m.group(1),
                      m.group(2)))
    assert len(found) == text.count("```python"), (
        "every README python block must be followed by a ```text block "
        "with its output")
    return found


def test_readme_has_examples():
    assert len(readme_examples()) >= 4


@pytest.mark.parametrize("line,code,want", readme_examples(),
                         ids=lambda v: "line%d" % v if isinstance(v, int) else "")
def test_readme_example(line, code, want, tmp_path):
    # A file, not -c: multiprocessing's spawn start method re-imports it.
    script = tmp_path / ("readme_line%d.py" % line)
    script.write_text(code, encoding="utf-8")
    proc = run_child([str(script)])
    assert proc.returncode == 0, "README.md line %d:\n%s" % (line, proc.stderr)
    assert "ResourceWarning" not in proc.stderr, proc.stderr
    checker = doctest.OutputChecker()
    assert checker.check_output(want, proc.stdout, doctest.ELLIPSIS), (
        "README.md line %d printed:\n%s\nexpected:\n%s"
        % (line, proc.stdout, want))


def _have_sphinx():
    try:
        import myst_parser  # noqa: F401
        import sphinx  # noqa: F401
    except ImportError:
        return False
    return True


needs_sphinx = pytest.mark.skipif(
    not _have_sphinx(),
    reason="Sphinx and myst-parser are not installed "
           "(pip install -r docs/requirements.txt)")


@needs_sphinx
@pytest.mark.parametrize("builder", ["html", "doctest"])
def test_sphinx_build_is_clean(builder, tmp_path):
    proc = run_child(["-m", "sphinx", "-W", "--keep-going", "-n", "-q",
                      "-b", builder, "-d", str(tmp_path / "doctrees"),
                      DOCS, str(tmp_path / builder)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
