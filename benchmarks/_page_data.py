"""Reading the page data (``docs/assets/benchmarks.json``): its rows, its systems, its cases.

Both generated pages, the benchmarks page and the maintainers' goals page, read a run through
these, so they name the same rows the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .adapters import MODEL_CALLING, PEERS, REFERENCE

__all__ = [
    "ADVISORS",
    "AFTER_REPLY",
    "FRAMEWORKS",
    "PLAIN",
    "cell",
    "history",
    "is_ours",
    "ok_rows",
    "peers",
    "ratio",
    "row_of",
    "rivals",
]

PLAIN = "asyncsession"
AFTER_REPLY = "asyncsession-after-reply"
ADVISORS = "asyncsession-advisors"

FRAMEWORKS: tuple[tuple[str, str, str], ...] = (
    ("LangChain", "asyncsession-langchain", "langchain"),
    ("Pydantic AI", "asyncsession-pydantic-ai", "pydantic-ai"),
    ("Google ADK", "asyncsession-adk", "google-adk"),
)
"""(framework, our adapter, the framework's own store), in the pages' order."""


def peers() -> frozenset[str]:
    """The peer systems: the stores people use today (never ours, never the floor)."""
    return frozenset(PEERS) - {REFERENCE}


def ok_rows(data: Mapping[str, Any], scenario: str) -> list[dict[str, Any]]:
    """The scenario's rows that measured something."""
    table = data["tables"].get(scenario)
    return [] if table is None else [r for r in table["rows"] if r["status"] == "ok"]


def row_of(data: Mapping[str, Any], scenario: str, system: str, case: str) -> dict[str, Any] | None:
    """One system's row in one case of a scenario, if it measured something."""
    return next(
        (r for r in ok_rows(data, scenario) if r["system"] == system and r["case"] == case), None
    )


def rivals(data: Mapping[str, Any], scenario: str, case: str) -> list[dict[str, Any]]:
    """The peers' rows of a case, but for the peers that also make a model call."""
    return [
        r
        for r in ok_rows(data, scenario)
        if r["case"] == case and r["system"] in peers() and r["system"] not in MODEL_CALLING
    ]


def cell(data: Mapping[str, Any], scenario: str, row: Mapping[str, Any], column: str) -> str:
    """A row's cell under a column of its table, as the table shows it."""
    header: list[str] = data["tables"][scenario]["header"]
    return str(row["cells"][header.index(column) - 2])


def is_ours(system: str) -> bool:
    """Whether a system (or a system with its writer policy) is asyncsession's."""
    return system.startswith("asyncsession")


def history(case: str) -> int:
    """The number in a case such as ``history=1,000`` (0 for a case without one), for sorting."""
    return int(case.split("=", 1)[1].replace(",", "")) if "=" in case else 0


def ratio(value: float) -> str:
    """Two decimals, or two significant digits below 0.1 (a read 200 times faster is not 0)."""
    return f"{value:.2f}" if value >= 0.1 or value == 0 else f"{value:.2g}"
