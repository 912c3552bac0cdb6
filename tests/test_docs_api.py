"""The API reference has exactly one page per public module, generated and up to date."""

from __future__ import annotations

import re
from collections import Counter

from api_pages import API, MKDOCS, ROOT, _definition, nav, pages
from test_public_api import _public_modules

DIRECTIVE = re.compile(r"^::: ([\w.]+)", re.MULTILINE)


def _directives() -> list[tuple[str, str]]:
    """Every `::: module` directive in docs/, with the page it is on."""
    return [
        (str(page.relative_to(ROOT)), found)
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for found in DIRECTIVE.findall(page.read_text(encoding="utf-8"))
    ]


def test_every_public_module_has_exactly_one_page() -> None:
    """Each public module is rendered by one `:::` directive, on its own page under docs/api/."""
    rendered = Counter(module for _, module in _directives())
    assert sorted(m for m in _public_modules() if rendered[m] != 1) == []
    for where, module in _directives():
        assert where == f"docs/api/{module}.md", f"{module} is rendered on {where}"


def test_no_page_names_a_module_that_is_not_public() -> None:
    """No directive renders a private module, a deprecated alias or a module that is gone."""
    public = set(_public_modules())
    assert sorted({module for _, module in _directives()} - public) == []
    assert sorted(p.stem for p in API.glob("*.md") if p.stem not in public) == []


def test_the_pages_and_the_nav_are_generated_from_the_package() -> None:
    """docs/api/ and the nav match what tests/api_pages.py generates (run it to update them)."""
    for page in pages():
        assert page.path.is_file(), f"{page.path.name} is missing: run python tests/api_pages.py"
        assert page.path.read_text(encoding="utf-8") == page.render(), (
            f"{page.path.name} is out of date: run python tests/api_pages.py"
        )
    assert nav(pages()) in MKDOCS.read_text(encoding="utf-8"), (
        "the API reference nav is out of date: run python tests/api_pages.py"
    )


def test_every_exported_name_is_documented_once_and_linked_elsewhere() -> None:
    """Each object a public module exports is documented on one page; every other module that
    exports it links there."""
    all_pages = pages()
    documented = Counter(
        _definition(page.module, name) for page in all_pages for name in page.documented
    )
    assert [where for where, count in documented.items() if count > 1] == []
    homes = {(page.module, name) for page in all_pages for name in page.documented}
    for page in all_pages:
        for name, home in page.linked:
            assert (home, name) in homes, f"{page.module}.{name} links to {home}, which lacks it"
            assert _definition(page.module, name) in documented
    chat = next(page for page in all_pages if page.module == "asyncsession.openai")
    assert "ChatClient" in chat.documented
    top = next(page for page in all_pages if page.module == "asyncsession")
    assert ("DefaultSessionService", "asyncsession.service") in top.linked
