"""The FastAPI example's approvals: a turn whose model calls ``cancel_order`` stops with the
pending call (a JSON field, or an ``approval_required`` event on the stream), and
``POST /sessions/{id}/approvals`` approves or rejects it, continuing the turn."""

from __future__ import annotations

import httpx
from chat_support import stored
from example_support import ALICE, assert_problem, read_sse
from test_fastapi_app import http  # the example under uvicorn on the scripted model

from asyncsession import DefaultSessionService
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

__all__ = ["http"]

CANCEL = ScriptedReply.tool_calls(
    [ScriptedToolCall("cancel_order", {"order_id": "A-1"}, id="call-1")]
)


async def test_an_approved_call_runs_and_the_turn_goes_on(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The reply names the waiting call; approving it runs the tool and answers with the
    rest of the turn."""
    server.enqueue(CANCEL, ScriptedReply.text("Your order is cancelled."))

    paused = await http.post(
        "/sessions/s1/messages", json={"message": "cancel order A-1"}, headers=ALICE
    )
    waiting = paused.json()["pending_approvals"]
    approved = await http.post(
        "/sessions/s1/approvals", json={"approve": ["call-1"]}, headers=ALICE
    )

    assert waiting == [{"id": "call-1", "name": "cancel_order", "arguments": '{"order_id":"A-1"}'}]
    assert paused.json()["text"] == ""
    assert approved.status_code == 200, approved.text
    assert approved.json()["text"] == "Your order is cancelled."
    assert approved.json()["pending_approvals"] == []
    assert await stored(service, "s1") == [
        "U:cancel order A-1",
        "A[cancel_order]",
        "T[cancel_order->Order A-1 is cancelled.]",
        "A:Your order is cancelled.",
    ]


async def test_a_streamed_turn_ends_with_the_pending_call_and_a_rejection_reaches_the_model(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The stream ends with ``approval_required`` naming the call, then ``done``; a rejection
    is the tool's result, with its reason, and the tool never runs."""
    server.enqueue(CANCEL, ScriptedReply.text("I did not cancel it."))

    _, sent = await read_sse(http, "/sessions/s1/stream", "cancel order A-1")
    rejected = await http.post(
        "/sessions/s1/approvals", json={"reject": {"call-1": "it shipped already"}}, headers=ALICE
    )

    assert [e.event for e in sent[-2:]] == ["approval_required", "done"]
    assert [call["id"] for call in sent[-2].json()["calls"]] == ["call-1"]
    assert rejected.json()["text"] == "I did not cancel it."
    reason = "Error: not run: the user rejected this tool call: it shipped already"
    assert server.requests[1].messages[-1]["content"] == reason
    assert (await stored(service, "s1"))[2] == f"T[cancel_order->{reason}]"


async def test_deciding_a_call_that_is_not_waiting_is_a_422(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """A decision on a call the session is not waiting for is refused as a problem
    document, before anything runs."""
    server.enqueue(CANCEL)
    await http.post("/sessions/s1/messages", json={"message": "cancel order A-1"}, headers=ALICE)

    response = await http.post(
        "/sessions/s1/approvals", json={"approve": ["call-1", "call-9"]}, headers=ALICE
    )

    body = assert_problem(response, 422, "UnknownToolCall")
    assert "call-9" in body["detail"]
    assert len(server.requests) == 1
