"""Where an adapter's calls run: on the event loop the store belongs to.

PyMongo's ``AsyncMongoClient`` (and Motor's) belongs to the first event loop that uses it, and
frameworks call adapters from everywhere: sync ``chain.invoke``, worker threads,
``Runner.run_sync``, ADK's ``runner.run`` (a new loop in a new thread per run), ``asyncio.run``
around one call. A [`StoreLoop`][asyncsession.integrations._loops.StoreLoop] runs each call

- on the loop the store declares (``loop_bound`` and ``event_loop``): directly from that loop,
  handed over (``run_coroutine_threadsafe``) from anywhere else;
- for a loop-bound store that no loop has used yet: on the caller's loop when it lasts (the
  main thread's, running code of the caller's own), else on `own_loop` (a daemon thread per
  process), which the store then belongs to;
- for a store that serves any loop (in memory): on the caller's loop; a sync caller's on the
  loop the adapter was built on while it runs (else `own_loop`), so a sync call whose loop is
  blocked waiting for it is refused rather than answered while its write fails.

A sync call in a thread that runs an event loop raises `UsageError` at once; a call the home
loop does not start within `START_BOUND` seconds (its thread is blocked) is abandoned unstarted
and raises `UsageError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from .._lifecycle import declared_loop, running_loop
from .._shield import shielded
from ..exceptions import UsageError
from ..repository import SessionRepository
from ..service import SessionService

__all__ = ["START_BOUND", "StoreLoop", "own_loop"]

START_BOUND: Final = 5.0
"""Seconds a loop has to start a call handed to it before the call is abandoned."""
_ONE_CALL: Final = (
    "asyncsession.",
    "agents.",
    "pydantic_ai.",
    "pydantic_graph.",
    "google.adk.",
    "langchain_core.",
    "langchain.",
    "langgraph.",
)
"""Modules whose coroutines, when they are all a loop runs, mean it serves one framework call."""
_NEUTRAL: Final = ("asyncio.", "pymongo.", "motor.", "anyio.", "httpx.", "httpcore.")
"""Modules whose tasks say nothing about who runs the loop (drivers, transports)."""
_T = TypeVar("_T")

_own_lock = threading.Lock()
_own: asyncio.AbstractEventLoop | None = None


def _serve(loop: asyncio.AbstractEventLoop, ready: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.call_soon(ready.set)
    loop.run_forever()


def own_loop() -> asyncio.AbstractEventLoop:
    """The adapters' own event loop: one daemon thread per process, started on first use."""
    global _own
    with _own_lock:
        if _own is None:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            threading.Thread(
                target=_serve, args=(loop, ready), name="asyncsession-adapters", daemon=True
            ).start()
            ready.wait()
            _own = loop
        return _own


def _forget_own_loop() -> None:  # in a forked child the thread is gone
    global _own, _own_lock
    _own = None
    _own_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_own_loop)


def _module_of(task: asyncio.Task[Any]) -> str:
    frame = getattr(task.get_coro(), "cr_frame", None)
    return str(frame.f_globals.get("__name__", "")) if frame is not None else ""


def _lasting(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the running ``loop`` looks like it outlives the call: it runs in the main thread
    and some task runs code that is neither a framework's nor ours (``Runner.run_sync`` and
    ``asyncio.run(history.load())`` run one call on a loop that then ends or idles)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    modules = [_module_of(task) for task in asyncio.all_tasks(loop)]
    own = [module for module in modules if module and not module.startswith(_NEUTRAL)]
    return not own or not all(module.startswith(_ONE_CALL) for module in own)


class _Ticket:
    """One call handed to another loop: it starts there at most once, unless abandoned first."""

    def __init__(self, caller: asyncio.AbstractEventLoop | None) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"
        self.started = threading.Event()  # for a sync caller
        self._caller = caller
        self.started_here: asyncio.Future[None] | None = (
            caller.create_future() if caller is not None else None
        )  # for an async caller, resolved on its loop

    def abandon(self) -> bool:
        """Give the call up if it has not started; ``False`` once it has."""
        with self._lock:
            if self._state != "waiting":
                return False
            self._state = "abandoned"
            return True

    async def run(self, call: Coroutine[Any, Any, _T], refused: str, write: bool) -> _T:
        """Run ``call`` unless the ticket was abandoned (then it is cancelled, never started)."""
        with self._lock:
            if self._state == "abandoned":
                call.close()
                raise asyncio.CancelledError
            self._state = "started"
        self.started.set()
        if self._caller is not None and self.started_here is not None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody waits
                self._caller.call_soon_threadsafe(_resolve, self.started_here)
        return await _refusing_other_loops(shielded(call) if write else call, refused)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _refusing_other_loops(call: Coroutine[Any, Any, _T], message: str) -> _T:
    """PyMongo's refusal of this loop (raised before anything is sent) as `UsageError`."""
    try:
        return await call
    except RuntimeError as exc:
        if "different event loop" not in str(exc):
            raise
        raise UsageError(message) from exc


async def _outcome(done: asyncio.Future[Any]) -> None:
    """Wait for ``done`` to settle, through any number of cancellations."""
    while not done.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({done})


class StoreLoop:
    """Runs an adapter's store calls on the loop its store belongs to (see the module docs);
    ``name`` names the adapter in messages (``"LangChainHistory 'trip-42'"``)."""

    def __init__(self, store: SessionService | SessionRepository, name: str) -> None:
        self._store = store
        self._loop_bound = declared_loop(store)[0]
        self._name = name
        self._built_on = running_loop()

    def _home(self, caller: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
        """The loop a call from ``caller`` (``None``: a sync caller) runs on."""
        bound = declared_loop(self._store)[1] if self._loop_bound else None
        if bound is not None:
            return bound
        if caller is not None:
            return caller if not self._loop_bound or _lasting(caller) else own_loop()
        built_on = self._built_on  # a sync call beside the loop the adapter was built on: there
        return built_on if built_on is not None and built_on.is_running() else own_loop()

    def _unusable(self, loop: asyncio.AbstractEventLoop) -> UsageError | None:
        if loop.is_closed():
            return UsageError(
                f"{self._name} cannot run: its store belongs to an event loop that has ended "
                "(PyMongo binds a client to the first loop that uses it, and an asyncio.run "
                "that returned closed it). Let the adapter make the store's first call (it then "
                "runs every call on a loop of its own; create indexes with `asyncsession "
                "ensure-indexes`), or build the client inside the loop that uses it."
            )
        if not loop.is_running():
            return UsageError(
                f"{self._name} cannot run: its store belongs to an event loop that is not "
                "running now. Call it from that loop, or let the adapter make the store's first "
                "call (it then runs every call on a loop of its own)."
            )
        return None

    def _blocked(self) -> UsageError:
        return UsageError(
            f"{self._name} handed a call to the event loop that serves it (its store's, or the "
            f"one it was built on), and that loop did not start it within {START_BOUND:g} s: "
            "the loop's thread is blocked, most likely by a sync call made on it (invoke, "
            "run_sync) that waits for this one. Use the async API on that loop (ainvoke, await "
            "agent.run). Nothing was done."
        )

    def _refused(self) -> str:
        return (
            f"{self._name} cannot run: its store's client was bound to another event loop "
            "meanwhile (PyMongo binds a client to the first loop that uses it). Make one loop "
            "the store's: its first call decides."
        )

    async def run(self, call: Coroutine[Any, Any, _T], *, write: bool = False) -> _T:
        """Await ``call`` on the store's loop. A ``write`` that has started runs to its end
        before a cancelled caller sees the cancellation; a read is cancelled with it. A refused
        call is closed unstarted (`UsageError`)."""
        here = asyncio.get_running_loop()
        home = self._home(here)
        if home is here:
            return await _refusing_other_loops(shielded(call) if write else call, self._refused())
        if (error := self._unusable(home)) is not None:
            call.close()
            raise error
        ticket = _Ticket(here)
        future = asyncio.run_coroutine_threadsafe(ticket.run(call, self._refused(), write), home)
        done = asyncio.wrap_future(future)
        assert ticket.started_here is not None
        try:
            either: list[asyncio.Future[Any]] = [ticket.started_here, done]
            await asyncio.wait(either, timeout=START_BOUND, return_when=asyncio.FIRST_COMPLETED)
            if ticket.abandon():
                raise self._blocked()
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if ticket.abandon():
                raise  # it never started: nothing was done
            if not write:
                future.cancel()
                raise
            await _outcome(done)
            raise

    def run_sync(
        self, call: Callable[[], Coroutine[Any, Any, _T]], *, method: str, instead: str
    ) -> _T:
        """Run ``call()`` on the store's loop for a sync caller and wait for it; `UsageError`
        in a thread that runs an event loop (naming ``method`` and offering ``instead``), or
        as `run`."""
        if running_loop() is not None:
            raise UsageError(
                f"{self._name}.{method} is a sync call, and this thread runs an event loop "
                f"that waiting for it would block: use {instead} there."
            )
        home = self._home(None)
        if (error := self._unusable(home)) is not None:
            raise error
        ticket = _Ticket(None)
        future = asyncio.run_coroutine_threadsafe(
            ticket.run(call(), self._refused(), write=False), home
        )
        if not ticket.started.wait(START_BOUND) and ticket.abandon():
            raise self._blocked()
        return future.result()
