"""Large tool outputs at the model: the store keeps the whole output (offloaded over its
threshold), the model is sent its beginning with a note, and reads the rest with the
``read_tool_output`` tool the turn then offers; a later turn sends the stored preview with the
same note. On both stores and both APIs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from chat_support import CLIENTS, MODEL
from tool_support import tool_items

from asyncsession import DefaultSessionService, InMemorySessionRepository, MongoSessionRepository
from asyncsession._offload import OFFLOADED
from asyncsession.testing import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)
from asyncsession.tools import tool

OUTPUT = "".join(f"{n:05d}" for n in range(4_000))  # 20,000 characters, each position known
NOTE = re.compile(
    r"\[output cut: (\d+) of (\d+) characters shown; read the rest with read_tool_output\("
    r'event_id="([^"]+)", call_id="([^"]+)", offset=(\d+)\)\]'
)


@tool
def dump() -> str:
    """Dump everything."""
    return OUTPUT


@pytest.fixture(params=["memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def small_repository(
    request: pytest.FixtureRequest,
) -> InMemorySessionRepository | MongoSessionRepository:
    """Each store in turn, offloading bodies over 4 KiB and keeping 200-character previews."""
    if request.param == "memory":
        return InMemorySessionRepository(offload_threshold=4096, preview_chars=200)
    return MongoSessionRepository(
        request.getfixturevalue("mongo_db"), offload_threshold=4096, preview_chars=200
    )


@pytest.fixture
async def small_store(
    small_repository: InMemorySessionRepository | MongoSessionRepository,
) -> DefaultSessionService:
    if isinstance(small_repository, MongoSessionRepository):
        await small_repository.ensure_indexes()
    return DefaultSessionService(small_repository)


def _last_result(request: RecordedRequest) -> str:
    return [item for item in tool_items(request) if item[0] == "result"][-1][2]


def _reader(request: RecordedRequest) -> ScriptedReply:
    """The model: dump, then read on from the note the cut output ends with, then answer."""
    calls = [item for item in tool_items(request) if item[0] == "call"]
    if not calls:
        return ScriptedReply.tool_calls([ScriptedToolCall("dump", {}, id="d1")])
    note = NOTE.search(_last_result(request))
    if note is not None and len(calls) == 1:
        arguments = {"event_id": note[3], "call_id": note[4], "offset": int(note[5])}
        return ScriptedReply.tool_calls([ScriptedToolCall("read_tool_output", arguments, id="r1")])
    return ScriptedReply.text("read it")


@pytest.mark.parametrize("client_type", CLIENTS)
async def test_the_model_gets_the_beginning_and_pages_the_rest(
    client_type: Any, small_store: DefaultSessionService
) -> None:
    """A 20,000-character output, ``max_tool_output=1000``: the model gets 1,000 characters
    and a note, pages on from it (pages of 1,000), and the store holds the whole output; the
    next turn sends the stored preview with the note."""
    async with ScriptedOpenAIServer(responder=_reader) as server:
        client = client_type(
            server.client(), model=MODEL, sessions=small_store, tools=[dump], max_tool_output=1000
        )
        reply = await client.call("dump it", session_id="s")

        assert reply.text == "read it"
        first = _last_result(server.requests[1])
        note = NOTE.search(first)
        assert note is not None
        assert first.startswith(OUTPUT[:1000] + "\n[output cut")
        assert (note[1], note[2], note[4], note[5]) == ("1000", "20000", "d1", "1000")
        assert "read_tool_output" in str(server.requests[1].tools)
        page = _last_result(server.requests[2])
        assert page == OUTPUT[1000:2000] + "\n[characters 1000-2000 of 20000; next: offset=2000]"

        stored = await small_store.get_events("s")
        result = next(e for e in stored if e.id == note[3])
        assert result.metadata[OFFLOADED] is not None  # the store kept a preview in the log
        repository = small_store.repository
        whole = await repository.read_body("s", note[3])
        assert whole is not None
        assert whole.message is not None
        assert whole.message.responses[0].data == OUTPUT  # type: ignore[union-attr]

        server.enqueue(ScriptedReply.text("again"))
        await client.call("and now?", session_id="s")
        later = [i for i in tool_items(server.requests[3]) if i[1] == "d1" and i[0] == "result"]
        previewed = NOTE.search(later[0][2])
        assert later[0][2].startswith(OUTPUT[:200] + "\n[output cut")
        assert previewed is not None
        assert (previewed[1], previewed[2]) == ("200", "20000")
        assert "read_tool_output" in str(server.requests[3].tools)
        server.assert_done()
