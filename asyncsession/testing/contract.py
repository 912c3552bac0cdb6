"""The repository contract kit: the tests every `SessionRepository` must pass.

Subclass [`SessionRepositoryContract`][asyncsession.testing.contract.SessionRepositoryContract]
in a test module and provide a `repository` fixture; pytest collects the subclass (its name
starts with `Test`) and runs every contract test against your store:

```python
import pytest
from asyncsession.testing.contract import SessionRepositoryContract

class TestMyStore(SessionRepositoryContract):
    @pytest.fixture
    async def repository(self):
        store = MyStore(...)
        yield store
        await store.aclose()
```

Every test uses fresh random ids; the lifecycle tests close the store they are given, so the
fixture hands out a fresh store per test (closing is idempotent, so its teardown may close it
again). The kit needs `pytest` and `pytest-asyncio` (the `[testing]` extra: `pip install
'.[testing]'` from a clone); it is the only part of asyncsession that imports pytest. The tests
live in one mixin per area (sessions, metadata lookups, recall searches, appends and versions,
filters and windows, snapshots, leases, compaction, expiry, concurrency, text, large bodies,
forks and rewinds, lifecycle) under `asyncsession.testing._contract`; subclass the combined
class, not the mixins.
A store that keeps every body in its log, however large, sets ``offloads_large_bodies = False``
on its subclass: the large-body tests then check that it reads every body back whole.
"""

from __future__ import annotations

try:
    import pytest
except ImportError as _exc:  # pragma: no cover - exercised in an environment without pytest
    raise ImportError(
        "asyncsession.testing.contract needs pytest and pytest-asyncio: "
        "install the [testing] extra (from a clone: pip install '.[testing]')"
    ) from _exc

from ..repository import SessionRepository
from ._contract.appends import AppendsContract, ConcurrencyContract, SnapshotsContract
from ._contract.compaction import CompactionContract, CompactionRecordContract
from ._contract.filters import FiltersContract, SearchContract
from ._contract.forks import ForkContract
from ._contract.leases import LeasesContract
from ._contract.offload import OffloadContract
from ._contract.sessions import (
    ExpiryContract,
    LifecycleContract,
    MetadataContract,
    SessionsContract,
)
from ._contract.text import TextContract

__all__ = [
    "SessionRepositoryContract",
]


class SessionRepositoryContract(
    SessionsContract,
    MetadataContract,
    SearchContract,
    AppendsContract,
    FiltersContract,
    SnapshotsContract,
    LeasesContract,
    CompactionContract,
    CompactionRecordContract,
    ExpiryContract,
    ConcurrencyContract,
    TextContract,
    OffloadContract,
    ForkContract,
    LifecycleContract,
):
    """The contract tests. Subclass with a `repository` fixture returning your store."""

    pytestmark = pytest.mark.asyncio

    @pytest.fixture(autouse=True)
    def _store_under_test(self, repository: SessionRepository) -> None:
        self.repo = repository
