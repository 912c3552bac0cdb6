"""``export`` of a session holding an offloaded tool output writes the output whole."""

from __future__ import annotations

import uuid
from pathlib import Path

from cli_support import cli

from asyncsession import MongoSessionRepository, Session, SessionEvent
from asyncsession._offload import OffloadedBody
from asyncsession.filters import EventFilter
from asyncsession.messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage


async def test_export_writes_offloaded_bodies_whole(mongo_uri: str, tmp_path: Path) -> None:
    """The log holds a preview of the 3 MiB output;
    the export holds it byte for byte, and every other event as the log has it."""
    db = f"cli_{uuid.uuid4().hex[:12]}"
    output = "".join(f"row {n}: é€𝄞\n" for n in range(200_000))
    async with MongoSessionRepository.from_uri(mongo_uri, db) as repo:
        await repo.ensure_indexes()
        await repo.save(Session(id="big", user_id="alice"))
        call = ToolCall(id="call-1", name="dump", arguments="{}")
        events = [
            SessionEvent(session_id="big", message=AssistantMessage(tool_calls=(call,))),
            SessionEvent(
                session_id="big",
                message=ToolResponseMessage(
                    responses=(ToolResponse(id="call-1", name="dump", data=output),)
                ),
            ),
            SessionEvent(session_id="big", message=AssistantMessage(text="dumped")),
        ]
        assert await repo.append_events("big", events)
        logged = await repo.find_events("big", EventFilter.all())
        assert OffloadedBody.of(logged[1]) is not None
        target = tmp_path / "big.jsonl"
        code, _, err = await cli("--uri", mongo_uri, "--db", db, "export", "big", "-o", str(target))
        assert code == 0, err
        lines = target.read_text(encoding="utf-8").splitlines()
        assert [SessionEvent.model_validate_json(line) for line in lines] == events
        code, out, _ = await cli("--uri", mongo_uri, "--db", db, "export", "big")
        assert code == 0
        assert out.splitlines() == lines
        await repo._database.client.drop_database(db)  # pyright: ignore[reportPrivateUsage]
