"""Sessions and the events of their log.

A [`Session`][asyncsession.events.Session] is metadata only: identity, owner, lifetime. Its
conversation is an append-only log of [`SessionEvent`][asyncsession.events.SessionEvent] values kept
by a repository. An event wraps either a chat message (types ``USER``, ``ASSISTANT``, ``TOOL``,
``SYSTEM``) or, for an event type of your own made with
[`EventType.of`][asyncsession.events.EventType.of], a JSON payload that is never sent to the model.

Events are never edited. A compaction or a rewind appends a *boundary* that names the active
view, and ``archived`` is derived from the newest one on read; deleting the session is the only
way events leave the log (a fork reads its parent's first events as its own, without copies).

Timestamps are UTC-aware and kept to the millisecond, the precision BSON dates have, so every
store returns the timestamp it was given. Naive datetimes are rejected.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta
from operator import attrgetter
from typing import Annotated, Any, ClassVar, Final

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    JsonValue,
    field_validator,
    model_validator,
)
from pydantic_core import core_schema

from .exceptions import UsageError
from .messages import MESSAGE_TYPES, AssistantMessage, Message, MessageType

__all__ = [
    "EventType",
    "ForkPoint",
    "Session",
    "SessionEvent",
    "CreateSessionRequest",
    "utc_now",
]

SYNTHETIC: Final = "synthetic"
"""Metadata key: ``True`` on events that compaction wrote (the summary turn)."""
COMPACTION_SOURCE: Final = "compactionSource"
"""Metadata key: which compaction strategy wrote a synthetic event."""
COMPACTION_ID: Final = "compactionId"
"""Metadata key: on a synthetic event, the id of the ``COMPACTION`` event of the compaction that
wrote it."""
DEFAULT_TIME_TO_LIVE: Final = timedelta(days=60)
"""How long a session lives when nobody says otherwise."""
MAX_ID_LENGTH: Final = 255
"""The longest session or event id, in characters."""
PRINCIPAL_NAME: Final = "principal_name"
AGENT_NAME: Final = "agent_name"
AGENT_VERSION: Final = "agent_version"
AGENT_MODEL: Final = "agent_model"
WELL_KNOWN_KEYS: Final = frozenset({PRINCIPAL_NAME, AGENT_NAME, AGENT_VERSION, AGENT_MODEL})
"""The metadata keys every store indexes for ``find_by_metadata`` (see ``Session.metadata``)."""

_EVENT_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_.]{0,63}")


def utc_now() -> datetime:
    """The current time, UTC-aware, to the millisecond."""
    return _to_millis(datetime.now(UTC))


def _to_millis(value: datetime) -> datetime:
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _new_id() -> str:
    return str(uuid.uuid4())


def _check_id(value: str) -> str:
    if not value.strip() or len(value) > MAX_ID_LENGTH or "\x00" in value:
        raise ValueError(
            f"an id must be a non-empty string of at most {MAX_ID_LENGTH} characters without "
            f"NUL, not {value[:40]!r}" + ("..." if len(value) > 40 else "")
        )
    return value


_Id = Annotated[str, AfterValidator(_check_id)]
"""A session, user or event id: non-blank, at most 255 characters, no NUL."""
_Time = Annotated[AwareDatetime, AfterValidator(_to_millis)]
"""An aware datetime, kept in UTC to the millisecond (what BSON dates hold)."""


class EventType:
    """The type of an event: one of the four message types, or a name of your own.

    ``EventType.of("ACME.AUDIT")`` makes a custom type. A name is upper-case letters, digits,
    ``_`` and ``.``, starts with a letter and is at most 64 characters long; prefix it with
    something of your own so it never collides with a type we add later. There is one type per
    name: equal names are the same type.
    """

    __slots__ = ("is_message", "message_type", "name")

    USER: ClassVar[EventType]
    ASSISTANT: ClassVar[EventType]
    TOOL: ClassVar[EventType]
    SYSTEM: ClassVar[EventType]
    COMPACTION: ClassVar[EventType]
    """The record every applied compaction appends to the log: a custom type (never sent to the
    model, never in the active view) whose payload reads back as a
    [`CompactionRecord`][asyncsession.compaction_protocols.CompactionRecord]."""
    REWIND: ClassVar[EventType]
    """The boundary a rewind appends: a custom type (never sent to the model, never in the
    active view) whose payload reads back as a
    [`RewindRecord`][asyncsession.rewinds.RewindRecord]: the active view is the one the log had
    at an earlier point, then whatever is appended after the rewind."""

    name: str
    message_type: MessageType | None
    """The message type of a message event type (``"user"``, ...); ``None`` for a custom type."""
    is_message: bool
    """Whether events of this type carry a chat message."""

    def __new__(cls, name: str) -> EventType:
        known = _KNOWN.get(name) if isinstance(name, str) else None
        if known is not None:
            return known
        if isinstance(name, EventType):
            return name
        if not isinstance(name, str) or not _EVENT_TYPE_NAME.fullmatch(name):
            raise UsageError(
                f"invalid event type name {name!r}: use upper-case letters, digits, '_' and '.', "
                "start with a letter, at most 64 characters (e.g. 'ACME.AUDIT')"
            )
        return _KNOWN.setdefault(name, _event_type(name))

    @classmethod
    def of(cls, name: str) -> EventType:
        """The event type with this name.

        Raises:
            ValueError: the name breaks the naming rule.
        """
        return cls(name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EventType is immutable")

    def __repr__(self) -> str:
        return f"EventType({self.name!r})"

    def __str__(self) -> str:
        return self.name

    def __reduce__(self) -> tuple[type[EventType], tuple[str]]:
        return (EventType, (self.name,))

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls,
            serialization=core_schema.plain_serializer_function_ser_schema(attrgetter("name")),
        )


def _event_type(name: str) -> EventType:
    made = object.__new__(EventType)
    kind = name.lower()
    message_type = next((t for t in MESSAGE_TYPES if t == kind), None)
    object.__setattr__(made, "name", name)
    object.__setattr__(made, "message_type", message_type)
    object.__setattr__(made, "is_message", message_type is not None)
    return made


_KNOWN: Final[dict[str, EventType]] = {}
_INFERRED: Final = _event_type("")  # SessionEvent.type default: taken from the message

EventType.USER = EventType("USER")
EventType.ASSISTANT = EventType("ASSISTANT")
EventType.TOOL = EventType("TOOL")
EventType.SYSTEM = EventType("SYSTEM")
EventType.COMPACTION = EventType("COMPACTION")
EventType.REWIND = EventType("REWIND")


class _Frozen(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class ForkPoint(_Frozen):
    """Where a fork's log begins: the log of ``session_id`` up to a point, which the fork reads
    as its own first events (they are not copied)."""

    session_id: str
    """The session forked (the parent)."""
    version: int = Field(ge=0)
    """The parent's commit the prefix ends in: the fork's version starts there, and its own
    commits continue the numbering."""
    event_id: str | None = None
    """The last event of the prefix when it ends inside commit ``version``; ``None`` when the
    prefix holds the whole commit (or is empty, at version 0)."""


def _default_expiry(fields: dict[str, Any]) -> datetime | None:
    created = fields.get("created_at")
    return None if created is None else created + DEFAULT_TIME_TO_LIVE


class Session(_Frozen):
    """A conversation's identity and lifetime. The events live in the repository."""

    id: _Id = Field(default_factory=_new_id)
    """The session id: any non-empty string of at most 255 characters; a random UUID by default."""
    user_id: _Id
    """The owner: the user (or agent) whose conversation this is."""
    created_at: _Time = Field(default_factory=utc_now)
    """When the session was created."""
    expires_at: _Time | None = Field(default_factory=_default_expiry)
    """When the session may be swept; ``None`` means never. Defaults to 60 days after creation."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Your key/value data: model, tags, anything JSON can hold.

    Every store indexes four keys for ``find_by_metadata`` (an application declares more when
    it builds a store): ``"agent_name"``, ``"agent_version"`` and ``"agent_model"`` label the
    agent a session runs; ``"principal_name"`` is its owner, always its ``user_id`` (looking it
    up finds the user's sessions, and a session that names another principal is refused when
    it is saved)."""
    forked_from: ForkPoint | None = None
    """The session and point this one was forked from (set by a store's ``fork``, never by a
    ``save``: a save keeps what is stored); ``None`` for a session that is no fork."""

    def is_expired(self, at: datetime) -> bool:
        """Whether the session expired strictly before ``at``."""
        return self.expires_at is not None and self.expires_at < at


_EVENT_TYPE_OF: Final = {kind: EventType(kind.upper()) for kind in MESSAGE_TYPES}


class SessionEvent(_Frozen):
    """One entry of a session's log: a chat message, or a payload of a custom event type.

    The type is taken from the message when not given. Events of a custom type carry a JSON
    ``payload`` and no message; they are never sent to the model and compaction never covers
    them.
    """

    id: _Id = Field(default_factory=_new_id)
    """Unique across all sessions; appending an id the session has is an idempotent replay."""
    session_id: _Id
    """The session this event belongs to."""
    timestamp: _Time = Field(default_factory=utc_now)
    """When it happened. Informational: the log's order is the order of appends."""
    type: EventType = _INFERRED
    """``USER``, ``ASSISTANT``, ``TOOL``, ``SYSTEM``, or a custom type; taken from the message
    when not given."""
    message: Message | None = None
    """The chat message, for message event types."""
    payload: dict[str, JsonValue] | None = None
    """The data of a custom event type."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Flags and data about the event, such as ``SYNTHETIC`` and ``COMPACTION_SOURCE``."""
    archived: bool = False
    """Set by compaction: out of the active window, but still in the log and searchable."""

    @model_validator(mode="after")
    def _consistent(self) -> SessionEvent:
        message = self.message
        if self.type is _INFERRED:
            if message is None:
                raise ValueError("an event needs a message, or a type and a payload")
            object.__setattr__(self, "type", _EVENT_TYPE_OF[message.message_type])
        expected = self.type.message_type
        if expected is None:
            if message is not None:
                raise ValueError(
                    f"an event of custom type {self.type} carries a payload, not a message"
                )
            if self.payload is None:
                object.__setattr__(self, "payload", {})
        elif message is None:
            raise ValueError(f"an event of type {self.type} needs a message")
        elif message.message_type != expected:
            raise ValueError(
                f"event type {self.type} does not match a {message.message_type} message"
            )
        elif self.payload is not None:
            raise ValueError("a message event carries no payload; put data in metadata")
        return self

    def __hash__(self) -> int:
        return hash((self.id, self.session_id))

    @property
    def is_message(self) -> bool:
        """Whether this event carries a chat message."""
        return self.message is not None

    @property
    def is_synthetic(self) -> bool:
        """Whether compaction wrote this event (a summary turn)."""
        return self.metadata.get(SYNTHETIC) is True

    @property
    def is_turn_start(self) -> bool:
        """Whether this event starts a turn: any user message, real or synthetic."""
        return self.type is EventType.USER

    @property
    def has_tool_calls(self) -> bool:
        """Whether this is an assistant message that asks for tool calls."""
        return isinstance(self.message, AssistantMessage) and bool(self.message.tool_calls)

    @property
    def message_type(self) -> MessageType | None:
        """The type of the message; ``None`` for a custom event."""
        return None if self.message is None else self.message.message_type

    @property
    def text(self) -> str | None:
        """The message text that searches look at; ``None`` for tool results and custom events."""
        return None if self.message is None else self.message.text

    def as_archived(self) -> SessionEvent:
        """This event flagged archived."""
        return self if self.archived else self.model_copy(update={"archived": True})


class CreateSessionRequest(_Frozen):
    """What [`SessionService.create`][asyncsession.service.SessionService.create] needs to create a
    session."""

    id: str | None = None
    """The session id; a random UUID when ``None``."""
    user_id: _Id
    """The owner."""
    time_to_live: timedelta | None = None
    """How long the session lives; the service's default when ``None``. As in the reference, a
    zero or negative one is allowed: the session is created already expired (``expires_at`` is
    ``created_at + time_to_live``) and the next `delete_expired_sessions` removes it."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Key/value data stored on the session."""

    @field_validator("id")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else _check_id(value)
