"""Every error class of the command line, run as a real OS process (`python -m asyncsession`):
its exit code, one line on stderr naming the flag, and never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import cli, closed_port

from asyncsession import MongoSessionRepository, SessionEvent, UserMessage
from asyncsession.cli._errors import failure_of


def _run(*argv: str) -> tuple[int, str, str]:
    """`python -m asyncsession ARGV` in a child process; its exit code, stdout and stderr."""
    env = {k: v for k, v in os.environ.items() if k != "MONGODB_URI"}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-m", "asyncsession", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )
    return done.returncode, done.stdout, done.stderr


def _one_line(err: str) -> None:
    assert "Traceback" not in err
    assert err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("argv", "flag_message"),
    [
        pytest.param(("show", "long", "--last", "-1"), "argument --last: must be ≥ 1", id="last"),
        pytest.param(("show", "long", "--last", "0"), "argument --last: must be ≥ 1", id="last0"),
        pytest.param(("show", "long", "--type", "no such"), "argument --type:", id="type"),
        pytest.param(("sweep", "--before", "yesterday"), "argument --before:", id="before"),
        pytest.param(
            ("sweep", "--before", "2026-01-31T00:00:00"), "needs a time zone", id="naive-before"
        ),
        pytest.param(("--timeout", "-5", "sessions", "a"), "argument --timeout:", id="timeout"),
        pytest.param(("--timeout", "0", "sessions", "a"), "argument --timeout:", id="timeout0"),
        pytest.param(("--timeout", "inf", "sessions", "a"), "argument --timeout:", id="inf"),
        pytest.param(
            ("compact", "long", "--max-events", "2"),
            "--max-events is for --strategy sliding, not --strategy turns",
            id="flag-of-another-strategy",
        ),
        pytest.param(
            ("compact", "long", "--strategy", "tokens", "--max-turns", "2"),
            "--max-turns is for --strategy turns, not --strategy tokens",
            id="turns-flag-with-tokens",
        ),
        pytest.param(("compact", "long", "--max-turns", "0"), "--max-turns: must be ≥ 1", id="0"),
        pytest.param(("nosuchcommand",), "invalid choice", id="command"),
    ],
)
def test_usage_errors_exit_2_and_name_the_flag(
    seeded: tuple[str, str], argv: tuple[str, ...], flag_message: str
) -> None:
    """A bad flag value exits 2 with one line naming the flag, not an API parameter."""
    uri, db = seeded
    code, out, err = _run("--uri", uri, "--db", db, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ")
    assert flag_message in err
    for api_name in ("last_n", "event_types", "max_events", "max_turns"):
        assert api_name not in err
    _one_line(err)


def test_unknown_session_exits_3(seeded: tuple[str, str]) -> None:
    uri, db = seeded
    code, out, err = _run("--uri", uri, "--db", db, "show", "nobody")
    assert (code, out, err) == (3, "", "error: unknown session 'nobody'\n")


def test_no_uri_exits_4() -> None:
    code, _, err = _run("sessions", "alice")
    assert code == 4
    assert err == "error: no MongoDB URI: pass --uri or set MONGODB_URI\n"


def test_an_invalid_uri_exits_4() -> None:
    code, _, err = _run("--uri", "http://nope", "--json", "sessions", "alice")
    assert code == 4
    assert json.loads(err)["error"]["kind"] == "invalid_uri"


def test_an_unreachable_port_exits_4() -> None:
    port = closed_port()
    code, _, err = _run("--uri", f"mongodb://127.0.0.1:{port}/", "--timeout", "0.5", "sweep")
    assert code == 4
    assert err.startswith(f"error: cannot reach MongoDB at 127.0.0.1:{port}: connection refused")
    _one_line(err)


def test_an_unresolvable_srv_name_exits_4() -> None:
    """`.invalid` never resolves (RFC 2606): exit 4, one line, no traceback."""
    uri = "mongodb+srv://cluster0.asyncsession-test.invalid/"
    for argv in (("sessions", "alice"), ("--json", "show", "s")):
        code, out, err = _run("--uri", uri, "--timeout", "1", *argv)
        assert (code, out) == (4, "")
        _one_line(err)
        if "--json" in argv:
            assert json.loads(err)["error"]["kind"] == "unreachable"
        else:
            assert err.startswith("error: cannot resolve cluster0.asyncsession-test.invalid")


def test_export_to_a_missing_directory_is_one_line(seeded: tuple[str, str], tmp_path: Path) -> None:
    uri, db = seeded
    target = tmp_path / "no" / "dir" / "x.jsonl"
    code, _, err = _run("--uri", uri, "--db", db, "export", "long", "-o", str(target))
    assert code == 1
    assert err == f"error: cannot open {target}: no such file or directory\n"


def test_export_onto_a_directory_is_one_line(seeded: tuple[str, str], tmp_path: Path) -> None:
    uri, db = seeded
    code, _, err = _run("--uri", uri, "--db", db, "export", "long", "-o", str(tmp_path))
    assert code == 1
    assert err == f"error: cannot open {tmp_path}: is a directory\n"


def test_permission_denied_is_one_line() -> None:
    """The mapping of a denied file (the suite may run as root, who is never denied one)."""
    denied = PermissionError(13, "Permission denied", "/srv/x.jsonl")
    failure = failure_of(denied, uri=None, timeout=2)
    assert failure is not None
    assert (failure.code, failure.kind) == (1, "failed")
    assert failure.message == "cannot open /srv/x.jsonl: permission denied"


async def test_show_type_takes_any_case(seeded: tuple[str, str]) -> None:
    uri, db = seeded
    code, out, _ = await cli("--uri", uri, "--db", db, "--json", "show", "long", "--type", "user")
    assert code == 0
    types = {e["type"] for e in json.loads(out)["events"]}
    assert types == {"USER"}


async def test_compact_uses_the_limit_of_its_strategy(seeded: tuple[str, str]) -> None:
    uri, db = seeded
    argv = ("--uri", uri, "--db", db, "--json", "compact", "long")
    code, out, _ = await cli(*argv, "--strategy", "sliding", "--max-events", "4")
    assert code == 0
    assert json.loads(out)["active"] <= 5  # four kept, plus the summary a sliding window adds


async def test_tables_keep_multi_line_and_long_text_on_one_row(seeded: tuple[str, str]) -> None:
    uri, db = seeded
    async with MongoSessionRepository.from_uri(uri, db) as repo:
        text = "first line\nsecond line\t" + "x" * 500
        await repo.append_event(SessionEvent(session_id="short", message=UserMessage(text=text)))
    code, out, _ = await cli("--uri", uri, "--db", db, "show", "short")
    assert code == 0
    rows = out.splitlines()
    assert len(rows) == 3  # header, the one event, the count line
    assert "first line\\nsecond line\\t" in rows[1]
    assert rows[1].endswith("…")
    assert len(rows[1]) < 300


async def test_sessions_json_carries_the_version_the_table_shows(
    seeded: tuple[str, str],
) -> None:
    uri, db = seeded
    code, out, _ = await cli("--uri", uri, "--db", db, "--json", "sessions", "alice")
    assert code == 0
    versions = {s["id"]: s["version"] for s in json.loads(out)}
    code, table, _ = await cli("--uri", uri, "--db", db, "sessions", "alice")
    assert code == 0
    for row in table.splitlines()[1:-1]:
        session_id, *_, version = row.split()
        assert versions[session_id] == int(version)
    assert versions["long"] > versions["short"]
