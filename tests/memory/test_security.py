"""The sandbox: no tool, through any path argument, reads or writes outside its own scope."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from memory_support import SECRET, Backend

from asyncsession.memory import DirectoryMemoryStore, MemoryStore
from asyncsession.tools import AutoMemoryTools

ToolCall = Callable[[AutoMemoryTools, str], Awaitable[str]]

# Every tool, once per path argument; the other arguments are harmless.
CALLS: list[object] = [
    pytest.param(lambda t, p: t.memory_view(p), id="view"),
    pytest.param(lambda t, p: t.memory_view(p, "1,5"), id="view-range"),
    pytest.param(lambda t, p: t.memory_create(p, "pwned"), id="create"),
    pytest.param(lambda t, p: t.memory_str_replace(p, SECRET, "pwned"), id="str_replace"),
    pytest.param(lambda t, p: t.memory_insert(p, 0, "pwned"), id="insert"),
    pytest.param(lambda t, p: t.memory_delete(p), id="delete"),
    pytest.param(lambda t, p: t.memory_rename(p, "moved.md"), id="rename-old"),
    pytest.param(lambda t, p: t.memory_rename("seed.md", p), id="rename-new"),
]

TRAVERSALS = [
    pytest.param("..", id="dotdot"),
    pytest.param("../secret.md", id="parent"),
    pytest.param("../../outside/secret.md", id="grandparent"),
    pytest.param("a/../../bob/MEMORY.md", id="nested"),
    pytest.param("./../alice/../bob/MEMORY.md", id="dotted"),
]


async def _seeded(backend: Backend) -> AutoMemoryTools:
    """Alice's tools with one file, plus bob's secret memory beside her."""
    bob = await backend.tools("bob")
    await bob.memory_create("MEMORY.md", SECRET)
    tools = await backend.tools("alice")
    await tools.memory_create("seed.md", "seed\n")
    return tools


async def _assert_contained(backend: Backend, tools: AutoMemoryTools, before: object) -> None:
    assert await backend.snapshot_outside() == before
    seed = await tools.store.read("seed.md")
    assert seed is not None
    assert seed.text == "seed\n"


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("path", TRAVERSALS)
async def test_traversal_is_refused(backend: Backend, call: ToolCall, path: str) -> None:
    """A path climbing out of the scope is refused by every tool and every path argument."""
    tools = await _seeded(backend)
    before = await backend.snapshot_outside()
    result = await call(tools, path)
    assert result == (
        f"Error: Path traversal attempt detected: '{path}' escapes the memories directory"
    )
    await _assert_contained(backend, tools, before)


@pytest.mark.parametrize("call", CALLS)
async def test_absolute_path_is_refused(backend: Backend, call: ToolCall) -> None:
    """An absolute path, even one naming a real file outside, is refused by every tool."""
    tools = await _seeded(backend)
    before = await backend.snapshot_outside()
    target = str(backend.outside_dir / "secret.md")
    result = await call(tools, target)
    assert result == f"Error: Absolute paths are not allowed: '{target}'"
    await _assert_contained(backend, tools, before)


BAD_PATHS = [
    pytest.param("a\x00b.md", "Error: Path contains a NUL byte: 'a\\x00b.md'", id="nul"),
    pytest.param("a\nb.md", "Error: Path contains a control character: 'a\\x0ab.md'", id="newline"),
    pytest.param("..\\secret.md", "Error: Backslashes are not allowed", id="backslash"),
    pytest.param(
        "n" * 256 + ".md", "Error: Path component is too long (over 255 bytes)", id="name"
    ),
    pytest.param("é" * 128, "Error: Path component is too long (over 255 bytes)", id="name-bytes"),
    pytest.param("d/" * 600 + "x.md", "Error: Path is too long (over 1024 bytes)", id="path"),
]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize(("path", "message"), BAD_PATHS)
async def test_malformed_path_is_refused(
    backend: Backend, call: ToolCall, path: str, message: str
) -> None:
    """NUL bytes, control characters, backslashes and over-long names are refused everywhere."""
    tools = await _seeded(backend)
    before = await backend.snapshot_outside()
    result = await call(tools, path)
    assert result.startswith(message)
    assert len(result) < 300  # the echoed path is cut short
    await _assert_contained(backend, tools, before)


async def test_longest_valid_name_is_accepted(tools: AutoMemoryTools) -> None:
    """A 255-byte file name is within the limit."""
    name = "n" * 252 + ".md"
    assert (await tools.memory_create(name, "x")).startswith("Successfully created")


async def test_dotdot_that_stays_inside_is_allowed(tools: AutoMemoryTools) -> None:
    """'..' that does not climb above the root resolves lexically inside it."""
    await tools.memory_create("a/b.md", "B")
    assert (await tools.memory_view("a/x/../b.md")).endswith("     1\tB\n")


async def test_second_scope_cannot_read_first(backend: Backend) -> None:
    """Bob sees none of alice's memories, by any path."""
    alice = await backend.tools("alice")
    await alice.memory_create("MEMORY.md", SECRET)
    await alice.memory_create("private/diary.md", SECRET)
    bob = await backend.tools("bob")
    assert await bob.memory_view("") == "Contents of /:\n\n"
    assert await bob.memory_view("MEMORY.md") == "Error: Path does not exist: MEMORY.md"
    assert await bob.memory_view("private") == "Error: Path does not exist: private"
    assert (await bob.memory_view("../alice/MEMORY.md")).startswith("Error: Path traversal")


async def test_second_scope_cannot_write_first(backend: Backend) -> None:
    """Bob's writes, edits, deletes and renames never touch alice's files."""
    alice = await backend.tools("alice")
    await alice.memory_create("MEMORY.md", "alice's index\n")
    bob = await backend.tools("bob")
    assert (await bob.memory_create("MEMORY.md", "bob's index\n")).startswith("Successfully")
    await bob.memory_insert("MEMORY.md", 0, "bob was here")
    assert await bob.memory_delete("MEMORY.md") == "Successfully deleted file: MEMORY.md"
    assert (await bob.memory_str_replace("MEMORY.md", "alice", "bob")).startswith(
        "Error: File does not exist"
    )
    assert (await bob.memory_rename("MEMORY.md", "x.md")).startswith("Error: Source path")
    file = await alice.store.read("MEMORY.md")
    assert file is not None
    assert file.text == "alice's index\n"


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param("../alice", id="parent"),
        pytest.param("alice/..", id="child-parent"),
        pytest.param("..", id="dotdot"),
        pytest.param(".", id="dot"),
        pytest.param("/alice", id="absolute"),
        pytest.param("alice/x", id="nested"),
    ],
)
async def test_scope_keys_cannot_reach_another_scope(backend: Backend, scope: str) -> None:
    """A scope key made of path syntax is its own, separate scope."""
    alice = await backend.tools("alice")
    await alice.memory_create("MEMORY.md", SECRET)
    outside_before = _tree(backend.outside_dir)
    other = await backend.tools(scope)
    assert await other.memory_view("") == "Contents of /:\n\n"
    await other.memory_create("MEMORY.md", "mine")
    assert await other.memory_view("") == "Contents of /:\n\n  MEMORY.md (4 bytes)\n"
    file = await alice.store.read("MEMORY.md")
    assert file is not None
    assert file.text == SECRET
    assert _tree(backend.outside_dir) == outside_before
    if isinstance(other.store, DirectoryMemoryStore):
        assert Path(other.root).parent == Path(alice.root).parent
        assert Path(other.root) != Path(alice.root)


@pytest.mark.parametrize(
    "scope",
    [
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("a\x1fb", id="separator"),
        pytest.param("x" * 129, id="too-long"),
    ],
)
def test_invalid_scope_is_refused(backend: Backend, scope: str) -> None:
    """A store cannot be built without a usable scope key."""
    with pytest.raises(ValueError, match="scope"):
        backend.make(scope)


async def test_oversized_create_is_refused(backend: Backend) -> None:
    """A file over max_file_bytes is not created."""
    tools = await backend.tools(max_file_bytes=100)
    assert await tools.memory_create("a.md", "x" * 101) == (
        "Error: File too large: a.md would be 101 bytes (limit 100 bytes)"
    )
    assert await tools.store.stat("a.md") is None


async def test_edit_growing_past_the_file_limit_is_refused(backend: Backend) -> None:
    """An insert that would push a file over max_file_bytes leaves the file unchanged."""
    tools = await backend.tools(max_file_bytes=10)
    await tools.memory_create("a.md", "12345\n")
    assert await tools.memory_insert("a.md", 1, "678901") == (
        "Error: File too large: a.md would be 13 bytes (limit 10 bytes)"
    )
    file = await tools.store.read("a.md")
    assert file is not None
    assert file.text == "12345\n"


async def test_store_limit_refuses_growth(backend: Backend) -> None:
    """A write that would push the scope over max_store_bytes is refused."""
    tools = await backend.tools(max_store_bytes=150)
    await tools.memory_create("a.md", "x" * 100)
    assert await tools.memory_create("b.md", "y" * 60) == (
        "Error: Memory store is full: writing b.md would bring it to 160 bytes (limit 150 bytes)"
    )
    assert await tools.store.stat("b.md") is None


async def test_store_limit_allows_shrinking(backend: Backend) -> None:
    """A full store still accepts edits that make it smaller."""
    tools = await backend.tools(max_store_bytes=100)
    await tools.memory_create("a.md", "a" * 50 + "b" * 50)
    result = await tools.memory_str_replace("a.md", "b" * 50, "")
    assert result == "Successfully deleted matched text from a.md."


async def test_store_limit_is_per_scope(backend: Backend) -> None:
    """Another scope's files do not count against this scope's limit."""
    bob = await backend.tools("bob")
    await bob.memory_create("big.md", "b" * 100)
    alice = await backend.tools("alice", max_store_bytes=100)
    assert (await alice.memory_create("a.md", "a" * 100)).startswith("Successfully")


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param({"max_file_bytes": 0}, id="file-zero"),
        pytest.param({"max_store_bytes": -1}, id="store-negative"),
    ],
)
def test_invalid_limits_are_refused(backend: Backend, limits: dict[str, int]) -> None:
    """Limits must be positive."""
    with pytest.raises(ValueError, match="must be"):
        backend.make("alice", **limits)


@pytest.fixture
def linked(tmp_path: Path) -> tuple[AutoMemoryTools, Path, Path]:
    """Alice's directory store, with symlinks inside it that lead outside the root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    (outside / "sub").mkdir()
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    scope_dir = Path(store.root)
    (scope_dir / "inner").mkdir(parents=True)
    (scope_dir / "seed.md").write_text("seed\n")
    (scope_dir / "escape").symlink_to(outside)
    (scope_dir / "leak.md").symlink_to(outside / "secret.md")
    (scope_dir / "inner" / "up").symlink_to("../../../outside")
    (scope_dir / "dangling.md").symlink_to(outside / "new.md")
    return AutoMemoryTools(store), scope_dir, outside


def _tree(path: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(path)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(path.rglob("*"))
    }


LINKED_PATHS = [
    pytest.param("leak.md", id="file-link"),
    pytest.param("escape", id="dir-link"),
    pytest.param("escape/secret.md", id="through-dir-link"),
    pytest.param("escape/sub/new.md", id="below-dir-link"),
    pytest.param("inner/up/secret.md", id="relative-link"),
    pytest.param("dangling.md", id="dangling-link"),
]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("path", LINKED_PATHS)
async def test_symlink_escape_is_refused(
    linked: tuple[AutoMemoryTools, Path, Path], call: ToolCall, path: str
) -> None:
    """No tool reads, writes, deletes or moves anything through a link that leads outside."""
    tools, scope_dir, outside = linked
    before = _tree(outside)
    result = await call(tools, path)
    assert result.startswith("Error: Symbolic link escape detected: ")
    assert SECRET not in result
    assert _tree(outside) == before
    assert (scope_dir / "escape").is_symlink()
    assert (scope_dir / "seed.md").read_text() == "seed\n"


async def test_listing_hides_links_that_lead_outside(
    linked: tuple[AutoMemoryTools, Path, Path],
) -> None:
    """A listing shows neither the names nor the sizes of links that leave the scope."""
    tools, _, _ = linked
    assert await tools.memory_view("") == ("Contents of /:\n\n  inner/\n  seed.md (5 bytes)\n")


async def test_scope_directory_linked_outside_is_refused(tmp_path: Path) -> None:
    """A scope directory that is itself a link out of the root is never used."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "MEMORY.md").write_text(SECRET)
    (tmp_path / "memories").mkdir()
    (tmp_path / "memories" / "mallory").symlink_to(outside)
    tools = AutoMemoryTools(DirectoryMemoryStore(tmp_path / "memories", scope="mallory"))
    assert (await tools.memory_view("MEMORY.md")).startswith("Error: ")
    assert SECRET not in await tools.memory_view("")
    assert (await tools.memory_create("x.md", "x")).startswith("Error: ")
    assert sorted(p.name for p in outside.iterdir()) == ["MEMORY.md"]


async def test_scope_directory_linked_to_another_scope_is_refused(tmp_path: Path) -> None:
    """A scope directory that links to another scope's directory is never used."""
    alice = AutoMemoryTools(DirectoryMemoryStore(tmp_path / "memories", scope="alice"))
    await alice.memory_create("MEMORY.md", SECRET)
    (tmp_path / "memories" / "mallory").symlink_to("alice")
    mallory = AutoMemoryTools(DirectoryMemoryStore(tmp_path / "memories", scope="mallory"))
    result = await mallory.memory_view("MEMORY.md")
    assert result == "Error: The scope's memory directory is a symbolic link; refusing"
    assert (await mallory.memory_delete("MEMORY.md")).startswith("Error: ")
    assert (await alice.memory_view("MEMORY.md")).endswith(f"\t{SECRET}\n")


async def test_listing_hides_names_no_tool_can_address(tmp_path: Path) -> None:
    """Entries whose names are not valid memory paths are left out of listings."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    tools = AutoMemoryTools(store)
    await tools.memory_create("ok.md", "x")
    (Path(store.root) / "bad\\name.md").write_text("y")
    (Path(store.root) / "bad\nname.md").write_text("y")
    assert await tools.memory_view("") == "Contents of /:\n\n  ok.md (1 bytes)\n"


async def test_links_inside_the_scope_are_followed(tmp_path: Path) -> None:
    """A link that stays inside the scope reads and writes its target."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    tools = AutoMemoryTools(store)
    await tools.memory_create("real.md", "one\n")
    (Path(store.root) / "alias.md").symlink_to("real.md")
    assert (await tools.memory_view("alias.md")).endswith("     1\tone\n")
    await tools.memory_insert("alias.md", 1, "two")
    assert (Path(store.root) / "real.md").read_text() == "one\ntwo\n"
    assert (Path(store.root) / "alias.md").is_symlink()


async def test_deleting_an_inner_link_keeps_its_target(tmp_path: Path) -> None:
    """Deleting a link removes the link, not what it points to."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    tools = AutoMemoryTools(store)
    await tools.memory_create("d/real.md", "x")
    (Path(store.root) / "alias").symlink_to("d")
    assert await tools.memory_delete("alias") == "Successfully deleted directory: alias"
    assert (Path(store.root) / "d" / "real.md").read_text() == "x"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
async def test_special_files_are_refused(tmp_path: Path) -> None:
    """A named pipe in the scope is refused instead of blocking a reader."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    tools = AutoMemoryTools(store)
    await tools.memory_create("seed.md", "x")
    os.mkfifo(Path(store.root) / "pipe")
    assert await tools.memory_view("pipe") == "Error: Not a regular file: 'pipe'"
    assert await tools.memory_insert("pipe", 0, "x") == "Error: Not a regular file: 'pipe'"
    assert "pipe" not in await tools.memory_view("")


async def test_oversized_file_on_disk_is_not_read(tmp_path: Path) -> None:
    """A file placed on disk beyond max_file_bytes is refused instead of loaded."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice", max_file_bytes=10)
    tools = AutoMemoryTools(store)
    await tools.memory_create("seed.md", "x")
    (Path(store.root) / "big.md").write_text("y" * 11)
    assert (
        await tools.memory_view("big.md")
        == "Error: File is too large to read: big.md is over 10 bytes"
    )


async def test_unrelated_store_reads_nothing_outside(backend: Backend, store: MemoryStore) -> None:
    """Reading every entry the store lists never yields the secret kept outside it."""
    await (await _seeded(backend)).memory_create("notes/a.md", "a")
    for entry in await store.list_dir(""):
        if not entry.is_dir:
            file = await store.read(entry.name)
            assert file is not None
            assert SECRET not in file.text
