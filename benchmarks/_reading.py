"""What a reader of the benchmarks page should take from a run, in words computed from it:
what to expect and when asyncsession is faster or slower, why, what the test server cannot do
and which peer figures that changes, and how the run was made.

Every sentence with a figure is built from the page data, so a new run rewrites it; a
direction ("faster", "slower") is chosen by the figures, never written in advance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._counting import excluded
from ._page_data import (
    ADVISORS,
    AFTER_REPLY,
    FRAMEWORKS,
    PLAIN,
    cell,
    history,
    is_ours,
    ok_rows,
    peers,
    rivals,
    row_of,
)
from .adapters import DISTRIBUTIONS, MODEL_CALLING
from .report import TABLES, ms

__all__ = [
    "TEST_SERVER",
    "WHY",
    "expectations",
    "link",
    "method",
    "on_test_server",
    "slug",
    "test_server_notes",
]

TEST_SERVER = "secantusdb"
"""How the run's server names the MongoDB-wire test server (``meta.server.server``)."""
SORTED_READS = ("openai-agents", "google-adk", "pydantic-ai")
"""The peers whose window read is a sorted ``find`` that an index serves on MongoDB."""


def slug(title: str) -> str:
    """The anchor MkDocs (and GitHub) give a heading."""
    kept = "".join(c for c in title.lower() if c.isalnum() or c in " -_")
    return "-".join(kept.split())


def link(scenario: str) -> str:
    number = TABLES[scenario][0].split(".")[0]
    return f"[table {number}](#{slug(TABLES[scenario][0])})"


def _verdict(times: Sequence[float]) -> str:
    """Ratios of ours to a peer (higher is better) in words: faster, slower or about as fast."""
    if all(t >= 1.05 for t in times):
        word = "faster"
    elif all(t <= 0.95 for t in times):
        word = "slower"
    else:
        word = "about as fast" if all(0.95 < t < 1.05 for t in times) else "mixed"
    return f"{word} ({' and '.join(f'{t:.2f} x' for t in times)})"


def _beaten(mine: float, others: Sequence[Mapping[str, Any]]) -> int:
    """How many of the peers' rows took less time than ``mine``."""
    return sum(1 for r in others if r["median_ms"] < mine)


def _span(rows: Sequence[Mapping[str, Any]], value: str, unit: str) -> str:
    """The lowest and the highest of the rows' figures, each with its system."""
    ordered = sorted(rows, key=lambda r: float(r[value]))
    low, high = ordered[0], ordered[-1]
    if low is high:
        return f"{_number(low[value], unit)} ({low['system']})"
    return (
        f"{_number(low[value], unit)} ({low['system']}) to "
        f"{_number(high[value], unit)} ({high['system']})"
    )


def _number(value: float, unit: str) -> str:
    return f"{ms(value)} ms" if unit == "ms" else f"{value:,.1f} {unit}"


def _expect_turn(data: Mapping[str, Any]) -> list[str]:
    turn = ok_rows(data, "turn")
    cases = sorted({r["case"] for r in turn}, key=history)
    parts: list[str] = []
    for case in dict.fromkeys([cases[0], cases[-1]] if cases else []):
        plain, after = (row_of(data, "turn", s, case) for s in (PLAIN, AFTER_REPLY))
        others = rivals(data, "turn", case)
        if plain is None or after is None or not others:
            continue
        slower, plainly = _beaten(after["median_ms"], others), _beaten(plain["median_ms"], others)
        verdict = (
            "faster than every peer"
            if slower == plainly == 0
            else f"stored after the reply, slower than {slower} of the {len(others)} peers (the "
            f"plain turn, which writes twice: than {plainly})"
        )
        parts.append(
            f"at {case}, {ms(plain['median_ms'])} ms ({ms(after['median_ms'])} ms stored after "
            f"the reply, as the peers store it) against {_span(others, 'median_ms', 'ms')} for "
            f"the peers: {verdict}"
        )
    if not parts:
        return []
    times = [r["median_ms"] for r in turn if r["system"] == PLAIN]
    steady = len(cases) > 1 and max(times) <= 1.5 * min(times)
    return [
        f"- **One turn, the session alone** ({link('turn')}): "
        + "; ".join(parts)
        + (
            ". Our time hardly moves with the history: the window is read by position."
            if steady
            else "."
        )
    ]


def _expect_throughput(data: Mapping[str, Any]) -> list[str]:
    rows = ok_rows(data, "throughput")
    config = data.get("config", {})
    parts: list[str] = []
    for case in sorted({r["case"] for r in rows}, key=history):
        plain, after = (row_of(data, "throughput", s, case) for s in (PLAIN, AFTER_REPLY))
        others = rivals(data, "throughput", case)
        if plain is None or not others:
            continue
        best = max(others, key=lambda r: r["extra"]["turns_per_s"])
        rate = best["extra"]["turns_per_s"]
        mine = [r for r in (plain, after) if r is not None]
        ours = " and ".join(f"{r['extra']['turns_per_s']:,.1f}" for r in mine)
        shapes = " (plain, after the reply)" if len(mine) > 1 else ""
        parts.append(
            f"at {case}, {ours} turns/s{shapes} against {rate:,.1f} for {best['system']}, the "
            f"fastest peer: " + _verdict([r["extra"]["turns_per_s"] / rate for r in mine])
        )
    if not parts:
        return []
    sessions, turns = config.get("throughput_sessions"), config.get("throughput_turns")
    load = f"{sessions} sessions at once, {turns} turns each" if sessions and turns else "at once"
    line = f"- **Many sessions** ({link('throughput')}, {load}): " + "; ".join(parts) + "."
    advisor = [
        (r["case"], r["extra"]["x_peer_with_model_call"])
        for r in rows
        if r["system"] == ADVISORS and "x_peer_with_model_call" in r["extra"]
    ]
    if advisor:
        line += (
            " The advisor turn, which includes a call through the OpenAI SDK, does "
            + " and ".join(f"{times} x at {case}" for case, times in advisor)
            + " the turns/s of `langchain-model`, which makes the same call."
        )
    return [line]


def _expect_window(data: Mapping[str, Any]) -> list[str]:
    rows = ok_rows(data, "window")
    parts: list[str] = []
    commands: set[float | None] = set()
    for case in sorted({r["case"] for r in rows}, key=history):
        plain = row_of(data, "window", PLAIN, case)
        others = rivals(data, "window", case)
        if plain is None or not others:
            continue
        commands.add(plain["commands_per_op"])
        parts.append(
            f"{ms(plain['median_ms'])} ms at {case.split('=')[-1]} messages "
            f"(the peers: {_span(others, 'median_ms', 'ms')})"
        )
    if not parts:
        return []
    same = ", one command whatever the session's size" if commands == {1.0} else ""
    return [
        f"- **Reading the newest 20 messages** ({link('window')}): ours takes "
        + "; ".join(parts)
        + same
        + "."
    ]


def _expect_safety(data: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    retried = ok_rows(data, "lost-ack")
    if retried:
        twice = [r for r in retried if is_ours(r["system"]) and r["extra"].get("duplicated")]
        ours = (
            "ours stored messages twice: "
            + ", ".join(f"{r['system']} {r['extra']['duplicated']}" for r in twice)
            if twice
            else "ours stores nothing twice, through every adapter too"
        )
        theirs: list[str] = []
        for r in retried:
            if r["system"] not in peers():
                continue
            raised = cell(data, "lost-ack", r, "errors raised")
            theirs.append(
                f"{r['system']} {r['extra'].get('duplicated', 0)}"
                + (f" (its retry raised {raised} instead)" if raised not in ("none", "-") else "")
            )
        out.append(
            f"- **A write retried after its acknowledgement was lost** ({link('lost-ack')}, "
            f"{retried[0]['case']}): {ours}"
            + ("; the peers stored twice: " + ", ".join(theirs) if theirs else "")
            + "."
        )
    writers = ok_rows(data, "contention")
    if writers:
        ours = [r for r in writers if is_ours(r["system"])]
        whole = all(
            r["extra"].get("stored") == r["extra"].get("attempted")
            and not r["extra"].get("lost_silently")
            and not r["extra"].get("duplicated")
            and not r["extra"].get("writers_out_of_order")
            for r in ours
        )
        short = [
            f"{r['system']} stored {r['extra'].get('stored')} of {r['extra'].get('attempted')}"
            + (
                f" ({r['extra'].get('rejected')} appends got an error)"
                if r["extra"].get("rejected")
                else ""
            )
            for r in writers
            if not is_ours(r["system"])
            and (
                r["extra"].get("stored") != r["extra"].get("attempted")
                or r["extra"].get("lost_silently")
                or r["extra"].get("duplicated")
            )
        ]
        out.append(
            f"- **Concurrent writers on one session** ({link('contention')}, "
            f"{writers[0]['case']}): "
            + (
                "ours stores every message once, in each writer's order, whichever way its "
                "writers append"
                if whole
                else "ours did not store every message once and in order: see the table"
            )
            + ("; " + "; ".join(short) if short else "; so does every peer")
            + "."
        )
    return out


def _expect_storage(data: Mapping[str, Any]) -> list[str]:
    rows = [r for r in ok_rows(data, "storage") if "bytes_per_message" in r["extra"]]

    def sized(systems: Sequence[str]) -> list[dict[str, Any]]:
        return [
            {"system": r["system"], "bytes": r["extra"]["bytes_per_message"]}
            for r in rows
            if r["system"] in systems
        ]

    plain = next((r for r in rows if r["system"] == PLAIN), None)
    others = sized([s for s in peers() if s not in MODEL_CALLING])
    if plain is None or not others:
        return []
    line = (
        f"- **Storage** ({link('storage')}): ours takes {plain['extra']['bytes_per_message']:,.1f}"
        f" bytes per message, the peers {_span(others, 'bytes', 'bytes')}. After a compaction, "
        f"{plain['extra'].get('readable_after_compaction', '-')} of a session's messages are "
        "still readable through our API: compaction archives, it does not delete."
    )
    adapters = sized([pair[1] for pair in FRAMEWORKS])
    if adapters:
        line += (
            " Our adapters keep the framework's own message beside ours, so they take more: "
            f"{_span(adapters, 'bytes', 'bytes')}."
        )
    return [line]


def expectations(data: Mapping[str, Any]) -> list[str]:
    lines = [
        *_expect_turn(data),
        *_expect_throughput(data),
        *_expect_window(data),
        *_expect_safety(data),
        *_expect_storage(data),
    ]
    if not lines:
        return []
    out = ["## What to expect", "", *lines, ""]
    if on_test_server(data):
        out += [
            "Figures at long histories are the test server's, not MongoDB's: read "
            "[What the test server cannot do](#what-the-test-server-cannot-do) before you "
            "compare them.",
            "",
        ]
    return out


WHY = """\
## Why ours is faster or slower

- **The guarantees cost the server, not commands.** An append is one insert of one commit
  document. A unique index on `(session, commit)` is the version check (of two writers at one
  version exactly one gets in), and a unique index on the event ids makes a retried write a
  replay that stores nothing twice. The server maintains those indexes on every insert: more
  server CPU per turn than a peer's plain insert, and that is what table 4 buys.
- **Reads are bounded.** A window read is one aggregate: the session's newest commits by a
  range of the `(session, commit)` index, with the session document unioned onto them. Older
  commits are read by further ranges only when a window needs them. A process that has not
  seen the session yet asks for the newest commits with a sorted `find` instead, which
  MongoDB serves from the same index.
- **The documented plain turn writes twice.** It stores the question before the model call,
  so a model call that fails loses nothing, then the reply: two versioned, idempotent
  appends. The peers write once, after the reply. `asyncsession-after-reply` is our turn in
  the peers' order, one write; `asyncsession-question-first` stores the question under a lease
  (one turn at a time per session), then the reply: three commands.
- **The advisor turn pays for the model call.** Its client CPU includes the `openai` SDK
  building the request and parsing the reply; `langchain-model` makes the same call, so the
  fair comparison is against it.
- **Adapters keep the framework's message whole.** An adapter stores the framework's own
  message (LangChain's, Pydantic AI's, ADK's event) beside ours so that it reads back
  unchanged: more bytes per message and per read than the core API, and for ADK, whose
  session carries state as well as events, more commands per read.
- **Stored bytes** include what the guarantees need: each event's id, type and timestamp,
  each commit's session, number and incarnation, and the unique index on the event ids.
"""


def on_test_server(data: Mapping[str, Any]) -> bool:
    server = data["meta"].get("server", {}).get("server", "")
    return str(server).startswith(TEST_SERVER)


def _server_cpu(data: Mapping[str, Any]) -> str:
    """The peers' server CPU per turn in table 3, at its shortest and its longest history."""
    rows = ok_rows(data, "throughput")
    cases = sorted({r["case"] for r in rows}, key=history)
    spans: list[str] = []
    for case in dict.fromkeys([cases[0], cases[-1]] if len(cases) > 1 else []):
        cpu = [
            {"system": r["system"], "cpu": r["extra"]["server_cpu_ms_per_turn"]}
            for r in rivals(data, "throughput", case)
            if isinstance(r["extra"].get("server_cpu_ms_per_turn"), int | float)
        ]
        if cpu:
            spans.append(f"{_span(cpu, 'cpu', 'ms')} at {case}")
    if len(spans) < 2:
        return ""
    return (
        f"It shows in the server's CPU per turn in {link('throughput')}: the peers asked for "
        + ", and ".join(spans)
        + ", so the `x best peer` figures at long histories mostly measure the test server."
    )


def _sorted_reads(data: Mapping[str, Any]) -> str:
    """The sorted-read peers' window reads in table 2, at its smallest and its largest session."""
    cases = sorted({r["case"] for r in ok_rows(data, "window")}, key=history)
    spans: list[str] = []
    for system in SORTED_READS if len(cases) > 1 else ():
        small, large = (row_of(data, "window", system, case) for case in (cases[0], cases[-1]))
        if small is not None and large is not None:
            first, last = ms(small["median_ms"]), ms(large["median_ms"])
            spans.append(f"{system} {first} ms at {cases[0]} and {last} ms at {cases[-1]}")
    return (
        f" Here their window reads ({link('window')}) took " + "; ".join(spans) + "."
        if spans
        else ""
    )


def test_server_notes(data: Mapping[str, Any]) -> list[str]:
    """What the test server cannot do, and which peer figures it changes, when the run used it."""
    if not on_test_server(data):
        return []
    return [
        "## What the test server cannot do",
        "",
        "The run used the MongoDB-wire test server the test suite uses, not MongoDB. It never",
        "serves a sort from an index: it reads every document that matches and sorts them. A",
        "sorted `find` of the newest 20 of 5,000 documents takes about 200 ms there, a range",
        "read about 2 ms; MongoDB walks the index and reads 20 documents either way. Counting",
        "a session's documents is as slow there.",
        "",
        "So at long histories (1,000 messages and more) the peers' figures here are mostly the",
        "test server's cost, not what you will see on MongoDB:",
        "",
        "- **openai-agents** (`get_items(limit=20)`, sorted by its `seq` field), **google-adk**",
        "  (`get_session(num_recent_events=20)`, sorted by timestamp) and **pydantic-ai** (a",
        "  `find` sorted by `_id`) each have an index that serves their sort. On MongoDB, expect",
        "  their window reads, turns and throughput at long histories to stay close to their",
        "  short-history figures, and the gap between them and ours to stay about what it is at",
        "  a short history." + _sorted_reads(data),
        "- **langchain** (`count_documents`, then a `find` that skips all but the newest 20)",
        "  walks the session's index entries on MongoDB too, so it still slows down as the",
        "  history grows, but far less than here.",
        "- **Ours** reads a window as a range of the `(session, commit)` index whenever the",
        "  process knows the session's newest commit number (it read or wrote the session",
        "  before: every turn measured here), which the test server serves from its index as",
        "  MongoDB does: our figures at long histories are not flattered by this. A process that",
        "  has never seen the session asks with a sorted `find` for its first read, which the",
        "  test server sorts in memory (`python -m benchmarks.store_window` measures both).",
        "",
        *([_server_cpu(data), ""] if _server_cpu(data) else []),
    ]


def _packages(meta: Mapping[str, Any]) -> str:
    """The packages the run measured, by their PyPI names, each once."""
    found: dict[str, str] = {}
    for system, version in meta.get("versions", {}).items():
        found.setdefault(DISTRIBUTIONS.get(system, system), str(version))
    return ", ".join(f"{package} {version}" for package, version in found.items())


def method(data: Mapping[str, Any]) -> list[str]:
    """The method as the run made it: its server, sizes, repeats and order."""
    meta, config = data["meta"], data.get("config", {})
    server = meta.get("server", {})
    options = "&".join(f"{k}={v}" for k, v in server.get("uri_options", {}).items())
    warmup = config.get("warmup")
    budget = config.get("case_budget_s")
    floor = config.get("min_repeats")
    out = [
        "## How it was run",
        "",
        f"- **When**: {meta.get('started_at', '-')}, {meta.get('wall_s', 0):,.0f} s of wall "
        f"time, with `{meta.get('command', '-')}`.",
        f"- **Machine**: {meta.get('machine', '-')}; the client and the server share it.",
        f"- **Server**: {server.get('server', '-')}; "
        f"{server.get('isolation', 'fresh database per cell')} (a cell is one system in one "
        f"case of one scenario). Every system gets the same URI options: `{options or '-'}`.",
        f"- **Packages**: {_packages(meta) or '-'}.",
    ]
    budget_text = ""
    if budget is not None and floor is not None:
        budget_text = (
            f"; a case stops early once its timed operations took {budget:g} s (never before "
            f"{floor}), and the `timed` column says how many ran"
        )
    if "turn_repeats" in config:
        out.append(
            f"- **Table 1**: one session seeded with the history, {warmup} untimed turns, then "
            f"up to {config['turn_repeats']} timed turns one after another{budget_text}."
        )
    if "window_repeats" in config:
        out.append(
            f"- **Table 2**: {warmup} untimed reads, then up to {config['window_repeats']} "
            "timed reads of the newest 20 messages, with the same budget."
        )
    if "throughput_repeats" in config:
        repeats = int(config["throughput_repeats"])
        order = (
            "one repeat: each figure comes from a single run, so a difference of a few percent "
            "between two systems is within the noise of a shared machine"
            if repeats == 1
            else f"{repeats} repeats, interleaved: every system once, then every system again, "
            "so a change in the machine's load hits every system alike; the table shows the "
            "median and each repeat"
        )
        out.append(
            f"- **Table 3**: {config.get('throughput_sessions')} sessions seeded with the "
            f"history, each running {config.get('throughput_turns')} turns, all at once; "
            f"{order}."
        )
    if "contention_writers" in config:
        out.append(
            f"- **Table 4a**: {config['contention_writers']} writers load one session, then "
            f"append {config.get('contention_appends')} messages each, all at once; the log "
            "is read back afterwards."
        )
    if "lost_ack_turns" in config:
        out.append(
            f"- **Table 4b**: {config['lost_ack_turns']} turns on one session; the "
            "acknowledgement of each turn's write is lost once and the write sent again, as an "
            "application retries."
        )
    if "storage_sessions" in config:
        out.append(
            f"- **Table 5**: {config['storage_sessions']} sessions of "
            f"{2 * int(config.get('storage_turns', 0))} messages written through each "
            f"system's API; then one compaction per session keeping the newest "
            f"{config.get('compaction_keep')} messages, where the system has a compaction."
        )
    out += [
        "- **Counting**: commands are counted at the driver, on the client each system is "
        "given; connection housekeeping (" + ", ".join(excluded()) + ") is left out.",
        "",
    ]
    return out
