"""Writers in four OS processes against one session store: what holds without in-process locks.

Each process has a client, a repository and a service of its own, as web workers behind a load
balancer do; the test process sends them commands at once and checks what the store kept,
through the public API only.
"""

from __future__ import annotations

import pickle
from collections import Counter

from process_support import PROCESSES, Writer, ask_all

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    SessionEvent,
)
from asyncsession.events import SYNTHETIC, EventType
from asyncsession.testing._contract._support import boundary


async def test_versioned_appends_have_exactly_one_winner_per_round(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Every round, four processes append at the version they read: one wins, three refuse."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    winners: list[str] = []
    for round_ in range(12):
        version = await service.get_event_version(session.id)
        answers = await ask_all(
            writers,
            [
                {"op": "versioned", "sid": session.id, "event_id": f"r{round_}-p{i}",
                 "expected": version}
                for i in range(PROCESSES)
            ],
        )  # fmt: skip
        won = [f"r{round_}-p{i}" for i, answer in enumerate(answers) if answer["won"]]
        assert len(won) == 1, answers
        winners += won
        assert await service.get_event_version(session.id) == version + 1
    assert [e.id for e in await service.get_events(session.id)] == winners


async def test_retries_from_several_processes_store_each_event_once(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """The same batch, appended five times at once by each of four processes, is stored once,
    in its order, as one version."""
    sessions = [await service.create(CreateSessionRequest(user_id="alice")) for _ in range(3)]
    for session in sessions:
        before = await service.get_event_version(session.id)
        ids = [f"{session.id}-e{i}" for i in range(5)]
        await ask_all(
            writers, [{"op": "batch", "sid": session.id, "ids": ids, "times": 5}] * PROCESSES
        )
        assert [e.id for e in await service.get_events(session.id)] == ids
        assert await service.get_event_version(session.id) == before + 1


async def test_appends_racing_compaction_lose_and_duplicate_nothing(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Three processes append 80 events each while a fourth compacts the session over and
    over: every event is stored once, each writer's in its order, and the compactions that
    applied archived only older events."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    appenders, compactor = writers[:-1], writers[-1]
    commands = [
        {"op": "stream", "sid": session.id, "prefix": f"w{i}", "count": 80, "chunk": 2}
        for i in range(len(appenders))
    ]
    answers = await ask_all(
        [*appenders, compactor],
        [*commands, {"op": "compact", "sid": session.id, "applied": 4, "tries": 400, "keep": 10}],
    )
    assert answers[-1]["applied"] >= 1, answers[-1]
    everything = await service.get_events(session.id, EventFilter.all())
    records = [e for e in everything if e.type == EventType.COMPACTION]
    log = [e for e in everything if e.type != EventType.COMPACTION]
    assert len(records) >= 1  # each applied compaction leaves its record
    ids = [e.id for e in log]
    assert len(ids) == len(set(ids)) == 80 * len(appenders)
    for i in range(len(appenders)):
        mine = [event_id for event_id in ids if event_id.startswith(f"w{i}-")]
        assert mine == sorted(mine)  # ids are numbered in append order
    active = await service.get_events(session.id, EventFilter.active())
    assert active, "compaction never archives the newest turn"
    archived = [e for e in log if e.archived]
    assert archived, "the compactions that applied archived something"
    assert ids.index(archived[-1].id) < ids.index(active[-1].id)


async def test_first_turns_racing_on_one_new_session_id_create_it_once(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Four processes start the first turn of one new session at once, five times over: the
    session is created once, every turn is stored once, each in its own version, and each
    turn's window is the log before it."""
    for round_ in range(5):
        sid = f"fresh-{round_}"
        answers = await ask_all(
            writers,
            [{"op": "turn", "sid": sid, "event_id": f"{sid}-t{i}"} for i in range(PROCESSES)],
        )
        log = [e.id for e in await service.get_events(sid)]
        assert Counter(log) == Counter(f"{sid}-t{i}" for i in range(PROCESSES))
        assert len({answer["version"] for answer in answers}) == PROCESSES
        for answer in answers:
            assert answer["owner"] == "alice"
            assert answer["window"] == log[: log.index(answer["event_id"])]
        sessions = await service.find_by_user_id("alice")
        assert [s.id for s in sessions].count(sid) == 1


async def test_a_compaction_is_one_commit_in_every_process(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Four processes append four equal compactions (each computed on its own, with ids of
    its own) at one version: one wins. Then the winner's commit, pickled as a job carries it,
    is retried in every process after its reply was lost: applied everywhere, and the log
    changes no more."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    sid = session.id
    events = [await service.append_message(sid, AssistantMessage(text=f"m{i}")) for i in range(6)]
    version = await service.get_event_version(sid)

    def compaction() -> list[SessionEvent]:
        summary = SessionEvent(
            session_id=sid, message=AssistantMessage(text="summary"), metadata={SYNTHETIC: True}
        )
        return [summary, boundary(sid, [summary, *events[4:]], events[:4])]

    commits = [compaction() for _ in range(PROCESSES)]
    answers = await ask_all(
        writers,
        [
            {"op": "compaction", "sid": sid, "commit": pickle.dumps(c).hex(), "expected": version}
            for c in commits
        ],
    )
    won = [i for i, answer in enumerate(answers) if answer["applied"]]
    assert len(won) == 1, answers
    log = await service.get_events(sid, EventFilter.all())
    assert [e.id for e in log if e.archived] == [e.id for e in events[:4]]
    assert await service.get_event_version(sid) == version + 1

    retry = pickle.dumps(commits[won[0]]).hex()
    command = {"op": "compaction", "sid": sid, "commit": retry, "expected": version}
    answers = await ask_all(writers, [command] * PROCESSES)
    assert [answer["applied"] for answer in answers] == [True] * PROCESSES
    assert await service.get_events(sid, EventFilter.all()) == log
    assert await service.get_event_version(sid) == version + 1


async def test_messages_with_ids_the_service_picks_are_stored_once_from_every_process(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Four processes append 60 messages each to one session with ids the service picks:
    every message is stored once, each process's in its order."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    answers = await ask_all(
        writers,
        [
            {"op": "messages", "sid": session.id, "prefix": f"p{i}", "count": 60}
            for i in range(PROCESSES)
        ],
    )
    log = await service.get_events(session.id, EventFilter.all())
    assert len(log) == len({e.id for e in log}) == 60 * PROCESSES
    for i, answer in enumerate(answers):
        assert [e.id for e in log if (e.text or "").startswith(f"p{i}-")] == answer["ids"]


async def test_whole_turns_are_stored_once_and_unbroken_from_every_process(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Four processes, three tasks each, append 20 batches of 1 to 3 messages per task to one
    session with ``append_messages``: every batch is one version, stored once and side by side,
    each task's batches in its order."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    answers = await ask_all(
        writers,
        [
            {"op": "turns", "sid": session.id, "prefix": f"p{i}", "tasks": 3, "count": 20}
            for i in range(PROCESSES)
        ],
    )
    batches = [batch for answer in answers for task in answer["tasks"] for batch in task]
    assert len(batches) == PROCESSES * 3 * 20
    log = await service.get_events(session.id, EventFilter.all())
    ids = [e.id for e in log]
    assert len(ids) == len(set(ids)) == sum(len(batch) for batch in batches)
    assert await service.get_event_version(session.id) == len(batches)
    position = {event_id: i for i, event_id in enumerate(ids)}
    for answer in answers:
        for task in answer["tasks"]:
            starts = [position[batch[0]] for batch in task]
            assert starts == sorted(starts)
            for batch in task:
                first = position[batch[0]]
                assert [position[i] for i in batch] == list(range(first, first + len(batch)))


async def test_versioned_appends_on_many_sessions_have_one_winner_from_every_process(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Four processes race on eight sessions at once, 15 rounds each: read the version, append
    at it: exactly one winner per version, every winner's event stored once, no loser's
    stored."""
    sids = [(await service.create(CreateSessionRequest(user_id="alice"))).id for _ in range(8)]
    answers = await ask_all(
        writers, [{"op": "rounds", "sids": sids, "count": 15} for _ in range(PROCESSES)]
    )
    for s, sid in enumerate(sids):
        outcomes = [tuple(o) for answer in answers for o in answer["outcomes"][s]]
        won = {event_id for event_id, ok in outcomes if ok}
        log = await service.get_events(sid, EventFilter.all())
        assert len(log) == len(won) == await service.get_event_version(sid)
        assert {e.id for e in log} == won
