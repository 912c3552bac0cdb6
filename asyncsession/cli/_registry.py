"""Every command of the command line, registered here and nowhere else.

To add a command: write a module in this package that defines `COMMANDS`, a tuple of
[`Command`][asyncsession.cli._command.Command], import its `COMMANDS` below and add them to
`_GROUPS`.
`--help` lists the commands in this order.
"""

from __future__ import annotations

from ._admin import COMMANDS as ADMIN
from ._command import Command
from ._compact import COMMANDS as COMPACT
from ._delete import COMMANDS as DELETE
from ._erase import COMMANDS as ERASE
from ._export import COMMANDS as EXPORT
from ._forks import COMMANDS as FORKS
from ._read import COMMANDS as READ
from ._worker import COMMANDS as WORKER

__all__ = ["commands"]

# Each command module is imported by name (`from ._x import COMMANDS`), never as `from . import
# _x`, which would make this module depend on the package `__init__` that imports it.
_GROUPS = (READ, EXPORT, FORKS, COMPACT, DELETE, ERASE, ADMIN, WORKER)


def commands() -> tuple[Command, ...]:
    """Every registered command, in `--help` order; names are unique."""
    found = tuple(command for group in _GROUPS for command in group)
    names = [command.name for command in found]
    if len(set(names)) != len(names):  # pragma: no cover - a programming error
        raise RuntimeError(f"two commands share a name: {sorted(names)}")
    return found
