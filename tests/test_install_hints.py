"""Every install hint the package prints names an extra that pyproject.toml declares."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HINT = re.compile(
    r"pip install '?(?:asyncsession|\.)\[([^\]]+)\]"  # a command, from the index or a clone
    r"|the `{0,2}\[([^\]]+)\]`{0,2} extra"  # or the extra by name
)
SOURCES = [
    *sorted((ROOT / "asyncsession").rglob("*.py")),
    ROOT / "README.md",
    *sorted((ROOT / "docs").rglob("*.md")),
]


def _declared_extras() -> set[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    return set(project["optional-dependencies"])


def _hints() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for source in SOURCES:
        for match in HINT.finditer(source.read_text(encoding="utf-8")):
            for extra in (match.group(1) or match.group(2)).split(","):
                found.append((str(source.relative_to(ROOT)), extra.strip()))
    return found


def test_every_install_hint_names_a_declared_extra() -> None:
    """No message, docstring or page tells users to install an extra that does not exist."""
    extras = _declared_extras()
    unknown = [(where, extra) for where, extra in _hints() if extra not in extras]
    assert unknown == []


def test_the_hint_search_finds_the_contract_kit_hint() -> None:
    """The search sees the contract kit's own hint, so a broken pattern cannot pass silently."""
    assert ("asyncsession/testing/contract.py", "testing") in _hints()


def test_the_testing_extra_installs_pytest_and_pytest_asyncio() -> None:
    """The `testing` extra holds what the contract kit imports."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        testing = tomllib.load(file)["project"]["optional-dependencies"]["testing"]
    assert {re.split(r"[<>=!~ \[]", requirement)[0] for requirement in testing} == {
        "pytest",
        "pytest-asyncio",
    }


def test_the_contract_kit_without_pytest_names_the_testing_extra() -> None:
    """Importing the contract kit where pytest is missing fails with the extra to install."""
    code = (
        "import sys\n"
        "sys.modules['pytest'] = None\n"
        "try:\n"
        "    import asyncsession.testing.contract\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert "install the [testing] extra (from a clone: pip install '.[testing]')" in done.stdout
