"""Event ids the library minted for the write in progress, which nobody else can know yet.

An id a caller supplies may be a replay, or an id another session already has: a store must
check it before it commits (the MongoDB store's id registry). An id the library drew at random
for this very write (`DefaultSessionService.append_message` without an ``event_id``, the
advisors' random ids) is in no log yet and known to no one else until the write returns, so a
store may commit it without that check. The service and the advisors say which ids those are
with [`minting`][asyncsession._minted.minting], around the store call; a store reads them with
[`minted_ids`][asyncsession._minted.minted_ids]. A store that ignores this is still correct: it
only checks more than it must.

The ids are kept in a context variable, so they cover exactly the awaits inside the ``with``
block, in this task, and never a write another task makes meanwhile.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

__all__ = ["minted_ids", "minting"]

_MINTED: Final[ContextVar[frozenset[str]]] = ContextVar("asyncsession_minted", default=frozenset())


@contextmanager
def minting(ids: Iterable[str]) -> Generator[None]:
    """Declare ``ids`` freshly minted for the store calls made inside the block."""
    token = _MINTED.set(_MINTED.get() | frozenset(ids))
    try:
        yield
    finally:
        _MINTED.reset(token)


def minted_ids() -> frozenset[str]:
    """The ids declared minted for the store call in progress."""
    return _MINTED.get()
