"""The benchmark harness at a tiny size: every scenario, for asyncsession, so it cannot rot.

The peers are not test dependencies: these tests run the asyncsession adapter through the same
scenario functions the full run (``scripts/bench``) uses, and check that nothing here imports a
peer package.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks._workload import seed_messages  # noqa: E402
from benchmarks.adapters import (  # noqa: E402
    ADAPTERS,
    OURS,
    PEERS,
    StoreUnavailable,
    Target,
    make_store,
)
from benchmarks.report import merge_repeats, render_markdown  # noqa: E402
from benchmarks.runner import ServerPool, run  # noqa: E402
from benchmarks.scenarios import SCENARIOS, BenchConfig, Measurement  # noqa: E402

PEER_PACKAGES = {
    "openai-agents": "agents",
    "google-adk": "google.adk",
    "langchain": "langchain_mongodb",
    "langchain-model": "langchain_mongodb",
    "pydantic-ai": "pydantic_ai",
    "floor": "pymongo",
}

TINY = dataclasses.replace(
    BenchConfig.quick(),
    turn_histories=(4, 40),
    turn_repeats=2,
    window_sizes=(30,),
    window_repeats=2,
    throughput_sessions=3,
    throughput_turns=2,
    throughput_histories=(4,),
    throughput_repeats=2,
    contention_writers=3,
    contention_appends=3,
    lost_ack_turns=2,
    storage_sessions=2,
    storage_turns=12,
    large_outputs=2,
    large_output_mib=0.3,
    large_output_repeats=2,
)


async def _run(pool: ServerPool | None) -> dict[str, list[Measurement]]:
    results = await run(list(OURS), SCENARIOS, TINY, pool, log=lambda _line: None)
    failed = [f"{m.scenario} {m.case} {m.system}: {m.status}" for m in results if m.status != "ok"]
    assert not failed, failed
    by_scenario: dict[str, list[Measurement]] = {}
    for m in results:
        by_scenario.setdefault(m.scenario, []).append(m)
    assert set(by_scenario) == set(SCENARIOS)
    return by_scenario


def _check_correctness(by_scenario: dict[str, list[Measurement]]) -> None:
    for m in by_scenario["contention"]:
        assert m.extra["stored"] == m.extra["attempted"], m.extra
        assert m.extra["lost_silently"] == m.extra["duplicated"] == m.extra["rejected"] == 0
        assert m.extra["writers_out_of_order"] == 0
    (lost_ack,) = by_scenario["lost-ack"]
    assert lost_ack.extra["duplicated"] == lost_ack.extra["lost"] == 0
    assert lost_ack.extra["errors"] == {}
    throughput = by_scenario["throughput"]
    # every system runs every history, once per repeat, the repeats interleaved
    assert [m.system for m in throughput] == list(OURS) * TINY.throughput_repeats
    assert [m.extra["repeat"] for m in throughput] == [0] * len(OURS) + [1] * len(OURS)
    for m in throughput:
        assert m.extra["lost"] == m.extra["duplicated"] == 0, m.extra
        assert m.extra["client_cpu_ms_per_turn"] > 0
    merged = merge_repeats(throughput)
    assert [m.system for m in merged] == list(OURS)
    assert all(m.ops == 2 * TINY.throughput_sessions * TINY.throughput_turns for m in merged)
    # the other shapes run only the scenarios whose work depends on the turn shape
    for scenario in ("window", "contention", "lost-ack"):
        assert all(
            m.system.startswith("asyncsession (") or m.system == "asyncsession"
            for m in by_scenario[scenario]
        ), scenario
    large = by_scenario["large-outputs"]  # the plain API only: a session with and without
    assert [m.system for m in large] == ["asyncsession", "asyncsession"]
    assert [m.extra["offloaded_in_window"] for m in large] == [0, TINY.large_outputs]
    assert all(len(m.samples_ms) == TINY.large_output_repeats for m in large)
    for storage in by_scenario["storage"]:
        assert storage.extra["readable_after_compaction"] == "24/24"  # non-destructive


async def test_every_scenario_in_memory() -> None:
    """Every scenario runs on the in-memory store, with no commands to count."""
    by_scenario = await _run(None)
    _check_correctness(by_scenario)
    assert all(m.commands_per_op is None for ms in by_scenario.values() for m in ms)
    assert len(by_scenario["turn"][0].samples_ms) == TINY.turn_repeats
    assert {m.system for m in by_scenario["turn"]} == set(OURS)


async def test_every_scenario_on_the_test_server(mongo_uri: str) -> None:
    """Every scenario runs on MongoDB, with commands counted and storage measured."""
    by_scenario = await _run(ServerPool(uri=mongo_uri))
    _check_correctness(by_scenario)
    for m in by_scenario["turn"] + by_scenario["window"]:
        assert m.commands_per_op is not None, m.as_json()
        assert m.commands_per_op >= 1, m.as_json()
        assert m.round_trips_per_op is not None
        assert m.round_trips_per_op >= m.commands_per_op
    for m in by_scenario["turn"]:
        # bytes on the wire are counted: a turn sends both messages and receives the window
        assert m.extra["bytes_sent_per_turn"] > TINY.user_chars + TINY.reply_chars, m.extra
        assert m.extra["bytes_received_per_turn"] > 0, m.extra
    advisors = [m for m in by_scenario["turn"] if m.system == "asyncsession-advisors"]
    assert advisors
    assert all(min(m.per_op_commands) <= 3 for m in advisors), [m.per_op_commands for m in advisors]
    # the turn stored after the reply is the window read and one commit
    after = [m for m in by_scenario["turn"] if m.system == "asyncsession-after-reply"]
    assert after
    assert all(min(m.per_op_commands) == 2 for m in after), [m.per_op_commands for m in after]
    plain = [m for m in by_scenario["turn"] if m.system == "asyncsession"]
    assert all(min(m.per_op_commands) == 3 for m in plain), [m.per_op_commands for m in plain]
    # the advisor turn sends the model the same window every system loads, plus the question
    assert all(
        0 < m.extra["adapter"]["longest_prompt_messages"] <= TINY.window + 1 for m in advisors
    ), [m.extra["adapter"] for m in advisors]
    for m in by_scenario["throughput"]:
        assert m.extra["server_cpu_ms_per_turn"] is None or m.extra["server_cpu_ms_per_turn"] >= 0
        # the advisor turn's model call is timed alone too: part of its client CPU
        advisor_turn = m.system.startswith("asyncsession-advisors")
        assert ("model_call_cpu_ms" in m.extra) == advisor_turn, m.extra
        if advisor_turn:
            assert 0 < m.extra["model_call_cpu_ms"] < m.extra["client_cpu_ms_per_turn"], m.extra
    for storage in by_scenario["storage"]:
        assert storage.extra["bytes_per_message"] > 0
        assert storage.extra["bytes_per_session_after"] > 0


async def test_report_renders_every_table() -> None:
    """The Markdown report has a table per scenario and the raw JSON rows serialise."""
    results = await run(list(OURS), SCENARIOS, TINY, None, log=lambda _line: None)
    markdown = render_markdown(results, {"server": {"uri_options": {"w": "majority"}}}, TINY)
    assert markdown.count("### ") == len(SCENARIOS)
    assert "w=majority" in markdown
    assert all(isinstance(m.as_json()["extra"], dict) for m in results)


def test_peer_adapters_load_lazily() -> None:
    """Importing the harness imports no peer package; a missing peer is reported, not raised."""
    loaded = [name for name in PEER_PACKAGES.values() if name in sys.modules]
    for module in ("benchmarks.runner", "benchmarks.scenarios", "benchmarks.__main__"):
        importlib.import_module(module)
    assert [name for name in PEER_PACKAGES.values() if name in sys.modules] == loaded
    target = Target(uri="mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=1", db_name="unused")
    assert set(PEERS) == set(PEER_PACKAGES)
    for peer, package in PEER_PACKAGES.items():
        if _installed(package):
            continue  # installed here (the benchmark venv): nothing to check
        with pytest.raises(StoreUnavailable):
            make_store(peer, target)


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except ModuleNotFoundError:  # the parent of a dotted name is missing
        return False


@pytest.mark.mongodb
async def test_the_command_budget_script_runs_and_counts_the_turns_at_their_budgets(
    mongo_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``benchmarks/mongo_commands.py --quick``: every measurement at tiny sizes. Its command
    counts do not depend on the size: an after-reply turn is 2, a question-first turn 3, the
    first turn of a new session 3, a window read 1."""
    from benchmarks import mongo_commands

    monkeypatch.setenv("MONGODB_URI", mongo_uri)
    await mongo_commands.main(quick=True)
    rows = {
        cells[1]: cells[2:]
        for line in capsys.readouterr().out.splitlines()
        if (cells := [cell.strip() for cell in line.split("|")]) and len(cells) > 6
    }
    assert rows["after-reply turn: `read_snapshot`, one commit of both"][0] == "2.00"
    assert rows["question-first turn: `read_snapshot`, question (leased), reply at +1"][0] == "3.00"
    assert rows["first turn of a new session: read, `save_if_absent`, one commit"][0] == "3.00"
    assert rows["`last_n=20` read (turn-aware)"][0] == "1.00"


@pytest.mark.mongodb
async def test_the_pipeline_script_runs_and_counts_the_chain_at_the_floor(
    mongo_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m benchmarks.chat_pipeline --runs 3 --warmup 1 --mongo``: the chain's database
    work per turn does not depend on the runs, so it is checked here: 3 commands for a turn
    (the read, the question's commit, the reply's), 4 on a new session (+ its insert), never
    more than the same operations done directly."""
    from benchmarks import chat_pipeline

    monkeypatch.setenv("MONGODB_URI", mongo_uri)
    await chat_pipeline.main(3, True, warmup=1)
    rows = {
        (cells[1], cells[2]): (int(cells[3]), int(cells[4]))
        for line in capsys.readouterr().out.splitlines()
        if (cells := [cell.strip() for cell in line.split("|")])
        and len(cells) == 6
        and cells[1].startswith(("MongoDB", "in-memory"))
    }
    mongo = "MongoDB (commands)"
    assert rows[(mongo, "plain turn, existing session (1 read + 2 appends)")][0] == 3
    assert rows[(mongo, "plain turn, new session (+ create)")][0] == 4
    assert all(used <= direct for used, direct in rows.values())


async def test_framework_adapters_run_and_retry_without_duplicates() -> None:
    """Our LangChain, ADK and Pydantic AI adapters, driven through their frameworks' interfaces,
    run the turn, window and lost-acknowledgement scenarios; a retried write stores nothing
    twice."""
    results = await run(
        list(ADAPTERS), ("turn", "window", "lost-ack"), TINY, None, log=lambda _line: None
    )
    failed = [f"{m.scenario} {m.case} {m.system}: {m.status}" for m in results if m.status != "ok"]
    assert not failed, failed
    assert {m.system for m in results} == set(ADAPTERS)
    lost_ack = [m for m in results if m.scenario == "lost-ack"]
    assert len(lost_ack) == len(ADAPTERS)
    for m in lost_ack:
        assert m.extra["duplicated"] == m.extra["lost"] == 0, m.extra
        assert m.extra["errors"] == {}, m.extra


async def test_the_documented_pydantic_ai_pattern_stores_a_retried_save_twice(
    mongo_uri: str,
) -> None:
    """The ``pydantic-ai`` system (Pydantic AI's documented message storage, by hand on
    PyMongo) reads back the window it was seeded with and runs a turn in two commands, and its
    save retried after a lost acknowledgement stores both messages again; our adapter's retry,
    on the same server, stores nothing twice."""
    systems = ["pydantic-ai", "asyncsession-pydantic-ai"]
    results = await run(
        systems, ("turn", "window", "lost-ack"), TINY, ServerPool(uri=mongo_uri), log=lambda _: None
    )
    failed = [f"{m.scenario} {m.case} {m.system}: {m.status}" for m in results if m.status != "ok"]
    assert not failed, failed
    rows = {(m.scenario, m.case, m.system): m for m in results}
    for case in ("history=4", "history=40"):
        assert rows[("turn", case, "pydantic-ai")].per_op_commands == [2] * TINY.turn_repeats
    assert rows[("window", "messages=30", "pydantic-ai")].extra["returned"] == TINY.window
    peer = rows[("lost-ack", f"{TINY.lost_ack_turns} turns", "pydantic-ai")]
    assert peer.extra["duplicated"] == 2 * TINY.lost_ack_turns, peer.extra
    assert peer.extra["lost"] == 0, peer.extra
    ours = rows[("lost-ack", f"{TINY.lost_ack_turns} turns", "asyncsession-pydantic-ai")]
    assert ours.extra["duplicated"] == ours.extra["lost"] == 0, ours.extra


async def test_the_adk_adapter_is_seeded_as_append_event_stores() -> None:
    """The ADK adapter's seeding appends in batches the events ``append_event`` would store one
    by one: the stored events (ids, messages, the ADK event, the state) and what ``get_session``
    reads back are the same, timestamps aside."""
    from asyncsession import EventFilter
    from benchmarks.adapters.asyncsession_frameworks import APP, USER_ID, AsyncSessionAdkStore

    seeds = seed_messages("h", 7, user_chars=40, reply_chars=60)
    batched, one_by_one = AsyncSessionAdkStore(None, seed_batch=3), AsyncSessionAdkStore(None)
    await batched.seed("s", seeds)
    adk = one_by_one._adk()
    session = await adk.create_session(app_name=APP, user_id=USER_ID, session_id="s")
    for message in seeds:
        await adk.append_event(session, one_by_one._event(message))

    def stored(events: list[Any]) -> list[tuple[Any, ...]]:
        return [
            (
                e.id,
                e.type,
                e.message,
                {k: v for k, v in e.metadata["google_adk"].items() if k != "timestamp"},
                e.metadata["google_adk_state"],
            )
            for e in events
        ]

    def read(found: Any) -> tuple[Any, ...]:
        return ([e.model_dump(exclude={"timestamp"}) for e in found.events], found.state)

    key = batched._key("s")
    assert len(await batched.service.get_events(key, EventFilter.all())) == len(seeds)
    assert stored(await batched.service.get_events(key, EventFilter.all())) == stored(
        await one_by_one.service.get_events(key, EventFilter.all())
    )
    for size in (None, 4):
        assert read(await batched._get("s", size)) == read(await one_by_one._get("s", size))


@pytest.mark.mongodb
async def test_the_fork_script_runs_and_counts_forks_and_rewinds_at_their_budgets(
    mongo_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``benchmarks/forks.py --quick``: a fork is 2 commands and writes no commit at any parent
    length; a rewind is 2 (a locate read, one append)."""
    from benchmarks import forks

    monkeypatch.setenv("MONGODB_URI", mongo_uri)
    await forks.main(quick=True)
    tables = capsys.readouterr().out.split("\n\n")
    fork_rows = [line.split("|")[1:-1] for line in tables[1].splitlines()[2:]]
    assert [(row[1].strip(), row[4].strip()) for row in fork_rows] == [("2", "0"), ("2", "0")]
    rewind_rows = [line.split("|")[1:-1] for line in tables[3].splitlines()[2:]]
    assert [row[1].strip() for row in rewind_rows] == ["2", "2"]
