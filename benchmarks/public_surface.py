"""The size of the public surface and of the package.

``python -m benchmarks.public_surface [--list]`` prints:

- the names the top-level package exports (``asyncsession.__all__``);
- the public objects: every distinct object that some public module (an import path with no
  ``_`` part) lists in its ``__all__``, counted once however many modules re-export it (classes,
  functions and constants alike; a constant re-exported under the same name is the same object),
  by area (the part of the import path after ``asyncsession``, of the module nearest the
  object's definition);
- the lines of the package's Python files, all of them and those of the chat turn's modules
  (``advisors/``, ``chat.py``, ``openai/``).

With ``--list`` it also prints every public object with the module it is counted under.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
from collections import Counter
from pathlib import Path

import asyncsession

PACKAGE = Path(asyncsession.__file__).resolve().parent
TURN_PARTS = ("advisors", "chat.py", "openai")


def public_modules() -> list[str]:
    """Every importable module path without a private part, the package first."""
    names = ["asyncsession"]
    for info in pkgutil.walk_packages(asyncsession.__path__, "asyncsession."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return names


def _home(value: object, exporters: list[str]) -> str:
    """The exporting module nearest the definition: the defining module if it exports the
    object, else the exporter sharing the longest prefix with it, the deeper one on a tie."""
    defined = getattr(value, "__module__", None)
    if not isinstance(defined, str) or not defined.startswith("asyncsession"):
        defined = ""

    def rank(module: str) -> tuple[int, int]:
        shared = 0
        for a, b in zip(module.split("."), defined.split("."), strict=False):
            if a != b:
                break
            shared += 1
        return (shared, module.count("."))

    return max(exporters, key=rank)


def public_objects() -> dict[tuple[str, int], tuple[str, str]]:
    """(name, id of the object) -> (home module, name), for every public object."""
    exporters: dict[tuple[str, int], list[str]] = {}
    values: dict[tuple[str, int], object] = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for attr in getattr(module, "__all__", ()):
            value = getattr(module, attr)
            # Classes and functions are one object under any name; a constant is one per name.
            named = inspect.isclass(value) or inspect.isfunction(value)
            key = (value.__qualname__ if named else attr, id(value))
            exporters.setdefault(key, []).append(module_name)
            values[key] = value
    return {key: (_home(values[key], mods), key[0]) for key, mods in exporters.items()}


def area(module: str) -> str:
    parts = module.split(".")
    return "(top level)" if len(parts) == 1 else parts[1]


def lines(paths: list[Path]) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description="The size of the public surface.")
    parser.add_argument("--list", action="store_true", help="print every public object")
    args = parser.parse_args()
    objects = public_objects()
    print(f"top-level names: {len(asyncsession.__all__)}")
    print(f"public modules: {len(public_modules())}")
    print(f"public objects: {len(objects)}")
    for name, count in sorted(Counter(area(m) for m, _ in objects.values()).items()):
        print(f"  {name}: {count}")
    files = sorted(PACKAGE.rglob("*.py"))
    turn = [p for p in files if p.relative_to(PACKAGE).parts[0] in TURN_PARTS]
    print(f"package lines: {lines(files)} in {len(files)} files")
    print(f"advisors/ + chat.py + openai/ lines: {lines(turn)}")
    if args.list:
        print()
        for module, name in sorted(objects.values()):
            print(f"{module}.{name}")


if __name__ == "__main__":
    main()
