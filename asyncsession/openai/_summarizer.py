"""``OpenAISummarizer``: the summaries of recursive summarization, written by a Chat Completions
model.

Give it a plain client: the summary call must not itself go through session advisors (it has
no session, and it must not be stored as a turn).
"""

from __future__ import annotations

from typing import Any, Final, cast

from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from .._checks import require_open_client
from ..exceptions import UsageError
from ._client import map_summarizer_errors

__all__ = ["OpenAISummarizer"]

# Options that would break the one-shot, text-only call the summarizer makes.
_REFUSED_OPTIONS: Final = frozenset({"model", "messages", "stream", "n"})


class OpenAISummarizer:
    """A [`Summarizer`][asyncsession.compaction.Summarizer] that calls an OpenAI Chat
    Completions model.

    Args:
        client: the ``openai.AsyncOpenAI`` client (or any OpenAI-compatible server's). It is
            borrowed: the summarizer never closes it.
        model: the model name, for example ``"gpt-4.1-mini"``.
        **options: further arguments of ``client.chat.completions.create``, such as
            ``temperature`` or ``max_completion_tokens``.

    Raises:
        UsageError: an option the summarizer sets itself (``model``, ``messages``) or one that
            would change the reply's shape (``stream``, ``n``).
    """

    def __init__(self, client: AsyncOpenAI, model: str, **options: Any) -> None:
        require_open_client(client, "client")
        if not isinstance(model, str) or not model.strip():
            raise UsageError("model must be a non-empty string")
        refused = sorted(_REFUSED_OPTIONS.intersection(options))
        if refused:
            raise UsageError(f"OpenAISummarizer sets or refuses these options itself: {refused}")
        self.client = client
        self.model = model
        self.options: dict[str, Any] = dict(options)

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        """The model's reply text; empty when it sent no content.

        Raises:
            CompactionError: the API call failed (the SDK's error is the ``__cause__``).
        """
        with map_summarizer_errors(self.model):
            completion = cast(
                "ChatCompletion",
                await self.client.chat.completions.create(
                    model=self.model,
                    messages=[
                        {"role": "system", "content": system_prompt},
                        {"role": "user", "content": prompt},
                    ],
                    **self.options,
                ),
            )
        if not completion.choices:
            return ""
        content = completion.choices[0].message.content
        return content if isinstance(content, str) else ""

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self.model!r})"
