"""``AdkSessionService``: Google ADK's ``BaseSessionService`` on a ``SessionService``.

Needs Google ADK: the ``[google-adk]`` extra (``pip install '.[google-adk]'`` from a clone). ::

    runner = Runner(agent=agent, app_name="travel", session_service=AdkSessionService(service))

An ADK session is one of our sessions, owned by the ADK user. An ADK event with content is a
real message event (a user's text a user message, the model's text and function calls an
assistant message, function responses a tool message), one without content an ``ADK.EVENT``;
each keeps the ADK event as JSON in its metadata under ``"google_adk"`` (without a content its
message holds exactly), and the session's state after it, so a read needs only the newest
events. App (``app:``) and user (``user:``) state live in one session per app and per user,
the app's sessions are listed in one more session per app.

A session object this service returned or appended to remembers the version and the state it
last saw (in ADK's ``_storage_update_marker``), so ``append_event`` appends at that version
without reading first; only when another writer came first does it read and try again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast
from urllib.parse import quote

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from .._checks import require_service, require_text
from .._offload import OffloadedBody
from ..events import CreateSessionRequest, EventType, Session, SessionEvent
from ..exceptions import SessionExists, SessionNotFound, UsageError
from ..filters import EventFilter
from ..messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..repository import SessionSnapshot
from ..service import SessionService
from ._loops import StoreLoop

try:
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.errors.session_not_found_error import SessionNotFoundError
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import (
        BaseSessionService,
        GetSessionConfig,
        ListSessionsResponse,
    )
    from google.adk.sessions.session import Session as AdkSession
    from google.adk.sessions.state import State
    from google.genai import types
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.google_adk needs Google ADK: "
        "install the [google-adk] extra (from a clone: pip install '.[google-adk]')"
    ) from _exc

__all__ = ["AdkSessionService"]

METADATA_KEY: Final = "google_adk"
"""The metadata key of the whole ADK event (on events) and of the ADK scope (on sessions)."""
ADK_EVENT: Final = EventType.of("ADK.EVENT")
"""The type of the events that store ADK events without content."""
_STATE_KEY: Final = "google_adk_state"
_IN_MESSAGE: Final = "content_in_message"
"""Set in a stored ADK event whose content its message holds (the event keeps none)."""
_SCOPE_STATE: Final = EventType.of("ADK.STATE")
_SCOPE_SESSION: Final = EventType.of("ADK.SESSION")
_SCOPE_READ: Final = EventFilter(event_types=frozenset({_SCOPE_STATE}), last_n=1)
_NAMESPACE: Final = uuid.UUID("0b7f6f5e-2a55-4f4b-8a41-3d6f1c9e2b07")
_MAX_ATTEMPTS: Final = 1000
_MARK: Final = "asyncsession/1"
"""What begins a ``_storage_update_marker`` this service wrote (see `_mark`)."""
_log = logging.getLogger("asyncsession")


def _json(value: object) -> JsonValue:
    return cast("JsonValue", to_jsonable_python(value))


def _state(state: Mapping[str, Any]) -> JsonValue:
    """``state`` as JSON, as ADK's database service stores it (see the class docs)."""
    try:
        return _json(state)
    except Exception:
        _log.warning(
            "Some values of the session state are not JSON-serializable (e.g. callables); "
            "they are stored as their string representation, as ADK's database service does.",
            exc_info=True,
        )
        return cast("JsonValue", to_jsonable_python(state, serialize_unknown=True))


def _dump(event: Event) -> dict[str, JsonValue]:
    return cast("dict[str, JsonValue]", json.loads(event.model_dump_json()))


def _arguments(args: Mapping[str, Any] | None) -> str:
    return json.dumps(_json(args or {}), separators=(",", ":"), ensure_ascii=False)


def _to_message(content: types.Content) -> Message:
    """The API-neutral view of an ADK event's content (lossy: the metadata keeps the event)."""
    parts = content.parts or []
    text = "".join(p.text for p in parts if p.text and not p.thought)
    answers = [p.function_response for p in parts if p.function_response is not None]
    if answers:
        return ToolResponseMessage(
            responses=[
                ToolResponse(id=a.id or "", name=a.name or "", data=_arguments(a.response))
                for a in answers
            ]
        )
    if content.role == "model":
        calls = [
            ToolCall(id=c.id or "", name=c.name or "", arguments=_arguments(c.args))
            for p in parts
            if (c := p.function_call) is not None
        ]
        return AssistantMessage(text=text or None, tool_calls=calls)
    return UserMessage(text=text)


def _answer(data: str, total: int | None) -> dict[str, Any]:
    """A function response's ``response`` from a tool message's data: the object it encodes,
    else ``{"result": data}`` (a preview also says how long the whole result is)."""
    if total is None:
        with contextlib.suppress(ValueError):
            parsed = json.loads(data)
            if isinstance(parsed, dict):
                return cast("dict[str, Any]", parsed)
        return {"result": data}
    return {"result": data, "total_chars": total}


def _args(arguments: str) -> dict[str, Any]:
    with contextlib.suppress(ValueError):
        parsed = json.loads(arguments or "{}")
        if isinstance(parsed, dict):
            return cast("dict[str, Any]", parsed)
    return {"arguments": arguments}


def _from_message(message: Message, cut: Sequence[int] | None = None) -> types.Content:
    """The content a message holds; ``cut``: the whole lengths of a preview's texts."""
    if isinstance(message, AssistantMessage):
        parts = [types.Part(text=message.text)] if message.text else []
        parts += [
            types.Part(
                function_call=types.FunctionCall(id=c.id, name=c.name, args=_args(c.arguments))
            )
            for c in message.tool_calls
        ]
        return types.Content(role="model", parts=parts)
    if isinstance(message, ToolResponseMessage):
        totals = list(cut) if cut is not None else [None] * len(message.responses)
        return types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=r.id, name=r.name, response=_answer(r.data, total)
                    )
                )
                for r, total in zip(message.responses, totals, strict=False)
            ],
        )
    return types.Content(role="user", parts=[types.Part(text=message.text)])


def _kept(event: Event, message: Message | None) -> dict[str, JsonValue]:
    """The ADK event, without a content its message holds exactly (so a large tool result is
    kept once, in the message, where the store can offload it)."""
    dump = _dump(event)
    if (
        message is not None
        and event.content is not None
        and _from_message(message) == event.content
    ):
        dump["content"] = None
        dump[_IN_MESSAGE] = True
    return dump


def _holds_adk(event: SessionEvent) -> bool:
    """Whether ``event`` reads as an ADK event: not a boundary of ours (a compaction's, a
    rewind's)."""
    return event.message is not None or isinstance(event.metadata.get(METADATA_KEY), dict)


def _from_event(event: SessionEvent) -> Event:
    """The ADK event one of our events holds: the stored one, else one converted from its
    message (a summary, a message another client wrote); an offloaded one as its preview."""
    stored = event.metadata.get(METADATA_KEY)
    marker = OffloadedBody.of(event)
    if isinstance(stored, dict):
        fields = dict(stored)
        if fields.pop(_IN_MESSAGE, False) and event.message is not None:
            cut = marker.chars if marker is not None else None
            fields["content"] = _from_message(event.message, cut).model_dump(
                mode="json", exclude_none=True
            )
        return Event.model_validate_json(json.dumps(fields))
    assert event.message is not None  # _holds_adk
    content = _from_message(event.message, marker.chars if marker is not None else None)
    return Event(
        id=event.id,
        author="user" if content.role == "user" else "model",
        content=content,
        timestamp=event.timestamp.timestamp(),
    )


def _split(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``state`` as (app, user, session) deltas, prefixes removed; temp keys dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    session: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            session[key] = value
    return app, user, session


def _scope(newest: Sequence[SessionEvent]) -> dict[str, Any]:
    """A scope's state: the one its newest state event holds."""
    return dict(cast("dict[str, Any]", newest[-1].metadata[_STATE_KEY])) if newest else {}


def _mark(session: AdkSession, key: str, version: int, state: Mapping[str, Any]) -> None:
    """Remember on ``session`` that ``key`` was at ``version`` with this session-scoped state
    (as stored: JSON)."""
    session._storage_update_marker = json.dumps(  # pyright: ignore[reportPrivateUsage]
        [_MARK, key, version, _state(state)], separators=(",", ":"), ensure_ascii=False
    )


def _marked(session: AdkSession, key: str) -> tuple[int, dict[str, Any]] | None:
    """The version and state `_mark` remembered on ``session`` for ``key``, if any."""
    marker = session._storage_update_marker  # pyright: ignore[reportPrivateUsage]
    if not marker or not marker.startswith(f'["{_MARK}",'):
        return None
    with contextlib.suppress(ValueError, TypeError):
        mark, marked_key, version, state = json.loads(marker)
        if (
            mark == _MARK
            and marked_key == key
            and isinstance(version, int)
            and isinstance(state, dict)
        ):
            return version, cast("dict[str, Any]", state)
    return None


def _part(value: str) -> str:
    return quote(value, safe="")


def _owned(session: Session | None, user_id: str) -> bool:
    """Whether ``session`` is an ADK session of ``user_id`` (not one another writer made)."""
    return (
        session is not None
        and session.user_id == user_id
        and isinstance(session.metadata.get(METADATA_KEY), dict)
    )


class AdkSessionService(BaseSessionService):
    """Google ADK's ``BaseSessionService`` on a ``SessionService`` (see the module docs).

    Safe to share between concurrent tasks; several services and processes may share a store.
    What it guarantees (the Google ADK guide has the details):

    - the ADK session ``(app, user, id)`` is our session ``adk/<app>/<user>/<id>`` (each part
      percent-encoded; ``prefix`` replaces ``adk``), owned by ``user``; a session there that
      another writer made for a different user, or without the ADK scope, is not found;
    - an event's stored id derives from the session and the ADK event's id, so appending it
      again is a replay: nothing is stored twice and no state delta is applied twice;
    - ``append_event`` computes the state from the newest stored one and appends with
      compare-and-swap, retrying when another writer came first, so no state update is lost,
      even through a stale session object (ADK's database service would reject that append);
    - a state value JSON cannot encode is stored as its ``repr``, with a warning, as ADK's
      database service does; a tool result the store offloads reads back as its preview,
      ``{"result": <the first characters>, "total_chars": <the whole length>}``;
    - every call runs on the event loop the store belongs to, so the sync ``runner.run`` and
      ``asyncio.run`` around single calls work on MongoDB.

    Args:
        service: where the sessions live.
        prefix: the first part of our session ids.

    Raises:
        UsageError: ``service`` is not a service, or a blank or ``/``-containing prefix.
    """

    def __init__(self, service: SessionService, *, prefix: str = "adk") -> None:
        if not require_text(prefix, "prefix").strip() or "/" in prefix:
            raise UsageError("prefix must be a non-empty string without '/'")
        super().__init__()
        self.service = require_service(service, "service")
        """The service the sessions live in."""
        self.prefix = prefix
        """The first part of our session ids."""
        self._loop = StoreLoop(service, "AdkSessionService")

    def __repr__(self) -> str:
        return f"AdkSessionService(prefix={self.prefix!r})"

    def session_key(self, app_name: str, user_id: str, session_id: str) -> str:
        """Our session id of the ADK session ``(app_name, user_id, session_id)``."""
        return "/".join([self.prefix, _part(app_name), _part(user_id), _part(session_id)])

    def _app_key(self, app_name: str) -> str:
        return f"{self.prefix}~app/{_part(app_name)}"

    def _user_key(self, app_name: str, user_id: str) -> str:
        return f"{self.prefix}~user/{_part(app_name)}/{_part(user_id)}"

    def _registry_key(self, app_name: str) -> str:
        return f"{self.prefix}~sessions/{_part(app_name)}"

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> AdkSession:
        """Create a session; ``app:`` and ``user:`` keys of ``state`` update those scopes.

        Raises:
            AlreadyExistsError: the app and user have a session with this id.
        """
        session_id = (session_id or "").strip() or str(uuid.uuid4())
        create = self._create(app_name, user_id, dict(state or {}), session_id)
        return await self._loop.run(create, write=True)

    async def _create(
        self, app_name: str, user_id: str, state: dict[str, Any], session_id: str
    ) -> AdkSession:
        key = self.session_key(app_name, user_id, session_id)
        app_delta, user_delta, session_state = _split(state)
        created = datetime.now(UTC).timestamp()
        scope: dict[str, JsonValue] = {
            "app": app_name,
            "user_id": user_id,
            "session_id": session_id,
            "created": created,
            "state": _state(session_state),
        }
        request = CreateSessionRequest(id=key, user_id=user_id, metadata={METADATA_KEY: scope})
        try:
            await self.service.create(request)
        except SessionExists as exc:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from exc
        await self._update_scopes(app_name, user_id, app_delta, user_delta, str(uuid.uuid4()))
        await self._register(app_name, {"session": key, "user_id": user_id, "deleted": False})
        session = AdkSession(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, dict(session_state)),
            last_update_time=created,
        )
        _mark(session, key, 0, session_state)
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> AdkSession | None:
        """The session with its events (all, or those ``config`` selects), or ``None``."""
        return await self._loop.run(self._get(app_name, user_id, session_id.strip(), config))

    async def _get(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None
    ) -> AdkSession | None:
        key = self.session_key(app_name, user_id, session_id)
        recent = config.num_recent_events if config is not None else None
        after = config.after_timestamp if config is not None else None
        if recent is not None and after is None:
            read = EventFilter(exclude_archived=True, last_n=max(recent, 1))
        else:
            read = EventFilter(exclude_archived=True)
        # the session and its app's and user's state, read at once
        snapshot, app, user = await asyncio.gather(
            self.service.get_snapshot(key, read),
            self._scope_state(self._app_key(app_name)),
            self._scope_state(self._user_key(app_name, user_id)),
        )
        if snapshot is None or not _owned(snapshot.session, user_id):
            return None
        events = [_from_event(event) for event in snapshot.events if _holds_adk(event)]
        if recent is not None:
            events = events[-recent:] if recent else []
        if after is not None:
            events = [event for event in events if event.timestamp >= after]
        return await self._adk_session(app_name, user_id, session_id, snapshot, events, (app, user))

    async def _adk_session(
        self,
        app_name: str,
        user_id: str,
        session_id: str,
        snapshot: SessionSnapshot,
        events: list[Event],
        scopes: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> AdkSession:
        """The ADK session ``snapshot`` holds, its state merged with the app's and user's
        (``scopes``, else read now)."""
        key = snapshot.session.id
        state, updated = await self._session_state(key, snapshot.session.metadata, snapshot.events)
        session = AdkSession(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=await self._merged(app_name, user_id, dict(state), scopes),
            events=events,
            last_update_time=updated,
        )
        _mark(session, key, snapshot.version, state)
        return session

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """The app's sessions (of ``user_id``, or of every user), without events, oldest
        update first."""
        return await self._loop.run(self._list(app_name, user_id))

    async def _list(self, app_name: str, user_id: str | None) -> ListSessionsResponse:
        registry = await self.service.get_events(
            self._registry_key(app_name), EventFilter(event_types=frozenset({_SCOPE_SESSION}))
        )
        live: dict[str, str] = {}
        for entry in registry:
            payload = entry.payload or {}
            session_key, owner = str(payload.get("session")), str(payload.get("user_id"))
            if payload.get("deleted"):
                live.pop(session_key, None)
            elif user_id is None or owner == user_id:
                live[session_key] = owner
        sessions: list[AdkSession] = []
        for session_key, owner in live.items():
            snapshot = await self.service.get_snapshot(
                session_key, EventFilter(exclude_archived=True, last_n=1)
            )
            if snapshot is None or not _owned(snapshot.session, owner):
                continue
            scope = cast("dict[str, Any]", snapshot.session.metadata[METADATA_KEY])
            adk_id = str(scope["session_id"])
            sessions.append(await self._adk_session(app_name, owner, adk_id, snapshot, []))
        sessions.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its events; nothing happens for an unknown one."""
        delete = self._delete(app_name, user_id, session_id.strip())
        await self._loop.run(delete, write=True)

    async def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        key = self.session_key(app_name, user_id, session_id)
        if not _owned(await self.service.find_by_id(key), user_id):
            return
        await self.service.delete(key)
        await self._register(app_name, {"session": key, "user_id": user_id, "deleted": True})

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state in the app, keys without the ``user:`` prefix."""
        return await self._loop.run(self._scope_state(self._user_key(app_name, user_id)))

    async def append_event(self, session: AdkSession, event: Event) -> Event:
        """Store ``event`` in ``session`` and apply its state delta, with compare-and-swap.

        A partial event is returned unstored. ``temp:`` keys update only the ``session``
        object. The write runs to its end if the caller is cancelled.

        Raises:
            SessionNotFoundError: the session does not exist.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        await self._loop.run(self._store(session, event), write=True)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    async def _store(self, session: AdkSession, event: Event) -> None:
        key = self.session_key(session.app_name, session.user_id, session.id)
        app, user, delta = _split(event.actions.state_delta or {})
        await self._update_scopes(session.app_name, session.user_id, app, user, event.id)
        event_id = str(uuid.uuid5(_NAMESPACE, f"{key}\x00{event.id}"))
        read = EventFilter(exclude_archived=False, last_n=1)
        known = _marked(session, key)  # what this session object saw last: tried first
        for _ in range(_MAX_ATTEMPTS):
            if known is None:
                snapshot = await self.service.get_snapshot(key, read)
                if snapshot is None or not _owned(snapshot.session, session.user_id):
                    raise SessionNotFoundError(f"Session {session.id} not found.")
                metadata, events = snapshot.session.metadata, snapshot.events
                known = snapshot.version, (await self._session_state(key, metadata, events))[0]
            version, state = known[0], {**known[1], **delta}
            known = None
            body = self._body(event)
            stored = SessionEvent(
                id=event_id,
                session_id=key,
                timestamp=datetime.fromtimestamp(event.timestamp, UTC),
                **body,
                metadata={
                    METADATA_KEY: _kept(event, body.get("message")),
                    _STATE_KEY: _state(state),
                },
            )
            try:
                if await self.service.append_events(key, [stored], version):
                    _mark(session, key, version + 1, state)
                    return
            except SessionNotFound as exc:
                raise SessionNotFoundError(f"Session {session.id} not found.") from exc
        raise UsageError(f"{_MAX_ATTEMPTS} writers in a row came first")  # pragma: no cover

    @staticmethod
    def _body(event: Event) -> dict[str, Any]:
        if event.content is not None and event.content.parts:
            return {"message": _to_message(event.content)}
        return {"type": ADK_EVENT, "payload": {"author": event.author}}

    async def _session_state(
        self, key: str, metadata: Mapping[str, JsonValue], events: Sequence[SessionEvent]
    ) -> tuple[dict[str, Any], float]:
        """The session-scoped state after the newest stored event, and its update time."""
        scope = cast("dict[str, Any]", metadata.get(METADATA_KEY) or {})
        for event in reversed(events):
            state = event.metadata.get(_STATE_KEY)
            if isinstance(state, dict):
                return dict(state), _from_event(event).timestamp
        if events:  # the newest events hold no state (written by others): read back further
            everything = await self.service.get_events(key, EventFilter(exclude_archived=False))
            for event in reversed(everything):
                state = event.metadata.get(_STATE_KEY)
                if isinstance(state, dict):
                    return dict(state), events[-1].timestamp.timestamp()
            return dict(scope.get("state") or {}), events[-1].timestamp.timestamp()
        return dict(scope.get("state") or {}), float(scope.get("created") or 0.0)

    async def _merged(
        self,
        app_name: str,
        user_id: str,
        state: dict[str, Any],
        scopes: tuple[dict[str, Any], dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """``state`` with the app's and user's (``scopes``, else read now, at once)."""
        app, user = scopes or await asyncio.gather(
            self._scope_state(self._app_key(app_name)),
            self._scope_state(self._user_key(app_name, user_id)),
        )
        state.update({State.APP_PREFIX + name: value for name, value in app.items()})
        state.update({State.USER_PREFIX + name: value for name, value in user.items()})
        return state

    async def _scope_state(self, scope_key: str) -> dict[str, Any]:
        return _scope(await self.service.get_events(scope_key, _SCOPE_READ))

    async def _update_scopes(
        self, app_name: str, user_id: str, app: dict[str, Any], user: dict[str, Any], stamp: str
    ) -> None:
        if app:
            await self._update_scope(self._app_key(app_name), app, stamp)
        if user:
            await self._update_scope(self._user_key(app_name, user_id), user, stamp)

    async def _ensure(self, scope_key: str) -> None:
        with contextlib.suppress(SessionExists):
            await self.service.create(CreateSessionRequest(id=scope_key, user_id=scope_key))

    async def _update_scope(self, scope_key: str, delta: Mapping[str, Any], stamp: str) -> None:
        """Apply ``delta`` to a scope's state with compare-and-swap (a replay of ``stamp``
        applies nothing)."""
        event_id = str(uuid.uuid5(_NAMESPACE, f"{scope_key}\x00{stamp}"))
        for _ in range(_MAX_ATTEMPTS):
            snapshot = await self.service.get_snapshot(scope_key, _SCOPE_READ)
            if snapshot is None:
                await self._ensure(scope_key)
                continue
            state = _scope(snapshot.events)
            state.update(delta)
            stored = SessionEvent(
                id=event_id,
                session_id=scope_key,
                type=_SCOPE_STATE,
                payload={"delta": _state(delta)},
                metadata={_STATE_KEY: _state(state)},
            )
            if await self.service.append_events(scope_key, [stored], snapshot.version):
                return
        raise UsageError(f"{_MAX_ATTEMPTS} writers in a row came first")  # pragma: no cover

    async def _register(self, app_name: str, entry: dict[str, JsonValue]) -> None:
        """Record a session made or deleted in the app's list (apart from the app's state, so
        that reading the state never walks past the list)."""
        scope_key = self._registry_key(app_name)
        record = SessionEvent(session_id=scope_key, type=_SCOPE_SESSION, payload=entry)
        try:
            await self.service.append_events(scope_key, [record])
        except SessionNotFound:
            await self._ensure(scope_key)
            await self.service.append_events(scope_key, [record])
