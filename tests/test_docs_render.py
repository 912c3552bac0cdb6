"""The documentation site builds strictly and its API pages render: no literal reST roles,
signatures with their annotations, no placeholder repository link, code that fits."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc|obj):")
TAG = re.compile(r"<[^>]+>")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built with `mkdocs build --strict` into a temporary directory."""
    target = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def _api_pages(site: Path) -> list[Path]:
    pages = sorted((site / "api").rglob("*.html"))
    assert len(pages) >= 30  # one per public module (33 once compaction's submodules went)
    return pages


def _text(page: Path) -> str:
    return html.unescape(TAG.sub("", page.read_text(encoding="utf-8")))


def test_api_pages_show_no_literal_rest_roles(site: Path) -> None:
    """No `:class:`, `:meth:` (or other reST role) is left as text on a generated API page."""
    leaks: list[str] = []
    for page in _api_pages(site):
        text = _text(page)
        for found in ROLE.finditer(text):
            context = " ".join(text[found.start() : found.end() + 40].split())
            leaks.append(f"{page.parent.name}: {context}")
    assert leaks == []


def test_signatures_show_their_annotations(site: Path) -> None:
    """Signatures are rendered apart from the heading, with parameter and return types."""
    text = _text(site / "api" / "asyncsession.repository" / "index.html")
    assert "find_by_id(session_id: str) -> Session | None" in text
    page = (site / "api" / "asyncsession.repository" / "index.html").read_text(encoding="utf-8")
    assert 'class="doc-signature' in page
    assert 'href="../asyncsession.events/#asyncsession.events.Session"' in page  # a cross-ref


def test_the_header_links_to_no_placeholder_repository(site: Path) -> None:
    """The site links to no invented repository (there is no public one to link to)."""
    for page in site.rglob("*.html"):
        assert "example.invalid" not in page.read_text(encoding="utf-8"), page


def test_the_stylesheet_that_fits_code_is_linked(site: Path) -> None:
    """The small stylesheet that lets wide code scroll is copied and linked from every page."""
    assert (site / "stylesheets" / "extra.css").is_file()
    assert "stylesheets/extra.css" in (site / "index.html").read_text(encoding="utf-8")
