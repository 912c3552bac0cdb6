"""The README's main job runs offline and shows the parts it promises."""

from __future__ import annotations

import subprocess
import sys


def test_the_demo_runs_and_prints_the_log() -> None:
    """The demo prints the windowed read, the compaction, the whole log and the version."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncsession._demo"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "last_n(3), extended to the start of its turn:" in out
    assert "applied=True" in out
    assert "[archived]" in out
    assert "[synthetic]" in out
    assert "the active view" in out
    assert "version 8" in out
