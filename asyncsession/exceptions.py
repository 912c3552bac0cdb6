"""Every error asyncsession raises.

```text
AsyncSessionError                       base of everything we raise; never raised directly
├── UsageError (ValueError)             a developer mistake: bad argument, bad configuration
│   ├── RequestIdReused                 a request id sent again with another message
│   └── UnknownToolCall                 a tool result or decision names no waiting call  .call_ids
├── AccessDenied (PermissionError)      a user touching a session that belongs to another user
├── TurnInProgress                      another turn of the session still runs   .retry_after
├── SessionNotFound (LookupError)       .session_id
├── SessionExists                       .session_id
├── EventIdConflict                     .event_id, .session_id, .owner_session_id
├── EventTooLarge (ValueError)          .event_id, .size, .limit
├── StorageError                        the database failed; chained to the driver's error
│   └── StorageUnavailable              the server could not be reached in time; retry later
├── CompactionError                     a strategy failed; the log was left untouched
├── EncryptionError                     encryption at rest failed (key service, vault, master key)
│   └── ContentErased (LookupError)     the user's data key is gone for good   .user_id .key_id
├── ChatError                           the model call or its stream failed; .status_code
│   ├── ChatTimeout
│   └── ToolLoopLimitExceeded           the tool loop ran more rounds than allowed
├── ToolError                           a tool failed; sent back to the model, not raised to you
└── MemoryStoreError                    a memory store refused or failed   .reason .path
```

Driver and SDK errors are translated at one boundary each and chained with ``raise ... from``:
PyMongo's in `asyncsession._pymongo_errors`, the OpenAI SDK's in `asyncsession.openai`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from ._display import shown_path

__all__ = [
    "AsyncSessionError",
    "UsageError",
    "RequestIdReused",
    "UnknownToolCall",
    "AccessDenied",
    "TurnInProgress",
    "SessionNotFound",
    "SessionExists",
    "EventIdConflict",
    "EventTooLarge",
    "StorageError",
    "StorageUnavailable",
    "CompactionError",
    "EncryptionError",
    "ContentErased",
    "ChatError",
    "ChatTimeout",
    "ToolLoopLimitExceeded",
    "ToolError",
    "MemoryStoreError",
]


class AsyncSessionError(Exception):
    """Base class of every error raised by asyncsession."""


class UsageError(AsyncSessionError, ValueError):
    """A developer mistake: a bad argument or configuration, not a runtime failure."""


class RequestIdReused(UsageError):
    """A request id came again with another message than the one it was first sent with.

    A request id names one request, so its retries must send the same message (answer it like
    HTTP 422, as idempotency keys are answered elsewhere).
    """

    def __init__(self, session_id: str, request_id: str) -> None:
        super().__init__(
            f"Request id {request_id!r} of session {session_id!r} was sent before with "
            "another message; a retry must send the same message, a new request a new id"
        )
        self.session_id = session_id
        self.request_id = request_id


class UnknownToolCall(UsageError):
    """Tool results, or approval decisions, name tool calls the session is not waiting for.

    A result is stored only after the tool call it answers (so the log never holds a result
    without its call, which the model API would refuse), and ``resume`` decides only calls a
    paused turn is waiting for. Answer it like HTTP 422.
    """

    def __init__(self, session_id: str, call_ids: Iterable[str], what: str) -> None:
        self.session_id = session_id
        self.call_ids: tuple[str, ...] = tuple(call_ids)
        """The ids named that the session is not waiting for."""
        super().__init__(
            f"Session {session_id!r} has no {what} {', '.join(map(repr, self.call_ids))}"
        )


class AccessDenied(AsyncSessionError, PermissionError):
    """A user tried to read or write a session that belongs to another user."""

    def __init__(self, session_id: str, user_id: str) -> None:
        super().__init__(f"Session {session_id!r} does not belong to user {user_id!r}.")
        self.session_id = session_id
        self.user_id = user_id


class TurnInProgress(AsyncSessionError):
    """Another turn of the session (another request, or another attempt of this one) still
    holds it, and did not finish in time.

    Answer it like HTTP 409 with ``Retry-After: retry_after``: a retry then runs, or gets the
    stored reply of its request, or takes the turn over once the holder's lease has expired.
    """

    def __init__(self, session_id: str, request_id: str | None, retry_after: float) -> None:
        request = "" if request_id is None else f" (request {request_id!r})"
        super().__init__(
            f"Session {session_id!r} is still busy with another turn{request}; retry in "
            f"{retry_after:.0f} s"
        )
        self.session_id = session_id
        self.request_id = request_id
        """The request id of the call that waited, if it had one."""
        self.retry_after = retry_after
        """Seconds until the holder's lease expires, at most (at least 1)."""


class SessionNotFound(AsyncSessionError, LookupError):
    """No session has the given id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id!r}")
        self.session_id = session_id


class SessionExists(AsyncSessionError):
    """A session with the given id already exists."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session already exists: {session_id!r}")
        self.session_id = session_id


class EventIdConflict(AsyncSessionError):
    """An event id is already used by another session; event ids are unique across sessions."""

    def __init__(self, event_id: str, session_id: str, owner_session_id: str) -> None:
        super().__init__(
            f"Event id {event_id!r} is already used by session {owner_session_id!r}, "
            f"not {session_id!r}; event ids must be unique across sessions"
        )
        self.event_id = event_id
        self.session_id = session_id
        self.owner_session_id = owner_session_id


class EventTooLarge(AsyncSessionError, ValueError):
    """An event is larger than the store can hold in one document."""

    def __init__(self, event_id: str, size: int, limit: int) -> None:
        super().__init__(
            f"Event {event_id!r} is {size} bytes encoded, over the store's limit of {limit} bytes"
        )
        self.event_id = event_id
        self.size = size
        self.limit = limit


class StorageError(AsyncSessionError):
    """The database failed; the driver's exception is the ``__cause__``."""


class StorageUnavailable(StorageError):
    """The database could not be reached in time: no server answered, or the connection broke.

    Raised within the client's timeouts (see `MongoSessionRepository.from_uri`) by any store
    operation, so a web app can answer 503 and let the client retry. The write may or may not
    have been applied; the store's writes are idempotent, so retrying it is safe.
    """


class CompactionError(AsyncSessionError):
    """A compaction strategy failed; the session log was left untouched."""


class EncryptionError(AsyncSessionError):
    """Encrypting or decrypting a user's content failed; the driver's error is the ``__cause__``.

    A key service that cannot be reached, a key vault that refused a write, or content that the
    configured master key cannot open (a wrong or missing master key) all end here. Content
    whose key was deleted raises the subclass `ContentErased` instead.
    """


class ContentErased(EncryptionError, LookupError):
    """The content was encrypted with a data key that no longer exists: it can never be read.

    Deleting a user's key is how the stores' ``erase_user`` erases them. The same error is what
    a key vault namespace that names the wrong collection looks like, so check the setting
    before concluding that the user was erased.
    """

    def __init__(self, user_id: str, key_id: str) -> None:
        super().__init__(
            f"The content of user {user_id!r} was encrypted with data key {key_id} which is no "
            "longer in the key vault: the user was erased, so it can never be read"
        )
        self.user_id = user_id
        """The user whose content was read."""
        self.key_id = key_id
        """The id of the missing data key (a UUID, as text)."""


class ChatError(AsyncSessionError):
    """The model call, or its stream, failed; the SDK's exception is the ``__cause__``.

    A stream that breaks off before it finished raises it too (``status_code`` ``None``).
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ChatTimeout(ChatError):
    """The model did not answer in time."""


class ToolLoopLimitExceeded(ChatError):
    """The model kept requesting tools for more rounds than the loop allows."""

    def __init__(self, max_rounds: int) -> None:
        super().__init__(
            f"The model still requested tool calls after {max_rounds} rounds; "
            "raise max_rounds or check the tools' results"
        )
        self.max_rounds = max_rounds


class ToolError(AsyncSessionError):
    """A tool failed. The tool loop sends the message back to the model as the tool's result."""


MemoryErrorReason = Literal[
    "invalid_path",
    "not_found",
    "exists",
    "is_a_directory",
    "not_a_directory",
    "conflict",
    "too_large",
    "backend",
]
"""Why a memory store refused or failed an operation: `MemoryStoreError.reason`."""

_MEMORY_MESSAGES: dict[str, str] = {
    "not_found": "Path does not exist: {}",
    "exists": "Path already exists: {}",
    "is_a_directory": "Path is a directory, not a file: {}",
    "not_a_directory": "Parent path is a file, not a directory: {}",
    "conflict": "File was changed concurrently: {}",
}


class MemoryStoreError(AsyncSessionError):
    """A memory store refused or failed an operation; `reason` says why.

    - ``"invalid_path"``: the path is unsafe or invalid (absolute, escaping the scope, too long,
      malformed) or names the root where it cannot.
    - ``"not_found"``: nothing is at the path; ``"exists"``: something already is.
    - ``"is_a_directory"``: a file operation named a directory; ``"not_a_directory"``: a
      component of the path that must be a directory is a file (`path` names it).
    - ``"conflict"``: the file changed (or vanished, or appeared) since it was read: read it
      again and retry.
    - ``"too_large"``: a file or the whole scope would be over its limit (the message gives the
      sizes in bytes).
    - ``"backend"``: the filesystem or the database failed; the cause is chained.

    The memory tools send the message to the model as text instead of raising it.
    """

    def __init__(self, reason: MemoryErrorReason, path: str, message: str | None = None) -> None:
        shown = _MEMORY_MESSAGES.get(reason, "{}").format(shown_path(path))
        super().__init__(message if message is not None else shown)
        self.reason: MemoryErrorReason = reason
        """Why the operation failed."""
        self.path = path
        """The path concerned, normalised where it could be."""
