"""One path for bad arguments: every kind of tool answers them with the same error text."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from asyncsession import DefaultSessionService, EventFilter, InMemorySessionRepository
from asyncsession.events import SessionEvent
from asyncsession.memory import DirectoryMemoryStore
from asyncsession.tools import AutoMemoryTools, Tool, conversation_search, tool


class _CountingService(DefaultSessionService):
    """Counts the reads a tool makes, so a test can show a refused call read nothing."""

    def __init__(self) -> None:
        super().__init__(InMemorySessionRepository())
        self.reads = 0

    async def get_events(
        self, session_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        self.reads += 1
        return await super().get_events(session_id, filter)

    async def search_events(
        self, session_id: str, keywords: Sequence[str], **options: Any
    ) -> list[SessionEvent]:
        self.reads += 1
        return await super().search_events(session_id, keywords, **options)


@dataclass
class _Subject:
    """One tool under test, and a way to tell whether its body ever ran."""

    tool: Tool
    ran: Callable[[], Awaitable[bool]]


async def _function_tool(tmp_path: Path) -> _Subject:
    calls: list[dict[str, Any]] = []

    @tool
    async def book(city: str, nights: int) -> str:
        """Book a hotel.

        Args:
            city: Where.
            nights: How long.
        """
        calls.append({"city": city, "nights": nights})
        return "booked"

    async def ran() -> bool:
        return bool(calls)

    return _Subject(book, ran)


async def _memory_tool(tmp_path: Path) -> _Subject:
    store = DirectoryMemoryStore(tmp_path, scope="alice")
    memory = AutoMemoryTools(store)
    await memory.memory_create("MEMORY.md", "# Index\n")
    insert = next(t for t in memory.as_tools() if t.name == "MemoryInsert")

    async def ran() -> bool:
        file = await store.read("MEMORY.md")
        return file is not None and file.text != "# Index\n"

    return _Subject(insert, ran)


async def _recall_tool(tmp_path: Path) -> _Subject:
    service = _CountingService()

    async def ran() -> bool:
        return service.reads > 0

    return _Subject(conversation_search(service, "s1"), ran)


SUBJECTS = [
    pytest.param(_function_tool, id="function"),
    pytest.param(_memory_tool, id="memory"),
    pytest.param(_recall_tool, id="recall"),
]

# Per tool: valid arguments, and one wrongly typed, one missing and one unknown field.
VALID: dict[str, dict[str, Any]] = {
    "book": {"city": "Oslo", "nights": 2},
    "MemoryInsert": {"path": "MEMORY.md", "insert_line": 0, "insert_text": "x"},
    "conversation_search": {"inner_thought": "why", "query": "cats"},
}
WRONG_TYPE = {"book": "nights", "MemoryInsert": "insert_line", "conversation_search": "page"}
REQUIRED = {"book": "city", "MemoryInsert": "path", "conversation_search": "query"}


def _json(values: dict[str, Any]) -> str:
    return json.dumps(values)


def _cases(name: str) -> dict[str, tuple[str, str]]:
    """Each kind of bad arguments, and the problem the answer must name."""
    valid = VALID[name]
    wrong = WRONG_TYPE[name]
    missing = {k: v for k, v in valid.items() if k != REQUIRED[name]}
    return {
        "bad-json": ('{"city": ', "arguments: Invalid JSON"),
        "not-an-object": ("[1, 2]", "arguments: Input should be an object"),
        "wrong-type": (_json({**valid, wrong: [3]}), f"{wrong}: Input should be a valid integer"),
        "missing": (_json(missing), f"{REQUIRED[name]}: Field required"),
        "extra": (_json({**valid, "sneaky": 1}), "sneaky: Extra inputs are not permitted"),
    }


@pytest.mark.parametrize("make", SUBJECTS)
@pytest.mark.parametrize("kind", ["bad-json", "not-an-object", "wrong-type", "missing", "extra"])
async def test_bad_arguments_answer_with_one_error_text_and_run_nothing(
    make: Callable[[Path], Awaitable[_Subject]], kind: str, tmp_path: Path
) -> None:
    """Bad JSON, a wrong type, a missing or an unknown field: the same text, and no effect."""
    subject = await make(tmp_path)
    arguments, problem = _cases(subject.tool.name)[kind]

    answer = await subject.tool.invoke(arguments)

    assert answer.startswith(f"Error: Invalid arguments for tool {subject.tool.name!r}: ")
    assert problem in answer
    assert not await subject.ran()


@pytest.mark.parametrize("make", SUBJECTS)
async def test_valid_arguments_run_the_tool(
    make: Callable[[Path], Awaitable[_Subject]], tmp_path: Path
) -> None:
    """The same tools run when the arguments validate (so the refusals above mean something)."""
    subject = await make(tmp_path)

    answer = await subject.tool.invoke(_json(VALID[subject.tool.name]))

    assert not answer.startswith("Error")
    assert await subject.ran()
