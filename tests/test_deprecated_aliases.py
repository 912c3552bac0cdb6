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


MOVED_NAMES = {
    ("asyncsession.compaction", "OpenAISummarizer"): "asyncsession.openai",
    ("asyncsession.compaction.summarizer", "OpenAISummarizer"): "asyncsession.openai",
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED_NAMES.items()))
def test_a_moved_name_warns_at_its_old_path_and_is_the_same_object(
    old: tuple[str, str], new: str
) -> None:
    module, name = old
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        moved = getattr(importlib.import_module(module), name)
    assert moved is getattr(importlib.import_module(new), name)
    assert name not in importlib.import_module(module).__all__


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    """The alias's module ``__getattr__`` answers only the moved name."""
    compaction = importlib.import_module("asyncsession.compaction")
    with pytest.raises(AttributeError, match="NoSuchName"):
        compaction.NoSuchName  # noqa: B018
    assert not hasattr(compaction, "NoSuchName")
