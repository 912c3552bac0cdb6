"""The `Tool` type sits low: any layer (chat included) can use it without importing upward."""

from __future__ import annotations

import ast
from pathlib import Path

import asyncsession.tools

TOOLS = Path(asyncsession.tools.__file__).parent


def _package_imports(path: Path) -> set[str]:
    """Every module of the package this file imports, at any depth of the file."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            anchor = ["asyncsession", "tools"][: 3 - node.level]
            imported.add(".".join([*anchor, *([node.module] if node.module else [])]))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("asyncsession"):
            imported.add(node.module or "")
        elif isinstance(node, ast.Import):
            imported.update(a.name for a in node.names if a.name.startswith("asyncsession"))
    return imported


def test_the_tool_module_imports_only_the_exceptions() -> None:
    """`Tool` (its docstring reader included) needs nothing of the package but the exceptions."""
    assert _package_imports(TOOLS / "_tool.py") <= {"asyncsession.exceptions"}
