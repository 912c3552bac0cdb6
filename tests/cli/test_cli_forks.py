"""Forks, rewinds and ``show --as-of`` from the shell."""

from __future__ import annotations

import json

from cli_support import cli


async def test_fork_rewind_lineage_and_show_as_of(seeded: tuple[str, str]) -> None:
    """``fork`` makes a fork at a version, ``rewind`` hides later events (``show --active``),
    ``lineage`` lists both, and ``show --as-of`` reads the log as it was."""
    uri, db = seeded
    base = ("--uri", uri, "--db", db, "--json")
    code, out, _ = await cli(*base, "fork", "long", "--at", "1", "--id", "long-b")
    assert code == 0
    assert json.loads(out) == {
        "session_id": "long-b",
        "forked_from": {"session_id": "long", "version": 1, "event_id": None},
    }
    _, out, _ = await cli(*base, "show", "long-b")
    assert len(json.loads(out)["events"]) == 12
    _, out, _ = await cli(*base, "show", "long", "--active")
    first = json.loads(out)["events"]
    question_3 = next(e["id"] for e in first if e["message"]["text"] == "question 3")
    code, out, _ = await cli(*base, "rewind", "long", "--before", question_3)
    assert code == 0
    assert json.loads(out) == {"from_version": 2, "to_version": 1, "to_event_id": first[5]["id"]}
    _, out, _ = await cli(*base, "show", "long", "--active")
    assert [e["message"]["text"] for e in json.loads(out)["events"]][-1] == "answer 2"
    _, out, _ = await cli(*base, "show", "long", "--active", "--as-of", "2")
    assert len(json.loads(out)["events"]) == 12
    assert json.loads(out)["version"] == 2
    code, out, _ = await cli(*base, "lineage", "long")
    assert code == 0
    lineage = json.loads(out)
    assert lineage["forked_from"] is None
    assert [f["id"] for f in lineage["forks"]] == ["long-b"]
    assert [(r["from_version"], r["to_version"]) for r in lineage["rewinds"]] == [(2, 1)]
    code, out, _ = await cli("--uri", uri, "--db", db, "lineage", "long-b")
    assert code == 0
    assert "forked from long at version 1" in out
    code, out, _ = await cli("--uri", uri, "--db", db, "show", "long", "--type", "rewind")
    assert code == 0
    assert "rewind to version 1, after event" in out
    code, _, err = await cli("--uri", uri, "--db", db, "rewind", "long", "--to", "99")
    assert code != 0
    assert "version" in err
