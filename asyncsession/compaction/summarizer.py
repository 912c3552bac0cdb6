"""Summarizers: the model call behind recursive summarization.

A [`Summarizer`][asyncsession.compaction.summarizer.Summarizer] takes a system prompt and a user
prompt and returns the summary text. Any object with that one async method fits, so any model (or a
test double) can write summaries.
[`OpenAISummarizer`][asyncsession.openai.OpenAISummarizer] (in `asyncsession.openai`, beside the
other OpenAI code) calls a Chat Completions model; importing it from here still works for a
release, with a `DeprecationWarning`.
"""

from __future__ import annotations

from typing import Final, Protocol, runtime_checkable

__all__ = ["Summarizer"]

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


@runtime_checkable
class Summarizer(Protocol):
    """Writes a summary with a model."""

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        """The model's answer to ``prompt`` under ``system_prompt``: the summary text.

        Raise (any exception) when the model cannot be reached; the strategy then leaves the log
        untouched and reports the failure.
        """
        ...
