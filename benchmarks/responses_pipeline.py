"""The cost of a chat turn on the Responses API: time to first streamed event.

``python -m benchmarks.responses_pipeline [--runs N] [--mongo]`` prints Markdown tables:

1. **Time to first event**, through a whole turn (a ``ResponsesClient`` with session memory and
   a tool, on the in-memory store and with ``--mongo`` on MongoDB) next to a bare
   ``client.responses.create(stream=True)`` of the same request from the same scripted server
   (the SDK's first event is ``response.created``; ours is the chunk made of it). Median and
   p95 over ``N`` runs, the paths interleaved in an order rotated every run, the garbage
   collector paused during each run.
   Every chain run is a turn on a session with two earlier turns, so the session resolve, the
   history read and the write of the user message all happen before the first event.
2. **Database work per Responses turn**: MongoDB commands (``--mongo``) and in-memory repository
   calls for a plain turn and a two-round tool turn with a reasoning item, through the chain.

``--mongo`` starts the local test server (``ASYNCSESSION_SECANTUSD``) unless ``MONGODB_URI`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, InMemorySessionRepository
from asyncsession.openai import ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from benchmarks.chat_pipeline import (
    MODEL,
    REPLY,
    CommandCounter,
    CountingRepository,
    Probe,
    lookup,
    median,
    ms,
    percentile,
    with_history,
)

BARE = "bare openai responses stream, the chain's request"


def chain(sdk: openai.AsyncOpenAI, service: DefaultSessionService) -> ResponsesClient:
    return ResponsesClient(
        sdk, model=MODEL, sessions=service, tools=[lookup], model_advisors=[Probe()]
    )


async def first_event_bare(sdk: openai.AsyncOpenAI, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    stream = await sdk.responses.create(
        model=MODEL,
        input=body["input"],
        tools=body.get("tools", openai.omit),
        store=False,
        include=["reasoning.encrypted_content"],
        stream=True,
    )
    async with stream:
        elapsed = -1.0
        async for _ in stream:
            if elapsed < 0:
                elapsed = time.perf_counter() - started
    return elapsed


async def first_event_chain(client: ResponsesClient, session_id: str) -> tuple[float, float]:
    """Time to first event, and the part of it the pipeline took before sending the request."""
    started = time.perf_counter()
    async with client.stream("Go", session_id=session_id) as stream:
        elapsed = -1.0
        async for _ in stream:
            if elapsed < 0:
                elapsed = time.perf_counter() - started
    return elapsed, float(stream.context["bench_ready"]) - started


WARMUP = 10
"""Warm-up runs per path before the recorded ones (not recorded)."""


async def time_to_first_event(
    server: ScriptedOpenAIServer,
    sdk: openai.AsyncOpenAI,
    services: dict[str, DefaultSessionService],
    runs: int,
    warmup: int = WARMUP,
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {BARE: []}
    clients = {name: chain(sdk, service) for name, service in services.items()}
    for name, service in services.items():
        for run in range(runs + warmup):
            await with_history(service, f"{name}-{run}")
    await with_history(next(iter(services.values())), "shape")
    server.enqueue(ScriptedReply.text(REPLY))
    await first_event_chain(next(iter(clients.values())), "shape")
    body = dict(server.requests[-1].body)
    paths: list[tuple[str, Callable[[int], Awaitable[float]]]] = [
        (BARE, lambda run: first_event_bare(sdk, body))
    ]
    for name, client in clients.items():
        samples[f"full chain, {name}"] = []
        samples[f"  of which the pipeline before the request, {name}"] = []
        paths.append((f"full chain, {name}", _chain_path(client, name, samples, warmup)))
    for run in range(runs + warmup):  # warm-up runs, not recorded
        shift = run % len(paths)
        for label, path in paths[shift:] + paths[:shift]:
            server.enqueue(ScriptedReply.text(REPLY))
            gc.collect()
            gc.disable()
            try:
                value = await path(run)
            finally:
                gc.enable()
            if run >= warmup:
                samples[label].append(value)
    return samples


def _chain_path(
    client: ResponsesClient, name: str, samples: dict[str, list[float]], warmup: int
) -> Callable[[int], Awaitable[float]]:
    async def path(run: int) -> float:
        elapsed, pipeline = await first_event_chain(client, f"{name}-{run}")
        if run >= warmup:
            samples[f"  of which the pipeline before the request, {name}"].append(pipeline)
        return elapsed

    return path


async def turn_costs(
    server: ScriptedOpenAIServer,
    sdk: openai.AsyncOpenAI,
    service: DefaultSessionService,
    measure: Callable[[], int],
    reset: Callable[[], None],
) -> list[tuple[str, int]]:
    """(turn, database work through the chain) for a plain turn and a reasoning tool turn."""
    client = chain(sdk, service)
    tag = uuid.uuid4().hex[:8]
    rows: list[tuple[str, int]] = []
    await with_history(service, f"plain-{tag}")
    reset()
    server.enqueue(ScriptedReply.text("ok"))
    await client.call("hi", session_id=f"plain-{tag}")
    rows.append(("plain turn, existing session", measure()))
    await with_history(service, f"tools-{tag}")
    reset()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})], reasoning="Look."),
        ScriptedReply.text("ok"),
    )
    await client.call("hi", session_id=f"tools-{tag}")
    rows.append(("two-round tool turn with a reasoning item", measure()))
    return rows


async def main(runs: int, use_mongo: bool, warmup: int = WARMUP) -> None:
    mongo_server: Any = None
    mongo_client: AsyncMongoClient[dict[str, Any]] | None = None
    counter = CommandCounter()
    database = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        async with ScriptedOpenAIServer() as server:
            sdk = server.client()
            counting = CountingRepository(InMemorySessionRepository())
            memory_service = DefaultSessionService(counting)  # pyright: ignore[reportArgumentType]
            services = {"in-memory store": memory_service}
            mongo_service: DefaultSessionService | None = None
            if use_mongo:
                from asyncsession.repository.mongo import MongoSessionRepository

                uri = os.environ.get("MONGODB_URI")
                if uri is None:
                    from asyncsession.testing._mongo_server import (
                        LocalMongoServer,
                        find_server_executable,
                    )

                    executable = find_server_executable()
                    if executable is None:
                        sys.exit("--mongo needs MONGODB_URI or ASYNCSESSION_SECANTUSD")
                    mongo_server = LocalMongoServer(executable)
                    mongo_server.start()
                    uri = mongo_server.uri(w="majority", journal="true")
                print(f"MongoDB: {uri}\n")
                mongo_client = AsyncMongoClient(uri, tz_aware=True, event_listeners=[counter])
                repository = MongoSessionRepository(mongo_client[database])
                await repository.ensure_indexes()
                mongo_service = DefaultSessionService(repository)
                services["MongoDB"] = mongo_service

            samples = await time_to_first_event(server, sdk, services, runs, warmup)
            print(f"## Time to first streamed event, Responses API ({runs} runs, ms)\n")
            print("| path | median | p95 | median vs bare, same request |")
            print("|---|---:|---:|---:|")
            bare = median(samples[BARE])
            for label, values in samples.items():
                full = label.startswith("full")
                overhead = f"{(median(values) - bare) * 1000:+.2f}" if full else ""
                row = f"| {label} | {ms(median(values))} | {ms(percentile(values, 95))} |"
                print(f"{row} {overhead} |")

            print("\n## Database work per Responses turn\n")
            print("| store | turn | through the chain |")
            print("|---|---|---:|")
            rows = await turn_costs(
                server,
                sdk,
                memory_service,
                lambda: sum(counting.calls.values()),
                counting.calls.clear,
            )
            for turn, used in rows:
                print(f"| in-memory (repository calls) | {turn} | {used} |")
            if mongo_service is not None:
                rows = await turn_costs(
                    server, sdk, mongo_service, lambda: len(counter.names), counter.names.clear
                )
                for turn, used in rows:
                    print(f"| MongoDB (commands) | {turn} | {used} |")
    finally:
        if mongo_client is not None:
            await mongo_client.drop_database(database)
            await mongo_client.close()
        if mongo_server is not None:
            mongo_server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The pipeline's cost on the Responses API.")
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help="warm-up runs per path, not recorded"
    )
    parser.add_argument("--runs", type=int, default=200, help="recorded runs per path")
    parser.add_argument("--mongo", action="store_true", help="also run on MongoDB")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.mongo, arguments.warmup))
