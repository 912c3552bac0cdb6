"""The `MemoryStore` contract on both stores, plus what is particular to each."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from memory_support import Backend, refused
from mongomock_motor import AsyncMongoMockClient
from pymongo.errors import AutoReconnect, PyMongoError

from asyncsession.memory import DirectoryMemoryStore, MemoryEntry, MemoryStore, MongoMemoryStore
from asyncsession.tools import AutoMemoryTools


def test_store_satisfies_the_protocol(store: MemoryStore) -> None:
    """Each store is a `MemoryStore`."""
    assert isinstance(store, MemoryStore)


def test_with_scope_keeps_backend_and_limits(backend: Backend) -> None:
    """with_scope returns the same kind of store, with the same limits, for another scope."""
    store = backend.make("alice", max_file_bytes=123, max_store_bytes=456)
    other = store.with_scope("bob")
    assert type(other) is type(store)
    assert other.scope == "bob"
    assert (other.max_file_bytes, other.max_store_bytes) == (123, 456)  # type: ignore[attr-defined]


async def test_create_then_read_returns_the_same_version(store: MemoryStore) -> None:
    """A created file reads back with the text and version the write returned."""
    written = await store.write("a.md", "hello", expected_version=None)
    assert await store.read("a.md") == written


async def test_replace_with_current_version_succeeds(store: MemoryStore) -> None:
    """A write quoting the current version replaces the file and changes the version."""
    first = await store.write("a.md", "one", expected_version=None)
    second = await store.write("a.md", "two", expected_version=first.version)
    assert second.version != first.version
    assert await store.read("a.md") == second


async def test_replace_with_stale_version_conflicts(store: MemoryStore) -> None:
    """A write quoting an outdated version is refused and changes nothing."""
    first = await store.write("a.md", "one", expected_version=None)
    await store.write("a.md", "two", expected_version=first.version)
    with refused("conflict") as info:
        await store.write("a.md", "three", expected_version=first.version)
    assert info.value.path == "a.md"
    file = await store.read("a.md")
    assert file is not None
    assert file.text == "two"


async def test_replace_of_missing_file_conflicts(store: MemoryStore) -> None:
    """Quoting a version for a file that does not exist is a conflict."""
    with refused("conflict"):
        await store.write("a.md", "x", expected_version=1)


async def test_create_over_existing_file_raises(store: MemoryStore) -> None:
    """Creating an existing file raises reason ``"exists"``."""
    await store.write("a.md", "x", expected_version=None)
    with refused("exists"):
        await store.write("a.md", "y", expected_version=None)


async def test_write_over_directory_raises(store: MemoryStore) -> None:
    """Writing where a directory is raises reason ``"is_a_directory"``."""
    await store.write("d/a.md", "x", expected_version=None)
    with refused("is_a_directory"):
        await store.write("d", "y", expected_version=None)


async def test_write_below_file_raises(store: MemoryStore) -> None:
    """Writing below a file raises reason ``"not_a_directory"`` naming the file."""
    await store.write("a.md", "x", expected_version=None)
    with refused("not_a_directory") as info:
        await store.write("a.md/b/c.md", "y", expected_version=None)
    assert info.value.path == "a.md"


async def test_read_missing_returns_none(store: MemoryStore) -> None:
    """Reading a missing file returns None."""
    assert await store.read("nope.md") is None


@pytest.mark.parametrize("path", [pytest.param("", id="root"), pytest.param("d", id="dir")])
async def test_read_directory_raises(store: MemoryStore, path: str) -> None:
    """Reading a directory raises reason ``"is_a_directory"``."""
    await store.write("d/a.md", "x", expected_version=None)
    with refused("is_a_directory"):
        await store.read(path)


async def test_stat_describes_files_directories_and_root(store: MemoryStore) -> None:
    """stat reports files with sizes, directories, the root, and None for missing paths."""
    await store.write("d/a.md", "héllo", expected_version=None)
    assert await store.stat("d/a.md") == MemoryEntry(name="a.md", is_dir=False, size=6)
    assert await store.stat("d") == MemoryEntry(name="d", is_dir=True, size=0)
    assert await store.stat("") == MemoryEntry(name="", is_dir=True, size=0)
    assert await store.stat("x") is None


async def test_list_dir_is_one_level_and_sorted(store: MemoryStore) -> None:
    """list_dir returns the direct children, sorted by name."""
    for path in ["b.md", "a/x.md", "a/y/z.md", "C.md"]:
        await store.write(path, "12", expected_version=None)
    assert await store.list_dir("") == [
        MemoryEntry(name="C.md", is_dir=False, size=2),
        MemoryEntry(name="a", is_dir=True, size=0),
        MemoryEntry(name="b.md", is_dir=False, size=2),
    ]
    assert await store.list_dir("a") == [
        MemoryEntry(name="x.md", is_dir=False, size=2),
        MemoryEntry(name="y", is_dir=True, size=0),
    ]


async def test_list_dir_of_empty_root_is_empty(store: MemoryStore) -> None:
    """A fresh scope lists as empty."""
    assert await store.list_dir("") == []


async def test_list_dir_errors(store: MemoryStore) -> None:
    """Listing a missing path or a file raises the matching error."""
    await store.write("a.md", "x", expected_version=None)
    with refused("not_found"):
        await store.list_dir("nope")
    with refused("not_a_directory"):
        await store.list_dir("a.md")


async def test_delete_reports_what_it_removed(store: MemoryStore) -> None:
    """delete returns an entry for the removed file or directory."""
    await store.write("a.md", "abc", expected_version=None)
    await store.write("d/x.md", "x", expected_version=None)
    assert await store.delete("a.md") == MemoryEntry(name="a.md", is_dir=False, size=3)
    assert await store.delete("d") == MemoryEntry(name="d", is_dir=True, size=0)
    assert await store.list_dir("") == []


async def test_delete_errors(store: MemoryStore) -> None:
    """Deleting a missing path or the root raises."""
    with refused("not_found"):
        await store.delete("nope")
    with refused("invalid_path", match="root"):
        await store.delete("")


async def test_rename_errors(store: MemoryStore) -> None:
    """rename refuses a missing source, a taken destination and the root."""
    await store.write("a.md", "x", expected_version=None)
    await store.write("b.md", "y", expected_version=None)
    with refused("not_found"):
        await store.rename("nope.md", "c.md")
    with refused("exists"):
        await store.rename("a.md", "b.md")
    with refused("exists"):
        await store.rename("a.md", "a.md")
    with refused("invalid_path", match="root"):
        await store.rename("", "c")


async def test_renamed_file_gets_a_new_version(store: MemoryStore) -> None:
    """A writer holding the old path's version cannot write to the old path after a move."""
    first = await store.write("a.md", "x", expected_version=None)
    await store.rename("a.md", "b.md")
    with refused("conflict"):
        await store.write("a.md", "y", expected_version=first.version)


async def test_store_methods_validate_paths(store: MemoryStore) -> None:
    """Stores validate paths themselves, not only through the tools."""
    with refused("invalid_path", match="traversal"):
        await store.read("../x")
    with refused("invalid_path", match="Absolute"):
        await store.write("/x", "y", expected_version=None)
    with refused("invalid_path"):
        await store.rename("a", "../b")


async def test_text_is_utf8_and_keeps_line_endings(store: MemoryStore) -> None:
    """Text round-trips exactly, non-ASCII characters and CRLF included."""
    text = "日本語\r\nemoji 🎉\n"
    await store.write("a.md", text, expected_version=None)
    file = await store.read("a.md")
    assert file is not None
    assert file.text == text
    assert await store.stat("a.md") == MemoryEntry(
        name="a.md", is_dir=False, size=len(text.encode())
    )


async def test_too_large_error_names_path_size_and_limit(backend: Backend) -> None:
    """A refusal for size (reason ``"too_large"``) names the path, the size and the limit."""
    store = await backend.store(max_file_bytes=4)
    with refused("too_large", match=r"a\.md would be 5 bytes \(limit 4 bytes\)") as info:
        await store.write("a.md", "12345", expected_version=None)
    assert info.value.path == "a.md"


@pytest.mark.parametrize(
    ("scope", "dirname"),
    [
        pytest.param("alice", "alice", id="plain"),
        pytest.param("../bob", "..%2Fbob", id="traversal"),
        pytest.param("..", "%2E%2E", id="dotdot"),
        pytest.param(".", "%2E", id="dot"),
        pytest.param("a b@c.d", "a%20b%40c.d", id="email-ish"),
        pytest.param("100%", "100%25", id="percent"),
    ],
)
def test_directory_scope_becomes_one_safe_directory_name(
    tmp_path: Path, scope: str, dirname: str
) -> None:
    """The scope key is percent-encoded into a single child directory of the root."""
    store = DirectoryMemoryStore(tmp_path, scope=scope)
    assert store.root == str(tmp_path / dirname)


def test_directory_scope_too_long_once_encoded(tmp_path: Path) -> None:
    """A scope whose encoded name would exceed a file name is refused."""
    with pytest.raises(ValueError, match="too long"):
        DirectoryMemoryStore(tmp_path, scope="🎉" * 30)


def test_directory_store_touches_nothing_until_used(tmp_path: Path) -> None:
    """Building a store does no I/O."""
    DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    assert not (tmp_path / "memories").exists()


async def test_directory_files_and_directories_are_private(tmp_path: Path) -> None:
    """Files are created 0600 and directories 0700."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    await store.write("d/a.md", "x", expected_version=None)
    first = await store.read("d/a.md")
    assert first is not None
    await store.write("d/a.md", "y", expected_version=first.version)
    root = Path(store.root)
    assert stat.S_IMODE((root / "d" / "a.md").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "d").stat().st_mode) == 0o700


async def test_directory_version_is_a_content_digest(tmp_path: Path) -> None:
    """An edit made outside the store changes the version, so a stale write conflicts."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    first = await store.write("a.md", "one", expected_version=None)
    (Path(store.root) / "a.md").write_text("edited elsewhere")
    with refused("conflict"):
        await store.write("a.md", "two", expected_version=first.version)


async def test_directory_temporary_files_are_hidden(tmp_path: Path) -> None:
    """Leftover temporary files are neither listed nor counted against the limit."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice", max_store_bytes=10)
    await store.write("a.md", "x", expected_version=None)
    (Path(store.root) / ".~memtmp-crash").write_text("y" * 100)
    assert [entry.name for entry in await store.list_dir("")] == ["a.md"]
    await store.write("b.md", "z" * 9, expected_version=None)


async def test_directory_create_without_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where hard links are unsupported, a create falls back to an exclusive create."""

    def no_links(src: str, dst: str) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    await store.write("a.md", "hello", expected_version=None)
    assert (Path(store.root) / "a.md").read_text() == "hello"
    assert os.listdir(store.root) == ["a.md"]


async def test_directory_os_errors_are_wrapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An OS failure surfaces as reason ``"backend"`` chained to the `OSError`."""

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    await store.write("a.md", "x", expected_version=None)
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with refused("backend") as info:
        await store.write("b.md", "y", expected_version=None)
    assert isinstance(info.value.__cause__, OSError)
    tools = AutoMemoryTools(store)
    assert await tools.memory_create("c.md", "z") == (
        "Error creating file: Input/output error (c.md)"
    )
    assert os.listdir(store.root) == ["a.md"]


async def test_directory_invalid_utf8_is_reported(tmp_path: Path) -> None:
    """A file that is not UTF-8 is reported, not decoded lossily."""
    store = DirectoryMemoryStore(tmp_path / "memories", scope="alice")
    await store.write("seed.md", "x", expected_version=None)
    (Path(store.root) / "bin.md").write_bytes(b"\xff\xfe")
    tools = AutoMemoryTools(store)
    assert (
        await tools.memory_view("bin.md")
        == "Error reading path: File is not valid UTF-8 text: bin.md"
    )


@pytest.mark.mongodb
async def test_mongo_document_layout(mongo_db: Any) -> None:
    """Each file is one document with a string id and the documented fields."""
    store = MongoMemoryStore(mongo_db, scope="alice")
    await store.write("notes/a.md", "héllo", expected_version=None)
    doc = await mongo_db["memories"].find_one({})
    assert doc["_id"] == "alice\x1fnotes/a.md"
    assert doc["scope"] == "alice"
    assert doc["path"] == "notes/a.md"
    assert doc["text"] == "héllo"
    assert doc["size"] == 6
    assert isinstance(doc["version"], int)
    assert doc["updated_at"].tzinfo is not None


@pytest.mark.mongodb
async def test_mongo_ensure_indexes_is_idempotent(mongo_db: Any) -> None:
    """ensure_indexes creates the unique (scope, path) index and may be called again."""
    store = MongoMemoryStore(mongo_db, scope="alice", collection="mem")
    await store.ensure_indexes()
    await store.ensure_indexes()
    indexes = await mongo_db["mem"].index_information()
    assert indexes["scope_path_unique"]["key"] == [("scope", 1), ("path", 1)]
    assert indexes["scope_path_unique"]["unique"] is True


@pytest.mark.mongodb
async def test_mongo_recreated_file_never_reuses_a_version(mongo_db: Any) -> None:
    """A file deleted and re-created gets a fresh version, so a stale writer still conflicts."""
    store = MongoMemoryStore(mongo_db, scope="alice")
    first = await store.write("a.md", "same", expected_version=None)
    await store.delete("a.md")
    await store.write("a.md", "same", expected_version=None)
    with refused("conflict"):
        await store.write("a.md", "stale", expected_version=first.version)


@pytest.mark.mongodb
async def test_mongo_queries_never_cross_scopes(mongo_db: Any) -> None:
    """A document of another scope is invisible even where paths and ids look alike."""
    await mongo_db["memories"].insert_one(
        {"_id": "mallory", "scope": "bob", "path": "a.md", "text": "x", "version": 1, "size": 1}
    )
    store = MongoMemoryStore(mongo_db, scope="alice")
    assert await store.list_dir("") == []
    assert await store.stat("a.md") is None
    with refused("not_found"):
        await store.delete("a.md")
    assert await mongo_db["memories"].count_documents({}) == 1


@pytest.mark.mongodb
def test_mongo_file_limit_must_fit_a_document(mongo_db: Any) -> None:
    """max_file_bytes cannot exceed what one MongoDB document holds."""
    with pytest.raises(ValueError, match="max_file_bytes"):
        MongoMemoryStore(mongo_db, scope="alice", max_file_bytes=16 * 1024 * 1024)


class _UnreachableCollection:
    """A collection whose every call fails the way a dropped connection does."""

    def __getattr__(self, name: str) -> Any:
        async def fail(*args: Any, **kwargs: Any) -> Any:
            raise AutoReconnect("connection reset")

        return fail


class _UnreachableDatabase:
    def get_collection(self, name: str, **options: Any) -> _UnreachableCollection:
        return _UnreachableCollection()


async def test_mongo_driver_errors_are_wrapped() -> None:
    """A driver failure surfaces as reason ``"backend"`` chained to the PyMongo error."""
    store = MongoMemoryStore(_UnreachableDatabase(), scope="alice")  # type: ignore[arg-type]
    with refused("backend") as info:
        await store.read("a.md")
    assert isinstance(info.value.__cause__, PyMongoError)
    tools = AutoMemoryTools(store)
    assert await tools.memory_view("a.md") == (
        "Error reading path: AutoReconnect: connection reset (a.md)"
    )
    assert await tools.memory_create("a.md", "x") == (
        "Error creating file: AutoReconnect: connection reset (a.md)"
    )


async def test_mongo_store_on_mongomock_motor() -> None:
    """The Mongo store also runs on a mongomock-motor database (smoke test)."""
    client = AsyncMongoMockClient()
    store = MongoMemoryStore(client["db"], scope="alice")
    await store.ensure_indexes()
    tools = AutoMemoryTools(store)
    assert (await tools.memory_create("MEMORY.md", "# Index\n")).startswith("Successfully")
    assert (await tools.memory_create("notes/a.md", "a\n")).startswith("Successfully")
    await tools.memory_insert("MEMORY.md", 1, "- [A](notes/a.md) — hook")
    assert (await tools.memory_str_replace("MEMORY.md", "hook", "note")).startswith(
        "Successfully edited"
    )
    assert await tools.memory_rename("notes", "archive") == (
        "Successfully renamed 'notes' to 'archive'"
    )
    assert await tools.memory_view("") == (
        "Contents of /:\n\n  MEMORY.md (35 bytes)\n  archive/\n    a.md (2 bytes)\n"
    )
    assert await tools.memory_delete("archive") == "Successfully deleted directory: archive"
    assert await AutoMemoryTools(store.with_scope("bob")).memory_view("MEMORY.md") == (
        "Error: Path does not exist: MEMORY.md"
    )
