"""Usage accounting: token counts, prices, per-step and total summaries, budgets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from wfqueue.errors import BadInputError
from wfqueue.settings import Settings, load_settings
from wfqueue.usage import (
    DEFAULT_PRICE_TABLE,
    Budget,
    CallUsage,
    ModelPrice,
    PriceTable,
    Totals,
    Usage,
    budget_exhausted,
    cost,
    describe_totals,
    summarise,
)


def test_usage_reads_the_sdk_and_provider_entries_and_adds_up() -> None:
    sdk = SimpleNamespace(input_tokens=10, output_tokens=20, cache_read_input_tokens=300,
                          cache_creation_input_tokens=None)
    assert Usage.from_api(sdk) == Usage(input_tokens=10, output_tokens=20, cache_read_tokens=300)
    entry = {"step": "assess", "input_tokens": 1, "output_tokens": 2, "cache_read_input_tokens": 3,
             "cache_creation_input_tokens": 4}
    usage = Usage.from_api(entry)
    assert (usage.cache_read_tokens, usage.cache_write_tokens, usage.total) == (3, 4, 10)
    assert Usage.from_api(usage.model_dump()) == usage  # our own names read back
    assert (usage + usage).total == 20 and Usage().total == 0


def test_prices_match_exact_names_and_version_suffixes_only() -> None:
    prices = PriceTable.default()
    assert prices.price_for("claude-sonnet-4-5") == ModelPrice(input=3, output=15, cache_read=0.3, cache_write=3.75)
    assert prices.price_for("claude-sonnet-4-5-20250929") == prices.price_for("claude-sonnet-4-5")
    assert prices.price_for("claude-opus-4-1-20250805") is prices.prices["claude-opus-4-1"]  # not claude-opus-4
    assert prices.price_for("claude-opus-4-20250514") is prices.prices["claude-opus-4"]
    assert prices.price_for("claude-3-5-haiku-latest") is prices.prices["claude-3-5-haiku"]
    # A newer model of a priced family is not priced as its elder: no price, no made-up figure.
    assert prices.price_for("claude-opus-4-7") is None and prices.price_for("claude-test") is None


def test_cost_weighs_each_kind_of_token() -> None:
    prices = PriceTable.default()
    million = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_tokens=1_000_000,
                    cache_write_tokens=1_000_000)
    assert cost(million, "claude-sonnet-4-5", prices) == pytest.approx(3 + 15 + 0.3 + 3.75)
    assert cost(Usage(input_tokens=2_000, output_tokens=500), "claude-haiku-4-5", prices) == pytest.approx(0.0045)
    assert cost(million, "claude-unknown", prices) is None


def test_summarise_per_step_and_total_with_unpriced_calls() -> None:
    calls = [
        {"step": "explore:security", "kind": "turn-1", "model": "claude-sonnet-4-5-20250929", "input_tokens": 1000,
         "output_tokens": 100, "cache_creation_input_tokens": 20_000, "cache_read_input_tokens": 0},
        {"step": "explore:security", "kind": "turn-2", "model": "claude-sonnet-4-5-20250929", "input_tokens": 500,
         "output_tokens": 300, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 21_000},
        CallUsage(step="assess", model="claude-test", usage=Usage(input_tokens=7, output_tokens=3)),
    ]
    summary = summarise(calls, PriceTable.default())
    assert list(summary.steps) == ["explore:security", "assess"]
    explore = summary.steps["explore:security"]
    assert explore.calls == 2 and explore.usage == Usage(input_tokens=1500, output_tokens=400,
                                                         cache_read_tokens=21_000, cache_write_tokens=20_000)
    expected = (1500 * 3 + 400 * 15 + 21_000 * 0.3 + 20_000 * 3.75) / 1e6
    assert explore.cost_usd == pytest.approx(expected) and explore.unpriced_calls == 0
    total = summary.total
    assert total.calls == 3 and total.usage.total == explore.usage.total + 10
    assert total.cost_usd == pytest.approx(expected)
    assert (total.unpriced_calls, total.unpriced_models) == (1, ["claude-test"])
    assert total == summary.steps["explore:security"] + summary.steps["assess"]
    line = describe_totals(total)
    assert line.startswith("42,910 tokens (input 1,507, output 403, cache read 21,000, cache write 20,000) in 3 calls")
    assert f"~${expected:.2f}" in line and "claude-test" in line
    assert summarise([], PriceTable.default()).total == Totals()


@pytest.mark.parametrize(("text", "expected"), [
    ("$2.50", Budget(dollars=2.5)), ("2.5usd", Budget(dollars=2.5)), ("2.5 USD", Budget(dollars=2.5)),
    ("$ 10", Budget(dollars=10)), ("3 dollars", Budget(dollars=3)), ("0.75$", Budget(dollars=0.75)),
    ("200k tokens", Budget(tokens=200_000)), ("150000", Budget(tokens=150_000)), ("1.5m", Budget(tokens=1_500_000)),
    ("150,000 tokens", Budget(tokens=150_000)), ("2K", Budget(tokens=2_000)), ("500 tok", Budget(tokens=500)),
])
def test_budget_parsing(text: str, expected: Budget) -> None:
    assert Budget.parse(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "2.5", "$0", "0", "-5", "$-1", "1.5 tokens", "5 euros", "$2.5k"])
def test_budget_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(BadInputError):
        Budget.parse(text)


def test_budget_exhausted_once_spent() -> None:
    spent = Totals(calls=2, usage=Usage(input_tokens=150_000, output_tokens=50_000), cost_usd=1.2)
    assert budget_exhausted(spent, Budget(tokens=200_000)) and not budget_exhausted(spent, Budget(tokens=200_001))
    assert budget_exhausted(spent, Budget(dollars=1.2)) and not budget_exhausted(spent, Budget(dollars=1.5))
    assert not budget_exhausted(spent, None)
    assert Budget(dollars=2.5).describe() == "$2.50" and Budget(tokens=200_000).describe() == "200,000 tokens"
    with pytest.raises(ValueError):
        Budget()


def test_price_table_setting_defaults_validates_and_reads_json(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().price_table == DEFAULT_PRICE_TABLE
    monkeypatch.setenv("WFQUEUE_PRICE_TABLE", '{"my-model": {"input": 1, "output": 2, "cache_read": 0.1, '
                                              '"cache_write": 1.25}}')
    table = PriceTable(load_settings().price_table)
    assert cost(Usage(output_tokens=1_000_000), "my-model", table) == 2
    monkeypatch.setenv("WFQUEUE_PRICE_TABLE", '{"my-model": {"input": 1}}')
    with pytest.raises(BadInputError, match="price_table"):
        load_settings()
