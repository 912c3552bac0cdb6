"""What encryption at rest costs a turn: plain and encrypted sessions, interleaved in one run.

``python -m benchmarks.encryption [--rounds R] [--sessions C] [--turns T] [--history H]``
prints Markdown tables. Two MongoDB session stores on one server, one plain and one encrypting
every event with the data key of the session's owner (a local master key, the key vault on the
same server), serve the same turns:

- **store turn**: the session's side of a chat turn as the docs show it: a snapshot of the
  newest 20 messages, then the question and the reply in one commit at the version read
  (``read_snapshot`` + ``append_events``);
- **chat turn**: ``ChatClient.call`` with session memory (``store_question="with_reply"``),
  the model an in-process stub behind the real ``openai`` client (no network).

Each round runs every (turn, store) cell once, the plain and the encrypted store of a turn
back to back in an order that alternates every round, so drift hits both alike: ``C``
sessions at once, ``T`` turns each, on sessions with ``H`` messages of history. Reported:
turns per second (median over the rounds) and the cost of encryption; the commands a warm
turn sends, by name, for each store (PyMongo command monitoring: the targets are no extra
command, the data key being cached in the process); bytes stored per message (the commit
documents' BSON, and their bodies alone), plain and encrypted; and the time to encrypt and
decrypt one body with a warm key (the encrypted store decrypts only what it has not seen in
the last ``key_cache_ttl``: ``EncryptionOptions.opened_cache_bytes``).

The test server (``ASYNCSESSION_SECANTUSD``) is started unless ``MONGODB_URI`` is set; the URI
gets ``w=majority&journal=true&retryWrites=false`` unless it sets them (as ``python -m
benchmarks`` does). Nothing here is a timed test: ``tests/benchmarks/test_encryption.py`` runs
it at a tiny size and checks the command counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import bson
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.openai import ChatClient
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

from ._commands import CommandCounter
from .adapters._stub_model import STUB_MODEL, StubModel

__all__ = ["STORES", "TURNS", "Result", "main", "measure", "render", "with_uri_options"]

STORES = ("plain", "encrypted")
TURNS = ("store turn", "chat turn")
WINDOW = 20
URI_OPTIONS = {"w": "majority", "journal": "true", "retryWrites": "false"}
"""Journaled majority writes, as the tests and ``python -m benchmarks`` use."""
QUESTION = "What did my doctor say about the dose of the new prescription? " * 2
REPLY = "Take one tablet twice a day with food, and call if the rash comes back. " * 3
USER_ID = "bench-patient"


def with_uri_options(uri: str) -> str:
    """``uri`` with `URI_OPTIONS` added where it does not set them."""
    parts = urlsplit(uri)
    query = dict(parse_qsl(parts.query))
    for key, value in URI_OPTIONS.items():
        query.setdefault(key, value)
    return urlunsplit(parts._replace(query=urlencode(query)))


@dataclass
class Result:
    """One run's figures."""

    uri: str
    rounds: int
    sessions: int
    turns: int
    history: int
    rates: dict[tuple[str, str], list[float]] = field(
        default_factory=dict[tuple[str, str], list[float]]
    )
    """(turn, store) -> turns per second, one per round."""
    commands: dict[tuple[str, str], Counter[str]] = field(
        default_factory=dict[tuple[str, str], Counter[str]]
    )
    """(turn, store) -> the commands of one warm turn, by name."""
    bytes_per_message: dict[str, tuple[float, float]] = field(
        default_factory=dict[str, tuple[float, float]]
    )
    """store -> (commit bytes per message, body bytes per message)."""
    crypto_us: dict[str, float] = field(default_factory=dict[str, float])
    """'encrypt' / 'decrypt' -> microseconds per message body, warm key, no value cached."""

    def median(self, turn: str, store: str) -> float:
        """The median turns per second of a cell."""
        return statistics.median(self.rates[(turn, store)])

    def cost(self, turn: str) -> float:
        """The throughput encryption costs a turn, in percent (negative: none measured)."""
        return (1 - self.median(turn, "encrypted") / self.median(turn, "plain")) * 100


class _Side:
    """One store (plain or encrypted) on its own database, with its sessions."""

    def __init__(
        self, client: AsyncMongoClient[Any], name: str, encryption: UserKeys | None
    ) -> None:
        self.database = client[name]
        self.repository = MongoSessionRepository(self.database, encryption=encryption)
        self.service = DefaultSessionService(self.repository)
        self.model = StubModel()
        self.chat = ChatClient(
            self.model.client,
            model=STUB_MODEL,
            sessions=self.service,
            store_question="with_reply",
            event_filter=EventFilter(last_n=WINDOW),
        )
        self.turn = 0

    async def seed(self, sessions: int, history: int) -> list[str]:
        await self.repository.ensure_indexes()
        ids = [f"s{i}" for i in range(sessions)]
        for session_id in ids:
            await self.repository.save(Session(id=session_id, user_id=USER_ID))
            for start in range(0, history, 2):
                await self.repository.append_events(
                    session_id,
                    [
                        SessionEvent(
                            session_id=session_id, message=UserMessage(text=f"{start} {QUESTION}")
                        ),
                        SessionEvent(session_id=session_id, message=AssistantMessage(text=REPLY)),
                    ],
                )
        return ids

    async def store_turn(self, session_id: str) -> None:
        while True:
            snapshot = await self.repository.read_snapshot(session_id, EventFilter(last_n=WINDOW))
            assert snapshot is not None
            batch = [
                SessionEvent(session_id=session_id, message=UserMessage(text=QUESTION)),
                SessionEvent(session_id=session_id, message=AssistantMessage(text=REPLY)),
            ]
            if await self.repository.append_events(session_id, batch, snapshot.version):
                return

    async def chat_turn(self, session_id: str) -> None:
        self.turn += 1
        label = f"t{self.turn % 1000}"
        self.model.replies[label] = REPLY
        reply = await self.chat.call(
            f"[{label}] {QUESTION}", session_id=session_id, user_id=USER_ID
        )
        assert reply.text == REPLY

    def runner(self, turn: str) -> Callable[[str], Awaitable[None]]:
        return self.store_turn if turn == "store turn" else self.chat_turn

    async def bytes_per_message(self) -> tuple[float, float]:
        raw = self.database.get_collection(
            "session_commits", codec_options=CodecOptions(document_class=RawBSONDocument)
        )
        commits = bodies = messages = 0
        async for doc in raw.find({}):
            commits += len(doc.raw)
            for entry in doc["events"]:
                messages += 1
                bodies += len(bson.encode({"body": entry["body"]}))
        return commits / messages, bodies / messages

    async def aclose(self) -> None:
        await self.model.aclose()
        await self.repository.aclose()


async def _cell(side: _Side, turn: str, ids: list[str], turns: int) -> float:
    run = side.runner(turn)

    async def session(session_id: str) -> None:
        for _ in range(turns):
            await run(session_id)

    start = time.perf_counter()
    await asyncio.gather(*(session(session_id) for session_id in ids))
    return len(ids) * turns / (time.perf_counter() - start)


async def _crypto(keys: UserKeys, ops: int) -> dict[str, float]:
    body = {"message": {"text": REPLY}}
    encrypted = await keys.encrypt(USER_ID, body)
    start = time.perf_counter()
    for _ in range(ops):
        encrypted = await keys.encrypt(USER_ID, body)
    middle = time.perf_counter()
    for _ in range(ops):
        await keys.decrypt(USER_ID, encrypted)
    end = time.perf_counter()
    return {"encrypt": (middle - start) / ops * 1e6, "decrypt": (end - middle) / ops * 1e6}


async def measure(
    uri: str, *, rounds: int = 5, sessions: int = 8, turns: int = 10, history: int = 20
) -> Result:
    """Run the interleaved comparison on the server at ``uri`` (URI options added)."""
    uri = with_uri_options(uri)
    result = Result(uri=uri, rounds=rounds, sessions=sessions, turns=turns, history=history)
    counter = CommandCounter()
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True, event_listeners=[counter])
    stamp = uuid.uuid4().hex[:8]
    names = {store: f"bench_enc_{stamp}_{store}" for store in STORES}
    setting = EncryptionOptions.local(
        EncryptionOptions.generate_local_key(),
        key_vault_namespace=f"{names['encrypted']}.keyvault",
    )
    keys = UserKeys(setting, client)
    sides = {
        "plain": _Side(client, names["plain"], None),
        "encrypted": _Side(client, names["encrypted"], keys),
    }
    try:
        ids = {store: await side.seed(sessions, history) for store, side in sides.items()}
        for turn in TURNS:  # warm both (the key, the owners, the connections), then count
            for store, side in sides.items():
                await side.runner(turn)(ids[store][0])
                with counter.measure() as seen:
                    await side.runner(turn)(ids[store][0])
                result.commands[(turn, store)] = Counter(seen.by_name)
        for index in range(rounds):
            for turn in TURNS:
                order = STORES if index % 2 == 0 else STORES[::-1]
                for store in order:
                    rate = await _cell(sides[store], turn, ids[store], turns)
                    result.rates.setdefault((turn, store), []).append(rate)
        for store, side in sides.items():
            result.bytes_per_message[store] = await side.bytes_per_message()
        uncached = EncryptionOptions.local(
            setting.local_keys()["local"],
            key_vault_namespace=setting.key_vault_namespace,
            opened_cache_bytes=0,
        )
        result.crypto_us = await _crypto(UserKeys(uncached, client), 200)
    finally:
        for side in sides.values():
            await side.aclose()
        for name in names.values():
            await client.drop_database(name)
        await client.close()
    return result


def _commands(counted: Counter[str]) -> str:
    return ", ".join(f"{name} x{n}" for name, n in sorted(counted.items())) or "none"


def render(result: Result) -> str:
    """The figures as Markdown."""
    lines = [
        "### Encryption at rest: plain and encrypted turns, interleaved",
        "",
        f"Server: `{result.uri}`; {result.rounds} rounds of {result.sessions} sessions at once "
        f"x {result.turns} turns each, on {result.history} messages of history; a "
        f"{WINDOW}-message window.",
        "",
        "| turn | plain turns/s | encrypted turns/s | cost | commands per warm turn "
        "(plain) | (encrypted) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for turn in TURNS:
        lines.append(
            f"| {turn} | {result.median(turn, 'plain'):.1f} | "
            f"{result.median(turn, 'encrypted'):.1f} | {result.cost(turn):+.1f} % | "
            f"{_commands(result.commands[(turn, 'plain')])} | "
            f"{_commands(result.commands[(turn, 'encrypted')])} |"
        )
    lines += [
        "",
        "| store | commit bytes per message | body bytes per message |",
        "|---|---:|---:|",
    ]
    for store in STORES:
        commit, body = result.bytes_per_message[store]
        lines.append(f"| {store} | {commit:.1f} | {body:.1f} |")
    lines += [
        "",
        f"One message body with a warm key: encrypt {result.crypto_us['encrypt']:.1f} us, "
        f"decrypt {result.crypto_us['decrypt']:.1f} us (a value not decrypted before; a "
        "value the process has seen lately is not decrypted again: `opened_cache_bytes`).",
        "",
        "Throughput per round (turns/s): "
        + "; ".join(
            f"{turn} {store} " + ", ".join(f"{rate:.0f}" for rate in result.rates[(turn, store)])
            for turn in TURNS
            for store in STORES
        ),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encryption", description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--history", type=int, default=20)
    args = parser.parse_args(argv)
    sizes = {
        "rounds": args.rounds,
        "sessions": args.sessions,
        "turns": args.turns,
        "history": args.history,
    }
    uri = os.environ.get("MONGODB_URI")
    if uri:
        print(render(asyncio.run(measure(uri, **sizes))))
        return
    executable = find_server_executable()
    if executable is None:
        raise SystemExit("set MONGODB_URI or ASYNCSESSION_SECANTUSD")
    server = LocalMongoServer(executable)
    server.start()
    try:
        print(render(asyncio.run(measure(server.uri(), **sizes))))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
