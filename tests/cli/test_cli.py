"""The operator command line against the test server: every command, --json, errors, exit codes."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from cli_support import cli

from asyncsession import SessionEvent
from asyncsession.compaction_protocols import CompactionRecord


async def test_sessions_lists_a_users_sessions(seeded: tuple[str, str]) -> None:
    """``sessions`` prints a table for people and a JSON list for scripts."""
    uri, db = seeded
    code, out, _ = await cli("--uri", uri, "--db", db, "sessions", "alice")
    assert code == 0
    assert "SESSION" in out
    assert "long" in out
    assert "short" in out
    assert "2 session(s) of alice" in out
    code, out, _ = await cli("--uri", uri, "--db", db, "--json", "sessions", "alice")
    assert code == 0
    assert sorted(s["id"] for s in json.loads(out)) == ["long", "short"]


async def test_show_prints_the_log_with_filters(seeded: tuple[str, str]) -> None:
    """``show`` filters by last N, keyword, type and view, and reports the version."""
    uri, db = seeded
    base = ("--uri", uri, "--db", db, "--json", "show", "long")
    code, out, _ = await cli(*base)
    everything = json.loads(out)
    assert code == 0
    assert len(everything["events"]) == 13
    assert everything["version"] == 2
    _, out, _ = await cli(*base, "--last", "3")
    assert [e["message"]["text"] for e in json.loads(out)["events"][:2]] == [
        "question 5",
        "answer 5",
    ]
    _, out, _ = await cli(*base, "--keyword", "QUESTION 3")
    assert [e["message"]["text"] for e in json.loads(out)["events"]] == ["question 3"]
    _, out, _ = await cli(*base, "--type", "OPS.NOTE")
    assert [e["payload"] for e in json.loads(out)["events"]] == [{"by": "ops"}]
    _, out, _ = await cli(*base, "--active")
    assert len(json.loads(out)["events"]) == 12
    code, out, _ = await cli("--uri", uri, "--db", db, "show", "long", "--last", "2")
    assert code == 0
    assert "answer 5" in out
    assert "events" not in out.splitlines()[0]


async def test_export_writes_json_lines(seeded: tuple[str, str], tmp_path: Path) -> None:
    """``export`` writes one event per line, to standard output or a file, with progress."""
    uri, db = seeded
    code, out, err = await cli("--uri", uri, "--db", db, "export", "long")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 13
    assert SessionEvent.model_validate_json(lines[0]).text == "question 0"
    assert "exported 13 event(s)" in err
    target = tmp_path / "long.jsonl"
    code, _, _ = await cli("--uri", uri, "--db", db, "export", "long", "-o", str(target))
    assert code == 0
    assert target.read_text(encoding="utf-8").splitlines() == lines


async def test_compact_archives_old_turns(seeded: tuple[str, str]) -> None:
    """``compact`` applies the chosen strategy now and reports what it did."""
    uri, db = seeded
    code, out, _ = await cli(
        "--uri",
        uri,
        "--db",
        db,
        "--json",
        "compact",
        "long",
        "--strategy",
        "turns",
        "--max-turns",
        "2",
    )
    assert code == 0
    result = json.loads(out)
    assert result == {
        "session_id": "long",
        "applied": True,
        "archived": 8,
        "active": 4,
        "version": 3,
    }
    _, out, _ = await cli("--uri", uri, "--db", db, "--json", "show", "long", "--archived")
    archived = json.loads(out)["events"]
    assert len(archived) == 8
    assert all(event["archived"] for event in archived)
    args = ("--json", "show", "long", "--archived", "--last", "3")
    _, out, _ = await cli("--uri", uri, "--db", db, *args)
    assert json.loads(out)["events"] == archived[-3:]  # the newest 3 archived, not of the log
    code, out, _ = await cli("--uri", uri, "--db", db, "compact", "long", "--strategy", "sliding")
    assert code == 0
    assert "nothing to do" in out


async def test_show_and_export_carry_the_compaction_record(seeded: tuple[str, str]) -> None:
    """After a compaction, ``show`` describes its record in words and ``export`` keeps it typed;
    ``--active`` leaves it out."""
    uri, db = seeded
    args = ("compact", "long", "--strategy", "turns", "--max-turns", "2")
    code, _, _ = await cli("--uri", uri, "--db", db, *args)
    assert code == 0
    code, out, _ = await cli("--uri", uri, "--db", db, "show", "long", "--last", "1")
    assert code == 0
    (row,) = [line for line in out.splitlines() if "COMPACTION" in line]
    assert "TurnWindowCompactionStrategy" in row
    assert "8 covered, 4 kept, 0 written" in row
    code, out, _ = await cli("--uri", uri, "--db", db, "export", "long")
    assert code == 0
    last = SessionEvent.model_validate_json(out.splitlines()[-1])
    record = CompactionRecord.from_event(last)
    assert (len(record.covered), len(record.kept)) == (8, 4)
    _, out, _ = await cli("--uri", uri, "--db", db, "--json", "show", "long", "--active")
    assert all(e["type"] != "COMPACTION" for e in json.loads(out)["events"])


async def test_sweep_and_ensure_indexes(seeded: tuple[str, str]) -> None:
    """``sweep`` deletes expired sessions; ``ensure-indexes`` is idempotent."""
    uri, db = seeded
    code, out, _ = await cli("--uri", uri, "--db", db, "--json", "sweep")
    assert (code, json.loads(out)) == (0, {"deleted": 1})
    code, out, _ = await cli("--uri", uri, "--db", db, "sweep", "--before", "2000-01-01T00:00:00Z")
    assert (code, out.strip()) == (0, "deleted 0 expired session(s)")
    for _ in range(2):
        code, out, _ = await cli("--uri", uri, "--db", db, "ensure-indexes")
        assert (code, out.strip()) == (0, "indexes are in place")


async def test_errors_have_clear_messages_and_exit_codes(seeded: tuple[str, str]) -> None:
    """Unknown session exits 3; no URI or a bad URI exits 4; bad usage exits 2."""
    uri, db = seeded
    code, _, err = await cli("--uri", uri, "--db", db, "show", "nope")
    assert (code, err.strip()) == (3, "error: unknown session 'nope'")
    code, _, err = await cli("--uri", uri, "--db", db, "export", "nope")
    assert code == 3
    code, _, err = await cli("--uri", "", "sessions", "alice")
    assert code == 4
    assert "no MongoDB URI" in err
    code, _, err = await cli("--uri", "http://127.0.0.1:1/", "sessions", "alice")
    assert code == 4
    assert "invalid MongoDB URI" in err
    code, _, _ = await cli("--uri", uri, "frobnicate")
    assert code == 2
    code, _, err = await cli("--uri", uri, "--db", db, "sweep", "--before", "2026-01-01T00:00:00")
    assert code == 2
    assert "time zone" in err


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_server_that_is_down_exits_4_via_python_m() -> None:
    """``python -m asyncsession`` against a port nobody listens on fails fast with exit 4."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "asyncsession",
            "--uri",
            f"mongodb://127.0.0.1:{_closed_port()}/",
            "--timeout",
            "0.5",
            "sessions",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 4, done.stderr
    assert "cannot reach MongoDB" in done.stderr
