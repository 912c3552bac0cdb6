"""The public surface: every public module's ``__all__`` is complete, unique and importable."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import asyncsession


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
    """The names of the README example import from the top level."""
    for attr in ("DefaultSessionService", "InMemorySessionRepository", "EventFilter", "Session"):
        assert attr in asyncsession.__all__


def test_every_exception_derives_from_the_base() -> None:
    """Every error we raise is an AsyncSessionError."""
    from asyncsession import exceptions

    for attr in exceptions.__all__:
        assert issubclass(getattr(exceptions, attr), asyncsession.AsyncSessionError)
