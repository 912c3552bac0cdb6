"""Every code example in the README and docs/ runs, with exactly the extras its page names.

A page names the extras its Python snippets need in one HTML comment, invisible on the site and
on GitHub, e.g. ``<!-- extras: otel -->`` or ``<!-- extras: none -->`` (a page without one
needs the core dependencies only). Packages that no extra installs and that the page itself
tells the reader to install go after ``plus:``, e.g. ``<!-- extras: none; plus: tiktoken -->``.
Each page's snippets run in a fresh interpreter in which every installed third-party module that
the core dependencies and the named extras do not install (with their own dependencies) cannot
be imported, as if it were absent.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
import tomllib
from functools import cache
from importlib.metadata import PackageNotFoundError, requires
from importlib.metadata import packages_distributions as _packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
DECLARATION = re.compile(r"^<!-- extras: ([^;>]*?)(?:; plus: ([^>]*?))? -->$", re.MULTILINE)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_AS_TESTS = {"contract-kit.md"}

# Run first in the child interpreter: an import hook that refuses the modules in BLOCKED.
_GUARD = textwrap.dedent(
    """
    import importlib.abc
    import sys

    class _NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            top = fullname.partition(".")[0]
            if top in BLOCKED:
                raise ModuleNotFoundError(
                    f"No module named {top!r}: the extras this page names do not install it",
                    name=top,
                )
            return None

    sys.meta_path.insert(0, _NotInstalled())
    """
)

_RUN_SNIPPETS = textwrap.dedent(
    """
    import sys
    import traceback

    failed = []
    for number, (name, code) in enumerate(SNIPPETS, 1):
        namespace = {"__name__": "__docs_example__"}
        try:
            exec(compile(code, name, "exec"), namespace)
        except BaseException:
            failed.append(name)
            traceback.print_exc()
    sys.exit(f"failed: {', '.join(failed)}" if failed else 0)
    """
)

_RUN_AS_PYTEST = textwrap.dedent(
    """
    import os
    import sys

    import pytest

    # Only the plugin the page's extra installs: entry-point plugins of this machine stay out.
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.exit(pytest.main([
        TEST_FILE, "-q", "-p", "no:cacheprovider", "-p", "pytest_asyncio.plugin",
        "-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function",
    ]))
    """
)


@cache
def packages_distributions() -> dict[str, list[str]]:
    """Installed top-level modules and the distributions that provide them (slow: cached)."""
    return {module: list(names) for module, names in _packages_distributions().items()}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declaration(page: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The extras and the extra packages a page names (none of either without a declaration)."""
    found = DECLARATION.findall(page.read_text(encoding="utf-8"))
    assert len(found) <= 1, f"{page.name} declares its extras more than once"
    if not found:
        return frozenset(), frozenset()
    extras, plus = found[0]
    names = frozenset(e.strip() for e in extras.split(",") if e.strip() and e.strip() != "none")
    return names, frozenset(_canonical(p.strip()) for p in plus.split(",") if p.strip())


@cache
def _installed_by(distribution: str, extras: frozenset[str]) -> frozenset[str]:
    """The distributions that installing `distribution[extras]` brings in, itself included."""
    seen = {_canonical(distribution)}
    visited: set[tuple[str, frozenset[str]]] = set()
    pending = [(distribution, extras)]
    while pending:
        name, wanted = pending.pop()
        try:
            requirements = requires(name) or []
        except PackageNotFoundError:
            continue
        for line in requirements:
            requirement = Requirement(line)
            markers = [{"extra": extra} for extra in (*wanted, "")]
            if requirement.marker and not any(requirement.marker.evaluate(m) for m in markers):
                continue
            key = (_canonical(requirement.name), frozenset(requirement.extras))
            if key not in visited:
                visited.add(key)
                seen.add(key[0])
                pending.append(key)
    return frozenset(seen)


def _blocked_modules(extras: frozenset[str], plus: frozenset[str]) -> set[str]:
    """Installed top-level modules that neither the core, the extras nor `plus` install."""
    allowed = _installed_by("asyncsession", extras) | plus
    return {
        module
        for module, distributions in packages_distributions().items()
        if module != "asyncsession" and not {_canonical(d) for d in distributions} & allowed
    }


def _imported_modules(code: str) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            modules |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.partition(".")[0])
    return modules


def _snippets(page: Path) -> list[str]:
    return [match.group(1) for match in FENCE.finditer(page.read_text(encoding="utf-8"))]


def _pages_with_snippets() -> list[object]:
    return [pytest.param(page, id=str(page.relative_to(ROOT))) for page in PAGES if _snippets(page)]


def _run_guarded(page: Path, program: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    blocked = _blocked_modules(*_declaration(page))
    script = tmp_path / "run_page.py"
    script.write_text(f"BLOCKED = {sorted(blocked)!r}\n{_GUARD}\n{program}", encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("page", _pages_with_snippets())
def test_page_examples_run_with_the_extras_the_page_names(page: Path, tmp_path: Path) -> None:
    """Each example executes, in an interpreter that sees only the page's extras installed."""
    if page.name in RUN_AS_TESTS:
        (tmp_path / "test_example.py").write_text("\n".join(_snippets(page)), encoding="utf-8")
        program = f"TEST_FILE = 'test_example.py'\n{_RUN_AS_PYTEST}"
        done = _run_guarded(page, program, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert " passed" in done.stdout
        return
    snippets = [
        (f"{page.relative_to(ROOT)}#{number}", code)
        for number, code in enumerate(_snippets(page), 1)
    ]
    done = _run_guarded(page, f"SNIPPETS = {json.dumps(snippets)}\n{_RUN_SNIPPETS}", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("page", _pages_with_snippets())
def test_page_snippets_import_only_what_its_extras_install(page: Path) -> None:
    """No snippet imports a third-party module that the page's declared extras do not install."""
    blocked = _blocked_modules(*_declaration(page))
    _, plus = _declaration(page)
    imported = set().union(*(_imported_modules(code) for code in _snippets(page)))
    third_party = imported - set(sys.stdlib_module_names) - {"asyncsession"}
    known = set(packages_distributions())
    assert sorted(third_party & blocked) == []
    # A module no installed distribution provides must be one the page tells readers to install.
    unknown = {module for module in third_party - known if _canonical(module) not in plus}
    assert sorted(unknown) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_declared_extra_exists_and_every_plus_package_has_its_install_line(
    page: Path,
) -> None:
    """A page names only extras pyproject.toml declares, and says how to get what no extra has."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        declared = set(tomllib.load(file)["project"]["optional-dependencies"])
    extras, plus = _declaration(page)
    assert sorted(extras - declared) == []
    text = page.read_text(encoding="utf-8")
    assert [p for p in plus if not re.search(rf"pip install {re.escape(p)}\b", text)] == []


def test_the_guard_refuses_a_module_the_extras_do_not_install(tmp_path: Path) -> None:
    """On a page that names no extra, importing FastAPI (installed here) fails like an absence."""
    page = tmp_path / "page.md"
    page.write_text("<!-- extras: none -->\n", encoding="utf-8")
    assert "fastapi" in _blocked_modules(*_declaration(page))
    assert "openai" not in _blocked_modules(*_declaration(page))
    done = _run_guarded(page, "import fastapi\n", tmp_path)
    assert done.returncode != 0
    assert "No module named 'fastapi': the extras this page names" in done.stderr
    page.write_text("<!-- extras: example -->\n", encoding="utf-8")
    assert _run_guarded(page, "import fastapi\n", tmp_path).returncode == 0


def test_the_extras_closure_follows_dependencies_of_dependencies() -> None:
    """`[otel]` brings the SDK's own dependencies; `[test]` brings `[testing]` through itself."""
    otel = _installed_by("asyncsession", frozenset({"otel"}))
    assert {"opentelemetry-sdk", "opentelemetry-semantic-conventions", "openai"} <= otel
    assert "pytest-asyncio" in _installed_by("asyncsession", frozenset({"test"}))
    assert "fastapi" not in _installed_by("asyncsession", frozenset())


def test_every_page_has_been_found() -> None:
    """The docs pages are discovered, so a moved folder cannot silently skip them."""
    assert any(p.name == "concepts.md" for p in PAGES)
    assert sum(len(_snippets(page)) for page in PAGES) >= 5
