"""Every code example in the README and docs/ runs, and does what it says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN_AS_TESTS = {"contract-kit.md"}


def _examples() -> list[object]:
    params: list[object] = []
    for page in PAGES:
        for number, match in enumerate(FENCE.finditer(page.read_text(encoding="utf-8")), 1):
            name = f"{page.relative_to(ROOT)}#{number}"
            params.append(pytest.param(page, match.group(1), id=name))
    return params


@pytest.mark.parametrize(("page", "code"), _examples())
def test_example_runs(page: Path, code: str, tmp_path: Path) -> None:
    """The example executes without error (test-suite examples run under pytest)."""
    if page.name in RUN_AS_TESTS:
        module = tmp_path / "test_example.py"
        module.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                str(module),
                "-q",
                "-p",
                "no:cacheprovider",
                "-o",
                "asyncio_mode=auto",
                "-o",
                "asyncio_default_fixture_loop_scope=function",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert " passed" in done.stdout
        return
    namespace: dict[str, object] = {"__name__": "__docs_example__"}
    exec(compile(code, f"{page.name}-example", "exec"), namespace)


def test_every_page_has_been_found() -> None:
    """The docs pages are discovered, so a moved folder cannot silently skip them."""
    assert any(p.name == "concepts.md" for p in PAGES)
    assert len(_examples()) >= 5
