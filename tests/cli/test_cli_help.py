"""Every ``--help`` shows the defaults; ``asyncsession completion`` prints working scripts."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import cli

from asyncsession.cli._app import COMMANDS, _parser

ASYNCSESSION = Path(sys.executable).parent / "asyncsession"
NAMES = [command.name for command in COMMANDS]


def _with_defaults(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [
        action
        for action in parser._actions
        if action.option_strings
        and action.default is not None
        and action.default is not False
        and action.default not in (argparse.SUPPRESS, [])
    ]


def _help_of(out: str, flag: str) -> str:
    """The option's entry in the help, its wrapped lines joined."""
    lines = out.splitlines()
    start = next(i for i, text in enumerate(lines) if text.lstrip().startswith(flag))
    entry = [lines[start]]
    for text in lines[start + 1 :]:
        if not text.startswith(" " * 10) or text.lstrip().startswith("-"):
            break
        entry.append(text)
    return " ".join(" ".join(entry).split())


@pytest.mark.parametrize("name", [*NAMES, "completion"])
async def test_every_option_with_a_default_shows_it_in_help(name: str) -> None:
    """In each command's ``--help``, every option that has a default states it."""
    code, out, _ = await cli(name, "--help")

    assert code == 0
    sub = _parser(io.StringIO(), COMMANDS).commands[name]
    checked = _with_defaults(sub)
    for action in checked:
        entry = _help_of(out, action.option_strings[-1])
        assert "default" in entry, entry
        shown = (
            {str(action.default), f"{action.default:g}"}
            if isinstance(action.default, float)
            else {str(action.default)}
        )
        assert any(f"default: {value}" in entry for value in shown) or "$" in entry, entry
    if name == "worker":
        assert len(checked) > 10


async def test_the_top_level_help_shows_the_global_defaults() -> None:
    """``asyncsession --help`` states the timeout and database defaults."""
    code, out, _ = await cli("--help")

    assert code == 0
    assert "(default: 2)" in _help_of(out, "--timeout")
    assert "else asyncsession" in _help_of(out, "--db")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_naming_every_command(shell: str) -> None:
    """As an OS process, with no server: the script names every command and its options."""
    done = subprocess.run(
        [str(ASYNCSESSION), "completion", shell],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )

    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    for name in [*NAMES, "completion"]:
        assert name in done.stdout
    flag = "-l max-events" if shell == "fish" else "--max-events"
    assert flag in done.stdout


def _bash_complete(line: str) -> list[str]:
    script = subprocess.run(
        [str(ASYNCSESSION), "completion", "bash"], capture_output=True, text=True, check=True
    ).stdout
    words = line.split(" ")
    program = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(repr(word) for word in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_asyncsession\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.split()


def test_the_bash_script_completes_commands_and_their_options() -> None:
    """Sourced into bash: a prefix completes to the matching commands, and after a command
    (even past a global option's value) to that command's options."""
    assert _bash_complete("asyncsession s") == ["sessions", "show", "sweep"]
    assert _bash_complete("asyncsession --db prod show --la") == ["--last"]
    assert "--max-events" in _bash_complete("asyncsession compact --")
    assert "--max-events" not in _bash_complete("asyncsession show --")
