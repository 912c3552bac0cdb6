"""The README's main job runs offline and shows every part it promises."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest


def _run_demo(*args: str, **env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment.pop("MONGODB_URI", None)
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-m", "asyncsession._demo", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=environment,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _check(out: str) -> None:
    assert "via the built-in scripted server" in out
    for number in range(1, 5):
        assert f"[turn {number}] you:" in out
    assert "[calling MemoryCreate]" in out
    assert "[calling get_weather] [calling get_weather]" in out
    assert "It's 18°C, sunny in Paris right now." in out
    streamed = [int(n) for n in re.findall(r"\((\d+) chunks streamed\)", out)]
    assert len(streamed) == 4
    assert all(n > 5 for n in streamed)
    assert "[archived]" in out
    assert "Summarize the conversation we had so far. [synthetic]" in out
    assert re.search(r"summary turn: [1-9]\d* synthetic events", out)
    assert re.search(r"version: \d+", out)
    assert "the active view (what the model is sent next):" in out
    assert "long-term memory MEMORY.md: - [Coffee](coffee.md)" in out


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_the_demo_runs_offline_on_the_embedded_store() -> None:
    """The demo streams four turns with tools and memory, compacts, and prints the log."""
    out = _run_demo()
    assert "store: in-memory" in out
    _check(out)


def test_the_demo_runs_on_mongodb(mongo_uri: str) -> None:
    """With MONGODB_URI the demo keeps sessions and memories in MongoDB."""
    out = _run_demo(MONGODB_URI=mongo_uri)
    assert "store: MongoDB" in out
    assert "inspect it: asyncsession --db asyncsession_demo_" in out
    _check(out)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_the_demo_runs_on_the_responses_api() -> None:
    """With --api responses the same conversation goes through ResponsesClient."""
    out = _run_demo("--api", "responses")
    assert "ResponsesClient" in out
    _check(out)


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        pytest.param(
            "mongodb://demo:s3cret-pass@127.0.0.1:{port}/",
            "MongoDB at mongodb://demo:***@127.0.0.1:{port}/ is unreachable: connection refused",
            id="unreachable",
        ),
        pytest.param(
            "mongodb://demo:s3cret-pass@/",
            "invalid MongoDB URI mongodb://demo:***@/: Empty host",
            id="malformed",
        ),
    ],
)
def test_a_mongodb_it_cannot_use_stops_the_demo_with_one_line(uri: str, says: str) -> None:
    """`scripts/demo` with such a `MONGODB_URI`: exit 1 before the first turn, and one line on
    standard error saying what failed, where (no password) and what to set."""
    port = _closed_port()
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    environment["MONGODB_URI"] = uri.format(port=port)
    done = subprocess.run(
        [sys.executable, "-m", "asyncsession._demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=environment,
    )

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: the demo cannot start: " + says.format(port=port))
    assert "Set MONGODB_URI to the URI of a MongoDB server that answers" in done.stderr
    assert "s3cret-pass" not in done.stderr
