"""The README's main job: a conversation on the embedded store, then its whole log.

Run it with ``scripts/demo`` (or ``python -m asyncsession._demo``).
"""

from __future__ import annotations

import asyncio

from . import (
    AssistantMessage,
    CompactionPlan,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    Insert,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from .events import COMPACTION_SOURCE, SYNTHETIC, EventType


def _line(event: SessionEvent) -> str:
    flags = "".join(
        [" [archived]" if event.archived else "", " [synthetic]" if event.is_synthetic else ""]
    )
    if event.message is None:
        return f"  {event.type}: {event.payload}{flags}"
    if isinstance(event.message, AssistantMessage) and event.message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in event.message.tool_calls)
        return f"  {event.type}: -> {calls}{flags}"
    if isinstance(event.message, ToolResponseMessage):
        results = ", ".join(f"{r.name} = {r.data}" for r in event.message.responses)
        return f"  {event.type}: <- {results}{flags}"
    return f"  {event.type}: {event.text}{flags}"


async def main() -> None:
    """Run the demo."""
    service = DefaultSessionService(InMemorySessionRepository())
    session = await service.create(CreateSessionRequest(user_id="alice", metadata={"demo": True}))
    print(f"session {session.id} for {session.user_id}")

    await service.append_message(session.id, UserMessage(text="What's the weather in Paris?"))
    await service.append_message(
        session.id,
        AssistantMessage(
            tool_calls=[ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}')]
        ),
    )
    await service.append_message(
        session.id,
        ToolResponseMessage(responses=[ToolResponse(id="call_1", name="weather", data="18°C")]),
    )
    await service.append_message(session.id, AssistantMessage(text="It is 18°C in Paris."))
    await service.append_message(session.id, UserMessage(text="And tomorrow?"))
    await service.append_message(session.id, AssistantMessage(text="Similar, a little cooler."))
    await service.append_event(
        SessionEvent(session_id=session.id, type=EventType.of("DEMO.AUDIT"), payload={"ok": 1})
    )

    window = await service.get_events(session.id, EventFilter.last_n(3))
    print("\nlast_n(3), extended to the start of its turn:")
    for event in window:
        print(_line(event))

    version = await service.get_event_version(session.id)
    active = await service.get_events(session.id, EventFilter.active())
    first_turn = active[:4]
    summary = [
        SessionEvent(
            session_id=session.id,
            message=message,
            metadata={SYNTHETIC: True, COMPACTION_SOURCE: "demo"},
        )
        for message in (
            UserMessage(text="Summarize the conversation we had so far."),
            AssistantMessage(text="Alice asked about the weather in Paris: 18°C."),
        )
    ]
    plan = CompactionPlan(
        archive_ids=frozenset(e.id for e in first_turn),
        inserts=(Insert.before(active[4].id, summary),),
    )
    applied = await service.repository.apply_compaction(session.id, plan, version)
    print(f"\ncompaction at version {version}: applied={applied}")

    print("\nthe whole log:")
    for event in await service.get_events(session.id):
        print(_line(event))
    print("\nthe active view (what the model sees):")
    for event in await service.get_events(session.id, EventFilter.active()):
        print(_line(event))
    print(f"\nversion {await service.get_event_version(session.id)}")


if __name__ == "__main__":
    asyncio.run(main())
