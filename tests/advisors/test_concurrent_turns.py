"""Simultaneous requests to one session: each question stays with its answer, in the log and in
every prompt."""

from __future__ import annotations

import asyncio

import pytest
from chat_support import PATHS, ask, label, sent

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    UserMessage,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import RecordedRequest, ScriptedOpenAIServer, ScriptedReply


def _echo(request: RecordedRequest) -> ScriptedReply:
    """The model answers the last user message it was sent."""
    asked = next(m["content"] for m in reversed(request.messages) if m["role"] == "user")
    return ScriptedReply.text(f"re: {asked}")


def _paired(labels: list[str]) -> bool:
    """Whether the labels are question/answer pairs, each answer right after its question."""
    questions, answers = labels[0::2], labels[1::2]
    return len(questions) == len(answers) and all(
        q.startswith("U:") and a == f"A:re: {q[2:]}"
        for q, a in zip(questions, answers, strict=True)
    )


@pytest.mark.parametrize("streaming", PATHS)
async def test_four_simultaneous_requests_keep_each_question_with_its_answer(
    streaming: bool, store: DefaultSessionService
) -> None:
    """Four requests to one session at once: the log holds four question/answer pairs, and
    every prompt (the fifth request's included) holds whole pairs only, each answer after the
    question it answers."""
    await store.create(CreateSessionRequest(id="s1", user_id="alice"))
    await store.append_message("s1", UserMessage(text="q0"))
    await store.append_message("s1", AssistantMessage(text="re: q0"))
    server = ScriptedOpenAIServer(responder=_echo)
    async with server:
        chat = ChatClient(server.client(), model="gpt-test", sessions=store)
        replies = await asyncio.gather(
            *(ask(chat, f"q{n}", streaming=streaming, session_id="s1") for n in range(1, 5))
        )
        assert [r.text for r in replies] == [f"re: q{n}" for n in range(1, 5)]
        await ask(chat, "q5", streaming=streaming, session_id="s1")

    log = [label(e.message) for e in await store.get_events("s1") if e.message is not None]
    assert _paired(log), log
    assert sorted(log[2:10:2]) == [f"U:q{n}" for n in range(1, 5)]
    for request in server.requests:
        assert _paired(sent(request.messages)[:-1]), sent(request.messages)
    assert sent(server.requests[-1].messages)[:-1] == log[:-2]
    server.assert_done()
