"""`asyncsession`: an operator's command line over a MongoDB session store (`docs/cli.md`).

Standard output carries only the result; warnings, notes and errors go to standard error. Exit
codes: 0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI is
invalid.
"""

from ._app import main, run

__all__ = ["main", "run"]
