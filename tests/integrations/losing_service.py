"""A service that loses writes on purpose: the fault the framework adapters' retry tests inject."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from asyncsession import SessionEvent
from asyncsession.exceptions import StorageError
from asyncsession.service import DelegatingSessionService, SessionService

_T = TypeVar("_T")


class LosingService(DelegatingSessionService):
    """Fails the next ``fail`` appends: after writing them (a lost acknowledgement) or before."""

    def __init__(self, delegate: SessionService, *, fail: int, after_write: bool = True) -> None:
        super().__init__(delegate)
        self.fail = fail
        self.after_write = after_write

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        return await self._fail_around(super().append_events(session_id, events, expected_version))

    async def _fail_around(self, write: Coroutine[Any, Any, _T]) -> _T:
        if self.fail and not self.after_write:
            self.fail -= 1
            write.close()
            raise StorageError("injected: connection reset before the write")
        result = await write
        if self.fail:
            self.fail -= 1
            raise StorageError("injected: the acknowledgement was lost")
        return result
