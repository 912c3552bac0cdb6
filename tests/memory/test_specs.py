"""Tool specs for a tool-calling model, the memory prompt, paths, and the public surface."""

from __future__ import annotations

import json
import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

import asyncsession.memory as memory
from asyncsession.memory import (
    CONSOLIDATION_REMINDER,
    MEMORY_SYSTEM_PROMPT,
    MEMORY_TOOL_NAMES,
    AutoMemoryTools,
    MemoryPathError,
    MemoryStore,
    normalize_memory_path,
    render_memory_prompt,
    validate_memory_scope,
)


def test_specs_name_the_six_tools_in_order(tools: AutoMemoryTools) -> None:
    """tool_specs returns the six model-facing tools in the documented order."""
    assert [spec.name for spec in tools.tool_specs()] == list(MEMORY_TOOL_NAMES)
    assert MEMORY_TOOL_NAMES == (
        "MemoryView",
        "MemoryCreate",
        "MemoryStrReplace",
        "MemoryInsert",
        "MemoryDelete",
        "MemoryRename",
    )


def test_specs_bind_the_tool_methods(tools: AutoMemoryTools) -> None:
    """Each spec's function is the matching bound method of the tools instance."""
    methods = [
        tools.memory_view,
        tools.memory_create,
        tools.memory_str_replace,
        tools.memory_insert,
        tools.memory_delete,
        tools.memory_rename,
    ]
    assert [spec.function for spec in tools.tool_specs()] == methods


def test_schemas_use_snake_case_parameters(tools: AutoMemoryTools) -> None:
    """The JSON schemas list the snake_case parameters, required ones first-class, no extras."""
    schemas = {spec.name: spec.json_schema for spec in tools.tool_specs()}
    expected = {
        "MemoryView": (["path", "view_range"], ["path"]),
        "MemoryCreate": (["path", "file_text"], ["path", "file_text"]),
        "MemoryStrReplace": (["path", "old_str", "new_str"], ["path", "old_str", "new_str"]),
        "MemoryInsert": (
            ["path", "insert_line", "insert_text"],
            ["path", "insert_line", "insert_text"],
        ),
        "MemoryDelete": (["path"], ["path"]),
        "MemoryRename": (["old_path", "new_path"], ["old_path", "new_path"]),
    }
    for name, (properties, required) in expected.items():
        schema = schemas[name]
        assert schema["type"] == "object"
        assert list(schema["properties"]) == properties
        assert schema["required"] == required
        assert schema["additionalProperties"] is False
        assert all(prop.get("description") for prop in schema["properties"].values())
    assert schemas["MemoryInsert"]["properties"]["insert_line"]["type"] == "integer"
    json.dumps(schemas)  # plain JSON, ready for any SDK


def test_descriptions_teach_the_index_convention(tools: AutoMemoryTools) -> None:
    """The descriptions explain MEMORY.md, the two-step save and front matter."""
    descriptions = {spec.name: spec.description for spec in tools.tool_specs()}
    assert all("MEMORY.md" in text for text in descriptions.values())
    assert "two steps" in descriptions["MemoryCreate"]
    assert "type: <user | feedback | project | reference>" in descriptions["MemoryCreate"]
    assert "- [Title](file.md) — one-line hook" in descriptions["MemoryInsert"]


async def test_invoke_runs_the_tool_from_json(tools: AutoMemoryTools) -> None:
    """invoke validates a JSON argument string and runs the tool."""
    create, view = tools.tool_specs()[1], tools.tool_specs()[0]
    result = await create.invoke('{"path": "a.md", "file_text": "hi\\n"}')
    assert result == "Successfully created file: a.md (3 bytes)"
    assert await view.invoke({"path": "a.md"}) == "File: a.md\nLines 1-1 of 1\n\n     1\thi\n"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        pytest.param("{", "Invalid JSON", id="bad-json"),
        pytest.param("{}", "path: Field required", id="missing"),
        pytest.param('{"path": "a", "extra": 1}', "extra: Extra inputs", id="extra"),
        pytest.param({"path": 3}, "path: Input should be a valid string", id="wrong-type"),
    ],
)
async def test_invoke_returns_invalid_arguments_as_error(
    tools: AutoMemoryTools, arguments: object, problem: str
) -> None:
    """Invalid arguments come back as an 'Error:' string naming the problem, not an exception."""
    result = await tools.tool_specs()[4].invoke(arguments)  # type: ignore[arg-type]
    assert result.startswith("Error: Invalid arguments for MemoryDelete: ")
    assert problem in result


def test_root_is_the_stores_root(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """The tools show the model their store's root."""
    assert tools.root == store.root
    assert tools.store is store


def test_prompt_renders_the_root() -> None:
    """render_memory_prompt fills in the root and leaves no placeholder."""
    text = render_memory_prompt("/memories")
    assert "{memories_root}" not in text
    assert "`/memories`" in text
    assert MEMORY_SYSTEM_PROMPT.count("{memories_root}") >= 1


def test_prompt_covers_the_conventions() -> None:
    """The prompt covers the index, the two-step save, the four types and what not to save."""
    text = render_memory_prompt("/memories")
    for phrase in [
        "MEMORY.md",
        "two steps",
        "**user**",
        "**feedback**",
        "**project**",
        "**reference**",
        "What never to save",
        "verify",
        "act as if it were empty",
        "- [Title](file.md) — one-line hook",
    ]:
        assert phrase in text


@pytest.mark.parametrize("root", [pytest.param("", id="empty"), pytest.param("  ", id="blank")])
def test_prompt_needs_a_root(root: str) -> None:
    """A blank root is refused."""
    with pytest.raises(ValueError, match="root"):
        render_memory_prompt(root)


def test_consolidation_reminder_text() -> None:
    """The consolidation reminder is the exact system-reminder block."""
    assert CONSOLIDATION_REMINDER == (
        "<system-reminder>Consolidate the long-term memory by summarizing and removing "
        "redundant information.</system-reminder>"
    )


@pytest.mark.parametrize(
    ("path", "normalised"),
    [
        pytest.param("a.md", "a.md", id="plain"),
        pytest.param("./a//b/./c.md", "a/b/c.md", id="dots-and-slashes"),
        pytest.param("a/b/../c.md", "a/c.md", id="dotdot-inside"),
        pytest.param("a/..", "", id="back-to-root"),
        pytest.param("", "", id="empty"),
        pytest.param("dir/", "dir", id="trailing-slash"),
        pytest.param("...md", "...md", id="dots-in-name"),
        pytest.param(" a .md", " a .md", id="spaces"),
    ],
)
def test_normalize_memory_path(path: str, normalised: str) -> None:
    """Paths are normalised lexically."""
    assert normalize_memory_path(path) == normalised


@given(st.text(alphabet=st.sampled_from(["a", "b", ".", "/", "\\", "\x00", "é", " "]), max_size=40))
def test_normalised_paths_stay_inside(path: str) -> None:
    """Any path either is refused or normalises to a clean relative path inside the root."""
    try:
        result = normalize_memory_path(path)
    except MemoryPathError:
        return
    assert not result.startswith("/")
    assert ".." not in result.split("/")
    assert "" not in result.split("/") or result == ""
    assert "\x00" not in result
    assert "\\" not in result
    assert normalize_memory_path(result) == result
    joined = posixpath.normpath(posixpath.join("/root/alice", result))
    assert joined == "/root/alice" or joined.startswith("/root/alice/")


@pytest.mark.parametrize("scope", ["alice", "user:42", "a@b.c", "../x", "日本"])
def test_valid_scopes_are_kept(scope: str) -> None:
    """Printable scopes are accepted unchanged (stores map them safely themselves)."""
    assert validate_memory_scope(scope) == scope


def test_path_error_keeps_the_callers_path() -> None:
    """A refused path is available on the error as the caller gave it."""
    with pytest.raises(MemoryPathError) as info:
        normalize_memory_path("a/../../b")
    assert info.value.path == "a/../../b"


def test_non_string_scope_is_refused() -> None:
    """A scope must be a string."""
    with pytest.raises(ValueError, match="scope"):
        validate_memory_scope(None)  # type: ignore[arg-type]


def test_public_names_resolve() -> None:
    """Every name in asyncsession.memory.__all__ exists and none is listed twice."""
    assert len(set(memory.__all__)) == len(memory.__all__)
    for name in memory.__all__:
        assert getattr(memory, name) is not None
