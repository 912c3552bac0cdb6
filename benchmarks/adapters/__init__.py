"""The systems under test, loaded by name so a peer package is imported only when it is used.

The peers (``openai-agents``, ``google-adk[mongodb]``, ``langchain-mongodb``,
``pydantic-ai-slim``) are never dependencies of asyncsession: ``scripts/bench`` installs them
into ``.venv-bench``. Loading a peer that is not installed raises :class:`StoreUnavailable`.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._base import (
    AppendOutcome,
    MongoStoreBase,
    SessionStore,
    StorageStats,
    StoreUnavailable,
    Target,
    Writer,
)

__all__ = [
    "ADAPTERS",
    "DISTRIBUTIONS",
    "MODEL_CALLING",
    "OURS",
    "PEERS",
    "REFERENCE",
    "SHAPES_ONLY",
    "SYSTEMS",
    "AppendOutcome",
    "MongoStoreBase",
    "SessionStore",
    "StorageStats",
    "StoreUnavailable",
    "Target",
    "Writer",
    "make_store",
]

SYSTEMS: dict[str, str] = {
    "asyncsession": "asyncsession_store:AsyncSessionStore",
    "asyncsession-after-reply": "asyncsession_store:AsyncSessionAfterReplyStore",
    "asyncsession-question-first": "asyncsession_store:AsyncSessionQuestionFirstStore",
    "asyncsession-advisors": "asyncsession_store:AsyncSessionAdvisorStore",
    "asyncsession-advisors-after-reply": "asyncsession_store:AsyncSessionAdvisorAfterReplyStore",
    "asyncsession-langchain": "asyncsession_frameworks:AsyncSessionLangChainStore",
    "asyncsession-adk": "asyncsession_frameworks:AsyncSessionAdkStore",
    "asyncsession-pydantic-ai": "asyncsession_frameworks:AsyncSessionPydanticAIStore",
    "openai-agents": "openai_agents_store:OpenAIAgentsStore",
    "google-adk": "google_adk_store:GoogleAdkStore",
    "langchain": "langchain_store:LangChainStore",
    "langchain-model": "langchain_store:LangChainModelStore",
    "pydantic-ai": "pydantic_ai_store:PydanticAIStore",
    "floor": "floor_store:FloorStore",
}
"""System name -> ``module:class`` inside this package."""

DISTRIBUTIONS: dict[str, str] = {
    "asyncsession": "asyncsession",
    "asyncsession-after-reply": "asyncsession",
    "asyncsession-question-first": "asyncsession",
    "asyncsession-advisors": "asyncsession",
    "asyncsession-advisors-after-reply": "asyncsession",
    "asyncsession-langchain": "asyncsession",
    "asyncsession-adk": "asyncsession",
    "asyncsession-pydantic-ai": "asyncsession",
    "openai-agents": "openai-agents",
    "google-adk": "google-adk",
    "langchain": "langchain-mongodb",
    "langchain-model": "langchain-mongodb",
    "pydantic-ai": "pydantic-ai-slim",
    "floor": "pymongo",
}
"""System name -> the distribution whose version the report states."""

PEERS = ("openai-agents", "google-adk", "langchain", "langchain-model", "pydantic-ai", "floor")
"""The peer systems, in report order after asyncsession; ``floor`` is the least a turn can
cost on MongoDB (a range read and one insert, no guarantees), what ours are held against."""

OURS = (
    "asyncsession",
    "asyncsession-after-reply",
    "asyncsession-question-first",
    "asyncsession-advisors",
    "asyncsession-advisors-after-reply",
)
"""Our turn shapes: the plain API (question stored before the model call, then the reply), the
plain API storing the whole turn after the reply, the advisor chain, and the advisor chain
storing the whole turn after the reply (``store_question="with_reply"``)."""

ADAPTERS = ("asyncsession-langchain", "asyncsession-adk", "asyncsession-pydantic-ai")
"""Our framework adapters, each measured beside the framework's own MongoDB store."""

MODEL_CALLING = frozenset(
    {"asyncsession-advisors", "asyncsession-advisors-after-reply", "langchain-model"}
)
"""The systems whose turn includes the model call (through the in-process stub model)."""

REFERENCE = "floor"
"""The reference system: the least a turn can cost on MongoDB, measured beside the peers but
never one of them (never the "best peer"); our turns are held against it (``x floor``)."""

SHAPES_ONLY = frozenset(
    {
        "asyncsession-after-reply",
        "asyncsession-question-first",
        "asyncsession-advisors",
        "asyncsession-advisors-after-reply",
        "langchain-model",
    }
)
"""Turn shapes of a system measured under another name: they run only the scenarios whose work
depends on the turn shape (their reads, contended appends and retries are the base system's)."""


def store_class(system: str) -> Any:
    """The adapter class of ``system``; importing a peer's module imports the peer."""
    try:
        module_name, class_name = SYSTEMS[system].split(":")
    except KeyError:
        raise ValueError(f"unknown system {system!r}; choose from {sorted(SYSTEMS)}") from None
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, class_name)


def make_store(system: str, target: Target | None, **options: Any) -> SessionStore:
    """A new, unstarted store of ``system`` on ``target`` (only ours run without one).

    Raises:
        StoreUnavailable: the system's package is not installed (or, for asyncsession on a
            server, its Mongo repository is not there yet).
    """
    cls = store_class(system)
    if system in OURS or system in ADAPTERS:
        store: SessionStore = cls(target, **options)
        return store
    if target is None:
        raise StoreUnavailable(f"{system} needs a MongoDB server")
    peer: SessionStore = cls(target)
    return peer
