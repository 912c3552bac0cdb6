"""The agent frameworks stay optional: only each framework's own integration module imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import asyncsession

PACKAGE = Path(asyncsession.__file__).parent
FRAMEWORKS = {
    "langchain": ("langchain", "langchain_core", "langgraph"),
    "google_adk": ("google.adk",),
    "pydantic_ai": ("pydantic_ai",),
    "openai_agents": ("agents",),
}
"""Each integration module and the top-level packages only it may import."""


def imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def framework_of(module: str) -> str | None:
    for framework, packages in FRAMEWORKS.items():
        if any(module == p or module.startswith(f"{p}.") for p in packages):
            return framework
    return None


def test_only_the_integration_module_imports_its_framework() -> None:
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        owner = relative.removeprefix("integrations/").removesuffix(".py")
        for module in imported(ast.parse(path.read_text(encoding="utf-8"))):
            framework = framework_of(module)
            if framework is not None and framework != owner:
                offenders.append(f"{relative} imports {module}")
    assert offenders == []


def test_the_check_sees_imports() -> None:
    """The walk finds a framework import where there is one."""
    tree = ast.parse("import agents\nfrom google.adk.sessions import X\nfrom . import y\n")
    assert {framework_of(m) for m in imported(tree)} == {"openai_agents", "google_adk"}
    assert framework_of("agentsx") is None
