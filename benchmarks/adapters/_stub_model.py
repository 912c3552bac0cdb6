"""The in-process stub model: a real ``openai.AsyncOpenAI`` client whose transport answers.

The advisor turn and the peer turns that call a model send the same request through the same
SDK: ``chat.completions.create`` builds the request and parses the answer as it would against
OpenAI, and the transport (``httpx.MockTransport``) answers with the reply registered for the
question's tag. No server, no network.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai

from .._workload import parse_tag

__all__ = ["STUB_MODEL", "StubModel"]

STUB_MODEL = "bench-stub-model"


class StubModel:
    """The replies by question tag, the client that reaches them, and what it was sent."""

    def __init__(self) -> None:
        self.replies: dict[str, str] = {}
        self.longest_prompt = 0
        self.last_prompt: list[Any] = []
        self.client = openai.AsyncOpenAI(
            api_key="bench",
            base_url="http://stub.invalid/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(self._answer)),
            max_retries=0,
        )

    def _answer(self, request: httpx.Request) -> httpx.Response:
        """A Chat Completions answer: the reply registered for the last user message's tag."""
        body = json.loads(request.content)
        self.longest_prompt = max(self.longest_prompt, len(body["messages"]))
        self.last_prompt = body["messages"]
        question = body["messages"][-1]["content"]
        tag = parse_tag(question if isinstance(question, str) else question[0]["text"])
        reply = self.replies.get(tag or "")  # the same tag has the same reply in every session
        if reply is None:
            return httpx.Response(400, json={"error": {"message": f"no reply for {tag!r}"}})
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{tag}",
                "object": "chat.completion",
                "created": 0,
                "model": STUB_MODEL,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": reply},
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    async def call_cpu_ms(self, calls: int = 200) -> float | None:
        """The client CPU of one model call alone: ``chat.completions.create`` with the last
        prompt the stub saw, sent ``calls`` times one after another (nothing else running),
        stub included."""
        if not self.last_prompt:
            return None
        messages = self.last_prompt
        create = self.client.chat.completions.create
        await create(model=STUB_MODEL, messages=messages)  # warm
        start = time.process_time()
        for _ in range(calls):
            await create(model=STUB_MODEL, messages=messages)
        return (time.process_time() - start) * 1000 / calls

    async def aclose(self) -> None:
        """Close the client."""
        await self.client.close()
