"""The maintainers' page: the goals the benchmark holds asyncsession to, checked against a run.

``docs/internals/benchmark-goals.md`` is generated with the benchmarks page, from the same page
data (``python -m benchmarks.publish``); the readers' page says what to expect and why, this one
whether we are where we mean to be. Every goal, figure and verdict is computed from the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ._page_data import (
    ADVISORS,
    AFTER_REPLY,
    FRAMEWORKS,
    PLAIN,
    history,
    is_ours,
    ok_rows,
    peers,
    ratio,
    rivals,
    row_of,
)
from .adapters import MODEL_CALLING, OURS, REFERENCE
from .report import ms, per_op

__all__ = [
    "FLOOR_GOALS",
    "GOALS_PAGE",
    "floor_goals",
    "floor_section",
    "goals",
    "integration_rows",
    "render_goals_page",
]

GOALS_PAGE = "internals/benchmark-goals.md"
"""The page, under ``docs``."""


FLOOR_GOALS: tuple[tuple[str, str, float], ...] = (
    (AFTER_REPLY, REFERENCE, 0.8),
    (AFTER_REPLY, "langchain", 2.0),
    ("asyncsession-question-first", REFERENCE, 0.45),
    (ADVISORS, REFERENCE, 0.45),
)
"""(our turn, the system it is held against, the least ratio of their turns/s) in table 3: the
store's throughput goals (issue 40). ``floor`` is a range read and one insert of one document
per turn, with no guarantee at all."""


def floor_goals(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(goal, measured, met) rows of `FLOOR_GOALS` at the shortest history of table 3 (the
    goals are set there: 10 messages); a goal whose two systems the run did not both measure
    says so."""
    found: list[tuple[str, str, str]] = []
    cases = sorted({r["case"] for r in ok_rows(data, "throughput")}, key=history)
    for case in cases[:1]:
        for ours, against, least in FLOOR_GOALS:
            goal = f"`{ours}` ≥ {least:g} x `{against}`, {case}"
            mine, theirs = (row_of(data, "throughput", s, case) for s in (ours, against))
            if mine is None or theirs is None:
                found.append((goal, "not measured", "not measured"))
                continue
            rate, other = mine["extra"]["turns_per_s"], theirs["extra"]["turns_per_s"]
            times = rate / other
            measured = f"{rate:,.1f} / {other:,.1f} turns/s = {times:.2f} x"
            found.append((goal, measured, "yes" if times >= least else "**no**"))
    return found


def floor_section(data: Mapping[str, Any]) -> list[str]:
    """The benchmarks page's section on our turns against the floor and LangChain, with each
    missed goal said plainly."""
    rows = floor_goals(data)
    if not rows:
        return []
    missed = [r for r in rows if r[2] == "**no**"]
    unmeasured = [r for r in rows if r[2] == "not measured"]
    measured = len(rows) - len(unmeasured)
    if missed:
        verdict = (
            f"**Missed in this run: {len(missed)} of {measured} goals**: "
            + "; ".join(f"{goal} (measured {figure})" for goal, figure, _ in missed)
            + "."
        )
    else:
        verdict = f"All {measured} goals measured are met in this run."
    if unmeasured:
        verdict += " Not measured: " + "; ".join(r[0] for r in unmeasured) + "."
    return [
        "## Our turns against the floor",
        "",
        "`floor` is the least a chat turn can cost on MongoDB: a range read of the session's",
        "newest documents and one insert of one document, with no guarantee at all (no version",
        "check, no idempotency, no unique index). Our turns keep every guarantee; the goals below",
        "say how close to the floor that must stay, in table 3's turns per second.",
        "",
        "| goal | measured | met? |",
        "|---|---|---|",
        *(f"| {goal} | {figure} | {met} |" for goal, figure, met in rows),
        "",
        verdict,
        "",
    ]


def goals(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(goal, measured, met) rows, each computed from the run."""
    found: list[tuple[str, str, str]] = list(floor_goals(data))
    throughput = ok_rows(data, "throughput")
    for case in sorted({r["case"] for r in throughput}, key=history):
        rows = [r for r in throughput if r["case"] == case]
        fastest = rivals(data, "throughput", case)
        same_call = [r for r in rows if r["system"] in peers() and r["system"] in MODEL_CALLING]
        if not fastest:
            continue
        best = max(fastest, key=lambda r: r["extra"]["turns_per_s"])
        for system, against in ((PLAIN, [best]), (ADVISORS, [best, *same_call])):
            ours = next((r for r in rows if r["system"] == system), None)
            if ours is None:
                continue
            parts = []
            met = True
            for peer in against:
                times = ours["extra"]["turns_per_s"] / peer["extra"]["turns_per_s"]
                parts.append(f"{times:.2f} x {peer['system']}")
                met = met and times >= 1.0
            found.append(
                (
                    f"`{system}` throughput ≥ 1.0 x the best peer, {case}",
                    f"{ours['extra']['turns_per_s']:.1f} turns/s: " + ", ".join(parts),
                    "yes" if met else "**no**",
                )
            )
    turn = ok_rows(data, "turn")
    for system, limit in ((PLAIN, 3), (ADVISORS, 3)):
        counts = [r["commands_per_op"] for r in turn if r["system"] == system]
        if counts and all(c is not None for c in counts):
            worst = max(counts)
            found.append(
                (
                    f"`{system}`: at most {limit} commands per turn on average",
                    f"{worst:.2f} at most over the histories measured",
                    "yes" if worst <= limit else "**no**",
                )
            )
    # the core API's turn: an adapter also receives the framework's own message
    received = [r["extra"].get("bytes_received_per_turn") for r in turn if r["system"] in OURS]
    received = [v for v in received if isinstance(v, int | float)]
    if received:
        found.append(
            (
                "A 20-message window turn of the core API receives at most 16 KiB",
                f"{max(received) / 1024:.1f} KiB at most",
                "yes" if max(received) <= 16 * 1024 else "**no**",
            )
        )
    for scenario, label in (("lost-ack", "retried writes"), ("contention", "concurrent writers")):
        ours = [r for r in ok_rows(data, scenario) if is_ours(r["system"])]
        if ours:
            duplicated = sum(int(r["extra"].get("duplicated", 0) or 0) for r in ours)
            lost = sum(
                int(r["extra"].get("lost", 0) or 0) + int(r["extra"].get("lost_silently", 0) or 0)
                for r in ours
            )
            found.append(
                (
                    f"Nothing lost or duplicated by {label}",
                    f"{lost} lost, {duplicated} duplicated",
                    "yes" if lost == 0 and duplicated == 0 else "**no**",
                )
            )
    return found


def _figure(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return ms(value) if unit == "ms" else per_op(value)


def integration_rows(data: Mapping[str, Any], ours: str, theirs: str) -> list[tuple[str, ...]]:
    """(measure, ours, theirs, ours / theirs, goal met) rows of one framework pair, from the
    run. The goal of a row: the adapter needs no more than the framework's store."""
    rows: list[tuple[str, ...]] = []

    def compare(label: str, mine: float | None, peer: float | None, unit: str) -> None:
        if mine is None or peer is None:
            met = "not measured"
            quotient = "-"
        else:
            met = "yes" if mine <= peer else "**no**"
            quotient = "-" if not peer else ratio(mine / peer)
        rows.append((label, _figure(mine, unit), _figure(peer, unit), quotient, met))

    cases: dict[str, list[str]] = {}
    for scenario in ("turn", "window"):
        found = {r["case"] for r in ok_rows(data, scenario) if r["system"] in (ours, theirs)}
        cases[scenario] = sorted(found, key=history)
    for case in cases["turn"]:
        mine, peer = (row_of(data, "turn", s, case) for s in (ours, theirs))
        compare(
            f"commands per turn, {case}",
            None if mine is None else mine["commands_per_op"],
            None if peer is None else peer["commands_per_op"],
            "count",
        )
    for case in cases["window"]:
        mine, peer = (row_of(data, "window", s, case) for s in (ours, theirs))
        compare(
            f"window read ms, {case}",
            None if mine is None else mine["median_ms"],
            None if peer is None else peer["median_ms"],
            "ms",
        )
    lost = {
        system: next((r for r in ok_rows(data, "lost-ack") if r["system"] == system), None)
        for system in (ours, theirs)
    }
    mine_row, peer_row = lost[ours], lost[theirs]
    retried = (mine_row or peer_row or {}).get("extra", {}).get("retried_writes")
    label = "duplicates after lost acks" + (f" ({retried} retried turns)" if retried else "")
    mine_dup = None if mine_row is None else int(mine_row["extra"].get("duplicated", 0) or 0)
    peer_dup = None if peer_row is None else int(peer_row["extra"].get("duplicated", 0) or 0)
    met = "not measured" if mine_dup is None else "yes" if mine_dup == 0 else "**no**"
    rows.append((label, _figure(mine_dup, "count"), _figure(peer_dup, "count"), "-", met))
    return rows


def measured_pairs(data: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The (framework, our adapter, its store) pairs the run measured at least one side of."""
    measured = {r["system"] for table in data["tables"].values() for r in table["rows"]}
    return [pair for pair in FRAMEWORKS if pair[1] in measured or pair[2] in measured]


def _verdict(rows: Sequence[tuple[str, ...]]) -> str:
    missed = [row for row in rows if row[-1] == "**no**"]
    unmeasured = [row for row in rows if row[-1] == "not measured"]
    if len(unmeasured) == len(rows):
        return "No goal measured: this run did not measure both sides."
    text = f"All {len(rows) - len(unmeasured)} goals measured are met."
    if missed:
        text = (
            f"Missed in this run: {len(missed)} of {len(rows) - len(unmeasured)} goals: "
            + "; ".join(f"{r[0]} ({r[1]} against {r[2]})" for r in missed)
            + "."
        )
    if unmeasured:
        text += " Not measured in this run: " + "; ".join(r[0] for r in unmeasured) + "."
    return text


def render_goals_page(data: Mapping[str, Any]) -> str:
    """The maintainers' page, from the page data alone."""
    meta = data["meta"]
    out = [
        "# Benchmark goals",
        "",
        "For maintainers: the goals we hold asyncsession to, checked against the run the",
        "[benchmarks page](../benchmarks.md) shows, and generated with it from the same data",
        "(`python -m benchmarks.publish`). The benchmarks page says what a reader can expect;",
        "this one says whether we are where we mean to be.",
        "",
        f"- Run: {meta.get('started_at', '-')}, `{meta.get('command', '-')}`",
        "",
    ]
    found = goals(data)
    if found:
        missed = sum(1 for *_, met in found if met != "yes")
        out += [
            "## Goals",
            "",
            "| goal | measured | met? |",
            "|---|---|---|",
            *(f"| {goal} | {measured} | {met} |" for goal, measured, met in found),
            "",
            f"{len(found) - missed} of {len(found)} goals met in this run"
            + (f"; {missed} missed." if missed else "."),
            "",
        ]
    pairs = measured_pairs(data)
    if pairs:
        out += [
            "## Adapters against the framework's own store",
            "",
            "The goal of each row: the adapter needs no more than the store the framework",
            "documents (commands per turn, time to read the window), and a retried write stores",
            "nothing twice.",
            "",
        ]
    for framework, ours, theirs in pairs:
        rows = integration_rows(data, ours, theirs)
        out += [
            f"### {framework}: `{ours}` vs `{theirs}`",
            "",
            f"| measure | {ours} | {theirs} | ours / theirs | goal met? |",
            "|---|---:|---:|---:|---|",
            *(f"| {' | '.join(row)} |" for row in rows),
            "",
            _verdict(rows),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"
