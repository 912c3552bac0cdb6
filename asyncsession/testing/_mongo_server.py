"""Start, kill and restart a local MongoDB-wire-compatible test server.

The test command installs the test server (``secantusdb``, a separate GPL process that is never a
dependency of this library) into its own virtualenv and points ``ASYNCSESSION_SECANTUSD`` at its
``secantusd-py`` launcher. `LocalMongoServer` runs it on loopback as a single-node replica
set on a free port with its own data directory, and can ``kill -9`` it and restart it on the same
data, for the fault tests.

Nothing here runs on an event loop: it is used from pytest fixtures and benchmark drivers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["LocalMongoServer", "find_server_executable"]

SERVER_ENV = "ASYNCSESSION_SECANTUSD"


def find_server_executable() -> str | None:
    """Return the test server launcher named by ``ASYNCSESSION_SECANTUSD``, or found on ``PATH``."""
    configured = os.environ.get(SERVER_ENV)
    if configured:
        return configured if Path(configured).exists() else None
    return shutil.which("secantusd-py")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalMongoServer:
    """A test server process on ``127.0.0.1`` with a data directory of its own."""

    def __init__(self, executable: str, *, standalone: bool = False):
        self.executable = executable
        self.standalone = standalone
        self.data_dir = tempfile.mkdtemp(prefix="asyncsession-mongo-")
        self.port = _free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path = Path(self.data_dir).with_suffix(".log")

    def uri(self, **options: str) -> str:
        """The replica-set URI of the server, with extra URI options appended."""
        base = [] if self.standalone else ["replicaSet=secantus"]
        query = "&".join([*base, *(f"{k}={v}" for k, v in options.items())])
        return f"mongodb://127.0.0.1:{self.port}/?{query}"

    @property
    def pid(self) -> int | None:
        """The process id of the running server."""
        return self._process.pid if self._process else None

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections."""
        if self._process is not None and self._process.poll() is None:
            return
        log = self._log_path.open("ab")
        self._process = subprocess.Popen(
            [
                self.executable,
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--storage-path",
                self.data_dir,
                "--log-level",
                "WARNING",
                *(["--standalone"] if self.standalone else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        from pymongo import MongoClient

        deadline = time.monotonic() + timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(
                    f"the test server exited with {self._process.returncode}; see {self._log_path}"
                )
            try:
                client: MongoClient[dict[str, object]] = MongoClient(
                    self.uri(), serverSelectionTimeoutMS=500
                )
                with client:
                    client.admin.command("ping")
                return
            except Exception as exc:  # not up yet; keep polling until the deadline
                last_error = exc
                time.sleep(0.1)
        raise RuntimeError(f"the test server did not start in {timeout}s: {last_error}")

    def kill(self) -> None:
        """``kill -9`` the server, as a crash would, and reap it."""
        if self._process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._process = None

    def freeze(self) -> None:
        """``SIGSTOP`` the server: it keeps its connections open and answers nothing."""
        assert self._process is not None, "the server is not running"
        os.killpg(self._process.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """``SIGCONT`` a frozen server: it answers again."""
        assert self._process is not None, "the server is not running"
        os.killpg(self._process.pid, signal.SIGCONT)

    def restart(self, timeout: float = 30.0) -> None:
        """Start the server again on the same port and data directory."""
        self.kill()
        self.start(timeout)

    def stop(self) -> None:
        """Stop the server and remove its data directory."""
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, signal.SIGCONT)  # a frozen server must see SIGTERM
                os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
            self._process = None
        shutil.rmtree(self.data_dir, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self._log_path.unlink()
