"""The command line itself: global options, parsing, the registered commands, shell completion
scripts, running a command and mapping its errors."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn, TextIO

from .._mongo_uri import first_line
from .._version import __version__
from ..encryption import EncryptionOptions
from ..repository import MongoSessionRepository
from ._admin import COMMANDS as ADMIN
from ._command import Command, Context, client_options, positive_float
from ._compact import COMMANDS as COMPACT
from ._errors import (
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Failure,
    diagnostics,
    failure_of,
    flush_stdout,
    is_closed_pipe,
    report,
)
from ._forks import COMMANDS as FORKS
from ._read import COMMANDS as READ
from ._worker import COMMANDS as WORKER

__all__ = ["COMMANDS", "DEFAULT_TIMEOUT", "main", "run"]

COMMANDS: Final = (*READ, *FORKS, *COMPACT, *ADMIN, *WORKER)
"""Every command, in `--help` order. To add one, define `COMMANDS` in a module of this package
and list them here (each module is imported by name, never as `from . import _x`, which would
depend on the package `__init__` that imports this one)."""
COMPLETION = "completion"
"""The command that prints a completion script; it needs no server."""
DEFAULT_TIMEOUT = 2.0
"""Seconds to find and connect to the server: an operator should not wait 30 s for "down"."""
ENCRYPTION_ENV: Final = "ASYNCSESSION_ENCRYPTION"
"""The environment variable naming the encryption setting's JSON file."""


class _Exit(Exception):
    """Parsing ended early: help or the version was printed (code 0), or the arguments were
    wrong."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _DefaultsFormatter(argparse.HelpFormatter):
    """Help that shows each option's default, unless its help already says it or it has none
    worth saying (a flag that is off, an option that is unset)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or default == []
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "default: %(default)s"


class _Parser(argparse.ArgumentParser):
    """Raises instead of exiting, writes help to the stream it was given, shows defaults."""

    def __init__(self, *args: Any, out: TextIO, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)
        self._out = out
        self.commands: dict[str, argparse.ArgumentParser] = {}
        """The parsers of the commands, by name (for the completion scripts)."""

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:
            self._out.write(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _Exit(status, message or "")

    def error(self, message: str) -> NoReturn:
        raise _Exit(EXIT_USAGE, f"{message} (see {self.prog} --help)")


def _global_options(parser: argparse.ArgumentParser, *, top: bool, version: str) -> None:
    # On a command's own parser the defaults are suppressed, so an option given after the
    # command overrides the one before it and an absent one leaves it alone.
    def default(value: object) -> object:
        return value if top else argparse.SUPPRESS

    options = parser.add_argument_group("global options (before or after the command)")
    options.add_argument(
        "--uri",
        default=default(os.environ.get("MONGODB_URI")),
        help="MongoDB URI (default: $MONGODB_URI)",
    )
    options.add_argument(
        "--db",
        default=default(os.environ.get("ASYNCSESSION_DB", "asyncsession")),
        help="database name (default: $ASYNCSESSION_DB, else asyncsession)",
    )
    options.add_argument(
        "--json",
        action="store_true",
        default=default(False),
        help="machine-readable output; errors too, as JSON on stderr",
    )
    options.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        default=default(DEFAULT_TIMEOUT),
        help=f"seconds to find and connect to the server (default: {DEFAULT_TIMEOUT:g})",
    )
    options.add_argument(
        "--encryption",
        metavar="FILE",
        default=default(os.environ.get(ENCRYPTION_ENV)),
        help=(
            "the encryption setting, a JSON file: encrypted sessions are read decrypted "
            f"(default: ${ENCRYPTION_ENV})"
        ),
    )
    options.add_argument(
        "--version", action="version", version=version, help="print the version and exit"
    )


def _parser(out: TextIO, registered: Sequence[Command], *, is_json: bool = False) -> _Parser:
    version = json.dumps({"version": __version__}) if is_json else f"asyncsession {__version__}"
    parser = _Parser(
        prog="asyncsession",
        description="Inspect and manage asyncsession sessions on MongoDB.",
        out=out,
    )
    _global_options(parser, top=True, version=version)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in registered:
        sub = subparsers.add_parser(
            command.name, help=command.help, description=command.help, out=out
        )
        _global_options(sub, top=False, version=version)
        command.configure(sub)
        sub.set_defaults(_command=command)
        parser.commands[command.name] = sub
    completion = subparsers.add_parser(
        COMPLETION,
        help="print a shell completion script",
        description='print a shell completion script, e.g. eval "$(asyncsession completion bash)"',
        out=out,
    )
    completion.add_argument("shell", choices=sorted(SHELLS))
    parser.commands[COMPLETION] = completion
    return parser


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(
        flag
        for action in parser._actions
        for flag in action.option_strings
        if flag.startswith("--")
    )


def _bash(prog: str, commands: Mapping[str, list[str]], top: list[str]) -> str:
    function = "_" + prog.replace("-", "_")
    cases = "".join(
        f'        {name}) opts="{" ".join(options)}" ;;\n' for name, options in commands.items()
    )
    return f"""# bash completion for {prog}: eval "$({prog} completion bash)"
{function}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" command="" word opts
    for word in "${{COMP_WORDS[@]:1:COMP_CWORD-1}}"; do
        case "$word" in {"|".join(commands)}) command="$word"; break ;; esac
    done
    case "$command" in
{cases}        *) opts="{" ".join(top)} {" ".join(commands)}" ;;
    esac
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}}
complete -o default -F {function} {prog}
"""


def _zsh(prog: str, commands: Mapping[str, list[str]], top: list[str]) -> str:
    return f"""#compdef {prog}
# zsh completion for {prog}: eval "$({prog} completion zsh)"
autoload -U +X bashcompinit && bashcompinit
{_bash(prog, commands, top)}"""


def _fish(prog: str, commands: Mapping[str, list[str]], top: list[str]) -> str:
    names = " ".join(commands)
    outside = f"not __fish_seen_subcommand_from {names}"
    lines = [
        f"# fish completion for {prog}: {prog} completion fish | source",
        f"complete -c {prog} -f",
        f'complete -c {prog} -n "{outside}" -a "{names}"',
        *(f'complete -c {prog} -n "{outside}" -l {flag[2:]}' for flag in top),
        *(
            f'complete -c {prog} -n "__fish_seen_subcommand_from {name}" -l {flag[2:]}'
            for name, options in commands.items()
            for flag in options
        ),
    ]
    return "\n".join(lines) + "\n"


SHELLS: Mapping[str, Callable[[str, Mapping[str, list[str]], list[str]], str]] = {
    "bash": _bash,
    "zsh": _zsh,
    "fish": _fish,
}


def _completion_script(shell: str, parser: _Parser) -> str:
    """The ``shell`` script that completes the command names and each command's options, from
    the parser itself: a new command or option completes without further work."""
    options = {name: _options(sub) for name, sub in parser.commands.items()}
    return SHELLS[shell](parser.prog, options, _options(parser))


def _encryption_from_file(path: str) -> EncryptionOptions:
    """The encryption setting a JSON file holds: the arguments of `EncryptionOptions`, e.g.
    ``{"kms_providers": {"local": {"key": "<base64>"}}, "key_vault_namespace": "..."}``."""
    try:
        return EncryptionOptions(**json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError) as exc:  # TypeError: not an object, unknown fields
        message = f"cannot read the encryption setting {path!r}: {exc}"
        raise Failure(EXIT_USAGE, "usage", message) from exc


def _open(args: argparse.Namespace) -> MongoSessionRepository:
    if not args.uri:
        message = "no MongoDB URI: pass --uri or set MONGODB_URI"
        raise Failure(EXIT_UNREACHABLE, "unreachable", message)
    setting = _encryption_from_file(args.encryption) if args.encryption else None
    try:
        return MongoSessionRepository.from_uri(
            args.uri, args.db, encryption=setting, **client_options(args)
        )
    except Exception as exc:  # pymongo raises several types for a malformed URI
        message = f"invalid MongoDB URI: {first_line(exc)}"
        raise Failure(EXIT_UNREACHABLE, "invalid_uri", message) from exc


async def run(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line with `argv` (default: `sys.argv[1:]`); returns the exit code.

    A reader of `out` that goes away (a closed pipe) ends the command with 0. Warnings and log
    records go to `err`, one line each (JSON under `--json`), never to `out`.
    """
    stdout: TextIO = out or sys.stdout
    stderr: TextIO = err or sys.stderr
    arguments = list(sys.argv[1:] if argv is None else argv)
    with diagnostics(stderr, is_json="--json" in arguments):
        try:
            return await _run(arguments, stdout, stderr)
        except OSError as exc:
            if is_closed_pipe(exc):  # the reader has what it wanted, as with `git log | head`
                return EXIT_OK
            raise


async def _run(arguments: list[str], stdout: TextIO, stderr: TextIO) -> int:
    wants_json = "--json" in arguments
    parser = _parser(stdout, COMMANDS, is_json=wants_json)
    try:
        args = parser.parse_args(arguments)
    except _Exit as exit_:
        if exit_.code == EXIT_OK:
            return EXIT_OK
        failure = Failure(EXIT_USAGE, "usage", exit_.message.strip())
        return report(failure, is_json=wants_json, err=stderr)
    if args.command == COMPLETION:
        stdout.write(_completion_script(args.shell, parser))
        return EXIT_OK
    command: Command = args._command
    try:
        repository = _open(args)
    except Failure as failure:
        return report(failure, is_json=args.json, err=stderr)
    try:
        return await command.execute(
            Context(args=args, out=stdout, err=stderr, repository=repository)
        )
    except Exception as exc:
        if is_closed_pipe(exc):
            raise
        mapped = failure_of(exc, uri=args.uri, timeout=args.timeout)
        if mapped is None:
            raise
        return report(mapped, is_json=args.json, err=stderr)
    finally:
        await repository.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    """The `asyncsession` console script.

    A reader of standard output that went away while the command ran, or before what was still
    buffered could be written, ends it quietly with exit 0.
    """
    try:
        code = asyncio.run(run(argv))
    except OSError as exc:  # a closed pipe outside any command, e.g. `--help | head -1`
        if not is_closed_pipe(exc):
            raise
        code = EXIT_OK
    flush_stdout()
    sys.exit(code)
