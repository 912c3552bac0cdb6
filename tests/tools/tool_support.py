"""Helpers of the tool tests: what a request sent of tool calls and results, in either API."""

from __future__ import annotations

from typing import Any

from asyncsession import DefaultSessionService
from asyncsession.testing import RecordedRequest


def tool_items(request: RecordedRequest) -> list[tuple[str, str, str]]:
    """The tool calls and results a request sent, in order, in either API's shape:
    ``("call", call id, name)`` and ``("result", call id, output)``."""
    items: list[tuple[str, str, str]] = []
    if request.path.endswith("/responses"):
        for item in request.input:
            if item.get("type") == "function_call":
                items.append(("call", item["call_id"], item["name"]))
            elif item.get("type") == "function_call_output":
                items.append(("result", item["call_id"], item["output"]))
        return items
    for message in request.messages:
        for call in message.get("tool_calls") or ():
            items.append(("call", call["id"], call["function"]["name"]))
        if message["role"] == "tool":
            items.append(("result", message["tool_call_id"], message["content"]))
    return items


async def results_of(service: DefaultSessionService, session_id: str) -> dict[str, list[str]]:
    """Every stored result's data by call id, in log order (a pairing kept once has one)."""
    found: dict[str, list[str]] = {}
    for event in await service.get_events(session_id):
        message: Any = event.message
        for response in getattr(message, "responses", ()):
            found.setdefault(response.id, []).append(response.data)
    return found
