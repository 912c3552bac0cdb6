"""The public surface: every public module's ``__all__`` is complete, unique and importable."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import asyncsession
from asyncsession import exceptions

ROOT = Path(__file__).resolve().parent.parent
TOP_LEVEL_LIMIT = 40
"""The most names the top-level package exports: the common path, not everything."""
IMPORTED_MODULES_LIMIT = 3
"""The most asyncsession modules the README example and the FastAPI example import from."""


def _public_modules() -> list[str]:
    names = ["asyncsession"]
    for info in pkgutil.walk_packages(asyncsession.__path__, "asyncsession."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("name", _public_modules())
def test_all_names_exist_and_are_unique(name: str) -> None:
    """Every name in ``__all__`` is defined, and none is listed twice."""
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(exported) == len(set(exported))
    for attr in exported:
        assert hasattr(module, attr), f"{name}.__all__ lists {attr!r}, which is not defined"


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_class_and_function_defined_here_is_exported(name: str) -> None:
    """A public class or function defined in a public module is in its ``__all__``."""
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", ()))
    for attr, value in vars(module).items():
        if attr.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, "__module__", None) == name:
            assert attr in exported, f"{name}.{attr} is public but not in __all__"


def test_the_top_level_reexports_the_common_path() -> None:
    """The names of the README example import from the top level, which stays small."""
    for attr in ("DefaultSessionService", "InMemorySessionRepository", "EventFilter", "Session"):
        assert attr in asyncsession.__all__
    assert len(asyncsession.__all__) <= TOP_LEVEL_LIMIT


def _asyncsession_modules(source: str) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("asyncsession"):
            modules.add(node.module or "")
        elif isinstance(node, ast.Import):
            modules.update(a.name for a in node.names if a.name.startswith("asyncsession"))
    return modules


def test_the_readme_and_the_example_import_from_few_modules() -> None:
    """The README's example and the FastAPI example each import from at most three of our
    modules."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = readme.split("```python", 1)[1].split("```", 1)[0]
    app = (ROOT / "examples" / "fastapi_app.py").read_text(encoding="utf-8")
    for source in (example, app):
        assert len(_asyncsession_modules(source)) <= IMPORTED_MODULES_LIMIT


def test_every_exception_derives_from_the_base() -> None:
    """Every error we raise is an AsyncSessionError."""
    from asyncsession import exceptions

    for attr in exceptions.__all__:
        assert issubclass(getattr(exceptions, attr), asyncsession.AsyncSessionError)


def _is_public(module_name: str) -> bool:
    return not any(part.startswith("_") for part in module_name.split("."))


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class a user can reach: defined in a public module, or exported by one.

    A class in a private module that no public module exports (the CLI's exit-code carrier,
    say) is internal: it never leaves the package.
    """
    found: dict[str, type[BaseException]] = {}
    names = ["asyncsession", *(i.name for i in _all_modules() if i.name != "asyncsession.__main__")]
    for name in names:
        module = importlib.import_module(name)
        exported = set(getattr(module, "__all__", ())) if _is_public(name) else set[str]()
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("asyncsession")
                and not attr.startswith("_")
                and (_is_public(value.__module__) or attr in exported)
            ):
                found[value.__name__] = value
    return found


def _all_modules() -> list[pkgutil.ModuleInfo]:
    return list(pkgutil.walk_packages(asyncsession.__path__, "asyncsession."))


def test_every_exception_is_in_the_one_tree_and_exported() -> None:
    """Each error class is defined in asyncsession.exceptions, drawn in its tree, and exported
    from there; one the top-level package exports is the same class."""
    from asyncsession import exceptions

    tree = _drawn_in_tree()
    classes = _exception_classes()
    assert {"MemoryStoreError", "ChatTimeout", "ToolLoopLimitExceeded"} <= set(classes)
    for name, cls in classes.items():
        assert cls.__module__ == "asyncsession.exceptions", f"{name} lives in {cls.__module__}"
        assert issubclass(cls, asyncsession.AsyncSessionError), name
        assert name in tree, f"{name} is not drawn in the asyncsession.exceptions tree"
        assert name in exceptions.__all__, f"{name} is not in asyncsession.exceptions.__all__"
        if name in asyncsession.__all__:
            assert getattr(asyncsession, name) is cls


def _drawn_in_tree() -> list[str]:
    """The class names drawn in the ``asyncsession.exceptions`` docstring tree."""
    import re

    from asyncsession import exceptions

    block = (exceptions.__doc__ or "").split("```text", 1)[1].split("```", 1)[0]
    return re.findall(r"^[\s│├└─]*([A-Z]\w+)", block, re.MULTILINE)


def test_the_tree_lists_only_real_errors() -> None:
    """The tree draws each exported error exactly once, and nothing else."""
    from asyncsession import exceptions

    drawn = _drawn_in_tree()
    assert len(drawn) == len(set(drawn))
    assert set(drawn) == set(exceptions.__all__)


@pytest.mark.parametrize(
    "error",
    [
        pytest.param(asyncsession.SessionNotFound("s"), id="repository"),
        pytest.param(exceptions.MemoryStoreError("not_found", "a.md"), id="memory"),
        pytest.param(asyncsession.ToolLoopLimitExceeded(3), id="chat"),
    ],
)
def test_errors_show_their_public_path(error: Exception) -> None:
    """An error's class reports the public module it is imported from."""
    assert type(error).__module__ == "asyncsession.exceptions"
    assert f"{type(error).__module__}.{type(error).__qualname__}".startswith(
        "asyncsession.exceptions."
    )


def test_the_memory_modules_still_export_the_memory_error() -> None:
    """asyncsession.memory and asyncsession.memory.store re-export MemoryStoreError."""
    from asyncsession import exceptions, memory
    from asyncsession.memory import store

    for module in (memory, store):
        assert module.MemoryStoreError is exceptions.MemoryStoreError
        assert "MemoryStoreError" in module.__all__
