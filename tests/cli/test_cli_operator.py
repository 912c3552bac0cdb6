"""The operator features of the command line: option order, --version, JSON errors, progress,
delete, bulk compaction, the turn-whole note of show --last, and a server that is down."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from cli_support import Terminal, cli, closed_port

from asyncsession import (
    AssistantMessage,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession._version import __version__
from asyncsession.cli._app import COMMANDS


async def test_global_options_are_accepted_after_the_command(seeded: tuple[str, str]) -> None:
    """`--uri`, `--db` and `--json` work after the command as well as before it."""
    uri, db = seeded
    code, out, _ = await cli("sessions", "alice", "--uri", uri, "--db", db, "--json")
    assert code == 0
    assert sorted(s["id"] for s in json.loads(out)) == ["long", "short"]
    code, out, _ = await cli(
        "--uri", "mongodb://127.0.0.1:1/", "sessions", "alice", "--uri", uri, "--db", db
    )
    assert code == 0  # the later --uri wins
    assert "2 session(s) of alice" in out


async def test_version_prints_the_installed_version() -> None:
    """`--version` prints the version and exits 0, without a command or a server."""
    assert await cli("--version") == (0, f"asyncsession {__version__}\n", "")
    code, out, _ = await cli("--json", "--version")
    assert (code, json.loads(out)) == (0, {"version": __version__})


async def test_errors_are_json_under_json(seeded: tuple[str, str]) -> None:
    """Under `--json` an error is one JSON object on stderr with its kind and exit code."""
    uri, db = seeded
    code, out, err = await cli("--uri", uri, "--db", db, "show", "nope", "--json")
    assert (code, out) == (3, "")
    assert json.loads(err) == {
        "error": {"kind": "not_found", "message": "unknown session 'nope'", "code": 3}
    }
    code, _, err = await cli("--json", "show")
    assert code == 2
    assert json.loads(err)["error"]["kind"] == "usage"
    code, _, err = await cli("--json", "--uri", "", "sessions", "alice")
    assert code == 4
    assert json.loads(err)["error"]["kind"] == "unreachable"
    code, _, err = await cli("show", "nope", "--uri", uri, "--db", db)
    assert (code, err) == (3, "error: unknown session 'nope'\n")


async def test_show_last_says_when_it_keeps_a_turn_whole(seeded: tuple[str, str]) -> None:
    """`show --last N` notes that it shows more than N events when the window starts a turn."""
    uri, db = seeded
    base = ("--uri", uri, "--db", db, "show", "long")
    code, out, _ = await cli(*base, "--last", "2")  # answer 5, note: the turn starts 1 earlier
    assert code == 0
    assert "note: showing 3 events for --last 2" in out
    assert "question 5" in out
    code, out, _ = await cli(*base, "--last", "3")  # question 5, answer 5, note: whole already
    assert "note:" not in out
    _, out, _ = await cli(*base, "--last", "2", "--json")
    body = json.loads(out)
    assert (len(body["events"]), body["extended_to_turn_start"]) == (3, True)
    _, out, _ = await cli(*base, "--last", "3", "--json")
    assert json.loads(out)["extended_to_turn_start"] is False
    _, out, _ = await cli(*base, "--json")
    assert "extended_to_turn_start" not in json.loads(out)


async def test_delete_needs_yes_and_removes_the_session(seeded: tuple[str, str]) -> None:
    """`delete` refuses without `--yes`, deletes with it, and exits 3 for an unknown session."""
    uri, db = seeded
    code, _, err = await cli("--uri", uri, "--db", db, "delete", "short")
    assert code == 2
    assert "--yes" in err
    code, _, _ = await cli("--uri", uri, "--db", db, "show", "short")
    assert code == 0  # still there
    code, out, _ = await cli("--uri", uri, "--db", db, "delete", "short", "--yes", "--json")
    assert (code, json.loads(out)) == (0, {"session_id": "short", "deleted": True})
    code, _, _ = await cli("--uri", uri, "--db", db, "show", "short")
    assert code == 3
    code, _, err = await cli("--uri", uri, "--db", db, "delete", "short", "--yes")
    assert (code, err) == (3, "error: unknown session 'short'\n")


async def _add_old_session(uri: str, db: str, session_id: str, turns: int, age: timedelta) -> None:
    created = datetime.now(UTC) - age
    async with MongoSessionRepository.from_uri(uri, db) as repo:
        await repo.save(Session(id=session_id, user_id="carol", created_at=created))
        events: list[SessionEvent] = []
        for turn in range(turns):
            events.append(SessionEvent(session_id=session_id, message=UserMessage(text=f"q{turn}")))
            events.append(
                SessionEvent(session_id=session_id, message=AssistantMessage(text=f"a{turn}"))
            )
        await repo.append_events(session_id, events)


async def test_compact_all_filters_by_user_age_and_size(seeded: tuple[str, str]) -> None:
    """`compact --all` compacts the matching sessions of the given users, and only those."""
    uri, db = seeded
    await _add_old_session(uri, db, "carol-old-big", 6, timedelta(days=10))
    await _add_old_session(uri, db, "carol-old-small", 2, timedelta(days=10))
    await _add_old_session(uri, db, "carol-new-big", 6, timedelta(hours=1))
    args = ("--uri", uri, "--db", db, "--json", "compact", "--all", "--max-turns", "1")
    code, out, _ = await cli(*args, "--user", "carol", "--older-than", "7d", "--min-events", "5")
    assert code == 0
    body = json.loads(out)
    by_id = {r["session_id"]: r for r in body["sessions"]}
    assert sorted(by_id) == ["carol-old-big", "carol-old-small"]  # the new one is too young
    assert by_id["carol-old-big"]["applied"] is True
    assert by_id["carol-old-big"]["archived"] == 10
    assert by_id["carol-old-small"]["applied"] is False  # 4 events < --min-events 5
    assert (body["matched"], body["applied"], body["archived"]) == (2, 1, 10)
    _, out, _ = await cli("--uri", uri, "--db", db, "--json", "show", "carol-new-big", "--archived")
    assert json.loads(out)["events"] == []
    again = ("--uri", uri, "--db", db, "compact", "--all", "--max-turns", "1")
    code, out, _ = await cli(*again, "--user", "carol", "--user", "alice")
    assert code == 0
    assert "compacted 3 of 5 session(s)" in out  # carol-old-small, carol-new-big, long


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param(("--all",), "needs --user", id="all-without-user"),
        pytest.param(("long", "--all", "--user", "alice"), "not both", id="session-and-all"),
        pytest.param(("long", "--user", "alice"), "need --all", id="filter-without-all"),
        pytest.param((), "needs a SESSION", id="nothing"),
        pytest.param(("--all", "--user", "a", "--older-than", "soon"), "duration", id="bad-age"),
    ],
)
async def test_compact_usage_errors(
    seeded: tuple[str, str], extra: tuple[str, ...], message: str
) -> None:
    """Contradictory or incomplete `compact` arguments exit 2 with a message."""
    uri, db = seeded
    code, _, err = await cli("--uri", uri, "--db", db, "compact", *extra)
    assert code == 2
    assert message in err


async def test_progress_bars_are_drawn_on_a_terminal_only(seeded: tuple[str, str]) -> None:
    """Export, bulk compaction and sweep draw bars on a terminal; not in a pipe or under --json."""
    uri, db = seeded
    base = ("--uri", uri, "--db", db)
    runs = [
        (("export", "long"), "exporting long: 13"),
        (("compact", "--all", "--user", "alice"), "compacting [############################] 2/2"),
        (("sweep",), "sweeping expired sessions"),
    ]
    for argv, drawn in runs:
        terminal = Terminal()
        code, _, err = await cli(*base, *argv, err=terminal)
        assert code == 0
        assert "\r" + drawn in err
        code, _, err = await cli(*base, *argv)  # a pipe
        assert "\r" not in err
        code, _, err = await cli(*base, "--json", *argv, err=Terminal())
        assert "\r" not in err


_DOWN_SCRIPT = """
import asyncio, io, json, sys, time
from asyncsession.cli import run

async def main():
    results = []
    for argv in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        code = await run(argv, out=out, err=err)
        results.append([code, out.getvalue(), err.getvalue(), time.monotonic() - started])
    print(json.dumps(results))

asyncio.run(main())
"""


def test_a_server_that_is_down_is_one_line_within_the_timeout() -> None:
    """A port nobody listens on: exit 4 within the timeout, one readable line, no topology dump."""
    # In a child process: when a client closes while its monitor is still connecting, PyMongo
    # can drop that socket unclosed, and the suite turns the ResourceWarning into an error.
    port = closed_port()
    base = ["--uri", f"mongodb://127.0.0.1:{port}/", "--timeout", "0.5"]
    commands_ = [
        [*base, "sessions", "alice"],
        ["show", "s", *base],
        [*base, "sweep"],
        [*base, "compact", "--all", "--user", "u"],
        [*base, "--json", "sessions", "alice"],
    ]
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _DOWN_SCRIPT, json.dumps(commands_)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    results = json.loads(done.stdout)
    for code, out, err, elapsed in results[:-1]:
        assert (code, out) == (4, "")
        refused = f"error: cannot reach MongoDB at 127.0.0.1:{port}: connection refused"
        assert err.startswith(refused)
        assert err.endswith(" (gave up after 0.5 s)\n")
        assert err.count("\n") == 1  # one line: no topology description
        assert "Topology" not in err
        assert elapsed < 5, elapsed
    code, _, err, _ = results[-1]
    assert code == 4
    assert json.loads(err)["error"]["kind"] == "unreachable"


def test_every_command_is_registered_once_and_listed_in_help() -> None:
    """The registry names each command once; `--help` lists each of them."""
    names = [command.name for command in COMMANDS]
    assert len(names) == len(set(names))
    assert {"sessions", "show", "export", "compact", "delete", "sweep", "ensure-indexes"} <= set(
        names
    )


async def test_help_lists_every_registered_command() -> None:
    """`--help` exits 0 and names every registered command."""
    code, out, _ = await cli("--help")
    assert code == 0
    for command in COMMANDS:
        assert command.name in out
