"""The contract kit: large bodies, kept whole apart from the log, read as previews.

An event whose content is over the store's default ``offload_threshold`` (256 KiB as JSON)
reads back as its preview from every read, and whole from ``read_body``; ``read_body_page``
pages its text. A store that keeps every body in its log sets ``offloads_large_bodies =
False`` on its contract class, and these tests check that it reads them back whole instead.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

import pytest
from pydantic import JsonValue

from ..._offload import (
    DEFAULT_OFFLOAD_THRESHOLD,
    DEFAULT_PREVIEW_CHARS,
    OFFLOADED,
    OffloadedBody,
)
from ...compaction_protocols import CompactionRecord
from ...events import EventType, SessionEvent, utc_now
from ...exceptions import EventTooLarge, UsageError
from ...filters import EventFilter
from ...messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from ._support import ContractBase, boundary, event, new_id, user

__all__ = ["OffloadContract"]

BIG = DEFAULT_OFFLOAD_THRESHOLD + 100_000
"""Characters of a text well over the default threshold."""
HUGE = 50 * 1024 * 1024
"""Bytes of the largest tool output the contract stores: 50 MiB, over MongoDB's 16 MiB
document limit."""


def _output(size: int, seed: str = "out") -> str:
    """A text of ``size`` characters that no prefix of another seed's equals."""
    unit = f"{seed}:0123456789abcdef\n"
    return (unit * (size // len(unit) + 1))[:size]


def tool_round(session_id: str, data: str) -> list[SessionEvent]:
    """A question, a call of two tools, their results (the first ``data``), and the reply."""
    calls = (ToolCall(id="call-1", name="fetch"), ToolCall(id="call-2", name="echo"))
    results = (
        ToolResponse(id="call-1", name="fetch", data=data),
        ToolResponse(id="call-2", name="echo", data="ok"),
    )
    return [
        user(session_id, "fetch the page"),
        event(session_id, AssistantMessage(tool_calls=calls)),
        event(session_id, ToolResponseMessage(responses=results)),
        event(session_id, AssistantMessage(text="done")),
    ]


class OffloadContract(ContractBase):
    """Contract tests for large bodies: previews, ``read_body`` and ``read_body_page``."""

    offloads_large_bodies: ClassVar[bool] = True
    """Whether the store offloads events over its default threshold (set ``False`` for a store
    that keeps every body in its log)."""

    def _check_preview(self, read: SessionEvent, whole: SessionEvent) -> None:
        if not self.offloads_large_bodies:
            assert read == whole
            return
        assert (read.id, read.type, read.timestamp, read.session_id) == (
            whole.id,
            whole.type,
            whole.timestamp,
            whole.session_id,
        )
        assert read != whole
        marker = OffloadedBody.of(read)
        assert marker is not None
        assert marker.size > DEFAULT_OFFLOAD_THRESHOLD
        assert OffloadedBody.of(whole) is None

    async def test_a_large_tool_output_reads_as_a_preview_and_whole_from_read_body(self) -> None:
        """Every read returns the preview of a large tool result (its calls' ids kept, each text
        cut to the preview's length); ``read_body`` returns the event exactly as appended."""
        s = (await self.new_session()).id
        data = _output(BIG)
        events = tool_round(s, data)
        assert await self.repo.append_events(s, events)
        tool = events[2]
        for read in (
            await self.log(s),
            await self.repo.find_events(s, EventFilter.active()),
            await self._window(s),
        ):
            assert [e.id for e in read] == [e.id for e in events]
            assert read[0] == events[0]
            assert read[1] == events[1]
            assert read[3] == events[3]
            self._check_preview(read[2], tool)
        preview = (await self.log(s))[2]
        assert isinstance(preview.message, ToolResponseMessage)
        responses = preview.message.responses
        assert [r.id for r in responses] == ["call-1", "call-2"]
        if self.offloads_large_bodies:
            assert responses[0].data == data[:DEFAULT_PREVIEW_CHARS]
            assert responses[1].data == "ok"
            marker = OffloadedBody.of(preview)
            assert marker is not None
            assert marker.chars == (len(data), 2)
        assert await self.repo.read_body(s, tool.id) == tool
        assert await self.repo.read_body(s, events[0].id) == events[0]
        assert await self.repo.read_body(s, "no-such-event") is None
        assert await self.repo.read_body(new_id(), tool.id) is None

    async def _window(self, session_id: str) -> list[SessionEvent]:
        snapshot = await self.snapshot(session_id, EventFilter.last_n(10))
        return list(snapshot.events)

    async def test_pages_read_an_offloaded_text_whole(self) -> None:
        """Pages of an offloaded result, read in turn, make up its whole text; ``call_id``
        chooses the result, and a page past the end is empty."""
        s = (await self.new_session()).id
        data = _output(BIG)
        events = tool_round(s, data)
        assert await self.repo.append_events(s, events)
        tool_id = events[2].id
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await self.repo.read_body_page(s, tool_id, offset=offset, limit=150_000)
            assert page is not None
            assert (page.event_id, page.call_id, page.offset, page.total) == (
                tool_id,
                "call-1",
                offset,
                len(data),
            )
            pages.append(page.text)
            offset = page.next_offset
        assert "".join(pages) == data
        echo = await self.repo.read_body_page(s, tool_id, call_id="call-2")
        assert echo is not None
        assert (echo.text, echo.total, echo.next_offset) == ("ok", 2, None)
        past = await self.repo.read_body_page(s, tool_id, offset=len(data) + 5)
        assert past is not None
        assert (past.text, past.next_offset) == ("", None)
        with pytest.raises(UsageError):
            await self.repo.read_body_page(s, tool_id, call_id="call-9")
        with pytest.raises(UsageError):
            await self.repo.read_body_page(s, tool_id, offset=-1)
        assert await self.repo.read_body_page(s, "no-such-event") is None

    async def test_large_messages_and_payloads_of_every_kind_read_back_whole(self) -> None:
        """A long user message with image parts, a long reply and a large custom payload each
        read as a preview and back whole; a payload's page is its JSON."""
        s = (await self.new_session()).id
        image: dict[str, JsonValue] = {
            "type": "input_image",
            "image_url": "data:image/png;base64," + "iVBO" * 80_000,
        }
        look: dict[str, JsonValue] = {"type": "input_text", "text": "look"}
        asked = event(s, UserMessage(text=_output(BIG, "q"), parts=(look, image)))
        replied = event(s, AssistantMessage(text=_output(BIG, "a")))
        audit = SessionEvent(
            session_id=s, type=EventType.of("ACME.AUDIT"), payload={"blob": _output(BIG, "p")}
        )
        small = user(s, "small")
        assert await self.repo.append_events(s, [asked, replied, audit, small])
        read = await self.log(s)
        for got, whole in zip(read[:3], (asked, replied, audit), strict=True):
            self._check_preview(got, whole)
            assert await self.repo.read_body(s, whole.id) == whole
        assert read[3] == small
        assert OFFLOADED not in read[3].metadata
        if self.offloads_large_bodies:
            cut = read[0].message
            assert isinstance(cut, UserMessage)
            assert isinstance(asked.message, UserMessage)
            assert (cut.text, cut.parts) == (asked.message.text[:DEFAULT_PREVIEW_CHARS], None)
            assert read[2].payload == {}
        page = await self.repo.read_body_page(s, audit.id, limit=20)
        assert page is not None
        assert page.text == '{"blob": "p:01234567'

    async def test_bodies_under_the_threshold_and_compaction_records_stay_in_the_log(self) -> None:
        """An event just under the threshold is never a preview, nor is a ``COMPACTION``
        event, however long the view it names."""
        s = (await self.new_session()).id
        under = user(s, "u" * (DEFAULT_OFFLOAD_THRESHOLD - 1_000))  # one JSON byte per char
        assert await self.repo.append_events(s, [under])
        ids = tuple(f"gone-{i:06d}-{'x' * 40}" for i in range(8_000))
        record = CompactionRecord(covered=(), kept=(under.id,), view=(under.id, *ids))
        edge = SessionEvent(session_id=s, type=EventType.COMPACTION, payload=record.to_payload())
        assert await self.repo.append_events(s, [edge], 1)
        read = await self.log(s)
        assert read == [under, edge]
        assert await self.repo.find_events(s, EventFilter.active()) == [under]

    async def test_a_text_search_looks_at_the_preview_of_an_offloaded_message(self) -> None:
        """Keywords are matched in what the log holds: the preview's text."""
        s = (await self.new_session()).id
        text = "needle-early " + _output(BIG) + " needle-late"
        long = user(s, text)
        assert await self.repo.append_events(s, [long])
        early = await self.repo.find_events(s, EventFilter(keyword="needle-early"))
        late = await self.repo.find_events(s, EventFilter(keyword="needle-late"))
        assert [e.id for e in early] == [long.id]
        assert [e.id for e in late] == ([] if self.offloads_large_bodies else [long.id])

    async def test_an_offloaded_body_goes_with_its_session(self) -> None:
        """Deleting the session deletes its offloaded bodies."""
        s = (await self.new_session()).id
        events = tool_round(s, _output(BIG))
        assert await self.repo.append_events(s, events)
        await self.repo.delete(s)
        assert await self.repo.read_body(s, events[2].id) is None

    async def test_a_fifty_mib_output_stores_and_reads_back_byte_for_byte(self) -> None:
        """A 50 MiB tool output (text of one-, two-, three- and four-byte characters) reads back
        from ``read_body`` byte for byte, and its last page is its last characters. A store that
        keeps bodies in its log either does the same or refuses it with `EventTooLarge`."""
        s = (await self.new_session()).id
        unit = 'line 0123456789 é € 𝄞 {"json": [1, 2]}\n'
        count = HUGE // len(unit.encode()) + 1
        data = (unit * count).encode()[:HUGE].decode(errors="ignore")
        events = tool_round(s, data)
        if not self.offloads_large_bodies:
            try:
                await self.repo.append_events(s, events)
            except EventTooLarge:
                assert await self.log(s) == []
                return
        else:
            assert await self.repo.append_events(s, events)
        whole = await self.repo.read_body(s, events[2].id)
        assert whole is not None
        assert isinstance(whole.message, ToolResponseMessage)
        assert whole.message.responses[0].data.encode() == data.encode()
        assert whole == events[2]
        tail = await self.repo.read_body_page(s, events[2].id, offset=len(data) - 50, limit=100)
        assert tail is not None
        assert (tail.text, tail.next_offset) == (data[-50:], None)
        window = await self._window(s)
        assert [e.id for e in window] == [e.id for e in events]

    async def test_an_expired_session_takes_its_offloaded_bodies(self) -> None:
        """Deleting expired sessions deletes their offloaded bodies; a live session keeps its."""
        past = utc_now() - timedelta(hours=1)
        gone = (await self.new_session(expires_at=past)).id
        kept = (await self.new_session()).id
        doomed, living = tool_round(gone, _output(BIG)), tool_round(kept, _output(BIG))
        assert await self.repo.append_events(gone, doomed)
        assert await self.repo.append_events(kept, living)
        assert await self.repo.delete_expired_sessions(utc_now()) >= 1
        assert await self.repo.read_body(gone, doomed[2].id) is None
        assert await self.repo.read_body(kept, living[2].id) == living[2]

    async def test_a_compacted_offloaded_body_stays_readable_until_its_session_goes(self) -> None:
        """A compaction that archives an offloaded tool result leaves its preview in the log,
        archived, and its whole body readable; deleting the session deletes it."""
        s = (await self.new_session()).id
        events = tool_round(s, _output(BIG))
        assert await self.repo.append_events(s, events)
        assert await self.repo.append_events(s, [boundary(s, [events[3]], events[:3])], 1)
        assert [e.id for e in await self.repo.find_events(s, EventFilter.active())] == [
            events[3].id
        ]
        logged = await self.log(s)
        assert logged[2].id == events[2].id
        assert logged[2].archived
        self._check_preview(logged[2].model_copy(update={"archived": False}), events[2])
        whole = await self.repo.read_body(s, events[2].id)
        assert whole is not None
        assert whole.message == events[2].message
        await self.repo.delete(s)
        assert await self.repo.read_body(s, events[2].id) is None
