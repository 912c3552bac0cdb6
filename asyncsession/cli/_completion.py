"""Shell completion scripts for bash, zsh and fish, generated from the parser itself.

``asyncsession completion bash`` prints a script that completes the command names and each
command's options; written from the same parser that parses the arguments, so a new command or
option completes without further work.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

__all__ = ["SHELLS", "completion_script"]


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
    lines = [
        f"# fish completion for {prog}: {prog} completion fish | source",
        f"complete -c {prog} -f",
        f'complete -c {prog} -n "not __fish_seen_subcommand_from {names}" -a "{names}"',
    ]
    lines += [
        f'complete -c {prog} -n "not __fish_seen_subcommand_from {names}" -l {flag[2:]}'
        for flag in top
    ]
    for name, options in commands.items():
        lines += [
            f'complete -c {prog} -n "__fish_seen_subcommand_from {name}" -l {flag[2:]}'
            for flag in options
        ]
    return "\n".join(lines) + "\n"


SHELLS: Mapping[str, Callable[[str, Mapping[str, list[str]], list[str]], str]] = {
    "bash": _bash,
    "zsh": _zsh,
    "fish": _fish,
}
"""The shells ``asyncsession completion`` writes a script for."""


def completion_script(
    shell: str,
    parser: argparse.ArgumentParser,
    commands: Mapping[str, argparse.ArgumentParser],
) -> str:
    """The ``shell`` completion script of the command line ``parser`` with ``commands``."""
    options = {name: _options(sub) for name, sub in commands.items()}
    return SHELLS[shell](parser.prog, options, _options(parser))
