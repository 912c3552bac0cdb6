"""Tool specs for a tool-calling model, the memory prompt, paths, and the public surface."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from memory_support import refused

import asyncsession.memory as memory
from asyncsession.advisors._auto_memory import CONSOLIDATION_REMINDER
from asyncsession.exceptions import UsageError
from asyncsession.memory import DirectoryMemoryStore, MemoryStore, MemoryStoreError
from asyncsession.memory._base import normalize_path
from asyncsession.tools import AutoMemoryTools, Tool
from asyncsession.tools._memory import MEMORY_TOOL_NAMES


def test_as_tools_names_the_six_tools_in_order(tools: AutoMemoryTools) -> None:
    """as_tools returns the six model-facing tools, as Tools, in the documented order."""
    offered = tools.as_tools()
    assert all(isinstance(t, Tool) for t in offered)
    assert [t.name for t in offered] == list(MEMORY_TOOL_NAMES)
    assert MEMORY_TOOL_NAMES == (
        "MemoryView",
        "MemoryCreate",
        "MemoryStrReplace",
        "MemoryInsert",
        "MemoryDelete",
        "MemoryRename",
    )


def test_schemas_use_snake_case_parameters(tools: AutoMemoryTools) -> None:
    """The JSON schemas list the snake_case parameters, required ones first-class, no extras."""
    schemas = {t.name: t.parameters for t in tools.as_tools()}
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
        assert "title" not in schema
        assert "description" not in schema
        assert all(prop.get("description") for prop in schema["properties"].values())
        assert not any("title" in prop for prop in schema["properties"].values())
    assert schemas["MemoryInsert"]["properties"]["insert_line"]["type"] == "integer"
    json.dumps(schemas)  # plain JSON, ready for any SDK


def test_descriptions_teach_the_index_convention(tools: AutoMemoryTools) -> None:
    """The descriptions explain MEMORY.md, the two-step save and front matter."""
    descriptions = {t.name: t.description for t in tools.as_tools()}
    assert all("MEMORY.md" in text for text in descriptions.values())
    assert "two steps" in descriptions["MemoryCreate"]
    assert "type: <user | feedback | project | reference>" in descriptions["MemoryCreate"]
    assert "- [Title](file.md) — one-line hook" in descriptions["MemoryInsert"]


async def test_invoke_runs_each_tool_from_json(tools: AutoMemoryTools) -> None:
    """Every one of the six tools runs from the model's JSON arguments on its method."""
    by_name = {t.name: t for t in tools.as_tools()}
    calls = [
        ("MemoryCreate", {"path": "a.md", "file_text": "one\n"}, "Successfully created"),
        ("MemoryInsert", {"path": "a.md", "insert_line": 1, "insert_text": "two"}, "Success"),
        ("MemoryStrReplace", {"path": "a.md", "old_str": "two", "new_str": "2"}, "Success"),
        ("MemoryView", {"path": "a.md"}, "File: a.md\nLines 1-2 of 2"),
        ("MemoryRename", {"old_path": "a.md", "new_path": "b.md"}, "Successfully renamed"),
        ("MemoryDelete", {"path": "b.md"}, "Successfully deleted file: b.md"),
    ]
    for name, arguments, expected in calls:
        assert (await by_name[name].invoke(json.dumps(arguments))).startswith(expected)
    assert await tools.memory_view("") == "Contents of /:\n\n"


def test_root_is_the_stores_root(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """The tools show the model their store's root."""
    assert tools.root == store.root
    assert tools.store is store


def test_prompt_renders_the_root(tools: AutoMemoryTools) -> None:
    """system_prompt fills in the store's root and leaves no placeholder."""
    text = tools.system_prompt
    assert "{memories_root}" not in text
    assert f"`{tools.root}`" in text
    assert AutoMemoryTools.SYSTEM_PROMPT.count("{memories_root}") >= 1


def test_prompt_covers_the_conventions(tools: AutoMemoryTools) -> None:
    """The prompt covers the index, the two-step save, the four types and what not to save."""
    text = tools.system_prompt
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
def test_paths_are_normalised(path: str, normalised: str) -> None:
    """Paths are normalised lexically."""
    assert normalize_path(path) == normalised


@given(st.text(alphabet=st.sampled_from(["a", "b", ".", "/", "\\", "\x00", "é", " "]), max_size=40))
def test_normalised_paths_stay_inside(path: str) -> None:
    """Any path either is refused or normalises to a clean relative path inside the root."""
    try:
        result = normalize_path(path)
    except MemoryStoreError as exc:
        if exc.reason == "invalid_path":
            return
        raise
    assert not result.startswith("/")
    assert ".." not in result.split("/")
    assert "" not in result.split("/") or result == ""
    assert "\x00" not in result
    assert "\\" not in result
    assert normalize_path(result) == result
    joined = posixpath.normpath(posixpath.join("/root/alice", result))
    assert joined == "/root/alice" or joined.startswith("/root/alice/")


@pytest.mark.parametrize("scope", ["alice", "user:42", "a@b.c", "../x", "日本"])
def test_valid_scopes_are_kept(tmp_path: Path, scope: str) -> None:
    """Printable scopes are accepted unchanged (stores map them safely themselves)."""
    assert DirectoryMemoryStore(tmp_path, scope=scope).scope == scope


def test_path_error_keeps_the_callers_path() -> None:
    """A refused path is available on the error as the caller gave it."""
    with refused("invalid_path") as info:
        normalize_path("a/../../b")
    assert info.value.path == "a/../../b"


def test_non_string_scope_is_refused(tmp_path: Path) -> None:
    """A scope must be a string."""
    with pytest.raises(UsageError, match="scope"):
        DirectoryMemoryStore(tmp_path, scope=None)  # type: ignore[arg-type]


def test_public_names_resolve() -> None:
    """Every name in asyncsession.memory.__all__ exists and none is listed twice."""
    assert len(set(memory.__all__)) == len(memory.__all__)
    for name in memory.__all__:
        assert getattr(memory, name) is not None
