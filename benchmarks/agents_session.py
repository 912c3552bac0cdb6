"""Commands per OpenAI Agents SDK turn: ``AgentsSession`` next to the SDK's ``MongoDBSession``.

``python -m benchmarks.agents_session [--turns N]`` prints Markdown tables. Both sessions serve
the same ``Runner.run`` turns of an agent with an in-process scripted model (the SDK's own
``agents.testing.ScriptedModel``, so no model call is on the wire), interleaved turn by turn, on
one server, each through its own PyMongo client with command monitoring, both with
``w=majority, journal=true`` in the URI (``AgentsSession`` on ``MongoSessionRepository`` uses that
write concern whatever the URI says). Counted are commands, connection housekeeping and cursor
continuations left out (see ``benchmarks/_commands.py``).

1. **Commands per turn**: the first turn of a new session, a steady text turn (the mean over
   ``N`` turns), and a tool turn (a function call, its output and the reply: two model calls),
   with the commands by name.
2. **A lost acknowledgement**: ``add_items`` of a model reply whose write lands but whose caller
   sees an error, then the caller retries the same call. For ``AgentsSession`` the error is
   injected by a service that raises after its append returned; for ``MongoDBSession``, which
   has no layer to inject into, the first call simply returns and the retry is a second call:
   what the server sees is the same in both cases. Reported: the copies of the reply stored.

The test server (``ASYNCSESSION_SECANTUSD``) is started unless ``MONGODB_URI`` is set. The peer is
installed by ``scripts/bench`` (``.venv-bench``); without it only ``AgentsSession`` is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import sys
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.memory import Session
from agents.testing import ScriptedModel, assistant_message, function_call
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository, SessionEvent
from asyncsession.exceptions import StorageError
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.repository import Lease, SessionRepository

from ._commands import CommandCounter

__all__ = ["OURS", "PEER", "SystemResult", "main", "measure", "peer_available"]

OURS = "asyncsession AgentsSession"
PEER = "openai-agents MongoDBSession"


@function_tool
def lookup(order: str) -> str:
    """The status of an order."""
    return f"order {order} shipped"


def peer_available() -> bool:
    """Whether the SDK's ``MongoDBSession`` can be imported here."""
    return importlib.util.find_spec("agents.extensions.memory.mongodb_session") is not None


@dataclass(slots=True)
class SystemResult:
    """What one system cost."""

    first_turn: Counter[str] = field(default_factory=Counter[str])
    """Commands by name of the first turn of a new session."""
    steady_turns: list[int] = field(default_factory=list[int])
    """Commands of each steady text turn."""
    steady_by_name: Counter[str] = field(default_factory=Counter[str])
    """Commands by name over all steady text turns."""
    tool_turn: Counter[str] = field(default_factory=Counter[str])
    """Commands by name of one tool turn."""
    copies_after_lost_ack: int = 0
    """How many copies of the reply the lost-acknowledgement retry left stored."""

    @property
    def steady_mean(self) -> float:
        """The mean commands of a steady text turn."""
        return statistics.fmean(self.steady_turns) if self.steady_turns else 0.0


class _LostAck(DefaultSessionService):
    """Raises once, after an append has returned: the write landed, the ack is lost."""

    def __init__(self, repository: SessionRepository) -> None:
        super().__init__(repository)
        self.armed = False

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        stored = await super().append_events(session_id, events, expected_version, lease=lease)
        if self.armed:
            self.armed = False
            raise StorageError("injected: the acknowledgement was lost")
        return stored


@dataclass(slots=True)
class _System:
    name: str
    client: AsyncMongoClient[dict[str, Any]]
    counter: CommandCounter
    make: Callable[[str], Session]
    lost_ack: _LostAck | None = None


def _text_agent(turns: int) -> Agent[Any]:
    model = ScriptedModel([[assistant_message(f"Reply {n}: noted.")] for n in range(turns)])
    return Agent(name="assistant", model=model)


def _tool_agent() -> Agent[Any]:
    model = ScriptedModel(
        [
            [function_call("lookup", {"order": "42"}, call_id="call_42")],
            [assistant_message("Order 42 has shipped.")],
        ]
    )
    return Agent(name="support", model=model, tools=[lookup])


async def _turn(system: _System, session: Session, agent: Agent[Any], text: str) -> Counter[str]:
    with system.counter.measure() as seen:
        await Runner.run(agent, text, session=session)
    return Counter(seen.by_name)


async def _lost_ack(system: _System, session_id: str) -> int:
    reply: Any = [
        {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Lost-ack reply", "annotations": []}],
        }
    ]
    session = system.make(session_id)
    await session.add_items([{"role": "user", "content": "Will you store this once?"}])
    if system.lost_ack is not None:
        system.lost_ack.armed = True
        with contextlib.suppress(StorageError):  # the write landed; the caller sees an error
            await session.add_items(reply)
    else:
        await session.add_items(reply)  # landed; the caller never saw the ack
    await session.add_items(reply)  # the retry
    stored = await session.get_items()
    return sum(1 for item in stored if item.get("id") == reply[0]["id"])


async def _open_systems(uri: str, database: str, *, include_peer: bool) -> list[_System]:
    systems: list[_System] = []
    counter = CommandCounter()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter]
    )
    repository = MongoSessionRepository(client[database])
    await repository.ensure_indexes()
    lost_ack = _LostAck(repository)
    systems.append(
        _System(OURS, client, counter, lambda sid: AgentsSession(sid, lost_ack), lost_ack)
    )
    if include_peer:
        from agents.extensions.memory.mongodb_session import MongoDBSession

        peer_counter = CommandCounter()
        peer_client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            uri, event_listeners=[peer_counter]
        )

        def make_peer(sid: str) -> Session:
            return MongoDBSession(sid, client=peer_client, database=database)

        await make_peer("__warmup__").get_items(limit=1)  # its indexes, before anything counts
        systems.append(_System(PEER, peer_client, peer_counter, make_peer))
    return systems


async def measure(
    uri: str, *, turns: int = 20, include_peer: bool = True
) -> dict[str, SystemResult]:
    """Run the workload on every system against the server at ``uri``; see the module docs."""
    set_tracing_disabled(True)
    database = f"bench_agents_{uuid.uuid4().hex[:12]}"
    systems = await _open_systems(uri, database, include_peer=include_peer and peer_available())
    results = {system.name: SystemResult() for system in systems}
    try:
        sessions = {s.name: s.make(f"turns-{uuid.uuid4().hex[:8]}") for s in systems}
        agents = {s.name: _text_agent(turns + 1) for s in systems}
        for n in range(turns + 1):
            order = systems if n % 2 == 0 else list(reversed(systems))  # interleaved, rotated
            for system in order:
                seen = await _turn(system, sessions[system.name], agents[system.name], f"Turn {n}")
                result = results[system.name]
                if n == 0:
                    result.first_turn = seen
                else:
                    result.steady_turns.append(sum(seen.values()))
                    result.steady_by_name.update(seen)
        for system in systems:
            await _turn(system, sessions[system.name], _tool_agent(), "Where is order 42?")
            results[system.name].tool_turn = await _turn(
                system, sessions[system.name], _tool_agent(), "And order 42 again?"
            )
        for system in systems:
            results[system.name].copies_after_lost_ack = await _lost_ack(
                system, f"lost-ack-{uuid.uuid4().hex[:8]}"
            )
    finally:
        for system in systems:
            await system.client.drop_database(database)
            await system.client.close()
    return results


def _names(counts: Counter[str], runs: int = 1) -> str:
    return ", ".join(f"{name} {n / runs:g}" for name, n in sorted(counts.items()))


def render(results: dict[str, SystemResult], uri: str) -> str:
    """The Markdown report."""
    lines = [
        f"Server: `{uri}`\n",
        "## Commands per Agents SDK turn (`Runner.run`)\n",
        "| system | first turn | steady text turn | tool turn | steady turn by name |",
        "|---|---:|---:|---:|---|",
    ]
    for name, result in results.items():
        runs = len(result.steady_turns)
        lines.append(
            f"| {name} | {sum(result.first_turn.values())} | {result.steady_mean:g} "
            f"| {sum(result.tool_turn.values())} | {_names(result.steady_by_name, runs)} |"
        )
    lines += [
        "\n## A lost acknowledgement, then the same `add_items` again\n",
        "| system | copies of the reply stored |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {result.copies_after_lost_ack} |" for name, result in results.items()]
    return "\n".join(lines)


async def main(turns: int) -> None:
    """Measure against ``MONGODB_URI`` or a local test server and print the report."""
    server: Any = None
    uri = os.environ.get("MONGODB_URI")
    try:
        if uri is None:
            from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

            executable = find_server_executable()
            if executable is None:
                sys.exit("needs MONGODB_URI or ASYNCSESSION_SECANTUSD")
            server = LocalMongoServer(executable)
            server.start()
            uri = server.uri(w="majority", journal="true")
        if not peer_available():
            print("openai-agents' MongoDBSession is not importable: measuring AgentsSession only")
        print(render(await measure(uri, turns=turns), uri))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description="Commands per Agents SDK turn, ours and the SDK's."
    )
    parser.add_argument("--turns", type=int, default=20, help="steady text turns per system")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.turns))
