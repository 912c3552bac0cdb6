"""``ChatClient``: a chat turn per call over a borrowed ``openai.AsyncOpenAI``, advisors around
it, on the Chat Completions API; ``ResponsesClient`` subclasses it for the Responses API.

The Chat Completions wire is here too: our chat values <-> its shapes, the request itself (call
or stream), and the one boundary where OpenAI SDK errors become ours: a chat call's errors
become `ChatError` and its subclasses (`map_openai_errors`), chained to the SDK's; a
summarizer's become `CompactionError` (`map_summarizer_errors`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypedDict, cast

import openai
from openai import AsyncOpenAI, AsyncStream, OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage
from pydantic import JsonValue

from .._checks import require_message, require_object, require_open_client, require_text
from .._turn import Compaction, Decisions, SessionMemory, StoreQuestion, Turn
from .._turn.chain import StreamAggregator, run_call, start_stream
from .._turn.edit import Edit
from .._turn.log import session_memory
from ..advisors import IdempotentSessionEventIdGenerator
from ..chat import (
    EVENT_FILTER_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    Advisor,
    CallContext,
    ChatChunk,
    ChatOptions,
    ChatRequest,
    ChatResponse,
    ChunkStream,
    MessageFilter,
    ToolCallDelta,
    Usage,
)
from ..exceptions import ChatError, ChatTimeout, CompactionError, UsageError
from ..filters import EventFilter
from ..messages import AssistantMessage, Message, ToolCall, UserMessage, messages_from_openai
from ..service import SessionService
from ..tools import Tool
from ._stream import ChatStream

__all__ = [
    "DEFAULT_USER_ID",
    "ChatClient",
    "ClientOptions",
    "MessagesLike",
    "map_openai_errors",
    "map_summarizer_errors",
]

DEFAULT_USER_ID = "default-user"
"""The owner of sessions a call creates without a user id."""
DEFAULT_MAX_TOOL_OUTPUT: Final = 50_000
"""The characters of one tool output the model is sent before it is cut."""

MessagesLike = Sequence[Message] | Sequence[Mapping[str, Any]]
"""Messages of ours, or dicts of the client's API: Chat Completions message dicts for
``ChatClient``, Responses API input items for ``ResponsesClient``."""


class ClientOptions(TypedDict, total=False):
    """The keyword arguments every client takes (see `ChatClient`), for a subclass that
    passes them on."""

    sessions: SessionService | None
    compaction: Compaction | None
    store_question: StoreQuestion
    event_filter: EventFilter | None
    message_filter: MessageFilter | None
    event_ids: IdempotentSessionEventIdGenerator | None
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


def _tools(items: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    tools = [item if isinstance(item, Tool) else Tool.from_function(item) for item in items]
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


@contextmanager
def map_openai_errors(*, streaming: bool = False) -> Generator[None]:
    """Translate SDK errors raised inside the block into the most specific error of ours.

    Args:
        streaming: the block reads a stream that has started: a broken connection is then a
            ``ChatError``, not a failed request.
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
            raise ChatError(
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


def tool_to_openai(tool: Tool) -> dict[str, Any]:
    """A function tool parameter for Chat Completions."""
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
    }
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def create_params(request: ChatRequest, default_model: str) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request``."""
    options = request.options
    messages: list[Any] = []
    for message in request.messages:  # checked when the request was made
        messages.extend(message.to_openai())
    params: dict[str, Any] = {"model": options.model or default_model, "messages": messages}
    if request.tools:
        params["tools"] = [tool_to_openai(t) for t in request.tools]
    for name in (
        "temperature",
        "top_p",
        "max_completion_tokens",
        "seed",
        "parallel_tool_calls",
        "reasoning_effort",
        "timeout",
    ):
        value = getattr(options, name)
        if value is not None:
            params[name] = value
    if options.stop is not None:
        params["stop"] = list(options.stop)
    if options.tool_choice is not None:
        choice = options.tool_choice
        params["tool_choice"] = choice if isinstance(choice, str) else dict(choice)
    if options.response_format is not None:
        params["response_format"] = dict(options.response_format)
    if options.extra_body:
        params["extra_body"] = dict(options.extra_body)
    return params


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def response_from_completion(completion: ChatCompletion) -> ChatResponse:
    """The first choice of a completion as our response."""
    choice = completion.choices[0]
    message = choice.message
    calls: list[ToolCall] = []
    for call in message.tool_calls or ():
        if call.type == "function":
            function = call.function
            calls.append(ToolCall(id=call.id, name=function.name, arguments=function.arguments))
        else:
            custom = call.custom
            calls.append(
                ToolCall(id=call.id, name=custom.name, arguments=custom.input, type="custom")
            )
    extra: dict[str, Any] = {}
    if message.refusal is not None:
        extra["refusal"] = message.refusal
    if message.audio is not None:
        extra["audio"] = {"id": message.audio.id}  # the assistant-message param takes the id
    return ChatResponse(
        message=AssistantMessage(text=message.content, tool_calls=tuple(calls), extra=extra),
        finish_reason=choice.finish_reason,
        usage=_usage(completion.usage),
        model=completion.model,
        id=completion.id,
    )


def chunk_from_openai(chunk: ChatCompletionChunk) -> ChatChunk:
    """One SDK chunk as ours (first choice only)."""
    text = ""
    deltas: tuple[ToolCallDelta, ...] = ()
    finish_reason: str | None = None
    for choice in chunk.choices:
        if choice.index != 0:
            continue
        delta = choice.delta
        text = delta.content or ""
        if delta.tool_calls:
            deltas = tuple(
                ToolCallDelta(
                    index=call.index,
                    id=call.id,
                    name=call.function.name if call.function else None,
                    arguments=(call.function.arguments or "") if call.function else "",
                )
                for call in delta.tool_calls
            )
        finish_reason = choice.finish_reason
    return ChatChunk(
        text=text,
        tool_calls=deltas,
        finish_reason=finish_reason,
        usage=_usage(chunk.usage),
        id=chunk.id,
        model=chunk.model,
    )


class ModelStream(ChunkStream):
    """The innermost stream of a chain: one streamed Chat Completions request.

    The request is sent when the first chunk is asked for. A stream that ends without a finish
    reason raises ``ChatError``, as does a connection that breaks mid-stream.
    """

    __slots__ = ("_aggregator", "_client", "_closed", "_done", "_params", "_sdk")

    def __init__(self, client: AsyncOpenAI, request: ChatRequest, default_model: str) -> None:
        super().__init__()
        self._client = client
        self._params = create_params(request, default_model)
        self._sdk: AsyncStream[ChatCompletionChunk] | None = None
        self._aggregator = StreamAggregator()
        self._done = False
        self._closed = False

    async def __anext__(self) -> ChatChunk:
        if self._closed or self._done:
            raise StopAsyncIteration
        if self._sdk is None:
            with map_openai_errors():
                self._sdk = await self._client.chat.completions.create(
                    **self._params, stream=True, stream_options={"include_usage": True}
                )
        try:
            with map_openai_errors(streaming=True):
                raw = await self._sdk.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            if not self._aggregator.is_finished:
                raise ChatError(
                    "The model's stream ended before it finished (no finish reason)"
                ) from None
            self._done = True
            raise
        chunk = chunk_from_openai(raw)
        self._aggregator.add(chunk)
        return chunk

    def _produced(self) -> ChatResponse | None:
        return self._aggregator.response() if self._done else None

    async def aclose(self) -> None:
        """Close the HTTP stream (the server sees the client go away if it was not done)."""
        self._closed = True
        sdk, self._sdk = self._sdk, None  # closed once, however often this is called
        if sdk is not None:
            await sdk.close()


class ChatClient:
    """Chat Completions over a borrowed ``openai.AsyncOpenAI``: a turn per call, advisors
    around it.

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
        event_ids: IdempotentSessionEventIdGenerator | None = None,
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
        self.memory: SessionMemory | None = session_memory(
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
            raise UsageError(
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
            metadata={str(key): value for key, value in metadata.items()},
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
            UsageError: a client with session memory got no session id.
            AccessDenied: ``user_id`` does not own the session; nothing was stored.
            TurnInProgress: another turn of the session did not finish within ``wait``.
            RequestIdReused: ``request_id`` was sent before with another message.
            ToolLoopLimitExceeded: the model kept asking for tools.
        """
        edit = (
            None
            if replace is None and fork_to is None
            else self._edit(session_id, user_id, request_id, replace, fork_to)
        )
        ctx, request = self._prepare(
            False, message, fork_to or session_id, user_id, request_id, messages, options,
            tools, max_tool_rounds, event_filter, metadata, context,
        )  # fmt: skip
        if edit is None and not self.advisors:
            response = await self._turn(ctx, request).run()
        else:
            run = self._run_turn if edit is None else edit.before_call(self._run_turn)
            response = await run_call(self.advisors, ctx, request, run)
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
        edit = (
            None
            if replace is None and fork_to is None
            else self._edit(session_id, user_id, request_id, replace, fork_to)
        )
        ctx, request = self._prepare(
            True, message, fork_to or session_id, user_id, request_id, messages, options,
            tools, max_tool_rounds, event_filter, metadata, context,
        )  # fmt: skip
        inner = self._stream_turn if edit is None else edit.before_stream(self._stream_turn)
        return ChatStream(ctx, start_stream(self.advisors, ctx, request, inner))

    def _edit(
        self,
        session_id: str | None,
        user_id: str | None,
        request_id: str | None,
        replace: str | None,
        fork_to: str | None,
    ) -> Edit | None:
        return Edit.of(
            None if self.memory is None else self.memory.service,
            _text(session_id, "session_id"),
            _text(replace, "replace"),
            _text(fork_to, "fork_to"),
            _text(user_id, "user_id"),
            _text(request_id, "request_id"),
        )

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
            raise UsageError("resume needs the session id of the paused turn")
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

    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        """The innermost step of the call path: one model request."""
        with map_openai_errors():
            completion: ChatCompletion = await self.openai_client.chat.completions.create(
                **create_params(request, self.model), stream=False
            )
        return response_from_completion(completion)

    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        """The innermost step of the stream path: one streamed model request."""
        return ModelStream(self.openai_client, request, self.model)
