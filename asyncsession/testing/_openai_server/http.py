"""Just enough HTTP/1.1 for the SDK: request parsing, JSON and SSE responses, one connection."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import http
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .script import MAX_BODY_BYTES, MAX_HEAD_BYTES, READ_SIZE, ScriptedReply

__all__ = [
    "BadRequest",
    "Connection",
    "HttpRequest",
    "HttpResponse",
    "Outcome",
    "State",
    "head",
    "json_response",
    "sse_response",
]


class State(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class Outcome(enum.Enum):
    KEEP_ALIVE = "keep-alive"
    """The response was sent completely and the connection can serve another request."""
    CLOSE = "close"
    """The response was sent (or deliberately cut short); close the connection."""
    DISCONNECTED = "disconnected"
    """The client went away before the response was completely sent."""


class BadRequest(Exception):
    """The request could not be parsed; answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        tokens = {token.strip().lower() for token in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpResponse:
    """Bytes to send: ``prefix`` at once, then ``parts`` (the chunks), then ``suffix``."""

    prefix: bytes
    parts: Sequence[bytes]
    suffix: bytes
    keep_alive: bool


def head(status: int, headers: Mapping[str, str]) -> bytes:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def json_response(
    status: int,
    body: bytes,
    *,
    keep_alive: bool,
    head_only: bool = False,
    extra: Mapping[str, str] | None = None,
) -> HttpResponse:
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "x-request-id": f"req_{secrets.token_hex(12)}",
        "connection": "keep-alive" if keep_alive else "close",
        **(extra or {}),
    }
    message = head(status, headers) + (b"" if head_only else body)
    return HttpResponse(prefix=b"", parts=[message], suffix=b"", keep_alive=keep_alive)


def sse_response(
    events: Sequence[bytes], *, keep_alive: bool, chunked: bool, extra: Mapping[str, str]
) -> HttpResponse:
    headers = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-request-id": f"req_{secrets.token_hex(12)}",
    }
    if chunked:
        headers["transfer-encoding"] = "chunked"
        headers["connection"] = "keep-alive" if keep_alive else "close"
        parts = [f"{len(event):x}\r\n".encode() + event + b"\r\n" for event in events]
        return HttpResponse(
            prefix=head(200, {**headers, **extra}),
            parts=parts,
            suffix=b"0\r\n\r\n",
            keep_alive=keep_alive,
        )
    # HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
    headers["connection"] = "close"
    return HttpResponse(
        prefix=head(200, {**headers, **extra}), parts=events, suffix=b"", keep_alive=False
    )


class Connection:
    """One client connection: a read buffer over the stream, and the writer."""

    def __init__(
        self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.number = number
        self._reader = reader
        self.writer = writer
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        """Read more bytes into the buffer; ``False`` once the peer has closed."""
        if self._eof:
            return False
        try:
            data = await self._reader.read(READ_SIZE)
        except OSError:
            data = b""
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    async def wait_peer_closed(self) -> None:
        """Return when the peer closes; bytes that arrive meanwhile stay buffered."""
        while await self._fill():
            pass

    async def _read_line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise BadRequest(400, "line too long")
            if not await self._fill():
                raise BadRequest(400, "connection closed mid-request")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    async def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not await self._fill():
                raise BadRequest(400, "connection closed mid-body")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_request(self) -> HttpRequest | None:
        """Read one request; ``None`` when the peer closed between requests."""
        while True:
            # RFC 9112 2.2: ignore empty lines before a request line.
            while self._buffer.startswith(b"\r\n"):
                del self._buffer[:2]
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buffer) > MAX_HEAD_BYTES:
                raise BadRequest(431, "request head too large")
            if not await self._fill():
                if self._buffer:
                    raise BadRequest(400, "connection closed mid-request")
                return None
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[: end + 4]
        request_line, *header_lines = head.split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise BadRequest(400, f"malformed request line {request_line!r}")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise BadRequest(505, f"unsupported HTTP version {version!r}")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise BadRequest(400, f"malformed header line {line!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if headers.get("expect", "").lower() == "100-continue":
            await self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await self._read_body(headers)
        return HttpRequest(
            method=method, target=target, version=version, headers=headers, body=body
        )

    async def _read_body(self, headers: Mapping[str, str]) -> bytes:
        encoding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if encoding is not None:
            if length is not None:
                raise BadRequest(400, "both Transfer-Encoding and Content-Length")
            if encoding.lower() != "chunked":
                raise BadRequest(501, f"unsupported transfer encoding {encoding!r}")
            return await self._read_chunked()
        if length is None:
            return b""
        if not length.isdigit():
            raise BadRequest(400, f"bad Content-Length {length!r}")
        if int(length) > MAX_BODY_BYTES:
            raise BadRequest(413, "request body too large")
        return await self._read_exactly(int(length))

    async def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_field = (await self._read_line()).split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise BadRequest(400, f"bad chunk size {size_field!r}") from None
            if size == 0:
                while await self._read_line():  # trailers, up to the blank line
                    pass
                return bytes(body)
            if len(body) + size > MAX_BODY_BYTES:
                raise BadRequest(413, "request body too large")
            body += await self._read_exactly(size)
            if await self._read_exactly(2) != b"\r\n":
                raise BadRequest(400, "chunk not followed by CRLF")

    async def write(self, data: bytes) -> None:
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def send(self, response: HttpResponse, reply: ScriptedReply | None) -> Outcome:
        """Send a response, applying the reply's pause and drop controls chunk by chunk."""
        pause_after = reply.pause_after if reply else None
        drop_after = reply.drop_after if reply else None
        gate = reply.gate if reply else None
        parts = [*response.parts, response.suffix]
        try:
            await self.write(response.prefix)
            for position, part in enumerate(parts):
                if position == drop_after:
                    return Outcome.CLOSE
                if position == pause_after and gate is not None:
                    await gate.wait()
                await self.write(part)
        except ConnectionError:
            return Outcome.DISCONNECTED
        return Outcome.KEEP_ALIVE if response.keep_alive else Outcome.CLOSE

    async def close(self, *, abort: bool) -> None:
        if abort:
            self.writer.transport.abort()
        else:
            self.writer.close()
        # A reset from the peer means the connection is closed either way.
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()
