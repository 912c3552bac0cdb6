"""`docs/cli.md` and the command line cannot drift apart: every command, and every flag of every
command, is on the page, and every command line on the page parses."""

from __future__ import annotations

import io
import re
import shlex
from pathlib import Path

import pytest

from asyncsession.cli._app import COMMANDS, _Exit, _parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
GLOBAL = {"--uri", "--db", "--json", "--timeout", "--version", "--help", "-h"}


def _page() -> str:
    return PAGE.read_text(encoding="utf-8")


def _command_lines() -> list[str]:
    """The page's example command lines: each line of its code blocks that runs `asyncsession`
    (after a `$(`, too), cut at a pipe or a comment."""
    lines: list[str] = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", _page(), flags=re.DOTALL):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            found = re.search(r"(?:^|\$\()asyncsession (.*)", line)
            if found is not None:
                text = found.group(1).split("|")[0].split(")")[0]
                lines.append(text)
    return lines


def _parsed_command(line: str) -> str:
    """The command a page line runs, parsed by the command line's own parser."""
    words = [w for w in shlex.split(line, comments=True) if w]
    parser = _parser(io.StringIO(), COMMANDS)
    try:
        args = parser.parse_args(words)
    except _Exit as exit_:  # pragma: no cover - the assertion message is the point
        pytest.fail(f"the page's `asyncsession {line.strip()}` does not parse: {exit_.message}")
    return str(args.command)


def test_every_command_has_an_example_on_the_page_and_every_example_parses() -> None:
    """The commands the page's examples run are exactly the commands the CLI has."""
    documented = {_parsed_command(line) for line in _command_lines()}

    assert documented == {command.name for command in COMMANDS} | {"completion"}


@pytest.mark.parametrize("name", [command.name for command in COMMANDS])
def test_every_flag_of_every_command_is_on_the_page(name: str) -> None:
    page = _page()
    sub = _parser(io.StringIO(), COMMANDS).commands[name]
    flags = [
        max(action.option_strings, key=len)
        for action in sub._actions
        if action.option_strings and not GLOBAL.intersection(action.option_strings)
    ]
    missing = [flag for flag in flags if not re.search(rf"{re.escape(flag)}(?![\w-])", page)]
    assert missing == [], f"docs/cli.md does not name {missing} of `asyncsession {name}`"
