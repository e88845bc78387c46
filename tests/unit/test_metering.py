"""Metering: usage recorded per session in Redis, the --budget option and check, and how usage is shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import redis
from pydantic import SecretStr

from tests.fake_anthropic import FakeAnthropic, allow_loopback_only, answer
from tests.wfs_factory import make_session, task
from wfqueue.collab.inspect import read_session
from wfqueue.collab.summary import render_cost
from wfqueue.errors import BadInputError, BudgetExhaustedError, ProviderError
from wfqueue.lite.models import Assessment
from wfqueue.lite.render import render_plan, render_stopped_plan
from wfqueue.lite.steps import run_assessment
from wfqueue.metering import (
    NO_CALLS,
    USAGE_FILE,
    MeteredProvider,
    budget_message,
    budget_meta,
    build_report,
    check_budget_priced,
    parse_budget_option,
    read_usage_file,
    session_budget,
    usage_line,
    write_usage_file,
)
from wfqueue.providers.anthropic import AnthropicProvider
from wfqueue.providers.base import AssessStep
from wfqueue.providers.offline.provider import OfflineProvider
from wfqueue.settings import Settings
from wfqueue.state import SessionState, redis_client
from wfqueue.usage import Budget, PriceTable, Totals, Usage, describe_totals, summarise
from wfqueue.workflow_session.models import ContextPackage, PlanOverview
from wfqueue.workflow_session.render import render_impl_plan
from wfqueue.workflow_session.session import PLAN_FILE, PROCESS_DIR, load_session

PRICES = PriceTable.default()
MODEL = "claude-sonnet-4-6"  # $3 input, $15 output, $0.30 cache read, $3.75 cache write per million
ASSESSMENT = {
    "complexity": "Low", "scope": "one module", "depth": "a check", "risk": "low", "dependencies": "none",
    "preset": "feature", "angles": ["security"], "needs_exploration": False, "exploration_reasons": [],
}


def entry(step: str, inp: int = 0, out: int = 0, read: int = 0, write: int = 0, model: str = MODEL) -> dict[str, Any]:
    """A usage entry as AnthropicProvider records it."""
    return {"step": step, "kind": "answer", "model": model, "stop_reason": "end_turn", "input_tokens": inp,
            "output_tokens": out, "cache_read_input_tokens": read, "cache_creation_input_tokens": write}


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that would reach the real API fails instead."""
    allow_loopback_only(monkeypatch)


@pytest.fixture
def state(redis_url: str, request: pytest.FixtureRequest) -> SessionState:
    session = SessionState(redis_client(redis_url, 2.0), f"S-{request.node.name[:40]}", ttl_s=600)
    session.reset()
    return session



def anthropic(fake: FakeAnthropic) -> AnthropicProvider:
    return AnthropicProvider(model=MODEL, api_key="test-key", base_url=fake.base_url)


def assess_step(repo: Path, requirement: str = "Add per-user rate limiting") -> AssessStep:
    return AssessStep(session_id="s1", repo=str(repo), requirement=requirement)


# -- pure: reports, lines, budgets ---------------------------------------------------------------


def test_a_report_sums_per_step_and_judges_the_budget() -> None:
    calls = [entry("understand", 1000, 200, 0, 3000), entry("plan_area:api", 500, 100, 3000, 400),
             entry("plan_area:api", 100, 50, 3400, 0)]
    report = build_report("S1", calls, PRICES, Budget(tokens=10_000))
    assert list(report.steps) == ["understand", "plan_area:api"]
    assert report.steps["plan_area:api"].calls == 2
    assert report.total.usage == Usage(input_tokens=1600, output_tokens=350, cache_read_tokens=6400,
                                       cache_write_tokens=3400)
    assert report.total.cost_usd == pytest.approx((1600 * 3 + 350 * 15 + 6400 * 0.3 + 3400 * 3.75) / 1e6)
    assert report.summary.startswith("11,750 tokens (input 1,600, output 350, cache read 6,400, cache write 3,400)")
    assert report.budget_exhausted is True
    assert usage_line(report).endswith("; budget 10,000 tokens (exhausted: no further LLM call is made under it)")
    assert build_report("S1", calls, PRICES, Budget(dollars=1.0)).budget_exhausted is False
    assert usage_line(build_report("S1", calls, PRICES, Budget(dollars=1.0))).endswith(
        "; budget $1.00 ($0.0247 spent)")
    empty = build_report("S1", [], PRICES, Budget(tokens=5))
    assert empty.summary == NO_CALLS and usage_line(empty) == f"{NO_CALLS}; budget 5 tokens (0 tokens spent)"
    assert usage_line(None) == "not recorded"


def test_budget_messages_use_the_budget_unit() -> None:
    spent = Totals(calls=3, usage=Usage(input_tokens=1234), cost_usd=0.0123)
    assert budget_message(spent, Budget(tokens=1000)) == "budget exhausted: 1,234 tokens of 1,000 tokens"
    assert budget_message(spent, Budget(dollars=0.01)) == "budget exhausted: $0.0123 of $0.0100"
    assert budget_message(spent.model_copy(update={"cost_usd": 2.5}), Budget(dollars=2)) == \
        "budget exhausted: $2.50 of $2.00"


def test_the_session_meta_round_trips_a_budget() -> None:
    assert session_budget({}) is None and session_budget({"budget": None}) is None
    assert session_budget({"budget": budget_meta(Budget(tokens=1000))}) == Budget(tokens=1000)
    assert session_budget({"budget": json.loads(json.dumps(budget_meta(Budget(dollars=2.5))))}) == Budget(dollars=2.5)
    assert session_budget({"budget": {"dollars": 1, "tokens": 2}}) is None  # unreadable: no budget, logged


def test_the_budget_option() -> None:
    settings = Settings(model=MODEL)
    assert parse_budget_option(None, "anthropic", settings) is None
    assert parse_budget_option("1k", "anthropic", settings) == Budget(tokens=1000)
    assert parse_budget_option("$2.50", "anthropic", settings) == Budget(dollars=2.5)
    with pytest.raises(BadInputError) as bad:
        parse_budget_option("lots", "anthropic", settings)
    assert bad.value.exit_code == 2 and bad.value.message.startswith("--budget: ")
    assert "$2.50" in bad.value.hint and "200k" in bad.value.hint
    unpriced = Settings(model="claude-unknown-9")
    with pytest.raises(BadInputError, match="claude-unknown-9 has no price") as refused:
        parse_budget_option("$2", "anthropic", unpriced)
    assert "price_table" in refused.value.hint and "tokens" in refused.value.hint
    assert parse_budget_option("200k", "anthropic", unpriced) == Budget(tokens=200_000)  # tokens need no price
    check_budget_priced(Budget(dollars=2), "offline", unpriced)  # no LLM calls: nothing to price
    dated = Settings(model="claude-sonnet-4-5-20250929")
    assert parse_budget_option("$1", "anthropic", dated) == Budget(dollars=1)


# -- Redis ------------------------------------------------------------------------------------------


def test_usage_is_appended_in_order_with_the_session_ttl(state: SessionState) -> None:
    assert state.usage() == []
    state.record_usage([])
    assert not state.client.exists(state.prefix + "usage")
    state.record_usage([entry("understand", 1)])
    state.record_usage([entry("plan_area:a", 2), entry("plan_area:a", 3)])
    assert [e["input_tokens"] for e in state.usage()] == [1, 2, 3]
    assert 0 < state.client.ttl(state.prefix + "usage") <= 600
    state.reset()
    assert state.usage() == []


def test_usage_json_keeps_the_calls_redis_has_forgotten(state: SessionState, tmp_path: Path) -> None:
    """Redis forgets a session after its TTL (or with its data): a resume then wrote usage.json from the new
    calls alone, and the ones paid for before vanished from the bill."""
    first, second = {**entry("understand", 10), "recorded_at": 1.0}, {**entry("plan_area:a", 20), "recorded_at": 2.0}
    state.record_usage([first, second])
    assert write_usage_file(state, PRICES, tmp_path).total.calls == 2
    state.reset()  # the session's state is gone
    third = {**entry("plan_area:b", 30), "recorded_at": 3.0}
    state.record_usage([third])
    report = write_usage_file(state, PRICES, tmp_path)
    assert [c["input_tokens"] for c in report.calls] == [10, 20, 30]
    assert report.total.calls == 3
    assert write_usage_file(state, PRICES, tmp_path).total.calls == 3  # written again: each call once


def test_every_call_of_a_step_is_recorded_also_when_the_step_fails(state: SessionState, fake: FakeAnthropic,
                                                                   sample_repo: Path) -> None:
    provider = MeteredProvider(anthropic(fake), state, PRICES)
    assert (provider.name, provider.model) == ("anthropic", MODEL)
    fake.reply(answer(ASSESSMENT))
    provider.run(assess_step(sample_repo))
    [first] = state.usage()
    assert first["step"] == "assess" and first["model"] == MODEL and first["recorded_at"] > 0
    assert first["input_tokens"] > 0 and first["output_tokens"] > 0

    fake.reply(answer({**ASSESSMENT, "complexity": "Vast"}), answer({**ASSESSMENT, "complexity": "Huge"}))
    with pytest.raises(ProviderError, match="after one repair round"):
        provider.run(assess_step(sample_repo, "another requirement"))
    assert [e["kind"] for e in state.usage()] == ["answer", "answer", "repair"]  # both failed calls count
    assert sum(e["input_tokens"] for e in state.usage()) == sum(
        e["input_tokens"] for e in provider.inner.usage)


def test_a_spent_budget_stops_the_step_before_any_request(state: SessionState, fake: FakeAnthropic,
                                                          sample_repo: Path) -> None:
    provider = MeteredProvider(anthropic(fake), state, PRICES)
    state.set_meta(budget=budget_meta(Budget(tokens=1000)))
    state.record_usage([entry("understand", 900)])
    fake.reply(answer(ASSESSMENT))
    provider.run(assess_step(sample_repo))  # 900 < 1000: the step runs (and overshoots)
    spent = sum(sum(v for k, v in e.items() if k.endswith("_tokens")) for e in state.usage())
    assert spent > 1000
    with pytest.raises(BudgetExhaustedError) as stopped:
        provider.run(assess_step(sample_repo))
    assert str(stopped.value.message) == f"budget exhausted: {spent:,} tokens of 1,000 tokens"
    assert isinstance(stopped.value, ProviderError) and stopped.value.exit_code == 1
    assert len(fake.requests) == 1 and len(state.usage()) == 2  # nothing sent, nothing recorded

    state.set_meta(budget=budget_meta(Budget(dollars=0.001)))
    with pytest.raises(BudgetExhaustedError) as stopped:
        provider.run(assess_step(sample_repo))
    assert re.fullmatch(r"budget exhausted: \$0\.0\d{3} of \$0\.0010", stopped.value.message)
    state.set_meta(budget=budget_meta(Budget(dollars=100)))
    fake.reply(answer(ASSESSMENT))
    provider.run(assess_step(sample_repo, "another requirement"))
    assert len(fake.requests) == 2


@pytest.mark.parametrize("reported", ["none", "null", "negative"])
def test_a_call_whose_usage_the_api_did_not_report_is_estimated_and_counts_against_the_budget(
        reported: str, state: SessionState, fake: FakeAnthropic, sample_repo: Path) -> None:
    """An answer without usage counts (a proxy that drops the block, nulls) was recorded as 0 tokens: every call
    free, `--budget 1k` never stopped anything (27 paid calls, "0 tokens spent"). A negative count failed the
    step on a pydantic error. Estimated from the text's size now, and said to be."""
    fake.usage_reported = reported
    provider = MeteredProvider(anthropic(fake), state, PRICES)
    state.set_meta(budget=budget_meta(Budget(tokens=100)))
    fake.reply(answer(ASSESSMENT))
    provider.run(assess_step(sample_repo))
    [call] = state.usage()
    assert call["estimated"] is True and call["input_tokens"] > 100 and call["output_tokens"] > 0
    with pytest.raises(BudgetExhaustedError):
        provider.run(assess_step(sample_repo, "another requirement"))
    assert len(fake.requests) == 1
    assert "the tokens of 1 call(s) are estimated from their size" in describe_totals(
        summarise(state.usage(), PRICES).total)


def test_offline_providers_are_neither_recorded_nor_stopped(state: SessionState, sample_repo: Path) -> None:
    state.set_meta(budget=budget_meta(Budget(tokens=1)))
    state.record_usage([entry("understand", 5)])  # the budget is spent
    provider = MeteredProvider(OfflineProvider(), state, PRICES)
    assert isinstance(provider.run(assess_step(sample_repo)), Assessment)
    assert len(state.usage()) == 1


def test_a_redelivered_step_that_reuses_its_answer_records_nothing(state: SessionState, fake: FakeAnthropic,
                                                                   sample_repo: Path) -> None:
    fake.reply(answer(ASSESSMENT))
    first = run_assessment(state, MeteredProvider(anthropic(fake), state, PRICES), str(sample_repo), "x", False)
    again = run_assessment(state, MeteredProvider(anthropic(fake), state, PRICES), str(sample_repo), "x", False)
    assert first == again and len(fake.requests) == 1 and len(state.usage()) == 1


def test_a_turn_is_never_saved_without_its_usage(state: SessionState, fake: FakeAnthropic, sample_repo: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Redis gone at the save: the step fails (its task waits for the broker and retries), and neither the
    turn nor its usage is kept, so the retry pays for that call once and records it once."""
    def broken(self: Any, *args: Any, **kwargs: Any) -> None:
        raise redis.ConnectionError("gone")

    fake.reply(answer(ASSESSMENT))
    with monkeypatch.context() as patch:
        patch.setattr(redis.client.Pipeline, "execute", broken)
        with pytest.raises(redis.ConnectionError):
            MeteredProvider(anthropic(fake), state, PRICES).run(assess_step(sample_repo))
    assert state.usage() == []

    fake.reply(answer(ASSESSMENT))
    assert MeteredProvider(anthropic(fake), state, PRICES).run(assess_step(sample_repo)).complexity == "Low"
    assert len(state.usage()) == 1 and len(fake.requests) == 2


def test_usage_json_is_written_and_read_back(state: SessionState, tmp_path: Path) -> None:
    state.set_meta(budget=budget_meta(Budget(tokens=50)))
    state.record_usage([entry("understand", 40, 20)])
    written = write_usage_file(state, PRICES, tmp_path)
    raw = (tmp_path / USAGE_FILE).read_text()
    assert read_usage_file(tmp_path) == written and written.budget_exhausted
    assert write_usage_file(state, PRICES, tmp_path) == written and (tmp_path / USAGE_FILE).read_text() == raw
    assert read_usage_file(tmp_path / "missing") is None
    (tmp_path / USAGE_FILE).write_text("{not json")
    assert read_usage_file(tmp_path) is None


def test_status_reads_usage_json_of_a_session_folder(tmp_path: Path) -> None:
    folder = tmp_path / "CPLAN-x"
    folder.mkdir()
    report = build_report("CPLAN-x", [entry("understand", 10)], PRICES, None)
    (folder / USAGE_FILE).write_text(report.model_dump_json())
    assert read_session(folder).usage == report
    live = build_report("CPLAN-x", [], PRICES, None)
    assert read_session(folder, live_usage=live).usage == live


# -- rendering ----------------------------------------------------------------------------------------


def test_the_cost_section_of_plan_md() -> None:
    report = build_report("S1", [entry("understand", 1000, 200), entry("plan_area:api", 500, 100, 3000, 400),
                                 entry("plan_area:db", 10, 10, model="claude-mystery-1")], PRICES, Budget(tokens=100))
    text = "\n".join(render_cost(report))
    assert text.startswith("## Cost\n\n- **Total**: 5,220 tokens (input 1,510, output 310, cache read 3,000, "
                           "cache write 400) in 3 calls, ~$0.01 + 1 calls of unpriced models (claude-mystery-1;")
    assert "- **Budget**: 100 tokens, 5,220 tokens spent, **exhausted**" in text
    assert "| understand | 1 | 1,000 | 200 | 0 | 0 | $0.0060 |" in text
    assert "| plan_area:api | 1 | 500 | 100 | 3,000 | 400 | $0.0054 |" in text
    assert "| plan_area:db | 1 | 10 | 10 | 0 | 0 | no price |" in text
    assert "\n".join(render_cost(build_report("S1", [], PRICES, None))) == \
        "## Cost\n\n- **Total**: no LLM calls (the provider plans without a model)\n"
    assert render_cost(None) == []


def test_lite_and_workflow_plans_carry_a_usage_line(sample_repo: Path) -> None:
    assessment = Assessment.model_validate(ASSESSMENT)
    line = "1,234 tokens (input 1,000, output 234, cache read 0, cache write 0) in 1 calls, ~$0.01"
    plan = render_plan("s1", "req", "2026-01-01", assessment, "u", [], "tasks.jsonl", {}, usage=line)
    assert f"**LLM usage** (cost estimated from the price_table setting): {line}" in plan
    assert "LLM usage" not in render_plan("s1", "req", "2026-01-01", assessment, "u", [], "tasks.jsonl", {})
    stopped = render_stopped_plan("s1", "req", "2026-01-01", assessment, "budget exhausted: 5 tokens of 1 tokens",
                                  {"security": "budget exhausted: 5 tokens of 1 tokens"}, NO_CALLS)
    assert "> ⚠️ **Planning stopped**: budget exhausted: 5 tokens of 1 tokens" in stopped
    assert "**Status**: failed" in stopped and "**Skipped angles**: security: budget exhausted" in stopped

    folder = make_session(sample_repo, "Add rate limits", [task(1, "Limit", ["notes_api/app.py"])])
    session = load_session(folder)
    plan_json = json.loads((folder / PLAN_FILE).read_text())
    plan_json["_metadata"]["usage"] = {"summary": line, "tokens": 1234, "cost_usd": 0.01, "calls": 1}
    overview = PlanOverview.model_validate(plan_json)
    context = ContextPackage.model_validate_json((folder / PROCESS_DIR / "context-package.json").read_text())
    tasks: list[Any] = []
    text = render_impl_plan(session, overview, tasks, context, [])
    assert f"Planning LLM usage (cost estimated from the price_table setting): {line}" in text
    assert "Planning LLM usage" not in render_impl_plan(session, PlanOverview.model_validate(
        json.loads((folder / PLAN_FILE).read_text())), tasks, context, [])


def test_settings_prices_are_what_workers_price_with() -> None:
    settings = Settings(broker_url=SecretStr("redis://x"), price_table={MODEL: {"input": 1, "output": 1,
                                                                                "cache_read": 1, "cache_write": 1}})
    report = build_report("S1", [entry("x", 1_000_000)], PriceTable(settings.price_table), None)
    assert report.total.cost_usd == pytest.approx(1.0)
