"""OpenTelemetry spans when ``opentelemetry-api`` is installed, and nothing otherwise.

The one module that imports OpenTelemetry; spans go to the global tracer provider, and without
the package every helper is a no-op. A span is current only for one ``await``
(``Span.activate``), never across a ``yield`` of a stream. `TurnStats` are the counters of the
current turn, in a context variable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from ._version import __version__

try:
    from opentelemetry import context as _context
    from opentelemetry import trace as _trace
except ImportError:  # pragma: no cover - exercised by a subprocess test without the package
    _context = None  # type: ignore[assignment]  # the package is optional: None means absent
    _trace = None  # type: ignore[assignment]  # the package is optional: None means absent

__all__ = [
    "Span",
    "TurnStats",
    "current_turn",
    "span",
    "start_span",
    "tool_span",
    "turn_stats",
]

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
Kind = Literal["internal", "client"]


@dataclass(slots=True)
class TurnStats:
    """What one chat turn cost, counted while it is current."""

    db_commands: int = 0
    store_operations: int = 0
    model_calls: int = 0


_TURN: ContextVar[TurnStats | None] = ContextVar("asyncsession_turn", default=None)


def current_turn() -> TurnStats | None:
    """The counters of the turn running in this context, if a `TracingAdvisor` started one."""
    return _TURN.get()


@contextlib.contextmanager
def turn_stats(stats: TurnStats) -> Generator[None, None, None]:
    """Make ``stats`` the current turn's counters inside the block."""
    token = _TURN.set(stats)
    try:
        yield
    finally:
        _TURN.reset(token)


class Span:
    """One span, or nothing when OpenTelemetry is missing; ended exactly once."""

    __slots__ = ("_ended", "_span")

    def __init__(self, span: Any) -> None:
        self._span = span
        self._ended = False

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set an attribute; ``None`` leaves it unset."""
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)

    def set_many(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Set several attributes; ``None`` values are left unset."""
        for key, value in attributes.items():
            self.set(key, value)

    def fail(self, exc: BaseException) -> None:
        """Mark the span failed by ``exc`` (``error.type`` and an error status)."""
        if self._span is None or _trace is None:
            return
        self._span.set_attribute("error.type", type(exc).__qualname__)
        self._span.record_exception(exc)
        self._span.set_status(_trace.Status(_trace.StatusCode.ERROR, str(exc)))

    def end(self) -> None:
        """End the span (again is a no-op)."""
        if self._span is not None and not self._ended:
            self._ended = True
            self._span.end()

    @contextlib.contextmanager
    def activate(self) -> Generator[None, None, None]:
        """Make the span the current one inside the block (for one ``await``, not a ``yield``)."""
        if self._span is None or _trace is None or _context is None:
            yield
            return
        token = _context.attach(_trace.set_span_in_context(self._span))
        try:
            yield
        finally:
            _context.detach(token)


def start_span(
    name: str, *, kind: Kind = "internal", attributes: Mapping[str, AttributeValue | None] = {}
) -> Span:
    """Start a span under the current one; the caller ends it."""
    if _trace is None:
        return Span(None)
    tracer = _trace.get_tracer("asyncsession", __version__)
    span_kind = _trace.SpanKind.CLIENT if kind == "client" else _trace.SpanKind.INTERNAL
    started = Span(tracer.start_span(name, kind=span_kind))
    started.set_many(attributes)
    return started


@contextlib.contextmanager
def span(
    name: str, *, kind: Kind = "internal", attributes: Mapping[str, AttributeValue | None] = {}
) -> Generator[Span, None, None]:
    """A current span around the block; an exception marks it failed and propagates."""
    started = start_span(name, kind=kind, attributes=attributes)
    try:
        with started.activate():
            yield started
    except BaseException as exc:
        started.fail(exc)
        raise
    finally:
        started.end()


def tool_span(name: str, call_id: str) -> contextlib.AbstractContextManager[Span]:
    """The span of one tool call (GenAI ``execute_tool``)."""
    return span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id or None,
            "gen_ai.tool.type": "function",
        },
    )
