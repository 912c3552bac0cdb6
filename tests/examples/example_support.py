"""Helpers of the example tests: the app under a real uvicorn, in this process or in another."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from httpx_sse import ServerSentEvent, aconnect_sse

ROOT = Path(__file__).resolve().parent.parent.parent
BIN = Path(sys.executable).parent
ALICE = {"x-user-id": "alice"}
STARTUP_BOUND = 60.0
"""Seconds a process may take to start serving on a loaded two-core machine."""
_RUNNING = re.compile(r"Uvicorn running on http://[0-9.]+:(\d+)")
_EXAMPLE_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "MONGODB_URI")


@asynccontextmanager
async def serving(app: FastAPI) -> AsyncGenerator[httpx.AsyncClient]:
    """The app on a real loopback socket under uvicorn (its lifespan run), and a client for it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve(sockets=[listener]))
    try:  # the socket listens already: a request waits in its backlog until uvicorn serves
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            yield client
    finally:
        web.should_exit = True
        await task
        listener.close()


def assert_problem(response: httpx.Response, status: int, error: str | None = None) -> Any:
    """The response is an RFC 9457 problem document of that status (and of our error type)."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert set(body) >= {"type", "title", "status", "detail", "instance"}
    assert body["status"] == status
    assert body["title"]
    assert body["type"] == (f"urn:asyncsession:error:{error}" if error else "about:blank")
    path = response.request.url.path
    assert body["instance"] == path if len(path) <= 256 else body["instance"].startswith("urn:")
    return body


async def read_sse(
    client: httpx.AsyncClient,
    path: str,
    message: str,
    headers: Mapping[str, str] = ALICE,
) -> tuple[httpx.Response, list[ServerSentEvent]]:
    """POST and read the stream with an SSE client, as a browser's EventSource parses it."""
    async with aconnect_sse(
        client, "POST", path, json={"message": message}, headers=dict(headers)
    ) as source:
        return source.response, [event async for event in source.aiter_sse()]


@dataclass(slots=True)
class AppProcess:
    """The example started as an OS process; ``output`` collects what it printed."""

    process: asyncio.subprocess.Process
    base_url: str = ""
    output: list[str] = field(default_factory=list[str])

    @property
    def text(self) -> str:
        return "".join(self.output)


async def _collect(app: AppProcess, port: asyncio.Future[int]) -> None:
    stream = app.process.stdout
    assert stream is not None
    async for raw in stream:
        line = raw.decode(errors="replace")
        app.output.append(line)
        found = _RUNNING.search(line)
        if found and not port.done():
            port.set_result(int(found.group(1)))
    if not port.done():
        port.set_exception(RuntimeError("the app exited before serving:\n" + app.text))


@asynccontextmanager
async def app_process(
    command: Sequence[str], env: Mapping[str, str] | None = None
) -> AsyncGenerator[AppProcess]:
    """Start the example from the repository root with ``command``, offline unless ``env`` says
    otherwise; yield once it serves; stop it with Ctrl-C (SIGINT) and check it shut down
    cleanly: exit status 0, the lifespan's shutdown complete, no traceback, no unclosed
    resource."""
    environment = {k: v for k, v in os.environ.items() if k not in _EXAMPLE_ENV}
    environment = {
        k: v for k, v in environment.items() if not k.startswith("ASYNCSESSION_EXAMPLE_")
    }
    environment |= {"PYTHONWARNINGS": "always::ResourceWarning", "PYTHONUNBUFFERED": "1"}
    environment |= dict(env or {})
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=ROOT,
        env=environment,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    app = AppProcess(process)
    port: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    reader = asyncio.create_task(_collect(app, port))
    try:
        async with asyncio.timeout(STARTUP_BOUND):
            app.base_url = f"http://127.0.0.1:{await port}"
        yield app
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(STARTUP_BOUND):
            code = await process.wait()
            await reader
        assert code == 0, app.text
        assert "Application shutdown complete" in app.text, app.text
        for sign in ("Traceback", "ResourceWarning", "Unclosed", "Task was destroyed"):
            assert sign not in app.text, app.text
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await reader


def example_commands() -> dict[str, list[str]]:
    """The four usual ways to start the example, each on a free loopback port."""
    python = sys.executable
    local = ["--host", "127.0.0.1", "--port", "0"]
    return {
        "uvicorn-app": [python, "-m", "uvicorn", "examples.fastapi_app:app", *local],
        "uvicorn-factory": [
            python,
            "-m",
            "uvicorn",
            "--factory",
            "examples.fastapi_app:create_app",
            *local,
        ],
        "fastapi-run": [str(BIN / "fastapi"), "run", "examples/fastapi_app.py", *local],
        "python": [python, "examples/fastapi_app.py", *local],
    }
