"""Fixtures shared by the MongoDB store's tests."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType

import pytest

import asyncsession.repository.mongo


def _store_modules() -> list[ModuleType]:
    package = asyncsession.repository.mongo
    return [
        importlib.import_module(f"{package.__name__}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
        if info.name.startswith("_")
    ]


@pytest.fixture
def tighten(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """A function that sets tiny position gaps and tail sizes in every module of the store
    that uses them (each imported its own binding of the constants)."""

    def apply() -> None:
        values = {"GAP": 4, "MAX_STEP": 1, "K_MIN": 3, "K_MAX": 6}
        for module in _store_modules():
            for name, value in values.items():
                if hasattr(module, name):
                    monkeypatch.setattr(module, name, value)

    return apply
