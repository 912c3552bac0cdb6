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
from .adapters import ADAPTERS, MODEL_CALLING, OURS
from .scenarios import BenchConfig, Measurement

__all__ = ["render_markdown", "write_results"]

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
        peers = [
            p
            for p in merged
            if p.case == m.case
            and p.system not in OURS
            and p.system not in ADAPTERS
            and p.status == "ok"
        ]
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
        "3. Throughput: concurrent sessions x turns each (median of the interleaved repeats)",
        [
            ("turns/s", extra("turns_per_s")),
            ("repeats", extra("turns_per_s_repeats")),
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
