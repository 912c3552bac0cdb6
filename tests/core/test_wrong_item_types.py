"""The message converters check every item of a list: a wrong one is a UsageError naming its
index and what was expected, never an AttributeError from deep inside the conversion."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from asyncsession import AssistantMessage, UserMessage
from asyncsession._responses_items import items_to_messages, messages_to_items
from asyncsession.exceptions import UsageError
from asyncsession.messages import messages_from_openai, messages_to_openai

OURS: Any = [UserMessage(text="hi"), AssistantMessage(text="hello")]
WIRE: Any = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]

Convert = Callable[[Any], object]


@pytest.mark.parametrize(
    ("convert", "items", "expected"),
    [
        pytest.param(
            messages_to_openai,
            ["hi"],
            r"^messages\[0\] must be a message such as UserMessage, not str 'hi' "
            r"\(wrap text in a message: UserMessage\(text=\.\.\.\)\)$",
            id="to-openai-text",
        ),
        pytest.param(
            messages_to_openai,
            [*OURS, None],
            r"^messages\[2\] must be a message such as UserMessage, not NoneType None$",
            id="to-openai-none-last",
        ),
        pytest.param(
            messages_to_openai,
            [OURS[0], WIRE[1]],
            r"^messages\[1\] must be a message .*convert it with messages_from_openai\)$",
            id="to-openai-a-wire-dict",
        ),
        pytest.param(
            messages_to_items,
            [OURS[0], 42],
            r"^messages\[1\] must be a message such as UserMessage, not int 42$",
            id="to-items-number",
        ),
        pytest.param(
            messages_to_items,
            ["hi"],
            r"^messages\[0\] must be a message such as UserMessage, not the string 'hi'",
            id="to-items-text",
        ),
        pytest.param(
            messages_from_openai,
            [WIRE[0], "hi"],
            r"^messages\[1\] must be an OpenAI message dict, not str 'hi'$",
            id="from-openai-text",
        ),
        pytest.param(
            messages_from_openai,
            [OURS[0]],
            r"^messages\[0\] must be an OpenAI message dict, .*one of our messages already\)$",
            id="from-openai-ours",
        ),
        pytest.param(
            items_to_messages,
            [WIRE[0], WIRE[1], 7],
            r"^items\[2\] must be a Responses item \(a dict or an SDK model\), not int 7$",
            id="from-items-number",
        ),
    ],
)
def test_a_wrong_item_is_named_by_its_index(convert: Convert, items: Any, expected: str) -> None:
    """The error names the argument, the index of the first bad item and what was expected."""
    with pytest.raises(UsageError, match=expected) as raised:
        convert(items)
    assert not isinstance(raised.value.__cause__, AttributeError)


def test_an_iterator_of_messages_is_checked_and_converted_once() -> None:
    """A generator is read once: its items are checked and then converted, none lost."""

    def messages() -> Iterator[Any]:
        yield from OURS

    assert messages_to_items(messages()) == messages_to_items(OURS)
    assert [item["role"] for item in messages_to_items(messages())] == ["user", "assistant"]

    def broken() -> Iterator[Any]:
        yield OURS[0]
        yield b"raw"

    with pytest.raises(UsageError, match=r"^messages\[1\] must be a message .*not bytes b'raw'$"):
        messages_to_items(broken())


def test_good_lists_convert_as_before() -> None:
    """The checks refuse nothing that converts: both directions round-trip."""
    assert messages_to_openai(OURS) == WIRE
    assert messages_from_openai(WIRE) == OURS
    back = items_to_messages(messages_to_items(OURS))
    assert [(type(m), m.text) for m in back] == [(type(m), m.text) for m in OURS]
