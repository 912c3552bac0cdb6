"""The command line's progress bar: drawn only when enabled, ended with one newline."""

from __future__ import annotations

import io

from asyncsession.cli._command import Progress


def test_an_enabled_bar_draws_its_share_and_ends_its_line() -> None:
    """With a total the bar fills in proportion; closing ends the line once."""
    stream = io.StringIO()
    with Progress(stream, "compacting", 4, enabled=True) as bar:
        bar.advance(2)
    drawn = stream.getvalue()
    assert "\rcompacting [" + "#" * 14 + "." * 14 + "] 2/4 " in drawn
    assert drawn.endswith("\n")
    assert drawn.count("\n") == 1


def test_a_bar_without_a_total_counts() -> None:
    """Without a total the bar shows the count done."""
    stream = io.StringIO()
    with Progress(stream, "exporting s", None, enabled=True) as bar:
        bar.advance(500)
        bar.advance(13)
    assert "\rexporting s: 513 " in stream.getvalue()


async def test_a_disabled_bar_draws_nothing() -> None:
    """A disabled bar writes nothing, and `around` just awaits the work."""
    stream = io.StringIO()

    async def work() -> int:
        return 7

    with Progress(stream, "sweeping", None, enabled=False) as bar:
        bar.advance(3)
        assert await bar.around(work()) == 7
    assert stream.getvalue() == ""
