"""The example started with a MongoDB it cannot use, as an OS process each usual way: one line
says what failed, where (the URI without its password) and what to set, and the process exits
non-zero, instead of a driver traceback."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest
from example_support import ROOT, STARTUP_BOUND, example_commands

PASSWORD = "s3cret-pass"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(command: list[str], uri: str) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ASYNCSESSION_EXAMPLE_", "OPENAI_")) and k != "MONGODB_URI"
    }
    return subprocess.run(
        command,
        cwd=ROOT,
        env={**environment, "MONGODB_URI": uri},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=STARTUP_BOUND,
        check=False,
    )


def _failure_lines(output: str) -> list[str]:
    """Every line that mentions an error, MongoDB or the driver, but for uvicorn's closing
    "Application startup failed. Exiting."."""
    words = ("error", "mongodb", "pymongo")
    return [
        line
        for line in output.splitlines()
        if "Application startup failed" not in line and any(w in line.lower() for w in words)
    ]


@pytest.mark.parametrize("mode", list(example_commands()))
def test_an_unreachable_mongodb_stops_the_start_with_one_line(mode: str) -> None:
    """A loopback port nobody listens on: the lifespan's check fails within the store's
    timeouts, and the start ends non-zero with one line naming the URI and MONGODB_URI."""
    port = _closed_port()
    done = _start(example_commands()[mode], f"mongodb://app:{PASSWORD}@127.0.0.1:{port}/")
    output = done.stdout + done.stderr

    assert done.returncode != 0, output
    assert "Traceback" not in output
    assert PASSWORD not in output
    lines = _failure_lines(output)
    assert len(lines) == 1, output
    (line,) = lines
    assert f"MongoDB at mongodb://app:***@127.0.0.1:{port}/ did not answer" in line
    assert "Set MONGODB_URI to the URI of a MongoDB server that answers" in line
    assert "Uvicorn running" not in output


def test_a_malformed_uri_stops_the_start_with_one_line() -> None:
    done = _start(example_commands()["uvicorn-app"], f"mongodb://app:{PASSWORD}@/")
    output = done.stdout + done.stderr

    assert done.returncode != 0, output
    assert "Traceback" not in output
    assert PASSWORD not in output
    (line,) = _failure_lines(output)
    assert "MONGODB_URI is not a valid MongoDB URI (mongodb://app:***@/)" in line
