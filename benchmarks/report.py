"""The Markdown tables and the raw JSON of a run."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ._counting import excluded
from ._stats import median
from .adapters import MODEL_CALLING, OURS, PEERS, REFERENCE
from .scenarios import BenchConfig, Measurement

__all__ = ["COLUMNS", "TABLES", "render_markdown", "write_results"]

Column = tuple[str, Callable[[Measurement], str]]


def ms(value: float) -> str:
    """Milliseconds with a precision that suits their size."""
    if math.isnan(value):
        return "-"
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def per_op(value: float | None) -> str:
    """A per-operation count: an integer when it is one."""
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value - round(value)) < 0.005 else f"{value:.2f}"


def commands(m: Measurement) -> str:
    """Commands per operation: ``min-max`` of the timed operations, else the mean."""
    if m.per_op_commands:
        low, high = min(m.per_op_commands), max(m.per_op_commands)
        return str(low) if low == high else f"{low}-{high}"
    return per_op(m.commands_per_op)


def number(value: Any) -> str:
    """An extra value for a table cell."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dict):
        return ", ".join(f"{k} x{v}" for k, v in value.items()) or "none"
    return str(value)


def extra(key: str) -> Callable[[Measurement], str]:
    """A column showing ``m.extra[key]``."""
    return lambda m: number(m.extra.get(key))


def extra_kib(key: str) -> Callable[[Measurement], str]:
    """A column showing the byte count ``m.extra[key]`` in KiB."""

    def render(m: Measurement) -> str:
        value = m.extra.get(key)
        return "-" if value is None else f"{value / 1024:.1f}"

    return render


def merge_repeats(rows: Sequence[Measurement]) -> list[Measurement]:
    """Throughput rows: one per (case, system), the repeats folded in, ratios to the best peer.

    Turns/s and CPU per turn are the medians over the repeats (every repeat is listed);
    latency samples, commands, losses and duplicates are pooled.
    """
    groups: dict[tuple[str, str], list[Measurement]] = {}
    for m in rows:
        groups.setdefault((m.case, m.system), []).append(m)
    merged: list[Measurement] = []
    for (case, system), ms_ in groups.items():
        ok = [m for m in ms_ if m.status == "ok"]
        if not ok:
            merged.append(ms_[0])
            continue
        out = Measurement(scenario="throughput", system=system, case=case, unit="turn")
        for m in ok:
            out.samples_ms += m.samples_ms
            out.add(m.tally, m.ops)
        rates = [m.extra["turns_per_s"] for m in ok]
        out.extra.update(
            turns_per_s=round(median(rates), 1),
            turns_per_s_repeats=" / ".join(f"{r:.1f}" for r in rates),
            lost=sum(m.extra["lost"] for m in ok),
            duplicated=sum(m.extra["duplicated"] for m in ok),
            client_cpu_ms_per_turn=round(
                median([m.extra["client_cpu_ms_per_turn"] for m in ok]), 2
            ),
        )
        model = [m.extra["model_call_cpu_ms"] for m in ok if "model_call_cpu_ms" in m.extra]
        if model:
            out.extra["model_call_cpu_ms"] = round(median(model), 2)
        server = [m.extra["server_cpu_ms_per_turn"] for m in ok]
        if all(v is not None for v in server):
            out.extra["server_cpu_ms_per_turn"] = round(median(server), 2)
        if len(ok) < len(ms_):
            out.extra["failed_repeats"] = len(ms_) - len(ok)
        merged.append(out)
    for m in merged:
        if m.system not in OURS or m.status != "ok":
            continue
        peers = [p for p in merged if p.case == m.case and p.system in PEERS and p.status == "ok"]
        floor = [p.extra["turns_per_s"] for p in peers if p.system == REFERENCE]
        if floor:
            m.extra["x_floor"] = f"{m.extra['turns_per_s'] / floor[0]:.2f}"
        peers = [p for p in peers if p.system != REFERENCE]
        best = [p.extra["turns_per_s"] for p in peers if p.system not in MODEL_CALLING]
        if best:
            m.extra["x_best_peer"] = f"{m.extra['turns_per_s'] / max(best):.2f}"
        same = [p.extra["turns_per_s"] for p in peers if p.system in MODEL_CALLING]
        if same and m.system in MODEL_CALLING:
            m.extra["x_peer_with_model_call"] = f"{m.extra['turns_per_s'] / max(same):.2f}"
    return merged


MEDIAN: Column = ("median ms", lambda m: ms(m.median_ms))
SAMPLES: Column = ("timed", lambda m: str(len(m.samples_ms)))
P95: Column = ("p95 ms", lambda m: ms(m.p95_ms))
ROUND_TRIPS: Column = ("round trips/op", lambda m: per_op(m.round_trips_per_op))

TABLES: dict[str, tuple[str, list[Column]]] = {
    "turn": (
        "1. One chat turn: load a 20-message window, persist the user message and the reply",
        [
            MEDIAN,
            P95,
            SAMPLES,
            ("commands/turn", commands),
            ROUND_TRIPS,
            ("KiB sent/turn", extra_kib("bytes_sent_per_turn")),
            ("KiB received/turn", extra_kib("bytes_received_per_turn")),
        ],
    ),
    "window": (
        "2. Load a 20-message window",
        [MEDIAN, P95, SAMPLES, ("commands/read", commands), ROUND_TRIPS],
    ),
    "throughput": (
        "3. Throughput: concurrent sessions x turns each",
        [
            ("turns/s", extra("turns_per_s")),
            ("repeats", extra("turns_per_s_repeats")),
            ("x floor", extra("x_floor")),
            ("x best peer", extra("x_best_peer")),
            ("x peer with the model call", extra("x_peer_with_model_call")),
            ("median ms/turn", lambda m: ms(m.median_ms)),
            ("p95 ms/turn", lambda m: ms(m.p95_ms)),
            ("commands/turn", lambda m: per_op(m.commands_per_op)),
            ROUND_TRIPS,
            ("lost", extra("lost")),
            ("duplicated", extra("duplicated")),
            ("client CPU ms/turn", extra("client_cpu_ms_per_turn")),
            ("of which the model call (SDK, alone)", extra("model_call_cpu_ms")),
            ("server CPU ms/turn", extra("server_cpu_ms_per_turn")),
        ],
    ),
    "contention": (
        "4a. Concurrent writers appending to one session",
        [
            ("attempted", extra("attempted")),
            ("stored", extra("stored")),
            ("rejected (writer got an error)", extra("rejected")),
            ("lost silently", extra("lost_silently")),
            ("duplicated", extra("duplicated")),
            ("conflicts retried", extra("conflicts_retried")),
            ("writers out of order", extra("writers_out_of_order")),
            ("median ms/append", lambda m: ms(m.median_ms)),
            ("p95 ms/append", lambda m: ms(m.p95_ms)),
            ("commands/append", lambda m: per_op(m.commands_per_op)),
        ],
    ),
    "lost-ack": (
        "4b. Retrying a write whose acknowledgement was lost",
        [
            ("retried writes", extra("retried_writes")),
            ("duplicated messages", extra("duplicated")),
            ("lost", extra("lost")),
            ("errors raised", extra("errors")),
            ("commands/turn incl. retry", lambda m: per_op(m.commands_per_op)),
        ],
    ),
    "storage": (
        "5. Storage on the server (collStats size: uncompressed document bytes)",
        [
            ("bytes/message", extra("bytes_per_message")),
            ("incl. indexes", extra("bytes_per_message_with_indexes")),
            ("documents/message", extra("documents_per_message")),
            ("bytes/session", extra("bytes_per_session")),
            ("bytes/session after compaction", extra("bytes_per_session_after")),
            ("messages readable after", extra("readable_after_compaction")),
            ("compaction", extra("compaction")),
            ("ms/compaction", lambda m: ms(m.median_ms)),
            ("commands/compaction", lambda m: per_op(m.commands_per_op)),
        ],
    ),
}


_P95 = "the 95th percentile by nearest rank: with 20 or fewer timed operations, the slowest"
_ROUND_TRIPS = "commands plus the cursor fetches that follow them (getMore, killCursors), mean"

COLUMNS: dict[str, dict[str, str]] = {
    "turn": {
        "case": "the messages the session holds before the timed turns",
        "median ms": "median wall time of one turn (read the window, store the question and the "
        "reply), the session alone on the server",
        "p95 ms": _P95,
        "timed": "turns timed, after the untimed ones that warm the caches",
        "commands/turn": "MongoDB commands one timed turn sent: the fewest and the most over the "
        "timed turns (one figure when every turn sent the same)",
        "round trips/op": _ROUND_TRIPS + " per turn",
        "KiB sent/turn": "bytes the client sent the server per turn, in KiB",
        "KiB received/turn": "bytes the server sent back per turn, in KiB",
    },
    "window": {
        "case": "the session's size",
        "median ms": "median time to read the newest 20 messages through the system's own API, "
        "ready to send to the model",
        "p95 ms": _P95,
        "timed": "reads timed, after the untimed ones",
        "commands/read": "MongoDB commands one read sent (fewest-most)",
        "round trips/op": _ROUND_TRIPS + " per read",
    },
    "throughput": {
        "case": "the messages every session holds before its timed turns",
        "turns/s": "every session's turns divided by the run's wall time; with several repeats, "
        "their median",
        "repeats": "turns/s of each repeat, in the order they ran (one figure: one repeat)",
        "x floor": "for our turn shapes: turns/s divided by that of `floor` (a range read and "
        "one insert of one document per turn, no guarantees), at the same history",
        "x best peer": "for our turn shapes: turns/s divided by that of the fastest peer "
        "that makes no model call (never `floor`), at the same history (the adapters are "
        "held against their framework's store in the section above)",
        "x peer with the model call": "for the advisor turns, which call a model through the "
        "OpenAI SDK: turns/s divided by that of `langchain-model`, which makes the same call",
        "median ms/turn": "median time of one turn under this load, every session's turns pooled",
        "p95 ms/turn": "the 95th percentile of the same",
        "commands/turn": "MongoDB commands per turn, mean",
        "round trips/op": _ROUND_TRIPS + " per turn",
        "lost": "messages missing when every session is read back after the run",
        "duplicated": "extra copies found on that read",
        "client CPU ms/turn": "CPU time of the benchmark's process per turn: the system's code, "
        "the driver and, for the systems that call a model, the OpenAI SDK",
        "of which the model call (SDK, alone)": "the CPU of that model call measured on its own, "
        "for the systems that make one",
        "server CPU ms/turn": "CPU time of the server process per turn: what the system asks of "
        "the database (only on the local test server, whose process the benchmark can read)",
    },
    "contention": {
        "case": "writers x messages: every writer loads the session, then appends its messages "
        "one by one, all writers at once",
        "system": "in parentheses, how the writers append. cas-retry: at the version the writer "
        "read, reading again and retrying on a conflict; plain-append: without a version, the "
        "store orders concurrent appends; add_items, add_message, insert_many: the peer's "
        "append, which takes no version; handle-per-writer: ADK, each writer keeps the session "
        "it loaded and a stale one is refused; reload-and-retry: ADK, loading the session again "
        "after a refusal",
        "attempted": "messages the writers tried to append",
        "stored": "distinct messages found when the log is read back",
        "rejected (writer got an error)": "appends that raised, so the writer knew",
        "lost silently": "messages the writer was told were stored that are missing",
        "duplicated": "extra copies found",
        "conflicts retried": "version conflicts the writers resolved by reading again",
        "writers out of order": "writers whose messages are not stored in the order they wrote "
        "them",
        "median ms/append": "median time of one append, conflicts and retries included",
        "p95 ms/append": "the 95th percentile of the same",
        "commands/append": "MongoDB commands per append, mean (appends of different writers "
        "due at the same moment share commands)",
    },
    "lost-ack": {
        "case": "turns on one session",
        "retried writes": "turns whose write lost its acknowledgement, so the application sent "
        "it again",
        "duplicated messages": "extra copies found when the log is read back",
        "lost": "messages missing on that read",
        "errors raised": "what the retries raised, and how often",
        "commands/turn incl. retry": "MongoDB commands per turn, the retry included, mean",
    },
    "storage": {
        "case": "sessions x messages, written through each system's API one turn at a time",
        "bytes/message": "`collStats` size (uncompressed document bytes) of the system's "
        "collections divided by the messages, before compaction",
        "incl. indexes": "the same with the indexes' size added",
        "documents/message": "documents stored per message",
        "bytes/session": "document bytes per session, before compaction",
        "bytes/session after compaction": "the same after one compaction per session (where the "
        "system has one): ours grows, since the archived messages stay and a summary is added",
        "messages readable after": "of one session's messages, how many the system's read API "
        "returns after the compaction. The core API reads them all (`EventFilter.all()`): "
        "compaction archives, it never deletes. Our framework adapters show only the kept "
        "messages because they read through the framework's history API (LangChain's "
        "`aget_messages`, ADK's `get_session`, Pydantic AI's `load`), which returns what the "
        "model is sent; the archived messages are still stored and readable through "
        "asyncsession's own API (`service.get_events(id, EventFilter.all())`, "
        "`asyncsession show SESSION --archived`). A peer's compaction may delete: "
        "openai-agents rewrites the session with its user messages and one compaction item",
        "compaction": "what the system's compaction does to the stored log (n/a: none)",
        "ms/compaction": "median time of one compaction",
        "commands/compaction": "MongoDB commands per compaction, mean",
    },
}
"""What every column of every table means, as the page explains it (the tests check that no
column goes unexplained)."""


def render_table(scenario: str, rows: Sequence[Measurement]) -> str:
    """One scenario's table."""
    title, columns = TABLES[scenario]
    header = ["case", "system", *(name for name, _ in columns)]
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * len(columns)) + "|")
    for m in rows:
        if m.status == "ok":
            cells = [render(m) for _, render in columns]
        else:
            cells = [m.status.replace("|", "/")] + ["-"] * (len(columns) - 1)
        lines.append("| " + " | ".join([m.case or "-", m.system, *cells]) + " |")
    return "\n".join(lines)


def render_markdown(
    results: Sequence[Measurement], meta: dict[str, Any], config: BenchConfig
) -> str:
    """The whole report."""
    out = [
        f"# asyncsession benchmark run {meta.get('started_at', '')}",
        "",
        f"- Command: `{meta.get('command', '')}`",
        f"- Server: {meta.get('server', {}).get('server', '-')}; "
        f"{meta.get('server', {}).get('isolation', '')}",
        "- URI options: `"
        + "&".join(f"{k}={v}" for k, v in meta.get("server", {}).get("uri_options", {}).items())
        + "`",
        f"- Machine: {meta.get('machine', '-')}",
        f"- Systems: {', '.join(f'{k} {v}' for k, v in meta.get('versions', {}).items())}",
        f"- Wall time of the run: {meta.get('wall_s', 0):,.0f} s",
        "- Commands exclude connection housekeeping ("
        + ", ".join(excluded())
        + "); round trips add the cursor continuations (getMore, killCursors).",
        "",
    ]
    for scenario in TABLES:
        rows = [m for m in results if m.scenario == scenario]
        if scenario == "throughput":
            rows = merge_repeats(rows)
        if rows:
            out += [render_table(scenario, rows), ""]
    out += ["<details><summary>Config</summary>", "", "```json"]
    out += [json.dumps(asdict(config), indent=2), "```", "", "</details>", ""]
    return "\n".join(out)


def write_results(
    results: Sequence[Measurement],
    meta: dict[str, Any],
    config: BenchConfig,
    directory: Path,
    stamp: str,
) -> tuple[Path, Path]:
    """Write ``<stamp>.md`` and ``<stamp>.json`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    markdown = directory / f"{stamp}.md"
    raw = directory / f"{stamp}.json"
    markdown.write_text(render_markdown(results, meta, config))
    raw.write_text(
        json.dumps(
            {
                "meta": meta,
                "config": asdict(config),
                "measurements": [m.as_json() for m in results],
            },
            indent=1,
            default=str,
        )
    )
    return markdown, raw
