"""The local Messages API server (tests/fake_anthropic.py) as the real SDK sees it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anthropic
import pytest

from tests.fake_anthropic import (
    Always,
    At,
    ByRequest,
    Every,
    FakeAnthropic,
    Fault,
    RateLimits,
    allow_loopback_only,
    answer,
    text,
    tool_call,
)
from tests.fake_anthropic_faults import faults_for, schedules

SYSTEM = [{"type": "text", "text": "a long shared prefix " * 40, "cache_control": {"type": "ephemeral"}}]
TOOLS = [{"name": "read", "description": "read a file",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}]
INPUT = {"path": "notes_api/auth/tokens.py", "ranges": [[1, 40], [90, 120]], "why": "the token checks live here"}
JSON_FORMAT = {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    allow_loopback_only(monkeypatch)



@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=0)


@pytest.fixture
def client_for() -> Any:
    def make(server: FakeAnthropic, **options: Any) -> anthropic.Anthropic:
        return anthropic.Anthropic(api_key="test-key", base_url=server.base_url, max_retries=0, **options)
    return make


def final(client: anthropic.Anthropic, kw: dict[str, Any], streaming: bool) -> Any:
    """The complete message, asked for with the stream helper or in one answer."""
    if not streaming:
        return client.messages.create(**kw)
    with client.messages.stream(**kw) as stream:
        return stream.get_final_message()


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


# -- rate limits ------------------------------------------------------------------------------------


class Clock:
    """The server's clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0  # 2027-01-15T08:00:00Z

    def __call__(self) -> float:
        return self.now


def test_requests_over_the_limit_get_a_429_until_the_bucket_refills(client_for: Any) -> None:
    clock = Clock()
    limits = RateLimits(requests_per_min=3, input_tokens_per_min=50_000, output_tokens_per_min=8_000)
    with FakeAnthropic(limits=limits, clock=clock) as fake:
        fake.reply(*[answer({"n": n}) for n in range(4)])
        client = client_for(fake)
        raws = [client.messages.with_raw_response.create(**request(output_config=JSON_FORMAT)) for _ in range(3)]
        with pytest.raises(anthropic.RateLimitError) as caught:
            client.messages.create(**request(output_config=JSON_FORMAT))
        clock.now += 20  # one request refills in 60 / 3 s
        later = client.messages.with_raw_response.create(**request(output_config=JSON_FORMAT))

    assert [r.headers["anthropic-ratelimit-requests-remaining"] for r in raws] == ["2", "1", "0"]
    assert {r.headers["anthropic-ratelimit-requests-limit"] for r in raws} == {"3"}
    assert raws[2].headers["anthropic-ratelimit-requests-reset"] == "2027-01-15T08:01:00Z"  # full again in 60 s
    refused = caught.value.response.headers
    assert refused["retry-after"] == "20" and refused["anthropic-ratelimit-requests-remaining"] == "0"
    assert caught.value.body["error"]["type"] == "rate_limit_error"
    assert "3 requests per minute" in caught.value.body["error"]["message"]
    assert json.loads(later.parse().content[0].text) == {"n": 3}  # the refused request consumed no reply
    assert fake.rate_limited == 1 and fake.statuses() == {200: 4, 429: 1}
    assert fake.admitted == [clock.now - 20] * 3 + [clock.now]
    assert fake.admitted_per_minute() == 9.0  # 3 intervals in 20 s


def test_token_headers_follow_the_usage(client_for: Any) -> None:
    clock = Clock()
    limits = RateLimits(input_tokens_per_min=50_000, output_tokens_per_min=600)
    with FakeAnthropic(limits=limits, clock=clock) as fake:
        big = answer({"angle": "security"})
        big.output_tokens = 900  # more than the bucket holds: it goes into debt
        fake.reply(big, answer({"angle": "later"}))
        client = client_for(fake)
        first = client.messages.with_raw_response.create(**request(output_config=JSON_FORMAT))
        with pytest.raises(anthropic.RateLimitError) as caught:
            client.messages.create(**request(output_config=JSON_FORMAT))
        clock.now += 30  # 300 tokens of debt at 10 per second
        client.messages.create(**request(output_config=JSON_FORMAT))

    usage, headers = first.parse().usage, first.headers
    spent_input = usage.input_tokens + usage.cache_creation_input_tokens
    assert headers["anthropic-ratelimit-input-tokens-remaining"] == str(50_000 - spent_input)
    assert headers["anthropic-ratelimit-input-tokens-limit"] == "50000"
    assert headers["anthropic-ratelimit-output-tokens-remaining"] == "0"
    assert headers["anthropic-ratelimit-output-tokens-reset"] == "2027-01-15T08:01:30Z"  # 900 tokens at 10/s
    # "tokens" names the tighter of the two token limits
    assert headers["anthropic-ratelimit-tokens-limit"] == "600"
    assert headers["anthropic-ratelimit-tokens-reset"] == headers["anthropic-ratelimit-output-tokens-reset"]
    assert caught.value.response.headers["retry-after"] == "30"
    assert "600 output tokens per minute" in caught.value.body["error"]["message"]


def test_a_partly_spent_minute_starts_at_the_first_request(client_for: Any) -> None:
    clock = Clock()
    with FakeAnthropic(limits=RateLimits(requests_per_min=60, initial=2 / 60), clock=clock) as fake:
        fake.reply(*[text(f"answer {n}") for n in range(3)])
        client = client_for(fake)
        clock.now += 100  # a late first request finds the same two requests left
        first = client.messages.with_raw_response.create(**request())
        client.messages.create(**request())
        with pytest.raises(anthropic.RateLimitError) as caught:
            client.messages.create(**request())
        clock.now += 1
        client.messages.create(**request())

    assert first.headers["anthropic-ratelimit-requests-remaining"] == "1"
    assert first.headers["anthropic-ratelimit-requests-reset"] == "2027-01-15T08:02:39Z"  # 59 s after it
    assert caught.value.response.headers["retry-after"] == "1"
    assert fake.rate_limited == 1 and len(fake.admitted) == 3


def test_every_answer_carries_the_rate_limit_headers(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.fail(529)
    fake.reply(answer({"ok": True}))

    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**request(output_config=JSON_FORMAT))
    with client.messages.with_streaming_response.create(**request(output_config=JSON_FORMAT), stream=True) as ok:
        streamed = ok.headers

    for headers in (caught.value.response.headers, streamed):
        for name in ("requests", "input-tokens", "output-tokens", "tokens"):
            assert {f"anthropic-ratelimit-{name}-{part}" for part in ("limit", "remaining", "reset")} <= set(headers)
    assert streamed["anthropic-ratelimit-requests-limit"] == "4000"


# -- faults ------------------------------------------------------------------------------------------------


def test_http_faults_hit_their_calls_and_leave_the_replies(client_for: Any) -> None:
    with FakeAnthropic(faults=Every(2, Fault("429", retry_after=2.5), "529", "500")) as fake:
        fake.reply(*[answer({"n": n}) for n in range(3)])
        client = client_for(fake)
        got: list[Any] = []
        for _ in range(6):
            try:
                got.append(json.loads(client.messages.create(**request(output_config=JSON_FORMAT)).content[0].text))
            except anthropic.APIStatusError as exc:
                got.append((exc.status_code, exc.body["error"]["type"], exc.response.headers.get("retry-after")))

    assert got == [{"n": 0}, (429, "rate_limit_error", "3"), {"n": 1}, (529, "overloaded_error", None),
                   {"n": 2}, (500, "api_error", None)]
    assert fake.faulted() == {"429": 1, "529": 1, "500": 1}
    assert fake.rate_limited == 0  # the limits themselves refused nothing


def test_timeout_reset_and_cut_answers_reach_the_sdk_as_failures(client_for: Any) -> None:
    faults = {1: Fault("timeout", hold_s=30), 2: "reset", 3: "cut_stream", 4: "cut_stream"}
    with FakeAnthropic(faults=faults) as fake:
        fake.reply(text("a long answer that streams in many pieces " * 4))
        client = client_for(fake, timeout=0.5)
        with pytest.raises(anthropic.APITimeoutError):
            client.messages.create(**request())
        with pytest.raises(anthropic.APIConnectionError) as reset:
            client.messages.create(**request())
        seen: list[str] = []
        with pytest.raises(Exception, match="incomplete chunked read"):  # raised by the SDK's HTTP library
            for event in client.messages.create(**request(), stream=True):
                seen.append(event.type)
        with pytest.raises(anthropic.APIConnectionError):
            client.messages.create(**request())
        final = client.messages.create(**request())

    assert "reset by peer" in repr(reset.value.__cause__)
    assert seen[0] == "message_start" and "content_block_delta" in seen and "message_stop" not in seen
    assert final.content[0].text.startswith("a long answer")  # the faults left the reply for the retry
    assert [(c.fault, c.status, c.complete) for c in fake.calls] == [
        ("timeout", None, False), ("reset", None, False), ("cut_stream", 200, False), ("cut_stream", 200, False),
        (None, 200, True)]


def test_a_cut_stream_through_the_stream_helper(client_for: Any) -> None:
    with FakeAnthropic(faults=At({1: "cut_stream"})) as fake:
        fake.reply(tool_call("read", INPUT))
        client = client_for(fake)
        with pytest.raises(Exception, match="incomplete chunked read"), client.messages.stream(
                **request(tools=TOOLS)) as stream:
            stream.get_final_message()
        with client.messages.stream(**request(tools=TOOLS)) as stream:
            assert stream.get_final_message().content[0].input == INPUT


@pytest.mark.parametrize("streaming", [False, True])
def test_model_faults_replace_the_answer_once(client_for: Any, streaming: bool) -> None:
    whole = {"angle": "security", "notes": "n" * 60}
    with FakeAnthropic(faults={1: "truncated_json", 2: "text_no_json"}) as fake:
        fake.reply(answer(whole))
        client = client_for(fake)
        cut, prose, good = (final(client, request(output_config=JSON_FORMAT), streaming) for _ in range(3))

    assert cut.stop_reason == "max_tokens" and json.dumps(whole).startswith(cut.content[0].text)
    with pytest.raises(ValueError):
        json.loads(cut.content[0].text)
    assert prose.stop_reason == "end_turn" and "{" not in prose.content[0].text
    assert json.loads(good.content[0].text) == whole
    assert fake.faulted() == {"truncated_json": 1, "text_no_json": 1}


def test_a_model_that_calls_tools_every_turn(client_for: Any) -> None:
    tools = [*TOOLS, {"name": "list", "input_schema": {"type": "object", "properties": {}}}]
    with FakeAnthropic(faults=[Always("tools_every_turn"), Every(3, "529")]) as fake:
        fake.reply(answer({"done": True}), answer({"plain": True}))
        client = client_for(fake)
        busy = [final(client, request(tools=tools, output_config=JSON_FORMAT), streaming) for streaming in (0, 1)]
        with pytest.raises(anthropic.InternalServerError):
            client.messages.create(**request(tools=tools))
        forced = client.messages.create(**request(tools=tools, tool_choice={"type": "none"},
                                                  output_config=JSON_FORMAT))
        plain = client.messages.create(**request(output_config=JSON_FORMAT))

    assert all(m.stop_reason == "tool_use" and m.content[0].name == "list" for m in busy)
    assert busy[1].content[0].input == {"path": "."}
    assert json.loads(forced.content[0].text) == {"done": True}
    assert json.loads(plain.content[0].text) == {"plain": True}
    assert fake.faulted() == {"tools_every_turn": 2, "529": 1}


def test_repeated_turns_counts_conversations_sent_again_after_a_complete_answer(client_for: Any) -> None:
    with FakeAnthropic(faults={1: "529", 3: "cut_stream"}) as fake:
        fake.reply(*[text(f"answer {n}") for n in range(3)])
        client = client_for(fake)
        with pytest.raises(anthropic.APIStatusError):
            client.messages.create(**request())
        client.messages.create(**request())  # a retry after a failure: not a repeat
        next_turn = request(messages=[{"role": "user", "content": "next turn"}])
        with pytest.raises(Exception, match="incomplete"):  # raised by the SDK's HTTP library
            list(client.messages.create(**next_turn, stream=True))  # cut: the client never had this turn
        client.messages.create(**next_turn)
        assert fake.repeated_turns() == 0
        marked = request()
        marked["messages"] = [{"role": "user", "content": [{"type": "text", "text": "plan it",
                                                             "cache_control": {"type": "ephemeral"}}]}]
        client.messages.create(**marked)  # the first turn again, only the cache mark differs

    assert fake.repeated_turns() == 1


def test_fault_schedules_compose() -> None:
    plans = schedules([Every(5, "429"), {7: "reset", 10: ["truncated_json", "500"]}, Always("tools_every_turn")])

    assert [faults_for(plans, n)[0] for n in (1, 5, 7)] == [None, Fault("429"), Fault("reset")]
    http, model = faults_for(plans, 10)
    assert http == Fault("429") and model == [Fault("truncated_json"), Fault("tools_every_turn")]
    assert Every(2, "529", "500", start=3).faults(5) == [Fault("500")]
    with pytest.raises(ValueError, match="unknown fault"):
        Fault("flaky")


def test_a_fault_chosen_from_the_request_hits_only_that_conversation() -> None:
    def choose(call: int, body: Mapping[str, Any]) -> str | None:
        return "429" if body["messages"][0]["content"] == "mine" else None

    with FakeAnthropic(faults=ByRequest(choose)) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.base_url, max_retries=0)
        fake.reply(text("yours"))
        assert client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "yours"}])
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "mine"}])
    assert [c.fault for c in fake.calls] == [None, "429"]
