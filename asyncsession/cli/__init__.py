"""`asyncsession`: an operator's command line over a MongoDB session store.

```text
asyncsession [--uri URI] [--db NAME] [--json] [--timeout S] COMMAND ... [global options]
```

Commands: `sessions USER` lists a user's sessions; `show SESSION` prints a session's log
(`--active`, `--archived`, `--type`, `--last`, `--keyword`); `export SESSION` writes it as JSON
Lines; `compact SESSION` (or `compact --all --user U` with `--older-than`, `--min-events`)
compacts now with a chosen strategy; `delete SESSION --yes` deletes one; `sweep` deletes expired
sessions; `ensure-indexes` creates the indexes; `worker` runs a compaction queue worker;
`completion SHELL` prints a completion script. The URI defaults to `MONGODB_URI`. Global
options go before or after the command; `--version` prints the version.

Standard output carries only the result (one JSON document under `--json`); warnings, notes
and errors go to standard error. A reader that stops early (`show S | head -1`) ends the
command quietly with exit 0.

Exit codes: 0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI
is invalid. Commands register in `asyncsession.cli._registry`.
"""

from ._app import main, run

__all__ = ["main", "run"]
