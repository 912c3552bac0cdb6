"""The six memory tools: every message and edge case of the reference behaviour, on both stores."""

from __future__ import annotations

import pytest

from asyncsession.memory import MemoryStore
from asyncsession.tools import AutoMemoryTools

INDEX = "# Memory index\n- [Role](user_role.md) — data scientist\n"


async def _seed(tools: AutoMemoryTools) -> None:
    assert (await tools.memory_create("MEMORY.md", INDEX)).startswith("Successfully")
    assert (await tools.memory_create("user_role.md", "role: data scientist\n")).startswith(
        "Successfully"
    )
    assert (await tools.memory_create("projects/apollo.md", "launch\n")).startswith("Successfully")
    assert (await tools.memory_create("projects/old/zeus.md", "z")).startswith("Successfully")


async def _text(store: MemoryStore, path: str) -> str:
    file = await store.read(path)
    assert file is not None
    return file.text


async def test_view_empty_root_lists_nothing(tools: AutoMemoryTools) -> None:
    """Viewing the root of an empty store shows only the header."""
    assert await tools.memory_view("") == "Contents of /:\n\n"


async def test_view_root_lists_two_levels_sorted_with_sizes(tools: AutoMemoryTools) -> None:
    """A directory listing shows two levels, sorted by name, with file sizes in bytes."""
    await _seed(tools)
    size = len(INDEX.encode())
    assert await tools.memory_view("") == (
        "Contents of /:\n\n"
        f"  MEMORY.md ({size} bytes)\n"
        "  projects/\n"
        "    apollo.md (7 bytes)\n"
        "    old/\n"
        "  user_role.md (21 bytes)\n"
    )


@pytest.mark.parametrize("path", [pytest.param("/", id="slash"), pytest.param("   ", id="blank")])
async def test_view_slash_and_blank_mean_root(tools: AutoMemoryTools, path: str) -> None:
    """Both '/' and a blank path list the root."""
    await _seed(tools)
    listing = await tools.memory_view(path)
    assert "  MEMORY.md (" in listing
    assert listing.startswith(f"Contents of {path}:\n\n")


async def test_view_subdirectory_uses_given_path_in_header(tools: AutoMemoryTools) -> None:
    """Listing a subdirectory names it as given and shows its own two levels."""
    await _seed(tools)
    assert await tools.memory_view("projects") == (
        "Contents of projects:\n\n  apollo.md (7 bytes)\n  old/\n    zeus.md (1 bytes)\n"
    )


async def test_view_missing_path(tools: AutoMemoryTools) -> None:
    """Viewing a path that does not exist is an error naming the path."""
    assert await tools.memory_view("nope.md") == "Error: Path does not exist: nope.md"


async def test_view_file_numbers_every_line(tools: AutoMemoryTools) -> None:
    """A file is shown with its name, its line range and tab-separated 6-wide line numbers."""
    await tools.memory_create("notes/a.md", "alpha\nbeta\ngamma\n")
    assert await tools.memory_view("notes/a.md") == (
        "File: a.md\nLines 1-3 of 3\n\n     1\talpha\n     2\tbeta\n     3\tgamma\n"
    )


async def test_view_file_with_range(tools: AutoMemoryTools) -> None:
    """A view_range shows only the requested lines."""
    await tools.memory_create("a.md", "1\n2\n3\n4\n5\n")
    assert await tools.memory_view("a.md", "2,3") == (
        "File: a.md\nLines 2-3 of 5\n\n     2\t2\n     3\t3\n"
    )


async def test_view_range_is_clamped_to_the_file(tools: AutoMemoryTools) -> None:
    """A range reaching beyond the file is clamped to line 1 and the last line."""
    await tools.memory_create("a.md", "1\n2\n3\n")
    assert await tools.memory_view("a.md", " -4 , 99 ") == (
        "File: a.md\nLines 1-3 of 3\n\n     1\t1\n     2\t2\n     3\t3\n"
    )


async def test_view_range_past_the_end_shows_no_lines(tools: AutoMemoryTools) -> None:
    """A range that starts after the last line shows the header and no lines."""
    await tools.memory_create("a.md", "1\n2\n")
    assert await tools.memory_view("a.md", "5,9") == "File: a.md\nLines 5-2 of 2\n\n"


@pytest.mark.parametrize(
    "view_range",
    [
        pytest.param("1", id="one-part"),
        pytest.param("1,2,3", id="three-parts"),
        pytest.param("1,", id="trailing-comma"),
    ],
)
async def test_view_range_needs_two_parts(tools: AutoMemoryTools, view_range: str) -> None:
    """A range that is not two comma-separated parts is refused."""
    await tools.memory_create("a.md", "x\n")
    assert (
        await tools.memory_view("a.md", view_range)
        == "Error: view_range must be 'start,end' (e.g. '1,50')"
    )


@pytest.mark.parametrize(
    "view_range",
    [
        pytest.param("a,b", id="letters"),
        pytest.param("1.5,3", id="float"),
        pytest.param(",3", id="empty"),
    ],
)
async def test_view_range_needs_integers(tools: AutoMemoryTools, view_range: str) -> None:
    """A range whose parts are not integers is refused."""
    await tools.memory_create("a.md", "x\n")
    assert (
        await tools.memory_view("a.md", view_range)
        == "Error: view_range must be 'start,end' integers (e.g. '1,50')"
    )


async def test_view_range_is_ignored_for_directories(tools: AutoMemoryTools) -> None:
    """A directory is listed even when a (malformed) range is given."""
    await _seed(tools)
    assert (await tools.memory_view("projects", "junk")).startswith("Contents of projects:")


async def test_view_empty_file(tools: AutoMemoryTools) -> None:
    """An empty file has zero lines."""
    await tools.memory_create("empty.md", "")
    assert await tools.memory_view("empty.md") == "File: empty.md\nLines 1-0 of 0\n\n"


async def test_view_splits_crlf_and_cr_line_breaks(tools: AutoMemoryTools) -> None:
    """CRLF and CR count as line breaks, like LF."""
    await tools.memory_create("a.md", "one\r\ntwo\rthree")
    assert await tools.memory_view("a.md") == (
        "File: a.md\nLines 1-3 of 3\n\n     1\tone\n     2\ttwo\n     3\tthree\n"
    )


async def test_create_writes_file_and_reports_bytes(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """Creating a file stores the text and reports its size in UTF-8 bytes."""
    result = await tools.memory_create("user.md", "naïve — ok")
    assert result == "Successfully created file: user.md (13 bytes)"
    assert await _text(store, "user.md") == "naïve — ok"


async def test_create_makes_parent_directories(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Creating a nested file creates its parent directories."""
    assert (await tools.memory_create("a/b/c.md", "x")).startswith("Successfully created file")
    entry = await store.stat("a/b")
    assert entry is not None
    assert entry.is_dir


async def test_create_existing_file_is_refused(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Creating over an existing file is refused and leaves the file as it was."""
    await tools.memory_create("a.md", "first")
    assert await tools.memory_create("a.md", "second") == (
        "Error: File already exists: a.md. Use MemoryStrReplace to modify existing files."
    )
    assert await _text(store, "a.md") == "first"


@pytest.mark.parametrize("path", [pytest.param("dir", id="directory"), pytest.param("", id="root")])
async def test_create_over_directory_is_refused(tools: AutoMemoryTools, path: str) -> None:
    """Creating a file where a directory (or the root) is, is refused as already existing."""
    await tools.memory_create("dir/x.md", "x")
    assert await tools.memory_create(path, "y") == (
        f"Error: File already exists: {path}. Use MemoryStrReplace to modify existing files."
    )


async def test_create_below_a_file_is_refused(tools: AutoMemoryTools) -> None:
    """A file cannot be created below another file."""
    await tools.memory_create("a.md", "x")
    assert (
        await tools.memory_create("a.md/b.md", "y")
        == "Error: Parent path is a file, not a directory: a.md"
    )


async def test_str_replace_single_match_returns_snippet(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """A unique match is replaced and the edited lines are shown with five lines of context."""
    text = "".join(f"line {n}\n" for n in range(1, 21))
    await tools.memory_create("a.md", text)
    result = await tools.memory_str_replace("a.md", "line 10\n", "ten\nTEN\n")
    expected = "\n".join(
        f"{n:6d}→{line}"
        for n, line in enumerate(
            [
                *(f"line {n}" for n in range(5, 10)),
                "ten",
                "TEN",
                *(f"line {n}" for n in range(11, 17)),
            ],
            start=5,
        )
    )
    assert result == f"Successfully edited a.md. Here's a snippet of the result:\n{expected}"
    assert await _text(store, "a.md") == text.replace("line 10\n", "ten\nTEN\n")


async def test_str_replace_snippet_is_clamped_at_file_start(tools: AutoMemoryTools) -> None:
    """The snippet of an edit near the top starts at line 1 and includes the trailing empty line."""
    await tools.memory_create("a.md", "a\nb\n")
    assert await tools.memory_str_replace("a.md", "a", "A") == (
        "Successfully edited a.md. Here's a snippet of the result:\n     1→A\n     2→b\n     3→"
    )


async def test_str_replace_no_match(tools: AutoMemoryTools) -> None:
    """Text that does not occur is an error."""
    await tools.memory_create("a.md", "hello")
    assert (
        await tools.memory_str_replace("a.md", "bye", "x")
        == "Error: old_str not found in file: a.md"
    )


async def test_str_replace_many_matches(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Text that occurs several times is refused with the (non-overlapping) count."""
    await tools.memory_create("a.md", "aaaa b aa")
    assert await tools.memory_str_replace("a.md", "aa", "x") == (
        "Error: old_str appears 3 times in the file. Provide more surrounding context to make "
        "it unique."
    )
    assert await _text(store, "a.md") == "aaaa b aa"


@pytest.mark.parametrize(
    "new_str", [pytest.param("", id="empty"), pytest.param(" \n\t", id="blank")]
)
async def test_str_replace_blank_replacement_reports_deletion(
    tools: AutoMemoryTools, store: MemoryStore, new_str: str
) -> None:
    """Replacing with blank text reports a deletion instead of a snippet."""
    await tools.memory_create("a.md", "keep DROP keep")
    assert (
        await tools.memory_str_replace("a.md", "DROP", new_str)
        == "Successfully deleted matched text from a.md."
    )
    assert await _text(store, "a.md") == f"keep {new_str} keep"


async def test_str_replace_empty_old_str_is_refused(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """An empty old_str is refused at once (the reference loops forever on it)."""
    await tools.memory_create("a.md", "abc")
    result = await tools.memory_str_replace("a.md", "", "x")
    assert result.startswith("Error: old_str must not be empty")
    assert await _text(store, "a.md") == "abc"


async def test_str_replace_missing_file(tools: AutoMemoryTools) -> None:
    """Editing a file that does not exist is an error."""
    assert await tools.memory_str_replace("a.md", "x", "y") == "Error: File does not exist: a.md"


async def test_str_replace_directory(tools: AutoMemoryTools) -> None:
    """Editing a directory is an error."""
    await tools.memory_create("d/a.md", "x")
    assert (
        await tools.memory_str_replace("d", "x", "y") == "Error: Path is a directory, not a file: d"
    )


async def test_str_replace_treats_old_str_literally(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """old_str is matched as plain text, not as a pattern."""
    await tools.memory_create("a.md", "cost: $5 (approx.)")
    assert (await tools.memory_str_replace("a.md", "$5 (approx.)", "$6")).startswith(
        "Successfully edited"
    )
    assert await _text(store, "a.md") == "cost: $6"


async def test_insert_at_zero_goes_first(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Line 0 inserts before the first line."""
    await tools.memory_create("a.md", "one\ntwo\n")
    assert (
        await tools.memory_insert("a.md", 0, "zero")
        == "Successfully inserted text at line 0 in: a.md"
    )
    assert await _text(store, "a.md") == "zero\none\ntwo\n"


async def test_insert_at_line_count_appends(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Inserting at the line count appends, keeping the trailing newline."""
    await tools.memory_create("MEMORY.md", "# Index\n")
    await tools.memory_insert("MEMORY.md", 1, "- [A](a.md) — first")
    await tools.memory_insert("MEMORY.md", 2, "- [B](b.md) — second")
    assert await _text(store, "MEMORY.md") == (
        "# Index\n- [A](a.md) — first\n- [B](b.md) — second\n"
    )


async def test_insert_in_the_middle(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Line n inserts after the n-th line."""
    await tools.memory_create("a.md", "1\n3\n")
    await tools.memory_insert("a.md", 1, "2")
    assert await _text(store, "a.md") == "1\n2\n3\n"


async def test_insert_without_trailing_newline_adds_none(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """A file without a final newline does not gain one."""
    await tools.memory_create("a.md", "one")
    await tools.memory_insert("a.md", 1, "two")
    assert await _text(store, "a.md") == "one\ntwo"


async def test_insert_into_empty_file(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """An empty file has zero lines, so line 0 is both the start and the end."""
    await tools.memory_create("a.md", "")
    await tools.memory_insert("a.md", 0, "only")
    assert await _text(store, "a.md") == "only"


async def test_insert_normalises_crlf_to_lf(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """The file is rejoined with LF, so CRLF line breaks become LF."""
    await tools.memory_create("a.md", "a\r\nb\r\n")
    await tools.memory_insert("a.md", 1, "x")
    assert await _text(store, "a.md") == "a\nx\nb\n"


async def test_insert_beyond_the_end_is_refused(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """A line number past the end is refused with the file's length."""
    await tools.memory_create("a.md", "1\n2\n")
    assert (
        await tools.memory_insert("a.md", 3, "x")
        == "Error: insert_line 3 exceeds file length of 2 lines"
    )
    assert await _text(store, "a.md") == "1\n2\n"


async def test_insert_negative_line_is_refused(tools: AutoMemoryTools) -> None:
    """A negative line number is refused."""
    await tools.memory_create("a.md", "1\n")
    assert (
        await tools.memory_insert("a.md", -1, "x")
        == "Error: insert_line must be a non-negative integer"
    )


async def test_insert_missing_file(tools: AutoMemoryTools) -> None:
    """Inserting into a missing file is an error (checked before the line number)."""
    assert await tools.memory_insert("a.md", -1, "x") == "Error: File does not exist: a.md"


async def test_insert_into_directory(tools: AutoMemoryTools) -> None:
    """Inserting into a directory is an error."""
    await tools.memory_create("d/a.md", "x")
    assert await tools.memory_insert("d", 0, "x") == "Error: Path is a directory, not a file: d"


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("", id="empty"),
        pytest.param("/", id="slash"),
        pytest.param("a/..", id="dotdot"),
    ],
)
async def test_delete_root_is_refused(
    tools: AutoMemoryTools, store: MemoryStore, path: str
) -> None:
    """The root cannot be deleted, however it is spelled."""
    await tools.memory_create("a/x.md", "x")
    assert await tools.memory_delete(path) == "Error: Cannot delete the memories root directory."
    assert await store.read("a/x.md") is not None


async def test_delete_missing(tools: AutoMemoryTools) -> None:
    """Deleting a missing path is an error."""
    assert await tools.memory_delete("gone.md") == "Error: Path does not exist: gone.md"


async def test_delete_file(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Deleting a file removes it."""
    await tools.memory_create("a.md", "x")
    assert await tools.memory_delete("a.md") == "Successfully deleted file: a.md"
    assert await store.stat("a.md") is None


async def test_delete_directory_recursively(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Deleting a directory removes everything below it and nothing else."""
    await _seed(tools)
    assert await tools.memory_delete("projects") == "Successfully deleted directory: projects"
    assert await store.stat("projects") is None
    assert await store.stat("projects/old/zeus.md") is None
    assert [entry.name for entry in await store.list_dir("")] == ["MEMORY.md", "user_role.md"]


async def test_delete_does_not_touch_prefix_siblings(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """Deleting directory 'a' leaves 'ab.md' and 'a.b/x.md' alone."""
    await tools.memory_create("a/x.md", "x")
    await tools.memory_create("ab.md", "y")
    await tools.memory_create("a.b/x.md", "z")
    await tools.memory_delete("a")
    assert [entry.name for entry in await store.list_dir("")] == ["a.b", "ab.md"]


async def test_rename_file(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Renaming moves the file and its content."""
    await tools.memory_create("a.md", "content")
    assert await tools.memory_rename("a.md", "b.md") == "Successfully renamed 'a.md' to 'b.md'"
    assert await store.stat("a.md") is None
    assert await _text(store, "b.md") == "content"


async def test_rename_creates_destination_parents(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """Renaming into a new directory creates it."""
    await tools.memory_create("a.md", "content")
    assert (await tools.memory_rename("a.md", "x/y/a.md")).startswith("Successfully renamed")
    assert await _text(store, "x/y/a.md") == "content"


async def test_rename_directory(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Renaming a directory moves everything below it."""
    await _seed(tools)
    assert await tools.memory_rename("projects", "archive/projects") == (
        "Successfully renamed 'projects' to 'archive/projects'"
    )
    assert await _text(store, "archive/projects/apollo.md") == "launch\n"
    assert await _text(store, "archive/projects/old/zeus.md") == "z"
    assert await store.stat("projects") is None


async def test_rename_missing_source(tools: AutoMemoryTools) -> None:
    """Renaming a missing path is an error."""
    assert await tools.memory_rename("a.md", "b.md") == "Error: Source path does not exist: a.md"


async def test_rename_onto_existing_destination(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """Renaming onto an existing path is refused and changes nothing."""
    await tools.memory_create("a.md", "A")
    await tools.memory_create("b.md", "B")
    assert (
        await tools.memory_rename("a.md", "b.md") == "Error: Destination path already exists: b.md"
    )
    assert await _text(store, "a.md") == "A"
    assert await _text(store, "b.md") == "B"


async def test_rename_onto_existing_directory(tools: AutoMemoryTools) -> None:
    """Renaming onto an existing directory is refused."""
    await tools.memory_create("a.md", "A")
    await tools.memory_create("d/x.md", "X")
    assert await tools.memory_rename("a.md", "d") == "Error: Destination path already exists: d"


async def test_rename_onto_root_is_refused(tools: AutoMemoryTools) -> None:
    """The root always exists, so nothing can be renamed onto it."""
    await tools.memory_create("a.md", "A")
    assert await tools.memory_rename("a.md", "/") == "Error: Destination path already exists: /"


async def test_rename_root_is_refused(tools: AutoMemoryTools) -> None:
    """The root cannot be renamed."""
    await tools.memory_create("a.md", "A")
    assert await tools.memory_rename("", "x") == "Error: Cannot rename the memories root directory."


async def test_rename_directory_into_itself_is_refused(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """A directory cannot be moved below itself."""
    await tools.memory_create("d/x.md", "X")
    assert await tools.memory_rename("d", "d/sub") == "Error: Cannot move 'd' into itself ('d/sub')"
    assert await _text(store, "d/x.md") == "X"


async def test_rename_below_a_file_is_refused(tools: AutoMemoryTools, store: MemoryStore) -> None:
    """A file cannot be moved below another file."""
    await tools.memory_create("a.md", "A")
    await tools.memory_create("b.md", "B")
    assert (
        await tools.memory_rename("a.md", "b.md/a.md")
        == "Error: Parent path is a file, not a directory: b.md"
    )
    assert await _text(store, "a.md") == "A"


async def test_rename_removes_emptied_source_directory(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """Moving the last file out of a directory removes the directory (directories are implicit)."""
    await tools.memory_create("d/x.md", "X")
    await tools.memory_rename("d/x.md", "x.md")
    assert await store.stat("d") is None
    assert await tools.memory_view("d") == "Error: Path does not exist: d"


async def test_delete_removes_emptied_parent_directory(
    tools: AutoMemoryTools, store: MemoryStore
) -> None:
    """Deleting the last file of a directory removes the directory too."""
    await tools.memory_create("d/e/x.md", "X")
    await tools.memory_delete("d/e/x.md")
    assert await store.stat("d") is None
    assert await tools.memory_view("") == "Contents of /:\n\n"
