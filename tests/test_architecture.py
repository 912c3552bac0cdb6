"""The package's import graph: no circles, imports only go down, no private names across modules.

Every import counts: module level, under ``TYPE_CHECKING`` and inside functions (a type-only or
deferred import is still a dependency). The graph is read with ``ast`` from the source, never by
importing it, so a circle that happens to work at runtime is still reported.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

PACKAGE = "asyncsession"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE
MAX_LINES = 800

# Lower layers never import higher ones; a module may import its own layer and any below.
# Every entry names a module or package that exists; a package's entry covers its submodules and
# the longest matching entry wins, so a subpackage can sit apart from its parent. The facade
# (``asyncsession`` itself) covers only its own ``__init__``: a new top-level module or package
# has no layer until it is given one here, and the test that every module has a layer fails.
FACADE_LAYER = 9
LAYERS: dict[str, int] = {
    "asyncsession._version": 0,
    "asyncsession._shield": 0,
    "asyncsession._display": 0,
    "asyncsession.exceptions": 0,
    "asyncsession._pymongo_errors": 0,
    "asyncsession._pymongo_compat": 0,  # PyMongo and Motor differences; imports only pymongo
    "asyncsession._mongo_uri": 0,  # a URI and its failures in words for people (CLI, demo)
    "asyncsession._telemetry": 0,  # spans, a no-op without OpenTelemetry; imports only _version
    "asyncsession._lifecycle": 0,  # closing once, and the event loop a call runs on
    "asyncsession.messages": 1,
    "asyncsession.events": 1,
    "asyncsession.filters": 1,
    "asyncsession._view": 1,  # archived and the active view, derived from the boundaries
    "asyncsession._offload": 1,  # large bodies: previews and pages, for stores and the turn
    "asyncsession.rewinds": 1,  # points of a log, and the record a rewind leaves
    "asyncsession._text": 1,  # text that cannot be stored (lone surrogates), for every store
    "asyncsession._responses_items": 1,  # messages <-> Responses API items (client, adapters)
    "asyncsession._checks": 1,  # argument checks at public entry points: UsageError
    "asyncsession.compaction_protocols": 2,
    "asyncsession.encryption": 2,  # data keys per user, for every store (libmongocrypt)
    "asyncsession.repository": 3,
    "asyncsession._describe": 3,  # events on one line for people (the CLI's tables, the demo)
    "asyncsession.memory": 3,  # the memory stores: storage, beside the session stores
    "asyncsession.service": 4,
    "asyncsession._compaction_pass": 4,
    "asyncsession.compaction": 5,
    "asyncsession.chat": 6,
    "asyncsession.advisors": 6,
    "asyncsession._turn": 6,  # the chat turn, between the advisors and the OpenAI clients
    "asyncsession.tools": 6,
    "asyncsession.telemetry": 7,  # spans around the service, the store and the advisors
    "asyncsession.openai": 7,
    "asyncsession.integrations": 8,  # adapters to other agent frameworks, over the OpenAI code
    "asyncsession.cli": 8,
    "asyncsession.testing": 8,
    "asyncsession._demo": 8,
    "asyncsession.__main__": 8,
}


# A deprecated alias whose name's new home sits higher looks it up by name at call time
# (``compaction._moved`` does), so no import edge goes up. Should an alias ever need a real
# import, list it here as (importer, imported module), made inside a function and left out
# of the graph; remove the entry with the alias.
DEPRECATED_ALIAS_IMPORTS: frozenset[tuple[str, str]] = frozenset()

# Packages that must not reach an outside system: each outside system has one boundary.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "asyncsession.compaction": ("openai", "asyncsession.openai"),  # the model calls live there
}


@dataclass(frozen=True, slots=True)
class Import:
    """One imported module, and the name taken from it (``None`` for ``import x``)."""

    importer: str
    module: str
    name: str | None
    line: int


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts.pop()
    return ".".join(parts), is_package


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(path)[0]: path for path in sorted(ROOT.rglob("*.py"))}


def _absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports_of(name: str, source: str, *, is_package: bool = False) -> list[Import]:
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):  # every import, anywhere in the module
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    found.append(Import(name, alias.name, None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, is_package, node)
            if base == PACKAGE or base.startswith(PACKAGE + "."):
                found.extend(Import(name, base, alias.name, node.lineno) for alias in node.names)
    return found


@cache
def _all_imports() -> tuple[Import, ...]:
    """Every import of the package's own modules, but the deprecated aliases' listed ones."""
    return tuple(
        imp
        for name, path in _modules().items()
        for imp in _imports_of(
            name, path.read_text(encoding="utf-8"), is_package=_module_name(path)[1]
        )
        if (imp.importer, imp.module) not in DEPRECATED_ALIAS_IMPORTS
    )


def _every_import_of(path: Path) -> list[tuple[str, int, bool]]:
    """Each module ``path`` imports, outside packages included: (name, line, inside a function)."""
    return _every_import_of_source(path, path.read_text(encoding="utf-8"))


def _every_import_of_source(path: Path, source: str) -> list[tuple[str, int, bool]]:
    tree = ast.parse(source)
    deferred = {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef)
        for node in ast.walk(function)
    }
    name, is_package = _module_name(path)
    found: list[tuple[str, int, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, id(node) in deferred) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            found.append((_absolute(name, is_package, node), node.lineno, id(node) in deferred))
    return sorted(found, key=lambda imported: imported[1])


def _target(imp: Import) -> str:
    """The module an import depends on: a submodule named in ``from pkg import sub`` counts."""
    modules = _modules()
    if imp.name is not None and f"{imp.module}.{imp.name}" in modules:
        return f"{imp.module}.{imp.name}"
    module = imp.module
    while module not in modules:  # ``import pkg.missing`` never happens; be safe anyway
        module = module.rpartition(".")[0]
    return module


def _packages_run(importer: str, target: str) -> list[str]:
    """The package ``__init__`` modules importing ``target`` runs first: its ancestors below the
    facade, except the packages ``importer`` is itself inside (those are already running)."""
    parts = target.split(".")
    ancestors = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [a for a in ancestors if not _covers(a, importer)]


def _graph() -> dict[str, frozenset[str]]:
    """Who depends on whom: the imported module and every package ``__init__`` it runs."""
    edges: dict[str, set[str]] = {name: set() for name in _modules()}
    for imp in _all_imports():
        target = _target(imp)
        dependencies = [target, *_packages_run(imp.importer, target)]
        if target != imp.module and imp.module in edges:
            # ``from pkg import sub`` reads ``pkg``'s namespace too: it depends on ``pkg``'s
            # ``__init__`` even from inside ``pkg`` (``from .sub import x`` does not).
            dependencies.append(imp.module)
        for dependency in dependencies:
            if dependency != imp.importer:
                edges[imp.importer].add(dependency)
    return {name: frozenset(targets) for name, targets in edges.items()}


def _circles(edges: dict[str, frozenset[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges[nxt])))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _shortest_cycle(edges: dict[str, frozenset[str]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module, as a path back to it."""
    start, members = component[0], set(component)
    paths: dict[str, list[str]] = {start: [start]}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(edges[node] & members):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    return component  # unreachable for a strongly connected component


def _declared_layer(module: str) -> int | None:
    if module == PACKAGE:
        return FACADE_LAYER  # the facade re-exports everything, and covers nothing else
    matching = [prefix for prefix in LAYERS if _covers(prefix, module)]
    return LAYERS[max(matching, key=len)] if matching else None


@cache
def _layer(module: str) -> int | None:
    """The declared layer; a subpackage's ``__init__`` (a facade) sits as high as it re-exports."""
    path = _modules().get(module)
    if module == PACKAGE or path is None or path.name != "__init__.py":
        return _declared_layer(module)
    inside = [t for t in _graph()[module] if t.startswith(module + ".")]
    layers = [layer for t in inside if (layer := _layer(t)) is not None]
    own = _declared_layer(module)
    candidates = [*layers, *([own] if own is not None else [])]
    return max(candidates) if candidates else None


def _covers(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_graph_sees_imports_everywhere() -> None:
    """Module-level, TYPE_CHECKING and function-level imports all count, relative or absolute."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .a import b\n"
        "if TYPE_CHECKING:\n    from .c import d\n"
        "def f():\n    from ..e import g\n    import asyncsession.h\n"
    )
    found = _imports_of("asyncsession.advisors.probe", source)
    assert {(i.module, i.name) for i in found} == {
        ("asyncsession.advisors.a", "b"),
        ("asyncsession.advisors.c", "d"),
        ("asyncsession.e", "g"),
        ("asyncsession.h", None),
    }


def test_importing_a_submodule_runs_its_packages() -> None:
    """``from ..advisors.contexts import X`` also depends on ``advisors/__init__``; a module's own
    package does not count (it is already being imported)."""
    assert _packages_run("asyncsession.tools.recall", "asyncsession.advisors.contexts") == [
        "asyncsession.advisors"
    ]
    assert _packages_run("asyncsession.advisors.turn", "asyncsession.advisors.contexts") == []
    assert _packages_run("asyncsession.service", "asyncsession.repository._turn") == [
        "asyncsession.repository"
    ]


def test_a_circle_is_found() -> None:
    """The circle finder reports every module of a circle, and nothing else."""
    edges: dict[str, frozenset[str]] = {
        "a": frozenset({"b"}),
        "b": frozenset({"c"}),
        "c": frozenset({"a", "d"}),
        "d": frozenset[str](),
    }
    assert _circles(edges) == [["a", "b", "c"]]
    assert _shortest_cycle(edges, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_circle() -> None:
    """No module reaches itself through its imports (every import counts)."""
    graph = _graph()
    circles = _circles(graph)
    assert not circles, "import circles (modules, then one shortest cycle):\n" + "\n".join(
        f"{', '.join(c)}\n  {' -> '.join(_shortest_cycle(graph, c))}" for c in circles
    )


def test_every_module_has_a_layer() -> None:
    """Each module of the package is placed in the declared layer map."""
    missing = [name for name in _modules() if _layer(name) is None]
    assert not missing, f"declare a layer in LAYERS for: {missing}"


def test_every_layer_entry_names_a_module() -> None:
    """No entry of the layer map outlives the module or package it names."""
    stale = [prefix for prefix in LAYERS if prefix not in _modules()]
    assert not stale, f"LAYERS names modules that do not exist: {stale}"


def test_the_facade_covers_no_other_module() -> None:
    """A module nobody declared has no layer: the facade's entry is not a catch-all."""
    assert _declared_layer(PACKAGE) == FACADE_LAYER
    assert PACKAGE not in LAYERS
    assert _declared_layer("asyncsession.undeclared_module") is None
    assert _declared_layer("asyncsession.undeclared_package.module") is None
    assert _declared_layer("asyncsession.advisors.new_module") == LAYERS["asyncsession.advisors"]


def test_every_top_level_module_is_declared_itself() -> None:
    """Each top-level module and package has its own entry, not one inherited from elsewhere."""
    top = {name.split(".")[1] for name in _modules() if name != PACKAGE}
    undeclared = sorted(f"{PACKAGE}.{part}" for part in top if f"{PACKAGE}.{part}" not in LAYERS)
    assert not undeclared, f"give these their own entry in LAYERS: {undeclared}"


def test_imports_only_go_down() -> None:
    """A module imports only modules of its own layer or lower ones."""
    upward: set[str] = set()
    for imp in _all_imports():
        target = _target(imp)
        source_layer, target_layer = _layer(imp.importer), _layer(target)
        if source_layer is None or target_layer is None or target == PACKAGE:
            continue
        if target_layer > source_layer:
            upward.add(
                f"{imp.importer} (layer {source_layer}) imports {target} (layer {target_layer}) "
                f"at line {imp.line}"
            )
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_nothing_imports_the_facade() -> None:
    """No module of the package imports the top-level ``asyncsession`` facade."""
    users = [imp.importer for imp in _all_imports() if _target(imp) == PACKAGE]
    assert not users, f"these modules import the package facade: {users}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_private_name_is_imported_from_another_module() -> None:
    """``from x import _name`` across modules is refused; a private module may be imported."""
    modules = _modules()
    offenders: list[str] = []
    for imp in _all_imports():
        if imp.name is None or not _is_private(imp.name) or f"{imp.module}.{imp.name}" in modules:
            continue
        offenders.append(f"{imp.importer} imports {imp.name} from {imp.module} (line {imp.line})")
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


def test_a_private_module_is_imported_only_inside_its_package() -> None:
    """``pkg/_mod.py`` is the package's own: code outside ``pkg`` imports its public modules
    (a private module at the top of the package is shared by all of it)."""
    offenders: list[str] = []
    for imp in _all_imports():
        target = _target(imp)
        parts = target.split(".")
        private_at = next((i for i, part in enumerate(parts) if _is_private(part)), None)
        if private_at is None or private_at == 1:  # public, or asyncsession._x
            continue
        owner = ".".join(parts[:private_at])
        if imp.importer != owner and not imp.importer.startswith(owner + "."):
            offenders.append(f"{imp.importer} imports {target} (line {imp.line})")
    assert not offenders, "private modules imported from outside their package:\n" + "\n".join(
        offenders
    )


def test_each_deprecated_alias_import_exists_and_is_deferred() -> None:
    """Every listed alias import is still made, and only inside a function."""
    for importer, module in sorted(DEPRECATED_ALIAS_IMPORTS):
        made = [
            deferred
            for name, _, deferred in _every_import_of(_modules()[importer])
            if name == module
        ]
        assert made, f"{importer} no longer imports {module}: remove it from the list"
        assert all(made), f"{importer} imports {module} at module level"


def test_no_package_reaches_a_system_it_must_not() -> None:
    """``compaction`` imports neither the OpenAI SDK nor ``asyncsession.openai`` (under
    ``TYPE_CHECKING`` or in a function neither), but for the listed deprecated aliases."""
    offenders: list[str] = []
    for package, systems in FORBIDDEN.items():
        for name, path in _modules().items():
            if not _covers(package, name):
                continue
            for module, line, _ in _every_import_of(path):
                if (name, module) in DEPRECATED_ALIAS_IMPORTS:
                    continue
                if any(_covers(system, module) for system in systems):
                    offenders.append(f"{name} imports {module} (line {line})")
    assert not offenders, "imports across a system's boundary:\n" + "\n".join(offenders)


def test_the_boundary_check_sees_every_kind_of_import() -> None:
    """A type-only, a deferred and a plain SDK import are all found."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from openai import AsyncOpenAI\n"
        "def f():\n    import openai.types\n"
        "from ..openai import ChatClient\n"
    )
    path = ROOT / "compaction" / "probe.py"
    found = _every_import_of_source(path, source)
    assert [(m, d) for m, _, d in found if m != "typing"] == [
        ("openai", False),
        ("openai.types", True),
        ("asyncsession.openai", False),
    ]


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_is_over_500_lines_without_a_stated_reason(name: str) -> None:
    """A module over 500 lines states why at the top of its docstring ("Over 500 lines: ...")."""
    path = _modules()[name]
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if lines <= MAX_LINES:
        return
    assert "Over 500 lines:" in _docstring(path), (
        f"{name} has {lines} lines: split it, or state the reason in its docstring "
        "('Over 500 lines: ...')"
    )
