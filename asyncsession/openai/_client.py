"""``ChatClient``: Chat Completions calls and streams, a turn per call, advisors around it.

``BaseChatClient`` holds what every API's client shares (the configuration, the prompt, the
call and the stream); a subclass supplies the innermost step, the model request itself.
"""

from __future__ import annotations

import dataclasses
import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypedDict, cast, get_args

from openai import AsyncOpenAI, OpenAI
from pydantic import JsonValue

from .._checks import (
    require_message,
    require_object,
    require_open_client,
    require_service,
    require_text,
)
from .._compaction_pass import check_strategy, check_trigger
from .._turn import Compaction, Decisions, SessionMemory, StoreQuestion, Turn
from .._turn.chain import run_call, start_stream
from .._turn.edit import Edit, EditedStream
from ..advisors import (
    EVENT_FILTER_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    Advisor,
    CallContext,
    ChunkStream,
    EventIdGenerator,
    MessageFilter,
)
from ..chat import ChatOptions, ChatRequest, ChatResponse
from ..exceptions import MissingSessionId, UsageError
from ..filters import EventFilter
from ..messages import Message, UserMessage, messages_from_openai
from ..service import SessionService
from ..tools import Tool
from ._chat import ModelStream, complete
from ._stream import ChatStream

__all__ = ["DEFAULT_USER_ID", "BaseChatClient", "ChatClient", "ClientOptions", "MessagesLike"]

DEFAULT_USER_ID = "default-user"
"""The owner of sessions a call creates without a user id."""
DEFAULT_MAX_TOOL_OUTPUT: Final = 50_000
"""The characters of one tool output the model is sent before it is cut."""

MessagesLike = Sequence[Message] | Sequence[Mapping[str, Any]]
"""Messages of ours, or dicts of the client's API: Chat Completions message dicts for
``ChatClient``, Responses API input items for ``ResponsesClient``."""


class ClientOptions(TypedDict, total=False):
    """The keyword arguments every client takes (see `BaseChatClient`), for a subclass that
    passes them on."""

    sessions: SessionService | None
    compaction: Compaction | None
    store_question: StoreQuestion
    event_filter: EventFilter | None
    message_filter: MessageFilter | None
    event_ids: EventIdGenerator | None
    default_user_id: str
    tools: Iterable[Tool | Callable[..., Any]]
    max_tool_rounds: int
    advisors: Iterable[Advisor]
    model_advisors: Iterable[Advisor]
    default_messages: MessagesLike
    default_options: ChatOptions | None
    lease_ttl: float
    wait: float
    max_tool_output: int | None


def _to_messages(
    messages: MessagesLike,
    convert: Callable[[list[dict[str, Any]]], list[Message]] = messages_from_openai,
) -> list[Message]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise UsageError(
            f"messages must be a list of messages or OpenAI message dicts, not "
            f"{type(messages).__name__}; pass a single question as the first argument"
        )
    items = list(messages)
    if all(isinstance(item, Mapping) for item in items):
        return convert([dict(item) for item in items])  # pyright: ignore[reportArgumentType]
    if any(isinstance(item, Mapping) for item in items):
        raise UsageError("Pass either messages of ours or OpenAI message dicts, not a mix")
    for item in items:
        require_message(item, "messages[]")
    return items  # type: ignore[return-value]  # no mappings, so messages of ours


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else Tool.from_function(item)


def _tools(items: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    tools = [_as_tool(item) for item in items]
    names = [t.name for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"Tool names must be unique; repeated: {duplicates!r}")
    return {t.name: t for t in tools}


def _advisors(items: Iterable[Advisor], name: str) -> tuple[Advisor, ...]:
    given = cast(object, items)  # callers outside the type checker may pass anything
    if isinstance(given, (type, str, bytes)) or not isinstance(given, Iterable):
        shown = f"the class {given.__name__}" if isinstance(given, type) else repr(given)[:60]
        raise UsageError(f"{name} must be a list of advisor instances, not {shown}")
    advisors = tuple(cast(Iterable[Advisor], given))
    for advisor in advisors:
        require_object(advisor, f"{name}[]", "an advisor", methods=("call", "stream"))
    return advisors


def _rounds(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"max_tool_rounds must be an int of at least 1, not {value!r}")
    return value


def _text(value: object, name: str) -> str | None:
    """A call's string value from a keyword or a context key; ``None`` when absent or blank."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise UsageError(f"{name} must be a string, not {type(value).__name__}")
    return value


def _metadata(metadata: Mapping[Any, JsonValue]) -> dict[str, JsonValue]:
    return {str(key): value for key, value in metadata.items()}


def _compaction(compaction: object) -> Compaction:
    if isinstance(compaction, tuple):
        pair = cast(tuple[object, ...], compaction)
        if len(pair) != 2:
            raise UsageError("compaction must be a (trigger, strategy) pair or a compactor")
        check_trigger(cast(Any, pair[0]), "compaction's trigger")
        check_strategy(cast(Any, pair[1]), "compaction's strategy")
    else:
        require_object(
            compaction,
            "compaction",
            "a (trigger, strategy) pair or a compactor",
            methods=("submit",),
        )
    return cast(Compaction, compaction)


class BaseChatClient(ABC):
    """A borrowed ``openai.AsyncOpenAI``, a turn per call, advisors around it; subclasses send
    the model request.

    With ``sessions`` every call names a session (``session_id=``): the turn reads its history
    into the prompt, stores the question, the tool rounds and the reply, and compacts once the
    turn is complete (``compaction``). Turns of one session run one after another, across
    processes: a turn that finds another running waits up to ``wait`` seconds for it, then
    raises ``TurnInProgress``; a turn whose process died stops blocking within ``lease_ttl``.
    With a ``request_id`` a retried request gets the reply its first attempt stored, with one
    model call per request id however many attempts overlap.

    The client owns nothing: it never closes the ``AsyncOpenAI`` it was given, and a call
    holds no resources once it returned (or its stream's ``async with`` block was left).

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        sessions: the session service that keeps the turns; ``None``: no session memory.
        compaction: ``(trigger, strategy)`` to compact inline once a turn is complete, or a
            background compactor (``CompactionWorker``, or anything with ``trigger`` and
            ``submit(session_id)``).
        store_question: ``"first"`` stores the user's message before the model call (it
            survives a failed call); ``"with_reply"`` stores the whole turn in one commit once
            it is complete (a failed call stores nothing).
        event_filter: which stored events make the history (``EventFilter.all()``); always
            merged with ``EventFilter.active()``.
        message_filter: which messages are stored (``MessageFilter.skip_empty_messages()``).
        event_ids: chooses the ids of stored events (random by default; a call with a request
            id fixes its question's and reply's ids whatever this says).
        default_user_id: the owner of sessions created by calls without a user id.
        tools: tools offered on every call (or typed functions to make tools of).
        max_tool_rounds: the most model calls of one turn's tool loop.
        advisors: run around every turn (once per call), the first outermost.
        model_advisors: run around every model call (once per round), the first outermost.
        default_messages: messages that start every prompt (say, a system prompt).
        default_options: model parameters of every call; a call's options override them.
        lease_ttl: seconds a turn's lease lasts unless renewed (it is renewed every third).
        wait: seconds a turn waits for another turn of its session before ``TurnInProgress``.
        max_tool_output: tool outputs longer than this many characters are sent to the model
            cut to this length, with a note on reading the rest with the ``read_tool_output``
            tool the turn then offers (the whole output is stored; ``None``: sent whole).

    Raises:
        UsageError: an argument is not of its kind, or a session option is given without
            ``sessions``.
    """

    def __init__(
        self,
        openai_client: AsyncOpenAI,
        *,
        model: str,
        sessions: SessionService | None = None,
        compaction: Compaction | None = None,
        store_question: StoreQuestion = "first",
        event_filter: EventFilter | None = None,
        message_filter: MessageFilter | None = None,
        event_ids: EventIdGenerator | None = None,
        default_user_id: str = DEFAULT_USER_ID,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        max_tool_rounds: int = 10,
        advisors: Iterable[Advisor] = (),
        model_advisors: Iterable[Advisor] = (),
        default_messages: MessagesLike = (),
        default_options: ChatOptions | None = None,
        lease_ttl: float = 5.0,
        wait: float = 30.0,
        max_tool_output: int | None = DEFAULT_MAX_TOOL_OUTPUT,
    ) -> None:
        if isinstance(openai_client, OpenAI):
            raise UsageError(
                f"{type(self).__name__} needs an openai.AsyncOpenAI, not the sync openai.OpenAI: "
                "its calls are async (build the client with AsyncOpenAI(...))"
            )
        require_open_client(openai_client, "openai_client")
        if not require_text(model, "model"):
            raise UsageError("model must be a non-empty string")
        self.openai_client = openai_client
        """The borrowed SDK client."""
        self.model = model
        """The default model."""
        self.tools: dict[str, Tool] = _tools(tools)
        """The tools offered on every call, by name."""
        self.max_tool_rounds = _rounds(max_tool_rounds)
        """The most model calls of one turn."""
        self.advisors: tuple[Advisor, ...] = _advisors(advisors, "advisors")
        """The advisors around every turn, outermost first."""
        self.model_advisors: tuple[Advisor, ...] = _advisors(model_advisors, "model_advisors")
        """The advisors around every model call, outermost first."""
        self.default_messages: tuple[Message, ...] = tuple(
            _to_messages(default_messages, self._convert_dicts)
        )
        """Messages that start every prompt."""
        self.default_options: ChatOptions = default_options or ChatOptions()
        """Model parameters of every call."""
        self.memory: SessionMemory | None = self._memory(
            sessions,
            compaction=compaction,
            store_question=store_question,
            event_filter=event_filter,
            message_filter=message_filter,
            event_ids=event_ids,
            default_user_id=default_user_id,
            lease_ttl=lease_ttl,
            wait=wait,
            max_tool_output=max_tool_output,
        )
        """How the client keeps its turns in sessions; ``None`` without ``sessions``."""

    @staticmethod
    def _memory(
        sessions: SessionService | None,
        *,
        compaction: Compaction | None,
        store_question: StoreQuestion,
        event_filter: EventFilter | None,
        message_filter: MessageFilter | None,
        event_ids: EventIdGenerator | None,
        default_user_id: str,
        lease_ttl: float,
        wait: float,
        max_tool_output: int | None = DEFAULT_MAX_TOOL_OUTPUT,
    ) -> SessionMemory | None:
        if sessions is None:
            given = [
                name
                for name, value in (
                    ("compaction", compaction),
                    ("event_filter", event_filter),
                    ("message_filter", message_filter),
                    ("event_ids", event_ids),
                )
                if value is not None
            ]
            if given:
                raise UsageError(f"{', '.join(given)} needs a client with sessions=...")
            return None
        require_service(sessions, "sessions")
        if store_question not in get_args(StoreQuestion):
            raise UsageError(
                f"store_question must be one of {get_args(StoreQuestion)!r}, not {store_question!r}"
            )
        if event_filter is not None and not isinstance(event_filter, EventFilter):
            raise UsageError(f"event_filter must be an EventFilter, not {event_filter!r}")
        if message_filter is not None and not isinstance(message_filter, MessageFilter):
            raise UsageError(f"message_filter must be a MessageFilter, not {message_filter!r}")
        if event_ids is not None and not callable(getattr(event_ids, "generate", None)):
            raise UsageError(
                f"event_ids must be an EventIdGenerator (with generate()), not {event_ids!r}"
            )
        if not require_text(default_user_id, "default_user_id").strip():
            raise UsageError("default_user_id must be a non-empty string")
        for name, seconds in (("lease_ttl", lease_ttl), ("wait", wait)):
            if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
                raise UsageError(f"{name} must be a number of seconds >= 0, not {seconds!r}")
        if lease_ttl <= 0:
            raise UsageError("lease_ttl must be positive")
        if max_tool_output is not None and (
            isinstance(max_tool_output, bool)
            or not isinstance(max_tool_output, int)
            or max_tool_output < 1
        ):
            raise UsageError(
                f"max_tool_output must be a positive int or None, not {max_tool_output!r}"
            )
        return SessionMemory(
            service=sessions,
            compaction=None if compaction is None else _compaction(compaction),
            store_question=store_question,
            event_filter=event_filter or EventFilter.all(),
            message_filter=message_filter or MessageFilter.skip_empty_messages(),
            event_ids=event_ids,
            default_user_id=default_user_id,
            lease_ttl=float(lease_ttl),
            wait=float(wait),
            max_tool_output=max_tool_output,
        )

    def _prepare(
        self,
        streaming: bool,
        message: str | Message | None,
        session_id: str | None,
        user_id: str | None,
        request_id: str | None,
        messages: MessagesLike | None,
        options: ChatOptions | None,
        tools: Iterable[Tool | Callable[..., Any]],
        max_tool_rounds: int | None,
        event_filter: EventFilter | None,
        metadata: Mapping[str, JsonValue] | None,
        context: Mapping[str, Any] | None,
    ) -> tuple[CallContext, ChatRequest]:
        """The call's context and first request, from the keywords of `call` or `stream`."""
        closed = getattr(self.openai_client, "is_closed", None)  # checked before anything is stored
        if callable(closed) and closed() is True:
            require_open_client(self.openai_client, "openai_client")  # raises, in our words
        prompt = list(self.default_messages)
        if messages is not None:
            prompt.extend(_to_messages(messages, self._convert_dicts))
        if isinstance(message, str):
            prompt.append(UserMessage(text=message))
        elif message is not None:
            prompt.append(require_message(message, "message"))
        if len(prompt) == len(self.default_messages):
            raise UsageError("A chat call needs a message: call(message) or messages=[...]")
        values = dict(context or {})
        session_id = _text(session_id or values.get(SESSION_ID_CONTEXT_KEY), "session_id")
        user_id = _text(user_id or values.get(USER_ID_CONTEXT_KEY), "user_id")
        request_id = _text(request_id, "request_id")
        event_filter = event_filter or values.get(EVENT_FILTER_CONTEXT_KEY)
        if event_filter is not None and not isinstance(event_filter, EventFilter):
            raise UsageError(f"event_filter must be an EventFilter, not {event_filter!r}")
        metadata = metadata or {}
        if not isinstance(metadata, Mapping):
            raise UsageError(f"metadata must be a mapping, not {type(metadata).__name__}")
        if self.memory is None and (session_id is not None or request_id is not None):
            raise UsageError(
                "session_id and request_id need a client with session memory: "
                f"{type(self).__name__}(..., sessions=service)"
            )
        if self.memory is not None and session_id is None:
            raise MissingSessionId(
                "No session id for a client with session memory: pass session_id=... on "
                "every call; there is no shared fallback session, which would merge the "
                "history of different users"
            )
        for key, value in (
            (SESSION_ID_CONTEXT_KEY, session_id),
            (USER_ID_CONTEXT_KEY, user_id),
            (EVENT_FILTER_CONTEXT_KEY, event_filter),
        ):
            if value is not None:
                values[key] = value
        rounds = self.max_tool_rounds if max_tool_rounds is None else _rounds(max_tool_rounds)
        ctx = CallContext(
            max_tool_rounds=rounds,
            session_id=session_id,
            user_id=user_id,
            request_id=request_id,
            event_filter=event_filter,
            metadata=_metadata(metadata) if metadata else {},
            context=values,
            streaming=streaming,
        )
        request = ChatRequest(
            messages=tuple(prompt),
            options=self.default_options.merged_with(options) if options else self.default_options,
            tools=tuple(_tools(tools).values()) if tools else (),
        )
        return ctx, request

    def _turn(
        self, ctx: CallContext, request: ChatRequest, decisions: Decisions | None = None
    ) -> Turn:
        return Turn(
            memory=self.memory,
            ctx=ctx,
            request=request,
            tools=self.tools,
            max_rounds=ctx.max_tool_rounds,
            model_advisors=self.model_advisors,
            complete=self._complete,
            open_stream=self._open_stream,
            decisions=decisions,
        )

    async def _run_turn(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        return await self._turn(ctx, request).run()

    def _stream_turn(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        return self._turn(ctx, request).stream()

    async def call(
        self,
        message: str | Message | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        request_id: str | None = None,
        messages: MessagesLike | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        max_tool_rounds: int | None = None,
        event_filter: EventFilter | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        context: Mapping[str, Any] | None = None,
        replace: str | None = None,
        fork_to: str | None = None,
    ) -> ChatResponse:
        """One chat turn.

        Args:
            message: the user's message (text, or a ``UserMessage`` with media), appended to
                ``messages``.
            session_id: the session of the call; required with session memory.
            user_id: the caller: the owner of a session the call creates, and checked as the
                owner of an existing one (not checked when ``None``).
            request_id: the client's id of this request (an ``Idempotency-Key`` header): a
                retry with the same id gets the stored reply; with another message it is
                refused.
            messages: further prompt messages (ours, or the API's message dicts).
            options: model parameters for this call.
            tools: tools offered on this call only (they win a name clash).
            max_tool_rounds: the most model calls of this turn (the client's by default).
            event_filter: an ``EventFilter`` laid over the client's history filter.
            metadata: the metadata of a session the call creates.
            context: the advisor context; the reference's keys (``SESSION_ID_CONTEXT_KEY``,
                ...) may stand in for the keywords.
            replace: edit and regenerate: the event id of an earlier user message of the
                session that ``message`` replaces. The session is rewound to just before it
                (its later events stay in the log, archived) and the turn runs from there.
            fork_to: with ``replace``, keep both versions: the session is forked just before
                the replaced message into a new session of this id, where the turn runs (the
                reply's context names it); the original session is not touched.

        Raises:
            ChatError: the model call failed (``ChatTimeout`` when it timed out); ``status_code``
                is set for HTTP errors.
            MissingSessionId: a client with session memory got no session id.
            AccessDenied: ``user_id`` does not own the session; nothing was stored.
            TurnInProgress: another turn of the session did not finish within ``wait``.
            RequestIdReused: ``request_id`` was sent before with another message.
            ToolLoopLimitExceeded: the model kept asking for tools.
        """
        edit = self._edit(session_id, user_id, request_id, replace, fork_to)
        ctx, request = self._prepare(
            False, message, fork_to or session_id, user_id, request_id, messages, options,
            tools, max_tool_rounds, event_filter, metadata, context,
        )  # fmt: skip
        run = self._run_turn if edit is None else functools.partial(self._run_edited, edit)
        if self.advisors:
            response = await run_call(self.advisors, ctx, request, run)
        else:
            response = await run(ctx, request)
        return dataclasses.replace(response, context=dict(ctx.context))

    def stream(
        self,
        message: str | Message | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        request_id: str | None = None,
        messages: MessagesLike | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        max_tool_rounds: int | None = None,
        event_filter: EventFilter | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        context: Mapping[str, Any] | None = None,
        replace: str | None = None,
        fork_to: str | None = None,
    ) -> ChatStream:
        """A streamed chat turn: ``async with client.stream(...) as stream``.

        Takes the arguments of `call` (``replace`` and ``fork_to`` edit and regenerate, as
        there). Nothing is sent until the first chunk is asked for; errors surface while
        iterating. See [`ChatStream`][asyncsession.openai.ChatStream].
        """
        edit = self._edit(session_id, user_id, request_id, replace, fork_to)
        ctx, request = self._prepare(
            True, message, fork_to or session_id, user_id, request_id, messages, options,
            tools, max_tool_rounds, event_filter, metadata, context,
        )  # fmt: skip
        inner = self._stream_turn if edit is None else functools.partial(self._stream_edited, edit)
        return ChatStream(ctx, start_stream(self.advisors, ctx, request, inner))

    def _edit(
        self,
        session_id: str | None,
        user_id: str | None,
        request_id: str | None,
        replace: str | None,
        fork_to: str | None,
    ) -> Edit | None:
        """The edit step of a call with ``replace`` (``None`` without).

        Raises:
            UsageError: ``fork_to`` without ``replace``, or ``replace`` without session memory
                or an explicit ``session_id``.
        """
        replaced = _text(replace, "replace")
        fork = _text(fork_to, "fork_to")
        if replaced is None:
            if fork is not None:
                raise UsageError("fork_to needs replace=<the event id of the message replaced>")
            return None
        session = _text(session_id, "session_id")
        if self.memory is None or session is None:
            raise UsageError("replace needs a client with session memory and a session_id")
        return Edit(
            session_id=session,
            replace=replaced,
            fork_to=fork,
            user_id=_text(user_id, "user_id"),
            request_id=_text(request_id, "request_id"),
        )

    async def _run_edited(self, edit: Edit, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        assert self.memory is not None
        await edit.apply(self.memory.service)
        return await self._run_turn(ctx, request)

    def _stream_edited(self, edit: Edit, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        assert self.memory is not None
        return EditedStream(edit, self.memory.service, lambda: self._stream_turn(ctx, request))

    async def resume(
        self,
        session_id: str,
        decisions: Decisions,
        *,
        user_id: str | None = None,
        options: ChatOptions | None = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        context: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Continue the turn of ``session_id`` that stopped for approvals.

        The decisions answer the calls the paused turn listed
        (``ChatResponse.pending_approvals``), by call id: ``True`` approves (the tool runs),
        ``False`` rejects, a string rejects with that reason (the model gets it as the tool's
        result). The paused round's other calls run too; then the turn goes on as any turn,
        and may stop for approvals again. Any process may resume: the turn continues once
        (a second resume of the same pause gets the reply the first stored, waiting while it
        runs), and a resume whose process died is taken over by the next one.
        The client's ``advisors`` do not run around a resume; its ``model_advisors`` do.

        Args:
            session_id: the session whose turn stopped.
            decisions: a decision for every call waiting, by call id.
            user_id: checked as the session's owner (not checked when ``None``).
            options: model parameters for the rest of the turn.
            tools: tools offered on this call (give the tools the paused call was given).
            context: the advisor context.

        Raises:
            UnknownToolCall: the session has no paused turn, its conversation went on, or
                ``decisions`` names a call that is not waiting.
            UsageError: the client has no sessions, or ``decisions`` leaves a call undecided.
            TurnInProgress: another turn of the session did not finish within ``wait``.
        """
        require_open_client(self.openai_client, "openai_client")  # before anything is stored
        if self.memory is None:
            raise UsageError(
                "resume needs a client with session memory: "
                f"{type(self).__name__}(..., sessions=service)"
            )
        values = dict(context or {})
        session = _text(session_id, "session_id")
        if session is None:
            raise MissingSessionId("resume needs the session id of the paused turn")
        user = _text(user_id or values.get(USER_ID_CONTEXT_KEY), "user_id")
        values[SESSION_ID_CONTEXT_KEY] = session
        if user is not None:
            values[USER_ID_CONTEXT_KEY] = user
        ctx = CallContext(
            max_tool_rounds=self.max_tool_rounds,
            session_id=session,
            user_id=user,
            context=values,
        )
        request = ChatRequest(
            messages=self.default_messages,
            options=self.default_options.merged_with(options) if options else self.default_options,
            tools=tuple(_tools(tools).values()) if tools else (),
        )
        response = await self._turn(ctx, request, decisions).run()
        return dataclasses.replace(response, context=dict(ctx.context))

    @staticmethod
    def _convert_dicts(messages: list[dict[str, Any]]) -> list[Message]:
        """Messages given as dicts: OpenAI Chat Completions message dicts by default."""
        return messages_from_openai(messages)

    @abstractmethod
    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        """The innermost step of the call path: one model request."""

    @abstractmethod
    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        """The innermost step of the stream path: one streamed model request."""


class ChatClient(BaseChatClient):
    """Chat Completions over a borrowed ``openai.AsyncOpenAI``, a turn per call.

    Its arguments, ``call`` and ``stream`` are documented on
    [`BaseChatClient`][asyncsession.openai.BaseChatClient], shared with ``ResponsesClient``.
    """

    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        return await complete(self.openai_client, request, self.model)

    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        return ModelStream(self.openai_client, request, self.model)
