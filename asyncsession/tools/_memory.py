"""`AutoMemoryTools`: the six model-facing memory tools over one scope's `MemoryStore`.

The six are [`Tool`][asyncsession.tools.Tool]s like any other (`AutoMemoryTools.as_tools`):
their schemas come from the pydantic argument models below, and arguments that do not
validate come back the way every tool's do. Every tool returns a string for the model.
Whatever the store refuses or fails at comes back as a string too, never as an exception: it
starts with ``"Error"`` (``"Error: ..."`` for anything the model can fix; ``"Error reading
path: ..."`` and the like when the backend itself fails). Successes start with
``"Successfully"``, except `MemoryView`, which returns the listing or the numbered file. Only
cancellation and programming errors propagate. The words are the reference's, whatever the
store: they are chosen by the `MemoryStoreError.reason` the store raised.
"""

from __future__ import annotations

import asyncio
import posixpath
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ClassVar, Final, cast

from pydantic import BaseModel, ConfigDict, Field

from .._checks import require_object
from ..exceptions import MemoryStoreError, UsageError
from ..memory.store import MemoryStore
from ._memory_prompts import (
    CREATE_DESCRIPTION,
    DELETE_DESCRIPTION,
    INSERT_DESCRIPTION,
    MEMORY_SYSTEM_PROMPT,
    RENAME_DESCRIPTION,
    STR_REPLACE_DESCRIPTION,
    VIEW_DESCRIPTION,
)
from ._tool import Tool

__all__ = [
    "MEMORY_TOOL_NAMES",
    "AutoMemoryTools",
    "MemoryCreateArgs",
    "MemoryDeleteArgs",
    "MemoryInsertArgs",
    "MemoryRenameArgs",
    "MemoryStrReplaceArgs",
    "MemoryViewArgs",
]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_BACKOFF_BASE = 0.005
_BACKOFF_CAP = 0.2


class _Args(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class MemoryViewArgs(_Args):
    path: str = Field(
        description=(
            "File or directory to show, relative to the memory root. Use '' or '/' for the "
            "root and 'MEMORY.md' for the index."
        )
    )
    view_range: str | None = Field(
        default=None,
        description="Optional line range 'start,end' (e.g. '1,50') when viewing a file.",
    )


class MemoryCreateArgs(_Args):
    path: str = Field(
        description="Path of the new file, relative to the memory root (e.g. 'user_role.md')."
    )
    file_text: str = Field(
        description="The whole file: the front matter block, then the memory itself."
    )


class MemoryStrReplaceArgs(_Args):
    path: str = Field(description="File to edit, relative to the memory root.")
    old_str: str = Field(
        description="Exact text to replace; it must occur exactly once and must not be empty."
    )
    new_str: str = Field(description="Replacement text; empty to delete old_str.")


class MemoryInsertArgs(_Args):
    path: str = Field(description="File to change, relative to the memory root.")
    insert_line: int = Field(
        description=(
            "Non-negative line number to insert after: 0 inserts before the first line, the "
            "file's line count appends at the end."
        )
    )
    insert_text: str = Field(
        description="Text to insert as new line(s), e.g. '- [Title](file.md) — one-line hook'."
    )


class MemoryDeleteArgs(_Args):
    path: str = Field(description="File or directory to delete, relative to the memory root.")


class MemoryRenameArgs(_Args):
    old_path: str = Field(description="Current path of the file or directory.")
    new_path: str = Field(description="New path; it must not exist yet.")


_TOOLS: Final = (
    ("MemoryView", VIEW_DESCRIPTION, MemoryViewArgs, "memory_view"),
    ("MemoryCreate", CREATE_DESCRIPTION, MemoryCreateArgs, "memory_create"),
    ("MemoryStrReplace", STR_REPLACE_DESCRIPTION, MemoryStrReplaceArgs, "memory_str_replace"),
    ("MemoryInsert", INSERT_DESCRIPTION, MemoryInsertArgs, "memory_insert"),
    ("MemoryDelete", DELETE_DESCRIPTION, MemoryDeleteArgs, "memory_delete"),
    ("MemoryRename", RENAME_DESCRIPTION, MemoryRenameArgs, "memory_rename"),
)
MEMORY_TOOL_NAMES: Final = tuple(name for name, *_ in _TOOLS)
"""The model-facing names of the six memory tools, in the order `as_tools` returns them."""


@dataclass(frozen=True, slots=True)
class _Edit:
    text: str
    message: str


def _split_lines(text: str) -> list[str]:
    """Split on LF, CRLF or CR; a final line break does not start another line."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()
    return lines


def _resolve(path: str) -> str:
    """A tool's path argument as a store path: blank or ``"/"`` is the root (the store
    normalises and checks the rest)."""
    return "" if not path or not path.strip() or path == "/" else path


async def _answered(work: Awaitable[str], backend: str, **answers: str) -> str:
    """The tool's answer: `work`'s, or the text for the reason the store refused: one of
    ``answers``, ``"<backend>: ..."`` when the backend failed, else ``"Error: <message>"``."""
    try:
        return await work
    except MemoryStoreError as exc:
        if exc.reason in answers:
            return answers[exc.reason]
        return f"{backend}: {exc}" if exc.reason == "backend" else f"Error: {exc}"


class AutoMemoryTools:
    r"""The six memory tools (view, create, str_replace, insert, delete, rename) over one store.

    The tools are async methods with snake_case parameters that return strings for the model;
    `as_tools` offers them to a tool-calling model under the names `MEMORY_TOOL_NAMES`.
    Read-modify-write tools (str_replace, insert) and rename re-read and retry when the store
    reports a concurrent change, with jittered backoff, up to `max_attempts` times, so agents
    sharing a scope never lose one another's edits.

    Example:
        ```python
        tools = AutoMemoryTools(DirectoryMemoryStore("/var/lib/agent/memories", scope="alice"))
        await tools.memory_create("MEMORY.md", "# Memory index\n")
        await tools.memory_insert("MEMORY.md", 1, "- [Role](user_role.md) — data scientist")
        chat = ChatClient(client, model="gpt-4.1", tools=tools.as_tools())  # the same six
        ```
    """

    SYSTEM_PROMPT: ClassVar[str] = MEMORY_SYSTEM_PROMPT
    """The system prompt's template; ``{memories_root}`` is its only placeholder."""

    def __init__(self, store: MemoryStore, *, max_attempts: int = 20) -> None:
        """Wrap a store.

        Args:
            store: The scope's memory store.
            max_attempts: How often a conflicting edit is tried before giving up.

        Raises:
            ValueError: `max_attempts` is not positive.
        """
        if max_attempts < 1:
            raise UsageError(f"max_attempts must be at least 1, got {max_attempts!r}")
        require_object(store, "store", "a MemoryStore", methods=("stat", "read", "write"))
        self._store = store
        self._max_attempts = max_attempts

    def __repr__(self) -> str:
        return f"AutoMemoryTools({self._store!r})"

    @property
    def store(self) -> MemoryStore:
        """The store the tools work on."""
        return self._store

    @property
    def root(self) -> str:
        """The memory root shown to the model."""
        return self._store.root

    @property
    def system_prompt(self) -> str:
        """The system prompt that teaches the model to keep its memory with these tools, with
        the store's root filled in (`AutoMemoryToolsAdvisor` adds it for you)."""
        return self.SYSTEM_PROMPT.replace("{memories_root}", self._store.root)

    def as_tools(self) -> list[Tool]:
        """The six tools for a tool-calling model, in `MEMORY_TOOL_NAMES` order."""
        return [
            Tool.from_model(name, description, arguments, getattr(self, method))
            for name, description, arguments, method in _TOOLS
        ]

    async def memory_view(self, path: str, view_range: str | None = None) -> str:
        """List a directory two levels deep, or show a file with line numbers."""
        return await _answered(self._view(path, view_range), "Error reading path")

    async def memory_create(self, path: str, file_text: str) -> str:
        """Create a new file; parents are created, an existing path is refused."""

        async def create() -> str:
            await self._store.write(_resolve(path), file_text, expected_version=None)
            return f"Successfully created file: {path} ({len(file_text.encode('utf-8'))} bytes)"

        exists = (
            f"Error: File already exists: {path}. Use MemoryStrReplace to modify existing files."
        )
        return await _answered(
            create(), "Error creating file", exists=exists, is_a_directory=exists
        )

    async def memory_str_replace(self, path: str, old_str: str, new_str: str) -> str:
        """Replace the single occurrence of `old_str` in a file with `new_str`."""

        def edit(text: str) -> _Edit | str:
            if not old_str:
                return (
                    "Error: old_str must not be empty. Give the exact text to replace, with "
                    "enough surrounding context to occur only once."
                )
            count = text.count(old_str)
            if count == 0:
                return f"Error: old_str not found in file: {path}"
            if count > 1:
                return (
                    f"Error: old_str appears {count} times in the file. Provide more "
                    "surrounding context to make it unique."
                )
            index = text.index(old_str)
            updated = text[:index] + new_str + text[index + len(old_str) :]
            if not new_str.strip():
                return _Edit(updated, f"Successfully deleted matched text from {path}.")
            return _Edit(
                updated,
                f"Successfully edited {path}. Here's a snippet of the result:\n"
                + _snippet(updated, index, new_str),
            )

        return await self._edit(path, edit, "Error editing file")

    async def memory_insert(self, path: str, insert_line: int, insert_text: str) -> str:
        """Insert `insert_text` as new line(s) after line `insert_line` (0 = at the top)."""

        def edit(text: str) -> _Edit | str:
            line = cast(object, insert_line)  # a loose adapter may pass anything
            if isinstance(line, bool) or not isinstance(line, int) or line < 0:
                return "Error: insert_line must be a non-negative integer"
            lines = _split_lines(text)
            if insert_line > len(lines):
                return f"Error: insert_line {insert_line} exceeds file length of {len(lines)} lines"
            lines.insert(insert_line, insert_text)
            updated = "\n".join(lines) + ("\n" if text.endswith("\n") else "")
            return _Edit(updated, f"Successfully inserted text at line {insert_line} in: {path}")

        return await self._edit(path, edit, "Error inserting into file")

    async def memory_delete(self, path: str) -> str:
        """Delete a file, or a directory with everything in it (never the root)."""

        async def delete() -> str:
            entry = await self._store.delete(_resolve(path))
            return f"Successfully deleted {'directory' if entry.is_dir else 'file'}: {path}"

        missing = f"Error: Path does not exist: {path}"
        return await _answered(delete(), "Error deleting path", not_found=missing)

    async def memory_rename(self, old_path: str, new_path: str) -> str:
        """Move a file or directory to a path that does not exist yet."""

        async def rename() -> str:
            for attempt in range(self._max_attempts):
                try:
                    await self._store.rename(_resolve(old_path), _resolve(new_path))
                except MemoryStoreError as exc:
                    if exc.reason != "conflict":
                        raise
                    await self._backoff(attempt)
                    continue
                return f"Successfully renamed '{old_path}' to '{new_path}'"
            return _gave_up(old_path)

        return await _answered(
            rename(),
            "Error renaming path",
            not_found=f"Error: Source path does not exist: {old_path}",
            exists=f"Error: Destination path already exists: {new_path}",
        )

    async def _view(self, path: str, view_range: str | None) -> str:
        rel = _resolve(path)
        try:
            file = await self._store.read(rel)
        except MemoryStoreError as exc:
            if exc.reason != "is_a_directory":
                raise
            return await self._listing(rel, path or "/")
        if file is None:
            return f"Error: Path does not exist: {path}"
        return _numbered(file.text, posixpath.basename(posixpath.normpath(rel)), view_range)

    async def _listing(self, rel: str, shown: str) -> str:
        try:
            entries = await self._store.list_dir(rel)
        except MemoryStoreError as exc:
            if exc.reason != "not_found":
                raise
            return f"Error: Path does not exist: {shown}"
        out = [f"Contents of {shown}:\n\n"]
        for entry in entries:
            if not entry.is_dir:
                out.append(f"  {entry.name} ({entry.size} bytes)\n")
                continue
            out.append(f"  {entry.name}/\n")
            try:
                children = await self._store.list_dir(f"{rel}/{entry.name}" if rel else entry.name)
            except MemoryStoreError as exc:
                if exc.reason not in ("not_found", "invalid_path"):
                    raise
                continue  # removed while we were listing, or too deep to address
            for child in children:
                suffix = "/" if child.is_dir else f" ({child.size} bytes)"
                out.append(f"    {child.name}{suffix}\n")
        return "".join(out)

    async def _edit(self, path: str, edit: Callable[[str], _Edit | str], failed: str) -> str:
        """Read, transform and compare-and-set a file, retrying on concurrent changes."""

        async def run() -> str:
            for attempt in range(self._max_attempts):
                file = await self._store.read(_resolve(path))
                if file is None:
                    return f"Error: File does not exist: {path}"
                outcome = edit(file.text)
                if isinstance(outcome, str):
                    return outcome
                try:
                    await self._store.write(
                        _resolve(path), outcome.text, expected_version=file.version
                    )
                except MemoryStoreError as exc:
                    if exc.reason != "conflict":
                        raise
                    await self._backoff(attempt)
                    continue
                return outcome.message
            return _gave_up(path)

        directory = f"Error: Path is a directory, not a file: {path}"
        return await _answered(run(), failed, is_a_directory=directory)

    async def _backoff(self, attempt: int) -> None:
        if attempt + 1 < self._max_attempts:
            delay = min(_BACKOFF_CAP, _BACKOFF_BASE * 2**attempt)
            await asyncio.sleep(random.uniform(0, delay))


def _gave_up(path: str) -> str:
    return (
        f"Error: {path} kept changing under concurrent edits and could not be updated. "
        "View it again and retry."
    )


def _numbered(text: str, name: str, view_range: str | None) -> str:
    """Render a file as the view tool shows it: a header, then tab-separated numbered lines."""
    lines = _split_lines(text)
    total = len(lines)
    start, end = 1, total
    if view_range is not None and view_range.strip():
        parts = view_range.split(",")
        while parts and parts[-1] == "":
            parts.pop()  # like Java's String.split, which the reference used
        if len(parts) != 2:
            return "Error: view_range must be 'start,end' (e.g. '1,50')"
        bounds = [part.strip() for part in parts]
        if not all(_INTEGER.fullmatch(bound) for bound in bounds):
            return "Error: view_range must be 'start,end' integers (e.g. '1,50')"
        start, end = max(1, int(bounds[0])), min(total, int(bounds[1]))
    body = "".join(f"{number:6d}\t{lines[number - 1]}\n" for number in range(start, end + 1))
    return f"File: {name}\nLines {start}-{end} of {total}\n\n{body}"


def _snippet(updated: str, index: int, new_str: str) -> str:
    """The edited lines and five lines either side, numbered as ``"     7→text"``."""
    lines = updated.split("\n")
    first = updated.count("\n", 0, index)
    last = first + new_str.count("\n")
    low, high = max(0, first - 5), min(len(lines) - 1, last + 5)
    return "\n".join(f"{number + 1:6d}→{lines[number]}" for number in range(low, high + 1))
