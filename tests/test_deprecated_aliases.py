"""Every moved public module still imports from its old path, with a `DeprecationWarning`."""

from __future__ import annotations

import importlib
import sys

import pytest

ALIASES = {
    "asyncsession.compaction.mongo_queue": "asyncsession.compaction.mongo.queue",
    "asyncsession.compaction.mongo_worker": "asyncsession.compaction.mongo.worker",
    "asyncsession.plans": "asyncsession.compaction_protocols",
    "asyncsession.repository.memory": "asyncsession.repository.in_memory",
}


@pytest.mark.parametrize(("old", "new"), sorted(ALIASES.items()))
def test_old_path_warns_and_exports_the_same_objects(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        alias = importlib.import_module(old)
    target = importlib.import_module(new)
    assert alias.__all__ == target.__all__
    assert all(getattr(alias, name) is getattr(target, name) for name in target.__all__)
