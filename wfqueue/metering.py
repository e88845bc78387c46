"""What a session's LLM work used and cost, and the ``--budget`` that stops it.

Workers wrap their provider in :class:`MeteredProvider`. Before a step calls the
provider it checks the session's budget (put in the session meta by the
coordinator). It also binds the provider to the session: an LLM provider saves
every completed turn in the session's journal (wfqueue.turns), and the same
write appends that call's usage to the session's usage list in Redis. A turn
that is saved is never sent again, so a step that is retried, redelivered or
resumed records only the calls it actually makes; one whose worker died
mid-call records the calls it completed. After the step, succeeded or failed,
its transcript is exported to the session folder for audit.

The budget is checked before each step and, with the Anthropic provider, before
each of its model calls: a step of many tool turns stops at its next call once
the budget is spent. Agents running at the same time all see the spend only when
a call ends, so a plan can overshoot its budget by the calls already under way.

The final step of a plan writes the totals to ``usage.json`` in the session
folder (so does a session that ends early, and an execution): embedded Redis is
gone after the command, and `wfqueue status` still shows tokens and cost from the
file. The file keeps the calls Redis has forgotten (its TTL), and a resume puts
them back into Redis before anything is spent. The pure accounting is
wfqueue.usage.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
from pydantic import BaseModel, Field, ValidationError

from wfqueue.errors import BadInputError, BudgetExhaustedError, WfqueueError
from wfqueue.fsio import atomic_write_json, atomic_write_text
from wfqueue.sessions import continue_command
from wfqueue.turns import SessionJournal, journal_key, transcript_jsonl
from wfqueue.usage import Budget, PriceTable, Totals, budget_exhausted, describe_totals, summarise

if TYPE_CHECKING:
    from wfqueue.providers.base import Provider, Step
    from wfqueue.settings import Settings
    from wfqueue.state import SessionStore

__all__ = [
    "BUDGET_HELP",
    "NO_CALLS",
    "TRANSCRIPT_DIR",
    "USAGE_FILE",
    "BudgetExhaustedError",
    "MeteredProvider",
    "UsageReport",
    "budget_message",
    "budget_meta",
    "build_report",
    "check_budget_priced",
    "check_session_budget",
    "describe_budget",
    "describe_spent",
    "parse_budget_option",
    "read_usage_file",
    "session_budget",
    "session_report",
    "usage_line",
    "write_usage_file",
]

log = logging.getLogger("wfqueue.metering")

USAGE_FILE = "usage.json"
TRANSCRIPT_DIR = "transcripts"  # in the session folder: one JSON-lines transcript per LLM step
NO_CALLS = "no LLM calls"
BUDGET_HELP = ("Stop new LLM work once the plan has spent this much: dollars ($2.50, 2.5usd) or tokens "
               "(200k, 1.5m, 150000); the plan then ends partial.")


def budget_hint(session_id: str) -> str:
    """What to do when ``session_id``'s budget is spent. Resuming pays for nothing twice: finished steps and saved
    turns are kept; planning again starts over."""
    return f"finish it with `{continue_command(session_id)} --budget LARGER`: what is done is kept and not paid again"


# -- pure: budgets and reports ---------------------------------------------------------------


def session_budget(meta: Mapping[str, Any]) -> Budget | None:
    """The budget a coordinator stored in the session meta (None: no budget, or unreadable)."""
    raw = meta.get("budget")
    if not raw:
        return None
    try:
        return Budget.model_validate(raw)
    except ValidationError:
        log.warning("ignoring an unreadable budget in the session meta: %r", raw)
        return None


def _dollars(value: float) -> str:
    # Cents hide a small spend entirely; below a dollar show enough digits to see it move.
    return f"${value:.2f}" if value >= 1 else f"${value:.4f}"


def describe_spent(spent: Totals, budget: Budget) -> str:
    """The spend in the budget's own unit."""
    return _dollars(spent.cost_usd) if budget.dollars is not None else f"{spent.usage.total:,} tokens"


def describe_budget(budget: Budget) -> str:
    """Like Budget.describe, but a budget below a dollar keeps its digits ($0.0050, not $0.01)."""
    return _dollars(budget.dollars) if budget.dollars is not None else budget.describe()


# How a step stopped by its session's budget says so, in failure records, plan.md and the outcome.
BUDGET_SPENT = "budget exhausted"


def budget_message(spent: Totals, budget: Budget) -> str:
    """``budget exhausted: 1,234 tokens of 1,000 tokens``: the failure record of a stopped step."""
    return f"{BUDGET_SPENT}: {describe_spent(spent, budget)} of {describe_budget(budget)}"


def says_budget_spent(reason: str | None) -> bool:
    """Whether a failure's ``reason`` is a spent budget (prefixed or not by its step: "plan_area:api: ...")."""
    return BUDGET_SPENT in (reason or "")


def budget_resume_hint(session_id: str, repo_option: str = "") -> str:
    """What to run when a plan's budget was spent: the same cap would stop it again."""
    return (f"the budget was spent: finish it with `wfqueue resume {session_id}{repo_option} --budget LARGER` "
            "(what is done is kept and not paid again)")


class UsageReport(BaseModel):
    """A session's usage: per step, in total, against its budget. Also the content of usage.json.

    No timestamp on purpose: a finalisation that runs twice with no new calls writes the same bytes."""

    session_id: str
    summary: str
    total: Totals = Field(default_factory=Totals)
    steps: dict[str, Totals] = Field(default_factory=dict)
    budget: Budget | None = None
    budget_exhausted: bool = False
    calls: list[dict[str, Any]] = Field(default_factory=list)


def build_report(session_id: str, calls: Iterable[Mapping[str, Any]], prices: PriceTable,
                 budget: Budget | None) -> UsageReport:
    """Sum the recorded calls per step and overall, and judge the budget. Pure."""
    entries = [dict(c) for c in calls]
    summary = summarise(entries, prices)
    text = describe_totals(summary.total) if summary.total.calls else NO_CALLS
    return UsageReport(session_id=session_id, summary=text, total=summary.total, steps=summary.steps, budget=budget,
                       budget_exhausted=budget_exhausted(summary.total, budget), calls=entries)


def usage_line(report: UsageReport | None) -> str:
    """One line for plan.md, IMPL_PLAN.md and the CLI: the totals, then the budget if there is one."""
    if report is None:
        return "not recorded"
    if report.budget is None:
        return report.summary
    # Said of a completed session too (a resume under a smaller budget): what it stops, not that it stopped.
    state = "exhausted: no further LLM call is made under it" if report.budget_exhausted else (
        f"{describe_spent(report.total, report.budget)} spent")
    return f"{report.summary}; budget {describe_budget(report.budget)} ({state})"


# -- Redis and the session folder ----------------------------------------------------------------


def session_report(state: SessionStore, prices: PriceTable) -> UsageReport:
    return build_report(state.session_id, state.usage(), prices, session_budget(state.meta()))


def merged_calls(kept: Iterable[Mapping[str, Any]], recorded: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The calls of a usage.json written before and those Redis holds now, each once, in the order they were
    made. Redis forgets a session after WFQUEUE_STATE_TTL_S (or with its data): the calls paid for before must
    stay on the bill. Pure."""
    def key(call: Mapping[str, Any]) -> tuple[Any, ...]:
        return call.get("step"), call.get("kind"), call.get("recorded_at")

    now = [dict(c) for c in recorded]  # every one of them, also two alike
    known = {key(c) for c in now}
    # Only a kept call that says when it was made can be told apart from Redis's own.
    gone = [dict(c) for c in kept if c.get("recorded_at") is not None and key(c) not in known]
    return sorted(gone + now, key=lambda c: float(c.get("recorded_at") or 0.0))


def write_usage_file(state: SessionStore, prices: PriceTable, folder: Path) -> UsageReport:
    """usage.json in ``folder``: what Redis recorded, with the calls an earlier usage.json kept; the report."""
    earlier = read_usage_file(folder)
    calls = merged_calls(earlier.calls if earlier is not None else [], state.usage())
    report = build_report(state.session_id, calls, prices, session_budget(state.meta()))
    atomic_write_json(folder / USAGE_FILE, report.model_dump(mode="json"))
    return report


def read_usage_file(folder: Path) -> UsageReport | None:
    """What the final step wrote; None for a session without one (older, or not finished)."""
    try:
        return UsageReport.model_validate_json((folder / USAGE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def check_session_budget(state: SessionStore, prices: PriceTable) -> None:
    """BudgetExhaustedError when the session's recorded usage has reached its budget (none: no limit)."""
    budget = session_budget(state.meta())
    if budget is None:
        return
    spent = summarise(state.usage(), prices).total
    if budget_exhausted(spent, budget):
        raise BudgetExhaustedError(budget_message(spent, budget), hint=budget_hint(state.session_id))


class MeteredProvider:
    """A provider bound to a session: its budget is checked before each step (and each model call where the
    provider allows), its turns and their
    usage are saved in the session's journal, its transcripts are kept in ``transcript_dir``.

    Providers without a ``usage`` list (offline, scripted) make no LLM calls: they are neither
    stopped by a budget nor recorded."""

    def __init__(self, inner: Provider, state: SessionStore, prices: PriceTable,
                 transcript_dir: Path | None = None) -> None:
        self.inner = inner
        self.state = state
        self.prices = prices
        self.transcript_dir = transcript_dir
        self.name: str = inner.name
        self.model: str | None = inner.model
        if self.calls_llm:
            self.journal = SessionJournal(state)
            # A provider with a ``usage`` list calls a model, and saves its turns in ``journal``; one that can
            # (the Anthropic provider) checks the budget before each of its calls, not only before each step.
            inner.journal = self.journal  # type: ignore[attr-defined]  # not part of the Provider protocol
            if hasattr(inner, "before_call"):
                inner.before_call = self.check_budget

    @property
    def calls_llm(self) -> bool:
        return isinstance(getattr(self.inner, "usage", None), list)

    def run(self, step: Step) -> BaseModel:
        if not self.calls_llm:
            return self.inner.run(step)
        self.check_budget()
        try:
            return self.inner.run(step)
        finally:
            # Also when the step failed (a bad answer after its repair round, a soft time limit): the
            # transcript up to its last completed turn is what explains it.
            self._keep_transcript(step)

    def check_budget(self) -> None:
        check_session_budget(self.state, self.prices)

    def _keep_transcript(self, step: Step) -> None:
        if self.transcript_dir is None:
            return
        label = step.label
        try:
            transcript = self.journal.load(journal_key(label, step.model_dump_json()))
            if transcript is not None:
                name = re.sub(r"[^A-Za-z0-9_.-]+", "-", label) + ".jsonl"
                atomic_write_text(self.transcript_dir / name, transcript_jsonl(transcript))
        except (redis.RedisError, OSError, WfqueueError) as exc:
            # Never hide the step's own outcome behind an audit copy that could not be written.
            log.warning("could not keep the transcript of %s in %s: %s", label, self.transcript_dir, exc)


# -- the --budget option ---------------------------------------------------------------------------


def check_budget_priced(budget: Budget | None, provider: str, settings: Settings) -> None:
    """Refuse a dollar budget that could never trigger: the model has no price."""
    if budget is None or budget.dollars is None or provider != "anthropic":
        return
    if PriceTable(settings.price_table).price_for(settings.model) is None:
        raise BadInputError(
            f"--budget {describe_budget(budget)} is in dollars, but model {settings.model} has no price",
            hint=f"add {settings.model} to the price_table setting, or give the budget in tokens (e.g. 200k)",
        )


def parse_budget_option(text: str | None, provider: str, settings: Settings) -> Budget | None:
    """``--budget`` of collab-plan, lite-plan and plan: None when not given; BadInputError (exit 2) otherwise."""
    if text is None:
        return None
    try:
        budget = Budget.parse(text)
    except BadInputError as exc:
        raise BadInputError(f"--budget: {exc.message}", hint=exc.hint) from None
    check_budget_priced(budget, provider, settings)
    return budget


def budget_meta(budget: Budget | None) -> dict[str, Any] | None:
    """The budget as the session meta stores it (JSON)."""
    return budget.model_dump() if budget is not None else None
