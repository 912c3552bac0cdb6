"""The idempotent event id generator, as the seed defines it."""

from __future__ import annotations

import hashlib

from asyncsession import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage, UserMessage
from asyncsession.advisors import SESSION_ID_CONTEXT_KEY, IdempotentSessionEventIdGenerator

CONTEXT = {SESSION_ID_CONTEXT_KEY: "s1", "run-id": "r1"}


def test_an_idempotent_id_is_the_type_and_the_sha256_of_fingerprint_and_text() -> None:
    """``<type>-sha256("<key>:<value>:content:<text>")``, at most 74 characters."""
    ids = IdempotentSessionEventIdGenerator()
    expected = hashlib.sha256(b"chat_memory_conversation_id:s1:content:yes").hexdigest()

    event_id = ids.generate(CONTEXT, UserMessage(text="yes"))

    assert event_id == f"user-{expected}"
    long_type = ids.generate(CONTEXT, AssistantMessage(text="x"))
    assert len(long_type) == 74


def test_tool_messages_are_identified_by_their_call_ids() -> None:
    """Tool calls and results hash their call ids, so the same round gets the same ids."""
    ids = IdempotentSessionEventIdGenerator()
    call = AssistantMessage(tool_calls=(ToolCall(id="c1", name="f", arguments='{"a":1}'),))
    same_ids = AssistantMessage(tool_calls=(ToolCall(id="c1", name="g", arguments="{}"),))
    result = ToolResponseMessage(responses=(ToolResponse(id="c1", data="x"),))
    expected = hashlib.sha256(b"chat_memory_conversation_id:s1:toolcall:c1").hexdigest()

    assert ids.generate(CONTEXT, call) == f"assistant-{expected}"
    assert ids.generate(CONTEXT, call) == ids.generate(CONTEXT, same_ids)
    assert ids.generate(CONTEXT, result).startswith("tool-")


def test_blank_tool_call_ids_fall_back_to_names_and_arguments() -> None:
    """Without provider ids the tool names with arguments (or results) are hashed."""
    ids = IdempotentSessionEventIdGenerator()
    a = AssistantMessage(tool_calls=(ToolCall(id="", name="f", arguments='{"a":1}'),))
    b = AssistantMessage(tool_calls=(ToolCall(id="", name="f", arguments='{"a":2}'),))
    r1 = ToolResponseMessage(responses=(ToolResponse(id=" ", name="f", data="1"),))
    r2 = ToolResponseMessage(responses=(ToolResponse(id=" ", name="f", data="2"),))

    assert ids.generate(CONTEXT, a) != ids.generate(CONTEXT, b)
    assert ids.generate(CONTEXT, r1) != ids.generate(CONTEXT, r2)


def test_identical_messages_collide_unless_a_per_request_key_is_added() -> None:
    """The same text in one session collides; a run id in the fingerprint keeps them apart."""
    per_session = IdempotentSessionEventIdGenerator()
    per_run = IdempotentSessionEventIdGenerator("run-id", SESSION_ID_CONTEXT_KEY)
    yes = UserMessage(text="yes")
    other_run = {**CONTEXT, "run-id": "r2"}

    assert per_session.generate(CONTEXT, yes) == per_session.generate(other_run, yes)
    assert per_run.generate(CONTEXT, yes) != per_run.generate(other_run, yes)
    assert per_run.context_keys == ("run-id", SESSION_ID_CONTEXT_KEY)


def test_a_missing_context_key_is_part_of_the_fingerprint() -> None:
    """A key absent from the context hashes as ``null``, distinct from any value."""
    ids = IdempotentSessionEventIdGenerator("tenant")
    expected = hashlib.sha256(b"tenant:null:content:hi").hexdigest()
    assert ids.generate({}, UserMessage(text="hi")) == f"user-{expected}"


def test_messages_that_differ_only_beyond_their_text_get_different_ids() -> None:
    """Items, parts and unknown keys are part of the id: no two different replies collide."""
    ids = IdempotentSessionEventIdGenerator()
    image_a = AssistantMessage(items=({"type": "image_generation_call", "id": "ig_a"},))
    image_b = AssistantMessage(items=({"type": "image_generation_call", "id": "ig_b"},))
    photo = UserMessage(parts=({"type": "input_image", "image_url": "https://x/1.png"},))
    other_photo = UserMessage(parts=({"type": "input_image", "image_url": "https://x/2.png"},))
    custom = AssistantMessage(tool_calls=(ToolCall(id="", name="f", type="custom"),))
    function = AssistantMessage(tool_calls=(ToolCall(id="", name="f"),))
    refusal = AssistantMessage(text="x", extra={"refusal": "no"})

    assert ids.generate(CONTEXT, image_a) != ids.generate(CONTEXT, image_b)
    assert ids.generate(CONTEXT, image_a) == ids.generate(CONTEXT, image_a.model_copy())
    assert ids.generate(CONTEXT, photo) != ids.generate(CONTEXT, other_photo)
    assert ids.generate(CONTEXT, custom) != ids.generate(CONTEXT, function)
    assert ids.generate(CONTEXT, refusal) != ids.generate(CONTEXT, AssistantMessage(text="x"))


def test_ids_of_text_only_messages_are_the_ones_stored_before() -> None:
    """A plain text message (and a blank-id tool round) hashes exactly as it always did."""
    ids = IdempotentSessionEventIdGenerator()
    fingerprint = "chat_memory_conversation_id:s1"
    cases = [
        (AssistantMessage(text="hello"), "assistant", "content:hello"),
        (UserMessage(text=""), "user", "content:"),
        (
            AssistantMessage(tool_calls=(ToolCall(id="", name="f", arguments='{"a":1}'),)),
            "assistant",
            'content::f({"a":1})',
        ),
        (
            ToolResponseMessage(responses=(ToolResponse(id=" ", name="f", data="1"),)),
            "tool",
            "content:f->1",
        ),
    ]
    for message, kind, key in cases:
        expected = hashlib.sha256(f"{fingerprint}:{key}".encode()).hexdigest()
        assert ids.generate(CONTEXT, message) == f"{kind}-{expected}"
