"""The one boundary where OpenAI SDK errors become ours, chained to the original.

A chat call's errors become `ChatError` and its subclasses (`map_openai_errors`); a
summarizer's become `CompactionError` (`map_summarizer_errors`), which a summarizing strategy
reports without touching the log.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import cast

import openai

from ..exceptions import ChatError, ChatTimeout, CompactionError, StreamInterrupted

__all__ = ["map_openai_errors", "map_summarizer_errors"]


@contextmanager
def map_openai_errors(*, streaming: bool = False) -> Generator[None]:
    """Translate SDK errors raised inside the block into the most specific error of ours.

    Args:
        streaming: the block reads a stream that has started: a broken connection is then a
            ``StreamInterrupted``, not a failed request.
    """
    try:
        yield
    except openai.APITimeoutError as exc:
        raise ChatTimeout("The model did not answer in time (request timed out)") from exc
    except openai.APIStatusError as exc:
        raise ChatError(
            f"The model call failed with HTTP {exc.status_code}: {_detail(exc)}",
            status_code=exc.status_code,
        ) from exc
    except openai.APIConnectionError as exc:
        if streaming:
            raise StreamInterrupted(
                f"The model's stream broke off before it finished: {exc.message}"
            ) from exc
        raise ChatError(f"Could not reach the model: {exc.message}") from exc
    except openai.OpenAIError as exc:
        raise ChatError(f"The model call failed: {exc}") from exc


@contextmanager
def map_summarizer_errors(model: str) -> Generator[None]:
    """Translate SDK errors raised inside the block into `CompactionError`, naming ``model``
    and the HTTP status when there is one."""
    try:
        yield
    except openai.OpenAIError as exc:
        status = getattr(exc, "status_code", None)
        where = f" (HTTP {status})" if isinstance(status, int) else ""
        raise CompactionError(
            f"the summarizer's call to model {model!r} failed{where}: {exc}"
        ) from exc


def _detail(exc: openai.APIStatusError) -> str:
    """The API's own error message when the body has one, else the SDK's summary."""
    body = exc.body
    if isinstance(body, dict):
        message = cast(dict[str, object], body).get("message")
        if isinstance(message, str) and message:
            return message
    return exc.message
