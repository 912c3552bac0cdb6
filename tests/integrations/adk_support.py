"""Shared helpers of the Google ADK tests: a model that needs no network."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types

__all__ = ["CountingModel", "ScriptedModel"]


class CountingModel(BaseLlm):
    """An ADK model that answers with the number of contents it was sent: ``"sent 3"``."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse]:
        text = f"sent {len(llm_request.contents)}"
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


class ScriptedModel(BaseLlm):
    """An ADK model that answers from a script and records the contents it was sent."""

    replies: list[types.Content]
    sent: list[list[types.Content]]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse]:
        self.sent.append(list(llm_request.contents))
        yield LlmResponse(content=self.replies.pop(0))
