"""Summarizers: the model call behind recursive summarization.

A [`Summarizer`][asyncsession.compaction.summarizer.Summarizer] takes a system prompt and a user
prompt and returns the summary text. Any object with that one async method fits, so any model (or a
test double) can write summaries.
[`OpenAISummarizer`][asyncsession.compaction.summarizer.OpenAISummarizer] calls a Chat Completions
model through a borrowed ``openai.AsyncOpenAI`` client.

Give the summarizer a plain client: the summary call must not itself go through session advisors
(it has no session, and it must not be stored as a turn).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol, cast, runtime_checkable

from ..exceptions import CompactionError, UsageError

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

__all__ = ["DEFAULT_SUMMARIZER_SYSTEM_PROMPT", "OpenAISummarizer", "Summarizer"]

DEFAULT_SUMMARIZER_SYSTEM_PROMPT: Final = """\
You condense conversations between a user and an AI assistant. Your summary will stand in for \
the messages it covers: the assistant will see only the summary and the messages that follow \
it, so it must carry everything needed to continue the conversation without a gap.

Keep:
- the facts, names, numbers and decisions that were established;
- what the user wants, prefers or asked to avoid;
- what the assistant did or found, and the outcome of tool calls that still matters;
- open questions, unfinished tasks and anything either side promised to do next.

Write in the third person ("The user asked ...", "The assistant found ..."), as a short narrative \
in plain prose, without greetings or commentary about the summary itself. Leave out small talk \
and details that no longer matter. If a prior summary is given, fold its content into the new \
summary in your own words instead of repeating it verbatim. Text marked as upcoming context is \
only there so the summary leads into it; do not summarize it."""
"""The default system prompt of recursive summarization."""

# Options that would break the one-shot, text-only call the summarizer makes.
_REFUSED_OPTIONS: Final = frozenset({"model", "messages", "stream", "n"})


@runtime_checkable
class Summarizer(Protocol):
    """Writes a summary with a model."""

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        """The model's answer to ``prompt`` under ``system_prompt``: the summary text.

        Raise (any exception) when the model cannot be reached; the strategy then leaves the log
        untouched and reports the failure.
        """
        ...


class OpenAISummarizer:
    """A [`Summarizer`][asyncsession.compaction.summarizer.Summarizer] that calls an OpenAI Chat
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
        import openai

        try:
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
        except openai.OpenAIError as exc:
            status = getattr(exc, "status_code", None)
            where = f" (HTTP {status})" if isinstance(status, int) else ""
            raise CompactionError(
                f"the summarizer's call to model {self.model!r} failed{where}: {exc}"
            ) from exc
        if not completion.choices:
            return ""
        content = completion.choices[0].message.content
        return content if isinstance(content, str) else ""

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self.model!r})"
