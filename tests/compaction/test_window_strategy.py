"""``WindowCompactionStrategy``: Spring AI 2.1's window, by turns or by events, on both stores.

The first test is the 2.1 compaction page's example: compact when there are over 20 turns,
keeping the newest ten.
"""

from __future__ import annotations

import pytest
from compaction_support import conversation

from asyncsession import (
    DefaultSessionService,
    EventFilter,
    EventType,
    UsageError,
)
from asyncsession.compaction import (
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
    WindowCompactionStrategy,
)


async def test_the_newest_turns_stay_and_the_system_message_is_pinned(
    service: DefaultSessionService,
) -> None:
    session_id = await conversation(service, 25)
    result = await service.compact(
        session_id, TurnCountTrigger(20), WindowCompactionStrategy(last_turns=10)
    )
    assert result.applied
    assert [e.text for e in result.archived_events] == [
        text for n in range(15) for text in (f"question {n}", f"answer {n}")
    ]
    active = [e.text for e in await service.get_events(session_id, EventFilter.active())]
    assert active == [
        "You are a support agent.",
        *(text for n in range(15, 25) for text in (f"question {n}", f"answer {n}")),
    ]
    log = await service.get_events(session_id)
    assert len([e for e in log if e.is_message]) == 51  # the log keeps every event
    assert [e.type for e in log if not e.is_message] == [EventType.COMPACTION]  # and its record
    again = await service.compact(
        session_id, TurnCountTrigger(20), WindowCompactionStrategy(last_turns=10)
    )
    assert not again.applied  # ten turns: the trigger stays quiet


async def test_a_window_by_events_keeps_whole_turns(service: DefaultSessionService) -> None:
    session_id = await conversation(service, 6)
    result = await service.compact(
        session_id, TurnCountTrigger(1), WindowCompactionStrategy(last_events=5)
    )
    assert result.applied
    active = [e.text for e in await service.get_events(session_id, EventFilter.active())]
    assert active == [
        "You are a support agent.",
        "question 4",
        "answer 4",
        "question 5",
        "answer 5",
    ]


def test_it_is_one_of_the_two_windows() -> None:
    assert repr(WindowCompactionStrategy()) == "WindowCompactionStrategy(last_turns=10)"
    assert WindowCompactionStrategy(last_events=7).last_events == 7
    assert WindowCompactionStrategy(last_events=7).last_turns is None
    with pytest.raises(UsageError):
        WindowCompactionStrategy(last_turns=2, last_events=2)
    with pytest.raises(UsageError):
        WindowCompactionStrategy(last_turns=0)
    assert repr(WindowCompactionStrategy(last_turns=3)) == repr(
        TurnWindowCompactionStrategy(3)
    ).replace("TurnWindowCompactionStrategy(max_turns", "WindowCompactionStrategy(last_turns")
    assert repr(WindowCompactionStrategy(last_events=4)) == repr(
        SlidingWindowCompactionStrategy(4)
    ).replace("SlidingWindowCompactionStrategy(max_events", "WindowCompactionStrategy(last_events")
