"""Every error asyncsession raises.

```text
AsyncSessionError                       base of everything we raise; never raised directly
├── UsageError (ValueError)             a developer mistake: bad argument, bad configuration
│   ├── InvalidFilter                   an EventFilter with contradictory or bad criteria
│   ├── InvalidText                     a string that is not valid Unicode text   .where
│   ├── MissingSessionId                a chat call with session memory but no session id
│   ├── RequestIdReused                 a request id sent again with another message
│   └── UnknownToolCall                 a tool result or decision names no waiting call  .call_ids
├── AccessDenied (PermissionError)      a user touching a session that belongs to another user
├── TurnInProgress                      another turn of the session still runs   .retry_after
├── RepositoryError                     the session store refused or failed an operation
│   ├── SessionNotFound (LookupError)   .session_id
│   ├── SessionExists                   .session_id
│   ├── EventIdConflict                 .event_id, .session_id, .owner_session_id
│   ├── EventTooLarge                   .event_id, .size, .limit
│   └── StorageError                    the database failed; chained to the driver's error
│       └── StorageUnavailable          the server could not be reached in time; retry later
├── CompactionError                     a strategy failed; the log was left untouched
├── EncryptionError                     encryption at rest failed (key service, vault, master key)
│   └── ContentErased (LookupError)     the user's data key is gone for good   .user_id .key_id
├── ChatError                           the model call failed; .status_code when known
│   ├── ChatTimeout
│   ├── StreamInterrupted               the model's stream broke off before it finished
│   └── ToolLoopLimitExceeded           the tool loop ran more rounds than allowed
├── ToolError                           a tool failed; sent back to the model, not raised to you
└── MemoryStoreError                    a long-term memory store refused or failed an operation
    ├── MemoryPathError (ValueError)    an unsafe or invalid path   .path
    ├── MemoryNotFound (LookupError)    no file or directory there   .path
    ├── MemoryExists                    a file or directory is already there   .path
    ├── MemoryIsADirectory              a file operation named a directory   .path
    ├── MemoryNotADirectory             a parent component is a file   .path
    ├── MemoryWriteConflict             the file changed since it was read   .path
    ├── MemoryTooLarge                  a file or the scope would be over its limit   .size .limit
    └── MemoryBackendError              the filesystem or the database failed; chained
```

Driver and SDK errors are translated at one boundary each and chained with ``raise ... from``:
PyMongo's in `asyncsession._pymongo_errors` (to `StorageError` for sessions, to
`MemoryBackendError` for memory), the OpenAI SDK's in `asyncsession.openai`. Every error here is
also exported from the top-level package.
"""

from __future__ import annotations

from collections.abc import Iterable

from ._display import shown_path

__all__ = [
    "AsyncSessionError",
    "UsageError",
    "InvalidFilter",
    "InvalidText",
    "MissingSessionId",
    "RequestIdReused",
    "UnknownToolCall",
    "AccessDenied",
    "TurnInProgress",
    "RepositoryError",
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
    "StreamInterrupted",
    "ToolLoopLimitExceeded",
    "ToolError",
    "MemoryStoreError",
    "MemoryPathError",
    "MemoryNotFound",
    "MemoryExists",
    "MemoryIsADirectory",
    "MemoryNotADirectory",
    "MemoryWriteConflict",
    "MemoryTooLarge",
    "MemoryBackendError",
]


class AsyncSessionError(Exception):
    """Base class of every error raised by asyncsession."""


class UsageError(AsyncSessionError, ValueError):
    """A developer mistake: a bad argument or configuration, not a runtime failure."""


class InvalidFilter(UsageError):
    """An ``EventFilter`` whose criteria are invalid or contradict each other."""


class InvalidText(UsageError):
    """A string that cannot be stored as text: it does not encode as UTF-8.

    In Python that means a lone surrogate (``"\\ud83d"``), as a broken decode or a
    ``surrogateescape`` round trip leaves behind. Every store refuses such a string in an event
    (text, payload, metadata; keys and values, at any depth) or in a session before anything
    is written, rather than rewrite it.
    """

    def __init__(self, where: str, value: str) -> None:
        position = next(i for i, c in enumerate(value) if 0xD800 <= ord(c) <= 0xDFFF)
        super().__init__(
            f"{where} holds a string that is not valid UTF-8 text: a lone surrogate "
            f"{value[position]!r} at index {position}; decode your input strictly or replace it"
        )
        self.where = where
        """Where the string is: the event or session, then the field and the path to it."""
        self.index = position
        """The position of the first lone surrogate in the string."""


class MissingSessionId(UsageError):
    """A chat call on a client with session memory names no session.

    There is deliberately no shared fallback session: it would merge the history of different
    users.
    """


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


class RepositoryError(AsyncSessionError):
    """The session store refused or failed an operation."""


class SessionNotFound(RepositoryError, LookupError):
    """No session has the given id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id!r}")
        self.session_id = session_id


class SessionExists(RepositoryError):
    """A session with the given id already exists."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session already exists: {session_id!r}")
        self.session_id = session_id


class EventIdConflict(RepositoryError):
    """An event id is already used by another session; event ids are unique across sessions."""

    def __init__(self, event_id: str, session_id: str, owner_session_id: str) -> None:
        super().__init__(
            f"Event id {event_id!r} is already used by session {owner_session_id!r}, "
            f"not {session_id!r}; event ids must be unique across sessions"
        )
        self.event_id = event_id
        self.session_id = session_id
        self.owner_session_id = owner_session_id


class EventTooLarge(RepositoryError, ValueError):
    """An event is larger than the store can hold in one document."""

    def __init__(self, event_id: str, size: int, limit: int) -> None:
        super().__init__(
            f"Event {event_id!r} is {size} bytes encoded, over the store's limit of {limit} bytes"
        )
        self.event_id = event_id
        self.size = size
        self.limit = limit


class StorageError(RepositoryError):
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
    """The model call failed; the SDK's exception is the ``__cause__``."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ChatTimeout(ChatError):
    """The model did not answer in time."""


class StreamInterrupted(ChatError):
    """The model's stream broke off before it finished."""


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


class MemoryStoreError(AsyncSessionError):
    """Base class of every memory store error; never raised directly."""


class MemoryPathError(MemoryStoreError, ValueError):
    """A path is unsafe or invalid: absolute, escaping the scope, too long, or malformed."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        """The path as the caller gave it."""


class MemoryNotFound(MemoryStoreError, LookupError):
    """Nothing (no file, no directory) exists at the path."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path does not exist: {shown_path(path)}")
        self.path = path
        """The normalised path that was looked up."""


class MemoryExists(MemoryStoreError):
    """A file or directory already exists at the path."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path already exists: {shown_path(path)}")
        self.path = path
        """The normalised path that is taken."""


class MemoryIsADirectory(MemoryStoreError):
    """A file operation named a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path is a directory, not a file: {shown_path(path)}")
        self.path = path
        """The normalised path of the directory."""


class MemoryNotADirectory(MemoryStoreError):
    """A component of the path that must be a directory is a file."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Parent path is a file, not a directory: {shown_path(path)}")
        self.path = path
        """The normalised path of the file that stands where a directory is needed."""


class MemoryWriteConflict(MemoryStoreError):
    """The file changed (or vanished, or appeared) since the caller read it."""

    def __init__(self, path: str) -> None:
        super().__init__(f"File was changed concurrently: {shown_path(path)}")
        self.path = path
        """The normalised path of the contested file."""


class MemoryTooLarge(MemoryStoreError):
    """A write would make a file, or the whole scope, larger than its configured limit."""

    def __init__(self, path: str, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.path = path
        """The normalised path being written or read."""
        self.size = size
        """The size the operation would reach, in bytes."""
        self.limit = limit
        """The configured limit, in bytes."""


class MemoryBackendError(MemoryStoreError):
    """The filesystem or the database failed; the cause is chained as ``__cause__``."""
