"""The MongoDB store spells its stored fields only in ``_layout``.

Every other module of ``asyncsession/repository/mongo/`` names a field or collection through a
``_layout`` constant; a string literal equal to a stored key (or a dotted path through one) is
a second spelling that could drift. Docstrings are prose, and a line marked
``# layout: ...`` says why its literal is not a stored key (a model field of the same name).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import cast

import pytest

from asyncsession.repository.mongo import _layout

PACKAGE = Path(_layout.__file__).parent
INTERNALS = PACKAGE.parents[2] / "docs" / "internals" / "mongodb.md"
NAMES = _layout.field_names()


def _docstrings(tree: ast.Module) -> set[int]:
    found: set[int] = set()
    for node in ast.walk(tree):
        body: object = getattr(node, "body", None)
        if isinstance(body, list):
            # module, class, function and attribute docstrings
            for stmt in cast("list[ast.stmt]", body):
                if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                    found.add(id(stmt.value))
    return found


def _is_field(value: str) -> bool:
    parts = value.split(".")
    return all(part.isidentifier() or part == "_id" for part in parts) and any(
        part in NAMES for part in parts
    )


def field_literals(path: Path) -> list[str]:
    """``line: literal`` for every field-name literal of one module."""
    source = path.read_text()
    lines = source.splitlines()
    tree = ast.parse(source)
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            skip.update(id(sub) for sub in ast.walk(node))
    found: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
            continue
        if id(node) in skip or not _is_field(node.value):
            continue
        if "# layout:" in lines[node.lineno - 1]:
            continue
        found.append((node.lineno, node.col_offset, f"{path.name}:{node.lineno}: {node.value!r}"))
    return [text for _, _, text in sorted(found)]


FIELDS = [
    name
    for name in _layout.__all__
    if name.isupper() and isinstance(getattr(_layout, name), str) and name not in ("TEXT", "KIND")
]
"""The constants that name one stored key or collection (``TEXT`` is a path through them,
``KIND`` a model field that is never stored)."""


def test_the_layout_names_the_fields_the_docstring_lists() -> None:
    assert {"session", "commit", "incarnation", "events", "body", "_id", "sessions"} <= NAMES
    assert len(NAMES - {"kind"}) == len(FIELDS)  # one constant a key


@pytest.mark.parametrize(
    "module", sorted(p.name for p in PACKAGE.glob("*.py") if p.name != "_layout.py")
)
def test_no_field_name_literal_outside_the_layout(module: str) -> None:
    assert field_literals(PACKAGE / module) == []


def test_the_check_finds_a_literal(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstring mentions "seq"."""\n'
        'a = {"commit": 1, "events.id": 1, "$inc": {}}\n'
        'b = doc.get("incarnation")\n'
        'c = {"type": 1}  # layout: a model field\n'
        'd = f"{x}.commit"\n'
    )
    assert field_literals(sample) == [
        "sample.py:2: 'commit'",
        "sample.py:2: 'events.id'",
        "sample.py:3: 'incarnation'",
    ]


def test_the_maintainers_page_names_every_field() -> None:
    page = INTERNALS.read_text(encoding="utf-8")
    missing = [name for name in FIELDS if f"`{getattr(_layout, name)}`" not in page]
    assert missing == []
