"""The local Messages API server (tests/fake_anthropic.py) as the real SDK sees it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fake_anthropic import FakeAnthropic, allow_loopback_only, answer, text, tool_call

SYSTEM = [{"type": "text", "text": "a long shared prefix " * 40, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "read", "description": "read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
INPUT = {"path": "notes_api/auth/tokens.py", "ranges": [[1, 40], [90, 120]], "why": "the token checks live here"}
JSON_FORMAT = {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    allow_loopback_only(monkeypatch)


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)


def request(**extra: Any) -> dict[str, Any]:
    return {"model": "claude-test", "max_tokens": 1000, "system": SYSTEM,
            "messages": [{"role": "user", "content": "plan it"}], **extra}


def text_then_tool_call(body: str) -> Any:
    reply = tool_call("read", INPUT)
    reply.content.insert(0, {"type": "text", "text": "I will read it. " + body})
    return reply


# -- streaming -------------------------------------------------------------------------------------


def test_a_streamed_tool_call_is_reassembled_by_the_sdk(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.reply(tool_call("read", INPUT), tool_call("read", INPUT))

    with client.messages.stream(**request(tools=TOOLS)) as stream:
        first = stream.get_final_message()
    with client.messages.stream(**request(tools=TOOLS)) as stream:
        second = stream.get_final_message()

    [block] = first.content
    assert block.type == "tool_use" and block.name == "read" and block.input == INPUT
    assert block.id.startswith("toolu_")
    assert first.stop_reason == "tool_use"
    assert first.usage.output_tokens > 1 and first.usage.input_tokens > 0
    # The system block is a cache breakpoint: written by the first request, read by the second.
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens
    assert [r["stream"] for r in fake.requests] == [True, True]


def test_stream_events_follow_the_real_sequence(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    body = json.dumps({"angle": "security", "notes": "x" * 150})
    fake.reply(text_then_tool_call(body))

    events = list(client.messages.create(**request(tools=TOOLS), stream=True))

    kinds = [e.type for e in events]
    text_deltas = [e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]
    json_deltas = [e.delta.partial_json for e in events
                   if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0].message.content == [] and events[0].message.stop_reason is None
    assert events[0].message.usage.input_tokens > 0
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    assert len(text_deltas) > 1 and "".join(text_deltas) == "I will read it. " + body
    assert len(json_deltas) > 1 and json.loads("".join(json_deltas)) == INPUT
    starts = [e for e in events if e.type == "content_block_start"]
    assert [s.content_block.type for s in starts] == ["text", "tool_use"] and starts[1].content_block.input == {}
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens > 1


def test_a_streamed_json_answer_and_a_plain_answer_agree(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.reply(answer({"angle": "security"}), answer({"angle": "security"}))

    with client.messages.stream(**request(output_config=JSON_FORMAT)) as stream:
        streamed = stream.get_final_message()
    plain = client.messages.create(**request(output_config=JSON_FORMAT))

    assert json.loads(streamed.content[0].text) == json.loads(plain.content[0].text) == {"angle": "security"}
    assert streamed.stop_reason == plain.stop_reason == "end_turn"
    assert streamed.usage.output_tokens == plain.usage.output_tokens
    assert streamed.usage.input_tokens == plain.usage.input_tokens


def test_a_cut_answer_streams_its_stop_reason(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.reply(text('{"angle": "secu', stop_reason="max_tokens"))

    with client.messages.stream(**request()) as stream:
        message = stream.get_final_message()

    assert message.stop_reason == "max_tokens" and message.content[0].text == '{"angle": "secu'


@pytest.mark.parametrize("status", [429, 529, 500])
def test_errors_before_the_stream_stay_json(fake: FakeAnthropic, client: anthropic.Anthropic, status: int) -> None:
    fake.fail(status, retry_after="3")

    with pytest.raises(anthropic.APIStatusError) as caught, client.messages.stream(**request()) as stream:
        stream.get_final_message()

    assert caught.value.status_code == status
    assert caught.value.response.headers["content-type"] == "application/json"
    assert caught.value.response.headers["retry-after"] == "3"
    assert caught.value.body["error"]["type"] in ("rate_limit_error", "overloaded_error", "api_error")
