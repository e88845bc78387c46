"""Token usage and what it costs: pure accounting, no I/O.

Every LLM call reports four token counts (Anthropic's names in brackets):
input (``input_tokens``: uncached input after the last cache breakpoint),
output (``output_tokens``), cache read (``cache_read_input_tokens``) and cache
write (``cache_creation_input_tokens``). They are priced differently, so they
are kept apart all the way to the cost.

Prices are dollars per million tokens per model, from the ``price_table``
setting. A model is priced by its exact name or its name plus a date or
``-latest`` suffix (``claude-sonnet-4-5-20250929``); nothing looser, because a
family prefix would silently misprice a newer model of the same family
(Opus 4.5 costs a third of Opus 4.1). An unpriced model shows its tokens and
"no price", never a made-up dollar figure.

A budget is dollars or tokens. Tokens count all four kinds (every token the
API processed), the one definition that needs no price table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from wfqueue.errors import BadInputError

__all__ = [
    "DEFAULT_PRICE_TABLE",
    "Budget",
    "CallUsage",
    "ModelPrice",
    "PriceTable",
    "Totals",
    "Usage",
    "UsageSummary",
    "budget_exhausted",
    "cost",
    "describe_totals",
    "summarise",
]

PER_MILLION = 1_000_000
PRICE_FIELDS = ("input", "output", "cache_read", "cache_write")

# $ per million tokens. Cache write is the 5-minute ephemeral cache (1.25 x input), the only kind the
# provider requests; cache read is 0.1 x input. Sonnet 4.5 above 200k input tokens costs more (long
# context); the planner's requests stay far below that, so one price per model is enough here.
DEFAULT_PRICE_TABLE: dict[str, dict[str, float]] = {
    "claude-opus-4-5": {"input": 5.0, "output": 25.0, "cache_read": 0.5, "cache_write": 6.25},
    "claude-opus-4-1": {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75},
    "claude-opus-4": {"input": 15.0, "output": 75.0, "cache_read": 1.5, "cache_write": 18.75},
    # Sonnet 4.6 is listed at Sonnet 4.x prices; override price_table if your contract differs.
    "claude-sonnet-4-6": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "claude-sonnet-4": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "claude-3-7-sonnet": {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75},
    "claude-haiku-4-5": {"input": 1.0, "output": 5.0, "cache_read": 0.1, "cache_write": 1.25},
    "claude-3-5-haiku": {"input": 0.8, "output": 4.0, "cache_read": 0.08, "cache_write": 1.0},
}

# Anthropic's usage field -> ours; our own names are accepted too (stored summaries read back).
API_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
}
# A dated snapshot (-20250929), an alias (-latest) or a Vertex-style version (@20250929).
MODEL_SUFFIX = re.compile(r"^(?:-\d{8}|-latest|@\d{8})$")


class Usage(BaseModel):
    """Token counts of one call or a sum of calls."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)

    @classmethod
    def from_api(cls, source: Any) -> Usage:
        """From an SDK usage object or a mapping with Anthropic's (or our) field names; missing counts are 0, and
        so are counts an API on a bad day gave below zero (they failed the step on this model's validation)."""
        values: dict[str, int] = {}
        for api_name, ours in API_FIELDS.items():
            raw = source.get(api_name) if isinstance(source, Mapping) else getattr(source, api_name, None)
            if raw is not None and ours not in values:
                values[ours] = max(0, int(raw))
        return cls(**values)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + self.cache_write_tokens


class ModelPrice(BaseModel):
    """Dollars per million tokens of each kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float = Field(ge=0)
    cache_write: float = Field(ge=0)


class PriceTable:
    """Model name -> ModelPrice, with the suffix matching described in the module docstring."""

    def __init__(self, prices: Mapping[str, ModelPrice | Mapping[str, float]]) -> None:
        self.prices: dict[str, ModelPrice] = {
            name: price if isinstance(price, ModelPrice) else ModelPrice.model_validate(price)
            for name, price in prices.items()
        }

    @classmethod
    def default(cls) -> PriceTable:
        return cls(DEFAULT_PRICE_TABLE)

    def price_for(self, model: str) -> ModelPrice | None:
        if model in self.prices:
            return self.prices[model]
        # The longest name that is a prefix followed by a version suffix: claude-opus-4-1-20250805 is
        # claude-opus-4-1, not claude-opus-4.
        for name in sorted(self.prices, key=len, reverse=True):
            if model.startswith(name) and MODEL_SUFFIX.match(model[len(name):]):
                return self.prices[name]
        return None


def cost(usage: Usage, model: str, prices: PriceTable) -> float | None:
    """Dollars for ``usage`` on ``model``; None when the table has no price for it."""
    price = prices.price_for(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input + usage.output_tokens * price.output
            + usage.cache_read_tokens * price.cache_read + usage.cache_write_tokens * price.cache_write) / PER_MILLION


class CallUsage(BaseModel):
    """One recorded LLM call: which step made it, on which model, and what it used."""

    step: str
    model: str
    usage: Usage
    kind: str = ""
    # The API reported no token counts, or the answer broke off before its final count: estimated from the text's
    # size (wfqueue.providers.anthropic.calls.broken_counts).
    estimated: bool = False

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any]) -> CallUsage:
        """From a provider usage entry (``AnthropicProvider.usage``: step, kind, model and the API's counts)."""
        return cls(step=str(entry.get("step", "")), model=str(entry.get("model") or ""),
                   kind=str(entry.get("kind", "")), usage=Usage.from_api(entry),
                   estimated=bool(entry.get("estimated", False)))


class Totals(BaseModel):
    """Usage and cost summed over calls.

    ``cost_usd`` prices the calls whose model has a price; ``unpriced_calls``
    says how many were left out, so the figure is a lower bound when it is not 0.
    """

    calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    unpriced_models: list[str] = Field(default_factory=list)
    estimated_calls: int = 0  # calls whose tokens the API did not report (CallUsage.estimated)

    def __add__(self, other: Totals) -> Totals:
        return Totals(calls=self.calls + other.calls, usage=self.usage + other.usage,
                      cost_usd=self.cost_usd + other.cost_usd,
                      unpriced_calls=self.unpriced_calls + other.unpriced_calls,
                      unpriced_models=sorted(set(self.unpriced_models) | set(other.unpriced_models)),
                      estimated_calls=self.estimated_calls + other.estimated_calls)

    def add_call(self, call: CallUsage, prices: PriceTable) -> Totals:
        dollars = cost(call.usage, call.model, prices)
        estimated = int(call.estimated)
        if dollars is None:
            return self + Totals(calls=1, usage=call.usage, unpriced_calls=1, unpriced_models=[call.model],
                                 estimated_calls=estimated)
        return self + Totals(calls=1, usage=call.usage, cost_usd=dollars, estimated_calls=estimated)


class UsageSummary(BaseModel):
    """Per-step totals (step label -> Totals, in first-seen order) and the total over all of them."""

    steps: dict[str, Totals] = Field(default_factory=dict)
    total: Totals = Field(default_factory=Totals)


def summarise(calls: Iterable[CallUsage | Mapping[str, Any]], prices: PriceTable) -> UsageSummary:
    """Sum calls per step and overall. Calls may be CallUsage or provider usage entries (dicts)."""
    steps: dict[str, Totals] = {}
    total = Totals()
    for raw in calls:
        call = raw if isinstance(raw, CallUsage) else CallUsage.from_entry(raw)
        steps[call.step] = steps.get(call.step, Totals()).add_call(call, prices)
        total = total.add_call(call, prices)
    return UsageSummary(steps=steps, total=total)


def describe_totals(totals: Totals) -> str:
    """One line for `wfqueue status` and plan.md: tokens by kind and the estimated cost."""
    u = totals.usage
    text = (f"{u.total:,} tokens (input {u.input_tokens:,}, output {u.output_tokens:,}, "
            f"cache read {u.cache_read_tokens:,}, cache write {u.cache_write_tokens:,}) in {totals.calls} calls, "
            f"~${totals.cost_usd:.2f}")
    if totals.unpriced_calls:
        text += (f" + {totals.unpriced_calls} calls of unpriced models ({', '.join(totals.unpriced_models)}; "
                 "add them to the price_table setting)")
    if totals.estimated_calls:
        text += (f"; the tokens of {totals.estimated_calls} call(s) are estimated from their size: the API reported "
                 "no usable counts, or the answer broke off")
    return text


# -- budgets -----------------------------------------------------------------------------------

_NUMBER = r"(\d+(?:\.\d+)?|\.\d+)"
_DOLLARS = (re.compile(rf"^\$\s*{_NUMBER}$"), re.compile(rf"^{_NUMBER}\s*(?:\$|usd|dollars?)$"))
_TOKENS = re.compile(rf"^{_NUMBER}\s*([km]?)\s*(?:tokens?|tok)?$")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}
_BUDGET_HINT = "give dollars ($2.50, 2.5usd) or tokens (200k tokens, 1.5m, 150000)"


class Budget(BaseModel):
    """A spending cap: exactly one of dollars or tokens."""

    model_config = ConfigDict(frozen=True)

    dollars: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _exactly_one(self) -> Budget:
        if (self.dollars is None) == (self.tokens is None):
            raise ValueError("a budget is either dollars or tokens")
        return self

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``$2.50``, ``2.5usd``, ``2.5 USD`` -> dollars; ``200k tokens``, ``1.5m``, ``150000`` -> tokens."""
        cleaned = text.strip().lower().replace(",", "").replace("_", "")
        for pattern in _DOLLARS:
            match = pattern.match(cleaned)
            if match:
                dollars = float(match.group(1))
                if dollars <= 0:
                    raise BadInputError(f"budget {text!r} must be above zero", hint=_BUDGET_HINT)
                return cls(dollars=dollars)
        match = _TOKENS.match(cleaned)
        if match is None:
            raise BadInputError(f"budget {text!r} is neither dollars nor tokens", hint=_BUDGET_HINT)
        number, suffix = match.groups()
        tokens = float(number) * _SCALE[suffix]
        if tokens != int(tokens):
            # "2.5" alone is most likely meant as dollars; refuse rather than guess.
            raise BadInputError(f"budget {text!r}: a token count must be a whole number",
                                hint=f"for dollars write ${number}; otherwise {_BUDGET_HINT}")
        if tokens <= 0:
            raise BadInputError(f"budget {text!r} must be above zero", hint=_BUDGET_HINT)
        return cls(tokens=int(tokens))

    def describe(self) -> str:
        return f"${self.dollars:.2f}" if self.dollars is not None else f"{self.tokens:,} tokens"


def budget_exhausted(spent: Totals, budget: Budget | None) -> bool:
    """Whether ``spent`` has reached ``budget`` (no budget: never).

    A dollar budget compares the priced cost, a lower bound when some calls are
    unpriced: reaching it still means the budget is spent. Refuse a dollar
    budget up front for a model without a price, or it could never trigger.
    """
    if budget is None:
        return False
    if budget.dollars is not None:
        return spent.cost_usd >= budget.dollars
    assert budget.tokens is not None
    return spent.usage.total >= budget.tokens
