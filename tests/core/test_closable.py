"""The lifecycle closable objects share, and the event-loop helpers of the adapters."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest

from asyncsession._lifecycle import Closable, running_loop
from asyncsession.exceptions import UsageError


class _Resource(Closable):
    _keep_using: ClassVar[str] = "the resource"

    def __init__(self) -> None:
        self.released = 0

    async def _release(self) -> None:
        self.released += 1

    async def use(self) -> str:
        self._check_open()
        return "used"


async def test_aclose_releases_once_and_every_later_call_is_refused() -> None:
    """The first aclose lets go of what the object owns; a second one does nothing."""
    resource = _Resource()
    assert await resource.use() == "used"
    await resource.aclose()
    await resource.aclose()
    assert resource.released == 1
    with pytest.raises(UsageError) as refused:
        await resource.use()
    assert str(refused.value) == (
        "This _Resource is closed; create a new one to keep using the resource"
    )


async def test_async_with_hands_the_object_back_and_closes_it_even_on_an_error() -> None:
    """Inside the block the object works; leaving it (by an exception too) closes it."""
    resource = _Resource()
    with pytest.raises(LookupError):
        async with resource as entered:
            assert entered is resource
            assert await entered.use() == "used"
            raise LookupError("the body failed")
    assert resource.released == 1
    with pytest.raises(UsageError, match="closed"):
        async with resource:
            pass  # pragma: no cover - entering a closed object raises


async def test_running_loop_is_this_threads_loop_and_none_in_a_thread_without_one() -> None:
    """Inside a coroutine it is the running loop; in a worker thread there is none."""
    assert running_loop() is asyncio.get_running_loop()
    assert await asyncio.to_thread(running_loop) is None
