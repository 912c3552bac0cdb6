"""docs/errors.md shows every error class as the code defines it (see tests/errors_page.py)."""

from __future__ import annotations

import re

import pytest
from errors_page import (
    ADVICE,
    HIDDEN,
    NEVER_RAISED,
    PAGE,
    ROOT,
    exit_code,
    generated_part,
    hidden_errors,
    http_status,
    public_errors,
    render_block,
)

import asyncsession
from asyncsession import exceptions
from asyncsession.cli._errors import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_UNREACHABLE


def test_the_page_is_generated_from_the_code() -> None:
    """The generated part of docs/errors.md is what the generator makes of the package now."""
    assert generated_part(PAGE.read_text(encoding="utf-8")) == render_block(), (
        "docs/errors.md is out of date: run python tests/errors_page.py"
    )


def test_a_change_to_an_error_changes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above can fail: a new docstring or new advice gives another block."""
    before = render_block()
    monkeypatch.setattr(exceptions.SessionExists, "__doc__", "A brand-new meaning.")
    assert "A brand-new meaning." in render_block()
    monkeypatch.undo()
    monkeypatch.setitem(ADVICE, "ChatTimeout", "Wait a little.")
    assert render_block() != before


def test_every_public_error_is_drawn_once_and_advised() -> None:
    """The tree draws each class of asyncsession.exceptions once; each has a row with advice,
    and no advice is left for a class that is gone."""
    block = generated_part(PAGE.read_text(encoding="utf-8"))
    tree = block.split("```text\n", 1)[1].split("```", 1)[0]
    drawn = re.findall(r"^[\s│├└─]*([A-Z]\w+)", tree, re.MULTILINE)
    names = [cls.__name__ for cls in public_errors()]
    assert sorted(drawn) == sorted(names)
    assert set(ADVICE) == set(names)
    for name in names:
        assert f"| `{name}` |" in block
    # the common errors are also at the top level, as the same classes
    top = [name for name in names if name in asyncsession.__all__]
    assert "AsyncSessionError" in top
    assert all(getattr(asyncsession, name) is getattr(exceptions, name) for name in top)


def test_multiple_bases_are_shown() -> None:
    """A class with a built-in base as well shows it, in the tree and in the table."""
    block = render_block()
    assert "SessionNotFound (also LookupError)" in block
    assert "| `UsageError` | `AsyncSessionError`, `ValueError` |" in block


def test_the_memory_stores_outage_is_shown_as_what_users_catch() -> None:
    """The private outage error of the MongoDB memory store sits under both of its public
    bases, and an instance is caught as either."""
    from asyncsession.memory.mongo import _MemoryStoreUnavailable  # pyright: ignore[reportPrivateUsage]

    hidden = {found.cls: found.public for found in hidden_errors()}
    assert hidden[_MemoryStoreUnavailable] == (
        exceptions.MemoryStoreError,
        exceptions.StorageUnavailable,
    )
    block = render_block()
    assert "· the MongoDB memory store's outage error (also a MemoryStoreError)" in block
    assert "· the MongoDB memory store's outage error (also a StorageUnavailable)" in block
    assert "is both `MemoryStoreError` and `StorageUnavailable`: catch it as either." in block
    assert "_MemoryStoreUnavailable" not in block  # users never see the private name
    error = _MemoryStoreUnavailable("backend", "", "down")
    assert isinstance(error, exceptions.MemoryStoreError)
    assert error.reason == "backend"
    assert isinstance(error, exceptions.StorageUnavailable)


def test_every_private_error_is_described_for_users() -> None:
    """Each private error class has a reader's description, and no description is left for a
    class that is gone."""
    described = {f"{found.cls.__module__}.{found.cls.__qualname__}" for found in hidden_errors()}
    assert described == set(HIDDEN)


def test_an_error_that_never_reaches_the_caller_has_no_status() -> None:
    """ToolError is caught by the tool loop: its row shows no HTTP status and no exit code,
    while a neighbour's row keeps its own."""
    block = render_block()
    row = next(line for line in block.splitlines() if line.startswith("| `ToolError`"))
    assert "| — | — |" in row
    assert set(NEVER_RAISED) <= {cls.__name__ for cls in public_errors()}
    row = next(line for line in block.splitlines() if line.startswith("| `CompactionError`"))
    assert "| `500` | `1` |" in row


def test_the_exit_codes_are_the_clis_own() -> None:
    """The CLI's mapping gives the codes docs/cli.md documents: 3 for an unknown session, 4 for
    an unreachable store, 1 for any other error of ours."""
    assert exit_code(exceptions.SessionNotFound) == EXIT_NOT_FOUND == 3
    assert exit_code(exceptions.StorageUnavailable) == EXIT_UNREACHABLE == 4
    assert exit_code(exceptions.StorageError) == EXIT_FAILED == 1
    assert exit_code(exceptions.UsageError) == EXIT_FAILED
    block = render_block()
    assert "| `SessionNotFound` | `AsyncSessionError`, `LookupError` |" in block
    row = next(line for line in block.splitlines() if line.startswith("| `StorageUnavailable`"))
    assert "| `4` |" in row


def test_the_http_statuses_are_the_examples_own() -> None:
    """The statuses come from the example's ERROR_STATUSES, first match first, else 500."""
    assert http_status(exceptions.AccessDenied) == 403
    assert http_status(exceptions.ChatTimeout) == 504  # before its base ChatError's 502
    assert http_status(exceptions.ChatError) == 502
    assert http_status(exceptions.RequestIdReused) == 422  # a UsageError
    assert http_status(exceptions.CompactionError) == 500
    row = next(line for line in render_block().splitlines() if line.startswith("| `ChatTimeout`"))
    assert "| `504` | `1` |" in row


def test_the_page_is_in_the_nav_and_linked_from_the_guides() -> None:
    """The site lists the page, and the guides that talk about errors link to it."""
    assert "errors.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for guide in ("cli.md", "streaming.md", "advisors.md", "memory.md", "concepts.md"):
        text = (ROOT / "docs" / guide).read_text(encoding="utf-8")
        assert "(errors.md" in text, f"docs/{guide} does not link to errors.md"
