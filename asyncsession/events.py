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
from typing import Any, ClassVar, Final, cast

from pydantic import (
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
from .messages import AssistantMessage, Message, MessageType

__all__ = [
    "EventType",
    "ForkPoint",
    "Session",
    "SessionAttributes",
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

_EVENT_TYPE_NAME = re.compile(r"[A-Z][A-Z0-9_.]{0,63}")


def utc_now() -> datetime:
    """The current time, UTC-aware, to the millisecond."""
    return _to_millis(datetime.now(UTC))


def _to_millis(value: datetime) -> datetime:
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def _check_id(value: str, what: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise ValueError(f"{what} must be at most {MAX_ID_LENGTH} characters, not {len(value)}")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters")
    return value


class EventType:
    """The type of an event: one of the four message types, or a name of your own.

    ``EventType.of("ACME.AUDIT")`` makes a custom type. A name is upper-case letters, digits,
    ``_`` and ``.``, starts with a letter and is at most 64 characters long; prefix it with
    something of your own so it never collides with a type we add later. Equal names are equal
    types.
    """

    __slots__ = ("name",)

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

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not _EVENT_TYPE_NAME.fullmatch(name):
            raise UsageError(
                f"invalid event type name {name!r}: use upper-case letters, digits, '_' and '.', "
                "start with a letter, at most 64 characters (e.g. 'ACME.AUDIT')"
            )
        object.__setattr__(self, "name", name)

    @classmethod
    def of(cls, name: str) -> EventType:
        """The event type with this name.

        Raises:
            ValueError: the name breaks the naming rule.
        """
        return cls(name)

    @classmethod
    def for_message(cls, message_type: MessageType) -> EventType:
        """The event type of a message of this type."""
        return cls(message_type.value.upper())

    @property
    def message_type(self) -> MessageType | None:
        """The message type of a message event type; ``None`` for a custom type."""
        try:
            return MessageType(self.name.lower())
        except ValueError:
            return None

    @property
    def is_message(self) -> bool:
        """Whether events of this type carry a chat message."""
        return self.message_type is not None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EventType is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("EventType", self.name))

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
        def validate(value: Any) -> EventType:
            if isinstance(value, EventType):
                return value
            if isinstance(value, MessageType):
                return cls.for_message(value)
            return cls(value)

        return core_schema.no_info_plain_validator_function(
            validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                lambda value: value.name, when_used="always"
            ),
        )


_INFERRED: Final = object.__new__(EventType)
object.__setattr__(_INFERRED, "name", "")  # SessionEvent.type default: taken from the message

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


class Session(_Frozen):
    """A conversation's identity and lifetime. The events live in the repository."""

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    """The session id: any non-empty string of at most 255 characters; a random UUID by default."""
    user_id: str
    """The owner: the user (or agent) whose conversation this is."""
    created_at: AwareDatetime = Field(default_factory=utc_now)
    """When the session was created."""
    expires_at: AwareDatetime | None = None
    """When the session may be swept; ``None`` means never. Defaults to 60 days after creation."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Your key/value data: model, tags, anything JSON can hold."""
    forked_from: ForkPoint | None = None
    """The session and point this one was forked from (set by a store's ``fork``, never by a
    ``save``: a save keeps what is stored); ``None`` for a session that is no fork."""

    @model_validator(mode="before")
    @classmethod
    def _default_expiry(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cast("dict[str, Any]", data)
        if "expires_at" in fields:
            return fields
        created = fields.get("created_at")
        base = created if isinstance(created, datetime) else None
        return {**fields, "expires_at": (base or utc_now()) + DEFAULT_TIME_TO_LIVE}

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return _check_id(value, "session id")

    @field_validator("user_id")
    @classmethod
    def _valid_user(cls, value: str) -> str:
        return _check_id(value, "user id")

    @field_validator("created_at", "expires_at")
    @classmethod
    def _millis(cls, value: datetime | None) -> datetime | None:
        return None if value is None else _to_millis(value)

    def is_expired(self, at: datetime) -> bool:
        """Whether the session expired strictly before ``at``."""
        return self.expires_at is not None and self.expires_at < at


class SessionAttributes:
    """The well-known metadata keys of a session, which every store indexes for
    ``find_by_metadata`` (an application declares its own indexed keys when it builds a store).

    The principal is the session's ``user_id``: looking sessions up by
    [`PRINCIPAL_NAME`][asyncsession.events.SessionAttributes.PRINCIPAL_NAME] finds the user's
    sessions, and a session whose metadata names another principal than its ``user_id`` is
    refused when it is saved. The agent keys label the agent a session runs, for listings.
    """

    PRINCIPAL_NAME: Final = "principal_name"
    """Who the session belongs to: always its ``user_id``."""
    AGENT_NAME: Final = "agent_name"
    """The name of the agent the session runs."""
    AGENT_VERSION: Final = "agent_version"
    """The version of the agent definition the session was created with."""
    AGENT_MODEL: Final = "agent_model"
    """The model the agent is configured with."""
    WELL_KNOWN: Final = frozenset({PRINCIPAL_NAME, AGENT_NAME, AGENT_VERSION, AGENT_MODEL})
    """The keys every store indexes."""


class SessionEvent(_Frozen):
    """One entry of a session's log: a chat message, or a payload of a custom event type.

    The type is taken from the message when not given. Events of a custom type carry a JSON
    ``payload`` and no message; they are never sent to the model and compaction never covers
    them.
    """

    id: str = Field(default_factory=lambda: str(uuid.uuid4()))
    """Unique across all sessions; appending an id the session has is an idempotent replay."""
    session_id: str
    """The session this event belongs to."""
    timestamp: AwareDatetime = Field(default_factory=utc_now)
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

    @model_validator(mode="before")
    @classmethod
    def _infer_type(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        fields = cast("dict[str, Any]", data)
        if fields.get("type") not in (None, _INFERRED):
            return fields
        message: object = fields.get("message")
        message_type: object = getattr(message, "message_type", None)
        if isinstance(message, BaseModel) and isinstance(message_type, MessageType):
            return {**fields, "type": EventType.for_message(message_type)}
        if isinstance(message, dict):
            kind: object = cast("dict[str, Any]", message).get("kind")
            if isinstance(kind, str):
                return {**fields, "type": EventType(kind.upper())}
        return fields

    @model_validator(mode="after")
    def _consistent(self) -> SessionEvent:
        if self.type is _INFERRED:
            raise ValueError("an event needs a message, or a type and a payload")
        expected = self.type.message_type
        if expected is None:
            if self.message is not None:
                raise ValueError(
                    f"an event of custom type {self.type} carries a payload, not a message"
                )
            if self.payload is None:
                object.__setattr__(self, "payload", {})
        else:
            if self.message is None:
                raise ValueError(f"an event of type {self.type} needs a message")
            if self.message.message_type is not expected:
                raise ValueError(
                    f"event type {self.type} does not match a "
                    f"{self.message.message_type.value} message"
                )
            if self.payload is not None:
                raise ValueError("a message event carries no payload; put data in metadata")
        return self

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return _check_id(value, "event id")

    @field_validator("session_id")
    @classmethod
    def _valid_session(cls, value: str) -> str:
        return _check_id(value, "session id")

    @field_validator("timestamp")
    @classmethod
    def _millis(cls, value: datetime) -> datetime:
        return _to_millis(value)

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
        return self.type == EventType.USER

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
    user_id: str
    """The owner."""
    time_to_live: timedelta | None = None
    """How long the session lives; the service's default when ``None``. As in the reference, a
    zero or negative one is allowed: the session is created already expired (``expires_at`` is
    ``created_at + time_to_live``) and the next `delete_expired_sessions` removes it."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Key/value data stored on the session."""

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str | None) -> str | None:
        return None if value is None or not value.strip() else _check_id(value, "session id")

    @field_validator("user_id")
    @classmethod
    def _valid_user(cls, value: str) -> str:
        return _check_id(value, "user id")
