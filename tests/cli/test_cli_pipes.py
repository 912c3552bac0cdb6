"""The command line in pipes, as a real OS process on real OS pipes: a reader that goes away
ends the command quietly with exit 0 (as `git` and `jq` do), `-o -` is standard output,
warnings never reach standard output, and an unknown event type is bad usage."""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest

from asyncsession import (
    AssistantMessage,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.cli._command import KNOWN_TYPES
from asyncsession.testing._mongo_server import LocalMongoServer

BIG = 3_000
"""Events of the big session: its table and its export are far larger than a pipe's buffer
(64 KiB on Linux), so the command is still writing when the reader goes away."""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("MONGODB_URI", "PYTHONWARNINGS")}


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m asyncsession ARGV`, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "asyncsession", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=_env(),
    )


def _into_closed_pipe(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m asyncsession ARGV` with standard output on a pipe nobody reads any more: the
    read end is closed before the command starts, so its first write (or its last flush, at
    exit) meets the closed pipe."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "asyncsession", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout,
            check=False,
            env=_env(),
        )
    finally:
        os.close(write_end)


def _pipeline(command: str, *argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """`python -m asyncsession ARGV | COMMAND` in bash with `pipefail`: the pipeline's status
    (the command line's, as `head` exits 0), the pipeline's output and the command line's
    standard error."""
    cli = shlex.join([sys.executable, "-m", "asyncsession", *argv])
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {cli} | {command}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=_env(),
        cwd=cwd,
    )
    return done.returncode, done.stdout, done.stderr


@pytest.fixture
async def big(seeded: tuple[str, str]) -> tuple[str, str]:
    """The seeded database, plus a session `big` of `BIG` events."""
    uri, db = seeded
    async with MongoSessionRepository.from_uri(uri, db) as repo:
        await repo.save(Session(id="big", user_id="carol"))
        events: list[SessionEvent] = []
        for turn in range(BIG // 2):
            events.append(SessionEvent(session_id="big", message=UserMessage(text=f"q{turn}")))
            events.append(
                SessionEvent(session_id="big", message=AssistantMessage(text=f"answer {turn}"))
            )
        for start in range(0, len(events), 500):
            await repo.append_events("big", events[start : start + 500])
    return uri, db


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("show", "big"), id="show"),
        pytest.param(("--json", "show", "big"), id="show-json"),
        pytest.param(("export", "big", "-o", "-"), id="export"),
        pytest.param(("show", "long"), id="show-small"),
        pytest.param(("sessions", "alice"), id="sessions-small"),
    ],
)
def test_head_1_takes_the_first_line_and_the_command_ends_with_0(
    big: tuple[str, str], argv: tuple[str, ...]
) -> None:
    """`asyncsession ... | head -1`: the first line arrives, the command exits 0 and says
    nothing on standard error: no "broken pipe", no traceback."""
    uri, db = big
    code, out, err = _pipeline("head -1", "--uri", uri, "--db", db, *argv)

    assert (code, err) == (0, "")
    assert out.count("\n") == 1
    first = out.strip()
    if "--json" in argv:
        assert first.startswith('{"version": ')
    elif argv[0] == "export":
        assert json.loads(first)["message"]["text"] == "q0"
    else:
        assert first.split()[:2] == (
            ["SESSION", "CREATED"] if argv[0] == "sessions" else ["#", "TIME"]
        )


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(("show", "big"), id="show-big"),
        pytest.param(("show", "long"), id="show-small"),
        pytest.param(("--json", "sessions", "alice"), id="sessions-json"),
        pytest.param(("export", "long", "-o", "-"), id="export"),
        pytest.param(("worker", "--grace", "5"), id="worker"),
        pytest.param(("worker", "--json", "--status"), id="worker-status"),
    ],
)
def test_a_pipe_closed_before_the_first_write_ends_the_command_with_0(
    big: tuple[str, str], argv: tuple[str, ...]
) -> None:
    """A small output is written only when the interpreter flushes at exit, a big one while the
    command runs: either way a closed pipe ends it with 0 and nothing on standard error. The
    worker, whose reader has gone, stops as on SIGTERM."""
    uri, db = big
    done = _into_closed_pipe("--uri", uri, "--db", db, *argv)

    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    "argv",
    [("--help",), ("--version",), ("completion", "bash"), ("show", "--help")],
    ids=["help", "version", "completion", "command-help"],
)
def test_output_without_a_server_into_a_closed_pipe_ends_with_0(argv: tuple[str, ...]) -> None:
    done = _into_closed_pipe(*argv)

    assert (done.returncode, done.stderr) == (0, "")


def test_export_dash_writes_the_events_to_standard_output(
    seeded: tuple[str, str], tmp_path: Path
) -> None:
    """`-o -` is standard output, not a file named `-`; the summary goes to standard error."""
    uri, db = seeded
    code, out, err = _pipeline(
        "cat", "--uri", uri, "--db", db, "export", "long", "-o", "-", cwd=tmp_path
    )

    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert len(events) == 13
    assert events[0]["message"]["text"] == "question 0"
    assert err == "exported 13 event(s) of long\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("is_json", [True, False], ids=["json", "text"])
def test_a_driver_warning_stays_off_standard_output(seeded: tuple[str, str], is_json: bool) -> None:
    """A URI that repeats an option makes PyMongo warn. Under `--json` standard output is
    exactly one JSON document and the warning is one JSON object on standard error; without
    it, one `warning:` line there (not Python's two-line source excerpt)."""
    uri, db = seeded
    repeated = uri + ("&" if "?" in uri else "/?") + "w=majority"
    flags = ("--json",) if is_json else ()
    done = _run("--uri", repeated, "--db", db, *flags, "sessions", "alice")

    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines, "the repeated URI option no longer makes the driver warn: pick another"
    if is_json:
        assert [s["id"] for s in json.loads(done.stdout)] == ["long", "short"]
        warnings = [json.loads(line)["warning"] for line in lines]
        assert {"source": "UserWarning", "message": "Duplicate URI option 'w'."} in warnings
    else:
        assert done.stdout.splitlines()[-1] == "2 session(s) of alice"
        assert "warning: Duplicate URI option 'w'. (UserWarning)" in lines
        assert all(line.startswith("warning: ") for line in lines)


@pytest.mark.parametrize("is_json", [True, False], ids=["json", "text"])
def test_an_unknown_event_type_is_bad_usage_naming_the_known_ones(
    seeded: tuple[str, str], is_json: bool
) -> None:
    """`show --type bogus` exits 2 before it reads anything, naming every type the library
    defines and the rule for custom ones, instead of an empty table."""
    uri, db = seeded
    flags = ("--json",) if is_json else ()
    done = _run("--uri", uri, "--db", db, *flags, "show", "long", "--type", "bogus")

    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1
    message = json.loads(done.stderr)["error"]["message"] if is_json else done.stderr
    assert "unknown event type 'bogus'" in message
    for kind in KNOWN_TYPES:
        assert kind.name.lower() in message
    assert "custom type by its full name with its prefix, e.g. ACME.AUDIT" in message


def test_a_custom_type_is_given_by_its_full_name_in_any_case(seeded: tuple[str, str]) -> None:
    uri, db = seeded
    for spelled in ("OPS.NOTE", "ops.note"):
        done = _run("--uri", uri, "--db", db, "--json", "show", "long", "--type", spelled)
        assert done.returncode == 0, done.stderr
        assert [e["payload"] for e in json.loads(done.stdout)["events"]] == [{"by": "ops"}]


def _line_within(stream: IO[str], seconds: float) -> str:
    """The next line of a child's stream, failing the test if none comes in time."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout=seconds):
            pytest.fail(f"no line within {seconds} s")
    return stream.readline()


def test_the_workers_log_lines_are_json_lines_on_stderr_while_mongodb_is_down(
    private_mongo_server: LocalMongoServer,
) -> None:
    """`worker --json` whose server goes down: each failure it logs is one JSON object on
    standard error (no traceback), standard output keeps its JSON lines, and SIGTERM still
    stops it with 0."""
    server = private_mongo_server
    argv = ["--uri", server.uri(), "--db", "down", "--timeout", "0.5", "--json", "worker"]
    worker = subprocess.Popen(
        [sys.executable, "-m", "asyncsession", *argv, "--wake", "poll", "--poll-interval", "0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert worker.stdout is not None
        assert worker.stderr is not None
        assert json.loads(_line_within(worker.stdout, 60))["state"] == "running"
        server.kill()
        logged = json.loads(_line_within(worker.stderr, 60))
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()

    assert worker.returncode == 0
    assert logged["warning"]["source"] == "asyncsession.compaction.mongo_worker"
    failed = "(Claiming a compaction job|Reading the compaction queue) failed"
    assert re.match(
        f"{failed}: StorageUnavailable: MongoDB is unreachable", logged["warning"]["message"]
    )
    for line in err.splitlines():
        assert set(json.loads(line)) <= {"warning", "error"}, line
    assert [json.loads(line)["state"] for line in out.splitlines()] == ["stopping", "stopped"]
