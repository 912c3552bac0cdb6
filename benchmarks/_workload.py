"""The messages every system stores: same texts, same sizes, tagged so they can be counted.

Every text starts with ``[tag]``; reading a log back through a system's own API and parsing the
tags tells which logical messages it holds, in which order, and how often.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Message",
    "Turn",
    "WriteCount",
    "count_writes",
    "message_text",
    "parse_tag",
    "seed_messages",
]

Role = Literal["user", "assistant"]

_FILLER = (
    "The quick brown fox jumps over the lazy dog while the agent plans the next step of the "
    "task, checks the calendar, drafts a reply and waits for the tool results to come back. "
)
_TAG = re.compile(r"^\[([^\]]+)\]")


def message_text(tag: str, size: int) -> str:
    """``[tag]`` followed by filler, ``size`` characters in all (at least the tag)."""
    head = f"[{tag}] "
    body = (_FILLER * (size // len(_FILLER) + 1))[: max(0, size - len(head))]
    return head + body


def parse_tag(text: str) -> str | None:
    """The tag a :func:`message_text` starts with, or ``None``."""
    match = _TAG.match(text)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One chat message as the benchmark writes it."""

    role: Role
    """Who said it."""
    tag: str
    """Its logical identity; a retry of the same write carries the same tag (and id)."""
    text: str
    """The text, starting with ``[tag]``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """A user message and the assistant's reply: what one chat turn persists."""

    user: Message
    """The user's message."""
    reply: Message
    """The assistant's reply."""

    @classmethod
    def make(cls, tag: str, *, user_chars: int, reply_chars: int) -> Turn:
        """The turn ``tag``: messages tagged ``tag-u`` and ``tag-a``."""
        return cls(
            user=Message(role="user", tag=f"{tag}-u", text=message_text(f"{tag}-u", user_chars)),
            reply=Message(
                role="assistant", tag=f"{tag}-a", text=message_text(f"{tag}-a", reply_chars)
            ),
        )


def seed_messages(prefix: str, count: int, *, user_chars: int, reply_chars: int) -> list[Message]:
    """``count`` alternating user/assistant messages tagged ``prefix``-00000000 and up."""
    messages: list[Message] = []
    for index in range(count):
        tag = f"{prefix}-{index:08d}"
        if index % 2 == 0:
            messages.append(Message(role="user", tag=tag, text=message_text(tag, user_chars)))
        else:
            messages.append(Message(role="assistant", tag=tag, text=message_text(tag, reply_chars)))
    return messages


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteCount:
    """What a log holds compared with what was written to it."""

    expected: int
    """Distinct messages that should be there."""
    stored: int
    """Messages in the log that carry one of the expected tags (duplicates included)."""
    lost: int
    """Expected messages that are not in the log."""
    duplicated: int
    """Extra copies of expected messages."""


def count_writes(texts: Iterable[str], expected_tags: Sequence[str]) -> WriteCount:
    """Compare the tags found in ``texts`` with ``expected_tags``."""
    expected = set(expected_tags)
    found = Counter(tag for tag in map(parse_tag, texts) if tag in expected)
    return WriteCount(
        expected=len(expected),
        stored=sum(found.values()),
        lost=len(expected - set(found)),
        duplicated=sum(n - 1 for n in found.values()),
    )
