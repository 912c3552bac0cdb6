"""The branch operations of the SDK's ``AdvancedSQLiteSession`` on ``AgentsSession`` (forks of
the session underneath), with the SDK's own advanced session as the reference: the same items,
turns, branch lists and errors for one script of creating, switching, searching and deleting
branches, on both stores."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agents.extensions.memory.advanced_sqlite_session import AdvancedSQLiteSession

from asyncsession import EventFilter
from asyncsession.exceptions import AccessDenied
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.service import SessionService

Make = Callable[[], Any]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_{text.replace(' ', '_')}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def call(tool: str) -> list[dict[str, Any]]:
    return [
        {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": tool, "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]


async def _error(action: Awaitable[Any]) -> str:
    try:
        await action
    except ValueError:
        return "ValueError"
    return "no error"


def _turns(turns: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(t["turn"], t["content"], t["full_content"], t["can_branch"]) for t in turns]


def _branches(branches: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    rows = [
        (
            "auto" if b["branch_id"].startswith("branch_from_turn_3_") else b["branch_id"],
            b["message_count"],
            b["user_turns"],
            b["is_current"],
            isinstance(b["created_at"], str),
        )
        for b in branches
    ]
    return sorted(rows)  # the SDK orders by creation to the second: ties are in no set order


async def _script(make: Make) -> list[Any]:
    """Everything a caller can observe, in order (times and generated ids left out)."""
    seen: list[Any] = []
    session = make()
    await session.add_items([user("q1"), reply("a1")])
    await session.add_items([user("q2 about TOOLS"), *call("lookup"), reply("a2")])
    await session.add_items([user("q3"), reply("a3")])
    seen.append(_turns(await session.get_conversation_turns()))

    seen.append(await session.create_branch_from_turn(2, "alt"))
    seen.append(await session.get_items())
    await session.add_items([user("q2, asked again"), reply("a2 again")])
    seen.append(await session.get_items())
    seen.append(_turns(await session.get_conversation_turns()))
    seen.append(_turns(await session.get_conversation_turns("main")))
    seen.append(_branches(await session.list_branches()))

    await session.switch_to_branch("main")
    seen.append(await session.get_items())
    seen.append(_turns(await session.find_turns_by_content("tools")))
    seen.append(_turns(await session.find_turns_by_content("AGAIN", "alt")))
    seen.append(_turns(await session.find_turns_by_content("nowhere")))
    auto = await session.create_branch_from_content("Q3")
    seen.append(auto.startswith("branch_from_turn_3_"))
    seen.append(await session.get_items())
    seen.append(_branches(await session.list_branches()))

    seen.append(await _error(session.create_branch_from_turn(9)))
    seen.append(await _error(session.create_branch_from_turn(1, "alt")))
    seen.append(await _error(session.create_branch_from_turn(1, "  ")))
    seen.append(await _error(session.create_branch_from_content("nowhere")))
    seen.append(await _error(session.switch_to_branch("nope")))
    seen.append(await _error(session.delete_branch("main")))
    seen.append(await _error(session.delete_branch("")))
    seen.append(await _error(session.delete_branch(auto)))
    seen.append(await _error(session.delete_branch("nope")))
    seen.append(await session.get_items())

    await session.delete_branch(auto, force=True)
    seen.append(await session.get_items())  # back on main
    seen.append(_branches(await session.list_branches()))
    seen.append(await _error(session.switch_to_branch(auto)))

    # A branch of a branch outlives the branch it came from.
    await session.switch_to_branch("alt")
    seen.append(await session.create_branch_from_turn(2, "alt2"))
    await session.add_items([user("q2, third try")])
    await session.switch_to_branch("main")
    await session.delete_branch("alt")
    await session.switch_to_branch("alt2")
    seen.append(await session.get_items())
    seen.append(_branches(await session.list_branches()))

    # Another object on the same session starts on main and sees the same branches.
    other = make()
    seen.append(await other.get_items())
    seen.append(_branches(await other.list_branches()))
    return seen


async def test_branches_behave_as_the_sdks_advanced_session(
    service: SessionService, tmp_path: Path
) -> None:
    opened: list[AdvancedSQLiteSession] = []

    def advanced() -> AdvancedSQLiteSession:
        session = AdvancedSQLiteSession(
            session_id="chat", db_path=tmp_path / "advanced.db", create_tables=True
        )
        opened.append(session)
        return session

    try:
        expected = await _script(advanced)
    finally:
        for session in opened:
            session.close()
    got = await _script(lambda: AgentsSession("chat", service, user_id="alice"))
    assert got == expected
    # Spelled out, so the reference's behaviour is pinned too.
    assert got[2] == [user("q1"), reply("a1")]
    assert got[3][-2:] == [user("q2, asked again"), reply("a2 again")]
    assert got[6] == [("alt", 4, 2, True, True), ("main", 8, 3, False, True)]
    assert got[-4] == [user("q1"), reply("a1"), user("q2, third try")]


async def test_a_branch_is_a_fork_that_copies_nothing(service: SessionService) -> None:
    session = AgentsSession("chat", service)
    await session.add_items([user("q1"), reply("a1")])  # version 1
    await session.add_items([user("q2"), reply("a2")])  # version 2
    await session.create_branch_from_turn(2, "alt")
    assert session.current_branch_id == "alt"
    fork = await service.find_by_id("chat/branches/alt")
    assert fork is not None
    assert fork.forked_from is not None
    assert fork.forked_from.session_id == "chat"
    assert fork.forked_from.version == 1  # just before turn 2
    # The fork reads the parent's first two events (the same ids) as its own; its log
    # holds nothing of its own yet.
    parent = [e.id for e in await service.get_events("chat")]
    assert [e.id for e in await service.get_events("chat/branches/alt")] == parent[:2]
    assert await service.get_event_version("chat/branches/alt") == 1
    await session.add_items([user("q2 again")])
    assert len(await service.get_events("chat", EventFilter.all())) == 4


async def test_branches_of_another_users_session_are_refused(service: SessionService) -> None:
    mine = AgentsSession("chat", service, user_id="alice")
    await mine.add_items([user("q1"), reply("a1")])
    await mine.create_branch_from_turn(1, "alt")
    theirs = AgentsSession("chat", service, user_id="mallory")
    for action in (
        theirs.list_branches(),
        theirs.switch_to_branch("alt"),
        theirs.create_branch_from_turn(1, "mine"),
        theirs.get_conversation_turns(),
    ):
        with pytest.raises(AccessDenied):
            await action
    with pytest.raises(AccessDenied):
        await theirs.delete_branch("alt")
    assert [b["branch_id"] for b in await mine.list_branches()] == ["main", "alt"]
