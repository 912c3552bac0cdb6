"""Every command of the command line, registered here and nowhere else.

To add a command: write a module in this package that defines `COMMANDS`, a tuple of
[`Command`][asyncsession.cli._command.Command], import it below and add it to `_MODULES`.
`--help` lists the commands in this order.
"""

from __future__ import annotations

from . import _admin, _compact, _delete, _export, _read, _worker
from ._command import Command

__all__ = ["commands"]

_MODULES = (_read, _export, _compact, _delete, _admin, _worker)


def commands() -> tuple[Command, ...]:
    """Every registered command, in `--help` order; names are unique."""
    found = tuple(command for module in _MODULES for command in module.COMMANDS)
    names = [command.name for command in found]
    if len(set(names)) != len(names):  # pragma: no cover - a programming error
        raise RuntimeError(f"two commands share a name: {sorted(names)}")
    return found
