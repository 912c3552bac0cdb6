"""A service that loses writes on purpose: the fault the framework adapters' retry tests inject."""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from asyncsession import SessionEvent
from asyncsession.exceptions import StorageError
from asyncsession.repository import Lease
from asyncsession.service import DefaultSessionService, SessionService

_T = TypeVar("_T")


class LosingService(DefaultSessionService):
    """Fails the next ``fail`` appends: after writing them (a lost acknowledgement) or before.

    It works on the store of ``service`` (a `DefaultSessionService`), with its settings.
    """

    def __init__(self, service: SessionService, *, fail: int, after_write: bool = True) -> None:
        assert isinstance(service, DefaultSessionService)
        super().__init__(
            service.repository,
            default_time_to_live=service.default_time_to_live,
            allow_system_messages=service.allow_system_messages,
        )
        self.fail = fail
        self.after_write = after_write

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        return await self._fail_around(
            super().append_events(session_id, events, expected_version, lease=lease)
        )

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
