"""The Session protocol as the SDK's own sessions keep it, on our stores and on the SDK's SQLite.

Every test that takes ``any_session`` runs against the SDK's ``SQLiteSession`` (the reference)
and ``AgentsSession`` on the in-memory store and on the test server, with the same assertions.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from agents import SessionSettings, TResponseInputItem
from agents_support import SessionFactory

Items = list[TResponseInputItem]


def items(*texts: str) -> Items:
    """Alternating user and assistant items with these texts."""
    roles = ("user", "assistant")
    return cast(Items, [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)])


def contents(found: list[Any]) -> list[Any]:
    return [item.get("content") for item in found]


async def test_add_and_get_items(any_session: SessionFactory) -> None:
    """Added items come back in order, equal to what was added."""
    session = any_session("basic")
    added = items("Hello", "Hi there!")
    await session.add_items(added)
    assert await session.get_items() == added


async def test_empty_session_has_no_items(any_session: SessionFactory) -> None:
    """A session nobody wrote to reads as empty, pops ``None`` and clears quietly."""
    session = any_session("nothing")
    assert await session.get_items() == []
    assert await session.get_items(limit=3) == []
    assert await session.pop_item() is None
    await session.clear_session()
    assert await session.get_items() == []


async def test_add_empty_list_is_a_no_op(any_session: SessionFactory) -> None:
    """Adding no items changes nothing."""
    session = any_session("empty-add")
    await session.add_items([])
    assert await session.get_items() == []


async def test_multiple_adds_accumulate(any_session: SessionFactory) -> None:
    """Each add appends after the previous ones."""
    session = any_session("accumulate")
    await session.add_items(items("one"))
    await session.add_items(items("two", "three"))
    await session.add_items(items("four"))
    assert contents(await session.get_items()) == ["one", "two", "three", "four"]


async def test_identical_items_are_stored_each_time(any_session: SessionFactory) -> None:
    """Adding equal items twice stores them twice, like the SDK's sessions."""
    session = any_session("repeat")
    await session.add_items(items("yes"))
    await session.add_items(items("yes"))
    assert contents(await session.get_items()) == ["yes", "yes"]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        pytest.param(1, ["m4"], id="one"),
        pytest.param(3, ["m2", "m3", "m4"], id="some"),
        pytest.param(5, ["m0", "m1", "m2", "m3", "m4"], id="all"),
        pytest.param(10, ["m0", "m1", "m2", "m3", "m4"], id="more-than-all"),
        pytest.param(0, [], id="zero"),
        pytest.param(None, ["m0", "m1", "m2", "m3", "m4"], id="none"),
    ],
)
async def test_limit_returns_the_newest_items(
    any_session: SessionFactory, limit: int | None, expected: list[str]
) -> None:
    """``get_items(limit)`` returns exactly the newest ``limit`` items, oldest first."""
    session = any_session("limits")
    await session.add_items(items("m0", "m1", "m2"))
    await session.add_items(items("m3", "m4"))
    assert contents(await session.get_items(limit=limit)) == expected


async def test_limit_counts_items_not_batches(any_session: SessionFactory) -> None:
    """A limit may cut through the model items of one reply."""
    session = any_session("cut-reply")
    reply = cast(
        Items,
        [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
        ],
    )
    await session.add_items(items("go"))
    await session.add_items(reply)
    assert await session.get_items(limit=2) == reply[1:]


@pytest.mark.parametrize("as_dict", [False, True], ids=["settings", "dict"])
async def test_session_settings_limit_is_the_default(
    any_session: SessionFactory, as_dict: bool
) -> None:
    """``session_settings.limit`` applies when ``get_items`` gets no limit; an explicit one wins."""
    settings: Any = {"limit": 2} if as_dict else SessionSettings(limit=2)
    session = any_session("settings", session_settings=settings)
    assert session.session_settings == SessionSettings(limit=2)
    await session.add_items(items("a", "b", "c", "d"))
    assert contents(await session.get_items()) == ["c", "d"]
    assert contents(await session.get_items(limit=3)) == ["b", "c", "d"]


async def test_default_session_settings_have_no_limit(any_session: SessionFactory) -> None:
    """Without settings the session reads everything."""
    session = any_session("no-settings")
    assert session.session_settings == SessionSettings()


async def test_pop_returns_items_newest_first(any_session: SessionFactory) -> None:
    """``pop_item`` takes the newest item off the history and returns it, until it is empty."""
    session = any_session("pop")
    await session.add_items(items("Hello", "Hi there!", "How are you?"))
    popped = [await session.pop_item() for _ in range(4)]
    assert contents([p for p in popped if p is not None]) == ["How are you?", "Hi there!", "Hello"]
    assert popped[-1] is None
    assert await session.get_items() == []


async def test_pop_splits_a_batch(any_session: SessionFactory) -> None:
    """Popping the last item of a multi-item reply leaves its other items in place."""
    session = any_session("pop-batch")
    reply = cast(
        Items,
        [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc1"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}", "id": "fc2"},
        ],
    )
    await session.add_items([*items("go"), *reply])
    assert await session.pop_item() == reply[2]
    assert await session.get_items() == [*items("go"), *reply[:2]]
    assert await session.pop_item() == reply[1]
    assert await session.pop_item() == reply[0]
    assert await session.get_items() == items("go")


async def test_add_after_pop_follows_the_remaining_items(any_session: SessionFactory) -> None:
    """Items added after a pop come after what the pop left."""
    session = any_session("pop-add")
    await session.add_items(items("a", "b"))
    await session.pop_item()
    await session.add_items(items("c"))
    assert contents(await session.get_items()) == ["a", "c"]


async def test_clear_empties_the_history(any_session: SessionFactory) -> None:
    """After ``clear_session`` the history is empty, and new items start a fresh one."""
    session = any_session("clear")
    await session.add_items(items("a", "b", "c"))
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.add_items(items("fresh"))
    assert contents(await session.get_items()) == ["fresh"]


async def test_sessions_are_isolated(any_session: SessionFactory) -> None:
    """Writes, pops and clears of one session never touch another."""
    first, second = any_session("iso-1"), any_session("iso-2")
    await first.add_items(items("Session 1 message"))
    await second.add_items(items("Session 2 message 1", "Session 2 message 2"))
    popped: Any = await second.pop_item()
    assert popped["content"] == "Session 2 message 2"
    assert contents(await first.get_items()) == ["Session 1 message"]
    await second.clear_session()
    assert contents(await first.get_items()) == ["Session 1 message"]


async def test_two_objects_share_one_session(any_session: SessionFactory) -> None:
    """Two session objects with one id see one history."""
    writer, reader = any_session("shared"), any_session("shared")
    await writer.add_items(items("from writer"))
    assert contents(await reader.get_items()) == ["from writer"]


async def test_unicode_and_special_characters_round_trip(any_session: SessionFactory) -> None:
    """Non-ASCII text, quotes, JSON and query syntax come back unchanged."""
    session = any_session("unicode")
    texts = ["こんにちは 😊👍", "Привет", "'; DROP TABLE x; --", '{"$gt": 1}', "a\x01\nb\\"]
    await session.add_items(items(*texts))
    assert contents(await session.get_items()) == texts


async def test_concurrent_pops_claim_distinct_items(any_session: SessionFactory) -> None:
    """Concurrent pops return every item exactly once."""
    session = any_session("pop-race")
    await session.add_items(items("first", "second", "third"))
    popped = await asyncio.gather(*(session.pop_item() for _ in range(3)))
    assert sorted(contents([p for p in popped if p is not None])) == ["first", "second", "third"]
    assert await session.get_items() == []
